// printf from a kernel (lesson 04). Each thread formats one line into a buffer in device
// memory (1 MiB by default: cudaLimitPrintfFifoSize); the driver copies the buffer out to the
// process's standard output (file descriptor 1) only at a synchronisation point, such as
// cudaDeviceSynchronize (torch.cuda.synchronize), a blocking copy, or the next launch.
// Lines of one warp come out together; the order of warps and blocks is whatever order they
// ran in.
//
// Everything above the marker line is for the editor only (see kernels/add/add.cu).
// ==== kernel: everything above this line is replaced by the generated header ====

extern "C" __global__ void hello(const float* __restrict__ x, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) printf("block %d thread %2d: x[%lld] = %+.3f\n", blockIdx.x, threadIdx.x, i, x[i]);
}
