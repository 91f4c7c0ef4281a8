"""The add kernel both ways: NVRTC (add.cu, launched from Python) and load_inline (add_op.cu, a
TORCH_LIBRARY op). On any machine the NVRTC source compiles for every dtype; on a GPU both
providers must equal a + b bit for bit."""

import os
import subprocess
import sys

import pytest
import torch

import kernels
from course_utils import env, nvrtc
from kernels.add import DTYPES
from kernels.add import nvrtc as add_nvrtc


@pytest.mark.skipif(nvrtc.unavailable_reason() is not None, reason="NVRTC unavailable")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_add_cu_compiles_for_each_dtype_without_a_gpu(dtype):
    compiled = add_nvrtc.compile_add(dtype, arch="sm_90", verbose=False)
    assert compiled.lowered_name == "add_kernel"
    ctype = nvrtc.DTYPE_CTYPES[dtype][0]
    assert f"using scalar_t = {ctype};" in compiled.program
    assert [p.dtype for p in nvrtc.parameters(compiled)[:3]] == [dtype] * 3


def test_both_providers_are_registered_with_what_they_need():
    nv = kernels.get_kernel("add", "nvrtc")
    li = kernels.get_kernel("add", "load_inline")
    assert nv.needs == ("cuda", "nvrtc") and li.needs == ("cuda", "nvcc")
    assert nv.devices == li.devices == ("cuda",)
    assert not nv.built and not li.built or env.HAS_CUDA  # lazy: nothing built on import
    if not env.HAS_CUDA:
        assert "no CUDA GPU" in nv.supports(torch.ones(2), torch.ones(2))


@pytest.mark.gpu
@pytest.mark.parametrize("provider", ["nvrtc", "load_inline"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_add_matches_a_plus_b_exactly(provider, dtype):
    kernel = kernels.get_kernel("add", provider)
    for shape in [(1 << 20,), (1001,), (0,), (3, 5, 7)]:
        a, b = (torch.randn(*shape, device="cuda").to(dtype) for _ in range(2))
        torch.testing.assert_close(kernel(a, b), a + b, atol=0, rtol=0)
    a = torch.randn(40, 66, device="cuda").to(dtype)[:, ::2]  # non-contiguous
    b = torch.randn(40, 33, device="cuda").to(dtype)
    torch.testing.assert_close(kernel(a, b), a + b, atol=0, rtol=0)


@pytest.mark.gpu
def test_load_inline_registers_a_torch_op():
    kernels.get_kernel("add", "load_inline").load()
    a = torch.randn(100, device="cuda")
    torch.testing.assert_close(torch.ops.course_add.add(a, a), 2 * a)


BAD_CALLS = """
import torch
from kernels.add import load_inline
load_inline.build()
a = torch.randn(100, device="cuda")
for b in (a[:10], a.double(), a.cpu(), a.int()):
    try:
        torch.ops.course_add.add(a if b.dtype != torch.int32 else a.int(), b)
    except RuntimeError as err:
        print("raised:", str(err).splitlines()[0])
"""


@pytest.mark.gpu
@pytest.mark.parametrize(("args", "match"), [
    (lambda a: (a, a[:10]), r"add: b expected the shape of a \(100,\), got \(10,\)"),
    (lambda a: (a, a.double()), "add: b expected the dtype of a"),
    (lambda a: (a, a.cpu()), "add: b expected the device of a"),
    (lambda a: (a.int(), a.int()), "add: a expected float32, float64, float16 or bfloat16"),
    (lambda a: (a, [1.0]), "add: b expected a torch.Tensor, got list"),
])
def test_bad_input_is_a_value_error_before_the_op_is_called(args, match):
    add = kernels.get_kernel("add", "load_inline").load()
    with pytest.raises(ValueError, match=match):
        add(*args(torch.randn(100, device="cuda")))


@pytest.mark.gpu
def test_bad_input_to_the_raw_op_raises_and_the_process_survives():
    # (on the GPU box this crashed while extensions were built with the image's CXX wrapper;
    # cuda_ext.host_compilers now builds with the system g++, see its comment)
    # in a fresh process: if a C++ exception crashed Python, this test (not pytest) would see it
    out = subprocess.run([sys.executable, "-X", "faulthandler", "-c", BAD_CALLS],
                         capture_output=True, text=True, timeout=600, cwd=env.ROOT,
                         env=env.child_environment())
    assert out.returncode == 0, f"exit {out.returncode}:\n{out.stdout}\n{out.stderr[-3000:]}"
    lines = out.stdout.splitlines()
    assert any("b expected the shape of a [100], got [10]" in ln for ln in lines), lines
    assert any("b expected the dtype of a" in ln for ln in lines), lines
    assert any("b expected the device of a" in ln for ln in lines), lines
    assert any("a expected float32, float64, float16 or bfloat16, got Int" in ln
               for ln in lines), lines


def test_builds_use_the_system_compiler_unless_told(monkeypatch):
    from course_utils import cuda_ext

    monkeypatch.setenv("CXX", "/opt/elsewhere/g++")
    monkeypatch.delenv("COURSE_CXX", raising=False)
    chosen = cuda_ext.host_compilers()
    if cuda_ext.SYSTEM_CXX.exists():
        assert chosen["CXX"] == str(cuda_ext.SYSTEM_CXX)
    monkeypatch.setenv("COURSE_CXX", "/my/clang++")
    assert cuda_ext.host_compilers()["CXX"] == "/my/clang++"


def test_overlapping_builds_keep_the_compilers_until_the_last_one_ends(monkeypatch):
    from course_utils import cuda_ext

    monkeypatch.setenv("COURSE_CXX", "/my/clang++")
    monkeypatch.setenv("CXX", "/the/users/g++")
    compilers = cuda_ext._Compilers()
    compilers.__enter__()
    compilers.__enter__()  # a second build, in another thread, starts before the first ends
    assert os.environ["CXX"] == "/my/clang++"
    compilers.__exit__(None, None, None)  # the first ends: the second still builds
    assert os.environ["CXX"] == "/my/clang++"
    compilers.__exit__(None, None, None)
    assert os.environ["CXX"] == "/the/users/g++"

