"""Exercises of lesson 06: NVRTC (a block-size sweep), occupancy by hand, and a branch per warp
(nvrtc.divergence: the student's thread-to-element map, evaluated by NVRTC at compile time, spliced
into ``exercises/cuda/even_odd.cu``; run in a child process on a GPU). The traps' exercises (a
kernel generic over dtype under PyTorch's flags, libcu++) moved with their sections to lesson
15 (:mod:`exercises.nvrtc_reference`)."""

from __future__ import annotations

import json

import torch

from course_utils import env
from exercises import (
    Mismatch,
    bandwidth_verdict,
    compare,
    compile_probes,
    exercise,
    expect,
    kernel_checks,
    load_cell,
    needs,
    sentinels,
)
from exercises.kernel_checks import compile_answer

ADD_CU = env.ROOT / "kernels" / "add" / "add.cu"


# --------------------------------------------------------------------------------------------
SWEEP_STUB = '''
import torch

from course_utils import nvrtc
from kernels.add import nvrtc as add_nvrtc

ADD = add_nvrtc.SOURCE  # kernels/add/add.cu


def add_variants(blocks, arch):
    """{BLOCK: compiled add_kernel of add.cu for float32 with that BLOCK} for each of blocks."""
    ...
'''


@exercise("nvrtc.sweep", title="Sweep the block size with NVRTC", stub=SWEEP_STUB,
          answers=("add_variants",), section="The header-generation workflow", intro="""
`kernels/add/add.cu` takes its block size from the generated header (`BLOCK`, also in
`__launch_bounds__(BLOCK)`). Write `add_variants`: one NVRTC compile per block size, for
float32 (`scalar_t`), for `arch`. Each compile takes milliseconds, which is what makes such a
sweep cheap. The check calls it with 64..1024 and reads each variant's PTX (`.maxntid`, the
launch bound); on a GPU it then times every variant and compares the best with the copy
bandwidth.""")
def check_sweep(add_variants, report) -> None:
    from course_utils import nvrtc

    needs("nvrtc")
    blocks = [64, 128, 256, 512, 1024]
    arch = None if env.HAS_CUDA else "sm_90"
    variants = add_variants(blocks, arch)
    expect(isinstance(variants, dict) and sorted(variants) == blocks,
           f"add_variants({blocks}, {arch!r}) returned "
           f"{sorted(variants) if isinstance(variants, dict) else type(variants).__name__}; "
           f"expected a dict with the keys {blocks}", "{b: nvrtc.compile(...) for b in blocks}")
    for block, compiled in variants.items():
        expect(isinstance(compiled, nvrtc.Compiled),
               f"variant {block} is a {type(compiled).__name__}, not what nvrtc.compile returns")
        defines = dict(compiled.defines)
        expect(defines.get("BLOCK") == block,
               f"variant {block} was compiled with BLOCK = {defines.get('BLOCK')!r}",
               "pass defines={'scalar_t': torch.float32, 'BLOCK': block}")
        expect(defines.get("scalar_t") in (torch.float32, "float"),
               f"variant {block} has scalar_t = {defines.get('scalar_t')!r}; expected float32")
    ptx = {b: compile_answer(ADD_CU, "add_kernel", f"BLOCK={b}", output="ptx",
                             defines=dict(c.defines)).ptx
           for b, c in variants.items()}
    bounds = {b: next((ln.split()[1].rstrip(",") for ln in p.splitlines() if ".maxntid" in ln),
                      None) for b, p in ptx.items()}
    expect(all(bounds[b] == str(b) for b in blocks), f"launch bounds in the PTX: {bounds}")
    report.line(f"{len(blocks)} variants; each PTX has .maxntid = its BLOCK")
    if not env.HAS_CUDA:
        report.line("on a GPU this check also times each variant against the copy bandwidth")
        return
    from course_utils import timing

    n = 1 << 28
    a, b, out = (torch.randn(n, device="cuda") for _ in range(3))
    speeds = {}
    for block, compiled in variants.items():
        kernel = nvrtc.load(compiled)
        ms = timing.benchmark(lambda k=kernel, bl=block: k(a, b, out, n, grid=-(-n // bl),
                                                          block=bl), device="cuda").median
        speeds[block] = timing.gbps(3 * n * 4, ms)
    report.line("GB/s by BLOCK: " + ", ".join(f"{k}: {v:,.0f}" for k, v in speeds.items()))
    best = max(speeds, key=speeds.get)
    kernel = nvrtc.load(variants[best])
    bandwidth_verdict(report, lambda: kernel(a, b, out, n, grid=-(-n // best), block=best),
                      (), 3 * n * 4)


# --------------------------------------------------------------------------------------------
OCCUPANCY_STUB = '''
# One SM of an H100 (compute capability 9.0), as CUDA's occupancy calculator sees it
MAX_WARPS = 64              # resident warps per SM
MAX_BLOCKS = 32             # resident blocks per SM
REGISTERS = 65536           # 32-bit registers per SM, in 4 sub-partitions of 16384
SUB_PARTITIONS = 4          # a warp's registers all come from one sub-partition
REGISTER_UNIT = 256         # registers are given to a warp in multiples of 256
SHARED = 233472             # bytes of shared memory per SM (228 KiB)
SHARED_RESERVED = 1024      # bytes the driver keeps per block
SHARED_UNIT = 128           # shared memory is given to a block in multiples of 128 bytes


def blocks_per_sm(threads, registers, shared):
    """Blocks of `threads` threads, `registers` registers a thread and `shared` bytes of shared
    memory that one SM holds at once: the fewest that warps, registers, shared memory and block
    slots each allow."""
    ...
'''
# (threads, registers a thread, shared bytes): each limit binding at least once, the rounding
# of each (threads not a multiple of 32, registers not a multiple of 8, shared memory just past a
# multiple of 128), the sub-partitions (200 registers: 2 warps each, not 10 warps an SM)
OCCUPANCY_CASES = ((256, 32, 0), (1024, 32, 0), (96, 16, 0), (33, 32, 0), (32, 16, 0),
                   (256, 64, 0), (256, 72, 0), (256, 128, 0), (128, 200, 0), (256, 200, 0),
                   (64, 255, 0), (128, 37, 0), (256, 32, 16384), (256, 32, 48 * 1024),
                   (128, 32, 100000), (64, 16, 5000), (64, 16, 7040), (64, 16, 7041),
                   (512, 40, 40000), (640, 48, 0), (1, 0, 0), (128, 0, 232448), (100, 16, 0),
                   (32, 200, 0), (64, 200, 0))
# The fixed cases above miss a unit read wrong: 37 registers round to 40 in steps of 4 a thread
# as in steps of 8, and 7041 + 1024 bytes to 8192 in steps of 128 as of 256. The sweep below
# crosses every boundary instead (about 12,000 launches, a few tens of ms): every register count
# at block sizes from 1 to 32 warps (counts 1-4 above a multiple of 8 are where 128 and 256
# registers a warp differ), shared memory on and one byte past every multiple of 128 with the
# driver's KiB (where rounding down, or to 256, differs) up to one byte past the most a block
# may have, and every block size from 1 to 1024 threads.
OCCUPANCY_THREADS = (32, 33, 64, 96, 128, 160, 192, 256, 384, 512, 640, 768, 1024)


def occupancy_sweep():
    """The check's launches after :data:`OCCUPANCY_CASES`, deterministic, simplest first."""
    from course_utils.occupancy import SM90

    for threads in OCCUPANCY_THREADS:
        for registers in range(256):
            yield threads, registers, 0
    for step in range(SM90.shared_reserved, SM90.shared + 1, SM90.shared_unit):
        for shared in (step - SM90.shared_reserved, step - SM90.shared_reserved + 1):
            if shared <= SM90.shared_per_block + 1:
                yield 32, 0, shared
    for registers in (0, 33, 64, 200, 255):
        for threads in range(1, 1025):
            yield threads, registers, 0


def _occupancy_hint(threads: int, registers: int, shared: int, limits: dict) -> str:
    """What decides this launch, and the rounded amounts it takes (not the answer's code)."""
    from course_utils.occupancy import SM90

    want = min(limits.values())
    binding = [name for name, blocks in limits.items() if blocks == want]
    lines = [f"here {' and '.join(binding)} decide: " + ", ".join(
        f"{name} allow {blocks}" for name, blocks in limits.items())]
    warps = -(-threads // 32)
    lines.append(f"{threads} threads are {warps} warp{'s' * (warps != 1)}")
    if registers:
        per_warp = -(-registers * 32 // SM90.register_unit) * SM90.register_unit
        lines.append(f"a warp of {registers} registers a thread needs {registers * 32} "
                     f"registers, given in multiples of {SM90.register_unit}: {per_warp}, "
                     f"{SM90.registers // SM90.sub_partitions // per_warp} warps in each of "
                     f"the {SM90.sub_partitions} sub-partitions")
    need = shared + SM90.shared_reserved
    rounded = -(-need // SM90.shared_unit) * SM90.shared_unit
    lines.append(f"a block takes {shared} + {SM90.shared_reserved} = {need} bytes of shared "
                 f"memory, given in multiples of {SM90.shared_unit}: {rounded}")
    return "; ".join(lines)


@exercise("nvrtc.occupancy", title="Occupancy, worked out by hand", stub=OCCUPANCY_STUB,
          answers=("blocks_per_sm",), section="Occupancy, worked out by hand", intro="""
Write `blocks_per_sm(threads, registers, shared)` for an H100 from the limits in the stub: the
blocks each resource allows, and the fewest of them. **Warps**: a block of 33 threads takes two
warps. **Registers**: a warp takes `registers × 32` rounded up to 256, from one of the 4
sub-partitions of 16384; count the warps one sub-partition holds, times 4. **Shared memory**:
each block takes its bytes plus the 1 KiB the driver keeps, rounded up to 128. **Slots**: 32
blocks. The check compares your function with `course_utils.occupancy` (itself checked against
CUDA's calculator, `cuda_occupancy.h`, by the tests) on 25 launches chosen so that each rule
decides at least one of them, then on about 12,000 more that cross every rounding boundary:
each register count from 0 to 255, shared memory on and just past every step of 128 bytes,
every block size from 1 to 1024 threads.""")
def check_occupancy(blocks_per_sm, report) -> None:
    import itertools

    from course_utils import occupancy

    expect(callable(blocks_per_sm), f"blocks_per_sm is a {type(blocks_per_sm).__name__}, not a "
           "function", "def blocks_per_sm(threads, registers, shared): ...")
    names = set(getattr(getattr(blocks_per_sm, "__code__", None), "co_names", ()))
    expect(not names & {"occupancy", "limits_of", "cudaOccupancyMaxActiveBlocksPerMultiprocessor"},
           "blocks_per_sm calls a calculator instead of applying the rules", "work out each "
           "limit from the constants of the stub: warps, registers, shared memory, block slots")
    count = 0
    for threads, registers, shared in itertools.chain(OCCUPANCY_CASES, occupancy_sweep()):
        got = blocks_per_sm(threads, registers, shared)
        limits = occupancy.limits_of(threads, registers, shared)
        want = min(limits.values())
        count += 1
        if got != want:
            swept = "" if count <= len(OCCUPANCY_CASES) else (
                f" (launch {count} of the check: the {len(OCCUPANCY_CASES)} fixed ones passed)")
            expect(False, f"{threads} threads, {registers} registers a thread, {shared} bytes "
                   f"of shared memory: you say {got} blocks per SM, the calculator {want}{swept}",
                   _occupancy_hint(threads, registers, shared, limits))
    report.line(f"matches CUDA's occupancy rules on {count} launches: {len(OCCUPANCY_CASES)} "
                "chosen so that each rule decides one, then every register count 0-255, shared "
                "memory on and just past each 128-byte step, every block size 1-1024 (warps, "
                "registers by sub-partition, shared memory with the reserved KiB, block slots)")


# --------------------------------------------------------------------------------------------
EVEN_ODD_CU = kernel_checks.CUDA_DIR / "even_odd.cu"
DIVERGENCE_STUB = '''
ELEMENT_OF = r"""
// The element thread t handles (t = blockIdx.x * 256 + threadIdx.x). As given, thread t takes
// element t: in every warp the even lanes take one side of the branch, the odd lanes the other.
__host__ __device__ constexpr long long element_of(long long t) {
    return t;
}
"""
'''
DIVERGENCE_THREADS = 256
PROBED_BLOCKS = 2  # element_of is evaluated for every thread of this many blocks
# n: empty, one element, a warp and a bit, the end inside a warp of either parity, several blocks
DIVERGENCE_LENGTHS = (0, 1, 2, 31, 33, 63, 65, 255, 257, 1000, 4099, 1 << 20)
CPU_DIVERGENCE_MAX = 1 << 16
DIVERGENCE_SMALL = (4099,)
DIVERGENCE_HINT = ("give each warp 32 elements of one parity, and keep the pair of warps 2k, "
                   "2k + 1 on the same 64 elements: warp 2k the even ones, warp 2k + 1 the odd "
                   "ones (element 64 (t / 64) + 2 (t % 32) + (t / 32) % 2)")


def _element_table(element_of: str) -> list[int]:
    """element_of(t) for every thread of the first PROBED_BLOCKS blocks, evaluated by NVRTC at
    compile time (no GPU)."""
    threads = PROBED_BLOCKS * DIVERGENCE_THREADS
    return compile_probes.constant_table(element_of, [f"element_of({t})"
                                                      for t in range(threads)])


def expect_warp_uniform(elements: list[int]) -> None:
    """Mismatch unless the mapping sends each block's threads onto its own elements (each
    once), each warp onto elements of one parity, within 64 neighbouring elements."""
    n = DIVERGENCE_THREADS
    for b in range(len(elements) // n):
        got = elements[b * n:(b + 1) * n]
        want = set(range(b * n, (b + 1) * n))
        missing, seen = sorted(want - set(got)), set()
        twice = next((e for e in got if e in seen or seen.add(e)), None)
        outside = next((e for e in got if e not in want), None)
        expect(outside is None, f"block {b}'s threads must take elements {b * n}..{(b + 1) * n - 1}"
               f" (the launch has ceil(n / {n}) blocks), but thread "
               f"{b * n + got.index(outside) if outside is not None else 0} takes element "
               f"{outside}", DIVERGENCE_HINT)
        expect(twice is None and not missing, f"block {b}: element {twice} is taken by two "
               f"threads and element {missing[0] if missing else '?'} by none",
               DIVERGENCE_HINT)
    for w in range(len(elements) // 32):
        lanes = elements[32 * w:32 * w + 32]
        parities = {e % 2 for e in lanes}
        expect(len(parities) == 1, f"warp {w} (threads {32 * w}..{32 * w + 31}) takes elements "
               f"{lanes[:4]}...: both even and odd ones, so it runs both loops one after the "
               "other, half its lanes idle in each", DIVERGENCE_HINT)
        spread = max(lanes) - min(lanes)
        expect(spread < 64, f"warp {w} takes elements {min(lanes)}..{max(lanes)}: its 32 loads "
               f"spread over {spread + 1} floats ({4 * (spread + 1)} bytes) where 64 floats "
               "hold them, so each load of the warp touches more memory lines than it needs",
               DIVERGENCE_HINT)


@exercise("nvrtc.divergence", title="Branch per warp, not per lane", stub=DIVERGENCE_STUB,
          answers=("ELEMENT_OF",), section="Warp divergence",
          before=["""from exercises import kernel_checks

print(kernel_checks.numbered("even_odd.cu"))  # the kernel your element_of goes into"""],
          intro=f"""
`even_odd` (below) gives even elements one loop and odd elements another, as much work each.
With thread `t` on element `t`, every warp holds both kinds, and runs both loops one after the
other. Rewrite `element_of(t)` so that every warp's 32 threads take elements of one parity,
each block's {DIVERGENCE_THREADS} threads still take its {DIVERGENCE_THREADS} elements (each
once), and a warp's elements stay within 64 neighbouring floats (two 128-byte lines). The kernel
itself stays as it is: only which thread does which element changes.

The check has NVRTC evaluate your `element_of` for every thread of two blocks at compile time
(no GPU needed): every element once, one parity per warp, 64 floats per warp at most; it
compiles the kernel for sm_90 and reads its SASS. On a GPU it runs it on n = 0, 1, 31, 33, 65,
..., 2^20 in a child process (`x` inside NaN, `y` fenced), under compute-sanitizer's memcheck,
and times it against the lane-divergent original.

Without a GPU the same cases run on this CPU (`course_utils.cuda_on_cpu`): every thread of every
block, in three orders, each load and store checked against the tensors' bounds and alignment,
races in shared and global memory reported; only the speed needs a GPU.""")
def check_divergence(element_of, report) -> None:
    from exercises import sass_checks

    kernel_checks.expect_source(element_of, "ELEMENT_OF")
    program = kernel_checks.splice(EVEN_ODD_CU, element_of)
    found = sass_checks.sass_report(compile_answer(program, "even_odd", "the kernel"))
    sass_checks.expect_no_spills(found, "the kernel")
    expect_warp_uniform(_element_table(element_of))
    verified = (f"element_of, evaluated by NVRTC for the {PROBED_BLOCKS * DIVERGENCE_THREADS} "
                f"threads of {PROBED_BLOCKS} blocks: each block's elements once each, one "
                "parity per warp, 64 floats per warp at most; the kernel compiles for sm_90 "
                f"({found.resources.registers} registers, no local memory)")
    ran = (f"matches the reference on n = {', '.join(map(str, _divergence_lengths()))} (x "
           "inside NaN, nothing written outside y)")
    if not env.HAS_CUDA:
        kernel_checks.decide_on_cpu(
            "nvrtc.divergence", program, report, [verified], "the values, compute-sanitizer "
            "memcheck and the time against the lane-divergent kernel need a GPU",
            DIVERGENCE_HINT, ran)
        report.line(kernel_checks.NOT_TIMED)
        return
    report.line(verified)
    kernel_checks.expect_child_ok(kernel_checks.run_child("nvrtc.divergence", program),
                                  DIVERGENCE_HINT, "an element past n: element_of must keep "
                                  "block b's threads on elements 256 b .. 256 b + 255")
    report.line(f"{ran} (in a child process)")
    for line in kernel_checks.sanitize("nvrtc.divergence", program, ("memcheck",)):
        report.line(line)
    _time_divergence(program, report)


def _time_divergence(program: str, report) -> None:
    from course_utils import nvrtc, timing

    stub = load_cell(DIVERGENCE_STUB, "stub_04_divergence")["ELEMENT_OF"]
    original = nvrtc.kernel(kernel_checks.splice(EVEN_ODD_CU, stub), "even_odd", verbose=False)
    yours = nvrtc.kernel(program, "even_odd", verbose=False)
    n = 1 << 24
    x, y = torch.randn(n, device="cuda"), torch.empty(n, device="cuda")
    grid = -(-n // DIVERGENCE_THREADS)
    ms = {name: timing.benchmark(lambda k=k: k(x, y, n, grid=grid, block=DIVERGENCE_THREADS),
                                 name=name, device="cuda").median
          for name, k in (("yours", yours), ("lane-divergent", original))}
    ratio = ms["lane-divergent"] / ms["yours"]
    report.line(f"time on {n:,} elements: yours {timing.format_ms(ms['yours'])}, the "
                f"lane-divergent original {timing.format_ms(ms['lane-divergent'])}: "
                f"{ratio:.2f}x " + ("(about 2x, as expected: each warp now runs one loop)"
                                    if ratio >= 1.6 else "(expected about 2x: each warp "
                                    "should run one loop, not both; a busy GPU shrinks it)"))


def _divergence_lengths() -> tuple[int, ...]:
    """:data:`DIVERGENCE_LENGTHS`, on a CPU without the largest (256 steps an element, one
    thread at a time: the small ones already cross every block and warp boundary)."""
    return DIVERGENCE_LENGTHS if env.HAS_CUDA else tuple(
        n for n in DIVERGENCE_LENGTHS if n <= CPU_DIVERGENCE_MAX)


def even_odd_reference(x: torch.Tensor) -> torch.Tensor:
    """What even_odd computes, in PyTorch (sin and cos for __sinf and __cosf: after 256
    contracting steps they agree to about 1e-6)."""
    even = torch.arange(x.numel(), device=x.device) % 2 == 0
    y = x.clone()
    for _ in range(256):
        y = torch.where(even, torch.sin(y), torch.cos(y)) + 0.5
    return y


def divergence_child(source: str, small: bool) -> dict:
    """The GPU child of nvrtc.divergence: the spliced kernel on :data:`DIVERGENCE_LENGTHS`
    (``small``: exact allocations, for compute-sanitizer)."""
    kernel, device = kernel_checks.load(source, "even_odd"), kernel_checks.device()
    for n in DIVERGENCE_SMALL if small else _divergence_lengths():
        label = f"n={n}"
        print(json.dumps({"case": label}), flush=True)  # the parent names it if we crash
        made = torch.randn(n, device=device)
        if small:
            x, y, outside = made, torch.empty(n, device=device), (lambda: None)
        else:
            x = sentinels.poisoned(made, pad=64)
            y, outside = sentinels.fenced(n, device, pad=64)
        kernel(x, y, n, grid=max(1, -(-n // DIVERGENCE_THREADS)), block=DIVERGENCE_THREADS)
        kernel_checks.synchronize()
        if where := outside():
            return {"mismatch": f"{label}: the kernel wrote {where}", "hint": DIVERGENCE_HINT}
        try:
            compare(y, even_odd_reference(made), what=label, atol=1e-4, rtol=1e-4)
        except Mismatch as wrong:
            return {"mismatch": wrong.message, "hint": DIVERGENCE_HINT}
    return {"ok": True}


# lesson 06's assignment, a module of its own (the loader imports nvrtc*.py only)
from exercises import tiled_matmul  # noqa: E402, F401  (registers nvrtc.tiled_matmul)
