"""course_utils.ncu_source reads Nsight Compute's source page: thread-level loads and stores.

The data files are ncu 2025.3's source page (rows of SASS that touch no memory trimmed) for
cuda_gelu.warp_sum's solution and for the answer whose every lane stores y[row], at 512 x 1024 on an
H100: the hardware counters of the two are identical (512 store requests, 512 sectors), the
source page is not.
"""

from pathlib import Path

import pytest

from course_utils import ncu_source
from exercises import Mismatch, access_checks, cuda_gelu_kernels

DATA = Path(__file__).parent / "data"


def _read(name):
    return (DATA / name).read_text()


def test_the_source_page_counts_the_threads_of_each_access():
    (solution,) = ncu_source.parse_source_csv(_read("ncu-source-warp-sum-h100.csv"))
    assert solution == {"kernel": "warp_row_sum", "Global Load": 512 * 1024.0,
                        "Global Store": 512.0}
    (every_lane,) = ncu_source.parse_source_csv(_read("ncu-source-warp-sum-every-lane-h100.csv"))
    assert every_lane["Global Store"] == 32 * 512.0


def test_each_launch_is_its_own_block_and_a_foreign_page_is_refused():
    both = _read("ncu-source-warp-sum-h100.csv") + _read("ncu-source-warp-sum-every-lane-h100.csv")
    assert [c["Global Store"] for c in ncu_source.parse_source_csv(both)] == [512.0, 16384.0]
    with pytest.raises(ValueError, match="source page"):
        ncu_source.parse_source_csv('"ID","Kernel Name","Block Size"\n"0","k","(256, 1, 1)"\n')


def test_the_warp_sum_check_rejects_a_store_from_every_lane_on_these_counts():
    (rows, cols), = cuda_gelu_kernels.WARP_SUM_PROFILED
    sectors = {"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": rows * cols * 4 / 32}
    for name, passes in (("ncu-source-warp-sum-h100.csv", True),
                         ("ncu-source-warp-sum-every-lane-h100.csv", False)):
        (counted,) = ncu_source.parse_source_csv(_read(name))
        launch = {**sectors, **{m: counted[m.removeprefix("threads: ")]
                                for m in access_checks.THREAD_METRICS}}
        if passes:
            assert "512 stores" in cuda_gelu_kernels._warp_sum_access([launch])[0]
        else:
            with pytest.raises(Mismatch, match="16384 global stores for 512 rows"):
                cuda_gelu_kernels._warp_sum_access([launch])
