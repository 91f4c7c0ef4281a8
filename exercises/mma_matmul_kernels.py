"""Exercises of lesson 07: the CUDA kernels the student writes. The shared-memory K loop of
step 4 and the swizzle of a tile loader, spliced into the given kernels of ``exercises/cuda/``
and checked by :mod:`exercises.kernel_checks`: compiled and read on any machine (the loop also
run thread by thread at compile time, :mod:`exercises.smem_probe`), run on a GPU in a child
process (the ``*_child`` functions here). The ``tl.dot`` matmul is in
:mod:`exercises.mma_matmul_triton`, the other exercises in :mod:`exercises.mma_matmul`; each sits at
the end of the notebook section of its idea (``section=``)."""

from __future__ import annotations

import json

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
    sentinels,
)
from exercises.sass_checks import Need
from exercises.smem_probe import SMEM_TILE, ProbeUnavailable, expect_smem_accesses

# --------------------------------------------------------------------------------------------
# The shared-memory K loop (CUDA)
# --------------------------------------------------------------------------------------------
SMEM_CU = kernel_checks.CUDA_DIR / "smem_tiles.cu"
SMEM_SASS = (  # what the census must hold, checked in order
    Need(("STS",), "the SASS has no store to shared memory (STS): nothing is staged",
         "as[ty][tx] = ...; bs[ty][tx] = ...; inside the K loop"),
    Need(("LDS",), "the SASS has no load from shared memory (LDS): the inner product does not "
         "read the staged tiles", "acc += as[ty][k] * bs[tx][k]"),
    Need(("FFMA",), "the SASS has no fp32 multiply-add (FFMA): no inner product",
         "acc += as[ty][k] * bs[tx][k] for every k of the slice"),
    Need(("STG",), "the SASS has no store to global memory (STG): C is never written",
         "c[(long long)row * N + col] = acc; when row < M and col < N"),
)
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


@exercise("mma_matmul.smem", title="Write the shared-memory K loop (CUDA)", stub=SMEM_STUB,
          answers=("SMEM_LOOP",), section="The steps to a fast matmul",
          before=["""from exercises import kernel_checks

print(kernel_checks.numbered("smem_tiles.cu"))  # the kernel your loop goes into"""], intro=f"""
Step 4's idea without its register blocking: a block of {SMEM_TILE} × {SMEM_TILE} threads
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
step 1 and cuBLAS (fp32).

Without a GPU the same cases run on this CPU (`course_utils.cuda_on_cpu`): every thread of every
block, in three orders, each load and store checked against the tensors' bounds and alignment,
races in shared and global memory reported; only the speed needs a GPU.""")
def check_smem(loop, report) -> None:
    kernel_checks.expect_source(loop, "SMEM_LOOP")
    program = kernel_checks.splice(SMEM_CU, loop)
    compiled = kernel_checks.compile_answer(program, "matmul_smem", "your kernel",
                                            defines={"TILE": SMEM_TILE})
    sass = sass_checks.sass_report(compiled)
    sass_checks.expect_opcodes(sass, SMEM_SASS)
    if race := sass_checks.shared_memory_races(sass.sass):
        raise Mismatch(race, "__syncthreads() after the stores into as/bs, and again after the "
                             "inner product, before the next slice's stores")
    sass_checks.expect_no_spills(sass, "your kernel")
    verified = [f"compiles for sm_90 ({sass.resources.registers} registers, "
                f"{sass.resources.shared_bytes:,} B of shared memory); the SASS stages the "
                f"tiles ({sass.count('STS')} STS), reads them ({sass.count('LDS')} LDS), with "
                f"a BAR.SYNC between the stores and the loads both ways; no local memory"]
    try:
        verified.append(expect_smem_accesses(loop))
        unprobed = ""
    except ProbeUnavailable as why:
        unprobed = (f"; the accesses of your loop (bounds, coalescing, bank conflicts): NVRTC "
                    f"could not run it at compile time ({why})")
    ran = (f"matches float64 at {', '.join(f'{m}x{n}x{k}' for m, n, k in SMEM_SHAPES)}; "
           "nothing written past C")
    if not env.HAS_CUDA:
        kernel_checks.decide_on_cpu(
            "mma_matmul.smem", program, report, verified, "the values (against a float64 "
            "reference), memcheck, racecheck and the speed need a GPU" + unprobed,
            SMEM_HINT, ran)
        report.line(kernel_checks.NOT_TIMED)
        return
    for line in verified:
        report.line(line)
    if unprobed:
        report.line("not verified" + unprobed.replace("; the accesses", " the accesses", 1)
                    + " (only the values and memcheck below)")
    result = kernel_checks.run_child("mma_matmul.smem", program)
    kernel_checks.expect_child_ok(result, SMEM_HINT)
    report.line(ran)
    for line in kernel_checks.sanitize("mma_matmul.smem", program):
        report.line(line)
    rate, naive, cublas = result["rate"], result["naive"], result["cublas"]
    report.line(f"2048³ fp32: {rate:.2f} TFLOP/s, {rate / naive:.1f}x step 1 (naive, "
                f"{naive:.2f}), {rate / cublas:.2f}x cuBLAS fp32 ({cublas:.1f}), same run")


SMEM_SHAPES = ((1, 1, 1), (17, 33, 5), (33, 65, 40), (64, 48, 32), (130, 70, 200))
SMEM_HINT = "check the zero-fill of the staging at the edges and the guard on the store"


def smem_child(program: str, small: bool) -> dict:
    """Run the spliced mma_matmul.smem kernel on the GPU (the child of kernel_checks)."""
    from course_utils import timing
    from kernels.matmul import steps

    kernel = kernel_checks.load(program, "matmul_smem", defines={"TILE": SMEM_TILE})
    device = kernel_checks.device()
    shapes = [(17, 33, 5), (33, 20, 40)] if small else SMEM_SHAPES

    def launch(a, bt, c, m, n, k):
        kernel(a, bt, c, m, n, k, grid=(-(-n // SMEM_TILE), -(-m // SMEM_TILE)),
               block=(SMEM_TILE, SMEM_TILE))

    for m, n, k in shapes:
        label = f"{m}x{n}x{k}"
        print(json.dumps({"case": label}), flush=True)
        a = torch.randn(m, k, device=device)
        bt = torch.randn(n, k, device=device)  # B column-major: the rows of bt are B's columns
        # whole tile rows of C past its end: a block's rows past M land there
        c, guard = sentinels.guarded(m * n, device, guard=2 * SMEM_TILE * max(n, SMEM_TILE))
        c = c.view(m, n)
        launch(a, bt, c, m, n, k)
        kernel_checks.synchronize()
        if not guard.isnan().all():
            return {"mismatch": f"{label}: your kernel wrote past the end of C",
                    "hint": "store C(row, col) only when row < M and col < N"}
        try:
            compare(c, (a.double() @ bt.double().t()).float(), what=label, atol=1e-4,
                    rtol=1e-4)
        except Mismatch as wrong:
            return {"mismatch": wrong.message, "hint": "a NaN left is an element never stored; "
                    "wrong values at the edges: the zero-fill of the staging"}
    verdict = {"ok": True, "cases": [f"{m}x{n}x{k}" for m, n, k in shapes]}
    if not small and device == "cuda":
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
# The swizzle of a tile loader (CUDA)
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
    values = compile_probes.constant_table(program, stores + loads)
    return values[:len(stores)], values[len(stores):]


@exercise("mma_matmul.swizzle_cuda", title="Add the swizzle to a tile loader (CUDA)",
          stub=SWIZZLE_CUDA_STUB, answers=("OFFSETS",), section="The steps to a fast matmul",
          before=["""from exercises import kernel_checks

print(kernel_checks.numbered("swizzle_loader.cu"))  # the loader your two functions go into"""],
          intro="""
Steps 9 and 10 store A's tile in shared memory row after row and read it with `ldmatrix`: with rows
of 64 bytes, the 8 rows one `ldmatrix` phase reads sit in 2 of the 8 bank groups, a 4-way
conflict. The loader below (`exercises/cuda/swizzle_loader.cu`) calls two functions for its
addresses: `store_offset(row, chunk)`, where the copy puts a 16-byte chunk, and
`ldmatrix_offset(warp, lane, step)`, the address each lane hands `ldmatrix.x4`. Add the swizzle
to both (`mma.cu`'s: chunk `c` of row `r` at chunk `c ^ ((r / (8 / CHUNKS)) % CHUNKS)`), so that
every phase reads 8 different bank groups and every lane still gets the element the `mma` expects.
Both are `constexpr`: the check has NVRTC evaluate them for every row, chunk, warp, lane and
k-step (no GPU needed), counts the bank conflicts of the copy's stores and of every `ldmatrix`
phase, compiles the loader for sm_90 and reads its SASS (`LDSM`, no local memory). On a GPU it
runs the loader and compares what `ldmatrix` gave every lane with the fragment layout of the PTX
ISA.""")
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
    # the copy's 16-byte stores: thread t stores chunk i = t + 128 j; a warp's 32 stores go in 4
    # phases of 8 threads, each conflict-free only where its 8 chunks land in 8 bank groups
    threads = 128
    for first in range(0, rows * chunks, 8):
        groups = [(stores[i] // 16) % 8 for i in range(first, first + 8)]
        expect(len(set(groups)) == 8,
               f"the copy's 16-byte stores of threads {first % threads}..{first % threads + 7} "
               f"(chunks {first}..{first + 7}: rows {first // chunks}..{(first + 7) // chunks}) "
               f"go to bank groups {groups}, a {max(groups.count(g) for g in groups)}-way "
               "conflict: the conflicts moved from the ldmatrix reads to the stores",
               "keep each row's chunks in its own 64 bytes (row * ROW_BYTES + 16 * a chunk): "
               "8 consecutive chunks are 2 rows, 8 bank groups; the XOR only permutes within "
               "a row")
    sass = sass_checks.sass_report(compiled)
    expect(sass.count("LDSM") > 0, "the SASS has no ldmatrix (LDSM)", "keep the given loader")
    sass_checks.expect_no_spills(sass, "the loader")
    verified = ("store_offset and ldmatrix_offset agree for every row, chunk, warp, lane and "
                "k-step; every ldmatrix phase reads 8 bank groups and every 8 threads of the "
                "copy store into 8 (no conflict either way); the loader "
                f"compiles for sm_90 with {sass.count('LDSM')} LDSM and no local memory")
    report.line(verified)
    if not env.HAS_CUDA:
        # the two functions decide every address, and NVRTC has evaluated them all: what is
        # left for a GPU is the hardware's side, which the recorded run shows
        report.line("on a GPU this check also runs the loader and compares what ldmatrix hands "
                    "every lane with the fragment layout")
        for line in kernel_checks.recorded_lines("mma_matmul.swizzle_cuda"):
            report.line(line)
        return
    kernel_checks.expect_child_ok(kernel_checks.run_child("mma_matmul.swizzle_cuda", program),
                                  "the copy and ldmatrix must use the same swizzle")
    report.line("on this GPU every lane got from ldmatrix exactly its mma.sync A fragment")


def swizzle_child(program: str, small: bool) -> dict:
    """Run the spliced loader on the GPU and compare every lane's registers with the A fragment
    layout of m16n8k16 (the child of kernel_checks)."""
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
