"""What the registry and ``make prepare`` get from lessons 16 and 17's Hopper matmul, in one
place: it needs the step kernels (:mod:`wgmma`) and the tile shapes chosen per problem
(:mod:`tiles`, which builds on wgmma), so it lives beside them rather than in either.

* ``("matmul", "wgmma", "step<N>_<variant>")``: every step in every variant, so each joins the
  matrix test, the sanitizer and the lesson's tables;
* ``("matmul", "wgmma", "auto_<variant>")``: step 4's kernel with its tile chosen per problem.

Nothing is compiled until a kernel is first called; :func:`compile_all` compiles it all ahead.
"""

from __future__ import annotations

import functools

from course_utils import nvrtc
from kernels.matmul.hopper import ceiling, tiles, wgmma
from kernels.registry import register


def compile_all(arch: str = wgmma.ARCH, workers: int | None = None) -> list[nvrtc.Compiled]:
    """Every step and tile candidate in every variant, the ceilings and the TIMELINE builds the
    lesson uses, in parallel threads: what ``make prepare`` caches before a lecture."""
    steps = [*wgmma.STEPS.values(), *(c.step for c in tiles.CANDIDATES[1:])]  # [0] is step 4
    jobs = [lambda s=s, v=v: wgmma.compile_step(s, v, arch=arch, verbose=False)
            for s in steps for v in wgmma.VARIANTS]
    jobs += [lambda s=s: wgmma.compile_step(s, "bf16", arch=arch, timeline=True, verbose=False)
             for s in wgmma.STEPS.values()]
    jobs += [lambda v=v: ceiling.compile_ceiling(v, arch=arch, verbose=False)
             for v in wgmma.VARIANTS]
    return nvrtc.compile_in_threads(jobs, workers)


def register_all() -> list:
    """Register every (step, variant) as ("matmul", "wgmma", "step<N>_<variant>"), and step 4's
    kernel with its tile chosen per problem (tiles.py) as ("matmul", "wgmma", "auto_<variant>")."""
    registered = []
    for v in wgmma.VARIANTS.values():
        for s in wgmma.STEPS.values():
            registered.append(_register(
                f"{s.name}_{v.name}", functools.partial(wgmma.run_checked, s=s, v=v), v, s.idea,
                {"step": s.number, "idea": s.idea, "tile": (s.bm, s.bn), "stages": s.stages,
                 "consumers": s.consumers, "kernel": s.template,
                 "instruction": v.ptx.replace("nN", f"n{s.bn}")}))
        idea = ("step 4's kernel, its tile shape chosen per problem by the wave-quantisation "
                "rule of tiles.py, and K split across blocks when the tiles leave SMs idle")
        registered.append(_register(
            f"auto_{v.name}", functools.partial(tiles.run, v=v), v, idea,
            {"step": wgmma.BEST.number, "idea": idea, "tile": "chosen per problem",
             "tiles": [c.name for c in tiles.CANDIDATES], "kernel": wgmma.BEST.kernel,
             "instruction": v.ptx}))
    return registered


def _register(name: str, fn, v: wgmma.Variant, idea: str, meta: dict):
    return register(
        "matmul", "wgmma", name, build=lambda: fn, dtypes=tuple(dict.fromkeys((v.a, v.b))),
        devices=("cuda",), min_capability=(9, 0), needs=("cuda", "nvrtc"),
        check=functools.partial(wgmma.call_reason, v),
        meta={**meta, "a": v.a, "b": v.b, "out": v.out, "accumulator": "f32",
              "k_step": v.k_step, "source": "kernels/matmul/hopper/wgmma.cu",
              "tolerance": wgmma.tolerance(v)},
        description=f"wgmma {name.replace('_', ' ', 1)}: {idea}")
