"""SUM_ROWS, MEAN (spec 4.15) and CUMSUM (spec 4.18) against numpy."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values


def _ctx():
    return gg.Context(mem_size=64 << 20)


@pytest.mark.parametrize("ne", [[10, 5, 4, 3], [33, 1, 1, 1], [32768, 2], [32769, 1], [33, 1024], [1, 7]])
def test_sum_rows_and_mean(ne):
    ctx = _ctx()
    a, x = new(ctx, gg.F32, ne, rng=np.random.default_rng(ne[0]), lo=-0.9, hi=1.1)
    s, m = gg.sum_rows(ctx, a), gg.mean(ctx, a)
    compute(ctx, s, m)
    assert list(s.ne) == [1] + list(a.ne[1:]) and s.type == gg.F32 and m.type == gg.F32
    assert s.op == "SUM_ROWS" and m.op == "MEAN"
    assert_close(values(s), ref.sum_rows(x), 1e-7, "sum_rows")
    assert_close(values(m), ref.mean(x), 1e-7, "mean")


def test_permuted_and_sliced_inputs():
    """Strided dims 1..3 are fine (permute {0,2,3,1} keeps dim 0 packed; dim-sliced views)."""
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [11, 5, 6, 3], rng=np.random.default_rng(1))
    p = gg.permute(ctx, a, 0, 2, 3, 1)
    v = gg.view_4d(ctx, a, 7, 4, 5, 2, a.nb[1], a.nb[2], a.nb[3], a.nb[1] + 8)
    outs = [gg.sum_rows(ctx, p), gg.mean(ctx, p), gg.sum_rows(ctx, v), gg.mean(ctx, v),
            gg.cumsum(ctx, p), gg.cumsum(ctx, v)]
    compute(ctx, *outs)
    xp, xv = values(p).astype(np.float64), values(v).astype(np.float64)
    assert_close(values(outs[0]), ref.sum_rows(xp))
    assert_close(values(outs[1]), ref.mean(xp))
    assert_close(values(outs[2]), ref.sum_rows(xv))
    assert_close(values(outs[3]), ref.mean(xv))
    np.testing.assert_array_equal(values(outs[4]), ref.cumsum_f32(xp))
    np.testing.assert_array_equal(values(outs[5]), ref.cumsum_f32(xv))


@pytest.mark.parametrize("tname", ["f16", "bf16"])
def test_half_types(tname):
    ctx = _ctx()
    t = {"f16": gg.F16, "bf16": gg.BF16}[tname]
    a, x = new(ctx, t, [64, 6, 2], rng=np.random.default_rng(2))
    s, m, c = gg.sum_rows(ctx, a), gg.mean(ctx, a), gg.cumsum(ctx, a)
    compute(ctx, s, m, c)
    assert s.type == t and m.type == gg.F32 and c.type == t
    bound = {"f16": 1e-6, "bf16": 5e-5}[tname]
    assert_close(values(s), ref.sum_rows(x), bound)
    assert_close(values(m), ref.mean(x), 1e-7)
    assert_close(values(c), ref.cumsum(x), bound)


@pytest.mark.parametrize("n", [10, 127, 128, 255, 1023, 2048, 20481, 242004])
def test_cumsum_sequential_f32(n):
    ctx = _ctx()
    rows = 4 if n < 30000 else 1
    a, x = new(ctx, gg.F32, [n, rows], rng=np.random.default_rng(n))
    c = gg.cumsum(ctx, a)
    compute(ctx, c)
    assert c.op == "CUMSUM" and list(c.ne) == list(a.ne)
    np.testing.assert_array_equal(values(c), ref.cumsum_f32(x))  # same sequential f32 rounding
    assert_close(values(c), ref.cumsum(x), 1e-7)


def test_edge_values_and_threads():
    ctx = _ctx()
    a = ctx.from_numpy(np.array([[1.0, np.inf, 2.0], [np.nan, 1.0, 1.0], [-np.inf, 1.0, 1.0]], np.float32))
    s, m, c = gg.sum_rows(ctx, a), gg.mean(ctx, a), gg.cumsum(ctx, a)
    compute(ctx, s, m, c)
    sv = values(s).ravel()
    assert sv[0] == np.inf and np.isnan(sv[1]) and sv[2] == -np.inf
    assert values(c).ravel().tolist()[:3] == [1.0, np.inf, np.inf]
    b, _ = new(ctx, gg.F32, [300, 37], rng=np.random.default_rng(5))
    res = []
    for nt in (1, 2):
        o = [gg.sum_rows(ctx, b), gg.mean(ctx, b), gg.cumsum(ctx, b)]
        compute(ctx, *o, n_threads=nt)
        res.append([values(t) for t in o])
    for u, w in zip(*res):
        np.testing.assert_array_equal(u, w)


def test_empty():
    ctx = _ctx()
    z = ctx.new_tensor(gg.F32, [0, 3])
    s, c = gg.sum_rows(ctx, z), gg.cumsum(ctx, z)
    compute(ctx, s, c)
    assert list(s.ne) == [1, 3, 1, 1] and np.all(values(s) == 0)


@pytest.mark.parametrize("fn", ["sum_rows", "mean", "cumsum"])
def test_errors(fn):
    ctx = _ctx()
    f = getattr(gg, fn)
    a = ctx.new_tensor(gg.F32, [6, 4])
    with pytest.raises(ValueError, match=fn):
        f(ctx, gg.transpose(ctx, a))  # dim 0 not packed: rejected, not misread
    with pytest.raises(TypeError, match=fn):
        f(ctx, ctx.new_tensor(gg.I32, [6]))
    with pytest.raises(TypeError):
        f(ctx, None)
    a.set(np.ones((4, 6), np.float32))
    r = f(ctx, a)
    compute(ctx, r)
    assert np.isfinite(values(r)).all()
