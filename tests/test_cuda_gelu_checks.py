"""Lesson 05's kernel checks, the parts that run without a GPU: the poisoned inputs and fenced
outputs of the GPU child (with Python stand-ins for the kernel), the verdicts on Nsight
Compute's counters (with counters made up as ncu reports them), the shuffle-mask test of the
PTX, and the CPU verdict of cuda_gelu.silu (never "passed" without a GPU)."""

import pytest
import torch

import exercises
from course_utils import env, requirements
from exercises import (
    Mismatch,
    access_checks,
    cuda_gelu,
    cuda_gelu_kernels,
    solutions,
    spec_checks,
)

TRANSPOSE = cuda_gelu_kernels.SPECS["cuda_gelu.transpose"]


def _run(kernel):
    return spec_checks.run_cases(TRANSPOSE, kernel, device="cpu")


def _right(x, y, rows, cols, grid, block):
    y.copy_(x.t())


def test_fences_catch_writes_before_and_after_y_whatever_the_value():
    def before(x, y, rows, cols, grid, block):
        _right(x, y, rows, cols, grid, block)
        if y.numel():  # y is a view into the fenced buffer: element -1 is the fence
            torch.as_strided(y, (1,), (1,), y.storage_offset() - 1)[0] = 1.0

    def nan_past_the_end(x, y, rows, cols, grid, block):
        _right(x, y, rows, cols, grid, block)
        torch.as_strided(y, (y.numel() + 1,), (1,))[-1] = float("nan")

    assert _run(_right) == {"ok": True}
    assert "before the start of y" in _run(before)["mismatch"]
    assert "past the end of y" in _run(nan_past_the_end)["mismatch"]


def test_a_read_outside_x_that_is_used_shows_in_y():
    def reads_past_x(x, y, rows, cols, grid, block):
        _right(x, y, rows, cols, grid, block)
        if x.numel():  # the element after x's last one lands in y's last
            y.view(-1)[-1] = torch.as_strided(x, (x.numel() + 1,), (1,))[-1]

    assert "elements differ" in _run(reads_past_x)["mismatch"]


def test_the_sanitizer_case_uses_exact_allocations():
    seen = []

    def spy(x, y, rows, cols, grid, block):
        seen.append(x.untyped_storage().nbytes() == x.numel() * 4)
        _right(x, y, rows, cols, grid, block)

    spec_checks.run_cases(TRANSPOSE, spy, shapes=TRANSPOSE.shapes[-1:], device="cpu",
                            exact=True)
    spec_checks.run_cases(TRANSPOSE, spy, shapes=TRANSPOSE.shapes[-1:], device="cpu")
    assert seen == [True, False]


def _launch(ld, st, nbytes, waves=(1.0, 1.0), instructions=100.0):
    sectors = nbytes / 32
    return {"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": ld * sectors,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": st * sectors,
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": waves[0] * instructions,
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": waves[1] * instructions,
            "smsp__sass_inst_executed_op_shared_ld.sum": instructions,
            "smsp__sass_inst_executed_op_shared_st.sum": instructions}


def test_transpose_counters_reject_strided_access_and_bank_conflicts():
    (rows, cols), = cuda_gelu_kernels.TRANSPOSE_PROFILED
    nbytes = rows * cols * 4
    assert "coalesced, no bank conflicts" in cuda_gelu_kernels._transpose_access(
        [_launch(1.0, 1.0, nbytes)])[0]
    for launch, says in [(_launch(8.0, 1.0, nbytes), "reading x moves 8.0 sectors"),
                         (_launch(1.0, 8.0, nbytes), "writing y moves 8.0 sectors"),
                         (_launch(1.0, 1.0, nbytes, (32.0, 1.0)), "load from the tile takes 32"),
                         (_launch(1.0, 1.0, nbytes, (1.0, 2.0)), "store into the tile takes 2")]:
        with pytest.raises(Mismatch, match=says):
            cuda_gelu_kernels._transpose_access([launch])
    missing = cuda_gelu_kernels._transpose_access([{}])
    assert missing[0].startswith(access_checks.UNMEASURED)


def _stores(launch, stores):
    return {**launch, access_checks.THREAD_METRICS[1]: float(stores)}


def test_warp_sum_counters_reject_uncoalesced_reads_and_a_store_from_every_lane():
    (rows, cols), = cuda_gelu_kernels.WARP_SUM_PROFILED
    coalesced = _launch(1.0, 8.0, rows * cols * 4)
    read = cuda_gelu_kernels._warp_sum_access([_stores(coalesced, rows)])
    assert "coalesced reads, one store per row" in read[0] and f"{rows} stores" in read[0]
    with pytest.raises(Mismatch, match="8.0 sectors per sector"):
        cuda_gelu_kernels._warp_sum_access([_stores(_launch(8.0, 8.0, rows * cols * 4), rows)])
    with pytest.raises(Mismatch, match="more than one lane stores each row"):
        cuda_gelu_kernels._warp_sum_access([_stores(coalesced, 32 * rows)])
    # without thread-level counts the stores are not verified, and a GPU run says so
    assert cuda_gelu_kernels._warp_sum_access([coalesced])[0].startswith(access_checks.UNMEASURED)


def _silu_launches(extra=0, scalar=False):
    found = []
    for n, ox, oy in cuda_gelu.SILU_PROFILED:
        want = cuda_gelu._silu_accesses(n, ox, oy)
        made = n if scalar else want + extra
        found.append(dict(zip(access_checks.THREAD_METRICS, (float(made), float(made)),
                              strict=True)))
    return found


def test_silu_counters_want_a_float4_per_aligned_group_and_each_element_once():
    assert "16-byte accesses" in cuda_gelu.silu_access(_silu_launches())[0]
    with pytest.raises(Mismatch, match="went one element at a time"):
        cuda_gelu.silu_access(_silu_launches(scalar=True))
    with pytest.raises(Mismatch, match="went one element at a time"):  # 3 more in one thread
        cuda_gelu.silu_access(_silu_launches(extra=3))


def _silu_sectors(aligned_ratio, misaligned_ratio):
    def ratio(ox, oy):
        return aligned_ratio if ox % 4 == 0 and oy % 4 == 0 else misaligned_ratio

    return [_launch(ratio(ox, oy), ratio(ox, oy), 4 * n) for n, ox, oy in cuda_gelu.SILU_PROFILED]


def test_silu_sectors_stand_in_for_thread_counts_on_every_launch():
    # as an H100 measured the solution: a float4 copy's sectors where aligned, 4 per sector
    # where the statement's threads go one element at a time
    assert "sectors per sector" in cuda_gelu.silu_access(_silu_sectors(1.0, 4.2))[0]
    with pytest.raises(Mismatch, match="4.0 sectors per sector.*one element at a time"):
        cuda_gelu.silu_access(_silu_sectors(4.0, 4.0))  # e.g. scalar whenever n % 4 != 0
    with pytest.raises(Mismatch, match="5.1 sectors per sector.*more than once"):
        cuda_gelu.silu_access(_silu_sectors(1.0, 5.13))  # i <= 4t + 4: five elements a thread
    assert cuda_gelu.silu_access([{}] * len(cuda_gelu.SILU_PROFILED))[0].startswith(
        access_checks.UNMEASURED)


def test_a_missing_measurement_is_said_and_fails_under_strict(monkeypatch):
    report = exercises.Report()
    monkeypatch.setattr(env, "STRICT", False)
    access_checks.unmeasured(report, "coalescing", "no ncu")
    assert report.lines == [f"{access_checks.UNMEASURED}coalescing (no ncu)"]
    monkeypatch.setattr(env, "STRICT", True)
    with pytest.raises(exercises.CannotCheck, match="COURSE_STRICT=1"):
        access_checks.unmeasured(report, "coalescing", "no ncu")


def test_a_partial_shuffle_mask_is_read_from_the_ptx():
    ptx = ("mov.u32 \t%r11, 65535;\nshfl.sync.down.b32 \t%r12|%p7, %r7, %r10, %r9, %r11;\n"
           "mov.u32 \t%r20, -1;\nshfl.sync.down.b32 \t%r21|%p8, %r7, %r10, %r9, %r20;\n"
           "shfl.sync.down.b32 \t%r22|%p9, %r7, 16, 31, -1;\n"
           "shfl.sync.down.b32 \t%r23|%p9, %r7, 16, 31, %r99;\n")  # %r99: computed, not judged
    assert cuda_gelu_kernels.partial_shuffle_masks(ptx) == [0xFFFF]


def test_silu_without_a_gpu_is_decided_on_the_cpu():
    if env.HAS_CUDA or requirements.unmet("nvrtc"):
        pytest.skip("the CPU verdict, on a machine with NVRTC and no GPU")
    names = exercises.load_cell(solutions.answers()["cuda_gelu.silu"][0], "silu_cpu")
    result = exercises.run_check("cuda_gelu.silu", names["SILU_SOURCE"])
    assert result.status == "passed", str(result)
    text = str(result)
    assert "on this CPU" in text and "16-byte accesses on aligned memory" in text, text
    assert "not timed here" in text, text


def test_a_warp_sum_under_activemask_gets_not_yet_on_the_cpu():
    """__activemask() promises no convergence: in the CPU runner's shuffled run it names the
    calling lane alone, and a shuffle under that mask reads a lane it does not name (the blind
    answer of exercises/solutions/blind); the full-mask solution passes in every order."""
    if env.HAS_CUDA or requirements.unmet("nvrtc"):
        pytest.skip("the CPU verdict, on a machine with NVRTC and no GPU")
    id = "cuda_gelu.warp_sum"
    wrong = solutions.blind_answers()[id]["shuffle mask from __activemask() instead of the full "
                                          "warp"]
    for source, status in ((solutions.answers()[id][0], "passed"), (wrong, "not yet")):
        result = exercises.run_check(id, exercises.load_cell(source, "warp_sum")["WARP_SUM_SOURCE"])
        assert result.status == status, str(result)
    text = str(result)
    assert "which is not in the shuffle's mask" in text and "__activemask()" in text, text


@pytest.mark.gpu
@pytest.mark.parametrize(("id", "says"), [
    ("cuda_gelu.silu", "16-byte accesses on aligned memory"),
    ("cuda_gelu.transpose", "coalesced, no bank conflicts"),
    ("cuda_gelu.warp_sum", "one store per row (Nsight Compute)")])
def test_on_a_gpu_the_solution_passes_with_the_property_measured(id, says):
    # a GPU run must not pass by skipping the measurement (ncu missing or refused the counters)
    names = exercises.load_cell(solutions.answers()[id][0], "solution_ncu")
    result = exercises.run_check(id, *(names[n] for n in exercises.get(id).answers))
    assert result.passed and says in str(result), str(result)
    assert access_checks.UNMEASURED not in str(result), str(result)
