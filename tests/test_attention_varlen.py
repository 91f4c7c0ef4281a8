"""Variable-length sequences packed in one batch (``kernels.attention.varlen_attention``): the
output and the gradients against float64 eager attention run on each sequence in turn, on
ragged lengths (a sequence of 0 and of 1 included, none a multiple of the block), causal and not,
grouped K/V heads; and the words of every refusal.

On a CPU Triton runs in its interpreter at tiny shapes (fp32 and fp16); on a GPU the same tests
run compiled (``make test-gpu``), bf16 included."""

import itertools

import pytest
import torch

from course_utils import env
from kernels.attention import attention_eager, autograd, varlen_attention
from kernels.attention.varlen import per_sequence

DEVICE = "cuda" if env.HAS_CUDA and not env.TRITON_INTERPRET else "cpu"
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else [])
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}

# (query lengths, key lengths, H, H_kv, D): the interpreter's blocks are 32 wide
PROBLEMS = [
    ([5, 0, 1, 40, 33], [5, 0, 1, 40, 33], 4, 2, 16),  # self-attention, packed training
    ([5, 0, 1, 40, 33], [7, 3, 1, 70, 20], 2, 2, 64),  # cross lengths; keys but no queries
    ([17, 2, 0, 65], [9, 0, 0, 31], 8, 1, 16),  # queries with no keys at all: zeros
    ([1], [1], 4, 4, 32),
]


def _cu(lengths):
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32, device=DEVICE)


def _problem(lq, lk, h, h_kv, d, dtype):
    q = torch.randn(sum(lq), h, d, device=DEVICE).to(dtype)
    k, v = (torch.randn(sum(lk), h_kv, d, device=DEVICE).to(dtype) for _ in range(2))
    return q, k, v, _cu(lq), _cu(lk)


def _gradients(fn, q, k, v, do):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v)
    out.backward(do)
    return {"O": out.detach(), "dQ": q.grad, "dK": k.grad, "dV": v.grad}


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("problem", PROBLEMS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_varlen_matches_float64_attention_sequence_by_sequence(problem, causal, dtype):
    lq, lk, h, h_kv, d = problem
    q, k, v, cu_q, cu_k = _problem(lq, lk, h, h_kv, d, dtype)
    do = torch.randn(q.shape, device=DEVICE).to(dtype)
    got = _gradients(lambda a, b, c: varlen_attention(a, b, c, cu_q, cu_k, max(lq), max(lk),
                                                      causal), q, k, v, do)
    exact = _gradients(lambda a, b, c: per_sequence(attention_eager, a, b, c, cu_q, cu_k,
                                                    causal),
                       *(t.double() for t in (q, k, v)), do.double())
    floor = 1e-2 * max(e.abs().max().item() for e in exact.values())
    for name in got:
        assert not got[name].isnan().any(), name
        err = (got[name].double() - exact[name]).abs().max().item()
        assert err <= TOL[dtype] * max(exact[name].abs().max().item(), floor), (name, err)


def test_equal_lengths_are_the_dense_attention():
    b, s, h, h_kv, d = 3, 37, 4, 2, 16
    q, k, v, cu_q, cu_k = _problem([s] * b, [s] * b, h, h_kv, d, torch.float32)
    as_batch = [t.view(b, s, -1, d).transpose(1, 2) for t in (q, k, v)]
    for causal in (False, True):
        dense = autograd.attention(*as_batch, causal).transpose(1, 2).reshape(b * s, h, d)
        torch.testing.assert_close(varlen_attention(q, k, v, cu_q, cu_k, s, s, causal), dense,
                                   atol=1e-5, rtol=1e-5)


def test_a_sequence_never_sees_another_sequences_keys():
    q, k, v, cu_q, cu_k = _problem([20, 30], [20, 30], 2, 2, 16, torch.float32)
    before = varlen_attention(q, k, v, cu_q, cu_k, 30, 30)
    k2, v2 = k.clone(), v.clone()
    k2[20:] += 5.0
    v2[20:] += 5.0  # only the second sequence's keys and values change
    after = varlen_attention(q, k2, v2, cu_q, cu_k, 30, 30)
    assert torch.equal(before[:20], after[:20]) and not torch.equal(before[20:], after[20:])


def test_a_max_seqlen_above_the_longest_changes_nothing():
    q, k, v, cu_q, cu_k = _problem([5, 40], [40, 5], 2, 1, 16, torch.float32)
    torch.testing.assert_close(varlen_attention(q, k, v, cu_q, cu_k, 40, 40, True),
                               varlen_attention(q, k, v, cu_q, cu_k, 100, 77, True))


def test_malformed_problems_raise_naming_the_argument():
    q, k, v, cu_q, cu_k = _problem([3, 5], [4, 6], 4, 2, 16, torch.float32)
    ok = (q, k, v, cu_q, cu_k, 5, 6)

    def call(**change):
        names = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")
        args = dict(zip(names, ok, strict=True)) | change
        return varlen_attention(**args)

    cases = [
        ({"cu_seqlens_q": cu_q.long()}, "cu_seqlens_q expected int32 cumulative lengths, got "
                                        "int64"),
        ({"cu_seqlens_k": torch.tensor([1, 4, 10], dtype=torch.int32, device=DEVICE)},
         "cu_seqlens_k expected to run from 0 to the 10 rows of k, got 1 ... 10"),
        ({"cu_seqlens_q": torch.tensor([0, 3, 7], dtype=torch.int32, device=DEVICE)},
         "cu_seqlens_q expected to run from 0 to the 8 rows of q, got 0 ... 7"),
        ({"cu_seqlens_q": torch.tensor([0, 6, 2, 8], dtype=torch.int32, device=DEVICE),
          "cu_seqlens_k": torch.tensor([0, 4, 4, 10], dtype=torch.int32, device=DEVICE)},
         "cu_seqlens_q expected non-decreasing offsets"),
        ({"cu_seqlens_k": torch.tensor([0, 10], dtype=torch.int32, device=DEVICE)},
         "cu_seqlens_k expected B \\+ 1 >= 2 entries, as many as cu_seqlens_q, got 2"),
        ({"cu_seqlens_q": torch.tensor([0], dtype=torch.int32, device=DEVICE)},
         "cu_seqlens_q expected B \\+ 1"),
        ({"cu_seqlens_q": cu_q[None]}, "cu_seqlens_q expected a 1-D tensor"),
        ({"max_seqlen_q": 4}, "max_seqlen_q expected an int >= the longest sequence \\(5\\)"),
        ({"max_seqlen_k": torch.tensor(6)}, "max_seqlen_k expected an int"),
        ({"max_seqlen_k": True}, "max_seqlen_k expected an int"),
        ({"q": q[None]}, "q expected a 3-D tensor"),
        ({"k": k[:, :1].expand(-1, 3, -1), "v": v[:, :1].expand(-1, 3, -1)},
         "k expected a number of heads that divides q's 4"),
        ({"k": k[..., :8], "v": v[..., :8]},
         "k expected shape \\(total_k, H_kv, 16\\) to match q \\(8, 4, 16\\)"),
        ({"v": v[:-1]}, "v expected the shape of k"),
        ({"k": k.double()}, "k expected the dtype of q \\(torch.float32\\), got torch.float64"),
    ]
    for change, words in cases:
        with pytest.raises(ValueError, match=f"varlen_attention: {words}"):
            call(**change)
    with pytest.raises(ValueError, match="varlen_attention: causal expected True or False"):
        varlen_attention(*ok, causal=1)
    if DEVICE == "cpu":
        with pytest.raises(ValueError, match="varlen_attention: .*interpreter computes bf16"):
            varlen_attention(*(t.bfloat16() for t in (q, k, v)), cu_q, cu_k, 5, 6)
