"""course_utils.occupancy against CUDA's own calculator: cuda_occupancy.h (header-only) compiled
here with the C++ compiler, on an H100's properties, over every combination of awkward block
sizes, register counts and shared-memory sizes (no GPU needed)."""

import itertools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from course_utils import env, occupancy  # noqa: F401  (env: CUDA_HOME)

PROGRAM = Path(__file__).parent / "data" / "cuda_occupancy_h100.cpp"
THREADS = (1, 31, 32, 33, 64, 96, 128, 160, 192, 256, 384, 512, 640, 768, 1024)
REGISTERS = (0, 1, 16, 24, 32, 40, 48, 56, 64, 72, 80, 96, 128, 160, 168, 200, 232, 255, 256)
SHARED = (0, 1, 1024, 12288, 49152, 65536, 100000, 116736, 232448, 232449)


def _calculator(tmp_path) -> Path:
    cuda = Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda")  # (env sets it where it can)
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None or not (cuda / "include" / "cuda_occupancy.h").exists():
        pytest.skip("needs a C++ compiler and the CUDA toolkit's cuda_occupancy.h")
    binary = tmp_path / "occupancy"
    subprocess.run([compiler, "-O1", f"-I{cuda / 'include'}", str(PROGRAM), "-o", str(binary)],
                   check=True, capture_output=True)
    return binary


def test_blocks_per_sm_is_what_cuda_occupancy_h_computes(tmp_path):
    cases = list(itertools.product(THREADS, REGISTERS, SHARED))
    lines = "".join(f"{t} {r} {s}\n" for t, r, s in cases)
    done = subprocess.run([str(_calculator(tmp_path))], input=lines, capture_output=True,
                          text=True, check=True)
    theirs = [int(v) for v in done.stdout.split()]
    ours = [occupancy.blocks_per_sm(*case) for case in cases]
    wrong = [(case, o, t) for case, o, t in zip(cases, ours, theirs, strict=True)
             if t >= 0 and o != t]
    assert not wrong, f"{len(wrong)} of {len(cases)} differ, e.g. (threads, registers, shared), " \
        f"ours, cuda_occupancy.h: {wrong[:5]}"
    assert theirs.count(-1) < len(cases) // 10  # (errors: shapes the calculator refuses)


def test_each_limit_binds_somewhere():
    assert occupancy.limits_of(1024, 32, 0)["warps"] == 2
    assert occupancy.blocks_per_sm(256, 200, 0) == 1  # 6400 registers a warp: 2 warps/partition
    assert occupancy.blocks_per_sm(32, 16, 0) == 32  # the block slots
    assert occupancy.blocks_per_sm(128, 32, 100000) == 2  # 101,376 bytes a block
    with pytest.raises(ValueError, match="threads >= 1"):
        occupancy.blocks_per_sm(0, 32, 0)


@pytest.mark.parametrize(("field", "value"), [
    ("register_unit", 128), ("register_unit", 512), ("shared_unit", 256), ("shared_unit", 64),
    ("shared_reserved", 512), ("shared_reserved", 2048), ("sub_partitions", 1),
    ("max_blocks", 16), ("max_blocks", 64), ("max_warps", 48)])
def test_the_exercise_s_launches_tell_each_misread_rule_apart(field, value):
    """nvrtc.occupancy's launches (the fixed ones and the sweep) hold one where a calculator with
    one rule read wrong (a rounding unit, the reserved KiB, the sub-partitions, a limit) gives
    another answer: a student's function with that mistake cannot pass."""
    import dataclasses
    import itertools

    from exercises.nvrtc import OCCUPANCY_CASES, occupancy_sweep

    wrong = dataclasses.replace(occupancy.SM90, **{field: value})
    assert any(occupancy.blocks_per_sm(*launch) != occupancy.blocks_per_sm(*launch, wrong)
               for launch in itertools.chain(OCCUPANCY_CASES, occupancy_sweep()))


def test_the_exercise_s_sweep_crosses_the_rounding_boundaries():
    from exercises.nvrtc import occupancy_sweep

    launches = set(occupancy_sweep())
    # register counts 1-4 above a multiple of 8 (where 4 and 8 registers a thread differ)
    assert {(256, r, 0) for r in range(256) if 1 <= r % 8 <= 4} <= launches
    # one byte past a multiple of 128 with the driver's KiB, up to past a block's most
    assert {(32, 0, s) for s in (1, 6145, 6273, 232448, 232449)} <= launches
    assert {(t, 0, 0) for t in range(1, 1025)} <= launches
    assert len(launches) < 20000  # (the check stays a few tens of milliseconds)
