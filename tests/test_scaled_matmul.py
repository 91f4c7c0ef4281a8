"""fp8 with scales (kernels/scaled_matmul, kernels/matmul/hopper/scaled.py): quantising, the op's
checks and reference on any machine; lesson 17's use of lesson 16's kernel with scales, against
torch._scaled_mm with the same scales and against the float64 reference, on a Hopper GPU. (The
kernel matrix test runs every registered scaled_matmul kernel on the op's cases as well.)"""

import pytest
import torch

import kernels
from course_utils import nvrtc, sass
from kernels.matmul.hopper import scaled, wgmma
from kernels.scaled_matmul import E4M3, quantize, quantize_blocks, quantize_operands

pytestmark = pytest.mark.skipif(E4M3 is None, reason="this torch has no float8 types")


@pytest.mark.parametrize("form", ["tensor", "row"])
def test_quantize_keeps_each_row_in_range_and_round_trips(form):
    x = torch.randn(64, 256, dtype=torch.float64).float()
    x[3] *= 1000  # an outlier row
    q, scale = quantize(x, E4M3, form)
    assert q.dtype == E4M3 and scale.dtype == torch.float32
    assert scale.shape == ((1,) if form == "tensor" else (64, 1))
    assert q.float().abs().max() <= torch.finfo(E4M3).max
    back = q.float() * scale
    # e4m3 keeps 3 mantissa bits: 1/16 of each value's scale, relative to its row's largest
    per_row = x.abs().amax(dim=1, keepdim=True) if form == "row" else x.abs().amax()
    assert ((back - x).abs() <= per_row / 14).all()
    if form == "row":  # the outlier row no longer flattens the others: row 0 keeps its values
        assert (back[0] - x[0]).abs().max() < 0.2


def test_quantize_b_along_its_columns_and_zero_rows_get_scale_one():
    b = torch.randn(128, 40)  # [K, N]: one scale per column
    q, scale = quantize(b, E4M3, "row", k_dim=0)
    assert scale.shape == (1, 40)
    z, zscale = quantize(torch.zeros(4, 32), E4M3, "row")
    assert (zscale == 1).all() and (z.float() == 0).all()
    with pytest.raises(ValueError, match="form expected one of tensor, row .*quantize_blocks"):
        quantize(b, E4M3, "block")


def test_quantize_blocks_scales_each_block_on_its_own():
    x = torch.randn(130, 300)
    x[5, 200] = 1e4  # one outlier: only its 1 x 128 block of row 5 pays for it
    q, scale = quantize_blocks(x, E4M3, 1)
    assert scale.shape == (130, 3) and q.shape == x.shape
    full = scale.repeat_interleave(128, 1)[:, :300]
    back = q.float() * full
    assert ((back - x).abs() <= full * torch.finfo(E4M3).max / 14).all()
    assert scale[5, 1] > 100 * scale[5, 0] and scale[5, 0] == pytest.approx(scale[4, 0], rel=1)
    q2, scale2 = quantize_blocks(x, E4M3, 128)  # 128 x 128 blocks: [2, 3], edge blocks smaller
    assert scale2.shape == (2, 3)
    assert scale2[0, 1] == pytest.approx(1e4 / torch.finfo(E4M3).max)


def _problem(m, n, k, form, device="cpu"):
    return quantize_operands(torch.randn(m, k, device=device), torch.randn(n, k, device=device),
                             E4M3, form)


def test_bad_scales_are_named():
    a, b, sa, sb = _problem(32, 48, 64, "row")
    eager = kernels.get_kernel("scaled_matmul", "eager")
    with pytest.raises(ValueError, match=r"scale_b expected one value .* \[1, 48\]"):
        eager(a, b, sa, sb.t())
    with pytest.raises(ValueError, match="scale_a expected float32"):
        eager(a, b, sa.double(), sb)
    with pytest.raises(ValueError, match="a expected an fp8 tensor"):
        eager(a.float(), b, sa, sb)
    with pytest.raises(ValueError, match="b expected 64 rows"):
        eager(a, b[:32], sa, sb)


def test_block_scales_are_checked_and_come_in_pairs():
    a, b, sa, sb = _problem(32, 300, 320, "block")  # K = 320: 3 blocks, N = 300: 3 blocks
    assert sa.shape == (32, 3) and sb.shape == (3, 3)
    eager = kernels.get_kernel("scaled_matmul", "eager")
    with pytest.raises(ValueError, match=r"scale_b expected .* or a \[3, 3\] tensor"):
        eager(a, b, sa, sb[:2])
    with pytest.raises(ValueError, match="block scales come in pairs"):
        eager(a, b, sa, torch.ones(1, 300))
    with pytest.raises(ValueError, match=r"scale_a expected .* or a \[32, 3\] tensor"):
        eager(a, b, sa[:, :2], sb)


def test_block_reference_scales_each_k_block():
    # the definition written out block by block: sum over K blocks of sa * sb * partial product
    a, b, sa, sb = _problem(8, 200, 352, "block")
    got = kernels.get_kernel("scaled_matmul", "eager")(a, b, sa, sb)
    want = torch.zeros(8, 200, dtype=torch.float64)
    for kb in range(3):
        ks = slice(128 * kb, 128 * (kb + 1))
        part = a[:, ks].double() @ b[ks].double()
        want += part * sa[:, kb : kb + 1].double() * sb[kb].double().repeat_interleave(128)[:200]
    torch.testing.assert_close(got.double(), want, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("tile", scaled.BLOCK_TILES, ids=lambda t: t.name)
def test_block_scaled_kernel_census(tile):
    """The block-scaled kernel compiles for sm_90a on any machine; in SASS: fp8 wgmma 128 columns
    at a time (QGMMA 64x128), the promotion's FFMAs, registers moved, and no local memory."""
    if reason := nvrtc.unavailable_reason() or sass.unavailable_reason():
        pytest.skip(reason)
    for tma_store in (True, False):
        compiled = scaled.compile_block(tile, "fp8_e4m3", tma_store, verbose=False)
        census = sass.census(sass.disassemble(compiled))
        assert census["QGMMA"] == 4 * tile.bn // 128, census
        assert census["FFMA"] >= 64 * tile.bn // 128, census  # one per accumulator and K tile
        assert census["USETMAXREG"] == 2 and census["UTMALDG"] >= 2, census
        assert census["LDL"] == census["STL"] == 0, "accumulators spilled to local memory"
        assert (census["UTMASTG"] > 0) == tma_store, census


def test_block_tile_rule_prefers_the_wide_tile_when_it_fills_the_gpu():
    assert scaled.choose_block(8192, 8192, 132).name == "128x256"
    assert scaled.choose_block(1024, 1024, 132).name == "128x128"  # 32 wide tiles, 64 narrow


def test_reference_is_the_scaled_product():
    a, b, sa, sb = _problem(16, 24, 64, "row")
    got = kernels.get_kernel("scaled_matmul", "eager")(a, b, sa, sb)
    want = (a.double() @ b.double()) * sa.double() * sb.double()
    torch.testing.assert_close(got.double(), want, atol=1e-2, rtol=1e-2)


def test_wgmma_scaled_kernels_are_registered_for_each_fp8_variant():
    names = {k.variant for k in kernels.all_kernels("scaled_matmul") if k.provider == "wgmma"}
    assert names == {f"auto_{v}" for v in wgmma.VARIANTS if v.startswith("fp8")}


# -- on a Hopper GPU ---------------------------------------------------------------------------

def _hopper():
    if reason := wgmma.reason_here():
        pytest.skip(reason)


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["tensor", "row"])
@pytest.mark.parametrize("shape", [(512, 768, 1024), (300, 528, 2304), (16, 4096, 512)])
def test_wgmma_scaled_matches_scaled_mm_with_the_same_scales(form, shape):
    _hopper()
    a, b, sa, sb = _problem(*shape, form, device="cuda")
    mine = kernels.get_kernel("scaled_matmul", "wgmma", "auto_fp8_e4m3")(a, b, sa, sb)
    theirs = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    exact = (a.double() @ b.double()) * sa.double() * sb.double()
    scale = exact.abs().max().item()
    for name, got in (("wgmma", mine), ("_scaled_mm", theirs)):
        torch.testing.assert_close(got.double(), exact, atol=1e-2 * scale, rtol=1e-2,
                                   msg=lambda m, name=name: f"{name} {form} {shape}: {m}")


@pytest.mark.gpu
def test_new_scales_at_new_addresses_get_a_new_plan():
    # the prepared launch keys on the scales' addresses: fresh scale tensors must be read
    _hopper()
    k = kernels.get_kernel("scaled_matmul", "wgmma", "auto_fp8_e4m3")
    a, b, sa, sb = _problem(256, 256, 256, "row", device="cuda")
    first = k(a, b, sa, sb)
    second = k(a, b, sa * 2, sb)
    torch.testing.assert_close(second.double(), 2 * first.double(), atol=1e-2, rtol=1e-2)
    sa.mul_(3)  # same address, new values: read at launch
    torch.testing.assert_close(k(a, b, sa, sb).double(), 3 * first.double(), atol=2e-2,
                               rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(512, 768, 1024), (300, 520, 2304), (16, 4096, 512),
                                   (97, 200, 352), (1, 8, 32)])
def test_wgmma_block_scales_match_the_float64_reference(shape):
    _hopper()
    a, b, sa, sb = _problem(*shape, "block", device="cuda")
    k = kernels.get_kernel("scaled_matmul", "wgmma", "auto_fp8_e4m3")
    exact = kernels.get_kernel("scaled_matmul", "eager")(a.cpu(), b.cpu(), sa.cpu(), sb.cpu())
    scale = exact.double().abs().max().item()
    for tile in scaled.BLOCK_TILES:  # every tile, not only the one the rule picks
        got = scaled.run_blocks(a, b, sa, sb, wgmma.variant("fp8_e4m3"), tile)
        torch.testing.assert_close(got.cpu().double(), exact.double(), atol=1e-2 * scale,
                                   rtol=1e-2, msg=lambda m, t=tile: f"{t.name} {shape}: {m}")
    torch.testing.assert_close(k(a, b, sa, sb).cpu().double(), exact.double(),
                               atol=1e-2 * scale, rtol=1e-2)


@pytest.mark.gpu
def test_block_scales_are_read_at_each_launch():
    _hopper()
    k = kernels.get_kernel("scaled_matmul", "wgmma", "auto_fp8_e4m3")
    a, b, sa, sb = _problem(256, 384, 512, "block", device="cuda")
    first = k(a, b, sa, sb)
    sb.mul_(2)  # same addresses, new values: the prepared launch reads them
    torch.testing.assert_close(k(a, b, sa, sb).double(), 2 * first.double(), atol=2e-2,
                               rtol=1e-2)
