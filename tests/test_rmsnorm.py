"""RMSNorm beyond the matrix test: the Triton forward and backward against float64 autograd of
the eager version, gradcheck, the saved rstd, empty and one-column problems, bad input.

On a CPU the Triton kernels run in the interpreter, which computes float64 in float64 (NumPy
underneath), so gradcheck runs the kernels themselves in double precision, as on a GPU.
"""

import zlib

import pytest
import torch

import kernels
from course_utils import env
from kernels.registry import OPS
from kernels.rmsnorm import EPS, FLOAT_DTYPES, rmsnorm_eager
from kernels.rmsnorm import triton_rmsnorm as T

DEVICE = env.DEFAULT_DEVICE
CASES = {case.label: case for case in OPS["rmsnorm"].cases}
# the largest error allowed, relative to the size of what was summed (see _assert_small)
# (float32 arithmetic, then one rounding to the dtype: half a unit in the last place is at most
# 2^-11 of a float16 value, 2^-8 of a bfloat16 one)
BOUND = {torch.float32: 2e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}


def _exact(x, w, dy, eps=EPS):
    """y, dx, dweight of the eager version in float64, from the same (rounded) inputs."""
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    y = rmsnorm_eager(x64, w64, eps)
    dx, dw = torch.autograd.grad(y, (x64, w64), dy.double())
    return y.detach(), dx, dw


def _triton(x, w, dy, eps=EPS):
    x, w = (t.detach().clone().requires_grad_() for t in (x, w))
    y = kernels.get_kernel("rmsnorm", "triton")(x, w, eps)
    dx, dw = torch.autograd.grad(y, (x, w), dy)
    return y.detach(), dx, dw


def _largest(t: torch.Tensor) -> float:
    return t.abs().max().item() if t.numel() else 0.0


def _assert_small(what, got, exact, scale, dtype):
    """|got - exact| ≤ BOUND · scale, where scale is the size of the terms that were added:
    dx is rstd·(dy·w - x̂·mean(dy·w·x̂)), two terms that cancel almost exactly when a row has one
    column (x̂² = x²/(x²+eps) ≈ 1); an error is small or large next to those terms, not next to
    their tiny difference."""
    assert got.shape == exact.shape and got.dtype == dtype, (what, got.shape, got.dtype)
    if got.numel():
        err = (got.double() - exact).abs().max().item()
        assert err <= BOUND[dtype] * scale, f"{what}: error {err:.3g}, scale {scale:.3g}"


def _case_params():
    for label in CASES:
        for dtype in FLOAT_DTYPES:
            # the interpreter runs 256 programs one after the other (~1.5 s a dtype): the other
            # cases check the half types' rounding, this one float32 only there
            if env.TRITON_INTERPRET and label == "256x1024" and dtype != torch.float32:
                continue
            yield pytest.param(label, dtype, id=f"{label}-{str(dtype)[6:]}")


@pytest.mark.parametrize(("label", "dtype"), list(_case_params()))
def test_forward_and_backward_match_float64_autograd(label, dtype):
    torch.manual_seed(zlib.crc32(label.encode()))  # (hash() changes from run to run)
    x, w = CASES[label].make(dtype, DEVICE)
    dy = torch.randn(x.shape, device=DEVICE).to(dtype)
    y, dx, dw = _triton(x, w, dy)
    y64, dx64, dw64 = _exact(x, w, dy)
    x64, rstd = x.double(), (x.double().pow(2).mean(-1, keepdim=True) + EPS).rsqrt()
    x_hat, g = x64 * rstd, dy.double() * w.double()
    _assert_small("y", y, y64, _largest(y64), dtype)
    _assert_small("dx", dx, dx64, max(_largest(rstd * g),
                                      _largest(rstd * x_hat * (g * x_hat).mean(-1, keepdim=True))),
                  dtype)
    _assert_small("dweight", dw, dw64, _largest((dy.double() * x_hat).abs().sum(0)), dtype)


@pytest.mark.parametrize("shape", [(3, 5), (2, 1), (4, 3)])
def test_gradcheck_of_the_triton_kernels_in_float64(shape):
    # tiny: gradcheck calls the forward twice per input element (finite differences) and the
    # backward once per output element, each call a launch of the kernel
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float64, device=DEVICE)
    if shape == (4, 3):  # a transposed view: the kernels read strides
        x = torch.randn(shape[::-1], dtype=torch.float64, device=DEVICE).t()
    w = torch.randn(shape[1], dtype=torch.float64, device=DEVICE)
    x.requires_grad_()
    w.requires_grad_()
    # eps 0.1 keeps the one-column case well conditioned for finite differences
    assert torch.autograd.gradcheck(lambda a, b: T.RMSNormFunction.apply(a, b, 0.1), (x, w))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=lambda d: str(d)[6:])
def test_the_saved_rstd_is_one_over_the_rms(dtype):
    x = (3 * torch.randn(11, 300, device=DEVICE)).to(dtype).requires_grad_()
    w = torch.randn(300, device=DEVICE).to(dtype)
    want = 1 / torch.sqrt(x.detach().double().pow(2).mean(-1) + EPS)
    _, rstd = T.forward(x.detach(), w, EPS)
    assert rstd.dtype == torch.float32 and rstd.shape == (11,)
    torch.testing.assert_close(rstd.double(), want, atol=0, rtol=1e-6)
    y = kernels.get_kernel("rmsnorm", "triton")(x, w, EPS)  # autograd: x, weight, rstd saved
    saved_x, saved_w, saved_rstd = y.grad_fn.saved_tensors
    assert saved_x is not None and saved_w.shape == w.shape
    torch.testing.assert_close(saved_rstd, rstd, atol=0, rtol=0)


def test_inference_builds_no_graph_and_training_uses_the_autograd_function():
    x, w = torch.randn(3, 8, device=DEVICE), torch.randn(8, device=DEVICE)
    triton = kernels.get_kernel("rmsnorm", "triton")
    assert triton(x, w).grad_fn is None
    assert "RMSNormFunction" in type(triton(x, w.requires_grad_()).grad_fn).__name__
    with torch.no_grad():
        assert triton(x, w).grad_fn is None


def test_zero_rows_and_one_column_work():
    x, w = torch.randn(0, 64, device=DEVICE), torch.randn(64, device=DEVICE)
    y, dx, dw = _triton(x, w, torch.randn(0, 64, device=DEVICE))
    assert y.shape == dx.shape == (0, 64) and torch.equal(dw, torch.zeros_like(w))
    x = torch.tensor([[-2.0], [-0.5], [0.25], [1.0], [3.0]], device=DEVICE)
    w = torch.tensor([1.5], device=DEVICE)
    y, dx, dw = _triton(x, w, torch.ones(5, 1, device=DEVICE))
    # one column: y = x / sqrt(x² + eps) · w, close to sign(x) · w; dweight = Σ y / w
    y64 = x.double() / (x.double().pow(2) + EPS).sqrt() * w.double()
    torch.testing.assert_close(y.double(), y64, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(dw.double(), (y64 / w.double()).sum(0), atol=1e-6, rtol=1e-6)
    # x̂ is ±1 (nearly) whatever x is: dx = rstd·w·eps/(x² + eps), almost nothing
    assert dx.shape == (5, 1) and dx.abs().max() < 1e-4


def test_dweight_is_reproducible_and_summed_over_every_group():
    torch.manual_seed(1)
    rows = 4 * T.backward_programs(1 << 20, torch.device(DEVICE)) + 3  # a short last group
    x, w = torch.randn(rows, 33, device=DEVICE), torch.randn(33, device=DEVICE)
    dy = torch.randn(rows, 33, device=DEVICE)
    _, rstd = T.forward(x, w)
    first, second = T.backward(dy, x, w, rstd), T.backward(dy, x, w, rstd)
    assert torch.equal(first[1], second[1])  # no atomics: the same bits every time
    _, _, dw64 = _exact(x, w, dy)
    torch.testing.assert_close(first[1].double(), dw64, atol=1e-5, rtol=1e-5)


def test_loading_ahead_changes_no_bit():
    # the same additions in the same order, only the loads moved one row earlier: on transposed
    # x and dy (column strides), with a group of one row and a short last group
    torch.manual_seed(2)
    programs = T.backward_programs(1 << 20, torch.device(DEVICE))
    for rows in (1, 2 * programs + 3):
        x = torch.randn(40, rows, device=DEVICE).t()
        dy = torch.randn(40, rows, device=DEVICE).t()
        w = torch.randn(40, device=DEVICE)
        _, rstd = T.forward(x, w)
        ahead, plain = T.backward(dy, x, w, rstd), T.backward(dy, x, w, rstd, prefetch=False)
        assert torch.equal(ahead[0], plain[0]) and torch.equal(ahead[1], plain[1])
        _, dx64, dw64 = _exact(x, w, dy)
        torch.testing.assert_close(ahead[0].double(), dx64, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(ahead[1].double(), dw64, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("args", "match"), [
    (([[1.0]], torch.ones(1)), "rmsnorm: x expected a torch.Tensor, got list"),
    ((torch.ones(4), torch.ones(4)), r"rmsnorm: x expected a 2-D tensor, got shape \(4,\)"),
    ((torch.ones(2, 4), torch.ones(1, 4)), r"rmsnorm: weight expected a 1-D tensor"),
    ((torch.ones(2, 4), torch.ones(3)),
     r"weight expected length 4 \(x's last dim\), got length 3"),
    ((torch.ones(2, 4), torch.ones(4, dtype=torch.float16)),
     "weight expected x's dtype float32, got float16"),
    ((torch.ones(2, 4, dtype=torch.int32), torch.ones(4, dtype=torch.int32)),
     "x expected a floating-point tensor, got int32"),
    ((torch.ones(2, 4), torch.ones(4), -1.0), "eps expected a finite number >= 0, got -1.0"),
])
def test_bad_input_raises_naming_the_argument(args, match):
    for provider in ("triton", "eager"):
        with pytest.raises(ValueError, match=match):
            kernels.get_kernel("rmsnorm", provider)(*args)


def test_a_row_too_long_for_registers_is_a_reason():
    x = torch.empty(1, T.MAX_COLUMNS + 1, device=DEVICE)
    reason = kernels.get_kernel("rmsnorm", "triton").supports(x, torch.empty(x.shape[1],
                                                                             device=DEVICE))
    assert reason is not None and "columns" in reason


@pytest.mark.gpu
def test_the_fused_forward_launches_one_kernel():
    from course_utils.profiling import count_kernels

    x = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    counts = count_kernels(kernels.get_kernel("rmsnorm", "triton"), x, w)
    assert sum(counts.values()) == 1, counts


def test_the_bench_times_each_pass_as_a_caller_runs_it():
    """(any machine) The bench's three passes of a provider: the forward without a graph, the
    backward alone through autograd (a fresh forward and graph made untimed before each call)
    and both; each gives what autograd of the eager version gives, and each row has its bytes
    ÷ time."""
    from kernels.rmsnorm import bench

    x = torch.randn(16, 64, device=DEVICE).requires_grad_()
    w = (1 + 0.1 * torch.randn(64, device=DEVICE)).requires_grad_()
    dy = torch.randn(16, 64, device=DEVICE)
    y, dx, dw = _exact(x, w, dy)
    fn = kernels.get_kernel("rmsnorm", "triton")
    call, setup = bench._forward(fn, x, w, dy)
    forward = call()
    assert setup is None and forward.grad_fn is None  # no graph: nothing saved
    torch.testing.assert_close(forward.double(), y, atol=1e-5, rtol=1e-5)
    backward, make_graph = bench._backward(fn, x, w, dy)
    both, none = bench._forward_backward(fn, x, w, dy)
    assert none is None
    for grads in (backward(*make_graph()), backward(*make_graph()), both()):
        torch.testing.assert_close(grads[0].double(), dx, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(grads[1].double(), dw, atol=1e-5, rtol=1e-5)
    copy, rows = bench.measure(64, torch.float32, rows=16, device=DEVICE,
                               names=["triton", bench.PEER], min_time_s=0.01)
    assert [(r["kernel"], r["pass"]) for r in rows] == [
        (k, p) for k in ("triton", bench.PEER) for p in bench.DIRECTIONS]
    assert copy > 0 and all(r["GB/s"] > 0 and r["of copy"] > 0 for r in rows)


def test_the_deep_passes_differentiate_the_whole_stack():
    """(any machine) The ``-deep`` passes run ``DEPTH`` layers in a row, each with its own
    weight: their gradients are those of the stack (float64 eager autograd), so the time the
    bench divides by ``DEPTH`` is every layer's forward and backward, none skipped."""
    from kernels.rmsnorm import bench

    x = torch.randn(8, 48, device=DEVICE, dtype=torch.float64).requires_grad_()
    w = (1 + 0.1 * torch.randn(48, device=DEVICE, dtype=torch.float64)).requires_grad_()
    dy = torch.randn(8, 48, device=DEVICE, dtype=torch.float64)
    fn = kernels.get_kernel("rmsnorm", "triton")
    eager = kernels.get_kernel("rmsnorm", "eager")
    weights = [w.detach().clone().requires_grad_() for _ in range(bench.DEPTH)]
    exact = torch.autograd.grad(bench._layers(eager, x, weights), (x, *weights), dy)
    backward, make_graph = bench._deep_backward(fn, x, w, dy)
    both, none = bench._deep_forward_backward(fn, x, w, dy)
    assert none is None
    for grads in (backward(*make_graph()), both()):
        assert len(grads) == 1 + bench.DEPTH  # dx and one dweight per layer
        for got, want in zip(grads, exact, strict=True):
            torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)


@pytest.mark.skipif(not env.TRITON_INTERPRET, reason="the interpreter's bf16 arithmetic")
def test_the_check_s_interpreter_adds_bf16_as_a_gpu_does():
    """The interpreter adds bf16 values as 16-bit integers; exercises.rmsnorm._bf16_arithmetic
    rounds each result to bf16 instead, so that a sum kept in bf16 stalls as on a GPU."""
    import triton
    import triton.language as tl

    from exercises.rmsnorm import _bf16_arithmetic

    @triton.jit
    def running_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK,), dtype=x_ptr.dtype.element_ty)
        for i in range(0, n):
            acc += tl.load(x_ptr + i * BLOCK + cols)
        tl.store(out_ptr + cols, acc.to(tl.float32))

    x, out = torch.full((600, 2), 0.7).bfloat16(), torch.empty(2)
    want = torch.zeros(2, dtype=torch.bfloat16)
    for row in x:
        want += row  # PyTorch's bf16 addition rounds each sum to bf16
    with _bf16_arithmetic():
        running_sum[(1,)](x, out, 600, BLOCK=2)
    assert torch.equal(out, want.float()) and out[0] == 256.0  # stalled: 420 in float32


def test_rmsnorm_backward_wants_dweight_summed_in_float32():
    """A bf16 running sum of dweight (the blind answer of exercises/solutions/blind: dw in the
    input's dtype) stalls over the check's long bf16 problem; the float32 solution passes."""
    import exercises
    from exercises import rmsnorm, solutions

    if not env.TRITON_INTERPRET and not env.HAS_CUDA:
        pytest.skip("Triton needs a GPU or its interpreter")
    id = "rmsnorm.backward"
    wrong = solutions.blind_answers()[id]["dweight accumulated in the input dtype (bf16 sums "
                                          "over the rows)"]
    said = {}
    for name, source in (("solution", solutions.answers()[id][0]), ("bf16", wrong)):
        names = exercises.load_cell(source, "rmsnorm_backward")
        said[name] = exercises.run_check(id, names["rmsnorm_bwd_kernel"], names["rmsnorm_backward"])
    assert said["solution"].status == "passed", str(said["solution"])
    assert said["bf16"].status == "not yet", str(said["bf16"])
    assert "every dy · x_hat > 0" in str(said["bf16"]) and rmsnorm.LONG_HINT in str(said["bf16"])
