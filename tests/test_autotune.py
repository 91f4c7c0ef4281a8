"""The tuner's store (kernels/matmul/autotune.py), on any machine: winners per variant and size
bucket, a sweep at one size never replaces another size's winner, lookups come from memory,
and tuning inside ``use_store`` never touches the user's ``var/``."""

import json

import pytest
import torch

from course_utils import env
from kernels.matmul import autotune, mma

SMALL = mma.Config(64, 128, 32, 64, 64, 4)
WIDE = mma.Config(256, 128, 64, 64, 128, 3)


def test_buckets_round_each_size_to_a_power_of_two():
    assert autotune.bucket(4000, 4000, 4000) == "4096x4096x4096"
    assert autotune.bucket(8192, 1024, 8192) == "8192x1024x8192"
    assert autotune.bucket(1, 0, 300) == "1x1x256"
    with pytest.raises(ValueError, match="k expected a size >= 0, got -1"):
        autotune.bucket(1, 1, -1)


def test_a_sweep_at_one_size_keeps_the_other_sizes_winners(tmp_path):
    store = autotune.Store(tmp_path / "gpu.json")
    store.put("bf16", (4096, 4096, 4096), SMALL, 300.0)
    store.put("bf16", (8192, 8192, 8192), WIDE, 350.0)
    store.put("bf16", (4000, 4000, 4000), WIDE, 310.0)  # same bucket as 4096³: replaces it
    store.put("int8", (4096, 4096, 4096), SMALL, 700.0)
    fresh = autotune.Store(tmp_path / "gpu.json")  # as the next process reads it
    assert set(fresh.winners("bf16")) == {"4096x4096x4096", "8192x8192x8192"}
    assert fresh.best("bf16", (4096, 4096, 4096)) == WIDE
    assert fresh.best("bf16", (8192, 8192, 8192)) == WIDE
    assert fresh.best("int8", (8192, 8192, 8192)) == SMALL  # nearest tuned bucket
    assert fresh.best("fp16", (4096, 4096, 4096)) == mma.DEFAULT_CONFIG  # never tuned
    store.put("bf16", (8192, 8192, 8192), SMALL, 360.0)
    assert store.best("bf16", (8192, 8192, 8192)) == SMALL  # put forgets earlier choices
    assert store.best("bf16", (4096, 4096, 4096)) == WIDE


def test_nearest_bucket_wins_and_a_repeated_lookup_reads_nothing(tmp_path, monkeypatch):
    store = autotune.Store(tmp_path / "gpu.json")
    store.put("bf16", (1024, 1024, 1024), SMALL, 100.0)
    store.put("bf16", (8192, 8192, 8192), WIDE, 350.0)
    fresh = autotune.Store(tmp_path / "gpu.json")
    assert fresh.best("bf16", (512, 512, 512)) == SMALL
    assert fresh.best("bf16", (4096, 4096, 8192)) == WIDE
    assert fresh.best("bf16", None) == WIDE  # no size: the largest problem tuned
    reads = []
    monkeypatch.setattr(fresh, "_read", lambda: reads.append(1) or {})
    for _ in range(100):
        fresh.best("bf16", (512, 512, 512))
    assert reads == [], "a call's configuration comes from memory, not the file"


def test_files_keyed_by_exact_problem_are_read_into_buckets(tmp_path):
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps({"bf16": {"4096x4096x4096": {
        "config": {"bm": 64, "bn": 128, "wm": 32, "wn": 64, "bk_bytes": 64, "stages": 4,
                   "group_m": 8}, "rate": 300.0, "problem": [4096, 4096, 4096]}}}))
    assert autotune.Store(path).best("bf16", (4000, 4000, 4000)) == SMALL


def test_use_store_sends_winners_to_a_temporary_store(tmp_path):
    user = autotune.store()
    with autotune.use_store(tmp_path) as scratch:
        assert autotune.store() is scratch and scratch.path.parent == tmp_path
        scratch.put("bf16", (64, 64, 64), SMALL, 1.0)
    assert autotune.store() is user
    assert (tmp_path / f"{env.device_slug()}.json").exists()
    assert "64x64x64" not in user.winners("bf16")


@pytest.mark.gpu
def test_tuning_at_a_toy_size_inside_use_store_leaves_var_alone(tmp_path):
    user_file = autotune.store().path
    before = user_file.read_bytes() if user_file.exists() else None
    with autotune.use_store(tmp_path) as scratch:
        trials = autotune.tune("bf16", 256, 256, 256, configs=(SMALL, mma.DEFAULT_CONFIG),
                               progress=False, min_time_s=0.01)
        assert scratch.best("bf16", (256, 256, 256)) == trials[0].config
        a, b = autotune.operands(mma.VARIANTS["bf16"], 256, 256, 256)
        torch.testing.assert_close(mma.matmul(a, b).float(), (a.float() @ b.float()),
                                   atol=2e-2, rtol=2e-2)
    assert (user_file.read_bytes() if user_file.exists() else None) == before
