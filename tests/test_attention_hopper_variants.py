"""The variants in lesson 18's Hopper forward: grouped-query attention, a sliding window and
variable-length sequences, runtime arguments of ``attention.cu``'s one kernel. On a CPU: every
step still compiles for sm_90a with nothing spilled, the only global loads being the four
cumulative lengths a varlen block reads; the registry takes the variants forward only and says
so when a gradient is wanted; the packed problem is validated as ``varlen_attention`` validates
it. On an H100: each variant against SDPA (``enable_gqa``, an explicit window mask, one call per
sequence) and a float64 reference on awkward shapes, outputs poisoned with NaN beforehand."""

import pytest
import torch

import kernels
from course_utils import nvrtc, sass
from kernels.attention.hopper import bwd, fwd

needs_nvrtc = pytest.mark.skipif(nvrtc.unavailable_reason() is not None,
                                 reason=f"NVRTC: {nvrtc.unavailable_reason()}")
needs_disasm = pytest.mark.skipif(sass.unavailable_reason() is not None,
                                  reason=f"disassembler: {sass.unavailable_reason()}")


@needs_nvrtc
@needs_disasm
@pytest.mark.parametrize("number", sorted(fwd.STEPS))
@pytest.mark.parametrize("d", fwd.HEAD_DIMS)
def test_the_variants_cost_no_spill_and_load_only_the_offsets(number, d):
    """Every step, both head dims: the runtime variants leave the tensor-core and TMA code as the
    steps' census says (tests/test_attention_hopper.py) and add four global loads (a varlen
    block's cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]; Q, K and V come by TMA) and the
    row-masked stores of O, with no spill and within the launch bound's registers."""
    compiled = fwd.compile_step(number, torch.bfloat16, d, verbose=False)
    report = sass.report(compiled)
    census = report.census
    assert census["LDG"] == 4, census
    assert census["STG"] >= d // 4, census  # the rows a thread holds, two values a store
    assert census["LDL"] == census["STL"] == 0 and report.resources.stack_bytes == 0, census
    limit = 168 if fwd.step(number).consumers == 2 else 255  # 9 warps: 168 a thread
    assert report.resources.registers <= limit, report.resources
    assert "serialized" not in compiled.log, compiled.log


def _qkv(h=4, h_kv=2, s=70, d=64, dtype=torch.bfloat16, grad=False):
    q = torch.randn(1, h, s, d, dtype=dtype)
    k, v = (torch.randn(1, h_kv, s, d, dtype=dtype) for _ in range(2))
    return [t.requires_grad_(grad) for t in (q, k, v)]


def test_the_forward_takes_the_variants():
    """On a CPU the forward's only objection to GQA or a window is the CPU itself."""
    for why in (fwd.reason(*_qkv(), True, 9), fwd.reason(*_qkv(h_kv=1), False)):
        assert "CUDA" in why and "grouped" not in why and "window" not in why


def test_the_differentiable_entry_refuses_the_variants_only_when_a_gradient_is_wanted():
    """``("attention", "wgmma")`` trains dense problems; GQA and windows run forward only."""
    best = kernels.get_kernel("attention", "wgmma")
    assert best.meta["backward"] and best.meta["gqa"] and best.meta["window"]
    assert "the Hopper backward takes one K/V head" in bwd.registered_reason(
        *_qkv(grad=True), False)
    assert "no sliding window" in bwd.registered_reason(*_qkv(h_kv=4, grad=True), True, 9)
    with torch.no_grad():  # no gradient wanted: the forward's reason (here: the CPU)
        assert "CUDA" in bwd.registered_reason(*_qkv(grad=True), True, 9)
    assert "CUDA" in bwd.registered_reason(*_qkv(), True, 9)
    # a dense problem that wants a gradient: the forward's and backward's reason, the same
    assert "CUDA" in bwd.registered_reason(*_qkv(h_kv=4, grad=True), True)
    # the forward-only steps never mention the backward
    step1 = kernels.get_kernel("attention", "wgmma", "step1")
    assert "backward" not in step1.meta and "backward" not in step1.supports(
        *_qkv(grad=True), True, 9)


def test_the_differentiable_function_checks_the_gradient_itself():
    """The registry remembers an accepted problem by shapes, strides and addresses, not by
    ``requires_grad``: ``bwd.differentiable`` refuses a variant that wants a gradient itself."""
    with pytest.raises(ValueError, match="the Hopper backward takes one K/V head"):
        bwd.differentiable(*_qkv(grad=True), True)
    with pytest.raises(ValueError, match="no sliding window"):
        bwd.differentiable(*_qkv(h_kv=4, grad=True), True, 5)


def _packed(lengths, h=4, h_kv=2, d=64, dtype=torch.bfloat16, device="cpu"):
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32,
                      device=device)
    total = int(cu[-1])
    q = torch.randn(total, h, d, device=device).to(dtype)
    k, v = (torch.randn(total, h_kv, d, device=device).to(dtype) for _ in range(2))
    return q, k, v, cu, cu, max(lengths), max(lengths)


def test_varlen_is_validated_as_varlen_attention_validates_it():
    q, k, v, cu, _, longest, _ = _packed([3, 5])
    with pytest.raises(ValueError, match="max_seqlen_q expected an int >= the longest"):
        fwd.varlen_attention(q, k, v, cu, cu, 2, longest)
    with pytest.raises(ValueError, match="cu_seqlens_k expected int32"):
        fwd.varlen_attention(q, k, v, cu, cu.long(), longest, longest)
    with pytest.raises(ValueError, match=r"wgmma varlen_attention \[step\d\]: needs CUDA"):
        fwd.varlen_attention(q, k, v, cu, cu, longest, longest)
    assert "head dim D must be 64 or 128" in fwd.varlen_reason(q[..., :32], k[..., :32],
                                                               v[..., :32])
    assert "bf16 or fp16" in fwd.varlen_reason(q.float(), k.float(), v.float())


# -- on a Hopper GPU ---------------------------------------------------------------------------

TOL = {torch.bfloat16: 3e-2, torch.float16: 6e-3}  # as gpu_run's long sequences


def _hopper():
    cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    if reason := fwd.gpu_reason(cap):
        pytest.skip(reason)


def _sdpa(q, k, v, causal, window=None):
    """SDPA with grouped K/V heads (enable_gqa) and a window as an explicit boolean mask (its
    flash, memory-efficient or math backend: cuDNN refuses one key or one query)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kernels.attention import visible

    mask = None if window is None else visible(q.shape[2], k.shape[2], True, window, q.device)
    if mask is not None:  # a query that sees no key: SDPA gives NaN, the op 0
        empty = ~mask.any(-1, keepdim=True)
        mask = mask | empty
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                      SDPBackend.MATH]):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                             is_causal=causal and mask is None,
                                             enable_gqa=q.shape[1] != k.shape[1])
    return out if mask is None else out.masked_fill(empty, 0)


def _check(out, q, k, v, causal, window=None, label=""):
    """``out`` against float64 eager and SDPA in q's dtype: no NaN, within the tolerance or
    twice SDPA's own error, whichever is larger."""
    from kernels.attention import attention_eager

    exact = attention_eager(*(t.double() for t in (q, k, v)), causal, window)
    assert not out.isnan().any(), f"{label}: rows left unwritten (NaN)"
    sdpa_err = (_sdpa(q, k, v, causal, window).double() - exact).abs().max().item()
    err = (out.double() - exact).abs().max().item()
    assert err <= max(TOL[q.dtype], 2 * sdpa_err), f"{label}: error {err:.2e}, SDPA {sdpa_err:.2e}"


# (B, Hq, Hkv, Sq, Sk, D, causal): groups of 2, 4, 8; Sq != Sk both ways; ragged lengths
GQA_SHAPES = [(2, 8, 4, 77, 77, 64, False), (1, 8, 2, 200, 333, 128, True),
              (1, 16, 2, 1000, 130, 64, True), (2, 32, 8, 513, 513, 128, False),
              (1, 8, 1, 1, 300, 128, False), (1, 4, 2, 129, 1025, 64, True)]


@pytest.mark.gpu
@pytest.mark.parametrize("number", sorted(fwd.STEPS))
@pytest.mark.parametrize("shape", GQA_SHAPES, ids=str)
def test_gqa_matches_sdpa_and_float64(shape, number):
    _hopper()
    b, h, h_kv, sq, sk, d, causal = shape
    for dtype in fwd.DTYPES:
        q = torch.randn(b, h, sq, d, device="cuda").to(dtype)
        k, v = (torch.randn(b, h_kv, sk, d, device="cuda").to(dtype) for _ in range(2))
        out = torch.full_like(q, float("nan"))
        fwd.launch(number, q, k, v, causal, out)
        _check(out, q, k, v, causal, label=f"step{number} {shape} {dtype}")


# (B, Hq, Hkv, Sq, Sk, D, window): windows smaller than a tile (1, 9, 40), a few tiles, longer
# than the sequence; Sq > Sk (queries that see no key) and Sq < Sk; GQA too
WINDOW_SHAPES = [(1, 2, 2, 150, 150, 64, 1), (2, 4, 2, 333, 333, 128, 9),
                 (1, 4, 4, 1000, 1000, 64, 40), (1, 8, 2, 1025, 700, 128, 200),
                 (1, 2, 2, 300, 90, 64, 17), (1, 2, 1, 70, 513, 128, 64),
                 (1, 2, 2, 200, 200, 64, 5000)]


@pytest.mark.gpu
@pytest.mark.parametrize("number", sorted(fwd.STEPS))
@pytest.mark.parametrize("shape", WINDOW_SHAPES, ids=str)
def test_windows_match_sdpa_with_a_mask_and_float64(shape, number):
    _hopper()
    b, h, h_kv, sq, sk, d, window = shape
    for dtype in fwd.DTYPES:
        q = torch.randn(b, h, sq, d, device="cuda").to(dtype)
        k, v = (torch.randn(b, h_kv, sk, d, device="cuda").to(dtype) for _ in range(2))
        out = torch.full_like(q, float("nan"))
        fwd.launch(number, q, k, v, True, out, window=window)
        _check(out, q, k, v, True, window, label=f"step{number} {shape} {dtype}")


VARLEN = [([1, 63, 64, 65, 1000], 4, 2, 64), ([1000, 1, 65, 63, 64], 8, 8, 128),
          ([130, 7, 300], 8, 1, 128)]


@pytest.mark.gpu
@pytest.mark.parametrize("number", sorted(fwd.STEPS))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("lengths", "h", "h_kv", "d"), VARLEN, ids=str)
def test_varlen_matches_each_sequence_alone(lengths, h, h_kv, d, causal, number):
    """Packed sequences against float64 eager and SDPA run on each sequence alone; the output
    poisoned with NaN, so a row left unwritten fails, and a block's ragged end that wrote into
    the next sequence's rows would leave them wrong (blocks run in no fixed order)."""
    _hopper()
    from kernels.attention.varlen import per_sequence

    for dtype in fwd.DTYPES:
        q, k, v, cu_q, cu_k, max_q, _ = _packed(lengths, h, h_kv, d, dtype, "cuda")
        out = torch.full_like(q, float("nan"))
        fwd.launch_varlen(number, q, k, v, cu_q, cu_k, max_q, causal, out)
        assert not out.isnan().any(), "rows left unwritten (NaN)"
        exact = per_sequence(_eager64, q, k, v, cu_q, cu_k, causal)
        sdpa = per_sequence(_sdpa, q, k, v, cu_q, cu_k, causal)
        err = (out.double() - exact).abs().max().item()
        sdpa_err = (sdpa.double() - exact).abs().max().item()
        assert err <= max(TOL[dtype], 2 * sdpa_err), (lengths, dtype, err, sdpa_err)


def _eager64(q, k, v, causal):
    from kernels.attention import attention_eager

    return attention_eager(q.double(), k.double(), v.double(), causal)


@pytest.mark.gpu
def test_the_registry_runs_the_variants_forward_and_refuses_to_train_them():
    _hopper()
    best = kernels.get_kernel("attention", "wgmma")
    q = torch.randn(1, 8, 130, 64, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, 2, 130, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    with torch.no_grad():
        kernels.verify(best, q, k, v, True, 33, label="GQA and a window")
    q.requires_grad_()
    assert "the Hopper backward takes" in best.supports(q, k, v, True, 33)
    with pytest.raises(ValueError, match="the Hopper backward takes"):  # (accepted before)
        best(q, k, v, True, 33)


@pytest.mark.gpu
def test_varlen_refuses_a_gradient_and_agrees_with_the_triton_varlen():
    _hopper()
    from kernels.attention import varlen_attention

    q, k, v, cu_q, cu_k, max_q, max_k = _packed([1, 63, 64, 65, 1000], device="cuda")
    got = fwd.varlen_attention(q, k, v, cu_q, cu_k, max_q, max_k, True)
    torch.testing.assert_close(got, varlen_attention(q, k, v, cu_q, cu_k, max_q, max_k, True),
                               atol=3e-2, rtol=3e-2)
    with pytest.raises(ValueError, match="forward only"):
        fwd.varlen_attention(q.requires_grad_(), k, v, cu_q, cu_k, max_q, max_k, True)
