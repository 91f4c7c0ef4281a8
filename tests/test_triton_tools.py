"""Lesson 13's helpers: the tiled copy three ways (kernels/tiles), the autotuned softmax
(kernels/softmax/autotuned.py) and the reader of torch.compile's code
(course_utils/inductor_code.py)."""

import warnings

import pytest
import torch

from course_utils import env, inductor_code
from kernels.softmax import autotuned
from kernels.tiles import triton_tiles

DEVICE = env.DEFAULT_DEVICE


@pytest.fixture(autouse=True)
def _quiet_block_ptr():
    with warnings.catch_warnings():  # Triton 3.8 deprecates tl.make_block_ptr (3.6 does not)
        warnings.filterwarnings("ignore", message="tl.make_block_ptr is deprecated")
        yield


@pytest.mark.parametrize("way", list(triton_tiles.KERNELS))
@pytest.mark.parametrize("shape", [(37, 52), (16, 32), (1, 4), (0, 8)])
def test_every_way_copies_ragged_tiles(way, shape):
    x = torch.randn(*shape, device=DEVICE)
    assert torch.equal(triton_tiles.copy(x, way, block=(16, 32)), x)


def test_a_row_view_is_copied_through_its_stride():
    x = torch.randn(20, 64, device=DEVICE)[:, :48]  # row stride 64, 48 columns
    for way in triton_tiles.KERNELS:
        assert torch.equal(triton_tiles.copy(x, way, block=(16, 16)), x), way


def test_bad_arguments_are_value_errors_naming_them():
    with pytest.raises(ValueError, match="way expected one of"):
        triton_tiles.copy(torch.ones(4, 4, device=DEVICE), "magic")
    with pytest.raises(ValueError, match="x expected a 2-D tensor"):
        triton_tiles.copy(torch.ones(4, device=DEVICE))
    with pytest.raises(ValueError, match="x: a tensor descriptor needs a 16-byte aligned row"):
        triton_tiles.copy(torch.ones(3, 7, device=DEVICE), "tensor descriptor")
    with pytest.raises(ValueError, match="padding expected"):
        triton_tiles.edge_tile(torch.ones(4, 4, device=DEVICE), "one")


def test_descriptor_problem_names_each_rule():
    assert triton_tiles.descriptor_problem(torch.ones(4, 8)) is None
    assert "contiguous columns" in triton_tiles.descriptor_problem(torch.ones(8, 4).t())
    assert "row stride" in triton_tiles.descriptor_problem(torch.ones(4, 5))
    assert "base address" in triton_tiles.descriptor_problem(torch.ones(40)[1:33].view(4, 8))


@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_a_ragged_tile_holds_its_padding(padding):
    x = torch.randn(10, 13, device=DEVICE)
    tile = triton_tiles.edge_tile(x, padding)  # rows 8..15, columns 8..15: 2 x 5 inside
    assert torch.equal(tile[:2, :5], x[8:, 8:])
    outside = torch.cat([tile[:2, 5:].flatten(), tile[2:].flatten()])
    assert (outside.isnan() if padding == "nan" else outside == 0).all()


def test_prune_drops_idle_lanes_and_spills():
    keep = lambda block: [c.num_warps for c in autotuned.prune(autotuned.CONFIGS, {},  # noqa: E731
                                                                 BLOCK=block)]
    assert keep(128) == [1, 2, 4]  # 8 warps = 256 threads for 128 elements: idle lanes
    assert keep(16384) == [8, 16, 32]  # 4 warps: 128 floats a thread, spills
    assert keep(1) == [1]


@pytest.mark.skipif(not env.TRITON_INTERPRET, reason="times every candidate on a GPU: slow")
def test_the_autotuner_tunes_once_per_key_and_dtype():
    tuner = autotuned.make()
    for rows, cols, dtype in [(3, 100, torch.float32), (9, 100, torch.float32),
                              (3, 200, torch.float32), (3, 100, torch.float16)]:
        x = torch.randn(rows, cols).to(dtype)
        torch.testing.assert_close(autotuned.softmax(x, tuner), torch.softmax(x, 1),
                                   atol=1e-3, rtol=1e-3)
    assert sorted(tuner.cache) == sorted([(100, "torch.float32", "torch.float32"),
                                          (200, "torch.float32", "torch.float32"),
                                          (100, "torch.float16", "torch.float16")])
    with pytest.raises(ValueError, match="x expected a 2-D tensor"):
        autotuned.softmax(torch.ones(3), tuner)


def test_cpu_do_bench_returns_the_quantiles_asked():
    times = autotuned.cpu_do_bench(lambda: torch.ones(10).sum(), quantiles=(0.5, 0.2, 0.8))
    assert len(times) == 3 and all(t > 0 for t in times)


_TRITON_WRAPPER = """
triton_poi_fused_add_mul_tanh_0 = async_compile.triton('triton_poi_fused_add_mul_tanh_0', '''
import triton
import triton.language as tl

@triton.jit
def triton_poi_fused_add_mul_tanh_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 1000
    xoffset = tl.program_id(0) * XBLOCK
''', device_str='cuda')
"""


def test_kernels_are_found_in_a_triton_wrapper():
    language, found = inductor_code.kernels_in(_TRITON_WRAPPER)
    assert language == "triton" and list(found) == ["triton_poi_fused_add_mul_tanh_0"]
    assert found["triton_poi_fused_add_mul_tanh_0"].startswith("import triton")
    assert inductor_code.lines_with(found["triton_poi_fused_add_mul_tanh_0"], "program_id") == \
        ["xoffset = tl.program_id(0) * XBLOCK"]
    assert inductor_code.kernels_in("def call(args): pass") == ("none", {})


def test_generated_code_of_the_gelu_runs_and_is_read_back():
    from kernels.gelu.pytorch import gelu_manual

    x = torch.randn(1000, device=DEVICE)
    made = inductor_code.generated(gelu_manual, x)
    assert made.language == ("triton" if env.HAS_CUDA else "c++")
    assert len(made.kernels) == 1 and "tanh" in made.kernel()
    torch.testing.assert_close(made.output, gelu_manual(x))
    with pytest.raises(ValueError, match="fn expected a callable"):
        inductor_code.generated("gelu", x)
    with pytest.raises(ValueError, match="generated no kernel"):
        inductor_code.Generated(None, "", {}, "none").kernel()
