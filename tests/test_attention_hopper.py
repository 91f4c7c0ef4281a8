"""Lesson 18's Hopper attention forward: every step compiles for sm_90a to what the lesson says
(the SASS census: wgmma, TMA, mbarriers, no spills), refuses what it cannot run in plain words,
its timeline decodes with the kinds it adds to lesson 17's; on an H100 it matches the reference
on the registry's cases and on long sequences, with no NaN."""

import pytest
import torch

import kernels
from course_utils import nvrtc, sass
from kernels.attention.hopper import fwd, timeline
from kernels.matmul.hopper import wgmma

needs_nvrtc = pytest.mark.skipif(nvrtc.unavailable_reason() is not None,
                                 reason=f"NVRTC: {nvrtc.unavailable_reason()}")
needs_disasm = pytest.mark.skipif(sass.unavailable_reason() is not None,
                                  reason=f"disassembler: {sass.unavailable_reason()}")
# the first and last steps in both head dims (the middle ones share their code), one dtype each
BUILDS = [pytest.param(1, torch.float16, 64, id="step1-fp16-D64"),
          pytest.param(1, torch.bfloat16, 128, id="step1-bf16-D128"),
          pytest.param(4, torch.bfloat16, 64, id="step4-bf16-D64"),
          pytest.param(4, torch.float16, 128, id="step4-fp16-D128"),
          pytest.param(5, torch.bfloat16, 128, id="step5-bf16-D128"),
          pytest.param(5, torch.float16, 64, id="step5-fp16-D64")]


@needs_nvrtc
@needs_disasm
@pytest.mark.parametrize(("number", "dtype", "d"), BUILDS)
def test_census(number, dtype, d):
    """wgmma (HGMMA: QKᵀ from shared memory, PV with P from registers) and TMA (UTMALDG: Q
    once, K and V per tile); mbarriers (SYNCS); no mma.sync; nothing spilled; and ptxas did not
    have to serialise the asynchronous wgmma (its C7512 note)."""
    compiled = fwd.compile_step(number, dtype, d, verbose=False)
    census = sass.census(sass.disassemble(compiled))
    s = fwd.step(number)
    boxes = d // 64
    # QKᵀ: 4 k16 steps per 128-byte box; PV: one k16 step per 16 keys (twice: the loop's tail)
    assert census["HGMMA"] >= 4 * boxes + s.key_tile(d) // 16, census
    assert census["HMMA"] == 0, census
    assert census["UTMALDG"] >= boxes * (s.consumers + 2), census
    assert census["SYNCS"] > 0 and census["LDL"] == census["STL"] == 0, census
    assert "serialized" not in compiled.log, compiled.log
    assert sass.report(compiled).resources.stack_bytes == 0
    if s.pingpong:
        assert census["BAR"] >= 2, census  # the turns: bar.sync / bar.arrive


def test_steps_fit_shared_memory_and_name_their_configuration():
    for s in fwd.STEPS.values():
        for d in fwd.HEAD_DIMS:
            assert s.shared_bytes(d) <= 227 * 1024, (s, d)
        assert s.template(128).startswith("attention_fwd<128, ")
        assert s.threads == 128 * s.consumers + 32
    assert fwd.BEST is fwd.STEPS[5] and fwd.step(2) is fwd.STEPS[2]
    with pytest.raises(ValueError, match="step expected one of"):
        fwd.step(7)


def test_every_step_is_registered():
    found = {k.variant: k for k in kernels.all_kernels("attention") if k.provider == "wgmma"}
    # (fused_bwd: the last step with the backward's version 2)
    assert set(found) == {None, "step1", "step2", "step3", "step4", "fused_bwd"}
    best = found[None]
    assert best.min_capability == (9, 0) and "nvrtc" in best.needs and best.contiguous
    assert best.meta["step"] == 5 and best.meta["head_dims"] == (64, 128)


def _qkv(d=64, dtype=torch.bfloat16, s=70):
    return [torch.randn(1, 2, s, d, dtype=dtype) for _ in range(3)]


@pytest.mark.parametrize(("args", "words"), [
    (_qkv(d=96), "head dim D must be 64 or 128"),
    (_qkv(dtype=torch.float32), "bf16 or fp16"),
    ([t.transpose(1, 2).contiguous().transpose(1, 2) for t in _qkv()], "must be contiguous"),
])
def test_problems_it_refuses_say_why(args, words):
    assert words in fwd.problem_reason(*args)


@pytest.mark.parametrize(("capability", "words"), [
    (None, "needs a CUDA GPU"), ((8, 0), "Hopper (sm_90) only"), ((10, 0), "tcgen05")])
def test_gpus_without_wgmma_get_reasons(capability, words):
    assert words in fwd.gpu_reason(capability)


def test_the_registry_refuses_with_the_same_words():
    k = kernels.get_kernel("attention", "wgmma")
    q = _qkv()
    assert "needs a CUDA tensor" in k.supports(*q) or "no CUDA GPU" in k.supports(*q)
    with pytest.raises(ValueError, match="k expected shape"):
        fwd.attention(q[0], q[1][..., :32], q[2])


def test_timeline_names_the_kinds_it_adds():
    buf = torch.zeros(wgmma.TIMELINE_BLOCKS, wgmma.ROLES, wgmma.TIMELINE_EVENTS, 4,
                      dtype=torch.int64)
    buf[0, 0, 0] = torch.tensor([1000, 1100, 2 | (5 << 32), 7])            # load
    buf[0, 1, 0] = torch.tensor([1000, 1400, 4 | (1 << 8) | (5 << 32), 7])  # compute
    buf[0, 1, 1] = torch.tensor([1400, 2000, 6 | (1 << 8) | (5 << 32), 7])  # softmax
    buf[0, 2, 0] = torch.tensor([1000, 1300, 7 | (5 << 32), 7])            # wait turn
    events = timeline.decode(buf)
    assert [e.kind for e in events] == ["load", "compute", "softmax", "wait turn"]
    assert timeline.fractions(events) == pytest.approx(
        {"compute": 400 / 1300, "softmax": 600 / 1300, "wait turn": 300 / 1300})
    assert timeline.gantt(events, "synthetic").axes


# -- on a Hopper GPU ---------------------------------------------------------------------------

def _hopper():
    cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    if reason := fwd.gpu_reason(cap):
        pytest.skip(reason)


@pytest.mark.gpu
@pytest.mark.parametrize("number", sorted(fwd.STEPS))
def test_step_matches_the_reference_on_the_registry_cases(number):
    _hopper()
    k = kernels.get_kernel("attention", "wgmma", None if number == fwd.BEST.number
                           else f"step{number}")
    ran = 0
    for case in kernels.registry.OPS["attention"].cases:
        for dtype in k.dtypes:
            args = case.make(dtype, "cuda")
            if k.supports(*args) is None:
                kernels.verify(k, *args, label=case.label)
                ran += 1
    assert ran >= 10  # every case but the strided one, in both dtypes


@pytest.mark.gpu
@pytest.mark.parametrize("number", sorted(fwd.STEPS))
def test_long_and_ragged_sequences_without_nan(number):
    _hopper()
    reference = kernels.reference("attention")
    for (b, h, sq, sk, d), causal in [((1, 2, 4096, 4096, 128), True),
                                      ((2, 3, 2049, 2049, 64), False),
                                      ((1, 2, 1000, 3001, 128), False),
                                      ((1, 1, 3001, 1000, 64), True)]:
        q, k = ((torch.randn(b, h, s, d, device="cuda") * 2).bfloat16() for s in (sq, sk))
        v = torch.randn(b, h, sk, d, device="cuda").bfloat16()
        out = torch.full_like(q, float("nan"))  # poisoned: every row must be written
        fwd.launch(number, q, k, v, causal, out)
        assert not out.isnan().any()
        torch.testing.assert_close(out.float(), reference(q, k, v, causal).float(),
                                   atol=3e-2, rtol=3e-2)
