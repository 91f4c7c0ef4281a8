"""Exercises of lesson 08: one ``mma.sync`` source in every variant, on paper and in the
compiler's output: shared-memory bytes per mma of a warp tile, native or emulated from the
SASS, a new tile configuration in the generated header. Each sits at the end of the notebook
section of its idea (``section=``). Before the split of lesson 07 (issue 24) these were
05.feed, 05.native and 05.config."""

from __future__ import annotations

import torch

from course_utils import env
from exercises import CannotCheck, Mismatch, compare, exercise, expect, needs

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


@exercise("mma_variants.feed", title="Can the warp tile feed the tensor cores?", stub=FEED_STUB,
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


@exercise("mma_variants.native", title="Native or emulated? Predict, then read the SASS",
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


@exercise("mma_variants.config", title="A new tile configuration for a 99 KB GPU", stub=CONFIG_STUB,
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
