"""Exercise of lesson 17: the kernel the student writes, in CUDA for sm_90a, spliced into the
lesson's own block-scaled fp8 kernel: the promotion of each K tile's product, scaled and added
to the running sum (``kernels/matmul/hopper/block_scaled.cu``). It is checked by
:mod:`exercises.kernel_checks`: evaluated by NVRTC at compile time and read in SASS on any
machine; run on a Hopper GPU in a child process (:func:`promote_child`). The other exercises of
the lesson are in :mod:`exercises.hopper_measured`; each sits at the end of the notebook section
of its idea (``section=``). (Until lesson 16 was split in two this was hopper_matmul.promote;
the syllabus translates that id.)"""

from __future__ import annotations

import torch

from exercises import (
    Mismatch,
    compare,
    compile_probes,
    exercise,
    expect,
    kernel_checks,
    sass_checks,
)
from exercises.hopper_matmul_kernels import run_on_hopper
from exercises.sass_checks import Need

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


@exercise("hopper_measured.promote", title="Promote a block-scaled K tile (CUDA, sm_90a)",
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
    result = run_on_hopper("hopper_measured.promote", program, report, verified,
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
