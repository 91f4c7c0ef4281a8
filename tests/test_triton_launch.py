"""kernels/triton_launch.py: a problem's plan is made once, reused only for a call that Triton
would specialize the same way, and every call launches what Triton's own path would."""

import pytest
import torch
import triton

from kernels import triton_launch
from kernels.triton_launch import Launcher, cdiv, next_power_of_2


class FakeCompiled:
    """What Triton's ``kernel[grid](...)`` returns: a launcher and its handles."""

    function = "function handle"
    packed_metadata = ("packed",)

    def __init__(self, launches):
        self.launches = launches

    def run(self, *args):
        self.launches.append(("direct", args))


class FakeKernel:
    """A JIT function with parameters (x, y, n, BLOCK: constexpr, WIDE: constexpr)."""

    def __init__(self, arg_names=("x", "y", "n", "BLOCK", "WIDE"), constexprs=(3, 4),
                 compiles=True):
        self.arg_names, self.constexprs = list(arg_names), list(constexprs)
        self.launches, self.compiles = [], compiles

    def __getitem__(self, grid):
        def run(*args, **meta):
            self.launches.append(("triton", grid, args, meta))
            return FakeCompiled(self.launches) if self.compiles else None
        return run


class FakeDriver:
    def get_current_stream(self, device):
        return f"stream of {device}"


@pytest.fixture
def fake_driver(monkeypatch):
    monkeypatch.setattr(triton_launch, "driver", type("D", (), {"active": FakeDriver()}))


def make_counter(grid=(4,), n=10):
    made = []

    def make():
        made.append(1)
        return grid, (n,), {"BLOCK": 16, "WIDE": True, "num_warps": 4}
    return made, make


def test_first_call_takes_tritons_path_then_the_compiled_launcher(fake_driver):
    kernel = FakeKernel()
    launch = Launcher(kernel)
    x, y = torch.zeros(8), torch.zeros(8)
    made, make = make_counter()
    launch(("problem",), (x, y), make)
    launch(("problem",), (x, y), make)
    assert len(made) == 1  # the plan is made once
    first, second = kernel.launches
    assert first == ("triton", (4, 1, 1), (x, y, 10), {"BLOCK": 16, "WIDE": True,
                                                       "num_warps": 4})
    kind, args = second
    assert kind == "direct"
    # grid, stream, function, metadata, no launch metadata or hooks, tensors, scalars,
    # constexprs in parameter order
    assert args[:7] == (4, 1, 1, "stream of -1", "function handle", ("packed",), None)
    assert args[7:9] == (None, None)
    assert args[9] is x and args[10] is y and args[11:] == (10, 16, True)


def test_a_new_key_or_dtype_or_alignment_gets_its_own_plan(fake_driver):
    kernel = FakeKernel()
    launch = Launcher(kernel)
    x, y = torch.zeros(8), torch.zeros(8)
    made, make = make_counter()
    launch(("a",), (x, y), make)
    launch(("b",), (x, y), make)  # another problem
    launch(("a",), (x.double(), y), make)  # another dtype: another pointer type
    launch(("a",), (x[1:], y), make)  # 4 bytes past a 16-byte boundary: not aligned
    assert len(made) == 4
    assert [k[0] for k in kernel.launches] == ["triton"] * 4
    launch(("a",), (x[4:], y), make)  # 16 bytes on: aligned again, the first plan
    assert len(made) == 4 and kernel.launches[-1][0] == "direct"


def test_without_compiled_handles_every_call_takes_tritons_path(fake_driver):
    # the interpreter returns no compiled kernel; constexprs not last cannot be passed
    # positionally: both launch through kernel[grid] with the plan's arguments each time
    for kernel in (FakeKernel(compiles=False),
                   FakeKernel(("x", "BLOCK", "y", "n", "WIDE"), (1, 4))):
        launch = Launcher(kernel)
        x, y = torch.zeros(8), torch.zeros(8)
        made, make = make_counter()
        for _ in range(3):
            launch(("p",), (x, y), make)
        assert len(made) == 1
        assert [k[0] for k in kernel.launches] == ["triton"] * 3
        assert kernel.launches[-1][1:] == ((4, 1, 1), (x, y, 10),
                                           {"BLOCK": 16, "WIDE": True, "num_warps": 4})


def test_a_launch_hook_sends_calls_through_tritons_path(fake_driver, monkeypatch):
    kernel = FakeKernel()
    launch = Launcher(kernel)
    x, y = torch.zeros(8), torch.zeros(8)
    made, make = make_counter()
    launch(("p",), (x, y), make)
    hooks = triton_launch.knobs.runtime.launch_enter_hook
    if hasattr(hooks, "add"):  # Triton 3.6+: a chain of hooks
        def hook(metadata):
            return None
        hooks.add(hook)
        try:
            launch(("p",), (x, y), make)
        finally:
            hooks.remove(hook)
    else:
        monkeypatch.setattr(triton_launch.knobs.runtime, "launch_enter_hook", lambda m: None)
        launch(("p",), (x, y), make)
    assert [k[0] for k in kernel.launches] == ["triton", "triton"]
    launch(("p",), (x, y), make)
    assert kernel.launches[-1][0] == "direct"


def test_the_plans_are_bounded(fake_driver):
    launch = Launcher(FakeKernel())
    x, y = torch.zeros(8), torch.zeros(8)
    for i in range(triton_launch.PLANS + 5):
        launch((i,), (x, y), make_counter()[1])
    assert len(launch.plans) <= triton_launch.PLANS


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 16, 17, 1000, 1 << 20, (1 << 20) + 1])
def test_integer_helpers_match_tritons(n):
    assert next_power_of_2(n) == triton.next_power_of_2(n)
    for d in (1, 3, 16, 128):
        assert cdiv(n, d) == triton.cdiv(n, d)


def test_the_course_kernels_take_their_constexprs_last():
    """The launcher passes constexprs after the other arguments: every kernel it launches
    must declare them last, or it would fall back to Triton's path on every call."""
    from kernels.attention import triton_bwd, triton_fwd
    from kernels.gelu import triton_gelu
    from kernels.rmsnorm import triton_rmsnorm
    from kernels.softmax import triton_softmax

    launchers = [triton_fwd._launch, triton_bwd._delta_launch, triton_bwd._dkdv_launch,
                 triton_bwd._dq_launch, triton_gelu._forward_launch, triton_gelu._backward_launch,
                 triton_rmsnorm._forward_launch, triton_rmsnorm._backward_launch,
                 triton_rmsnorm._dweight_launch, triton_softmax._launch]
    for launcher in launchers:
        if hasattr(launcher.kernel, "constexprs"):  # a JIT function (not the interpreter's)
            assert launcher.constexpr_names is not None, launcher.kernel


def test_rmsnorm_alternating_problems_match_the_reference():
    """Plans per problem: two shapes, a strided view and two eps, in
    turn, each right (a plan reused for the wrong problem would be wrong here)."""
    from course_utils import env
    from kernels.rmsnorm import rmsnorm_eager
    from kernels.rmsnorm import triton_rmsnorm as rn

    # (compiled on a GPU: there the second round takes the launchers the plans kept)
    device = "cuda" if env.HAS_CUDA and not env.TRITON_INTERPRET else "cpu"
    wide = torch.randn(6, 40, device=device)
    problems = [(torch.randn(5, 33, device=device), torch.randn(33, device=device), 1e-6),
                (wide, torch.randn(40, device=device), 1e-6),
                (wide[:, 1:], torch.randn(39, device=device), 1e-6),  # odd offset: unaligned
                (torch.randn(5, 33, device=device), torch.randn(33, device=device), 0.5)]
    for _ in range(2):
        for x, w, eps in problems:
            y, _ = rn.forward(x, w, eps)
            torch.testing.assert_close(y, rmsnorm_eager(x, w, eps), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_the_compiled_launcher_path_computes_what_tritons_path_does():
    """On a GPU the second call of a problem takes the compiled kernel's launcher: every
    course kernel that launches through a plan, called again on fresh inputs of the same
    problem (new addresses, same plan), matches its reference; and the plan did hold the
    launcher (not Triton's path every time)."""
    import torch.nn.functional as F

    from kernels.attention import attention_eager
    from kernels.attention import autograd as attention_autograd
    from kernels.gelu import triton_gelu
    from kernels.rmsnorm import rmsnorm_eager, triton_rmsnorm
    from kernels.softmax import triton_softmax

    def fresh(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, device="cuda", dtype=dtype)

    for _ in range(3):  # the first call makes the plan, the next two use the launcher
        x, w = fresh(300, 1000), fresh(1000)
        torch.testing.assert_close(triton_rmsnorm.forward(x, w, 1e-6)[0],
                                   rmsnorm_eager(x, w, 1e-6), atol=2e-2, rtol=2e-2)
        xg, wg = x.float().requires_grad_(), w.float().requires_grad_()
        dy = torch.randn_like(xg)
        triton_rmsnorm.RMSNormFunction.apply(xg, wg, 1e-6).backward(dy)
        xr, wr = x.float().requires_grad_(), w.float().requires_grad_()
        rmsnorm_eager(xr, wr, 1e-6).backward(dy)
        torch.testing.assert_close(xg.grad, xr.grad, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(wg.grad, wr.grad, atol=1e-3, rtol=1e-4)
        # attention in fp16, forward and backward, against float64 eager autograd
        q, k, v = (fresh(2, 4, 200, 64, dtype=torch.float16) for _ in range(3))
        do = torch.randn_like(q)
        got = attention_autograd.gradients(attention_autograd.attention, q, k, v, True, do)
        want = attention_autograd.gradients(attention_eager, *(t.double() for t in (q, k, v)),
                                            True, do.double())
        for name, g in got.items():
            w = want[name]
            torch.testing.assert_close(g.double(), w, atol=1e-2 * max(1.0, w.abs().max().item()),
                                       rtol=1e-2, msg=lambda m, name=name: f"{name}: {m}")
        # decoding with grouped-query attention: the packed, split-KV path and its combine
        q, k, v = fresh(2, 8, 1, 64), fresh(2, 2, 700, 64), fresh(2, 2, 700, 64)
        torch.testing.assert_close(attention_autograd.attention(q, k, v, False).float(),
                                   attention_eager(*(t.float() for t in (q, k, v)), False),
                                   atol=2e-2, rtol=2e-2)
        x = fresh(5000)
        torch.testing.assert_close(triton_gelu.forward(x), F.gelu(x, approximate="tanh"),
                                   atol=2e-2, rtol=2e-2)
        s = fresh(64, 3000)
        torch.testing.assert_close(triton_softmax.softmax_triton(s), torch.softmax(s, -1),
                                   atol=2e-2, rtol=2e-2)
    torch.cuda.synchronize()
    from kernels.attention import triton_bwd, triton_decode, triton_fwd

    for launcher in (triton_rmsnorm._forward_launch, triton_rmsnorm._backward_launch,
                     triton_rmsnorm._dweight_launch, triton_gelu._forward_launch,
                     triton_softmax._launch, triton_fwd._launch, triton_bwd._delta_launch,
                     triton_bwd._dkdv_launch, triton_bwd._dq_launch,
                     triton_decode._packed, triton_decode._combine):
        assert launcher.plans and all(p.run is not None for p in launcher.plans.values()), \
            f"{launcher.kernel}: no compiled launcher kept (Triton's path on every call)"
