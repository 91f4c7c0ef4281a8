"""course_utils.doctor: the machine report and the lesson table derived from %%requires lines."""

import nbformat

from course_utils import doctor, env, requirements


def _notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# title")]
    nb.cells += [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, str(path))


def test_requires_lines_are_parsed(tmp_path):
    _notebook(tmp_path / "01_x.ipynb", "%load_ext course_utils",
              "%%requires cuda nvcc\nprint(1)", "  %%requires sm_90, triton-gpu\nx", "y = 1")
    lesson = doctor.read_lesson(tmp_path / "01_x.ipynb")
    assert lesson.cells == 4
    assert lesson.requirements == [("cuda", "nvcc"), ("sm_90", "triton-gpu")]


def test_lesson_table_says_what_falls_back_and_why(tmp_path):
    _notebook(tmp_path / "01_plain.ipynb", "x = 1")
    _notebook(tmp_path / "02_gpu.ipynb", "%%requires cuda\nx", "%%requires cuda\ny")
    _notebook(tmp_path / "03_mixed.ipynb", "%%requires cuda nvcc\nx", "%%requires sm_999\ny",
              "z = 1")
    rows = {name: (verdict, detail)
            for name, verdict, detail in doctor.lesson_rows(doctor.lessons(tmp_path))}
    assert rows["01_plain"][0] == "runs fully"
    if env.HAS_CUDA:
        assert rows["02_gpu"][0] == "runs fully"
    else:
        verdict, detail = rows["02_gpu"]
        assert verdict == "falls back (2 of 2 cells skip)"
        assert detail == f"needs cuda (2×): {requirements.unmet('cuda')[0]}"
    verdict, detail = rows["03_mixed"]
    # each requirement line once with its count, each distinct reason once
    assert verdict.startswith("falls back (")
    assert "sm_999 (1×)" in detail
    for reason in requirements.unmet("sm_999"):
        assert detail.count(reason) == 1


def test_main_prints_the_machine_and_lessons(tmp_path, capsys):
    _notebook(tmp_path / "01_a.ipynb", "%%requires cxx\nx")
    assert doctor.main(["--notebooks", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for what in ("Python", "torch", "GPU", "nvcc", "NVRTC", "Triton", "C++ compiler", "01_a"):
        assert what in out
    mode = "interpreter" if env.TRITON_INTERPRET else "GPU"
    assert mode in out


def test_unknown_requirement_in_a_notebook_is_flagged(tmp_path, capsys):
    _notebook(tmp_path / "01_typo.ipynb", "%%requires cdua\nx")
    assert doctor.main(["--notebooks", str(tmp_path)]) == 1
    assert "unknown requirement 'cdua'" in capsys.readouterr().out


def test_no_notebooks_is_an_error(tmp_path):
    assert doctor.main(["--notebooks", str(tmp_path)]) == 1


def test_every_requirement_name_is_listed_with_its_status():
    rows = dict(doctor.requirement_rows())
    assert set(requirements.REQUIREMENTS) <= set(rows)
    for name, status in rows.items():
        assert status == ("; ".join(requirements.unmet(name)) or "met")


def test_output_rows_count_real_and_skipped_cells(tmp_path):
    _notebook(tmp_path / "01_a.ipynb", "x = 1", "%%requires sm_999\ny", "z = 2", "w = 3")
    rows, share = doctor.output_rows(doctor.lessons(tmp_path))
    assert rows == [("01_a", "3/4 real (75%)", "recorded 0, stale 0, skip line only 1")]
    assert share == 0.75
