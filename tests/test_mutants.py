"""The mutation harness of the exercise checks (exercises/mutants.py): its operators make the
mistakes they name, every kernel exercise has its hand-written wrong answers, the list of
equivalent mutants names mutants that exist, and one exercise's mutants all get "not yet" here
(the whole run is `python -m course exercises mutants`, recorded under docs/results/)."""

import pytest

from exercises import mutant_operators as ops
from exercises import mutants, solutions


def _changed(operator, line: str) -> set[str]:
    return {new.strip() for new in operator(line)}


def test_bound_moves_each_comparison_by_one():
    assert _changed(ops.op_bound, "mask = offsets < n") == {"mask = offsets <= n"}
    assert _changed(ops.op_bound, "if (r >= rows) return;") == {"if (r > rows) return;"}
    assert not _changed(ops.op_bound, "y = x << 2;  // a shift, not a comparison")


def test_mask_dropped_removes_one_keyword_argument_with_its_brackets():
    line = "a = tl.load(p, mask=(rows < M)[:, None] & (ks < K)[None, :], other=0.0)"
    assert _changed(ops.op_mask_dropped, line) == {
        "a = tl.load(p, other=0.0)",
        "a = tl.load(p, mask=(rows < M)[:, None] & (ks < K)[None, :])"}


def test_guard_and_operand_dropped():
    line = "if (row < M && col < N) c[row * N + col] = acc;"
    assert _changed(ops.op_guard_dropped, line) == {"c[row * N + col] = acc;"}
    assert _changed(ops.op_operand_dropped, line) == {
        "if (col < N) c[row * N + col] = acc;", "if (row < M) c[row * N + col] = acc;"}


def test_barrier_axes_and_narrowing():
    assert _changed(ops.op_barrier, "__syncthreads();") == {"", "__syncwarp();"}
    assert "tile[threadIdx.y][i] = 0;" in _changed(ops.op_axes_swapped,
                                                   "tile[threadIdx.x][i] = 0;")
    assert "tile[i][threadIdx.x] = 0;" in _changed(ops.op_axes_swapped,
                                                   "tile[threadIdx.x][i] = 0;")
    assert _changed(ops.op_narrowed, "acc = tl.zeros((M, N), dtype=tl.float32)") == {
        "acc = tl.zeros((M, N), dtype=tl.float16)"}


def test_term_dropped_keeps_either_side_of_a_product_or_sum():
    found = _changed(ops.op_term_dropped, "y = a * scale + b")
    assert {"y = a + b", "y = scale + b", "y = a * scale"} <= found


def test_state_space_gives_a_shared_instruction_a_generic_address():
    line = ': "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");'
    assert ': "=r"(done) : "l"(bar), "r"(parity) : "memory");' in _changed(
        ops.op_state_space, line)


def test_comments_are_not_mutated():
    source = "x = 1  # < 2 and 3\n"
    assert all("# < 2 and 3" in m.source for m in mutants.generate("fusion.reverse", source))


@pytest.mark.parametrize("exercise", mutants.KERNEL_EXERCISES)
def test_each_kernel_exercise_has_five_hand_written_wrong_answers(exercise):
    assert len(mutants.hand_written(exercise)) >= 5, exercise


@pytest.mark.parametrize("exercise", mutants.KERNEL_EXERCISES)
def test_equivalent_mutants_exist_and_say_why(exercise):
    listed = solutions.equivalent().get(exercise, {})
    keys = {m.key for m in mutants.generate(exercise, solutions.answers()[exercise][0])
            + mutants.blind(exercise)}
    stale = sorted(set(listed) - keys)
    assert not stale, f"{exercise}: listed as equivalent, but no such mutant now: {stale}"
    for key, why in listed.items():
        assert len(why.split()) >= 5 and "hard to check" not in why, (key, why)


def test_every_mutant_of_the_reverse_puzzle_is_rejected_here():
    to_run, _ = mutants.all_mutants("fusion.reverse")
    outcomes = mutants.run(to_run)
    alive = [f"{o.status}: {o.mutant.key}" for o in outcomes if not o.killed]
    assert len(outcomes) == len(to_run) and not alive, alive
