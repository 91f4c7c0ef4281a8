"""Lesson 04's kernels beyond the matrix test: what they compile to (any machine), the
histogram op's validation and its SASS order check on the course's own kernel, capturing a
kernel's printf, and GPU runs (values, divergence, printf's lines under a synchronisation)."""

import os

import pytest
import torch

import kernels
from course_utils import device_stdout, env, requirements
from exercises import first_kernels as first_kernels_exercises
from exercises import first_kernels_histogram as histogram_exercise
from exercises import nvrtc
from kernels import first_kernels
from kernels.histogram import nvrtc as histogram_nvrtc


def _report(compiled):
    from course_utils import sass

    if reason := requirements.unmet("nvrtc", "disasm"):
        pytest.skip("; ".join(reason))
    return sass.report(compiled)


def test_every_first_kernel_compiles_without_local_memory_except_printf():
    for name in first_kernels.SOURCES:
        report = _report(first_kernels.compile_kernel(name, arch="sm_90", verbose=False))
        spilled = report.resources.spill_store_bytes + report.resources.stack_bytes
        # printf passes its arguments through a stack buffer to vprintf: the one exception
        assert (spilled > 0 and report.count("CALL") > 0) if name == "hello" else spilled == 0


def test_a_lane_branch_and_a_warp_branch_compile_to_the_same_program():
    lane, warp = (_report(first_kernels.compile_kernel(f"branch_{on}", arch="sm_90",
                                                       verbose=False)) for on in ("lane", "warp"))
    for opcode in ("BSSY", "BSYNC", "BRA", "MUFU"):
        assert lane.census[opcode] == warp.census[opcode] > 0, opcode
    assert "0x1," in lane.sass and "0x20," in warp.sass  # bit 0 (the lane) or bit 5 (the warp)


def test_the_histograms_compile_to_global_and_shared_atomics():
    plain = _report(histogram_nvrtc.compile_histogram("global", arch="sm_90", verbose=False))
    shared = _report(histogram_nvrtc.compile_histogram("shared", 512, arch="sm_90",
                                                       verbose=False))
    assert (plain.count(*histogram_exercise.GLOBAL_ATOMICS) == 1
            and plain.count("ATOMS", "BAR") == 0)
    assert shared.count("ATOMS") >= 1 and shared.count("BAR") == 2
    # the exercise's check agrees
    assert histogram_exercise.histogram_order(shared.sass) is None


def test_the_order_check_names_a_missing_barrier():
    from exercises import kernel_checks, sass_checks
    from exercises.solutions import first_kernels as solutions

    for label, words in (("no barrier after zeroing", "zeroing of the bins"),
                         ("no barrier before the flush", "right after the counting"),
                         ("global atomic per element too", "inside the counting loop")):
        names = {}
        exec(solutions.WRONG["first_kernels.histogram"][label], names)
        found = sass_checks.sass_report(kernel_checks.compile_answer(
            names["HISTOGRAM_SOURCE"], "histogram_shared", "t"))
        assert words in (histogram_exercise.histogram_order(found.sass) or ""), label


def test_histogram_rejects_bad_arguments_naming_them():
    eager = kernels.get_kernel("histogram", "eager")
    with pytest.raises(ValueError, match="x expected an int32 tensor"):
        eager(torch.zeros(4), 3)
    with pytest.raises(ValueError, match="bins expected an int >= 1"):
        eager(torch.zeros(4, dtype=torch.int32), 0)


def test_the_shared_histogram_refuses_more_bins_than_shared_memory_holds():
    kernel = kernels.get_kernel("histogram", "nvrtc", "shared")
    assert "48 KiB" in (histogram_nvrtc._shared_check(torch.zeros(3, dtype=torch.int32),
                                                      20000) or "")
    assert kernel.check(torch.zeros(3, dtype=torch.int32), 256) is None


def test_the_divergence_map_check_rejects_a_lane_parity_and_accepts_the_solution():
    from exercises import Mismatch
    from exercises.solutions import nvrtc as solutions

    solution = {}
    exec(solutions.SOLUTIONS["nvrtc.divergence"], solution)
    threads = nvrtc.PROBED_BLOCKS * nvrtc.DIVERGENCE_THREADS
    nvrtc.expect_warp_uniform(
        [64 * (t // 64) + 2 * (t % 32) + (t // 32) % 2 for t in range(threads)])
    with pytest.raises(Mismatch, match="both even and odd"):
        nvrtc.expect_warp_uniform([t ^ 1 for t in range(threads)])
    if not requirements.unmet("nvrtc"):  # NVRTC evaluates the same map at compile time
        assert nvrtc._element_table(solution["ELEMENT_OF"])[:4] == [0, 2, 4, 6]


def test_int32_offsets_get_not_yet_past_2_31_elements_on_the_cpu():
    """The statement asks for the index in 64 bits: on a CPU the check runs the corner blocks of
    a matrix past 2^31 elements (reserved, not allocated), where an int offset wraps around (the
    blind answer of exercises/solutions/blind); the long long solution passes."""
    import exercises
    from exercises import solutions

    if env.HAS_CUDA or requirements.unmet("nvrtc"):
        pytest.skip("the CPU verdict, on a machine with NVRTC and no GPU")
    id = "first_kernels.flip_rows"
    wrong = solutions.blind_answers()[id]["element offsets in 32-bit int (overflow past 2^31 "
                                          "elements)"]
    said = {}
    for name, source in (("solution", solutions.answers()[id][0]), ("int", wrong)):
        said[name] = exercises.run_check(id, exercises.load_cell(source, "flip")["FLIP_SOURCE"])
    assert said["solution"].status == "passed", str(said["solution"])
    assert first_kernels_exercises.WIDE_RAN in str(said["solution"])
    assert said["int"].status == "not yet", str(said["int"])
    text = str(said["int"])
    assert "262144x8193" in text and "before the start of x" in text, text
    assert first_kernels_exercises.WIDE_HINT in text, text


def test_fd_output_captures_what_c_code_writes_to_fd_1():
    import ctypes

    with device_stdout.fd_output() as out:
        os.write(1, b"written to fd 1\n")
        ctypes.CDLL(None).printf(b"from libc %d\n", 42)
    assert out.text == "written to fd 1\nfrom libc 42\n"
    with device_stdout.fd_output() as again:
        pass
    assert again.text == ""  # fd 1 was put back, and nothing leaked into the next capture


@pytest.mark.gpu
def test_printf_lines_come_out_at_the_synchronisation():
    x = torch.arange(12, device="cuda", dtype=torch.float32)
    first_kernels.hello(x, blocks=1, threads=1)  # load the module: its first load synchronises
    device_stdout.captured(lambda: None)
    late = device_stdout.captured(lambda: first_kernels.hello(x, blocks=3, threads=4),
                                  synchronize=False)
    flushed = device_stdout.captured(lambda: None)
    lines = (late + flushed).splitlines()
    assert len(lines) == 12 and sorted(lines) == sorted(set(lines))
    assert device_stdout.printf_buffer_bytes() >= 1 << 20


@pytest.mark.gpu
def test_first_kernels_on_the_gpu():
    for n in (0, 1, 1000, 4099):
        x = torch.randn(n, device="cuda")
        torch.testing.assert_close(first_kernels.affine(x, -3.0, 0.5), -3.0 * x + 0.5)
    a, b = torch.randn(37, 45, device="cuda"), torch.randn(37, 45, device="cuda")
    for axis in ("row", "column"):
        torch.testing.assert_close(first_kernels.add_2d(a, b, axis), a + b, atol=0, rtol=0)
    x = torch.randn(10_001, device="cuda")
    for on in ("lane", "warp"):
        torch.testing.assert_close(first_kernels.branch(x, on),
                                   first_kernels.branch_reference(x, on), atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
def test_the_benchmarks_give_numbers():
    from kernels.first_kernels import bench as first_bench
    from kernels.histogram import bench as histogram_bench

    found = first_bench.divergence(1 << 20, min_time_s=0.02)
    assert found["lane"] > 0 and found["warp"] > 0
    copy, rows = histogram_bench.measure("skewed", elements=1 << 20, min_time_s=0.02)
    assert copy > 0 and all(r["GB/s"] for r in rows)
