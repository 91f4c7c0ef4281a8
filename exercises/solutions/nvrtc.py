"""Solutions (and known-wrong answers) of lesson 06's exercises."""

SOLUTIONS = {
    "nvrtc.sweep": '''
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
    "nvrtc.sweep": '''
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

# nvrtc.occupancy: the stub's limits and the function filled in
from exercises.nvrtc import OCCUPANCY_STUB  # noqa: E402

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
SOLUTIONS["nvrtc.occupancy"] = _OCCUPANCY


def _occupancy(old: str, new: str) -> str:
    if old not in _OCCUPANCY:
        raise ValueError(f"{old!r} is not in the solution")
    return _OCCUPANCY.replace(old, new)


WRONG["nvrtc.occupancy"] = {
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
    # the two rounding units swapped: registers in 128s a warp (4 a thread), shared memory in
    # 256-byte steps
    "rounding units swapped": _occupancy("REGISTER_UNIT = 256 ", "REGISTER_UNIT = 128 ").replace(
        "SHARED_UNIT = 128 ", "SHARED_UNIT = 256 "),
    # registers rounded up to 4 a thread (128 a warp), the shared memory right
    "registers in 128s a warp": _occupancy("REGISTER_UNIT = 256 ", "REGISTER_UNIT = 128 "),
    # shared memory rounded up to 256 bytes, the registers right
    "shared memory in 256-byte steps": _occupancy("SHARED_UNIT = 128 ", "SHARED_UNIT = 256 "),
    # the register rounding applied to the block's registers, not to each warp's
    "registers rounded per block": _occupancy(
        "    per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT\n",
        "    per_block = -(-registers * 32 * warps // REGISTER_UNIT) * REGISTER_UNIT\n"
        "    per_warp = per_block / warps\n").replace(
        "REGISTERS // SUB_PARTITIONS // per_warp * SUB_PARTITIONS // warps",
        "int(REGISTERS // SUB_PARTITIONS // per_warp * SUB_PARTITIONS // warps)"),
    # registers rounded to 8 a thread by truncating: 37 registers counted as 32
    "registers rounded down": _occupancy("-(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT",
                                         "registers * 32 // REGISTER_UNIT * REGISTER_UNIT"),
    # shared memory rounded down to 128 bytes instead of up
    "shared memory rounded down": _occupancy(
        "-(-(shared + SHARED_RESERVED) // SHARED_UNIT) * SHARED_UNIT",
        "(shared + SHARED_RESERVED) // SHARED_UNIT * SHARED_UNIT"),
}

# nvrtc.divergence: each pair of warps shares 64 elements, the first taking the even ones
_DIVERGENCE = '''
ELEMENT_OF = r"""
__host__ __device__ constexpr long long element_of(long long t) {
    return 64 * (t / 64) + 2 * (t % 32) + (t / 32) % 2;
}
"""
'''
SOLUTIONS["nvrtc.divergence"] = _DIVERGENCE


def _map(expression: str) -> str:
    return _DIVERGENCE.replace("64 * (t / 64) + 2 * (t % 32) + (t / 32) % 2", expression)


WRONG["nvrtc.divergence"] = {
    # neighbouring threads swapped: every element once, but the parity still follows the lane
    "pairs swapped": _map("t ^ 1"),
    # the parity taken from the lane instead of the warp: elements taken twice, others never
    "lane parity": _map("64 * (t / 64) + 2 * (t % 32) + t % 2"),
    # even elements only: a warp of one parity, but the odd elements are never computed
    "evens only": _map("2 * t"),
    # the warp's parity from the warp index, but its lanes on the wrong 32 elements: elements
    # of the other half of each 64 are taken twice, others never
    "pair base from the warp": _map("32 * (t / 32) + 2 * (t % 32) % 32 + (t / 32) % 2"),
    # odd warps start one element late and run past their 64: the last one takes element 64
    "odd warps shifted": _map("64 * (t / 64) + 2 * (t % 32) + (t / 32) % 2 + (t / 32) % 2"),
    # a warp per parity but its lanes 64 elements apart: one element per 256-byte span
    "lanes spread out": _map("256 * (t / 256) + 8 * (t % 32) + (t % 256) / 32"),
}
