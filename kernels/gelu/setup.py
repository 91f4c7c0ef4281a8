"""Build the CUDA GeLU extension the standard way: ``setuptools`` + ``CUDAExtension``.

    cd kernels/gelu && python setup.py build_ext --build-lib ../../var/build/gelu_setup

(:func:`kernels.gelu.extension.build_setup` runs exactly this, timed, and imports the result.)
The same sources also build through ``load_inline`` (:func:`kernels.gelu.extension.build_inline`).
The binding is ``gelu_binding.cpp``, not ``gelu.cpp``: setuptools names each object file after its
source's stem, so ``gelu.cpp`` and ``gelu.cu`` would both become ``gelu.o`` (ninja stops with
"multiple rules generate gelu.o").
Without a GPU, set ``TORCH_CUDA_ARCH_LIST`` (e.g. ``9.0``): nvcc compiles and links all the same.
"""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="gelu_cuda_setup",
    ext_modules=[
        CUDAExtension(
            name="gelu_cuda_setup",
            sources=["gelu_binding.cpp", "gelu.cu"],
            extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3", "-lineinfo"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
