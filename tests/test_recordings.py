"""Recorded GPU output: written from an executed notebook, shown under a skip line, stale when
the cell changed; the committed recordings match the notebooks and stay small."""

import base64
import json

import nbformat
from IPython.core.interactiveshell import InteractiveShell

from course_utils import env, recordings, requirements

# a 1x1 PNG
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()
ENV = {"device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0", "date": "2026-11-23 08:00 UTC",
       "git": "abc1234"}
SOURCE = "%%requires cuda\nprint('fast')"


def _executed(source=SOURCE):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="1.00 of copy bandwidth\n"),
        nbformat.v4.new_output("stream", name="stderr", text="Kineto chatter\n"),
        nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "<Fig>"}),
    ]
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), cell]
    return nb


def test_recording_keeps_text_and_figures_not_stderr(tmp_path):
    nb = _executed()
    path = recordings.record_notebook(json.loads(nbformat.writes(nb)), "01_x", ENV, tmp_path)
    data = json.loads(path.read_text())
    (cell,) = data["cells"]
    assert cell["hash"] == recordings.source_hash(SOURCE)
    assert cell["outputs"][0] == {"text": "1.00 of copy bandwidth\n"}
    assert (tmp_path / "01_x" / cell["outputs"][1]["image"]).read_bytes().startswith(b"\x89PNG")
    assert "Kineto" not in path.read_text()


def test_show_prints_the_label_and_output_and_marks_stale(tmp_path, capsys):
    recordings.record_notebook(json.loads(nbformat.writes(_executed())), "01_x", ENV, tmp_path)
    assert recordings.show("%%requires  cuda\nprint('fast')\n", tmp_path)  # spacing differs
    out = capsys.readouterr().out
    assert "recorded on NVIDIA H100 80GB HBM3 · torch 2.11.0 · 2026-11-23 08:00 UTC · git " \
           "abc1234" in out and "1.00 of copy bandwidth" in out and "stale" not in out
    assert recordings.show("%%requires cuda\nprint('faster')", tmp_path)
    assert "EARLIER VERSION" in capsys.readouterr().out
    assert not recordings.show("%%requires nvcc\nsomething else entirely", tmp_path)


def test_freshness_lists_stale_orphaned_and_missing(tmp_path):
    nb = _executed()
    notebooks = tmp_path / "nb"
    notebooks.mkdir()
    recordings.record_notebook(json.loads(nbformat.writes(nb)), "01_x", ENV, tmp_path)
    recorded_id = nb.cells[1]["id"]
    nb.cells[1].source = "%%requires cuda\nprint('changed')"
    nb.cells.append(nbformat.v4.new_code_cell("%%requires nvcc\nprint(2)"))
    nbformat.write(nb, str(notebooks / "01_x.ipynb"))
    (report,) = recordings.freshness(notebooks, tmp_path)
    assert report.stale == [recorded_id] and report.fresh == []
    assert report.missing == [nb.cells[2]["id"]] and report.orphaned == []


def test_a_carried_cell_keeps_the_environment_of_its_own_run(tmp_path, capsys):
    # a cell moved, unchanged, into another notebook's recording (a lesson split in two)
    path = recordings.record_notebook(json.loads(nbformat.writes(_executed())), "09_x", ENV,
                                      tmp_path)
    data = json.loads(path.read_text())
    data["cells"][0]["environment"] = {**ENV, "git": "0ld0ld0"}
    path.write_text(json.dumps(data))
    assert recordings.show(SOURCE, tmp_path)
    assert "git 0ld0ld0" in capsys.readouterr().out


def test_skipped_cell_shows_its_recording(tmp_path, monkeypatch, capsys):
    recordings.record_notebook(json.loads(nbformat.writes(_executed("%%requires never\nran = 1"))),
                               "01_x", ENV, tmp_path)
    monkeypatch.setattr(recordings, "RECORDINGS", tmp_path)
    monkeypatch.setitem(requirements.REQUIREMENTS, "never", lambda: "the test says no")
    monkeypatch.setattr(env, "STRICT", False)
    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext course_utils")
    capsys.readouterr()  # ("already loaded" when another test loaded it in this process)
    assert shell.run_cell("%%requires never\nran = 1").success
    out = capsys.readouterr().out
    assert out.startswith("skipped this cell: needs never: the test says no\n── recorded on")
    assert "1.00 of copy bandwidth" in out


def test_committed_recordings_are_fresh():
    stale = [(f.notebook, cell) for f in recordings.freshness() for cell in f.stale + f.orphaned]
    assert not stale, (f"recordings of cells that changed or are gone: {stale}; refresh them on a "
                       "GPU box with `make record` (see README)")


def test_committed_recordings_stay_small():
    files = [p for p in recordings.RECORDINGS.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    assert total < 5e6, f"docs/recordings holds {total / 1e6:.1f} MB (budget 5 MB)"
    for path in files:
        assert path.stat().st_size < 600e3, f"{path} is {path.stat().st_size / 1e3:.0f} kB"


def test_a_really_executed_notebook_records_its_figure(tmp_path):
    # the path `make record` takes on a GPU, here with a cell whose requirement is met
    from course_utils import run_notebooks

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext course_utils"),
                nbformat.v4.new_code_cell(
                    "%%requires cxx\nimport matplotlib.pyplot as plt\nprint('drawn')\n"
                    "plt.plot([1, 2], [3, 4]);")]
    path = tmp_path / "01_fig.ipynb"
    nbformat.write(nb, str(path))
    outcome = run_notebooks.execute(path, timeout=120, out_dir=tmp_path / "out")
    assert outcome.ok, outcome.error
    executed = json.loads(outcome.executed_path.read_text())
    written = recordings.record_notebook(executed, "01_fig", ENV, tmp_path / "rec")
    (cell,) = json.loads(written.read_text())["cells"]
    assert cell["outputs"][0] == {"text": "drawn\n"}
    (image,) = [o["image"] for o in cell["outputs"] if "image" in o]
    assert (tmp_path / "rec" / "01_fig" / image).read_bytes().startswith(b"\x89PNG")


def test_a_recording_goes_stale_with_the_kernels_its_cell_ran(tmp_path, capsys):
    # the cell imports a kernel module in an earlier cell and uses it under %%requires
    nb = _executed("%%requires cuda\nprint(naive.attention)")
    nb.cells[0].source = "from kernels.attention import naive"
    path = recordings.record_notebook(json.loads(nbformat.writes(nb)), "01_x", ENV, tmp_path)
    (cell,) = json.loads(path.read_text())["cells"]
    assert "kernels/attention/naive.py" in cell["kernels"], cell["kernels"]
    assert recordings.show("%%requires cuda\nprint(naive.attention)", tmp_path)
    assert "CHANGED" not in capsys.readouterr().out  # recorded from these very files
    data = json.loads(path.read_text())
    data["cells"][0]["kernels"]["kernels/attention/naive.py"] = "0" * 12  # as if edited since
    path.write_text(json.dumps(data))
    assert recordings.show("%%requires cuda\nprint(naive.attention)", tmp_path)
    assert "have CHANGED since (kernels/attention/naive.py)" in capsys.readouterr().out


def test_prose_in_a_kernel_file_leaves_its_recordings_fresh():
    from course_utils import cell_kernels

    code = 'def f():\n    """Why."""\n    return 1  # a remark\n'
    edited = 'def f():\n    """Why, better said."""\n\n    return 1\n'
    cuda = "__global__ void k() { /* old */ int i = 0; // note\n}"
    assert cell_kernels._code_only("a.py", code) == cell_kernels._code_only("a.py", edited)
    assert cell_kernels._code_only("a.py", code) != cell_kernels._code_only(
        "a.py", code.replace("1", "2"))
    assert cell_kernels._code_only("k.cu", cuda) == cell_kernels._code_only(
        "k.cu", "__global__ void k() {\n  int i = 0;\n}")
