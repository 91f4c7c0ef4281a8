"""Exercise of lesson 18: the ping-pong's turns (hopper_attention.pingpong). The student writes
``turn_wait`` and ``turn_pass``, the two named-barrier functions of
``kernels/attention/hopper/attention.cuh`` that make step 4's consumer warpgroups take turns at the
tensor cores; the check splices them into the real kernel (the lines between attention.cuh's
``// ==== turns`` markers) and builds step 4 with them.

Any machine: NVRTC compiles step 4 for sm_90a; its SASS must hold named barriers (BAR.SYNC on an
id other than 0, BAR.ARV); four probe kernels, ``turn_wait(0/1)`` and ``turn_pass(0/1)`` with the
consumer a constant, show which barrier each call names, with which thread count, waiting or
not, and :func:`protocol_error` says whether that protocol hangs, lets both warpgroups issue at
once, or blocks the passing one. Hopper GPU, in a child process (a hang becomes a "not yet"
after ``HANG_S`` seconds): step 4 against SDPA on the registry's cases, outputs poisoned with
NaN; then its TIMELINE build, whose events must show the turns alternating in every recorded
block (:mod:`exercises.hopper_attention_gpu`): with no turns at all the values are just as right.
"""

from __future__ import annotations

import hashlib
import re

import torch

from course_utils import env
from exercises import Mismatch, exercise, expect, kernel_checks, sass_checks

BEGIN, END = "// ==== turns: begin", "// ==== turns: end"
STEP = 4  # the step whose consumers take turns (attention.cu's PINGPONG)
BLOCK_THREADS = 288  # two consumer warpgroups and the producer warp
# a launch that has not finished by then never will (it runs in milliseconds): the GPU child
# gives up on it, and the check waits four of those plus the build
HANG_S = 20
HINT_LINES = ("the line numbers of 'your code' count from the first line after TURNS = r\"\"\"; "
              "the others point into attention.cuh and attention.cu")

STUB = '''
TURNS = r"""
// Consumer `consumer` (0 or 1) waits here until it is its turn at the tensor cores.
__device__ __forceinline__ void turn_wait(int consumer) {
}

// Consumer `consumer` has issued its matmuls: it hands the turn to the other consumer and goes on.
__device__ __forceinline__ void turn_pass(int consumer) {
}
"""
'''



# --------------------------------------------------------------------------------------------
# The program: the real attention.cu, the student's functions in attention.cuh
# --------------------------------------------------------------------------------------------


def _relative(path) -> str:
    return str(path.relative_to(env.ROOT)) if path.is_relative_to(env.ROOT) else str(path)


def program(code: str) -> str:
    """attention.cu with attention.cuh inlined where it is included, the student's ``code`` in
    place of the lines between the turns markers. ``#line`` directives keep compiler messages
    pointing into the two files, and into "your code" for the student's lines; the digest of
    lesson 16's hopper.cuh rides along, so NVRTC's cache key changes when it does."""
    from kernels.attention.hopper import fwd
    from kernels.matmul.hopper import wgmma

    cuh = fwd.PRIMITIVES.read_text().splitlines()
    begin = next(i for i, line in enumerate(cuh) if line.startswith(BEGIN))
    end = next(i for i, line in enumerate(cuh) if line.startswith(END))
    cuh_name, cu_name = _relative(fwd.PRIMITIVES), _relative(fwd.SOURCE)
    header = [f'#line 1 "{cuh_name}"',
              *("" if line.strip() == "#pragma once" else line for line in cuh[:begin + 1]),
              '#line 1 "your code"', *code.strip("\n").splitlines(),
              f'#line {end + 1} "{cuh_name}"', *cuh[end:]]
    cu = fwd.SOURCE.read_text().splitlines()
    at = [i for i, line in enumerate(cu) if line.startswith('#include "attention.cuh"')]
    if len(at) != 1:
        raise ValueError(f"{fwd.SOURCE.name} expected one '#include \"attention.cuh\"' line, "
                         f"found {len(at)}")
    lines = [*cu[:at[0]], *header, f'#line {at[0] + 2} "{cu_name}"', *cu[at[0] + 1:]]
    digest = hashlib.sha256(wgmma.PRIMITIVES.read_bytes()).hexdigest()[:16]
    return "\n".join(lines) + f"\n// hopper.cuh {digest}\n"


def compile_options(dtype: torch.dtype = torch.bfloat16, timeline: bool = False) -> dict:
    from kernels.attention.hopper import fwd

    return dict(defines=fwd.defines(dtype, timeline=timeline), arch=fwd.ARCH,
                options=(f"-I{fwd.SOURCE.parent}",))


def _compile(source: str, name: str, **kwargs):
    return kernel_checks.compile_answer(source, name, "your code", hint=HINT_LINES,
                                        **{**compile_options(), **kwargs})


# --------------------------------------------------------------------------------------------
# What the SASS says: the kernel's barriers, and the protocol of the four calls
# --------------------------------------------------------------------------------------------

_BAR = re.compile(r"\bBAR\.(?P<mode>[A-Z]+)(?:\.[A-Z_0-9]+)*\s+(?P<id>[^,;\s]+)"
                  r"(?:\s*,\s*(?P<count>[^,;\s]+))?")


def barriers(sass: str) -> list[tuple[str, int | None, int | None]]:
    """(mode, id, thread count) of each BAR instruction in ``sass``, in program order: mode
    "SYNC" or "RED" (waits: bar.sync, bar.red) or "ARV" (bar.arrive: signals, does not wait);
    id None where it sits in a register (not a constant); count None where the instruction has
    none (every thread of the block)."""
    found = []
    for m in _BAR.finditer(sass):
        number = re.fullmatch(r"0x([0-9a-f]+)", m["id"])
        count = re.fullmatch(r"0x([0-9a-f]+)", m["count"] or "")
        found.append((m["mode"], int(number[1], 16) if number else None,
                      int(count[1], 16) if count else None))
    return found


KERNEL_SASS = "the step-4 kernel's SASS"


def expect_named_barriers(sass: str) -> str:
    """Mismatch unless the spliced kernel waits on a named barrier and arrives at one; else the
    census of its BAR instructions, in words."""
    found = barriers(sass)
    named = [b for b in found if b[0] in ("SYNC", "RED") and b[1] != 0]
    arrive = [b for b in found if b[0] == "ARV"]
    expect(bool(named or arrive),
           f"{KERNEL_SASS} has no named barrier (a BAR on an id other than 0; 0 is "
           "__syncthreads', the whole block's): no consumer waits for the other's turn, so "
           "both issue their matmuls whenever they like. The values stay right (no turns at "
           "all is step 3), but the softmax of one no longer runs under the other's matmuls",
           "turn_wait waits on a named barrier (bar.sync), turn_pass signals one (bar.arrive)")
    expect(bool(named), f"{KERNEL_SASS} arrives at named barriers (BAR.ARV) but never waits on "
           "one (no BAR.SYNC with an id other than 0): no warpgroup ever waits for its turn",
           "turn_wait must wait: bar.sync on its consumer's barrier")
    expect(bool(arrive), f"{KERNEL_SASS} has no BAR.ARV: nothing signals a barrier without "
           "waiting on it, so the warpgroup that passes the turn stops until the other one "
           "takes it", "turn_pass signals with bar.arrive, which does not wait")
    return (f"{len(named)} BAR.SYNC on named barriers, {len(arrive)} BAR.ARV, "
            f"thread counts {sorted({b[2] for b in named + arrive}, key=str)}")


PROBE_CALLS = [(f, c) for f in ("turn_wait", "turn_pass") for c in (0, 1)]
PROBE = "".join(f'extern "C" __global__ void course_{f}_{c}() {{ {f}({c}); }}\n'
                for f, c in PROBE_CALLS)


def probe(spliced: str) -> dict[tuple[str, int], list[tuple[str, int | None, int | None]]]:
    """The barriers of ``turn_wait(c)`` and ``turn_pass(c)`` for c = 0, 1: each compiled alone
    in a probe kernel with the consumer a constant, so the SASS shows the barrier ids."""
    from course_utils import sass

    compiled = _compile(spliced + PROBE, "course_turn_wait_0")
    if reason := sass.unavailable_reason():
        from exercises import CannotCheck

        raise CannotCheck(f"it compiles; reading its SASS needs a disassembler: {reason}")
    per_function = sass.functions(sass.disassemble(compiled))
    return {(f, c): barriers(per_function.get(f"course_{f}_{c}", "")) for f, c in PROBE_CALLS}


def _said(ops) -> str:
    if not ops:
        return "no barrier instruction"
    words = {"SYNC": "bar.sync", "RED": "bar.red", "ARV": "bar.arrive"}
    return "; ".join(f"{words.get(mode, mode)} {'id in a register' if id is None else id}"
                     f"{'' if count is None else f', {count}'}" for mode, id, count in ops)


def protocol_error(ops) -> tuple[str, str] | None:
    """What is wrong with the turns the four calls make, as (message, hint); None: each
    consumer waits on its own barrier with bar.sync, the other one's pass (bar.arrive) completes
    it, 256 threads each. ``ops`` as :func:`probe` returns it. Consumer 1 passes once before its
    first turn and skips its last pass (attention.cu), so a protocol that holds these rules
    alternates the turns, consumer 0 first, and never blocks the passing warpgroup."""
    call = {key: f"{key[0]}({key[1]}) issues {_said(found)}" for key, found in ops.items()}
    for (f, c), found in ops.items():
        if any(id is None for _, id, _ in found):
            return (f"{call[f, c]}: with the consumer a constant, the barrier id is still not "
                    "one", "compute the id from the argument: PINGPONG_FIRST_ID + ... consumer")
    for c in (0, 1):
        wait, passing = ops["turn_wait", c], ops["turn_pass", c]
        if not wait:
            return (f"{call['turn_wait', c]}: consumer {c} never waits for its turn, so it "
                    "issues its matmuls at the same time as the other consumer",
                    "turn_wait waits on its consumer's barrier with bar.sync")
        if len(wait) > 1 or wait[0][0] not in ("SYNC", "RED"):
            return (f"{call['turn_wait', c]}: a turn begins with one wait (bar.sync) on this "
                    "consumer's barrier" + (" (bar.arrive does not wait)"
                                            if wait[0][0] == "ARV" else ""),
                    "one bar.sync in turn_wait, one bar.arrive in turn_pass")
        if not passing:
            return (f"{call['turn_pass', c]}: consumer {c} never hands the turn over, so the "
                    "other consumer waits for it forever (a hang)",
                    "turn_pass signals the other consumer's barrier with bar.arrive")
        if len(passing) > 1 or passing[0][0] != "ARV":
            return (f"{call['turn_pass', c]}: bar.sync (or bar.red) waits, so the warpgroup "
                    "that passes the turn stops until the other one takes it: its softmax no "
                    "longer runs under the other's matmuls (the turns serialise)",
                    "bar.arrive signals the barrier and goes on")
    for key, found in ops.items():
        mode, id, count = found[0]
        if id == 0:
            return (f"{call[key]}: barrier 0 is __syncthreads', which every thread of the block "
                    "uses", "the turns use PINGPONG_FIRST_ID and the id after it")
        if id >= 16:
            return (f"{call[key]}: a block has 16 named barriers, ids 0 to 15",
                    "PINGPONG_FIRST_ID + consumer and PINGPONG_FIRST_ID + 1 - consumer")
        if count != 2 * 128:
            what = ("every thread of the block (no count): 288 with the producer warp, which "
                    "has returned, so the barrier never completes (a hang)" if count is None
                    else "one warpgroup: the barrier completes with this consumer's own "
                    "threads, so nobody waits for the other" if count == 128 else
                    f"{count} threads, while a turn involves two warpgroups of 128")
            return (f"{call[key]}: the thread count is {what}",
                    "256: the waiting warpgroup's 128 threads and the passing one's 128")
    waits = {c: ops["turn_wait", c][0][1] for c in (0, 1)}
    passes = {c: ops["turn_pass", c][0][1] for c in (0, 1)}
    if waits[0] == waits[1]:
        return (f"both consumers wait on barrier {waits[0]}: one pass releases whichever "
                "arrives first, and a warpgroup's own pass and next wait can complete it "
                "alone, so the turns do not alternate",
                "each consumer waits on its own barrier: PINGPONG_FIRST_ID + consumer")
    for c in (0, 1):
        other = 1 - c
        if passes[c] == waits[c]:
            return (f"consumer {c} passes the turn to its own barrier {passes[c]}: consumer "
                    f"{other}, waiting on barrier {waits[other]}, is never released (a hang)",
                    "turn_pass signals the OTHER consumer's barrier: PINGPONG_FIRST_ID + 1 - "
                    "consumer")
        if passes[c] != waits[other]:
            return (f"consumer {c} passes on barrier {passes[c]}, but consumer {other} waits on "
                    f"barrier {waits[other]}: it is never released (a hang)",
                    "turn_pass(c) signals the barrier turn_wait(1 - c) waits on")
    return None


# --------------------------------------------------------------------------------------------
# The exercise
# --------------------------------------------------------------------------------------------


@exercise("hopper_attention.pingpong",
          title="The ping-pong's turns: two named barriers (CUDA, sm_90a)", stub=STUB,
          answers=("TURNS",), section="Seeing the overlap",
          before=["""# where step 4 calls your functions (attention.cu), then what sits above them
show(fwd.SOURCE, "if constexpr (PINGPONG) {", "u64 t0 = now();")
show(fwd.PRIMITIVES, "// ---- 1b. named barriers", "// ==== turns: begin")"""],
          intro="""
Step 4's two consumer warpgroups take turns at the tensor cores. In `attention.cu` (the cell
below shows it), consumer `c` calls `turn_wait(c)` before it issues a turn's matmuls (tile n's
`QKᵀ` and tile n − 1's `PV`) and `turn_pass(c)` right after issuing them; consumer 1 passes once
before its first turn, so consumer 0 goes first, and skips its pass after its last turn. The two
functions are yours: write them in inline PTX with **named barriers** (a block has 16, ids 0 to
15; 0 is `__syncthreads`'). A barrier completes when as many threads as its count have come to
it: `bar.sync` counts its threads and waits for the completion, `bar.arrive` counts them and
goes on.

* `turn_wait(c)` waits on consumer c's barrier, id `PINGPONG_FIRST_ID + c` (1 for consumer 0,
  2 for consumer 1), until the other consumer has passed the turn to it.
* `turn_pass(c)` signals the other consumer's barrier, id `PINGPONG_FIRST_ID + 1 − c`, and does
  **not** wait: the passing warpgroup goes on to its softmax while the other one's matmuls run.

The thread count of both is **256**: a turn completes when the waiting warpgroup's 128 threads
and the passing one's 128 have come (with 128, a warpgroup would complete the barrier by
itself). The id depends on `c`, a run-time value: pass it in a register (`"r"`).

The check splices your two functions into `attention.cuh` (between its `// ==== turns` markers)
and compiles step 4 for sm_90a with NVRTC on any machine. Its SASS must hold named barriers
(`BAR.SYNC` on an id other than 0, `BAR.ARV`); four probe kernels, `turn_wait(0)`,
`turn_wait(1)`, `turn_pass(0)`, `turn_pass(1)`, show which barrier each call names, with which
count, waiting or not: a protocol that hangs, lets both consumers issue at once or blocks the
passing one is named there. On a Hopper GPU it then runs step 4 in a child process (a hang
becomes a "not yet" after 20 seconds, not a frozen notebook) on the registry's cases against
SDPA, outputs poisoned with NaN first, and builds it with `TIMELINE = true`: in every recorded
block, consumer 0's turn k must be issued before consumer 1's turn k, and that before consumer
0's turn k + 1. Values alone cannot tell: with no turns at all (step 3) the output is just as
right, only the softmax no longer hides under the other warpgroup's matmuls.""")
def check_pingpong(code, report) -> None:
    from kernels.attention.hopper import fwd

    kernel_checks.expect_source(code, "TURNS")
    for name in ("turn_wait", "turn_pass"):
        expect(re.search(rf"\b{name}\s*\(\s*int\b", code) is not None,
               f"your code defines no {name}(int consumer)",
               "keep the stub's two functions and fill their bodies")
    spliced = program(code)
    step = fwd.STEPS[STEP]
    compiled = _compile(spliced, step.template(128))
    sass = sass_checks.sass_report(compiled)
    census = expect_named_barriers(sass.sass)
    sass_checks.expect_no_spills(sass, "the step-4 kernel")
    ops = probe(spliced)
    if wrong := protocol_error(ops):
        raise Mismatch(*wrong)
    calls = ", ".join(f"{f}({c}): {_said(ops[f, c])}" for f, c in PROBE_CALLS)
    verified = (f"{step.template(128)} compiles for sm_90a with your turns ({census}, "
                f"{sass.resources.registers} registers, no local memory); {calls}: each "
                "consumer waits on its own barrier and the other one's pass completes it")
    if reason := _gpu_reason():
        raise kernel_checks.cpu_verdict(
            "hopper_attention.pingpong", report, [verified],
            "that step 4 finishes, matches SDPA and alternates its turns on the GPU (the values "
            f"and the TIMELINE build's order of turns): {reason}")
    report.line(verified)
    result = kernel_checks.run_child("hopper_attention.pingpong", spliced, timeout=HANG_S * 4 + 240)
    balance = ("count the passes each barrier receives against the waits on it, consumer 1's "
               "first pass and its skipped last one included")
    if "hung" in result or "no answer after" in result.get("crash", ""):
        raise Mismatch(f"the kernel did not finish in {HANG_S} s on the case "
                       f"{result.get('hung') or result['case']!r}: does every wait have a "
                       "matching arrive?", balance)
    kernel_checks.expect_no_course_bug(result, "your turns")
    if "crash" in result:  # attention.cu's bounded mbarrier waits trap after a few seconds
        raise Mismatch(f"the kernel stopped with an error on the case {result['case']!r} "
                       f"({result['crash']}): a warpgroup stuck at a turn never frees its "
                       "ring slot, and the producer's bounded wait for it traps. Does every "
                       "wait have a matching arrive?", balance)
    kernel_checks.expect_child_ok(result, "check the barrier ids and counts")
    report.line(f"on this GPU: matches SDPA on {len(result['cases'])} cases "
                f"({', '.join(result['cases'])}); the TIMELINE build's turns alternate in all "
                f"{result['blocks']} recorded blocks ({result['turns']} turns each)")


def _gpu_reason() -> str | None:
    from kernels.attention.hopper import fwd

    if not env.HAS_CUDA:
        return "running it needs a Hopper GPU (sm_90); there is no CUDA GPU here"
    return fwd.gpu_reason(torch.cuda.get_device_capability())
