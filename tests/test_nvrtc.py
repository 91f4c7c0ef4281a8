"""course_utils.nvrtc on any machine: compiling needs libnvrtc, not a GPU.

Every NVRTC kernel source in kernels/ compiles for sm_80, sm_89 and sm_90; the marker split, the
generated header, error line numbers, the cache (hits, misses, invalidation) and bad input.
"""

import ctypes
import json
import re
from pathlib import Path

import pytest
import torch

from course_utils import env, nvrtc, requirements

pytestmark = pytest.mark.skipif(nvrtc.unavailable_reason() is not None,
                                reason=f"NVRTC unavailable: {nvrtc.unavailable_reason()}")

ARCHS = ("sm_80", "sm_89", "sm_90")
SOURCES = nvrtc.kernel_sources()
# axpy.cu includes <cuda/std/...>: a CUDA toolkit or the nvidia-cuda-cccl wheel provides them
LIBCUDACXX_MISSING = "; ".join(requirements.unmet("libcu++"))
needs_libcudacxx = pytest.mark.skipif(bool(LIBCUDACXX_MISSING), reason=LIBCUDACXX_MISSING)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private, empty cache (memory and disk) for one test."""
    monkeypatch.setattr(nvrtc.cache, "cache_dir", lambda: tmp_path / "cache")
    nvrtc.clear_memory_cache()
    yield tmp_path / "cache"
    nvrtc.clear_memory_cache()


def _entries(cache_root: Path) -> list[Path]:
    return sorted(p for p in cache_root.rglob("*") if p.is_file()
                  and p.parent.name != "last_build") if cache_root.exists() else []


KERNEL_FILE = """\
// IDE header: example values for the editor
#include <cuda_fp16.h>
using T = float;
constexpr int N_ITEMS = 2;
// ==== kernel: everything above is replaced
extern "C" __global__ void scale(const T* x, T* out, float alpha, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = static_cast<T>(alpha * static_cast<float>(x[i]) * N_ITEMS);
}
"""


@pytest.fixture
def kernel_file(tmp_path):
    path = tmp_path / "scale.cu"
    path.write_text(KERNEL_FILE)
    return path


# -- every kernel source of the course ---------------------------------------------------------


def test_the_course_has_nvrtc_kernel_sources():
    names = {p.name for p in SOURCES}
    assert {"add.cu", "axpy.cu"} <= names, names


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(env.ROOT)) for p in SOURCES])
def test_every_kernel_source_compiles(path, arch):
    # the course's own disk cache, not a private one: these are the compiles `make prepare`, the
    # notebooks and the exercise checks ask for too (sm_90 is NVRTC's default target), so each
    # is compiled once per checkout; the cache key holds the source, so an edit recompiles.
    # The cache's own behaviour (hits, misses, invalidation) is tested below, privately.
    examples = nvrtc.examples(path)
    assert examples, f"{path}: no __global__ function found"
    if (only := nvrtc.required_arch(path)) is not None:  # arch-specific code: sm_90a
        if nvrtc.normalize_arch(only).rstrip("af") != arch:
            pytest.skip(f"{path.name} compiles for {only} only")
        arch = only
    if LIBCUDACXX_MISSING and "<cuda/std/" in path.read_text():
        pytest.skip(f"{path.name} includes libcu++: {LIBCUDACXX_MISSING}")
    for name, defines in examples:
        compiled = nvrtc.compile(path, name, defines=defines, arch=arch, verbose=False)
        assert compiled.binary[:4] == b"\x7fELF", "CUBIN is an ELF file"
        assert compiled.arch == arch
        if name:
            assert compiled.lowered_name
            ptx = nvrtc.compile(path, name, defines=defines, arch=arch, output="ptx",
                                verbose=False).ptx
            assert f".target {arch}" in ptx and compiled.lowered_name in ptx


def test_sm_120_is_a_target_too(cache):
    if "sm_120" not in nvrtc.supported_archs():
        pytest.skip(f"NVRTC {nvrtc.version_string()} does not know sm_120")
    path = env.ROOT / "kernels" / "add" / "add.cu"
    compiled = nvrtc.compile(path, "add_kernel", defines={"scalar_t": torch.bfloat16,
                                                          "BLOCK": 256},
                             arch="sm_120", verbose=False)
    assert compiled.binary[:4] == b"\x7fELF"


# -- the marker split and the generated header ------------------------------------------------


def test_marker_splits_ide_header_from_kernel(kernel_file):
    src = nvrtc.read_source(kernel_file)
    assert "using T = float;" in src.header and "__global__" not in src.header
    assert src.body.startswith('extern "C" __global__')
    assert src.body_line == 6  # the line after the marker, 1-based
    assert src.includes == ["#include <cuda_fp16.h>"]


def test_a_file_without_marker_is_an_error(tmp_path):
    path = tmp_path / "plain.cu"
    path.write_text('extern "C" __global__ void k() {}\n')
    with pytest.raises(ValueError, match="no marker line"):
        nvrtc.read_source(path)


def test_a_string_without_marker_is_all_kernel():
    src = nvrtc.read_source('extern "C" __global__ void k() {}\n')
    assert src.header == "" and src.body_line == 1 and src.path is None


def test_generated_header_replaces_ide_values_and_keeps_includes(kernel_file):
    src = nvrtc.read_source(kernel_file)
    program = nvrtc.assemble(src, {"T": torch.bfloat16, "N_ITEMS": 8, "FAST": True,
                                   "EPS": 1e-6, "ACC": "double"})
    header, body = program.split("#line", 1)
    assert "#include <cuda_fp16.h>" in header  # kept from the IDE header
    assert "#include <cuda_bf16.h>" in header  # needed by the bfloat16 alias
    assert "using T = __nv_bfloat16;" in header and "using T = float;" not in program
    assert "constexpr int N_ITEMS = 8;" in header
    assert "constexpr bool FAST = true;" in header
    assert "constexpr float EPS = 1e-06f;" in header
    assert "using ACC = double;" in header
    assert body.startswith(f' 6 "{src.display_name}"\n')


@needs_libcudacxx
def test_header_values_reach_the_machine_code(cache):
    path = env.ROOT / "kernels" / "add" / "axpy.cu"
    loads = {}
    for items in (1, 4):
        ptx = nvrtc.compile(path, "axpy<float>", defines={"ITEMS": items, "RELU": False},
                            arch="sm_90", output="ptx", verbose=False).ptx
        loads[items] = len(re.findall(r"ld\.global", ptx))
    assert loads[4] == 4 * loads[1]  # two loads per item, unrolled


@pytest.mark.parametrize(("defines", "error", "match"), [
    ({"2x": 1}, ValueError, "not a C\\+\\+ identifier"),
    ({"T": torch.complex64}, ValueError, "no C\\+\\+ type for torch.complex64"),
    ({"N": [1, 2]}, TypeError, "expected int, bool, float, torch.dtype"),
    ({"X": float("nan")}, ValueError, "no constexpr float literal"),
])
def test_bad_defines_name_the_problem(defines, error, match):
    with pytest.raises(error, match=match):
        nvrtc.generate_header(defines)


def test_ide_defines_read_the_example_values(kernel_file):
    assert nvrtc.ide_defines(nvrtc.read_source(kernel_file)) == {"T": "float", "N_ITEMS": 2}


# -- compile errors point into the file the student edits ---------------------------------------


def test_error_line_numbers_point_into_the_cu_file(kernel_file, cache):
    text = kernel_file.read_text().replace("if (i < n)", "if (i < n) undefined_thing +=")
    kernel_file.write_text(text)
    bad_line = next(i for i, ln in enumerate(text.splitlines(), 1) if "undefined_thing" in ln)
    with pytest.raises(nvrtc.CompileError) as info:
        nvrtc.compile(kernel_file, "scale", defines={"T": torch.float16, "N_ITEMS": 4},
                      arch="sm_90", verbose=False)
    message = str(info.value)
    assert f"{kernel_file}({bad_line}): error" in message
    assert "undefined_thing" in message  # NVRTC quotes the line
    assert _entries(cache) == []  # nothing cached after a failure


def test_errors_in_the_generated_header_say_so(kernel_file, cache):
    expected = (r"scale.cu \[generated header\]\(3\): error: identifier \"no_such_type\""
                r"(.|\n)*the header generated from defines=")
    with pytest.raises(nvrtc.CompileError, match=expected):
        nvrtc.compile(kernel_file, "scale", defines={"T": "no_such_type", "N_ITEMS": 1},
                      arch="sm_90", verbose=False)
    assert _entries(cache) == []


# -- the cache ----------------------------------------------------------------------------------


def test_cache_miss_then_memory_hit_then_disk_hit(kernel_file, cache):
    args = dict(defines={"T": torch.float32, "N_ITEMS": 2}, arch="sm_90", verbose=False)
    first = nvrtc.compile(kernel_file, "scale", **args)
    assert first.cache == "built (not in the cache)"
    assert nvrtc.compile(kernel_file, "scale", **args).cache == "memory hit"
    nvrtc.clear_memory_cache()
    again = nvrtc.compile(kernel_file, "scale", **args)
    assert again.cache == "disk hit" and again.binary == first.binary
    assert again.lowered_name == first.lowered_name == "scale"
    assert len(_entries(cache)) == 2  # binary + metadata


@pytest.mark.parametrize(("change", "why"), [
    ("source", "source changed"),
    ("defines", "generated header (defines) changed"),
    ("options", "options changed"),
    ("arch", "architecture/output changed: sm_90 cubin -> sm_89 cubin"),
    ("output", "architecture/output changed: sm_90 cubin -> sm_90 ptx"),
])
def test_cache_invalidation_says_why(kernel_file, cache, change, why, capsys):
    args = dict(defines={"T": torch.float32, "N_ITEMS": 2}, arch="sm_90")
    nvrtc.compile(kernel_file, "scale", **args, verbose=False)
    if change == "source":
        kernel_file.write_text(kernel_file.read_text().replace("alpha *", "alpha * 2.0f *"))
    elif change == "defines":
        args["defines"] = {"T": torch.float32, "N_ITEMS": 3}
    elif change == "options":
        args["options"] = ["-DEXTRA=1"]
    elif change == "arch":
        args["arch"] = "sm_89"
    else:
        args["output"] = "ptx"
    rebuilt = nvrtc.compile(kernel_file, "scale", **args, verbose=True)
    assert rebuilt.cache == f"built ({why})"
    assert why in capsys.readouterr().out  # it says so when it rebuilds


def test_cache_key_covers_the_nvrtc_version(kernel_file, cache, monkeypatch):
    args = dict(defines={"T": torch.float32, "N_ITEMS": 2}, arch="sm_90", verbose=False)
    nvrtc.compile(kernel_file, "scale", **args)
    monkeypatch.setattr(nvrtc.compiler, "version_string", lambda: "99.9")
    assert nvrtc.compile(kernel_file, "scale", **args).cache.startswith(
        "built (NVRTC version changed")


def test_a_damaged_cache_entry_is_rebuilt(kernel_file, cache):
    args = dict(defines={"T": torch.float32, "N_ITEMS": 2}, arch="sm_90", verbose=False)
    good = nvrtc.compile(kernel_file, "scale", **args)
    binary = next(p for p in _entries(cache) if p.suffix == ".bin")
    binary.write_bytes(b"truncated")
    nvrtc.clear_memory_cache()
    again = nvrtc.compile(kernel_file, "scale", **args)
    assert again.cache.startswith("built") and again.binary == good.binary
    meta = json.loads(next(p for p in _entries(cache) if p.suffix == ".json").read_text())
    assert meta["lowered_name"] == "scale"


def test_cache_false_compiles_and_stores_nothing(kernel_file, cache):
    compiled = nvrtc.compile(kernel_file, "scale", arch="sm_90", cache=False, verbose=False,
                             defines={"T": torch.float32, "N_ITEMS": 2})
    assert compiled.cache == "built (cache=False)" and _entries(cache) == []


# -- bad input ----------------------------------------------------------------------------------


def test_a_kernel_name_not_in_the_source(kernel_file, cache):
    with pytest.raises(ValueError, match=r"kernel 'scael' is not in .*scale\.cu; its "
                                         r"__global__ functions: scale"):
        nvrtc.compile(kernel_file, "scael", arch="sm_90", defines={"T": "float", "N_ITEMS": 1})
    assert _entries(cache) == []


def test_a_syntax_error(cache):
    source = 'extern "C" __global__ void k(float* x) {\n    x[0] = 1.0f\n}\n'
    with pytest.raises(nvrtc.CompileError, match=r'<source>\(3\): error: expected a ";"'):
        nvrtc.compile(source, "k", arch="sm_90", verbose=False)
    assert _entries(cache) == []


def test_a_missing_include(cache):
    source = '#include <cstdint>\nextern "C" __global__ void k(std::int64_t* x) { x[0] = 1; }\n'
    with pytest.raises(nvrtc.CompileError, match="open source file \"cstdint\""):
        nvrtc.compile(source, "k", arch="sm_90", verbose=False)
    assert _entries(cache) == []


def test_headers_are_found_automatically(cache):
    source = ("#include <cuda_bf16.h>\n#include <cuda_fp8.h>\n#include <cuda/std/cstdint>\n"
              "#include <cuda/std/type_traits>\n"
              'extern "C" __global__ void k(__nv_bfloat16* x, cuda::std::int64_t n) {\n'
              "  static_assert(cuda::std::is_same_v<cuda::std::int64_t, long long>);\n"
              "  if (n) x[0] = __float2bfloat16(1.0f);\n}\n")
    if not any((d / "cuda" / "std").is_dir() for d in nvrtc.include_dirs()):
        pytest.skip("libcu++ (cuda/std) headers not found: set CUDA_HOME to a CUDA toolkit")
    nvrtc.compile(source, "k", arch="sm_90", verbose=False)
    with pytest.raises(nvrtc.CompileError, match="open source file \"cuda_bf16.h\""):
        nvrtc.compile(source, "k", arch="sm_90", auto_includes=False, verbose=False)


def test_torch_flags_switch_off_half_operators(cache):
    source = ('#include <cuda_fp16.h>\nextern "C" __global__ void k(__half* a, const __half* b)'
              " {\n    a[0] = a[0] + b[0];\n}\n")
    nvrtc.compile(source, "k", arch="sm_90", verbose=False)
    flags = nvrtc.torch_compat.torch_nvrtc_flags()
    assert "-D__CUDA_NO_HALF_OPERATORS__" in flags
    with pytest.raises(nvrtc.CompileError, match=r"<source>\(3\): error: no operator \"\+\""):
        nvrtc.compile(source, "k", arch="sm_90", options=flags, verbose=False)


@pytest.mark.parametrize("arch", ["sm_9", "ampere", "sm_90x"])
def test_a_bad_arch(arch):
    with pytest.raises(ValueError, match="arch expected"):
        nvrtc.normalize_arch(arch)


def test_arch_spellings():
    assert {nvrtc.normalize_arch(a) for a in ("sm_90", "90", 90, (9, 0), "compute_90")} == {
        "sm_90"}
    assert nvrtc.normalize_arch("sm_90a") == "sm_90a"


@needs_libcudacxx
def test_parameters_resolve_aliases_and_template_arguments(cache):
    path = env.ROOT / "kernels" / "add" / "axpy.cu"
    compiled = nvrtc.compile(path, "axpy<__nv_bfloat16>", arch="sm_90", verbose=False,
                             defines={"ITEMS": 2, "RELU": True})
    params = nvrtc.parameters(compiled)
    assert [p.name for p in params] == ["x", "y", "out", "alpha", "n"]
    assert [p.dtype for p in params[:3]] == [torch.bfloat16] * 3
    assert params[3].ctype == "float" and not params[3].pointer
    assert params[4].ctype == "int64_t"


def test_wrong_argument_count_or_type_is_a_python_error(cache):
    compiled = nvrtc.compile(env.ROOT / "kernels" / "add" / "add.cu", "add_kernel",
                             defines={"scalar_t": torch.float16, "BLOCK": 128}, arch="sm_90",
                             verbose=False)
    params = nvrtc.parameters(compiled)
    x = torch.ones(4, dtype=torch.float16)
    with pytest.raises(TypeError, match=r"add_kernel takes 4 arguments \(const scalar_t\* "):
        nvrtc.check_args("add_kernel", params, (x, x, x), 0)
    with pytest.raises(TypeError, match=r"argument 0 \(const scalar_t\* __restrict__ a\) "
                                        r"expected a CUDA tensor, got list"):
        nvrtc.check_args("add_kernel", params, ([1.0], x, x, 4), 0)
    with pytest.raises(TypeError, match="expected a tensor on cuda:0, got one on cpu"):
        nvrtc.check_args("add_kernel", params, (x, x, x, 4), 0)
    n_only = params[3:]
    with pytest.raises(TypeError, match=r"argument 0 \(long long n\) expected a Python int, "
                                        "got float"):
        nvrtc.check_args("add_kernel", n_only, (4.0,), 0)
    with pytest.raises(TypeError, match="does not fit in long long"):
        nvrtc.check_args("add_kernel", n_only, (2**63,), 0)
    assert isinstance(nvrtc.check_args("add_kernel", n_only, (7,), 0)[0], ctypes.c_int64)


def test_launching_without_a_gpu_says_so(cache):
    if env.HAS_CUDA:
        pytest.skip("this machine has a GPU: test_nvrtc_gpu.py launches instead")
    path = env.ROOT / "kernels" / "add" / "add.cu"
    with pytest.raises(nvrtc.NoGPUError, match="no CUDA GPU.*Compiling works without a GPU"):
        nvrtc.kernel(path, "add_kernel", defines={"scalar_t": torch.float32, "BLOCK": 64})
    compiled = nvrtc.compile(path, "add_kernel", defines={"scalar_t": torch.float32,
                                                          "BLOCK": 64},
                             arch="sm_90", verbose=False)
    with pytest.raises(nvrtc.NoGPUError, match="cannot load add_kernel: no CUDA GPU"):
        nvrtc.load(compiled)


def test_nvrtc_requirement_is_met_here():
    assert requirements.unmet("nvrtc") == []
    assert nvrtc.version() >= (11, 0)


def test_a_header_beside_the_kernel_is_included_and_its_edits_recompile(tmp_path, cache):
    """``#include "x.cuh"`` finds the file next to the kernel (after the generated header, so it
    sees its definitions), and editing that header changes the cache key: no stale binary."""
    (tmp_path / "twice.cuh").write_text("__device__ scalar_t twice(scalar_t x) { return 2 * x; }\n")
    kernel = tmp_path / "use.cu"
    kernel.write_text("using scalar_t = float;\n// ==== kernel\n#include \"twice.cuh\"\n"
                      "extern \"C\" __global__ void use(scalar_t* x) { x[0] = twice(x[0]); }\n")
    assert nvrtc.local_includes(nvrtc.read_source(kernel)) == [tmp_path / "twice.cuh"]
    first = nvrtc.compile(kernel, "use", defines={"scalar_t": "float"}, arch="sm_90",
                          output="ptx", verbose=False)
    assert "mul.f32" in first.ptx or "add.f32" in first.ptx
    # another size too: two writes may share an mtime on a coarse file system
    (tmp_path / "twice.cuh").write_text("__device__ scalar_t twice(scalar_t x) "
                                        "{ return x + 7.0f; }\n")
    second = nvrtc.compile(kernel, "use", defines={"scalar_t": "float"}, arch="sm_90",
                           output="ptx", verbose=False)
    assert second.key != first.key and second.cache.startswith("built")
    assert "0f40E00000" in second.ptx  # 7.0f: the edited header was compiled
