"""The puzzle checks' inputs (exercises.puzzle_checks): the softmax puzzles' shifted cases give
every row a negative maximum, and their sizes stand on each side of the block."""

import pytest
import torch

from exercises import puzzle_checks
from exercises.puzzles import PUZZLES


@pytest.mark.parametrize("id", ["puzzles.softmax", "puzzles.long_softmax", "puzzles.attention"])
def test_a_softmax_puzzle_has_rows_whose_maximum_is_negative(id):
    p = PUZZLES[id]
    shifted = [s for s in p.cases if "shift" in s]
    assert shifted and p.row_max is not None
    for sizes in shifted:
        inputs = {name: puzzle_checks._draw(p, shape(sizes), sizes, name).double()
                  for name, shape in p.inputs}
        peaks = p.row_max(**inputs)
        assert (peaks < -100).all(), peaks  # far enough below 0 that exp(x - 0) underflows
        assert torch.isfinite(p.reference(**inputs)).all()
        if p.tf32:  # still multiples of 1/8 below 2^7, which TF32 holds exactly
            for t in inputs.values():
                assert (t * 8 == (t * 8).round()).all() and t.abs().max() < 128


@pytest.mark.parametrize(("id", "key", "block"), [("puzzles.softmax", "T", 128),
                                                  ("puzzles.long_softmax", "T", 64),
                                                  ("puzzles.attention", "S", 32)])
def test_a_softmax_puzzle_s_sizes_stand_on_each_side_of_its_block(id, key, block):
    sizes = {s[key] for s in PUZZLES[id].cases}
    assert {1, block - 1, block} <= sizes
    if id == "puzzles.long_softmax":  # (the others' block holds the whole row)
        assert {block + 1, 2 * block + 1} <= sizes
