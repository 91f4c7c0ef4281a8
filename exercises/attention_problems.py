"""What lesson 09's checks share (and lesson 14's attention exercises with them): where a
check runs and what it says about it (:func:`where_checked`, :func:`ran_on`), fresh problems
(:func:`random_qkv`) and their float64 scores (:func:`exact_scores`), and the course's own
kernel with the student's function in it (:func:`patched_module`, :func:`forward_with`,
:func:`config_of`).
"""

from __future__ import annotations

import importlib.util
import math
import sys

import torch

from course_utils import env
from exercises import CannotCheck
from exercises.triton_precision import watched

LN2 = math.log(2.0)


def where_checked() -> tuple[str, list[torch.dtype]]:
    """(device, dtypes) a check runs here, and says so."""
    if env.TRITON_INTERPRET:
        return "cpu", [torch.float32, torch.float16]
    if not env.HAS_CUDA:
        raise CannotCheck("Triton needs a CUDA GPU or its interpreter (TRITON_INTERPRET=1)")
    return "cuda", [torch.float32, torch.float16, torch.bfloat16]


def ran_on(device: str, dtypes) -> str:
    names = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
    if device == "cpu":
        return (f"checked in Triton's interpreter on the CPU ({names}; bf16 tl.dot is wrong in "
                "the interpreter, so bf16 is checked on a GPU only)")
    return f"checked compiled on {torch.cuda.get_device_name()} ({names})"


def patched_module(kernel_module, name: str, fn):
    """A fresh copy of a kernel module of the course (its file executed again as a new module)
    with ``fn`` in place of its function ``name``: your code runs inside the lesson's kernel."""
    label = "_attention_" + kernel_module.__name__.rsplit(".", 1)[-1]
    spec = importlib.util.spec_from_file_location(label, kernel_module.__file__)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclass looks itself up there while it is made)
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    setattr(module, name, fn)  # the kernel finds its helpers among the module's globals
    return module


def forward_with(name: str, fn, seen: list[str] | None = None):
    """The course's forward (``triton_fwd.py``) with your ``fn`` as its function ``name``;
    with ``seen``, the interpreter records there what ``attend_block`` returns that is not
    float32."""
    from kernels.attention import triton_fwd

    if seen is not None:
        fn = watched(fn, ("acc", "m_new", "l_new"), seen)
    module = patched_module(triton_fwd, name, fn)
    return module.forward, module


def random_qkv(device, dtype, b, h, sq, sk, d, scale=1.0):
    """Fresh q, k, v: ``scale`` makes the scores large (q and k); v stays unit-sized."""
    return [(c * torch.randn(b, h, s, d, device=device)).to(dtype)
            for s, c in ((sq, scale), (sk, scale), (sk, 1.0))]


def exact_scores(q, k, v, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 ``(scaled scores, masked)`` of a problem: what the output and lse come from."""
    s = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        sq, sk = s.shape[-2:]
        s = s.masked_fill(torch.ones(sq, sk, dtype=torch.bool, device=s.device).triu(1),
                          float("-inf"))
    return s


def config_of(forward, block_m: int, block_n: int):
    """The forward's own ``Config`` (of the module it was defined in) with these blocks."""
    return forward.__globals__["Config"](block_m, block_n)


def device_is_cpu() -> bool:
    return env.TRITON_INTERPRET or not env.HAS_CUDA
