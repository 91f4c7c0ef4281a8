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


def _overlaps(fig, texts):
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in texts]
    return [(a.get_text(), b.get_text()) for i, a in enumerate(texts) for b in texts[i + 1:]
            if boxes[texts.index(a)].overlaps(boxes[texts.index(b)])]


def test_ceilings_share_a_line_per_value_and_do_not_collide():
    fig, ax = plots.figure("peaks")
    ax.plot([1, 2], [0, 1000])
    plots.ceilings(ax, [(989, "bfloat16", "#1f77b4"), (989, "float16", "#2ca02c"),
                        (990, "fp8 (made up)", None), (67, "float32", None)])
    labels = [t.get_text() for t in ax.texts]
    assert "bfloat16 / float16: 989" in labels and len(labels) == 3
    assert len([ln for ln in ax.lines if ln.get_linestyle() == "--"]) == 3
    assert not _overlaps(fig, ax.texts)


def test_point_labels_merge_close_points_and_do_not_collide():
    fig, ax = plots.figure("roofline")
    points = [(1.25, 2.9, "gelu triton"), (1.25, 2.95, "gelu cuda vectorized"),
              (1.25, 2.92, "gelu eager"), (0.12, 0.3, "gelu manual"),
              (0.13, 0.31, "softmax manual"), (0.6, 1.4, "softmax triton"),
              (0.62, 1.38, "softmax eager")]
    for x, y, _ in points:
        ax.scatter(x, y)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    texts = plots.label_points(ax, points)
    labels = [t.get_text() for t in texts]
    assert "gelu: triton, cuda vectorized, eager" in labels
    assert not _overlaps(fig, texts)


def test_legend_outside_sits_beside_the_axes():
    fig, ax = plots.figure("legend")
    ax.plot([1, 2], [1, 2], label="a")
    plots.legend_outside(ax)
    fig.canvas.draw()
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1


def test_note_and_stamp_do_not_overlap():
    fig, ax = plots.figure("note")
    plots.note(fig, "first line\nsecond line\nthird line")
    plots.stamp(fig)
    below = [t for t in fig.texts if t.get_position()[1] < 0]
    assert len(below) == 2 and not _overlaps(fig, below)


def test_matmul_sweep_plot_labels_shared_peaks_once_and_explains_long_bars():
    from course_utils.timing import Timing
    from kernels.matmul import bench as mm

    points = [mm.SweepPoint(dtype=d, n=n, timing=Timing("t", times, "cuda"), peak=peak)
              for d, peak in (("bfloat16", 989.0), ("float16", 989.0))
              for n, times in ((2048, (0.021, 0.030, 0.034)), (4096, (0.17, 0.18, 0.27)))]
    fig, _ = mm.plot_sweep(points, name="test_sweep")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["bfloat16 / float16 datasheet peak: 989"]
    assert any("Long bars at bfloat16 n=2048" in t.get_text() for t in fig.texts)
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
    (env.VAR / "figures" / "test_sweep.png").unlink()
