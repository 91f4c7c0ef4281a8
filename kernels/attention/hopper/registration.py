"""What the registry gets from lesson 18's Hopper kernels, in one place: it needs both the
forward (:mod:`fwd`) and the backward (:mod:`bwd`, which builds on the forward), so it lives
beside them rather than in either.

* ``("attention", "wgmma")``: the last step, differentiable with the Hopper backward (version
  ``bwd.BEST``) on dense problems; grouped-query attention and windows run forward only
  (``supports()`` refuses them when a gradient is wanted: ``bwd.registered_reason``);
* ``("attention", "wgmma", "step<N>")``: the other steps, forward only, variants included, so
  each joins the matrix test, the sanitizer and the lesson's tables;
* ``("attention", "wgmma", "fused_bwd")``: the last step with the backward's other version
  (``bwd.VARIANTS``: version 2, one kernel with dQ through atomics, while version 1 is BEST), so
  the benchmark's forward + backward tables, the matrix test and the sanitizer run both.
"""

from __future__ import annotations

import functools

from kernels.attention.hopper import bwd
from kernels.attention.hopper.fwd import BEST, DTYPES, HEAD_DIMS, STEPS, reason, run_checked


def _backward_meta(version: int) -> dict:
    return {"backward": f"kernels/attention/hopper/{bwd.SOURCES[version].name}",
            "backward_version": version}


def register_all() -> list:
    from kernels.registry import register

    registered = []
    for s in STEPS.values():
        trains = _backward_meta(bwd.BEST) if s is BEST else {}
        registered.append(register(
            "attention", "wgmma", None if s is BEST else s.name,
            build=(lambda: bwd.differentiable) if s is BEST
            else lambda _s=s: functools.partial(run_checked, s=_s),
            dtypes=tuple(DTYPES), devices=("cuda",), contiguous=True,
            needs=("cuda", "nvrtc"), min_capability=(9, 0),
            check=bwd.registered_reason if s is BEST else reason,
            meta={"fused": True, "head_dims": HEAD_DIMS, "step": s.number, "idea": s.idea,
                  "block": (s.block_m, s.bn), "keys_per_tile_d64": s.key_tile(64),
                  "stages": s.stages, "consumers": s.consumers,
                  "source": "kernels/attention/hopper/attention.cu",
                  "kernel": s.template(128), "gqa": True, "window": True, **trains},
            description=f"Hopper forward (TMA, wgmma) {s.name}: {s.idea}"
                        + (", and its backward (dK/dV, dQ)" if trains else "")))
    for version, variant in bwd.VARIANTS.items():  # the backward's other version(s)
        if version == bwd.BEST:
            continue
        registered.append(register(
            "attention", "wgmma", variant,
            build=lambda v=version: functools.partial(bwd.differentiable, version=v),
            dtypes=tuple(DTYPES), devices=("cuda",), contiguous=True,
            needs=("cuda", "nvrtc"), min_capability=(9, 0), check=bwd.registered_reason,
            meta={"fused": True, "head_dims": HEAD_DIMS, "step": BEST.number,
                  "idea": bwd.IDEAS[version], "source": "kernels/attention/hopper/attention.cu",
                  "kernel": BEST.template(128), **_backward_meta(version)},
            description=f"Hopper forward {BEST.name} and the backward's version {version}: "
                        f"{bwd.IDEAS[version]}"))
    return registered
