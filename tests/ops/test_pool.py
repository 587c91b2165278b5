"""pool_1d and pool_2d against numpy references (ggml's padding rules)."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values


@pytest.mark.parametrize("op", [gg.OP_POOL_MAX, gg.OP_POOL_AVG])
@pytest.mark.parametrize("k,s,p", [(2, 1, 1), (3, 2, 0), (4, 3, 1), (5, 5, 2)])
@pytest.mark.parametrize("type_", [gg.F32, gg.F16])
def test_pool_1d(op, k, s, p, type_):
    ctx = gg.Context(4 << 20)
    a, av = new(ctx, type_, [23, 5, 3], rng=np.random.default_rng(k * 7 + s))
    r = gg.pool_1d(ctx, a, op, k, s, p)
    compute(ctx, r)
    assert r.type == gg.F32
    assert_close(values(r), ref.pool_1d(av, op, k, s, p), 1e-7)


@pytest.mark.parametrize("op", [gg.OP_POOL_MAX, gg.OP_POOL_AVG])
@pytest.mark.parametrize("geom", [(2, 2, 2, 2, 0.0, 0.0), (3, 2, 1, 1, 1.0, 1.0), (3, 3, 2, 2, 1.0, 1.0),
                                  (2, 3, 1, 2, 0.5, 1.7)])
def test_pool_2d(op, geom):
    k0, k1, s0, s1, p0, p1 = geom
    ctx = gg.Context(4 << 20)
    a, av = new(ctx, gg.F32, [13, 11, 3, 2], rng=np.random.default_rng(int(sum(geom) * 10)))
    r = gg.pool_2d(ctx, a, op, k0, k1, s0, s1, p0, p1)
    compute(ctx, r)
    assert_close(values(r), ref.pool_2d(av, op, k0, k1, s0, s1, p0, p1), 1e-7)


def test_pool_views_and_edges():
    ctx = gg.Context(4 << 20)
    a, av = new(ctx, gg.F32, [12, 8, 4], rng=np.random.default_rng(1))
    rows = gg.view_3d(ctx, a, 12, 4, 4, 2 * a.nb[1], a.nb[2], 0)  # every other row
    r1 = gg.pool_1d(ctx, rows, gg.OP_POOL_MAX, 3, 2, 1)
    pl = gg.permute(ctx, a, 0, 2, 1, 3)  # [12, 4, 8]: planes strided
    r2 = gg.pool_2d(ctx, pl, gg.OP_POOL_AVG, 2, 2, 2, 2, 0.0, 0.0)
    neg = ctx.new_tensor(gg.F32, [4, 1])
    neg.set(np.full((1, 4), -np.inf, np.float32))
    r3 = gg.pool_1d(ctx, neg, gg.OP_POOL_MAX, 2, 2, 0)
    compute(ctx, r1, r2, r3)
    assert_close(values(r1), ref.pool_1d(av[:, :, ::2], 0, 3, 2, 1), 1e-7)
    assert_close(values(r2), ref.pool_2d(np.swapaxes(av, 1, 2), 1, 2, 2, 2, 2, 0.0, 0.0), 1e-7)
    # max over -inf inputs starts from -FLT_MAX, as ggml does
    np.testing.assert_array_equal(values(r3).ravel(), [-np.finfo(np.float32).max] * 2)


def test_pool_rejects():
    ctx = gg.Context(1 << 20)
    a = ctx.new_tensor(gg.F32, [4, 4])
    with pytest.raises(ValueError, match="pool_1d"):
        gg.pool_1d(ctx, a, 2, 2, 1, 0)  # unknown op
    with pytest.raises(ValueError, match="pool_2d"):
        gg.pool_2d(ctx, a, 0, 5, 2, 1, 1, 0.0, 0.0)  # window larger than the input
    with pytest.raises(ValueError, match="pool_1d"):
        gg.pool_1d(ctx, a, 0, 2, 0, 0)  # stride 0
    with pytest.raises(TypeError, match="pool_2d"):
        gg.pool_2d(ctx, ctx.new_tensor(gg.I32, [4, 4]), 0, 2, 2, 1, 1, 0.0, 0.0)
