"""Exercise mma_matmul.triton_dot of lesson 07: the tiles of the lesson in Triton, a ``tl.dot``
matmul. Checked first in Triton's interpreter on any machine (every lane's address against A, B and
C, every element of C stored: :mod:`exercises.triton_checks`), then for its values on transposed
and strided operands and an fp16 product that a 16-bit accumulator misses; on a GPU compiled,
with bf16, and timed against cuBLAS.
"""

from __future__ import annotations

import numpy as np
import torch

from course_utils import env
from exercises import (
    Mismatch,
    compare,
    exercise,
    expect,
    expect_triton_kernel,
    triton_checks,
    triton_launches,
)
from exercises.triton_checks import fenced, interpreted_memory

DOT_TILE = (32, 32, 32)
DOT_STUB = '''
import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32  # the tile: given


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    """C[tile] = A @ B for the BLOCK_M x BLOCK_N tile (tl.program_id(0), tl.program_id(1))."""
    ...


def matmul(a, b):
    """a @ b for 2-D fp16 or fp32 tensors of any strides; the result in a's dtype."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                        BLOCK_K=BLOCK_K)
    return c
'''


def _dot_operand(rows: int, cols: int, dtype: torch.dtype, layout: str, device: str,
                 scale: float) -> torch.Tensor:
    """A random (rows x cols) operand: "row-major", "transposed" (a column-major view) or
    "strided" (every other column of a wider tensor)."""
    if layout == "transposed":
        return (scale * torch.randn(cols, rows, device=device)).to(dtype).t()
    if layout == "strided":
        return (scale * torch.randn(rows, 2 * cols, device=device)).to(dtype)[:, ::2]
    return (scale * torch.randn(rows, cols, device=device)).to(dtype)


def _expect_dot(matmul, a, b, what: str, atol: float, rtol: float, hint: str) -> None:
    # a NaN block of C's size just freed: the answer's torch.empty tends to get it, so an
    # element of C never written shows as NaN, not as a lucky zero
    torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=a.dtype, device=a.device)
    compare(matmul(a, b), (a.double() @ b.double()).to(a.dtype), what=what, atol=atol,
            rtol=rtol, hint=hint)


# the small problems whose every access is checked: ragged M, N and K, transposed operands,
# and K = 0 last (a kernel that ran on the others must still write C = 0 there)
BOUNDS_CASES = ((5, 7, 3, False), (33, 17, 40, False), (33, 17, 40, True), (16, 16, 0, False))


def _bounds_label(m, n, k, transposed) -> str:
    return f"float32 {m}x{n}x{k}" + (" (A and B transposed)" if transposed else "")


def dot_child(source: str, small: bool) -> dict:
    """The GPU child of mma_matmul.triton_dot (:data:`exercises.kernel_checks.CHILDREN`), run under
    compute-sanitizer: the compiled answer (:func:`exercises.triton_child.imported`) on
    :data:`BOUNDS_CASES`, A, B and C each an allocation of its own exact size (the child sets
    PYTORCH_NO_CUDA_MEMORY_CACHING), so that memcheck names any access outside them."""
    import json

    from exercises import triton_child

    answer = triton_child.imported(source)
    for m, n, k, transposed in BOUNDS_CASES:
        print(json.dumps({"case": _bounds_label(m, n, k, transposed)}), flush=True)
        a = torch.randn(k, m, device="cuda").t() if transposed else torch.randn(m, k,
                                                                                  device="cuda")
        b = torch.randn(n, k, device="cuda").t() if transposed else torch.randn(k, n,
                                                                                  device="cuda")
        answer.matmul(a, b)
        torch.cuda.synchronize()
    return {"ok": True}


def _sanitized_bounds(matmul_kernel, matmul) -> list[str]:
    """Where this Triton cannot interpret a copy of the answer: the compiled kernel under
    compute-sanitizer's memcheck (:func:`dot_child`)."""
    from exercises import triton_child

    cases = ", ".join(f"{m}x{n}x{k}" + (" transposed" if t else "") for m, n, k, t in
                      BOUNDS_CASES)
    return triton_child.sanitized("mma_matmul.triton_dot", matmul, matmul_kernel, cases=cases)


def _dot_bounds(matmul) -> list[str]:
    """``matmul`` interpreted, on CPU operands between NaN guard zones: every lane's address
    inside A, B or C, every element of C written, none from an undefined lane; the cases, for
    the report."""
    interpreted = triton_checks.interpreted(matmul)
    ran = False
    for m, n, k, transposed in BOUNDS_CASES:
        a = fenced(m, k, transposed=transposed)
        b = fenced(k, n, transposed=transposed)
        what = _bounds_label(m, n, k, transposed)
        out = []
        with interpreted_memory() as seen, triton_launches() as launched:
            unchecked = triton_checks.expect_in_bounds(
                lambda a=a, b=b, out=out: out.append(interpreted(a, b)), f"your matmul on {what}")
        if unchecked:  # this Triton cannot interpret a copy: the values are checked below
            return [unchecked]
        c = out[0]
        ran = ran or bool(launched)
        if not isinstance(c, torch.Tensor) or c.shape != (m, n) or not c.numel() or not ran:
            continue  # the value checks (or the launch check) say what is wrong with it
        rows, cols = torch.meshgrid(torch.arange(m), torch.arange(n), indexing="ij")
        addresses = (c.data_ptr() + (rows * c.stride(0) + cols * c.stride(1))
                     * c.element_size()).numpy().astype(np.uint64)
        stored = seen["stored"]
        written = np.isin(addresses, np.concatenate(stored) if stored else np.zeros(0, np.uint64))
        if not written.all():
            where = tuple(int(i) for i in np.argwhere(~written)[0])
            raise Mismatch(f"{what}: C{list(where)} was never written ({int((~written).sum())} "
                           f"of {m * n} elements of C were not)", "the grid covers C "
                           "with cdiv(M, BLOCK_M) x cdiv(N, BLOCK_N) programs, each storing its "
                           "whole tile (masked at the edges), even when K = 0 (C = 0 then)")
        nan = c.isnan()
        if nan.any() and seen["undefined"]:  # (other NaNs: the value checks say more)
            where = tuple(int(i) for i in torch.nonzero(nan)[0])
            raise Mismatch(f"{what}: C{list(where)} is NaN ({int(nan.sum())} of {m * n}): a "
                           "masked load without other= gives its masked-off lanes undefined "
                           "values (here: NaN), and they reached the product", "load the K "
                           "slice past K with other=0.0 (and rows/columns past M/N too): 0 "
                           "adds nothing to tl.dot")
    return [f"{m}x{n}x{k}" + (" transposed" if t else "") for m, n, k, t in BOUNDS_CASES]


@exercise("mma_matmul.triton_dot", title="A tl.dot matmul in Triton", stub=DOT_STUB,
          answers=("matmul_kernel", "matmul"), section="Triton's `tl.dot`", intro="""
The tiles of this lesson in Triton: write the kernel of `matmul` for the given tile. Program
`(pid_m, pid_n)` owns a `BLOCK_M × BLOCK_N` tile of C: build its row and column offsets with
`tl.arange`, pointers to a `BLOCK_M × BLOCK_K` slice of A and a `BLOCK_K × BLOCK_N` slice of B
from the strides, and loop over K: load both slices with masks (`other=0.0` past M, N and K),
`acc = tl.dot(a, b, acc)` into an fp32 accumulator, advance the pointers by `BLOCK_K` along K.
Store `acc` converted to C's dtype, masked at the edges. The check first runs it in Triton's
interpreter (on any machine) with every lane's address checked against A, B and C, then (the
interpreter on a CPU, compiled on a GPU) against `a @ b` in float64 on tiny shapes: 1 × 1 × 1,
K not a multiple of 32, ragged M and N, transposed and strided A and B, K = 0, fp16 and fp32 (the
interpreter computes bf16 `tl.dot` wrongly), fp32 values past the fp16 range, and an fp16 product
at K = 2048 whose partial sums reach ~1000 before cancelling (an fp16 accumulator loses it). It
makes sure a Triton kernel ran and calls `tl.dot`. On a GPU it adds bf16 and larger shapes and
times it at 4096³ fp16 against cuBLAS and the course's autotuned `tl.dot` kernel.""")
def check_triton_dot(matmul_kernel, matmul, report) -> None:
    device = env.DEFAULT_DEVICE
    if lines := triton_checks.masked_loads_without_other(matmul_kernel):
        raise Mismatch(f"line {lines[0]} of matmul_kernel (from @triton.jit): a masked tl.load "
                       "without other=: "
                       "its masked-off lanes (past M, N or K) hold undefined values, and "
                       "tl.dot adds them into C (compiled Triton often gives 0 there, by luck; "
                       "the interpreter gives NaN)", "load with other=0.0: a 0 past K adds "
                       "nothing to the product")
    bounds = _dot_bounds(matmul)
    dtypes = [torch.float16, torch.float32] + ([] if env.TRITON_INTERPRET else [torch.bfloat16])
    # (m, n, k, A's layout, B's layout): the strides the kernel is given must be the ones it uses
    shapes = [(1, 1, 1, "row-major", "row-major"), (5, 7, 3, "row-major", "row-major"),
              (33, 17, 40, "transposed", "transposed"), (40, 64, 64, "strided", "row-major"),
              (16, 16, 0, "row-major", "row-major")]
    if not env.TRITON_INTERPRET:
        shapes += [(300, 200, 500, "row-major", "transposed"), (1000, 8, 24, "row-major",
                                                                   "row-major")]
    hint = ("mask rows >= M, columns >= N and the K slice past K (other=0.0); advance a's "
            "pointers by BLOCK_K * stride_ak and b's by BLOCK_K * stride_bk each step; every "
            "offset times its stride (A and B may be transposed or strided views)")
    for dtype in dtypes:
        tol = 1e-5 if dtype == torch.float32 and env.TRITON_INTERPRET else 3e-2
        for m, n, k, a_layout, b_layout in shapes:
            a = _dot_operand(m, k, dtype, a_layout, device, 1 / max(k, 1) ** 0.25)
            b = _dot_operand(k, n, dtype, b_layout, device, 1 / max(k, 1) ** 0.25)
            layouts = "" if a_layout == b_layout == "row-major" else \
                f" (A {a_layout}, B {b_layout})"
            _expect_dot(matmul, a, b, f"{str(dtype)[6:]} {m}x{n}x{k}{layouts}", tol, tol, hint)
    # fp32 values past the fp16 range (~1e5): a result passed through 16 bits becomes inf
    a, b = (_dot_operand(5, 3, torch.float32, "row-major", device, 300.0),
            _dot_operand(3, 7, torch.float32, "row-major", device, 300.0))
    tol = 1e-5 if env.TRITON_INTERPRET else 3e-2
    _expect_dot(matmul, a, b, "float32 5x7x3 with entries ~300 (products past fp16's 65504)",
                tol * 300.0 ** 2, tol, "accumulate in float32 and store acc.to(C's dtype): "
                "c_ptr.dtype.element_ty, not a 16-bit type")
    # fp32 accumulation: partial sums climb to ~1000, where fp16 spaces its values 0.5 apart,
    # then cancel to ~10. Measured (interpreter, 32x32x2048): an fp32 accumulator is off by
    # <= 0.016 (C's own fp16 rounding), an fp16 one by 0.6 (median) to 3 (max).
    k = 2048
    a = (0.5 + torch.rand(32, k, device=device)).half()
    b = 0.5 + torch.rand(k, 32, device=device)
    b[k // 2:] *= -1
    _expect_dot(matmul, a, b.half(), f"float16 32x32x{k}, partial sums ~1000 then cancelling",
                0.05, 2e-3, "accumulate in float32: acc = tl.zeros(..., dtype=tl.float32), "
                "acc = tl.dot(a, b, acc); a 16-bit sum of thousands of products drifts by "
                "whole units")
    a = torch.randn(33, 40, device=device).half()
    b = torch.randn(40, 17, device=device).half()
    expect_triton_kernel(matmul, (a, b), what="your matmul")
    expect(triton_checks.calls(matmul_kernel, "dot") != [], "the values are right, but "
           "matmul_kernel does not call tl.dot: the tile product runs on the CUDA cores, not "
           "the tensor cores",
           "acc = tl.dot(a, b, acc)")
    how = "Triton's interpreter" if env.TRITON_INTERPRET else "compiled Triton"
    report.line(f"matches float64 in {', '.join(str(d)[6:] for d in dtypes)} at "
                f"{', '.join(f'{m}x{n}x{k}' for m, n, k, *_ in shapes)}, A and B transposed "
                f"and strided, fp32 past the fp16 range, and an fp16 product at K = 2048 that "
                f"an fp16 accumulator misses ({how})")
    if bounds[0].startswith("not verified") and env.HAS_CUDA:
        for line in _sanitized_bounds(matmul_kernel, matmul):
            report.line(line)
    elif bounds[0].startswith("not verified"):
        report.line(bounds[0])
    else:
        report.line(f"every load and store stays inside A, B and C (each lane's address checked "
                    f"in Triton's interpreter on {', '.join(bounds)}; masked-off lanes read as "
                    "NaN)")
    if not env.HAS_CUDA:
        report.line("speed: measured only on a GPU (against cuBLAS and the course's autotuned "
                    "tl.dot kernel, kernels/matmul/triton_dot.py)")
        return
    from course_utils import timing
    from kernels.matmul import triton_dot

    n = 4096
    a, b = torch.randn(n, n, device="cuda").half(), torch.randn(n, n, device="cuda").half()
    flop = timing.matmul_flop(n, n, n)
    rates = {name: timing.tflops(flop, timing.benchmark(fn, a, b, name=name).median)
             for name, fn in (("yours", matmul), ("tuned", triton_dot.matmul),
                              ("cuBLAS", torch.mm))}
    report.line(f"4096³ fp16: {rates['yours']:.0f} TFLOP/s = {rates['yours'] / rates['cuBLAS']:.2f}"
                f"x cuBLAS ({rates['cuBLAS']:.0f}), {rates['yours'] / rates['tuned']:.2f}x the "
                f"autotuned tl.dot kernel ({rates['tuned']:.0f}), same run; a {DOT_TILE[0]}x"
                f"{DOT_TILE[1]}x{DOT_TILE[2]} tile reuses each loaded byte less than theirs")
