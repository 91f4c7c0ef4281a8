// The clock and fault signals that end a launch which never ends or faults. Part of runtime.cpp
// (course_utils.cuda_on_cpu), included once, after state.h.
#pragma once

namespace {

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

}  // namespace
