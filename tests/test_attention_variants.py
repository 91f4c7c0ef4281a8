"""Grouped-query attention and sliding windows in the Triton attention (lesson 09): the forward
and the gradients against float64 eager autograd and SDPA (``enable_gqa=True``, an explicit
boolean mask), the blocks a window skips, and the words of every refusal.

On a CPU Triton runs in its interpreter at tiny shapes (fp32 and fp16); on a GPU the same tests
run compiled (``make test-gpu``), bf16 included."""

import pytest
import torch
import torch.nn.functional as F

import kernels
from course_utils import env
from kernels.attention import (
    attention_eager,
    autograd,
    naive,
    sdpa,
    triton_decode,
    triton_fwd,
    visible,
)
from kernels.attention.hopper import bwd as hopper_bwd
from kernels.attention.hopper import fwd as hopper

DEVICE = "cuda" if env.HAS_CUDA and not env.TRITON_INTERPRET else "cpu"
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else [])
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}

# (B, H, H_kv, Sq, Sk, D, causal, window): groups of 1, 2, 4, 8; Sq != Sk both ways; ragged
# lengths; D = 64 and 16; windows narrower than a block, wider than several, and one that leaves
# the last queries (past the keys) with nothing to see
SHAPES = [
    (2, 4, 4, 70, 70, 64, False, None),
    (1, 4, 2, 77, 77, 64, True, None),
    (2, 8, 2, 40, 97, 16, True, None),
    (1, 8, 1, 97, 40, 64, True, None),
    (1, 8, 8, 33, 65, 16, False, None),
    (1, 4, 4, 150, 150, 64, True, 40),
    (1, 4, 2, 70, 90, 64, True, 9),
    (1, 8, 1, 130, 130, 16, True, 2),
    (1, 2, 1, 100, 33, 16, True, 5),
    (1, 4, 2, 65, 200, 64, True, 100),
]


def _problem(b, h, h_kv, sq, sk, d, dtype):
    q = torch.randn(b, h, sq, d, device=DEVICE).to(dtype)
    k, v = (torch.randn(b, h_kv, sk, d, device=DEVICE).to(dtype) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_forward_and_gradients_match_float64_and_sdpa(shape, dtype):
    b, h, h_kv, sq, sk, d, causal, window = shape
    q, k, v = _problem(b, h, h_kv, sq, sk, d, dtype)
    _expect_near_float64(autograd.gradient_errors(q, k, v, causal, window), dtype)


def _expect_near_float64(found: dict, dtype: torch.dtype) -> None:
    """Triton's output and gradients from :func:`autograd.gradient_errors`: each at most the
    tolerance, or (16-bit) within 2x of what SDPA itself reaches."""
    for name, err in found["triton"].items():
        assert err == err, f"{name} is NaN"
        assert err <= max(TOL[dtype], 2 * found["sdpa"][name]), (name, found)


def test_gqa_is_sdpa_with_enable_gqa_and_repeated_heads():
    q, k, v = _problem(1, 8, 2, 50, 60, 32, torch.float32)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    repeated = [t.repeat_interleave(4, dim=1) for t in (k, v)]
    for got in (autograd.attention(q, k, v, True), autograd.attention(q, *repeated, True),
                attention_eager(q, k, v, True)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_window_is_sdpa_with_an_explicit_mask():
    q, k, v = _problem(1, 2, 2, 80, 80, 64, torch.float32)
    mask = visible(80, 80, True, 17, device=DEVICE)
    assert mask.sum(-1).tolist() == [min(i + 1, 17) for i in range(80)]  # i - 17 < j <= i
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(autograd.attention(q, k, v, True, 17), want, atol=1e-5,
                               rtol=1e-5)


def test_queries_that_see_no_key_give_zeros_and_no_nan():
    q, k, v = _problem(1, 2, 1, 100, 33, 16, torch.float32)
    out, lse2 = triton_fwd.forward(q, k, v, True, 5)
    assert (out[:, :, 37:] == 0).all() and torch.isinf(lse2[:, :, 37:]).all()
    assert not out[:, :, :37].isnan().any() and (out[:, :, :37] != 0).any()


@pytest.mark.parametrize("window", [1, 7, 32, 33, 90, 1000])
@pytest.mark.parametrize("blocks", [(32, 32), (64, 32), (128, 64)])
def test_a_window_visits_the_fewest_blocks_and_masks_only_its_edges(window, blocks):
    bm, bn = blocks
    sq = sk = 300
    grid = triton_fwd.block_map(sq, sk, True, bm, bn, window)
    # a program's rows past Sq count as queries (its last query is q_start + BLOCK_M - 1, as
    # key_range has it): cheaper bounds, and at most one block more for the last program
    seen = visible(grid.shape[0] * bm, sk, True, window)
    for r in range(grid.shape[0]):
        for c in range(grid.shape[1]):
            tile = seen[r * bm:(r + 1) * bm, c * bn:(c + 1) * bn]
            # keys past Sk need a mask
            whole = tile.all() and tile.shape[1] == bn
            want = 2 if whole else 1 if tile.any() else 0
            assert grid[r, c] == want, (r, c, grid[r].tolist())


def test_malformed_variants_raise_naming_the_argument():
    q, k, v = _problem(1, 6, 4, 8, 8, 16, torch.float32)
    with pytest.raises(ValueError, match="attention: k expected a number of heads that divides"):
        autograd.attention(q, k, v)
    q, k, v = _problem(1, 4, 2, 8, 8, 16, torch.float32)
    for bad in (0, -3, True, 2.5, "8"):
        with pytest.raises(ValueError, match="attention: window expected None or a number"):
            autograd.attention(q, k, v, True, bad)
    with pytest.raises(ValueError, match="attention: window expected causal=True"):
        autograd.attention(q, k, v, False, 8)


def test_providers_without_a_variant_refuse_it_in_words():
    q, k, v = _problem(1, 4, 2, 16, 16, 64, torch.float16)
    gqa = "one K/V head per query head (no grouped-query attention); got q with 4 heads, k with 2"
    assert naive.reason(q, k, v) == gqa
    assert hopper_bwd.reason(q, k, v).startswith(f"the Hopper backward takes {gqa} (")
    assert "grouped" not in (hopper.reason(q, k, v) or "")  # lesson 18's forward takes it
    assert sdpa.reason("efficient", q, k, v) == f"the efficient backend takes {gqa}"
    assert sdpa.reason("flash", q, k, v) is None and sdpa.reason("cudnn", q, k, v) is None
    q, k, v = _problem(1, 2, 2, 16, 16, 64, torch.float16)
    win = "no sliding window; got window = 8"
    assert naive.reason(q, k, v, True, 8) == win
    assert hopper_bwd.reason(q, k, v, True, 8).startswith(f"the Hopper backward takes {win} (")
    assert "window" not in (hopper.reason(q, k, v, True, 8) or "")
    assert sdpa.reason("flash", q, k, v, True, 8) == f"the flash backend takes {win}"
    assert sdpa.reason("cudnn", q, k, v, True, 8) == f"the cudnn backend takes {win}"
    assert sdpa.reason("efficient", q, k, v, True, 8) is None
    assert triton_fwd.reason(q, k, v, True, 8) is None or DEVICE == "cpu" and q.is_cuda


def test_the_registry_picks_only_providers_that_run_the_variant():
    q, k, v = _problem(1, 4, 2, 16, 16, 64, torch.float32)
    names = {kern.provider for kern in kernels.get_kernels("attention", q, k, v, True, 8)}
    assert "triton" in names and "eager" in names
    assert not names & {"naive", "wgmma", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient"}
    for kern, why in kernels.explain("attention", q, k, v, True, 8):
        if kern.provider in ("naive", "wgmma"):
            assert why, kern.name


def test_the_variants_bench_counts_the_pairs_a_window_shows():
    from kernels.attention import bench_variants, visible

    for s, window in ((1, None), (7, None), (7, 3), (100, 40), (40, 100), (64, 1)):
        shown = int(visible(s, s, True, window).sum())
        assert bench_variants.visible_pairs(s, window) == shown, (s, window)


def test_the_variants_bench_reads_its_targets_from_records():
    from course_utils.results import Record
    from kernels.attention import bench_variants as bv

    what = "GQA fwd bf16 B=2 Hq=32 Hkv=8 S=4096 D=128 causal"
    records = [Record(bv.LESSON, f"triton {what}", 300.0, "TFLOP/s", peer=250.0,
                      peer_what="the best SDPA backend that runs it (sdpa_cudnn), same run"),
               Record(bv.LESSON, f"sdpa_cudnn {what}", 250.0, "TFLOP/s", peer=250.0,
                      peer_what="the best SDPA backend that runs it (sdpa_cudnn), same run"),
               Record(bv.LESSON, "triton GQA decode bf16 B=8 Hq=32 Hkv=8 Sk=8192 D=128", 2000.0,
                      "GB/s", 3000.0, "device copy bandwidth, same run")]
    lines = bv.verdicts(records)
    assert len(lines) == 2  # ours only
    assert "1.20×: as expected" in lines[0] and "67%: NOT here" in lines[1]
    # what the bench printed once for Sk = 32768: a rate no memory can give is no success
    broken = Record(bv.LESSON, "triton GQA decode bf16 B=8 Hq=32 Hkv=8 Sk=32768 D=128", 11483.0,
                    "GB/s", 3006.0, "device copy bandwidth, same run")
    (line,) = bv.verdicts([broken])
    assert "382% of copy is impossible" in line and "as expected" not in line


def test_short_prefill_is_judged_against_nine_tenths_of_cudnn():
    from course_utils.results import Record
    from kernels.attention import bench_variants as bv

    what = "triton short fwd bf16 B=1 H=32 S=512 D=128 causal GPU alone"
    peer = "SDPA's cuDNN backend, replayed from a CUDA graph, same run"
    (met,) = bv.verdicts([Record(bv.LESSON, what, 92.0, "TFLOP/s", peer=100.0, peer_what=peer)])
    (missed,) = bv.verdicts([Record(bv.LESSON, what, 88.0, "TFLOP/s", peer=100.0,
                                    peer_what=peer)])
    assert "≥ 0.9×" in met and "0.92×: as expected" in met
    assert "0.88×: NOT here" in missed


def test_the_decode_problem_is_one_query_that_sees_every_key():
    """The bench once timed decoding with causal=True: top-left aligned, one query sees key 0
    alone, so every provider read one key while the label and the byte count said 1 GiB."""
    from kernels.attention import bench_variants as bv

    q, k, v, causal = bv.decode_problem(2, 8, 2, 100, 16, device="cpu", dtype=torch.float32)
    assert q.shape == (2, 8, 1, 16) and k.shape == v.shape == (2, 2, 100, 16)
    everything = 2 * k.numel() * k.element_size()
    assert bv.bytes_needed(q, k, v, causal) == everything
    assert bv.bytes_needed(q, k, v, True) == everything // 100  # the trap: one key of 100
    # and the output depends on the last key, as a decoding step's must
    v2 = v.clone()
    v2[:, :, -1] += 1.0
    assert not torch.equal(attention_eager(q, k, v, causal), attention_eager(q, k, v2, causal))


def test_the_varlen_lengths_are_ragged_and_sum_to_about_the_total():
    from kernels.attention import bench_variants as bv

    lengths = bv.varlen_lengths(16, 32768)
    assert len(lengths) == 16 and all(n % 64 for n in lengths)
    assert abs(sum(lengths) - 32768) <= 32 and len(set(lengths)) > 8


# -- PackGQA: decoding with the group's query heads packed into one program ---------------------

# (B, H, H_kv, Sq, Sk, D, causal, window): groups of 1, 2, 4, 8; one query and three; ragged Sk;
# D = 16, 64, 128; causal (top-left: query i sees keys <= i), a window, and queries that see
# no key at all
PACKED = [
    (2, 4, 4, 1, 70, 64, False, None),
    (1, 4, 2, 3, 77, 64, False, None),
    (2, 8, 2, 1, 97, 16, True, None),
    (1, 8, 1, 3, 40, 128, False, None),
    (1, 16, 2, 3, 65, 64, True, 2),
    (1, 4, 1, 3, 1, 16, True, 1),
    (3, 2, 1, 1, 33, 16, False, None),
]


@pytest.mark.parametrize("shape", PACKED, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_packed_forward_matches_float64_and_the_dense_one(shape, dtype):
    b, h, h_kv, sq, sk, d, causal, window = shape
    q, k, v = _problem(b, h, h_kv, sq, sk, d, dtype)
    assert triton_decode.packs(q, k)
    out, lse2 = triton_decode.forward(q, k, v, causal, window)
    dense_out, dense_lse2 = triton_fwd.forward(q, k, v, causal, window)
    exact = attention_eager(*(t.double() for t in (q, k, v)), causal, window)
    err = (out.double() - exact).abs().max() / exact.abs().max().clamp_min(1e-30)
    assert err <= TOL[dtype], err
    # the same log-sum-exp (the backward reads it): -inf where a query sees no key
    torch.testing.assert_close(lse2, dense_lse2, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(out, dense_out, atol=2 * TOL[dtype], rtol=2 * TOL[dtype])


@pytest.mark.parametrize("shape", PACKED[1:6:2], ids=str)
def test_gradients_through_the_packed_forward(shape):
    b, h, h_kv, sq, sk, d, causal, window = shape
    q, k, v = _problem(b, h, h_kv, sq, sk, d, torch.float32)
    _expect_near_float64(autograd.gradient_errors(q, k, v, causal, window), torch.float32)


def test_splits_of_the_keys_combine_to_one():
    q, k, v = _problem(2, 8, 2, 3, 130, 16, torch.float32)
    whole = triton_decode.forward(q, k, v, split_keys=256)  # one split
    for keys in (16, 48, 64):  # 9, 3 and 3 splits, the last ragged
        for got, want in zip(triton_decode.forward(q, k, v, split_keys=keys), whole, strict=True):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    # causal with 3 queries: every split past key 2 sees nothing, and weighs nothing
    torch.testing.assert_close(triton_decode.forward(q, k, v, True, split_keys=16)[0],
                               attention_eager(q, k, v, True), atol=1e-5, rtol=1e-5)


def test_autograd_packs_by_shape(monkeypatch):
    calls = []
    for module in (triton_decode, triton_fwd):
        real = module.forward
        monkeypatch.setattr(module, "forward",
                            lambda *a, real=real, name=module.__name__, **kw:
                            calls.append(name.rsplit(".", 1)[1]) or real(*a, **kw))
    for h, h_kv, sq, path in ((32, 8, 1, "triton_decode"), (8, 1, 8, "triton_decode"),
                              (8, 1, 9, "triton_fwd"), (4, 4, 64, "triton_decode"),
                              (4, 4, 65, "triton_fwd")):
        q, k, v = _problem(1, h, h_kv, sq, 8, 16, torch.float32)
        calls.clear()
        autograd.attention(q, k, v)
        assert calls == [path], (h, h_kv, sq, calls)
    with pytest.raises(ValueError, match="triton_decode.forward: q expected group · Sq <= 64"):
        triton_decode.forward(*_problem(1, 8, 1, 9, 8, 16, torch.float32))
