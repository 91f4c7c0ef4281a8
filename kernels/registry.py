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
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from course_utils import env

Problem = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class Case:
    """One test problem of an op: a label and how to build fresh random inputs for it."""

    label: str
    make: Callable[[torch.dtype, str], Problem]  # (dtype, device) -> inputs


@dataclass
class Op:
    """What every kernel of one operation shares."""

    name: str
    arg_names: tuple[str, ...]
    validate: Callable[..., None]  # raises ValueError naming the operand
    reference: str  # provider of the reference kernel
    cases: Sequence[Case] = ()
    dtypes: tuple[torch.dtype, ...] = (torch.float32,)  # dtypes the matrix test tries
    # (atol, rtol) per dtype for comparing against the reference
    tolerance: dict[torch.dtype, tuple[float, float]] = field(default_factory=dict)
    description: str = ""
    # metadata keys every kernel of this op must carry (key -> what it means), because the op's
    # filters and tables read them; register() refuses a kernel whose meta lacks one
    meta_keys: dict[str, str] = field(default_factory=dict)
    # the operands whose dtype a kernel's ``dtypes`` lists (empty: every tensor argument); the
    # others (scaled_matmul's float32 scales) the op's validate checks
    typed_args: tuple[str, ...] = ()

    def tol(self, dtype: torch.dtype) -> tuple[float, float]:
        default = {torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 2e-2),
                   torch.float32: (1e-5, 1e-5), torch.float64: (1e-10, 1e-10)}
        return self.tolerance.get(dtype, default.get(dtype, (0.0, 0.0)))


class KernelNotSupported(RuntimeError):
    """Raised when a kernel is called on a problem it cannot run here; carries the reason."""


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass(eq=False)  # a kernel is an entity: equal only to itself, usable as a dict key
class Kernel:
    """One registered kernel: metadata, capability checks, and a lazily built callable."""

    op: str
    provider: str
    variant: str | None = None
    fn: Callable | None = None  # the kernel itself, when it needs no build step
    build: Callable[[], Callable] | None = None  # returns the kernel; called once, on first use
    dtypes: tuple[torch.dtype, ...] = (torch.float32,)
    devices: tuple[str, ...] = ("cpu", "cuda")
    min_capability: tuple[int, int] | None = None
    needs: tuple[str, ...] = ()  # requirement names of course_utils.env ("nvcc", "triton", ...)
    contiguous: bool = False  # True: only contiguous inputs
    # extra reason, kernel-specific; from shapes, strides, dtypes, devices and addresses only
    # (never values: a call remembers each problem it accepted)
    check: Callable[..., str | None] | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # accumulator, tile config, ...
    description: str = ""
    origin: str | None = None  # the module that registered it (set by register())
    _built: Callable | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    # problems this kernel has checked and accepted (see __call__): key -> None, bounded
    _accepted: dict = field(default_factory=dict, init=False, repr=False)

    @property
    def key(self) -> tuple[str, str, str | None]:
        return (self.op, self.provider, self.variant)

    @property
    def name(self) -> str:
        base = f"{self.op}/{self.provider}"
        return f"{base}[{self.variant}]" if self.variant else base

    @property
    def label(self) -> str:
        """Provider and variant, for table rows and plot legends."""
        return f"{self.provider} {self.variant}" if self.variant else self.provider

    @property
    def is_reference(self) -> bool:
        return OPS[self.op].reference == self.provider and self.variant is None

    @property
    def built(self) -> bool:
        return self._built is not None or self.build is None

    # -- capability -------------------------------------------------------------------------

    def unavailable(self) -> str | None:
        """Why this kernel cannot run on this machine at all (None: it can, for some inputs)."""
        reasons = env.unmet(*self.needs)
        if not reasons and self.min_capability is not None and env.HAS_CUDA:
            have = env.device_info().capability
            if have < self.min_capability:
                major, minor = self.min_capability
                reasons.append(f"needs sm_{major}{minor}+; this GPU is {env.device_info().arch}")
        needs_gpu = self.devices == ("cuda",) or self.min_capability is not None
        if not reasons and needs_gpu and not env.HAS_CUDA:
            reasons.extend(env.unmet("cuda"))
        return "; ".join(reasons) or None

    def supports(self, *args: Any) -> str | None:
        """None if this kernel can run ``args`` here, otherwise the reason in plain words.

        Malformed arguments raise ``ValueError`` (via the op's ``validate``), as in a call.
        """
        OPS[self.op].validate(*args)
        if reason := self.unavailable():
            return reason
        return self._problem_reason(args)

    def _problem_reason(self, args: tuple) -> str | None:
        """What :meth:`supports` checks that depends on the arguments (the machine's part,
        :meth:`unavailable`, aside)."""
        first_cuda = None
        typed = OPS[self.op].typed_args or OPS[self.op].arg_names
        for arg_name, t in zip(OPS[self.op].arg_names, args, strict=False):
            if not isinstance(t, torch.Tensor):
                continue
            kind = "cuda" if t.is_cuda else t.device.type  # (is_cuda: no device object)
            if kind not in self.devices:
                wanted = " or ".join(d.upper() if d == "cpu" else "CUDA" for d in self.devices)
                return f"needs a {wanted} tensor, got {arg_name} on {kind}"
            if arg_name in typed and t.dtype not in self.dtypes:
                return (f"supports {', '.join(map(_dtype_name, self.dtypes))}; "
                        f"got {arg_name} of {_dtype_name(t.dtype)}")
            if self.contiguous and not t.is_contiguous():
                return f"needs contiguous inputs; {arg_name} is not (call .contiguous())"
            if first_cuda is None and kind == "cuda":
                first_cuda = t
        if self.min_capability is not None and first_cuda is not None:
            cap = _capability(first_cuda.get_device())
            if cap < self.min_capability:
                major, minor = self.min_capability
                return f"needs sm_{major}{minor}+; this GPU is sm_{cap[0]}{cap[1]}"
        if self.check is not None:
            return self.check(*args)
        return None

    # -- running ----------------------------------------------------------------------------

    def load(self) -> Callable:
        """Build the kernel if it has not been built yet (compiles on first use) and return it."""
        if self.build is None:
            assert self.fn is not None
            return self.fn
        with self._lock:
            if self._built is None:
                if reason := self.unavailable():
                    raise KernelNotSupported(f"{self.name}: cannot build here: {reason}")
                self._built = self.build()
        return self._built

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Every check reads the arguments' shapes, strides, dtypes, devices and (alignment, TMA
        # descriptors) addresses, never their values, so a problem accepted before is accepted
        # again: a call in a loop pays a key and a lookup instead of the checks (lesson 11
        # measures what each layer of a call costs)
        key = _problem_key(args)
        if key is None or key not in self._accepted:
            self._accept(args, key)
        return self._built(*args, **kwargs)

    def _accept(self, args: tuple, key: tuple | None) -> None:
        """The checks of a problem not seen before (``KernelNotSupported`` or ``ValueError``
        if it fails them); then remember it under ``key``."""
        if self._built is None:  # the first call: the machine's checks too, then the build
            if reason := self.supports(*args):
                raise KernelNotSupported(f"{self.name}: {reason}")
            self._built = self.load()  # (a plain function, the Triton kernels: itself)
        else:  # built, so this machine can run it (load() checked): only the problem's checks
            OPS[self.op].validate(*args)
            if reason := self._problem_reason(args):
                raise KernelNotSupported(f"{self.name}: {reason}")
        if key is not None:
            if len(self._accepted) >= ACCEPTED_PROBLEMS:
                self._accepted.clear()  # a long-running sweep must not grow it forever
            self._accepted[key] = None

    def __repr__(self) -> str:
        dtypes = ", ".join(map(_dtype_name, self.dtypes))
        extra = f", meta={self.meta}" if self.meta else ""
        return f"<Kernel {self.name}: {dtypes} on {'/'.join(self.devices)}{extra}>"


ACCEPTED_PROBLEMS = 256  # distinct problems a kernel remembers as checked


def _problem_key(args: tuple) -> tuple | None:
    """What the checks of a call read, hashable: each tensor's address, shape, strides, dtype
    and device, each plain value with its type; None when an argument is neither (then the
    call is checked every time)."""
    key = []
    for arg in args:
        if isinstance(arg, torch.Tensor):
            key.append((arg.data_ptr(), arg.shape, arg.stride(), arg.dtype, arg.device))
        elif type(arg) in _PLAIN:  # (type: True and 1 are equal, but not the same problem)
            key.append((type(arg), arg))
        else:
            return None
    return tuple(key)


_PLAIN = (bool, int, float, str, type(None))


@functools.cache  # a GPU's capability does not change: ask torch once per device
def _capability(device: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device)


OPS: dict[str, Op] = {}
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
        if not env.is_requirement(need):
            raise ValueError(f"{who}: needs expected requirement names "
                             f"({env.known_requirements()}), got {need!r}")
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
                         f"got {_dtype_name(value.dtype)}")
    return value
