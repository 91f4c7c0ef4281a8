"""Wrong answers to exercise attention.backward_dkdv, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "attention.backward_dkdv"
BLIND: dict[str, str] = {
        "causal mask strict (key j seen only when j < i: the diagonal dropped)": r'''
# ✏️ Exercise attention.backward_dkdv: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.attention.triton_bwd import dot  # dot(a, b, IEEE): a @ b, float32 accumulation


@triton.jit
def dkdv_block(dk, dv, k, v, q, do, lse, delta, keys, rows, qk_scale, MASKED: tl.constexpr,
               IEEE: tl.constexpr):
    """One step of the dK/dV kernel. Return (dk, dv)."""
    st = dot(k, tl.trans(q), IEEE)
    pt = tl.math.exp2(st * qk_scale - lse[None, :])
    if MASKED:
        pt = tl.where(keys[:, None] < rows[None, :], pt, 0.0)
    dv += dot(pt.to(do.dtype), do, IEEE)
    dpt = dot(v, tl.trans(do), IEEE)
    dst = pt * (dpt - delta[None, :])
    dk += dot(dst.to(q.dtype), q, IEEE)
    return dk, dv
''',
        "mask applied to P for dV only; dS uses the unmasked P": r'''
# ✏️ Exercise attention.backward_dkdv: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.attention.triton_bwd import dot  # dot(a, b, IEEE): a @ b, float32 accumulation


@triton.jit
def dkdv_block(dk, dv, k, v, q, do, lse, delta, keys, rows, qk_scale, MASKED: tl.constexpr,
               IEEE: tl.constexpr):
    """One step of the dK/dV kernel. Return (dk, dv)."""
    st = dot(k, tl.trans(q), IEEE)
    pt = tl.math.exp2(st * qk_scale - lse[None, :])
    pt_seen = pt
    if MASKED:
        pt_seen = tl.where(keys[:, None] <= rows[None, :], pt, 0.0)
    dv += dot(pt_seen.to(do.dtype), do, IEEE)
    dpt = dot(v, tl.trans(do), IEEE)
    dst = pt * (dpt - delta[None, :])
    dk += dot(dst.to(q.dtype), q, IEEE)
    return dk, dv
''',
        "1/sqrt(D) applied to dK in the step as well (the kernel applies it again)": r'''
# ✏️ Exercise attention.backward_dkdv: edit this cell, run it, then run the check below
import triton
import triton.language as tl

from kernels.attention.triton_bwd import dot  # dot(a, b, IEEE): a @ b, float32 accumulation


@triton.jit
def dkdv_block(dk, dv, k, v, q, do, lse, delta, keys, rows, qk_scale, MASKED: tl.constexpr,
               IEEE: tl.constexpr):
    """One step of the dK/dV kernel. Return (dk, dv)."""
    st = dot(k, tl.trans(q), IEEE)
    pt = tl.math.exp2(st * qk_scale - lse[None, :])
    if MASKED:
        pt = tl.where(keys[:, None] <= rows[None, :], pt, 0.0)
    dv += dot(pt.to(do.dtype), do, IEEE)
    dpt = dot(v, tl.trans(do), IEEE)
    dst = pt * (dpt - delta[None, :])
    sm_scale = qk_scale * 0.6931471805599453  # log2(e) / sqrt(D) * ln(2) = 1 / sqrt(D)
    dk += dot(dst.to(q.dtype), q, IEEE) * sm_scale
    return dk, dv
''',
    }
