"""SOFT_MAX against the float64 reference: masks (F16/F32, broadcast over dims
2/3, more mask rows than a), scale, ALiBi, sinks, -inf rows, in-place, SIMD paths."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

from util import SIMD_LEVELS as SIMD  # the `simd` fixture lives in conftest.py
TOL = 1e-6



def _ctx():
    return gg.Context(mem_size=128 << 20)


def _run(a_ne, mask_ne=None, mask_type=gg.F32, scale=1.0, max_bias=0.0, sinks=False, seed=0,
         mask_data=None, a_data=None, inplace=False):
    rng = np.random.default_rng(seed)
    ctx = _ctx()
    a, x = new(ctx, gg.F32, a_ne, data=a_data, rng=rng, lo=-4, hi=4)
    m = mv = None
    if mask_ne is not None:
        m, mv = new(ctx, mask_type, mask_ne, data=mask_data, rng=rng, lo=-2, hi=1)
    fn = gg.soft_max_ext_inplace if inplace else gg.soft_max_ext
    r = fn(ctx, a, m, scale, max_bias)
    sv = None
    if sinks:
        s, sv = new(ctx, gg.F32, [a_ne[2] if len(a_ne) > 2 else 1], rng=rng, lo=-4, hi=4)
        gg.soft_max_add_sinks(r, s)
        assert r.src[2] is not None
    compute(ctx, r)
    want = ref.soft_max(x, mv, scale, max_bias, None if sv is None else sv.ravel())
    return r, values(r), want, a


MASK_BIAS = [(None, 0.0), (gg.F32, 0.0), (gg.F16, 0.0), (gg.F32, 8.0), (gg.F16, 8.0)]  # ALiBi needs a mask


@pytest.mark.parametrize("mask_bias", MASK_BIAS, ids=["nomask", "f32", "f16", "f32-alibi", "f16-alibi"])
@pytest.mark.parametrize("sinks", [False, True])
@pytest.mark.parametrize("scale", [1.0, 0.1])
@pytest.mark.parametrize("ne01", [(16, 16), (15, 15), (1024, 3), (1023, 2)])
def test_grid(ne01, scale, sinks, mask_bias):
    mask_type, max_bias = mask_bias
    ne0, ne1 = ne01
    a_ne = [ne0, ne1, 3, 2]
    mask_ne = None if mask_type is None else [ne0, ne1, 1, 1]
    r, got, want, _ = _run(a_ne, mask_ne, mask_type, scale, max_bias, sinks, seed=ne0 + ne1)
    assert r.op == "SOFT_MAX" and list(r.ne) == a_ne
    assert_close(got, want, TOL)


@pytest.mark.parametrize("simd", SIMD, indirect=True)
@pytest.mark.parametrize("mask_type", [gg.F32, gg.F16])
@pytest.mark.parametrize("ne0", [1, 4, 15, 16, 17, 33, 1023])
def test_row_lengths_simd(simd, ne0, mask_type):
    sinks = ne0 % 2 == 1
    r, got, want, _ = _run([ne0, 5, 2], [ne0, 5], mask_type, 0.7, 0.0, sinks=sinks, seed=ne0)
    assert_close(got, want, TOL, f"{simd}")
    if not sinks:
        np.testing.assert_allclose(got.sum(axis=-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("nr23", [(3, 1), (2, 3)])
@pytest.mark.parametrize("mask_type", [gg.F32, gg.F16])
def test_mask_broadcast(nr23, mask_type):
    r2, r3 = nr23
    ne0, ne1, m2, m3 = 37, 6, 2, 2
    _, got, want, _ = _run([ne0, ne1, m2 * r2, m3 * r3], [ne0, ne1, m2, m3], mask_type, 0.5, 8.0, seed=11)
    assert_close(got, want, TOL)


def test_mask_more_rows_than_a():
    _, got, want, _ = _run([40, 5, 4], [40, 13, 1], gg.F16, 1.0, 0.0, seed=5)
    assert_close(got, want, TOL)


@pytest.mark.parametrize("sinks", [False, True])
def test_alibi_12_heads(sinks):
    _, got, want, _ = _run([64, 7, 12, 1], [64, 7, 1, 1], gg.F16, 0.125, 8.0, sinks=sinks, seed=12)
    assert_close(got, want, TOL)
    # slopes differ per head: the reference agrees with the ALiBi slope formula
    s = ref.alibi_slopes(12, 8.0)
    assert np.isclose(s[0], 2 ** -1) and np.isclose(s[7], 2 ** -8) and np.isclose(s[8], 2 ** -0.5)


def test_long_row_sinks_alibi():
    _, got, want, _ = _run([200001, 1, 2], [200001, 1, 1], gg.F32, 0.3, 8.0, sinks=True, seed=3)
    assert_close(got, want, TOL)


def test_plain_soft_max_and_inplace():
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [50, 7, 3], rng=np.random.default_rng(1), lo=-20, hi=20)
    r = gg.soft_max(ctx, a)
    compute(ctx, r)
    assert_close(values(r), ref.soft_max(x), TOL)
    r2, got, want, a2 = _run([33, 4, 2], [33, 4], gg.F16, 0.9, 0.0, sinks=True, inplace=True)
    assert r2.data_ptr == a2.data_ptr
    assert_close(got, want, TOL)
    assert_close(values(a2), want, TOL, "a overwritten")
    ctx3 = _ctx()
    a3, x3 = new(ctx3, gg.F32, [20, 3])
    r3 = gg.soft_max_inplace(ctx3, a3)
    compute(ctx3, r3)
    assert_close(values(a3), ref.soft_max(x3), TOL)


@pytest.mark.parametrize("simd", SIMD, indirect=True)
@pytest.mark.parametrize("mask_type", [gg.F32, gg.F16])
def test_fully_masked_rows(simd, mask_type):
    """A fully -inf row gives NaN without sinks (exp(-inf - -inf)) and zeros with sinks;
    partially -inf rows give exact zeros at the masked entries."""
    ne0, ne1 = 19, 4
    md = np.random.default_rng(0).uniform(-1, 1, size=(1, 1, ne1, ne0)).astype(np.float32)
    md[0, 0, 1, :] = -np.inf
    md[0, 0, 2, ::2] = -np.inf
    _, got, want, _ = _run([ne0, ne1, 2], [ne0, ne1], mask_type, 1.0, 0.0, mask_data=md)
    assert np.all(np.isnan(got[:, :, 1, :]))
    assert not np.any(np.isnan(got[:, :, [0, 2, 3], :]))
    assert np.all(got[:, :, 2, ::2] == 0.0)
    assert_close(got, want, TOL)
    _, got, want, _ = _run([ne0, ne1, 2], [ne0, ne1], mask_type, 1.0, 0.0, sinks=True, mask_data=md)
    assert np.all(got[:, :, 1, :] == 0.0)
    assert_close(got, want, TOL)


def test_add_sinks_none_clears_and_threads():
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [100, 9, 4])
    s, sv = new(ctx, gg.F32, [4])
    r = gg.soft_max_ext(ctx, a, None, 1.0, 0.0)
    gg.soft_max_add_sinks(r, s)
    outs = []
    for nt in (1, 2, 3):
        compute(ctx, r, n_threads=nt)
        outs.append(values(r).copy())
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
    assert_close(outs[0], ref.soft_max(x, sinks=sv), TOL)
    gg.soft_max_add_sinks(r, None)
    assert len(r.src) < 3 or r.src[2] is None
    compute(ctx, r)
    assert_close(values(r), ref.soft_max(x), TOL)
    p = r.op_params
    assert np.array(p[:2], np.int32).view(np.float32).tolist() == [1.0, 0.0]


def test_errors():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [8, 4, 2])
    m = ctx.new_tensor(gg.F32, [8, 4])
    with pytest.raises(ValueError, match="soft_max_ext"):
        gg.soft_max_ext(ctx, gg.transpose(ctx, a), None, 1.0, 0.0)
    with pytest.raises(ValueError, match="soft_max_ext"):
        gg.soft_max_ext(ctx, a, ctx.new_tensor(gg.F32, [9, 4]), 1.0, 0.0)
    with pytest.raises(ValueError, match="soft_max_ext"):
        gg.soft_max_ext(ctx, a, ctx.new_tensor(gg.F32, [8, 3]), 1.0, 0.0)
    with pytest.raises(ValueError, match="soft_max_ext"):
        gg.soft_max_ext(ctx, a, ctx.new_tensor(gg.F32, [8, 4, 3]), 1.0, 0.0)
    with pytest.raises(ValueError, match="max_bias"):
        gg.soft_max_ext(ctx, a, None, 1.0, 8.0)
    with pytest.raises(TypeError, match="soft_max_ext"):
        gg.soft_max_ext(ctx, a, ctx.new_tensor(gg.I32, [8, 4]), 1.0, 0.0)
    with pytest.raises(TypeError, match="soft_max"):
        gg.soft_max(ctx, ctx.new_tensor(gg.F16, [8, 4]))
    with pytest.raises(TypeError, match="soft_max"):
        gg.soft_max(ctx, None)
    r = gg.soft_max_ext(ctx, a, m, 1.0, 0.0)
    with pytest.raises(ValueError, match="soft_max_add_sinks"):
        gg.soft_max_add_sinks(r, ctx.new_tensor(gg.F32, [3]))
    with pytest.raises(TypeError, match="soft_max_add_sinks"):
        gg.soft_max_add_sinks(r, ctx.new_tensor(gg.F16, [2]))
    with pytest.raises(TypeError, match="soft_max_add_sinks"):
        gg.soft_max_add_sinks(a, ctx.new_tensor(gg.F32, [2]))
    gg.soft_max_add_sinks(r, ctx.new_tensor(gg.F32, [2]))
    with pytest.raises(ValueError, match="already"):
        gg.soft_max_add_sinks(r, ctx.new_tensor(gg.F32, [2]))
    # the context still works
    b, x = new(ctx, gg.F32, [8, 4, 2])
    r2 = gg.soft_max(ctx, b)
    compute(ctx, r2)
    assert_close(values(r2), ref.soft_max(x), TOL)


# ---- SOFT_MAX_BACK (soft_max_ext_back) ----

def _softmax_rows(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("scale", [1.0, 0.7, -2.0])
@pytest.mark.parametrize("ne", [[39, 9], [47, 7, 3], [1, 5], [1025, 2, 1, 2]])
def test_soft_max_ext_back(ne, scale):
    ctx = gg.Context(mem_size=32 << 20)
    rng = np.random.default_rng(ne[0])
    shape = tuple(reversed(ne))
    y = _softmax_rows(rng.uniform(-3, 3, size=shape)).astype(np.float32)
    dy, gv = new(ctx, gg.F32, ne, rng=rng)
    yt, yv = new(ctx, gg.F32, ne, data=y)
    r = gg.soft_max_ext_back(ctx, dy, yt, scale, 0.0)
    compute(ctx, r)
    assert r.op == "SOFT_MAX_BACK" and list(r.ne) == ne + [1] * (4 - len(ne))
    want = scale * yv * (gv - np.sum(yv * gv, axis=-1, keepdims=True))
    assert_close(values(r), want, 1e-7, "soft_max_ext_back")


def test_soft_max_ext_back_matches_finite_differences():
    """The op is the softmax gradient: compare with central differences of soft_max_ext."""
    ctx = gg.Context(mem_size=8 << 20)
    rng = np.random.default_rng(1)
    z = rng.uniform(-2, 2, size=(3, 6))
    dy = rng.uniform(-1, 1, size=(3, 6))
    scale = 0.5
    y = _softmax_rows(scale * z)
    yt, _ = new(ctx, gg.F32, [6, 3], data=y)
    dyt, _ = new(ctx, gg.F32, [6, 3], data=dy)
    r = gg.soft_max_ext_back(ctx, dyt, yt, scale, 0.0)
    compute(ctx, r)
    h = 1e-6
    fd = np.zeros_like(z)
    for i in range(3):
        for j in range(6):
            zp, zm = z.copy(), z.copy()
            zp[i, j] += h
            zm[i, j] -= h
            fd[i, j] = np.sum(dy[i] * (_softmax_rows(scale * zp)[i] - _softmax_rows(scale * zm)[i])) / (2 * h)
    np.testing.assert_allclose(values(r)[0, 0], fd, atol=1e-6)


def test_soft_max_ext_back_inplace_views_and_errors():
    ctx = gg.Context(mem_size=8 << 20)
    rng = np.random.default_rng(2)
    big, gb = new(ctx, gg.F32, [12, 5], rng=rng)
    dy = gg.view_2d(ctx, big, 9, 5, big.nb[1], 8)     # padded rows
    y = _softmax_rows(rng.uniform(-1, 1, size=(5, 9))).astype(np.float32)
    yt, yv = new(ctx, gg.F32, [9, 5], data=y)
    r = gg.soft_max_ext_back_inplace(ctx, dy, yt, 1.0, 0.0)
    assert r.data_ptr == dy.data_ptr
    compute(ctx, r)
    g = gb[0, 0, :, 2:11]
    want = yv[0, 0] * (g - np.sum(yv[0, 0] * g, axis=-1, keepdims=True))
    assert_close(values(big)[0, 0, :, 2:11], want, 1e-7, "inplace view")
    np.testing.assert_array_equal(values(big)[0, 0, :, :2], gb[0, 0, :, :2])
    with pytest.raises(NotImplementedError, match="max_bias"):
        gg.soft_max_ext_back(ctx, yt, yt, 1.0, 8.0)
    with pytest.raises(ValueError, match="soft_max_ext_back"):
        gg.soft_max_ext_back(ctx, yt, ctx.new_tensor(gg.F32, [9, 4]), 1.0, 0.0)
    with pytest.raises(ValueError, match="soft_max_ext_back"):
        gg.soft_max_ext_back(ctx, gg.transpose(ctx, yt), gg.transpose(ctx, yt), 1.0, 0.0)
    with pytest.raises(TypeError, match="soft_max_ext_back"):
        gg.soft_max_ext_back(ctx, ctx.new_tensor(gg.F16, [9, 5]), yt, 1.0, 0.0)
