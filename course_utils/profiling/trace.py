"""Reading the profiler's Chrome trace: kernels per call, their times, and folded stacks.

On a GPU the kernels are the trace's ``kernel`` events, each tied to the host stack that launched
it; on the CPU the counted kernels are the ATen ops that touched data (see
:mod:`course_utils.profiling` for the rule), found by rebuilding each thread's call tree.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from course_utils.profiling.names import short_name

# ops that allocate (or re-allocate) memory without touching its contents
_ALLOCATION_OPS = frozenset({
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
    "aten::new_empty_strided", "aten::resize_", "aten::set_", "aten::empty_permuted",
})
# trace categories of host-side events that nest on the calling thread
_HOST_CATEGORIES = frozenset({"python_function", "cpu_op", "user_annotation", "cuda_runtime",
                              "cuda_driver"})
INDUCTOR_CPU_KERNEL = re.compile(r"(^|_)cpp_fused_")


@dataclass
class _Node:
    event: dict
    children: list[_Node] = field(default_factory=list)
    parent: _Node | None = None
    counted: bool = False  # on the CPU: this op is counted as a kernel

    @property
    def start(self) -> float:
        return float(self.event["ts"])

    @property
    def end(self) -> float:
        return float(self.event["ts"]) + float(self.event.get("dur", 0.0))

    @property
    def self_us(self) -> float:
        return max(float(self.event.get("dur", 0.0))
                   - sum(float(c.event.get("dur", 0.0)) for c in self.children), 0.0)

    def stack(self) -> list[str]:
        node, frames = self, []
        while node is not None:
            frames.append(_frame_name(node.event))
            node = node.parent
        return frames[::-1]


@dataclass
class Parsed:
    counts: Counter
    times_us: defaultdict
    wall_us: float
    cpu_stacks: Counter  # folded stack -> self CPU µs
    device_stacks: Counter  # folded stack ending in a kernel -> device µs


def _frame_name(event: dict) -> str:
    """A readable, ';'-free frame name: ``forward (module.py:116)``, ``aten::addmm``, ..."""
    name = str(event.get("name", "?"))
    cat = event.get("cat")
    if cat == "python_function":
        if match := re.match(r"^(.*)\((\d+)\): (.*)$", name):
            path, line, func = match.groups()
            name = f"{func} ({Path(path).name}:{line})"
        else:  # "<built-in method add of Tensor object at 0x...>" -> "<built-in method add>"
            name = re.sub(r" of .* object at 0x[0-9a-f]+>$", ">", name)
    elif cat == "kernel":
        name = "[GPU] " + short_name(name)
    elif cat in ("gpu_memcpy", "gpu_memset"):
        name = "[GPU] " + name
    return name.replace(";", ",").replace("\n", " ")


def _forest(events: list[dict], thread: tuple, lo: float, hi: float) -> list[_Node]:
    """Nest the host events of ``thread`` (pid, tid) that lie inside the window [lo, hi]."""
    eps = 1e-3  # timestamps are µs with ns decimals
    inside = [e for e in events
              if e.get("ph") == "X" and e.get("cat") in _HOST_CATEGORIES
              and (e.get("pid"), e.get("tid")) == thread
              and float(e["ts"]) >= lo - eps
              and float(e["ts"]) + float(e.get("dur", 0.0)) <= hi + eps]
    inside.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0.0))))
    roots: list[_Node] = []
    open_nodes: list[_Node] = []
    for event in inside:
        node = _Node(event)
        while open_nodes and node.start >= open_nodes[-1].end - eps:
            open_nodes.pop()
        if open_nodes and node.end > open_nodes[-1].end + eps:
            continue  # overlaps its would-be parent: not properly nested (profiler's own frames)
        if open_nodes:
            node.parent = open_nodes[-1]
            open_nodes[-1].children.append(node)
        else:
            roots.append(node)
        open_nodes.append(node)
    return roots


def _region_forests(events: list[dict], region: dict) -> list[_Node]:
    """The host events of one profiled call: those on the calling thread, nested under the
    region itself, and those that other threads ran meanwhile (the autograd engine runs a GPU
    backward pass on its own thread), under ``<region>;thread <tid>``."""
    lo, hi = float(region["ts"]), float(region["ts"]) + float(region.get("dur", 0.0))
    home = (region.get("pid"), region.get("tid"))
    forests = _forest(events, home, lo, hi)
    others = sorted({(e.get("pid"), e.get("tid")) for e in events
                     if e.get("ph") == "X" and e.get("cat") in _HOST_CATEGORIES
                     and lo <= float(e["ts"]) <= hi} - {home}, key=str)
    for thread in others:
        # only trees that do PyTorch work (other Python threads, e.g. Jupyter's, are noise)
        roots = [r for r in _forest(events, thread, lo, hi)
                 if any(n.event.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver")
                        for n in _walk([r]))]
        if not roots:
            continue
        top = _Node({"name": region.get("name"), "cat": "user_annotation", "ts": lo, "dur": 0})
        holder = _Node({"name": f"thread {thread[1]}", "cat": "user_annotation", "ts": lo,
                        "dur": 0}, parent=top)
        top.children.append(holder)
        for root in roots:
            root.parent = holder
            holder.children.append(root)
        forests.append(top)
    return forests


def _walk(nodes: list[_Node]):
    for node in nodes:
        yield node
        yield from _walk(node.children)


def _is_profiler_frame(node: _Node) -> bool:
    name = str(node.event.get("name", ""))
    return ("profiler.py(" in name or name.startswith("profiler::")
            or "_record_function_" in name)


def parse(events: list[dict], label: str, kind: str) -> Parsed:
    regions = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
               and e.get("name") == label]
    if not regions:
        raise RuntimeError(f"profile: the trace has no '{label}' region; the profiler recorded "
                           f"nothing (is another profiler running?)")
    parsed = Parsed(Counter(), defaultdict(float), 0.0, Counter(), Counter())
    launchers: dict[object, _Node] = {}  # correlation id -> the runtime call that launched it
    for region in regions:
        parsed.wall_us += float(region.get("dur", 0.0))
        for node in _walk(_region_forests(events, region)):
            if _is_profiler_frame(node) or any(_is_profiler_frame(a) for a in _ancestors(node)):
                continue
            stack = ";".join(node.stack())
            if node.event.get("dur") and (us := node.self_us) > 0:
                parsed.cpu_stacks[stack] += us
            if node.event.get("cat") in ("cuda_runtime", "cuda_driver"):
                corr = node.event.get("args", {}).get("correlation")
                if corr is not None:
                    launchers[corr] = node
            elif (kind == "cpu" and _counts_on_cpu(node)
                  and not any(a.counted for a in _ancestors(node))):
                node.counted = True
                key = str(node.event["name"])
                parsed.counts[key] += 1
                parsed.times_us[key] += node.self_us
    if kind == "cuda":
        for event in events:
            if event.get("ph") != "X" or event.get("cat") not in ("kernel", "gpu_memcpy",
                                                                  "gpu_memset"):
                continue
            launcher = launchers.get(event.get("args", {}).get("correlation"))
            if launcher is None:
                continue  # launched outside our region (another thread, before warm-up ended)
            dur = float(event.get("dur", 0.0))
            parsed.device_stacks[";".join([*launcher.stack(), _frame_name(event)])] += dur
            if event.get("cat") == "kernel":
                key = str(event["name"])
                parsed.counts[key] += 1
                parsed.times_us[key] += dur
    return parsed


def _ancestors(node: _Node):
    node = node.parent
    while node is not None:
        yield node
        node = node.parent


def _counts_on_cpu(node: _Node) -> bool:
    """Does this host event stand for work on data (see the module docstring)?"""
    if node.event.get("cat") != "cpu_op":
        return False
    name = str(node.event.get("name", ""))
    if INDUCTOR_CPU_KERNEL.search(name):
        return True
    if not name.startswith("aten::") or name in _ALLOCATION_OPS:
        return False
    is_view, has_cpu_kernel = _op_traits(name)
    if is_view:
        return False
    is_leaf = not any(c.event.get("cat") == "cpu_op" for c in node.children)
    return has_cpu_kernel or is_leaf


_TRAITS: dict[str, tuple[bool, bool]] = {}


def _op_traits(name: str) -> tuple[bool, bool]:
    """(returns an alias of an input or no tensor at all, has a kernel for the CPU dispatch key).

    ``aten::t(Tensor(a) self) -> Tensor(a)``: the ``(a)`` says the result aliases ``self``, so
    the op only re-describes memory; ``aten::result_type`` returns a dtype, not data.
    """
    if name not in _TRAITS:
        try:
            schemas = torch._C._jit_get_schemas_for_operator(name)
        except RuntimeError:
            schemas = []
        returns_tensor = any("Tensor" in str(r.type) for s in schemas for r in s.returns)
        aliases = any(s.returns and all(r.alias_info is not None and not r.alias_info.is_write
                                        for r in s.returns) for s in schemas)
        is_view = aliases or not returns_tensor
        has_cpu = False
        for s in schemas:
            full = f"{name}.{s.overload_name}" if s.overload_name else name
            try:
                has_cpu = has_cpu or torch._C._dispatch_has_kernel_for_dispatch_key(full, "CPU")
            except RuntimeError:
                pass
        _TRAITS[name] = (is_view, has_cpu)
    return _TRAITS[name]

