"""The cross_entropy op itself: its definition in the registry (arguments, validation, test
cases, tolerances) and its reference; the providers beside it import what they share from here,
and the package imports them after it (see the package's docstring)."""

import torch
import torch.nn.functional as F

from kernels.registry import Case, define_op, expect_tensor, register

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
IGNORE_INDEX = -100  # PyTorch's default: a padding token's target


def _validate(logits, targets, ignore_index=IGNORE_INDEX) -> None:
    expect_tensor("cross_entropy", "logits", logits, ndim=2, floating=True)
    expect_tensor("cross_entropy", "targets", targets, ndim=1)
    if targets.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"cross_entropy: targets expected int64 or int32 class indices, got "
                         f"{str(targets.dtype).removeprefix('torch.')}")
    if targets.shape[0] != logits.shape[0]:
        raise ValueError(f"cross_entropy: targets expected {logits.shape[0]} entries (one per "
                         f"row of logits), got {targets.shape[0]}")
    if logits.shape[1] == 0:
        raise ValueError("cross_entropy: logits expected at least one column (class), got "
                         f"shape {tuple(logits.shape)}")
    if targets.device != logits.device:
        raise ValueError(f"cross_entropy: targets expected logits' device {logits.device}, "
                         f"got {targets.device}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise ValueError(f"cross_entropy: ignore_index expected an int, got {ignore_index!r}")


# -- the op's test problems: fresh random (logits, targets) in a dtype on a device ------------


def _problem(rows, cols, scale=1.0, ignored=0.0, transposed=False):
    def make(dtype, device):
        shape = (cols, rows) if transposed else (rows, cols)
        logits = (scale * torch.randn(*shape, device=device)).to(dtype)
        targets = torch.randint(0, cols, (rows,), device=device)
        targets[torch.rand(rows, device=device) < ignored] = IGNORE_INDEX
        targets[0] = 0  # at least one row counts (all ignored: PyTorch's mean is NaN)
        return logits.t() if transposed else logits, targets

    return make


def _row_stride_past_v(dtype, device):
    # a slice of a wider matrix: row stride 1100, 1000 columns read
    logits = torch.randn(37, 1100, device=device).to(dtype)[:, 50:1050]
    return logits, torch.randint(0, 1000, (37,), device=device)


define_op(
    "cross_entropy",
    arg_names=("logits", "targets", "ignore_index"),
    validate=_validate,
    reference="eager",
    dtypes=FLOAT_DTYPES,
    typed_args=("logits",),  # targets are class indices; validate checks them
    cases=(
        Case("64x1000", _problem(64, 1000)),
        Case("odd 37x5003 (several chunks, a ragged tail)", _problem(37, 5003)),
        Case("one row", _problem(1, 781)),
        Case("one column", _problem(5, 1)),
        Case("a third of the rows ignored", _problem(48, 777, ignored=0.33)),
        Case("transposed logits", _problem(96, 130, transposed=True)),
        Case("row stride past V", _row_stride_past_v),
        Case("logits of several hundred", _problem(16, 300, scale=300.0)),
        Case("logits near zero", _problem(16, 300, scale=1e-4)),
    ),
    # the loss is a mean of log-sum-exps: float32 sums in another order, plus the input's own
    # rounding (already in the reference, which upcasts the same rounded logits)
    tolerance={torch.float32: (1e-5, 1e-5), torch.float16: (1e-4, 1e-4),
               torch.bfloat16: (1e-4, 1e-4)},
    description="mean cross-entropy of (N, V) logits against N class indices, ignore_index "
                "rows left out of the mean",
)


@register("cross_entropy", "eager", dtypes=FLOAT_DTYPES)
def cross_entropy_eager(logits: torch.Tensor, targets: torch.Tensor,
                        ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """F.cross_entropy on the logits in float32, mean over the rows that count: the reference.
    (Its float32 copy of the logits and its float32 log-softmax are N·V floats each: at GPT-2's
    8192 x 50257, 1.6 GB apiece, what the Triton provider never makes.)"""
    return F.cross_entropy(logits.float(), targets.long(), ignore_index=ignore_index)
