"""An interpreted copy of a kernel (exercises.interpreted.interpreted) runs what a student's
kernel uses, and leaves ``triton.language`` as it found it.

On a GPU the checks run an interpreted copy of the student's compiled kernel first (each lane's
address checked), then the compiled kernel. Triton's own device-function call patches
``triton.language`` for the interpreter and never puts it back: on the H100 every Triton kernel
compiled afterwards in that process failed ("'ir.value' object has no attribute 'dtype'"). These
run on any machine: the copy runs on CPU tensors, whether the kernel was compiled or not.
"""

import torch
import triton
import triton.language as tl

from exercises import triton_checks


@triton.jit
def _scaled(x, scale):
    return x * scale


@triton.jit
def _scale_rows(x_ptr, out_ptr, n_cols, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)  # one of triton.language's own @jit helpers
    for start in range(0, n_cols, BLOCK):  # range() over a kernel argument
        cols = start + tl.arange(0, BLOCK)
        acc = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row * n_cols + cols, _scaled(acc, scale), mask=cols < n_cols)


def _language() -> dict:
    """Every public attribute of the modules the interpreter patches."""
    found = {}
    for module in (tl, tl.core, tl.tensor, tl.math):
        for name in dir(module):
            if not name.startswith("__"):
                found[(module.__name__ if hasattr(module, "__name__") else repr(module), name)] \
                    = getattr(module, name)
    return found


def test_a_copy_runs_helpers_and_leaves_triton_language_as_it_was():
    before = _language()
    x = torch.randn(3, 37)
    out = torch.zeros_like(x)
    triton_checks.interpreted(_scale_rows)[(3,)](x, out, 37, 2.0, BLOCK=16)
    torch.testing.assert_close(out, 2 * x)
    after = _language()
    changed = sorted(name for key, name in ((k, k[1]) for k in before)
                     if after.get(key) is not before[key])
    assert changed == [], f"left patched after the copy ran: {changed[:8]}"
