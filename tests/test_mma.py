"""kernels/matmul/mma.cu: every variant compiles for every GPU generation, compiles to what the
lesson says it does (the SASS census), refuses what it cannot run, and on a GPU matches a float64
(or exact integer) reference at awkward shapes."""

import pytest
import torch

import kernels
from course_utils import nvrtc, sass
from kernels.matmul import autotune, bench_mma, mma

ARCHS = ("sm_80", "sm_89", "sm_90")
# the census does not depend on the tile shape; the lesson's small tile compiles fastest
SMALL = bench_mma.CENSUS_CONFIG
needs_nvrtc = pytest.mark.skipif(nvrtc.unavailable_reason() is not None,
                                 reason=f"NVRTC: {nvrtc.unavailable_reason()}")
needs_disasm = pytest.mark.skipif(sass.unavailable_reason() is not None,
                                  reason=f"disassembler: {sass.unavailable_reason()}")


def _compiled_pairs():
    for name, v in mma.VARIANTS.items():
        for arch in ARCHS:
            if mma.arch_capability(arch) >= v.min_sm:
                yield pytest.param(name, arch, id=f"{name}-{arch}")


@needs_nvrtc
@needs_disasm
@pytest.mark.parametrize(("name", "arch"), list(_compiled_pairs()))
def test_census_matches_the_native_table(name, arch):
    """The lesson's table of native and emulated variants is what ptxas actually emits."""
    v = mma.VARIANTS[name]
    code = sass.functions(sass.disassemble(mma.compile_mma(v, SMALL, arch, verbose=False)))
    census = sass.census(code["mma_matmul"])
    tensor_ops = {op: census[op] for op in ("HMMA", "IMMA", "QMMA") if census[op]}
    native = mma.native_sass(v, arch)
    if native is not None:
        assert set(tensor_ops) == {native}, f"{name} on {arch}: {tensor_ops}"
    else:
        # emulated: never the variant's own instruction; fp8 becomes conversions + HMMA
        assert "QMMA" not in tensor_ops, f"{name} on {arch}: {tensor_ops}"
        if v.a in (mma.F8_E4M3, mma.F8_E5M2):
            assert census["HMMA"] and census["F2FP"], f"{name} on {arch}: {census}"


def test_native_table_for_the_lesson():
    assert mma.native_sass("bf16", "sm_90") == "HMMA"
    assert mma.native_sass("fp8_e4m3_e4m3", "sm_89") == "QMMA"
    assert mma.native_sass("fp8_e4m3_e4m3", "sm_90") is None  # Hopper's fp8 is wgmma's
    assert mma.native_sass("int4", "sm_80") == "IMMA"
    assert mma.native_sass("int4", "sm_90") is None
    assert mma.native_sass("fp8_e4m3_e4m3", "sm_80") is None  # no fp8 mma before Ada


def test_every_variant_is_registered_with_its_metadata():
    found = kernels.get_kernels("matmul", where=lambda k: k.provider == "mma")
    assert {k.variant for k in found} == set(mma.VARIANTS)
    int_kernels = kernels.get_kernels(
        "matmul", where=lambda k: k.provider == "mma" and k.meta["accumulator"] == "s32")
    assert {k.variant for k in int_kernels} == {"int8", "int4"}


def test_variant_facts():
    assert mma.variant("bf16").k_step == 16
    assert mma.variant("tf32").k_step == 8
    assert mma.variant("int8").k_step == 32
    assert mma.variant("int4").k_step == 64
    assert mma.variant("bf16").flop_per_mma == 4096
    with pytest.raises(ValueError, match="variant expected one of"):
        mma.variant("bf17")


@pytest.mark.parametrize(("fields", "match"), [
    ({"bm": 100}, "multiples"),
    ({"bk_bytes": 32}, "bk_bytes expected 64 or 128"),
    ({"stages": 1}, "stages expected at least 2"),
    ({"wm": 0}, "wm expected a positive int"),
])
def test_config_rejects_bad_shapes(fields, match):
    with pytest.raises(ValueError, match=match):
        mma.Config(**{**vars(mma.DEFAULT_CONFIG), **fields})


def test_swizzle_spreads_an_ldmatrix_phase_over_all_banks():
    """The 8 rows one ldmatrix phase reads land in 8 different 16-byte bank groups."""
    for chunks in (4, 8):
        for chunk in range(chunks):
            groups = {(row * chunks + mma.swizzle(row, chunk, chunks)) % 8 for row in range(8)}
            assert len(groups) == 8
        plain = {(row * chunks + 0) % 8 for row in range(8)}
        assert len(plain) < 8  # without the swizzle they collide


def _operands(v, m, n, k, device="cpu"):
    if v.integer:
        return (torch.randint(-8, 8, (m, k), dtype=torch.int8, device=device),
                torch.randint(-8, 8, (n, k), dtype=torch.int8, device=device).t())
    return (torch.randn(m, k, device=device).to(v.a), torch.randn(n, k, device=device).to(v.b).t())


def _bf16(*shape):
    return torch.randn(*shape).to(torch.bfloat16)


@pytest.mark.parametrize(("a", "b", "match"), [
    (_bf16(8, 32), _bf16(32, 8), "b must be column-major"),  # b row-major
    (_bf16(32, 8).t(), _bf16(8, 32).t(), "a must be row-major"),  # a column-major
    (_bf16(8, 24), _bf16(8, 24).t(), "multiple of 16"),  # K not a multiple of the K-step
    (_bf16(8, 32).half(), _bf16(8, 32).t(), "takes a of bfloat16, got float16"),
], ids=["b-row-major", "a-column-major", "k-step", "dtype"])
def test_problems_the_kernel_refuses_say_why(a, b, match):
    assert match in mma.problem_reason("bf16", a, b)


def test_cpu_tensors_and_old_gpus_get_reasons():
    v = mma.variant("bf16")
    a, b = _operands(v, 16, 16, 32)
    assert "CUDA" in mma.problem_reason(v, a, b)
    assert "sm_80+" in mma.gpu_reason(v, (7, 5))  # a T4 has no bf16 mma.sync
    assert "sm_89+" in mma.gpu_reason("fp8_e4m3_e4m3", (8, 0))
    assert mma.gpu_reason("int8", (9, 0)) is None
    kernel = kernels.get_kernel("matmul", "mma", "bf16")
    assert kernel.supports(a, b) is not None


def test_malformed_problems_raise_naming_the_operand():
    kernel = kernels.get_kernel("matmul", "mma", "bf16")
    a = torch.zeros(4, 32, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="b expected 32 rows"):
        kernel.supports(a, torch.zeros(16, 4, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="b expected the dtype of a"):
        kernel.supports(a, torch.zeros(32, 4, dtype=torch.float16))


def test_int4_packing_puts_the_first_value_in_the_low_nibble():
    x = torch.tensor([[1, -2, 7, -8]], dtype=torch.int8)
    packed = mma.pack_int4(x)
    # 0xE1 = (-2 << 4) | 1 and 0x87 = (-8 << 4) | 7, read back as signed bytes
    assert packed.tolist() == [[0xE1 - 256, 0x87 - 256]]


# -- on a GPU ---------------------------------------------------------------------------------


def _reference(a, b):
    return a.double() @ b.double()


def _shapes(v):
    s = v.k_step
    return [(1, 1, s), (33, 65, 4 * s), (128, 256, 8 * s), (257, 130, 12 * s), (64, 64, 0)]


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(mma.VARIANTS))
def test_variant_matches_reference_on_awkward_shapes(name):
    v = mma.variant(name)
    if reason := mma.gpu_reason(v, torch.cuda.get_device_capability()):
        pytest.skip(reason)
    for m, n, k in _shapes(v):
        a, b = autotune.operands(v, m, n, k)
        expected = _reference(a, b)
        for config in (mma.DEFAULT_CONFIG, mma.Config(64, 128, 32, 64, 64, 3)):
            out = torch.full((m, n), float("nan") if not v.integer else -7, device="cuda"
                             ).to(v.out)  # poisoned: a kernel that writes nothing fails
            if k:
                mma.launch(v, *mma.prepare(v, a, b), out, config)
            else:
                out = mma.matmul(a, b, v, config)
            torch.cuda.synchronize()
            got = out.double()
            if v.integer:
                assert torch.equal(got, expected), f"{name} {m}x{n}x{k}: not exact"
            else:
                scale = expected.abs().max().item() or 1.0
                tol = 3e-2 if v.acc == "f16" else 1e-2
                torch.testing.assert_close(got, expected, atol=tol * scale, rtol=tol,
                                           msg=lambda msg, s=(m, n, k): f"{name} {s}: {msg}")


@pytest.mark.gpu
def test_misaligned_and_cpu_operands_are_refused_on_a_gpu():
    v = mma.variant("bf16")
    storage = torch.randn(64 * 32 + 1, device="cuda").to(torch.bfloat16)
    a = storage[1:].view(64, 32)  # starts 2 bytes into the allocation
    b = torch.randn(64, 32, device="cuda").to(torch.bfloat16).t()
    assert "16-byte boundary" in mma.problem_reason(v, a, b)
    with pytest.raises(ValueError, match="16-byte boundary"):
        mma.matmul(a, b, v)
    with pytest.raises(ValueError, match="CUDA"):
        mma.matmul(a.cpu(), b.cpu(), v)


@pytest.mark.gpu
def test_ceiling_measures_a_rate():
    from kernels.matmul import ceiling

    assert ceiling.mma_ceiling("bf16", iterations=16) > 0


def test_a_ceiling_is_the_median_of_repetitions_and_says_its_spread():
    from kernels.matmul import ceiling

    steady = ceiling.Ceiling("bf16", (580.0, 585.0, 590.0, 584.0, 586.0), "TFLOP/s")
    assert steady.rate == 585.0 and steady.stable
    assert f"{steady.spread:.4f}" == f"{10 / 585:.4f}" and "spread 1.7%" in str(steady)
    shared = ceiling.Ceiling("int8", (1224.0, 910.0, 1182.0, 1220.0, 1219.0), "TOP/s")
    assert not shared.stable
    with pytest.raises(ValueError, match="repetitions expected an int >= 5"):
        ceiling.measure("bf16", repetitions=3)


@pytest.mark.gpu
def test_ceiling_repeats_at_least_five_times():
    from kernels.matmul import ceiling

    found = ceiling.measure("bf16", iterations=16)
    assert len(found.rates) >= 5 and all(r > 0 for r in found.rates)


def test_compile_many_compiles_in_parallel_what_compile_mma_compiles_one_by_one():
    small = mma.Config(64, 64, 32, 32, 64, 2)
    jobs = [("bf16", small), ("int8", small), ("bf16", small)]
    found = mma.compile_many(jobs, "sm_90")
    assert [c.key for c in found] == [mma.compile_mma(v, c, "sm_90").key for v, c in jobs]
    assert all(c.binary[:4] == b"\x7fELF" for c in found)


def test_a_job_may_name_its_own_architecture(monkeypatch):
    seen = []
    monkeypatch.setattr(mma, "compile_mma", lambda v, config, arch, **kw: seen.append(
        (v.name, arch)) or (v.name, arch))
    found = mma.compile_many([("bf16", SMALL, "sm_80"), ("int8", SMALL)], "sm_90")
    assert found == [("bf16", "sm_80"), ("int8", "sm_90")] and sorted(seen) == sorted(found)


def test_the_census_compiles_each_variant_only_where_its_architecture_has_it(monkeypatch):
    monkeypatch.setattr(bench_mma, "census_archs", lambda: ["sm_80", "sm_89", "sm_90"])
    monkeypatch.setattr(mma, "compile_many", lambda jobs: [job[1] for job in jobs])
    found = bench_mma.compile_census()
    assert ("bf16", "sm_80") in found and ("fp8_e4m3_e4m3", "sm_89") in found
    assert ("fp8_e4m3_e4m3", "sm_80") not in found  # no fp8 mma.sync before Ada
    assert set(found.values()) == {bench_mma.CENSUS_CONFIG}


def test_a_ceiling_that_moved_more_than_ten_percent_is_explained():
    from kernels.matmul import bench_mma

    before = [{"what": "mma int8 4096^3 (cfg)", "value": 700.0, "ceiling": 910.0},
              {"what": "mma bf16 4096^3 (cfg)", "value": 380.0, "ceiling": 611.0}]

    def point(variant, top, spread):
        return bench_mma.Point(variant, 4096, 1.0, 1.0, top, spread, None, None, "cfg", "TOP/s")

    note = bench_mma.ceiling_changes([point("int8", 1224.0, 0.01), point("bf16", 600.0, 0.01)],
                                     before)
    assert "int8: ceiling 1224 TOP/s" in note and "+35%" in note and "agree" in note
    assert "bf16" not in note  # -2%: within 10%
    assert bench_mma.ceiling_changes([point("bf16", 600.0, 0.01)], before) is None
    assert "disagree" in bench_mma.ceiling_changes([point("int8", 1224.0, 0.09)], before)


def test_arch_capability_reads_nvrtc_targets():
    assert mma.arch_capability("sm_89") == (8, 9)
    assert mma.arch_capability("sm_120") == (12, 0)
    assert mma.arch_capability("sm_90a") == (9, 0)
