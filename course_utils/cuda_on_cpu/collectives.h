// __syncthreads and the warp collectives (shuffles, votes, __syncwarp): who waits, when they
// are released, what each lane gets. Part of runtime.cpp (course_utils.cuda_on_cpu), included
// once, after memory_checks.h.
#pragma once

namespace {

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
            if (!lanes[source]) {  // (for faults.py: the mask, and whether the lane exists)
                copy3(cc_error.tid, t->tid);
                cc_error.other_tid[0] = unsigned(source);
                cc_error.address = t->mask;
                cc_error.other_op = (t->mask >> source & 1) ? 1 : 0;  // 1: named, not in the block
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

// __activemask() in the ordered runs (lowest or highest thread first): the lanes of `warp` waiting
// in it are let go once no lane of the warp can run on (each has reached an __activemask, a
// collective, a barrier, or exited), each with the mask of the lanes waiting at the same call:
// the lanes that reached that point together, as a converged warp would run them. (In the
// shuffled run a lane gets only itself: runtime.cpp, cc_activemask.)
void release_activemask(int warp) {
    bool waiting = false;
    for (int lane = 0; lane < 32; ++lane) {
        const Thread* t = lane_thread(warp, lane);
        if (!t) continue;
        if (t->state == RUNNABLE) return;  // it may still reach the same __activemask
        waiting |= t->state == AT_ACTIVEMASK;
    }
    if (!waiting) return;
    Thread* lanes[32] = {};
    for (int lane = 0; lane < 32; ++lane) {
        Thread* t = lane_thread(warp, lane);
        if (t && t->state == AT_ACTIVEMASK) lanes[lane] = t;
    }
    for (Thread* t : lanes) {
        if (!t) continue;
        unsigned mask = 0;
        for (int lane = 0; lane < 32; ++lane)
            if (lanes[lane] && lanes[lane]->pc == t->pc) mask |= 1u << lane;
        t->result = mask;
    }
    for (Thread* t : lanes)
        if (t) t->state = RUNNABLE;
}

void check_exited(Thread& gone) {  // a lane left: a collective waiting for it never completes
    for (int lane = 0; lane < 32; ++lane) {
        Thread* t = lane_thread(gone.warp, lane);
        if (t && t->state == AT_WARP && (t->mask >> gone.lane & 1)) release_warp(gone.warp, *t);
    }
}

}  // namespace
