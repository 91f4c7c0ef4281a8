"""Exercises of lesson 05: the tensor-core matmul. Kernels the student writes: the shared-memory
K loop of step 2 and the swizzle of a tile loader (CUDA, through NVRTC), a ``tl.dot`` matmul
(Triton). Around them: the swizzle's offsets, shared-memory bytes per mma of a warp tile, native
or emulated from the SASS, a new tile configuration in the generated header. Each sits at the
end of the notebook section of its idea (``section=``)."""

from __future__ import annotations

import torch

from course_utils import env
from exercises import (
    CannotCheck,
    Mismatch,
    compare,
    exercise,
    expect,
    expect_triton_kernel,
    kernel_checks,
    needs,
)

# ldmatrix reads 8 rows of 16 bytes per phase; shared memory serves 32 banks of 4 bytes, i.e. 8
# groups of 16 bytes, per cycle: 8 rows in 8 different groups cost one wavefront, not several
BANK_GROUPS = 8


def _bank_group(offset: int) -> int:
    return (offset // 16) % BANK_GROUPS


# --------------------------------------------------------------------------------------------
SWIZZLE_STUB = '''
def swizzled_offset(row, chunk, row_bytes):
    """Byte offset, in a shared-memory slice of rows of row_bytes (64 or 128) bytes, where
    mma.cu stores the 16-byte chunk `chunk` of row `row` (the XOR swizzle)."""
    # a row holds chunks = row_bytes // 16 chunks of 16 bytes: 4 or 8
    ...
'''


@exercise("05.swizzle", title="The swizzle: 8 rows, 8 bank groups", stub=SWIZZLE_STUB,
          answers=("swizzled_offset",), section="The structure of an Ampere matmul", intro="""
One `ldmatrix` phase reads 8 rows of 16 bytes, all at the same logical chunk of K. Shared memory
serves 8 groups of 16 bytes (32 banks of 4 bytes) per cycle, and group = (offset / 16) mod 8. With
rows 64 bytes long, rows r and r + 2 land in the same group: a 4-way conflict (8-way with
128-byte rows). `mma.cu` stores chunk `c` of row `r` at chunk `c XOR ((r / (8 / CHUNKS)) mod
CHUNKS)` of that row (see `swizzled()` in `kernels/matmul/mma.cu`). Write the byte offset. The
check computes, for both row lengths, every (row, chunk) of a 64-row slice: each row's chunks
must stay in the row and not collide, the 8 rows of each `ldmatrix` phase must hit 8 different
bank groups, and the layout must be the one `mma.cu` uses (its cp.async stores and its ldmatrix
loads must agree). No GPU needed.""")
def check_swizzle(swizzled_offset, report) -> None:
    from kernels.matmul import mma

    for row_bytes in (64, 128):
        chunks = row_bytes // 16
        for row in range(64):
            got = [swizzled_offset(row, c, row_bytes) for c in range(chunks)]
            expect(all(isinstance(g, int) for g in got),
                   f"swizzled_offset({row}, 0, {row_bytes}) returned {got[0]!r}; expected an "
                   "int (a byte offset)", "use // and ^ on ints, << 4 to turn chunks into bytes")
            expected = sorted(row * row_bytes + 16 * c for c in range(chunks))
            expect(sorted(got) == expected,
                   f"row {row} of {row_bytes}-byte rows: chunks 0..{chunks - 1} go to byte "
                   f"offsets {got}; expected a permutation of {expected} (each chunk in its own "
                   "row, none sharing a place)",
                   "offset = row * row_bytes + 16 * (chunk XOR something below chunks)")
        for start in range(0, 64, 8):
            for c in range(chunks):
                rows = range(start, start + 8)
                groups = [_bank_group(swizzled_offset(r, c, row_bytes)) for r in rows]
                expect(len(set(groups)) == 8,
                       f"{row_bytes}-byte rows: the ldmatrix phase of rows {start}..{start + 7} "
                       f"at chunk {c} hits bank groups {groups}: a "
                       f"{max(groups.count(g) for g in groups)}-way conflict",
                       f"with {chunks} chunks a row, {8 // chunks} consecutive rows share a "
                       "16-byte-group pattern: XOR with (row / (8 / chunks)) % chunks, "
                       "not row % chunks")
        for row in range(64):
            for c in range(chunks):
                want = row * row_bytes + 16 * mma.swizzle(row, c, chunks)
                got = swizzled_offset(row, c, row_bytes)
                expect(got == want,
                       f"conflict-free, but not mma.cu's layout: swizzled_offset({row}, {c}, "
                       f"{row_bytes}) = {got}, mma.cu stores that chunk at {want}",
                       "cp.async (stores) and ldmatrix (loads) both call swizzled(): use its "
                       "XOR, chunk ^ ((row / (8 / chunks)) % chunks)")
    report.line("64- and 128-byte rows: every ldmatrix phase hits 8 bank groups (no conflict), "
                "and the layout is mma.cu's")


# --------------------------------------------------------------------------------------------
# ≈ 585 TFLOP/s (the bf16 mma.sync ceiling measured on an H100) / 132 SMs / ≈ 1.9 GHz ≈ 2,300
# FLOP per SM per clock = 0.57 m16n8k16 mma per clock; shared memory gives 128 B per clock
BYTES_BUDGET = 128 / 0.57
WARP_TILES = ((16, 8), (16, 16), (32, 32), (32, 64), (64, 32), (64, 64), (64, 128), (128, 64))

FEED_STUB = '''
def ldmatrix_bytes_per_mma(wm, wn):
    """Bytes a warp reads from shared memory (ldmatrix) per mma.sync it issues, for a wm x wn
    warp tile, over one k-step (every variant's mma reads 32 bytes of K)."""
    ...
'''


def _feed(wm: int, wn: int) -> float:
    mi, ni = wm // 16, wn // 8
    return (mi * 16 * 32 + ni * 8 * 32) / (mi * ni)


@exercise("05.feed", title="Can the warp tile feed the tensor cores?", stub=FEED_STUB,
          answers=("ldmatrix_bytes_per_mma",), section="The full kernel", intro="""
Per 32-byte k-step a warp of `mma.cu` loads MI = WM/16 fragments of A (16 rows × 32 bytes each)
and NI = WN/8 fragments of B (8 columns × 32 bytes each) from shared memory, then issues
MI × NI `mma.sync`, each fragment feeding several of them. Write the bytes read per mma.
Why it matters: an SM's shared memory delivers 128 bytes per clock, and at the H100's measured
bf16 ceiling (≈ 585 TFLOP/s over 132 SMs at ≈ 1.9 GHz) an SM issues ≈ 0.57 m16n8k16 mma per
clock, so a warp tile that needs more than ≈ 225 bytes per mma starves the tensor cores however
good the pipeline is. The check compares your numbers for eight warp tiles and prints which
ones can keep up. No GPU needed.""")
def check_feed(ldmatrix_bytes_per_mma, report) -> None:
    for wm, wn in WARP_TILES:
        got = ldmatrix_bytes_per_mma(wm, wn)
        want = _feed(wm, wn)
        expect(isinstance(got, int | float) and abs(got - want) < 1e-6,
               f"ldmatrix_bytes_per_mma({wm}, {wn}) = {got!r}; expected {want:g} "
               f"(MI = {wm // 16} A fragments of 512 B and NI = {wn // 8} B fragments of 256 B "
               f"for {wm // 16 * (wn // 8)} mma)",
               "(MI x 512 + NI x 256) bytes per k-step, shared by the MI x NI mma of that "
               "k-step")
    fed = [f"{wm}x{wn}" for wm, wn in WARP_TILES if _feed(wm, wn) <= BYTES_BUDGET]
    starved = [f"{wm}x{wn} ({_feed(wm, wn):.0f} B)" for wm, wn in WARP_TILES
               if _feed(wm, wn) > BYTES_BUDGET]
    report.line(f"at most ≈ {BYTES_BUDGET:.0f} B per mma on an H100: fed: {', '.join(fed)}; "
                f"starved: {', '.join(starved)}")
    report.line("this is why mma.cu's warp tiles are 64x64 (128 B per mma), and one reason the "
                "first mma kernel of the steps (32x32 warp tiles by default) stays far below "
                "the ceiling")


# --------------------------------------------------------------------------------------------
NATIVE_VARIANTS = ("bf16", "tf32", "int8", "int4", "fp8_e4m3_e4m3")
ARCHS = ("sm_89", "sm_90")

NATIVE_STUB = '''
# True: the variant's mma.sync is one tensor-core instruction of its own type on that GPU
# (native); False: ptxas turns it into conversions plus another instruction (emulated).
NATIVE = {
    #                 sm_89 (L4, 4090)   sm_90 (H100)
    "bf16":          {"sm_89": ...,      "sm_90": ...},
    "tf32":          {"sm_89": ...,      "sm_90": ...},
    "int8":          {"sm_89": ...,      "sm_90": ...},
    "int4":          {"sm_89": ...,      "sm_90": ...},
    "fp8_e4m3_e4m3": {"sm_89": ...,      "sm_90": ...},
}
'''


def _census_evidence(variant: str, arch: str) -> tuple[bool, str]:
    """(native?, the tensor-core instructions in the SASS) from a real compile of mma.cu for
    ``arch``: native when an instruction consumes the variant's own type (HMMA for 16-bit
    floats and tf32, QMMA for fp8, IMMA.16832 for int8 and IMMA.16864 .S4 for int4)."""
    from course_utils import sass
    from kernels.matmul import mma

    report = sass.report(mma.compile_mma(variant, arch=arch, output="cubin", verbose=False))
    spelled = {op: sass.variants(report.sass, op) for op in ("HMMA", "IMMA", "QMMA")}
    found = {name: n for counter in spelled.values() for name, n in counter.items()}
    v = mma.variant(variant)
    if v.int4:
        native = any(".S4" in name or "16864" in name for name in found)
    elif v.integer:
        native = any(name.startswith("IMMA") for name in found)
    elif v.a in (mma.F8_E4M3, mma.F8_E5M2):
        native = any(name.startswith("QMMA") for name in found)
    else:
        native = any(name.startswith("HMMA") for name in found)
    # the spelling carries the types the tensor cores were given: .E4M3 or .S4, or not
    return native, ", ".join(f"{n} {name}" for name, n in sorted(found.items())) or "no MMA"


@exercise("05.native", title="Native or emulated? Predict, then read the SASS",
          stub=NATIVE_STUB, answers=("NATIVE",), section="Every variant, from one source",
          intro="""
The same PTX `mma.sync` is not the same machine code everywhere: `ptxas` maps it to a
tensor-core instruction of the variant's own type where the GPU has one (HMMA for bf16/fp16/tf32,
IMMA for int8/int4, QMMA for fp8) and otherwise *emulates* it, converting the operands and using
another instruction. Using what the lesson showed (the SASS census and what Hopper uses instead
of `mma.sync` for its newest types), predict for an L4/4090 (sm_89) and an H100 (sm_90) which of
these five variants are native. The check compiles each for both architectures with NVRTC,
disassembles it (`course_utils.sass`) and shows the evidence for every wrong prediction. No GPU
needed.""")
def check_native(native, report) -> None:
    from course_utils import sass

    needs("nvrtc")
    if reason := sass.unavailable_reason():
        raise CannotCheck(reason)
    expect(isinstance(native, dict) and set(native) == set(NATIVE_VARIANTS),
           f"NATIVE has keys {sorted(native) if isinstance(native, dict) else native!r}; "
           f"expected exactly {list(NATIVE_VARIANTS)}", "keep the stub's keys, fill the values")
    for name in NATIVE_VARIANTS:
        expect(isinstance(native[name], dict) and set(native[name]) == set(ARCHS)
               and all(isinstance(native[name][a], bool) for a in ARCHS),
               f"NATIVE[{name!r}] is {native[name]!r}; expected {{'sm_89': True or False, "
               "'sm_90': True or False}", "replace each ... by True or False")
    wrong = []
    for name in NATIVE_VARIANTS:
        for arch in ARCHS:
            truth, evidence = _census_evidence(name, arch)
            if native[name][arch] != truth:
                said = "native" if native[name][arch] else "emulated"
                wrong.append(f"{name} on {arch}: you said {said}, the SASS says "
                             f"{'native' if truth else 'emulated'} ({evidence})")
    if wrong:
        raise Mismatch(f"{len(wrong)} of {len(NATIVE_VARIANTS) * len(ARCHS)} predictions "
                       "differ from the compiled code:\n" + "\n".join(wrong),
                       "read the types in each MMA's spelling: an emulated variant runs on "
                       "an instruction of another type (its operands converted first); "
                       "Hopper's new types come through wgmma, not mma.sync")
    report.line(f"all {len(NATIVE_VARIANTS) * len(ARCHS)} predictions match the SASS census of "
                "the compiled kernels:")
    for name in NATIVE_VARIANTS:  # the evidence, now that it cannot give the answer away
        for arch in ARCHS:
            truth, evidence = _census_evidence(name, arch)  # cached compiles: milliseconds
            report.line(f"  {name} on {arch}: {'native' if truth else 'emulated'}, {evidence}")


# --------------------------------------------------------------------------------------------
SHARED_LIMIT = 99 * 1024  # the most shared memory one block gets on sm_89 (L4, RTX 4090)
TILE_KEYS = ("BM", "BN", "WM", "WN", "BK_BYTES", "STAGES", "GROUP_M")

CONFIG_STUB = '''
import torch

# The generated header of mma.cu for the bf16 variant: the types are given, the tiles are yours.
MY_DEFINES = {
    "a_t": torch.bfloat16, "b_t": torch.bfloat16, "acc_t": "float", "out_t": torch.bfloat16,
    "INT4": False,
    "BM": ..., "BN": ...,   # thread-block tile of C
    "WM": ..., "WN": ...,   # warp tile of C
    "BK_BYTES": ...,        # K slice per pipeline stage, in bytes: 64 or 128
    "STAGES": ...,          # shared-memory ring depth
    "GROUP_M": 8,
}
'''


def _config_from(defines: dict):
    from kernels.matmul import mma

    try:
        return mma.Config(bm=defines["BM"], bn=defines["BN"], wm=defines["WM"],
                          wn=defines["WN"], bk_bytes=defines["BK_BYTES"],
                          stages=defines["STAGES"], group_m=defines["GROUP_M"])
    except ValueError as err:
        raise Mismatch(f"not a configuration mma.cu can use: {err}",
                       "BM, BN multiples of WM, WN; WM, WN multiples of 16; BK_BYTES 64 or "
                       "128; at least 2 stages") from None


@exercise("05.config", title="A new tile configuration for a 99 KB GPU", stub=CONFIG_STUB,
          answers=("MY_DEFINES",), section="Autotuning", intro="""
Every configuration the autotuner tries (`kernels/matmul/autotune.py`) was chosen for an H100,
with 227 KB of shared memory per block; an L4 or an RTX 4090 (sm_89) gives a block at most
99 KB (101,376 bytes), and the pipeline's ring takes STAGES × (BM + BN) × BK_BYTES of it. Write
the generated header's `defines` for a bf16 configuration that is in neither `CANDIDATES` nor
the default, fits in 99 KB, keeps the whole warp tile's accumulators in registers (no spills:
a warp tile of at most 64 × 64 with fp32 accumulators) and needs at most 65,536 registers per
block. The check compiles it for sm_90 with NVRTC and reads registers and stack from the CUBIN
(no GPU needed); on a GPU it checks the result against float64 on awkward shapes, then times it
at 4096³ against the same-run `mma.sync` ceiling (target: 60% of it) and the tuned
configuration, and prints a verdict.""")
def check_config(defines, report) -> None:
    from course_utils import nvrtc, sass
    from kernels.matmul import autotune, mma

    expect(isinstance(defines, dict), f"MY_DEFINES is a {type(defines).__name__}; expected a "
           "dict of header names to values", "keep the stub's dict")
    if missing := [k for k in (*mma.VARIANTS["bf16"].defines, *TILE_KEYS) if k not in defines]:
        raise Mismatch(f"MY_DEFINES lacks {', '.join(missing)}: mma.cu's header needs every "
                       "name the example header above its marker defines",
                       "keep every key of the stub")
    types = {k: defines[k] for k in mma.VARIANTS["bf16"].defines}
    expect(types == mma.VARIANTS["bf16"].defines,
           f"the types are {types}; the bf16 variant is {mma.VARIANTS['bf16'].defines}",
           "leave the stub's type lines as they are")
    config = _config_from(defines)
    known = [mma.DEFAULT_CONFIG, *autotune.CANDIDATES]
    expect(config not in known, f"{config.short()} is already one of the autotuner's "
           "configurations (or the default)", "change the stages, the K slice or a tile shape")
    expect(config.shared_bytes <= SHARED_LIMIT,
           f"the ring needs {config.shared_bytes:,} bytes of shared memory ({config.stages} "
           f"stages x ({config.bm} + {config.bn}) rows x {config.bk_bytes} B); an sm_89 block "
           f"gets at most {SHARED_LIMIT:,}",
           "fewer stages, a smaller BM or BN, or a 64-byte K slice")
    expect(config.wm * config.wn <= 64 * 64,
           f"a {config.wm}x{config.wn} warp tile holds {config.wm * config.wn // 32} fp32 "
           "accumulators per thread: with the fragments that is more than 255 registers",
           "keep WM x WN at most 64 x 64 for fp32 accumulators")
    needs("nvrtc")
    try:
        # mma.cu also holds the ceiling kernel: its own header names (not the matmul's) come
        # from mma.defines, so a later one does not make a correct answer fail
        theirs = {k: v for k, v in mma.defines("bf16").items()
                  if k not in mma.VARIANTS["bf16"].defines and k not in TILE_KEYS}
        compiled = nvrtc.compile(mma.SOURCE, mma.KERNEL, defines={**theirs, **defines},
                                 arch="sm_90", output="cubin", verbose=False)
    except nvrtc.CompileError as err:
        first = [ln for ln in str(err).splitlines() if "error" in ln][:3]
        raise Mismatch("mma.cu does not compile with these defines:\n"
                       + "\n".join(first or [str(err)]),
                       "the static_asserts at the top of mma.cu say what each value must "
                       "satisfy") from None
    res = next(r for r in sass.resources(compiled))
    expect(res.stack_bytes == 0,
           f"compiled for sm_90: {res.registers} registers and a {res.stack_bytes}-byte stack "
           "frame per thread (spills to local memory)", "a smaller warp tile")
    expect(res.registers * config.threads <= 65536,
           f"{res.registers} registers x {config.threads} threads = "
           f"{res.registers * config.threads:,} per block; an SM has 65,536",
           "fewer warps per block (a smaller block tile for the same warp tile)")
    report.line(f"{config.short()}: {config.shared_bytes:,} B of shared memory, "
                f"{config.warps} warps, {res.registers} registers a thread, no spills (sm_90)")
    if not env.HAS_CUDA:
        report.line("on a GPU this check also runs it on awkward shapes and times it against "
                    "the mma.sync ceiling")
        return
    _run_config(config, report)


def _run_config(config, report) -> None:
    from course_utils import timing
    from kernels.matmul import autotune, ceiling, mma

    limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    if config.shared_bytes > limit:
        raise CannotCheck(f"this GPU gives a block {limit:,} B of shared memory")
    if mma.gpu_reason("bf16", torch.cuda.get_device_capability()):
        raise CannotCheck(mma.gpu_reason("bf16", torch.cuda.get_device_capability()))
    for m, n, k in [(1, 1, 16), (200, 136, 272), (513, 257, 1024)]:
        a = (torch.randn(m, k, device="cuda") / k**0.25).to(torch.bfloat16)
        b = (torch.randn(n, k, device="cuda") / k**0.25).to(torch.bfloat16).t()
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        mma.launch("bf16", *mma.prepare("bf16", a, b), out, config)
        want = (a.double() @ b.double()).to(torch.bfloat16)
        compare(out, want, what=f"{m}x{n}x{k}", atol=2e-2, rtol=2e-2,
                hint="a NaN left means a tile was never written: check BM, BN against WM, WN")
    report.line("matches float64 at 1x1x16, 200x136x272 and 513x257x1024")
    n = 4096
    a, b = autotune.operands(mma.VARIANTS["bf16"], n, n, n)
    a, bt = mma.prepare("bf16", a, b)
    out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    flop = timing.matmul_flop(n, n, n)
    rates = {}
    for label, c in (("yours", config), ("tuned", autotune.best_config("bf16"))):
        t = timing.benchmark(mma.launch, "bf16", a, bt, out, c, name=label, min_time_s=0.2)
        rates[label] = timing.tflops(flop, t.median)
    top = ceiling.mma_ceiling("bf16")
    ratio = rates["yours"] / top
    verdict = "meets" if ratio >= 0.6 else "misses"
    report.line(f"4096³: {rates['yours']:.0f} TFLOP/s = {ratio:.0%} of the mma.sync ceiling "
                f"({top:.0f}, same run), {rates['yours'] / rates['tuned']:.2f}x the tuned "
                f"configuration; {verdict} the target (>= 60% of the ceiling)")


# --------------------------------------------------------------------------------------------
# Kernels the student writes: the shared-memory K loop (CUDA), the swizzle of a tile loader
# (CUDA), a tl.dot matmul (Triton). The CUDA ones are checked by kernel_checks: compiled and
# read on any machine, run on a GPU in a child process (the *_child functions below).
# --------------------------------------------------------------------------------------------
SMEM_CU = kernel_checks.CUDA_DIR / "smem_tiles.cu"
SMEM_TILE = 16
SMEM_STUB = '''
SMEM_LOOP = r"""
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // 1. stage this K slice: thread (ty, tx) stores A(row, k0 + tx) in as[ty][tx] and
        //    B(k0 + tx, col0 + ty) in bs[ty][tx]; 0.0f where that element is outside A or B
        // 2. wait until every thread of the block has stored its two elements
        // 3. acc += as[ty][k] * bs[tx][k] for k = 0 .. TILE - 1
        // 4. wait until every thread is done reading before the next slice overwrites them
    }
    // 5. store acc in C(row, col), if that element is inside C
"""
'''


@exercise("05.smem", title="Write the shared-memory K loop (CUDA)", stub=SMEM_STUB,
          answers=("SMEM_LOOP",), section="The steps to a fast matmul",
          before=["""from exercises import kernel_checks

print(kernel_checks.numbered("smem_tiles.cu"))  # the kernel your loop goes into"""], intro=f"""
Step 2's idea without its register blocking: a block of {SMEM_TILE} × {SMEM_TILE} threads
computes a {SMEM_TILE} × {SMEM_TILE} tile of C, one element per thread, and stages each K slice of
A and of B in shared memory, so that each element comes from global memory once per block instead
of once per thread. The kernel below (`exercises/cuda/smem_tiles.cu`) gives the shared arrays
and the indices; write the body it is missing: the K loop (stage the slice, with zeros outside the
matrices; `__syncthreads()`; the inner product from shared memory; `__syncthreads()` again) and
the store of C. Consecutive `tx` read consecutive addresses of A and of B (both are K-major), so
the staging loads are coalesced.

The check compiles it with NVRTC for sm_90 and reads the SASS (no GPU needed): shared-memory
stores (`STS`) and loads (`LDS`), a barrier (`BAR.SYNC`) between the stores and the loads and
between the loads and the next slice's stores, no local memory. On a GPU it runs your kernel in
a child process on awkward shapes (M, N, K not multiples of {SMEM_TILE}, 1 × 1 × 1), with a guard
zone after C, under compute-sanitizer's memcheck and racecheck, and times it at 2048³ against
step 1 and cuBLAS (fp32).""")
def check_smem(loop, report) -> None:
    kernel_checks.expect_source(loop, "SMEM_LOOP")
    program = kernel_checks.splice(SMEM_CU, loop)
    compiled = kernel_checks.compile_answer(program, "matmul_smem", "your kernel",
                                            defines={"TILE": SMEM_TILE})
    sass = kernel_checks.sass_report(compiled)
    expect(sass.count("STS") > 0, "the SASS has no store to shared memory (STS): nothing is "
           "staged", "as[ty][tx] = ...; bs[ty][tx] = ...; inside the K loop")
    expect(sass.count("LDS") > 0, "the SASS has no load from shared memory (LDS): the inner "
           "product does not read the staged tiles", "acc += as[ty][k] * bs[tx][k]")
    expect(sass.count("FFMA") > 0, "the SASS has no fp32 multiply-add (FFMA): no inner product",
           "acc += as[ty][k] * bs[tx][k] for every k of the slice")
    expect(sass.count("STG") > 0, "the SASS has no store to global memory (STG): C is never "
           "written", "c[(long long)row * N + col] = acc; when row < M and col < N")
    if race := kernel_checks.shared_memory_races(sass.sass):
        raise Mismatch(race, "__syncthreads() after the stores into as/bs, and again after the "
                             "inner product, before the next slice's stores")
    kernel_checks.expect_no_spills(sass, "your kernel")
    verified = (f"compiles for sm_90 ({sass.resources.registers} registers, "
                f"{sass.resources.shared_bytes:,} B of shared memory); the SASS stages the "
                f"tiles ({sass.count('STS')} STS), reads them ({sass.count('LDS')} LDS), with "
                f"a BAR.SYNC between the stores and the loads both ways; no local memory")
    if not env.HAS_CUDA:
        raise kernel_checks.cpu_verdict(
            "05.smem", report, [verified], "the values (against a float64 reference), the ragged "
            "edges, out-of-bounds accesses (memcheck) and races (racecheck): they need a GPU")
    report.line(verified)
    result = kernel_checks.run_child("05.smem", program)
    kernel_checks.expect_child_ok(result, "check the zero-fill of the staging at the edges "
                                          "and the guard on the store")
    report.line(f"matches float64 at {', '.join(result['cases'])}; nothing written past C")
    for line in kernel_checks.sanitize("05.smem", program):
        report.line(line)
    rate, naive, cublas = result["rate"], result["naive"], result["cublas"]
    report.line(f"2048³ fp32: {rate:.2f} TFLOP/s, {rate / naive:.1f}x step 1 (naive, "
                f"{naive:.2f}), {rate / cublas:.2f}x cuBLAS fp32 ({cublas:.1f}), same run")


def smem_child(program: str, small: bool) -> dict:
    """Run the spliced 05.smem kernel on the GPU (the child of kernel_checks)."""
    import json

    from course_utils import nvrtc, timing
    from kernels.matmul import steps

    kernel = nvrtc.kernel(program, "matmul_smem", defines={"TILE": SMEM_TILE}, verbose=False)
    shapes = [(17, 33, 5), (33, 20, 40)] if small else [
        (1, 1, 1), (17, 33, 5), (33, 65, 40), (64, 48, 32), (130, 70, 200)]

    def launch(a, bt, c, m, n, k):
        kernel(a, bt, c, m, n, k, grid=(-(-n // SMEM_TILE), -(-m // SMEM_TILE)),
               block=(SMEM_TILE, SMEM_TILE))

    for m, n, k in shapes:
        label = f"{m}x{n}x{k}"
        print(json.dumps({"case": label}), flush=True)
        a = torch.randn(m, k, device="cuda")
        bt = torch.randn(n, k, device="cuda")  # B column-major: the rows of bt are B's columns
        guard = 2 * SMEM_TILE * max(n, SMEM_TILE)  # whole tile rows of C past its end
        buffer = torch.full((m * n + guard,), float("nan"), device="cuda")
        c = buffer[:m * n].view(m, n)
        launch(a, bt, c, m, n, k)
        torch.cuda.synchronize()
        if not torch.isnan(buffer[m * n:]).all():
            return {"mismatch": f"{label}: your kernel wrote past the end of C",
                    "hint": "store C(row, col) only when row < M and col < N"}
        try:
            compare(c, (a.double() @ bt.double().t()).float(), what=label, atol=1e-4,
                    rtol=1e-4)
        except Mismatch as wrong:
            return {"mismatch": wrong.message, "hint": "a NaN left is an element never stored; "
                    "wrong values at the edges: the zero-fill of the staging"}
    verdict = {"ok": True, "cases": [f"{m}x{n}x{k}" for m, n, k in shapes]}
    if not small:
        n = 2048
        a, bt = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        c = torch.empty(n, n, device="cuda")
        flop = timing.matmul_flop(n, n, n)
        rate = lambda ms: timing.tflops(flop, ms)  # noqa: E731
        verdict["rate"] = rate(timing.benchmark(launch, a, bt, c, n, n, n).median)
        verdict["naive"] = rate(timing.benchmark(steps.matmul_step, "1_naive", a, bt.t(),
                                                 warmup=1).median)
        verdict["cublas"] = rate(timing.benchmark(torch.mm, a, bt.t()).median)
    return verdict


# --------------------------------------------------------------------------------------------
SWIZZLE_CU = kernel_checks.CUDA_DIR / "swizzle_loader.cu"
LOADER = {"ROWS": 64, "ROW_BYTES": 64}
SWIZZLE_CUDA_STUB = '''
OFFSETS = r"""
// where the copy stores 16-byte chunk `chunk` of row `row` (byte offset in the tile)
__host__ __device__ constexpr int store_offset(int row, int chunk) {
    return row * ROW_BYTES + chunk * 16;
}

// the byte offset lane `lane` of warp `warp` gives ldmatrix.x4 at k-step `step`: lanes 0-15
// point at rows 16 warp + 0..15 at chunk 2 step, lanes 16-31 at the same rows, chunk 2 step + 1
__host__ __device__ constexpr int ldmatrix_offset(int warp, int lane, int step) {
    return (16 * warp + lane % 16) * ROW_BYTES + (2 * step + lane / 16) * 16;
}
"""
'''


def _loader_tables(program: str) -> tuple[list[int], list[int]]:
    """(store_offset for every (row, chunk), ldmatrix_offset for every (warp, step, lane)),
    evaluated by NVRTC at compile time from the student's constexpr functions."""
    rows, chunks = LOADER["ROWS"], LOADER["ROW_BYTES"] // 16
    stores = [f"store_offset({r}, {c})" for r in range(rows) for c in range(chunks)]
    loads = [f"ldmatrix_offset({w}, {lane}, {s})" for w in range(rows // 16)
             for s in range(chunks // 2) for lane in range(32)]
    values = kernel_checks.constant_table(program, stores + loads)
    return values[:len(stores)], values[len(stores):]


@exercise("05.swizzle_cuda", title="Add the swizzle to a tile loader (CUDA)",
          stub=SWIZZLE_CUDA_STUB, answers=("OFFSETS",), section="The steps to a fast matmul",
          before=["""from exercises import kernel_checks

print(kernel_checks.numbered("swizzle_loader.cu"))  # the loader your two functions go into"""],
          intro="""
Step 3 stores A's tile in shared memory row after row and reads it with `ldmatrix`: with rows
of 64 bytes, the 8 rows one `ldmatrix` phase reads sit in 2 of the 8 bank groups, a 4-way
conflict. The loader below (`exercises/cuda/swizzle_loader.cu`) calls two functions for its
addresses: `store_offset(row, chunk)`, where the copy puts a 16-byte chunk, and
`ldmatrix_offset(warp, lane, step)`, the address each lane hands `ldmatrix.x4`. Add the swizzle
to both (`mma.cu`'s: chunk `c` of row `r` at chunk `c ^ ((r / (8 / CHUNKS)) % CHUNKS)`), so that
every phase reads 8 different bank groups and every lane still gets the element the `mma` expects.
Both are `constexpr`: the check has NVRTC evaluate them for every row, chunk, warp, lane and
k-step (no GPU needed), compiles the loader for sm_90 and reads its SASS (`LDSM`, no local
memory). On a GPU it runs the loader and compares what `ldmatrix` gave every lane with the
fragment layout of the PTX ISA.""")
def check_swizzle_cuda(offsets, report) -> None:
    kernel_checks.expect_source(offsets, "OFFSETS")
    program = kernel_checks.splice(SWIZZLE_CU, offsets)
    compiled = kernel_checks.compile_answer(program, "load_fragments", "the loader",
                                            defines=LOADER)
    header = "\n".join(f"constexpr int {k} = {v};" for k, v in LOADER.items())
    stores, loads = _loader_tables(f"{header}\nconstexpr int CHUNKS = ROW_BYTES / 16;\n{offsets}")
    rows, chunks, tile_bytes = LOADER["ROWS"], LOADER["ROW_BYTES"] // 16, 64 * 64
    where = {}
    for i, offset in enumerate(stores):
        r, c = divmod(i, chunks)
        expect(0 <= offset <= tile_bytes - 16 and offset % 16 == 0,
               f"store_offset({r}, {c}) = {offset}: outside the {tile_bytes}-byte tile or not a "
               "multiple of 16 (a 16-byte store there writes out of bounds or misaligned)",
               "row * ROW_BYTES + 16 * (a chunk between 0 and CHUNKS - 1)")
        expect(offset not in where, f"store_offset({r}, {c}) = store_offset{where.get(offset)} "
               f"= {offset}: two chunks stored in one place", "XOR permutes the chunks of a row")
        where[offset] = (r, c)
    for i, offset in enumerate(loads):
        w, rest = divmod(i, (chunks // 2) * 32)
        s, lane = divmod(rest, 32)
        r, c = 16 * w + lane % 16, 2 * s + lane // 16
        expect(offset == stores[r * chunks + c],
               f"ldmatrix_offset({w}, {lane}, {s}) = {offset}, but row {r}, chunk {c} (what "
               f"lane {lane} must point at) was stored at {stores[r * chunks + c]}: ldmatrix "
               "reads another element than the mma expects",
               "the loads must find each chunk where the copy stored it: the same XOR on both "
               "sides")
    for w in range(rows // 16):
        for s in range(chunks // 2):
            for phase in range(4):
                base = (w * (chunks // 2) + s) * 32 + 8 * phase
                groups = [(o // 16) % 8 for o in loads[base:base + 8]]
                expect(len(set(groups)) == 8,
                       f"warp {w}, k-step {s}: the ldmatrix phase of lanes {8 * phase}.."
                       f"{8 * phase + 7} reads bank groups {groups}, a "
                       f"{max(groups.count(g) for g in groups)}-way conflict",
                       "with 4 chunks a row, 2 consecutive rows share a 128-byte line: XOR "
                       "with (row / 2) % 4, not row % 4")
    sass = kernel_checks.sass_report(compiled)
    expect(sass.count("LDSM") > 0, "the SASS has no ldmatrix (LDSM)", "keep the given loader")
    kernel_checks.expect_no_spills(sass, "the loader")
    verified = ("store_offset and ldmatrix_offset agree for every row, chunk, warp, lane and "
                "k-step; every ldmatrix phase reads 8 bank groups (no conflict); the loader "
                f"compiles for sm_90 with {sass.count('LDSM')} LDSM and no local memory")
    report.line(verified)
    if not env.HAS_CUDA:
        # the two functions decide every address, and NVRTC has evaluated them all: what is
        # left for a GPU is the hardware's side, which the recorded run shows
        report.line("on a GPU this check also runs the loader and compares what ldmatrix hands "
                    "every lane with the fragment layout")
        for line in kernel_checks.recorded_lines("05.swizzle_cuda"):
            report.line(line)
        return
    kernel_checks.expect_child_ok(kernel_checks.run_child("05.swizzle_cuda", program),
                                  "the copy and ldmatrix must use the same swizzle")
    report.line("on this GPU every lane got from ldmatrix exactly its mma.sync A fragment")


def swizzle_child(program: str, small: bool) -> dict:
    """Run the spliced loader on the GPU and compare every lane's registers with the A fragment
    layout of m16n8k16 (the child of kernel_checks)."""
    import json

    from course_utils import nvrtc

    print(json.dumps({"case": "64x64-byte tile"}), flush=True)
    kernel = nvrtc.kernel(program, "load_fragments", defines=LOADER, verbose=False)
    rows, chunks = LOADER["ROWS"], LOADER["ROW_BYTES"] // 16
    words = torch.randint(-2**31, 2**31 - 1, (rows, chunks * 4), dtype=torch.int32,
                          device="cuda")  # the tile as 4-byte words (two bf16 each)
    out = torch.zeros(rows // 16, chunks // 2, 32, 4, dtype=torch.int32, device="cuda")
    kernel(words, out, grid=1, block=128)
    torch.cuda.synchronize()
    lane = torch.arange(32)
    for w in range(rows // 16):
        for s in range(chunks // 2):
            for j in range(4):  # register j: rows 0-7 / 8-15 (j % 2), chunk 2s / 2s + 1 (j // 2)
                row = 16 * w + 8 * (j % 2) + lane // 4
                want = words[row, 4 * (2 * s + j // 2) + lane % 4].cpu()
                got = out[w, s, :, j].cpu()
                if not torch.equal(got, want):
                    bad = int(torch.nonzero(got != want)[0])
                    return {"mismatch": f"warp {w}, k-step {s}, register {j}: lane {bad} got "
                                        f"{int(got[bad]):#x}, the fragment holds "
                                        f"{int(want[bad]):#x}"}
    return {"ok": True}


# --------------------------------------------------------------------------------------------
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


def _calls_tl_dot(kernel) -> bool:
    import ast
    import inspect
    import textwrap

    fn = getattr(kernel, "fn", kernel)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return True  # no source to read: the values and the launch decide
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "dot" for node in ast.walk(tree))


@exercise("05.triton_dot", title="A tl.dot matmul in Triton", stub=DOT_STUB,
          answers=("matmul_kernel", "matmul"), section="Triton's `tl.dot`", intro="""
The tiles of this lesson in Triton: write the kernel of `matmul` for the given tile. Program
`(pid_m, pid_n)` owns a `BLOCK_M × BLOCK_N` tile of C: build its row and column offsets with
`tl.arange`, pointers to a `BLOCK_M × BLOCK_K` slice of A and a `BLOCK_K × BLOCK_N` slice of B
from the strides, and loop over K: load both slices with masks (`other=0.0` past M, N and K),
`acc = tl.dot(a, b, acc)` into an fp32 accumulator, advance the pointers by `BLOCK_K` along K.
Store `acc` converted to C's dtype, masked at the edges. The check runs it (Triton's interpreter
on a CPU, on tiny shapes: 1 × 1 × 1, K not a multiple of 32, ragged M and N, a column-major B,
K = 0; fp16 and fp32, as the interpreter computes bf16 `tl.dot` wrongly) against `a @ b` in
float64, and makes sure a Triton kernel ran and calls `tl.dot`. On a GPU it adds bf16 and larger
shapes and times it at 4096³ fp16 against cuBLAS and the course's autotuned `tl.dot` kernel.""")
def check_triton_dot(matmul_kernel, matmul, report) -> None:
    device = env.DEFAULT_DEVICE
    dtypes = [torch.float16, torch.float32] + ([] if env.TRITON_INTERPRET else [torch.bfloat16])
    shapes = [(1, 1, 1), (5, 7, 3), (33, 17, 40), (40, 64, 64), (16, 16, 0)]
    if not env.TRITON_INTERPRET:
        shapes += [(300, 200, 500), (1000, 8, 24)]
    for dtype in dtypes:
        for m, n, k in shapes:
            a = (torch.randn(m, k, device=device) / max(k, 1) ** 0.25).to(dtype)
            b = (torch.randn(k, n, device=device) / max(k, 1) ** 0.25).to(dtype)
            if (m, n, k) == (33, 17, 40):
                b = b.t().contiguous().t()  # column-major: the strides say where B's rows are
            tol = 1e-5 if dtype == torch.float32 and env.TRITON_INTERPRET else 3e-2
            compare(matmul(a, b), (a.double() @ b.double()).to(dtype),
                    what=f"{str(dtype)[6:]} {m}x{n}x{k}", atol=tol, rtol=tol,
                    hint="mask rows >= M, columns >= N and the K slice past K (other=0.0); "
                         "advance a's pointers by BLOCK_K * stride_ak and b's by BLOCK_K * "
                         "stride_bk each step")
    a = torch.randn(33, 40, device=device).half()
    b = torch.randn(40, 17, device=device).half()
    expect_triton_kernel(matmul, (a, b), what="your matmul")
    expect(_calls_tl_dot(matmul_kernel), "the values are right, but matmul_kernel does not "
           "call tl.dot: the tile product runs on the CUDA cores, not the tensor cores",
           "acc = tl.dot(a, b, acc)")
    how = "Triton's interpreter" if env.TRITON_INTERPRET else "compiled Triton"
    report.line(f"matches float64 in {', '.join(str(d)[6:] for d in dtypes)} at "
                f"{', '.join(f'{m}x{n}x{k}' for m, n, k in shapes)} ({how})")
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
