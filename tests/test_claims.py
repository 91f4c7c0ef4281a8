"""Prose that agrees with the records (course_utils.claims): sentences and verdicts computed from
the records, and every ``<!-- record: ... -->`` quote in the notebooks and docs checked."""

import json
from pathlib import Path

import pytest

from course import prose_checks
from course_utils import claims, results
from course_utils.results import Record

ROOT = Path(__file__).resolve().parents[1]
PROSE = sorted(ROOT.glob("notebooks/*.ipynb")) + [ROOT / "README.md"] + sorted(
    (ROOT / "docs").glob("*.md"))


@pytest.fixture
def recorded_dir(tmp_path):
    """A results file with one compute-bound and two memory-bound records."""
    results.save("05_x", [Record("05_x", "mma bf16 4096^3", 391.1, "TFLOP/s", 607.7,
                                 "mma.sync ceiling, same run", 784.3,
                                 "torch.mm (cuBLAS), same run")], directory=tmp_path)
    results.save("02_x", [Record("02_x", "gelu triton float32", 2990.0, "GB/s", 3000.0,
                                 "device copy bandwidth, same run", 2980.0, "F.gelu, same run"),
                          Record("02_x", "gelu compile float32", 1680.0, "GB/s", 3000.0,
                                 "device copy bandwidth, same run", 2980.0, "F.gelu, same run")],
                 directory=tmp_path)
    slug = claims.results_files(tmp_path)[0]
    return tmp_path, slug


def test_sentence_and_verdicts_come_from_the_record(recorded_dir):
    directory, slug = recorded_dir
    recorded = claims.load(slug, directory)
    mma = recorded.find("05_x", "mma bf16 4096^3")
    text = claims.sentence(mma, recorded)
    assert "391 TFLOP/s" in text and "0.64 of the mma.sync ceiling" in text
    assert "0.50× torch.mm (cuBLAS)" in text and "same run" in text
    missed = claims.against_target(mma, 0.75, recorded=recorded)
    assert not missed.met and missed.word == "misses" and "misses the target" in str(missed)
    assert claims.against_target(mma, 0.45, against="peer").met
    gelu = {r.what: r for r in recorded.of("02_x")}
    assert "near the copy line" in claims.against_copy(gelu["gelu triton float32"])
    assert "56% of the copy line" in claims.against_copy(gelu["gelu compile float32"])


def test_bad_input_names_the_argument(recorded_dir):
    directory, slug = recorded_dir
    recorded = claims.load(slug, directory)
    mma = recorded.find("05_x", "mma bf16 4096^3")
    with pytest.raises(ValueError, match="against expected"):
        claims.against_target(mma, 0.8, against="cuBLAS")
    with pytest.raises(ValueError, match="field expected"):
        claims.field(mma, "ratio")
    with pytest.raises(ValueError, match="near:"):
        recorded.find("05_x", "mma bf16 8192^3")
    with pytest.raises(FileNotFoundError, match="slug expected"):
        claims.load("no-such-gpu", directory)


def test_with_lesson_prefers_the_reference_gpu_then_any_with_records(recorded_dir):
    directory, slug = recorded_dir
    assert claims.with_lesson("05_x", prefer="absent", directory=directory).slug == slug
    assert claims.with_lesson("99_none", directory=directory) is None


def _problems(text, directory, slug):
    text = text.replace("SLUG", slug)
    found = prose_checks.quotes(text, "test")
    return [q.problem(directory) for q in found]


def test_a_quoted_number_must_match_the_record_to_its_digits(recorded_dir):
    directory, slug = recorded_dir
    q = "<!-- record: 05_x | mma bf16 4096^3 | {} | SLUG -->"
    ok = [f"0.64{q.format('of ceiling')} of the ceiling",
          f"**391 TFLOP/s**{q.format('value')}",
          f"64%{q.format('of ceiling')}",
          f"0.5× cuBLAS{q.format('vs peer')}, 608{q.format('ceiling')}",
          f"misses{q.format('of ceiling < 0.75')} the target"]
    for text in ok:
        assert _problems(text, directory, slug) == [None] * text.count("record:"), text
    wrong = [f"0.70{q.format('of ceiling')}", f"390 TFLOP/s{q.format('value')}",
             f"reaches{q.format('of ceiling >= 0.75')}",
             f"a quote with no number{q.format('peer')}"]
    for text in wrong:
        assert _problems(text, directory, slug)[0], text
    gone = "1.0<!-- record: 05_x | mma bf16 1^3 | value | SLUG -->"
    assert "near" in _problems(gone, directory, slug)[0] or "got none" in _problems(
        gone, directory, slug)[0]


def test_malformed_quotes_raise():
    with pytest.raises(ValueError, match="LESSON \\| WHAT \\| FIELD"):
        prose_checks.quotes("1<!-- record: only one part -->")
    with pytest.raises(ValueError, match="field expected"):
        prose_checks.quotes("1<!-- record: 05 | x | share -->")
    # an example in backticks is not a quote
    example = "write `0.64<!-- record: L | W | of ceiling -->` after the number"
    assert prose_checks.quotes(example) == []


def test_every_quote_in_the_notebooks_and_docs_agrees_with_the_records():
    count, problems = prose_checks.check_markdown(PROSE)
    assert not problems, "\n".join(problems)
    assert count >= 3, f"expected the course's prose to quote records, found {count} quotes"


def test_a_recorded_quote_must_be_what_the_cell_printed(tmp_path):
    recording = {"format": 1, "notebook": "03_x.ipynb", "environment": {}, "cells": [
        {"id": "a", "hash": "h", "source": "%%requires cuda",
         "outputs": [{"text": "DRAM throughput: naive 59%, vectorised 80% of peak\n"}]}]}
    (tmp_path / "03_x.json").write_text(json.dumps(recording))
    ok = "59%<!-- recorded: 03_x | naive 59%,   vectorised 80% -->"
    assert prose_checks.recorded_problems(ok, folder=tmp_path) == (1, [])
    count, wrong = prose_checks.recorded_problems("64%<!-- recorded: 03_x | naive 64% -->",
                                            folder=tmp_path)
    assert count == 1 and "printed 'naive 64%'" in wrong[0]
    assert prose_checks.recorded_problems("<!-- recorded: 99_y | z -->", folder=tmp_path)[1]
    with pytest.raises(ValueError, match="NOTEBOOK \\| TEXT"):
        prose_checks.recorded_problems("<!-- recorded: only -->", folder=tmp_path)


def test_every_recorded_quote_in_the_notebooks_and_docs_is_in_the_recordings():
    count, problems = prose_checks.check_recorded(PROSE)
    assert not problems, "\n".join(problems)
    assert count >= 3, f"expected the prose to quote recorded outputs, found {count}"
