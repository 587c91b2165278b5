"""ARGSORT, ARGSORT_TOP_K and TOP_K: compared by the values they select."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import compute, new, values


def _ctx():
    return gg.Context(mem_size=64 << 20)


def _unique(ne, seed):
    """Unique shuffled integers per row (the peer suite's argsort inputs)."""
    rng = np.random.default_rng(seed)
    n = ne[0]
    rows = int(np.prod(ne[1:]))
    data = np.stack([rng.permutation(n) for _ in range(rows)]).astype(np.float32) - n / 2
    return data.reshape(tuple(reversed(ne)))


def _check_perm(idx, x, order):
    idx = idx.reshape(-1, idx.shape[-1]).astype(np.int64)
    x = x.reshape(-1, x.shape[-1])
    for r in range(idx.shape[0]):
        assert sorted(idx[r].tolist()) == list(range(x.shape[1]))
        v = x[r][idx[r]]
        assert np.all(np.diff(v) >= 0) if order == 0 else np.all(np.diff(v) <= 0)


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("ne", [[1], [2], [7, 1, 1, 1], [8], [16, 10, 10, 10], [1023, 2, 1, 3], [1025, 2, 1, 3],
                                [2049, 2], [60, 5]])
def test_argsort(ne, order):
    ctx = _ctx()
    x = _unique(ne, ne[0])
    a, _ = new(ctx, gg.F32, ne, data=x)
    r = gg.argsort(ctx, a, order)
    compute(ctx, r)
    assert r.type == gg.I32 and list(r.ne)[:len(ne)] == ne and r.op == "ARGSORT" and r.op_params[0] == order
    expected = ref.argsort(x, order)
    np.testing.assert_array_equal(values(r).reshape(expected.shape), expected)  # unique values: exact


def test_argsort_ties_nan_and_enum():
    ctx = _ctx()
    x = np.array([[3, 1, 3, np.nan, -np.inf, 1, np.inf, 0]], np.float32)
    a = ctx.from_numpy(x)
    ra = gg.argsort(ctx, a, gg.SortOrder.ASC)
    rd = gg.argsort(ctx, a, 1)
    compute(ctx, ra, rd)
    ia, idd = values(ra).ravel(), values(rd).ravel()
    assert sorted(ia.tolist()) == list(range(8)) and sorted(idd.tolist()) == list(range(8))
    fin = ~np.isnan(x[0])
    np.testing.assert_array_equal(x[0][ia][:7], np.sort(x[0][fin]))  # NaN sorts last ascending
    np.testing.assert_array_equal(x[0][idd][1:], np.sort(x[0][fin])[::-1])  # and first descending


@pytest.mark.parametrize("ne0,k", [(1, 1), (16, 1), (16, 16), (100, 7), (1025, 64), (2051, 2051), (202048, 20)])
def test_top_k_and_argsort_top_k(ne0, k):
    ctx = _ctx()
    rows = 3 if ne0 < 10000 else 1
    rng = np.random.default_rng(ne0)
    x = rng.uniform(-1, 1, size=(rows, ne0)).astype(np.float32)
    a, _ = new(ctx, gg.F32, [ne0, rows], data=x)
    t = gg.top_k(ctx, a, k)
    at = gg.argsort_top_k(ctx, a, k)
    compute(ctx, t, at)
    assert t.op == "TOP_K" and list(t.ne) == [k, rows, 1, 1] and t.type == gg.I32
    assert list(at.ne) == [k, rows, 1, 1] and at.nb[1] == 4 * ne0  # a strided view of the argsort
    ti, ai = values(t).reshape(rows, k), values(at).reshape(rows, k)
    for r in range(rows):
        assert len(set(ti[r].tolist())) == k
        np.testing.assert_array_equal(np.sort(x[r][ti[r]])[::-1], ref.top_k_values(x[r], k))
        np.testing.assert_array_equal(x[r][ai[r]], ref.top_k_values(x[r], k))  # ordered


def test_top_k_ties():
    ctx = _ctx()
    x = np.array([[1, 5, 5, 5, 2, 5, 0, 5]], np.float32)
    a = ctx.from_numpy(x)
    t = gg.top_k(ctx, a, 3)
    compute(ctx, t)
    idx = values(t).ravel()
    assert len(set(idx.tolist())) == 3 and np.all(x[0][idx] == 5)


def test_threads_and_empty():
    ctx = _ctx()
    a, _ = new(ctx, gg.F32, [50, 41], rng=np.random.default_rng(3))
    outs = []
    for nt in (1, 2):
        r = gg.argsort(ctx, a, 1)
        t = gg.top_k(ctx, a, 5)
        compute(ctx, r, t, n_threads=nt)
        outs.append((values(r), values(t)))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    z = ctx.new_tensor(gg.F32, [0, 3])
    rz, tz = gg.argsort(ctx, z, 0), gg.top_k(ctx, a, 0)
    compute(ctx, rz, tz)
    assert list(tz.ne) == [0, 41, 1, 1]


def test_errors():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [8, 3])
    with pytest.raises(ValueError, match="top_k"):
        gg.top_k(ctx, a, 9)
    with pytest.raises(ValueError, match="argsort_top_k"):
        gg.argsort_top_k(ctx, a, -1)
    with pytest.raises(ValueError, match="argsort"):
        gg.argsort(ctx, a, 2)
    with pytest.raises(TypeError, match="argsort"):
        gg.argsort(ctx, ctx.new_tensor(gg.F16, [8]), 0)
    with pytest.raises(ValueError, match="argsort"):
        gg.argsort(ctx, gg.transpose(ctx, a), 0)
    with pytest.raises(TypeError):
        gg.top_k(ctx, None, 1)
    a.set(np.arange(24, dtype=np.float32).reshape(3, 8))
    r = gg.argsort(ctx, a, 1)
    compute(ctx, r)
    assert values(r).reshape(3, 8)[0].tolist() == list(range(7, -1, -1))
