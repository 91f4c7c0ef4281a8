"""Lesson 06: how long each way of compiling the add kernel takes, cold and warm.

Every number is measured in this run, on this machine (a CPU-only machine can time them all:
nvcc and NVRTC compile without a GPU):

* ``load_inline`` cold: a build directory with nothing in it, in a fresh process (a process can
  register the ``course_add`` op library only once, and the notebook's process must stay
  healthy). On a first run that is the shared ``var/build/course_add_op``, which then serves
  the cached row (one compile, not two); once it is built, a private directory;
* ``load_inline`` cached: the build directory is up to date; ninja checks it and the library loads;
* NVRTC first call: a fresh process loads ``libnvrtc`` and compiles (library load included);
* NVRTC warm: the library is loaded, the cache bypassed: the compile itself;
* NVRTC disk-cache hit: the memory cache cleared, the binary read back from ``var/nvrtc_cache``;
* NVRTC memory-cache hit.

The ceiling of every record is the cold ``load_inline`` time of the same run, so "of ceiling"
reads as "this fraction of a cold build".
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import torch

from course_utils import env, nvrtc, plots, requirements, results, timing

LESSON = "nvrtc"
SOURCE = env.ROOT / "kernels" / "add" / "add.cu"
ARCH_NO_GPU = "sm_90"  # what to compile for when there is no GPU to ask


def _in_subprocess(code: str, timeout: float = 1800) -> dict:
    """Run ``code`` in a fresh Python; it prints one JSON line last, which is returned."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=timeout, env=env.child_environment(), cwd=env.ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"timing subprocess failed (exit {out.returncode}):\n"
                           f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def time_load_inline(fresh: bool) -> dict:
    """Seconds for ``load_inline`` of the add op in a fresh process (``fresh``: cold build)."""
    return _in_subprocess(f"""
        import json
        from kernels.add import load_inline
        b = load_inline.build(fresh={fresh!r})
        print(json.dumps({{"seconds": b.seconds, "compiled": b.compiled, "cold": b.cold}}))
    """)


def time_nvrtc_first_call(arch: str | None) -> dict:
    """Seconds for the first NVRTC compile in a fresh process, loading libnvrtc included."""
    return _in_subprocess(f"""
        import json, time
        import torch
        from course_utils import nvrtc  # not kernels: importing Triton would load libnvrtc
        loaded = any("libnvrtc.so" in line for line in open("/proc/self/maps"))
        t0 = time.perf_counter()
        c = nvrtc.compile({str(SOURCE)!r}, "add_kernel", arch={arch!r}, cache=False,
                          defines={{"scalar_t": torch.float32, "BLOCK": 256}}, verbose=False)
        print(json.dumps({{"seconds": time.perf_counter() - t0, "preloaded": loaded}}))
    """)


def compile_times(quick: bool = False, arch: str | None = None) -> list[dict]:
    """Rows ``{"how", "seconds", "detail"}``, measured now; cold load_inline first."""
    from kernels.add import nvrtc as add_nvrtc

    arch = arch or env.device_info().arch or ARCH_NO_GPU
    rows = []
    # a cold build needs a build directory with nothing in it: the shared one when it was never
    # built (a first run), and then it is the cached row's; else a private one, removed after
    shared = time_load_inline(fresh=False)
    cold = shared if shared["cold"] else time_load_inline(fresh=True)
    if not cold["cold"]:
        raise RuntimeError("the cold load_inline build did not compile from an empty directory")
    where = "empty shared build dir, kept" if cold is shared else "private build dir, removed"
    rows.append({"how": "load_inline, cold (fresh build dir)", "seconds": cold["seconds"],
                 "detail": f"nvcc + host compiler + link, fresh process; {where}"})
    cached = time_load_inline(fresh=False) if shared["compiled"] else shared
    rows.append({"how": "load_inline, cached", "seconds": cached["seconds"],
                 "detail": "ninja finds the library up to date; load only"
                 if not cached["compiled"] else "it recompiled (sources changed?)"})
    first = time_nvrtc_first_call(arch)
    rows.append({"how": "NVRTC, first call", "seconds": first["seconds"],
                 "detail": "fresh process: load libnvrtc, compile" if not first["preloaded"]
                 else "fresh process, compile (libnvrtc was already loaded by an import)"})
    reps = 3 if quick else 10
    compile_add = lambda: add_nvrtc.compile_add(torch.float32, arch=arch, cache=False,
                                                verbose=False)
    warm = timing.benchmark(compile_add, name="nvrtc warm", warmup=1, reps=reps, device="cpu")
    rows.append({"how": "NVRTC, warm", "seconds": warm.median / 1e3,
                 "detail": f"library loaded, no cache; median of {warm.n}"})
    add_nvrtc.compile_add(torch.float32, arch=arch, verbose=False)  # make sure it is on disk

    def disk_hit():
        nvrtc.clear_memory_cache()
        compiled = add_nvrtc.compile_add(torch.float32, arch=arch)
        assert compiled.cache == "disk hit", compiled.cache
    disk = timing.benchmark(disk_hit, name="nvrtc disk", warmup=1, reps=reps * 3, device="cpu")
    rows.append({"how": "NVRTC, disk-cache hit", "seconds": disk.median / 1e3,
                 "detail": f"var/nvrtc_cache; median of {disk.n}"})
    memory = timing.benchmark(lambda: add_nvrtc.compile_add(torch.float32, arch=arch),
                              name="nvrtc memory", warmup=1, reps=100, device="cpu")
    rows.append({"how": "NVRTC, memory-cache hit", "seconds": memory.median / 1e3,
                 "detail": f"median of {memory.n}"})
    for row in rows:
        row["vs cold load_inline"] = cold["seconds"] / row["seconds"]
    return rows


def plot(rows: list[dict], name: str = "nvrtc_compile_times"):
    """Horizontal bars on a log axis, like the seed's "cold compile time" figure."""
    fig, ax = plots.figure("Compiling the add kernel: load_inline vs NVRTC",
                           xlabel="seconds (log scale)", figsize=(8, 3.6))
    labels = [r["how"] for r in rows]
    colors = [plots.color("load_inline" if "load_inline" in r["how"] else "nvrtc") for r in rows]
    ax.barh(labels, [r["seconds"] for r in rows], color=colors)
    ax.set_xscale("log")
    ax.invert_yaxis()
    for i, r in enumerate(rows):
        ax.annotate(f" {timing.format_ms(r['seconds'] * 1e3)}", xy=(r["seconds"], i),
                    va="center", fontsize=8)
    return fig, plots.save(fig, name)


def run(quick: bool = False) -> list[results.Record | results.Note]:
    if reason := nvrtc.unavailable_reason() or "; ".join(requirements.unmet("nvcc", "cxx")):
        print(f"04_nvrtc compile times skipped: {reason}")
        return [results.Note(LESSON, f"compile times not measured: {reason}")]
    rows = compile_times(quick=quick)
    print(plots.stamped_table(
        [{"how": r["how"], "time": timing.format_ms(r["seconds"] * 1e3),
          "cold load_inline ÷ this": f"{r['vs cold load_inline']:,.0f}×"} for r in rows],
        title="add kernel: compile times"))
    cold_ms = rows[0]["seconds"] * 1e3
    arch = env.device_info().arch or ARCH_NO_GPU
    records = [results.Record(LESSON, f"add kernel compile: {r['how']} ({arch})",
                              r["seconds"] * 1e3, "ms",
                              ceiling=cold_ms if i else None,
                              ceiling_what="cold load_inline build, same run" if i else None)
               for i, r in enumerate(rows)]
    nvrtc_first = next(r for r in rows if r["how"] == "NVRTC, first call")
    nvrtc_warm = next(r for r in rows if r["how"] == "NVRTC, warm")
    disk = next(r for r in rows if r["how"] == "NVRTC, disk-cache hit")
    print(f"speed-up over a cold load_inline: NVRTC first call "
          f"{nvrtc_first['vs cold load_inline']:,.0f}×, NVRTC warm "
          f"{nvrtc_warm['vs cold load_inline']:,.0f}×; disk-cache hit "
          f"{timing.format_ms(disk['seconds'] * 1e3)}")
    records.append(results.Note(LESSON, (
        f"NVRTC {nvrtc.version_string()} compiled the add kernel "
        f"{nvrtc_warm['vs cold load_inline']:,.0f}× faster than a cold load_inline build "
        f"({nvrtc_first['vs cold load_inline']:,.0f}× for the first call in a fresh process); "
        f"a disk-cache hit took {timing.format_ms(disk['seconds'] * 1e3)}.")))
    return records
