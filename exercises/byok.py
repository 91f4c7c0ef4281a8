"""Exercises of lesson 11: the registry as a public interface (a supports() that answers with
reasons, a kernel of your own registered and unregistered, a metadata filter). Lesson 08 before
the split of issue 24: these were 06.supports, 06.byok and 06.where."""

from __future__ import annotations

import re

import torch

from course_utils import env
from exercises import CannotCheck, Mismatch, compare, exercise, expect, expect_triton_kernel


def _on_gpu(*shapes_and_dtypes):
    """Tensors that say they live on a GPU, without one: torch's fake tensors carry shape,
    dtype, device and strides but no data, which is all a supports() may look at."""
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode
    except ImportError as err:  # a private module: say so rather than fail
        raise CannotCheck(f"no FakeTensorMode in this torch to stand in for GPU tensors: {err}"
                          ) from None
    with FakeTensorMode():
        return tuple(torch.empty(shape, dtype=dtype, device="cuda")
                     for shape, dtype in shapes_and_dtypes)


# --------------------------------------------------------------------------------------------
SUPPORTS_STUB = '''
def gemv_supports(a, x):
    """Can the course's FP64 GEMV kernel compute y = a @ x? None if it can, else the reason.

    a [M, K] and x [K] must be torch tensors that line up, else raise ValueError naming the
    operand (the caller's bug). Otherwise return a reason in plain words (never raise) when:
    a or x is not on a CUDA GPU; a or x is not float64; a is not contiguous (row-major);
    K is not a multiple of 4 (each thread loads 4 doubles, 32 bytes, at a time).
    Read only .dim(), .shape, .dtype, .device, .is_contiguous(): the check also passes
    stand-ins for GPU tensors that hold no data.
    """
    ...
'''

_D = torch.float64


def _supports_cases():
    """(label, args, what the answer must be): None, a reason about `word`, or ValueError."""
    gpu = lambda *spec: _on_gpu(*spec)  # noqa: E731
    cases = []
    a, x = gpu(((64, 32), _D), ((32,), _D))
    cases.append(("float64 on a GPU, 64x32 @ 32", (a, x), None))
    a, x = gpu(((1, 4), _D), ((4,), _D))
    cases.append(("float64 on a GPU, 1x4 @ 4", (a, x), None))
    cases.append(("a and x on the CPU", (torch.randn(8, 16, dtype=_D), torch.randn(16, dtype=_D)),
                  r"cuda|gpu"))
    a, _ = gpu(((8, 16), _D), ((16,), _D))
    cases.append(("a on a GPU, x on the CPU", (a, torch.randn(16, dtype=_D)), r"cuda|gpu"))
    a, x = gpu(((8, 16), torch.float32), ((16,), torch.float32))
    cases.append(("float32 on a GPU", (a, x), r"float64|double"))
    a, x = gpu(((8, 16), _D), ((16,), torch.float32))
    cases.append(("a float64, x float32", (a, x), r"float64|double"))
    at, x = gpu(((16, 8), _D), ((16,), _D))
    cases.append(("a transposed (a.t() of a 16x8)", (at.t(), x), r"contiguous|row-major"))
    a, x = gpu(((8, 18), _D), ((18,), _D))
    cases.append(("K = 18", (a, x), r"\b4\b|multiple"))
    a, x = gpu(((8, 16), _D), ((15,), _D))
    cases.append(("a 8x16, x of 15", (a, x), ValueError))
    a, x = gpu(((8, 16, 2), _D), ((16,), _D))
    cases.append(("a 3-D", (a, x), ValueError))
    a, x = gpu(((8, 16), _D), ((16, 1), _D))
    cases.append(("x 2-D [16, 1]", (a, x), ValueError))
    return cases


@exercise("byok.supports", title="supports(): a reason, never an exception", stub=SUPPORTS_STUB,
          answers=("gemv_supports",), section="a reason, never an exception", intro="""
The registry's two tiers of validation, for a kernel of your own: a *malformed* problem (shapes
that do not line up) is the caller's bug and raises `ValueError` naming the operand, "expected
X, got Y"; a well-formed problem this kernel cannot run *here* is not a bug, and `supports()`
returns the reason in plain words (`get_kernels` then skips the kernel, `explain` shows why).
Write `gemv_supports` for an FP64 GEMV `y = a @ x` whose rules are in the docstring. The check
calls it on CPU tensors and on stand-ins for GPU tensors (no GPU needed): each reason must be a
string that names the problem (CUDA, float64, contiguous, the multiple of 4).""")
def check_supports(gemv_supports, report) -> None:
    for label, args, want in _supports_cases():
        try:
            got = gemv_supports(*args)
        except ValueError as err:
            expect(want is ValueError,
                   f"{label}: raised ValueError({err}); this problem is well-formed"
                   + (", and the kernel can run it" if want is None else
                      ", so return the reason as a string"),
                   "raise only when the shapes do not line up; a device, dtype or layout the "
                   "kernel cannot take is a reason to return")
            expect(re.search(r"\ba\b|\bx\b", str(err)) is not None,
                   f"{label}: ValueError({str(err)!r}) does not name the operand",
                   "say which argument is wrong: 'x expected shape [16], got [15]'")
            continue
        expect(want is not ValueError,
               f"{label}: returned {got!r}; a malformed problem (shapes that do not line up) "
               "should raise ValueError naming the operand",
               "a.dim() == 2, x.dim() == 1 and x.shape[0] == a.shape[1], else raise")
        if want is None:
            expect(got is None, f"{label}: returned {got!r}; the kernel can run this problem, "
                   "so supports() should return None", "return None when every rule holds")
            continue
        expect(isinstance(got, str) and got.strip() != "",
               f"{label}: returned {got!r}; expected a reason (a non-empty string)",
               "each rule that fails returns a sentence saying what and why")
        expect(re.search(want, got, re.I) is not None,
               f"{label}: the reason {got!r} does not say what is wrong (expected it to mention "
               f"{want.replace(chr(92) + 'b', '').replace('|', ' or ')})",
               "check the rules in the docstring's order: device, dtype, layout, K")
    report.line("reasons for the device, the dtype, the layout and K; ValueError naming the "
                "operand for shapes that do not line up")


# --------------------------------------------------------------------------------------------
BYOK_STUB = '''
import torch
import triton
import triton.language as tl

import kernels
from kernels.gelu.triton_gelu import triton_device_check  # the interpreter wants CPU tensors

BLOCK_N, BLOCK_K = 16, 16


@triton.jit
def row_gemm_kernel(a_ptr, b_ptr, out_ptr, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """out[m, cols] = a[m, :] @ b[:, cols]: row m = program_id(0), BLOCK_N columns from
    program_id(1) * BLOCK_N; a [M, K], b [K, N], out [M, N] contiguous float64."""
    ...


def row_gemm(a, b):
    """a @ b (float64): launch row_gemm_kernel on a (M, cdiv(N, BLOCK_N)) grid."""
    raise NotImplementedError


def register_mine():
    """Register row_gemm as ("matmul", "mine", "fp64 rows"); return the registered Kernel."""
    ...


def find_mine(a, b):
    """kernels.get_kernels("matmul", a, b, where=...) keeping only your kernel(s)."""
    ...


def unregister_mine():
    """Remove what register_mine() registered."""
    ...
'''

KEY = ("matmul", "mine", "fp64 rows")


@exercise("byok.byok", title="Bring your own kernel: register, find, unregister", stub=BYOK_STUB,
          answers=("register_mine", "find_mine", "unregister_mine"),
          section="Registering, and discovery", intro="""
Write a small FP64 matmul in Triton, one program per row of `out` and `BLOCK_N` columns (a
loop over K in steps of `BLOCK_K`: load a piece of the row of `a` and a `BLOCK_K x BLOCK_N`
piece of `b`, masked at the edges, and accumulate `tl.sum(a[:, None] * b, axis=0)`). Then give it
the interface: `register_mine()` registers it as `("matmul", "mine", "fp64 rows")` with
`kernels.register(...)`: `fn=`, `dtypes=(torch.float64,)`, `contiguous=True`,
`needs=("triton",)`, `check=triton_device_check` (compiled Triton reads GPU memory, the
interpreter CPU memory) and `meta={"family": "mine", "accumulator": "float64", "tile": (1,
BLOCK_N)}`; `find_mine(a, b)` finds it by metadata; `unregister_mine()` removes it. The check
registers it, runs it on awkward shapes against `a @ b` (under the Triton interpreter without a
GPU, so the shapes are tiny), finds it, unregisters it, and verifies the registry is exactly as
before.""")
def check_byok(register_mine, find_mine, unregister_mine, report) -> None:
    import kernels

    before = [k.key for k in kernels.all_kernels()]
    expect(KEY not in before, f"{KEY} is already registered (an earlier run left it there)",
           "run unregister_mine() once, or kernels.unregister('matmul', 'mine', 'fp64 rows')")
    try:
        _check_registered(register_mine(), find_mine, report)
        unregister_mine()
        after = [k.key for k in kernels.all_kernels()]
        added = [k for k in after if k not in before]
        removed = [k for k in before if k not in after]
        expect(after == before,
               f"after unregister_mine() the registry differs from before: still there "
               f"{added or 'nothing'}; gone {removed or 'nothing'}",
               "kernels.unregister(kernel) removes exactly the kernel register() returned")
    finally:  # a failed check must not leave the student's kernel behind
        kernels.unregister(*KEY, missing_ok=True)
    report.line("the registry is exactly as before")


def _names(found) -> str:
    return str([getattr(k, "name", k) for k in found]) if isinstance(found, list) else repr(found)


def _check_registered(mine, find_mine, report) -> None:
    import kernels

    expect(isinstance(mine, kernels.Kernel),
           f"register_mine() returned {type(mine).__name__}; expected the registered Kernel",
           "return kernels.register('matmul', 'mine', 'fp64 rows', fn=row_gemm, ...)")
    expect(mine.key == KEY, f"registered as {mine.key}; expected {KEY}")
    expect(any(k is mine for k in kernels.all_kernels("matmul")),
           "register_mine() returned a Kernel but did not register it",
           "kernels.register(...) or kernels.register_kernel(kernel)")
    expect(tuple(mine.dtypes) == (torch.float64,), f"dtypes {mine.dtypes}; expected float64 only")
    for key, want in (("family", "mine"), ("accumulator", "float64")):
        expect(mine.meta.get(key) == want, f"meta[{key!r}] is {mine.meta.get(key)!r}; expected "
               f"{want!r} (the filters of this notebook read it)", "meta={'family': 'mine', ...}")
    device = env.DEFAULT_DEVICE
    other = "cuda" if device == "cpu" else "cpu"
    if other == "cuda":
        far = _on_gpu(((4, 8), torch.float64), ((8, 4), torch.float64))
    else:
        far = (torch.randn(4, 8, dtype=torch.float64), torch.randn(8, 4, dtype=torch.float64))
    reason = mine.supports(*far)
    expect(reason is not None, f"supports() accepts float64 tensors on {other}, which "
           f"{'the Triton interpreter' if device == 'cpu' else 'compiled Triton'} cannot read",
           "check=triton_device_check")
    for m, n, k in [(1, 1, 1), (5, 7, 3), (17, 33, 20), (3, 16, 0)]:
        a = torch.randn(m, k, dtype=torch.float64, device=device)
        b = torch.randn(k, n, dtype=torch.float64, device=device)
        expect(mine.supports(a, b) is None,
               f"supports() refuses a {m}x{n}x{k} float64 problem on {device}: "
               f"{mine.supports(a, b)}", "the generic checks use dtypes, devices and needs")
        compare(mine(a, b), a @ b, what=f"your kernel on {m}x{n}x{k}", atol=1e-10, rtol=1e-10,
                hint="mask the loads at the N and K edges (other=0.0) and the store at N; "
                     "advance both pointers by BLOCK_K each step")
    a, b = (torch.randn(5, 3, dtype=torch.float64, device=device),
            torch.randn(3, 7, dtype=torch.float64, device=device))
    expect_triton_kernel(mine, (a, b), what="your registered kernel")
    how = "the Triton interpreter" if env.TRITON_INTERPRET else "compiled Triton"
    report.line(f"registered as {mine.name}; matches a @ b at 1x1x1, 5x7x3, 17x33x20 and K = 0 "
                f"({how}, {device} tensors)")
    a = torch.randn(6, 8, dtype=torch.float64, device=device)
    b = torch.randn(8, 5, dtype=torch.float64, device=device)
    found = find_mine(a, b)
    expect(isinstance(found, list) and len(found) == 1 and found[0] is mine,
           f"find_mine(a, b) returned {_names(found)}; expected [{mine.name}]",
           "kernels.get_kernels('matmul', a, b, where=lambda k: k.meta.get('family') == 'mine')")
    found = find_mine(a.float(), b.float())
    expect(found == [], f"find_mine on float32 operands returned {_names(found)}; "
           "expected [] (your kernel takes float64 only)", "pass a and b to get_kernels: it "
           "keeps only the kernels whose supports() accepts them")
    report.line("find_mine finds it for a float64 problem, and not for a float32 one")


# --------------------------------------------------------------------------------------------
WHERE_STUB = '''
def wide_thread_per_output(k):
    """True exactly for the registered FP64 GEMMs (meta "family" == "fp64_gemm") that launch
    one thread per output element (every provider but Triton) with a tile of out at least 32
    columns wide (meta "tile" is (rows, columns[, ...]))."""
    ...
'''


def _described(k) -> bool:
    return (k.meta.get("family") == "fp64_gemm" and k.provider != "triton"
            and k.meta["tile"][1] >= 32)


@exercise("byok.where", title="A metadata filter that selects exactly", stub=WHERE_STUB,
          answers=("wide_thread_per_output",), section="Registering, and discovery",
          intro="""
`get_kernels("matmul", where=...)` hands every registered matmul to your predicate: the eager
reference, the steps of lesson 07, every `mma.sync` variant and the FP64 GEMMs, and their
`meta` dicts do not all have the same keys. Write the predicate its docstring describes. The
check runs `kernels.get_kernels("matmul", where=wide_thread_per_output)` and compares what it
selects with the described set: what is missing, what is extra. No GPU needed.""")
def check_where(predicate, report) -> None:
    import kernels

    expect(callable(predicate), f"wide_thread_per_output is a {type(predicate).__name__}; "
           "expected a function of one kernel")
    try:
        got = kernels.get_kernels("matmul", where=predicate)
    except ValueError as err:
        raise Mismatch(f"get_kernels raised: {err}",
                       "k.meta.get('family') is None for kernels without it; test the family "
                       "first, then read the tile") from None
    want = [k for k in kernels.all_kernels("matmul") if _described(k)]
    missing = [k.label for k in want if k not in got]
    extra = [f"{k.label} (provider {k.provider}, tile {k.meta.get('tile', 'none')})"
             for k in got if k not in want]
    if missing or extra:
        raise Mismatch(f"selected {len(got)} kernels, the described set has {len(want)}"
                       + (f"\nmissing: {', '.join(missing)}" if missing else "")
                       + (f"\nextra: {', '.join(extra)}" if extra else ""),
                       "three conditions: the family, the provider (not 'triton'), "
                       "k.meta['tile'][1] >= 32")
    report.line(f"selects exactly the {len(want)} described kernels: "
                + ", ".join(k.label for k in want))
