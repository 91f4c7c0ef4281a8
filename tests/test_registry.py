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
    for call in (lambda: kernels.register("conv", "eager", fn=lambda x: x),
                 lambda: get_kernels("conv"), lambda: kernels.explain("conv"),
                 lambda: kernels.all_kernels("conv")):
        with pytest.raises(ValueError, match="unknown op 'conv'; defined ops: add, attention, "
                                             "cross_entropy, gelu"):
            call()


def test_a_taken_key_says_who_took_it_and_how_to_free_it():
    with pytest.raises(ValueError, match=r"gelu/eager is already registered \(by "
                                         r"kernels.gelu.op\); unregister it first "
                                         r"\(kernels.unregister\('gelu', "
                                         r"'eager'\)\)"):
        kernels.register("gelu", "eager", fn=lambda x: x)


@pytest.mark.parametrize(("fields", "match"), [
    ({}, "expected fn= .* or build="),
    ({"fn": 3}, "fn expected a callable, got int"),
    ({"fn": abs, "dtypes": ("float32",)}, "dtypes expected a non-empty tuple of torch.dtype"),
    ({"fn": abs, "devices": ("gpu",)}, "devices expected a tuple of 'cpu'/'cuda', got"),
    ({"fn": abs, "min_capability": 80}, r"min_capability expected \(major, minor\)"),
    ({"fn": abs, "needs": ("cuda", "tensor-cores")}, "needs expected requirement names .*"
                                                     "got 'tensor-cores'"),
    ({"fn": abs, "tile": 16}, "unexpected keyword argument 'tile'; fields: fn, build"),
])
def test_malformed_registrations_name_the_field(fields, match):
    before = kernels.all_kernels()
    with pytest.raises(ValueError, match=match):
        if "fn" in fields or "build" in fields:
            kernels.register("gelu", "test_bad", **fields)
        else:
            kernels.register_kernel(Kernel(op="gelu", provider="test_bad"))
    assert kernels.all_kernels() == before


def test_metadata_the_ops_filters_use_is_required():
    op = kernels.define_op("test_scaled", arg_names=("x",), validate=lambda x: None,
                           reference="eager", meta_keys={"accumulator": "dtype of the sums"})
    try:
        with pytest.raises(ValueError, match="meta expected the keys that test_scaled's "
                                             "filters use .accumulator: dtype of the sums.*"
                                             "got meta without 'accumulator'"):
            kernels.register("test_scaled", "eager", fn=lambda x: x)
        kernels.register("test_scaled", "eager", fn=lambda x: x,
                         meta={"accumulator": "float32"})
        assert [k.provider for k in get_kernels("test_scaled")] == ["eager"]
    finally:
        kernels.unregister("test_scaled", "eager", missing_ok=True)
        del kernels.OPS[op.name]


def test_a_filter_reading_missing_metadata_names_the_kernel(scratch_kernel):
    with pytest.raises(ValueError, match="where= filter: add/eager has no meta key 'accumulator'"
                                         ".*k.meta.get"):
        get_kernels("add", where=lambda k: k.meta["accumulator"] == "float16")
    assert get_kernels("add", where=lambda k: k.meta.get("accumulator") == "float16") == [
        scratch_kernel]


def test_register_then_unregister_leaves_the_registry_as_before():
    before = list(kernels.registry._KERNELS.items())
    kernel = kernels.register_kernel(Kernel(op="add", provider="test_mine", variant="v1",
                                         fn=lambda a, b: a + b))
    assert kernels.all_kernels("add")[-1] is kernel
    assert kernels.unregister(kernel) is kernel
    assert list(kernels.registry._KERNELS.items()) == before
    with pytest.raises(KeyError, match="no kernel add/test_mine\\[v1\\]; registered: add/eager"):
        kernels.unregister("add", "test_mine", "v1")
    assert kernels.unregister("add", "test_mine", "v1", missing_ok=True) is None


def test_kernels_registered_from_a_user_module_need_no_course_edit(tmp_path, monkeypatch):
    (tmp_path / "my_kernels.py").write_text(
        "import kernels\n"
        "KERNEL = kernels.register('add', 'test_user_module', fn=lambda a, b: b + a,\n"
        "                          meta={'author': 'me'})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_kernels

    try:
        assert my_kernels.KERNEL.origin == "my_kernels"
        x = torch.ones(3)
        assert my_kernels.KERNEL in get_kernels("add", x, x, where=lambda k: "author" in k.meta)
    finally:
        kernels.unregister(my_kernels.KERNEL)


@pytest.mark.parametrize("variant", ["", "two\nlines", 3])
def test_a_variant_must_be_a_one_line_name(variant):
    with pytest.raises(ValueError, match="variant expected a non-empty one-line name"):
        kernels.register("gelu", "test_named", variant, fn=lambda x: x)


def test_one_of_returns_the_choice_or_names_the_argument_and_every_choice():
    from kernels.registry import one_of

    assert one_of("step", 2, {1: "a", 2: "b"}) == "b"
    assert one_of("provider", "nvrtc", ("triton", "nvrtc")) == "nvrtc"
    with pytest.raises(ValueError, match=r"^step expected one of 1, 2, got 3$"):
        one_of("step", 3, {1: "a", 2: "b"})
