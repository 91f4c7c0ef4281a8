// The first CUDA kernels of lesson 04, for NVRTC: one element per thread, then a 2-D grid.
//
// affine: y[i] = a * x[i] + b. The launch makes ceil(n / threads) blocks of `threads` threads;
//   thread t of block b takes element i = b * threads + t. The last block usually has threads
//   past the end of x, so every thread first asks `i < n` (the guard).
// add_2d: y = a + b for row-major (rows, cols) matrices: element (r, c) lives at r * cols + c.
//   The block is 2-D (32 x 8 threads) and so is the grid; threadIdx.x runs along a row (the
//   fast axis: 32 neighbouring threads of a warp read 32 neighbouring floats, one 128-byte line).
// add_2d_columns: the same sum with threadIdx.x running down a column instead: each thread of a
//   warp reads a different row, 4 * cols bytes apart (uncoalesced). Same values, more traffic.
//
// Everything above the marker line is for the editor only (see kernels/add/add.cu); these
// kernels take no generated values.
// ==== kernel: everything above this line is replaced by the generated header ====

extern "C" __global__ void affine(const float* __restrict__ x, float* __restrict__ y, float a,
                                  float b, long long n) {
    // 64-bit index: blockIdx.x * blockDim.x in 32 bits overflows past 2^31 elements
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;  // the guard: threads past the end do nothing
}

extern "C" __global__ void add_2d(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ y, long long rows, long long cols) {
    const long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // along a row
    const long long r = blockIdx.y * (long long)blockDim.y + threadIdx.y;  // down a column
    if (r < rows && c < cols) y[r * cols + c] = a[r * cols + c] + b[r * cols + c];
}

extern "C" __global__ void add_2d_columns(const float* __restrict__ a,
                                          const float* __restrict__ b, float* __restrict__ y,
                                          long long rows, long long cols) {
    const long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // down a column
    const long long c = blockIdx.y * (long long)blockDim.y + threadIdx.y;  // along a row
    if (r < rows && c < cols) y[r * cols + c] = a[r * cols + c] + b[r * cols + c];
}
