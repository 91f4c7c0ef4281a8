// Inclusive scan for NVRTC: y[r][i] = x[r][0] + ... + x[r][i] in scalar_t (float or int), in
// one pass over x and y.
//
// A block owns a tile of TILE = BLOCK * ITEMS elements of one row (ITEMS per thread: the
// coarsening factor lesson 21 sweeps). It scans the tile as ITEMS rounds of a block scan of
// BLOCK elements, each round's total carried into the next:
//   block_scan: 5 __shfl_up_sync steps scan each warp (lane l adds the lane `offset` below it,
//   offset 1, 2, 4, 8, 16); lane 31 then holds its warp's total, which goes to shared memory;
//   after one __syncthreads every thread adds the totals of the warps before its own.
// Across tiles it uses a decoupled look-back (Merrill and Garland, 2016; CUB's DeviceScan):
//   each tile publishes its own total (AGGREGATE) as soon as it knows it, then walks back over
//   its predecessors, adding AGGREGATEs until it meets an inclusive PREFIX (the sum of a tile
//   and of everything before it), and publishes its own PREFIX. x is read once and y written
//   once, the traffic of a copy; a tile waits only for tiles that have already started.
// Tiles start in the order they take a ticket (an atomicAdd on a counter), not in blockIdx
// order: a GPU may start block 900 before block 3, and a tile waiting for a predecessor that
// never started would wait for ever. The counter and the tiles' words live in `status`, which
// the caller zeroes: status[0] the counter, status[1 + t] tile t's (flag << 32 | value bits).
//
// Everything above the marker line is for the editor only: course_utils.nvrtc replaces it by a
// header generated from Python values (scalar_t from the tensor's dtype, BLOCK, ITEMS).
using scalar_t = float;     // example value; the generated header sets it from x's dtype
constexpr int BLOCK = 256;  // threads per block; the launch must use the same number
constexpr int ITEMS = 16;   // elements per thread (the coarsening factor)
// ==== kernel: everything above this line is replaced by the generated header ====

constexpr int WARP = 32;
constexpr int WARPS = BLOCK / WARP;
constexpr long long TILE = (long long)BLOCK * ITEMS;
constexpr unsigned FULL_MASK = 0xffffffffu;  // every lane of the warp takes part in each shuffle
constexpr unsigned long long AGGREGATE = 1ull << 32;  // a tile's own total is published
constexpr unsigned long long PREFIX = 2ull << 32;     // the total of it and every tile before it

__device__ __forceinline__ unsigned to_bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned to_bits(int v) { return (unsigned)v; }
__device__ __forceinline__ float from_bits(unsigned b, float) { return __uint_as_float(b); }
__device__ __forceinline__ int from_bits(unsigned b, int) { return (int)b; }

// The inclusive scan of one value per thread over the block, and the block's total. Every
// thread of the block must call it (it holds a barrier). `totals` is a shared array of WARPS
// that no other thread reads or writes until the next barrier: the caller alternates two of
// them, so a round's writes never meet the previous round's reads.
__device__ __forceinline__ scalar_t block_scan(scalar_t v, scalar_t* totals,
                                               scalar_t& block_total) {
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
#pragma unroll
    for (int offset = 1; offset < WARP; offset *= 2) {
        const scalar_t below = __shfl_up_sync(FULL_MASK, v, offset);
        if (lane >= offset) v += below;  // lanes below `offset` have no lane that far down
    }
    if (lane == WARP - 1) totals[warp] = v;
    __syncthreads();  // every warp's total is in shared memory
    scalar_t before = 0, total = 0;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
        const scalar_t t = totals[w];  // the same word for the whole warp: a broadcast
        before += w < warp ? t : scalar_t(0);
        total += t;
    }
    block_total = total;
    return v + before;
}

// The sum of every tile before tile `ticket` in its row, read from their published words:
// AGGREGATEs are added and the walk goes on; the first PREFIX ends it (tile 0 of each row
// publishes its PREFIX at once, so a walk never leaves its row). A word still 0 is a
// predecessor that has not published yet: wait for it (it has started: its ticket is lower).
// Its words are read with atomics, as they are written: a plain load may be served stale.
__device__ scalar_t look_back(unsigned long long* words, long long ticket) {
    scalar_t exclusive = 0;
    for (long long t = ticket - 1;; --t) {
        unsigned long long word;
        do {
            word = atomicAdd(&words[t], 0ull);
        } while ((word >> 32) == 0);
        exclusive += from_bits((unsigned)word, scalar_t());
        if ((word & PREFIX) != 0) return exclusive;
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK)
scan_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, long long* status,
            long long cols, long long tiles_per_row) {
    __shared__ scalar_t totals[2][WARPS];  // two, alternating: one barrier per round
    __shared__ long long ticket_shared;
    __shared__ scalar_t carry_shared;
    unsigned long long* counter = reinterpret_cast<unsigned long long*>(status);
    unsigned long long* words = counter + 1;
    if (threadIdx.x == 0) ticket_shared = (long long)atomicAdd(counter, 1ull);
    __syncthreads();
    const long long ticket = ticket_shared;
    const long long row = ticket / tiles_per_row, tile = ticket % tiles_per_row;
    const scalar_t* x_row = x + row * cols;
    scalar_t* y_row = y + row * cols;
    const long long start = tile * TILE + threadIdx.x;

    // every load of the tile first, neighbouring threads on neighbouring elements (coalesced):
    // ITEMS loads in flight per thread
    scalar_t v[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const long long c = start + (long long)k * BLOCK;
        v[k] = c < cols ? x_row[c] : scalar_t(0);
    }
    scalar_t running = 0;  // the sum of the rounds so far: the tile's total after the loop
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        scalar_t round_total;
        v[k] = block_scan(v[k], totals[k % 2], round_total) + running;
        running += round_total;
    }
    if (threadIdx.x == 0) {
        scalar_t carry = 0;
        if (tile == 0) {
            atomicExch(&words[ticket], PREFIX | to_bits(running));
        } else {
            atomicExch(&words[ticket], AGGREGATE | to_bits(running));
            carry = look_back(words, ticket);
            atomicExch(&words[ticket], PREFIX | to_bits(carry + running));
        }
        carry_shared = carry;
    }
    __syncthreads();  // the carry is in shared memory
    const scalar_t carry = carry_shared;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const long long c = start + (long long)k * BLOCK;
        if (c < cols) y_row[c] = v[k] + carry;
    }
}
