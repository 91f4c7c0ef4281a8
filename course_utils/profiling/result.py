"""What :func:`course_utils.profiling.profile` returns: the :class:`Profile` of one function."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

from course_utils import env, timing
from course_utils.profiling.names import format_count, kernel_labels


@dataclass
class Profile:
    """What :func:`profile` found. Times are per call, in milliseconds."""

    name: str
    device: str  # "cuda" or "cpu": which kind of kernels ``kernels`` lists
    reps: int
    table: str  # key_averages table, by device time on a GPU, by CPU time otherwise
    kernels: dict[str, float]  # kernel (GPU) or data-touching ATen op (CPU) -> launches per call
    kernel_ms: dict[str, float]  # the same keys -> time per call (device time; self CPU time)
    wall_ms: float  # the record_function region of one call, host side, profiler overhead included
    stacks_path: Path  # folded stacks, weighted by device time on a GPU, self CPU time otherwise
    flamegraph_path: Path
    trace_path: Path
    cpu_stacks_path: Path | None = None  # on a GPU: the same stacks weighted by self CPU time
    metric: str = field(default="self CPU time (µs)")

    @property
    def launches(self) -> float:
        """Kernel launches (GPU) or counted ATen ops (CPU) per call."""
        return sum(self.kernels.values())

    @property
    def kernel_time_ms(self) -> float:
        """Sum of the kernels' time per call: device time on a GPU, self CPU time on the CPU."""
        return sum(self.kernel_ms.values())

    def top_kernels(self, n: int = 10) -> list[tuple[str, float, float]]:
        """``(name, launches per call, ms per call)``, the most expensive first."""
        rows = sorted(self.kernels, key=lambda k: -self.kernel_ms.get(k, 0.0))
        return [(k, self.kernels[k], self.kernel_ms.get(k, 0.0)) for k in rows[:n]]

    def _what(self) -> str:
        one = self.launches == 1
        if self.device == "cuda":
            return "CUDA kernel" if one else "CUDA kernels"
        return "ATen op with a CPU kernel" if one else "ATen ops with a CPU kernel"

    def summary(self) -> str:
        time_what = "device time" if self.device == "cuda" else "self CPU time"
        lines = [f"profile {self.name!r} on {self.device}: {format_count(self.launches)} "
                 f"{self._what()} per call, {time_what} {timing.format_ms(self.kernel_time_ms)}"
                 f" of {timing.format_ms(self.wall_ms)} wall (over {self.reps} profiled calls)"]
        labels = kernel_labels(self.kernels)
        for kernel, count, ms in self.top_kernels():
            lines.append(f"  {format_count(count):>5} × {timing.format_ms(ms):>9}  "
                         f"{labels[kernel]}")
        if len(self.kernels) > 10:
            lines.append(f"  ... and {len(self.kernels) - 10} more")
        lines.append(f"  stacks: {_rel(self.stacks_path)}  flame graph: "
                     f"{_rel(self.flamegraph_path)}  trace: {_rel(self.trace_path)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        time_what = "device time" if self.device == "cuda" else "self CPU time"
        labels = kernel_labels(self.kernels)
        rows = "".join(
            f"<tr><td style='text-align:right'>{format_count(c)}</td>"
            f"<td style='text-align:right'>{html.escape(timing.format_ms(ms))}</td>"
            f"<td style='text-align:left' title='{html.escape(k, quote=True)}'>"
            f"<code>{html.escape(labels[k])}</code></td></tr>"
            for k, c, ms in self.top_kernels(15))
        return (f"<b>profile {html.escape(self.name)}</b> on {self.device}: "
                f"{format_count(self.launches)} {self._what()} per call, {time_what} "
                f"{html.escape(timing.format_ms(self.kernel_time_ms))} of "
                f"{html.escape(timing.format_ms(self.wall_ms))} wall "
                f"(over {self.reps} profiled calls)"
                f"<table><tr><th>per call</th><th>{time_what}</th><th>name</th></tr>{rows}"
                f"</table><small>stacks <code>{_rel(self.stacks_path)}</code> · flame graph "
                f"<code>{_rel(self.flamegraph_path)}</code> · trace <code>"
                f"{_rel(self.trace_path)}</code> (open in ui.perfetto.dev)</small>")

    def show(self) -> None:
        """Summary, table and flame graph: inline in Jupyter, as text elsewhere."""
        if _in_ipython():
            from IPython.display import SVG, display

            display(self)
            print(self.table)
            display(SVG(filename=str(self.flamegraph_path)))
        else:
            print(self.summary())
            print(self.table)


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(env.ROOT))
    except ValueError:
        return str(path)


def _in_ipython() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None

