"""The compile-time probe of exercise mma_matmul.smem: every thread of a block runs the student's K
loop at compile time (NVRTC evaluates it as a constexpr function, :mod:`exercises.compile_probes`;
a, b, c, as and bs record what is read and written), so that any machine sees its accesses:
inside the tensors, each element once per block, coalesced, no extra bank conflicts, no read of
a tile element no thread stored, and no more K steps than the reference's.
"""

from __future__ import annotations

from dataclasses import dataclass

from exercises import Mismatch, compile_probes, expect

SMEM_TILE = 16  # the tile of exercises/cuda/smem_tiles.cu: the exercise's and its probe's

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


class ProbeUnavailable(Exception):
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
    ``first`` only for a thread whose C(row, col) is inside C). ProbeUnavailable where NVRTC cannot
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
            raise ProbeUnavailable(failed.message) from None
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
        from exercises.solutions import mma_matmul

        reference = load_cell(mma_matmul.SOLUTIONS["mma_matmul.smem"],
                              "smem_reference")["SMEM_LOOP"]
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


def expect_smem_accesses(loop: str) -> str:
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


