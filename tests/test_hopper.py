"""Lesson 16's Hopper kernels: every step and variant compiles for sm_90a to what the lesson says
(the SASS census), refuses what it cannot run with a reason, and on an H100 matches a float64
reference on awkward shapes; the timeline decodes and draws."""

import dataclasses

import pytest
import torch

import kernels
from course_utils import env, nvrtc, sanitizer, sass
from kernels.matmul.hopper import bench, ceiling, plans, tiles, timeline, tma, wgmma

needs_nvrtc = pytest.mark.skipif(nvrtc.unavailable_reason() is not None,
                                 reason=f"NVRTC: {nvrtc.unavailable_reason()}")
needs_disasm = pytest.mark.skipif(sass.unavailable_reason() is not None,
                                  reason=f"disassembler: {sass.unavailable_reason()}")
PAIRS = [pytest.param(s, v, id=f"step{s}-{v}") for s in wgmma.STEPS for v in wgmma.VARIANTS]


@needs_nvrtc
@needs_disasm
@pytest.mark.parametrize(("number", "name"), PAIRS)
def test_census_every_step_and_variant(number, name):
    """wgmma (HGMMA, QGMMA for fp8) and TMA (UTMALDG) in every step; no mma.sync (HMMA), no
    local memory; the specialised steps move registers (USETMAXREG) and wait on mbarriers."""
    s, v = wgmma.step(number), wgmma.variant(name)
    compiled = wgmma.compile_step(s, v, verbose=False)
    census = sass.census(sass.disassemble(compiled))
    tensor_op = "QGMMA" if v.a.itemsize == 1 else "HGMMA"
    assert census[tensor_op] >= 4, census  # 4 k-steps of 32 bytes per K tile
    assert census["HMMA"] == 0 and census["QGMMA" if tensor_op == "HGMMA" else "HGMMA"] == 0
    assert census["UTMALDG"] >= 2 and census["SYNCS"] > 0, census
    assert census["LDL"] == census["STL"] == 0, "accumulators spilled to local memory"
    assert census["USETMAXREG"] == (2 if s.specialized else 0), census


CANDIDATES = [pytest.param(c.step, v, id=f"{c.name}-{v}") for c in tiles.CANDIDATES[1:]
              for v in ("bf16", "fp8_e4m3")]


@needs_nvrtc
@needs_disasm
@pytest.mark.parametrize(("s", "name"), [
    *CANDIDATES, *(pytest.param(wgmma.step(n), v, id=f"step{n}-{v}") for n in (3, 4, 5)
                   for v in ("bf16", "fp8_e4m3"))])
def test_split_k_is_compiled_only_where_the_registers_allow_it(s, name):
    """128-column tiles carry split-K (the partials' stores and loads, the acquire-release count,
    the barrier that ORs the answer) without local memory; 256-column kernels, step 4's
    included, have none of it: they compile exactly as before split-K."""
    census = sass.census(text := sass.disassemble(wgmma.compile_step(s, name, verbose=False)))
    assert census["LDL"] == census["STL"] == 0, "spilled to local memory"
    has_split_k = census["ATOMG"] > 0 and any(
        op.startswith("BAR.RED.OR") for op in sass.variants(text, "BAR"))
    assert has_split_k == s.can_split_k == (s.bn == 128 and s.cluster == 1), s.template


@needs_nvrtc
def test_ceiling_compiles_for_every_variant():
    for name in wgmma.VARIANTS:
        assert ceiling.compile_ceiling(name, verbose=False).binary


def test_barrier_waits_trap_after_2_s_and_50_times_later_under_the_sanitizer(monkeypatch):
    # racecheck slows the spinning waits so much that step 4 trapped on a 1x1x16 problem (H100)
    monkeypatch.delenv(sanitizer.VARIABLE, raising=False)
    plain = wgmma.defines("bf16")
    monkeypatch.setenv(sanitizer.VARIABLE, "racecheck")
    sanitized = wgmma.defines("bf16")
    assert plain["WAIT_LIMIT_MCYCLES"] == 4000
    assert sanitized["WAIT_LIMIT_MCYCLES"] == 50 * 4000
    # the limit is in the generated header, so the two builds never share a cache entry
    assert nvrtc.generate_header(plain) != nvrtc.generate_header(sanitized)


def test_the_lessons_own_sanitizer_workload_asks_for_the_longer_limit(monkeypatch, capsys):
    # run by hand as `compute-sanitizer python -m kernels.matmul.hopper.sanitize_wgmma`
    from kernels.matmul.hopper import sanitize_wgmma

    monkeypatch.delenv(sanitizer.VARIABLE, raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *_: (8, 9))
    assert sanitize_wgmma.main() == 1  # not a Hopper GPU: says so and stops
    assert "sm_89" in capsys.readouterr().out
    assert wgmma.wait_limit_mcycles() == 50 * wgmma.WAIT_LIMIT_MCYCLES


def test_steps_fit_hopper_shared_memory_and_name_their_configuration():
    for s in wgmma.STEPS.values():
        assert s.shared_bytes <= 227 * 1024, s
        assert s.template.startswith(s.kernel + "<")
        assert s.threads == 128 * (s.consumers + (1 if s.specialized else 0))
    best = wgmma.BEST
    assert (best.bm, best.bn, best.persistent) == (128, 256, True)
    assert best.grid(8192, 8192, 132) == 132 and best.grid(100, 100, 132) == 1
    assert wgmma.step(3).grid(4096, 4096, 132) == 32 * 32
    # step 5: clusters of two blocks on tiles stacked along M, each loading half of B's tile
    five = wgmma.step(5)
    assert (five.cluster, five.b_box_rows, five.bn) == (2, 128, 256)
    assert five.template.endswith(", 2>")
    assert five.grid(8192, 8192, 132) == 132  # 66 clusters
    assert five.grid(8192, 8192, 131) == 130  # a cluster needs two SMs
    assert five.grid(1, 1, 132) == 2  # one cluster: block 1's tile lies past M, computes zeros
    assert five.grid(300, 256, 132) == 2 * 2  # rows 0-255 and 256-511: two clusters
    # split-K: a block per work unit (a tile's share of K), or one per SM walking them
    assert dataclasses.replace(wgmma.step(3), splits=4).grid(4096, 4096, 132) == 32 * 32 * 4
    small = tiles.CANDIDATES[-1].step  # 64 x 128, persistent
    assert dataclasses.replace(small, splits=4).grid(64, 4096, 132) == 128
    assert dataclasses.replace(small, splits=8).grid(64, 4096, 132) == 132


@pytest.mark.parametrize(("number", "words"), [
    (1, "step 1 (wgmma_basic"), (2, "step 2 (wgmma_pipelined"), (4, "128x256 tiles"),
    (5, "cluster 2")])
def test_steps_that_cannot_split_k_refuse_splits_saying_why(number, words):
    with pytest.raises(ValueError, match="cannot split K") as refused:
        dataclasses.replace(wgmma.step(number), splits=2)
    assert words in str(refused.value) and "registers" in str(refused.value)
    with pytest.raises(ValueError, match="splits expected >= 1"):
        dataclasses.replace(wgmma.step(3), splits=0)


def test_split_k_workspace_holds_every_partial_tile_and_zeroed_counters():
    small = dataclasses.replace(tiles.CANDIDATES[-1].step, splits=4)  # 64 x 128, 1 consumer
    partials, arrivals = wgmma.workspace(small, 64, 4096, "cpu")
    assert partials.dtype == torch.float32 and partials.numel() == 32 * 4 * 64 * 128
    assert arrivals.dtype == torch.int32 and arrivals.tolist() == [0] * 32
    three = dataclasses.replace(wgmma.step(3), splits=2)  # 128 x 128, 2 consumers
    partials, arrivals = wgmma.workspace(three, 300, 520, "cpu")
    assert partials.numel() == (3 * 5) * 2 * 128 * 128 and arrivals.numel() == 3 * 5 * 2
    assert wgmma.workspace(wgmma.BEST, 64, 4096, "cpu") is None  # K whole: no workspace


@needs_nvrtc
@needs_disasm
def test_step5_multicasts_b_and_synchronises_its_cluster():
    text = sass.disassemble(wgmma.compile_step(5, "bf16", verbose=False))
    assert "UTMALDG.2D.MULTICAST" in text  # half of B's tile, to both blocks
    assert text.count("UCGABAR_WAIT") >= 2  # the cluster barrier at the start and the end
    four = sass.disassemble(wgmma.compile_step(4, "bf16", verbose=False))
    assert "MULTICAST" not in four and "UCGABAR" not in four


def test_every_step_and_variant_is_registered_with_its_metadata():
    found = kernels.get_kernels("matmul", where=lambda k: k.provider == "wgmma")
    assert {k.variant for k in found} == {f"step{s}_{v}" for s in wgmma.STEPS
                                          for v in wgmma.VARIANTS} | {
        f"auto_{v}" for v in wgmma.VARIANTS}
    for k in found:
        assert k.min_capability == (9, 0) and k.meta["kernel"].startswith("wgmma_")


@pytest.mark.parametrize(("capability", "words"), [
    ((8, 9), "see lesson 07"), ((10, 0), "tcgen05"), (None, "needs a CUDA GPU")])
def test_gpus_without_wgmma_get_reasons(capability, words):
    assert words in wgmma.gpu_reason(capability)
    assert wgmma.gpu_reason((9, 0)) is None


def _meta(shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


@pytest.mark.parametrize(("a", "b", "words"), [
    (torch.zeros(64, 32, dtype=torch.float16), torch.zeros(48, 32, dtype=torch.float16).t(),
     "takes a of bfloat16"),
    (torch.zeros(64, 32, dtype=torch.bfloat16), torch.zeros(48, 32, dtype=torch.bfloat16).t(),
     "CUDA tensors"),
])
def test_problems_the_kernel_refuses_say_why(a, b, words):
    assert words in wgmma.problem_reason("bf16", a, b)


def test_tma_operands_must_be_k_major_and_16_byte_aligned():
    odd_k = torch.zeros(8, 20, dtype=torch.bfloat16)  # rows 40 bytes apart
    assert "16-byte aligned rows" in tma.check_operand("a", odd_k)
    assert "K-major" in tma.check_operand("a", torch.zeros(32, 8, dtype=torch.bfloat16).t())
    assert tma.check_operand("a", torch.zeros(8, 64, dtype=torch.bfloat16)) is None
    with pytest.raises(ValueError, match="a expected a CUDA tensor"):
        tma.encode(torch.zeros(8, 64), 64, "a")


def test_malformed_problems_raise_naming_the_operand():
    with pytest.raises(ValueError, match="b expected 32 rows"):
        wgmma.matmul(torch.zeros(8, 32, dtype=torch.bfloat16), torch.zeros(16, 8,
                                                                            dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="variant expected one of"):
        wgmma.variant("int8")
    with pytest.raises(ValueError, match="step expected one of"):
        wgmma.step(9)


def _synthetic_buffer():
    buf = torch.zeros(wgmma.TIMELINE_BLOCKS, wgmma.ROLES, wgmma.TIMELINE_EVENTS, 4,
                      dtype=torch.int64)
    # block 0: the producer loads slot 0, consumer 0 waits then computes it
    buf[0, 0, 0] = torch.tensor([1000, 1100, 2 | (0 << 8) | (5 << 32), 7])
    buf[0, 1, 0] = torch.tensor([1000, 1400, 3 | (0 << 8) | (5 << 32), 7])
    buf[0, 1, 1] = torch.tensor([1400, 2400, 4 | (1 << 8) | (5 << 32), 7])
    return buf


def test_timeline_decodes_and_draws():
    events = timeline.decode(_synthetic_buffer())
    assert [(e.role, e.kind, e.stage, e.k_tile, e.start, e.end, e.sm) for e in events] == [
        ("producer", "load", 0, 5, 0, 100, 7), ("consumer 0", "wait data", 0, 5, 0, 400, 7),
        ("consumer 0", "compute", 1, 5, 400, 1400, 7)]
    assert timeline.bubble_fraction(events) == pytest.approx(400 / 1400)
    fig = timeline.gantt(events, "synthetic")
    assert fig.axes
    with pytest.raises(ValueError, match="buffer expected shape"):
        timeline.decode(torch.zeros(2, 2, 2, 2, dtype=torch.int64))


def test_timeline_round_trips_through_a_file(tmp_path):
    events = timeline.decode(_synthetic_buffer())
    path = timeline.save({"step2": events}, tmp_path / "t.json")
    environment, loaded = timeline.load(path)
    assert loaded == {"step2": events} and environment


# -- on a Hopper GPU ---------------------------------------------------------------------------

def _hopper():
    if reason := wgmma.reason_here():
        pytest.skip(reason)


def _shapes(v):
    s = v.k_step
    # tile multiples, edges on both sides, one K step, tall and skinny, several K tiles
    return [(128, 256, 8 * s), (1, 1, s), (257, 383, 12 * s), (1000, 8, 4 * s),
            (8, 1000, 4 * s), (300, 520, 72 * s)]


@pytest.mark.gpu
@pytest.mark.parametrize(("number", "name"), PAIRS)
def test_step_matches_float64_on_awkward_shapes(number, name):
    _hopper()
    s, v = wgmma.step(number), wgmma.variant(name)
    for m, n, k in _shapes(v):
        a = (torch.randn(m, k, device="cuda") / k**0.25).to(v.a)
        bt = (torch.randn(n, k, device="cuda") / k**0.25).to(v.b)
        expected = a.double() @ bt.double().t()
        out = torch.full((m, n), float("nan"), device="cuda", dtype=v.out)  # poisoned
        wgmma.launch(s, v, a, bt, out)
        torch.cuda.synchronize()
        scale = expected.abs().max().item() or 1.0
        torch.testing.assert_close(out.double(), expected, atol=2e-2 * scale, rtol=2e-2,
                                   msg=lambda msg, sh=(m, n, k): f"{s.name} {name} {sh}: {msg}")


@pytest.mark.gpu
def test_registered_call_and_bad_input_on_a_gpu():
    _hopper()
    k = kernels.get_kernel("matmul", "wgmma", "step4_bf16")
    a = torch.randn(200, 64, device="cuda").bfloat16()
    b = torch.randn(96, 64, device="cuda").bfloat16().t()
    torch.testing.assert_close(k(a, b).double(), a.double() @ b.double(), atol=0.1, rtol=2e-2)
    assert k(a[:, :0], b[:0]).abs().sum() == 0  # K = 0: zeros, no launch
    storage = torch.randn(200 * 64 + 1, device="cuda").bfloat16()
    assert "16-byte aligned start" in k.supports(storage[1:].view(200, 64), b)
    assert "multiple of 16" in k.supports(a[:, :40], b[:40])
    assert "column-major" in k.supports(a, b.contiguous())
    with pytest.raises(kernels.KernelNotSupported, match="column-major"):
        k(a, b.contiguous())


@pytest.mark.gpu
@pytest.mark.parametrize("number", [1, 4, 5])
def test_repeated_registered_calls_reuse_one_plan_and_see_new_data(number):
    # the second call is prepared once (descriptors, packed arguments): it must still write
    # each call's fresh output and read the operands' current values
    _hopper()
    k = kernels.get_kernel("matmul", "wgmma", f"step{number}_bf16")
    a = torch.randn(300, 128, device="cuda").bfloat16()
    b = torch.randn(136, 128, device="cuda").bfloat16().t()
    first = k(a, b)
    a.mul_(-2)  # same address, new values
    second = k(a, b)
    assert first.data_ptr() != second.data_ptr()
    torch.testing.assert_close(second.double(), a.double() @ b.double(), atol=0.2, rtol=2e-2)
    before = len(plans._plans)
    for _ in range(3):
        k(a, b)
    assert len(plans._plans) == before, "one problem, one plan"
    c = torch.randn(64, 128, device="cuda").bfloat16()  # another problem gets its own
    torch.testing.assert_close(k(c, b).double(), c.double() @ b.double(), atol=0.2, rtol=2e-2)


SPLIT_SHAPES = [(m, n, k) for m in (1, 16, 64, 100) for n in (4096, 520) for k in (4096, 96, 4064)]


def _check(out, expected, what):
    scale = expected.abs().max().item() or 1.0
    torch.testing.assert_close(out.double(), expected, atol=3e-2 * scale, rtol=3e-2,
                               msg=lambda msg: f"{what}: {msg}")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["bf16", "fp8_e4m3"])
def test_split_k_matches_float64_on_decoding_shapes(name):
    # the registered auto kernel with the splits the rule picks, and forced splits on both
    # kinds of kernel that can split (one consumer, persistent; two consumers, one block per
    # unit), K = 96 included: 2 K tiles in 8 splits run as 2 splits of one K tile each
    _hopper()
    v = wgmma.variant(name)
    auto = kernels.get_kernel("matmul", "wgmma", f"auto_{name}")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    forced = [(tiles.CANDIDATES[-1].step, 2), (tiles.CANDIDATES[-1].step, 8),
              (wgmma.step(3), 4)]
    picked = set()
    for m, n, k in SPLIT_SHAPES:
        a = (torch.randn(m, k, device="cuda") / k**0.25).to(v.a)
        bt = (torch.randn(n, k, device="cuda") / k**0.25).to(v.b)
        expected = a.double() @ bt.double().t()
        _check(auto(a, bt.t()), expected, f"auto {name} {m}x{n}x{k}")
        picked.add(tiles.choose_splits(m, n, wgmma.k_tiles(k, v.a.itemsize), sms))
        for s, splits in forced:
            out = torch.full((m, n), float("nan"), device="cuda", dtype=v.out)  # poisoned
            wgmma.launch(dataclasses.replace(s, splits=splits), v, a, bt, out)
            _check(out, expected, f"{s.template} splits={splits} {name} {m}x{n}x{k}")
    assert len(picked) >= 3, picked  # {1, 2, 4, 8} on the H100's 132 SMs


@pytest.mark.gpu
@pytest.mark.parametrize("per_row", [False, True])
def test_split_k_applies_fp8_scales_once_to_the_summed_tile(per_row):
    _hopper()
    v = wgmma.variant("fp8_e4m3")
    m, n, k = 64, 4096, 4096
    s = tiles.chosen_step(m, n, 0, wgmma.k_tiles(k, 1))
    assert s.splits > 1
    a = (torch.randn(m, k, device="cuda") / k**0.25).to(v.a)
    b = (torch.randn(n, k, device="cuda") / k**0.25).to(v.b).t()
    scale_a = torch.rand(m if per_row else 1, device="cuda") + 0.5
    scale_b = torch.rand(n if per_row else 1, device="cuda") + 0.5
    expected = (a.double() @ b.double()) * scale_a.double()[:, None] * scale_b.double()[None, :]
    _check(wgmma.run_checked(a, b, s, v, (scale_a, scale_b)), expected, "fp8 scales, split-K")


@pytest.mark.gpu
def test_split_k_calls_in_a_row_reuse_the_workspace_and_agree_bitwise():
    # the last split leaves its tile's counter at zero and sums the partials in split order,
    # whichever block finished last: every call is the same, to the bit
    _hopper()
    v = wgmma.variant("bf16")
    k = kernels.get_kernel("matmul", "wgmma", "auto_bf16")
    a = (torch.randn(64, 4096, device="cuda") / 8).bfloat16()
    b = (torch.randn(4096, 4096, device="cuda") / 8).bfloat16().t()
    results = [k(a, b) for _ in range(3)]
    s = tiles.chosen_step(64, 4096, 0, wgmma.k_tiles(4096, 2))
    assert s.splits > 1
    split_workspace = wgmma.plan(s, v, a, b, results[0]).split_workspace  # the calls' plan
    torch.cuda.synchronize()
    assert split_workspace is not None and int(split_workspace[1].count_nonzero()) == 0
    assert all(torch.equal(results[0], r) for r in results[1:])
    _check(results[0], a.double() @ b.double(), "auto bf16 64x4096x4096")


@pytest.mark.gpu
def test_ceiling_and_timeline_measure_on_a_gpu():
    _hopper()
    c = ceiling.wgmma_ceiling("bf16", iterations=256, repetitions=2)
    assert c.tflops > 0 and c.repetitions == 2
    for number in wgmma.STEPS:
        events = timeline.capture(number, 512, 512, 512)
        kinds = {e.kind for e in events}
        assert {"load", "compute"} <= kinds, (number, kinds)


def test_committed_h100_records_and_timelines_are_what_the_notebook_draws():
    # notebook 16 shows these on a CPU: they must parse, and hold every step of the staircase
    environment, records = bench.recorded()
    assert "H100" in environment
    for size in bench.SIZES:
        fig = bench.plot_staircase(records, size, environment=environment)
        assert len(fig.axes[0].patches) == len(wgmma.STEPS) + 2  # lesson 07, the steps, Triton
    assert len(bench.verdicts(records)) == 11  # step 4, fp8, then step 5's two
    assert {row["kernel"] for row in bench.power_table(records)} == {"cuBLAS", "step4", "step5"}
    _, timelines = timeline.load(env.RESULTS_DIR / f"{bench.RECORDED}-timeline.json")
    assert [label.split(":")[0] for label in timelines] == [s.name for s in wgmma.STEPS.values()]
    step4 = timelines[next(label for label in timelines if label.startswith("step4"))]
    assert {e.role for e in step4} == set(timeline.ROLE_NAMES)
    assert 0 < timeline.bubble_fraction(step4) < 1
