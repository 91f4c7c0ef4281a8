"""Lesson 20's tensor-parallel matmul (the all-gather pipelined with the matmul) on 2 gloo
processes, its benchmarks' verdicts, and on 2 GPUs (NCCL, symmetric memory) where a machine has
them."""

import pytest
import torch

from course_utils import results
from kernels.distributed import bench_data_parallel, bench_tensor_parallel, launch
from kernels.distributed import tensor_parallel as tp


def test_chunk_bounds_cut_like_torch_chunk():
    assert tp.chunk_bounds(7, 3) == [(0, 3), (3, 6), (6, 7)]  # the last chunk shorter
    assert tp.chunk_bounds(8, 4) == [(0, 2), (2, 4), (4, 6), (6, 8)]
    assert tp.chunk_bounds(7, 5) == [(0, 2), (2, 4), (4, 6), (6, 7)]  # one fewer, as torch.chunk
    assert tp.chunk_bounds(5, 1) == [(0, 5)] and tp.chunk_bounds(5, 5)[-1] == (4, 5)
    for rows, chunks in ((7, 3), (10, 4), (9, 5), (1, 1)):
        x = torch.arange(rows)
        got = [x[a:b] for a, b in tp.chunk_bounds(rows, chunks)]
        assert [g.tolist() for g in got] == [c.tolist() for c in x.chunk(chunks)]
    for bad in (0, 8, 2.0, True):
        with pytest.raises(ValueError, match="chunks expected an int from 1 to the 7 rows"):
            tp.chunk_bounds(7, bad)


def test_shards_and_their_errors():
    a, b = torch.arange(24.0).view(6, 4), torch.arange(12.0).view(4, 3)
    assert torch.equal(tp.shard_rows(a, 2, 1), a[3:])
    assert torch.equal(tp.shard_columns(b, 3, 2), b[:, 2:])
    with pytest.raises(ValueError, match=r"a expected .* multiple of the 4 ranks.*\(6, 4\)"):
        tp.shard_rows(a, 4, 0)
    with pytest.raises(ValueError, match="b expected .* multiple of the 2 ranks"):
        tp.shard_columns(b, 2, 0)
    with pytest.raises(ValueError, match="rank expected an int in 0..1"):
        tp.shard_rows(a, 2, 2)
    with pytest.raises(ValueError, match="n expected a positive int"):
        tp.shard_rows(a, 0, 0)


def test_operands_are_checked_before_any_collective():
    # (no process group here: each error comes before the first collective would)
    a = torch.randn(4, 5)
    for method in (tp.gather_then_multiply, tp.pipelined, tp.fused):
        with pytest.raises(ValueError, match=r"b_shard expected \(5, N/n\)"):
            method(a, torch.randn(4, 3))
        with pytest.raises(ValueError, match="a_shard expected .* at least one"):
            method(torch.randn(0, 5), torch.randn(5, 3))
        with pytest.raises(ValueError, match="b_shard expected a_shard's dtype"):
            method(a, torch.randn(5, 3, dtype=torch.float64))


# (M, K, N, chunks): rows per rank 7 in chunks of 3, 3, 1; 5 rows in 5 chunks of one; one
# chunk; N/2 odd; K = 1
AWKWARD = ((14, 9, 6, 3), (10, 5, 4, 5), (6, 3, 2, 1), (22, 17, 10, 4), (4, 1, 2, 2))


def _all_shapes():
    return [tp.check(m, k, n, chunks, seed=i) for i, (m, k, n, chunks) in enumerate(AWKWARD)]


def test_every_way_equals_one_process_on_awkward_shapes():
    ranks = launch.run(_all_shapes, 2, device="cpu")  # gloo, even where there are 2 GPUs
    for rank, found in enumerate(ranks):
        for shape, row in zip(AWKWARD, found, strict=True):
            for method in ("gather_then_multiply", "pipelined"):
                assert row[method] < 1e-5, (rank, shape, method, row[method])
            assert "needs CUDA tensors" in row["fused"]  # said, not raised, on gloo


def test_a_bad_chunk_count_is_a_value_error_in_the_rank():
    with pytest.raises(launch.WorkerError, match="chunks expected an int from 1 to the 3 rows"):
        launch.run(tp.check, 2, 6, 4, 2, 4)


def test_timed_on_gloo_says_the_gathers_share():
    found = launch.run(tp.timed, 2, 64, 32, 16, (2, 4), torch.float32, 3, device="cpu")
    assert found[0] == found[1]  # the slowest rank's medians, on every rank
    for name in ("gather", "matmul", "gather_then_multiply", "pipelined chunks=2",
                 "pipelined chunks=4"):
        assert found[0][name] > 0
    assert 0 < found[0]["share"] == found[0]["gather"] / found[0]["gather_then_multiply"]
    assert "needs CUDA tensors" in found[0]["fused"]


def _records(tag: str, gather: float, unfused: float, piped: dict, fused: float | None):
    L, peer = bench_tensor_parallel.LESSON, {"peer": unfused, "peer_what": "unfused"}
    rows = [results.Record(L, f"all-gather then matmul {tag}", unfused, "ms"),
            results.Record(L, f"all-gather alone {tag}", gather, "ms", **peer),
            results.Record(L, f"matmul alone {tag}", unfused - gather, "ms", **peer)]
    rows += [results.Record(L, f"pipelined chunks={c} {tag}", ms, "ms", **peer)
             for c, ms in piped.items()]
    if fused is not None:
        rows.append(results.Record(L, f"fused_all_gather_matmul {tag}", fused, "ms", **peer))
    return rows


def test_tensor_parallel_verdicts_only_where_the_gather_is_a_third():
    hidden = _records("bf16 M=8 K=8 N=2 2 GPUs", 0.4, 1.0, {2: 0.9, 4: 0.8}, 0.7)
    small = _records("bf16 M=8 K=8 N=8 2 GPUs", 0.1, 1.0, {4: 0.5}, None)
    lines = bench_tensor_parallel.verdicts(hidden + small)
    assert len(lines) == 2  # the 10% shape has no verdict
    assert "gather 40%" in lines[0] and "1.25× (pipelined chunks=4)" in lines[0]
    assert lines[0].endswith("as expected") and "fused" in lines[1]
    missed = bench_tensor_parallel.verdicts(_records("bf16 M=8 K=8 N=2 2 GPUs", 0.4, 1.0,
                                                     {4: 0.95}, None))
    assert len(missed) == 1 and "NOT here" in missed[0] and "1.05×" in missed[0]
    nowhere = bench_tensor_parallel.verdicts(small)
    assert len(nowhere) == 1 and "at most 10%" in nowhere[0] and "NOT here" in nowhere[0]


def test_data_parallel_verdicts():
    L = bench_data_parallel.LESSON

    def step(method: str, gpus: int, ms: float):
        return results.Record(L, f"step {method} {bench_data_parallel.tag(gpus)}", ms, "ms")

    lines = bench_data_parallel.verdicts([step("bucketed", 2, 50.0), step("ddp", 2, 48.0),
                                          step("naive", 2, 70.0), step("bucketed", 1, 47.0),
                                          step("ddp", 1, 46.0)])
    assert len(lines) == 3
    assert "0.96×" in lines[0] and lines[0].endswith("as expected")
    assert "bucketed: weak-scaling efficiency" in lines[1] and "94%" in lines[1]
    assert "ddp:" in lines[2] and "96%" in lines[2]
    slow = bench_data_parallel.verdicts([step("bucketed", 2, 60.0), step("ddp", 2, 48.0),
                                         step("bucketed", 1, 47.0)])
    assert "NOT here" in slow[0] and "NOT here" in slow[1] and "78%" in slow[1]
    # with a profiled step recorded, the miss says where the GPU time went
    tag = bench_data_parallel.tag(2)
    busy = [results.Record(L, f"GPU busy {m} {part} {tag}", ms, "ms")
            for m, parts in (("bucketed", (60.0, 4.0, 3.0)), ("ddp", (46.0, 4.0, 3.8)),
                             ("naive", (45.0, 2.0, 0.0)))
            for part, ms in zip(("compute", "nccl", "overlap"), parts, strict=True)]
    (said, *_) = bench_data_parallel.verdicts([step("bucketed", 2, 60.0), step("ddp", 2, 48.0),
                                              *busy])
    assert said.endswith("its compute kernels ran 60.0 ms against DDP's 46.0 and naive's "
                         "45.0 (no overlap); bucketed's NCCL kernels 4.0 ms, 1.0 of it beside "
                         "no compute; ddp's NCCL kernels 4.0 ms, 0.2 of it beside no compute"), \
        said


def test_busy_reads_compute_nccl_and_their_overlap():
    from kernels.distributed import profile

    def kernel(name, start, dur, stream=7):
        return {"name": name, "stream": stream, "start_us": start, "dur_us": dur}

    events = [kernel("ampere_gemm", 0, 10_000), kernel("elementwise", 5_000, 10_000),
              kernel("ncclDevKernel_AllReduce", 12_000, 8_000, stream=9),
              kernel("ncclDevKernel_AllReduce", 30_000, 1_000, stream=9)]
    assert profile.busy(events) == {"compute_ms": 15.0, "nccl_ms": 9.0, "overlap_ms": 3.0,
                                    "span_ms": 31.0}
    assert profile.busy([]) == {"compute_ms": 0.0, "nccl_ms": 0.0, "overlap_ms": 0.0,
                                "span_ms": 0.0}


def test_the_benchmarks_say_they_need_two_gpus(capsys):
    if torch.cuda.device_count() >= 2:
        pytest.skip("this machine has 2 GPUs: the benchmarks run (make bench)")
    assert bench_tensor_parallel.run(quick=True) == []
    assert bench_data_parallel.run(quick=True) == []
    said = capsys.readouterr().out
    assert said.count("on 2 GPUs") == 2 and "GPU" in said


@pytest.mark.gpus2
def test_every_way_equals_one_process_with_nccl():
    found = launch.run(tp.check, 2, 1000, 264, 130, 3, torch.bfloat16, device="cuda")
    for row in found:
        for method in tp.METHODS:
            assert isinstance(row[method], float), (method, row[method])
            assert row[method] < 0.1, (method, row[method])  # bf16 inputs, fp32 reference
    # (every shape compiles its kernels in both ranks: beside a full test suite on the same
    # GPUs that took more than the default 120 s on two H100s)
    found = launch.run(_all_shapes, 2, device="cuda", timeout_s=300)
    for row in (r for rank in found for r in rank):
        assert max(row.values()) < 1e-3, row  # fp32 (TF32 off by default)


@pytest.mark.gpus2
def test_the_timeline_shows_nccl_and_matmuls_on_two_streams():
    events = launch.run(tp.timeline, 2, 4096, 4096, 2048, device="cuda")[0]
    streams = {e["stream"] for e in events if "nccl" in e["name"].lower()}
    others = {e["stream"] for e in events if "nccl" not in e["name"].lower()}
    assert len([e for e in events if "nccl" in e["name"].lower()]) >= tp.CHUNKS
    assert streams and others and streams.isdisjoint(others)
    fig = tp.timeline_figure(events, "test")
    assert fig is not None


@pytest.mark.gpus2
def test_timed_with_nccl():
    found = launch.run(tp.timed, 2, 2048, 2048, 1024, (2,), reps=3, device="cuda")[0]
    assert all(isinstance(found[k], float) and found[k] > 0 for k in
               ("gather", "matmul", "gather_then_multiply", "pipelined chunks=2", "fused"))


def test_the_timeline_figure_draws_a_row_per_stream():
    events = [{"name": "ncclDevKernel_AllGather_RING_LL(...)", "stream": 13, "start_us": 0.0,
               "dur_us": 40.0},
              {"name": "nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NNT", "stream": 7, "start_us": 5.0,
               "dur_us": 60.0},
              {"name": "ncclDevKernel_AllGather_RING_LL(...)", "stream": 13, "start_us": 41.0,
               "dur_us": 40.0}]
    fig = tp.timeline_figure(events, "two streams")
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["stream 7", "stream 13 (NCCL)"]
