"""The check of exercise attention_variants.flash_tiles beyond tests/test_exercises.py: correct
answers written differently pass, answers that game the check do not, and the stub, a class,
says "not attempted" however the cell that defines it is run."""

import pytest

import exercises
from exercises.solutions import attention_tiles

ID = "attention_variants.flash_tiles"
SOLUTION = attention_tiles.SOLUTIONS[ID]


def _run(source: str, label: str) -> exercises.Result:
    names = exercises.load_cell(source, f"{label}_{ID}")
    return exercises.run_check(ID, names["FlashAttention"])


@pytest.mark.parametrize("label", sorted(attention_tiles.ALTERNATIVES[ID]))
def test_a_correct_answer_written_differently_passes(label):
    result = _run(attention_tiles.ALTERNATIVES[ID][label], "alternative")
    assert result.passed, str(result)


_SDPA_FORWARD = SOLUTION.replace(
    "        out = out.to(q.dtype)\n",
    "        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)\n")
_NOT_A_FUNCTION = SOLUTION.replace("class FlashAttention(torch.autograd.Function):",
                                   "class FlashAttention:")
_ON_CTX = SOLUTION.replace('''        ctx.causal = causal
        return out''', '''        ctx.causal = causal
        ctx.scores = [torch.randn(q.shape[0], q.shape[1], q.shape[2], k.shape[2])]
        return out''')


@pytest.mark.parametrize(("source", "says"), [
    pytest.param(_SDPA_FORWARD, "calls PyTorch's own attention", id="sdpa-forward"),
    pytest.param(_NOT_A_FUNCTION, "not a torch.autograd.Function", id="not-a-function"),
    pytest.param(_ON_CTX, "keeps", id="scores-kept-on-ctx"),
])
def test_a_gamed_answer_fails(source, says):
    assert source != SOLUTION
    result = _run(source, "gamed")
    assert result.status == "not yet" and says in str(result), str(result)


def test_a_forward_written_and_a_backward_left_is_attempted():
    stub = exercises.get(ID).stub
    forward_only = stub.replace("        ...\n\n", "        return q\n\n", 1)
    result = _run(forward_only, "half")
    assert result.status == "not yet", str(result)
