"""What went wrong in a launch on the CPU, in a student's words: which thread, which buffer and
element, which line of their source, and what a GPU would have done (:func:`describe`)."""

from __future__ import annotations

KINDS = {1: "outside", 2: "outside", 3: "misaligned", 4: "const store", 5: "race",
         6: "deadlock", 7: "lane exited", 8: "warp mismatch", 9: "endless", 10: "trap",
         11: "lane not in mask", 12: "width", 13: "barrier mismatch", 14: "crash"}
SIGNALS = {8: "an integer division by zero (SIGFPE; a GPU gives a meaningless value instead)",
           11: "a segmentation fault (SIGSEGV: a stack overflow, deep recursion or a huge "
               "local array?)", 7: "a bus error (SIGBUS)", 4: "an illegal instruction (SIGILL)"}
VERB = {0: "loads", 1: "stores", 2: "adds atomically to"}
NOUN = {0: "load", 1: "store", 2: "atomic"}


def _xyz(v) -> str:
    return f"({v[0]}, {v[1]}, {v[2]})"


def _where(kernel, lines: dict, pc) -> str:
    line = lines.get(pc or 0, 0)
    if not line:
        return ""
    return f" at line {line} (`{kernel.line_text(line)}`)"


def _element(kernel, names: list[str], region: int, offset: int, size: int, args,
             sized: bool = True) -> str:
    """``x[1024]`` (or ``x + 6 bytes``) for a byte offset into region ``region``."""
    if region < 0 or region >= len(names):
        return "an address in no buffer of the launch"
    name = names[region]
    if region < len(kernel.params):
        step = kernel.params[region].element_bytes
        count = args[region].numel() if hasattr(args[region], "numel") else None
        held = (f" ({name} holds {count} elements of {kernel.params[region].element})"
                if count is not None and sized else "")
    else:
        step, held = 4 if size >= 4 else size, ""
    if offset % step == 0:
        first, last = offset // step, (offset + size - 1) // step
        at = f"{name}[{first}]" if first == last else f"{name}[{first}..{last}]"
    else:
        at = f"{name} + {offset} bytes"
    return at + held


def _outside_mask(kernel, err, who: str, here: str) -> str:
    """A warp collective whose mask leaves out a lane it needs (runtime.cpp puts the mask in
    ``address``; ``other_op`` 1: the lane is named but not in the block, 2: the calling lane
    is not in its own mask)."""
    lane, mask = err.other_tid[0], err.address & 0xFFFFFFFF
    if err.other_op == 2:
        text = (f"{who} runs a warp collective{here} whose mask (0x{mask:08x}) does not name its "
                f"own lane {lane}: a lane may only take part in a collective its mask names")
    elif err.other_op == 1:
        return (f"{who} runs a warp shuffle{here} that reads lane {lane}, which does not exist "
                f"in the block (mask 0x{mask:08x})")
    else:
        text = (f"{who} runs a warp shuffle{here} that reads lane {lane}, which is not in the "
                f"shuffle's mask (0x{mask:08x}): on a GPU the value it gets is undefined")
    if "__activemask" in kernel.source:
        # what the runtime's __activemask() returned (runtime.cpp), so that the student sees
        # where such a mask came from
        launches = getattr(kernel, "launches", None)
        alone = bool(launches) and launches[-1].order == "shuffled"
        got = ("the calling lane alone, as in this run (threads shuffled)" if alone else
               "only the lanes that reached that call together")
        text += (". __activemask() promises no convergence: it names the lanes that happen to run "
                 "together at that moment, which under independent thread scheduling may be "
                 f"fewer than the warp ({got}); a sum over the whole warp needs the full mask "
                 "0xffffffff, with every lane reaching the shuffle")
    return text


def describe(kernel, err, names: list[str], lines: dict, grid, block, args) -> tuple[str, str]:
    """(kind, message) of the launch's first error ``err`` (runtime.cpp's ``cc_error``)."""
    kind = KINDS.get(err.kind, "error")
    who = f"thread {_xyz(err.tid)} of block {_xyz(err.bid)}"
    here = _where(kernel, lines, err.pc)
    offset, size, op = err.offset, err.size, err.op
    at = _element(kernel, names, err.region, offset, size, args)
    if err.kind == 1:
        side = "before the start of" if offset < 0 else "past the end of"
        name = names[err.region] if 0 <= err.region < len(names) else "every buffer"
        text = (f"{who} {VERB[op]} {size} bytes at {at}{here}: {side} {name}. On a GPU this "
                f"{'reads' if op == 0 else 'overwrites'} another tensor's memory, or faults (an "
                "illegal memory access ends the process)")
    elif err.kind == 2:
        text = (f"{who} {VERB[op]} {size} bytes at {at}{here}: the access runs past the end "
                f"of {names[err.region]}")
    elif err.kind == 3:
        text = (f"{who} {VERB[op]} {size} bytes at {at}{here}: the address is not a multiple "
                f"of {size}. A GPU's {size}-byte access needs that alignment (a float4 at a "
                "16-byte boundary); with a view such as x[1:] the tensor itself starts 4 bytes "
                "off, so test the address before using a vector type")
    elif err.kind == 4:
        text = f"{who} stores into {at}{here}: {names[err.region]} is a const input"
    elif err.kind == 5:
        other = ("several threads" if err.other_tid[0] == 0xFFFFFFFF else
                 f"thread {_xyz(err.other_tid)} of block {_xyz(err.other_bid)}")
        there = _where(kernel, lines, err.other_pc)
        space = "shared memory" if err.region >= len(kernel.params) else "global memory"
        at = _element(kernel, names, err.region, offset, size, args, sized=False)
        if space == "shared memory":
            cure = ("put a __syncthreads() between the stores into shared memory and the loads "
                    "that read them (and between those loads and the next stores)")
        else:
            cure = ("each element of an output should be stored by exactly one thread; "
                    "threads that add into one element need atomicAdd")
        text = (f"a race on {at} ({space}): {other} {VERB[err.other_op]} it{there}, and "
                f"{who} {VERB[op]} it{here}, with no barrier between them. On a GPU the "
                f"result depends on which thread runs first: {cure}")
    elif err.kind == 6:
        text = (f"the threads of block {_xyz(err.bid)} wait for each other forever: "
                f"{err.text.decode()}; {who} waits{here}. __syncthreads() must be reached by "
                "every thread of the block that has not exited, and a warp collective by every "
                "lane its mask names")
    elif err.kind == 7:
        text = (f"{who} waits at a warp collective{here} whose mask names lane "
                f"{_xyz(err.other_tid)}, a thread that has already exited: on a GPU that is "
                "undefined (usually a hang). Let the whole warp reach the shuffle (return "
                "after it), or pass a mask of the lanes still running")
    elif err.kind == 8:
        there = _where(kernel, lines, err.other_pc)
        text = (f"the lanes of one warp meet at different collectives: {who}{here}, thread "
                f"{_xyz(err.other_tid)}{there}")
    elif err.kind == 9:
        text = (f"the launch did not end within {kernel.limit:,} loads and stores or "
                f"{kernel.seconds:g} s ({who} was running{here}): a loop whose end is never "
                f"reached? (grid {_xyz(grid)}, block {_xyz(block)})")
    elif err.kind == 14:
        text = (f"{who} crashed{here}: {SIGNALS.get(err.offset, f'signal {err.offset}')}")
    elif err.kind == 10:
        text = f"{who} called __trap(){here}"
    elif err.kind == 11:
        text = _outside_mask(kernel, err, who, here)
    elif err.kind == 12:
        text = f"{who}: a shuffle width that is not a power of 2 from 1 to 32{here}"
    else:
        text = f"{who}: {err.text.decode()}{here}"
    return kind, text
