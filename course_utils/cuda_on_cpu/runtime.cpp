// The runtime that runs a CUDA kernel's grid on one CPU thread (course_utils.cuda_on_cpu).
//
// How a launch runs:
//   * blocks one after another (in the order the launch asks for: forward, reverse, shuffled);
//   * a block's threads as coroutines (ucontext), each running the kernel until it reaches a
//     __syncthreads, a warp collective (__shfl_*_sync, __ballot_sync, __syncwarp), an exit, or,
//     in the shuffled order, a random point at a load or store: then the next thread runs.
//     A barrier lets its threads go when every thread of the block still running has arrived; a
//     warp collective when every lane its mask names has arrived (a named lane that exited, or
//     lanes that wait at different collectives, is an error, as it is undefined on a GPU);
//   * __activemask() promises no convergence (CUDA Programming Guide: the lanes active at that
//     moment, which under independent thread scheduling may be fewer than the warp). In the
//     ordered runs it waits until no lane of its warp can run on and returns the lanes that
//     reached the same call (a converged warp); in the shuffled run it returns the calling lane
//     alone (a lane scheduled on its own), so a shuffle under that mask that reads another lane
//     is reported;
//   * Python may name the blocks to run (cc_only_blocks): the others are skipped, so a kernel can
//     be run on a few blocks of a grid too large to run whole (over a tensor reserved, not
//     allocated: only the pages those blocks touch are ever committed);
//   * the student's code is compiled with -fsanitize=thread, so the compiler calls
//     __tsan_readN / __tsan_writeN (below) before each of its loads and stores. Those calls are
//     the checks: the address must lie inside one of the launch's buffers (its tensors, a
//     __shared__ array, the dynamic shared memory), aligned to its size (a float4 at 16 bytes),
//     not be a store into a const input; two threads may not touch one word (one of them
//     storing) unless a barrier lies between them, or both are atomics; and the addresses the
//     lanes of one warp give one instruction are counted into 32-byte sectors (global memory) or
//     bank wavefronts (shared memory), as Nsight Compute counts them on a GPU.
// The first error ends the launch (nothing is written after it) and is described in cc_error
// for Python to name (buffer names and source lines are Python's: it knows the signature and
// reads the line table).
//
// The parts, one translation unit: state.h (types and state), guard.h (the clock and the fault
// signals), memory_checks.h (each load and store), collectives.h (barriers and warp
// collectives); here, the scheduler, the calls the kernel makes and the launch.
#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <ucontext.h>

#include <algorithm>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <unordered_map>
#include <vector>


#include "state.h"
#include "guard.h"
#include "memory_checks.h"
#include "collectives.h"

namespace {

Thread* pick() {
    std::vector<int> ready;
    for (int i = 0; i < nthreads; ++i)
        if (threads[i].state == RUNNABLE) ready.push_back(i);
    if (ready.empty()) return nullptr;
    if (order == 0) return &threads[ready.front()];
    if (order == 1) return &threads[ready.back()];
    return &threads[ready[rng() % ready.size()]];
}

void run_block() {
    block_epoch = 0;
    std::fill(warp_collectives.begin(), warp_collectives.end(), 0u);
    for (Region& r : regions)  // shared memory: uninitialised, and watched afresh
        if (r.space == SHARED || r.space == DYNAMIC_SHARED) {
            std::memset((void*)r.lo, 0xff, r.hi - r.lo);  // NaN as float, -1 as int
            std::fill(r.shadow.begin(), r.shadow.end(), Cell{});
        }
    for (int i = 0; i < nthreads; ++i) {
        Thread& t = threads[i];
        t.index = i;
        t.warp = i / 32;
        t.lane = i % 32;
        t.tid = tid_of(i);
        t.state = RUNNABLE;
        t.stack = stacks + size_t(i) * STACK;
        t.executed.clear();
        getcontext(&t.context);
        t.context.uc_stack.ss_sp = t.stack;
        t.context.uc_stack.ss_size = STACK;
        t.context.uc_link = &scheduler;
        makecontext(&t.context, thread_main, 0);
    }
    while (!aborted) {
        Thread* t = pick();
        if (!t) {
            if (live() == 0) break;
            char text[160];
            int barrier = 0, warp = 0;
            for (const Thread& u : threads) {
                barrier += u.state == AT_BARRIER;
                warp += u.state == AT_WARP;
            }
            std::snprintf(text, sizeof text, "%d threads wait at __syncthreads, %d at a warp "
                          "collective, %d have exited", barrier, warp, nthreads - live());
            for (const Thread& u : threads)
                if (u.state == AT_WARP || u.state == AT_BARRIER) {
                    copy3(cc_error.tid, u.tid);
                    cc_error.pc = u.state == AT_WARP ? u.pc : u.barrier_pc;
                    break;
                }
            fail_here(DEADLOCK, text);
            break;
        }
        current = t;
        in_runtime = 1;  // a thread resumes inside the runtime call it yielded from
        swapcontext(&scheduler, &t->context);
        in_runtime = 1;
        Thread& ran = *current;
        current = nullptr;
        if (aborted) break;
        if (ran.state == DONE) {
            release_barrier();
            check_exited(ran);
        }
        release_activemask(ran.warp);  // it may have been the warp's last lane able to run
    }
    flush_groups();
}

}  // namespace

// ---- the calls the instrumented kernel makes ----------------------------------------------------
extern "C" {
#define CC_ACCESS(N)                                                                          \
    void __tsan_read##N(void* a) { access(a, N, LOAD, __builtin_return_address(0)); }         \
    void __tsan_write##N(void* a) { access(a, N, STORE, __builtin_return_address(0)); }       \
    void __tsan_unaligned_read##N(void* a) { access(a, N, LOAD, __builtin_return_address(0)); } \
    void __tsan_unaligned_write##N(void* a) { access(a, N, STORE, __builtin_return_address(0)); }
CC_ACCESS(1)
CC_ACCESS(2)
CC_ACCESS(4)
CC_ACCESS(8)
CC_ACCESS(16)
#undef CC_ACCESS
void __tsan_read_range(void* a, unsigned long n) {
    for (unsigned long i = 0; i < n; ++i) access((char*)a + i, 1, LOAD, __builtin_return_address(0));
}
void __tsan_write_range(void* a, unsigned long n) {
    for (unsigned long i = 0; i < n; ++i) access((char*)a + i, 1, STORE, __builtin_return_address(0));
}
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}

uint3 cc_thread_idx() { return current->tid; }
uint3 cc_block_idx() { return block_idx; }
dim3 cc_block_dim() { return block_dim; }
dim3 cc_grid_dim() { return grid_dim; }
void* cc_dynamic_shared() { return dynamic_shared.data(); }

void cc_atomic_access(const void* address, int size, const void* pc) {
    access(address, size, ATOMIC, pc);
}

int cc_syncthreads_op(int op, int value, const void* pc) {
    InRuntime busy;
    current->state = AT_BARRIER;
    current->barrier_op = op;
    current->barrier_value = value;
    current->barrier_pc = pc;
    release_barrier();
    if (aborted) fail(cc_error.kind, pc, cc_error.text);
    if (current->state == AT_BARRIER) yield();
    return current->barrier_result;
}

void cc_syncthreads(const void* pc) { cc_syncthreads_op(0, 0, pc); }

unsigned long long cc_warp_op(int op, unsigned mask, unsigned long long value, int arg, int width,
                              int size, const void* pc) {
    InRuntime busy;
    Thread& me = *current;
    if (!(mask >> me.lane & 1)) {
        cc_error.other_tid[0] = unsigned(me.lane);
        cc_error.address = mask;
        cc_error.other_op = 2;  // (faults.py: the calling lane itself is not in the mask)
        fail(LANE_NOT_IN_MASK, pc, "own lane not in the mask");
    }
    if (width < 1 || width > 32 || (width & (width - 1))) fail(BAD_WIDTH, pc, "width");
    me.state = AT_WARP;
    me.op = op;
    me.mask = mask;
    me.value = value;
    me.arg = arg;
    me.width = width;
    me.size = size;
    me.pc = pc;
    release_warp(me.warp, me);
    if (aborted) fail(cc_error.kind, pc, cc_error.text);
    if (me.state == AT_WARP) yield();
    return me.result;
}

unsigned cc_activemask(const void* pc) {
    InRuntime busy;
    Thread& me = *current;
    if (order == 2) return 1u << me.lane;  // shuffled: this lane runs alone here
    me.state = AT_ACTIVEMASK;              // ordered: the lanes that get here together
    me.pc = pc;
    yield();  // (release_activemask sets the mask and lets it go)
    return unsigned(me.result);
}

void cc_trap(const void* pc) { fail(TRAP, pc, "__trap()"); }

// ---- the launch, from Python ------------------------------------------------------------------
extern char __start_cc_shared[] __attribute__((weak));
extern char __stop_cc_shared[] __attribute__((weak));
extern char __start_cc_const[] __attribute__((weak));
extern char __stop_cc_const[] __attribute__((weak));

void* cc_base() {
    Dl_info info;
    dladdr((void*)&cc_base, &info);
    return info.dli_fbase;
}

void* cc_shared_start() { return __start_cc_shared; }

void cc_reset() {
    regions.clear();
    only_blocks.clear();
    stats.clear();
    stats_out.clear();
    std::memset(&cc_error, 0, sizeof cc_error);
    cc_error.region = -1;
}

// a buffer of the launch: kernel arguments (SPACE GLOBAL) and the __shared__ arrays (SHARED, at
// offsets from the section's start); `watch`: keep a shadow for the race check
void cc_add_region(unsigned long long lo, unsigned long long size, int id, int space,
                   int readonly, int watch_races) {
    Region r;
    r.lo = space == SHARED ? (uintptr_t)__start_cc_shared + lo : lo;
    r.hi = r.lo + size;
    r.id = id;
    r.space = space;
    r.readonly = readonly;
    if (watch_races) r.shadow.assign((size + 3) / 4, Cell{});
    regions.push_back(std::move(r));
}

// the next launch runs only these blocks (linear indices into its grid, x fastest), in the
// launch's block order; cc_reset forgets them
void cc_only_blocks(const long long* linear, int n) { only_blocks.assign(linear, linear + n); }

int cc_launch(void (*kernel_entry)(void**), void** args, unsigned gx, unsigned gy, unsigned gz,
              unsigned bx, unsigned by, unsigned bz, unsigned long long shared_bytes,
              int dynamic_id, int block_order, int thread_order, int preemptive,
              unsigned long long seed, unsigned long long limit, double seconds) {
    entry = kernel_entry;
    entry_args = args;
    grid_dim = dim3{gx, gy, gz};
    block_dim = dim3{bx, by, bz};
    nthreads = int(bx * by * bz);
    order = thread_order;
    preempt = preemptive != 0;
    rng.seed(seed);
    aborted = false;
    accesses = 0;
    access_limit = limit;
    dynamic_shared.assign(shared_bytes + 16, 0);
    if (shared_bytes)
        cc_add_region((uintptr_t)dynamic_shared.data(), shared_bytes, dynamic_id,
                      DYNAMIC_SHARED, 0, 1);
    if (+__start_cc_const && +__stop_cc_const > +__start_cc_const)
        cc_add_region((uintptr_t)__start_cc_const, __stop_cc_const - __start_cc_const, -2,
                      CONSTANT, 1, 0);
    const size_t need = size_t(nthreads) * STACK;
    if (need > stacks_size) {
        if (stacks) munmap(stacks, stacks_size);
        stacks = (char*)mmap(nullptr, need, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        stacks_size = need;
    }
    threads.assign(nthreads, Thread{});
    warp_collectives.assign((nthreads + 31) / 32, 0u);
    launched = only_blocks;
    if (launched.empty()) {
        const long long nblocks = (long long)gx * gy * gz;
        launched.resize(size_t(nblocks));
        for (long long i = 0; i < nblocks; ++i) launched[size_t(i)] = i;
    }
    if (block_order == 1) std::reverse(launched.begin(), launched.end());
    if (block_order == 2) std::shuffle(launched.begin(), launched.end(), rng);
    {
        Guard guard(seconds);
        if (sigsetjmp(launch_jump, 1) == 0) {
            in_launch = 1;
            for (size_t slot = 0; slot < launched.size(); ++slot) {
                block_slot = int(slot);
                block_linear = launched[slot];
                block_idx = bid_of(block_linear);
                run_block();
                if (aborted) break;
            }
        }
        groups.clear();
    }
    stats_out.clear();
    for (auto& [pc, s] : stats) stats_out.push_back(s);
    return aborted ? cc_error.kind : OK;
}

int cc_stat_count() { return int(stats_out.size()); }
CcStat* cc_stat(int i) { return &stats_out[i]; }
unsigned long long cc_accesses() { return accesses; }
}

