"""Lesson 20: beyond one GPU.

* :mod:`~kernels.distributed.launch`: start one process per rank from a notebook cell (gloo on
  CPUs, NCCL on GPUs, multicast off), with timeouts, and bring the results back;
* :mod:`~kernels.distributed.collectives`: what each collective moves (the ring's factors,
  algorithm against bus bandwidth) and a sweep of their times from a few KiB up;
* :mod:`~kernels.distributed.data_parallel`: data parallelism written by hand on lesson 12's
  model, as ``nn.Module`` wrappers that behave like ``DistributedDataParallel`` (naive,
  overlapped per parameter, bucketed, and ZeRO-1's ``ShardedOptimizer``), each against one
  process and beside DDP;
* :mod:`~kernels.distributed.fsdp`: fully sharded data parallelism (ZeRO-3) by hand: fp32
  shards, one all-gather per unit before its forward and again in its backward, gradients
  reduce-scattered into the shards, an optional bf16 compute dtype; beside ``fully_shard``;
* :mod:`~kernels.distributed.tensor_parallel`: a tensor-parallel matmul whose all-gather is
  pipelined with its chunks, beside the unfused sequence and PyTorch's
  ``fused_all_gather_matmul``;
* :mod:`~kernels.distributed.symmetric`: one-shot and two-shot (pulling, or pushing each
  reduced chunk to the peers) all-reduce kernels (Triton) over symmetric memory, between
  signal-pad barriers; :mod:`~kernels.distributed.symmetric_buffer` is the GPU memory they
  read (PyTorch's symmetric memory, rendezvoused);
  :mod:`~kernels.distributed.symmetric_cpu` simulates them and runs them in Triton's interpreter
  on CPU processes sharing memory; :mod:`~kernels.distributed.bench_allreduce` times them on 2
  GPUs against NCCL and PyTorch's own.

Their 2-GPU benchmarks: ``bench_allreduce.py``, ``bench_tensor_parallel.py`` and
``bench_data_parallel.py``.
"""
