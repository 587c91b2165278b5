"""DIAG, DIAG_MASK_INF and DIAG_MASK_ZERO (+ _inplace) against numpy."""
import numpy as np
import pytest

import pyggml as gg
from util import compute, new, values


def _ctx():
    return gg.Context(mem_size=16 << 20)


@pytest.mark.parametrize("ne", [[9], [11, 1, 2, 2], [1], [5, 1, 3]])
def test_diag(ne):
    ctx = _ctx()
    a, x = new(ctx, gg.F32, ne, rng=np.random.default_rng(ne[0]))
    r = gg.diag(ctx, a)
    compute(ctx, r)
    n = ne[0]
    assert r.op == "DIAG" and list(r.ne) == [n, n] + list(a.ne[2:])
    want = np.zeros(tuple(reversed(list(r.ne))))
    for i in range(n):
        want[:, :, i, i] = x[:, :, 0, i]
    np.testing.assert_array_equal(values(r), want)


def test_diag_strided_input_and_errors():
    ctx = _ctx()
    big, xb = new(ctx, gg.F32, [4, 6], rng=np.random.default_rng(1))
    cols = gg.permute(ctx, big, 2, 0, 1, 3)   # [6, 1, 4]: the columns of big, dim 0 strided
    r = gg.diag(ctx, cols)
    compute(ctx, r)
    for c in range(4):
        np.testing.assert_array_equal(values(r)[0, c], np.diag(xb[0, 0, :, c]))
    with pytest.raises(ValueError, match="diag"):
        gg.diag(ctx, big)
    with pytest.raises(TypeError, match="diag"):
        gg.diag(ctx, ctx.new_tensor(gg.F16, [4]))


def _mask_ref(x, n_past, value):
    y = np.array(x, dtype=np.float64)
    i1 = np.arange(x.shape[-2])[:, None]
    i0 = np.arange(x.shape[-1])[None, :]
    y[..., i0 > n_past + i1] = value
    return y


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("kind", ["inf", "zero"])
@pytest.mark.parametrize("ne,n_past", [([28, 9, 2], 19), ([7, 7], 0), ([14, 3, 3, 2], 11), ([5, 9], 2), ([6, 4], 40)])
def test_diag_mask(kind, inplace, ne, n_past):
    ctx = _ctx()
    a, x = new(ctx, gg.F32, ne, rng=np.random.default_rng(sum(ne)))
    fn = getattr(gg, f"diag_mask_{kind}" + ("_inplace" if inplace else ""))
    r = fn(ctx, a, n_past)
    assert r.op == f"DIAG_MASK_{kind.upper()}" and (r.data_ptr == a.data_ptr) == inplace
    compute(ctx, r)
    want = _mask_ref(x, n_past, -np.inf if kind == "inf" else 0.0)
    np.testing.assert_array_equal(values(r), want)
    if not inplace:
        np.testing.assert_array_equal(values(a), x)


def test_diag_mask_strided_rows_then_softmax():
    """Padded-row input; a fully masked-free first column keeps softmax finite."""
    ctx = _ctx()
    big, xb = new(ctx, gg.F32, [10, 12, 2], rng=np.random.default_rng(4))
    v = gg.view_3d(ctx, big, 8, 6, 2, big.nb[1] * 2, big.nb[2], 8)
    r = gg.diag_mask_inf(ctx, v, 1)
    s = gg.soft_max(ctx, r)
    compute(ctx, s)
    xv = xb[0, :, ::2, 2:10]
    want = _mask_ref(xv, 1, -np.inf)
    np.testing.assert_array_equal(values(r)[0], want)
    e = np.exp(want - want.max(-1, keepdims=True))
    np.testing.assert_allclose(values(s)[0], e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_diag_mask_errors():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [4, 3])
    with pytest.raises(ValueError, match="n_past"):
        gg.diag_mask_inf(ctx, a, -1)
    with pytest.raises(ValueError, match="diag_mask_zero"):
        gg.diag_mask_zero(ctx, gg.transpose(ctx, a), 0)
    with pytest.raises(TypeError, match="diag_mask_inf_inplace"):
        gg.diag_mask_inf_inplace(ctx, ctx.new_tensor(gg.I32, [4, 3]), 0)
    with pytest.raises(TypeError):
        gg.diag_mask_zero_inplace(ctx, None, 0)
