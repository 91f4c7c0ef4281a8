"""course_utils.ncu: the parser on CSVs recorded by Nsight Compute on an H100 (tests/data/), the
child's profiling window, the requirement, and (on a GPU with ncu) one real profile."""

import json
import sys
from pathlib import Path

import matplotlib
import pytest

from course_utils import env, ncu, requirements

matplotlib.use("Agg")

DATA = Path(__file__).parent / "data"
# lesson 07's bf16 kernel, 128 x 256 tiles, 8192^3 (ncu 2025, H100 80GB HBM3, base clock)
HEALTHY = DATA / "ncu-mma-bf16-128x256-h100.csv"
# the same kernel with 12 warps at 168 registers: it spills to local memory
SPILLS = DATA / "ncu-mma-bf16-192x256-spills-h100.csv"


def _kernel(path):
    found = ncu.parse_csv(path.read_text())
    assert len(found) == 1
    return found[0]


def test_parse_recorded_csv():
    k = _kernel(HEALTHY)
    assert k.name == "mma_matmul"
    assert k.get("launch__registers_per_thread") == 216
    assert k.get("launch__block_size") == 256
    assert k.get("launch__grid_size") == 2048
    # "3,217.76" with --print-units base is nanoseconds: the kernel took about 3.2 ms
    assert k.microseconds() == pytest.approx(3217.76)
    assert k.get(ncu.METRICS[0]) == pytest.approx(68.70)  # tensor pipe busy, %
    assert k.bank_conflict_pct == 0.0


def test_stall_reasons_add_up_to_the_issue_gap():
    """Stall cycles per issued instruction, plus the one cycle of issuing, are ncu's 'cycles per
    issued instruction': a parser that dropped or mislabelled a column would not add up."""
    for path in (HEALTHY, SPILLS):
        k = _kernel(path)
        total = sum(k.stalls.values()) + 1.0
        assert total == pytest.approx(k.get("smsp__average_warp_latency_per_inst_issued.ratio"),
                                      rel=0.05)
        assert "selected" not in k.stalls
        values = list(k.stalls.values())
        assert values == sorted(values, reverse=True)


def test_what_limits_each_kernel():
    healthy, spills = _kernel(HEALTHY), _kernel(SPILLS)
    assert next(iter(healthy.stalls)) == "wait"  # tensor-core issue latency
    assert next(iter(spills.stalls)) == "long_scoreboard"  # local-memory (spill) loads
    assert spills.bank_conflict_pct == pytest.approx(0.789, abs=0.01)
    assert spills.summary()["tensor pipe busy"] < healthy.summary()["tensor pipe busy"]


def test_report_table_compare_and_figure():
    reports = [ncu.Report(name, ncu.parse_csv(path.read_text()), "ncu ...", path.read_text())
               for name, path in (("128x256", HEALTHY), ("192x256", SPILLS))]
    rows = reports[0].table()
    assert rows[0] == {"metric": "duration (base clock)", "mma_matmul": pytest.approx(3217.76)}
    text = ncu.compare(reports)
    assert "tensor pipe busy" in text and "128x256" in text and "192x256" in text
    assert "stall #1" in text and "long_scoreboard" in text
    assert str(reports[0]).startswith("Nsight Compute: 128x256")
    fig = ncu.stall_figure(reports, top=5)
    bars = fig.axes[0].patches
    assert len(bars) == 2 * 5
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[-1].startswith("long_scoreboard")  # the largest total on top
    stamps = [t for t in fig.texts if "torch" in t.get_text()]
    assert len(stamps) == 1  # the environment, once
    assert not [t for t in ncu.stall_figure(reports, stamp=False).texts if "torch" in t.get_text()]


def test_one_call_with_two_kernels_splits_into_two_reports():
    # notebooks 05 and 07 profile two kernels in one ncu child (ncu and CUDA start once)
    kernels = ncu.parse_csv(HEALTHY.read_text()) + ncu.parse_csv(SPILLS.read_text())
    both = ncu.Report("both", kernels, "ncu ...", "")
    first, second = both.per_kernel(["128x256", "192x256"])
    assert (first.label, first.kernels, second.kernels) == ("128x256", kernels[:1], kernels[1:])
    assert "128x256" in ncu.compare([first, second]) and "192x256" in ncu.compare([first, second])
    assert [r.label for r in both.per_kernel()] == ["mma_matmul", "mma_matmul"]
    with pytest.raises(ValueError, match=r"labels: expected one per kernel of the call \(2"):
        both.per_kernel(["only one"])


def test_empty_and_malformed_output():
    assert ncu.parse_csv("==PROF== Disconnected from process 1\n") == []
    with pytest.raises(ValueError, match="Kernel Name"):
        ncu.parse_csv('"a","b"\n"1","2"\n')
    assert "no kernel" in str(ncu.Report("nothing", [], "", ""))


def test_command_profiles_only_the_window():
    cmd = ncu.command("spec.json", log_file="out.csv")
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[cmd.index("--page") + 1] == "raw" and "--csv" in cmd
    assert {cmd[i + 1] for i, c in enumerate(cmd) if c == "--section"} == set(ncu.SECTIONS)
    assert cmd[-4:] == [sys.executable, "-m", "course_utils.ncu", "spec.json"]


calls: list[str] = []


def make_call(label):
    """A 'module:function' target: set-up that returns the call to profile."""
    calls.append(f"setup {label}")
    return lambda: calls.append(f"call {label}")


def plain_call(label):
    """A 'module:function' target that is itself the call (returns no callable)."""
    calls.append(f"plain {label}")


def test_child_warms_up_then_profiles_one_call(monkeypatch):
    """The child runs the call once outside the profiler, then once between start and stop."""
    import torch

    calls.clear()
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append("sync"))
    monkeypatch.setattr(torch.cuda.profiler, "start", lambda: calls.append("start"))
    monkeypatch.setattr(torch.cuda.profiler, "stop", lambda: calls.append("stop"))
    ncu._child({"call": f"{__name__}:make_call", "args": ["x"], "kwargs": {}, "setup": ""})
    assert calls == ["setup x", "call x", "sync", "start", "call x", "sync", "stop"]
    calls.clear()
    ncu._child({"call": f"{__name__}:plain_call", "args": ["y"], "kwargs": {}, "setup": ""})
    assert calls == ["plain y", "sync", "start", "plain y", "sync", "stop"]
    calls.clear()
    ncu._child({"call": "log.append('expr')", "args": [], "kwargs": {},
                "setup": f"import sys\nlog = sys.modules[{__name__!r}].calls"})
    assert calls == ["expr", "sync", "start", "expr", "sync", "stop"]


def test_profile_checks_its_arguments(monkeypatch):
    monkeypatch.setattr(ncu, "path", lambda: None)
    with pytest.raises(RuntimeError, match="ncu"):
        ncu.profile("torch:ones", 4)
    assert ncu.unavailable_reason() is not None
    monkeypatch.setattr(ncu, "path", lambda: "/usr/bin/true")
    with pytest.raises(ValueError, match="module:function"):
        ncu.profile("torch.ones(4)", 4)


def test_requirement_is_known():
    assert requirements.is_requirement("ncu")
    if not env.HAS_CUDA:
        assert requirements.unmet("ncu") == requirements.unmet("cuda")


@pytest.mark.gpu
@pytest.mark.skipif(ncu.path() is None, reason="ncu not found")
def test_profile_one_real_call():
    report = ncu.profile("torch.mm(a, a)", setup="import torch\n"
                         "a = torch.randn(1024, 1024, device='cuda')", label="mm")
    assert len(report.kernels) >= 1  # cuBLAS may add a small helper kernel
    main = report.main
    assert main.microseconds() > 0 and main.stalls
    assert json.dumps(main.summary())
