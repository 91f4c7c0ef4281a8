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

struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; };

namespace {

enum Space { GLOBAL = 0, SHARED = 1, DYNAMIC_SHARED = 2, CONSTANT = 3 };
enum Op { LOAD = 0, STORE = 1, ATOMIC = 2 };
enum State { RUNNABLE, AT_BARRIER, AT_WARP, DONE };
enum WarpOp { SYNCWARP, SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR, BALLOT, ANY, ALL };
// the kinds of error, as Python names them
enum Kind {
    OK = 0, OUTSIDE = 1, PARTLY_OUTSIDE = 2, MISALIGNED = 3, CONST_STORE = 4, RACE = 5,
    DEADLOCK = 6, LANE_EXITED = 7, WARP_MISMATCH = 8, TOO_LONG = 9, TRAP = 10,
    LANE_NOT_IN_MASK = 11, BAD_WIDTH = 12, BARRIER_MISMATCH = 13, SIGNAL = 14
};
constexpr size_t STACK = 256 * 1024;
constexpr int32_t MULTI = -1;  // more than one thread read the word since it was ordered

struct Cell {  // what touched a 4-byte word last: threads as global id + 1 (0: none)
    int32_t writer, reader;
    int32_t reader_block;       // for MULTI: the readers' block, -1 when several blocks read
    uint32_t write_epoch, read_epoch;  // the block's barrier count at the access
    uint32_t write_warp, read_warp;    // the warp's collective count at the access
    uint8_t write_atomic, read_atomic;
    const void* write_pc;
    const void* read_pc;
};

struct Region {
    uintptr_t lo, hi;
    int id, space, readonly;
    std::vector<Cell> shadow;  // one per word; empty: too large to watch for races
};

struct Thread {
    ucontext_t context;
    char* stack;
    int index, warp, lane;
    uint3 tid;
    int state;
    // a posted warp collective
    int op, arg, width, size;
    unsigned mask;
    unsigned long long value, result;
    const void* pc;
    // a posted barrier
    int barrier_op, barrier_value, barrier_result;
    const void* barrier_pc;
    std::unordered_map<const void*, uint32_t> executed;  // pc -> how often this thread ran it
};

struct Lane { int lane; uintptr_t address; };
struct Group {  // one warp's execution of one load or store instruction
    int op, space, size;
    const void* pc;
    std::vector<Lane> lanes;
};
struct Key {
    int warp;
    const void* pc;
    uint32_t count;
    bool operator==(const Key& o) const { return warp == o.warp && pc == o.pc && count == o.count; }
};
struct KeyHash {
    size_t operator()(const Key& k) const {
        return std::hash<const void*>()(k.pc) ^ (size_t(k.warp) * 0x9E3779B97F4A7C15ull) ^
               (size_t(k.count) << 17);
    }
};

}  // namespace

// ---- what Python reads ------------------------------------------------------------------------
extern "C" {
struct CcError {
    int kind, op, size, region, other_op;
    long long offset;  // bytes from the region's start (negative: before it)
    unsigned long long address;
    unsigned tid[3], bid[3], other_tid[3], other_bid[3];
    const void* pc;
    const void* other_pc;
    char text[256];
};
struct CcStat {  // per instruction (pc) of a launch
    const void* pc;
    int op, space, size;
    unsigned long long requests, sectors, wavefronts, threads, bytes;
};
CcError cc_error;
}

namespace {

std::vector<Region> regions;
std::vector<Thread> threads;
std::vector<uint32_t> warp_collectives;  // per warp of the block
std::unordered_map<Key, Group, KeyHash> groups;
std::unordered_map<const void*, CcStat> stats;
std::vector<CcStat> stats_out;
ucontext_t scheduler;
Thread* current = nullptr;
char* stacks = nullptr;
size_t stacks_size = 0;
dim3 grid_dim, block_dim;
uint3 block_idx;
int block_linear = 0, nthreads = 0, order = 0;
bool preempt = false, aborted = false;
uint32_t block_epoch = 0;
unsigned long long accesses = 0, access_limit = 0;
std::mt19937_64 rng;
void (*entry)(void**) = nullptr;
void** entry_args = nullptr;
std::vector<unsigned char> dynamic_shared;
// in a launch; in this runtime's code rather than the student's; the time is up (see Guard)
volatile sig_atomic_t in_launch = 0, in_runtime = 1, timed_out = 0;

void copy3(unsigned* out, uint3 v) { out[0] = v.x; out[1] = v.y; out[2] = v.z; }

uint3 tid_of(int index) {
    return uint3{unsigned(index % block_dim.x), unsigned(index / block_dim.x % block_dim.y),
                 unsigned(index / (block_dim.x * block_dim.y))};
}

uint3 bid_of(int linear) {
    return uint3{unsigned(linear % grid_dim.x), unsigned(linear / grid_dim.x % grid_dim.y),
                 unsigned(linear / (grid_dim.x * grid_dim.y))};
}

void yield() { swapcontext(&current->context, &scheduler); }

// The first error: described, then the launch ends (the thread is never resumed).
[[noreturn]] void fail(int kind, const void* pc, const char* text) {
    if (!aborted) {
        cc_error.kind = kind;
        cc_error.pc = pc;
        if (current) copy3(cc_error.tid, current->tid);
        copy3(cc_error.bid, block_idx);
        std::snprintf(cc_error.text, sizeof cc_error.text, "%s", text);
    }
    aborted = true;
    in_runtime = 0;
    swapcontext(&current->context, &scheduler);
    std::abort();  // never resumed
}

void fail_here(int kind, const char* text) {  // from the scheduler, outside any thread
    if (aborted) return;
    cc_error.kind = kind;
    copy3(cc_error.bid, block_idx);
    std::snprintf(cc_error.text, sizeof cc_error.text, "%s", text);
    aborted = true;
}

int global_thread() { return block_linear * nthreads + current->index + 1; }

int block_of(int32_t thread) { return (thread - 1) / nthreads; }

// whether an earlier access by `thread` (at the block's barrier count `epoch` and its warp's
// collective count `warp_count`) is ordered before the current thread's access
bool ordered(int32_t thread, uint32_t epoch, uint32_t warp_count) {
    if (thread == 0 || thread == global_thread()) return true;
    if (block_of(thread) != block_linear) return false;  // no barrier orders two blocks
    if (epoch != block_epoch) return true;               // a __syncthreads lies between
    const int index = (thread - 1) % nthreads;
    return index / 32 == current->warp && warp_count != warp_collectives[current->warp];
}

[[noreturn]] void race(const Region& r, uintptr_t address, int op, int size, const void* pc,
                       int32_t other, int other_op, const void* other_pc) {
    cc_error.region = r.id;
    cc_error.offset = (long long)(address - r.lo);
    cc_error.address = address;
    cc_error.op = op;
    cc_error.size = size;
    cc_error.other_op = other_op;
    cc_error.other_pc = other_pc;
    if (other > 0) {
        copy3(cc_error.other_tid, tid_of((other - 1) % nthreads));
        copy3(cc_error.other_bid, bid_of(block_of(other)));
    } else {
        cc_error.other_tid[0] = ~0u;  // several threads read it
    }
    fail(RACE, pc, "race");
}

void watch(Region& r, uintptr_t address, int size, int op, const void* pc) {
    if (r.shadow.empty()) return;
    const int32_t me = global_thread();
    const uint32_t warp_count = warp_collectives[current->warp];
    const bool atomic = op == ATOMIC;
    const size_t first = (address - r.lo) / 4, last = (address + size - 1 - r.lo) / 4;
    for (size_t w = first; w <= last && w < r.shadow.size(); ++w) {
        Cell& c = r.shadow[w];
        if (op == LOAD) {
            if (!(atomic && c.write_atomic) && !ordered(c.writer, c.write_epoch, c.write_warp))
                race(r, address, op, size, pc, c.writer, c.write_atomic ? ATOMIC : STORE,
                     c.write_pc);
            if (c.reader == MULTI ? (c.reader_block != block_linear || c.read_epoch != block_epoch)
                                  : ordered(c.reader, c.read_epoch, c.read_warp)) {
                c.reader = me;
                c.reader_block = block_linear;
            } else if (c.reader != me) {
                if (block_of(c.reader) != block_linear) c.reader_block = -1;
                c.reader = MULTI;
            }
            c.read_epoch = block_epoch;
            c.read_warp = warp_count;
            c.read_atomic = 0;
            c.read_pc = pc;
        } else {
            if (c.writer && !(atomic && c.write_atomic) &&
                !ordered(c.writer, c.write_epoch, c.write_warp))
                race(r, address, op, size, pc, c.writer, c.write_atomic ? ATOMIC : STORE,
                     c.write_pc);
            if (c.reader == MULTI) {
                if (c.reader_block != block_linear || c.read_epoch == block_epoch)
                    race(r, address, op, size, pc, MULTI, LOAD, c.read_pc);
            } else if (c.reader && !ordered(c.reader, c.read_epoch, c.read_warp)) {
                race(r, address, op, size, pc, c.reader, LOAD, c.read_pc);
            }
            c.writer = me;
            c.write_epoch = block_epoch;
            c.write_warp = warp_count;
            c.write_atomic = atomic;
            c.write_pc = pc;
            if (c.reader == me || c.reader == MULTI) c.reader = 0;
        }
    }
}

void trace(int op, int space, uintptr_t address, int size, const void* pc) {
    const uint32_t count = current->executed[pc]++;
    Group& g = groups[Key{current->warp, pc, count}];
    if (g.lanes.empty()) {
        g.op = op;
        g.space = space;
        g.size = size;
        g.pc = pc;
    }
    g.lanes.push_back(Lane{current->lane, address});
}

// wavefronts of one shared-memory instruction: lanes in phases (all 32 for accesses of 4 bytes
// or less, 16 for 8 bytes, 8 for 16 bytes); in each phase the most distinct words one bank holds
unsigned long long wavefronts(const Group& g) {
    const int phase = g.size <= 4 ? 32 : 128 / g.size;
    unsigned long long total = 0;
    for (int start = 0; start < 32; start += phase) {
        std::vector<uintptr_t> words[32];
        for (const Lane& l : g.lanes) {
            if (l.lane < start || l.lane >= start + phase) continue;
            for (uintptr_t a = l.address & ~uintptr_t(3); a < l.address + g.size; a += 4) {
                auto& bank = words[(a / 4) % 32];
                if (std::find(bank.begin(), bank.end(), a) == bank.end()) bank.push_back(a);
            }
        }
        size_t most = 0;
        for (auto& bank : words) most = std::max(most, bank.size());
        total += most;
    }
    return std::max<unsigned long long>(total, 1);
}

void flush_groups() {
    for (auto& [key, g] : groups) {
        CcStat& s = stats[g.pc];
        s.pc = g.pc;
        s.op = g.op;
        s.space = g.space;
        s.size = g.size;
        s.requests += 1;
        s.threads += g.lanes.size();
        s.bytes += g.lanes.size() * g.size;
        if (g.space == GLOBAL) {
            std::vector<uintptr_t> sectors;
            for (const Lane& l : g.lanes)
                for (uintptr_t s32 = l.address / 32; s32 <= (l.address + g.size - 1) / 32; ++s32)
                    sectors.push_back(s32);
            std::sort(sectors.begin(), sectors.end());
            s.sectors += std::unique(sectors.begin(), sectors.end()) - sectors.begin();
        } else {
            s.wavefronts += wavefronts(g);
        }
    }
    groups.clear();
}

// ---- a kernel that never ends or faults must not take the notebook with it --------------------
// A timer (SIGALRM) and the fault signals jump back to cc_launch. The jump is only taken while
// the student's code runs, never inside this runtime (it may hold the allocator's lock there):
// `in_runtime` marks those stretches, and an alarm that finds it set is retried shortly after.
sigjmp_buf launch_jump;
struct sigaction saved[32];
char alt_stack[1 << 16];

void arm(long seconds, long micros) {
    itimerval t{};
    t.it_value.tv_sec = seconds;
    t.it_value.tv_usec = micros;
    setitimer(ITIMER_REAL, &t, nullptr);
}

void on_signal(int sig) {
    if (!in_launch) {  // not ours: what the process did before
        sigaction(sig, &saved[sig], nullptr);
        raise(sig);
        return;
    }
    if (sig == SIGALRM && in_runtime) {
        timed_out = 1;  // access() ends the launch at its next call; else jump a bit later
        arm(0, 20000);
        return;
    }
    cc_error.kind = sig == SIGALRM ? TOO_LONG : SIGNAL;
    cc_error.offset = sig;
    if (current) copy3(cc_error.tid, current->tid);
    copy3(cc_error.bid, block_idx);
    aborted = true;
    in_launch = 0;
    siglongjmp(launch_jump, 1);
}

struct Guard {  // the signal handlers and the timer for the span of one launch
    static constexpr int signals[5] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGALRM};
    explicit Guard(double seconds) {
        stack_t alt{};
        alt.ss_sp = alt_stack;
        alt.ss_size = sizeof alt_stack;
        sigaltstack(&alt, nullptr);  // a thread that overflowed its stack still gets a handler
        struct sigaction a{};
        a.sa_handler = on_signal;
        a.sa_flags = SA_ONSTACK | SA_NODEFER;
        sigemptyset(&a.sa_mask);
        for (int sig : signals) sigaction(sig, &a, &saved[sig]);
        timed_out = 0;
        arm(long(seconds), long((seconds - long(seconds)) * 1e6));
    }
    ~Guard() {
        arm(0, 0);
        in_launch = 0;
        for (int sig : signals) sigaction(sig, &saved[sig], nullptr);
    }
};

struct InRuntime {
    InRuntime() { in_runtime = 1; }
    ~InRuntime() { in_runtime = 0; }
};

void access(const void* address_, int size, int op, const void* pc) {
    if (!current || aborted) return;  // not inside a launch's thread (static initialisers)
    InRuntime busy;
    if (timed_out) fail(TOO_LONG, pc, "too long");
    const uintptr_t address = (uintptr_t)address_;
    const uintptr_t stack = (uintptr_t)current->stack;
    if (address >= stack && address < stack + STACK) return;  // the thread's own locals
    if (++accesses > access_limit) fail(TOO_LONG, pc, "too long");
    int found = -1;
    for (size_t i = 0; i < regions.size(); ++i)
        if (address >= regions[i].lo && address < regions[i].hi) { found = int(i); break; }
    cc_error.address = address;
    cc_error.op = op;
    cc_error.size = size;
    if (found < 0) {  // the nearest buffer, for the message
        long long best = -1;
        for (size_t i = 0; i < regions.size(); ++i) {
            const Region& r = regions[i];
            const long long d = address < r.lo ? (long long)(r.lo - address)
                                               : (long long)(address - r.hi);
            if (best < 0 || d < best) {
                best = d;
                found = int(i);
            }
        }
        if (found >= 0) {
            cc_error.region = regions[found].id;
            cc_error.offset = (long long)address - (long long)regions[found].lo;
        } else {
            cc_error.region = -1;
        }
        fail(OUTSIDE, pc, "outside");
    }
    Region& r = regions[found];
    cc_error.region = r.id;
    cc_error.offset = (long long)(address - r.lo);
    if (address + size > r.hi) fail(PARTLY_OUTSIDE, pc, "partly outside");
    if (address % size) fail(MISALIGNED, pc, "misaligned");
    if (op != LOAD && r.readonly) fail(CONST_STORE, pc, "store into a const buffer");
    watch(r, address, size, op, pc);
    if (op != ATOMIC) trace(op, r.space == DYNAMIC_SHARED ? SHARED : r.space, address, size, pc);
    if (preempt && (rng() & 3) == 0) yield();
}

void thread_main() {
    in_runtime = 0;
    entry(entry_args);
    in_runtime = 1;
    current->state = DONE;
}

// ---- barriers and warp collectives ------------------------------------------------------------

int live() {
    int n = 0;
    for (const Thread& t : threads) n += t.state != DONE;
    return n;
}

void release_barrier() {
    int waiting = 0, count = 0, all = 1, any = 0;
    for (const Thread& t : threads) {
        if (t.state == AT_BARRIER) {
            ++waiting;
            count += t.barrier_value;
            all &= t.barrier_value;
            any |= t.barrier_value;
        }
    }
    if (waiting == 0 || waiting != live()) return;
    int op = -1;
    for (const Thread& t : threads)
        if (t.state == AT_BARRIER) {
            if (op < 0) op = t.barrier_op;
            else if (op != t.barrier_op) fail_here(BARRIER_MISMATCH, "barrier mismatch");
        }
    for (Thread& t : threads)
        if (t.state == AT_BARRIER) {
            t.state = RUNNABLE;
            t.barrier_result = op == 1 ? count : op == 2 ? all : op == 3 ? any : 0;
        }
    ++block_epoch;
}

Thread* lane_thread(int warp, int lane) {
    const int index = warp * 32 + lane;
    return index < nthreads ? &threads[index] : nullptr;
}

// the collective of warp `warp` complete: every lane the mask of `poster` names is waiting
void release_warp(int warp, Thread& poster) {
    for (int lane = 0; lane < 32; ++lane) {
        if (!(poster.mask >> lane & 1)) continue;
        Thread* t = lane_thread(warp, lane);
        if (!t) continue;
        if (t->state == DONE) {
            if (!aborted) {
                copy3(cc_error.other_tid, t->tid);
                copy3(cc_error.tid, poster.tid);
                cc_error.pc = poster.pc;
            }
            fail_here(LANE_EXITED, "lane exited");
            return;
        }
        if (t->state != AT_WARP) return;  // not there yet
    }
    Thread* lanes[32] = {};
    for (int lane = 0; lane < 32; ++lane)
        if (poster.mask >> lane & 1) lanes[lane] = lane_thread(warp, lane);
    for (Thread* t : lanes) {
        if (!t) continue;
        if (t->op != poster.op || (t->op != SYNCWARP && t->width != poster.width)) {
            copy3(cc_error.tid, poster.tid);
            copy3(cc_error.other_tid, t->tid);
            cc_error.pc = poster.pc;
            cc_error.other_pc = t->pc;
            fail_here(WARP_MISMATCH, "warp mismatch");
            return;
        }
    }
    unsigned long long ballot = 0;
    for (int lane = 0; lane < 32; ++lane)
        if (lanes[lane] && lanes[lane]->value) ballot |= 1ull << lane;
    for (int lane = 0; lane < 32; ++lane) {
        Thread* t = lanes[lane];
        if (!t) continue;
        const int width = t->width, base = lane & ~(width - 1);
        int source = lane;
        switch (t->op) {
            case SHFL_IDX: source = base + (t->arg & (width - 1)); break;
            case SHFL_UP: source = lane - base >= t->arg ? lane - t->arg : lane; break;
            case SHFL_DOWN: source = lane - base + t->arg < width ? lane + t->arg : lane; break;
            case SHFL_XOR: {
                const int s = lane ^ t->arg;
                source = s >= base && s < base + width ? s : lane;
                break;
            }
            default: break;
        }
        if (t->op >= SHFL_IDX && t->op <= SHFL_XOR) {
            if (!lanes[source]) {
                copy3(cc_error.tid, t->tid);
                cc_error.other_tid[0] = unsigned(source);
                cc_error.pc = t->pc;
                fail_here(LANE_NOT_IN_MASK, "source lane not in the mask");
                return;
            }
            t->result = lanes[source]->value;
        } else if (t->op == BALLOT) {
            t->result = ballot;
        } else if (t->op == ANY) {
            t->result = ballot != 0;
        } else if (t->op == ALL) {
            unsigned long long want = 0;
            for (int l = 0; l < 32; ++l) if (lanes[l]) want |= 1ull << l;
            t->result = ballot == want;
        }
    }
    for (Thread* t : lanes)
        if (t) t->state = RUNNABLE;
    ++warp_collectives[warp];
}

void check_exited(Thread& gone) {  // a lane left: a collective waiting for it never completes
    for (int lane = 0; lane < 32; ++lane) {
        Thread* t = lane_thread(gone.warp, lane);
        if (t && t->state == AT_WARP && (t->mask >> gone.lane & 1)) release_warp(gone.warp, *t);
    }
}

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
    const int nblocks = int(gx * gy * gz);
    std::vector<int> blocks(nblocks);
    for (int i = 0; i < nblocks; ++i) blocks[i] = i;
    if (block_order == 1) std::reverse(blocks.begin(), blocks.end());
    if (block_order == 2) std::shuffle(blocks.begin(), blocks.end(), rng);
    {
        Guard guard(seconds);
        if (sigsetjmp(launch_jump, 1) == 0) {
            in_launch = 1;
            for (int b : blocks) {
                block_linear = b;
                block_idx = bid_of(b);
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
