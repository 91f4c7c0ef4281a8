"""Solutions (and known-wrong answers) of lesson 04's exercises."""

SOLUTIONS = {
    "04.sweep": '''
import torch

from course_utils import nvrtc
from kernels.add import nvrtc as add_nvrtc

ADD = add_nvrtc.SOURCE


def add_variants(blocks, arch):
    return {block: nvrtc.compile(ADD, "add_kernel", arch=arch,
                                 defines={"scalar_t": torch.float32, "BLOCK": block})
            for block in blocks}
''',
}

WRONG = {
    # one compile, reused for every block size: BLOCK stays 256 in every variant
    "04.sweep": '''
import torch

from course_utils import nvrtc
from kernels.add import nvrtc as add_nvrtc

ADD = add_nvrtc.SOURCE


def add_variants(blocks, arch):
    compiled = nvrtc.compile(ADD, "add_kernel", arch=arch,
                             defines={"scalar_t": torch.float32, "BLOCK": 256})
    return {block: compiled for block in blocks}
''',
}

# 04.occupancy: the stub's limits and the function filled in
from exercises.lesson04 import OCCUPANCY_STUB  # noqa: E402

_OCCUPANCY = OCCUPANCY_STUB.replace("    ...\n", '''\
    warps = -(-threads // 32)  # a partial warp is a whole one
    per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    by_warps = MAX_WARPS // warps
    if per_warp:  # the warps one sub-partition holds, times 4, then whole blocks of them
        by_registers = REGISTERS // SUB_PARTITIONS // per_warp * SUB_PARTITIONS // warps
    else:
        by_registers = MAX_BLOCKS
    per_block = -(-(shared + SHARED_RESERVED) // SHARED_UNIT) * SHARED_UNIT
    return min(by_warps, by_registers, SHARED // per_block, MAX_BLOCKS)
''')
SOLUTIONS["04.occupancy"] = _OCCUPANCY


def _occupancy(old: str, new: str) -> str:
    if old not in _OCCUPANCY:
        raise ValueError(f"{old!r} is not in the solution")
    return _OCCUPANCY.replace(old, new)


WRONG["04.occupancy"] = {
    # 33 threads counted as one warp
    "warps rounded down": _occupancy("warps = -(-threads // 32)", "warps = max(1, threads // 32)"),
    # registers a warp not rounded up to 256
    "no register rounding": _occupancy("-(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT",
                                       "registers * 32"),
    # the register file as one pool: 65536 // 6400 = 10 warps at 200 registers, not 8
    "no sub-partitions": _occupancy(
        "REGISTERS // SUB_PARTITIONS // per_warp * SUB_PARTITIONS // warps",
        "REGISTERS // per_warp // warps"),
    # the driver's 1 KiB per block forgotten
    "no reserved shared memory": _occupancy("(shared + SHARED_RESERVED)", "(shared)"),
    # the course's calculator called: right numbers, no rules worked out
    "the course's calculator": OCCUPANCY_STUB.replace(
        "    ...\n", "    from course_utils import occupancy\n\n"
        "    return occupancy.blocks_per_sm(threads, registers, shared)\n"),
    # no cap of 32 blocks
    "no block slots": _occupancy("SHARED // per_block, MAX_BLOCKS)", "SHARED // per_block)"),
}
