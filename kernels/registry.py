"""A small kernel registry, in the spirit of the CUTLASS Python API's "bring your own kernel".

A kernel's identity is ``(op, provider[, variant])``: ``("gelu", "triton")``,
``("matmul", "nvrtc_mma", "bf16")``. Registering is declarative and cheap; *building* (compiling
a CUDA extension, JIT-compiling with NVRTC) happens on first call and is cached, so
``import kernels`` works on a machine with no GPU, no nvcc and no Triton backend.

Two tiers of validation, as in CUTLASS:

* a malformed problem (a list instead of a tensor, matmul shapes that do not line up) is the
  caller's bug: the op's ``validate`` raises ``ValueError`` naming the operand,
  "expected X, got Y";
* a well-formed problem that this kernel cannot run here (CPU tensor for a CUDA kernel, float64
  for a half-precision kernel, an sm_80 instruction on an sm_75 GPU) is not a bug:
  :meth:`Kernel.supports` returns the reason in plain words, and :func:`get_kernels` filters
  such kernels out.

Each op names its eager kernel as the reference; ``tests/test_kernel_matrix.py`` runs every
registered kernel against it, so a new kernel joins the tests (and the notebooks' benchmark
tables) by being registered, from a course module, a notebook or your own module alike;
:func:`unregister` leaves the registry as before. Bad registrations raise ``ValueError`` at
once. ``kernels/README.md`` is the guide; notebook 11 walks through it with an FP64 GEMM.

This module holds the registry itself (defining ops, registering, looking up, verifying) and
the validation helpers the ops share; what a kernel *is* and does on a call (:class:`Kernel`,
:class:`Op`, :class:`Case`, the :data:`OPS` table) is :mod:`kernels.kernel`, imported here so
that ``from kernels.registry import Kernel, OPS`` keeps working.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from course_utils import env, requirements
from kernels.kernel import (
    OPS,
    Case,
    Kernel,
    KernelNotSupported,  # noqa: F401  (callers import it from here)
    Op,
    Problem,
    dtype_name,
)

_KERNELS: dict[tuple[str, str, str | None], Kernel] = {}
_DEVICES = ("cpu", "cuda")


def define_op(name: str, **fields: Any) -> Op:
    """Declare an operation (its arguments, validation, reference provider and test cases)."""
    if name in OPS:
        raise ValueError(f"op {name!r} is already defined")
    OPS[name] = Op(name=name, **fields)
    return OPS[name]


def _known_op(op: Any) -> Op:
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; defined ops: {', '.join(sorted(OPS))} "
                         "(define a new one with define_op)")
    return OPS[op]


def _check_fields(kernel: Kernel) -> None:
    """ValueError naming the field, "expected X, got Y", for a malformed registration."""
    who = f"register({kernel.op!r}, {kernel.provider!r}" + (
        f", {kernel.variant!r})" if kernel.variant is not None else ")")
    spec = _known_op(kernel.op)
    for what, value in (("provider", kernel.provider), ("variant", kernel.variant)):
        if value is None and what == "variant":
            continue
        if not isinstance(value, str) or not value.strip() or not value.isprintable():
            raise ValueError(f"{who}: {what} expected a non-empty one-line name, got {value!r}")
    if kernel.fn is None and kernel.build is None:
        raise ValueError(f"{who}: expected fn= (the kernel) or build= (returns it), got neither")
    for what, value in (("fn", kernel.fn), ("build", kernel.build), ("check", kernel.check)):
        if value is not None and not callable(value):
            raise ValueError(f"{who}: {what} expected a callable, got {type(value).__name__}")
    if not kernel.dtypes or not all(isinstance(d, torch.dtype) for d in kernel.dtypes):
        raise ValueError(f"{who}: dtypes expected a non-empty tuple of torch.dtype, "
                         f"got {kernel.dtypes!r}")
    if not kernel.devices or not set(kernel.devices) <= set(_DEVICES):
        raise ValueError(f"{who}: devices expected a tuple of 'cpu'/'cuda', "
                         f"got {kernel.devices!r}")
    cap = kernel.min_capability
    if cap is not None and not (isinstance(cap, tuple) and len(cap) == 2
                                and all(isinstance(c, int) for c in cap)):
        raise ValueError(f"{who}: min_capability expected (major, minor), e.g. (8, 0), "
                         f"got {cap!r}")
    for need in kernel.needs:
        if not requirements.is_requirement(need):
            raise ValueError(f"{who}: needs expected requirement names "
                             f"({requirements.known_requirements()}), got {need!r}")
    if missing := [key for key in spec.meta_keys if key not in kernel.meta]:
        wanted = "; ".join(f"{k}: {spec.meta_keys[k]}" for k in missing)
        raise ValueError(f"{who}: meta expected the keys that {kernel.op}'s filters use "
                         f"({wanted}), got meta without {', '.join(map(repr, missing))}")


def register_kernel(kernel: Kernel) -> Kernel:
    """Register an already built :class:`Kernel` object (a generator's output, say)."""
    if not isinstance(kernel, Kernel):
        raise ValueError(f"register_kernel(kernel) expected a kernels.Kernel, "
                         f"got {type(kernel).__name__}")
    _check_fields(kernel)
    kernel.origin = kernel.origin or _caller()
    if kernel.key in _KERNELS:
        old = _KERNELS[kernel.key]
        origin = f" (by {old.origin})" if old.origin else ""
        raise ValueError(f"kernel {kernel.name} is already registered{origin}; unregister it "
                         f"first (kernels.unregister({kernel.op!r}, {kernel.provider!r}"
                         + (f", {kernel.variant!r}" if kernel.variant is not None else "")
                         + ")) or choose another provider or variant name")
    if kernel.description == "" and kernel.fn is not None and kernel.fn.__doc__:
        kernel.description = kernel.fn.__doc__.strip().splitlines()[0]
    _KERNELS[kernel.key] = kernel
    return kernel


def register(op: str, provider: str, variant: str | None = None, **fields: Any):
    """Register a kernel. Use as ``register(op, provider, fn=...)``, ``register(..., build=...)``,
    or as a decorator on the kernel function. Returns the :class:`Kernel` (or the decorator)."""
    _known_op(op)
    origin = fields.pop("origin", None) or _caller()

    def make(fn: Callable | None) -> Kernel:
        try:
            kernel = Kernel(op=op, provider=provider, variant=variant, fn=fn, origin=origin,
                            **fields)
        except TypeError as err:  # an unknown keyword: name the fields that exist
            known = ", ".join(f.name for f in dataclasses.fields(Kernel)
                              if f.init and f.name not in ("op", "provider", "variant"))
            raise ValueError(f"register({op!r}, {provider!r}): {err}; fields: {known}") from None
        return register_kernel(kernel)

    if "fn" in fields or "build" in fields:
        return make(fields.pop("fn", None))

    def decorator(fn: Callable) -> Callable:
        make(fn)
        return fn

    return decorator


def _caller() -> str | None:
    """The module that called register(), for the duplicate-key message."""
    frame = inspect.currentframe()
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return frame.f_globals.get("__name__") if frame is not None else None


def unregister(op: str | Kernel, provider: str | None = None, variant: str | None = None, *,
               missing_ok: bool = False) -> Kernel | None:
    """Remove a kernel, given as ``(op, provider[, variant])`` or as the :class:`Kernel`; return
    it. Registering then unregistering leaves the registry exactly as before (tests and
    notebooks that register their own clean up this way). An unknown key raises ``KeyError``
    naming what is registered, unless ``missing_ok=True``."""
    key = op.key if isinstance(op, Kernel) else (op, provider, variant)
    if key not in _KERNELS:
        if missing_ok:
            return None
        get_kernel(*key)  # raises KeyError listing the registered kernels of the op
    return _KERNELS.pop(key)


def get_kernel(op: str, provider: str, variant: str | None = None) -> Kernel:
    try:
        return _KERNELS[(op, provider, variant)]
    except KeyError:
        known = ", ".join(k.name for k in all_kernels(op)) if op in OPS else "none"
        raise KeyError(f"no kernel {op}/{provider}"
                       + (f"[{variant}]" if variant else "") + f"; registered: {known}") from None


def reference(op: str) -> Kernel:
    """The eager kernel every other kernel of ``op`` is checked against."""
    _known_op(op)
    return get_kernel(op, OPS[op].reference)


def all_kernels(op: str | None = None) -> list[Kernel]:
    """Every registered kernel (of ``op``), in registration order."""
    if op is not None:
        _known_op(op)
    return [k for k in _KERNELS.values() if op is None or k.op == op]


def _matches(where: Callable[[Kernel], bool], kernel: Kernel) -> bool:
    try:
        return bool(where(kernel))
    except KeyError as err:
        raise ValueError(
            f"where= filter: {kernel.name} has no meta key {err.args[0]!r} (its meta: "
            f"{', '.join(sorted(kernel.meta)) or 'none'}); filter with k.meta.get(...) to skip "
            "kernels without it") from err


def get_kernels(op: str, *args: Any, where: Callable[[Kernel], bool] | None = None,
                available: bool = False) -> list[Kernel]:
    """Kernels of ``op`` that run ``args`` here and satisfy the metadata predicate ``where``.

    With no ``args``, every kernel of the op that satisfies ``where`` (and, with
    ``available=True``, can run on this machine at all). ``where`` gets each :class:`Kernel`
    (``k.provider``, ``k.dtypes``, ``k.meta[...]``...); a ``KeyError`` from it becomes a
    ``ValueError`` naming the kernel that lacks the key.
    """
    _known_op(op)
    found = []
    for kernel in all_kernels(op):
        if where is not None and not _matches(where, kernel):
            continue
        if args and kernel.supports(*args) is not None:
            continue
        if not args and available and kernel.unavailable() is not None:
            continue
        found.append(kernel)
    return found


def explain(op: str, *args: Any, where: Callable[[Kernel], bool] | None = None
            ) -> list[tuple[Kernel, str | None]]:
    """Every kernel of ``op`` (that satisfies ``where``) with the reason it cannot run ``args``
    here (None: it can)."""
    _known_op(op)
    return [(k, k.supports(*args)) for k in all_kernels(op)
            if where is None or _matches(where, k)]


def verify(kernel: Kernel, *args: Any, label: str = "") -> float:
    """Run ``kernel`` on ``args`` and compare with its op's reference at the op's tolerance for
    the dtype: the check of ``tests/test_kernel_matrix.py``, callable from a notebook. Raises
    ``AssertionError`` naming the kernel on a mismatch; returns the largest absolute error."""
    expected = reference(kernel.op)(*args)
    got = kernel(*args)
    if got.is_cuda:
        torch.cuda.synchronize(got.device)
    where = f"{kernel.name}" + (f" on {label}" if label else "")
    assert got.shape == expected.shape, f"{where}: shape {got.shape} != {expected.shape}"
    assert got.dtype == expected.dtype, f"{where}: dtype {got.dtype} != {expected.dtype}"
    assert not got.isnan().any() or expected.isnan().any(), f"{where} produced NaN"
    # a kernel may declare its own tolerance (tf32 rounds inputs to a 10-bit mantissa)
    atol, rtol = kernel.meta.get("tolerance", {}).get(got.dtype) or OPS[kernel.op].tol(got.dtype)
    torch.testing.assert_close(got, expected, atol=atol, rtol=rtol,
                               msg=lambda m: f"{where}: {m}")
    return float((got.double() - expected.double()).abs().max()) if got.numel() else 0.0


def iter_cases(op: str, device: str | None = None) -> Iterator[tuple[Case, torch.dtype, Problem]]:
    """Fresh random inputs for every (case, dtype) of ``op`` on ``device``."""
    device = device or env.DEFAULT_DEVICE
    spec = OPS[op]
    for case in spec.cases:
        for dtype in spec.dtypes:
            yield case, dtype, case.make(dtype, device)


# -- validation helpers shared by the ops ----------------------------------------------------


def one_of(arg_name: str, value: Any, choices):
    """``choices[value]`` for a mapping (``value`` itself for a sequence), or ``ValueError``
    naming the argument and every choice: the lookup of a variant, step or provider by name."""
    if value not in choices:
        raise ValueError(f"{arg_name} expected one of {', '.join(map(str, choices))}, "
                         f"got {value!r}")
    return choices[value] if isinstance(choices, Mapping) else value


def expect_tensor(op: str, arg_name: str, value: Any, *, ndim: int | None = None,
                  floating: bool = False) -> torch.Tensor:
    """Raise ``ValueError`` naming the operand unless ``value`` is a suitable tensor."""
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{op}: {arg_name} expected a torch.Tensor, got {type(value).__name__}")
    if ndim is not None and value.dim() != ndim:
        raise ValueError(f"{op}: {arg_name} expected a {ndim}-D tensor, "
                         f"got shape {tuple(value.shape)}")
    if floating and not value.is_floating_point():
        raise ValueError(f"{op}: {arg_name} expected a floating-point tensor, "
                         f"got {dtype_name(value.dtype)}")
    return value
