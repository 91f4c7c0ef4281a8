"""Every registered kernel's ``supports()`` is honest on edge problems.

For each op a grid of awkward but well-formed problems (one row, one key, one query, one of
each, empty, ragged sizes that are no multiple of any tile, non-contiguous views and views one
element off an aligned start), and for every registered kernel and dtype: where ``supports()``
says yes (None) the kernel must run and match the op's reference (``registry.verify``, the
matrix test's check); where it gives a reason, that is fine. A kernel that said yes and then
raised or answered wrong fails with the kernel, the problem and what happened. A problem the
op's ``validate`` rejects is malformed, not an edge, and is left out.

Kernels that only run on a GPU carry the ``gpu`` marker (skipped on a CPU, an error under
COURSE_STRICT=1 without one). On a CPU the shapes stay tiny: the Triton kernels run in the
interpreter. Kernels whose dtypes none of the op's reference dtypes are (the fp8 and int8
matmuls) are checked for the promise only, that a yes runs and gives the output's shape; their
values are their own modules' tests' (tests/test_mma.py, tests/test_hopper.py).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator

import pytest
import torch

import kernels
from course_utils import env, requirements
from kernels.registry import OPS, Kernel, all_kernels, reference, verify
from kernels.scaled_attention.quantize import quantize_qkv
from kernels.scaled_matmul import quantize_operands

DEVICE = env.DEFAULT_DEVICE
Edge = tuple[str, tuple]  # (label, arguments)


def _rand(shape, dtype: torch.dtype, device: str, scale: float = 1.0) -> torch.Tensor:
    if not dtype.is_floating_point:  # int8 matmuls (int4 takes int8 values in [-8, 7])
        return torch.randint(-8, 8, shape, dtype=dtype, device=device)
    return (scale * torch.randn(shape, device=device)).to(dtype)


def _one_element_on(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values in a contiguous view that starts one element past an aligned address
    (``buffer[1:]``): what a kernel that assumes 16-byte-aligned loads must refuse."""
    buffer = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    view = buffer[1:].view(t.shape)
    view.copy_(t)
    return view


def _every_other(t: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``t``'s values in a view that skips every other element along ``dim``."""
    shape = list(t.shape)
    shape[dim] *= 2
    wide = torch.empty(shape, dtype=t.dtype, device=t.device)
    view = wide[(slice(None),) * (dim % t.dim()) + (slice(None, None, 2),)]
    view.copy_(t)
    return view


# -- edge problems per op: (dtype, device) -> (label, args) ------------------------------------


def _elementwise_shapes() -> Iterator[tuple[str, tuple[int, ...]]]:
    yield "one element", (1,)
    yield "a 0-d tensor", ()
    yield "empty", (0,)
    yield "empty 2-D 3x0", (3, 0)
    yield "ragged 1031", (1031,)
    yield "ragged 2-D 7x37", (7, 37)


def _add_edges(dtype, device) -> Iterator[Edge]:
    for label, shape in _elementwise_shapes():
        yield label, (_rand(shape, dtype, device), _rand(shape, dtype, device))
    a, b = _rand((9, 37), dtype, device), _rand((9, 37), dtype, device)
    yield "non-contiguous a 9x37", (_every_other(a), b)
    yield "both non-contiguous 9x37", (_every_other(a), _every_other(b, 0))
    yield "transposed a 37x9", (a.t(), b.t().contiguous())
    yield "misaligned a[1:] 333", (_one_element_on(a.flatten()[:333]), b.flatten()[:333].clone())
    yield "misaligned b[1:] 333", (a.flatten()[:333].clone(), _one_element_on(b.flatten()[:333]))


def _gelu_edges(dtype, device) -> Iterator[Edge]:
    for label, shape in _elementwise_shapes():
        yield label, (_rand(shape, dtype, device),)
    x = _rand((9, 37), dtype, device)
    yield "non-contiguous 9x37", (_every_other(x),)
    yield "transposed 37x9", (x.t(),)
    yield "misaligned x[1:] 333", (_one_element_on(x.flatten()[:333]),)


def _rows_edges(dtype, device) -> Iterator[Edge]:
    """row_sum and softmax: a 2-D x, reduced along its rows."""
    for label, (rows, cols) in (("one row 1x37", (1, 37)), ("one column 37x1", (37, 1)),
                                ("one element 1x1", (1, 1)), ("empty rows 0x5", (0, 5)),
                                ("empty columns 5x0", (5, 0)), ("ragged 7x1031", (7, 1031))):
        yield label, (_rand((rows, cols), dtype, device),)
    x = _rand((9, 37), dtype, device)
    yield "non-contiguous 9x37", (_every_other(x),)
    yield "transposed 37x9", (x.t(),)
    yield "rows 40 apart 9x37", (_rand((9, 40), dtype, device)[:, :37],)
    yield "misaligned x[1:] 9x37", (_one_element_on(x),)


def _strided_copy_edges(dtype, device) -> Iterator[Edge]:
    yield "one element", (_rand((1,), dtype, device), 1)
    yield "empty, stride 3", (_rand((0,), dtype, device), 3)
    yield "stride = n = 7", (_rand((7,), dtype, device), 7)
    yield "ragged 3x337", (_rand((3 * 337,), dtype, device), 337)
    yield "non-contiguous x[::2]", (_every_other(_rand((60,), dtype, device)), 4)
    yield "misaligned x[1:]", (_one_element_on(_rand((60,), dtype, device)), 4)


def _matmul_edges(dtype, device) -> Iterator[Edge]:
    def pair(m, n, k, b_column_major=True):
        a = _rand((m, k), dtype, device, scale=1 / max(k, 1) ** 0.25)
        bt = _rand((n, k), dtype, device, scale=1 / max(k, 1) ** 0.25)
        # b column-major ([K, N] with b.t() contiguous): the layout the tensor-core kernels take
        return a, (bt.t() if b_column_major else bt.t().contiguous())

    for label, (m, n, k) in (("one of each 1x1x1", (1, 1, 1)), ("one row 1x48x32", (1, 48, 32)),
                             ("one column 48x1x32", (48, 1, 32)), ("empty M 0x16x32", (0, 16, 32)),
                             ("empty N 16x0x32", (16, 0, 32)), ("empty K 16x16x0", (16, 16, 0)),
                             ("ragged 37x29x48", (37, 29, 48)), ("ragged K 24x24x40", (24, 24, 40)),
                             ("K not a multiple of 8: 16x16x13", (16, 16, 13))):
        for column_major in (True, False):
            layout = "b column-major" if column_major else "b row-major"
            yield f"{label}, {layout}", pair(m, n, k, column_major)
    a, b = pair(32, 48, 64)
    yield "a column-major 32x48x64", (a.t().contiguous().t(), b)
    yield "non-contiguous a 32x48x64", (_every_other(a), b)
    yield "misaligned a[1:] 32x48x64", (_one_element_on(a), b)
    yield "misaligned b[1:] 32x48x64", (a, _one_element_on(b.t()).t())


# (label, (Sq, Sk)): the sequence lengths every attention op must take, causal and not
ATTENTION_LENGTHS = (("one key and one query", (1, 1)), ("one key, 9 queries", (9, 1)),
                     ("one query, 9 keys", (1, 9)), ("no keys", (5, 0)), ("no queries", (0, 5)),
                     ("ragged 17x33", (17, 33)), ("more queries than keys 33x17", (33, 17)))


def _attention_edges(dtype, device) -> Iterator[Edge]:
    def qkv(sq, sk, d=64, b=1, h=2, causal=False):
        q = _rand((b, h, sq, d), dtype, device)
        k, v = (_rand((b, h, sk, d), dtype, device) for _ in range(2))
        return q, k, v, causal

    for causal in (False, True):
        mask = ", causal" if causal else ""
        for label, (sq, sk) in ATTENTION_LENGTHS:
            yield f"{label}{mask}", qkv(sq, sk, causal=causal)
    yield "head dim 24", qkv(8, 8, d=24)
    q, k, v, _ = qkv(8, 8)
    yield "strided head dim", (_every_other(q), _every_other(k), _every_other(v), False)
    yield "(B, S, H, D) views", tuple(t.transpose(1, 2).contiguous().transpose(1, 2)
                                      for t in (q, k, v)) + (False,)
    yield "misaligned q[1:]", (_one_element_on(q), k, v, False)
    yield "misaligned k, v [1:]", (q, _one_element_on(k), _one_element_on(v), False)


def _scaled_matmul_edges(dtype, device) -> Iterator[Edge]:
    def problem(m, n, k, form):
        scale = 1 / max(k, 1) ** 0.25
        return quantize_operands(scale * torch.randn(m, k, device=device),
                                 scale * torch.randn(n, k, device=device), dtype, form)

    for form in ("tensor", "row", "block"):
        for label, (m, n, k) in (("one of each 1x1x16", (1, 1, 16)),
                                 ("one row 1x48x32", (1, 48, 32)),
                                 ("one column 48x1x32", (48, 1, 32)),
                                 ("empty M 0x16x32", (0, 16, 32)),
                                 ("empty N 16x0x32", (16, 0, 32)),
                                 ("ragged 37x29x48", (37, 29, 48)),
                                 ("ragged K 24x32x200", (24, 32, 200))):
            yield f"{label}, {form} scales", problem(m, n, k, form)
    a, b, scale_a, scale_b = problem(32, 48, 64, "tensor")
    yield "empty K 16x16x0, tensor scales", problem(16, 16, 0, "tensor")
    yield "misaligned a[1:] 32x48x64", (_one_element_on(a), b, scale_a, scale_b)
    yield "a column-major 32x48x64", (a.t().contiguous().t(), b, scale_a, scale_b)
    yield "b row-major 32x48x64", (a, b.contiguous(), scale_a, scale_b)


def _scaled_attention_edges(dtype, device) -> Iterator[Edge]:
    """attention's shapes, quantised (V keys-contiguous, as quantize_qkv stores it), and the
    layouts the fp8 kernel must refuse: V with its head dim contiguous, strided scales."""
    def qkv(sq, sk, d=64, causal=False):
        q, k, v = (torch.randn(1, 2, s, d, device=device) for s in (sq, sk, sk))
        return (*quantize_qkv(q, k, v), causal)

    for causal in (False, True):
        mask = ", causal" if causal else ""
        for label, (sq, sk) in ATTENTION_LENGTHS:
            yield f"{label}{mask}", qkv(sq, sk, causal=causal)
    yield "head dim 16", qkv(8, 8, d=16)
    q8, k8, v8, *scales, causal = qkv(8, 40)
    yield "(B, S, H, D) views of q8, k8", (q8.transpose(1, 2).contiguous().transpose(1, 2),
                                            k8.transpose(1, 2).contiguous().transpose(1, 2),
                                            v8, *scales, causal)
    yield "v8 head-dim-contiguous", (q8, k8, v8.contiguous(), *scales, causal)
    yield "misaligned q8[1:]", (_one_element_on(q8), k8, v8, *scales, causal)
    q_scale, k_scale, v_scale = scales
    strided = torch.empty(*k_scale.shape[:-1], 2, device=device)[..., ::2]
    yield "strided k_scale", (q8, k8, v8, q_scale, strided.copy_(k_scale), v_scale, causal)


def _rmsnorm_edges(dtype, device) -> Iterator[Edge]:
    """rmsnorm: the row problems of softmax, each with a weight of x's width."""
    for label, (x,) in _rows_edges(dtype, device):
        yield label, (x, _rand((x.shape[1],), dtype, device))
    x, w = _rand((9, 37), dtype, device), _rand((37,), dtype, device)
    yield "strided weight 9x37", (x, _every_other(w))
    yield "misaligned weight[1:] 9x37", (x, _one_element_on(w))
    yield "eps = 0, 9x37", (x, w, 0.0)


def _cross_entropy_edges(dtype, device) -> Iterator[Edge]:
    """cross_entropy: the row problems of softmax (but no empty ones: the mean over no rows is
    NaN), each with its targets, and the ignore_index rows."""
    def targets(rows: int, cols: int) -> torch.Tensor:
        return torch.randint(0, cols, (rows,), device=device)

    for label, (x,) in _rows_edges(dtype, device):
        if x.numel():
            yield label, (x, targets(*x.shape))
    x = _rand((9, 4097), dtype, device)  # (the Triton kernel's chunk is 4096 columns)
    yield "two chunks, one column in the second, 9x4097", (x, targets(9, 4097))
    some = targets(9, 4097)
    some[::2] = -100
    yield "every other row ignored 9x4097", (x, some)
    zero = torch.tensor([0, 1, 0, 2, 5], device=device)  # rows 0 and 2 ignored
    yield "ignore_index 0 (a class id), 5x37", (_rand((5, 37), dtype, device), zero, 0)


def _scan_edges(dtype, device) -> Iterator[Edge]:
    """scan: the sizes on each side of a warp (32) and of the Triton kernel's tile (4096), rows,
    and the layouts a kernel that indexes one row-major block must refuse."""
    for n in (1, 31, 32, 33, 4095, 4096, 4097):
        yield f"{n} elements", (_rand((n,), dtype, device),)
    yield "empty", (_rand((0,), dtype, device),)
    yield "a 0-d tensor", (_rand((), dtype, device),)
    yield "rows 3x4097", (_rand((3, 4097), dtype, device),)
    yield "empty rows 5x0", (_rand((5, 0), dtype, device),)
    x = _rand((9, 37), dtype, device)
    yield "non-contiguous 9x37", (_every_other(x),)
    yield "transposed 37x9", (x.t(),)
    yield "misaligned x[1:] 333", (_one_element_on(x.flatten()[:333]),)


def _histogram_edges(dtype, device) -> Iterator[Edge]:
    def values(n: int, low: int, high: int) -> torch.Tensor:
        return torch.randint(low, high, (n,), device=device, dtype=dtype)

    yield "one element", (values(1, 0, 5), 5)
    yield "empty", (values(0, 0, 5), 5)
    yield "ragged 1031, 7 bins", (values(1031, 0, 7), 7)
    yield "one bin", (values(300, 0, 1), 1)
    yield "every value out of range", (values(500, -50, 0), 10)
    yield "every value in one bin", (torch.full((5000,), 3, device=device, dtype=dtype), 4)
    yield "more bins than shared memory holds", (values(999, 0, 20000), 20000)
    yield "misaligned x[1:] 333", (_one_element_on(values(333, 0, 9)), 9)
    yield "non-contiguous x 333", (_every_other(values(333, 0, 9)), 9)


EDGES: dict[str, Callable[[torch.dtype, str], Iterator[Edge]]] = {
    "histogram": _histogram_edges,
    "add": _add_edges, "gelu": _gelu_edges, "row_sum": _rows_edges, "softmax": _rows_edges,
    "rmsnorm": _rmsnorm_edges, "cross_entropy": _cross_entropy_edges, "scan": _scan_edges,
    "strided_copy": _strided_copy_edges, "matmul": _matmul_edges,
    "attention": _attention_edges, "scaled_matmul": _scaled_matmul_edges,
    "scaled_attention": _scaled_attention_edges,
}


# -- the test ----------------------------------------------------------------------------------


def _gpu_only(kernel: Kernel) -> bool:
    return "cpu" not in kernel.devices or kernel.min_capability is not None


def _params():
    for kernel in all_kernels():
        marks = [pytest.mark.gpu] if _gpu_only(kernel) else []
        yield pytest.param(kernel, marks=marks, id=kernel.name)


def _dtypes(kernel: Kernel) -> tuple[list[torch.dtype], bool]:
    """The dtypes to try and whether values are compared: the op's reference dtypes the kernel
    takes, else (fp8, int8 matmuls) the kernel's own, for the promise only."""
    checked = [d for d in OPS[kernel.op].dtypes if d in kernel.dtypes]
    return (checked, True) if checked else (list(kernel.dtypes), False)


def _run_without_comparing(kernel: Kernel, args: tuple) -> None:
    got = kernel(*args)
    if got.is_cuda:
        torch.cuda.synchronize(got.device)
    if kernel.op == "matmul":  # (the one op with such kernels so far): [M, K] @ [K, N]
        want = (args[0].shape[0], args[1].shape[1])
        assert tuple(got.shape) == want, f"shape {tuple(got.shape)}, expected {want}"


def test_every_op_has_edge_problems():
    assert set(EDGES) == set(OPS), "define edge problems for every op (EDGES)"


@pytest.mark.parametrize("kernel", list(_params()))
def test_a_kernel_that_says_yes_runs_and_is_right(kernel):
    if kernel.needs and not requirements.requires(*kernel.needs, what=kernel.name):
        pytest.skip(f"{kernel.name}: {kernel.unavailable()}")  # (an optional extra)
    if reason := kernel.unavailable():  # a GPU too old for it: not a GPU-capable kernel here
        pytest.skip(f"{kernel.name}: {reason}")
    if DEVICE == "cpu" and "compile" in kernel.needs:
        pytest.skip(f"{kernel.name}: torch.compile compiles again for each edge shape, about "
                    "30 s on a CPU; the GPU run checks it")
    dtypes, compare = _dtypes(kernel)
    failures = []
    for dtype in dtypes:
        # a seed of its own per kernel and dtype, the same every run (hash() of a str is not:
        # it changes with each process's PYTHONHASHSEED, and a rare draw failed a tolerance)
        torch.manual_seed(zlib.crc32(f"{kernel.name} {dtype}".encode()))
        for label, args in EDGES[kernel.op](dtype, DEVICE):
            try:
                OPS[kernel.op].validate(*args)
            except ValueError:  # malformed for this op: not an edge problem
                continue
            if kernel.supports(*args) is not None:
                continue  # a reason: an honest no
            where = f"{label} ({str(dtype).removeprefix('torch.')})"
            try:
                if compare:
                    verify(kernel, *args, label=where)
                else:
                    _run_without_comparing(kernel, args)
            except Exception as err:  # it said yes, then raised or answered wrong
                failures.append(f"{kernel.name} said yes to {where}, then "
                                f"{type(err).__name__}: {str(err)[:400]}")
    if failures:  # every broken promise of this kernel, one line each
        pytest.fail("\n".join(failures))


def test_a_kernel_that_says_yes_and_fails_is_named_with_the_problem():
    def careless_gelu(x):  # says yes to everything (no check=), but...
        if x.numel() == 0:
            raise RuntimeError("a grid of 0 blocks")  # ... cannot launch nothing
        if not x.is_contiguous():
            return reference("gelu")(x.contiguous()).flip(0)  # ... and mixes up strided rows
        return reference("gelu")(x)

    careless = kernels.register("gelu", "edge_test", fn=careless_gelu)
    try:
        with pytest.raises(pytest.fail.Exception) as failed:
            test_a_kernel_that_says_yes_runs_and_is_right(careless)
    finally:
        kernels.unregister(careless)
    lines = str(failed.value).splitlines()
    assert "gelu/edge_test said yes to empty (float32), then RuntimeError: a grid of 0 blocks" \
        in lines
    assert any(line.startswith("gelu/edge_test said yes to transposed 37x9 (float32), then "
                               "AssertionError") for line in lines)
