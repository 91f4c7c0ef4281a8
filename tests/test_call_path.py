"""What a registered kernel's call does per call, on any machine: the registry checks the
problem once (the kernel does not check again), machine-level facts are not re-derived once the
kernel is built, and a bad problem is still refused after the first call. Times are measured by
kernels/bench_overhead.py on a GPU, never asserted."""

import pytest
import torch

import kernels
from kernels.registry import KernelNotSupported


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
    assert calls["check"] == 2, "the first call's supports(), then the problem once: remembered"
    assert calls["unavailable"] <= 2, "the machine is asked before the build, not per call"
    b = torch.ones(8)  # another address: another problem (alignment, TMA descriptors)
    kernel(a, b)
    kernel(a, b)
    kernel(a, a[:4].repeat(2))  # same shape, new storage
    assert calls["check"] == 4 and calls["run"] == 13


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
    attention about 4 µs a call above the direct forward (lesson 09's table)."""
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
        # the first call's supports(), then the problem once (as a built kernel); the machine once
        assert calls["run"] == 10 and calls["check"] == 2 and calls["unavailable"] == 1
        with pytest.raises(KernelNotSupported, match="b must be 8 long or more"):
            kernel(a[:4], a[:4])
        with pytest.raises(KernelNotSupported, match="supports float32; got a of float64"):
            kernel(a.double(), a.double())
        assert calls["run"] == 10
    finally:
        kernels.unregister(kernel)

