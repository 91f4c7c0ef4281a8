"""The code ``torch.compile`` writes for a function, read back from Python.

Inductor, ``torch.compile``'s code generator, turns a traced graph into a Python module (the
"wrapper") that allocates the outputs and calls one or more generated kernels: Triton kernels on
a GPU, C++ (vectorised with ``at::vec``) on a CPU. :func:`generated` compiles a function afresh
and returns that module's text and the kernels in it, by the route that has stayed put across
PyTorch 2.x: ``torch._inductor.utils.run_and_get_code`` (the same text ``TORCH_LOGS=output_code``
prints, captured instead of logged). It is a private module, so a PyTorch that moves it gets a
clear error here rather than a traceback in a notebook.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# a Triton kernel in the wrapper: name = async_compile.triton('name', '''source''', ...)
_TRITON = re.compile(r"async_compile\.triton\(\s*'(?P<name>\w+)',\s*'''(?P<src>.*?)'''",
                     re.DOTALL)
# a C++ kernel: name = async_compile.cpp_pybinding([...], r'''source''')
_CPP = re.compile(r"(?P<name>\w+) = async_compile\.cpp_pybinding\(\[.*?\],\s*r?'''(?P<src>.*?)'''",
                  re.DOTALL)


@dataclass(frozen=True)
class Generated:
    """What ``torch.compile`` wrote for one call: the wrapper module and its kernels."""

    output: object  # what the compiled function returned
    wrapper: str  # the whole generated Python module
    kernels: dict[str, str]  # {kernel name: its source}
    language: str  # "triton", "c++" or "none" (no kernel: the graph ran library calls only)

    def kernel(self) -> str:
        """The source of the only (or first) generated kernel."""
        if not self.kernels:
            raise ValueError("torch.compile generated no kernel for this call (it calls "
                             "library functions only): read .wrapper instead")
        return next(iter(self.kernels.values()))


def kernels_in(wrapper: str) -> tuple[str, dict[str, str]]:
    """``(language, {name: source})`` of the kernels defined in an Inductor wrapper module."""
    if found := {m["name"]: m["src"].strip("\n") for m in _TRITON.finditer(wrapper)}:
        return "triton", found
    if found := {m["name"]: m["src"].strip("\n") for m in _CPP.finditer(wrapper)}:
        return "c++", found
    return "none", {}


def generated(fn: Callable, *args, **compile_options) -> Generated:
    """Compile ``fn`` with ``torch.compile(**compile_options)``, call it on ``args`` and return
    what Inductor wrote (:class:`Generated`). The first call of a new shape pays the compile
    (seconds); Inductor's caches make a later one fast."""
    if not callable(fn):
        raise ValueError(f"fn expected a callable, got {type(fn).__name__}")
    import torch

    try:
        from torch._inductor.utils import run_and_get_code
    except ImportError as err:  # a PyTorch that moved it: say so, not a traceback
        raise RuntimeError(f"this PyTorch ({torch.__version__}) has no "
                           "torch._inductor.utils.run_and_get_code; run with "
                           "TORCH_LOGS=output_code to see the generated code instead") from err
    output, sources = run_and_get_code(torch.compile(fn, **compile_options), *args)
    wrapper = "\n\n".join(sources)
    language, kernels = kernels_in(wrapper)
    return Generated(output, wrapper, kernels, language)


def lines_with(source: str, *needles: str) -> list[str]:
    """The lines of ``source`` that contain any of ``needles``, stripped: what to point at when
    reading a generated kernel beside a hand-written one."""
    return [line.strip() for line in source.splitlines()
            if any(n in line for n in needles)]
