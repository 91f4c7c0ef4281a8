// A copy whose reads are `stride` elements apart, for NVRTC: every byte of x is read once and
// every byte of y written once, exactly the traffic of a plain copy; only the ORDER changes.
//
// View x as a (m, stride) row-major matrix and write its transpose: y[r][c] = x[c][r], y of
// shape (stride, m). Thread c of row r (blockIdx.y) reads x[c * stride + r] and writes
// y[r * m + c]: the 32 threads of a warp write 32 neighbouring elements (one 128-byte line) but
// read elements `stride` apart. DRAM moves 32-byte sectors: at stride 1 a warp's reads use 4
// sectors fully; at stride 8 (float32) or more each of its 32 reads needs a sector of its own,
// of which it uses 4 bytes.
//
// Everything above the marker line is for the editor only (see kernels/add/add.cu).
using scalar_t = float;     // example value; the generated header sets it from x's dtype
constexpr int BLOCK = 256;  // threads per block; the launch must use the same number
// ==== kernel: everything above this line is replaced by the generated header ====

extern "C" __global__ void __launch_bounds__(BLOCK)
strided_copy(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, long long m,
             long long stride) {
    const long long r = blockIdx.y;                          // 0 .. stride-1
    const long long c = blockIdx.x * (long long)BLOCK + threadIdx.x;  // 0 .. m-1
    if (c < m) y[r * m + c] = x[c * stride + r];             // written together, read apart
}
