"""Kernel names as people read them: short names, labels that tell apart look-alikes, GEMM tiles."""

from __future__ import annotations

import re
from collections import Counter


def format_count(count: float) -> str:
    """A per-call count: ``2`` when whole, ``1.33`` when not (a kernel in some calls only)."""
    return str(int(count)) if float(count).is_integer() else f"{count:.2f}"


def short_name(kernel: str) -> str:
    """A kernel name without return type, template arguments and parameter list.

    ``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` ->
    ``at::native::vectorized_elementwise_kernel``; names without templates (cuBLAS's
    ``sm90_xmma_gemm_..._tilesize128x128x64_...``) stay whole.
    """
    name = kernel.strip()
    name = re.sub(r"^void\s+", "", name)
    depth, out = 0, []
    for ch in name:  # drop everything inside <...> and (...), nested
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    return re.sub(r"(::)+", "::", "".join(out)).strip().strip(":") or kernel


def kernel_detail(kernel: str, width: int = 100) -> str:
    """A kernel name with its template arguments (namespaces dropped) but no parameter list:
    ``vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, std::array<char*, 3ul> >``.
    Tells apart kernels that share a :func:`short_name`."""
    name = re.sub(r"^void\s+", "", kernel.strip()).replace("(anonymous namespace)::", "")
    if name.endswith(")"):  # drop the trailing parameter list, matching its parentheses
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    name = re.sub(r"\b(?!std::)[A-Za-z_]\w*::", "", name).strip()
    return name if len(name) <= width else name[: width - 1] + "…"


def kernel_labels(kernels) -> dict[str, str]:
    """``kernel -> label`` for display: the short name, or more of the name where several
    kernels share a short name (PyTorch's elementwise kernels all do)."""
    shorts = Counter(short_name(k) for k in kernels)
    labels: dict[str, str] = {}
    seen: Counter = Counter()
    for k in kernels:
        label = short_name(k) if shorts[short_name(k)] == 1 else kernel_detail(k)
        seen[label] += 1
        labels[k] = label if seen[label] == 1 else f"{label} #{seen[label]}"
    return labels


def kernel_tiles(kernels: dict[str, float]) -> list[tuple[str, str]]:
    """``(kernel, tile)`` for GEMM kernels whose name encodes the tile (cuBLAS / CUTLASS).

    ``sm90_xmma_gemm_..._tilesize128x256x64_...`` -> ``128x256x64``;
    ``ampere_sgemm_128x64_nn`` -> ``128x64``; ``cutlass_80_tensorop_s1688gemm_256x128_32x3_nn``
    -> ``256x128_32x3``.
    """
    found = []
    for kernel in kernels:
        name = short_name(kernel)
        match = (re.search(r"tilesize(\d+x\d+x\d+)", name)
                 or re.search(r"_(\d+x\d+_\d+x\d+)_", name)
                 or re.search(r"_(\d+x\d+(?:x\d+)?)_", name + "_"))
        if match:
            found.append((kernel, match.group(1)))
    return found

