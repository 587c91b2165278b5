"""scale / scale_bias / clamp / arange / tri (+ in-place)."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values


def ctx_(mb=64):
    return gg.Context(mem_size=mb << 20)


# ---------------------------------------------------------------- scale

@pytest.mark.parametrize("t", [gg.F32, gg.BF16])
@pytest.mark.parametrize("s,b", [(2.0, 0.0), (0.5, 0.0), (2.0, 1.0), (-0.75, 0.25)])
def test_scale_and_scale_bias(t, s, b):
    ctx = ctx_()
    a, av = new(ctx, t, [10, 10, 10, 10])
    r = gg.scale(ctx, a, s) if b == 0.0 else gg.scale_bias(ctx, a, s, b)
    assert r.op == "SCALE" and r.type == t and r.ne == a.ne
    compute(ctx, r)
    expected = ref.scale_bias(av, s, b)
    if t == gg.BF16:
        np.testing.assert_array_equal(values(r), ref.convert_values(expected.astype(np.float32), "bf16"))
    else:
        assert_close(values(r), expected, 1e-7)
        if b == 0.0:  # exactly x*s
            np.testing.assert_array_equal(values(r), (av.astype(np.float32) * np.float32(s)))


@pytest.mark.parametrize("t", [gg.F32, gg.BF16])
def test_scale_inplace_variants(t):
    ctx = ctx_()
    a, av = new(ctx, t, [100, 10, 3])
    b, bv = new(ctx, t, [33, 7])
    r1 = gg.scale_inplace(ctx, a, 0.5)
    r2 = gg.scale_bias_inplace(ctx, b, 2.0, 1.0)
    assert r1.view_src is not None and r2.view_src is not None
    compute(ctx, r1, r2)
    assert_close(values(a), ref.scale_bias(av, 0.5), 1e-7 if t == gg.F32 else 5e-5)
    assert_close(values(b), ref.scale_bias(bv, 2.0, 1.0), 1e-7 if t == gg.F32 else 5e-5)


def test_scale_padded_rows_view_and_edge_values():
    ctx = ctx_()
    big, bigv = new(ctx, gg.F32, [16, 5, 2])
    v = gg.view_3d(ctx, big, 11, 5, 2, big.nb[1], big.nb[2], 4)
    r = gg.scale(ctx, v, -3.0)
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e38], dtype=np.float32)
    e = ctx.new_tensor(gg.F32, [6])
    e.set(x)
    re = gg.scale(ctx, e, 10.0)
    compute(ctx, r, re)
    assert r.is_contiguous()
    assert_close(values(r), bigv[..., 1:12] * -3.0, 1e-7)
    got = values(re).ravel()
    with np.errstate(over="ignore", invalid="ignore"):
        exp = x * np.float32(10.0)
    np.testing.assert_array_equal(got, exp)


def test_scale_errors():
    ctx = ctx_()
    for t in (gg.F16, gg.I32, gg.Q8_0):
        with pytest.raises(TypeError, match="scale"):
            gg.scale(ctx, ctx.new_tensor(t, [32]), 2.0)
    a = ctx.new_tensor(gg.F32, [4, 6])
    with pytest.raises(ValueError, match="scale_bias"):
        gg.scale_bias(ctx, gg.transpose(ctx, a), 2.0, 1.0)
    with pytest.raises(TypeError, match="scale_inplace"):
        gg.scale_inplace(ctx, None, 1.0)
    r = gg.scale(ctx, a, 1.0)
    assert r.ne == a.ne


# ---------------------------------------------------------------- clamp

@pytest.mark.parametrize("t", [gg.F32, gg.F16])
def test_clamp(t):
    ctx = ctx_()
    a, av = new(ctx, t, [10, 5, 4, 3])
    r = gg.clamp(ctx, a, -0.5, 0.5)
    assert r.op == "CLAMP" and r.view_src is None
    compute(ctx, r)
    np.testing.assert_array_equal(values(r), ref.clamp(av, -0.5, 0.5))


@pytest.mark.parametrize("t", [gg.F32, gg.F16])
def test_clamp_nan_inf_bounds_and_inplace(t):
    ctx = ctx_()
    x = np.array([np.nan, -np.inf, np.inf, 3.0, -3.0, 0.25, -0.0], dtype=np.float32)
    a = ctx.new_tensor(t, [7])
    a.set(x)
    r1 = gg.clamp(ctx, a, -1.0, 1.0)
    r2 = gg.clamp(ctx, a, -np.inf, 2.0)   # llama.cpp style: only an upper limit
    r3 = gg.clamp(ctx, a, -2.0, np.inf)
    compute(ctx, r1, r2, r3)
    np.testing.assert_array_equal(values(r1).ravel(), ref.clamp(x, -1.0, 1.0))
    assert values(r1).ravel()[0] == 1.0  # NaN -> max
    np.testing.assert_array_equal(values(r2).ravel(), ref.clamp(x, -np.inf, 2.0))
    np.testing.assert_array_equal(values(r3).ravel(), ref.clamp(x, -2.0, np.inf))
    ri = gg.clamp_inplace(ctx, a, 0.0, 0.5)
    assert ri.view_src is not None
    compute(ctx, ri)
    np.testing.assert_array_equal(values(a).ravel(), ref.clamp(x, 0.0, 0.5))


def test_clamp_padded_view_threads():
    ctx = ctx_()
    big, bigv = new(ctx, gg.F32, [40, 33, 3], lo=-3, hi=3)
    v = gg.view_3d(ctx, big, 31, 33, 3, big.nb[1], big.nb[2], 8)
    r = gg.clamp(ctx, v, -1.0, 2.0)
    compute(ctx, r, n_threads=1)
    v1 = values(r).copy()
    compute(ctx, r, n_threads=2)
    np.testing.assert_array_equal(values(r), v1)
    np.testing.assert_array_equal(v1, ref.clamp(bigv[..., 2:33], -1.0, 2.0))


def test_clamp_errors():
    ctx = ctx_()
    with pytest.raises(TypeError, match="clamp"):
        gg.clamp(ctx, ctx.new_tensor(gg.BF16, [4]), 0.0, 1.0)
    a = ctx.new_tensor(gg.F32, [4, 6])
    with pytest.raises(ValueError, match="clamp_inplace"):
        gg.clamp_inplace(ctx, gg.transpose(ctx, a), 0.0, 1.0)
    with pytest.raises(TypeError, match="clamp"):
        gg.clamp(ctx, None, 0.0, 1.0)


# ---------------------------------------------------------------- arange

@pytest.mark.parametrize("start,stop,step", [(0, 10, 1), (0.5, 3.3, 0.7), (-2, 2, 0.3), (0, 1048576, 1),
                                             (1, 2, 5), (-5.5, -1.25, 0.125)])
def test_arange(start, stop, step):
    ctx = ctx_()
    r = gg.arange(ctx, start, stop, step)
    expected = ref.arange(start, stop, step)
    assert r.op == "ARANGE" and r.type == gg.F32 and r.ne == [len(expected), 1, 1, 1]
    compute(ctx, r)
    np.testing.assert_array_equal(values(r).ravel(), expected)


def test_arange_errors():
    ctx = ctx_()
    with pytest.raises(ValueError, match="arange"):
        gg.arange(ctx, 3.0, 3.0, 1.0)
    with pytest.raises(ValueError, match="arange"):
        gg.arange(ctx, 3.0, 1.0, -1.0)
    with pytest.raises(ValueError, match="arange"):
        gg.arange(ctx, 0.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="arange"):
        gg.arange(ctx, 0.0, float("nan"), 1.0)
    r = gg.arange(ctx, 0.0, 4.0, 1.0)
    compute(ctx, r)
    assert values(r).ravel().tolist() == [0, 1, 2, 3]


# ---------------------------------------------------------------- tri

@pytest.mark.parametrize("kind", [0, 1, 2, 3])
def test_tri(kind):
    ctx = ctx_()
    a, av = new(ctx, gg.F32, [10, 10, 4, 3])
    r = gg.tri(ctx, a, kind)
    assert r.op == "TRI" and r.op_params[0] == kind
    compute(ctx, r)
    np.testing.assert_array_equal(values(r), ref.tri(av, kind))


def test_tri_small_and_edge_values():
    ctx = ctx_()
    x = np.array([[np.nan, 1], [np.inf, -np.inf]], dtype=np.float32)
    a = ctx.new_tensor(gg.F32, [2, 2])
    a.set(x)
    outs = [gg.tri(ctx, a, k) for k in range(4)]
    one = gg.tri(ctx, ctx.new_tensor(gg.F32, [1, 1]), 3)
    compute(ctx, *outs, one)
    # i0 column, i1 row: LOWER keeps i0 < i1 -> only [row 1, col 0]
    np.testing.assert_array_equal(values(outs[3]).reshape(2, 2), [[0, 0], [np.inf, 0]])
    np.testing.assert_array_equal(values(outs[1]).reshape(2, 2), [[0, 1], [0, 0]])
    for k in range(4):
        np.testing.assert_array_equal(values(outs[k]).reshape(2, 2), ref.tri(x, k))
    assert values(one).ravel().tolist() == [0.0]


def test_tri_errors():
    ctx = ctx_()
    with pytest.raises(ValueError, match="tri"):
        gg.tri(ctx, ctx.new_tensor(gg.F32, [4, 5]), 0)
    with pytest.raises(ValueError, match="tri"):
        gg.tri(ctx, ctx.new_tensor(gg.F32, [4, 4]), 7)
    with pytest.raises(TypeError, match="tri"):
        gg.tri(ctx, ctx.new_tensor(gg.F16, [4, 4]), 0)
    a = ctx.new_tensor(gg.F32, [4, 4])
    with pytest.raises(ValueError, match="tri"):
        gg.tri(ctx, gg.transpose(ctx, a), 0)
    r = gg.tri(ctx, a, 2)
    assert r.ne == a.ne


# ---------------------------------------------------------------- timestep_embedding

def _timestep_ref(t, dim, max_period):
    half = dim // 2
    j = np.arange(half, dtype=np.float64)
    freqs = np.exp(-np.log(float(max_period)) * j / half)
    args = np.asarray(t, np.float64)[:, None] * freqs[None, :]
    out = np.concatenate([np.cos(args), np.sin(args)], axis=1)
    if dim % 2:
        out = np.concatenate([out, np.zeros((len(t), 1))], axis=1)
    return out


@pytest.mark.parametrize("dim,max_period", [(64, 10000), (33, 1000), (1, 10), (2, 1), (128, 10000)])
def test_timestep_embedding(dim, max_period):
    ctx = ctx_()
    ts = np.array([0.0, 1.0, 3.5, 17.0, 250.0, 999.0, -4.0], np.float32)
    t = ctx.from_numpy(ts)
    r = gg.timestep_embedding(ctx, t, dim, max_period)
    compute(ctx, r)
    assert r.op == "TIMESTEP_EMBEDDING" and list(r.ne) == [dim, len(ts), 1, 1] and r.type == gg.F32
    want = _timestep_ref(ts, dim, max_period)
    # f32 frequencies times t up to 999: the argument carries ~1e-4 absolute error, as in ggml
    assert_close(values(r)[0, 0], want, 1e-7, "timestep_embedding")
    if dim % 2:
        assert np.all(values(r)[0, 0, :, -1] == 0)


def test_timestep_embedding_strided_and_errors():
    ctx = ctx_()
    big = ctx.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    col = gg.view_1d(ctx, gg.cont(ctx, gg.transpose(ctx, big)), 3, 0)  # [0, 4, 8]
    r = gg.timestep_embedding(ctx, col, 8, 100)
    compute(ctx, r)
    assert_close(values(r)[0, 0], _timestep_ref(np.array([0.0, 4.0, 8.0]), 8, 100), 1e-7)
    with pytest.raises(ValueError, match="timestep_embedding"):
        gg.timestep_embedding(ctx, big, 8, 100)
    with pytest.raises(ValueError, match="timestep_embedding"):
        gg.timestep_embedding(ctx, col, 0, 100)
    with pytest.raises(ValueError, match="timestep_embedding"):
        gg.timestep_embedding(ctx, col, 8, 0)
    with pytest.raises(TypeError, match="timestep_embedding"):
        gg.timestep_embedding(ctx, ctx.new_tensor(gg.I32, [3]), 8, 100)
