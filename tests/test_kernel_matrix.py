"""Every registered kernel against its op's reference, on fresh random inputs.

A kernel joins this test by being registered. A case the kernel does not support here is
skipped with the kernel's own reason (which the summary line prints), never silently.
"""

import pytest
import torch

import kernels
from course_utils import env
from kernels.registry import OPS, all_kernels, verify

DEVICE = env.DEFAULT_DEVICE


def _params():
    for kernel in all_kernels():
        spec = OPS[kernel.op]
        for case in spec.cases:
            for dtype in spec.dtypes:
                yield pytest.param(kernel, case, dtype,
                                   id=f"{kernel.name}-{case.label}-{str(dtype)[6:]}")


@pytest.mark.parametrize(("kernel", "case", "dtype"), list(_params()))
def test_kernel_matches_reference(kernel, case, dtype):
    torch.manual_seed(hash((kernel.name, case.label)) % 2**31)
    args = case.make(dtype, DEVICE)
    if reason := kernel.supports(*args):
        pytest.skip(f"{kernel.name}: {reason}")
    verify(kernel, *args, label=case.label)


def test_every_op_has_its_reference_registered():
    for name, spec in OPS.items():
        ref = kernels.reference(name)
        assert ref.provider == spec.reference and ref.unavailable() is None
