"""Every registered kernel against its op's reference, on fresh random inputs.

A kernel joins this test by being registered. Only combinations that can apply are collected:
the op's cases in the dtypes both the op and the kernel list. A kernel that cannot run on this
machine at all (no GPU, no nvcc, a too-old GPU) is one test, skipped with the kernel's own
reason (which the summary line prints), never silently, instead of one skip per case and dtype
(on a CPU box that was over a thousand skips to collect and report); so is a kernel whose dtypes
none of its op's cases come in (the fp8 matmuls, which their own modules' tests check). A case
the kernel refuses here is skipped with its reason too.
"""

import zlib

import pytest
import torch

import kernels
from course_utils import env
from kernels.registry import OPS, all_kernels, verify

DEVICE = env.DEFAULT_DEVICE


def _params():
    for kernel in all_kernels():
        spec = OPS[kernel.op]
        if DEVICE not in kernel.devices or kernel.unavailable():
            yield pytest.param(kernel, None, None, id=f"{kernel.name}-not-here")
            continue
        dtypes = [d for d in spec.dtypes if d in kernel.dtypes]
        if not dtypes:  # (fp8 matmuls: the op's cases come in none of its dtypes)
            yield pytest.param(kernel, None, None, id=f"{kernel.name}-no-case")
        for case in spec.cases:
            for dtype in dtypes:
                yield pytest.param(kernel, case, dtype,
                                   id=f"{kernel.name}-{case.label}-{str(dtype)[6:]}")


def _names(dtypes) -> str:
    return ", ".join(str(d).removeprefix("torch.") for d in dtypes)


@pytest.mark.parametrize(("kernel", "case", "dtype"), list(_params()))
def test_kernel_matches_reference(kernel, case, dtype):
    if case is None:  # the kernel's own words for why it cannot run on this machine
        wanted = " or ".join(kernel.devices)
        if DEVICE not in kernel.devices or kernel.unavailable():
            pytest.skip(f"{kernel.name}: {kernel.unavailable() or f'needs a {wanted} tensor'}")
        pytest.skip(f"{kernel.name}: the {kernel.op} op's cases come in "
                    f"{_names(OPS[kernel.op].dtypes)}; it takes {_names(kernel.dtypes)} "
                    "(its own module's tests check it)")
    torch.manual_seed(zlib.crc32(f"{kernel.name} {case.label}".encode()))  # the same every run
    args = case.make(dtype, DEVICE)
    if reason := kernel.supports(*args):
        pytest.skip(f"{kernel.name}: {reason}")
    verify(kernel, *args, label=case.label)


def test_only_applicable_combinations_are_collected():
    params = list(_params())
    for param in params:
        kernel, case, dtype = param.values
        assert case is None or dtype in kernel.dtypes, param.id
    # every kernel appears, runnable here or not
    assert {p.values[0].name for p in params} == {k.name for k in all_kernels()}


def test_a_kernel_no_case_fits_appears_once_and_says_why():
    # on a GPU the fp8 matmuls run here, but the op's cases come in none of their dtypes
    odd = kernels.register("add", "matrix_test", "int16", fn=lambda a, b: a + b,
                           dtypes=(torch.int16,))
    try:
        mine = [p for p in _params() if p.values[0] is odd]
        assert [p.id for p in mine] == [f"{odd.name}-no-case"]
        with pytest.raises(pytest.skip.Exception, match="cases come in float32.*takes int16"):
            test_kernel_matches_reference(odd, None, None)
    finally:
        kernels.unregister(odd)


def test_every_op_has_its_reference_registered():
    for name, spec in OPS.items():
        ref = kernels.reference(name)
        assert ref.provider == spec.reference and ref.unavailable() is None
