// Exercise mma_matmul.swizzle_cuda: the tile loader of lesson 07's steps 9-10, with step 11's swizzle
// to add.
//
// 128 threads (4 warps) copy a 64-row tile of A (64 bytes a row: 32 bf16 of K) from global into
// shared memory, 16 bytes at a time, then each warp reads its 16 rows back with ldmatrix.x4,
// once per k-step of 32 bytes (16 bf16): exactly the four registers of A one m16n8k16 mma.sync
// takes. Where a chunk is stored and where ldmatrix looks for it are two functions, yours: the
// copy calls store_offset, ldmatrix calls ldmatrix_offset, so they must agree. Written here
// without the swizzle, the 8 rows one ldmatrix phase reads fall in 2 of the 8 bank groups (a
// 4-way conflict, the figure of section 1).
//
// The kernel writes what ldmatrix gave each lane to `out`, so a test can compare it with the
// fragment layout of the PTX ISA.
constexpr int ROWS = 64;                 // rows of the tile: 4 warps x 16
constexpr int ROW_BYTES = 64;            // bytes of K per row
// ==== kernel: everything above this line is replaced by the generated header ====

constexpr int CHUNKS = ROW_BYTES / 16;   // 16-byte chunks per row
constexpr int K_STEPS = CHUNKS / 2;      // an mma.sync k-step reads 32 bytes of K
constexpr int THREADS = 128;

// ==== your code: store_offset and ldmatrix_offset ====

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const char* p) {
    const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address));
}

extern "C" __global__ void __launch_bounds__(THREADS)
load_fragments(const int* __restrict__ tile, int* __restrict__ out) {
    // tile: the 64 x 64-byte tile as 4-byte words, row-major; out: per warp, k-step and lane,
    // the 4 registers ldmatrix gave it
    __shared__ __align__(128) char smem[ROWS * ROW_BYTES];
    // the copy: thread t moves chunks t, t + 128, ... (row-major order: coalesced reads)
    for (int i = threadIdx.x; i < ROWS * CHUNKS; i += THREADS) {
        *reinterpret_cast<int4*>(smem + store_offset(i / CHUNKS, i % CHUNKS)) =
            reinterpret_cast<const int4*>(tile)[i];
    }
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int step = 0; step < K_STEPS; ++step) {
        unsigned r[4];
        ldmatrix_x4(r, smem + ldmatrix_offset(warp, lane, step));
#pragma unroll
        for (int j = 0; j < 4; ++j) out[((warp * K_STEPS + step) * 32 + lane) * 4 + j] = int(r[j]);
    }
}
