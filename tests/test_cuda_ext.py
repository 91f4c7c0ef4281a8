"""The CUDA GeLU extension builds both ways (setup.py and load_inline) and rejects bad input.

The builds compile with nvcc even without a GPU (for sm_90 by default); they are cached under
var/build/, so notebook 05 and these tests share one compile per CI run.
"""

import pytest
import torch

from course_utils import cuda_ext, env, requirements
from kernels.gelu import extension

pytestmark = pytest.mark.skipif(bool(requirements.unmet("nvcc", "cxx")),
                                reason="; ".join(requirements.unmet("nvcc", "cxx")) or "ok")


@pytest.fixture(scope="module", params=["setup.py", "load_inline"])
def built(request):
    build = extension.build_setup if request.param == "setup.py" else extension.build_inline
    return build()


@pytest.mark.slow
def test_extension_builds_links_and_imports(built):
    assert built.module is not None
    library = extension.library_path(built)
    assert library.exists() and library.is_relative_to(env.VAR / "build")
    assert callable(built.module.gelu_naive) and callable(built.module.gelu_vectorized)


@pytest.mark.slow
@pytest.mark.skipif(extension.cuda_tool("cuobjdump") is None, reason="cuobjdump not found")
def test_library_holds_machine_code_for_both_kernels(built):
    sass = extension.machine_code(built, "sass")
    assert "gelu_naive_kernel" in sass and "gelu_vectorized_kernel" in sass
    assert "LDG.E.128" in sass and "STG.E.128" in sass  # the 16-byte loads and stores
    resources = extension.machine_code(built, "resources")
    assert "REG:" in resources


@pytest.mark.slow
@pytest.mark.parametrize("fn", ["gelu_naive", "gelu_vectorized"])
def test_wrapper_rejects_bad_input_with_a_clear_message(built, fn):
    kernel = getattr(built.module, fn)
    call = kernel
    with pytest.raises(RuntimeError, match="must be float32, float16 or bfloat16, got Int"):
        call(torch.zeros(8, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="must be contiguous"):
        call(torch.zeros(8, 8).t())
    if not env.HAS_CUDA:  # checked last, so it is the one a CPU float tensor trips
        with pytest.raises(RuntimeError, match="must be a CUDA tensor, got a tensor on cpu"):
            call(torch.zeros(8))
    else:
        with pytest.raises(RuntimeError, match="must be a CUDA tensor, got a tensor on cpu"):
            call(torch.zeros(8))
        with pytest.raises(RuntimeError, match="must be float32, float16 or bfloat16"):
            call(torch.zeros(8, dtype=torch.float64, device="cuda"))
        with pytest.raises(RuntimeError, match="must be contiguous"):
            call(torch.zeros(8, 8, device="cuda").t())


def test_launch_configuration_is_checked_in_python_first():
    # On the H200 (torch 2.11) a TORCH_CHECK on the launch configuration, thrown after the
    # input checks passed for a CUDA tensor, crashed the process instead of raising; callers
    # that take a configuration from users check it here first.
    extension.check_launch(128, 2, 0)
    extension.check_launch()
    with pytest.raises(ValueError, match="unroll expected 0 \\(default\\), 1, 2 or 4, got 3"):
        extension.check_launch(128, 3)
    with pytest.raises(ValueError, match="threads expected 0 \\(default\\) or a multiple of 32"):
        extension.check_launch(100)
    with pytest.raises(ValueError, match="blocks_per_sm expected >= 0"):
        extension.check_launch(128, 2, -1)


@pytest.mark.slow
def test_cached_build_only_imports(built):
    again = extension.build_inline() if built.name == extension.INLINE_NAME \
        else extension.build_setup()
    assert not again.compiled and again.seconds < 10
    cold = cuda_ext.cold_build(again.directory)
    assert cold is not None and cold["seconds"] > 0
