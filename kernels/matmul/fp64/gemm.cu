// FP64 GEMM for NVRTC, the plainest one: out = a @ b, one output element per thread.
//
// a is M x K, b is K x N, out is M x N, all row-major and contiguous (a is K-major, b and out
// are N-major: torch's default layout). A block of TILE_M x TILE_N threads computes a
// TILE_M x TILE_N tile of out; threadIdx.x runs along N so that the 32 threads of a warp read
// 32 neighbouring elements of a row of b and write 32 neighbouring elements of out (coalesced),
// while they all read the same element of a (a broadcast). Nothing is staged in shared memory:
// every thread streams its row of a and its column of b from global memory (the L1 and L2
// caches catch the reuse). That is why the tile shape matters, and why this kernel is far from
// cuBLAS: it is the "implementation" of notebook 11, not a fast GEMM.
//
// Everything above the marker line is for the editor only; course_utils.nvrtc replaces it by a
// header generated from Python values (kernels/matmul/fp64/nvrtc_gemm.py), e.g.
//     constexpr int TILE_M = 16;
//     constexpr int TILE_N = 16;
constexpr int TILE_M = 16;  // example value: rows of out per block (blockDim.y)
constexpr int TILE_N = 16;  // example value: columns of out per block (blockDim.x)
// ==== kernel: everything above this line is replaced by the generated header ====

extern "C" __global__ void __launch_bounds__(TILE_M * TILE_N)
fp64_gemm(const double* __restrict__ a, const double* __restrict__ b, double* __restrict__ out,
          int M, int N, int K) {
    const int row = blockIdx.y * TILE_M + threadIdx.y;
    const int col = blockIdx.x * TILE_N + threadIdx.x;
    if (row >= M || col >= N) return;  // the edge tiles of an M or N that is not a multiple
    // 64-bit offsets: M * K may exceed 2^31 even where each of M, N, K fits in an int
    const double* a_row = a + (long long)row * K;
    const double* b_col = b + col;
    double acc = 0.0;  // FP64 accumulator: no rounding beyond what each FMA does
    for (int k = 0; k < K; ++k) {
        acc = fma(a_row[k], b_col[(long long)k * N], acc);
    }
    out[(long long)row * N + col] = acc;
}
