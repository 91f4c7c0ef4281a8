// The CUDA occupancy calculator (cuda_occupancy.h, header-only, no GPU) on an H100's properties:
// reads "threads registers shared" lines, prints resident blocks per SM (-1: an error).
// tests/test_occupancy.py compiles it with the C++ compiler and compares course_utils.occupancy.
#include <cstdio>
#include <cuda_occupancy.h>
int main() {
    cudaOccDeviceProp p;
    p.computeMajor = 9; p.computeMinor = 0; p.maxThreadsPerBlock = 1024;
    p.maxThreadsPerMultiprocessor = 2048; p.regsPerBlock = 65536; p.regsPerMultiprocessor = 65536;
    p.warpSize = 32; p.sharedMemPerBlock = 49152; p.sharedMemPerMultiprocessor = 233472;
    p.numSms = 132; p.sharedMemPerBlockOptin = 232448; p.reservedSharedMemPerBlock = 1024;
    int threads, regs, smem;
    while (scanf("%d %d %d", &threads, &regs, &smem) == 3) {
        cudaOccFuncAttributes a;
        a.maxThreadsPerBlock = 1024; a.numRegs = regs; a.sharedSizeBytes = 0;
        a.partitionedGCConfig = PARTITIONED_GC_OFF;
        a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN; a.maxDynamicSharedSizeBytes = 232448;
        cudaOccDeviceState s;
        cudaOccResult r;
        cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, threads, smem);
        printf("%d\n", e == CUDA_OCC_SUCCESS ? r.activeBlocksPerMultiprocessor : -1);
    }
}
