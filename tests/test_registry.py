"""The registry's contract: discovery, reasons instead of exceptions, ValueError for bad input."""

import pytest
import torch

import kernels
from course_utils import env
from kernels.registry import Kernel, KernelNotSupported, get_kernel, get_kernels


@pytest.fixture
def scratch_kernel():
    """A CUDA-only float16 kernel registered for the duration of one test."""
    kernel = kernels.register("add", "test_cuda_only", fn=lambda a, b: a + b,
                              dtypes=(torch.float16,), devices=("cuda",),
                              meta={"accumulator": "float16"})
    yield kernel
    kernels.unregister("add", "test_cuda_only")


def test_import_registers_a_reference_for_every_op():
    assert {"gelu", "softmax", "add", "matmul"} <= set(kernels.OPS)
    for op in kernels.OPS:
        assert kernels.reference(op).is_reference


def test_wrong_device_is_a_reason(scratch_kernel):
    a = torch.ones(4, dtype=torch.float16)
    reason = scratch_kernel.supports(a, a)
    if env.HAS_CUDA:
        assert reason == "needs a CUDA tensor, got a on cpu"
    else:
        assert "no CUDA GPU" in reason


def test_wrong_dtype_is_a_reason():
    kernel = Kernel(op="add", provider="x", fn=lambda a, b: a + b, dtypes=(torch.float16,))
    a = torch.ones(3, dtype=torch.float64)
    assert kernel.supports(a, a) == "supports float16; got a of float64"


def test_capability_gap_is_a_reason():
    kernel = Kernel(op="add", provider="x", fn=lambda a, b: a + b, min_capability=(99, 0))
    if env.HAS_CUDA:
        assert kernel.unavailable() == f"needs sm_990+; this GPU is {env.device_info().arch}"
    else:
        assert kernel.unavailable().startswith("no CUDA GPU")


def test_calling_an_unsupported_kernel_raises_with_the_reason():
    kernel = Kernel(op="add", provider="x", fn=lambda a, b: a + b, dtypes=(torch.float16,))
    a = torch.ones(3)
    with pytest.raises(KernelNotSupported, match="supports float16; got a of float32"):
        kernel(a, a)


@pytest.mark.parametrize(("op", "args", "match"), [
    ("gelu", ([1.0, 2.0],), "gelu: x expected a torch.Tensor, got list"),
    ("gelu", (torch.arange(3),), "gelu: x expected a floating-point tensor, got int64"),
    ("softmax", (torch.ones(3),), r"softmax: x expected a 2-D tensor, got shape \(3,\)"),
    ("add", (torch.ones(3), torch.ones(4)), r"add: b expected the shape of a \(3,\), got \(4,\)"),
    ("add", (torch.ones(3), torch.ones(3, dtype=torch.float64)), "add: b expected the dtype"),
    ("matmul", (torch.ones(2, 3), torch.ones(4, 5)), "matmul: b expected 3 rows"),
    ("matmul", (torch.ones(2, 3), "b"), "matmul: b expected a torch.Tensor, got str"),
])
def test_malformed_problems_raise_value_error_naming_the_operand(op, args, match):
    for kernel in kernels.all_kernels(op):
        with pytest.raises(ValueError, match=match):
            kernel.supports(*args)
    with pytest.raises(ValueError, match=match):
        get_kernels(op, *args)


def test_discovery_filters_by_arguments_and_predicate(scratch_kernel):
    a = torch.ones(8, dtype=torch.float16, device=env.DEFAULT_DEVICE)
    found = get_kernels("add", a, a)
    assert get_kernel("add", "eager") in found
    assert (scratch_kernel in found) == env.HAS_CUDA
    fp16_acc = get_kernels("add", where=lambda k: k.meta.get("accumulator") == "float16")
    assert fp16_acc == [scratch_kernel]
    reasons = [reason for _, reason in kernels.explain("add", a, a)]
    assert all(reason is None or isinstance(reason, str) for reason in reasons)


def test_lazy_build_happens_once_on_first_call():
    calls = []

    def build():
        calls.append(1)
        return lambda x: x * 2

    kernel = kernels.register("gelu", "test_lazy", build=build)
    try:
        assert calls == [] and not kernel.built
        x = torch.ones(2)
        assert torch.equal(kernel(x), x * 2) and torch.equal(kernel(x), x * 2)
        assert calls == [1] and kernel.built
    finally:
        kernels.unregister("gelu", "test_lazy")


def test_unknown_names_say_what_exists():
    with pytest.raises(KeyError, match="registered: gelu/eager"):
        get_kernel("gelu", "nope")
    with pytest.raises(ValueError, match="unknown op 'conv'"):
        kernels.register("conv", "eager", fn=lambda x: x)
    with pytest.raises(ValueError, match="already registered"):
        kernels.register("gelu", "eager", fn=lambda x: x)
