"""FlashAttention-2's forward in Triton: the scores never leave the chip.

One program owns ``BLOCK_M`` queries of one (batch, head). It keeps them in registers with three
running quantities per row: ``m`` (the largest score seen, in log2 units), ``l`` (the sum of
``2^(score - m)``) and ``acc`` (the sum of those weights times the values), and walks the keys
``BLOCK_N`` at a time (:func:`attend_block`, the online softmax of ``online_softmax.py``):

* ``QKᵀ`` of the block on the tensor cores (``tl.dot``, fp32 accumulation);
* the new maximum, the factor ``alpha = 2^(m_old - m_new)`` that rescales what was summed so far,
  the block's weights ``p = 2^(s - m_new)``;
* ``acc = alpha · acc + p V`` (``p`` rounded to the input's 16-bit type for the tensor cores).

At the end ``O = acc / l``, and the log-sum-exp ``m + log2(l)`` is saved (4 bytes a query) so
the backward can recompute any block's ``p`` without a second pass over the keys.

Three things make it fast, and each is in the code:

* **exp2 with the scale folded in.** ``softmax(s/√D)`` uses ``e^x = 2^(x·log2 e)``: the kernel
  multiplies the scores once by ``log2(e)/√D`` and calls ``exp2``, the GPU's native instruction.
* **Masks only where needed.** Key blocks that every query of the program may see run without a
  mask; only the blocks on the causal diagonal and the ragged last block (``Sk`` not a multiple of
  ``BLOCK_N``) take the masked path (:func:`key_range` gives both ranges).
* **Causal block skipping.** Keys after the program's last query are never loaded: a causal
  forward does half the work.

Two variants models use ride on the same loop: **grouped-query attention** (the program of
query head ``h`` reads K/V head ``h // group``; the group's programs are neighbours on the grid,
so after the first the group's K/V blocks come from L2) and a **sliding window**
(:func:`window_range`: key blocks before the window are skipped, blocks its edge crosses are
masked, the rest run unmasked as before).

Any strides (a ``(B, S, H, D)`` projection viewed as ``(B, H, S, D)`` is read in place); head
dims 16, 32, 64, 128; fp16 and bf16 (fp32 too, exact, at a fraction of the speed). On a CPU it
runs in Triton's interpreter, which computes bf16 ``tl.dot`` wrongly: fp16 and fp32 there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from course_utils import env, nvrtc
from kernels.triton_launch import Launcher, cdiv

HEAD_DIMS = (16, 32, 64, 128)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LOG2E = 1.4426950408889634  # log2(e): e^x = 2^(x * log2 e)


@dataclass(frozen=True)
class Config:
    """One launch configuration: what a ``triton.Config`` holds."""

    block_m: int  # queries per program (a multiple of block_n: the causal diagonal is exact)
    block_n: int  # keys per step of the loop
    num_warps: int = 4
    num_stages: int = 3  # shared-memory buffers of the compiler's software pipeline

    def __str__(self) -> str:
        return (f"{self.block_m}x{self.block_n}, {self.num_warps} warps, "
                f"{self.num_stages} stages")


# The interpreter pays per program and per loop step, not per element: large blocks are cheap.
INTERPRETER = Config(32, 32)


def check_forward_config(config: Config) -> None:
    """A forward's tiles: ``block_m`` a multiple of ``block_n``. :func:`key_range` lets the blocks
    before ``q_start`` run unmasked; with 64 queries a program and 128 keys a step, the first
    step of queries 64-127 would take keys 64-127 unmasked, some of them later than the query
    (on an H100 that configuration computed wrong causal outputs): refused, not miscomputed."""
    if config.block_m % config.block_n:
        raise ValueError(f"config expected block_m a multiple of block_n (the causal diagonal "
                         f"falls inside one key block), got {config}")


def gpu_config(head_dim: int, dtype: torch.dtype, causal: bool) -> Config:
    """The configuration chosen on the H100 (``python -m kernels.attention.gpu_check`` times ten
    candidates; bf16, B=4, S=4096: D=128 64x64/4 warps 1.12 ms, 128x64/8 warps 1.14 ms,
    128x64/4 warps 2.59 ms (registers spill); D=64 128x64/8 warps best)."""
    if dtype == torch.float32:  # 4-byte tiles: fewer keys per step fit in shared memory
        return Config(64, 32, num_warps=4, num_stages=2)
    if head_dim >= 128:
        return Config(64, 64, num_warps=4, num_stages=3)
    return Config(128, 64, num_warps=8, num_stages=3)


@triton.jit
def key_range(q_start, seq_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    """(full_end, end): keys [0, full_end) need no mask for queries [q_start, q_start+BLOCK_M);
    keys [full_end, end) need one; keys from ``end`` on are never visible (causal skipping)."""
    whole_blocks = (seq_k // BLOCK_N) * BLOCK_N  # past it, the ragged last block
    if CAUSAL:
        # query i sees key j <= i: keys before q_start are seen by every query of the program
        full_end = tl.minimum(q_start, whole_blocks)
        end = tl.minimum(q_start + BLOCK_M, seq_k)
    else:
        full_end = whole_blocks
        end = seq_k
    return full_end, end


@triton.jit
def attend_block(acc, m_i, l_i, q, k, v, qk_scale, key_ok, MASKED: tl.constexpr,
                 IEEE: tl.constexpr):
    """One step of the loop: fold a block of keys (k, v) into the running (acc, m_i, l_i)."""
    if IEEE:  # fp32 inputs: exact products, not tf32
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
    if MASKED:
        s = tl.where(key_ok, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)  # log2 units: the scale folded in
    m_sub = m_new
    if MASKED:  # a row that has seen no key yet (a window's first block): -inf - -inf is NaN
        m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.math.exp2(s * qk_scale - m_sub[:, None])  # one FMA and one exp2 per score
    alpha = tl.math.exp2(m_i - m_sub)  # how much the old sums shrink (0 on the first block)
    l_i = l_i * alpha + tl.sum(p, 1)
    if IEEE:
        acc = tl.dot(p, v, acc * alpha[:, None], input_precision="ieee")
    else:
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_i


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
                         sqb, sqh, sqs, sqd, skb, skh, sks, skd,
                         svb, svh, svs, svd, sob, soh, sos, sod,
                         n_heads, group, seq_q, seq_k, window, qk_scale,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         CAUSAL: tl.constexpr, WINDOW: tl.constexpr, IEEE: tl.constexpr,
                         SAVE_LSE: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // n_heads).to(tl.int64)
    h = (bh % n_heads).to(tl.int64)
    kv_h = h // group  # grouped-query attention: `group` query heads share one K/V head
    q_start = start_m * BLOCK_M
    rows = q_start + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    row_ok = rows < seq_q

    q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :] * sqd,
                mask=row_ok[:, None], other=0.0)
    k_ptrs = k_ptr + b * skb + kv_h * skh + cols[:, None] * sks + dims[None, :] * skd
    v_ptrs = v_ptr + b * svb + kv_h * svh + cols[:, None] * svs + dims[None, :] * svd

    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    full_end, end = key_range(q_start, seq_k, CAUSAL, BLOCK_M, BLOCK_N)
    # a sliding window also hides the keys before it: blocks before `start` are skipped, and
    # those in [start, window_end) cross the window's edge (masked)
    start, window_end = 0, 0
    if WINDOW:
        start, window_end = window_range(q_start, window, BLOCK_M, BLOCK_N)
        window_end = tl.maximum(start, tl.minimum(window_end, full_end))
        # the window's edge: masked
        for start_n in range(start, window_end, BLOCK_N):
            acc, m_i, l_i = masked_step(acc, m_i, l_i, q, k_ptrs, v_ptrs, start_n, rows, cols,
                                         sks, svs, seq_k, window, qk_scale, CAUSAL, WINDOW,
                                         IEEE)
    # the blocks every query sees whole: no mask, no bounds check
    for start_n in range(window_end, full_end, BLOCK_N):
        k = tl.load(k_ptrs + start_n * sks)
        v = tl.load(v_ptrs + start_n * svs)
        acc, m_i, l_i = attend_block(acc, m_i, l_i, q, k, v, qk_scale, 0, False, IEEE)
    # the causal diagonal and the ragged last block: masked
    for start_n in range(tl.maximum(full_end, window_end), end, BLOCK_N):
        acc, m_i, l_i = masked_step(acc, m_i, l_i, q, k_ptrs, v_ptrs, start_n, rows, cols,
                                     sks, svs, seq_k, window, qk_scale, CAUSAL, WINDOW, IEEE)

    # without a window every real row has seen key 0, so l_i > 0; with one, a query past the
    # keys may see none (l_i = 0): its output is 0, as the reference gives; padded rows are
    # not stored
    if WINDOW:
        l_i = tl.where(l_i == 0.0, 1.0, l_i)  # and m_i stays -inf: lse2 = -inf
    o = acc / l_i[:, None]
    tl.store(o_ptr + b * sob + h * soh + rows[:, None] * sos + dims[None, :] * sod,
             o.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
    if SAVE_LSE:  # (what the backward reuses; inference has no use for it)
        tl.store(lse_ptr + bh.to(tl.int64) * seq_q + rows, m_i + tl.math.log2(l_i), mask=row_ok)


@triton.jit
def masked_step(acc, m_i, l_i, q, k_ptrs, v_ptrs, start_n, rows, cols, sks, svs, seq_k, window,
                 qk_scale, CAUSAL: tl.constexpr, WINDOW: tl.constexpr, IEEE: tl.constexpr):
    key = start_n + cols
    key_ok = (key < seq_k)[None, :]
    if CAUSAL:
        key_ok = key_ok & (key[None, :] <= rows[:, None])
    if WINDOW:  # query i sees key j when i - window < j <= i
        key_ok = key_ok & (key[None, :] > rows[:, None] - window)
    k = tl.load(k_ptrs + start_n * sks, mask=(key < seq_k)[:, None], other=0.0)
    v = tl.load(v_ptrs + start_n * svs, mask=(key < seq_k)[:, None], other=0.0)
    return attend_block(acc, m_i, l_i, q, k, v, qk_scale, key_ok, True, IEEE)


@triton.jit
def key_range_probe(q_starts_ptr, out_ptr, seq_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr):
    """Store what :func:`key_range` gives each program: the forward's two loop bounds."""
    i = tl.program_id(0)
    full_end, end = key_range(tl.load(q_starts_ptr + i), seq_k, CAUSAL, BLOCK_M, BLOCK_N)
    tl.store(out_ptr + 2 * i, full_end)
    tl.store(out_ptr + 2 * i + 1, end)


@triton.jit
def window_range(q_start, window, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(start, full_start): for queries [q_start, q_start+BLOCK_M) under a sliding window (query
    i sees key j when i - window < j <= i), keys before ``start`` (a multiple of BLOCK_N) are
    seen by none of them (skipped), keys from ``full_start`` on are inside every query's window
    (the window's edge needs no mask there)."""
    first = tl.maximum(q_start - window + 1, 0)  # the first key the first query sees
    start = (first // BLOCK_N) * BLOCK_N
    # the last query, q_start + BLOCK_M - 1, sees keys from q_start + BLOCK_M - window on
    last_first = tl.maximum(q_start + BLOCK_M - window, 0)
    full_start = tl.cdiv(last_first, BLOCK_N) * BLOCK_N
    return start, full_start


@triton.jit
def window_range_probe(q_starts_ptr, out_ptr, window, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr):
    """Store what :func:`window_range` gives each program."""
    i = tl.program_id(0)
    start, full_start = window_range(tl.load(q_starts_ptr + i), window, BLOCK_M, BLOCK_N)
    tl.store(out_ptr + 2 * i, start)
    tl.store(out_ptr + 2 * i + 1, full_start)


def window_ranges(seq_q: int, window: int, block_m: int, block_n: int,
                  device: str | None = None) -> list[tuple[int, int, int]]:
    """``[(q_start, start, full_start)]`` for every program: :func:`window_range` run by Triton."""
    device = device or ("cpu" if env.TRITON_INTERPRET else "cuda")
    starts = torch.arange(0, seq_q, block_m, dtype=torch.int32, device=device)
    out = torch.zeros(2 * len(starts), dtype=torch.int32, device=device)
    window_range_probe[(len(starts),)](starts, out, window, BLOCK_M=block_m, BLOCK_N=block_n)
    return [(s, a, f) for s, (a, f) in zip(starts.tolist(), out.view(-1, 2).tolist(),
                                            strict=True)]


def key_ranges(seq_q: int, seq_k: int, causal: bool, block_m: int, block_n: int,
               device: str | None = None) -> list[tuple[int, int, int]]:
    """``[(q_start, full_end, end)]`` for every program of a forward over ``seq_q`` queries:
    :func:`key_range` run by Triton (the interpreter on a CPU), for drawing and checking."""
    device = device or ("cpu" if env.TRITON_INTERPRET else "cuda")
    starts = torch.arange(0, seq_q, block_m, dtype=torch.int32, device=device)
    out = torch.zeros(2 * len(starts), dtype=torch.int32, device=device)
    key_range_probe[(len(starts),)](starts, out, seq_k, CAUSAL=causal, BLOCK_M=block_m,
                                    BLOCK_N=block_n)
    return [(s, f, e) for s, (f, e) in zip(starts.tolist(), out.view(-1, 2).tolist(),
                                            strict=True)]


def block_map(seq_q: int, seq_k: int, causal: bool, block_m: int, block_n: int,
              window: int | None = None):
    """A (query blocks × key blocks) grid: 2 where a block runs unmasked, 1 masked, 0 skipped
    (the forward's loops, with a sliding window of ``window`` keys if given)."""
    grid = torch.zeros(triton.cdiv(seq_q, block_m), triton.cdiv(seq_k, block_n),
                       dtype=torch.int8)
    edges = {}
    if window is not None:
        edges = {q: (a, f) for q, a, f in window_ranges(seq_q, window, block_m, block_n)}
    for q_start, full_end, end in key_ranges(seq_q, seq_k, causal, block_m, block_n):
        row = q_start // block_m
        start, window_end = edges.get(q_start, (0, 0))
        window_end = max(start, min(window_end, full_end))  # as the kernel combines them
        grid[row, start // block_n: window_end // block_n] = 1
        grid[row, window_end // block_n: full_end // block_n] = 2
        grid[row, max(full_end, window_end) // block_n: triton.cdiv(end, block_n)] = 1
    return grid


# -- what a machine and a problem allow ---------------------------------------------------------


def reason(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
           window: int | None = None) -> str | None:
    """Why this kernel cannot run the (validated) problem here, in plain words (None: it can)."""
    d = q.shape[-1]
    if d not in HEAD_DIMS:
        return f"head dims {', '.join(map(str, HEAD_DIMS))}; got q with D = {d}"
    if q.dtype not in DTYPES:
        return f"fp16, bf16 or fp32; got q of {str(q.dtype)[6:]}"
    if any(t.stride(-1) != 1 and t.shape[-1] > 1 for t in (q, k, v)):
        return "the head dim must be contiguous (stride 1 in the last dimension)"
    if env.TRITON_INTERPRET:
        if q.is_cuda:
            return "Triton's interpreter (TRITON_INTERPRET=1) reads CPU tensors; got q on cuda"
        if q.dtype == torch.bfloat16:
            return ("Triton's interpreter computes bf16 tl.dot wrongly (it converts bf16 after "
                    "loading); on a CPU use fp16 or fp32, on a GPU bf16 runs")
        return None
    if not q.is_cuda:
        return f"compiled Triton reads GPU memory: needs CUDA tensors; got q on {q.device.type}"
    major, minor = nvrtc.device_capability(q.get_device())  # read once per GPU
    if major < 8:
        return (f"needs sm_80+ (bf16 and tf32 tensor cores); this GPU is "
                f"sm_{major}{minor}")
    return None


def config_for(q: torch.Tensor, causal: bool) -> Config:
    if env.TRITON_INTERPRET:
        return INTERPRETER
    return gpu_config(q.shape[-1], q.dtype, causal)


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
            window: int | None = None, *, config: Config | None = None,
            save_lse: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(O, lse2)``: the attention output (B, H, Sq, D) in q's dtype, and the log-sum-exp of
    each query's scaled scores in base 2 (float32, (B, H, Sq)), which the backward reuses.
    ``k`` and ``v`` may have fewer heads than ``q`` (grouped-query attention: query head h reads
    K/V head ``h // (H_q // H_kv)``); ``window`` (with ``causal``): query i sees keys
    ``i - window < j <= i``. ``save_lse=False`` (inference: no backward will follow) returns
    ``(O, None)``: the kernel skips the log-sum-exp, and the call one allocation, which a tiny
    problem's host time notices (lesson 11's overhead table). Inputs are validated and checked
    by the caller (the registry, :mod:`autograd`)."""
    b, h, seq_q, d = q.shape
    seq_k = k.shape[2]
    if config is not None:
        check_forward_config(config)
    o = torch.empty((b, h, seq_q, d), dtype=q.dtype, device=q.device)
    lse = torch.empty((b, h, seq_q), dtype=torch.float32, device=q.device) if save_lse else None
    if o.numel() == 0:
        return o, lse
    if seq_k == 0:  # no keys: the weighted sum of nothing, as the eager reference gives
        return o.zero_(), lse.fill_(float("-inf")) if save_lse else None

    def make():  # once per problem (the key below): the configuration, grid and arguments
        c = config or config_for(q, causal)
        launch = {} if env.TRITON_INTERPRET else {"num_warps": c.num_warps,
                                                  "num_stages": c.num_stages}
        # the query heads of one group are neighbours along the grid's second axis, so their
        # programs run together and the group's K/V blocks come from L2 after the first read
        grid = (cdiv(seq_q, c.block_m), b * h)
        return grid, (*q.stride(), *k.stride(), *v.stride(), *o.stride(), h, h // k.shape[1],
                      seq_q, seq_k, window or 0, LOG2E / math.sqrt(d)), {
            "HEAD_DIM": d, "BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "CAUSAL": causal,
            "WINDOW": window is not None, "IEEE": q.dtype == torch.float32,
            "SAVE_LSE": save_lse, **launch}

    # (without SAVE_LSE the kernel never touches its lse pointer: o stands in for it)
    _launch((q.shape, k.shape, q.stride(), k.stride(), v.stride(), causal, window, config,
             save_lse), (q, k, v, o, lse if save_lse else o), make)
    return o, lse


# a problem's grid, strides and compiled kernel, worked out once (kernels/triton_launch.py)
_launch = Launcher(attention_fwd_kernel)
