"""The CPU runner of CUDA kernels (course_utils.cuda_on_cpu): it computes what a GPU computes,
and stops, naming thread, buffer and line, where a GPU would go wrong."""

from __future__ import annotations

import pytest
import torch

from course_utils import cuda_on_cpu

pytestmark = pytest.mark.skipif(cuda_on_cpu.unavailable_reason() is not None,
                                reason=str(cuda_on_cpu.unavailable_reason()))

KERNELS = r"""
extern "C" __global__ void copy(const float* x, float* y, int n, int stride) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[(i * stride) % n];
}
extern "C" __global__ void copy_past(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) y[i] = x[i];
}
extern "C" __global__ void vector_tail(const float* x, float* y, int n) {
    const int i = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) {
        const float4 v = reinterpret_cast<const float4*>(x)[i / 4];  // the tail reads past x
        y[i] = v.x;
    }
}
extern "C" __global__ void into_input(const float* x, float* y) {
    const_cast<float*>(x)[threadIdx.x] = 1.0f;
}
extern "C" __global__ void reverse_block(const float* x, float* y, int barrier) {
    __shared__ float tile[64];
    tile[threadIdx.x] = x[blockIdx.x * 64 + threadIdx.x];
    if (barrier) __syncthreads();
    y[blockIdx.x * 64 + threadIdx.x] = tile[63 - threadIdx.x];
}
extern "C" __global__ void all_to_one(float* y) { y[0] = threadIdx.x; }
extern "C" __global__ void count(const int* x, int* counts, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&counts[x[i]], 1);
}
extern "C" __global__ void shuffles(const float* x, float* y, int width) {
    const int t = threadIdx.x;
    const float v = x[t];
    y[5 * t + 0] = __shfl_sync(0xffffffff, v, 3, width);
    y[5 * t + 1] = __shfl_up_sync(0xffffffff, v, 1, width);
    y[5 * t + 2] = __shfl_down_sync(0xffffffff, v, 2, width);
    y[5 * t + 3] = __shfl_xor_sync(0xffffffff, v, 1, width);
    y[5 * t + 4] = __ballot_sync(0xffffffff, v > 0) == 0x0000ffffu;
}
extern "C" __global__ void early_exit_shuffle(const float* x, float* y, int n) {
    if (threadIdx.x >= n) return;
    y[threadIdx.x] = __shfl_down_sync(0xffffffff, x[threadIdx.x], 1);
}
extern "C" __global__ void forever(float* y, int n) {
    int i = 0, a = 1;
    while (i < n) a = 3 * a + 1;
    y[0] = a;
}
extern "C" __global__ void columns(float* y, int pad) {
    __shared__ float tile[32 * 33];
    tile[threadIdx.x * (32 + pad)] = threadIdx.x;
    __syncthreads();
    y[threadIdx.x] = tile[threadIdx.x * (32 + pad)];
}
extern "C" __global__ void counted(const float* x, int* y) {
    y[threadIdx.x] = __syncthreads_count(x[threadIdx.x] > 0);
}
extern "C" __global__ void active(unsigned* y, int n) {
    if (threadIdx.x < n) y[threadIdx.x] = __activemask();
}
extern "C" __global__ void active_sum(const float* x, float* y) {
    float s = x[threadIdx.x];
    const unsigned mask = __activemask();
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(mask, s, offset);
    if (threadIdx.x % 32 == 0) y[threadIdx.x / 32] = s;
}
extern "C" __global__ void mark_blocks(int* y) {
    if (threadIdx.x == 0) y[blockIdx.y * gridDim.x + blockIdx.x] = 1;
}
extern "C" __global__ void offset_in_int(const float* x, float* y, long long cols) {
    const int r = blockIdx.x, c = threadIdx.x;
    y[r * (int)cols + c] = x[r * (int)cols + c];
}
"""


@pytest.fixture(scope="module")
def kernels():
    return lambda name: cuda_on_cpu.kernel(KERNELS, name)


def test_a_copy_is_exact_in_every_order(kernels):
    k = kernels("copy")
    x = torch.randn(1000)
    for order in range(3):
        y = torch.empty(1000)
        k(x, y, 1000, 1, grid=4, block=256, order=order)
        assert torch.equal(x, y)
    assert [launch.order for launch in k.launches] == list(cuda_on_cpu.ORDERS)


def test_sectors_are_counted_per_warp_instruction(kernels):
    k = kernels("copy")
    x, y = torch.randn(1024), torch.empty(1024)
    k(x, y, 1024, 1, grid=4, block=256)
    k(x, y, 1024, 32, grid=4, block=256)  # every lane of a warp in a sector of its own
    coalesced, strided = (launch.metrics for launch in k.launches)
    assert coalesced["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 1024 * 4 / 32
    assert coalesced["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] == 1024 / 32
    assert strided["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 1024
    assert coalesced["threads: Global Store"] == 1024


def test_one_past_the_end_is_named(kernels):
    with pytest.raises(cuda_on_cpu.KernelFault, match=r"stores 4 bytes at y\[100\].*past the "
                       r"end of y") as fault:
        kernels("copy_past")(torch.randn(101), torch.empty(100), 100, grid=1, block=128)
    assert "line 8" in str(fault.value) and "thread (100, 0, 0)" in str(fault.value)


def test_a_vector_load_partly_past_the_end_is_caught_though_its_values_are_unused(kernels):
    with pytest.raises(cuda_on_cpu.KernelFault, match="runs past the end of x"):
        kernels("vector_tail")(torch.randn(6), torch.empty(6), 6, grid=1, block=2)


def test_a_misaligned_float4_is_refused(kernels):
    x = torch.randn(9)[1:]  # 4 bytes off 16-byte alignment
    with pytest.raises(cuda_on_cpu.KernelFault, match="not a multiple of 16") as fault:
        kernels("vector_tail")(x, torch.empty(8), 8, grid=1, block=2)
    assert fault.value.kind == "misaligned"


def test_a_store_into_a_const_input_is_refused(kernels):
    with pytest.raises(cuda_on_cpu.KernelFault, match="x is a const input"):
        kernels("into_input")(torch.zeros(32), torch.zeros(32), grid=1, block=32)


def test_a_missing_barrier_is_a_race_whatever_the_values(kernels):
    k = kernels("reverse_block")
    x = torch.randn(128)
    y = torch.empty(128)
    k(x, y, 1, grid=2, block=64)
    assert torch.equal(y, x.view(2, 64).flip(1).flatten())
    with pytest.raises(cuda_on_cpu.KernelFault, match=r"a race on tile\[\d+\] \(shared "
                       "memory\\).*__syncthreads") as fault:
        k(x, y, 0, grid=2, block=64)
    assert fault.value.kind == "race"


def test_two_threads_storing_one_element_race(kernels):
    with pytest.raises(cuda_on_cpu.KernelFault, match=r"a race on y\[0\] \(global memory\)"):
        kernels("all_to_one")(torch.zeros(1), grid=1, block=2)


def test_atomics_do_not_race_and_count_exactly(kernels):
    x = torch.randint(0, 7, (5000,), dtype=torch.int32)
    counts = torch.zeros(7, dtype=torch.int32)
    kernels("count")(x, counts, 5000, grid=20, block=256, order=2)
    assert torch.equal(counts, torch.bincount(x, minlength=7).int())


@pytest.mark.parametrize("width", [32, 16, 8])
def test_shuffles_follow_the_ptx_rules(kernels, width):
    x = torch.arange(32, dtype=torch.float32) - 15.5  # lanes 16-31 positive
    y = torch.empty(32 * 5)
    kernels("shuffles")(x, y, width, grid=1, block=32)
    got = y.view(32, 5)
    for lane in range(32):
        base, sub = lane - lane % width, lane % width
        assert got[lane, 0] == x[base + 3 % width]
        assert got[lane, 1] == (x[lane - 1] if sub >= 1 else x[lane])
        assert got[lane, 2] == (x[lane + 2] if sub + 2 < width else x[lane])
        assert got[lane, 3] == x[lane ^ 1]
    assert (got[:, 4] == 0).all()  # the ballot is lanes 16-31: 0xffff0000, not 0x0000ffff


def test_a_shuffle_waiting_for_an_exited_lane_is_named(kernels):
    with pytest.raises(cuda_on_cpu.KernelFault, match="already exited") as fault:
        kernels("early_exit_shuffle")(torch.randn(32), torch.empty(32), 20, grid=1, block=32)
    assert fault.value.kind == "lane exited"


def test_a_kernel_that_never_ends_is_stopped_by_the_clock():
    k = cuda_on_cpu.kernel(KERNELS, "forever", seconds=0.5)
    with pytest.raises(cuda_on_cpu.KernelFault, match="did not end"):
        k(torch.zeros(1), 1, grid=1, block=1)
    k(torch.zeros(1), 0, grid=1, block=1)  # the process is fine afterwards


@pytest.mark.parametrize("pad, wavefronts", [(0, 32), (1, 1)])
def test_bank_conflicts_are_counted_as_wavefronts(kernels, pad, wavefronts):
    k = kernels("columns")
    k(torch.empty(32), pad, grid=1, block=32)
    m = k.launches[-1].metrics
    assert m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"] == wavefronts
    assert m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"] == wavefronts - 1


def test_syncthreads_count(kernels):
    x = torch.randn(64)
    y = torch.empty(64, dtype=torch.int32)
    kernels("counted")(x, y, grid=1, block=64)
    assert (y == int((x > 0).sum())).all()


def test_what_only_a_gpu_runs_is_unsupported():
    with pytest.raises(cuda_on_cpu.Unsupported, match="inline PTX"):
        cuda_on_cpu.kernel('extern "C" __global__ void k(int* y) { asm volatile("trap;"); }', "k")


def test_bad_arguments_are_named(kernels):
    k = kernels("copy")
    with pytest.raises(TypeError, match="takes 4 arguments"):
        k(torch.zeros(1), grid=1, block=1)
    with pytest.raises(ValueError, match="at most 1024 threads"):
        k(torch.zeros(1), torch.zeros(1), 1, 1, grid=1, block=2048)
    with pytest.raises(TypeError, match="pass a Python number"):
        k(torch.zeros(1), torch.zeros(1), torch.tensor(1), 1, grid=1, block=1)


def test_activemask_is_the_converged_lanes_in_order_and_the_lane_alone_shuffled(kernels):
    # lanes 0-19 take the branch, 20-63 exit: run in order, the lanes that reach the call
    # together; shuffled, each lane alone (independent thread scheduling allows either)
    k = kernels("active")
    for order, want in ((0, [0xFFFFF] * 20), (1, [0xFFFFF] * 20),
                        (2, [1 << lane for lane in range(20)])):
        y = torch.zeros(64, dtype=torch.int32)
        k(y, 20, grid=1, block=64, order=order)
        assert [v & 0xFFFFFFFF for v in y[:20].tolist()] == want, order
        assert not y[20:].any()


def test_a_warp_sum_under_activemask_is_named_in_the_shuffled_run(kernels):
    k, x, y = kernels("active_sum"), torch.randn(64), torch.zeros(2)
    for order in (0, 1):  # every lane got there together: the full warp
        k(x, y, grid=1, block=64, order=order)
        assert torch.allclose(y, x.view(2, 32).sum(1))
    with pytest.raises(cuda_on_cpu.KernelFault, match="which is not in the shuffle's mask "
                       r"\(0x[0-9a-f]{8}\).*__activemask\(\) promises no convergence") as fault:
        k(x, y, grid=1, block=64, order=2)
    assert fault.value.kind == "lane not in mask"


def test_blocks_runs_only_the_named_blocks(kernels):
    k = kernels("mark_blocks")
    y = torch.zeros(12, dtype=torch.int32)
    k(y, grid=(4, 3), block=32, blocks=[(0, 0), (3, 2), (1, 1)])
    assert torch.nonzero(y).flatten().tolist() == [0, 5, 11]
    with pytest.raises(ValueError, match="outside the grid"):
        k(y, grid=(4, 3), block=32, blocks=[(4, 0)])


def test_an_int_offset_past_2_31_elements_is_caught_over_reserved_memory(kernels):
    """The last row of a matrix past 2^31 elements, reserved (MAP_NORESERVE) and never
    allocated: r * (int)cols wraps around to a negative offset, which lands before x."""
    from course_utils.cuda_on_cpu import reserved

    rows, cols = 1 << 16, (1 << 15) + 32  # 2^31 + 2^21 elements: the last row starts past 2^31
    x, y = (t.view(rows, cols) for t in reserved(rows * cols))
    x[-1, :32] = torch.arange(32.0)
    with pytest.raises(cuda_on_cpu.KernelFault, match=r"at x\[-\d+\].*before the start of x"):
        kernels("offset_in_int")(x, y, cols, grid=(rows, 1, 1), block=32, blocks=[(rows - 1,)])
