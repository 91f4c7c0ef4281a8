"""What the registry gets from lesson 12's Hopper kernels, in one place: it needs both the
forward (:mod:`fwd`) and the backward (:mod:`bwd`, which builds on the forward), so it lives
beside them rather than in either.

* ``("attention", "wgmma")``: the last step, differentiable with the Hopper backward on dense
  problems; grouped-query attention and windows run forward only (``supports()`` refuses them
  when a gradient is wanted: ``bwd.registered_reason``);
* ``("attention", "wgmma", "step<N>")``: the other steps, forward only, variants included, so
  each joins the matrix test, the sanitizer and the lesson's tables.
"""

from __future__ import annotations

import functools

from kernels.attention.hopper import bwd
from kernels.attention.hopper.fwd import BEST, DTYPES, HEAD_DIMS, STEPS, _run, reason


def register_all() -> list:
    from kernels.registry import register

    registered = []
    for s in STEPS.values():
        trains = {"backward": "kernels/attention/hopper/attention_bwd.cu"} if s is BEST else {}
        registered.append(register(
            "attention", "wgmma", None if s is BEST else s.name,
            build=(lambda: bwd.differentiable) if s is BEST
            else lambda _s=s: functools.partial(_run, s=_s),
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
    return registered
