"""What exercise nvrtc.tiled_matmul's kernel loads, judged: the property the assignment is
about, which right values alone do not show. From what the CPU runner counted while the kernel
ran its one-tile problem (:data:`exercises.tiled_matmul_problems.COUNTED`):

* **coalescing**: each global load instruction's sectors per sector of data it used (1 when a
  warp's 32 lanes read neighbouring addresses; 8 when each lane's 4 bytes cost a sector of
  their own, as a tile of A read down its columns does);
* **reuse through the tile**: floats loaded from global memory per multiply-add (a 64 x 64
  tile read once per step of K needs 1/32; one operand pair per output needs 2);

the counts Nsight Compute reports on a GPU, taken from every address of every warp
(:class:`course_utils.cuda_on_cpu.Launch`). And from the SASS, on any machine:

* **register blocking**: floats loaded from shared memory (LDS, LDS.64, LDS.128) per FFMA (a
  thread that keeps its 4 values of A and 4 of B in registers for its 4 x 4 outputs needs 0.5;
  reading both operands of every multiply-add from the tile costs 2). Read from the machine
  code rather than counted on the CPU, whose build keeps every load of the source (-O0): nvcc
  keeps a value read twice in a register by itself, and what the GPU runs is what counts.
"""

from __future__ import annotations

import re

from exercises import Mismatch
from exercises.tiled_matmul_problems import COUNTED

MOST_SECTORS = 2.0  # per sector of data: a 16-byte row segment (BK = 4) costs 2, still fine
MOST_GLOBAL_PER_FMA = 1 / 16  # twice what a 64 x 64 tile needs
MOST_SHARED_PER_FMA = 1.5  # a 16 x 1 strip needs 1.06, no register reuse at all 2


def _floats(access) -> float:
    return access.threads * access.size / 4


def judge(kernel, launch) -> list[str]:
    """Report lines on ``launch`` (the kernel's run of :data:`COUNTED`); a Mismatch where the
    property fails, naming the line of the kernel and the numbers."""
    fma = COUNTED.m * COUNTED.n * COUNTED.k
    loads = [a for a in launch.accesses if a.space == "global" and a.op == "load"]
    shared_loads = [a for a in launch.accesses if a.space == "shared" and a.op == "load"]
    shared_stores = [a for a in launch.accesses if a.space == "shared" and a.op == "store"]
    where = COUNTED.label
    if not shared_stores or not shared_loads:
        never = "stores nothing into" if not shared_stores else "never loads from"
        raise Mismatch(f"{where}: your kernel {never} shared memory: every operand comes "
                       "from global memory, once per output that needs it",
                       "per step of K, copy a 64 x BK tile of A and a BK x 64 tile of B into "
                       "__shared__ arrays, __syncthreads(), then multiply from them")
    said = []
    for a in loads:
        data = _floats(a) * 4 / 32  # sectors the bytes used would fill
        ratio = a.sectors / data if data else 0.0
        text = kernel.line_text(a.line)
        at = f"line {a.line} (`{text}`)" if a.line else "a global load"
        if ratio > MOST_SECTORS:
            operand = ("A" if "A[" in text and "B[" not in text else
                       "B" if "B[" in text and "A[" not in text else "A or B")
            raise Mismatch(
                f"{where}: the global load of {operand} at {at} is uncoalesced: "
                f"{a.sectors_per_request:.1f} sectors per request of a warp, "
                f"{ratio:.1f} sectors moved per sector of data (1 when coalesced): "
                "neighbouring threads read addresses a row apart, not neighbouring ones",
                f"let consecutive threads take consecutive elements of a row of {operand} "
                "when loading its tile (for A's 64 x BK tile: k = i % BK, r = i / BK, i the "
                "thread's element), and transpose in shared memory if the multiply wants "
                "the other order")
        said.append(f"{ratio:.2f}")
    stored = sum(_floats(a) for a in launch.accesses
                 if a.space == "global" and a.op == "store")
    if stored > COUNTED.m * COUNTED.n:
        raise Mismatch(f"{where}: your kernel stores {stored:.0f} floats into C for its "
                       f"{COUNTED.m * COUNTED.n} outputs: each output is written "
                       f"{stored / (COUNTED.m * COUNTED.n):.0f} times (a store inside the loop "
                       "over K)", "keep the 16 sums in registers for the whole loop over K and "
                       "store each once, after it")
    global_per_fma = sum(map(_floats, loads)) / fma
    if global_per_fma > MOST_GLOBAL_PER_FMA:
        raise Mismatch(f"{where}: your kernel loads {global_per_fma:.3f} floats from global "
                       "memory per multiply-add; a 64 x 64 tile of C whose A and B tiles are "
                       "read once per step of K needs 1/32 (0.031): the tiles are read again "
                       "and again instead of being reused from shared memory",
                       "each element of A's and B's tiles is loaded from global memory by one "
                       "thread, once per step; the 256 threads then all read it from shared "
                       "memory")
    return [f"counted on {where}: {', '.join(said)} sectors per sector of data for its "
            f"{len(loads)} global loads (1 when coalesced), {global_per_fma:.3f} floats from "
            "global memory per multiply-add (the tiles reused)"]


_LDS = re.compile(r"\bLDS(?:\.U)?(?:\.(32|64|128))?\b")


def register_blocking(found) -> str:
    """Floats loaded from shared memory per FFMA in the SASS census ``found``; a Mismatch above
    :data:`MOST_SHARED_PER_FMA`, else the report's words."""
    fma = found.count("FFMA")
    if not fma:
        raise Mismatch("the SASS has no FFMA (fused multiply-add): no float32 product is "
                       "accumulated", "acc[i][j] += a[i] * b[j] on float values")
    floats = sum(int(width or 32) // 32 for width in _LDS.findall(found.sass))
    per_fma = floats / fma
    if per_fma > MOST_SHARED_PER_FMA:
        raise Mismatch(f"your kernel's SASS loads {per_fma:.2f} floats from shared memory per "
                       f"FFMA ({floats} in its LDS instructions for {fma} FFMA): each output "
                       "reads both its operands from the tile, so the 16 outputs of a thread "
                       "share nothing in registers (a 4 x 4 patch that keeps its 4 values of A "
                       "and 4 of B in registers needs 0.5)",
                       "per k: float a[4], b[4] loaded once from the tiles, then the 16 "
                       "acc[i][j] += a[i] * b[j]")
    return f"{per_fma:.2f} floats from shared memory per FFMA in its SASS (register blocking)"
