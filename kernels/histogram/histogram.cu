// Histograms for NVRTC (lesson 04): counts[v] = how many elements of x equal v, for v in
// [0, bins); other values are ignored. Many threads add into the same few counters, so each
// addition must be atomic (a read, an add and a write that no other thread can interleave).
//
// histogram_global: one element per thread, one atomicAdd in global memory per element. The
//   atomics are carried out in the L2 cache; when many threads hit the same bin (skewed data)
//   they queue behind each other there.
// histogram_shared: privatised. Each block keeps its own histogram in shared memory (BINS ints,
//   zeroed first), counts its elements into it with shared-memory atomics (on-chip, ATOMS in
//   SASS), then adds each of its non-zero bins to the global histogram: one global atomic per
//   bin per block instead of one per element. Two __syncthreads: every bin is zero before any
//   thread counts, and every count is in before the block's histogram is read. A grid-stride
//   loop lets a few blocks per SM cover any n, so the flush is paid rarely.
//
// Everything above the marker line is for the editor only: course_utils.nvrtc replaces it by a
// header generated from Python values (BINS: the shared histogram's size, one compile per size).
constexpr int BINS = 256;  // example value: bins of the shared-memory histogram
// ==== kernel: everything above this line is replaced by the generated header ====

extern "C" __global__ void histogram_global(const int* __restrict__ x, int* __restrict__ counts,
                                            long long n, int bins) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        const int v = x[i];
        if (0 <= v && v < bins) atomicAdd(&counts[v], 1);  // the value's bin, if it has one
    }
}

extern "C" __global__ void histogram_shared(const int* __restrict__ x, int* __restrict__ counts,
                                            long long n) {
    __shared__ int local[BINS];  // this block's histogram
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
    __syncthreads();  // every bin is zero before any thread counts into it
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const int v = x[i];
        if (0 <= v && v < BINS) atomicAdd(&local[v], 1);  // on-chip: a shared-memory atomic
    }
    __syncthreads();  // every count is in before the block's histogram is read
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) {
        if (local[b]) atomicAdd(&counts[b], local[b]);  // one global atomic per bin per block
    }
}
