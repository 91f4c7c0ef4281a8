"""Lesson 09's kernels beyond the matrix test: gradients, the log-sum-exp, refusals with reasons,
the online softmax on its own, and (on a GPU) SDPA's gradients and memory that grows with S.

On a CPU everything Triton runs in the interpreter at tiny shapes (fp32 and fp16: the
interpreter computes bf16 ``tl.dot`` wrongly)."""

import math

import pytest
import torch

import kernels
from course_utils import env, results
from kernels.attention import (
    attention_eager,
    autograd,
    bench,
    naive,
    online_softmax,
    sdpa,
    triton_fwd,
)
from kernels.registry import OPS

DEVICE = "cuda" if env.HAS_CUDA and not env.TRITON_INTERPRET else "cpu"
CASES = {c.label: c for c in OPS["attention"].cases}


def _check_grads(q, k, v, causal, atol, rtol, window=None):
    do = torch.randn(q.shape, device=q.device).to(q.dtype)
    got = autograd.gradients(autograd.attention, q, k, v, causal, do, window)
    want = autograd.gradients(attention_eager, *(t.double() for t in (q, k, v)), causal,
                              do.double(), window)
    for name in got:
        g, w = got[name], want[name]
        assert not g.isnan().any(), f"{name} has NaN"
        torch.testing.assert_close(g.double(), w, atol=atol * max(1.0, w.abs().max().item()),
                                   rtol=rtol, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("label", list(CASES))
def test_gradients_match_the_eager_reference_fp32(label):
    q, k, v, causal, *window = CASES[label].make(torch.float32, DEVICE)
    _check_grads(q, k, v, causal, 1e-4, 1e-4, *window)


@pytest.mark.parametrize("label", ["odd 1x2x130x128 causal", "cross 1x2x40x97x64 causal"])
def test_gradients_match_the_eager_reference_fp16(label):
    q, k, v, causal = CASES[label].make(torch.float16, DEVICE)
    _check_grads(q, k, v, causal, atol=1e-2, rtol=1e-2)


def test_the_forward_saves_the_log_sum_exp_in_base_2():
    q, k, v, causal = CASES["cross 1x2x40x97x64 causal"].make(torch.float32, DEVICE)
    _, lse2 = triton_fwd.forward(q, k, v, causal)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(40, 97, dtype=torch.bool, device=q.device).triu(1),
                                float("-inf"))
    torch.testing.assert_close(lse2 * math.log(2), torch.logsumexp(scores, -1),
                               atol=1e-5, rtol=1e-5)


def test_inference_skips_the_log_sum_exp_and_nothing_else():
    """save_lse=False (the registered call without a gradient): the same output to the bit,
    no log-sum-exp, on a causal problem with a ragged diagonal and on one with no keys."""
    q, k, v, causal = CASES["cross 1x2x40x97x64 causal"].make(torch.float32, DEVICE)
    o, lse2 = triton_fwd.forward(q, k, v, causal)
    o_inference, none = triton_fwd.forward(q, k, v, causal, save_lse=False)
    assert lse2 is not None and none is None
    assert torch.equal(o, o_inference)
    empty = torch.randn(1, 2, 0, 64, device=DEVICE)
    o_empty, none = triton_fwd.forward(q, empty, empty, save_lse=False)
    assert none is None and o_empty.abs().sum() == 0


def test_no_keys_or_no_queries_give_what_the_reference_gives():
    q = torch.randn(1, 2, 5, 64, device=DEVICE)
    empty = torch.randn(1, 2, 0, 64, device=DEVICE)
    for provider in ("triton", "naive"):
        kernel = kernels.get_kernel("attention", provider)
        assert kernel(q, empty, empty).abs().sum() == 0  # a sum over no keys: zeros, no NaN
        assert kernel(empty, q, q).shape == (1, 2, 0, 64)


def test_malformed_problems_raise_naming_the_operand():
    t = kernels.get_kernel("attention", "triton")
    q = torch.randn(1, 2, 8, 64)
    with pytest.raises(ValueError, match="k expected shape"):
        t(q, torch.randn(2, 2, 8, 64), q)
    with pytest.raises(ValueError, match="k expected a number of heads that divides q's 2"):
        t(q, torch.randn(1, 3, 8, 64), q)
    with pytest.raises(ValueError, match="v expected the shape of k"):
        t(q, q, torch.randn(1, 2, 9, 64))
    with pytest.raises(ValueError, match="k expected the dtype of q"):
        t(q, q.half(), q.half())
    with pytest.raises(ValueError, match="q expected a 4-D tensor"):
        t(q[0], q, q)
    with pytest.raises(ValueError, match="causal expected True or False"):
        t(q, q, q, 1)


def test_reasons_in_plain_words():
    t = kernels.get_kernel("attention", "triton")
    odd = torch.randn(1, 1, 8, 48, device=DEVICE)
    assert "head dims 16, 32, 64, 128; got q with D = 48" in t.supports(odd, odd, odd)
    strided = torch.randn(1, 1, 8, 128, device=DEVICE)[..., ::2]
    assert "head dim must be contiguous" in t.supports(strided, strided, strided)
    if env.TRITON_INTERPRET:
        b = torch.randn(1, 1, 8, 64, dtype=torch.bfloat16)
        assert "bf16 tl.dot wrongly" in t.supports(b, b, b)
    flash = kernels.get_kernel("attention", "sdpa_flash")
    if env.HAS_CUDA:
        c = torch.randn(1, 1, 8, 64, device="cuda", dtype=torch.float16)
        long = torch.randn(1, 1, 9, 64, device="cuda", dtype=torch.float16)
        assert "flash backend refuses" in flash.supports(c, long, long, True)
    else:
        assert "no CUDA GPU" in flash.supports(odd, odd, odd)


def test_sdpa_backends_refuse_what_pytorch_refuses_in_words():
    # sdpa.reason reads shapes, strides and dtypes only, so a CPU checks what the GPU would get
    def qkv(sq, sk, d=64, dtype=torch.float16):
        return (torch.randn(1, 2, sq, d).to(dtype), *(torch.randn(1, 2, sk, d).to(dtype)
                                                      for _ in range(2)))

    one_key = sdpa.reason("cudnn", *qkv(7, 1))
    assert "one key (Sk = 1): the cuDNN backend refuses it" in one_key
    assert "PyTorch 2.11" in one_key and "got Sq = 7, Sk = 1" in one_key
    assert "got Sq = 1, Sk = 1" in sdpa.reason("cudnn", *qkv(1, 1))
    assert sdpa.reason("cudnn", *qkv(1, 50)) is None  # one query and many keys: it runs
    assert sdpa.reason("flash", *qkv(1, 1)) is None
    for backend in sdpa.BACKENDS:
        assert "refuses Sq = 0 or Sk = 0" in sdpa.reason(backend, *qkv(0, 5))
        assert "got Sq = 5, Sk = 0" in sdpa.reason(backend, *qkv(5, 0))
        q, k, v = qkv(8, 8, d=128)
        assert "head dim must be contiguous" in sdpa.reason(backend, q[..., ::2], k[..., ::2],
                                                            v[..., ::2])
    assert "multiples of 8 in float16; got D = 20" in sdpa.reason("efficient", *qkv(8, 8, 20))
    q, k, v = qkv(8, 8)
    misaligned = torch.empty(q.numel() + 1, dtype=q.dtype)[1:].view(q.shape)
    assert "16-byte boundaries" in sdpa.reason("flash", misaligned, k, v)
    assert sdpa.reason("efficient", *qkv(8, 8, 20, torch.float32)) is None


def test_the_providers_called_directly_refuse_in_words():
    odd = torch.randn(1, 1, 8, 48, device=DEVICE)
    with pytest.raises(ValueError, match="attention/triton: head dims 16, 32, 64, 128"):
        autograd.attention(odd, odd, odd)
    with pytest.raises(ValueError, match="attention: q expected a 4-D tensor"):
        naive.attention(odd[0], odd, odd)


def test_online_softmax_alone():
    x = 30 * torch.randn(6, 300)
    x[1, :100] = float("-inf")  # whole blocks masked before the first real value
    torch.testing.assert_close(online_softmax.streamed_softmax(x, 64), torch.softmax(x, -1))
    torch.testing.assert_close(online_softmax.softmax(x.to(DEVICE), 64).cpu(),
                               torch.softmax(x, -1))
    m = torch.full((2,), float("-inf"))
    m1, l1, alpha = online_softmax.online_update(m, torch.zeros(2), torch.tensor(
        [[float("-inf")] * 3, [1.0, 2.0, 3.0]]))
    assert alpha.tolist() == [0.0, 0.0] and not l1.isnan().any()
    assert m1[1] == 3.0 and math.isclose(l1[1].item(), 1 + math.exp(-1) + math.exp(-2),
                                         rel_tol=1e-6)


def test_bench_reads_its_records_back():
    rec = [results.Record(bench.LESSON, "triton fwd bf16 B=4 H=16 S=4096 D=128", 480.0,
                          "TFLOP/s", 700.0, "cuBLAS", 350.0, bench.PEER_WHAT),
           results.Record(bench.LESSON, "triton fwd+bwd bf16 B=4 H=16 S=4096 D=128", 300.0,
                          "TFLOP/s", 700.0, "cuBLAS", 350.0, bench.PEER_WHAT),
           results.Record(bench.LESSON, "triton peak memory of a forward, bf16 B=1 H=16 "
                          "S=1024 D=128", 4.0, "MiB", peer=4.0, peer_what="flash"),
           results.Record(bench.LESSON, "triton peak memory of a forward, bf16 B=1 H=16 "
                          "S=4096 D=128", 64.0, "MiB", peer=16.0, peer_what="flash")]
    lines = bench.verdicts(rec)
    assert "1.37×" in lines[0] and "0.86×" in lines[1] and "×16.0 for ×4 S" in lines[2]
    assert bench.memory_from_records(rec) == {"triton": {1024: 4.0, 4096: 64.0},
                                              "sdpa_flash": {1024: 4.0, 4096: 16.0}}
    fig = bench.plot_providers(rec, environment="a test")
    assert len(fig.axes[0].patches) == 2  # one bar per timed record
    fig = bench.plot_memory(bench.memory_from_records(rec))
    assert len(fig.axes[0].lines) == 2


@pytest.mark.gpu
def test_gradients_match_sdpa_on_the_registry_cases():
    ratios = {}  # Triton's error / SDPA's, both against float64 eager autograd
    for case in OPS["attention"].cases:
        for dtype in (torch.float16, torch.bfloat16):
            found = autograd.gradient_errors(*case.make(dtype, "cuda"))
            for key, err in found["triton"].items():
                assert not math.isnan(err), f"{case.label} {dtype} {key}: NaN"
                ratios[f"{case.label} {dtype} {key}"] = err / max(found["sdpa"][key], 4e-3)
    worst = max(ratios, key=ratios.get)
    assert ratios[worst] < 2.0, f"{worst}: {ratios[worst]:.2f}x SDPA's error"


@pytest.mark.gpu
def test_fused_memory_grows_linearly_with_s():
    found = bench.peak_memory((2048, 8192), providers=("triton", "naive"))
    triton, naive = found["triton"], found["naive"]
    assert triton[8192] / triton[2048] < 4.5, triton  # linear: x4 for x4 S (no S x S tensor)
    assert naive[8192] / naive[2048] > 12, naive  # the S x S matrices: x16


def test_the_gpu_checks_tuning_sweep_keeps_the_fastest_and_reports_the_failures(capsys):
    """(any machine) gpu_check's one sweep over candidate configurations: each time printed in
    order, a candidate that raises printed with its error and left out, the first of the
    fastest kept; none left is an error naming the sweep."""
    from kernels.attention.gpu_check import fastest

    def run(c):
        if c == "b":
            raise ValueError("out of shared memory")
        return {"a": 3.0, "c": 1.5, "d": 1.5}[c], f"  time of {c}"

    assert fastest(["a", "b", "c", "d"], run, "  D=64") == (1.5, "c")
    assert capsys.readouterr().out.splitlines() == [
        "  time of a", "  D=64 b: ValueError out of shared memory", "  time of c", "  time of d"]
    with pytest.raises(RuntimeError, match="D=64: every candidate configuration failed"):
        fastest(["b"], run, "  D=64")
