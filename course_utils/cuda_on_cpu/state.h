// The runtime's types and state: threads, buffers (regions) and their race shadows, the groups of
// a warp's accesses, the first error. Part of runtime.cpp (course_utils.cuda_on_cpu), which
// includes it once: one translation unit, one anonymous namespace.
#pragma once

struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; };

namespace {

enum Space { GLOBAL = 0, SHARED = 1, DYNAMIC_SHARED = 2, CONSTANT = 3 };
enum Op { LOAD = 0, STORE = 1, ATOMIC = 2 };
// AT_ACTIVEMASK: in __activemask(), waiting for the lanes of its warp that still run to reach
// it too or to block elsewhere (collectives.h, release_activemask)
enum State { RUNNABLE, AT_BARRIER, AT_WARP, DONE, AT_ACTIVEMASK };
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
    int32_t reader_block;       // for MULTI: the readers' block (slot), -1 when several read
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
    // a posted warp collective (or, AT_ACTIVEMASK, the pc of the __activemask call)
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
// the blocks this launch runs, linear indices into the grid, in the order they run: every block
// of the grid, or only those Python named (cc_only_blocks: a grid too large to run whole, say
// the last rows of a matrix past 2^31 elements). A block's threads are told apart in the race
// shadows by its place in this list (block_slot), not by its index in the grid, which can pass
// what an int32 id holds.
std::vector<long long> launched, only_blocks;
std::unordered_map<Key, Group, KeyHash> groups;
std::unordered_map<const void*, CcStat> stats;
std::vector<CcStat> stats_out;
ucontext_t scheduler;
Thread* current = nullptr;
char* stacks = nullptr;
size_t stacks_size = 0;
dim3 grid_dim, block_dim;
uint3 block_idx;
long long block_linear = 0;  // the running block's index in the grid
int block_slot = 0, nthreads = 0, order = 0;  // block_slot: its place in `launched`
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

uint3 bid_of(long long linear) {
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

// a thread as the race shadows name it: its block's place in `launched`, then its index
int global_thread() { return block_slot * nthreads + current->index + 1; }

int block_of(int32_t thread) { return (thread - 1) / nthreads; }  // the block's slot

}  // namespace
