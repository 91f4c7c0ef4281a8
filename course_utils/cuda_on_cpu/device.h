// CUDA's device vocabulary for a host compiler: what a student's kernel may use when it runs on a
// CPU through course_utils.cuda_on_cpu (see runtime.cpp for how threads, barriers and warps are
// run). The student's source is compiled after this header, instrumented with
// -fsanitize=thread: the compiler then calls __tsan_readN / __tsan_writeN before every load and
// store, and runtime.cpp implements those calls as the course's checks (bounds, alignment,
// races, the addresses of each warp's instruction). Nothing here is a GPU: it is the smallest
// vocabulary that makes the kernels of lessons 04-07 mean on a CPU what they mean on a GPU.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

// ---- qualifiers --------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// every block runs alone, one after another, so one static array is each block's shared memory
// (runtime.cpp fills it with garbage before each block: shared memory starts uninitialised)
#define __shared__ __attribute__((section("cc_shared"))) static
#define __constant__ __attribute__((section("cc_const"))) static
#define warpSize 32

// ---- indices -------------------------------------------------------------------------------------
struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; };
extern "C" {
uint3 cc_thread_idx();
uint3 cc_block_idx();
dim3 cc_block_dim();
dim3 cc_grid_dim();
void cc_syncthreads(const void* pc);
int cc_syncthreads_op(int op, int value, const void* pc);
unsigned long long cc_warp_op(int op, unsigned mask, unsigned long long value, int arg, int width,
                              int size, const void* pc);
void cc_atomic_access(const void* address, int size, const void* pc);
void* cc_dynamic_shared();
void cc_trap(const void* pc);
unsigned cc_activemask(const void* pc);
}
#define threadIdx (cc_thread_idx())
#define blockIdx (cc_block_idx())
#define blockDim (cc_block_dim())
#define gridDim (cc_grid_dim())
#define CC_PC (__builtin_return_address(0))

// ---- vector types, with the alignment a GPU requires of them -----------------------------------
#define CC_VEC2(T, N, A) struct alignas(A) N { T x, y; }; \
    inline N make_##N(T x, T y) { return N{x, y}; }
#define CC_VEC4(T, N, A) struct alignas(A) N { T x, y, z, w; }; \
    inline N make_##N(T x, T y, T z, T w) { return N{x, y, z, w}; }
CC_VEC2(float, float2, 8) CC_VEC4(float, float4, 16)
CC_VEC2(int, int2, 8) CC_VEC4(int, int4, 16)
CC_VEC2(unsigned, uint2, 8) CC_VEC4(unsigned, uint4, 16)
CC_VEC2(double, double2, 16)
CC_VEC2(long long, longlong2, 16)
CC_VEC4(char, char4, 4) CC_VEC4(unsigned char, uchar4, 4)
CC_VEC2(short, short2, 4) CC_VEC4(short, short4, 8)
struct float3 { float x, y, z; };
inline float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
#undef CC_VEC2
#undef CC_VEC4

// ---- barriers, warps --------------------------------------------------------------------------
__attribute__((noinline)) inline void __syncthreads() { cc_syncthreads(CC_PC); }
__attribute__((noinline)) inline int __syncthreads_count(int p) { return cc_syncthreads_op(1, p != 0, CC_PC); }
__attribute__((noinline)) inline int __syncthreads_and(int p) { return cc_syncthreads_op(2, p != 0, CC_PC); }
__attribute__((noinline)) inline int __syncthreads_or(int p) { return cc_syncthreads_op(3, p != 0, CC_PC); }
__attribute__((noinline)) inline void __threadfence() {}
__attribute__((noinline)) inline void __threadfence_block() {}
__attribute__((noinline)) inline void __trap() { cc_trap(CC_PC); }

enum { CC_SYNCWARP, CC_SHFL_IDX, CC_SHFL_UP, CC_SHFL_DOWN, CC_SHFL_XOR, CC_BALLOT, CC_ANY, CC_ALL };

template <class T> inline unsigned long long cc_bits(T v) {
    static_assert(sizeof(T) <= 8, "a warp shuffle moves at most 8 bytes");
    unsigned long long b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T> inline T cc_from_bits(unsigned long long b) {
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
}
#define CC_SHFL(NAME, OP, ARG)                                                              \
    template <class T> __attribute__((noinline)) T NAME(unsigned mask, T v, ARG, int width = 32) { \
        return cc_from_bits<T>(cc_warp_op(OP, mask, cc_bits(v), (int)lane_arg, width,          \
                                          sizeof(T), CC_PC));                                  \
    }
CC_SHFL(__shfl_sync, CC_SHFL_IDX, int lane_arg)
CC_SHFL(__shfl_up_sync, CC_SHFL_UP, unsigned lane_arg)
CC_SHFL(__shfl_down_sync, CC_SHFL_DOWN, unsigned lane_arg)
CC_SHFL(__shfl_xor_sync, CC_SHFL_XOR, int lane_arg)
#undef CC_SHFL
__attribute__((noinline)) inline void __syncwarp(unsigned mask = 0xffffffffu) {
    cc_warp_op(CC_SYNCWARP, mask, 0, 0, 32, 4, CC_PC);
}
__attribute__((noinline)) inline unsigned __ballot_sync(unsigned mask, int p) {
    return (unsigned)cc_warp_op(CC_BALLOT, mask, p != 0, 0, 32, 4, CC_PC);
}
__attribute__((noinline)) inline int __any_sync(unsigned mask, int p) {
    return (int)cc_warp_op(CC_ANY, mask, p != 0, 0, 32, 4, CC_PC);
}
__attribute__((noinline)) inline int __all_sync(unsigned mask, int p) {
    return (int)cc_warp_op(CC_ALL, mask, p != 0, 0, 32, 4, CC_PC);
}
// the lanes running together at this point: a converged warp's in the ordered runs, the calling
// lane alone in the shuffled one (runtime.cpp): __activemask() promises no convergence
__attribute__((noinline)) inline unsigned __activemask() { return cc_activemask(CC_PC); }

// ---- atomics: checked as accesses, exempt from the race check between each other ---------------
// (no_sanitize: the read-modify-write below is the atomic itself, not a plain access)
#define CC_ATOMIC(NAME, EXPR)                                                               \
    template <class T, class U>                                                             \
    __attribute__((noinline, no_sanitize("thread"))) T NAME(T* p, U value_) {              \
        cc_atomic_access(p, sizeof(T), CC_PC);                                              \
        const T value = (T)value_;                                                          \
        T old = *p;                                                                         \
        *p = (EXPR);                                                                        \
        return old;                                                                         \
    }
CC_ATOMIC(atomicAdd, old + value)
CC_ATOMIC(atomicSub, old - value)
CC_ATOMIC(atomicExch, value)
CC_ATOMIC(atomicMax, old < value ? value : old)
CC_ATOMIC(atomicMin, value < old ? value : old)
CC_ATOMIC(atomicAnd, old & value)
CC_ATOMIC(atomicOr, old | value)
CC_ATOMIC(atomicXor, old ^ value)
#undef CC_ATOMIC
template <class T, class U, class V>
__attribute__((noinline, no_sanitize("thread"))) T atomicCAS(T* p, U compare, V value) {
    cc_atomic_access(p, sizeof(T), CC_PC);
    T old = *p;
    if (old == (T)compare) *p = (T)value;
    return old;
}
__attribute__((noinline, no_sanitize("thread"))) inline unsigned atomicInc(unsigned* p, unsigned limit) {
    cc_atomic_access(p, 4, CC_PC);
    unsigned old = *p;
    *p = old >= limit ? 0 : old + 1;
    return old;
}

// ---- half precision: _Float16 rounds every operation to fp16, as a GPU's half arithmetic does
typedef _Float16 __half;
typedef __half half;
struct alignas(4) __half2 { __half x, y; };
inline __half __float2half(float f) { return (__half)f; }
inline __half __float2half_rn(float f) { return (__half)f; }
inline float __half2float(__half h) { return (float)h; }
inline __half __hadd(__half a, __half b) { return a + b; }
inline __half __hsub(__half a, __half b) { return a - b; }
inline __half __hmul(__half a, __half b) { return a * b; }
inline __half __hdiv(__half a, __half b) { return a / b; }
inline __half __hfma(__half a, __half b, __half c) { return (__half)fmaf(a, b, c); }
inline __half __int2half_rn(int i) { return (__half)(float)i; }
inline unsigned short __half_as_ushort(__half h) { return cc_from_bits<unsigned short>(cc_bits(h)); }
inline __half __ushort_as_half(unsigned short u) { return cc_from_bits<__half>(cc_bits(u)); }

// ---- math: the intrinsics of the course's kernels, as their exact counterparts ------------------
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanhf(float x) { return tanhf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline int __float_as_int(float x) { return cc_from_bits<int>(cc_bits(x)); }
inline unsigned __float_as_uint(float x) { return cc_from_bits<unsigned>(cc_bits(x)); }
inline float __int_as_float(int x) { return cc_from_bits<float>(cc_bits(x)); }
inline float __uint_as_float(unsigned x) { return cc_from_bits<float>(cc_bits(x)); }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline float __int2float_rn(int x) { return (float)x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
template <class T> inline T __ldg(const T* p) { return *p; }
template <class A, class B> inline std::common_type_t<A, B> min(A a, B b) { return b < a ? b : a; }
template <class A, class B> inline std::common_type_t<A, B> max(A a, B b) { return a < b ? b : a; }
