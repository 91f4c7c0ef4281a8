"""What a registered kernel is: its op's shared description and the kernel's own call.

* :class:`Op` and :class:`Case`: what every kernel of one operation shares (arguments,
  validation, reference provider, test cases, tolerances), and :data:`OPS`, the table of them
  that :func:`kernels.registry.define_op` fills;
* :class:`Kernel`: one kernel's metadata, its capability checks (:meth:`Kernel.unavailable` for
  the machine, :meth:`Kernel.supports` for a problem) and its lazily built callable, which
  checks a problem once and then remembers it (:func:`_problem_key`);
* :class:`KernelNotSupported`: what a call on a problem the kernel cannot run raises.

Separate from :mod:`kernels.registry`, which registers, looks up and verifies kernels: this is
what one kernel does on a call, the path whose cost per call lesson 11 measures, readable on its
own. :mod:`kernels.registry` imports these names, so ``from kernels.registry import Kernel, OPS``
(and ``kernels.Kernel``) work as they always did.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from course_utils import env, requirements

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


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float16`` -> ``"float16"``: a dtype as the reasons and messages name it."""
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
        reasons = requirements.unmet(*self.needs)
        if not reasons and self.min_capability is not None and env.HAS_CUDA:
            have = env.device_info().capability
            if have < self.min_capability:
                major, minor = self.min_capability
                reasons.append(f"needs sm_{major}{minor}+; this GPU is {env.device_info().arch}")
        needs_gpu = self.devices == ("cuda",) or self.min_capability is not None
        if not reasons and needs_gpu and not env.HAS_CUDA:
            reasons.extend(requirements.unmet("cuda"))
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
                return (f"supports {', '.join(map(dtype_name, self.dtypes))}; "
                        f"got {arg_name} of {dtype_name(t.dtype)}")
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
        dtypes = ", ".join(map(dtype_name, self.dtypes))
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


OPS: dict[str, Op] = {}  # op name -> Op; kernels.registry.define_op adds to it
