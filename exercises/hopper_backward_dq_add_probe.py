"""Exercise hopper_backward.dq_add's compile-time run (:mod:`exercises.hopper_backward_dq_add` is
the exercise): NVRTC *runs* the student's lines for the 128 threads of a warpgroup, inside a
constexpr function
(:mod:`exercises.compile_probes`), with ``red_add2`` a lambda that records each call (which
element of ``dq_sum``, which two values) and ``dq_sum`` a local array; every ``dq_acc`` element
holds a value that names its thread and index. :func:`probe_error` reads the record against the
fragment layout (:func:`home`): where each value went, scaled or not, which rows past Sq were
written, what was stored without ``red_add2``. No GPU: this is how a CPU sees the values.
"""

from __future__ import annotations

import struct

import numpy as np

from exercises import Mismatch

THREADS = 128  # one warpgroup
NAMES = ("dq_acc", "dq_sum", "bh", "sq", "m0", "t", "lane", "consumer", "dq_col0", "scale", "D",
         "red_add2", "i64")
LAYOUT = ("dq_acc[4j + 2h + e] is query m0 + 16 (t / 32) + lane / 4 + 8h, column "
          "dq_col0 + 8j + 2 (lane % 4) + e of the head's dQ; dq_sum[bh][row][column] is "
          "dq_sum + (bh · sq + row) · D + column")

# the configurations the probe runs: (D, bh, sq, m0, consumer), dq_sum holding bh + 1 heads of
# sq rows plus ROWS_AFTER rows after them. bh is the last head: the rows past Sq of the tile
# (m0 = 64: rows 64 .. 127, Sq = 100) land in the rows after the buffer, where a missing guard
# shows; bh = 2 at D = 128, so bh · sq is neither 0 nor sq; consumer 1, so dq_col0 is 64 at
# D = 128 and 0 at D = 64
PROBES = ((128, 2, 100, 64, 1), (64, 1, 100, 64, 1))
ROWS_AFTER = 64
LOG = 2 * 64 * 32 + 256  # calls recorded (a warpgroup's 64 x 64 is 2048 pairs)

PROBE_PROGRAM = r'''
using i64 = long long;
using u32 = unsigned int;
constexpr int COURSE_LOG = @LOG@;
struct CourseDqLog {
    int calls, writes;  // red_add2 calls; dq_sum elements changed by anything else
    int offset[COURSE_LOG], x[COURSE_LOG], y[COURSE_LOG];  // each call: element, value bits
    int written[8];
};
// value of thread t's dq_acc[i]: 1 + i + 32 t + 1/4, so a value names where it came from
// (scaled by 1/sqrt(D) or not, which the quarter tells apart)
__host__ __device__ constexpr float course_acc(int t, int i) { return 1.25f + i + 32 * t; }
template <int D, int ELEMENTS>
__host__ __device__ constexpr CourseDqLog course_dq_add(int bh, int sq, int m0, int consumer,
                                                        float scale) {
    CourseDqLog log{};
    float memory[ELEMENTS] = {};
    constexpr int BQ = 64;
    for (int t = 0; t < @THREADS@; ++t) {
        const int lane = t % 32;
        const int dq_col0 = D == 128 ? consumer * 64 : 0;
        float dq_acc[32] = {};
        for (int i = 0; i < 32; ++i) dq_acc[i] = course_acc(t, i);
        float* const dq_sum = memory;
        auto red_add2 = [&](float* p, float x, float y) {
            if (log.calls < COURSE_LOG) {
                log.offset[log.calls] = int(p - memory);
                log.x[log.calls] = __builtin_bit_cast(int, x);
                log.y[log.calls] = __builtin_bit_cast(int, y);
            }
            ++log.calls;
        };
        (void)BQ, (void)dq_sum, (void)consumer, (void)bh, (void)sq, (void)m0, (void)scale;
        (void)red_add2, (void)lane, (void)dq_col0;
        {
#line 1 "your code"
@CODE@
        }
    }
    for (int i = 0; i < ELEMENTS; ++i) {
        if (memory[i] != 0.0f) {
            if (log.writes < 8) log.written[log.writes] = i;
            ++log.writes;
        }
    }
    return log;
}
'''


def _f32(x) -> float:
    return float(np.float32(x))


def _bits(x: float) -> int:
    return struct.unpack("<i", struct.pack("<f", x))[0]


def run_probe(code: str, d: int, bh: int, sq: int, m0: int, consumer: int) -> dict:
    """The student's lines run by NVRTC at compile time for one warpgroup (one configuration
    of :data:`PROBES`): ``{"calls", "writes", "log": [(element, x bits, y bits)], "written"}``.
    """
    from exercises import compile_probes

    elements = ((bh + 1) * sq + ROWS_AFTER) * d
    source = (PROBE_PROGRAM.replace("@LOG@", str(LOG)).replace("@THREADS@", str(THREADS))
              .replace("@CODE@", code.strip("\n")))
    scale = _f32(1 / np.sqrt(d))
    expression = f"course_dq_add<{d}, {elements}>({bh}, {sq}, {m0}, {consumer}, {scale!r}f)"
    try:
        ints = compile_probes.constant_ints(source, expression, arch="sm_90a")
    except Mismatch as failed:
        raise Mismatch(
            "the check runs your lines at compile time (NVRTC evaluates them for the 128 threads "
            "of a warpgroup, red_add2 recording each call) and could not: " + failed.message,
            f"use only the kernel's {', '.join(NAMES)} and arithmetic: the check cannot run "
            "atomicAdd (not even of a float2, which adds the same pair on sm_90), intrinsics "
            "or reinterpret_cast at compile time, nor an address outside dq_sum (before its "
            f"first element or more than {ROWS_AFTER} rows past its last)"
        ) from None
    calls, writes = ints[0], ints[1]
    n = min(calls, LOG)
    offset, xs, ys = ints[2:2 + LOG], ints[2 + LOG:2 + 2 * LOG], ints[2 + 2 * LOG:2 + 3 * LOG]
    return {"calls": calls, "writes": writes, "written": ints[2 + 3 * LOG:][:min(writes, 8)],
            "log": list(zip(offset[:n], xs[:n], ys[:n], strict=True))}


def _values(d: int) -> tuple[dict[int, tuple[int, int]], dict[int, tuple[int, int]]]:
    """{value bits: (thread, index)} of dq_acc's values times scale, and of them unscaled."""
    scale = np.float32(1 / np.sqrt(d))
    scaled, raw = {}, {}
    for t in range(THREADS):
        for i in range(32):
            value = np.float32(1.25 + i + 32 * t)
            scaled.setdefault(_bits(float(value * scale)), (t, i))
            raw.setdefault(_bits(float(value)), (t, i))
    return scaled, raw


def home(d: int, m0: int, dq_col0: int, t: int, i: int) -> tuple[int, int]:
    """(query row, column) of thread t's dq_acc[i]: the fragment layout (``d`` is the head
    dimension, which only chose ``dq_col0``)."""
    from kernels.matmul.hopper.layout import accumulator_home

    return accumulator_home(t, i, m0, dq_col0)


def probe_error(found: dict, d: int, bh: int, sq: int, m0: int, consumer: int
                ) -> tuple[str, str] | None:
    """What is wrong with the calls ``found`` (:func:`run_probe`) in one configuration, as
    (message, hint); None: each element of rows m0 .. m0 + 63 below Sq, in the warpgroup's
    columns, got exactly its dq_acc value times scale, by one red_add2 call of a pair, and
    nothing else was written."""
    dq_col0 = consumer * 64 if d == 128 else 0
    where = (f"(D = {d}, bh = {bh}, Sq = {sq}, m0 = {m0}, consumer {consumer}, so dq_col0 = "
             f"{dq_col0})")

    def place(element: int) -> str:
        row, column = divmod(element, d)
        if row >= (bh + 1) * sq:
            return f"row {row - (bh + 1) * sq} after the buffer's end, column {column}"
        return f"dq_sum[{row // sq}][{row % sq}][{column}]"

    if found["writes"]:
        return (f"your code wrote {found['writes']} elements of dq_sum without red_add2, "
                f"{place(found['written'][0])} first {where}: a plain store (or +=) loses "
                "what the other key blocks of the head add to the same rows at the same time",
                "every addition into dq_sum goes through red_add2, an atomic reduction")
    if found["calls"] > LOG:
        return (f"your code called red_add2 {found['calls']} times for one warpgroup's tile "
                f"{where}; 64 rows x 32 column pairs is at most 2048",
                "one call per pair: two rows (h) of 8 pairs (j) a thread")
    scaled, raw = _values(d)
    want = {}
    for t in range(THREADS):
        for i in range(0, 32, 2):
            row, column = home(d, m0, dq_col0, t, i)
            if row < sq:
                want[(bh * sq + row) * d + column] = (t, i)
    seen = set()
    for element, x, y in found["log"]:
        if element % 2:
            return (f"red_add2 was called at {place(element)} {where}, an odd column: its "
                    "address is not 8-byte aligned (red.global.add.v2.f32 faults there)",
                    "the pairs are columns 2 (lane % 4) + 8j and the one after: even")
        if x in raw and x not in scaled or y in raw and y not in scaled:
            t, i = raw.get(x, raw.get(y))
            return (f"the values added are dq_acc's, not scaled: thread {t}'s dq_acc[{i}] was "
                    f"added as {struct.unpack('<f', struct.pack('<i', x))[0]:g} {where}",
                    "dQ = dS K / sqrt(D): multiply each value by scale")
        if x not in scaled or y not in scaled:
            return (f"the values added at {place(element)} {where} are "
                    f"{struct.unpack('<f', struct.pack('<i', x))[0]:g} and "
                    f"{struct.unpack('<f', struct.pack('<i', y))[0]:g}: not dq_acc's values "
                    "times scale", "add dq_acc[i] * scale, each value once")
        (t, i), (t2, i2) = scaled[x], scaled[y]
        if t2 != t or i % 2 or i2 != i + 1:
            return (f"red_add2 at {place(element)} {where} got thread {t}'s dq_acc[{i}] and "
                    f"thread {t2}'s dq_acc[{i2}]: a call adds one thread's pair "
                    "dq_acc[4j + 2h], dq_acc[4j + 2h + 1] (columns c and c + 1 of one row)",
                    LAYOUT)
        row, column = home(d, m0, dq_col0, t, i)
        if row >= sq:
            return (f"thread {t}'s dq_acc[{i}] belongs to query row {row}, past Sq = {sq} "
                    f"{where}, and was added at {place(element)}: rows past Sq must be left "
                    "out (the last head's run past the end of dq_sum, the others' into the "
                    "next head's first rows)", "guard each row: q_row + 8h < sq")
        home_element = (bh * sq + row) * d + column
        if element != home_element:
            return (f"thread {t}'s dq_acc[{i}] (query row {row}, column {column}) was added "
                    f"at {place(element)}, not at {place(home_element)} {where}", LAYOUT)
        if element in seen:
            return (f"{place(element)} was added to twice {where}", LAYOUT)
        seen.add(element)
    if missing := sorted(set(want) - seen):
        t, i = want[missing[0]]
        return (f"{len(missing)} pairs never added {where}: first {place(missing[0])}, thread "
                f"{t}'s dq_acc[{i}] and [{i + 1}]", "every row below Sq gets its 32 values a "
                "thread: two rows (h = 0, 1), each 8 pairs (j = 0 .. 7); q_row + 8h < sq keeps "
                "exactly the rows below Sq")
    return None
