"""upscale / interpolate / upscale_ext against numpy references (ggml's sampling rules)."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values


@pytest.mark.parametrize("mode", [gg.SCALE_MODE_NEAREST, gg.SCALE_MODE_BILINEAR])
@pytest.mark.parametrize("f", [2, 3])
def test_upscale(mode, f):
    ctx = gg.Context(4 << 20)
    a, av = new(ctx, gg.F32, [7, 5, 3, 2], rng=np.random.default_rng(f))
    r = gg.upscale(ctx, a, f, mode)
    compute(ctx, r)
    assert list(r.ne) == [7 * f, 5 * f, 3, 2]
    assert_close(values(r), ref.upscale(av, r.ne, mode), 1e-7)


@pytest.mark.parametrize("mode", [gg.SCALE_MODE_NEAREST, gg.SCALE_MODE_BILINEAR,
                                  gg.SCALE_MODE_BILINEAR | gg.SCALE_FLAG_ALIGN_CORNERS])
@pytest.mark.parametrize("ne", [(14, 2, 3, 1), (5, 9, 6, 2), (3, 3, 1, 1), (1, 1, 3, 1)])
def test_interpolate(mode, ne):
    ctx = gg.Context(4 << 20)
    a, av = new(ctx, gg.F32, [9, 4, 3, 1], rng=np.random.default_rng(sum(ne)))
    view = gg.permute(ctx, gg.cont(ctx, gg.permute(ctx, a, 1, 0, 2, 3)), 1, 0, 2, 3)  # strided dims 0/1
    r = gg.interpolate(ctx, view, *ne, mode)
    r_ext = gg.upscale_ext(ctx, a, *ne, mode)
    compute(ctx, r, r_ext)
    exp = ref.upscale(av, ne, mode)
    assert_close(values(r), exp, 1e-7)
    np.testing.assert_array_equal(values(r_ext), values(r))


@pytest.mark.parametrize("mode", [gg.SCALE_MODE_BICUBIC, gg.SCALE_MODE_BICUBIC | gg.SCALE_FLAG_ALIGN_CORNERS])
@pytest.mark.parametrize("ne", [(16, 7, 2, 1), (5, 3, 2, 1)])
def test_bicubic(mode, ne):
    ctx = gg.Context(4 << 20)
    a, av = new(ctx, gg.F32, [9, 6, 2, 1], rng=np.random.default_rng(sum(ne)))
    r = gg.interpolate(ctx, a, *ne, mode)
    compute(ctx, r)
    assert_close(values(r), ref.upscale(av, ne, mode), 1e-7)


def test_antialias_properties():
    """Antialiased bilinear downsampling keeps a constant image constant and averages a
    checkerboard to its mean (a plain bilinear sample would keep the extremes)."""
    ctx = gg.Context(4 << 20)
    const = ctx.new_tensor(gg.F32, [12, 10])
    const.set(np.full((10, 12), 3.5, np.float32))
    board = ctx.new_tensor(gg.F32, [16, 16])
    board.set((np.indices((16, 16)).sum(axis=0) % 2).astype(np.float32))
    aa = gg.interpolate(ctx, const, 5, 4, 1, 1, gg.SCALE_MODE_BILINEAR | gg.SCALE_FLAG_ANTIALIAS)
    ab = gg.interpolate(ctx, board, 4, 4, 1, 1, gg.SCALE_MODE_BILINEAR | gg.SCALE_FLAG_ANTIALIAS)
    compute(ctx, aa, ab)
    np.testing.assert_allclose(values(aa), 3.5, rtol=1e-6)
    np.testing.assert_allclose(values(ab), 0.5, atol=0.05)


def test_upscale_rejects():
    ctx = gg.Context(1 << 20)
    a = ctx.new_tensor(gg.F32, [4, 4])
    with pytest.raises(ValueError, match="scale_factor"):
        gg.upscale(ctx, a, 1, 0)
    with pytest.raises(ValueError, match="mode"):
        gg.interpolate(ctx, a, 8, 8, 1, 1, 7)
    with pytest.raises(ValueError, match="antialias"):
        gg.interpolate(ctx, a, 8, 8, 1, 1, gg.SCALE_MODE_NEAREST | gg.SCALE_FLAG_ANTIALIAS)
    with pytest.raises(TypeError, match="interpolate"):
        gg.interpolate(ctx, ctx.new_tensor(gg.F16, [4, 4]), 8, 8, 1, 1, 0)
