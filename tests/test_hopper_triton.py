"""kernels/matmul/hopper/triton_tma.py: the Triton peer of the Hopper matmul (lesson 17's staircase:
TMA descriptors, persistent grid, grouped tile order). It registers as a provider with its metadata,
refuses in plain words what it cannot run, and matches a float64 reference at awkward shapes with
poisoned outputs: on a CPU through Triton's interpreter (fp16, fp8), on a Hopper GPU in every
variant."""

import pytest
import torch

import kernels
from course_utils import env
from kernels.matmul.hopper import triton_tma

# small tiles keep the interpreter fast and give every test shape many tiles per program
SMALL = triton_tma.Config(16, 32, 32, group_m=2, num_stages=2, num_warps=4,
                          epilogue_subtile=True)
SMALL_FULL_STORE = triton_tma.Config(16, 32, 16, group_m=3, num_stages=2, num_warps=4,
                                     epilogue_subtile=False)
needs_interpreter = pytest.mark.skipif(not env.TRITON_INTERPRET,
                                       reason="runs the kernel under TRITON_INTERPRET=1")


@pytest.fixture
def registered():
    """The provider's kernels, registered for the test and the registry left as it was (the
    lead's kernels/matmul/hopper/__init__.py may have registered them already)."""
    before = [kernels.unregister("matmul", triton_tma.PROVIDER, name, missing_ok=True)
              for name in triton_tma.VARIANTS]
    mine = triton_tma.register()
    yield mine
    for kernel in mine:
        kernels.unregister(kernel)
    for kernel in before:
        if kernel is not None:
            kernels.register_kernel(kernel)


def _check(v, m, n, k, config=None, device="cpu"):
    a, b = triton_tma.operands(v, m, n, k, device=device)
    expected = triton_tma.reference(a, b)
    out = torch.full((m, n), float("nan"), device=device).to(v.out)  # a missed tile stays NaN
    got = triton_tma.matmul(a, b, config=config, out=out)
    assert got is out
    scale = expected.abs().max().item() if expected.numel() else 1.0
    torch.testing.assert_close(got.double(), expected, atol=1e-2 * (scale or 1.0), rtol=1e-2,
                               msg=lambda msg: f"{v.name} {m}x{n}x{k} {config}: {msg}")


# -- registration ------------------------------------------------------------------------------


def test_register_gives_one_kernel_per_variant_with_its_metadata(registered):
    assert [k.variant for k in registered] == list(triton_tma.VARIANTS)
    for kernel in registered:
        v = triton_tma.VARIANTS[kernel.variant]
        assert kernel is kernels.get_kernel("matmul", "triton-tma", v.name)
        assert kernel.dtypes == (v.dtype,) and kernel.devices == ("cuda",)
        assert kernel.min_capability == (9, 0)
        assert kernel.meta["accumulator"] == "f32" and kernel.meta["out"] == v.out
        assert kernel.meta["tile"] == (v.config.block_m, v.config.block_n, v.config.block_k)
        assert v.out in kernel.meta["tolerance"]
        assert not kernel.built  # nothing compiles at registration
    found = kernels.get_kernels("matmul", where=lambda k: k.meta.get("loads") == "TMA")
    assert set(registered) <= set(found)


def test_registering_twice_names_the_first_registration(registered):
    with pytest.raises(ValueError, match="already registered"):
        triton_tma.register()


@pytest.mark.skipif(env.HAS_CUDA, reason="what a machine without a GPU answers")
def test_without_a_gpu_supports_gives_a_reason(registered):
    a, b = triton_tma.operands("fp16", 64, 64, 32, device="cpu")
    for kernel in registered:
        args = (a.to(kernel.dtypes[0]), b.to(kernel.dtypes[0]))
        why = kernel.supports(*args)
        assert isinstance(why, str) and why, kernel.name
        with pytest.raises(kernels.KernelNotSupported, match=kernel.name.replace("[", r"\[")):
            kernel(*args)


# -- what it refuses, and why --------------------------------------------------------------------


def test_gpu_reasons_name_the_gpu():
    assert triton_tma.gpu_reason((9, 0)) is None
    assert "sm_89" in triton_tma.gpu_reason((8, 9)) and "sm_90" in triton_tma.gpu_reason((8, 9))
    assert "TMA" in triton_tma.gpu_reason((8, 0))
    assert "sm_120" in triton_tma.gpu_reason((12, 0))
    assert "Hopper" in triton_tma.gpu_reason(None)


@pytest.mark.parametrize("name", list(triton_tma.VARIANTS))
def test_problem_reasons(name):
    v = triton_tma.variant(name)
    a, b = triton_tma.operands(v, 32, 48, 2 * v.k_multiple, device="cpu")
    assert "column-major" in triton_tma.problem_reason(a, b.contiguous())
    assert "row-major" in triton_tma.problem_reason(a.t().contiguous().t(), b)
    k = v.k_multiple + v.k_multiple // 2
    a_odd, b_odd = triton_tma.operands(v, 32, 48, k, device="cpu")
    assert f"multiple of {v.k_multiple}" in triton_tma.problem_reason(a_odd, b_odd)
    # a row stride that is not a multiple of 16 bytes: a [32, K] window of a wider matrix
    wide = torch.zeros(32, 2 * v.k_multiple + 1).to(v.dtype)
    assert "16 bytes" in triton_tma.problem_reason(wide[:, :2 * v.k_multiple], b)
    # a base address 1 element past a 16-byte boundary
    flat = torch.zeros(32 * 2 * v.k_multiple + 1).to(v.dtype)
    shifted = flat[1:].view(32, 2 * v.k_multiple)
    assert "16-byte boundary" in triton_tma.problem_reason(shifted, b)
    assert "got a of float32" in triton_tma.problem_reason(a.float(), b.float())


def test_unsupported_dtypes_and_bad_arguments_raise_value_errors_naming_them():
    a = torch.randn(8, 16)
    with pytest.raises(ValueError, match="float32"):
        triton_tma.matmul(a, torch.randn(16, 8).t().contiguous().t())
    a, b = triton_tma.operands("fp16", 8, 8, 16, device="cpu")
    with pytest.raises(ValueError, match="b expected 16 rows"):
        triton_tma.matmul(a, b[:8])
    with pytest.raises(ValueError, match="variant expected one of"):
        triton_tma.variant("int8")
    with pytest.raises(ValueError, match="block_n expected a power of two"):
        triton_tma.Config(128, 96, 64)
    with pytest.raises(ValueError, match="num_warps expected a multiple of 4"):
        triton_tma.Config(128, 128, 64, num_warps=2)


@needs_interpreter
def test_interpreter_refuses_bf16_and_checks_out():
    a, b = triton_tma.operands("bf16", 16, 16, 16, device="cpu")
    with pytest.raises(ValueError, match="bf16 wrongly"):
        triton_tma.matmul(a, b)
    a, b = triton_tma.operands("fp16", 16, 24, 16, device="cpu")
    with pytest.raises(ValueError, match=r"out expected a \[16, 24\] float16"):
        triton_tma.matmul(a, b, out=torch.empty(16, 24, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="config expected a triton_tma.Config"):
        triton_tma.matmul(a, b, config=(128, 256, 64))


def test_fixed_configs_fit_in_hopper_shared_memory():
    for v in triton_tma.VARIANTS.values():
        need = v.config.shared_bytes(v.dtype.itemsize, v.out.itemsize)
        assert need <= triton_tma.SHARED_LIMIT, f"{v.name}: {need} bytes"


# -- the kernel itself, under Triton's interpreter -----------------------------------------------


@needs_interpreter
@pytest.mark.parametrize("name", ["fp16", "fp8_e4m3"])
@pytest.mark.parametrize("config", [SMALL, SMALL_FULL_STORE, None],
                         ids=["small-subtiled", "small", "h100"])
def test_interpreter_matches_float64_at_awkward_shapes(name, config):
    v = triton_tma.variant(name)
    s = v.k_multiple
    # 1x1; N*size not 16-byte aligned (masked pointer stores); many tiles per program and a
    # last group shorter than GROUP_M; exact tile multiples
    for m, n, k in ((1, 1, s), (33, 65, 2 * s), (150, 130, 3 * s), (64, 128, 2 * s)):
        _check(v, m, n, k, config)


@needs_interpreter
def test_empty_problems():
    a, b = triton_tma.operands("fp16", 5, 7, 0, device="cpu")
    assert torch.equal(triton_tma.matmul(a, b), torch.zeros(5, 7, dtype=torch.float16))
    a, b = triton_tma.operands("fp16", 0, 7, 16, device="cpu")
    assert triton_tma.matmul(a, b).shape == (0, 7)


# -- on a Hopper GPU -----------------------------------------------------------------------------


def _hopper():
    if reason := triton_tma.gpu_reason(torch.cuda.get_device_capability()):
        pytest.skip(reason)


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(triton_tma.VARIANTS))
def test_gpu_matches_float64_at_awkward_shapes(name):
    _hopper()
    v = triton_tma.variant(name)
    s = v.k_multiple
    shapes = ((1, 1, s), (33, 65, 4 * s), (128, 256, 8 * s), (257, 130, 12 * s),
              (4000, 4000, 4096), (8192, 24, 512), (24, 8192, 512), (1000, 1000, 1024))
    for m, n, k in shapes:
        for config in (None, triton_tma.Config(128, 128, 64, num_stages=4, num_warps=4,
                                               epilogue_subtile=v.name != "fp8_e4m3")):
            _check(v, m, n, k, config, device="cuda")


@pytest.mark.gpu
def test_gpu_registered_kernel_agrees_with_the_reference(registered):
    _hopper()
    a, b = triton_tma.operands("bf16", 257, 96, 64)
    kernels.verify(kernels.get_kernel("matmul", "triton-tma", "bf16"), a, b)
    a8, b8 = triton_tma.operands("fp8_e4m3", 257, 96, 64)
    one = torch.ones((), device="cuda")
    peer = torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16)
    torch.testing.assert_close(triton_tma.matmul(a8, b8), peer, atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
def test_gpu_refuses_misaligned_and_row_major(registered):
    _hopper()
    kernel = kernels.get_kernel("matmul", "triton-tma", "fp16")
    flat = torch.randn(64 * 32 + 1, device="cuda").half()
    a = flat[1:].view(64, 32)
    b = torch.randn(48, 32, device="cuda").half().t()
    assert "16-byte boundary" in kernel.supports(a, b)
    assert "column-major" in kernel.supports(a.clone(), b.contiguous())
    with pytest.raises(ValueError, match="16-byte boundary"):
        triton_tma.matmul(a, b)
