"""The scoreboard that opens the Hopper attention lessons' takeaways
(kernels/attention/hopper/scoreboard.py): one row per recorded step with its ratios, read from
the committed records; one clear line where there are none; and the records (and the logs the
takeaways cite) still showing what the takeaways explain."""

import json
import re

import pytest

from course_utils import claims, env
from kernels.attention import bench
from kernels.attention.hopper import fwd, scoreboard

PROBLEM = scoreboard.PROBLEM


def _recorded():
    found = claims.with_lesson(bench.LESSON)
    assert found is not None, "no committed records of the attention benchmark"
    return found


def _write(directory, rates: dict[tuple[str, str], float], slug="some-gpu"):
    """A results file whose attention records are ``{(provider, passes problem): TFLOP/s}``."""
    records = [{"lesson": bench.LESSON, "what": f"{name} {what}", "value": value,
                "unit": "TFLOP/s"} for (name, what), value in rates.items()]
    (directory / f"{slug}.json").write_text(json.dumps(
        {"environment": {"device": "Some GPU", "git": "abc1234"}, "records": records}))


def test_one_row_per_recorded_step_with_its_ratios():
    recorded = _recorded()
    rows = scoreboard.rows(recorded, "fwd")
    assert [r["kernel"] for r in rows] == [f"step {n}" for n in fwd.STEPS]
    value = {r.what: r.value for r in recorded.of(bench.LESSON)}
    for row, name in zip(rows, scoreboard.kernels("fwd"), strict=True):
        mine = value[f"{name} fwd {PROBLEM}"]
        assert row["TFLOP/s"] == round(mine, 1)
        assert row["× cuDNN"] == round(mine / value[f"sdpa_cudnn fwd {PROBLEM}"], 2)
        assert row["× Triton"] == round(mine / value[f"triton fwd {PROBLEM}"], 2)
        low, high = (float(x) for x in row["× cuDNN, every problem"].split("–"))
        assert low <= row["× cuDNN"] <= high
    both = scoreboard.rows(recorded, "fwd+bwd")
    assert [r["kernel"].split(":")[0] for r in both] == ["version 1", "version 2"]
    assert all(r["× cuDNN"] and r["× Triton"] for r in both)


def test_the_printed_scoreboard_names_where_it_was_measured():
    text = scoreboard.show("fwd")
    assert "recorded by make bench on" in text and "step 5" in text
    assert "slower than" in text  # the lines the takeaways explain
    both = scoreboard.show("fwd+bwd")
    assert "version 2" in both and "fp8 forward" in both


def test_missing_records_say_so_in_one_line(tmp_path):
    text = scoreboard.show("fwd", directory=tmp_path)  # no results file at all
    assert text.startswith("no records of") and "make bench" in text and "\n" not in text
    _write(tmp_path, {("triton", f"fwd {PROBLEM}"): 400.0})  # records, but no step
    assert scoreboard.show("fwd", directory=tmp_path).startswith("no records of")
    assert scoreboard.show("fwd+bwd", directory=tmp_path).startswith("no records of")


def test_a_made_up_file_gives_its_rows_ratios_and_trailing_steps(tmp_path):
    rates = {("sdpa_cudnn", f"fwd {PROBLEM}"): 500.0, ("wgmma[step1]", f"fwd {PROBLEM}"): 300.0,
             ("wgmma[step2]", f"fwd {PROBLEM}"): 400.0, ("wgmma[step3]", f"fwd {PROBLEM}"): 360.0,
             ("wgmma[step3]", "fwd other"): 300.0, ("wgmma[step2]", "fwd other"): 301.0,
             ("sdpa_cudnn", "fwd other"): 600.0}
    _write(tmp_path, rates)
    recorded = claims.with_lesson(bench.LESSON, directory=tmp_path)
    rows = scoreboard.rows(recorded)
    assert [r["kernel"] for r in rows] == ["step 1", "step 2", "step 3"]  # steps 4, 5: none
    assert rows[2]["× cuDNN"] == 0.72 and rows[2]["× Triton"] is None  # no Triton record
    assert rows[2]["× cuDNN, every problem"] == "0.50–0.72"
    (trails,) = scoreboard.slower(recorded)  # "other": within the noise, not counted
    assert (trails.kernel, trails.before, trails.behind, trails.of) == ("step 3", "step 2", 1, 2)
    assert "step 3 is slower than step 2 at 1 of 2" in str(trails)
    assert "no records" not in scoreboard.show("fwd", directory=tmp_path)
    with pytest.raises(ValueError, match="passes expected"):
        scoreboard.rows(recorded, "bwd")


def test_the_records_still_show_what_the_takeaways_explain():
    """Lesson 18's takeaways explain why step 3 trails step 2 (everywhere) and step 2 trails
    step 1 (at D = 64 only); lesson 19's why version 2 trails version 1. When a new `make bench`
    changes that, rewrite those paragraphs (notebooks 18 and 19, '## Takeaways')."""
    recorded = _recorded()
    found = {(s.kernel, s.before): s for s in scoreboard.slower(recorded, "fwd")}
    assert set(found) == {("step 3", "step 2"), ("step 2", "step 1")}, found
    assert found["step 3", "step 2"].behind == found["step 3", "step 2"].of
    rates = scoreboard.timed(recorded, "fwd")
    behind = [p for (n, p), v in rates.items() if n == "wgmma[step2]"
              and v < (1 - scoreboard.NOISE) * rates["wgmma[step1]", p]]
    assert behind and all(" D=64" in p for p in behind), behind
    (version,) = scoreboard.slower(recorded, "fwd+bwd")
    assert version.kernel.startswith("version 2") and version.behind == version.of


def test_the_evidence_the_takeaways_cite():
    """Steps 2 and 3 take the same shared memory at D = 128 (so one block per SM each), and in
    the other H100 runs' logs step 3 ran level with step 2 at D = 128 without the mask and ahead
    of it at D = 64 where its tiles are 128 keys wide."""
    assert fwd.STEPS[2].shared_bytes(128) == fwd.STEPS[3].shared_bytes(128)
    assert fwd.STEPS[3].key_tile(128) == 64 and fwd.STEPS[3].key_tile(64) == 128
    records_git = _recorded().stamp(bench.LESSON)["git"]
    bench_line = re.compile(r"^wgmma\[(step[23])\] fwd bfloat16 (B=\d+ H=\d+ S=\d+ D=\d+)"
                            r"( causal)?\s+([\d.]+)", re.M)
    gpu_run_line = re.compile(r"^\s+\((\d+), (\d+), (\d+), (\d+)\)\s+causal=(\w+)\s+"
                              r"wgmma\[(step[23])\]\s+(\d+) TFLOP/s", re.M)
    level, behind_causal, ahead_at_64 = [], [], []
    for path in sorted(env.RESULTS_DIR.glob(f"{claims.RECORDED}-*attention*.log")):
        if records_git in path.name:
            continue  # the records' own run
        text, rates = path.read_text(), {}
        for step, problem, causal, value in bench_line.findall(text):
            rates[step, problem, bool(causal)] = float(value)
        for b, h, s, d, causal, step, value in gpu_run_line.findall(text):
            rates[step, f"B={b} H={h} S={s} D={d}", causal == "True"] = float(value)
        for (step, problem, causal), value in rates.items():
            if step == "step3" and ("step2", problem, causal) in rates:
                ratio = value / rates["step2", problem, causal]
                if problem.endswith("D=128"):
                    (behind_causal if causal else level).append(ratio)
                if problem.endswith("D=64") and re.search(r"d64-check|lazy-trial", path.name):
                    ahead_at_64.append(ratio)
    assert level and all(0.95 <= r <= 1.05 for r in level), level
    assert sum(r < 1 for r in behind_causal) > len(behind_causal) / 2, behind_causal  # "mostly"
    assert ahead_at_64 and all(r > 1.05 for r in ahead_at_64), ahead_at_64
    # the tune's ring depths: step 3 at D = 128, causal, with 3, 4 or 6 slots ran alike
    (tune,) = env.RESULTS_DIR.glob(f"{claims.RECORDED}-attention-tune-d64-*.log")
    slots = [float(v) for v in re.findall(r"D=128 causal=True\s+step3 bn=64 stages=[346]\s+"
                                          r"(\d+) TFLOP/s", tune.read_text())]
    assert len(slots) == 3 and max(slots) / min(slots) < 1.05, slots
