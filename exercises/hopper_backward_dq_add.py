"""Exercise hopper_backward.dq_add of lesson 19: the epilogue of the Hopper backward's version 2
(``kernels/attention/hopper/attention_bwd_fused.cu``), where each warpgroup adds its
dQ_partial, a 64 x 64 fp32 wgmma accumulator (``dq_acc[32]`` a thread), scaled by 1/sqrt(D),
into the fp32 buffer ``dq_sum`` (B, H, Sq, D) with ``red_add2`` (``red.global.add.v2.f32``),
leaving out the rows past Sq. The check splices the student's lines between the kernel's
``// ==== dq add`` markers (inside the kernel's loop: the code sees its variables) and builds the
registered kernel with them.

Any machine: NVRTC compiles version 2 for sm_90a at D = 128 and 64; its SASS must hold the
reference's 16 two-float reductions to global memory (``REDG.E.ADD.F32x2``), no more plain
stores (``STG``) than the reference, no atomic that returns a value (``ATOMG``), no local memory
and no more registers than the reference. Then NVRTC *runs* the student's lines at compile time
for one warpgroup, recording each call of ``red_add2``, and the record is read against the
fragment layout (:mod:`exercises.hopper_backward_dq_add_probe`). Hopper GPU, in a child process
(:mod:`exercises.hopper_backward_dq_add_gpu`): version 2 with the student's lines against float64
autograd on awkward shapes, and the guard read from the signs of -0.0 placed after the buffer.
"""

from __future__ import annotations

import hashlib

from course_utils import env
from exercises import Mismatch, exercise, expect, kernel_checks, sass_checks
from exercises.hopper_backward_dq_add_probe import LAYOUT, PROBES, probe_error, run_probe

BEGIN, END = "// ==== dq add: begin", "// ==== dq add: end"
HINT_LINES = ('the line numbers of "your code" count from the first line after '
              'DQ_ADD = r"""; the others point into attention_bwd_fused.cu')

STUB = '''
DQ_ADD = r"""
// Runs in each thread of a warpgroup, once per query tile, inside attention_bwd_fused's loop.
// In scope: float dq_acc[32] (this thread's part of the warpgroup's 64 x 64 dQ_partial),
// float* dq_sum (the (B, H, Sq, D) fp32 buffer), int bh, sq, m0, t, lane, consumer, dq_col0,
// float scale (1/sqrt(D)), the constant D, and red_add2(float* p, float x, float y).
"""
'''

KERNEL = "version 2's kernel"
NOT_CHECKED = ("Not checked anywhere: that the offset is computed in 64 bits (i64(bh)); one in "
               "int overflows only past 2^31 elements of dq_sum, 8 GiB, and no case here is as "
               "large")


# --------------------------------------------------------------------------------------------
# The program: the real attention_bwd_fused.cu, the student's lines between its markers
# --------------------------------------------------------------------------------------------


def _relative(path) -> str:
    return str(path.relative_to(env.ROOT)) if path.is_relative_to(env.ROOT) else str(path)


def marked(lines: list[str]) -> tuple[int, int]:
    """Indices of the begin and end marker lines (each must appear once)."""
    at = {m: [i for i, line in enumerate(lines) if line.strip() == m] for m in (BEGIN, END)}
    if len(at[BEGIN]) != 1 or len(at[END]) != 1 or at[BEGIN][0] > at[END][0]:
        raise ValueError(f"attention_bwd_fused.cu expected one {BEGIN!r} line before one "
                         f"{END!r} line, found {len(at[BEGIN])} and {len(at[END])}")
    return at[BEGIN][0], at[END][0]


def shipped() -> str:
    """The lines between the markers: the course's own answer."""
    from kernels.attention.hopper import bwd

    lines = bwd.FUSED_SOURCE.read_text().splitlines()
    begin, end = marked(lines)
    return "\n".join(lines[begin + 1:end]) + "\n"


def program(code: str) -> str:
    """attention_bwd_fused.cu with the student's ``code`` in place of the lines between the
    markers. ``#line`` directives keep compiler messages pointing into the file, and into
    "your code" for the student's lines; the digests of the headers it includes ride along,
    so NVRTC's cache key changes when one does."""
    from kernels.attention.hopper import bwd, fwd
    from kernels.matmul.hopper import wgmma

    name = _relative(bwd.FUSED_SOURCE)
    lines = bwd.FUSED_SOURCE.read_text().splitlines()
    begin, end = marked(lines)
    body = next(i for i, line in enumerate(lines) if line.lstrip().startswith("// ==== kernel:"))
    spliced = [*lines[:body + 1], f'#line {body + 2} "{name}"', *lines[body + 1:begin + 1],
               '#line 1 "your code"', *code.strip("\n").splitlines(),
               f'#line {end + 1} "{name}"', *lines[end:]]
    headers = (wgmma.PRIMITIVES, fwd.PRIMITIVES, bwd.SHARED)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in headers)).hexdigest()[:16]
    return "\n".join(spliced) + f"\n// headers {digest}\n"


def compile_options(dtype=None) -> dict:
    import torch

    from kernels.attention.hopper import bwd, fwd

    return dict(defines=fwd.defines(dtype or torch.bfloat16), arch=fwd.ARCH,
                options=(f"-I{bwd.FUSED_SOURCE.parent}",))


def template(d: int) -> str:
    from kernels.attention.hopper import bwd

    return bwd.CONFIG.template("fused", d)


# --------------------------------------------------------------------------------------------
# What the SASS says: reductions, not stores; the reference's registers, no local memory
# --------------------------------------------------------------------------------------------


def memory_ops(report) -> dict[str, int]:
    """The global-memory writes of a kernel's SASS: two-float reductions (``pairs``), one-float
    reductions (``singles``), atomics that return a value (``atoms``), plain stores
    (``stores``)."""
    from course_utils import sass

    reds = sass.variants(report.sass, "REDG") + sass.variants(report.sass, "RED")
    return {"pairs": sum(n for v, n in reds.items() if ".F32x2" in v),
            "singles": sum(n for v, n in reds.items() if ".F32x2" not in v),
            "atoms": report.census["ATOMG"] + report.census["ATOM"],
            "stores": report.census["STG"]}


def sass_error(found: dict[str, int], reference: dict[str, int], d: int) -> tuple[str, str] | None:
    """What is wrong with the global writes ``found`` (:func:`memory_ops` of the spliced
    kernel) against the reference kernel's, as (message, hint); None: the same."""
    at = f"{KERNEL} at D = {d}"
    if found["stores"] > reference["stores"]:
        return (f"{at} has {found['stores'] - reference['stores']} more plain stores (STG) "
                "than the reference: a store (or a +=, a load then a store) of dQ values "
                "overwrites what the other key blocks of the head added to the same rows, "
                "which run at the same time", "add with red_add2: an atomic reduction, done in "
                "L2, which no other block's addition can get between")
    if found["atoms"] > reference["atoms"]:
        return (f"{at} has {found['atoms']} atomics that return a value (ATOMG): atomicAdd "
                "whose result is used (or atomicCAS) makes each warp wait for the old value",
                "red_add2 returns nothing: a reduction the warp issues and forgets")
    if found["singles"] > reference["singles"]:
        return (f"{at} adds one float per atomic ({found['singles']} one-float reductions): "
                "twice the atomics the accumulator's neighbouring column pairs need",
                "red_add2(p, x, y) adds two neighbouring floats with one "
                "red.global.add.v2.f32: dq_acc[4j + 2h] and dq_acc[4j + 2h + 1] are columns "
                "c and c + 1 of one row")
    if found["pairs"] != reference["pairs"]:
        return (f"{at} has {found['pairs']} two-float reductions (REDG.E.ADD.F32x2) where the "
                f"reference has {reference['pairs']}: 2 rows x 8 column pairs a thread, each "
                "one red_add2", "two rows (h = 0, 1) of 8 column pairs (j = 0 .. 7) a thread, "
                "in unrolled loops (#pragma unroll)")
    return None


def _compiled_report(spliced: str, d: int):
    compiled = kernel_checks.compile_answer(spliced, template(d), "your code", hint=HINT_LINES,
                                            **compile_options())
    return sass_checks.sass_report(compiled)


class KernelReports:
    """{D: (the spliced kernel's SASS report, the reference kernel's)} at D = 128 and 64, each
    compiled when first asked for (a compile error is a Mismatch pointing into your code): an
    answer whose D = 128 kernel already writes the wrong instructions is told so without the
    second compile."""

    HEAD_DIMS = (128, 64)

    def __init__(self, spliced: str):
        self.spliced, self.done = spliced, {}

    def __getitem__(self, d: int) -> tuple:
        if d not in self.done:
            import torch

            from course_utils import sass
            from kernels.attention.hopper import bwd

            self.done[d] = (_compiled_report(self.spliced, d),
                            sass.report(bwd.compile_kernel("fused", torch.bfloat16, d,
                                                           verbose=False)))
        return self.done[d]

    def items(self):
        return ((d, self[d]) for d in self.HEAD_DIMS)


def expect_reductions(reports: KernelReports) -> None:
    """Mismatch unless the spliced kernel writes global memory as the reference does: dQ by
    two-float reductions, no extra store, no atomic that returns a value."""
    for d, (report, reference) in reports.items():
        if wrong := sass_error(memory_ops(report), memory_ops(reference), d):
            raise Mismatch(*wrong)


def expect_registers(reports: KernelReports) -> list[str]:
    """Mismatch unless the spliced kernel keeps within the reference's registers, with no local
    memory; else one line per head dim."""
    said = []
    for d, (report, reference) in reports.items():
        res, limit = report.resources, reference.resources.registers
        spilled = res.spill_store_bytes + res.spill_load_bytes
        expect(res.stack_bytes == 0 and spilled == 0 and res.registers <= limit,
               f"{KERNEL} at D = {d} with your lines: {res.registers} registers a thread (the "
               f"reference {limit}), a {res.stack_bytes}-byte stack frame, {spilled} bytes of "
               "local-memory traffic (LDL/STL)",
               "the kernel is at its register limit (255 at D = 128): keep to one row index, "
               "one pointer a row and constant indices into dq_acc (unrolled loops); a value "
               "held across the loops costs registers the next tile's accumulators need")
        found = memory_ops(report)
        said.append(f"D = {d}: {found['pairs']} REDG.E.ADD.F32x2, no extra STG or ATOMG, "
                    f"{res.registers} registers (the reference's {limit}), no local memory")
    return said


# --------------------------------------------------------------------------------------------
# The exercise
# --------------------------------------------------------------------------------------------


@exercise("hopper_backward.dq_add", title="dQ through atomics: version 2's epilogue (CUDA, sm_90a)",
          stub=STUB, answers=("DQ_ADD",), section="A Hopper backward",
          before=["""\
# each warpgroup's part of a dQ tile (above the loop); the atomic you add with
show(bwd.FUSED_SOURCE, "    // this warpgroup's part of each dQ tile", "    float dk_acc[D / 2]")
show(bwd.FUSED_SOURCE, "// one atomic addition", "// dS^T's A fragments")"""],
          intro="""
Version 2's heart is its epilogue, and it is yours to write. Per query tile, each warpgroup
has waited for its `dQ_partial = dS K`: a 64 × 64 fp32 `wgmma` accumulator, `dq_acc[32]` in
each of its 128 threads. Add it, times `scale` (1/√D), into `dq_sum`, the fp32 buffer
(B, H, Sq, D) of the whole head's `dQ`, with `red_add2(p, x, y)`, which adds `x` to `p[0]` and
`y` to `p[1]` in one `red.global.add.v2.f32` (p 8-byte aligned). The accumulator's fragment
layout (thread `t` of the warpgroup, `lane = t % 32`):

* `dq_acc[4j + 2h + e]` (j = 0 … 7, h = 0, 1, e = 0, 1) is query row `m0 + 16 (t / 32) +
  lane / 4 + 8h` of the head, column `dq_col0 + 8j + 2 (lane % 4) + e` of D, where `dq_col0` is
  the warpgroup's first column (64 · consumer at D = 128, where each warpgroup computes half of
  D; 0 at D = 64, where both add all 64 columns of their own 64 keys into the same elements);
* element (row, column) of head `bh` (batch × head) is `dq_sum + (bh · sq + row) · D + column`
  (cast `bh` to `i64` first: B · H · Sq · D may pass 2³¹).

**Why atomics**: every key block of the head (a block owns 128 keys) adds into the same rows of
`dQ`, at the same time, on other SMs; a plain store, or a `+=`, loses the others' additions.
A reduction (`red`) is done in L2 and returns nothing, so the warp does not wait for it.
**Why the guard**: the last query tile runs past Sq (its rows there are TMA's zero fill);
their `dQ` rows do not exist: in `dq_sum` they are the next head's first rows, or past the
buffer's end. Leave out every row ≥ `sq`.

Write it with `red_add2`, the kernel's variables and arithmetic: the check runs your lines at
compile time, where it can record `red_add2`'s calls but cannot run an `atomicAdd` (not even of
a `float2`, which would add the same pair). It splices them between the kernel's
`// ==== dq add` markers and compiles version 2 for sm_90a on any machine: its SASS must hold
the reference's 16 two-float reductions (`REDG.E.ADD.F32x2`: 2 rows × 8 pairs a thread), no
extra plain store, no atomic that returns a value, no more registers than the reference's and
no local memory. Then NVRTC runs your lines for a warpgroup's 128 threads, `red_add2` recording
each call, on the last, ragged tile of a head (Sq = 100, m0 = 64), at D = 128 and 64: each
value must land, scaled, in its element, once, and nothing past Sq. On a Hopper GPU it runs
version 2 with your lines (in a child process) on ragged Sq, causal with Sq ≠ Sk, several key
blocks per head, D = 64 and 128, against float64 autograd, and reads the guard from -0.0 placed
after the buffer (a missing guard adds +0.0 there: the values cannot show it, the sign does).""")
def check_dq_add(code, report) -> None:
    kernel_checks.expect_source(code, "DQ_ADD")
    spliced = program(code)
    reports = KernelReports(spliced)
    expect_reductions(reports)  # (a plain store is named here, before the values)
    for d, bh, sq, m0, consumer in PROBES:
        found = run_probe(code, d, bh, sq, m0, consumer)
        if wrong := probe_error(found, d, bh, sq, m0, consumer):
            raise Mismatch(*wrong)
    census = expect_registers(reports)  # (a wrong index is named above, before its spills)
    verified = [f"{KERNEL} compiles for sm_90a with your lines: " + "; ".join(census),
                "your lines run at compile time for one warpgroup on a ragged last tile "
                "(Sq = 100, m0 = 64, the last head: 3 of 3 at D = 128, 2 of 2 at D = 64): each "
                f"of the "
                f"{36 * 32} pairs below Sq added once, scaled, where the fragment layout puts "
                "it, by red_add2; no row past Sq, no other write"]
    if reason := _gpu_reason():
        raise kernel_checks.cpu_verdict(
            "hopper_backward.dq_add", report, verified,
            "that version 2 with your lines computes dQ (and dK, dV) as float64 autograd does "
            "when many key blocks add into the same rows at once, and that it writes nothing "
            f"past the buffer on the GPU: {reason}. {NOT_CHECKED}")
    for line in verified:
        report.line(line)
    result = kernel_checks.run_child("hopper_backward.dq_add", spliced, timeout=600)
    kernel_checks.expect_no_course_bug(result, "your lines")
    kernel_checks.expect_child_ok(result, LAYOUT, crash_hint=(
        "an address outside dq_sum: check the row stride (sq · D a head, D a row) and the "
        "guard"))
    report.line(f"on this GPU: dQ, dK, dV within the tests' tolerance of float64 on "
                f"{len(result['cases'])} shapes ({'; '.join(result['cases'])}); the -0.0 "
                "after the buffer untouched")
    report.line(NOT_CHECKED)


def _gpu_reason() -> str | None:
    import torch

    from kernels.attention.hopper import fwd

    if not env.HAS_CUDA:
        return "running it needs a Hopper GPU (sm_90); there is no CUDA GPU here"
    if reason := fwd.gpu_reason(torch.cuda.get_device_capability()):
        return reason
    return None

