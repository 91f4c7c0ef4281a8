"""Exercise distributed.one_shot: the body of a one-shot all-reduce kernel over symmetric memory.

The student writes ``one_shot_kernel``: a barrier, the sum over every rank's buffer (read through
the pointer array) in fp32, the store into ``out``, a barrier. The check runs the answer in
Triton's interpreter (an interpreted copy on a GPU machine), one rank after the other in one
process, on 1 to 4 simulated ranks, and records what each program of each rank does: every
load and store (whose memory: which rank's buffer, inside the message or past its end, ``out``)
and every barrier, in order. A schedule of real GPUs may run the ranks in any order, so the
check judges the order each program wrote, not what one schedule happened to produce:

* a peer's buffer read before the program's first barrier: that peer's input may not be there;
* a peer's buffer read after the last barrier: the peer may have returned, and its caller
  written the next input over the buffer;
* a store into any rank's buffer (the result goes to ``out``, peers may still read it);
* a read past the message's end (the symmetric buffer is larger; what lies there is garbage);
* bfloat16 added to bfloat16 (round once, at the end; fp32 in between);
* the values: every rank's ``out`` against the sum in fp32, float32 and bfloat16, with lengths
  on either side of a tile's end and grids of 1 to 3 programs (fewer than the tiles: a stride
  written for one grid size skips or repeats tiles on another);
* bfloat16 rounded once: each element is the fp32 sum rounded to nearest or toward zero (a
  running sum rounded after every peer adds in fp32 and is still off);
* the same bits on every rank (an all-reduce leaves one result: every rank adds the ranks in
  the same order).

The barrier is the course's (:func:`kernels.distributed.symmetric.barrier`): in the check it is
replaced by one that records the call and checks its arguments (this program's id, this rank,
the signal pads), so no rank waits for another.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from unittest import mock

import numpy as np
import torch

from exercises import CannotCheck, Mismatch, compare, exercise, expect

ONE_SHOT_STUB = '''
import triton
import triton.language as tl

from kernels.distributed.symmetric import barrier


@triton.jit
def one_shot_kernel(buffer_ptrs, signal_pad_ptrs, out, numel, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    """out[:numel] = the sum over the WORLD ranks of the first numel elements of each rank's
    symmetric buffer. buffer_ptrs: WORLD int64 addresses (rank p's buffer is
    tl.load(buffer_ptrs + p).to(tl.pointer_type(out.dtype.element_ty))). The grid may have
    fewer programs than tiles of BLOCK: step by tl.num_programs(0) * BLOCK. Call
    barrier(signal_pad_ptrs, tl.program_id(0), rank, WORLD) where the ranks must meet."""
    ...
'''

HINT = ("pid = tl.program_id(0); barrier(...) first (the peers' inputs have landed); then "
        "for each tile: acc = tl.zeros([BLOCK], tl.float32), for peer in "
        "tl.static_range(WORLD): acc += tl.load(peer's buffer + offsets, mask=offsets < "
        "numel).to(tl.float32); tl.store(out + offsets, acc.to(out's dtype), mask=...); "
        "barrier(...) again at the end (no peer still reads your buffer)")
BLOCK = 32
# (ranks, numel, dtype, programs): 1 to 4 ranks, float32 and bfloat16 (what the course's
# one-shot takes); a message shorter than a tile, one element under, at and over a tile
# boundary; a grid of 1, 2 and 3 programs (fewer than the tiles: each program strides)
CASES = ((1, 33, torch.float32, 2), (2, 1, torch.float32, 1), (2, 200, torch.bfloat16, 2),
         (3, 97, torch.float32, 3), (3, 64, torch.bfloat16, 1), (4, 63, torch.float32, 2),
         (4, 130, torch.bfloat16, 3), (3, 96, torch.bfloat16, 2))
GUARD = 64  # elements of each buffer past the message (poisoned: read there, sum NaN)
EVENT_LIMIT = 2000


@dataclass
class _Region:
    name: str
    rank: int
    start: int
    end: int


@dataclass
class _Trace:
    """What every program of every rank did, in order."""

    regions: list[_Region] = field(default_factory=list)
    rank: int = 0
    what: str = ""  # the case, for the messages
    events: dict[tuple[int, int], list[tuple]] = field(default_factory=dict)
    bf16_adds: int = 0
    stored: list[np.ndarray] = field(default_factory=list)  # addresses stored into out

    def add(self, *event) -> None:
        from triton.runtime import interpreter

        program = int(interpreter.interpreter_builder.grid_idx[0])
        events = self.events.setdefault((self.rank, program), [])
        events.append(event)
        # a few dozen accesses per program at these sizes: thousands is a loop that never ends
        expect(len(events) < EVENT_LIMIT, f"{self.what}, rank {self.rank}, program {program} made "
               f"{EVENT_LIMIT} loads and stores and was still going: does its loop end "
               "(start grows by tl.num_programs(0) * BLOCK each pass)?", HINT)


def _memory(trace: _Trace, kind: str, ptrs, mask):
    """Record which regions a load or store touches; the mask without lanes outside them."""
    size = max(ptrs.get_element_ty().primitive_bitwidth // 8, 1)
    addresses = np.asarray(ptrs.data).astype(np.uint64)
    active = np.broadcast_to(np.asarray(mask.data).astype(bool), addresses.shape)
    inside = np.zeros(addresses.shape, dtype=bool)
    for r in trace.regions:
        hit = active & (addresses >= r.start) & (addresses + size <= r.end)
        if hit.any():
            trace.add(kind, r.name, r.rank)
            if r.name == "out" and kind == "store":
                trace.stored.append(addresses[hit])
        inside |= hit
    if (active & ~inside).any():
        trace.add(kind, "elsewhere", -1)
    return type(mask)(active & inside, mask.dtype.scalar if hasattr(mask.dtype, "scalar")
                      else mask.dtype)


def _value(x) -> int:
    x = getattr(x, "value", x)
    x = getattr(x, "handle", x)
    return int(np.asarray(getattr(x, "data", x)).reshape(-1)[0])


def _run(kernel, world: int, numel: int, dtype: torch.dtype, programs: int,
         g: torch.Generator, what: str):
    """Every rank's kernel, one after the other, on its own inputs: (inputs, outputs, trace)."""
    from triton.runtime import interpreter

    from exercises.triton_checks import interpreted

    trace = _Trace(what=what)
    inputs = [torch.randn(numel, generator=g).to(dtype) for _ in range(world)]
    buffers = [torch.full((numel + GUARD,), float("nan"), dtype=dtype) for _ in range(world)]
    for b, x in zip(buffers, inputs, strict=True):
        b[:numel] = x
    pads = [torch.zeros(64, dtype=torch.int32) for _ in range(world)]
    buffer_ptrs = torch.tensor([b.data_ptr() for b in buffers], dtype=torch.int64)
    pad_ptrs = torch.tensor([p.data_ptr() for p in pads], dtype=torch.int64)
    outputs = [torch.full((numel + GUARD,), float("nan"), dtype=dtype) for _ in range(world)]
    size = buffers[0].element_size()
    for r, b in enumerate(buffers):
        trace.regions += [_Region("message", r, b.data_ptr(), b.data_ptr() + numel * size),
                          _Region("past the end", r, b.data_ptr() + numel * size,
                                  b.data_ptr() + b.numel() * size)]
    trace.regions += [_Region("pointers", -1, t.data_ptr(), t.data_ptr() + t.numel() * 8)
                      for t in (buffer_ptrs, pad_ptrs)]

    def recorded_barrier(signal_pad_ptrs, block, rank, WORLD):
        program = int(interpreter.interpreter_builder.grid_idx[0])
        where = f"{what}, rank {trace.rank}, program {program}: "
        expect(_value(signal_pad_ptrs) == pad_ptrs.data_ptr(), f"{where}barrier's first "
               "argument expected signal_pad_ptrs (the kernel's argument)", HINT)
        expect(_value(block) == program, f"{where}barrier's block expected tl.program_id(0) "
               f"({program} here), got {_value(block)}: block b of every rank meets block b "
               f"of the others, on its own signal slots", HINT)
        expect(_value(rank) == trace.rank, f"{where}barrier's rank expected this rank "
               f"({trace.rank}), got {_value(rank)}", HINT)
        expect(_value(WORLD) == world, f"{where}barrier's WORLD expected {world}, got "
               f"{_value(WORLD)}", HINT)
        trace.add("barrier")

    copy = interpreted(kernel)
    copy.fn.__globals__["barrier"] = recorded_barrier
    builder = interpreter.InterpreterBuilder
    load, store, fadd = builder.create_masked_load, builder.create_masked_store, \
        builder.create_fadd

    def traced_load(self, ptrs, mask, other, *rest, **kw):
        return load(self, ptrs, _memory(trace, "load", ptrs, mask), other, *rest, **kw)

    def traced_store(self, ptrs, value, mask, *rest, **kw):
        return store(self, ptrs, value, _memory(trace, "store", ptrs, mask), *rest, **kw)

    def traced_fadd(self, lhs, rhs):
        if str(lhs.dtype.scalar) == "bf16" and str(rhs.dtype.scalar) == "bf16":
            trace.bf16_adds += 1
        return fadd(self, lhs, rhs)

    with mock.patch.object(builder, "create_masked_load", traced_load), \
            mock.patch.object(builder, "create_masked_store", traced_store), \
            mock.patch.object(builder, "create_fadd", traced_fadd), \
            np.errstate(all="ignore"):
        for r in range(world):
            trace.rank = r
            out = outputs[r]
            trace.regions.append(_Region("out", r, out.data_ptr(),
                                         out.data_ptr() + numel * size))
            grid = (min(programs, -(-numel // BLOCK)),)
            copy[grid](buffer_ptrs, pad_ptrs, out, numel, r, WORLD=world, BLOCK=BLOCK)
            trace.regions.pop()
            stored = np.concatenate(trace.stored) if trace.stored else np.zeros(0, np.uint64)
            trace.stored.clear()
            twice = (np.unique(stored, return_counts=True)[1] > 1).sum()
            expect(not twice, f"{what}, rank {r}: {twice} elements of out were stored more "
                   "than once: each tile belongs to one program; stride by "
                   "tl.num_programs(0) * BLOCK (the grid's size, whatever it is)", HINT)
    return inputs, outputs, trace


def _judge(trace: _Trace, world: int, what: str) -> None:
    """Mismatch for the first access out of order or out of place, as a GPU could run it."""
    counts = {}
    for (rank, program), events in sorted(trace.events.items()):
        counts.setdefault(program, {})[rank] = sum(e[0] == "barrier" for e in events)
    for program, by_rank in counts.items():
        expect(len(set(by_rank.values())) == 1 and len(by_rank) == world,
               f"{what}: program {program} called barrier {by_rank} times per rank: every "
               "rank's program must meet the same barriers, or a GPU waits forever", HINT)
    for (rank, program), events in sorted(trace.events.items()):
        passed, total = 0, counts[program][rank]
        read = set()
        for event in events:
            if event[0] == "barrier":
                passed += 1
                continue
            kind, region, owner = event
            where = f"{what}, rank {rank}, program {program}"
            if region == "elsewhere" or (region == "out" and kind == "load"
                                         and owner != rank):
                raise Mismatch(f"{where}: a {kind} outside the buffers, pointers and out",
                               HINT)
            if region == "past the end":
                raise Mismatch(f"{where}: a {kind} past the end of the message in rank "
                               f"{owner}'s buffer (the buffer is larger than the message; mask "
                               f"with offsets < numel)", HINT)
            if region == "message" and kind == "store":
                raise Mismatch(f"{where}: stored into rank {owner}'s symmetric buffer: the "
                               "result belongs in out (peers may still be reading the "
                               "buffer, and its owner's input would be lost)", HINT)
            if region == "message" and owner != rank and passed == 0:
                raise Mismatch(f"{where}: read rank {owner}'s buffer before the first "
                               f"barrier: on GPUs rank {owner} may not have written its input "
                               "yet", HINT)
            if region == "message" and owner != rank and passed >= total:
                raise Mismatch(f"{where}: read rank {owner}'s buffer after the last "
                               f"barrier: rank {owner} may already have returned and its "
                               "caller written the next input over the buffer; end with a "
                               "barrier", HINT)
            if region == "message":
                read.add(owner)
        missing = sorted(set(range(world)) - read)
        expect(not missing, f"{what}, rank {rank}, program {program}: never read the buffer "
               f"of rank(s) {missing}: the sum is over every rank, this one included", HINT)


@exercise("distributed.one_shot", title="A one-shot all-reduce kernel", stub=ONE_SHOT_STUB,
          answers=("one_shot_kernel",),
          section="The barrier: signal pads and memory ordering", intro="""
Write the body of `one_shot_kernel`: the first barrier, then for each tile the sum of every
rank's buffer (its pointer loaded from `buffer_ptrs`) in fp32, stored into `out`, then the last
barrier. The check runs your kernel in Triton's interpreter on 1 to 4 simulated ranks, one
rank after the other, and judges the order of what each program did as any GPU schedule could
run it: a peer's buffer read before the first barrier or after the last, a store into a
symmetric buffer, a read past the message, bf16 added in bf16, and the sums themselves: in
fp32 and bf16 (rounded once), grids of 1 to 3 programs, and the same bits on every rank, as an
all-reduce leaves them.""")
def check_one_shot(one_shot_kernel, report) -> None:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    expect(isinstance(one_shot_kernel, JITFunction | InterpretedFunction),
           f"one_shot_kernel expected a @triton.jit kernel, got "
           f"{type(one_shot_kernel).__name__}", "keep @triton.jit on one_shot_kernel")
    g = torch.Generator().manual_seed(random.randrange(1 << 30))
    for world, numel, dtype, programs in CASES:
        grid = min(programs, -(-numel // BLOCK))
        what = (f"{world} rank{'s' if world > 1 else ''}, {numel} "
                f"{str(dtype).removeprefix('torch.')} elements, {grid} program"
                f"{'s' if grid > 1 else ''}")
        try:
            inputs, outputs, trace = _run(one_shot_kernel, world, numel, dtype, programs, g,
                                          what)
        except Mismatch:
            raise
        except Exception as err:  # the interpreter's error names the line
            if isinstance(err.__cause__, Mismatch):  # the recording barrier's, re-raised
                raise err.__cause__ from None
            from course_utils import env
            from exercises.triton_checks import copy_failed

            if not env.TRITON_INTERPRET and copy_failed(err):  # this Triton, not the answer
                raise CannotCheck(f"this Triton cannot run an interpreted copy of your "
                                  f"compiled kernel ({err}): the order of its loads, stores "
                                  "and barriers was not checked") from None
            raise Mismatch(f"{what}: your kernel raised {type(err).__name__}: "
                           f"{str(err).strip().splitlines()[-1] if str(err).strip() else ''}",
                           HINT) from err
        expect(trace.bf16_adds == 0, f"{what}: your kernel added bfloat16 to bfloat16 "
               f"({trace.bf16_adds} times): over {world} ranks each addition rounds to 8 bits "
               "of mantissa; convert each load with .to(tl.float32) and round once at the "
               "store", HINT)
        _judge(trace, world, what)
        _judge_values(inputs, [out[:numel] for out in outputs], dtype, what)
    report.line(f"in Triton's interpreter on 1 to 4 simulated ranks, fp32 and bf16, lengths "
                f"{', '.join(str(c[1]) for c in CASES)} with {BLOCK}-element tiles and 1 to 3 "
                "programs: every rank's out holds the sum, the same bits on every rank, bf16 "
                "rounded once; each program read every peer's buffer only between its two "
                "barriers, stored only into out, and summed in fp32")


def _rounded_once(total: torch.Tensor, dtype: torch.dtype) -> list[torch.Tensor]:
    """The values of ``total`` (float64) rounded once to ``dtype`` through float32: to
    nearest, and toward zero (Triton's interpreter rounds fp32 to bf16 that way)."""
    f32 = total.float()
    toward_zero = (f32.view(torch.int32) & -65536).view(torch.float32)  # the low 16 bits cut
    return [f32.to(dtype), toward_zero.to(dtype)]


def _judge_values(inputs: list[torch.Tensor], outs: list[torch.Tensor], dtype: torch.dtype,
                  what: str) -> None:
    """Mismatch unless every rank's out holds the sum of the inputs, rounded once, the same
    bits on every rank."""
    exact = sum(x.double() for x in inputs)
    in_order = inputs[0].float()
    for x in inputs[1:]:  # the sum in fp32, rank 0 first: what the reference computes
        in_order = in_order + x.float()
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else \
        dict(atol=1e-2, rtol=1e-2)  # (one bf16 step: the interpreter rounds toward zero)
    for r, out in enumerate(outs):
        compare(out.float(), exact.float(), what=f"{what}, rank {r}'s out", hint=HINT, **tol)
    if dtype != torch.float32:
        allowed = _rounded_once(exact, dtype) + _rounded_once(in_order.double(), dtype)
        for r, out in enumerate(outs):
            once = torch.zeros(out.shape, dtype=torch.bool)
            for value in allowed:
                once |= out == value
            if not once.all():
                i = int(torch.nonzero(~once)[0])
                raise Mismatch(f"{what}, rank {r}'s out: element {i} is {out[i].item():.6g}, "
                               f"but the fp32 sum {exact[i].item():.6g} rounds to "
                               f"{allowed[0][i].item():.6g} (or {allowed[1][i].item():.6g} "
                               f"toward zero); {int((~once).sum())} of {out.numel()} elements "
                               "were rounded more than once. Keep the running sum in fp32 "
                               "and round once, at the store", HINT)
    for r in range(1, len(outs)):
        differ = _bits(outs[r]) != _bits(outs[0])
        if differ.any():
            i = int(torch.nonzero(differ)[0])
            raise Mismatch(f"{what}: rank 0's out and rank {r}'s differ at element {i} "
                           f"({outs[0][i].item()!r} and {outs[r][i].item()!r}): an all-reduce "
                           "leaves the same bits on every rank, so every rank adds the ranks "
                           "in the same order (rank 0's buffer first, then 1, ..., WORLD - 1)",
                           HINT)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32 if t.element_size() == 4 else torch.int16)
