"""Exercise hopper_attention.pingpong's machinery, on any machine: the splice into attention.cuh
reproduces the shipped kernel, a consistent relabelling of the barriers passes, the protocol rules
name each broken protocol, and the order check reads the H100's recorded timeline as it must
(step 4's turns alternate, step 3's do not: no turns is what empty functions give)."""

import dataclasses

import pytest
import torch

import exercises
from course_utils import requirements
from exercises import hopper_attention, hopper_attention_gpu
from exercises.solutions.hopper_attention import PASS_ID, SOLUTIONS, WAIT_ID
from kernels.attention.hopper import fwd

needs_nvrtc = pytest.mark.skipif(bool(requirements.unmet("nvrtc")), reason="needs NVRTC")


def _shipped_turns() -> str:
    """The lines attention.cuh holds between its turns markers: the course's own answer."""
    lines = fwd.PRIMITIVES.read_text().splitlines()
    begin = next(i for i, ln in enumerate(lines) if ln.startswith(hopper_attention.BEGIN))
    end = next(i for i, ln in enumerate(lines) if ln.startswith(hopper_attention.END))
    return "\n".join(lines[begin + 1:end])


def test_the_markers_enclose_exactly_the_two_functions():
    text = fwd.PRIMITIVES.read_text()
    assert text.count(hopper_attention.BEGIN) == 1 and text.count(hopper_attention.END) == 1
    turns = _shipped_turns()
    assert "void turn_wait(int consumer)" in turns and "void turn_pass(int consumer)" in turns
    assert "PINGPONG_FIRST_ID =" not in turns  # the constant stays given, above the markers


@needs_nvrtc
def test_splicing_the_shipped_functions_gives_the_shipped_kernel():
    """attention.cu with attention.cuh inlined and its own turns spliced back compiles to the
    SASS fwd.py builds from the files: the check grades the real kernel, not a copy."""
    from course_utils import sass

    if sass.unavailable_reason():
        pytest.skip(sass.unavailable_reason())
    for d in (64, 128):
        template = fwd.STEPS[hopper_attention.STEP].template(d)
        spliced = hopper_attention._compile(hopper_attention.program(_shipped_turns()), template)
        shipped = fwd.compile_step(hopper_attention.STEP, torch.bfloat16, d, verbose=False)
        assert sass.disassemble(spliced) == sass.disassemble(shipped), d


@needs_nvrtc
def test_a_compile_error_points_into_your_code():
    broken = SOLUTIONS["hopper_attention.pingpong"].replace('"memory");\n}\n\n//',
                                                            '"memory")\n}\n\n//')
    names = exercises.load_cell(broken, "broken_12")
    result = exercises.run_check("hopper_attention.pingpong", names["TURNS"])
    assert result.status == "not yet" and "your code(" in str(result), str(result)


@needs_nvrtc
def test_a_consistent_relabelling_passes():
    """Waiting on PINGPONG_FIRST_ID + 1 - c and passing on PINGPONG_FIRST_ID + c alternates the
    turns just as well (consumer 1's first pass lands where consumer 0 waits): not a mistake."""
    swapped = (SOLUTIONS["hopper_attention.pingpong"].replace(WAIT_ID, "@WAIT@")
               .replace(PASS_ID, WAIT_ID).replace("@WAIT@", PASS_ID))
    names = exercises.load_cell(swapped, "relabelled_12")
    result = exercises.run_check("hopper_attention.pingpong", names["TURNS"])
    assert result.status in ("passed", "cannot check here"), str(result)


SOLUTION_OPS = {("turn_wait", 0): [("SYNC", 1, 256)], ("turn_wait", 1): [("SYNC", 2, 256)],
                ("turn_pass", 0): [("ARV", 2, 256)], ("turn_pass", 1): [("ARV", 1, 256)]}


@pytest.mark.parametrize(("change", "says"), [
    ({("turn_pass", 0): [("ARV", 2, 128)]}, "one warpgroup"),
    ({("turn_wait", 1): []}, "never waits"),
    ({("turn_pass", 1): []}, "never hands the turn over"),
    ({("turn_wait", 0): [("ARV", 1, 256)]}, "does not wait"),
    ({("turn_pass", 0): [("RED", 2, 256)]}, "serialise"),
    ({("turn_wait", 0): [("SYNC", 2, 256)]}, "both consumers wait on barrier 2"),
    ({("turn_wait", 0): [("SYNC", 16, 256)]}, "ids 0 to 15"),
    ({("turn_wait", 0): [("SYNC", None, 256)]}, "not one"),
    ({("turn_pass", 1): [("ARV", 3, 256)]}, "never released"),
])
def test_the_protocol_rules_name_each_broken_protocol(change, says):
    assert hopper_attention.protocol_error(SOLUTION_OPS) is None
    message, hint = hopper_attention.protocol_error({**SOLUTION_OPS, **change})
    assert says in message and hint


def test_barriers_reads_ids_counts_and_registers():
    sass = ("/*0010*/ BAR.SYNC.DEFER_BLOCKING 0x1, 0x100 ;\n/*0020*/ @!P0 BAR.ARV R5, 0x100 ;\n"
            "/*0030*/ BAR.SYNC.DEFER_BLOCKING 0x0 ;\n/*0040*/ BAR.RED.POPC.DEFER_BLOCKING 0x2, "
            "0x100, PT ;")
    assert hopper_attention.barriers(sass) == [("SYNC", 1, 256), ("ARV", None, 256),
                                               ("SYNC", 0, None), ("RED", 2, 256)]


def _recorded() -> dict:
    from kernels.attention.hopper import targets, timeline

    path = targets.timeline_path(targets.RECORDED)
    if not path.exists():
        pytest.skip(f"no recorded timeline at {path.name}")
    return {label.split(":")[0]: events for label, events in timeline.load(path)[1].items()}


def test_the_recorded_step_4_alternates_its_turns_and_step_3_does_not():
    """On the H100's recording (docs/results): the reference turns pass the order check, and
    step 3, the same loop with no turns (what empty functions give), fails it."""
    recorded = _recorded()
    assert hopper_attention_gpu.turn_order_error(recorded["step4"]) is None
    assert "did not wait" in hopper_attention_gpu.turn_order_error(recorded["step3"])
    assert len(hopper_attention_gpu.turn_times(recorded["step4"], 0, "consumer 1")) > 10


def test_the_order_check_names_the_block_where_consumer_1_goes_first():
    events = _recorded()["step4"]
    other = {"consumer 0": "consumer 1", "consumer 1": "consumer 0"}
    swapped = [dataclasses.replace(e, role=other.get(e.role, e.role)) if e.block == 1 else e
               for e in events]
    assert "block 1, turn 0" in hopper_attention_gpu.turn_order_error(swapped)
    assert "recorded no events" in hopper_attention_gpu.turn_order_error([])
