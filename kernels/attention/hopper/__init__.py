"""Lesson 18's Hopper forward: attention with TMA, ``wgmma`` and warp specialisation.

* ``attention.cu``: the kernel, one template whose flags make the five steps;
* ``attention.cuh``: what it adds to lesson 16's ``hopper.cuh`` (``wgmma`` with A in registers,
  the descriptor of an MN-major tile, m64n64, named barriers for the ping-pong);
* :mod:`~kernels.attention.hopper.fwd`: steps, compiling, launching;
* ``attention_bwd.cu`` and :mod:`~kernels.attention.hopper.bwd`: the backward (a dK/dV kernel
  and a dQ kernel from the forward's two ``wgmma`` forms) and the autograd Function that makes
  ``("attention", "wgmma")`` differentiable; ``attention_bwd_fused.cu``, its version 2 (one
  kernel, dQ through atomics; ``attention_bwd.cuh`` holds what both share);
* :mod:`~kernels.attention.hopper.timeline`: the kernel's in-kernel timeline, drawn with lesson
  17's Gantt chart (softmax and the ping-pong's turns added);
* :mod:`~kernels.attention.hopper.targets`: its target against SDPA's cuDNN backend, read from
  ``make bench``'s records, and its timelines saved for CPU students;
* :mod:`~kernels.attention.hopper.scoreboard`: each step and backward version against cuDNN and
  the Triton kernel, read from the records (the two lessons' takeaways open with it);
* :mod:`~kernels.attention.hopper.registration`: what the registry gets (the steps, the
  last one with the backward);
* ``gpu_run.py``: one GPU session (checks, timings, timeline, Nsight Compute, the backward's
  checks and timings from ``gpu_run_bwd.py``) into a folder.

Importing registers ``("attention", "wgmma")`` (the last step, with the backward),
``("attention", "wgmma", "step<N>")`` and ``("attention", "wgmma", "fused_bwd")`` (the
backward's version 2); nothing is compiled until a kernel is first called.
"""

from kernels.attention.hopper import registration

registration.register_all()
