// Every load and store of the kernel: inside a buffer, aligned, not into a const input, not
// racing another thread's; and its warp's addresses grouped per instruction into sectors and
// bank wavefronts. Part of runtime.cpp (course_utils.cuda_on_cpu), included once, after
// state.h and guard.h.
#pragma once

namespace {

// whether an earlier access by `thread` (at the block's barrier count `epoch` and its warp's
// collective count `warp_count`) is ordered before the current thread's access
bool ordered(int32_t thread, uint32_t epoch, uint32_t warp_count) {
    if (thread == 0 || thread == global_thread()) return true;
    if (block_of(thread) != block_slot) return false;  // no barrier orders two blocks
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
        copy3(cc_error.other_bid, bid_of(launched[block_of(other)]));
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
            if (c.reader == MULTI ? (c.reader_block != block_slot || c.read_epoch != block_epoch)
                                  : ordered(c.reader, c.read_epoch, c.read_warp)) {
                c.reader = me;
                c.reader_block = block_slot;
            } else if (c.reader != me) {
                if (block_of(c.reader) != block_slot) c.reader_block = -1;
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
                if (c.reader_block != block_slot || c.read_epoch == block_epoch)
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

}  // namespace
