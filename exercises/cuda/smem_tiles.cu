// Exercise mma_matmul.smem: C = A @ B with tiles of A and B staged in shared memory, one output element
// per thread (step 4's idea, before steps 6-8 add register blocking).
//
// A block of TILE x TILE threads computes a TILE x TILE tile of C. Thread (ty, tx) owns
// C(row, col) with row = blockIdx.y * TILE + ty and col = blockIdx.x * TILE + tx. The K loop
// walks K in slices of TILE: per slice the block copies a TILE x TILE piece of A and of B into
// shared memory (each element read from global memory once per block, not once per thread),
// waits, and every thread then reads its row of A and its column of B from shared memory.
//
// Operands as in lesson 07: A [M, K] row-major, A(m, k) = a[m * K + k]; B [K, N] column-major,
// B(k, n) = b[n * K + k] (b.t() is contiguous); C [M, N] row-major, fp32 throughout.
constexpr int TILE = 16;  // example value: the generated header sets it
// ==== kernel: everything above this line is replaced by the generated header ====

extern "C" __global__ void __launch_bounds__(TILE * TILE)
matmul_smem(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
            int M, int N, int K) {
    // as[ty][k] = A(row0 + ty, k0 + k) and bs[tx][k] = B(k0 + k, col0 + tx): both stored along
    // K, as they lie in global memory. The +1 column keeps bs[tx][k] of the 16 threads of a
    // half-warp (tx = 0..15) in 16 different banks.
    __shared__ float as[TILE][TILE + 1];
    __shared__ float bs[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const int row = row0 + ty, col = col0 + tx;

    // ==== your code: the K loop and the store of C(row, col) ====
}
