"""Exercises of lesson 05: CUDA kernels (a vectorised SiLU, an out-of-bounds bug, index width);
the coalesced transpose and the warp-shuffle row sum are in :mod:`exercises.cuda_gelu_kernels`.

The student's CUDA runs in a child process on a GPU: a misaligned 16-byte load or an
out-of-bounds access poisons the CUDA context of the process that launched it, and the notebook
must survive a wrong answer. :func:`silu_child` and :func:`scale_child` are those children (run
by :func:`exercises.kernel_checks.run_child`); :func:`silu_profile` is what Nsight Compute
profiles (:mod:`exercises.access_checks`).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import torch

from course_utils import env
from exercises import (
    Mismatch,
    access_checks,
    bandwidth_verdict,
    compare,
    exercise,
    expect,
    kernel_checks,
    sentinels,
)

SCALE_CU = kernel_checks.CUDA_DIR / "scale_buggy.cu"
BLOCK = 256
# line numbers in compute-sanitizer's report (a file's own, thanks to nvrtc's #line directive)
SCALE_OPTIONS = {"options": ["-lineinfo"], "verbose": False}


# --------------------------------------------------------------------------------------------
SILU_STUB = '''
SILU_SOURCE = r"""
extern "C" __global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       long long n) {
    // y[i] = x[i] / (1 + exp(-x[i])). Thread t handles elements 4t .. 4t+3: one float4 load
    // and store when all four exist and x and y are 16-byte aligned, one at a time otherwise.
}
"""
'''


@exercise("cuda_gelu.silu", title="A vectorised SiLU in CUDA (NVRTC)", stub=SILU_STUB,
          answers=("SILU_SOURCE",), section="3 · Naive and vectorised", intro=f"""
**Compiling at run time.** Your kernel is a string, and the check hands it to **NVRTC**,
CUDA's run-time compiler: a library (it comes with torch's CUDA wheels) that turns CUDA C++ into
PTX or machine code inside this Python process, in tens of milliseconds, for any GPU
architecture, with or without a GPU here. So a CPU-only machine still compiles your kernel and
reads what it compiled to. The kernel is `extern "C"` so that its name is not mangled. Lesson
06 goes deep (headers generated from Python values, caching, launching with arguments checked);
here you only write the kernel.

Write `silu_kernel` so that each thread moves 16 bytes per access, as `gelu_vectorized` does.
It is launched with {BLOCK} threads per block and enough blocks for `ceil(n / 4)` threads;
thread `t` handles elements `4t .. 4t+3`. A `float4` load needs a 16-byte aligned address
(`reinterpret_cast<unsigned long long>(x) % 16 == 0`): a view such as `x[1:]` is not, and must
take the one-at-a-time path, as must the last `n % 4` elements.

The check compiles it with NVRTC for sm_90 (no GPU needed) and looks for 16-byte loads in the
PTX; on a GPU it also runs it (in a child process, so a crash cannot take the notebook down) on
every remainder of `n % 4`, empty and misaligned tensors (`x` inside NaN, `y` fenced on both
sides), under compute-sanitizer, counts with Nsight Compute that aligned groups of four take
the `float4` path, then measures it against the copy bandwidth.""")
def check_silu(source, report) -> None:
    expect(isinstance(source, str), f"SILU_SOURCE is a {type(source).__name__}; expected the "
           "kernel's source as a string")
    compiled = kernel_checks.compile_answer(source, "silu_kernel", "SILU_SOURCE", output="ptx",
                                            hint=kernel_checks.WHOLE)
    ptx = compiled.ptx
    expect("ld.global.nc.v4.f32" in ptx or "ld.global.v4.f32" in ptx,
           "the PTX has no 16-byte load (ld.global.v4.f32): every load moves 4 bytes",
           "load a float4: reinterpret_cast<const float4*>(x)[t] on the aligned path")
    expect("st.global.v4.f32" in ptx, "the PTX has no 16-byte store (st.global.v4.f32)",
           "store a float4 on the aligned path too")
    verified = "compiles for sm_90 (NVRTC); the PTX has 16-byte loads and stores"
    ran = (f"matches F.silu on lengths {', '.join(map(str, SILU_LENGTHS))}, misaligned x and y "
           "(x inside NaN, nothing written outside y)")
    if not env.HAS_CUDA:
        kernel_checks.decide_on_cpu(
            "cuda_gelu.silu", source, report, [verified], "running it against F.silu, "
            "compute-sanitizer memcheck, the float4 path (Nsight Compute's counters) and the "
            "speed need a GPU", SILU_HINT, ran)
        access_checks.expect_access("cuda_gelu.silu", source, "silu_kernel", report,
                                    "the float4 path on aligned memory", silu_access)
        report.line(kernel_checks.NOT_TIMED)
        return
    report.line(verified)
    kernel_checks.expect_child_ok(kernel_checks.run_child("cuda_gelu.silu", source), SILU_HINT,
                                  "a misaligned float4 access or an index past n: check the "
                                  "alignment of both pointers and that 4t + 3 < n before the "
                                  "vector path")
    report.line(f"{ran} (in a child process)")
    for line in kernel_checks.sanitize("cuda_gelu.silu", source, ("memcheck",)):
        report.line(line)
    access_checks.expect_access("cuda_gelu.silu", source, "silu_kernel", report,
                                "the float4 path on aligned memory", silu_access)
    from course_utils import nvrtc

    kernel = nvrtc.kernel(source, "silu_kernel", verbose=False)
    x = torch.randn(1 << 28, device="cuda")
    y = torch.empty_like(x)
    grid = -(-x.numel() // (4 * BLOCK))
    bandwidth_verdict(report, lambda: kernel(x, y, x.numel(), grid=grid, block=BLOCK), (),
                      2 * x.numel() * 4)


SILU_HINT = ("compare the vector path and the one-at-a-time path of that case; y[i] = x[i] / "
             "(1 + expf(-x[i]))")
# every remainder n % 4 (the one-at-a-time tail), one block and several
SILU_LENGTHS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1023, 4099)
# (n, x offset, y offset) in elements: an offset of 1-3 puts a pointer 4-12 bytes off 16-byte
# alignment, so the whole tensor must take the one-at-a-time path
SILU_MISALIGNED = ((7, 1, 0), (1023, 1, 0), (1023, 0, 1), (4099, 2, 3), (4099, 3, 3),
                   (4099, 0, 2))
# under compute-sanitizer: exact allocations (a read past the end of x shows), one misaligned
SILU_EXACT = ((4099, 0, 0), (7, 0, 0), (1023, 1, 0), (1023, 0, 3))
# profiled by Nsight Compute: 16-byte aligned (offsets of 4 and 8 elements: other addresses; a
# large n with n % 4 = 3, whose groups of four must still go as float4), then misaligned (every
# element once, one at a time)
SILU_PROFILED = ((8, 0, 0), (4099, 0, 0), (1 << 20, 0, 0), (1 << 20, 4, 8),
                 ((1 << 20) + 3, 0, 0), (4099, 1, 0), (4099, 0, 3))


def _silu_accesses(n: int, ox: int, oy: int) -> int:
    """The global loads (and stores) the statement's threads make: one float4 per group of four
    and one per leftover element when x and y are aligned, one per element otherwise."""
    return n // 4 + n % 4 if ox % 4 == 0 and oy % 4 == 0 else n


def _silu_launch(kernel, x, y):
    kernel(x, y, x.numel(), grid=max(1, -(-x.numel() // (4 * BLOCK))), block=BLOCK)


def silu_child(source: str, small: bool) -> dict:
    """The GPU child of cuda_gelu.silu (run by :func:`exercises.kernel_checks.run_child`; ``small``:
    exact allocations, under compute-sanitizer)."""
    kernel, device = kernel_checks.load(source, "silu_kernel"), kernel_checks.device()
    if small:
        cases = SILU_EXACT
    else:
        cases = tuple((n, 0, 0) for n in SILU_LENGTHS) + SILU_MISALIGNED
    for n, ox, oy in cases:
        label = (f"n={n}" if n else "empty") + (f", x {4 * ox} bytes off alignment" if ox else
                                                "") + (f", y {4 * oy} bytes off" if oy else "")
        print(json.dumps({"case": label}), flush=True)  # the parent names it if we crash
        made = torch.randn(n, device=device)
        if small:  # each its own allocation (a view 1-3 elements into one when misaligned)
            x = made if not ox else torch.randn(n + ox, device=device)[ox:]
            y = torch.full((n + oy,), sentinels.FENCE, device=device)[oy:]
            outside = lambda: None  # noqa: E731  (memcheck sees it)
        else:
            x = sentinels.poisoned(made, pad=64, offset=ox)
            y, outside = sentinels.fenced(n, device, pad=64, offset=oy)
        before = x.clone()
        _silu_launch(kernel, x, y)
        kernel_checks.synchronize()
        if where := outside():
            return {"mismatch": f"{label}: your kernel wrote {where}",
                    "hint": "store a float4 only when all four elements exist (4t + 3 < n), "
                            "and one at a time only while i < n"}
        if not torch.equal(x, before):
            return {"mismatch": f"{label}: your kernel changed x", "hint": "store into y only"}
        try:
            compare(y, torch.nn.functional.silu(x), what=label, atol=1e-5, rtol=1e-5)
        except Mismatch as wrong:
            return {"mismatch": wrong.message, "hint": SILU_HINT}
    return {"ok": True}


def silu_profile(source: str):
    """The call Nsight Compute profiles (:func:`exercises.access_checks.access_counters`): the
    answer on :data:`SILU_PROFILED`."""
    kernel, device = kernel_checks.load(source, "silu_kernel"), kernel_checks.device()
    tensors = [(torch.randn(n + ox, device=device)[ox:], torch.empty(n + oy, device=device)[oy:])
               for n, ox, oy in SILU_PROFILED]

    def call():
        for x, y in tensors:
            _silu_launch(kernel, x, y)

    return call


def silu_access(launches: list[dict]) -> list[str]:
    """16-byte accesses wherever x and y are aligned, each element once: per profiled launch,
    the global loads and stores the threads made (:func:`_silu_accesses`), or where this ncu
    lacks those counters, the sectors moved per sector of data (:func:`_silu_sectors`)."""
    if len(launches) != len(SILU_PROFILED):
        return [f"{access_checks.UNMEASURED}the float4 path (Nsight Compute gave "
                f"{len(launches)} launches of silu_kernel, expected {len(SILU_PROFILED)})"]
    counted = all(isinstance(launch.get(m), float) for launch in launches
                  for m in access_checks.THREAD_METRICS)
    said = []
    for (n, ox, oy), launch in zip(SILU_PROFILED, launches, strict=True):
        aligned = ox % 4 == 0 and oy % 4 == 0
        where = (f"n = {n}, x and y 16-byte aligned" if aligned else
                 f"n = {n}, x {4 * ox} and y {4 * oy} bytes off 16-byte alignment")
        if counted:
            said.append(_silu_counts(n, ox, oy, aligned, where, launch))
        elif (line := _silu_sectors(n, aligned, where, launch)) is None:
            return [f"{access_checks.UNMEASURED}the float4 path (no sector counts)"]
        else:
            said.append(line)
    how = "thread-level" if counted else "sectors per sector of data"
    return [f"16-byte accesses on aligned memory, each element once (Nsight Compute, {how}): "
            f"{'; '.join(said)}"]


_SILU_VECTOR_HINT = ("take the float4 path whenever x and y are both 16-byte aligned "
                     "((address_x | address_y) % 16 == 0) and 4t + 3 < n, whatever n is")
_SILU_ONCE_HINT = "thread t handles elements 4t .. 4t+3 only: i < 4t + 4 and i < n"


def _silu_counts(n, ox, oy, aligned, where, launch) -> str:
    """The exact check: the global loads and stores the threads made, against the statement's
    (one float4 per aligned group of four, one access per other element)."""
    want = _silu_accesses(n, ox, oy)
    loads, stores = (launch[m] for m in access_checks.THREAD_METRICS)
    made = (f"{where}: your kernel's threads made {loads:.0f} global loads and {stores:.0f} "
            f"stores (Nsight Compute)")
    if aligned:
        expect(loads <= want and stores <= want, f"{made}; one float4 per group of four and "
               f"one access per leftover element is {want}: a group of four on aligned memory "
               "went one element at a time, or an element was handled twice",
               _SILU_VECTOR_HINT)
    else:
        expect(loads <= want and stores <= want, f"{made} for {n} elements: some elements are "
               "read or written more than once", _SILU_ONCE_HINT)
    return f"n={n}{'' if aligned else ' misaligned'}: {loads:.0f} loads, {stores:.0f} stores"


# sectors moved per sector of data: a float4 copy moves each sector once (1.0); the statement's
# one-at-a-time path, thread t on elements 4t .. 4t+3, has a warp's lanes 16 bytes apart, so
# each sector is fetched once per element in it (4.0, measured 4.0-4.2 on an H100)
SILU_SECTORS = {True: 1.25, False: 4.5}


def _silu_sectors(n, aligned, where, launch) -> str | None:
    """Where ncu gives no thread-level counts: the sectors of each launch, which show a group
    of four gone one element at a time on aligned memory (4x a float4's), and an element
    handled twice on misaligned memory (5 accesses where 4 are due: 5x)."""
    ratios = [access_checks.per_use(launch, op, 4 * n) for op in ("ld", "st")]
    if None in ratios:
        return None
    limit = SILU_SECTORS[aligned]
    for ratio, what in zip(ratios, ("loads", "stores"), strict=True):
        expect(ratio <= limit, f"{where}: your kernel's {what} move {ratio:.1f} sectors per "
               f"sector of data (Nsight Compute; {limit} at most for the statement's threads): "
               + ("a group of four went one element at a time" if aligned else
                  "some elements are read or written more than once"),
               _SILU_VECTOR_HINT if aligned else _SILU_ONCE_HINT)
    return f"n={n}{'' if aligned else ' misaligned'}: {ratios[0]:.2f} / {ratios[1]:.2f}"


# --------------------------------------------------------------------------------------------
OOB_STUB = '''
from exercises import cuda_gelu

print(cuda_gelu.numbered(cuda_gelu.SCALE_CU))   # the kernel, with line numbers
BUG_LINE = ...     # the number of the line that lets an out-of-bounds thread through
FIXED_LINE = ...   # that line, fixed (a string)
'''


def numbered(path) -> str:
    return "\n".join(f"{i:3d}  {line}" for i, line in enumerate(path.read_text().splitlines(),
                                                                  1))


def _access_line() -> int:
    lines = SCALE_CU.read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if "y[i] = a * x[i]" in ln)


def _bug_line() -> int:
    lines = SCALE_CU.read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if "return;" in ln)


def sanitize_scale(source: str | None = None) -> str:
    """Run ``compute-sanitizer --tool memcheck`` on the scale kernel (the given one, or a fixed
    source) in a child process and return its report (GPU and CUDA toolkit needed)."""
    from course_utils import sanitizer

    tool = sanitizer.path()
    if tool is None:
        raise RuntimeError("compute-sanitizer not found (it ships with the CUDA toolkit)")
    path = kernel_checks.child_source_file("cuda_gelu.oob", SCALE_CU.read_text() if source is None
                                           else source)
    done = subprocess.run([tool, "--tool", "memcheck", "--show-backtrace", "no",
                           sys.executable, "-m", kernel_checks.__name__, "cuda_gelu.oob",
                           str(path)],
                          capture_output=True, text=True, timeout=600, cwd=env.ROOT,
                          # every tensor its own cudaMalloc of its exact size, so that
                          # memcheck sees x[n] as past the end of x
                          env=env.child_environment(PYTORCH_NO_CUDA_MEMORY_CACHING="1"))
    keep = [ln for ln in (done.stdout + done.stderr).splitlines()
            if ln.startswith("=========") and ln.strip("= ")]
    return "\n".join(keep[:12] + (keep[-1:] if len(keep) > 12 else []))


def scale_child(source: str, small: bool) -> dict:
    """The GPU child of cuda_gelu.oob: the scale kernel (the buggy one, or a student's fix) on a
    length that is no multiple of the block (run by :func:`exercises.kernel_checks.run_child`,
    and under compute-sanitizer by :func:`sanitize_scale`)."""
    from course_utils import nvrtc

    # the lesson's own file by its path, so that compute-sanitizer's report names
    # scale_buggy.cu; a student's fix as the string it is (reported as <source>, same lines)
    program = SCALE_CU if source == SCALE_CU.read_text() else source
    kernel = nvrtc.kernel(program, "scale", **SCALE_OPTIONS)
    n = 4095  # not a multiple of the block: thread i == n exists, and x[n] is past x
    # made on the CPU and copied, compared on the CPU: under memcheck only `scale` is instrumented
    cpu_x = torch.randn(n)
    x = cpu_x.cuda()
    y = torch.empty_like(x)
    kernel(x, y, 2.0, n, grid=n // BLOCK + 1, block=BLOCK)
    torch.cuda.synchronize()
    try:
        compare(y.cpu(), 2.0 * cpu_x, what="scale", atol=0, rtol=0)
    except Mismatch as wrong:
        return {"mismatch": wrong.message}
    return {"ok": True}


@exercise("cuda_gelu.oob", title="Find the out-of-bounds access with compute-sanitizer",
          stub=OOB_STUB, answers=("BUG_LINE", "FIXED_LINE"), section="compute-sanitizer",
          before=["""%%requires cuda nvcc
from exercises import cuda_gelu

print(cuda_gelu.sanitize_scale())   # compute-sanitizer on the kernel below"""], intro="""
`scale` computes `y = a * x` and passes the tests you would first write, yet
`compute-sanitizer` (memcheck), run on it in the cell below, reports an invalid access: the
launch has more threads than elements. The report names the line of the bad *access*; the bug
is on the line that should have stopped that thread. Give its number and the fixed line. The
check compiles your fix with NVRTC; on a GPU it runs compute-sanitizer on it.""")
def check_oob(bug_line, fixed_line, report) -> None:
    access = _access_line()
    expect(isinstance(bug_line, int), f"BUG_LINE = {bug_line!r}; expected a line number")
    if bug_line == access:
        raise Mismatch(f"line {access} is where the out-of-bounds access happens (what "
                       "compute-sanitizer points at), but for i < n it is correct",
                       "which earlier line decides whether thread i goes on? try i == n")
    expect(bug_line == _bug_line(), f"line {bug_line} is not the one that lets thread i == n "
           "through", f"the launch has {BLOCK} more threads than elements: follow thread "
           "i = n through the kernel")
    expect(isinstance(fixed_line, str), f"FIXED_LINE = {fixed_line!r}; expected a string")
    lines = SCALE_CU.read_text().splitlines()
    lines[bug_line - 1] = fixed_line
    fixed = "\n".join(lines) + "\n"
    kernel_checks.compile_answer(fixed, "scale", "your fixed kernel", output="ptx",
                                 hint="the line numbers are the kernel's above")
    report.line(f"line {bug_line} it is; the fixed kernel compiles")
    if not env.HAS_CUDA:
        report.line("on a GPU this check also runs compute-sanitizer on your fix")
        return
    sanitized = sanitize_scale(fixed)
    summary = next((ln for ln in sanitized.splitlines() if "ERROR SUMMARY" in ln), sanitized)
    expect("ERROR SUMMARY: 0 errors" in summary, f"compute-sanitizer on your fix: {summary}",
           "thread i may touch x[i] and y[i] only when i < n")
    kernel_checks.expect_child_ok(kernel_checks.run_child("cuda_gelu.oob", fixed),
                                  "thread i may write y[i] only when i < n")
    report.line(f"compute-sanitizer on your fix: {summary.strip('= ')}")


# --------------------------------------------------------------------------------------------
INDEX_STUB = '''
# int i = blockIdx.x * blockDim.x + threadIdx.x, in 32-bit int, with 1024 threads per block.
FIRST_BAD_BLOCK = ...  # the first blockIdx.x whose thread 0 gets a wrong i
I_BECOMES = ...        # the value i takes for thread 0 of that block
'''


@exercise("cuda_gelu.index", title="When does a 32-bit index overflow?", stub=INDEX_STUB,
          answers=("FIRST_BAD_BLOCK", "I_BECOMES"), section="1 · Grid, block, thread", intro="""
The kernels of this lesson compute the global index in 64 bits. Why? With a 32-bit `int` and
1024 threads per block, which is the first block whose thread 0 computes a wrong index, and what
does it compute instead (two's complement wraps around)?""")
def check_index(first_bad_block, i_becomes, report) -> None:
    with np.errstate(over="ignore"):
        blocks = np.arange(0, 1 << 23, dtype=np.int32)
        i = blocks * np.int32(1024)
    bad = int(np.argmax(i < 0))
    expect(isinstance(first_bad_block, int), f"FIRST_BAD_BLOCK = {first_bad_block!r}; "
           "expected a block number")
    expect(first_bad_block == bad,
           f"FIRST_BAD_BLOCK = {first_bad_block:,}, but thread 0 of that block computes "
           f"{first_bad_block * 1024:,} "
           + ("which still fits in an int (max 2^31 - 1)" if first_bad_block < bad else
              f"and an earlier block, {bad:,}, already overflows"),
           "an int holds up to 2^31 - 1; at which block does blockIdx.x * 1024 reach 2^31?")
    expect(i_becomes == int(i[bad]), f"I_BECOMES = {i_becomes!r}; in 32 bits {bad} x 1024 "
           f"wraps to {int(i[bad]):,}", "2^31 wraps around to -2^31")
    report.line(f"block {bad:,} (element {bad * 1024:,} = 2^31) is where int indexing breaks; "
                "a tensor of 2^31 bfloat16 elements is 4 GiB, common on an 80 GB GPU")
