"""Exercises of lesson 04: NVRTC (a block-size sweep). The traps' exercises (a kernel generic over
dtype under PyTorch's flags, libcu++) moved with their sections to appendix A1
(:mod:`exercises.lessonA1`)."""

from __future__ import annotations

import torch

from course_utils import env
from exercises import (
    bandwidth_verdict,
    exercise,
    expect,
    needs,
)
from exercises.kernel_checks import compile_answer

ADD_CU = env.ROOT / "kernels" / "add" / "add.cu"


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
    ptx = {b: compile_answer(ADD_CU, "add_kernel", f"BLOCK={b}", output="ptx",
                             defines=dict(c.defines)).ptx
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
