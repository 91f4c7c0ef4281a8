"""Lessons 16 and 17: a Hopper (sm_90a) matmul with TMA, ``wgmma`` and warp specialisation,
built (15), then measured, taken to every size and to fp8 with scales (16).

* ``wgmma.cu``: the kernels, one per step, and the ``wgmma`` instruction ceiling;
* ``hopper.cuh``: the primitives they are built from (mbarriers, TMA, ``wgmma`` and its
  descriptor, ``setmaxnreg``, the epilogues, the timeline), included by ``wgmma.cu``;
* ``block_scaled.cu``: step 4's kernel for fp8 with block scales (each K tile's product
  promoted into the running sum), built and registered by :mod:`~kernels.matmul.hopper.scaled`
  under the op ``scaled_matmul`` with the other scale forms;
* :mod:`~kernels.matmul.hopper.wgmma_steps`: the variants and steps, as data;
* :mod:`~kernels.matmul.hopper.wgmma`: compiling, checking, launching, registration;
* :mod:`~kernels.matmul.hopper.tma`: TMA descriptors encoded by the driver;
* :mod:`~kernels.matmul.hopper.plans`: a launch prepared once per problem, looked up per call;
* :mod:`~kernels.matmul.hopper.ceiling`: the instruction ceiling, measured with its spread;
* :mod:`~kernels.matmul.hopper.timeline`: what the pipeline did, drawn as a Gantt chart;
* :mod:`~kernels.matmul.hopper.triton_tma`: the Triton peer (TMA descriptors, persistent),
  its kernel in :mod:`~kernels.matmul.hopper.triton_tma_kernel`;
* :mod:`~kernels.matmul.hopper.tiles`: step 4's kernel in four tile shapes, and the
  wave-quantisation rule that picks one per problem;
* ``bench.py`` (the staircase) and ``bench_sizes.py`` (every size, as a caller calls it).

Importing registers every (step, variant) as ``("matmul", "wgmma", "step<N>_<variant>")`` and
step 4 with its tile chosen per problem as ``("matmul", "wgmma", "auto_<variant>")``; nothing
is compiled until a kernel is first called.
"""

from kernels.matmul.hopper import registration

registration.register_all()

# the compiler's answer to the same tile ideas: Triton with TMA descriptors, persistent
from kernels.matmul.hopper import triton_tma  # noqa: E402

triton_tma.register()
