"""win_part, win_unpart, get_rel_pos, add_rel_pos against numpy references."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values


@pytest.mark.parametrize("W,H,w", [(8, 8, 4), (5, 4, 3), (7, 2, 3), (3, 3, 5)])
def test_win_part_unpart_roundtrip(W, H, w):
    ctx = gg.Context(4 << 20)
    a, av = new(ctx, gg.F32, [6, W, H], rng=np.random.default_rng(W * H))
    part = gg.win_part(ctx, a, w)
    back = gg.win_unpart(ctx, part, W, H, w)
    compute(ctx, part, back)
    np.testing.assert_array_equal(values(part), ref.win_part(av[0], w))
    np.testing.assert_array_equal(values(back)[0], av[0])
    # unpart of arbitrary windows crops as the reference does
    win, wv = new(ctx, gg.F32, list(part.ne), rng=np.random.default_rng(1))
    un = gg.win_unpart(ctx, win, W, H, w)
    compute(ctx, un)
    np.testing.assert_array_equal(values(un)[0], ref.win_unpart(wv, W, H, w))


def test_win_part_strided_channels():
    ctx = gg.Context(4 << 20)
    a, av = new(ctx, gg.F32, [5, 6, 7], rng=np.random.default_rng(3))
    v = gg.permute(ctx, gg.cont(ctx, gg.permute(ctx, a, 1, 0, 2, 3)), 1, 0, 2, 3)  # channels strided
    r = gg.win_part(ctx, v, 4)
    compute(ctx, r)
    np.testing.assert_array_equal(values(r), ref.win_part(av[0], 4))


@pytest.mark.parametrize("type_", [gg.F16, gg.BF16])
@pytest.mark.parametrize("h", [1, 5, 8])
def test_get_rel_pos(type_, h):
    ctx = gg.Context(1 << 20)
    a = ctx.new_tensor(type_, [3, 2 * h - 1])
    a.set(np.random.default_rng(h).uniform(-1, 1, (2 * h - 1, 3)).astype(np.float32))
    r = gg.get_rel_pos(ctx, a, h, h)
    compute(ctx, r)
    assert r.type == type_
    np.testing.assert_array_equal(values(r)[0], ref.get_rel_pos(values(a)[0, 0], h))


@pytest.mark.parametrize("W,qh,B", [(3, 2, 2), (4, 4, 1), (5, 3, 3)])
def test_add_rel_pos(W, qh, B):
    ctx = gg.Context(4 << 20)
    rng = np.random.default_rng(W + qh + B)
    a, av = new(ctx, gg.F32, [W * W, W * qh, B], rng=rng)
    pw, pwv = new(ctx, gg.F32, [W, W, qh, B], rng=rng)
    ph, phv = new(ctx, gg.F32, [W, W, qh, B], rng=rng)
    r = gg.add_rel_pos(ctx, a, pw, ph)
    a2, _ = new(ctx, gg.F32, [W * W, W * qh, B], data=av[0], rng=rng)
    ri = gg.add_rel_pos_inplace(ctx, a2, pw, ph)
    compute(ctx, r, ri)
    exp = ref.add_rel_pos(av[0], pwv, phv)
    assert_close(values(r)[0], exp, 1e-7)
    assert_close(values(a2)[0], exp, 1e-7)  # written in place
    np.testing.assert_array_equal(values(a)[0], av[0])  # the out-of-place form leaves a alone


def test_window_rejects():
    ctx = gg.Context(1 << 20)
    with pytest.raises(ValueError, match="win_part"):
        gg.win_part(ctx, ctx.new_tensor(gg.F32, [4, 4, 4]), 0)
    with pytest.raises(ValueError, match="window count"):
        gg.win_unpart(ctx, ctx.new_tensor(gg.F32, [4, 3, 3, 3]), 6, 6, 3)
    with pytest.raises(ValueError, match="get_rel_pos"):
        gg.get_rel_pos(ctx, ctx.new_tensor(gg.F16, [4, 8]), 4, 4)
    with pytest.raises(TypeError, match="get_rel_pos"):
        gg.get_rel_pos(ctx, ctx.new_tensor(gg.F32, [4, 7]), 4, 4)
    with pytest.raises(ValueError, match="add_rel_pos"):
        gg.add_rel_pos(ctx, ctx.new_tensor(gg.F32, [9, 6, 2]), ctx.new_tensor(gg.F32, [3, 3, 2, 1]),
                       ctx.new_tensor(gg.F32, [3, 3, 2, 1]))
