"""The Hopper attention backward (``attention_bwd.cu``, ``kernels/attention/hopper/bwd.py``):
both kernels compile for sm_90a in every dtype and head dim to what the header says (wgmma from
shared memory and from registers, TMA, mbarriers, no spills, no serialised wgmma, the register
budget of its warps), ``("attention", "wgmma")`` names its backward and refuses what it cannot
run in words; on an H100 the gradients match float64 eager autograd as closely as the Triton
backward's tests ask, on awkward shapes, and the forward's lse2 matches the Triton forward's."""

import math

import pytest
import torch

import kernels
from course_utils import nvrtc, sass
from kernels.attention.hopper import bwd, fwd

needs_nvrtc = pytest.mark.skipif(nvrtc.unavailable_reason() is not None,
                                 reason=f"NVRTC: {nvrtc.unavailable_reason()}")
needs_disasm = pytest.mark.skipif(sass.unavailable_reason() is not None,
                                  reason=f"disassembler: {sass.unavailable_reason()}")
BUILDS = [pytest.param(kernel, dtype, d, id=f"{kernel}-{str(dtype)[6:]}-D{d}")
          for kernel in bwd.KERNELS for dtype in fwd.DTYPES for d in fwd.HEAD_DIMS]
# registers a thread: 8 warps (dK/dV: 2 a scheduler) or 9 (dQ: the forward's 168)
REGISTERS = {"dkdv": 255, "dq": 168}


@needs_nvrtc
@needs_disasm
@pytest.mark.parametrize(("kernel", "dtype", "d"), BUILDS)
def test_census(kernel, dtype, d):
    """Per query (or key) tile: S and dP from shared memory (4 k16 steps per 128-byte box of D
    each), then dV and dK (dK/dV kernel) or dQ (dQ kernel) with A from registers (one k16 step
    per 16 rows of the tile); TMA and mbarriers; no mma.sync, nothing spilled, nothing
    serialised, within the warps' register budget."""
    compiled = bwd.compile_kernel(kernel, dtype, d, verbose=False)
    report = sass.report(compiled)
    census = report.census
    boxes = d // 64
    products = 2 if kernel == "dkdv" else 1  # dV and dK, or dQ
    assert census["HGMMA"] >= 2 * 4 * boxes + products * 64 // 16, census
    assert census["HMMA"] == 0, census
    assert census["UTMALDG"] >= 4 * boxes, census  # Q, dO (or K, V) tiles; the block's two
    assert census["SYNCS"] > 0 and census["LDL"] == census["STL"] == 0, census
    assert "serialized" not in compiled.log, compiled.log
    assert report.resources.stack_bytes == 0
    assert report.resources.registers <= REGISTERS[kernel], report.resources


def test_configurations_fit_shared_memory_and_name_their_kernels():
    c = bwd.CONFIG
    for kernel in bwd.KERNELS:
        for d in fwd.HEAD_DIMS:
            assert c.shared_bytes(kernel, d) <= 227 * 1024, (kernel, d)
    assert c.template("dkdv", 128) == "attention_bwd_dkdv<128, 64, 2>"
    assert c.template("dq", 64).startswith("attention_bwd_dq<64, 64, ")
    assert c.threads("dkdv") == 256 and c.threads("dq") == 128 * c.dq_consumers + 32
    with pytest.raises(ValueError, match="kernel expected one of"):
        bwd.compile_kernel("dqq")
    with pytest.raises(ValueError, match="d expected one of"):
        bwd.compile_kernel("dq", torch.bfloat16, 96)


def test_the_last_step_is_registered_with_its_backward_and_the_others_without():
    found = {k.variant: k for k in kernels.all_kernels("attention") if k.provider == "wgmma"}
    assert found[None].meta["backward"].endswith("attention_bwd.cu")
    assert all("backward" not in k.meta for v, k in found.items() if v is not None)


def _qkv(d=64, dtype=torch.bfloat16, s=70, h_kv=2):
    q = torch.randn(1, 2, s, d, dtype=dtype)
    return q, *(torch.randn(1, h_kv, s, d, dtype=dtype) for _ in range(2))


@pytest.mark.parametrize(("args", "window", "words"), [
    (_qkv(d=96), None, "head dim D must be 64 or 128"),
    (_qkv(dtype=torch.float32), None, "bf16 or fp16"),
    (_qkv(h_kv=1), None, "no grouped-query attention"),
    (_qkv(), 8, "no sliding window"),
    ([t.transpose(1, 2).contiguous().transpose(1, 2) for t in _qkv()], None, "contiguous"),
])
def test_problems_it_refuses_say_why(args, window, words):
    causal = window is not None
    assert words in bwd.reason(*args, causal, window)
    if window is None:  # (bwd.attention takes no window: the registry refuses it first)
        with pytest.raises(ValueError, match=f"wgmma attention: .*{words}"):
            bwd.attention(*args, causal)


def test_the_debugging_switch_names_its_kernels():
    with pytest.raises(ValueError, match="only expected None or one of"):
        bwd.backward(*_qkv(), None, None, None, False, only="dv")


# -- on a Hopper GPU ---------------------------------------------------------------------------

TOL = {torch.float16: 1e-2, torch.bfloat16: 3e-2}  # as tests/test_attention_variants.py
# (B, H, Sq, Sk, D, causal): ragged ends, Sq != Sk both ways, keys no query sees (causal,
# Sk > Sq: dK = dV = 0), one query, several key and query tiles
SHAPES = [(1, 2, 128, 128, 64, False), (2, 3, 77, 77, 64, True), (1, 2, 130, 130, 128, True),
          (1, 2, 40, 97, 64, True), (1, 2, 200, 70, 128, True), (1, 2, 1, 50, 64, False),
          (2, 2, 300, 513, 128, False), (1, 2, 70, 300, 64, True)]


def _hopper():
    cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    if reason := fwd.gpu_reason(cap):
        pytest.skip(reason)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", list(fwd.DTYPES), ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_gradients_match_float64_and_sdpa(shape, dtype):
    _hopper()
    from kernels.attention import autograd

    b, h, sq, sk, d, causal = shape
    q = torch.randn(b, h, sq, d, device="cuda").to(dtype)
    k, v = (torch.randn(b, h, sk, d, device="cuda").to(dtype) for _ in range(2))
    found = autograd.gradient_errors(q, k, v, causal, fns={"wgmma": bwd.attention})
    for name, err in found["wgmma"].items():
        assert not math.isnan(err), f"{name} is NaN"
        assert err <= max(TOL[dtype], 2 * found["sdpa"][name]), (name, found)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES[1:5], ids=str)
def test_the_forward_stores_the_triton_forwards_lse2(shape):
    _hopper()
    from kernels.attention import triton_fwd

    b, h, sq, sk, d, causal = shape
    q = torch.randn(b, h, sq, d, device="cuda").bfloat16()
    k, v = (torch.randn(b, h, sk, d, device="cuda").bfloat16() for _ in range(2))
    _, lse = bwd.forward(q, k, v, causal)
    _, want = triton_fwd.forward(q, k, v, causal)
    torch.testing.assert_close(lse, want, atol=1e-3, rtol=1e-3)


@pytest.mark.gpu
def test_the_registered_provider_trains_and_infers():
    _hopper()
    q, k, v = (torch.randn(1, 2, 130, 64, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    kernel = kernels.get_kernel("attention", "wgmma")
    with torch.no_grad():
        assert kernel(q, k, v, True).grad_fn is None  # inference: the forward alone
    grads = [t.clone().requires_grad_() for t in (q, k, v)]
    kernel(*grads, True).sum().backward()  # dO expanded from a sum: stride 0
    assert all(t.grad is not None and not t.grad.isnan().any() for t in grads)
