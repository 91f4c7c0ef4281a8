"""Property tests of the checks' own inputs, with Hypothesis: it searches for a wrong answer that
disagrees with the right one somewhere, and fails, with the smallest such answer it can shrink
to, if the check's inputs never see the disagreement.

The wrong answers searched here are the ones a student makes by misreading a rule: one constant
of the rules taken wrong (a register unit of 128 for 256, shared memory rounded to 256, the
driver's KiB forgotten, one sub-partition for four)."""

import dataclasses
import itertools

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is in requirements.txt")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from course_utils import occupancy  # noqa: E402
from exercises import nvrtc as nvrtc_exercises  # noqa: E402

RIGHT = occupancy.SM90
# each constant of the rules with the values a student plausibly reads instead
MISREAD = {"register_unit": (8, 32, 64, 128, 512), "shared_unit": (1, 32, 64, 256, 512, 1024),
           "shared_reserved": (0, 512, 2048), "sub_partitions": (1, 2, 8),
           "max_warps": (32, 48, 128), "max_blocks": (16, 24, 64),
           "registers": (32768, 131072), "shared": (228 * 1024, 227 * 1024, 256 * 1024),
           "shared_per_block": (227 * 1024, 228 * 1024, 48 * 1024)}
LAUNCHES = list(itertools.chain(nvrtc_exercises.OCCUPANCY_CASES,
                                nvrtc_exercises.occupancy_sweep()))
EXPECTED = [occupancy.blocks_per_sm(*launch) for launch in LAUNCHES]


def _caught(wrong: occupancy.Limits) -> bool:
    """Whether the occupancy check's launches tell these limits from the H100's."""
    return any(occupancy.blocks_per_sm(*launch, limits=wrong) != want
               for launch, want in zip(LAUNCHES, EXPECTED, strict=True))


@settings(max_examples=150, deadline=None)
@given(field=st.sampled_from(sorted(MISREAD)), data=st.data(),
       threads=st.integers(1, 1024), registers=st.integers(0, 255),
       shared=st.integers(0, RIGHT.shared_per_block))
def test_a_misread_rule_that_matters_somewhere_is_caught_by_the_occupancy_check(
        field, data, threads, registers, shared):
    wrong = dataclasses.replace(RIGHT, **{field: data.draw(st.sampled_from(MISREAD[field]))})
    if occupancy.blocks_per_sm(threads, registers, shared, wrong) == \
            occupancy.blocks_per_sm(threads, registers, shared):
        return  # this launch does not tell them apart; Hypothesis looks for one that does
    assert _caught(wrong), (f"{field}={getattr(wrong, field)} changes the answer for "
                            f"({threads}, {registers}, {shared}), but no launch of the check "
                            "sees it")


def test_the_property_can_fail():
    # a check of the 25 fixed launches alone misses the register unit read as 128 (the case the
    # sweep was added for): the property above would find it
    wrong = dataclasses.replace(RIGHT, register_unit=128)
    fixed = nvrtc_exercises.OCCUPANCY_CASES
    assert all(occupancy.blocks_per_sm(*launch, limits=wrong) == occupancy.blocks_per_sm(*launch)
               for launch in fixed)
    assert occupancy.blocks_per_sm(256, 33, 0, wrong) != occupancy.blocks_per_sm(256, 33, 0)
    assert _caught(wrong)
