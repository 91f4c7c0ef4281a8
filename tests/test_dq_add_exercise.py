"""Exercise hopper_backward.dq_add's machinery: the markers hold the course's own epilogue, splicing
it back gives the registered kernel's SASS, the solution passes on a CPU and each hand-written wrong
answer gets "not yet" there naming its mistake (tests/test_exercises.py, with the words in
exercises/solutions/hopper_backward.py's SAYS); the probe's rules read crafted records as they
must. On a Hopper GPU the child itself must tell a missing guard (by the -0.0 after the buffer)
and a plain store (by the values) without the CPU's help."""

import ast
import json

import pytest
import torch

import exercises
from course_utils import env, requirements
from exercises import hopper_backward_dq_add as dq
from exercises import hopper_backward_dq_add_probe as probe
from exercises.solutions.hopper_backward import SOLUTIONS, WRONG
from kernels.attention.hopper import bwd

ID = "hopper_backward.dq_add"
needs_nvrtc = pytest.mark.skipif(bool(requirements.unmet("nvrtc")), reason="needs NVRTC")

def _answer(source: str) -> str:
    return exercises.load_cell(source, "test_13_dq_add")["DQ_ADD"]


def _check(source: str) -> exercises.Result:
    return exercises.run_check(ID, _answer(source))


def test_the_markers_hold_the_epilogue_and_the_solution_is_it():
    text = bwd.FUSED_SOURCE.read_text()
    assert text.count(dq.BEGIN) == 1 and text.count(dq.END) == 1
    shipped = dq.shipped()
    assert "red_add2(out + 8 * j" in shipped and "q_row + 8 * h < sq" in shipped
    assert "fence_registers(dq_acc)" not in shipped  # the wait's fence stays given
    # the same lines, but for the kernel's indentation (#pragma lines start at column 0)
    assert ([ln.strip() for ln in shipped.strip().splitlines()]
            == [ln.strip() for ln in _answer(SOLUTIONS[ID]).strip().splitlines()])


@needs_nvrtc
def test_splicing_the_shipped_lines_gives_the_registered_kernel():
    """The program the check compiles, with the course's own lines, is the kernel bwd.py builds
    from the file, instruction for instruction: the check grades the real kernel."""
    from course_utils import sass

    if sass.unavailable_reason():
        pytest.skip(sass.unavailable_reason())
    for d in (64, 128):
        spliced = dq._compiled_report(dq.program(dq.shipped()), d)
        registered = sass.report(bwd.compile_kernel("fused", torch.bfloat16, d, verbose=False))
        assert spliced.sass == registered.sass, d
        assert spliced.resources.registers == registered.resources.registers == {
            64: 203, 128: 255}[d]


@needs_nvrtc
def test_the_solution_passes_on_this_machine():
    result = _check(SOLUTIONS[ID])
    assert result.status in ("passed", "cannot check here"), str(result)
    assert "1152 pairs below Sq added once" in str(result)
    if not env.HAS_CUDA:
        assert "not verified here: that version 2 with your lines computes dQ" in str(result)


@needs_nvrtc
def test_a_compile_error_points_into_your_code():
    broken = SOLUTIONS[ID].replace("const int q_row", "const int q_row =")
    result = _check(broken)
    assert result.status == "not yet" and "your code(" in str(result), str(result)


@needs_nvrtc
def test_an_answer_that_cannot_run_at_compile_time_says_so():
    """atomicAdd of float2 is a right answer on sm_90 (one red.v2 too) but no constexpr: the
    check names what it could not evaluate, and which names it can."""
    source = SOLUTIONS[ID].replace("""red_add2(out + 8 * j, dq_acc[4 * j + 2 * h] * scale,
                     dq_acc[4 * j + 2 * h + 1] * scale);""", """atomicAdd(
                reinterpret_cast<float2*>(out + 8 * j),
                make_float2(dq_acc[4 * j + 2 * h] * scale, dq_acc[4 * j + 2 * h + 1] * scale));""")
    assert source != SOLUTIONS[ID]
    result = _check(source)
    assert result.status == "not yet", str(result)
    assert "runs your lines at compile time" in str(result) and "dq_col0" in str(result)


@needs_nvrtc
def test_the_probe_records_the_solution_s_calls():
    found = probe.run_probe(_answer(SOLUTIONS[ID]), *probe.PROBES[0])
    assert found["calls"] == 36 * 32 and found["writes"] == 0
    assert probe.probe_error(found, *probe.PROBES[0]) is None
    # one call more, at an element of the tile already added: named as a double addition
    doubled = {**found, "log": found["log"] + found["log"][:1]}
    assert "added to twice" in probe.probe_error(doubled, *probe.PROBES[0])[0]
    # one call fewer: a pair never added
    assert "1 pairs never added" in probe.probe_error({**found, "log": found["log"][1:]},
                                                   *probe.PROBES[0])[0]


def test_the_sass_rules_name_each_way_of_writing():
    reference = {"pairs": 16, "singles": 0, "atoms": 0, "stores": 64}
    assert dq.sass_error(reference, reference, 128) is None
    for change, says in [({"stores": 80}, "plain stores"), ({"atoms": 16}, "return a value"),
                         ({"pairs": 0, "singles": 32}, "one float per atomic"),
                         ({"pairs": 8}, "8 two-float reductions")]:
        assert says in dq.sass_error({**reference, **change}, reference, 128)[0]


def test_no_cell_above_the_exercise_shows_the_epilogue():
    """The cells before the stub show attention_bwd_fused.cu up to the begin marker, never the
    lines after it: what they display holds none of the epilogue's code lines."""
    from course_utils import diffs, syllabus

    notebook = syllabus.BY_SLUG["hopper_backward"].notebook  # named by the syllabus's number
    cells = json.loads((env.ROOT / "notebooks" / notebook).read_text())["cells"]
    stub = next(i for i, c in enumerate(cells)
                if c.get("metadata", {}).get("exercise") == {"id": ID, "role": "stub"})
    code_lines = [ln.strip() for ln in dq.shipped().splitlines()
                  if ln.strip() and not ln.strip().startswith(("//", "#", "}", "{"))]
    namespace = {"bwd": bwd}
    for cell in cells[:stub]:
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse("\n".join(
                ln for ln in "".join(cell["source"]).splitlines() if not ln.startswith("%")))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "show":
                args = [eval(compile(ast.Expression(a), "<cell>", "eval"), namespace)
                        for a in node.args]
                if str(args[0]) != str(bwd.FUSED_SOURCE):
                    continue
                shown = diffs.excerpt(*args) if len(args) > 1 else bwd.FUSED_SOURCE.read_text()
                assert not [ln for ln in code_lines if ln in shown], args[1:]


# --------------------------------------------------------------------------------------------
# On a Hopper GPU: the child's own discriminators, without the CPU's
# --------------------------------------------------------------------------------------------


def _hopper_reason() -> str | None:
    return dq._gpu_reason()


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "says"), [
    (None, None),
    ("no guard", "turned +0.0"),
    ("a plain store", "dQ's largest error"),
    ("no scale", "dQ's largest error"),
    ("h and j exchanged in the index", "dQ's largest error"),
])
def test_the_gpu_child_tells_the_guard_and_the_values(name, says):
    """Each answer spliced and run by the child directly (the CPU's check, which would stop the
    wrong ones first, left out): the solution passes; a missing guard is seen only by the -0.0
    after the buffer, a plain store or a wrong value by dQ against float64."""
    if reason := _hopper_reason():
        pytest.skip(f"needs a Hopper GPU: {reason}")
    from exercises import kernel_checks

    source = SOLUTIONS[ID] if name is None else WRONG[ID][name]
    result = kernel_checks.run_child(ID, dq.program(_answer(source)), timeout=600)
    if name is None:
        assert result.get("ok"), result
    else:
        assert "mismatch" in result and says in result["mismatch"], result
