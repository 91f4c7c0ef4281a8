"""Every exercise check against its solution (passes), its stub (not attempted) and a known-wrong
answer (fails with a teaching message); the notebooks carry the registered stubs."""

import pytest

import exercises
from exercises import notebook, solutions

EXERCISES = exercises.all_exercises()
IDS = [e.id for e in EXERCISES]
ANSWERS = solutions.answers()


def _run(ex, source: str, label: str) -> exercises.Result:
    names = exercises.load_cell(source, f"{label}_{ex.id}")
    return exercises.run_check(ex.id, *(names[n] for n in ex.answers))


def test_every_lesson_has_three_exercises():
    for lesson in ("01", "02", "03", "04", "05", "06"):
        assert len(exercises.all_exercises(lesson)) >= 3, lesson


def test_every_exercise_has_a_solution_and_a_wrong_answer():
    assert sorted(ANSWERS) == sorted(IDS)


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_solution_passes(ex):
    result = _run(ex, ANSWERS[ex.id][0], "solution")
    assert result.status in ("passed", "cannot check here"), str(result)
    if result.status == "cannot check here":
        pytest.skip(str(result))


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_stub_is_not_attempted(ex):
    result = _run(ex, ex.stub, "stub")
    assert result.status == "not attempted", str(result)
    assert "not attempted" in str(result)


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_wrong_answer_fails_and_teaches(ex):
    result = _run(ex, ANSWERS[ex.id][1], "wrong")
    if result.status == "cannot check here":
        pytest.skip(str(result))
    assert result.status == "not yet", str(result)
    text = str(result)
    assert "hint:" in text and "Traceback" not in text, text


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_notebook_holds_the_registered_cells(ex):
    cells = notebook.notebook_stubs(notebook.lesson_notebook(ex.lesson)).get(ex.id, {})
    sync = f"python -m course exercises sync {ex.lesson}"
    assert cells.get("stub") == ex.stub_cell(), f"stub cell missing or stale: run `{sync}`"
    assert cells.get("check") == ex.check_cell(), f"check cell missing or stale: run `{sync}`"


def test_unknown_exercise_names_the_known_ones():
    with pytest.raises(ValueError, match="01.sync"):
        exercises.run_check("01.nope", None)


def test_wrong_number_of_answers_is_a_value_error():
    with pytest.raises(ValueError, match="expected 2 answers"):
        exercises.run_check("01.dominant", "matmul")


def test_compare_names_the_first_mismatch():
    import torch

    expected = torch.arange(6.0)
    got = expected.clone()
    got[4] = 9.0
    with pytest.raises(exercises.Mismatch, match=r"1 of 6 elements differ; first at index 4: "
                                                 r"got 9, expected 4"):
        exercises.compare(got, expected, what="out")
    with pytest.raises(exercises.Mismatch, match=r"expected shape \(6,\), got \(5,\)"):
        exercises.compare(got[:5], expected, what="out")


def test_an_exception_in_student_code_is_reported_with_its_line():
    source = ("def matmul_tflops(m, n, k, ms):\n"
              "    flop = 2 * m * n * k\n"
              "    return flop / seconds\n")
    result = _run(exercises.get("01.tflops"), source, "raises")
    text = str(result)
    assert result.status == "not yet"
    assert "NameError" in text and "line 3 of your cell: return flop / seconds" in text, text


@pytest.mark.parametrize("lesson", sorted({e.lesson for e in EXERCISES}))
def test_untouched_notebook_stubs_say_not_attempted_in_ipython(lesson, capsys):
    # the notebook's own cells, run by IPython as Jupyter would (its compiler, its linecache)
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    cells = notebook.notebook_stubs(notebook.lesson_notebook(lesson))
    for ex in exercises.all_exercises(lesson):
        capsys.readouterr()
        assert shell.run_cell(cells[ex.id]["stub"]).success
        assert shell.run_cell(cells[ex.id]["check"]).success
        assert f"Exercise {ex.id} ({ex.title}): not attempted" in capsys.readouterr().out


def test_what_the_gpu_children_compile_compiles_here(tmp_path):
    # the children of lesson 03 run only on a GPU; what they hand to NVRTC is checked here
    from course_utils import env, nvrtc
    from exercises import lesson03

    if env.unmet("nvrtc"):
        pytest.skip("needs NVRTC")
    nvrtc.compile(lesson03.SCALE_CU, "scale", arch="sm_90", **lesson03.SCALE_OPTIONS)
    silu = exercises.load_cell(ANSWERS["03.silu"][0], "child")["SILU_SOURCE"]
    path = tmp_path / "silu_student.cu"
    path.write_text(silu)
    nvrtc.compile(path.read_text(), "silu_kernel", arch="sm_90", verbose=False)


def test_the_gpu_child_runs_and_a_crash_names_its_case():
    # the child process machinery, for real; without a GPU it stops at loading the kernel
    from course_utils import env
    from exercises import lesson03

    if env.HAS_CUDA:
        pytest.skip("on a GPU the solution tests run the child for real")
    silu = exercises.load_cell(ANSWERS["03.silu"][0], "child")["SILU_SOURCE"]
    result = lesson03._run_child("silu", silu)
    assert result["case"] == "loading the kernel" and "NoGPUError" in result["crash"], result
    with pytest.raises(exercises.Mismatch, match="crashed the GPU on the case 'loading the kern"):
        lesson03._crash_mismatch(result, "hint")


# On a GPU the checks of lessons 05 and 06 go further than on a CPU: these make sure they did
# (a GPU run must not pass through the CPU branch), with the lines the student would read.
GPU_LINES = {
    "05.config": ("matches float64 at", "of the mma.sync ceiling", "the target"),
    "06.byok": ("(compiled Triton, cuda tensors)", "the registry is exactly as before"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("id", sorted(GPU_LINES))
def test_gpu_checks_measure_and_say_so(id):
    result = _run(exercises.get(id), ANSWERS[id][0], "solution_gpu")
    assert result.passed, str(result)
    for words in GPU_LINES[id]:
        assert words in str(result), str(result)
