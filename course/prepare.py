"""``make prepare`` / ``python -m course prepare``: lecture mode.

Before class, build and cache everything the notebooks would otherwise build while students
wait, so that on a prepared GPU box each notebook runs in under a minute (except the cells that
time a cold build on purpose, which build in a private directory):

1. the CUDA extensions (the GeLU extension via ``setup.py`` and ``load_inline``, the add op via
   ``load_inline``): the notebooks then only import them;
2. every NVRTC kernel of ``kernels/`` with its example values, for this GPU (or sm_90), into
   ``var/nvrtc_cache/``, and the tensor-core programs lessons 07, 08, 16 and 17 compile (lesson
   08's census for several architectures among them);
3. on a GPU, one call of every registered kernel on a small input of each dtype it supports,
   and of every GeLU provider at the size lessons 02 and 05 time them, which fills Triton's and
   ``torch.compile``'s on-disk caches.

The builds of 1 and 2 are independent and mostly wait on compilers (nvcc, ninja, NVRTC, all
outside the GIL), so they run side by side in threads: a cold prepare then takes about as long
as its slowest build rather than their sum, given the cores (on the 2-core CPU machine: 121 s
for 205 s of compiler time; a fresh H100 box took 215 s with the builds one after another, and
136 s side by side with lesson 07's programs added). Step 3 calls the kernels, so it runs
last. Each step prints its time as it finishes; a step that cannot run here says why and the
rest go on.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from course_utils import env, requirements


def _extensions() -> list[tuple[str, Callable[[], object]]]:
    from kernels.add import load_inline as add_load_inline
    from kernels.gelu import extension

    return [("GeLU extension, setup.py", extension.build_setup),
            ("GeLU extension, load_inline", extension.build_inline),
            ("add op, load_inline", add_load_inline.build)]


def _nvrtc(sources: list | None = None) -> str:
    from course_utils import nvrtc

    arch = env.device_info().arch  # None without a GPU: nvrtc's default, sm_90
    jobs = []
    for path in sources or nvrtc.kernel_sources():
        target = arch
        if (only := nvrtc.required_arch(path)) is not None:  # e.g. sm_90a for wgmma
            if only.rstrip("af") != (arch or nvrtc.DEFAULT_ARCH):
                continue  # code for another GPU: nothing to cache for this one
            target = only
        jobs += [(path, name, defines, target, output)
                 for name, defines in nvrtc.examples(path) for output in ("cubin", "ptx")]

    def build(job) -> None:
        path, name, defines, target, output = job
        nvrtc.compile(path, name, defines=defines, arch=target, output=output, verbose=False)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # NVRTC is thread-safe
        list(pool.map(build, jobs))
    return f"{len(jobs)} compiles cached for {arch or nvrtc.DEFAULT_ARCH}"


def _tensor_core_kernels() -> str:
    """Lessons 07, 08 and 16-19 compile one program per variant and configuration: every mma.sync
    variant at its default tiles, what lessons 07 and 08's cells compile (the steps' census;
    mma.cu's census, measured variants, profiled tiles), every Hopper step, ceiling and timeline
    build (sm_90a, lessons 16 and 17), lesson 18's Hopper attention steps and lesson 19's
    backward."""
    from kernels.attention.hopper import bwd, fwd
    from kernels.matmul import bench_mma, mma
    from kernels.matmul.hopper import registration as hopper_matmul

    arch = env.device_info().arch  # None without a GPU: nvrtc's default, sm_90
    done = mma.compile_many([(v, mma.DEFAULT_CONFIG) for v in mma.VARIANTS], arch)
    lesson = bench_mma.lecture_programs()
    hopper = hopper_matmul.compile_all() if arch in (None, "sm_90") else []
    attention = [*fwd.compile_all(), *bwd.compile_all()] if arch in (None, "sm_90") else []
    return (f"{len(done)} mma.sync variants, {lesson} programs of lessons 07–08, "
            f"{len(hopper)} Hopper matmul and {len(attention)} Hopper attention programs cached")


def _lesson_inputs():
    """``(op, args)`` at the sizes lessons 02 and 05 time every GeLU provider: torch.compile
    specialises on a shape, so only a call at that very shape fills the cache the notebook hits
    (a cold compile there costs seconds of the lecture's minute)."""
    import torch

    from kernels.gelu import bench as gelu_bench

    x = torch.randn(gelu_bench.GPU_ELEMENTS, device="cuda")
    return [("gelu", (x,)), ("gelu", (x.to(torch.bfloat16),))]


def _warm_kernels() -> str:
    import kernels

    calls = [(op_name, op.cases[0].make(dtype, "cuda"))
             for op_name, op in kernels.OPS.items() for dtype in op.dtypes]
    called, failed = 0, []
    for op_name, args in [*calls, *_lesson_inputs()]:
        for kernel in kernels.get_kernels(op_name, *args):
            try:  # one kernel's failure must not leave the others cold
                kernel(*args)
                called += 1
            except Exception as err:
                failed.append(f"{kernel.name} {args[0].dtype}: {type(err).__name__}: {err}")
    if failed:
        raise RuntimeError(f"{len(failed)} of {called + len(failed)} calls failed: "
                           + "; ".join(failed[:3]))
    return f"{called} kernel calls (Triton and torch.compile caches filled)"


def _run(label: str, fn: Callable[[], object]) -> bool:
    """One step, timed; prints its line when it ends. False if it failed."""
    start = time.perf_counter()
    try:
        result = fn()
    except Exception as err:  # report and go on: the other steps still help
        print(f"{label:32s} FAILED after {time.perf_counter() - start:.1f} s: "
              f"{type(err).__name__}: {err}", flush=True)
        return False
    what = result if isinstance(result, str) else "ready"
    print(f"{label:32s} {time.perf_counter() - start:6.1f} s  {what}", flush=True)
    return True


def _can_run(label: str, needs: list[str]) -> bool:
    if reasons := requirements.unmet(*needs):
        print(f"{label:32s} skipped: {'; '.join(reasons)}", flush=True)
    return not reasons


def _before_threads() -> None:
    """Import what the build threads use, and start CUDA, here in the main thread. Threads that
    first touch CUDA while others import modules can deadlock: CUDA's lazy initialisation holds
    its lock while it imports, and an import holds its module lock while it asks for CUDA (a
    prepare hung for ten minutes on an H100 when lesson 07's step asked for the GPU's
    capability beside two ``load_inline`` builds)."""
    import torch.utils.cpp_extension  # noqa: F401  (load_inline's module)

    import kernels.matmul.bench_mma  # noqa: F401
    import kernels.matmul.hopper.wgmma  # noqa: F401

    if env.HAS_CUDA:
        torch.cuda.init()


def main(argv: list[str] | None = None) -> int:
    builds: list[tuple[str, Callable[[], object], list[str]]] = [
        (label, fn, ["nvcc", "cxx"]) for label, fn in _extensions()]
    builds.append(("NVRTC kernels", _nvrtc, ["nvrtc", "libcu++"]))
    builds.append(("tensor-core matmuls (05, 07)", _tensor_core_kernels, ["nvrtc", "libcu++"]))
    start = time.perf_counter()
    _before_threads()
    runnable = [(label, fn) for label, fn, needs in builds if _can_run(label, needs)]
    if runnable:
        print("building side by side, each line as it ends ...", flush=True)
    with ThreadPoolExecutor(max_workers=max(len(runnable), 1)) as pool:
        ok = list(pool.map(lambda step: _run(*step), runnable))
    warm = "every registered kernel, once"
    if _can_run(warm, ["cuda"]):  # it calls the kernels: after every build
        ok.append(_run(warm, _warm_kernels))
    attention = "lesson 09's Triton kernels"
    if _can_run(attention, ["triton-gpu"]):  # what notebook 09 compiles (61-97 s cold, H100)
        from kernels.attention import bench as attention_bench

        ok.append(_run(attention, attention_bench.prepare))
    print(f"prepared in {time.perf_counter() - start:.0f} s [{env.environment_line()}]")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
