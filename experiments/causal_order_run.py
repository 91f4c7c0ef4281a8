"""Probe (not course material; it reads the kernels as they were at 93a1f82, before the fp8
forward took the reversed order): does running each head's longest causal query tiles first
(the reversed tile order FlashAttention-3 uses) speed up the Triton forwards, bf16 and fp8?
Copies of the two kernel modules with the tile order reversed are written to var/ and timed
beside the course's, interleaved, at B 2, H 16, D 128, causal, S 4096 and 8192."""
import importlib.util
import statistics
import sys
from pathlib import Path

import torch

from course_utils import timing
from kernels.attention import triton_fwd
from kernels.scaled_attention import triton_fwd as fp8_fwd
from kernels.scaled_attention.quantize import quantize_qkv

ORDER = """    start_m = tl.program_id(0)
    bh = tl.program_id(1)
"""
REVERSED = """    start_m = tl.program_id(0)
    if CAUSAL:  # the longest query tiles of a head first: the last wave's tiles are short
        start_m = tl.num_programs(0) - 1 - start_m
    bh = tl.program_id(1)
"""


def reversed_copy(module, name):
    source = Path(module.__file__).read_text()
    assert source.count(ORDER) == 1, module.__file__
    path = Path("var") / f"{name}.py"
    path.parent.mkdir(exist_ok=True)
    # (the copy registers nothing: its kernel is timed directly, the course's stays registered)
    source = source.replace(ORDER, REVERSED).replace("@register(",
                                                     "@(lambda *a, **k: lambda f: f)(")
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    copy = importlib.util.module_from_spec(spec)
    sys.modules[name] = copy
    spec.loader.exec_module(copy)
    return copy


bf16_rev = reversed_copy(triton_fwd, "probe_fwd_reversed")
fp8_rev = reversed_copy(fp8_fwd, "probe_fp8_reversed")


def measure(s):
    q, k, v = (torch.randn(2, 16, s, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    quantised = quantize_qkv(q, k, v)
    fns = {"bf16": lambda: triton_fwd.forward(q, k, v, True, save_lse=False)[0],
           "bf16 longest first": lambda: bf16_rev.forward(q, k, v, True, save_lse=False)[0],
           "fp8": lambda: fp8_fwd.forward(*quantised, True),
           "fp8 longest first": lambda: fp8_rev.forward(*quantised, True)}
    ref = {"bf16": fns["bf16"](), "fp8": fns["fp8"]()}
    for name, fn in fns.items():
        assert torch.equal(fn(), ref[name.split()[0]]), f"{name}: a different output"
    found = {name: [] for name in fns}
    for _ in range(5):
        for name, fn in fns.items():
            found[name].append(timing.benchmark(fn, device="cuda", min_time_s=0.1).median)
    ms = {name: statistics.median(t) for name, t in found.items()}
    flops = 2 * 2 * 2 * 16 * s * s * 128 / 2  # causal: half the scores
    for name, t in ms.items():
        print(f"S {s:5d} {name:20s} {t:.3f} ms {flops / t / 1e9:6.1f} TFLOP/s")
    print(f"S {s:5d} fp8 / bf16: {ms['bf16'] / ms['fp8']:.2f}x as is, "
          f"{ms['bf16 longest first'] / ms['fp8 longest first']:.2f}x longest first; "
          f"fp8 longest first / bf16 as is {ms['bf16'] / ms['fp8 longest first']:.2f}x")


print(torch.cuda.get_device_name(), torch.__version__)
for s in (4096, 8192):
    measure(s)
