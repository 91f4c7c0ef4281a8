"""fp8 attention (kernels/scaled_attention): the quantiser, the op's checks, and the Triton forward
(Triton's interpreter on a CPU, compiled on an sm_89+ GPU) against float64 attention of its own
dequantised inputs, within a bound derived from its one extra rounding, and against bf16
attention of the original inputs, within what quantising costs. The kernel matrix test runs the
op's cases too (tests/test_kernel_matrix.py); edge shapes are in tests/test_supports_edges.py."""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

import kernels
from course_utils import env
from kernels.attention import attention_eager, visible
from kernels.scaled_attention import K_SIZES, Q_SIZES, V_SIZES, sized, triton_fwd
from kernels.scaled_attention.quantize import (
    E4M3,
    E4M3_MAX,
    SCALE_BLOCK,
    SCALE_FLOOR,
    dequantize,
    e4m3_grid,
    quantize_blocks,
    quantize_blocks_torch,
    quantize_qkv,
)

DEVICE = env.DEFAULT_DEVICE
TRITON = kernels.get_kernel("scaled_attention", "triton")


def _runs_here() -> str | None:
    return TRITON.unavailable() or (None if DEVICE == "cpu" or torch.cuda.get_device_capability()
                                    >= (8, 9) else "fp8 tensor cores need sm_89+")


needs_kernel = pytest.mark.skipif(_runs_here() is not None, reason=str(_runs_here()))


def _originals(b, h, sq, sk, d, scale=1.0, seed=0):
    """Float q, k, v whose 128-row blocks differ in size (as the op's cases)."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q = sized(scale * torch.randn(b, h, sq, d, device=DEVICE, generator=g), Q_SIZES)
    k = sized(scale * torch.randn(b, h, sk, d, device=DEVICE, generator=g), K_SIZES)
    v = sized(torch.randn(b, h, sk, d, device=DEVICE, generator=g), V_SIZES)
    return q, k, v


def _weights(q, k, causal):
    """The float64 softmax weights of attention of q and k (the reference's P)."""
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~visible(*s.shape[-2:], True, device=s.device), float("-inf"))
    return torch.softmax(s, dim=-1)


def rounding_error(out, q, k, v, q_scale, k_scale, v_scale, causal) -> str | None:
    """What is wrong with ``out`` as the kernel's answer, or None. The kernel's only extra
    rounding is P's: each weight ``w_j = P_ij`` reaches ``P V`` as e4m3. The kernel shifts the
    weights by 2^8 first, so a weight of at least 2^-14 of its row's largest, ``w_max``, is in
    e4m3's normal range and off by at most 2^-4 of itself (half a step of 3 mantissa bits); a
    smaller one is off by at most half a subnormal step, ``2^-18 · w_max``, and never by more
    than itself (it rounds to 0 at worst). With ``e_j = max(2^-4 w_j, min(w_j, 2^-18 w_max))``:

        |O - O_exact|_id <= Σ_j e_j |v_jd| + 2^-8 |O_exact|_id,

    the last term the output's rounding to bf16 (half a step, 2^-9, on a GPU; the interpreter
    truncates: a whole step) and fp32's sums, far smaller. (The online softmax rounds a weight
    against the running maximum, not the row's: a larger value, so no worse.) The bound holds
    only if every weight rounds the same way at its worst; random roundings cancel, each ``ε_j``
    of RMS at most ``2^-4/√3``, so ``σ_id = 2^-4/√3 · sqrt(Σ_j w_j² v_jd²)`` and the RMS of
    ``ΔO / σ`` over a problem stays below 1 unless the rounding is biased (P truncated, say)."""
    if not torch.isfinite(out).all():
        return "not finite"
    meant = [dequantize(x, s) for x, s in ((q, q_scale), (k, k_scale), (v, v_scale))]
    w = _weights(*meant[:2], causal)
    exact = w @ meant[2]
    diff = (out.double() - exact).abs()
    if not diff.numel():
        return None
    w_max = w.amax(dim=-1, keepdim=True)
    e = torch.maximum(2.0**-4 * w, torch.minimum(w, 2.0**-18 * w_max))
    bound = e @ meant[2].abs() + 2.0**-8 * exact.abs() + 1e-6
    if (worst := (diff / bound).max().item()) > 1:
        return f"over the bound: {worst:.2f} of it at worst"
    sigma = 2.0**-4 / math.sqrt(3) * ((w**2) @ meant[2]**2).sqrt() + 2.0**-8 * exact.abs() + 1e-6
    if (rms := (diff / sigma).pow(2).mean().sqrt().item()) > 1:
        return f"biased: the RMS of the error is {rms:.2f} σ"
    return None


# -- the quantiser --------------------------------------------------------------------------------


def test_each_block_gets_its_own_scale_and_round_trips():
    x = torch.randn(2, 3, 300, 64, dtype=torch.float64).float().to(DEVICE)
    x[1, 2, 140, 5] = 1e4  # one outlier: only block 1 of (1, 2) pays for it
    x8, scale = quantize_blocks(x)
    assert x8.dtype == E4M3 and x8.shape == x.shape and x8.is_contiguous()
    assert scale.dtype == torch.float32 and scale.shape == (2, 3, 3) and scale.is_contiguous()
    assert scale[1, 2, 1].item() == pytest.approx(1e4 / E4M3_MAX)
    assert scale[1, 2, 0].item() == pytest.approx(scale[1, 1, 0].item(), rel=0.5)  # no outlier
    # each block's largest value lands on e4m3's largest
    tiles = torch.nn.functional.pad(x8.float().abs(), (0, 0, 0, 84)).reshape(2, 3, 3, 128, 64)
    assert (tiles.amax(dim=(3, 4)) == E4M3_MAX).all()
    back, x = dequantize(x8, scale).cpu(), x.cpu()
    rows = scale.double().cpu().repeat_interleave(SCALE_BLOCK, -1)[..., :300, None]
    # half a step: 2^-4 of the value in e4m3's normal range, 2^-10 of the scale below 2^-6
    assert ((back - x.double()).abs() <= torch.maximum(2.0**-4 * x.double().abs(),
                                                       2.0**-10 * rows)).all()


def test_an_all_zero_block_gets_the_floor_and_stores_zeros():
    x = torch.randn(1, 2, 256, 32, device=DEVICE)
    x[0, 1, 128:] = 0
    x8, scale = quantize_blocks(x)
    assert scale[0, 1, 1] == SCALE_FLOOR and (x8[0, 1, 128:].float() == 0).all()
    assert torch.isfinite(dequantize(x8, scale)).all()


def test_v_is_stored_keys_contiguous_q_and_k_head_dim_contiguous():
    q, k, v = (torch.randn(2, 3, 70, 64, device=DEVICE) for _ in range(3))
    q8, k8, v8, *scales = quantize_qkv(q, k, v)
    assert q8.is_contiguous() and k8.is_contiguous()
    assert v8.shape == v.shape and v8.stride() == (3 * 64 * 70, 64 * 70, 1, 70)
    assert torch.equal(v8.float(), quantize_blocks(v)[0].float())  # same values, other layout


@pytest.mark.parametrize(("shape", "dtype", "keys_contiguous"), [
    ((2, 3, 300, 64), torch.bfloat16, False), ((1, 2, 300, 64), torch.bfloat16, True),
    ((1, 1, 128, 128), torch.float32, True), ((2, 1, 77, 24), torch.float16, False),
    ((1, 2, 0, 32), torch.bfloat16, False)])
def test_the_kernel_quantises_as_the_reference_does_bit_for_bit(shape, dtype, keys_contiguous):
    torch.manual_seed(3)
    x = (torch.randn(shape) * torch.logspace(-3, 2, shape[2])[:, None]).to(dtype).to(DEVICE)
    if x.numel():
        x[0, 0, :20] = 0  # part of a block zero, and a block's worth of tiny values
        x[-1, -1, -1] *= 50  # an outlier (finite in float16)
    x8, scale = quantize_blocks(x, keys_contiguous=keys_contiguous)
    ref8, ref_scale = quantize_blocks_torch(x, keys_contiguous=keys_contiguous)
    assert x8.stride() == ref8.stride() and x8.device == x.device
    assert torch.equal(scale, ref_scale)
    assert torch.equal(x8.view(torch.uint8), ref8.view(torch.uint8)) or torch.equal(
        x8.float(), ref8.float())  # (the interpreter may write -0 as +0)


def test_quantize_blocks_names_a_bad_input():
    for bad in (torch.randn(3, 70, 64), torch.ones(1, 2, 3, 4, dtype=torch.int32), [1.0]):
        with pytest.raises(ValueError, match=r"quantize_blocks: x expected a floating-point "
                                             r"\(B, H, S, D\) tensor"):
            quantize_blocks(bad)


# -- the op's checks ------------------------------------------------------------------------------


def test_bad_problems_raise_value_errors_naming_the_argument():
    q8, k8, v8, qs, ks, vs = quantize_qkv(*(torch.randn(1, 2, 200, 64) for _ in range(3)))
    eager = kernels.get_kernel("scaled_attention", "eager")
    for args, message in (
            ((q8.float(), k8, v8, qs, ks, vs), r"q expected float8_e4m3fn \(quantize_qkv"),
            ((q8, k8, v8[:, :, :100], qs, ks, vs), r"v expected the shape of k"),
            ((q8, k8, v8, qs, ks[..., :1], vs), r"k_scale expected float32 of shape \(1, 2, 2\)"),
            ((q8, k8, v8, qs.double(), ks, vs), r"q_scale expected float32"),
            ((q8, k8, v8, qs, ks, vs, 1), r"causal expected True or False"),
            ((q8[0], k8, v8, qs, ks, vs), r"q expected a 4-D tensor")):
        with pytest.raises(ValueError, match=rf"scaled_attention: {message}"):
            eager(*args)


def test_the_triton_kernel_says_what_it_cannot_run():
    q, k, v = (torch.randn(1, 2, 40, 64) for _ in range(3))
    q8, k8, v8, *scales = quantize_qkv(q, k, v)
    assert "keys-contiguous" in triton_fwd.reason(q8, k8, v8.contiguous(), *scales)
    assert "head dims 32, 64, 128; got q with D = 16" in triton_fwd.reason(
        *quantize_qkv(*(torch.randn(1, 2, 40, 16) for _ in range(3))))
    gqa = quantize_qkv(q, k[:, :1], v[:, :1])
    assert "one K/V head per query head" in triton_fwd.reason(*gqa)
    wide = torch.empty(1, 2, 2, device=q8.device)[..., :1]  # (1, 2, 1) every other float
    assert "contiguous" in triton_fwd.reason(q8, k8, v8, wide.copy_(scales[0]), *scales[1:])


# -- the kernel -----------------------------------------------------------------------------------

PROBLEMS = {  # (B, H, Sq, Sk, D, causal, score scale)
    "ragged 1x2x200x64": (1, 2, 200, 200, 64, False, 1.0),
    "causal Sq<Sk 1x2x100x300x64": (1, 2, 100, 300, 64, True, 1.0),
    "causal Sq>Sk 1x2x300x130x64": (1, 2, 300, 130, 64, True, 1.0),
    "one block 1x1x16x64": (1, 1, 16, 16, 64, False, 1.0),
    "large scores causal 1x1x256x64": (1, 1, 256, 256, 64, True, 3.0),
    "D=128 2x2x160x128": (2, 2, 160, 160, 128, False, 1.0),
    # a long row of sharp scores: most weights far below the largest, where the shift counts
    "peaked 1x1x32x2048x64": (1, 1, 32, 2048, 64, False, 2.5),
}


@needs_kernel
@pytest.mark.parametrize("label", PROBLEMS)
def test_the_kernel_is_within_its_rounding_of_float64(label):
    b, h, sq, sk, d, causal, scale = PROBLEMS[label]
    args = (*quantize_qkv(*_originals(b, h, sq, sk, d, scale)), causal)
    out = TRITON(*args)
    assert out.dtype == torch.bfloat16 and out.shape == (b, h, sq, d)
    assert rounding_error(out, *args) is None


def test_a_tile_shorter_than_its_key_step_is_refused_not_miscomputed():
    # 64 queries a program, 128 keys a step: on an H100 the tuning sweep found this configuration
    # wrong on causal problems (keys past the query taken unmasked); both forwards refuse it
    from kernels.attention import triton_fwd as bf16_fwd

    config = triton_fwd.Config(64, 128, num_warps=4, num_stages=3)
    args = (*quantize_qkv(*_originals(1, 1, 256, 256, 64)), True)
    with pytest.raises(ValueError, match="block_m a multiple of block_n"):
        triton_fwd.forward(*args, config=config)
    q = torch.randn(1, 1, 256, 64)
    with pytest.raises(ValueError, match="block_m a multiple of block_n"):
        bf16_fwd.forward(q, q, q, True, config=config)


@needs_kernel
def test_an_all_zero_key_block_gives_finite_right_answers():
    q, k, v = _originals(1, 2, 64, 300, 64)
    k[:, :, 128:256] = 0
    v[:, :, 128:256] = 0
    args = (*quantize_qkv(q, k, v), False)
    assert args[4][0, 0, 1] == SCALE_FLOOR
    out = TRITON(*args)
    assert torch.isfinite(out).all() and rounding_error(out, *args) is None


@needs_kernel
@pytest.mark.parametrize("causal", [False, True])
def test_against_bf16_attention_of_the_original_inputs(causal):
    """What quantising costs. Each e4m3 input is off by a relative ``ε`` of RMS at most
    ``2^-4/√3 ≈ 0.036``; a score ``q·k/√D`` moves by ``≈ 0.036·√2·|s|`` (q's and k's errors), about
    0.05 for scores of unit spread, which shifts the weights by ~5 %; V's own rounding and P's
    add ~0.036 each, so the output's RMS error is about ``sqrt(0.05² + 2·0.036²) ≈ 0.07`` of
    its RMS: at most 0.1. bf16 attention of the same inputs is ~15× closer (8 mantissa bits,
    not 4); the test checks that too, so that the comparison measures fp8 and not the setup."""
    q, k, v = (torch.randn(1, 2, 256, 64, device=DEVICE, generator=torch.Generator(
        device=DEVICE).manual_seed(i)) for i in range(3))
    exact = attention_eager(q.double(), k.double(), v.double(), causal)
    bf16 = attention_eager(q.bfloat16(), k.bfloat16(), v.bfloat16(), causal).double()
    fp8 = TRITON(*quantize_qkv(q, k, v), causal).double()

    def rms(x):
        return x.pow(2).mean().sqrt().item()

    assert rms(fp8 - exact) <= 0.1 * rms(exact)
    assert rms(bf16 - exact) <= 0.01 * rms(exact)


@triton.jit
def cast_to_e4m3(p_ptr, out_ptr, n, BLOCK: tl.constexpr, INTERPRETED: tl.constexpr):
    """``out = p`` cast to e4m3 as the kernel casts P."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    p = tl.load(p_ptr + i, mask=i < n, other=0.0)
    if INTERPRETED:
        p = e4m3_grid(p)
    tl.store(out_ptr + i, p.to(tl.float8e4nv), mask=i < n)


@needs_kernel
def test_the_cast_to_e4m3_rounds_to_nearest_even_as_torch_does():
    """The interpreter's fp32 -> e4m3 cast loses the carry out of the mantissa (126.2 -> 64) and
    truncates small values; the kernel rounds P to e4m3's grid first there (e4m3_grid). On a GPU
    the cast is the hardware's. Either way it must equal torch's rounding of the same values."""
    g = torch.Generator().manual_seed(0)
    steps = 2.0 ** torch.arange(-9, 9).float()  # every binade, its values, and the ties
    grid = torch.cat([torch.arange(0, 2**-6, 2**-9), *(b * (1 + torch.arange(8) / 8)
                                                        for b in steps[3:])])
    ties = (grid[1:] + grid[:-1]) / 2
    p = torch.cat([grid, ties, torch.rand(20000, generator=g) * 256,
                   2.0 ** (-torch.rand(20000, generator=g) * 20)])
    p = p[p <= E4M3_MAX].to(DEVICE)  # (P <= 256 in the kernel)
    out = torch.empty(p.shape, dtype=E4M3, device=DEVICE)
    cast_to_e4m3[(triton.cdiv(p.numel(), 1024),)](p, out, p.numel(), BLOCK=1024,
                                                  INTERPRETED=env.TRITON_INTERPRET)
    assert torch.equal(out.float(), p.to(E4M3).float())


# -- the checks above catch wrong kernels ---------------------------------------------------------

MUTANTS = {  # what a wrong kernel does: (the line of triton_fwd.py, what it becomes)
    "P not shifted before its cast": ("(m_new - P_SHIFT)[:, None]", "m_new[:, None]"),
    "the causal diagonal off by one": ("key[None, :] <= rows[:, None]",
                                       "key[None, :] < rows[:, None]"),
    "another block's K scale": ("scale = q_scale * tl.load(k_scales + block)",
                                "scale = q_scale * tl.load(k_scales + block // 2)"),
    "V's scale dropped": ("pv * tl.load(v_scales + block)", "pv"),
    "the ragged end unmasked": ("key_ok = (key < seq_k)[None, :]",
                                "key_ok = (key < seq_k + 16)[None, :]"),
    "P truncated to e4m3": ("p = e4m3_grid(p)",
                            "p = (p.to(tl.int32, bitcast=True) & -0x100000).to(tl.float32, "
                            "bitcast=True)"),
}


def _mutant(tmp_path: Path, name: str):
    """triton_fwd.py with one mutation, imported as its own module (registration left out)."""
    source = Path(triton_fwd.__file__).read_text().split("\n@register(")[0]
    old, new = MUTANTS[name]
    assert source.count(old) == 1, f"{name}: the line {old!r} is not in triton_fwd.py once"
    slug = re.sub(r"\W+", "_", name)
    path = tmp_path / f"mutant_{slug}.py"
    path.write_text(source.replace(old, new))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_kernel
@pytest.mark.parametrize("name", MUTANTS)
def test_a_wrong_kernel_fails_the_checks(tmp_path, name):
    if name == "P truncated to e4m3" and not env.TRITON_INTERPRET:
        pytest.skip("compiled, P is cast by the GPU's cvt.rn (e4m3_grid runs in the interpreter)")
    module = _mutant(tmp_path, name)
    found = []
    for label in ("ragged 1x2x200x64", "causal Sq>Sk 1x2x300x130x64", "peaked 1x1x32x2048x64",
                  "one block 1x1x16x64"):
        b, h, sq, sk, d, causal, scale = PROBLEMS[label]
        args = (*quantize_qkv(*_originals(b, h, sq, sk, d, scale)), causal)
        found.append(rounding_error(module.forward(*args), *args))
    assert any(found), f"{name}: the rounding bound passed a wrong kernel"


# -- the benchmark's bookkeeping (its timing runs on a GPU only) ----------------------------------


def test_the_benchmark_judges_fp8_against_our_bf16_forward():
    from kernels.scaled_attention import bench

    shape, ceilings = (2, 16, 8192, 128), {"fp8": 1400.0, "bf16": 790.0, "copy": 3000.0}
    for bf16_ms, holds in ((1.6, True), (1.2, False)):
        ms = {bench.FP8: 1.0, bench.BF16: bf16_ms, bench.CUDNN: 1.1, bench.QUANTIZE: 0.25}
        found = bench.records(shape, False, ms, ceilings)
        fp8 = next(r for r in found if r.what.startswith(bench.FP8))
        assert fp8.value / fp8.peer == pytest.approx(bf16_ms, rel=1e-3)
        assert fp8.ceiling == 1400.0 and "our bf16 Triton forward" in fp8.peer_what
        quantised = next(r for r in found if r.what.startswith(bench.QUANTIZE))
        assert quantised.unit == "GB/s" and quantised.value == pytest.approx(
            3 * 2 * 16 * 8192 * 128 * 3 / 0.25e-3 / 1e9, rel=1e-3)
        (line,) = bench.verdicts(found)
        assert ("as expected" in line) == holds and f"{bf16_ms:.2f}×" in line
    ms = {bench.FP8: "fp8 tensor cores need sm_89+", bench.BF16: 1.0, bench.CUDNN: 1.0,
          bench.QUANTIZE: 0.25}
    assert bench.verdicts(bench.records(shape, True, ms, ceilings)) == []
