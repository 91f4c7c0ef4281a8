// What the attention forward needs beyond lesson 16's primitives (hopper.cuh, included first by
// attention.cu): wgmma with A from REGISTERS (P never goes to shared memory), the descriptor of
// an MN-major tile (V is read as [keys, D] with D contiguous), N = 64 for D = 64, named barriers
// between two warpgroups (the ping-pong), the extra timeline kinds, and (section 7) the softmax's
// arithmetic. Each would sit in hopper.cuh's sections 1, 3 and 6 if lesson 16 needed it. The
// backward (attention_bwd.cu) is built from the same pieces.
#pragma once
#include <cuda/std/limits>

// ---- 3b. the MN-major descriptor: V as the B operand of O += P V ---------------------------
// For PV the reduction runs over keys (K = keys) and N = D. V's rows are keys with D
// contiguous, so B is "MN-major" (transposed, imm-trans-b = 1). TMA wrote V as boxes of
// 128 bytes (64 values of D) x BN keys, 128-byte swizzled. In this layout (CUTLASS's canonical
// Swizzle<3,4,3> o ((8T, m), (8, k)) : ((1, LBO), (8T, SBO))):
//   stride byte offset (SBO): from one group of 8 keys to the next: 8 rows x 128 bytes = 1024;
//   leading byte offset (LBO): from one 64-wide chunk of D to the next: the next box, BN x 128.
// One k16 step covers 16 keys = 2048 bytes: +2048 on the start address (still 1024-aligned).
__device__ __forceinline__ u64 smem_descriptor_mn(const void* tile, u32 chunk_bytes) {
    return ((smem_addr(tile) & 0x3FFFF) >> 4) | (u64((chunk_bytes >> 4) & 0x3FFF) << 16) |
           (u64(1024 >> 4) << 32) | (u64(1) << 62);
}

// ---- 3c. wgmma with A in registers ------------------------------------------------------------
// d (64 x N, fp32) += A (64 x 16, four 32-bit registers a thread: pairs of 16-bit values in the
// m16n8k16 A layout of lesson 07, one 16-row slice per warp) * B (16 x N from shared memory).
// The accumulator layout of S = Q K^T is, pair by pair, the A layout of the next product, so P
// goes from S's registers to A's by rounding to 16 bits: no shared memory, no shuffles.
#define WG_REGS_32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, " WG_10(1) WG_10(2) "%30, %31}"
#define WG_OPS_32 WG_8(0), WG_8(8), WG_8(16), WG_8(24)
template <int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const u32 (&a)[4], u64 desc_b,
                                         u32 scale_d);

// (the operand numbers are spelled out: %32 + 1 is not an operand name)
template <>
__device__ __forceinline__ void wgmma_rs<64>(float (&d)[32], const u32 (&a)[4], u64 desc_b,
                                             u32 scale_d) {
#define RS64(TYPE)                                                                             \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"                                \
                 " wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " " WG_REGS_32    \
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                                \
                 : WG_OPS_32 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b),         \
                   "r"(scale_d))
    if constexpr (cuda::std::is_same_v<a_t, __nv_bfloat16>) RS64("bf16"); else RS64("f16");
#undef RS64
}

template <>
__device__ __forceinline__ void wgmma_rs<128>(float (&d)[64], const u32 (&a)[4], u64 desc_b,
                                              u32 scale_d) {
#define RS128(TYPE)                                                                            \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"                                \
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " " WG_REGS_64   \
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                \
                 : WG_OPS_64 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b),         \
                   "r"(scale_d))
    if constexpr (cuda::std::is_same_v<a_t, __nv_bfloat16>) RS128("bf16"); else RS128("f16");
#undef RS128
}

// ---- 3d. S = Q K^T for key tiles of 64 or 128 --------------------------------------------------
// hopper.cuh spells out m64n128 and m64n256 (lesson 16's tiles); a tile of 64 keys needs m64n64.
// TRANS_A, TRANS_B: wgmma's imm-trans-a and imm-trans-b, 1 for an operand read MN-major through
// smem_descriptor_mn (N = 64 only: the backward's version 2 reads both dS and K so, dQ = dS K)
template <int N, int TRANS_A = 0, int TRANS_B = 0>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], u64 desc_a, u64 desc_b, u32 scale_d) {
    static_assert((TRANS_A == 0 || TRANS_A == 1) && (TRANS_B == 0 || TRANS_B == 1), "0 or 1");
    if constexpr (N == 64) {
#define SS64(TYPE)                                                                             \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"                               \
                 " wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " " WG_REGS_32    \
                 ", %32, %33, p, 1, 1, %35, %36;\n}\n"                                         \
                 : WG_OPS_32 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A),           \
                   "n"(TRANS_B))
        if constexpr (cuda::std::is_same_v<a_t, __nv_bfloat16>) SS64("bf16"); else SS64("f16");
#undef SS64
    } else {
        static_assert(TRANS_A == 0 && TRANS_B == 0, "hopper.cuh's wgmma reads both K-major");
        wgmma<N>(d, desc_a, desc_b, scale_d);
    }
}
// One 128-byte box of D: 4 wgmma of k16, as hopper.cuh's wgmma_k_tile, for any key tile BN.
template <int BN>
__device__ __forceinline__ void wgmma_box(float (&d)[BN / 2], const char* q_rows,
                                          const char* k_rows, bool first) {
    const u64 desc_q = smem_descriptor(q_rows), desc_k = smem_descriptor(k_rows);
#pragma unroll
    for (int s = 0; s < K_STEPS; ++s) {
        wgmma_ss<BN>(d, desc_q + s * (K_STEP >> 4), desc_k + s * (K_STEP >> 4), !(first && s == 0));
    }
}

// two fp32 values rounded to one register of 16-bit values (the first in the low half)
__device__ __forceinline__ u32 pack2(float x, float y) {
    if constexpr (cuda::std::is_same_v<a_t, __nv_bfloat16>) {
        __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
        return *reinterpret_cast<u32*>(&v);
    } else {
        __half2 v = __floats2half2_rn(x, y);
        return *reinterpret_cast<u32*>(&v);
    }
}

// ---- 1b. named barriers between two warpgroups: the ping-pong ---------------------------------
// bar.sync waits until 256 threads have come (its own 128 and the other warpgroup's 128, which
// only bar.arrive: they signal and go on). Consumer c waits on barrier FIRST_ID + c before it
// issues its matmuls and signals FIRST_ID + 1 - c after: the tensor cores take turns.
constexpr int PINGPONG_FIRST_ID = 1;  // (0 is __syncthreads)
// ==== turns: begin (exercise hopper_attention.pingpong splices the student's turn_wait and turn_pass here)
__device__ __forceinline__ void turn_wait(int consumer) {
    asm volatile("bar.sync %0, 256;" :: "r"(PINGPONG_FIRST_ID + consumer) : "memory");
}
__device__ __forceinline__ void turn_pass(int consumer) {
    asm volatile("bar.arrive %0, 256;" :: "r"(PINGPONG_FIRST_ID + 1 - consumer) : "memory");
}
// ==== turns: end

// ---- 6b. the timeline's extra kinds (kernels/attention/hopper/timeline.py draws them) ---------
enum AttentionKind : u32 { SOFTMAX = 6, WAIT_TURN = 7 };

// ---- 7. the softmax's arithmetic ---------------------------------------------------------------
constexpr float INF = cuda::std::numeric_limits<float>::infinity();

__device__ __forceinline__ float exp2_approx(float x) {  // one MUFU.EX2; exp2(-inf) = 0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float quad_max(float x) {  // the 4 threads that share a row
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
