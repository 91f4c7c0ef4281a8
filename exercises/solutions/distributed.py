"""Solutions (and known-wrong answers) of lesson 20's exercises."""

_HALVES = '''
import torch
import torch.distributed as dist

from kernels.distributed.collectives import all_gather, reduce_scatter


def mean_all_reduce(x):
    n = dist.get_world_size()
    chunk = torch.empty(x.numel() // n, dtype=x.dtype)
    reduce_scatter(chunk, x)
    out = torch.empty_like(x)
    all_gather(out, chunk, async_op=True).wait()
    return out / n
'''

_PIPELINE = '''
import torch


def multiply_arrived(out, gathered, works, b_shard, rank):
    n = gathered[0].shape[0]
    m = out.shape[0] // n
    start = 0
    for chunk, work in zip(gathered, works):
        work.wait()
        rows = chunk.shape[1]
        for peer in range(n):
            if peer != rank:
                torch.mm(chunk[peer], b_shard, out=out[peer * m + start:peer * m + start + rows])
        start += rows
'''

_ONE_SHOT = '''
import triton
import triton.language as tl

from kernels.distributed.symmetric import barrier


@triton.jit
def one_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    barrier(signal_pad_ptrs, pid, rank, WORLD)
    start = pid * BLOCK
    while start < numel:
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < numel
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for peer in tl.static_range(WORLD):
            buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type(out.dtype.element_ty))
            acc += tl.load(buf + offsets, mask=mask).to(tl.float32)
        tl.store(out + offsets, acc.to(out.dtype.element_ty), mask=mask)
        start += tl.num_programs(0) * BLOCK
    barrier(signal_pad_ptrs, pid, rank, WORLD)
'''

SOLUTIONS = {"distributed.halves": _HALVES, "distributed.pipeline": _PIPELINE,
             "distributed.one_shot": _ONE_SHOT}


def _edit(source: str, old: str, new: str) -> str:
    if old not in source:
        raise ValueError(f"{old!r} is not in the solution")
    return source.replace(old, new)


WRONG = {
    "distributed.halves": {
        # the sum, not the mean: gradients not divided by the rank count
        "not divided by n": _edit(_HALVES, "return out / n", "return out"),
        # the wrong averaging factor
        "divided by n - 1": _edit(_HALVES, "return out / n", "return out / (n - 1)"),
        # the handle dropped: the gathered values have not landed when out is read
        "no wait": _edit(_HALVES, "all_gather(out, chunk, async_op=True).wait()",
                         "all_gather(out, chunk, async_op=True)"),
        # the all-gather of this rank's own input chunk, not of the reduced one
        "gathers the input": _edit(_HALVES, "all_gather(out, chunk, async_op=True)",
                                   "all_gather(out, x.chunk(n)[dist.get_rank()].contiguous(), "
                                   "async_op=True)"),
        # an all-reduce by another name
        "all_reduce": _edit(_HALVES, "    reduce_scatter(chunk, x)\n    out = torch.empty_like(x)"
                            "\n    all_gather(out, chunk, async_op=True).wait()\n",
                            "    out = x.clone()\n    dist.all_reduce(out)\n"),
        # divides the input in place: the caller's tensor changed
        "input divided in place": _edit(_HALVES, "    reduce_scatter(chunk, x)\n",
                                        "    x /= n\n    reduce_scatter(chunk, x)\n")
        .replace("return out / n", "return out"),
        # a second, spare all-gather
        "gathered twice": _edit(_HALVES, "    return out / n", "    all_gather(out, chunk)\n"
                                "    return out / n"),
        # halved, not divided by the rank count: right on 2 ranks only
        "divided by 2": _edit(_HALVES, "return out / n", "return out / 2"),
        # float32 buffers whatever x's dtype: a bf16 or fp16 input comes back as float32
        "float32 buffers": _edit(_edit(_HALVES, "torch.empty(x.numel() // n, dtype=x.dtype)",
                                       "torch.empty(x.numel() // n)"),
                                 "torch.empty_like(x)", "torch.empty(x.numel())"),
        # the buffers kept between calls and the result divided in place: the tensor returned
        # by one call is overwritten by the next
        "result buffer cached": _edit(_edit(_edit(
            _HALVES, "def mean_all_reduce(x):\n    n = dist.get_world_size()\n",
            "def mean_all_reduce(x, _kept={}):\n    n = dist.get_world_size()\n"
            "    key = (x.numel(), x.dtype, n)\n    if key not in _kept:\n"
            "        _kept[key] = (torch.empty(x.numel() // n, dtype=x.dtype), "
            "torch.empty_like(x))\n    chunk, out = _kept[key]\n"),
            "    chunk = torch.empty(x.numel() // n, dtype=x.dtype)\n", ""),
            "    out = torch.empty_like(x)\n", "").replace("return out / n", "return out.div_(n)"),
    },
    "distributed.pipeline": {
        # the chunk's offset inside a shard forgotten: every chunk lands on the shard's first rows
        "no start offset": _edit(_PIPELINE, "out=out[peer * m + start:peer * m + start + rows]",
                                 "out=out[peer * m:peer * m + rows]"),
        # the rank's offset forgotten: the peers' rows written over rank 0's
        "no peer offset": _edit(_PIPELINE, "out=out[peer * m + start:peer * m + start + rows]",
                                "out=out[start:start + rows]"),
        # every chunk awaited before the first matmul: right values, nothing overlapped
        "waits for all first": _edit(_PIPELINE, "    for chunk, work in zip(gathered, works):\n"
                                     "        work.wait()\n",
                                     "    for work in works:\n        work.wait()\n"
                                     "    for chunk in gathered:\n"),
        # the offset from this chunk's size: right for the even chunks, off on the ragged last
        "ragged last chunk": _edit(_PIPELINE, "    start = 0\n    for chunk, work in zip(gathered, "
                                   "works):\n", "    for c, (chunk, work) in enumerate(zip("
                                   "gathered, works)):\n        start = c * chunk.shape[1]\n")
        .replace("        start += rows\n", ""),
        # multiplied before it arrived: the wait after the matmuls
        "wait after the matmul": _edit(_PIPELINE, "        work.wait()\n", "")
        .replace("        start += rows\n", "        start += rows\n        work.wait()\n"),
        # this rank's own rows multiplied again (right values, a chunk of redundant work)
        "own rows again": _edit(_PIPELINE, "            if peer != rank:\n                torch.mm",
                                "            if True:\n                torch.mm"),
        # the rows per rank taken as the chunk's, not the shard's
        "m from the chunk": _edit(_PIPELINE, "    m = out.shape[0] // n\n",
                                  "    m = gathered[0].shape[1]\n"),
        # the next chunk awaited right after the first peer's product of this one: the other
        # peers' products of this chunk no longer hide the next chunk's transfer
        "waits for the next after one peer": _edit(_edit(
            _PIPELINE, "    for chunk, work in zip(gathered, works):\n        work.wait()\n",
            "    for c, (chunk, work) in enumerate(zip(gathered, works)):\n        work.wait()\n"
            "        first = True\n"),
            "out=out[peer * m + start:peer * m + start + rows])\n",
            "out=out[peer * m + start:peer * m + start + rows])\n"
            "                if first and c + 1 < len(works):\n"
            "                    works[c + 1].wait()  # (its own wait then returns at once)\n"
            "                first = False\n"),
    },
    "distributed.one_shot": {
        # returns as soon as its own reads are done: a peer may still be reading this rank's
        # buffer when the caller writes the next input into it
        "no second barrier": _edit(_ONE_SHOT, "        start += tl.num_programs(0) * BLOCK\n"
                                   "    barrier(signal_pad_ptrs, pid, rank, WORLD)\n",
                                   "        start += tl.num_programs(0) * BLOCK\n"),
        # reads first, meets the peers afterwards: their inputs may not be there yet
        "reads before the barrier": _edit(_ONE_SHOT, "    barrier(signal_pad_ptrs, pid, rank, "
                                          "WORLD)\n    start = pid * BLOCK",
                                          "    start = pid * BLOCK").replace(
            "    barrier(signal_pad_ptrs, pid, rank, WORLD)\n",
            "    barrier(signal_pad_ptrs, pid, rank, WORLD)\n"
            "    barrier(signal_pad_ptrs, pid, rank, WORLD)\n"),
        # sums the peers only: its own input left out
        "skips its own buffer": _edit(
            _ONE_SHOT, "            buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type("
            "out.dtype.element_ty))\n            acc += tl.load(buf + offsets, mask=mask)"
            ".to(tl.float32)\n",
            "            if peer != rank:\n                buf = tl.load(buffer_ptrs + peer)"
            ".to(tl.pointer_type(out.dtype.element_ty))\n                acc += tl.load(buf "
            "+ offsets, mask=mask).to(tl.float32)\n"),
        # the ragged last tile read whole: past the message, into what the buffer held before
        "unmasked loads": _edit(_ONE_SHOT, "tl.load(buf + offsets, mask=mask)",
                                "tl.load(buf + offsets)"),
        # bf16 summed in bf16: a rounding at every rank
        "bf16 accumulator": _edit(_edit(_ONE_SHOT, "acc = tl.zeros([BLOCK], dtype=tl.float32)",
                                        "acc = tl.zeros([BLOCK], dtype=out.dtype.element_ty)"),
                                  "acc += tl.load(buf + offsets, mask=mask).to(tl.float32)",
                                  "acc += tl.load(buf + offsets, mask=mask)"),
        # the sum written back into every rank's buffer instead of out
        "writes into the peers' buffers": _edit(
            _ONE_SHOT, "        tl.store(out + offsets, acc.to(out.dtype.element_ty), "
            "mask=mask)\n",
            "        for peer in tl.static_range(WORLD):\n"
            "            buf = tl.load(buffer_ptrs + peer).to(tl.pointer_type("
            "out.dtype.element_ty))\n"
            "            tl.store(buf + offsets, acc.to(out.dtype.element_ty), mask=mask)\n"
            "        tl.store(out + offsets, acc.to(out.dtype.element_ty), mask=mask)\n"),
        # one tile per program: with fewer programs than tiles the rest of out is never written
        "no stride": _edit(_ONE_SHOT, "    while start < numel:", "    if start < numel:"),
        # every block on the slots of block 0: blocks of one rank would take each other's
        # signals
        "barrier of block 0": _ONE_SHOT.replace("barrier(signal_pad_ptrs, pid, rank, WORLD)",
                                                "barrier(signal_pad_ptrs, 0, rank, WORLD)"),
        # every rank sums the ranks starting from its own: the same sum in another order, so
        # the ranks' results differ in their last bits (an all-reduce leaves one result)
        "own summation order": _edit(
            _ONE_SHOT, "            buf = tl.load(buffer_ptrs + peer)",
            "            buf = tl.load(buffer_ptrs + (rank + peer) % WORLD)"),
        # the stride of a grid of 2 programs written in: other grids skip or repeat tiles
        "stride for 2 programs": _edit(_ONE_SHOT, "start += tl.num_programs(0) * BLOCK",
                                       "start += 2 * BLOCK"),
        # the running sum rounded to the output's dtype after every peer: fp32 adds, yet bf16
        # rounds once per rank instead of once
        "rounded after every peer": _edit(
            _ONE_SHOT, "acc += tl.load(buf + offsets, mask=mask).to(tl.float32)",
            "acc = (acc + tl.load(buf + offsets, mask=mask).to(tl.float32)).to("
            "out.dtype.element_ty).to(tl.float32)"),
    },
}


# mechanical mutants that behave exactly like the solution (exercises.mutants skips them)
EQUIVALENT = {
    "distributed.one_shot": {
        "bound: line 14: while start < numel:  ->  while start <= numel:":
            "when start == numel the extra pass has every lane masked off: it loads the pointer "
            "array and nothing else, stores nothing",
        "narrowed: line 17: acc = tl.zeros([BLOCK], dtype=tl.float32)  ->  acc = tl.zeros("
        "[BLOCK], dtype=tl.float16)":
            "static_range unrolls the peers' loop and the first += adds an fp32 value, which "
            "promotes acc to fp32 before any sum is taken",
        "narrowed: line 20: acc += tl.load(buf + offsets, mask=mask).to(tl.float32)  ->  "
        "acc += tl.load(buf + offsets, mask=mask)":
            "acc is fp32, so fp32 + bf16 promotes the loaded value to fp32 before adding: the "
            "same sum in the same precision",
    },
}
