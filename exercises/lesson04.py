"""Exercises of lesson 04: NVRTC (a kernel generic over dtype, a block-size sweep, libcu++)."""

from __future__ import annotations

import torch

from course_utils import env
from exercises import (
    Mismatch,
    bandwidth_verdict,
    compare,
    exercise,
    expect,
    needs,
)

ADD_CU = env.ROOT / "kernels" / "add" / "add.cu"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# what torch's own NVRTC and extension builds add: no __half/__nv_bfloat16 operators
TORCH_FLAGS = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
               "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__")


def _compile(source: str, name: str, label: str, **kwargs):
    from course_utils import nvrtc

    needs("nvrtc")
    kwargs.setdefault("arch", "sm_90")
    kwargs.setdefault("output", "ptx")
    try:
        return nvrtc.compile(source, name, verbose=False, **kwargs)
    except nvrtc.CompileError as err:
        errors = [ln for ln in str(err).splitlines() if "error:" in ln][:3]
        raise Mismatch(f"{label} does not compile:\n" + "\n".join(errors or [str(err)]),
                       "read the first error: its line number counts from the first line of "
                       "your source") from None


# --------------------------------------------------------------------------------------------
GENERIC_STUB = '''
SCALE_SHIFT_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using scalar_t = float;  // for the editor: the generated header sets it from a torch dtype
// ==== kernel: everything above this line is replaced by the generated header ====
extern "C" __global__ void scale_shift(const float* x, float* y, float a, float b, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""
'''


@exercise("04.generic", title="One kernel for float32, float16 and bfloat16", stub=GENERIC_STUB,
          answers=("SCALE_SHIFT_SOURCE",), section="__CUDA_NO_HALF_OPERATORS__",
          intro="""
`scale_shift` computes `y = a·x + b` for float32 only. Make it generic over the element type
with the generated header: the check compiles it with `defines={"scalar_t": dtype}` for
float32, float16 and bfloat16, *with PyTorch's flags* (`-D__CUDA_NO_HALF_OPERATORS__` and
friends, so `__half` arithmetic and implicit conversions are off). Compute in `float`: convert
with `__half2float` / `__bfloat162float` on load and `__float2half_rn` / `__float2bfloat16_rn`
on store (overloads, as in `kernels/add/add.cu`, keep it short). The check compiles all three
for sm_90 without a GPU; on a GPU it runs them on odd lengths and measures bfloat16.""")
def check_generic(source, report) -> None:
    from course_utils import nvrtc

    expect(isinstance(source, str), f"SCALE_SHIFT_SOURCE is a {type(source).__name__}; "
           "expected the kernel's source as a string")
    for dtype in DTYPES:
        label = f"scale_shift with scalar_t = {str(dtype).removeprefix('torch.')}"
        compiled = _compile(source, "scale_shift", label, defines={"scalar_t": dtype},
                            options=TORCH_FLAGS)
        params = nvrtc.parameters(compiled)
        pointers = [p for p in params if p.pointer]
        expect(len(pointers) == 2 and all(p.dtype == dtype for p in pointers),
               f"{label}: the pointer parameters are "
               f"{', '.join(p.spelled for p in pointers)}, so a {dtype} tensor cannot be passed",
               "declare x and y as scalar_t pointers: const scalar_t* x, scalar_t* y")
    report.line("compiles for float32, float16 and bfloat16 with PyTorch's flags; x and y are "
                "scalar_t")
    if not env.HAS_CUDA:
        report.line("on a GPU this check also runs each dtype on odd lengths and measures "
                    "bfloat16 against the copy bandwidth")
        return
    for dtype in DTYPES:
        kernel = nvrtc.kernel(source, "scale_shift", defines={"scalar_t": dtype},
                              options=TORCH_FLAGS, verbose=False)
        for n in (1, 7, 4099, 1 << 20):
            x = torch.randn(n, device="cuda").to(dtype)
            y = torch.empty_like(x)
            kernel(x, y, 2.0, -1.0, n, grid=-(-n // 256), block=256)
            atol = 1e-5 if dtype == torch.float32 else 1e-2
            compare(y, (2.0 * x.float() - 1.0).to(dtype), what=f"{dtype} n={n}", atol=atol,
                    rtol=atol, hint="load as float, compute, round once on the store")
    report.line("matches 2·x - 1 in every dtype, odd lengths included")
    kernel = nvrtc.kernel(source, "scale_shift", defines={"scalar_t": torch.bfloat16},
                          options=TORCH_FLAGS, verbose=False)
    x = torch.randn(1 << 28, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    bandwidth_verdict(report, lambda: kernel(x, y, 2.0, -1.0, x.numel(),
                                             grid=-(-x.numel() // 256), block=256), (),
                      2 * x.numel() * 2)


# --------------------------------------------------------------------------------------------
SWEEP_STUB = '''
import torch

from course_utils import nvrtc
from kernels.add import nvrtc as add_nvrtc

ADD = add_nvrtc.SOURCE  # kernels/add/add.cu


def add_variants(blocks, arch):
    """{BLOCK: compiled add_kernel of add.cu for float32 with that BLOCK} for each of blocks."""
    ...
'''


@exercise("04.sweep", title="Sweep the block size with NVRTC", stub=SWEEP_STUB,
          answers=("add_variants",), section="The header-generation workflow", intro="""
`kernels/add/add.cu` takes its block size from the generated header (`BLOCK`, also in
`__launch_bounds__(BLOCK)`). Write `add_variants`: one NVRTC compile per block size, for
float32 (`scalar_t`), for `arch`. Each compile takes milliseconds, which is what makes such a
sweep cheap. The check calls it with 64..1024 and reads each variant's PTX (`.maxntid`, the
launch bound); on a GPU it then times every variant and compares the best with the copy
bandwidth.""")
def check_sweep(add_variants, report) -> None:
    from course_utils import nvrtc

    needs("nvrtc")
    blocks = [64, 128, 256, 512, 1024]
    arch = None if env.HAS_CUDA else "sm_90"
    variants = add_variants(blocks, arch)
    expect(isinstance(variants, dict) and sorted(variants) == blocks,
           f"add_variants({blocks}, {arch!r}) returned "
           f"{sorted(variants) if isinstance(variants, dict) else type(variants).__name__}; "
           f"expected a dict with the keys {blocks}", "{b: nvrtc.compile(...) for b in blocks}")
    for block, compiled in variants.items():
        expect(isinstance(compiled, nvrtc.Compiled),
               f"variant {block} is a {type(compiled).__name__}, not what nvrtc.compile returns")
        defines = dict(compiled.defines)
        expect(defines.get("BLOCK") == block,
               f"variant {block} was compiled with BLOCK = {defines.get('BLOCK')!r}",
               "pass defines={'scalar_t': torch.float32, 'BLOCK': block}")
        expect(defines.get("scalar_t") in (torch.float32, "float"),
               f"variant {block} has scalar_t = {defines.get('scalar_t')!r}; expected float32")
    ptx = {b: _compile(ADD_CU, "add_kernel", f"BLOCK={b}", defines=dict(c.defines)).ptx
           for b, c in variants.items()}
    bounds = {b: next((ln.split()[1].rstrip(",") for ln in p.splitlines() if ".maxntid" in ln),
                      None) for b, p in ptx.items()}
    expect(all(bounds[b] == str(b) for b in blocks), f"launch bounds in the PTX: {bounds}")
    report.line(f"{len(blocks)} variants; each PTX has .maxntid = its BLOCK")
    if not env.HAS_CUDA:
        report.line("on a GPU this check also times each variant against the copy bandwidth")
        return
    from course_utils import timing

    n = 1 << 28
    a, b, out = (torch.randn(n, device="cuda") for _ in range(3))
    speeds = {}
    for block, compiled in variants.items():
        kernel = nvrtc.load(compiled)
        ms = timing.benchmark(lambda k=kernel, bl=block: k(a, b, out, n, grid=-(-n // bl),
                                                          block=bl), device="cuda").median
        speeds[block] = timing.gbps(3 * n * 4, ms)
    report.line("GB/s by BLOCK: " + ", ".join(f"{k}: {v:,.0f}" for k, v in speeds.items()))
    best = max(speeds, key=speeds.get)
    kernel = nvrtc.load(variants[best])
    bandwidth_verdict(report, lambda: kernel(a, b, out, n, grid=-(-n // best), block=best),
                      (), 3 * n * 4)


# --------------------------------------------------------------------------------------------
LIBCU_STUB = '''
HOST_HEADERS_SOURCE = r"""
#include <cstdint>
#include <type_traits>
template <typename T>
__global__ void fill(T* out, std::int64_t n, T value) {
    static_assert(std::is_arithmetic_v<T>, "fill needs a number type");
    const std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = value;
}
"""
'''


@exercise("04.libcu", title="No host headers under NVRTC", stub=LIBCU_STUB,
          answers=("HOST_HEADERS_SOURCE",), section="The missing-header lesson",
          intro="""
This kernel compiles with nvcc and fails with NVRTC: there is no host C++ standard library.
Make it compile with NVRTC using libcu++ (`<cuda/std/...>`, namespace `cuda::std`), keeping the
64-bit index and the `static_assert`. The check compiles `fill<float>` and `fill<int>` for
sm_90 (no GPU needed).""")
def check_libcu(source, report) -> None:
    needs("nvrtc", "libcu++")
    expect(isinstance(source, str), f"HOST_HEADERS_SOURCE is a {type(source).__name__}; "
           "expected the kernel's source as a string")
    expect("<cstdint>" not in source and "<type_traits>" not in source,
           "the source still includes host headers (<cstdint>, <type_traits>): NVRTC has none",
           "include <cuda/std/cstdint> and <cuda/std/type_traits> instead")
    for name in ("fill<float>", "fill<int>"):
        ptx = _compile(source, name, name).ptx
        expect(".u64" in ptx or ".s64" in ptx, f"{name}: no 64-bit integer in the PTX",
               "keep the index 64-bit: cuda::std::int64_t")
    expect("static_assert" in source, "the static_assert is gone", "keep it: "
           "cuda::std::is_arithmetic_v<T> works under NVRTC")
    report.line("fill<float> and fill<int> compile with NVRTC, libcu++ only")
