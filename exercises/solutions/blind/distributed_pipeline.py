"""Wrong answers to exercise distributed.pipeline, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "distributed.pipeline"
BLIND: dict[str, str] = {
        "chunk start computed from the current chunk's size (wrong after a short last chunk)": r'''
# ✏️ Exercise distributed.pipeline: edit this cell, run it, then run the check below
import torch


def multiply_arrived(out, gathered, works, b_shard, rank):
    """Fill every peer's rows of out with A's rows times b_shard, chunk after chunk."""
    n = gathered[0].shape[0]
    m = out.shape[0] // n
    for c, (chunk, work) in enumerate(zip(gathered, works)):
        work.wait()
        rows = chunk.shape[1]
        start = c * rows
        for peer in range(n):
            if peer != rank:
                torch.mm(chunk[peer], b_shard, out=out[peer * m + start:peer * m + start + rows])
''',
        "waits for every chunk first, then multiplies (nothing overlaps)": r'''
# ✏️ Exercise distributed.pipeline: edit this cell, run it, then run the check below
import torch


def multiply_arrived(out, gathered, works, b_shard, rank):
    """Fill every peer's rows of out with A's rows times b_shard, chunk after chunk."""
    n = gathered[0].shape[0]
    m = out.shape[0] // n
    for work in works:
        work.wait()
    start = 0
    for chunk in gathered:
        rows = chunk.shape[1]
        for peer in range(n):
            if peer != rank:
                torch.mm(chunk[peer], b_shard, out=out[peer * m + start:peer * m + start + rows])
        start += rows
''',
        "waits on the chunk after multiplying it": r'''
# ✏️ Exercise distributed.pipeline: edit this cell, run it, then run the check below
import torch


def multiply_arrived(out, gathered, works, b_shard, rank):
    """Fill every peer's rows of out with A's rows times b_shard, chunk after chunk."""
    n = gathered[0].shape[0]
    m = out.shape[0] // n
    start = 0
    for chunk, work in zip(gathered, works):
        rows = chunk.shape[1]
        for peer in range(n):
            if peer != rank:
                torch.mm(chunk[peer], b_shard, out=out[peer * m + start:peer * m + start + rows])
        work.wait()  # this chunk is done before the next one starts
        start += rows
''',
        "rows per rank taken as chunk rows x chunks (too many when the last chunk is short)": r'''
# ✏️ Exercise distributed.pipeline: edit this cell, run it, then run the check below
import torch


def multiply_arrived(out, gathered, works, b_shard, rank):
    """Fill every peer's rows of out with A's rows times b_shard, chunk after chunk."""
    n = gathered[0].shape[0]
    m = gathered[0].shape[1] * len(gathered)  # rows of a rank's shard
    start = 0
    for chunk, work in zip(gathered, works):
        work.wait()
        rows = chunk.shape[1]
        for peer in range(n):
            if peer != rank:
                torch.mm(chunk[peer], b_shard, out=out[peer * m + start:peer * m + start + rows])
        start += rows
''',
    }
