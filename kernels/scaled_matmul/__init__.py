"""fp8 matrix multiply with scales: ``(scale_a · a) @ (scale_b · b)``, out in bfloat16.

An fp8 e4m3 value holds at most 448 and has a 3-bit mantissa, so a tensor is stored as fp8 values
``q`` and a float32 scale: ``x ≈ scale · q``, the scale chosen so that the largest ``|x|`` lands
near 448 (:func:`quantize`). A matmul of two such tensors multiplies the fp8 values on the
tensor cores and the scales after: ``(sa · qa) @ (sb · qb) = (qa @ qb) · sa · sb`` when the
scales are per tensor, and row by row and column by column when they are per row of A and per
column of B (each row of A, each column of B, gets its own range: an outlier row no longer
flattens every other row to a few fp8 values). ``torch._scaled_mm`` takes both forms; lesson
16's wgmma kernel applies them to its fp32 accumulators before rounding to bfloat16.

The third form, *block* scales, is the recipe of recent fp8-trained models: A gets a scale per
row and per 128 values of K (1 x 128 blocks), B one per 128 x 128 block. An outlier then costs
the range of 128 values only; but the scales change along K, so they no longer factor out of the
sum: each 128-wide K block's product is scaled on its own (``block_scaled.cu``).

Arguments as ``torch._scaled_mm`` takes them: ``a`` [M, K] row-major, ``b`` [K, N] column-major,
both fp8; ``scale_a`` one float32 value (per tensor), [M, 1] (per row) or [M, ceil(K / 128)]
(blocks); ``scale_b`` one value, [1, N] (per column) or [ceil(K / 128), ceil(N / 128)] (blocks).
Block scales come in pairs and may have any strides. The reference computes in float64 from the
fp8 values and rounds the result to bfloat16 once.
"""

from __future__ import annotations

import torch

from kernels.registry import Case, define_op, expect_tensor, register

E4M3 = getattr(torch, "float8_e4m3fn", None)
E5M2 = getattr(torch, "float8_e5m2", None)
DTYPES = tuple(d for d in (E4M3, E5M2) if d is not None)
FORMS = ("tensor", "row", "block")  # per tensor; per row of A / column of B; per block
BLOCK = 128  # block scales: A's cover 1 x 128 values (along K), B's 128 x 128


def _is_fp8(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point and dtype.itemsize == 1


def blocks(n: int) -> int:
    """How many 128-wide scale blocks cover ``n`` values."""
    return -(-n // BLOCK)


def scale_form(name: str, scale: torch.Tensor, outer: int, k: int) -> str:
    """"tensor", "row" or "block" for a valid scale of an [outer, k] A (``name`` "scale_a") or
    a [k, outer] B ("scale_b"); ValueError naming what was expected otherwise."""
    expect_tensor("scaled_matmul", name, scale)
    if scale.dtype != torch.float32:
        raise ValueError(f"scaled_matmul: {name} expected float32, got {scale.dtype}")
    if scale.numel() == 1:
        return "tensor"
    if name == "scale_a":
        row, block, each = (outer, 1), (outer, blocks(k)), "row of a"
    else:
        row, block, each = (1, outer), (blocks(k), blocks(outer)), "column of b"
    shape = tuple(scale.shape)
    if shape == row and scale.is_contiguous():
        return "row"
    if shape == block and scale.dim() == 2:
        return "block"
    raise ValueError(f"scaled_matmul: {name} expected one value (per tensor), a contiguous "
                     f"{list(row)} tensor (one per {each}) or a {list(block)} tensor (one per "
                     f"block of {'1 x 128' if name == 'scale_a' else '128 x 128'} values), got "
                     f"shape {shape}")


def scale_forms(a, b, scale_a, scale_b) -> tuple[str, str]:
    """(scale_a's form, scale_b's form) of a checked problem. [M, 1] is both A's per-row and
    its block form when K <= 128: with a block scale_b it counts as blocks."""
    k = a.shape[1]
    forms = (scale_form("scale_a", scale_a, a.shape[0], k),
             scale_form("scale_b", scale_b, b.shape[1], k))
    if forms[1] == "block" and forms[0] == "row" and blocks(k) == 1:
        return "block", "block"
    return forms


def _validate(a, b, scale_a, scale_b) -> None:
    expect_tensor("scaled_matmul", "a", a, ndim=2)
    expect_tensor("scaled_matmul", "b", b, ndim=2)
    for name, t in (("a", a), ("b", b)):
        if not _is_fp8(t.dtype):
            raise ValueError(f"scaled_matmul: {name} expected an fp8 tensor (float8_e4m3fn or "
                             f"float8_e5m2), got {t.dtype}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"scaled_matmul: b expected {a.shape[1]} rows to match a's columns, "
                         f"got b of shape {tuple(b.shape)} for a of shape {tuple(a.shape)}")
    forms = scale_forms(a, b, scale_a, scale_b)
    if "block" in forms and forms != ("block", "block"):
        raise ValueError(f"scaled_matmul: block scales come in pairs (scale_a per 1 x 128, "
                         f"scale_b per 128 x 128), got scale_a {forms[0]} and scale_b {forms[1]}")
    for name, t in (("b", b), ("scale_a", scale_a), ("scale_b", scale_b)):
        if t.device != a.device:
            raise ValueError(f"scaled_matmul: {name} expected the device of a ({a.device}), "
                             f"got {t.device}")


def quantize(x: torch.Tensor, dtype: torch.dtype, form: str = "tensor",
             k_dim: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scale) with ``x ≈ scale · q``: ``q`` in fp8 ``dtype`` (same shape and strides as
    ``x``), ``scale`` float32, one value or one per row/column (``k_dim``: the dimension of K,
    1 for A [M, K], 0 for B [K, N]), chosen so that the largest ``|x|`` maps to the type's
    largest value. A zero row or column gets scale 1. (Block scales: :func:`quantize_blocks`.)"""
    form = form if form in FORMS[:2] else _bad_form(form)
    largest = torch.finfo(dtype).max
    if form == "tensor":
        absmax = x.abs().amax() if x.numel() else x.new_zeros(())
    else:
        absmax = x.abs().amax(dim=k_dim, keepdim=True) if x.shape[k_dim] else x.new_zeros(
            [1 if d == k_dim else size for d, size in enumerate(x.shape)])
    scale = torch.where(absmax > 0, absmax / largest, torch.ones_like(absmax)).float()
    q = (x / scale).clamp(-largest, largest).to(dtype)
    return q, (scale.reshape(1) if form == "tensor" else scale.contiguous())


def quantize_blocks(x: torch.Tensor, dtype: torch.dtype, rows: int,
                    cols: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scale) with one scale per ``rows`` x ``cols`` block of a 2-D ``x`` (edge blocks are
    smaller): ``scale`` is [ceil(R / rows), ceil(C / cols)], each block's largest ``|x|``
    mapped to the type's largest value (scale 1 for a zero block)."""
    largest = torch.finfo(dtype).max
    (r, c), (br, bc) = x.shape, (-(-x.shape[0] // rows), -(-x.shape[1] // cols))
    padded = x.new_zeros(br * rows, bc * cols)
    padded[:r, :c] = x
    absmax = padded.abs().reshape(br, rows, bc, cols).amax(dim=(1, 3))
    scale = torch.where(absmax > 0, absmax / largest, torch.ones_like(absmax)).float()
    full = scale.repeat_interleave(rows, 0).repeat_interleave(cols, 1)[:r, :c]
    return (x / full).clamp(-largest, largest).to(dtype), scale


def quantize_operands(a: torch.Tensor, bt: torch.Tensor, dtype: torch.dtype,
                      form: str = "tensor") -> tuple[torch.Tensor, ...]:
    """``(a, b, scale_a, scale_b)`` as ``torch._scaled_mm`` takes them, from float ``a`` [M, K]
    and ``bt`` = B^T [N, K]: each quantised to fp8 ``dtype`` with its scales (B's per column,
    its rows being B's columns; with ``form="block"``, A per 1 x 128 and B per 128 x 128), ``b``
    the column-major [K, N] view."""
    if form == "block":
        qa, scale_a = quantize_blocks(a, dtype, 1)
        qbt, scale_bt = quantize_blocks(bt, dtype, BLOCK)
        # scale_a "outer-dim-major" (its M values of one K block side by side), as cuBLAS reads it
        return qa, qbt.t(), scale_a.t().contiguous().t(), scale_bt.t()
    qa, scale_a = quantize(a, dtype, form)
    qbt, scale_bt = quantize(bt, dtype, form)
    return qa, qbt.t(), scale_a, scale_bt.reshape(1, -1)


def _bad_form(form):
    raise ValueError(f"quantize: form expected one of {', '.join(FORMS[:2])} (block scales: "
                     f"quantize_blocks), got {form!r}")


def _problem(m, n, k, form):
    def make(dtype, device):
        a = torch.randn(m, k, device=device) / k**0.25
        bt = torch.randn(n, k, device=device) / k**0.25
        if form != "tensor" and m > 1:
            a[0, : 64 if form == "block" else k] *= 50  # an outlier row (or block of a row)
        return quantize_operands(a, bt, dtype, form)
    return make


define_op(
    "scaled_matmul",
    arg_names=("a", "b", "scale_a", "scale_b"),
    typed_args=("a", "b"),
    validate=_validate,
    reference="eager",
    dtypes=DTYPES,
    cases=(
        Case("per tensor 128x128x128", _problem(128, 128, 128, "tensor")),
        Case("per tensor odd 33x65x64", _problem(33, 65, 64, "tensor")),
        Case("row-wise 256x384x256", _problem(256, 384, 256, "row")),
        Case("row-wise odd 97x200x96", _problem(97, 200, 96, "row")),
        Case("row-wise tiny 1x1x32", _problem(1, 1, 32, "row")),
        Case("blocks 256x384x512", _problem(256, 384, 512, "block")),
        Case("blocks odd 97x200x352", _problem(97, 200, 352, "block")),
        Case("blocks tiny 1x8x32", _problem(1, 8, 32, "block")),
        Case("empty k=0", _problem(16, 16, 0, "tensor")),
    ),
    # fp8 products accumulate exactly in fp32; the bfloat16 output rounds to 8 bits
    tolerance={torch.bfloat16: (3e-2, 3e-2)},
    description="fp8 matrix multiply with per-tensor, row-wise or block scales, bfloat16 out",
)


def expanded(a, b, scale_a, scale_b) -> tuple[torch.Tensor, torch.Tensor]:
    """The scales as float64 factors that broadcast against ``a`` [M, K] and ``b`` [K, N]: block
    scales repeated over their blocks, the other forms as they are."""
    if scale_forms(a, b, scale_a, scale_b)[1] != "block":
        return scale_a.double(), scale_b.double()
    k, n = a.shape[1], b.shape[1]
    full_a = scale_a.double().repeat_interleave(BLOCK, 1)[:, :k]
    full_b = scale_b.double().repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)[:k, :n]
    return full_a, full_b


@register("scaled_matmul", "eager", dtypes=DTYPES)
def scaled_matmul_eager(a, b, scale_a, scale_b) -> torch.Tensor:
    """The definition, in float64 from the fp8 values: (scale_a · a) @ (scale_b · b)."""
    full_a, full_b = expanded(a, b, scale_a, scale_b)
    return ((a.double() * full_a) @ (b.double() * full_b)).to(torch.bfloat16)


def _scaled_mm_reason(a, b, scale_a, scale_b) -> str | None:
    if not a.is_cuda:
        return "torch._scaled_mm needs a CUDA tensor"
    if torch.cuda.get_device_capability(a.device) < (8, 9):
        return "torch._scaled_mm needs fp8 tensor cores (sm_89 or newer)"
    if a.dtype == b.dtype == E5M2:
        return "cuBLAS has no e5m2 x e5m2 fp8 matmul"
    if a.shape[1] % 16 or b.shape[1] % 16:
        return f"torch._scaled_mm needs K and N multiples of 16, got K={a.shape[1]}, N={b.shape[1]}"
    if a.stride(1) != 1 or b.stride(0) != 1:
        return "torch._scaled_mm needs a row-major and b column-major"
    if a.data_ptr() % 16 or b.data_ptr() % 16:
        return "cuBLASLt's fp8 matmul needs a and b to start on 16-byte boundaries"
    forms = set(scale_forms(a, b, scale_a, scale_b))
    if len(forms) > 1:
        return "torch._scaled_mm takes both scales per tensor or both per row/column"
    return None


@register("scaled_matmul", "cublas", dtypes=DTYPES, devices=("cuda",), check=_scaled_mm_reason)
def scaled_matmul_cublas(a, b, scale_a, scale_b) -> torch.Tensor:
    """torch._scaled_mm: cuBLAS's fp8 matmul with the same scales (the peer)."""
    return torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16)


# lesson 16's Hopper kernel with scales in its epilogue (lesson 17)
from kernels.matmul.hopper import scaled  # noqa: E402, I001

scaled.register_all()
