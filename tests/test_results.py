"""course_utils.results: records, per-lesson replacement, the rendered markdown."""

import json

import pytest

from course_utils import env, results
from course_utils.results import Record


def _rec(lesson, what, value, **kw):
    return Record(lesson=lesson, what=what, value=value, unit="GB/s", **kw)


def test_record_needs_ceiling_and_peer_with_their_descriptions():
    with pytest.raises(ValueError, match="ceiling and ceiling_what"):
        _rec("01", "x", 1.0, ceiling=2.0)
    with pytest.raises(ValueError, match="peer and peer_what"):
        _rec("01", "x", 1.0, peer_what="F.gelu")
    rec = _rec("01", "x", 1.0, ceiling=2.0, ceiling_what="copy")
    assert rec.as_dict() == {"lesson": "01", "what": "x", "value": 1.0, "unit": "GB/s",
                             "ceiling": 2.0, "ceiling_what": "copy"}


def test_save_replaces_a_lessons_records_and_keeps_the_others(tmp_path):
    results.save("01_a", [_rec("01_a", "first", 1.0)], directory=tmp_path)
    results.save("02_b", [_rec("02_b", "kept", 2.0, peer=4.0, peer_what="eager")],
                 directory=tmp_path)
    path = results.save("01_a", [_rec("01_a", "second", 3.0, ceiling=6.0,
                                      ceiling_what="datasheet")], directory=tmp_path,
                        notes="ran `compute-sanitizer`: 0 errors")
    assert path == tmp_path / f"{env.device_slug()}.json"
    data = json.loads(path.read_text())
    whats = [r["what"] for r in data["records"]]
    assert whats == ["second", "kept"]  # 01_a replaced, 02_b kept, sorted by lesson
    assert set(data["environments"]) == {"01_a", "02_b"}
    assert data["environment"]["torch"] == env.environment()["torch"]
    assert data["notes"] == {"01_a": "ran `compute-sanitizer`: 0 errors"}


def test_markdown_is_rendered_with_ratios(tmp_path):
    path = results.save("01_a", [_rec("01_a", "gelu", 2700.0, ceiling=3000.0,
                                      ceiling_what="copy bandwidth",
                                      peer=2600.0, peer_what="F.gelu")], directory=tmp_path)
    md = path.with_suffix(".md").read_text()
    assert md.startswith(f"# Results: {env.device_info().name}")
    assert "## 01_a" in md
    assert "| gelu | 2700 | GB/s | 3000 | 90.0% | copy bandwidth | 2600 | 1.04× | F.gelu |" in md


def test_a_record_of_another_lesson_is_refused(tmp_path):
    with pytest.raises(ValueError, match="belongs to"):
        results.save("01_a", [_rec("02_b", "x", 1.0)], directory=tmp_path)


def test_results_dir_defaults_to_var(monkeypatch):
    monkeypatch.delenv("COURSE_RESULTS_DIR", raising=False)
    assert results.results_dir() == env.VAR / "results"
