"""The recorded figures (lessons 01 and 02) and the course map, drawn from the records on a CPU."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from course_utils import claims, env, results, syllabus  # noqa: E402
from course_utils.results import Record  # noqa: E402
from kernels import course_map  # noqa: E402
from kernels import recorded_figures as rf  # noqa: E402
from kernels.matmul import bench_steps  # noqa: E402

HOPPER_LESSON = syllabus.BY_SLUG["hopper_matmul"].label  # the staircase's last lesson

HOPPER = "07_hopper_matmul"


@pytest.fixture
def full_dir(tmp_path):
    """A device with every stair: lesson 07's steps and lesson 16's, each beside cuBLAS."""
    steps = [("1_naive", 0.5), ("2_smem_tiled", 19.3), ("3_mma_simple", 55.1),
             (bench_steps.FULL_KERNEL, 421.0)]
    results.save(bench_steps.LESSON, [
        Record(bench_steps.LESSON, bench_steps.what(s), v, "TFLOP/s", peer=784.0,
               peer_what=bench_steps.PEER) for s, v in steps], directory=tmp_path)
    ceiling = dict(ceiling=952.0, ceiling_what="wgmma bf16 ceiling, same run", peer=730.0,
                   peer_what="torch.mm (cuBLAS), same run")
    hopper = [Record(HOPPER, "wgmma bf16 instruction ceiling (spread 1% over 5 runs)", 952.0,
                     "TFLOP/s"),
              Record(HOPPER, "bf16 mma.sync (mma.cu) 4096^3", 353.0, "TFLOP/s", **ceiling)]
    hopper += [Record(HOPPER, f"bf16 step{i}: idea {i} 4096^3", v, "TFLOP/s", **ceiling)
               for i, v in ((1, 507.0), (2, 433.0), (3, 527.0), (4, 635.0))]
    results.save(HOPPER, hopper, directory=tmp_path)
    return claims.load(claims.results_files(tmp_path)[0], tmp_path)


def test_the_staircase_climbs_from_the_naive_step_to_wgmma(full_dir):
    stairs = course_map.stairs(full_dir)
    assert [label for label, _, _ in stairs] == [
        "07 1 naive", "07 2 smem_tiled", "07 3 mma_simple", "08 mma.cu",
        *(f"{HOPPER_LESSON} step{n}" for n in (1, 2, 3, 4))]
    assert stairs[3][1] == 353.0  # lesson 16's own run of the mma.sync kernel
    assert stairs[-1][2] == pytest.approx(635 / 730)
    fig = course_map.staircase(full_dir)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"  # three orders of magnitude
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "07 1 naive: one thread per output"
    assert labels[-1].startswith(f"{HOPPER_LESSON} step4")
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith("0.5  (") for t in texts) and any("635" in t for t in texts)
    plt.close(fig)


def test_the_roofline_puts_memory_bound_kernels_left_of_the_matmuls(full_dir):
    found = {p.label: p for p in course_map.points(full_dir)}
    assert {"step 1_naive", "step 3_mma_simple"} <= set(found)
    # 2n³ FLOP on 3n² bf16 elements: 2n / (3 · 2) FLOP per byte
    assert found["step 1_naive"].intensity == pytest.approx(2 * 4096 / 6)
    recorded = claims.with_lesson(rf.GELU_LESSON)
    if recorded is None:
        pytest.skip("no results file has GeLU records")
    gelu = {p.label: p for p in course_map.points(recorded, (rf.GELU_LESSON,))}
    assert gelu["gelu triton"].intensity == pytest.approx(10 / 8)  # 10 FLOP on 4 + 4 bytes
    # the hand-written GeLU moves each element many times: its intensity is that much lower
    ratio = course_map.traffic_ratio("gelu", "float32")
    assert ratio > 6 and gelu["gelu manual"].intensity == pytest.approx(1.25 / ratio)
    assert max(p.intensity for p in gelu.values()) < min(
        p.intensity for p in found.values() if not p.memory_bound)
    plt.close(course_map.roofline(recorded))


def test_the_course_map_draws_from_the_committed_reference_records():
    recorded = claims.load()
    for fig in (course_map.roofline(recorded), course_map.staircase(recorded)):
        notes = " ".join(t.get_text() for t in fig.texts)
        assert recorded.device in notes  # labelled with the GPU that measured it
        plt.close(fig)
    assert [label for label, _, _ in course_map.stairs(recorded)][-1] == f"{HOPPER_LESSON} step5"


def test_lesson_01_and_02_figures_from_the_records():
    for lesson, draw in ((rf.SWEEP_LESSON, rf.sweep), (rf.GELU_LESSON, rf.gelu_bandwidth),
                         (rf.SOFTMAX_LESSON, rf.softmax_sweep)):
        recorded = claims.with_lesson(lesson)
        if recorded is None:
            pytest.skip(f"no results file has records of {lesson}")
        fig = draw(recorded)
        notes = " ".join(t.get_text() for t in fig.texts)
        assert f"recorded by make bench on {recorded.stamp(lesson)['device']}" in notes
        plt.close(fig)
    lines = rf.sweep_claims(claims.with_lesson(rf.SWEEP_LESSON))
    assert lines and all("TFLOP/s" in line for line in lines)


def test_bad_input_says_what_was_expected(full_dir):
    with pytest.raises(ValueError, match="recorded expected"):
        rf.sweep(None)
    with pytest.raises(ValueError, match="records of profiling"):
        rf.sweep(full_dir)
    with pytest.raises(ValueError, match="op expected"):
        course_map.traffic_ratio("matmul", "float32")
    with pytest.raises(ValueError, match="staircase records at 1024"):
        course_map.staircase(full_dir, size=1024)


@pytest.mark.skipif(env.HAS_CUDA, reason="the CPU path: a GPU measures instead")
def test_the_steps_benchmark_says_why_it_skips_without_a_gpu(capsys):
    assert bench_steps.run(quick=True) == []
    assert "no CUDA GPU" in capsys.readouterr().out
