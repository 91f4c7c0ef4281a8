"""course_utils.plots: one style, figures saved under var/figures and stamped."""

import matplotlib

matplotlib.use("Agg")

from course_utils import env, plots  # noqa: E402


def test_figure_save_and_stamp():
    fig, ax = plots.figure("a test figure", xlabel="n", ylabel="GB/s")
    ax.plot([1, 2, 3], [1, 4, 9], color=plots.color("triton"))
    plots.ceiling(ax, 10.0, "copy bandwidth")
    path = plots.save(fig, "test_plots_figure")
    assert path == env.VAR / "figures" / "test_plots_figure.png"
    assert path.stat().st_size > 1000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    texts = [t.get_text() for t in fig.texts]
    assert env.environment_line() in texts
    assert fig._suptitle.get_text() == "a test figure"
    assert ax.get_xlabel() == "n" and ax.get_ylabel() == "GB/s"
    assert any("copy bandwidth: 10" in t.get_text() for t in ax.texts)
    path.unlink()


def test_several_axes():
    fig, axes = plots.figure("two panels", ncols=2)
    assert len(axes) == 2


def test_provider_colours_are_stable():
    assert plots.color("triton") == plots.color("triton vectorized") == "#1f77b4"
    assert plots.color("kernels/cuda") == plots.PROVIDER_COLORS["cuda"]
    assert plots.color("unknown-provider") is None


def test_stamped_table():
    table = plots.stamped_table([{"kernel": "eager", "GB/s": 1234.5, "ratio": 0.25},
                                 {"kernel": "triton", "GB/s": 2900.0, "ratio": None}],
                                title="bandwidth")
    lines = table.splitlines()
    assert lines[0] == "bandwidth"
    assert lines[1].split() == ["kernel", "GB/s", "ratio"]
    assert "1,234" in table or "1,235" in table
    assert lines[-1] == f"[{env.environment_line()}]"
    assert "(no rows)" in plots.stamped_table([], title="empty")
