"""Exercises of lesson 15: the kernels the student writes, in CUDA for sm_90a, spliced into the
lesson's own kernels: the parity wait of a two-slot TMA/mbarrier ring added to step 1
(``exercises/cuda/ring2.cu``), and the promotion of block-scaled fp8, each K tile's product
scaled and added to the running sum (``kernels/matmul/hopper/block_scaled.cu``). Both are
checked by :mod:`exercises.kernel_checks`: compiled, evaluated where NVRTC can evaluate them and
read in SASS on any machine; run on a Hopper GPU in a child process (the ``*_child`` functions
here). The other exercises of the lesson are in :mod:`exercises.hopper_matmul`; each sits at the end
of the notebook section of its idea (``section=``)."""

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
    result = _run_on_hopper("hopper_matmul.parity", program, report, verified,
                            "a wait that returns before the tile has landed reads the previous "
                            "tile: check the parity")
    report.line(f"on this GPU: matches float64 at {', '.join(result['cases'])} (bf16)")


def _run_on_hopper(id: str, program: str, report, verified: str, wrong: str) -> dict:
    """What the compiler and the SASS verified, then the kernel run in a child process on a
    Hopper GPU (its verdict); without one, the reference solution's recorded GPU result and a
    CannotCheck saying what was not verified."""
    if reason := _hopper_reason():
        raise kernel_checks.cpu_verdict(id, report, [verified],
                                        f"the values the kernel computes: {reason}")
    report.line(verified)
    result = kernel_checks.run_child(id, program, timeout=180)
    kernel_checks.expect_child_ok(result, wrong)
    return result


def _hopper_reason() -> str | None:
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


# --------------------------------------------------------------------------------------------
# A kernel the student writes: the promotion of block-scaled fp8 (CUDA, NVRTC for sm_90a)
# --------------------------------------------------------------------------------------------
PROMOTE_BEGIN, PROMOTE_END = "// ---- promote: begin", "// ---- promote: end"
PROMOTE_SASS = (  # what the kernel's census must hold, checked in order
    Need(("QGMMA",), "the kernel's SASS has no QGMMA (fp8 wgmma)", "keep the given kernel"),
    Need(("FFMA",), "the kernel's SASS has no FFMA: nothing adds the scaled product to d",
         "d[...] += part[...] * scale is one fused multiply-add per register"),
)
PROMOTE_STUB = '''
PROMOTE = r"""
// Add one K tile's product to the running sum, each value scaled: half h (0 or 1) of d takes
// the 64 registers of `part`, d[64 h + i] += part[i] x (A's scale of the register's row) x
// `block` (B's scale of the 128 x 128 block). Registers 4 j and 4 j + 1 hold the thread's row r
// (scale row_lo), registers 4 j + 2 and 4 j + 3 its row r + 8 (scale row_hi).
template <int BN>
__host__ __device__ constexpr void promote(float (&d)[BN / 2], const float (&part)[64], int h,
                                           float row_lo, float row_hi, float block) {
}
"""
'''
# the probe: d and part filled with small integers, promoted, one register read back (x 8, so
# that products of halves stay integers)
PROMOTE_PROBE = """
template <int BN>
__host__ __device__ constexpr int course_promoted(int i, int h, float lo, float hi, float block) {
    float d[BN / 2] = {};
    float part[64] = {};
    for (int r = 0; r < BN / 2; ++r) d[r] = float((r * 7) % 13 - 6);
    for (int r = 0; r < 64; ++r) part[r] = float((r * 5) % 11 - 5);
    promote<BN>(d, part, h, lo, hi, block);
    return int(d[i] * 8.0f);
}
"""
PROMOTE_CASES = ((256, 1, 2.0, -3.0, 0.5), (256, 0, 0.5, 4.0, -2.0), (128, 0, 1.5, -1.0, 2.0))


def _promoted(bn: int, h: int, lo: float, hi: float, block: float) -> list[int]:
    """What the probe must read: the promotion done in Python on the same integers."""
    d = [float((r * 7) % 13 - 6) for r in range(bn // 2)]
    part = [float((r * 5) % 11 - 5) for r in range(64)]
    for i in range(64):
        d[64 * h + i] += part[i] * (lo if i % 4 < 2 else hi) * block
    return [int(x * 8) for x in d]


def _promote_program(code: str) -> str:
    """block_scaled.cu with the student's code in place of its promote (begin to end markers);
    the digest of hopper.cuh rides along, so NVRTC's cache key changes when it does."""
    import hashlib

    from kernels.matmul.hopper import scaled, wgmma

    lines = scaled.BLOCK_SOURCE.read_text().splitlines()
    begin = next(i for i, ln in enumerate(lines) if ln.startswith(PROMOTE_BEGIN))
    end = next(i for i, ln in enumerate(lines) if ln.startswith(PROMOTE_END))
    digest = hashlib.sha256(wgmma.PRIMITIVES.read_bytes()).hexdigest()[:16]
    spliced = lines[:begin] + code.strip("\n").splitlines() + lines[end + 1:]
    return "\n".join(spliced) + f"\n// hopper.cuh {digest}\n"


def _promote_options() -> dict:
    from kernels.matmul.hopper import wgmma

    return dict(defines=wgmma.defines("fp8_e4m3"), arch=wgmma.ARCH,
                options=(f"-I{wgmma.PRIMITIVES.parent}",))


def _register_says(i: int, bn: int, h: int) -> str:
    if i // 64 != h:
        return f"register {i} is in half {i // 64}; this call promotes half {h} only"
    return f"register {i} = d[64 h + {i % 64}]: row {'r' if i % 4 < 2 else 'r + 8'}"


@exercise("hopper_matmul.promote", title="Promote a block-scaled K tile (CUDA, sm_90a)",
          stub=PROMOTE_STUB, answers=("PROMOTE",), section="fp8 with scales",
          before=["""from kernels.matmul.hopper import scaled

# the caller of your promote: the consumers' K loop of the block-scaled kernel
show(scaled.BLOCK_SOURCE, "// BM = 128 (two consumer", "if constexpr (TMA_STORE)")"""],
          intro="""
Block scales (A per 1 × 128, B per 128 × 128) change along K, so they cannot wait for the
epilogue: `block_scaled.cu` multiplies each K tile (128 fp8 values: one scale block) into a fresh
accumulator `part`, 128 columns at a time, and then **promotes** it: adds it, scaled, to the
running sum `d`. The cell above shows the consumers' loop that calls `promote` once per K tile
and half `h` of a 128 × 256 tile (once, `h = 0`, for 128 × 128). Write `promote`. Keep it
`constexpr` (plain arithmetic, no intrinsics): the check evaluates it with NVRTC on small
integers, with no GPU. Compute the two products `row_lo × block` and `row_hi × block` once, not
per register.

The check evaluates your `promote` at compile time for both tile widths, compiles the kernel with
it for sm_90a and reads its SASS (QGMMA, FFMA, no local memory: 128 + 64 accumulators a thread is
close to the consumers' 232 registers). On a Hopper GPU it runs the kernel in a child process on
ragged shapes against the float64 reference of the scaled product.""")
def check_promote(code, report) -> None:
    kernel_checks.expect_source(code, "PROMOTE")
    expect("promote" in code, "your code defines no promote function",
           "keep the stub's template <int BN> ... void promote(...) and fill its body")
    program = _promote_program(code)
    for bn, h, lo, hi, block in PROMOTE_CASES:
        got = compile_probes.constant_table(
            program + PROMOTE_PROBE, [f"course_promoted<{bn}>({i}, {h}, {lo}f, {hi}f, {block}f)"
                                      for i in range(bn // 2)], **_promote_options())
        want = _promoted(bn, h, lo, hi, block)
        for i, (theirs, ours) in enumerate(zip(got, want, strict=True)):
            expect(theirs == ours,
                   f"promote<{bn}>(d, part, h={h}, row_lo={lo}, row_hi={hi}, block={block}): "
                   f"d[{i}] = {theirs / 8:g}, expected {ours / 8:g} "
                   f"({_register_says(i, bn, h)})",
                   "d[64 * h + i] += part[i] * (i % 4 < 2 ? row_lo : row_hi) * block: add to d "
                   "(it holds the K tiles before this one), in half h only")
    from kernels.matmul.hopper import scaled

    tile = scaled.BLOCK_TILES[0]
    compiled = kernel_checks.compile_answer(program, tile.template(True), "your code",
                                            **_promote_options())
    sass = sass_checks.sass_report(compiled)
    sass_checks.expect_opcodes(sass, PROMOTE_SASS)
    sass_checks.expect_no_spills(sass, "the kernel")
    verified = (f"promote matches on {sum(c[0] // 2 for c in PROMOTE_CASES)} registers "
                f"(evaluated by NVRTC); {tile.template(True)} compiles for sm_90a "
                f"({sass.count('QGMMA')} QGMMA, {sass.count('FFMA')} FFMA, "
                f"{sass.resources.registers} registers, no local memory)")
    result = _run_on_hopper("hopper_matmul.promote", program, report, verified,
                            "right on the probe's integers but wrong on the GPU: check which "
                            "registers take row_lo and row_hi")
    report.line(f"on this GPU: matches float64 at {', '.join(result['cases'])} (fp8 e4m3, "
                "1 x 128 / 128 x 128 scales)")


def promote_child(program: str, small: bool) -> dict:
    """Run the block-scaled kernel with the student's promote on a Hopper GPU, each tile width,
    against the float64 reference (the child of kernel_checks)."""
    import json

    from course_utils import nvrtc
    from kernels.matmul.hopper import scaled
    from kernels.scaled_matmul import quantize_operands, scaled_matmul_eager

    shapes = [(200, 264, 352)] if small else [(256, 256, 512), (200, 264, 1152),
                                              (64, 512, 4096), (1, 8, 32)]
    e4m3 = torch.float8_e4m3fn
    for tile in scaled.BLOCK_TILES:
        kernel = nvrtc.kernel(program, tile.template(True), verbose=False, **_promote_options())
        for m, n, k in shapes:
            label = f"{tile.name} tile {m}x{n}x{k}"
            print(json.dumps({"case": label}), flush=True)
            a, bt = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
            a[0, :64] *= 100  # an outlier in one block of row 0
            args = quantize_operands(a, bt, e4m3, "block")
            out = torch.full((m, n), float("nan"), device="cuda").bfloat16()
            kernel(*scaled.block_arguments(tile, *args, out, True),
                   **scaled.block_launch_shape(tile, m, n, 0))
            torch.cuda.synchronize()
            want = scaled_matmul_eager(*(t.cpu() for t in args))
            try:
                compare(out.cpu().float(), want.float(), what=label, atol=3e-2 * want.abs()
                        .max().item(), rtol=3e-2)
            except Mismatch as wrong:
                return {"mismatch": wrong.message, "hint": "the constexpr probe passed, so "
                        "look at what differs on the GPU: the half h, the rows' scales"}
    return {"ok": True, "cases": [f"{m}x{n}x{k}" for m, n, k in shapes]}
