"""What a registered kernel's call does per call, on any machine: the registry checks the
problem once (the kernel does not check again), machine-level facts are not re-derived once the
kernel is built, and a bad problem is still refused after the first call. Times are measured by
kernels/bench_overhead.py on a GPU, never asserted."""

import pytest
import torch

import kernels
from course_utils import env
from kernels.registry import KernelNotSupported

# where the Triton kernels run: compiled on a GPU, interpreted on a CPU (launches are counted,
# never run, but the registry's checks refuse a compiled kernel's CPU tensors)
DEVICE = "cuda" if env.HAS_CUDA and not env.TRITON_INTERPRET else "cpu"


@pytest.fixture
def counted(monkeypatch):
    calls = {"build": 0, "check": 0, "unavailable": 0, "run": 0}

    def check(a, b):
        calls["check"] += 1
        return "b must be 8 long or more" if b.numel() < 8 else None

    def build():
        calls["build"] += 1

        def run(a, b):
            calls["run"] += 1
            return a + b
        return run

    kernel = kernels.register("add", "test_counted", build=build, check=check,
                              dtypes=(torch.float32,))
    real = kernel.unavailable
    monkeypatch.setattr(kernel, "unavailable",
                        lambda: calls.__setitem__("unavailable", calls["unavailable"] + 1)
                        or real())
    yield kernel, calls
    kernels.unregister(kernel)


def test_a_built_kernel_checks_each_problem_once_and_the_machine_once(counted):
    kernel, calls = counted
    a = torch.ones(8)
    for _ in range(10):
        torch.testing.assert_close(kernel(a, a), a + a)
    assert calls["build"] == 1 and calls["run"] == 10
    assert calls["check"] == 1, "the first call's supports() checks the problem: remembered"
    assert calls["unavailable"] <= 2, "the machine is asked before the build, not per call"
    b = torch.ones(8)  # another address: another problem (alignment, TMA descriptors)
    kernel(a, b)
    kernel(a, b)
    kernel(a, a[:4].repeat(2))  # same shape, new storage
    assert calls["check"] == 3 and calls["run"] == 13


def test_after_the_first_call_bad_problems_are_still_refused(counted):
    kernel, calls = counted
    a = torch.ones(8)
    kernel(a, a)
    with pytest.raises(KernelNotSupported, match="b must be 8 long or more"):
        kernel(a[:4], a[:4])
    with pytest.raises(KernelNotSupported, match="supports float32; got a of float64"):
        kernel(a.double(), a.double())
    with pytest.raises(ValueError, match="add: b expected the shape of a"):
        kernel(a, torch.ones(3))
    assert calls["run"] == 1


def test_a_kernel_without_a_build_step_also_checks_each_problem_once(monkeypatch):
    """A plain function (the Triton kernels register one, no build step) takes the same
    checked-once path after its first call: on a GPU its full check cost the registered
    attention about 4 µs a call above the direct forward (lesson 11's table)."""
    calls = {"check": 0, "unavailable": 0, "run": 0}

    def check(a, b):
        calls["check"] += 1
        return "b must be 8 long or more" if b.numel() < 8 else None

    def run(a, b):
        calls["run"] += 1
        return a + b

    kernel = kernels.register("add", "test_plain", fn=run, check=check, dtypes=(torch.float32,))
    real = kernel.unavailable
    monkeypatch.setattr(kernel, "unavailable",
                        lambda: calls.__setitem__("unavailable", calls["unavailable"] + 1)
                        or real())
    try:
        a = torch.ones(8)
        for _ in range(10):
            torch.testing.assert_close(kernel(a, a), a + a)
        # the first call's supports() (the machine's checks and the problem's), remembered
        assert calls["run"] == 10 and calls["check"] == 1 and calls["unavailable"] == 1
        with pytest.raises(KernelNotSupported, match="b must be 8 long or more"):
            kernel(a[:4], a[:4])
        with pytest.raises(KernelNotSupported, match="supports float32; got a of float64"):
            kernel(a.double(), a.double())
        assert calls["run"] == 10
    finally:
        kernels.unregister(kernel)



@pytest.fixture
def counted_launches(monkeypatch):
    """Every Triton launch through a plan counted by kernel name and the launch itself skipped
    (the host's Python is what is counted; the kernels' results are not read), and the op's
    validate and the kernel's check counted."""
    from kernels import triton_launch

    launches = []

    def launch(self, key, tensors, make):
        launches.append(self.kernel.__name__)

    monkeypatch.setattr(triton_launch.Launcher, "__call__", launch)
    return launches


def count_checks(monkeypatch, op, provider):
    calls = {"validate": 0, "check": 0}
    kernel = kernels.get_kernel(op, provider)
    validate, check = kernels.OPS[op].validate, kernel.check

    def counted_validate(*args):
        calls["validate"] += 1
        return validate(*args)

    def counted_check(*args):
        calls["check"] += 1
        return check(*args)

    monkeypatch.setattr(kernels.OPS[op], "validate", counted_validate)
    monkeypatch.setattr(kernel, "check", counted_check)
    monkeypatch.setattr(kernel, "_accepted", {})  # as if never called: its first call here
    return kernel, calls


def test_a_registered_triton_call_checks_once_and_launches_once(monkeypatch, counted_launches):
    """The registered attention and RMSNorm forward, ten calls of one problem: validate and
    the kernel's check run on the first call only, and each call is one launch."""
    attention, attention_calls = count_checks(monkeypatch, "attention", "triton")
    rmsnorm, rmsnorm_calls = count_checks(monkeypatch, "rmsnorm", "triton")
    q, k, v = (torch.randn(1, 2, 128, 64, dtype=torch.float16, device=DEVICE) for _ in range(3))
    x = torch.randn(64, 256, dtype=torch.float16, device=DEVICE)
    w = torch.randn(256, dtype=torch.float16, device=DEVICE)
    for _ in range(10):
        attention(q, k, v, True)
        rmsnorm(x, w, 1e-6)
    assert attention_calls == {"validate": 1, "check": 1}
    assert rmsnorm_calls == {"validate": 1, "check": 1}
    assert counted_launches == ["attention_fwd_kernel", "rmsnorm_fwd_kernel"] * 10
    attention(q, k, v, False)  # another problem (causal is part of it): checked again
    assert attention_calls == {"validate": 2, "check": 2}


def test_the_rmsnorm_forward_and_backward_are_one_check_and_three_launches(
        monkeypatch, counted_launches):
    """Forward + backward through autograd, ten times: the registry checks the problem once;
    the forward is one launch, the backward two (dx with the per-program partial sums of
    dweight, then their column sum, rounded to the weight's dtype in the same kernel)."""
    rmsnorm, calls = count_checks(monkeypatch, "rmsnorm", "triton")
    x = torch.randn(64, 256, dtype=torch.float16, device=DEVICE, requires_grad=True)
    w = torch.randn(256, dtype=torch.float16, device=DEVICE, requires_grad=True)
    dy = torch.randn(64, 256, dtype=torch.float16, device=DEVICE)
    for _ in range(10):
        rmsnorm(x, w, 1e-6).backward(dy)
        x.grad = w.grad = None
    assert calls == {"validate": 1, "check": 1}
    assert counted_launches == ["rmsnorm_fwd_kernel", "rmsnorm_bwd_kernel",
                                "rmsnorm_dweight_kernel"] * 10


def calls_in(fn) -> list[str]:
    """The names of the Python and C functions that one call of ``fn`` calls (sys.setprofile's
    events; attribute reads such as ``.shape`` are not calls), ``fn``'s own frame left out: a
    count of a call path's work that no machine's speed changes."""
    import sys

    names = []

    def profile(frame, event, arg):
        if event == "call":
            names.append(frame.f_code.co_name)
        elif event == "c_call":
            names.append(getattr(arg, "__name__", repr(arg)))

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return names[1:-1]  # (fn itself, and sys.setprofile's own call)


def test_the_registered_attention_adds_only_the_problems_lookup(monkeypatch, counted_launches):
    """Once a problem is checked, the registered attention does what triton_fwd.forward does
    plus the registry's lookup of the problem (its key: a few reads per argument) and one call
    of its own and the choice of path: no second validation or check. Lesson 11's table times
    this path beside the direct forward on a GPU; the calls counted here are the work it stands
    for."""
    from kernels.attention import triton_fwd
    from kernels.kernel import _problem_key

    attention, checks = count_checks(monkeypatch, "attention", "triton")
    q, k, v = (torch.randn(1, 2, 128, 64, dtype=torch.float16, device=DEVICE) for _ in range(3))
    args = (q, k, v, True)
    attention(*args)  # the problem's first call: checked once
    direct = calls_in(lambda: triton_fwd.forward(*args, save_lse=False))  # (inference)
    registered = calls_in(lambda: attention(*args))
    key = calls_in(lambda: _problem_key(args))
    assert checks == {"validate": 1, "check": 1}, "a problem seen before is not checked again"
    extra = list(registered)
    for name in direct + key:
        extra.remove(name)  # (ValueError here: the registered call skips the forward's work)
    # the registry's __call__, the registered function, its grad-mode question and the choice
    # between the dense and the packed (decoding) forward
    assert sorted(extra) == sorted(["__call__", "_attention", "is_grad_enabled",
                                    "forward_by_shape", "packs"]), (
        f"the registered attention calls more than the forward and the problem's lookup: {extra}")
    assert counted_launches == ["attention_fwd_kernel"] * 3
