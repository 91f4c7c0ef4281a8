"""Solution (and known-wrong answers) of exercise model.cross_entropy: a fused cross-entropy in
Triton, forward and backward, from an empty file.

Each wrong answer is a mistake a student makes, written as one; its comment says what is wrong.
Every one must get "not yet" from the check, and its verdict must name the mistake (``SAYS``).
``ALTERNATIVES`` are correct answers written differently (each lane its own running maximum,
the gradient computed in the forward as Liger-Kernel does, a chunk of 4096): each must pass
(``tests/test_cross_entropy.py``).
"""

_SOLUTION = '''
import torch
import triton
import triton.language as tl

BLOCK = 1024  # columns of a row per chunk


@triton.jit
def ce_forward_kernel(x_ptr, t_ptr, loss_ptr, lse_ptr, n_cols, stride_row, stride_col,
                      ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_row
    m = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols * stride_col, mask=cols < n_cols, other=-float("inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        m_sub = tl.where(m_new == -float("inf"), 0.0, m_new)  # nothing finite seen yet
        s = s * tl.exp(m - m_sub) + tl.sum(tl.exp(x - m_sub), axis=0)
        m = m_new
    lse = m + tl.log(s)
    target = tl.load(t_ptr + row)
    counted = target != ignore_index
    x_target = tl.load(x_row + target * stride_col, mask=counted, other=0.0).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(counted, lse - x_target, 0.0))
    tl.store(lse_ptr + row, lse)


@triton.jit
def ce_backward_kernel(x_ptr, t_ptr, lse_ptr, scale_ptr, g_ptr, n_cols, stride_row, stride_col,
                       g_stride_row, g_stride_col, ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    target = tl.load(t_ptr + row)
    counted = target != ignore_index
    lse = tl.load(lse_ptr + row)
    scale = tl.load(scale_ptr)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = cols < n_cols
        x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=inside,
                    other=0.0).to(tl.float32)
        g = (tl.exp(x - lse) - tl.where(cols == target, 1.0, 0.0)) * scale
        g = tl.where(counted, g, 0.0)
        tl.store(g_ptr + row * g_stride_row + cols * g_stride_col,
                 g.to(g_ptr.dtype.element_ty), mask=inside)


class CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets, ignore_index):
        n, v = logits.shape
        row_loss = torch.empty(n, dtype=torch.float32, device=logits.device)
        lse = torch.empty(n, dtype=torch.float32, device=logits.device)
        ce_forward_kernel[(n,)](logits, targets, row_loss, lse, v, logits.stride(0),
                                logits.stride(1), ignore_index, BLOCK=BLOCK)
        n_valid = (targets != ignore_index).sum()
        ctx.save_for_backward(logits, targets, lse, n_valid)
        ctx.ignore_index = ignore_index
        return row_loss.sum() / n_valid

    @staticmethod
    def backward(ctx, grad_out):
        logits, targets, lse, n_valid = ctx.saved_tensors
        n, v = logits.shape
        scale = (grad_out.float() / n_valid).reshape(1)  # on the device: no sync
        grad = torch.empty_like(logits)
        ce_backward_kernel[(n,)](logits, targets, lse, scale, grad, v, logits.stride(0),
                                 logits.stride(1), grad.stride(0), grad.stride(1),
                                 ctx.ignore_index, BLOCK=BLOCK)
        return grad, None, None


def cross_entropy(logits, targets, ignore_index=-100):
    return CrossEntropy.apply(logits, targets, ignore_index)
'''

SOLUTIONS = {"model.cross_entropy": _SOLUTION}


def _edit(*edits: tuple[str, str]) -> str:
    source = _SOLUTION
    for old, new in edits:
        if old not in source:
            raise ValueError(f"{old!r} is not in the solution")
        source = source.replace(old, new)
    return source


_MEAN = "        return row_loss.sum() / n_valid\n"
_SCALE = "scale = (grad_out.float() / n_valid)"

WRONG = {"model.cross_entropy": {
    # the running maximum started at 0: rows near -200 sum exp(-200)s, 0 in float32
    "max from 0": _edit(('    m = -float("inf")\n    s = 0.0\n', "    m = 0.0\n    s = 0.0\n")),
    # no maximum subtracted at all: exp of logits of several hundred overflows
    "no max subtracted": _edit(
        ("        m_new = tl.maximum(m, tl.max(x, axis=0))\n"
         "        m_sub = tl.where(m_new == -float(\"inf\"), 0.0, m_new)  # nothing finite seen "
         "yet\n"
         "        s = s * tl.exp(m - m_sub) + tl.sum(tl.exp(x - m_sub), axis=0)\n"
         "        m = m_new\n"
         "    lse = m + tl.log(s)\n",
         "        s += tl.sum(tl.exp(x), axis=0)\n"
         "    lse = tl.log(s)\n")),
    # exp(m - m_new) with both -inf: a first chunk all -inf makes NaN
    "no -inf guard": _edit(
        ("        m_sub = tl.where(m_new == -float(\"inf\"), 0.0, m_new)  # nothing finite seen "
         "yet\n", "        m_sub = m_new\n")),
    # the padding lanes read 0, not -inf: each adds exp(0 - m) to the sum
    "padding read as 0": _edit(("mask=cols < n_cols, other=-float(\"inf\"))",
                                "mask=cols < n_cols, other=0.0)")),
    # the mean over every row, ignored ones counted in the divisor
    "divided by N": _edit((_MEAN, "        return row_loss.sum() / n\n"),
                          (_SCALE, "scale = (grad_out.float() / n)")),
    # the sum, not the mean
    "sum not mean": _edit((_MEAN, "        return row_loss.sum() + 0 * n_valid\n"),
                          (_SCALE, "scale = (grad_out.float() + 0 * n_valid)")),
    # ignored rows' losses kept: their target (-100) is read as a column too
    "ignored rows in the loss": _edit(("tl.store(loss_ptr + row, tl.where(counted, lse - x_target, "
                                       "0.0))", "tl.store(loss_ptr + row, lse - x_target)"),
                                      ("mask=counted, other=0.0)", "mask=target >= 0, other=0.0)")),
    # the ignored rows get the softmax as their gradient
    "ignored rows get a gradient": _edit(("        g = tl.where(counted, g, 0.0)\n", "")),
    # the gradient as if grad_out were 1
    "grad_out forgotten": _edit((_SCALE,
                                 "scale = (1.0 / n_valid.float())")),
    # softmax alone: the target's one-hot not subtracted
    "no one-hot": _edit(("g = (tl.exp(x - lse) - tl.where(cols == target, 1.0, 0.0)) * scale",
                         "g = tl.exp(x - lse) * scale")),
    # ignore_index hard-coded: ignore_index=3 is not honoured
    "ignore_index hard-coded": _edit(("counted = target != ignore_index\n    x_target",
                                      "counted = target != -100\n    x_target"),
                                     ("    counted = target != ignore_index\n    lse = ",
                                      "    counted = target != -100\n    lse = "),
                                     ("n_valid = (targets != ignore_index).sum()",
                                      "n_valid = (targets != -100).sum()")),
    # the target's logit loaded without a mask: an ignored row reads element -100
    "target loaded unmasked": _edit(("x_target = tl.load(x_row + target * stride_col, "
                                     "mask=counted, other=0.0)",
                                     "x_target = tl.load(x_row + target * stride_col)")),
    # the column stride ignored: a transposed view is read as if it were contiguous
    "column stride ignored": _edit(("tl.load(x_row + cols * stride_col,", "tl.load(x_row + cols,")),
    # the whole row in one block: a GPT-2 row would not fit in registers
    "whole row at once": _edit(("BLOCK=BLOCK)\n        n_valid",
                                "BLOCK=triton.next_power_of_2(v))\n        n_valid"),
                               ("ctx.ignore_index, BLOCK=BLOCK)",
                                "ctx.ignore_index, BLOCK=triton.next_power_of_2(v))")),
    # the loss summed across programs with an atomic: not the same bits run to run
    "atomic sum": _edit(("tl.store(loss_ptr + row, tl.where(counted, lse - x_target, 0.0))",
                         "tl.atomic_add(loss_ptr, tl.where(counted, lse - x_target, 0.0))"),
                        ("row_loss = torch.empty(n,", "row_loss = torch.zeros(n,")),
    # the backward in PyTorch: a float32 softmax and one-hot of N x V
    "backward in PyTorch": _edit((
        "        grad = torch.empty_like(logits)\n",
        "        p = torch.softmax(logits.float(), 1)\n"
        "        p[torch.arange(n), targets.clamp(0)] -= 1\n"
        "        p[targets == ctx.ignore_index] = 0\n"
        "        return (p * scale).to(logits.dtype), None, None\n"
        "        grad = torch.empty_like(logits)\n")),
    # the gradient kept in float32 and cast: an (N, V) float32 tensor besides the gradient
    "float32 gradient then cast": _edit(
        ("        grad = torch.empty_like(logits)\n",
         "        grad = torch.empty(logits.shape, dtype=torch.float32, device=logits.device)\n"),
        ("        return grad, None, None\n",
         "        return grad.to(logits.dtype), None, None\n")),
    # the loss in the logits' dtype (bf16: 3 significant digits)
    "loss in the logits' dtype": _edit(
        (_MEAN, "        return (row_loss.sum() / n_valid).to(logits.dtype)\n")),
    # a contiguous copy of the logits first: an (N, V) tensor for a transposed view
    "contiguous copy": _edit(("        n, v = logits.shape\n        row_loss",
                              "        logits = logits.contiguous()\n"
                              "        n, v = logits.shape\n        row_loss")),
}}

SAYS = {"model.cross_entropy": {
    "max from 0": "near -200",
    "no max subtracted": "several hundred",
    "no -inf guard": "-inf",
    "padding read as 0": "ragged tail",
    "divided by N": "ignored ones counted in the divisor",
    "sum not mean": "the sum over the rows, not their mean",
    "ignored rows in the loss": "ignored",
    "ignored rows get a gradient": "a gradient in ignored rows",
    "grad_out forgotten": "grad_out not multiplied in",
    "no one-hot": "without the one-hot",
    "ignore_index hard-coded": "ignore_index=3",
    "target loaded unmasked": "outside the tensor",
    "column stride ignored": "transposed",
    "whole row at once": "a whole row at once",
    "atomic sum": "atomic",
    "backward in PyTorch": "besides the gradient",
    "float32 gradient then cast": "besides the gradient",
    "loss in the logits' dtype": "float32 0-d tensor",
    "contiguous copy": "(transposed): your code made 2 tensors",
    "gradient scaled out of place": "aten.mul.Tensor",
}}

_LANES = _edit((
    '    m = -float("inf")\n    s = 0.0\n',
    '    m = tl.full((BLOCK,), -float("inf"), tl.float32)\n'
    '    s = tl.zeros((BLOCK,), tl.float32)\n'),
    ("        m_new = tl.maximum(m, tl.max(x, axis=0))\n", "        m_new = tl.maximum(m, x)\n"),
    ("        s = s * tl.exp(m - m_sub) + tl.sum(tl.exp(x - m_sub), axis=0)\n",
     "        s = s * tl.exp(m - m_sub) + tl.exp(x - m_sub)\n"),
    ("    lse = m + tl.log(s)\n",
     "    top = tl.max(m, axis=0)\n    lse = top + tl.log(tl.sum(s * tl.exp(m - top), axis=0))\n"))

# Liger-Kernel's organisation: the forward writes the gradient for grad_out = 1 (both passes
# in one launch after the other), the backward scales it in place by grad_out
_IN_FORWARD = _edit(
    ("        ctx.save_for_backward(logits, targets, lse, n_valid)\n"
     "        ctx.ignore_index = ignore_index\n",
     "        grad = torch.empty_like(logits)\n"
     "        one = (1.0 / n_valid.float()).reshape(1)\n"
     "        ce_backward_kernel[(n,)](logits, targets, lse, one, grad, v, logits.stride(0),\n"
     "                                 logits.stride(1), grad.stride(0), grad.stride(1),\n"
     "                                 ignore_index, BLOCK=BLOCK)\n"
     "        ctx.save_for_backward(grad)\n"),
    ("        logits, targets, lse, n_valid = ctx.saved_tensors\n"
     "        n, v = logits.shape\n"
     "        scale = (grad_out.float() / n_valid).reshape(1)  # on the device: no sync\n"
     "        grad = torch.empty_like(logits)\n"
     "        ce_backward_kernel[(n,)](logits, targets, lse, scale, grad, v, logits.stride(0),\n"
     "                                 logits.stride(1), grad.stride(0), grad.stride(1),\n"
     "                                 ctx.ignore_index, BLOCK=BLOCK)\n",
     "        (grad,) = ctx.saved_tensors\n"
     "        grad.mul_(grad_out.to(grad.dtype))  # in place: no second (N, V) tensor\n"))

# Liger-Kernel's order with the gradient scaled out of place: a second (N, V) tensor
WRONG["model.cross_entropy"]["gradient scaled out of place"] = _IN_FORWARD.replace(
    "        grad.mul_(grad_out.to(grad.dtype))  # in place: no second (N, V) tensor\n",
    "        grad = grad * grad_out.to(grad.dtype)\n")

ALTERNATIVES = {"model.cross_entropy": {
    "each lane its own running maximum": _LANES,
    "the gradient in the forward, scaled in place (Liger-Kernel's order)": _IN_FORWARD,
    "chunks of 4096, the most the statement allows": _edit(("BLOCK = 1024  #",
                                                            "BLOCK = 4096  #")),
}}

_PROMOTED = ("every use of it meets a float32 operand (m, m_sub, lse), and Triton promotes a "
             "16-bit operand with a float32 one to float32; a maximum of 16-bit values is exact")
EQUIVALENT = {"model.cross_entropy": {
    "narrowed: line 19: x = x.to(tl.float32)  ->  x = x": _PROMOTED,
    "narrowed: line 27: x_target = tl.load(x_row + target * stride_col, mask=counted, "
    "other=0.0).to(tl.float32)  ->  x_target = tl.load(x_row + target * stride_col, "
    "mask=counted, other=0.0)": _PROMOTED,
    "narrowed: line 44: other=0.0).to(tl.float32)  ->  other=0.0)": _PROMOTED,
    "mask dropped: line 27: x_target = tl.load(x_row + target * stride_col, mask=counted, "
    "other=0.0).to(tl.float32)  ->  x_target = tl.load(x_row + target * stride_col, "
    "mask=counted).to(tl.float32)": "only an ignored row's lane is masked off, and its value "
    "(undefined without other=) never leaves tl.where(counted, lse - x_target, 0.0)",
    "mask dropped: line 44: other=0.0).to(tl.float32)  ->  ).to(tl.float32)": "the masked-off "
    "lanes are the padding past n_cols: their undefined values are never stored (the store "
    "has the same mask)",
}}
