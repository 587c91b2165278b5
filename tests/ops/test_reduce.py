"""SUM_ROWS, MEAN and CUMSUM against numpy."""
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


# ---- SUM, ARGMAX, COUNT_EQUAL ----

@pytest.mark.parametrize("tname", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("ne", [[31, 9, 2, 2], [1, 1, 1, 1], [4097, 3], [7, 1, 5, 1]])
def test_sum_every_type(ne, tname):
    ctx = _ctx()
    t = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16}[tname]
    a, x = new(ctx, t, ne, rng=np.random.default_rng(sum(ne)), lo=-0.5, hi=1.0)
    s = gg.sum(ctx, a)
    compute(ctx, s)
    assert s.op == "SUM" and s.type == t and list(s.ne) == [1, 1, 1, 1]
    from references.numerics import round_to
    want = round_to(np.array([x.sum()]), tname).astype(np.float64)  # one rounding of the exact sum
    assert_close(values(s).ravel(), want, {"f32": 1e-12, "f16": 1e-6, "bf16": 5e-5}[tname], "sum")


def test_sum_strided_views_and_thread_counts():
    """Any strides (even a transposed dim 0); the result does not depend on the thread count."""
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [13, 11, 3, 2], rng=np.random.default_rng(7))
    views = [gg.transpose(ctx, a), gg.permute(ctx, a, 2, 0, 3, 1),
             gg.view_4d(ctx, a, 5, 4, 3, 2, a.nb[1] * 2, a.nb[2], a.nb[3], 8)]
    for v in views:
        got = []
        for nt in (1, 2, 3):
            s = gg.sum(ctx, v)
            compute(ctx, s, n_threads=nt)
            got.append(values(s).item())
        assert got[0] == got[1] == got[2]
        assert abs(got[0] - values(v).astype(np.float64).sum()) <= 1e-5


def test_sum_empty_and_special_values():
    ctx = _ctx()
    e = ctx.new_tensor(gg.F32, [0, 3])
    s0 = gg.sum(ctx, e)
    a = ctx.from_numpy(np.array([1.0, np.inf, 2.0], np.float32))
    b = ctx.from_numpy(np.array([np.inf, -np.inf], np.float32))
    s1, s2 = gg.sum(ctx, a), gg.sum(ctx, b)
    compute(ctx, s0, s1, s2)
    assert values(s0).item() == 0.0 and values(s1).item() == np.inf and np.isnan(values(s2).item())


def _argmax_ref(x):
    """Per row the last index of the maximum (ggml's tie rule)."""
    x = np.asarray(x).reshape(-1, x.shape[-1])
    return np.array([len(r) - 1 - int(np.argmax(r[::-1])) for r in x], np.int32)


@pytest.mark.parametrize("ne", [[25, 7], [563, 5], [1, 4], [8, 1]])
def test_argmax(ne):
    ctx = _ctx()
    a, x = new(ctx, gg.F32, ne, rng=np.random.default_rng(ne[0]))
    r = gg.argmax(ctx, a)
    compute(ctx, r)
    assert r.op == "ARGMAX" and r.type == gg.I32 and list(r.ne) == [ne[1], 1, 1, 1]
    np.testing.assert_array_equal(values(r).ravel(), _argmax_ref(x[0, 0]))


def test_argmax_ties_inf_nan_and_views():
    ctx = _ctx()
    x = np.array([[1.0, 3.0, 3.0, 2.0], [-np.inf, -np.inf, -np.inf, -np.inf], [np.nan, 0.5, np.nan, 0.25],
                  [np.inf, 1.0, np.inf, 0.0]], np.float32)
    a = ctx.from_numpy(x)
    r = gg.argmax(ctx, a)
    big, xb = new(ctx, gg.F32, [18, 6], rng=np.random.default_rng(3))
    v = gg.view_2d(ctx, big, 13, 3, big.nb[1] * 2, 4)   # padded rows, offset start
    t = gg.transpose(ctx, big)                          # strided dim 0
    rv, rt = gg.argmax(ctx, v), gg.argmax(ctx, t)
    compute(ctx, r, rv, rt)
    # last of equal maxima; a NaN resets the running maximum (ggml's compare-and-keep rule)
    np.testing.assert_array_equal(values(r).ravel(), [2, 3, 3, 2])
    np.testing.assert_array_equal(values(rv).ravel(), _argmax_ref(xb[0, 0, ::2, 1:14]))
    np.testing.assert_array_equal(values(rt).ravel(), _argmax_ref(xb[0, 0].T))


def test_argmax_errors():
    ctx = _ctx()
    with pytest.raises(ValueError, match="argmax"):
        gg.argmax(ctx, ctx.new_tensor(gg.F32, [4, 3, 2]))
    with pytest.raises(TypeError, match="argmax"):
        gg.argmax(ctx, ctx.new_tensor(gg.F16, [4, 3]))


@pytest.mark.parametrize("ne", [[71], [35, 5], [9, 4, 3, 2], [0, 3]])
def test_count_equal(ne):
    ctx = _ctx()
    rng = np.random.default_rng(len(ne))
    shape = tuple(reversed(ne))
    xa, xb = rng.integers(0, 3, size=shape), rng.integers(0, 3, size=shape)
    a, _ = new(ctx, gg.I32, ne, data=xa)
    b, _ = new(ctx, gg.I32, ne, data=xb)
    r = gg.count_equal(ctx, a, b)
    compute(ctx, r)
    assert r.op == "COUNT_EQUAL" and r.type == gg.I64 and list(r.ne) == [1, 1, 1, 1]
    assert values(r).item() == int(np.sum(xa == xb))


def test_count_equal_views_and_errors():
    ctx = _ctx()
    rng = np.random.default_rng(5)
    xa = rng.integers(-2, 2, size=(4, 6)).astype(np.int32)
    a, _ = new(ctx, gg.I32, [6, 4], data=xa)
    b, _ = new(ctx, gg.I32, [4, 6], data=xa.T.copy())
    r = gg.count_equal(ctx, a, gg.transpose(ctx, b))   # the same values through a transpose
    compute(ctx, r)
    assert values(r).item() == 24
    with pytest.raises(ValueError, match="count_equal"):
        gg.count_equal(ctx, a, b)
    with pytest.raises(TypeError, match="count_equal"):
        gg.count_equal(ctx, ctx.new_tensor(gg.F32, [6, 4]), a)


def test_sum_many_rows_is_blocked_and_thread_independent():
    """More rows than SUM's partial blocks: still exact to f32 rounding and the same for any
    thread count (the blocks depend only on the shape)."""
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [3, 2049, 5], rng=np.random.default_rng(12))
    got = []
    for nt in (1, 2, 3, 7):
        s = gg.sum(ctx, a)
        compute(ctx, s, n_threads=nt)
        got.append(values(s).item())
    assert len(set(got)) == 1
    assert got[0] == np.float32(x.sum())
