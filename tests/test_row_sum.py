"""Row sums beyond the matrix test: validation, float32 accumulation, what the CUDA kernels
compile to (on any machine), the CUDA-exercise machinery's CPU paths, and a GPU run."""

import json

import pytest
import torch

import kernels
from course_utils import env, requirements
from exercises import cuda_gelu_kernels, kernel_checks, spec_checks
from kernels.row_sum import bench
from kernels.row_sum import nvrtc as row_sum_nvrtc


def test_row_sum_rejects_a_1d_input_naming_it():
    with pytest.raises(ValueError, match="x expected a 2-D tensor, got shape"):
        kernels.get_kernel("row_sum", "eager")(torch.randn(10))


def test_reference_accumulates_bfloat16_in_float32():
    x = torch.full((1, 4096), 1.0, dtype=torch.bfloat16)
    y = kernels.get_kernel("row_sum", "eager")(x)
    assert y.dtype == torch.float32 and y.item() == 4096.0  # bf16 sums stall at 256


def _sass(variant):
    from course_utils import sass

    if reason := requirements.unmet("nvrtc", "disasm"):
        pytest.skip("; ".join(reason))
    return sass.report(row_sum_nvrtc.compile_row_sum(variant, torch.float32, arch="sm_90",
                                                     verbose=False))


def test_warp_kernel_adds_with_five_shuffles_and_no_shared_memory():
    report = _sass("warp")
    assert report.count("SHFL") == 5 and report.count("STS", "LDS", "BAR") == 0
    assert report.resources.spill_store_bytes + report.resources.spill_load_bytes == 0


def test_block_kernel_meets_in_shared_memory_after_a_barrier():
    report = _sass("block")
    assert report.count("SHFL") == 10
    assert report.count("STS") >= 1 and report.count("LDS") >= 1 and report.count("BAR") >= 1


def test_an_unknown_variant_is_a_value_error():
    with pytest.raises(ValueError, match="variant expected one of warp, block"):
        row_sum_nvrtc.compile_row_sum("tree")


def test_the_benchmark_gives_every_kernel_a_number_or_a_reason():
    copy, rows = bench.measure(256, elements=1 << 12, device="cpu", min_time_s=0.001)
    assert copy > 0 and {r["kernel"] for r in rows} == {k.label for k in
                                                         kernels.all_kernels("row_sum")}
    assert all(r["GB/s"] or r["note"] for r in rows)


def test_a_cpu_check_shows_the_recorded_gpu_result(tmp_path, monkeypatch):
    record = {"exercises": {"cuda_gelu.warp_sum": {
        "status": "passed", "lines": ["matches the reference on 1x1, 3x31", "speed: 2,900 GB/s"],
        "environment": {"device": "Some GPU", "torch": "2.11", "date": "today", "git": "abc"}}}}
    path = tmp_path / "exercises-gpu.json"
    path.write_text(json.dumps(record))
    monkeypatch.setattr(kernel_checks, "RECORDED", path)
    lines = kernel_checks.recorded_lines("cuda_gelu.warp_sum")
    assert "Some GPU" in lines[0] and "passed" in lines[0] and "  speed: 2,900 GB/s" in lines
    assert "no GPU run" in kernel_checks.recorded_lines("cuda_gelu.transpose")[0]


def test_the_cuda_exercise_child_names_the_case_it_died_on():
    if env.HAS_CUDA:
        pytest.skip("on a GPU the solution tests run the child for real")
    # without a GPU the child runs the kernel on the CPU: this one takes no arguments, so the
    # first case's launch raises there, and the parent names that case
    result = kernel_checks.run_child("cuda_gelu.warp_sum",
                                     "extern \"C\" __global__ void warp_row_sum() {}")
    assert result["case"] == "1x1" and "takes 0 arguments" in result["crash"], result


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["warp", "block"])
def test_long_and_many_rows_on_the_gpu(variant):
    # against the exact (float64) sum: two float32 sums of a million terms in different orders
    # differ by a few ulps of their partial sums (0.003 on the H100 for torch.sum and the warp
    # kernel), so the allowance grows with the row's absolute sum: 1e-7 of it is 0.08 for a row
    # of 2^20, while one element dropped or added twice costs about 0.8
    kernel = kernels.get_kernel("row_sum", "nvrtc", variant)
    for shape in [(1 << 14, 333), (7, 1 << 20)]:
        x = torch.randn(*shape, device="cuda")
        error = (kernel(x).double() - x.double().sum(-1)).abs()
        allowed = 1e-3 + 1e-7 * x.double().abs().sum(-1)
        assert (error <= allowed).all(), (
            f"{kernel.name} on {shape}: worst error {error.max().item():.3g}, "
            f"allowed {allowed[error.argmax()].item():.3g}")


def test_the_gpu_cases_catch_a_write_past_the_end_and_a_wrong_value():
    # the child's loop, on the CPU with Python stand-ins for the launched kernel
    spec = cuda_gelu_kernels.SPECS["cuda_gelu.warp_sum"]

    def right(x, y, rows, cols, grid, block):
        y[:] = x.sum(-1)

    def past_the_end(x, y, rows, cols, grid, block):
        right(x, y, rows, cols, grid, block)
        torch.as_strided(y, (y.numel() + 1,), (1,))[-1] = 0.0  # y[rows]

    def last_column_lost(x, y, rows, cols, grid, block):
        y[:] = x[:, :-1].sum(-1)

    def run(kernel):
        return spec_checks.run_cases(spec, kernel, device="cpu")

    assert run(right) == {"ok": True}
    assert "wrote past the end of y" in run(past_the_end)["mismatch"]
    assert "elements differ" in run(last_column_lost)["mismatch"]
