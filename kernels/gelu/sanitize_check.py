"""The workload ``compute-sanitizer`` checks: every CUDA GeLU kernel on awkward inputs.

    compute-sanitizer --tool memcheck python -m kernels.gelu.sanitize_check

Both kernels and every unroll, with a grid capped so the grid-stride loop loops. Odd lengths
(a tail after the last 16-byte vector), a view that starts 4 bytes into its
allocation (not 16-byte aligned), one element and none, in each dtype, through both kernels.
Exits non-zero if a result differs from F.gelu.
"""

import torch
import torch.nn.functional as F

from kernels.gelu.extension import build_inline


def main() -> None:
    module = build_inline().module
    kernels = {"naive": module.gelu_naive, "vectorized": module.gelu_vectorized,
               # one block per SM: the grid-stride loop runs many steps; unroll 1 and 2 too
               "vectorized capped": lambda x: module.gelu_vectorized(x, 128, 1, 1),
               "vectorized unroll 2": lambda x: module.gelu_vectorized(x, 64, 2, 1)}
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        # inputs made on the CPU and copied over, the reference and the comparison on the CPU:
        # under the sanitizer every GPU kernel is instrumented and slow (each module torch loads
        # too), and only the GeLU kernels are under test
        cpu_base = torch.randn(100_003).to(dtype)
        base = cpu_base.cuda()
        for part in (slice(None), slice(1, None), slice(1), slice(0), slice(4097)):
            x, cpu_x = base[part], cpu_base[part]
            expected = F.gelu(cpu_x.float(), approximate="tanh").to(dtype)
            for name, kernel in kernels.items():
                got = kernel(x).cpu()
                torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2,
                                           msg=lambda m, n=f"{name} {dtype}": f"{n}: {m}")
    torch.cuda.synchronize()
    print("sanitize_check: all kernels ran and matched F.gelu")


if __name__ == "__main__":
    main()
