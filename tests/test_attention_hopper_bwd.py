"""The Hopper attention backward, both versions (``attention_bwd.cu``: two kernels;
``attention_bwd_fused.cu``: one, dQ through atomics; ``kernels/attention/hopper/bwd.py``): every
kernel compiles for sm_90a in every dtype and head dim to what its header says (wgmma from
shared memory and from registers, the fused kernel's transposed dS and its atomics, TMA,
mbarriers, no spills, no serialised wgmma, the register budget of its warps), both versions are
registered and refuse what they cannot run in words; on an H100 the gradients of both match
float64 eager autograd as closely as the Triton backward's tests ask, on awkward shapes, with
their outputs' memory poisoned, and the forward's lse2 matches the Triton forward's."""

import functools
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
# registers a thread: 8 warps (dK/dV, fused: 2 a scheduler) or 9 (dQ: the forward's 168)
REGISTERS = {"dkdv": 255, "dq": 168, "fused": 255}


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
    products = 1 if kernel == "dq" else 2  # dQ, or dV and dK
    assert census["HGMMA"] >= 2 * 4 * boxes + products * 64 // 16, census
    assert census["HMMA"] == 0, census
    assert census["UTMALDG"] >= 4 * boxes, census  # Q, dO (or K, V) tiles; the block's two
    assert census["SYNCS"] > 0 and census["LDL"] == census["STL"] == 0, census
    assert "serialized" not in compiled.log, compiled.log
    assert report.resources.stack_bytes == 0
    assert report.resources.registers <= REGISTERS[kernel], report.resources


@needs_nvrtc
@needs_disasm
@pytest.mark.parametrize("dtype", list(fwd.DTYPES), ids=str)
@pytest.mark.parametrize("d", fwd.HEAD_DIMS)
def test_the_fused_kernel_reads_ds_transposed_and_adds_dq_through_atomics(d, dtype):
    """Version 2's own instructions: dQ = dS K with BOTH operands transposed in shared memory
    (dS^T's tile as an MN-major A, K as an MN-major B), 8 k16 steps over the block's 128 keys
    at D = 128 (one 64-column half of D per warpgroup) or 4 over its own 64 at D = 64; dS^T
    stored to shared memory, fenced for the tensor cores, a block barrier; dQ added by
    two-float reductions (REDG ... F32x2), 2 rows x 8 column pairs a thread and tile."""
    report = sass.report(bwd.compile_kernel("fused", dtype, d, verbose=False))
    transposed = [line for line in report.sass.splitlines() if "tnspA.tnspB" in line]
    assert len(transposed) == (8 if d == 128 else 4), transposed
    assert all("HGMMA.64x64x16" in line for line in transposed), transposed
    reductions = sass.variants(report.sass, "REDG")
    assert sum(n for v, n in reductions.items() if "ADD.F32x2" in v) == 16, reductions
    assert report.resources.registers <= 255 and report.census["LDL"] == 0
    assert report.census["STS"] >= 16 and report.census["BAR"] >= 2, report.census


def test_configurations_fit_shared_memory_and_name_their_kernels():
    c = bwd.CONFIG
    for kernel in bwd.KERNELS:
        for d in fwd.HEAD_DIMS:
            assert c.shared_bytes(kernel, d) <= 227 * 1024, (kernel, d)
    assert c.template("dkdv", 128) == "attention_bwd_dkdv<128, 64, 2>"
    assert c.template("dq", 64).startswith("attention_bwd_dq<64, 64, ")
    assert c.template("fused", 128) == "attention_bwd_fused<128, 64, 2>"
    assert c.threads("dkdv") == c.threads("fused") == 256
    assert c.threads("dq") == 128 * c.dq_consumers + 32
    # the fused kernel: K, V, the ring and two dS^T tiles of 128 keys x 64 queries, 16 KB each
    assert c.shared_bytes("fused", 128) == c.shared_bytes("dkdv", 128) + 2 * 16384
    assert set(bwd.VERSIONS) == {1, 2} and bwd.BEST in bwd.VERSIONS
    assert [k for ks in bwd.VERSIONS.values() for k in ks] == list(bwd.KERNELS)
    names = bwd.providers()
    assert names[bwd.BEST] == "wgmma" and set(names) == set(bwd.VERSIONS)
    assert all(kernels.get_kernel("attention", *n.rstrip("]").split("[")) for n in names.values())
    with pytest.raises(ValueError, match="kernel expected one of"):
        bwd.compile_kernel("dqq")
    with pytest.raises(ValueError, match="d expected one of"):
        bwd.compile_kernel("dq", torch.bfloat16, 96)


def test_the_last_step_is_registered_with_each_backward_version_and_the_others_without():
    found = {k.variant: k for k in kernels.all_kernels("attention") if k.provider == "wgmma"}
    versions = {k.meta["backward_version"]: k for k in found.values() if "backward" in k.meta}
    assert set(versions) == set(bwd.VERSIONS)
    assert versions[bwd.BEST].variant is None  # ("attention", "wgmma") trains with BEST
    for version, k in versions.items():
        assert k.meta["backward"].endswith(bwd.SOURCES[version].name)
        assert k.variant in (None, bwd.VARIANTS[version]) and k.meta["step"] == fwd.BEST.number
    assert all(k.variant.startswith("step") for k in found.values() if "backward" not in k.meta)


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
    with pytest.raises(ValueError, match="only expected None with version 2"):
        bwd.backward(*_qkv(), None, None, None, False, only="dq", version=2)


def test_a_kernel_and_a_buffer_are_version_2_s_and_the_buffer_is_checked():
    """(exercise hopper_backward.dq_add launches its spliced build into a buffer of its own)"""
    q = _qkv()[0]
    with pytest.raises(ValueError, match="kernel and dq_sum expected None with version 1"):
        bwd.backward(*_qkv(), None, None, None, False, dq_sum=torch.zeros(q.shape))
    for wrong in (torch.zeros(q.shape, dtype=torch.float64), torch.zeros(1, 2, 71, 64),
                  torch.zeros(1, 2, 64, 70).transpose(2, 3)):
        with pytest.raises(ValueError, match="dq_sum expected a contiguous float32 tensor"):
            bwd.backward(*_qkv(), None, None, None, False, version=2, dq_sum=wrong)


@pytest.mark.parametrize("version", [0, 3, "2", True, None])
def test_a_version_that_does_not_exist_is_refused(version):
    with pytest.raises(ValueError, match=r"version expected one of \(1, 2\)"):
        bwd.backward(*_qkv(), None, None, None, False, version=version)
    with pytest.raises(ValueError, match="version expected one of"):
        bwd.attention(*_qkv(), False, version=version)


# -- on a Hopper GPU ---------------------------------------------------------------------------

TOL = {torch.float16: 1e-2, torch.bfloat16: 3e-2}  # as tests/test_attention_variants.py
# (B, H, Sq, Sk, D, causal): ragged ends, Sq != Sk both ways, keys no query sees (causal,
# Sk > Sq: dK = dV = 0), one query, several key and query tiles
SHAPES = [(1, 2, 128, 128, 64, False), (2, 3, 77, 77, 64, True), (1, 2, 130, 130, 128, True),
          (1, 2, 40, 97, 64, True), (1, 2, 200, 70, 128, True), (1, 2, 1, 50, 64, False),
          (2, 2, 300, 513, 128, False), (1, 2, 70, 300, 64, True)]
VERSIONS = [pytest.param(v, id=f"v{v}") for v in bwd.VERSIONS]


def _hopper():
    cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    if reason := fwd.gpu_reason(cap):
        pytest.skip(reason)


def _poisoned_empty_like(monkeypatch):
    """torch.empty_like returns NaN-filled tensors while the test runs (its contents are
    undefined anyway): a gradient row a kernel forgets to write comes back NaN."""
    empty_like = torch.empty_like

    def poisoned(t, *args, **kwargs):
        out = empty_like(t, *args, **kwargs)
        return out.fill_(float("nan")) if out.is_floating_point() else out
    monkeypatch.setattr(torch, "empty_like", poisoned)


@pytest.mark.gpu
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("dtype", list(fwd.DTYPES), ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_gradients_match_float64_and_sdpa(shape, dtype, version, monkeypatch):
    _hopper()
    from kernels.attention import autograd

    b, h, sq, sk, d, causal = shape
    q = torch.randn(b, h, sq, d, device="cuda").to(dtype)
    k, v = (torch.randn(b, h, sk, d, device="cuda").to(dtype) for _ in range(2))
    _poisoned_empty_like(monkeypatch)
    found = autograd.gradient_errors(
        q, k, v, causal, fns={"wgmma": functools.partial(bwd.attention, version=version)})
    for name, err in found["wgmma"].items():
        assert not math.isnan(err), f"{name} is NaN"
        assert err <= max(TOL[dtype], 2 * found["sdpa"][name]), (name, found)


@pytest.mark.gpu
@pytest.mark.parametrize("version", VERSIONS)
def test_keys_past_sk_add_nothing_to_dq(version):
    """Sk = 70 leaves 58 rows of the block's 128-key tile to the NEXT head's keys (TMA reads
    B*H*Sk rows as one tensor); make that head's keys and values 1000x larger, so a dQ that
    forgot to mask keys past Sk is off by far more than rounding, in the first head."""
    _hopper()
    q = torch.randn(1, 2, 96, 64, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, 2, 70, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k[:, 1] *= 1000
    v[:, 1] *= 1000
    ref_args = [t[:, :1].detach().clone().requires_grad_() for t in (q, k, v)]
    ours = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    do = torch.randn_like(q)
    bwd.attention(*ours, False, version=version).backward(do)
    kernels.reference("attention")(*ref_args, False).backward(do[:, :1])
    for mine, want in zip(ours, ref_args, strict=True):
        torch.testing.assert_close(mine.grad[:, :1].float(), want.grad.float(), atol=5e-2,
                                   rtol=5e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("version", VERSIONS)
def test_long_causal_sequences_over_many_heads(version):
    """B*H = 8 heads of 2049 queries and keys at D = 128: 17 key blocks add into each query
    row's dQ (version 2), and the causal walk's first and last tiles are ragged."""
    _hopper()
    from kernels.attention import autograd

    q, k, v = (torch.randn(2, 4, 2049, 128, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    found = autograd.gradient_errors(
        q, k, v, True, fns={"wgmma": functools.partial(bwd.attention, version=version)})
    for name, err in found["wgmma"].items():
        assert err <= max(TOL[torch.bfloat16], 2 * found["sdpa"][name]), (name, found)


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
    for variant in (None, *(bwd.VARIANTS[v] for v in bwd.VERSIONS if v != bwd.BEST)):
        kernel = kernels.get_kernel("attention", "wgmma", variant)
        with torch.no_grad():
            assert kernel(q, k, v, True).grad_fn is None  # inference: the forward alone
        grads = [t.clone().requires_grad_() for t in (q, k, v)]
        kernel(*grads, True).sum().backward()  # dO expanded from a sum: stride 0
        assert all(t.grad is not None and not t.grad.isnan().any() for t in grads), variant
