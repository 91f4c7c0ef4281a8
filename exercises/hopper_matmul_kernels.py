"""Exercise of lesson 16: the kernel the student writes, in CUDA for sm_90a, spliced into the
lesson's own kernels: the parity wait of a two-slot TMA/mbarrier ring added to step 1
(``exercises/cuda/ring2.cu``). It is checked by :mod:`exercises.kernel_checks`: compiled,
evaluated where NVRTC can evaluate it and read in SASS on any machine; run on a Hopper GPU in a
child process (:func:`parity_child`). :func:`run_on_hopper` and :func:`hopper_reason` serve
lesson 17's kernel exercise too (:mod:`exercises.hopper_measured_kernels`). The other exercises
of the lesson are in :mod:`exercises.hopper_matmul`; each sits at the end of the notebook
section of its idea (``section=``)."""

from __future__ import annotations

import re

import torch

from course_utils import env
from exercises import (
    Mismatch,
    compare,
    compile_probes,
    exercise,
    expect,
    kernel_checks,
    sass_checks,
)
from exercises.sass_checks import Need

# --------------------------------------------------------------------------------------------
# A kernel the student writes: the parity wait of a two-slot ring (CUDA, NVRTC for sm_90a)
# --------------------------------------------------------------------------------------------
RING_CU = kernel_checks.CUDA_DIR / "ring2.cu"
RING_KERNEL = "wgmma_ring2<128, 128>"
RING_TILE = (128, 128)
RING_SASS = (  # what the kernel's census must hold, checked in order
    Need(("SYNCS",), "the kernel's SASS has no mbarrier wait (SYNCS)",
         "ring_wait must wait on the barrier it is given"),
    Need(("HGMMA",), "the kernel's SASS has no HGMMA", "keep the given kernel"),
)
PARITY_STUB = '''
RING_WAIT = r"""
// the parity of the phase of full[kt % 2] that completes when K tile kt has landed
__host__ __device__ constexpr u32 tile_parity(int kt) {
    return 0;  // right for the first tile of each slot only
}

// return once the mbarrier at `bar` has completed its phase of parity `parity`: spin on
// mbarrier.try_wait.parity.shared::cta.b64 (it may give up before the phase completes)
__device__ __forceinline__ void ring_wait(u64* bar, u32 parity) {
}
"""
'''


def _ring_program(code: str) -> str:
    """The exercise kernel with the student's code in; the digest of hopper.cuh rides along as
    a comment, so NVRTC's cache key changes when the included primitives do."""
    import hashlib

    from kernels.matmul.hopper import wgmma

    digest = hashlib.sha256(wgmma.PRIMITIVES.read_bytes()).hexdigest()[:16]
    return kernel_checks.splice(RING_CU, code) + f"// hopper.cuh {digest}\n"


def _ring_compile(program: str, name: str, **kwargs):
    from kernels.matmul.hopper import wgmma

    return kernel_checks.compile_answer(
        program, name, "your code", defines=wgmma.defines("bf16"), arch=wgmma.ARCH,
        options=(f"-I{wgmma.PRIMITIVES.parent}",), **kwargs)


def _ring_table(program: str, expressions: list[str]) -> list[int]:
    from kernels.matmul.hopper import wgmma

    return compile_probes.constant_table(program, expressions, defines=wgmma.defines("bf16"),
                                        arch=wgmma.ARCH,
                                        options=(f"-I{wgmma.PRIMITIVES.parent}",))


def _backward_branch(ptx: str) -> bool:
    """True when the PTX branches back to an earlier label: a loop."""
    seen = set()
    for line in ptx.splitlines():
        if label := re.match(r"^\s*(\$L\w+):", line):
            seen.add(label.group(1))
        elif target := re.search(r"\bbra(?:\.uni)?\s+(\$L\w+);", line):
            if target.group(1) in seen:
                return True
    return False


def _waits_on_result(ptx: str) -> bool:
    """True when the predicate that mbarrier.try_wait writes is read by something that depends
    on it (a branch on it, a selp with two different values, ...): the loop can see the answer."""
    lines = [ln.strip() for ln in ptx.splitlines()]
    for i, line in enumerate(lines):
        m = re.search(r"mbarrier\.try_wait\S*\s+(%?\w+)\s*,", line)
        if not m:
            continue
        pred = re.escape(m.group(1))
        for later in lines[i + 1:]:
            if not re.search(rf"(?<![\w%]){pred}\b", later):
                continue
            selp = re.match(r"selp\.\w+\s+[^,]+,\s*([^,]+),\s*([^,]+),", later)
            if selp and selp.group(1).strip() == selp.group(2).strip():
                continue  # selp d, x, x, p: the same either way
            return True
    return False


@exercise("hopper_matmul.parity", title="The parity wait of a two-slot ring (CUDA, sm_90a)",
          stub=PARITY_STUB, answers=("RING_WAIT",), section="The steps",
          before=["""from exercises import kernel_checks

print(kernel_checks.numbered("ring2.cu"))  # step 1 with two slots: your code goes in"""],
          intro="""
Step 1 loads a K tile, waits, multiplies, and only then loads the next: TMA and the tensor cores
take turns. With two slots, thread 0 can start tile kt + 1 into the other slot while the
warpgroup multiplies tile kt (the kernel below, `exercises/cuda/ring2.cu`). Each slot's "full"
mbarrier completes one phase per tile it receives, and a wait names the phase by its parity:
`mbarrier.try_wait.parity` returns true once the phase of that parity has completed (and may
return false before, after a time-out: so spin). Slot kt % 2 gets tiles kt % 2, kt % 2 + 2,
... so the parity of tile kt flips each time the ring wraps. Write `tile_parity` (`constexpr`:
the check evaluates it with NVRTC) and `ring_wait` (inline PTX, as `mbar_try_wait` in
`kernels/matmul/hopper/hopper.cuh` does; write the loop yourself).

The check compiles the kernel for sm_90a with NVRTC on any machine, evaluates `tile_parity` for
eight tiles, reads `ring_wait`'s PTX (the instruction, its parity operand, a loop on its
answer, and the barrier's address: the one given, in the `.shared` state space the instruction
names, not a generic pointer) and the kernel's SASS (`SYNCS` for the mbarrier wait, `HGMMA`,
no local memory). On a Hopper GPU it runs the kernel in a child process on ragged shapes and a
long K (the ring wraps many times) against a float64 reference. A wrong parity does not hang:
it lets the warps read a slot before its tile has landed.""")
def check_parity(code, report) -> None:
    kernel_checks.expect_source(code, "RING_WAIT")
    expect("mbar_wait(" not in code, "ring_wait calls hopper.cuh's mbar_wait, which already "
           "spins: write the loop yourself", "while (!done) { try_wait.parity ... }")
    expect("try_wait" in code, "your code does not issue mbarrier.try_wait.parity",
           "asm volatile with mbarrier.try_wait.parity.shared::cta.b64, as mbar_try_wait in "
           "hopper.cuh (or call mbar_try_wait in your loop)")
    program = _ring_program(code)
    parities = _ring_table(program, [f"tile_parity({kt})" for kt in range(8)])
    want = [(kt // 2) & 1 for kt in range(8)]
    expect(parities == want,
           f"tile_parity(0..7) = {parities}; the phases the tiles complete have parities {want}",
           "tile kt is phase kt / 2 of slot kt % 2's barrier: its parity is (kt / 2) & 1, "
           "flipping each time the ring wraps")
    # the probe: ring_wait on the middle one of three barriers, so that its PTX shows which
    # barrier, in which state space, the wait is given
    probe = program + ("extern \"C\" __global__ void course_wait(u32 parity) {\n"
                       "    __shared__ u64 bars[3];\n    ring_wait(&bars[1], parity);\n}\n")
    ptx = _ring_compile(probe, "course_wait", output="ptx").ptx
    waits = [ln for ln in ptx.splitlines() if "mbarrier.try_wait.parity" in ln]
    expect(bool(waits), "ring_wait's PTX has no mbarrier.try_wait.parity",
           "the instruction must be in ring_wait (inline asm, or mbar_try_wait)")
    if errors := sass_checks.state_space_errors(ptx, "course_wait"):
        raise Mismatch(f"an inline-PTX operand in the wrong state space: {errors[0]}. That is "
                       "undefined behaviour: it may happen to work on one GPU and not another",
                       "mbarrier.*.shared::cta takes a 32-bit address in shared memory: "
                       "\"r\"(smem_addr(bar)) (hopper.cuh's, i.e. __cvta_generic_to_shared), "
                       "not \"l\"(bar)")
    for address in sass_checks.ptx_addresses(ptx, "course_wait"):
        if "mbarrier" in address.op and address.offset is not None:
            expect(address.symbol and address.symbol.endswith("bars") and address.offset == 8,
                   f"ring_wait(&bars[1], ...) waits at {address.offset - 8:+d} bytes from "
                   f"bars[1] ({address.line}): another barrier than the one it is given (for "
                   "slot 1 of the ring, full[2]: one past the end of full)",
                   "pass the address of bar itself: smem_addr(bar)")
    expect(_waits_on_result(ptx),
           "ring_wait's loop does not depend on what try_wait.parity answered (its predicate "
           "is never read, or both values of the selp are the same): it stops after one try "
           "whether or not the phase has completed",
           "selp.u32 %0, 1, 0, p; and loop while it is 0")
    expect(all(re.search(r",\s*%r\d+;", ln) for ln in waits),
           f"ring_wait waits for a fixed parity ({waits[0].strip()}), not its argument",
           "pass parity to the instruction as a register operand: \"r\"(parity)")
    expect(_backward_branch(ptx), "ring_wait does not loop: try_wait.parity may return false "
           "before the phase completes (it waits a while, then gives up), and the warps would "
           "read a slot whose tile has not landed", "while (!try_wait(...)) {}")
    sass = sass_checks.sass_report(_ring_compile(program, RING_KERNEL))
    sass_checks.expect_opcodes(sass, RING_SASS)
    sass_checks.expect_no_spills(sass, "the kernel")
    verified = (f"tile_parity(0..7) = {parities}; ring_wait spins on mbarrier.try_wait.parity "
                "with its parity argument, on the barrier it is given, a .shared address to a "
                f".shared instruction (its PTX); {RING_KERNEL} compiles for sm_90a "
                f"({sass.count('SYNCS')} SYNCS, {sass.count('HGMMA')} HGMMA, "
                f"{sass.resources.registers} registers, no local memory)")
    result = run_on_hopper("hopper_matmul.parity", program, report, verified,
                           "a wait that returns before the tile has landed reads the previous "
                           "tile: check the parity")
    report.line(f"on this GPU: matches float64 at {', '.join(result['cases'])} (bf16)")


def run_on_hopper(id: str, program: str, report, verified: str, wrong: str) -> dict:
    """What the compiler and the SASS verified, then the kernel run in a child process on a
    Hopper GPU (its verdict); without one, the reference solution's recorded GPU result and a
    CannotCheck saying what was not verified."""
    if reason := hopper_reason():
        raise kernel_checks.cpu_verdict(id, report, [verified],
                                        f"the values the kernel computes: {reason}")
    report.line(verified)
    result = kernel_checks.run_child(id, program, timeout=180)
    kernel_checks.expect_child_ok(result, wrong)
    return result


def hopper_reason() -> str | None:
    if not env.HAS_CUDA:
        return "running it needs a Hopper GPU (sm_90); there is no CUDA GPU here"
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) != (9, 0):
        return f"running it needs a Hopper GPU (sm_90: wgmma, TMA); this GPU is sm_{major}{minor}"
    return None


def parity_child(program: str, small: bool) -> dict:
    """Run the two-slot ring on a Hopper GPU against float64 (the child of kernel_checks)."""
    import json

    from course_utils import nvrtc
    from kernels.matmul.hopper import tma, wgmma

    kernel = nvrtc.kernel(program, RING_KERNEL, defines=wgmma.defines("bf16"), arch=wgmma.ARCH,
                          options=(f"-I{wgmma.PRIMITIVES.parent}",), verbose=False)
    bm, bn = RING_TILE
    shapes = [(128, 128, 128), (200, 136, 64)] if small else [
        (128, 128, 64), (200, 136, 1024), (256, 384, 8192), (1, 1, 16)]
    for m, n, k in shapes:
        label = f"{m}x{n}x{k}"
        print(json.dumps({"case": label}), flush=True)
        a = (torch.randn(m, k, device="cuda") / k**0.25).bfloat16()
        bt = (torch.randn(n, k, device="cuda") / k**0.25).bfloat16()
        out = torch.full((m, n), float("nan"), device="cuda").bfloat16()
        tiles = -(-m // bm) * -(-n // bn)
        kernel(tma.encode(a, bm, "a"), tma.encode(bt, bn, "b.t()"), out, m, n, k, grid=tiles,
               block=128, shared_mem=2 * (bm + bn) * 128 + 1024)
        torch.cuda.synchronize()
        try:
            compare(out, (a.double() @ bt.double().t()).bfloat16(), what=label, atol=3e-2,
                    rtol=3e-2)
        except Mismatch as wrong:
            return {"mismatch": wrong.message, "hint": "wrong values: a wait returned before "
                    "its tile had landed (check the parity), or the slot was refilled early"}
    return {"ok": True, "cases": [f"{m}x{n}x{k}" for m, n, k in shapes]}
