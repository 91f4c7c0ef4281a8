"""make bench: lesson 07's Triton tl.dot matmul against cuBLAS (records of lesson 05_triton_dot)."""
from kernels.matmul.triton_dot import run  # noqa: F401
