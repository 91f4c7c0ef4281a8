"""The attention op itself, apart from its kernels: its arguments and their checks, the cases
every registered kernel is tested on, the tolerance, and the eager reference (the package's
docstring says what the shapes mean). Every provider imports from here, and the package
re-exports it, so ``from kernels.attention import attention_eager`` still reads as before."""


import math

import torch

from kernels.registry import Case, define_op, expect_tensor, register

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_kv(op: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             kv_shape: tuple[int | str, ...]) -> None:
    """ValueError, naming the argument, unless k and v fit q: the checks that the dense op and
    :func:`varlen_attention` share (``op`` starts each message). ``kv_shape`` is k's expected
    shape as the message prints it: an int where k must have q's size there (``(B, "H_kv",
    "Sk", D)`` dense, ``("total_k", "H_kv", D)`` packed), a name where any size goes. Dimension
    1 holds the heads in both layouts: k's must divide q's (grouped-query attention). v has
    k's shape; both have q's dtype and device. q, k and v are tensors of ``len(kv_shape)``
    dimensions already (``expect_tensor``)."""
    if any(isinstance(size, int) and k.shape[i] != size for i, size in enumerate(kv_shape)):
        raise ValueError(f"{op}: k expected shape ({', '.join(map(str, kv_shape))}) to match q "
                         f"{tuple(q.shape)}, got {tuple(k.shape)}")
    h = q.shape[1]
    if k.shape[1] == 0 or h % k.shape[1]:
        raise ValueError(f"{op}: k expected a number of heads that divides q's {h} "
                         f"(grouped-query attention: each K/V head serves H / H_kv query heads), "
                         f"got {k.shape[1]} heads, shape {tuple(k.shape)}")
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"{op}: v expected the shape of k {tuple(k.shape)}, "
                         f"got {tuple(v.shape)}")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise ValueError(f"{op}: {name} expected the dtype of q ({q.dtype}), got {t.dtype}")
        if t.device != q.device:
            raise ValueError(f"{op}: {name} expected the device of q ({q.device}), "
                             f"got {t.device}")


def validate_args(q, k, v, causal=False, window=None) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        expect_tensor("attention", name, t, ndim=4, floating=True)
    b, _, _, d = q.shape
    check_kv("attention", q, k, v, (b, "H_kv", "Sk", d))
    if not isinstance(causal, bool):
        raise ValueError(f"attention: causal expected True or False, got {causal!r}")
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"attention: window expected None or a number of keys >= 1, "
                             f"got {window!r}")
        if not causal:
            raise ValueError("attention: window expected causal=True (a sliding window looks "
                             "back from each query: i - window < j <= i), got causal=False")


def _qkv(b, h, sq, sk, d, scale=1.0, causal=False):
    # scale makes the scores large (q and k); v stays unit-sized: a fused kernel rounds P to
    # 16 bits before PV (as SDPA's do), an error proportional to |v| that the tolerance bounds
    def make(dtype, device):
        q, k = (scale * torch.randn(b, h, s, d, device=device) for s in (sq, sk))
        v = torch.randn(b, h, sk, d, device=device)
        return q.to(dtype), k.to(dtype), v.to(dtype), causal
    return make


def _gqa(b, h, h_kv, sq, sk, d, causal=False, window=None):
    # fresh q with h heads, k and v with h_kv; window: the fifth argument
    def make(dtype, device):
        q = torch.randn(b, h, sq, d, device=device).to(dtype)
        k, v = (torch.randn(b, h_kv, sk, d, device=device).to(dtype) for _ in range(2))
        return (q, k, v, causal) if window is None else (q, k, v, causal, window)
    return make


def _bshd(dtype, device):
    # (B, S, H, D) storage viewed as (B, H, S, D): the layout a projection writes
    q, k, v = (torch.randn(2, 70, 3, 64, device=device).to(dtype).transpose(1, 2)
               for _ in range(3))
    return q, k, v, False


define_op(
    "attention",
    arg_names=("q", "k", "v", "causal", "window"),
    validate=validate_args,
    reference="eager",
    dtypes=DTYPES,
    cases=(
        Case("1x2x128x64", _qkv(1, 2, 128, 128, 64)),
        Case("odd 2x3x77x64", _qkv(2, 3, 77, 77, 64)),
        Case("odd 1x2x130x128 causal", _qkv(1, 2, 130, 130, 128, causal=True)),
        Case("causal 1x1x64x64", _qkv(1, 1, 64, 64, 64, causal=True)),
        Case("one query 1x2x1x64", _qkv(1, 2, 1, 50, 64)),
        Case("cross 1x2x40x97x64 causal", _qkv(1, 2, 40, 97, 64, causal=True)),
        Case("large scores 1x1x96x64", _qkv(1, 1, 96, 96, 64, scale=6.0)),
        Case("(B, S, H, D) strides 2x3x70x64", _bshd),
        Case("GQA 2x8x70x64, 2 K/V heads", _gqa(2, 8, 2, 70, 70, 64)),
        Case("GQA 1x4x40x97x32 causal, 1 K/V head", _gqa(1, 4, 1, 40, 97, 32, causal=True)),
        Case("window 40 1x2x150x64", _gqa(1, 2, 2, 150, 150, 64, causal=True, window=40)),
        Case("window 9 GQA 1x4x70x90x64", _gqa(1, 4, 2, 70, 90, 64, causal=True, window=9)),
    ),
    # a fused kernel sums the scores in another order (and rounds P to 16 bits before PV)
    tolerance={torch.float32: (2e-4, 2e-4), torch.float16: (4e-3, 4e-3),
               torch.bfloat16: (2e-2, 2e-2)},
    description="scaled dot-product attention, (B, H, S, D)",
)


def visible(seq_q: int, seq_k: int, causal: bool, window: int | None = None,
            device=None) -> torch.Tensor:
    """(Sq, Sk) booleans: True where query i sees key j (the explicit mask SDPA can take)."""
    i = torch.arange(seq_q, device=device)[:, None]
    j = torch.arange(seq_k, device=device)[None, :]
    seen = (j <= i) if causal else torch.ones(seq_q, seq_k, dtype=torch.bool, device=device)
    if window is not None:
        seen = seen & (j > i - window)
    return seen


@register("attention", "eager", dtypes=DTYPES)
def attention_eager(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    causal: bool = False, window: int | None = None) -> torch.Tensor:
    """softmax(Q Kᵀ / sqrt(D)) V in float32 (float64 for float64), as three operations: the
    reference. K/V heads repeated for grouped-query attention."""
    work = torch.promote_types(q.dtype, torch.float32)
    group = q.shape[1] // k.shape[1]
    k, v = (t.to(work).repeat_interleave(group, dim=1) for t in (k, v))
    scores = (q.to(work) @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        hidden = ~visible(*scores.shape[-2:], causal, window, q.device)
        empty = hidden.all(-1, keepdim=True)  # a query that sees no key: output 0, no NaN
        scores = scores.masked_fill(hidden & ~empty, float("-inf"))
        return ((torch.softmax(scores, dim=-1) * ~empty) @ v).to(q.dtype)
    return (torch.softmax(scores, dim=-1) @ v).to(q.dtype)


def variant_reason(q: torch.Tensor, k: torch.Tensor, window: int | None, *, gqa: bool,
                   windows: bool) -> str | None:
    """The words of a provider that lacks grouped-query attention (``gqa=False``) or a sliding
    window (``windows=False``), for a problem that needs it (None: it needs neither)."""
    if not gqa and q.shape[1] != k.shape[1]:
        return (f"one K/V head per query head (no grouped-query attention); got q with "
                f"{q.shape[1]} heads, k with {k.shape[1]}")
    if not windows and window is not None:
        return f"no sliding window; got window = {window}"
    return None
