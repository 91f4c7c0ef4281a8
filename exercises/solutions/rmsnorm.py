"""Solution (and known-wrong answers) of lesson 10's exercise: the RMSNorm backward."""

from exercises.rmsnorm import BACKWARD_STUB

_LAUNCHER = BACKWARD_STUB[BACKWARD_STUB.index("\n\ndef rmsnorm_backward"):]
_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, partial_ptr, n_rows, n_cols,
                       rows_per_program, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    first = pid * rows_per_program
    last = tl.minimum(first + rows_per_program, n_rows)
    for row in range(first, last):
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        g = dy * w
        dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))
        tl.store(dx_ptr + row * n_cols + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * x_hat
    tl.store(partial_ptr + pid * n_cols + cols, dw, mask=mask)
'''
_SOLUTION = _KERNEL + _LAUNCHER

SOLUTIONS = {"rmsnorm.backward": _SOLUTION}


def _edit(old: str, new: str) -> str:
    if old not in _SOLUTION:
        raise ValueError(f"{old!r} is not in the solution")
    return _SOLUTION.replace(old, new)


WRONG = {"rmsnorm.backward": {
    # dx = rstd * g: the term through rstd (every x of the row feeds each dx) forgotten
    "no correction term": _edit("rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))",
                                "rstd * g"),
    # the mean over the block, padding included: wrong whenever n_cols is not a power of two
    "mean over BLOCK": _edit("tl.sum(g * x_hat, axis=0) / n_cols", "tl.sum(g * x_hat, axis=0) "
                             "/ BLOCK"),
    # dweight of the program's last row only
    "dweight not accumulated": _edit("dw += dy * x_hat", "dw = dy * x_hat"),
    # every program adds into row 0 with atomics: right, but not reproducible
    "atomics": _edit("    tl.store(partial_ptr + pid * n_cols + cols, dw, mask=mask)",
                     "    tl.atomic_add(partial_ptr + cols, dw, mask=mask)"),
    # the last program runs past n_rows: reads past x and dy, writes past dx
    "no clamp on the last group": _edit("last = tl.minimum(first + rows_per_program, n_rows)",
                                        "last = first + rows_per_program"),
    # every program stores its part in row 0 of partial: the others' rows stay empty
    "all parts in row 0": _edit("tl.store(partial_ptr + pid * n_cols + cols",
                                "tl.store(partial_ptr + cols"),
    # the loads unmasked: the padding lanes read past each row (and past the tensors)
    "unmasked loads": _edit("x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)",
                            "x = tl.load(x_ptr + row * n_cols + cols)"),
    # g without the weight
    "weight forgotten": _edit("g = dy * w", "g = dy"),
    # the accumulator in bfloat16
    "16-bit accumulator": _edit("dw = tl.zeros((BLOCK,), dtype=tl.float32)",
                                "dw = tl.zeros((BLOCK,), dtype=tl.bfloat16)"),
}}

_PROGRAMS = ("the number of programs is the launcher's tuning choice: any count gives the same dx, "
             "and dweight up to the order of its float32 additions")
_PROMOTED = ("x_hat, g and dw are float32 either way: Triton promotes a 16-bit operand times a "
             "float32 one to float32")
EQUIVALENT = {"rmsnorm.backward": {
    "constant: line 38: sms = torch.cuda.get_device_properties(x.device).multi_processor_count "
    "if x.is_cuda else 2  ->  sms = torch.cuda.get_device_properties(x.device)"
    ".multi_processor_count if x.is_cuda else 3": _PROGRAMS,
    "term dropped: line 39: rows_per_program = triton.cdiv(rows, min(rows, 2 * sms))  ->  "
    "rows_per_program = triton.cdiv(rows, min(rows, 2))": _PROGRAMS,
    "term dropped: line 39: rows_per_program = triton.cdiv(rows, min(rows, 2 * sms))  ->  "
    "rows_per_program = triton.cdiv(rows, min(rows, sms))": _PROGRAMS,
    "constant: line 39: rows_per_program = triton.cdiv(rows, min(rows, 2 * sms))  ->  "
    "rows_per_program = triton.cdiv(rows, min(rows, 3 * sms))": _PROGRAMS,
    "narrowed: line 13: w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)  ->  "
    "w = tl.load(w_ptr + cols, mask=mask, other=0.0)": _PROMOTED,
    "narrowed: line 18: x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)"
    ".to(tl.float32)  ->  x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)":
        _PROMOTED,
    "narrowed: line 19: dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0)"
    ".to(tl.float32)  ->  dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0)":
        _PROMOTED,
}}
