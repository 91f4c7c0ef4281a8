"""Evaluating a student's CUDA at compile time, on any machine: NVRTC computes ``constexpr``
functions of the answer (offsets, parities, a whole block's loop run thread by thread) and the
check reads the results from the initialiser of a ``__device__`` variable in the PTX. No GPU is
needed, and an expression that is not a constant (an index past an array's end, a call to a
non-constexpr intrinsic) is named in NVRTC's words (mma_matmul.smem, mma_matmul.swizzle_cuda,
hopper_matmul.parity, hopper_measured.promote use it).
"""

from __future__ import annotations

import re

from exercises import Mismatch
from exercises.kernel_checks import compile_answer


def constant_table(program: str, expressions: list[str], **kwargs) -> list[int]:
    """The values of int constant expressions of ``program`` (constexpr functions of the
    student's code), evaluated by NVRTC at compile time: read from the initialiser of a
    ``__device__`` array in the PTX, so no GPU is needed. ``kwargs`` as for
    :func:`~exercises.kernel_checks.compile_answer` (defines, arch, options)."""
    table = ("extern \"C\" __device__ const int COURSE_PROBE[] = {"
             + ", ".join(f"int({e})" for e in expressions) + "};\n"
             "extern \"C\" __global__ void course_probe(int* out) "
             "{ out[threadIdx.x] = COURSE_PROBE[threadIdx.x]; }\n")
    try:
        ptx = compile_answer(program + "\n" + table, "course_probe", "your code", output="ptx",
                             **kwargs).ptx
    except Mismatch as failed:
        raise _not_constant(program, expressions, kwargs) or failed from None
    return _probe_ints(ptx)


def _not_constant(program: str, expressions: list[str], kwargs: dict,
                  declare: str = "constexpr int {name} = int({expr});") -> Mismatch | None:
    """Where the probe of :func:`constant_table` fails because an expression is not a constant
    (a constexpr function that reads past the end of an array, calls a non-constexpr intrinsic,
    divides by zero, ...): a Mismatch naming the first such expression and NVRTC's notes on why.
    None when the failure is something else (the program itself does not compile)."""
    from course_utils import nvrtc

    checks = "".join(declare.format(name=f"course_constant_{i}", expr=e) + "\n"
                     for i, e in enumerate(expressions))
    options = {k: v for k, v in kwargs.items() if k in ("defines", "arch", "options")}
    options.setdefault("arch", "sm_90")
    try:
        nvrtc.compile(program + "\n" + checks, None, output="ptx", verbose=False, **options)
    except nvrtc.CompileError as err:
        lines = str(err).splitlines()
        for i, line in enumerate(lines):
            if "expression must have a constant value" in line:
                notes = []
                for j, note in enumerate(lines[i + 1:], i + 1):
                    if "error" in note:
                        break
                    if "note #" in note and "called from" not in note:
                        said = re.sub(r"^.*?note #\d+-D:\s*", "", note).strip()
                        code = lines[j + 1].strip() if j + 1 < len(lines) else ""
                        notes.append(f"{said} (at `{code}`)" if code else said)
                return Mismatch(
                    "your code cannot be evaluated at compile time (the check evaluates your "
                    "constexpr functions with NVRTC): " + ("; ".join(notes) or line.strip()),
                    "an index past the end of an array is not a constant expression, nor is a "
                    "call to a function that is not constexpr (an intrinsic, a 16-bit "
                    "conversion): index inside the arrays and keep to plain arithmetic")
    return None




def constant_ints(program: str, expression: str, **kwargs) -> list[int]:
    """The ints of ``expression``, a constant expression of a struct type holding only int
    arrays (the whole result of a constexpr function of the student's code, evaluated once by
    NVRTC at compile time), read from the initialiser of a ``__device__`` variable in the PTX:
    no GPU needed. ``kwargs`` as for :func:`compile_answer`."""
    probe = ("extern \"C\" __device__ const auto COURSE_PROBE = " + expression + ";\n"
             "extern \"C\" __global__ void course_probe(int* out) "
             "{ out[threadIdx.x] = reinterpret_cast<const int*>(&COURSE_PROBE)[threadIdx.x]; }\n")
    try:
        ptx = compile_answer(program + "\n" + probe, "course_probe", "your code", output="ptx",
                             **kwargs).ptx
    except Mismatch as failed:
        raise _not_constant(program, [expression], kwargs,
                            "constexpr auto {name} = {expr};") or failed from None
    return _probe_ints(ptx)


def _probe_ints(ptx: str) -> list[int]:
    """The int32 values of the initialiser of ``COURSE_PROBE`` in ``ptx``."""
    found = re.search(r"COURSE_PROBE\[(\d+)\](?: = \{([^}]*)\})?", ptx)
    if found is None:
        raise RuntimeError("the probe variable is not in the PTX")
    data = bytes(int(x) for x in (found.group(2) or "").split(",") if x.strip())
    data = data.ljust(int(found.group(1)), b"\0")  # PTX leaves out trailing zero bytes
    return [int.from_bytes(data[i:i + 4], "little", signed=True)
            for i in range(0, len(data), 4)]
