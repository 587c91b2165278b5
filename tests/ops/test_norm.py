"""NORM and RMS_NORM against the float64 references."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

EPS = [0.0, 1e-6, 1e-4, 0.1, 10.0]
ROWS = [33, 64, 132, 260, 1025]
from util import SIMD_LEVELS as SIMD  # the `simd` fixture lives in conftest.py



def _ctx():
    return gg.Context(mem_size=64 << 20)


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("n", ROWS)
def test_norm_and_rms_norm(n, eps):
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [n, 5, 4, 3], rng=np.random.default_rng(n), lo=-10, hi=10)
    r1 = gg.rms_norm(ctx, a, eps)
    r2 = gg.norm(ctx, a, eps)
    compute(ctx, r1, r2)
    assert r1.op == "RMS_NORM" and r2.op == "NORM"
    assert list(r1.ne) == [n, 5, 4, 3] and r1.type == gg.F32
    assert_close(values(r1), ref.rms_norm(x, eps), 1e-7, "rms_norm")
    assert_close(values(r2), ref.norm(x, eps), 1e-7, "norm")


@pytest.mark.parametrize("simd", SIMD, indirect=True)
@pytest.mark.parametrize("n", [1, 2, 7, 15, 16, 17, 31, 33, 100, 1025])
def test_simd_paths(simd, n):
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [n, 3, 2], rng=np.random.default_rng(7 + n), lo=-3, hi=5)
    r1, r2 = gg.rms_norm(ctx, a, 1e-6), gg.norm(ctx, a, 1e-5)
    compute(ctx, r1, r2)
    assert_close(values(r1), ref.rms_norm(x, 1e-6), 1e-7, f"rms_norm/{simd}")
    assert_close(values(r2), ref.norm(x, 1e-5), 1e-7, f"norm/{simd}")


@pytest.mark.parametrize("eps", [1e-6, 0.1])
def test_view_half_of_every_dim(eps):
    """Peer 'view' variant: the first half of every dim (rows with padded strides)."""
    ctx = _ctx()
    big, xb = new(ctx, gg.F32, [130, 10, 8, 6], rng=np.random.default_rng(3), lo=-10, hi=10)
    v = gg.view_4d(ctx, big, 65, 5, 4, 3, big.nb[1], big.nb[2], big.nb[3], 0)
    assert not v.is_contiguous()
    x = xb[:3, :4, :5, :65]
    r1, r2 = gg.rms_norm(ctx, v, eps), gg.norm(ctx, v, eps)
    compute(ctx, r1, r2)
    assert r1.is_contiguous()
    assert_close(values(r1), ref.rms_norm(x, eps), 1e-7, "rms_norm view")
    assert_close(values(r2), ref.norm(x, eps), 1e-7, "norm view")


@pytest.mark.parametrize("n", [33, 260])
def test_strided_rows_permuted(n):
    """Rows with nb[0] != 4 (input permuted {1,0,2,3}): the scalar gather path."""
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [7, n, 3, 2], rng=np.random.default_rng(n), lo=-10, hi=10)
    p = gg.permute(ctx, a, 1, 0, 2, 3)  # ne = [n, 7, 3, 2], nb0 = 7*4
    assert p.nb[0] != 4
    xp = np.swapaxes(x, -1, -2)
    r1, r2 = gg.norm(ctx, p, 1e-5), gg.rms_norm(ctx, p, 1e-5)
    compute(ctx, r1, r2)
    assert_close(values(r1), ref.norm(xp, 1e-5), 1e-7, "norm permuted")
    assert_close(values(r2), ref.rms_norm(xp, 1e-5), 1e-7, "rms_norm permuted")


def test_strided_rows_inplace():
    """In-place on a permuted view writes through the same strides."""
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [5, 40, 3], rng=np.random.default_rng(1), lo=-2, hi=2)
    p = gg.permute(ctx, a, 1, 0, 2, 3)
    r = gg.norm_inplace(ctx, p, 1e-6)
    compute(ctx, r)
    want = ref.norm(np.swapaxes(x, -1, -2), 1e-6)
    assert_close(values(r), want, 1e-7, "norm_inplace permuted")
    assert_close(values(a), np.swapaxes(want, -1, -2), 1e-7, "storage of a")


@pytest.mark.parametrize("fn,reff", [(gg.norm_inplace, ref.norm), (gg.rms_norm_inplace, ref.rms_norm)])
def test_inplace(fn, reff):
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [64, 5, 4, 3], rng=np.random.default_rng(2), lo=-10, hi=10)
    r = fn(ctx, a, 1e-6)
    assert r.view_src is not None and r.data_ptr == a.data_ptr
    compute(ctx, r)
    assert_close(values(r), reff(x, 1e-6), 1e-7)
    assert_close(values(a), reff(x, 1e-6), 1e-7, "a was overwritten")


def test_constant_rows_norm():
    """Variance 0: x - mean = 0 exactly, so the output is 0 for eps > 0."""
    ctx = _ctx()
    data = np.broadcast_to(np.arange(6, dtype=np.float32).reshape(1, 1, 6, 1) * 1.5 - 2, (1, 1, 6, 37))
    a, _ = new(ctx, gg.F32, [37, 6], data=np.ascontiguousarray(data))
    r = gg.norm(ctx, a, 1e-5)
    compute(ctx, r)
    np.testing.assert_array_equal(values(r), np.zeros((1, 1, 6, 37), np.float32))


def test_zero_row_eps0_is_nan():
    ctx = _ctx()
    a, _ = new(ctx, gg.F32, [16, 2], data=np.zeros((1, 1, 2, 16), np.float32))
    r = gg.rms_norm(ctx, a, 0.0)
    compute(ctx, r)
    assert np.all(np.isnan(values(r)))


def test_op_params_and_threads():
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [300, 9, 5], rng=np.random.default_rng(4), lo=-10, hi=10)
    r = gg.rms_norm(ctx, a, 1e-5)
    assert np.float32(np.array(r.op_params[:1], np.int32).view(np.float32)[0]) == np.float32(1e-5)
    outs = []
    for nt in (1, 2, 3):
        compute(ctx, r, n_threads=nt)
        outs.append(values(r).copy())
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


@pytest.mark.parametrize("fn", ["norm", "norm_inplace", "rms_norm", "rms_norm_inplace"])
def test_errors(fn):
    ctx = _ctx()
    f = getattr(gg, fn)
    a = ctx.new_tensor(gg.F32, [8, 2])
    with pytest.raises(ValueError, match=fn):
        f(ctx, a, -1e-6)
    with pytest.raises(TypeError, match=fn):
        f(ctx, ctx.new_tensor(gg.F16, [8, 2]), 1e-6)
    with pytest.raises(TypeError, match=fn):
        f(ctx, None, 1e-6)
    # the context still works
    b, x = new(ctx, gg.F32, [8, 2])
    r = f(ctx, b, 1e-6)
    compute(ctx, r)
    reff = ref.norm if fn.startswith("norm") else ref.rms_norm
    assert_close(values(r), reff(x, 1e-6), 1e-7)


# ---- L2_NORM, GROUP_NORM ----

def _l2_ref(x, eps):
    x = np.asarray(x, np.float64)
    return x / np.maximum(np.sqrt(np.sum(x * x, axis=-1, keepdims=True)), eps)


def _group_norm_ref(x, n_groups, eps):
    """x numpy (ne3, C, ne1, ne0); groups of ceil(C / n_groups) channels, the last possibly smaller."""
    x = np.asarray(x, np.float64)
    y = np.empty_like(x)
    C = x.shape[1]
    per = -(-C // n_groups)
    for c0 in range(0, C, per):
        g = x[:, c0:c0 + per]
        mean = g.mean(axis=(1, 2, 3), keepdims=True)
        var = ((g - mean) ** 2).mean(axis=(1, 2, 3), keepdims=True)
        y[:, c0:c0 + per] = (g - mean) / np.sqrt(var + eps)
    return y


@pytest.mark.parametrize("simd", SIMD, indirect=True)
@pytest.mark.parametrize("eps", [1e-12, 1e-6, 0.0, 5.0])
@pytest.mark.parametrize("ne", [[61, 5], [87, 3, 3], [1, 4], [1025, 2, 1, 2]])
def test_l2_norm(ne, eps, simd):
    ctx = _ctx()
    a, x = new(ctx, gg.F32, ne, rng=np.random.default_rng(ne[0]))
    r = gg.l2_norm(ctx, a, eps)
    compute(ctx, r)
    assert r.op == "L2_NORM" and list(r.ne) == list(a.ne)
    assert_close(values(r), _l2_ref(x, eps), 1e-7, "l2_norm")


def test_l2_norm_views_zero_rows_and_inplace():
    ctx = _ctx()
    big, xb = new(ctx, gg.F32, [24, 3, 2], rng=np.random.default_rng(2))
    v = gg.view_3d(ctx, big, 21, 3, 2, big.nb[1], big.nb[2], 8)
    t = gg.transpose(ctx, big)
    z = ctx.from_numpy(np.zeros((2, 5), np.float32))
    rv, rt, rz = gg.l2_norm(ctx, v, 1e-6), gg.l2_norm(ctx, t, 1e-6), gg.l2_norm(ctx, z, 1e-6)
    compute(ctx, rv, rt, rz)
    assert_close(values(rv), _l2_ref(xb[..., 2:23], 1e-6), 1e-7, "row view")
    assert_close(values(rt), _l2_ref(np.swapaxes(xb, -1, -2), 1e-6), 1e-7, "transposed")
    assert np.all(values(rz) == 0)  # 0 / max(0, eps)
    a, x = new(ctx, gg.F32, [9, 4], rng=np.random.default_rng(3))
    ri = gg.l2_norm_inplace(ctx, a, 1e-6)
    assert ri.data_ptr == a.data_ptr
    compute(ctx, ri)
    assert_close(values(a), _l2_ref(x, 1e-6), 1e-7, "inplace")
    with pytest.raises(ValueError, match="l2_norm"):
        gg.l2_norm(ctx, a, -1.0)
    with pytest.raises(TypeError, match="l2_norm"):
        gg.l2_norm(ctx, ctx.new_tensor(gg.F16, [4]), 1e-6)


@pytest.mark.parametrize("simd", SIMD, indirect=True)
@pytest.mark.parametrize("ne,n_groups", [([5, 7, 7, 2], 3), ([11, 9, 8], 4), ([33, 1, 6], 6), ([3, 2, 5], 1),
                                         ([4, 3, 3], 5), ([17, 3, 10, 2], 4)])
def test_group_norm(ne, n_groups, simd):
    ctx = _ctx()
    a, x = new(ctx, gg.F32, ne, rng=np.random.default_rng(sum(ne)), lo=-2, hi=3)
    r = gg.group_norm(ctx, a, n_groups, 1e-5)
    compute(ctx, r, n_threads=3)
    assert r.op == "GROUP_NORM" and list(r.ne) == list(a.ne)
    assert_close(values(r), _group_norm_ref(x, n_groups, 1e-5), 1e-7, "group_norm")


def test_group_norm_strided_inplace_and_errors():
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [6, 5, 4, 2], rng=np.random.default_rng(5))
    p = gg.permute(ctx, a, 0, 2, 1, 3)   # channels and rows swapped: dims 1, 2 strided
    r = gg.group_norm(ctx, p, 2, 1e-6)
    compute(ctx, r)
    assert_close(values(r), _group_norm_ref(values(p), 2, 1e-6), 1e-7, "permuted")
    ri = gg.group_norm_inplace(ctx, a, 3, 1e-6)
    assert ri.data_ptr == a.data_ptr
    compute(ctx, ri)
    assert_close(values(a), _group_norm_ref(x, 3, 1e-6), 1e-7, "inplace")
    with pytest.raises(ValueError, match="n_groups"):
        gg.group_norm(ctx, a, 0, 1e-6)
    with pytest.raises(ValueError, match="group_norm"):
        gg.group_norm(ctx, gg.transpose(ctx, a), 2, 1e-6)
    with pytest.raises(TypeError, match="group_norm_inplace"):
        gg.group_norm_inplace(ctx, ctx.new_tensor(gg.BF16, [4, 2, 2]), 2, 1e-6)
