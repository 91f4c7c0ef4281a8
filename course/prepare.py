"""``make prepare`` / ``python -m course prepare``: lecture mode.

Before class, build and cache everything the notebooks would otherwise build while students
wait, so that on a prepared GPU box each notebook runs in under a minute (except the cells that
time a cold build on purpose, which build in a private directory):

1. the CUDA extensions (the GeLU extension via ``setup.py`` and ``load_inline``, the add op via
   ``load_inline``): the notebooks then only import them;
2. every NVRTC kernel of ``kernels/`` with its example values, for this GPU (or sm_90), into
   ``var/nvrtc_cache/``;
3. on a GPU, one call of every registered kernel on a small input of each dtype it supports,
   which fills Triton's and ``torch.compile``'s on-disk caches.

Each step prints its time; a step that cannot run here says why and the rest go on.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from course_utils import env


def _extensions() -> list[tuple[str, Callable[[], object]]]:
    from kernels.add import load_inline as add_load_inline
    from kernels.gelu import extension

    return [("GeLU extension, setup.py", extension.build_setup),
            ("GeLU extension, load_inline", extension.build_inline),
            ("add op, load_inline", add_load_inline.build)]


def _nvrtc(sources: list | None = None) -> str:
    from course_utils import nvrtc

    arch = env.device_info().arch  # None without a GPU: nvrtc's default, sm_90
    built = 0
    for path in sources or nvrtc.kernel_sources():
        target = arch
        if (only := nvrtc.required_arch(path)) is not None:  # e.g. sm_90a for wgmma
            if only.rstrip("af") != (arch or nvrtc.DEFAULT_ARCH):
                continue  # code for another GPU: nothing to cache for this one
            target = only
        for name, defines in nvrtc.examples(path):
            for output in ("cubin", "ptx"):
                nvrtc.compile(path, name, defines=defines, arch=target, output=output,
                              verbose=False)
                built += 1
    return f"{built} compiles cached for {arch or nvrtc.DEFAULT_ARCH}"


def _tensor_core_kernels() -> str:
    """Lessons 05 and 07 compile one program per variant and configuration: every mma.sync
    variant at its default tiles, every Hopper step, ceiling and timeline build (sm_90a)."""
    from kernels.matmul import mma
    from kernels.matmul.hopper import wgmma

    arch = env.device_info().arch  # None without a GPU: nvrtc's default, sm_90
    done = mma.compile_many([(v, mma.DEFAULT_CONFIG) for v in mma.VARIANTS], arch)
    hopper = wgmma.compile_all() if arch in (None, "sm_90") else []
    return f"{len(done)} mma.sync and {len(hopper)} Hopper programs cached"


def _warm_kernels() -> str:
    import kernels

    called, failed = 0, []
    for op_name, op in kernels.OPS.items():
        case = op.cases[0]
        for dtype in op.dtypes:
            args = case.make(dtype, "cuda")
            for kernel in kernels.get_kernels(op_name, *args):
                try:  # one kernel's failure must not leave the others cold
                    kernel(*args)
                    called += 1
                except Exception as err:
                    failed.append(f"{kernel.name} {dtype}: {type(err).__name__}: {err}")
    if failed:
        raise RuntimeError(f"{len(failed)} of {called + len(failed)} calls failed: "
                           + "; ".join(failed[:3]))
    return f"{called} kernel calls (Triton and torch.compile caches filled)"


def main(argv: list[str] | None = None) -> int:
    steps: list[tuple[str, Callable[[], object], list[str]]] = [
        (label, fn, ["nvcc", "cxx"]) for label, fn in _extensions()]
    steps.append(("NVRTC kernels", _nvrtc, ["nvrtc", "libcu++"]))
    steps.append(("tensor-core matmuls (05, 07)", _tensor_core_kernels, ["nvrtc", "libcu++"]))
    steps.append(("every registered kernel, once", _warm_kernels, ["cuda"]))
    failed = 0
    start = time.perf_counter()
    for label, fn, needs in steps:
        if reasons := env.unmet(*needs):
            print(f"{label:32s} skipped: {'; '.join(reasons)}", flush=True)
            continue
        print(f"{label:32s} ...", end="", flush=True)
        t0 = time.perf_counter()
        try:
            result = fn()
        except Exception as err:  # report and go on: the other steps still help
            failed += 1
            print(f" FAILED after {time.perf_counter() - t0:.1f} s: {type(err).__name__}: {err}",
                  flush=True)
            continue
        what = result if isinstance(result, str) else "ready"
        print(f" {time.perf_counter() - t0:6.1f} s  {what}", flush=True)
    print(f"prepared in {time.perf_counter() - start:.0f} s [{env.environment_line()}]")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
