"""Every exercise check against its solution (passes), its stub (not attempted) and a known-wrong
answer (fails with a teaching message); the notebooks carry the registered stubs."""

import pytest

import exercises
from exercises import notebook, solutions

EXERCISES = exercises.all_exercises()
IDS = [e.id for e in EXERCISES]
ANSWERS = solutions.answers()
SAYS = solutions.says()  # the words some wrong answers' verdicts must contain


def _run(ex, source: str, label: str) -> exercises.Result:
    names = exercises.load_cell(source, f"{label}_{ex.id}")
    return exercises.run_check(ex.id, *(names[n] for n in ex.answers))


def test_the_syllabus_lists_every_exercise_and_each_notebook_holds_its_own():
    import json

    from course_utils import env, syllabus

    registered = [e.id for e in exercises.all_exercises()]
    listed = [i for lesson in syllabus.LESSONS for i in lesson.exercise_ids]
    assert sorted(registered) == sorted(listed), (
        "course_utils/syllabus.py and the registered exercises disagree: "
        f"registered only {sorted(set(registered) - set(listed))}, "
        f"listed only {sorted(set(listed) - set(registered))}")
    for lesson in syllabus.LESSONS:
        cells = json.loads((env.ROOT / "notebooks" / lesson.notebook).read_text())["cells"]
        held = {(c.get("metadata", {}).get("exercise") or {}).get("id") for c in cells}
        held = {i for i in held if i and "." in i}  # (the Exercises heading has no id of one)
        assert held == set(lesson.exercise_ids), (lesson.notebook, sorted(held))
        assert [e.id for e in exercises.all_exercises(lesson.label)] == \
            [e.id for e in exercises.all_exercises(lesson.slug)]
    assert exercises.get("08.online_step").id == "attention.online_step"  # former ids still read
    assert exercises.get("hopper_matmul.waves").id == "hopper_measured.waves"  # and moved ones


def test_no_notebook_prints_an_answer_before_its_exercise():
    """A cell before an exercise must not print the course's own version of what the student
    writes (``inspect.getsource(module.<answer>)`` or ``show(...)`` naming it): lesson 20 once
    printed ``one_shot_kernel`` two cells above exercise distributed.one_shot."""
    import json
    import re

    from course_utils import env

    shown = []
    for path in sorted((env.ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        for i, cell in enumerate(cells):
            m = re.match(r"### ✏️ Exercise (\S+):", "".join(cell["source"]))
            if cell["cell_type"] != "markdown" or not m:
                continue
            earlier = ["".join(c["source"]) for c in cells[:i] if c["cell_type"] == "code"]
            for name in exercises.get(m[1]).answers:
                for source in earlier:
                    for call in re.findall(r"(?:getsource|show)\(([^)]*)\)", source):
                        if re.search(rf"\b{re.escape(name)}\b", call):
                            shown.append(f"{path.name}: {call} before {m[1]}")
    assert not shown, shown


def _functions_defined(source: str) -> set[str]:
    """The functions a solution defines: Python ``def``s and CUDA ``__device__`` /
    ``__global__`` functions (the course's versions of them live in its kernel files)."""
    import re

    return (set(re.findall(r"^\s*def (\w+)\(", source, re.M))
            | set(re.findall(r"__(?:device|global)__[^;{(]*?\b(\w+)\s*\(", source)))


def _shown_texts(cells: list[str]):
    """(call, text) for each ``show(...)`` in ``cells`` whose arguments evaluate with the names
    those cells import: the text it puts on screen (course_utils.diffs.excerpt's)."""
    import ast
    import importlib

    from course_utils import diffs

    imported = {}
    trees = []
    for source in cells:
        code = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln
                         for ln in source.splitlines())
        try:
            trees.append(ast.parse(code))
        except SyntaxError:
            continue
        for node in ast.walk(trees[-1]):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.update({a.asname or a.name: (node.module, a.name) for a in node.names})
            elif isinstance(node, ast.Import):
                imported.update({(a.asname or a.name).split(".")[0]: (a.name, None)
                                 for a in node.names})
    for tree in trees:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "show"):
                continue
            names = {n.id for arg in node.args for n in ast.walk(arg) if isinstance(n, ast.Name)}
            try:
                space = {}
                for name in names:
                    module, attr = imported[name]
                    found = importlib.import_module(module)
                    space[name] = getattr(found, attr) if attr else found
                args = [eval(compile(ast.Expression(a), "<show>", "eval"), space)
                        for a in node.args]
                yield ast.unparse(node), (diffs.excerpt(*args) if len(args) > 1
                                          else open(args[0]).read())
            except Exception:  # a name no cell imports, a file or text that moved: not shown
                continue


# shown before its exercise, known: A5 shows the course's histogram_shared (BINS fixed at compile
# time) above first_kernels.histogram, which asks for the same kernel with a run-time bins (found by
# the test below when it was written; left to the author of first_kernels)
SHOWN_BEFORE: set[tuple[str, str]] = set()  # (exercise, function) pairs allowed: none


def test_no_notebook_shows_a_kernel_exercise_s_answer_before_its_stub():
    """What a cell before an exercise's stub displays with ``show(...)`` (the cells above the
    statement and the exercise's own tool cells) must not hold the course's definition of a
    function the student writes: hopper_attention.pingpong's turn_wait and turn_pass sit in
    attention.cuh, whose neighbours lesson 18 shows."""
    import json
    import re

    from course_utils import env

    shown = []
    for path in sorted((env.ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        for i, cell in enumerate(cells):
            m = re.match(r"# ✏️ Exercise (\S+):", "".join(cell["source"]))
            if cell["cell_type"] != "code" or not m:
                continue
            names = _functions_defined(ANSWERS[m[1]][0])
            earlier = ["".join(c["source"]) for c in cells[:i] if c["cell_type"] == "code"]
            for call, text in _shown_texts(earlier):
                for name in names:
                    if (m[1], name) in SHOWN_BEFORE:
                        continue
                    if re.search(rf"(?:\bdef {name}\(|\b{name}\s*\([^;{{)]*\)\s*\{{)", text):
                        shown.append(f"{path.name}: {call} shows {name} before {m[1]}")
    assert not shown, shown


def test_the_answer_on_screen_check_sees_attention_cuh():
    """The check above would catch lesson 18 showing attention.cuh's turns before
    hopper_attention.pingpong."""
    cells = ["from kernels.attention.hopper import fwd\nfrom course_utils.diffs import show",
             'show(fwd.PRIMITIVES, "// ---- 1b. named barriers", "// ---- 6b.")']
    texts = [text for _, text in _shown_texts(cells)]
    assert len(texts) == 1 and "void turn_wait(int consumer) {" in texts[0]
    assert {"turn_wait", "turn_pass"} <= _functions_defined(ANSWERS["hopper_attention.pingpong"][0])


def test_the_answer_on_screen_check_sees_a_triton_kernel():
    """... and lesson 19 showing quantize.py (its quantize_kernel) before
    hopper_backward.quantize."""
    cells = ["from kernels.scaled_attention import quantize\nfrom course_utils.diffs import show",
             "show(quantize.__file__)"]
    texts = [text for _, text in _shown_texts(cells)]
    assert len(texts) == 1 and "def quantize_kernel(" in texts[0]
    assert "quantize_kernel" in _functions_defined(ANSWERS["hopper_backward.quantize"][0])


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


WRONG = [(ex, label) for ex in EXERCISES for label in ANSWERS[ex.id][1]]


@pytest.mark.parametrize(("ex", "label"), WRONG, ids=[f"{ex.id}-{label}" for ex, label in WRONG])
def test_wrong_answer_fails_and_teaches(ex, label):
    result = _run(ex, ANSWERS[ex.id][1][label], "wrong")
    if result.status == "cannot check here":
        # never "passed"; a machine that cannot decide says what it could not check
        text = str(result)
        assert "not verified here" in text or "this check needs" in text, text
        pytest.skip(text)
    assert result.status == "not yet", str(result)
    text = str(result)
    assert "hint:" in text and "Traceback" not in text, text
    if words := SAYS.get(ex.id, {}).get(label):
        assert words in text, f"the verdict should name the mistake ({words!r}): {text}"


@pytest.mark.parametrize("id", sorted(SAYS))
def test_the_named_mistakes_are_the_wrong_answers(id):
    assert sorted(SAYS[id]) == sorted(ANSWERS[id][1])


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_notebook_holds_the_registered_cells(ex):
    cells = notebook.notebook_stubs(notebook.lesson_notebook(ex.lesson)).get(ex.id, {})
    sync = f"python -m course exercises sync {ex.lesson}"
    assert cells.get("stub") == ex.stub_cell(), f"stub cell missing or stale: run `{sync}`"
    assert cells.get("check") == ex.check_cell(), f"check cell missing or stale: run `{sync}`"


def test_unknown_exercise_names_the_known_ones():
    with pytest.raises(ValueError, match="profiling.sync"):
        exercises.run_check("01.nope", None)


def test_wrong_number_of_answers_is_a_value_error():
    with pytest.raises(ValueError, match="expected 2 answers"):
        exercises.run_check("profiling.dominant", "matmul")


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


def test_compare_checks_dtype_and_shape_before_values():
    import torch

    expected = torch.arange(6.0)
    with pytest.raises(exercises.Mismatch, match=r"out: expected dtype torch.float32, got "
                                                 r"torch.float64$"):
        exercises.compare(expected.double(), expected, what="out")  # the same values
    with pytest.raises(exercises.Mismatch, match=r"expected shape \(6,\), got \(2, 3\); and "
                                                 r"dtype torch.float32, got torch.float16"):
        exercises.compare(expected.half().view(2, 3), expected, what="out")


def test_an_exception_in_student_code_is_reported_with_its_line():
    source = ("def matmul_tflops(m, n, k, ms):\n"
              "    flop = 2 * m * n * k\n"
              "    return flop / seconds\n")
    result = _run(exercises.get("profiling.tflops"), source, "raises")
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
    # the children of lesson 05 run only on a GPU; what they hand to NVRTC is checked here
    from course_utils import nvrtc, requirements
    from exercises import cuda_gelu

    if requirements.unmet("nvrtc"):
        pytest.skip("needs NVRTC")
    nvrtc.compile(cuda_gelu.SCALE_CU, "scale", arch="sm_90", **cuda_gelu.SCALE_OPTIONS)
    silu = exercises.load_cell(ANSWERS["cuda_gelu.silu"][0], "child")["SILU_SOURCE"]
    path = tmp_path / "silu_student.cu"
    path.write_text(silu)
    nvrtc.compile(path.read_text(), "silu_kernel", arch="sm_90", verbose=False)


def test_the_gpu_child_runs_and_a_crash_names_its_case():
    # the child process machinery, for real; without a GPU the child runs the kernel on the CPU
    # (course_utils.cuda_on_cpu), where a fault is an exception that ends the child
    from course_utils import env
    from exercises import kernel_checks

    if env.HAS_CUDA:
        pytest.skip("on a GPU the solution tests run the child for real")
    silu = exercises.load_cell(ANSWERS["cuda_gelu.silu"][0], "child")["SILU_SOURCE"]
    assert kernel_checks.run_child("cuda_gelu.silu", silu) == {"ok": True}
    past = silu.replace("first + 3 < n", "first < n")  # the last float4 runs past x
    result = kernel_checks.run_child("cuda_gelu.silu", past)
    assert result["case"] == "n=1" and "KernelFault" in result["crash"], result
    with pytest.raises(exercises.Mismatch, match="crashed the GPU on the case 'n=1'"):
        kernel_checks.expect_child_ok(result, "hint")


@pytest.mark.parametrize("crash, course_bug", [
    ("KeyError: 'lse'", True),
    ("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", False),
    ("RuntimeError: CUDA error: unspecified launch failure", False),
    ("no answer after 600 s (a hang: a wait that never completes?)", False),
])
def test_a_python_error_in_the_gpu_child_is_the_course_s_bug(crash, course_bug):
    # hopper_attention.pingpong and hopper_backward.dq_add compile the student's code before the
    # child runs: a Python exception there that names no device error is the check's own, and must
    # not be told to the student as their kernel's crash
    from exercises import kernel_checks

    result = {"crash": crash, "case": "B=1 H=2"}
    if course_bug:
        with pytest.raises(exercises.CannotCheck, match="the course's bug, not your lines"):
            kernel_checks.expect_no_course_bug(result, "your lines")
    else:
        kernel_checks.expect_no_course_bug(result, "your lines")


# On a GPU the checks of lessons 08 and 11 go further than on a CPU: these make sure they did
# (a GPU run must not pass through the CPU branch), with the lines the student would read.
GPU_LINES = {
    "mma_variants.config": ("matches float64 at", "of the mma.sync ceiling", "the target"),
    "byok.byok": ("(compiled Triton, cuda tensors)", "the registry is exactly as before"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("id", sorted(GPU_LINES))
def test_gpu_checks_measure_and_say_so(id):
    result = _run(exercises.get(id), ANSWERS[id][0], "solution_gpu")
    assert result.passed, str(result)
    for words in GPU_LINES[id]:
        assert words in str(result), str(result)


# Known-wrong answers of three kinds that a check must not pass (kept here, out of the
# notebooks): a number typed in where the check simulates a measurement, the right values in the
# wrong dtype, and plain PyTorch where the exercise asks for a Triton kernel.
def _constant_timer(ms):
    return f"def time_ms(fn, *args, reps=20):\n    return {ms}\n"


def _solution(id, old, new):
    source = ANSWERS[id][0]
    assert old in source, f"the solution of {id} changed: update this known-wrong answer"
    return source.replace(old, new)


PLAIN_PYTORCH = {
    "fusion.bias_gelu": ("import torch.nn.functional as F\n\n\ndef bias_gelu(x, bias):\n"
                     "    return F.gelu(x + bias, approximate='tanh')\n"),
    "fusion.silu_mul": ("import torch.nn.functional as F\n\n\ndef silu_mul(x):\n"
                    "    if x.shape[1] % 2:\n"
                    "        raise ValueError(f'x expected an even width, got {x.shape[1]}')\n"
                    "    a, b = x.float().chunk(2, dim=-1)\n"
                    "    return (F.silu(a) * b).to(x.dtype)\n"),
}
GAMED = [
    *[pytest.param("profiling.sync", _constant_timer(ms), "it does not follow the work",
                   id=f"profiling.sync-constant-{ms}")
      for ms in (3.0, 4.5, 6.0, 9.0, 12.0)],
    pytest.param("fusion.bias_gelu", None, "expected dtype", id="fusion.bias_gelu-wrong-dtype"),
    pytest.param("fusion.silu_mul", None, "expected dtype", id="fusion.silu_mul-wrong-dtype"),
    *[pytest.param(id, source, "no Triton kernel was launched", id=f"{id}-plain-pytorch")
      for id, source in PLAIN_PYTORCH.items()],
    pytest.param("byok.byok", None, "no Triton kernel was launched", id="byok.byok-plain-pytorch"),
]


def _gamed_source(id, source):
    if source is not None:
        return source
    # the Triton solution, its output made float64
    if id in ("fusion.bias_gelu", "fusion.silu_mul"):
        return _solution(id, "BLOCK=BLOCK)\n    return y\n",
                         "BLOCK=BLOCK)\n    return y.double()\n")
    # byok.byok: the whole interface right, but the registered function is torch.mm
    return _solution(id, "fn=row_gemm,", "fn=torch.mm,")


@pytest.mark.parametrize(("id", "source", "says"), GAMED)
def test_a_gamed_answer_fails(id, source, says):
    source = _gamed_source(id, source)
    assert source != ANSWERS[id][0]
    result = _run(exercises.get(id), source, "gamed")
    if result.status == "cannot check here":
        pytest.skip(str(result))
    assert result.status == "not yet", str(result)
    assert says in str(result) and "hint:" in str(result), str(result)


def test_the_simulated_gpu_differs_every_run():
    from exercises import profiling

    draws = {tuple(g.CALL_S for g in profiling._random_gpus()) for _ in range(5)}
    assert len(draws) == 5
    for fast, slow in draws:  # no constant within 0.5x-1.25x of both
        assert 1.25 * fast < 0.5 * slow


def test_triton_launches_counts_the_interpreters_launches_too():
    import torch

    from course_utils import env

    names = exercises.load_cell(ANSWERS["fusion.silu_mul"][0], "launches")
    with exercises.triton_launches() as launched:
        names["silu_mul"](torch.randn(3, 8, device=env.DEFAULT_DEVICE))
    assert launched == {"silu_mul_kernel": 1}
    with exercises.triton_launches() as launched:
        torch.nn.functional.silu(torch.randn(3))
    assert launched == {}


def test_an_exercise_with_a_section_closes_that_section():
    from exercises import Exercise

    def md(text):
        return {"cell_type": "markdown", "metadata": {}, "source": [text]}

    cells = [md("# 05 · title"), md("## 1 · Tiles\n\nwhy"), md("### a detail"), md("more"),
             md("## 2 · The swizzle"), md("drawn"), md("## Takeaways")]
    make = dict(stub="x = ...\n", answers=("x",), check=lambda x, report: None)
    placed = notebook.place(cells, [Exercise("05.a", "A", section="1 · Tiles", **make),
                                    Exercise("05.b", "B", section="swizzle", **make),
                                    Exercise("05.c", "C", **make)])
    roles = [(c["metadata"].get("exercise") or {}).get("id") or "".join(c["source"])[:12]
             for c in placed]
    assert roles == ["# 05 · title", "## 1 · Tiles", "### a detail", "more", "05.a", "05.a",
                     "05.a", "## 2 · The s", "drawn", "05.b", "05.b", "05.b", "## Takeaways",
                     "section", "05.c", "05.c", "05.c"]
    with pytest.raises(ValueError, match=r"exactly one heading.*'nowhere'.*1 · Tiles"):
        notebook.place(cells, [Exercise("05.d", "D", section="nowhere", **make)])


def test_every_gpu_child_is_an_exercise_s():
    # the child process looks its function up by the exercise id: a key no exercise has (an id
    # from before a rename) is a KeyError in the child, on the GPU only, where the check needs it
    import importlib

    from exercises import kernel_checks

    ids = {ex.id for ex in exercises.all_exercises()}
    assert not set(kernel_checks.CHILDREN) - ids, sorted(set(kernel_checks.CHILDREN) - ids)
    for id, where in kernel_checks.CHILDREN.items():
        module, function = where.split(":")
        assert callable(getattr(importlib.import_module(module), function)), (id, where)
