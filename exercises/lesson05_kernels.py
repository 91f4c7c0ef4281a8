"""Exercises of lesson 05: the kernels the student writes. The shared-memory K loop of step 4
and the swizzle of a tile loader (CUDA, spliced into the given kernels of ``exercises/cuda/``
and checked by :mod:`exercises.kernel_checks`: compiled and read on any machine, run on a GPU in
a child process, the ``*_child`` functions here), and a ``tl.dot`` matmul (Triton). The other
exercises of the lesson are in :mod:`exercises.lesson05`; each sits at the end of the notebook
section of its idea (``section=``)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import torch

from course_utils import env
from exercises import (
    Mismatch,
    compare,
    compile_probes,
    exercise,
    expect,
    expect_triton_kernel,
    kernel_checks,
    sass_checks,
    triton_checks,
    triton_launches,
)
from exercises.sass_checks import Need
from exercises.triton_checks import fenced, interpreted_memory

# --------------------------------------------------------------------------------------------
# The shared-memory K loop (CUDA)
# --------------------------------------------------------------------------------------------
SMEM_CU = kernel_checks.CUDA_DIR / "smem_tiles.cu"
SMEM_TILE = 16
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


@exercise("05.smem", title="Write the shared-memory K loop (CUDA)", stub=SMEM_STUB,
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
step 1 and cuBLAS (fp32).""")
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
        verified.append(_expect_smem_accesses(loop))
        unprobed = ""
    except _NoProbe as why:
        unprobed = (f"; the accesses of your loop (bounds, coalescing, bank conflicts): NVRTC "
                    f"could not run it at compile time ({why})")
    if not env.HAS_CUDA:
        raise kernel_checks.cpu_verdict(
            "05.smem", report, verified, "the values (against a float64 reference), the ragged "
            "edges, out-of-bounds accesses (memcheck) and races (racecheck): they need a GPU"
            + unprobed)
    for line in verified:
        report.line(line)
    if unprobed:
        report.line("not verified" + unprobed.replace("; the accesses", " the accesses", 1)
                    + " (only the values and memcheck below)")
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
        # whole tile rows of C past its end: a block's rows past M land there
        c, guard = kernel_checks.guarded(m * n, "cuda", guard=2 * SMEM_TILE * max(n, SMEM_TILE))
        c = c.view(m, n)
        launch(a, bt, c, m, n, k)
        torch.cuda.synchronize()
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
# The 05.smem probe: every thread of a block runs the student's loop at compile time (NVRTC
# evaluates it as a constexpr function; a, b, c, as and bs record what is read and written),
# so that any machine sees its accesses: bounds, each element once per block, coalescing, banks,
# no read of a tile element no thread stored, no more K steps than the reference
# --------------------------------------------------------------------------------------------
SMEM_PROBE_HEAD = r'''
constexpr int TILE = %(tile)d;
constexpr int COURSE_G = 24, COURSE_S = 40;  // global / shared accesses kept per thread
constexpr int COURSE_W = TILE * (TILE + 1), COURSE_NONE = 0x7fffffff;  // words of as (of bs)
// what one thread did, in program order: (kind | phase << 4, index); phase = barriers passed
struct CourseThread {
    int phase = 0, g = 0, s = 0, st = 0, who = 0;
    bool live = false;  // its C(row, col) is inside C: what it reads can reach the output
    int* first = nullptr;  // the block's [kind][word]: first (phase << 10 | thread) of each
    int gk[COURSE_G] = {}, gi[COURSE_G] = {}, sk[COURSE_S] = {}, si[COURSE_S] = {};
    __host__ __device__ constexpr void global(int kind, long long i) {
        if (g < COURSE_G) { gk[g] = kind | phase << 4; gi[g] = int(i); }
        ++g;
    }
    __host__ __device__ constexpr void shared(int kind, int i) {
        if (s < COURSE_S) { sk[s] = kind | phase << 4; si[s] = i; }
        ++s;
        st += kind >= 2;
        if (kind >= 2 || live) {  // every store; the reads of threads that store C
            int& at = first[kind * COURSE_W + i];
            if ((phase << 10 | who) < at) at = phase << 10 | who;
        }
    }
};
struct CourseRef {  // an element of a, b or c: reading or writing it is recorded
    CourseThread* t; int kind; long long i;
    __host__ __device__ constexpr operator float() const { t->global(kind, i); return 1.0f; }
    __host__ __device__ constexpr const CourseRef& operator=(float) const {
        t->global(kind + 8, i); return *this;
    }
    __host__ __device__ constexpr const CourseRef& operator+=(float) const {
        t->global(kind, i); t->global(kind + 8, i); return *this;
    }
};
struct CoursePointer {  // a, b and c
    CourseThread* t; int kind; long long base;
    __host__ __device__ constexpr CourseRef operator[](long long i) const {
        return {t, kind, base + i};
    }
    __host__ __device__ constexpr CourseRef operator*() const { return {t, kind, base}; }
    __host__ __device__ constexpr CoursePointer operator+(long long i) const {
        return {t, kind, base + i};
    }
    __host__ __device__ constexpr CoursePointer operator-(long long i) const {
        return {t, kind, base - i};
    }
};
struct CourseSharedRef {
    CourseThread* t; float* v; int kind, i;
    __host__ __device__ constexpr operator float() const { t->shared(kind, i); return *v; }
    __host__ __device__ constexpr const CourseSharedRef& operator=(float x) const {
        t->shared(kind + 2, i); *v = x; return *this;
    }
};
struct CourseSharedRow {
    CourseThread* t; float* v; int kind, row;
    __host__ __device__ constexpr CourseSharedRef operator[](int col) const {
        return {t, v + col, kind, row * (TILE + 1) + col};
    }
};
struct CourseShared {  // as and bs: [TILE][TILE + 1] floats
    CourseThread* t; float* v; int kind;
    __host__ __device__ constexpr CourseSharedRow operator[](int row) const {
        return {t, v + row * (TILE + 1), kind, row};
    }
};
struct CourseDim { int x, y, z; };
#define __syncthreads() (++course_thread.phase)
#define __syncwarp(...) ((void)0)
__host__ __device__ constexpr CourseThread course_run(int bx, int by, int tx_, int ty_, int M,
                                                      int N, int K, int* course_first) {
    CourseThread course_thread;
    course_thread.first = course_first;
    course_thread.who = ty_ * TILE + tx_;
    float course_as[TILE * (TILE + 1)] = {}, course_bs[TILE * (TILE + 1)] = {};
    const CourseDim threadIdx{tx_, ty_, 0}, blockIdx{bx, by, 0}, blockDim{TILE, TILE, 1};
    const CoursePointer a{&course_thread, 0, 0}, b{&course_thread, 1, 0}, c{&course_thread, 2, 0};
    const CourseShared as{&course_thread, course_as, 0}, bs{&course_thread, course_bs, 1};
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const int row = row0 + ty, col = col0 + tx;
    course_thread.live = row < M && col < N;
    (void)blockDim; (void)row; (void)col; (void)M; (void)N; (void)K;
'''
SMEM_PROBE_TAIL = r'''
    return course_thread;
}
#undef __syncthreads
#undef __syncwarp
// every thread of block (bx, by): counts, each thread's global and shared accesses, its
// shared stores, then the block's first access of each word of as and bs (kinds 0-3)
struct CourseBlock { int g[TILE * TILE], s[TILE * TILE], gk[TILE * TILE][COURSE_G],
                     gi[TILE * TILE][COURSE_G], sk[TILE * TILE][COURSE_S],
                     si[TILE * TILE][COURSE_S], st[TILE * TILE], first[4 * COURSE_W]; };
__host__ __device__ constexpr CourseBlock course_block(int bx, int by, int M, int N, int K) {
    CourseBlock out{};
    for (int i = 0; i < 4 * COURSE_W; ++i) out.first[i] = COURSE_NONE;
    for (int t = 0; t < TILE * TILE; ++t) {
        const CourseThread r = course_run(bx, by, t % TILE, t / TILE, M, N, K, out.first);
        out.g[t] = r.g; out.s[t] = r.s; out.st[t] = r.st;
        for (int i = 0; i < COURSE_G; ++i) { out.gk[t][i] = r.gk[i]; out.gi[t][i] = r.gi[i]; }
        for (int i = 0; i < COURSE_S; ++i) { out.sk[t][i] = r.sk[i]; out.si[t][i] = r.si[i]; }
    }
    return out;
}
'''


class _NoProbe(Exception):
    """NVRTC cannot run the loop at compile time (it calls something not constexpr)."""


# (blockIdx.x, blockIdx.y), (M, N, K): a full block where TILE divides K (a K loop running a
# step too many, a step of zeros only, shows in its stores), and the corner block at a shape
# ragged in every direction (K not a multiple of TILE: the ragged slice)
SMEM_PROBES = (((0, 0), (33, 20, 2 * SMEM_TILE)), ((1, 2), (33, 20, 40)))
_G, _S = 24, 40  # COURSE_G, COURSE_S: global and shared accesses kept per thread
_NONE = 0x7FFFFFFF  # COURSE_NONE: no thread accessed that word


@dataclass
class _Block:
    """What the threads of one probed block did (:func:`_smem_probe`)."""

    shape: tuple[int, int, int]  # M, N, K
    # per thread: (global accesses [(kind, phase, index)], shared accesses [(kind, phase,
    # word)], global count, shared count)
    threads: list[tuple[list, list, int, int]]
    stores: list[int]  # per thread: its stores into as and bs
    first: list[int]  # [kind * words + word]: the block's first (phase << 10 | thread) access

    def label(self) -> str:
        return "M, N, K = " + ", ".join(map(str, self.shape))


def _smem_probe(loop: str) -> dict[tuple[int, int], _Block]:
    """{(bx, by): _Block} of the blocks and shapes of SMEM_PROBES, evaluated by NVRTC (no GPU).
    Kinds: 0/1/2 a/b/c read, 8/9/10 written; shared 0/1 as/bs read, 2/3 written (a read is in
    ``first`` only for a thread whose C(row, col) is inside C). _NoProbe where NVRTC cannot
    evaluate it."""
    program = (SMEM_PROBE_HEAD % {"tile": SMEM_TILE}) + loop + SMEM_PROBE_TAIL
    threads, g, s = SMEM_TILE * SMEM_TILE, _G, _S
    words = SMEM_TILE * (SMEM_TILE + 1)
    found = {}
    for (bx, by), (m, n, k) in SMEM_PROBES:
        try:
            ints = compile_probes.constant_ints(
                program, f"course_block({bx}, {by}, {m}, {n}, {k})", arch="sm_90")
        except Mismatch as failed:  # not constexpr (an intrinsic, a vector load, ...)
            raise _NoProbe(failed.message) from None
        sizes = [threads, threads, threads * g, threads * g, threads * s, threads * s, threads,
                 4 * words]
        ends = [sum(sizes[:i + 1]) for i in range(len(sizes))]
        gs, ss, gk, gi, sk, si, st, first = (ints[end - size:end]
                                             for size, end in zip(sizes, ends, strict=True))
        found[bx, by] = _Block((m, n, k), [
            ([(gk[t * g + i] & 15, gk[t * g + i] >> 4, gi[t * g + i])
              for i in range(min(gs[t], g))],
             [(sk[t * s + i] & 15, sk[t * s + i] >> 4, si[t * s + i])
              for i in range(min(ss[t], s))],
             gs[t], ss[t]) for t in range(threads)], st, first)
    return found


_SMEM_REFERENCE: dict[str, dict] = {}  # the reference solution's probe


def _smem_costs(probe: dict[tuple[int, int], _Block]) -> dict[str, int]:
    """32-byte sectors of every warp request of a, b (and c), and shared-memory wavefronts of
    every warp request of as and bs, summed over the probed blocks."""
    import collections

    costs = collections.Counter()
    for block in probe.values():
        threads = block.threads
        for w in range(0, len(threads), 32):
            requests: dict[tuple, set] = collections.defaultdict(set)
            shared: dict[tuple, set] = collections.defaultdict(set)
            for glob, shr, _, _ in threads[w:w + 32]:
                seen = collections.Counter()
                for kind, phase, i in glob:
                    seen[kind, phase] += 1
                    requests[kind, phase, seen[kind, phase]].add(i * 4 // 32)
                seen = collections.Counter()
                for kind, phase, word in shr:
                    seen[kind, phase] += 1
                    shared[kind, phase, seen[kind, phase]].add(word)
            for (kind, _, _), sectors in requests.items():
                costs["abc"[kind % 8] + ("-store" if kind >= 8 else "")] += len(sectors)
            for (kind, _, _), words in shared.items():
                banks = collections.Counter(word % 32 for word in words)
                costs[("as", "bs")[kind % 2] + (" stores" if kind >= 2 else " loads")] += \
                    max(banks.values())
    return dict(costs)


def _smem_reference() -> dict[tuple[int, int], _Block]:
    """The reference solution's probe (computed once a process)."""
    if "reference" not in _SMEM_REFERENCE:
        from exercises import load_cell
        from exercises.solutions import lesson05

        reference = load_cell(lesson05.SOLUTIONS["05.smem"], "smem_reference")["SMEM_LOOP"]
        _SMEM_REFERENCE["reference"] = _smem_probe(reference)
    return _SMEM_REFERENCE["reference"]


def _expect_stored_before_read(block: _Block, where: tuple[int, int]) -> None:
    """Mismatch where a thread whose C(row, col) is inside C reads a word of as or bs that no
    thread of the block stored in that K step or before it (uninitialised shared memory: the
    padding column, a slice element left unstored)."""
    tile, words = SMEM_TILE, SMEM_TILE * (SMEM_TILE + 1)
    bad = []
    for kind, name in ((0, "as"), (1, "bs")):
        for word in range(words):
            read, wrote = block.first[kind * words + word], block.first[(kind + 2) * words + word]
            if read != _NONE and (wrote == _NONE or read >> 10 < wrote >> 10):
                bad.append((read, name, word, wrote))
    if not bad:
        return
    read, name, word, wrote = min(bad)
    phase, t = read >> 10, read & 1023
    when = ("no thread of the block ever stores" if wrote == _NONE else
            f"no thread of the block stores before __syncthreads() number {wrote >> 10}")
    raise Mismatch(
        f"{block.label()}: thread (tx={t % tile}, ty={t // tile}) of block {where} reads "
        f"{name}[{word // (tile + 1)}][{word % (tile + 1)}] after {phase} __syncthreads() (K "
        f"step {phase // 2}), an element {when}: uninitialised shared memory (it holds whatever "
        "was left there: zeros on one GPU, garbage on the next)"
        + (f"; {len(bad)} such elements" if len(bad) > 1 else ""),
        "a read of a tile element nobody stored: check the inner loop's bound (kk < TILE: "
        "column TILE is padding no thread writes), and that every thread stores its as[ty][tx] "
        "and bs[ty][tx] (0.0f outside A and B) every K step")


def _expect_k_steps(block: _Block, reference: _Block, where: tuple[int, int]) -> None:
    """Mismatch where the block makes more stores into shared memory than the reference's
    (2 a thread a K step): a K loop running more steps than ceil(K / TILE)."""
    total, ref_total = sum(block.stores), sum(reference.stores)
    if total <= ref_total:
        return
    k = block.shape[2]
    t = max(range(len(block.stores)), key=lambda i: block.stores[i])
    per, ref_per = block.stores[t], max(reference.stores)
    raise Mismatch(
        f"{block.label()}: block {where} makes {total} stores into as and bs where the "
        f"reference makes {ref_total}: thread (tx={t % SMEM_TILE}, ty={t // SMEM_TILE}) makes "
        f"{per} where {ref_per} do (two a K step, {-(-k // SMEM_TILE)} steps for K = {k}); "
        f"your K loop runs more steps than K needs (a step past the end stages only zeros: "
        "wasted stores, barriers and reads)",
        "the K loop runs ceil(K / TILE) steps: k0 = 0, TILE, 2 TILE, ... while k0 < K")


def _expect_smem_accesses(loop: str) -> str:
    """Mismatch unless every thread of the probed blocks reads A and B inside the tensors, the
    block reads each element of its rows of A and columns of B once, stores each element of its
    tile of C once, reads only words of as and bs stored in that K step or before it, runs no
    more K steps than the reference solution, with loads as coalesced and shared-memory
    accesses as free of bank conflicts as the reference's; what it verified, in words."""
    import collections

    tile = SMEM_TILE
    probe = _smem_probe(loop)
    for (bx, by), block in probe.items():
        m, n, k = block.shape
        shape = block.label()
        row0, col0 = by * tile, bx * tile
        loads = {0: collections.Counter(), 1: collections.Counter()}
        stores = collections.Counter()
        for t, (glob, _, count, _) in enumerate(block.threads):
            who = f"thread (tx={t % tile}, ty={t // tile}) of block ({bx}, {by})"
            expect(count <= _G, f"{shape}: {who} makes {count} global-memory accesses; staging "
                   f"needs 2 a K slice ({2 * -(-k // tile)} here) and one store of C",
                   "each thread loads one element of A and one of B per slice, then reads "
                   "the tile from shared memory")
            for kind, _, i in glob:
                name, size, rows = {0: ("A", m * k, "row"), 1: ("B", n * k, "column"),
                                    2: ("C", m * n, "row")}[kind % 8]
                expect(kind not in (8, 9), f"{shape}: {who} writes {name}[{i}]: an input",
                       "store only into C")
                expect(kind != 2, f"{shape}: {who} reads C[{i}] (C holds nothing yet)",
                       "accumulate in a register, store it once")
                expect(0 <= i < size, f"{shape}: {who} {'reads' if kind < 8 else 'writes'} "
                       f"{name}'s element {i}, outside {name} ({size} elements): an access "
                       "past the end", "test the row (or column) and k against M, N and K "
                       "before the access, and load 0.0f there instead")
                if kind in (0, 1):
                    loads[kind][i] += 1
                else:
                    stores[i] += 1
        for kind, name, first, count, what in ((0, "A", row0, m, "row"),
                                               (1, "B", col0, n, "column")):
            lines = range(first, min(first + tile, count))
            want = {r * k + kk for r in lines for kk in range(k)}
            for i, times in sorted(loads[kind].items()):
                r, kk = divmod(i, k)
                where = (f"A({r}, {kk})" if kind == 0 else f"B({kk}, {r})")
                expect(i in want, f"{shape}: block ({bx}, {by}) reads {where}, which it does not "
                       f"need (its {what}s are {lines.start}..{lines.stop - 1}, k < {k}): an "
                       "element of another row, or past the end of K", "k = k0 + tx must stay "
                       "below K: load 0.0f where it does not")
                expect(times == 1, f"{shape}: block ({bx}, {by}) reads {where} {times} times; "
                       "staged, each element is read from global memory once per block",
                       "one element of A and one of B per thread and slice, into as and bs")
            if missing := sorted(want - set(loads[kind])):
                r, kk = divmod(missing[0], k)
                raise Mismatch(f"{shape}: block ({bx}, {by}) never reads "
                               + (f"A({r}, {kk})" if kind == 0 else f"B({kk}, {r})")
                               + f" ({len(missing)} elements of {name} it needs are never "
                               "loaded)", "every slice k0 = 0, TILE, 2 TILE, ... < K, each "
                               "thread loading k = k0 + tx")
        want = {r * n + cc for r in range(row0, min(row0 + tile, m))
                for cc in range(col0, min(col0 + tile, n))}
        for i, times in sorted(stores.items()):
            expect(i in want, f"{shape}: block ({bx}, {by}) writes C{divmod(i, n)}, outside its "
                   "tile of C", "c[(long long)row * N + col], only when row < M and col < N")
            expect(times == 1, f"{shape}: block ({bx}, {by}) writes C{divmod(i, n)} {times} "
                   "times", "store acc once, after the K loop")
        if missing := sorted(want - set(stores)):
            raise Mismatch(f"{shape}: block ({bx}, {by}) never writes "
                           f"C{divmod(missing[0], n)} ({len(missing)} elements of its tile)",
                           "every thread whose row < M and col < N stores its element")
        _expect_stored_before_read(block, (bx, by))
    reference = _smem_reference()
    for where, block in probe.items():
        _expect_k_steps(block, reference[where], where)
    costs, ref = _smem_costs(probe), _smem_costs(reference)
    shape = "; ".join(f"block {where} at {block.label()}" for where, block in probe.items())
    for name, what in (("a", "A"), ("b", "B")):
        expect(costs.get(name, 0) <= 1.25 * ref[name],
               f"{shape}: your loads of {what} are not coalesced: the warps of the probed blocks "
               f"touch {costs.get(name, 0)} 32-byte sectors where the staging needs "
               f"{ref[name]} (consecutive threads must read consecutive addresses)",
               "threadIdx.x (tx) must walk along K, the contiguous dimension of A and of B: "
               "as[ty][tx] = A(row0 + ty, k0 + tx), bs[ty][tx] = B(k0 + tx, col0 + ty)")
    for name in ("as stores", "bs stores", "as loads", "bs loads"):
        expect(costs.get(name, 0) <= 1.25 * ref.get(name, 0) + 2,
               f"{shape}: your {name} in shared memory take "
               f"{costs.get(name, 0)} wavefronts where the reference takes {ref.get(name, 0)}: "
               "bank conflicts (threads of a warp hitting one bank at different words)",
               "index as[ty][...] and bs[tx][...] (the +1 column keeps a column's words in "
               "different banks)")
    blocks = " and ".join(f"block {where} at {block.label()}" for where, block in probe.items())
    return (f"every thread of {blocks} (run by NVRTC at compile time) reads A and B inside the "
            "tensors, each element its block needs once, coalesced "
            f"({costs.get('a', 0) + costs.get('b', 0)} sectors, as the reference), and writes "
            "each element of its tile of C once; it reads only tile elements stored in that K "
            "step or before, in ceil(K / TILE) K steps (its shared-memory stores as the "
            "reference's); shared memory without extra bank conflicts")


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


@exercise("05.swizzle_cuda", title="Add the swizzle to a tile loader (CUDA)",
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
        for line in kernel_checks.recorded_lines("05.swizzle_cuda"):
            report.line(line)
        return
    kernel_checks.expect_child_ok(kernel_checks.run_child("05.swizzle_cuda", program),
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


# --------------------------------------------------------------------------------------------
# A tl.dot matmul (Triton)
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


def _dot_operand(rows: int, cols: int, dtype: torch.dtype, layout: str, device: str,
                 scale: float) -> torch.Tensor:
    """A random (rows x cols) operand: "row-major", "transposed" (a column-major view) or
    "strided" (every other column of a wider tensor)."""
    if layout == "transposed":
        return (scale * torch.randn(cols, rows, device=device)).to(dtype).t()
    if layout == "strided":
        return (scale * torch.randn(rows, 2 * cols, device=device)).to(dtype)[:, ::2]
    return (scale * torch.randn(rows, cols, device=device)).to(dtype)


def _expect_dot(matmul, a, b, what: str, atol: float, rtol: float, hint: str) -> None:
    # a NaN block of C's size just freed: the answer's torch.empty tends to get it, so an
    # element of C never written shows as NaN, not as a lucky zero
    torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=a.dtype, device=a.device)
    compare(matmul(a, b), (a.double() @ b.double()).to(a.dtype), what=what, atol=atol,
            rtol=rtol, hint=hint)


def _dot_bounds(matmul) -> list[str]:
    """``matmul`` interpreted, on CPU operands between NaN guard zones: every lane's address
    inside A, B or C, every element of C written, none from an undefined lane; the cases, for
    the report."""
    interpreted = triton_checks.interpreted(matmul)
    # (K = 0 last: a kernel that ran on the others must still write C = 0 there)
    cases = [(5, 7, 3, False), (33, 17, 40, False), (33, 17, 40, True), (16, 16, 0, False)]
    ran = False
    for m, n, k, transposed in cases:
        a = fenced(m, k, transposed=transposed)
        b = fenced(k, n, transposed=transposed)
        what = f"float32 {m}x{n}x{k}" + (" (A and B transposed)" if transposed else "")
        out = []
        with interpreted_memory() as seen, triton_launches() as launched:
            unchecked = triton_checks.expect_in_bounds(
                lambda a=a, b=b, out=out: out.append(interpreted(a, b)), f"your matmul on {what}")
        if unchecked:  # this Triton cannot interpret a copy: the values are checked below
            return [unchecked]
        c = out[0]
        ran = ran or bool(launched)
        if not isinstance(c, torch.Tensor) or c.shape != (m, n) or not c.numel() or not ran:
            continue  # the value checks (or the launch check) say what is wrong with it
        rows, cols = torch.meshgrid(torch.arange(m), torch.arange(n), indexing="ij")
        addresses = (c.data_ptr() + (rows * c.stride(0) + cols * c.stride(1))
                     * c.element_size()).numpy().astype(np.uint64)
        stored = seen["stored"]
        written = np.isin(addresses, np.concatenate(stored) if stored else np.zeros(0, np.uint64))
        if not written.all():
            where = tuple(int(i) for i in np.argwhere(~written)[0])
            raise Mismatch(f"{what}: C{list(where)} was never written ({int((~written).sum())} "
                           f"of {m * n} elements of C were not)", "the grid covers C "
                           "with cdiv(M, BLOCK_M) x cdiv(N, BLOCK_N) programs, each storing its "
                           "whole tile (masked at the edges), even when K = 0 (C = 0 then)")
        nan = c.isnan()
        if nan.any() and seen["undefined"]:  # (other NaNs: the value checks say more)
            where = tuple(int(i) for i in torch.nonzero(nan)[0])
            raise Mismatch(f"{what}: C{list(where)} is NaN ({int(nan.sum())} of {m * n}): a "
                           "masked load without other= gives its masked-off lanes undefined "
                           "values (here: NaN), and they reached the product", "load the K "
                           "slice past K with other=0.0 (and rows/columns past M/N too): 0 "
                           "adds nothing to tl.dot")
    return [f"{m}x{n}x{k}" + (" transposed" if t else "") for m, n, k, t in cases]


@exercise("05.triton_dot", title="A tl.dot matmul in Triton", stub=DOT_STUB,
          answers=("matmul_kernel", "matmul"), section="Triton's `tl.dot`", intro="""
The tiles of this lesson in Triton: write the kernel of `matmul` for the given tile. Program
`(pid_m, pid_n)` owns a `BLOCK_M × BLOCK_N` tile of C: build its row and column offsets with
`tl.arange`, pointers to a `BLOCK_M × BLOCK_K` slice of A and a `BLOCK_K × BLOCK_N` slice of B
from the strides, and loop over K: load both slices with masks (`other=0.0` past M, N and K),
`acc = tl.dot(a, b, acc)` into an fp32 accumulator, advance the pointers by `BLOCK_K` along K.
Store `acc` converted to C's dtype, masked at the edges. The check first runs it in Triton's
interpreter (on any machine) with every lane's address checked against A, B and C, then (the
interpreter on a CPU, compiled on a GPU) against `a @ b` in float64 on tiny shapes: 1 × 1 × 1,
K not a multiple of 32, ragged M and N, transposed and strided A and B, K = 0, fp16 and fp32 (the
interpreter computes bf16 `tl.dot` wrongly), fp32 values past the fp16 range, and an fp16 product
at K = 2048 whose partial sums reach ~1000 before cancelling (an fp16 accumulator loses it). It
makes sure a Triton kernel ran and calls `tl.dot`. On a GPU it adds bf16 and larger shapes and
times it at 4096³ fp16 against cuBLAS and the course's autotuned `tl.dot` kernel.""")
def check_triton_dot(matmul_kernel, matmul, report) -> None:
    device = env.DEFAULT_DEVICE
    bounds = _dot_bounds(matmul)
    dtypes = [torch.float16, torch.float32] + ([] if env.TRITON_INTERPRET else [torch.bfloat16])
    # (m, n, k, A's layout, B's layout): the strides the kernel is given must be the ones it uses
    shapes = [(1, 1, 1, "row-major", "row-major"), (5, 7, 3, "row-major", "row-major"),
              (33, 17, 40, "transposed", "transposed"), (40, 64, 64, "strided", "row-major"),
              (16, 16, 0, "row-major", "row-major")]
    if not env.TRITON_INTERPRET:
        shapes += [(300, 200, 500, "row-major", "transposed"), (1000, 8, 24, "row-major",
                                                                   "row-major")]
    hint = ("mask rows >= M, columns >= N and the K slice past K (other=0.0); advance a's "
            "pointers by BLOCK_K * stride_ak and b's by BLOCK_K * stride_bk each step; every "
            "offset times its stride (A and B may be transposed or strided views)")
    for dtype in dtypes:
        tol = 1e-5 if dtype == torch.float32 and env.TRITON_INTERPRET else 3e-2
        for m, n, k, a_layout, b_layout in shapes:
            a = _dot_operand(m, k, dtype, a_layout, device, 1 / max(k, 1) ** 0.25)
            b = _dot_operand(k, n, dtype, b_layout, device, 1 / max(k, 1) ** 0.25)
            layouts = "" if a_layout == b_layout == "row-major" else \
                f" (A {a_layout}, B {b_layout})"
            _expect_dot(matmul, a, b, f"{str(dtype)[6:]} {m}x{n}x{k}{layouts}", tol, tol, hint)
    # fp32 values past the fp16 range (~1e5): a result passed through 16 bits becomes inf
    a, b = (_dot_operand(5, 3, torch.float32, "row-major", device, 300.0),
            _dot_operand(3, 7, torch.float32, "row-major", device, 300.0))
    tol = 1e-5 if env.TRITON_INTERPRET else 3e-2
    _expect_dot(matmul, a, b, "float32 5x7x3 with entries ~300 (products past fp16's 65504)",
                tol * 300.0 ** 2, tol, "accumulate in float32 and store acc.to(C's dtype): "
                "c_ptr.dtype.element_ty, not a 16-bit type")
    # fp32 accumulation: partial sums climb to ~1000, where fp16 spaces its values 0.5 apart,
    # then cancel to ~10. Measured (interpreter, 32x32x2048): an fp32 accumulator is off by
    # <= 0.016 (C's own fp16 rounding), an fp16 one by 0.6 (median) to 3 (max).
    k = 2048
    a = (0.5 + torch.rand(32, k, device=device)).half()
    b = 0.5 + torch.rand(k, 32, device=device)
    b[k // 2:] *= -1
    _expect_dot(matmul, a, b.half(), f"float16 32x32x{k}, partial sums ~1000 then cancelling",
                0.05, 2e-3, "accumulate in float32: acc = tl.zeros(..., dtype=tl.float32), "
                "acc = tl.dot(a, b, acc); a 16-bit sum of thousands of products drifts by "
                "whole units")
    a = torch.randn(33, 40, device=device).half()
    b = torch.randn(40, 17, device=device).half()
    expect_triton_kernel(matmul, (a, b), what="your matmul")
    expect(_calls_tl_dot(matmul_kernel), "the values are right, but matmul_kernel does not "
           "call tl.dot: the tile product runs on the CUDA cores, not the tensor cores",
           "acc = tl.dot(a, b, acc)")
    how = "Triton's interpreter" if env.TRITON_INTERPRET else "compiled Triton"
    report.line(f"matches float64 in {', '.join(str(d)[6:] for d in dtypes)} at "
                f"{', '.join(f'{m}x{n}x{k}' for m, n, k, *_ in shapes)}, A and B transposed "
                f"and strided, fp32 past the fp16 range, and an fp16 product at K = 2048 that "
                f"an fp16 accumulator misses ({how})")
    if bounds[0].startswith("not verified"):
        report.line(bounds[0])
    else:
        report.line(f"every load and store stays inside A, B and C (each lane's address checked "
                    f"in Triton's interpreter on {', '.join(bounds)}; masked-off lanes read as "
                    "NaN)")
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
