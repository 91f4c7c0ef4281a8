"""Lesson 20's symmetric-memory all-reduces: the simulation, the kernels in Triton's interpreter on
2 CPU processes sharing memory, their machine code for sm_90, the errors, and (on 2 GPUs) the
real kernels against NCCL."""

import pytest
import torch

from kernels.distributed import bench_allreduce, launch, symmetric, symmetric_cpu

AWKWARD = (1, 2, 3, 7, symmetric.BLOCK - 1, symmetric.BLOCK + 1, 3 * symmetric.BLOCK + 5)


@pytest.mark.parametrize("method", symmetric.METHODS)
@pytest.mark.parametrize("dtype", symmetric.DTYPES)
@pytest.mark.parametrize("ranks", (2, 3, 4))
def test_simulation_is_the_sum(method, dtype, ranks):
    g = torch.Generator().manual_seed(ranks)
    for numel in AWKWARD:
        inputs = [torch.randn(numel, generator=g).to(dtype) for _ in range(ranks)]
        want = sum(x.float() for x in inputs).to(dtype)
        buffers = [x.clone() for x in inputs]
        outs = symmetric_cpu.simulate(buffers, method)
        assert len(outs) == ranks
        for out in outs:
            assert torch.equal(out, want), (method, dtype, ranks, numel)
        if method == "two_shot_push":  # every rank's own buffer holds the sum: in place
            assert all(torch.equal(b, want) for b in buffers), (dtype, ranks, numel)


def test_chunks_cover_the_message_once():
    for numel in (1, 2, 5, 8, 1001):
        for n in (2, 3, 4, 8):
            parts = symmetric_cpu.chunks(numel, n)
            assert len(parts) == n
            assert [i for p in parts for i in p] == list(range(numel))


def test_chunks_start_aligned():
    """Every two-shot chunk starts at a multiple of ALIGN elements: with 16-byte aligned
    buffers, the kernels' vector loads are then aligned too."""
    for numel in (1, 15, 16, 17, 1001, 3 * symmetric.BLOCK + 5):
        for n in (2, 3, 8):
            size = symmetric.chunk_for(numel, n)
            assert size % symmetric.ALIGN == 0 and size * n >= numel
            assert size < -(-numel // n) + symmetric.ALIGN
            assert all(p.start % symmetric.ALIGN == 0 for p in symmetric_cpu.chunks(numel, n)
                       if len(p))


def test_blocks_for():
    block, cap = symmetric.BLOCK, symmetric.MAX_BLOCKS
    assert symmetric.blocks_for(1, "one_shot", 2) == 1
    assert symmetric.blocks_for(block, "one_shot", 2) == 1
    assert symmetric.blocks_for(block + 1, "one_shot", 2) == 2
    assert symmetric.blocks_for(2 * block, "two_shot", 2) == 1
    assert symmetric.blocks_for(2 * block + 2 * symmetric.ALIGN, "two_shot", 2) == 2
    assert symmetric.blocks_for(2 * block + 2 * symmetric.ALIGN, "two_shot_push", 2) == 2
    assert symmetric.blocks_for(64 * block + 1, "one_shot", 2) == 65  # past the old cap of 64
    assert symmetric.blocks_for(1 << 30, "one_shot", 8) == cap
    assert symmetric.blocks_for(1 << 30, "two_shot", 2, max_blocks=7) == 7
    # every block is resident at once on an H100 (132 SMs, two blocks each), and every
    # block's slots fit PyTorch's default signal pad (32 × 72 int32) for up to 8 ranks
    assert cap <= 2 * 132 and cap * 8 * symmetric.SIGNAL_BYTES <= 32 * 72 * 4


def test_bad_input_is_a_value_error_naming_it():
    x = torch.zeros(8)
    with pytest.raises(ValueError, match="t expected a torch.Tensor"):
        symmetric.check_input([1.0], "one_shot")
    with pytest.raises(ValueError, match="t expected dtype bfloat16 or float32, got torch.int32"):
        symmetric.check_input(x.int(), "one_shot")
    with pytest.raises(ValueError, match="t expected a contiguous tensor"):
        symmetric.check_input(torch.zeros(4, 4).t(), "one_shot")
    with pytest.raises(ValueError, match="method expected one of one_shot, two_shot, "
                                         "two_shot_push, got 'ring'"):
        symmetric.check_input(x, "ring")
    with pytest.raises(ValueError, match="method expected"):
        symmetric.all_reduce(x, "three_shot")
    for method in ("one_shot", "two_shot"):  # their peers read the buffer while out is written
        with pytest.raises(ValueError, match=f"in_place expected False for {method}"):
            symmetric.all_reduce(x, method, in_place=True)
        with pytest.raises(ValueError, match=f"in_place expected False for {method}"):
            symmetric.launch(x, x, x, 8, 0, 2, method, in_place=True)
    with pytest.raises(ValueError, match="buffers expected a non-empty list"):
        symmetric_cpu.simulate([])
    with pytest.raises(ValueError, match="buffers expected 1-D tensors of one shape"):
        symmetric_cpu.simulate([torch.zeros(3), torch.zeros(4)])


def test_without_a_process_group_it_says_so():
    with pytest.raises(RuntimeError, match="needs a process group"):
        symmetric.all_reduce(torch.zeros(8))


def _all_reduce_on_gloo() -> str:
    try:
        symmetric.all_reduce(torch.zeros(8))
    except RuntimeError as why:
        return str(why)
    return "no error"


def test_on_a_gloo_rank_it_is_a_runtime_error():
    said = launch.run(_all_reduce_on_gloo, 2, device="cpu")
    assert all("symmetric memory needs CUDA GPUs" in s and "gloo" in s for s in said), said


def _wrong(rows: list[list[dict]]) -> list[str]:
    """Where an interpreted run's outputs are not the sum (NaN where no block stored), or a
    signal pad was left non-zero."""
    want = symmetric_cpu.expected(rows)
    found = []
    for r, rank in enumerate(rows):
        for i, row in enumerate(rank):
            if not row["pad_clear"]:
                found.append(f"rank {r}, {row['numel']} elements: signal pad not clear")
            for c, out in enumerate(row["outputs"]):
                # the interpreter rounds fp32 to bf16 toward zero: one bf16 step
                tol = 1e-2 if out.dtype == torch.bfloat16 else 1e-6
                if not torch.allclose(out.float(), want[i][c].float(), atol=tol, rtol=tol):
                    found.append(f"rank {r}, {row['numel']} elements, call {c}")
    return found


# every method with a separate output, and the push two-shot in place (its sum left in the
# rank's own buffer, as PyTorch's two_shot_all_reduce_ leaves it)
RUNS = [(m, False) for m in symmetric.METHODS] + [("two_shot_push", True)]
RUN_IDS = [m + (" in place" if in_place else "") for m, in_place in RUNS]

# lengths around the tiles and the chunks: smaller than a tile, one short of and one past a
# tile, not a multiple of ALIGN, chunks of two tiles and a bit (two-shot on 2 ranks)
AWKWARD_CHUNKS = (3, 17, symmetric.BLOCK - 1, symmetric.BLOCK + 1, 4 * symmetric.BLOCK + 33)


def _more_blocks_than_the_old_cap(method: str) -> int:
    """A length for which ``method`` launches 65 blocks (the kernels had at most 64 before)."""
    return 64 * symmetric.BLOCK + 3 if method == "one_shot" else 128 * symmetric.BLOCK + 40


# Every run of the real kernels below, by test: one group of 2 CPU ranks runs them all (starting
# ranks costs seconds a run, more than most runs), once per test worker.
INTERPRETED = {
    **{("sums", m, p, dtype): {"numels": [1, 7, symmetric.BLOCK + 1], "dtype": dtype,
                               "method": m, "seed": 3, "in_place": p}
       for m, p in RUNS for dtype in symmetric.DTYPES},
    **{("loops", m, p): {"numels": list(AWKWARD_CHUNKS), "method": m, "seed": 4,
                         "max_blocks": 2, "in_place": p} for m, p in RUNS},
    **{("65 blocks", m): {"numels": [_more_blocks_than_the_old_cap(m)], "method": m, "seed": 5}
       for m in symmetric.METHODS},
    **{("late", m, p, late): {"numels": [17, 2 * symmetric.BLOCK + 5], "dtype": torch.bfloat16,
                              "method": m, "seed": 6, "max_blocks": 2, "late": late,
                              "in_place": p}
       for m, p in RUNS for late in (0, 1)},
}


@pytest.fixture(scope="module")
def interpreted() -> dict:
    """Each run of :data:`INTERPRETED`: every rank's rows, rank 0 first."""
    return dict(zip(INTERPRETED, symmetric_cpu.run_many(list(INTERPRETED.values())),
                    strict=True))


@pytest.mark.parametrize("method, in_place", RUNS, ids=RUN_IDS)
@pytest.mark.parametrize("dtype", symmetric.DTYPES)
def test_the_kernels_in_the_interpreter_on_two_processes(method, in_place, dtype, interpreted):
    """The real kernels, barriers included, on 2 gloo ranks whose buffers are shared memory:
    every rank's output is the sum, twice in a row, and every signal was taken."""
    rows = interpreted["sums", method, in_place, dtype]
    assert [row["numel"] for row in rows[0]] == [1, 7, symmetric.BLOCK + 1]
    assert _wrong(rows) == []


@pytest.mark.parametrize("method, in_place", RUNS, ids=RUN_IDS)
def test_each_block_loops_over_its_tiles(method, in_place, interpreted):
    """At most 2 blocks a launch, far fewer than the tiles: each block strides over the message
    (or its chunk), the ragged last tile masked; a tile skipped leaves NaN in the output (the
    input, in place)."""
    assert _wrong(interpreted["loops", method, in_place]) == []


@pytest.mark.parametrize("method", symmetric.METHODS)
def test_more_blocks_than_the_old_cap(method, interpreted):
    """65 blocks (the kernels had at most 64 before): every block's signal slots are its own."""
    assert symmetric.blocks_for(_more_blocks_than_the_old_cap(method), method, 2) == 65
    assert _wrong(interpreted["65 blocks", method]) == []


@pytest.mark.parametrize("method, in_place", RUNS, ids=RUN_IDS)
@pytest.mark.parametrize("late", (0, 1))
def test_a_late_rank_still_gets_the_sum(method, in_place, late, interpreted):
    """One rank runs behind (it waits before each copy and each load): the barriers hold the
    other back wherever it would read too early or overwrite too soon."""
    assert _wrong(interpreted["late", method, in_place, late]) == []


_BARRIER = "    barrier(signal_pad_ptrs, pid, rank, WORLD)  # "
_PUSH_BARRIER = "    barrier(signal_pad_ptrs, pid, rank, WORLD)\n"
# each a change to the kernels' source that a test must catch: (method, what, old, new);
# "two_shot_push in place" runs the push kernel with its output in the rank's own buffer
MUTANTS = (
    ("one_shot", "first barrier left out", _BARRIER + "every peer's input", "    # "),
    ("one_shot", "last barrier left out", _BARRIER + "no peer still", "    # "),
    ("two_shot", "first barrier left out", _BARRIER + "every peer's input", "    # "),
    ("two_shot", "middle barrier left out", _BARRIER + "every rank's chunk", "    # "),
    ("two_shot", "last barrier left out", _BARRIER + "no peer still", "    # "),
    ("one_shot", "blocks stride too far", "start += tl.num_programs(0) * BLOCK",
     "start += 2 * tl.num_programs(0) * BLOCK"),
    ("two_shot", "own chunk not stored for the peers", "tl.store(mine + offsets, total",
     "tl.store(out + offsets, total"),
    ("two_shot", "a chunk cut short", "end = tl.minimum(begin + chunk, numel)\n    start",
     "end = tl.minimum(begin + chunk - 1, numel)\n    start"),
    ("two_shot_push", "push: first barrier left out",
     _PUSH_BARRIER + "    begin = rank * chunk", "    begin = rank * chunk"),
    ("two_shot_push in place", "push in place: first barrier left out",
     _PUSH_BARRIER + "    begin = rank * chunk", "    begin = rank * chunk"),
    ("two_shot_push", "push: last barrier left out",
     _PUSH_BARRIER + "    if not IN_PLACE:", "    if not IN_PLACE:"),
    ("two_shot_push in place", "push in place: last barrier left out",
     _PUSH_BARRIER + "    if not IN_PLACE:", "    if not IN_PLACE:"),
    # rank r's chunk pushed into chunk p of rank p's buffer (the receiver's index, not the
    # sender's): over the input rank p is still reading, and chunk r never arrives
    ("two_shot_push", "push: into the receiver's chunk",
     "            tl.store(theirs + offsets, total, mask=mask)",
     "            shift = ((rank + 1 + hop) % WORLD - rank) * chunk\n"
     "            tl.store(theirs + offsets + shift, total,\n"
     "                     mask=mask & (offsets + shift < numel))"),
    # right with a separate out (the reduced chunk goes there directly); in place, the rank's
    # own chunk keeps its input
    ("two_shot_push in place", "push in place: own buffer skipped",
     "for hop in tl.static_range(WORLD):  # from rank + 1 on",
     "for hop in tl.static_range(WORLD - 1):  # from rank + 1 on"),
)


def _mutant_run(method: str, name: str) -> dict:
    """How every broken kernel runs: as the tests above run the real one (a late rank, blocks
    that loop, awkward lengths)."""
    return {"numels": [17, 2 * symmetric.BLOCK + 5], "dtype": torch.bfloat16,
            "method": method.removesuffix(" in place"), "seed": 7, "max_blocks": 2, "late": 1,
            "kernels": name, "in_place": method.endswith(" in place")}


@pytest.fixture(scope="module")
def broken_runs(tmp_path_factory) -> dict[str, list | None]:
    """Each of :data:`MUTANTS` run: ``{what: every rank's rows}``, or None where a rank waited
    forever. All in one group of ranks; if one hangs, that group ends, and each runs alone."""
    import inspect
    import sys

    source = inspect.getsource(symmetric)
    folder = tmp_path_factory.mktemp("symmetric_mutants")
    runs = {}
    for method, what, old, new in MUTANTS:
        assert source.count(old) >= 1, f"{what}: the kernels' source no longer holds {old!r}"
        name = f"symmetric_mutant_{abs(hash(what)) % 10**8}"
        (folder / f"{name}.py").write_text(source.replace(old, new))
        runs[what] = _mutant_run(method, name)
    sys.path.insert(0, str(folder))  # the spawned ranks inherit sys.path
    try:
        try:
            return dict(zip(runs, symmetric_cpu.run_many(list(runs.values()), timeout_s=240),
                            strict=True))
        except launch.WorkerError:
            found = {}
            for what, run in runs.items():
                try:
                    found[what] = symmetric_cpu.run(**run, timeout_s=60)
                except launch.WorkerError:
                    found[what] = None
            return found
    finally:
        sys.path.remove(str(folder))


@pytest.mark.parametrize("method, what, old, new", MUTANTS, ids=[m[1] for m in MUTANTS])
def test_a_broken_kernel_is_caught(method, what, old, new, broken_runs):
    """The kernels' module with one barrier left out or its tiling broken, run as the tests
    above run the real one: some rank's sum is wrong, or its signal pad not clear, or a rank
    waits forever (caught too)."""
    rows = broken_runs[what]
    assert rows is None or _wrong(rows) != [], f"{what}: every sum still right"


_COMPILE = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kernels.distributed import symmetric

common = {"buffer_ptrs": "*i64", "signal_pad_ptrs": "*i64", "out": "*bf16", "numel": "i32"}
push = {"chunk": "i32", "IN_PLACE": "constexpr"}
for kernel, extra, flags in ((symmetric.one_shot_kernel, {}, {}),
                             (symmetric.two_shot_kernel, {"chunk": "i32"}, {}),
                             (symmetric.two_shot_push_kernel, push, {"IN_PLACE": False}),
                             (symmetric.two_shot_push_kernel, push, {"IN_PLACE": True})):
    sig = {**common, **{k: v for k, v in extra.items() if v != "constexpr"}, "rank": "i32",
           "WORLD": "constexpr", "BLOCK": "constexpr", **{k: "constexpr" for k in flags}}
    # as Triton specializes a launch whose pointers are 16-byte aligned and whose sizes are
    # multiples of 16 (every length of the benchmark)
    names = list(sig)
    attrs = {(names.index(n),): [["tt.divisibility", 16]]
             for n in ("buffer_ptrs", "signal_pad_ptrs", "out", "numel", *extra)
             if sig[n] != "constexpr"}
    src = ASTSource(fn=kernel, signature=sig,
                    constexprs={"WORLD": 2, "BLOCK": symmetric.BLOCK, **flags}, attrs=attrs)
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                         options={"num_warps": symmetric.NUM_WARPS}).asm["ptx"]
    print(kernel.fn.__name__, "release.sys.cas" in ptx and "atom.global.release.sys" in ptx,
          "atom.global.acquire.sys.cas" in ptx, "bar.sync" in ptx, "multimem" in ptx,
          "ld.global.v4.b32" in ptx and "ld.global.b16" not in ptx,
          "st.global.b16" not in ptx)
"""


def test_the_kernels_compile_for_sm90_with_system_scope_atomics():
    """Compiled for an H100 on any machine (in a child without TRITON_INTERPRET): the signals
    are compare-and-swaps with release and acquire at system scope, between block-wide
    barriers; no multicast instruction; every load and store of bf16 data is a 16-byte vector
    (8 elements; before the alignment hints each peer's elements were loaded 2 bytes at a
    time)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "0"}
    done = subprocess.run([sys.executable, "-c", _COMPILE], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:4] == [
        "one_shot_kernel True True True False True True",
        "two_shot_kernel True True True False True True",
        "two_shot_push_kernel True True True False True True",  # a separate out
        "two_shot_push_kernel True True True False True True"], done.stdout  # in place


def test_the_benchmark_needs_two_gpus_and_judges_the_targets(capsys):
    if torch.cuda.device_count() < 2:
        assert bench_allreduce.run() == []
        assert "need 2 GPUs" in capsys.readouterr().out
    kib = bench_allreduce.KiB
    rows = [{"provider": p, "bytes": s, "eager_ms": t * scale, "graph_ms": t * scale}
            for s, scale in ((4 * kib, 1), (64 * bench_allreduce.MiB, 30))
            for p, t in (("course one_shot", 0.006), ("course two_shot", 0.011),
                         ("course two_shot_push", 0.007), ("torch one_shot", 0.0062),
                         ("torch two_shot", 0.0071), ("torch two_shot_out", 0.0111),
                         ("nccl", 0.03))]
    lines = bench_allreduce.verdicts(rows)
    assert len(lines) == 5 and all(": as expected" in line for line in lines), lines
    assert "course two_shot_push ≥ 1.0× torch two_shot up to 64 MiB" in lines[2], lines
    assert "course two_shot ≥ 1.0× torch two_shot_out up to 64 MiB" in lines[3], lines
    rows[-1]["graph_ms"] = 0.1  # NCCL faster than the push two-shot (0.21 ms) at 64 MiB
    assert "NOT here" in bench_allreduce.verdicts(rows)[-1]
    rows[2]["graph_ms"] = 0.0072  # the push 1.4% slower than PyTorch's at 4 KiB: a miss
    assert "0.99× at worst: NOT here" in bench_allreduce.verdicts(rows)[2]
    assert "4 KiB" in bench_allreduce.table(rows)
    # a miss never prints as the target: 0.946 is not "0.95×"
    assert bench_allreduce._times(0.946, 0.95) == "0.946×"
    assert bench_allreduce._times(0.951, 0.95) == bench_allreduce._times(0.95, 0.95) == "0.95×"


def _real_kernels_against_nccl() -> list[str]:
    """(A rank's work, NCCL.) The course's kernels on awkward lengths, several calls in a row
    (a missing barrier shows as a race), each against NCCL's sum of the same inputs."""
    import torch.distributed as dist

    failures = []
    g = torch.Generator(device="cuda").manual_seed(dist.get_rank())
    for dtype in symmetric.DTYPES:
        # (1 << 20) + 3: 256 blocks, each looping over its tiles, the last one ragged
        for numel in (*AWKWARD, 65537, (1 << 20) + 3, 1 << 24):
            for method, in_place in RUNS:
                for call in range(3):
                    x = torch.randn(numel, generator=g, device="cuda").to(dtype)
                    want = x.clone()
                    dist.all_reduce(want)
                    if in_place:  # the input written into the symmetric buffer, summed there
                        buffer = symmetric.buffer_for(x.numel() * x.element_size())
                        x = buffer.view(numel, dtype).copy_(x)
                    if dist.get_rank() == 1 and call == 1:  # runs behind (as symmetric_cpu's
                        torch.cuda._sleep(200_000)  # late rank): a missing barrier shows
                    got = symmetric.all_reduce(x, method, in_place=in_place)
                    if not torch.allclose(got.float(), want.float(), atol=1e-2, rtol=1e-2):
                        failures.append(f"{method}{' in place' if in_place else ''} {dtype} "
                                        f"{numel}")
    torch.cuda.synchronize()
    return failures


@pytest.mark.gpus2
def test_the_real_kernels_match_nccl_on_two_gpus():
    for failures in launch.run(_real_kernels_against_nccl, 2, device="cuda", timeout_s=300):
        assert failures == []


@pytest.mark.gpus2
def test_the_benchmark_sweep_on_two_gpus():
    rows = launch.run(bench_allreduce.sweep, 2, [4096, 1 << 20], reps=5, device="cuda",
                      timeout_s=300)[0]
    assert {r["provider"] for r in rows} == set(bench_allreduce.PROVIDERS)
    assert all(r["eager_ms"] > 0 for r in rows)
