"""Lesson 19's quantiser figure (kernels/scaled_attention/figures.py): it draws without
overlapping labels for ragged and whole blocks, its tile, grid and strides are the quantiser's,
and it names what it cannot draw."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from test_matmul_figures import _overlapping_labels  # noqa: E402

from kernels.scaled_attention import figures, quantize  # noqa: E402


@pytest.mark.parametrize("args", [{}, {"seq": 50, "head_dim": 64}, {"seq": 256, "head_dim": 128},
                                  {"seq": 129, "head_dim": 80, "batch": 1, "heads": 3, "bh": 2}])
def test_quantize_figure_draws_without_overlapping_labels(args):
    fig = figures.quantize_tiles(**args)
    try:
        texts = [t.get_text() for t in fig.findobj(Text)]
        blocks = quantize.scale_blocks(args.get("seq", 300))
        assert sum(t.startswith("program (") for t in texts) == blocks  # one program per block
        assert _overlapping_labels(fig) == []
    finally:
        plt.close(fig)


def test_the_strides_drawn_are_the_quantiser_s():
    x = torch.randn(1, 1, 8, 4)
    q8, _ = quantize.quantize_blocks_torch(x)
    v8, _ = quantize.quantize_blocks_torch(x, keys_contiguous=True)
    assert q8.stride()[2:] == (4, 1) and v8.stride()[2:] == (1, 8)  # V: keys contiguous
    fig = figures.quantize_tiles(seq=20, head_dim=16)
    try:
        texts = [t.get_text() for t in fig.findobj(Text)]
        assert any("(s8s, s8d) = (4, 1)" in t for t in texts)
        assert any("(s8s, s8d) = (1, 8)" in t for t in texts)
        assert any(f"BLOCK_D = {16}" in t for t in texts)
    finally:
        plt.close(fig)


@pytest.mark.parametrize(("args", "name"), [({"seq": 0}, "seq"), ({"bh": 4}, "bh"),
                                            ({"head_dim": 2.5}, "head_dim")])
def test_bad_arguments_name_themselves(args, name):
    with pytest.raises(ValueError, match=name):
        figures.quantize_tiles(**args)
