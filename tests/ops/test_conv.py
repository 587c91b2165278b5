"""The conv family (im2col, convolutions composite and direct, transposed, col2im) against
numpy float64 references on odd sizes, strides, paddings, dilations and views."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values


def f16(x):
    return np.asarray(x, np.float64).astype(np.float16).astype(np.float64)


def _view_of(ctx, t, kind):
    """The same values as t through a non-contiguous layout (a permuted copy viewed back)."""
    if kind == "plain":
        return t
    # a [W, H, C, N] tensor stored as [H, W, C, N], permuted back: dims 0 and 1 strided
    v = values(t)
    st = ctx.new_tensor(t.type, [t.ne[1], t.ne[0], t.ne[2], t.ne[3]])
    st.set(np.ascontiguousarray(np.swapaxes(v, 2, 3)).astype(np.float16 if t.type == gg.F16 else np.float32))
    return gg.permute(ctx, st, 1, 0, 2, 3)


# ------------------------------------------------------------------ im2col


@pytest.mark.parametrize("dst_type", [gg.F32, gg.F16])
@pytest.mark.parametrize("src_type", [gg.F32, gg.F16])
@pytest.mark.parametrize("geom", [(3, 3, 1, 1, 1, 1, 1, 1), (3, 2, 2, 1, 0, 2, 1, 3), (5, 1, 3, 2, 2, 0, 2, 1)])
@pytest.mark.parametrize("layout", ["plain", "permuted"])
def test_im2col_2d(dst_type, src_type, geom, layout):
    KW, KH, s0, s1, p0, p1, d0, d1 = geom
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(sum(geom))
    kernel = ctx.new_tensor(gg.F16, [KW, KH, 3, 2])
    x, xv = new(ctx, src_type, [13, 11, 3, 2], rng=rng)
    r = gg.im2col(ctx, kernel, _view_of(ctx, x, layout), s0, s1, p0, p1, d0, d1, True, dst_type)
    compute(ctx, r)
    cols = ref.im2col_nd(xv, (KH, KW), (s1, s0), (p1, p0), (d1, d0))  # (N, OH, OW, IC, KH, KW)
    exp = cols.reshape(cols.shape[:3] + (-1,))
    assert list(r.ne) == [exp.shape[3], exp.shape[2], exp.shape[1], exp.shape[0]]
    got = values(r)
    if dst_type == gg.F16:
        exp = f16(exp)
    np.testing.assert_array_equal(got, exp)


@pytest.mark.parametrize("K,s,p,d", [(3, 1, 0, 1), (4, 2, 3, 1), (3, 3, 1, 2)])
def test_im2col_1d(K, s, p, d):
    ctx = gg.Context(4 << 20)
    kernel = ctx.new_tensor(gg.F16, [K, 5])
    x, xv = new(ctx, gg.F32, [29, 5, 3], rng=np.random.default_rng(K))
    r = gg.im2col(ctx, kernel, x, s, 0, p, 0, d, 0, False, gg.F32)
    compute(ctx, r)
    cols = ref.im2col_nd(xv[0], (K,), (s,), (p,), (d,))  # (N, OL, IC, K)
    exp = cols.reshape(1, cols.shape[0], cols.shape[1], -1)
    np.testing.assert_array_equal(values(r), exp)


def test_im2col_3d():
    ctx = gg.Context(16 << 20)
    IC, N = 3, 2
    kernel = ctx.new_tensor(gg.F32, [3, 2, 2, IC * 4])
    x, xv = new(ctx, gg.F32, [9, 7, 6, IC * N], rng=np.random.default_rng(3))
    for dst_type in (gg.F32, gg.F16):
        r = gg.im2col_3d(ctx, kernel, x, IC, 2, 1, 1, 1, 0, 1, 1, 2, 1, dst_type)
        compute(ctx, r)
        cols = ref.im2col_nd(xv.reshape(N, IC, 6, 7, 9), (2, 2, 3), (1, 1, 2), (1, 0, 1), (1, 2, 1))
        N_, OD, OH, OW = cols.shape[:4]
        exp = cols.reshape(N_ * OD, OH, OW, -1)
        got = values(r)
        np.testing.assert_array_equal(got, f16(exp) if dst_type == gg.F16 else exp)


# ------------------------------------------------------------------ conv_2d


CONV_GEOMS = [(1, 1, 0, 0, 1, 1), (2, 1, 1, 2, 1, 2), (1, 3, 2, 1, 2, 1)]


@pytest.mark.parametrize("ktype", [gg.F32, gg.F16])
@pytest.mark.parametrize("geom", CONV_GEOMS)
@pytest.mark.parametrize("fn", ["conv_2d", "conv_2d_direct"])
def test_conv_2d(ktype, geom, fn):
    s0, s1, p0, p1, d0, d1 = geom
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(sum(geom) + (ktype == gg.F16))
    k, kv = new(ctx, ktype, [3, 5, 3, 7], rng=rng)
    x, xv = new(ctx, gg.F32, [17, 13, 3, 2], rng=rng)
    r = getattr(gg, fn)(ctx, k, x, s0, s1, p0, p1, d0, d1)
    compute(ctx, r)
    # f16 kernels see the image rounded to f16 (im2col in f16, or the direct op's f16 patches)
    xr = f16(xv) if (ktype == gg.F16 or fn == "conv_2d") else xv
    exp = ref.conv_nd(xr, kv, (s1, s0), (p1, p0), (d1, d0))
    assert list(r.ne) == list(reversed(exp.shape))
    assert_close(values(r), exp, 1e-6, what=fn)


def test_conv_2d_direct_views_and_chunks():
    """A strided (permuted) image and an image large enough to need several patch chunks."""
    ctx = gg.Context(64 << 20)
    rng = np.random.default_rng(7)
    k, kv = new(ctx, gg.F32, [3, 3, 3, 5], rng=rng)
    x, xv = new(ctx, gg.F32, [15, 9, 3, 1], rng=rng)
    r = gg.conv_2d_direct(ctx, k, _view_of(ctx, x, "permuted"), 1, 1, 1, 1, 1, 1)
    big, bv = new(ctx, gg.F32, [301, 290, 3, 1], rng=rng)  # 87290 pixels x 108 bytes > one 8 MiB chunk
    rb = gg.conv_2d_direct(ctx, k, big, 1, 1, 1, 1, 1, 1)
    compute(ctx, r, rb)
    assert_close(values(r), ref.conv_nd(xv, kv, (1, 1), (1, 1), (1, 1)), 1e-6)
    assert_close(values(rb), ref.conv_nd(bv, kv, (1, 1), (1, 1), (1, 1)), 1e-6)


def test_conv_2d_aliases():
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(11)
    k, kv = new(ctx, gg.F16, [3, 3, 2, 4], rng=rng)
    x, xv = new(ctx, gg.F32, [12, 9, 2, 1], rng=rng)
    r_sk = gg.conv_2d_sk_p0(ctx, k, x)
    r_ph = gg.conv_2d_s1_ph(ctx, k, x)
    compute(ctx, r_sk, r_ph)
    assert_close(values(r_sk), ref.conv_nd(f16(xv), kv, (3, 3), (0, 0), (1, 1)), 1e-6)
    assert_close(values(r_ph), ref.conv_nd(f16(xv), kv, (1, 1), (1, 1), (1, 1)), 1e-6)


def test_conv_2d_bf16_kernel_uses_f32_columns():
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(5)
    kv32 = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
    k = ctx.new_tensor(gg.BF16, [3, 3, 3, 4])
    k.set(kv32)
    kv = values(k).astype(np.float64)
    x, xv = new(ctx, gg.F32, [10, 8, 3, 1], rng=rng)
    r = gg.conv_2d(ctx, k, x, 1, 1, 0, 0, 1, 1)
    compute(ctx, r)
    # bf16 weights round the f32 columns to bf16 inside mul_mat (within the bf16 bound)
    exp = ref.conv_nd(xv, kv, (1, 1), (0, 0), (1, 1))
    assert_close(values(r), exp, 5e-5)


# ------------------------------------------------------------------ depth-wise


@pytest.mark.parametrize("simd", ["native", "scalar"], indirect=True)
@pytest.mark.parametrize("geom", CONV_GEOMS)
@pytest.mark.parametrize("ktype", [gg.F32, gg.F16])
def test_conv_2d_dw(simd, geom, ktype):
    s0, s1, p0, p1, d0, d1 = geom
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(sum(geom))
    k, kv = new(ctx, ktype, [3, 5, 1, 4], rng=rng)
    x, xv = new(ctx, gg.F32, [15, 11, 4, 2], rng=rng)
    r_direct = gg.conv_2d_dw_direct(ctx, k, x, s0, s1, p0, p1, d0, d1)
    r_comp = gg.conv_2d_dw(ctx, k, x, s0, s1, p0, p1, d0, d1)
    compute(ctx, r_direct, r_comp)
    exp = ref.conv_2d_dw(xv, kv, (s1, s0), (p1, p0), (d1, d0))
    assert_close(values(r_direct), exp, 1e-7, what="direct")
    assert_close(values(r_comp), ref.conv_2d_dw(f16(xv), kv, (s1, s0), (p1, p0), (d1, d0)), 1e-6, what="composite")


def test_conv_2d_dw_direct_cwhn():
    """Channel-innermost input and kernel: the result is laid out CWHN too, values as WHCN."""
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(2)
    C = 6
    kc, kcv = new(ctx, gg.F32, [C, 1, 3, 3], rng=rng)  # [C, 1, KW, KH] stored
    xc, xcv = new(ctx, gg.F32, [C, 10, 7, 2], rng=rng)  # [C, W, H, N] stored
    k = gg.permute(ctx, kc, 3, 2, 0, 1)  # -> [KW, KH, 1, C]
    x = gg.permute(ctx, xc, 2, 0, 1, 3)  # -> [W, H, C, N]
    r = gg.conv_2d_dw_direct(ctx, k, x, 1, 2, 1, 0, 1, 1)
    compute(ctx, r)
    assert r.nb[2] == 4 and r.nb[0] == C * 4
    # kc is stored [C, 1, KW, KH]: numpy (KH, KW, 1, C)
    kv = np.transpose(kcv[:, :, 0, :], (2, 0, 1))[:, None]  # (C, 1, KH, KW)
    xv = np.transpose(xcv, (0, 3, 1, 2))  # (N, C, H, W)
    exp = ref.conv_2d_dw(xv, kv, (2, 1), (0, 1), (1, 1))
    got = np.array(r.to_f32()).reshape(tuple(reversed(r.ne)))  # logical order
    assert_close(got, exp, 1e-7)


# ------------------------------------------------------------------ 1-D


@pytest.mark.parametrize("s,p,d", [(1, 0, 1), (2, 1, 2), (3, 2, 1)])
def test_conv_1d(s, p, d):
    ctx = gg.Context(8 << 20)
    rng = np.random.default_rng(s * 10 + p)
    k, kv = new(ctx, gg.F16, [3, 4, 5], rng=rng)  # [K, IC, OC]
    x, xv = new(ctx, gg.F32, [31, 4, 1], rng=rng)  # [L, IC, 1]
    r = gg.conv_1d(ctx, k, x, s, p, d)
    r_ph = gg.conv_1d_ph(ctx, k, x, s, d)
    compute(ctx, r, r_ph)
    exp = ref.conv_nd(f16(xv[0]), kv[0], (s,), (p,), (d,))  # (1, OC, OL)
    assert_close(values(r)[0], exp, 1e-6)
    assert_close(values(r_ph)[0], ref.conv_nd(f16(xv[0]), kv[0], (s,), (1,), (d,)), 1e-6)


def test_conv_1d_batch_layout_matches_ggml():
    """With N > 1 ggml reads the [N*OL, OC] product as [OL, OC, N]; pyggml builds the same graph."""
    ctx = gg.Context(8 << 20)
    rng = np.random.default_rng(3)
    k, kv = new(ctx, gg.F16, [3, 2, 4], rng=rng)
    x, xv = new(ctx, gg.F32, [9, 2, 3], rng=rng)
    r = gg.conv_1d(ctx, k, x, 1, 0, 1)
    compute(ctx, r)
    true = ref.conv_nd(f16(xv[0]), kv[0], (1,), (0,), (1,))  # (N, OC, OL)
    mem = np.transpose(true, (1, 0, 2)).ravel()  # product memory: index (n*OL + ol) + N*OL*oc
    assert_close(values(r).ravel(), mem, 1e-6)


def test_conv_1d_dw():
    ctx = gg.Context(8 << 20)
    rng = np.random.default_rng(4)
    k, kv = new(ctx, gg.F16, [5, 1, 6], rng=rng)  # [K, 1, C]
    x, xv = new(ctx, gg.F32, [23, 6], rng=rng)  # [L, C]
    r = gg.conv_1d_dw(ctx, k, x, 2, 1, 1)
    r_ph = gg.conv_1d_dw_ph(ctx, k, x, 1, 1)
    compute(ctx, r, r_ph)
    xr = f16(xv[0, 0])[None, :, None, :]  # (1, C, 1, L)
    kr = kv[0][:, :, None, :]  # (C, 1, 1, K)
    exp = ref.conv_2d_dw(xr, kr, (1, 2), (0, 1), (1, 1))[0, :, 0]  # (C, OL)
    assert_close(values(r)[0, 0], exp, 1e-6)
    exp_ph = ref.conv_2d_dw(xr, kr, (1, 1), (0, 2), (1, 1))[0, :, 0]
    assert_close(values(r_ph)[0, 0], exp_ph, 1e-6)


# ------------------------------------------------------------------ 3-D


@pytest.mark.parametrize("fn", ["conv_3d", "conv_3d_direct"])
@pytest.mark.parametrize("ktype", [gg.F32, gg.F16])
def test_conv_3d(fn, ktype):
    IC, OC, N = 3, 4, 2
    ctx = gg.Context(32 << 20)
    rng = np.random.default_rng(9)
    k, kv = new(ctx, ktype, [3, 2, 3, IC * OC], rng=rng)
    x, xv = new(ctx, gg.F32, [11, 8, 7, IC * N], rng=rng)
    geo = dict(s=(1, 2, 1), p=(1, 0, 2), d=(2, 1, 1))  # numpy axis order (D, H, W)
    if fn == "conv_3d":
        r = gg.conv_3d(ctx, k, x, IC, 1, 2, 1, 2, 0, 1, 1, 1, 2)
    else:
        r = gg.conv_3d_direct(ctx, k, x, 1, 2, 1, 2, 0, 1, 1, 1, 2, IC, N, OC)
    compute(ctx, r)
    xr = f16(xv) if (fn == "conv_3d" or ktype == gg.F16) else xv
    exp = ref.conv_nd(xr.reshape(N, IC, 7, 8, 11), kv.reshape(OC, IC, 3, 2, 3), **geo)  # (N, OC, OD, OH, OW)
    exp = exp.reshape((N * OC,) + exp.shape[2:])
    assert list(r.ne) == list(reversed(exp.shape))
    assert_close(values(r), exp, 1e-6)


# ------------------------------------------------------------------ transposed


@pytest.mark.parametrize("ktype", [gg.F32, gg.F16])
@pytest.mark.parametrize("s", [1, 2, 3])
def test_conv_transpose_1d(ktype, s):
    ctx = gg.Context(8 << 20)
    rng = np.random.default_rng(s)
    k, kv = new(ctx, ktype, [5, 3, 4], rng=rng)  # [K, OC, IC]
    x, xv = new(ctx, gg.F32, [13, 4], rng=rng)  # [L, IC]
    r = gg.conv_transpose_1d(ctx, k, x, s, 0, 1)
    compute(ctx, r)
    xr = f16(xv) if ktype == gg.F16 else xv
    exp = ref.conv_transpose_2d(xr[0, 0][None, :, None, :], kv[0][:, :, None, :], s)  # (1, OC, 1, OL)
    assert list(r.ne) == [(13 - 1) * s + 5, 3, 1, 1]
    assert_close(values(r)[0, 0], exp[0, :, 0], 1e-7)


@pytest.mark.parametrize("ktype", [gg.F32, gg.F16])
@pytest.mark.parametrize("s", [1, 2])
def test_conv_transpose_2d_p0(ktype, s):
    ctx = gg.Context(8 << 20)
    rng = np.random.default_rng(s + 5)
    k, kv = new(ctx, ktype, [3, 2, 5, 4], rng=rng)  # [KW, KH, OC, IC]
    x, xv = new(ctx, gg.F32, [7, 6, 4, 2], rng=rng)
    r = gg.conv_transpose_2d_p0(ctx, k, _view_of(ctx, x, "permuted"), s)
    compute(ctx, r)
    xr = f16(xv) if ktype == gg.F16 else xv
    exp = ref.conv_transpose_2d(xr, kv, s)
    assert_close(values(r), exp, 1e-7)


def test_col2im_1d():
    ctx = gg.Context(4 << 20)
    K, OC, T, s, p = 4, 3, 9, 2, 1
    a, av = new(ctx, gg.F32, [K * OC, T], rng=np.random.default_rng(1))
    r = gg.col2im_1d(ctx, a, s, OC, p)
    compute(ctx, r)
    full = np.zeros((OC, (T - 1) * s + K))
    for t in range(T):
        for oc in range(OC):
            full[oc, t * s:t * s + K] += av[0, 0, t, oc * K:(oc + 1) * K]
    assert_close(values(r)[0, 0], full[:, p:full.shape[1] - p], 1e-7)


# ------------------------------------------------------------------ errors


def test_conv_rejects_bad_input():
    ctx = gg.Context(4 << 20)
    k = ctx.new_tensor(gg.F16, [3, 3, 2, 4])
    x = ctx.new_tensor(gg.F32, [8, 8, 3, 1])
    with pytest.raises(ValueError, match="im2col"):
        gg.im2col(ctx, k, x, 1, 1, 0, 0, 1, 1, True, gg.F32)  # IC mismatch
    x2 = ctx.new_tensor(gg.F32, [8, 8, 2, 1])
    with pytest.raises(ValueError, match="stride"):
        gg.conv_2d_direct(ctx, k, x2, 0, 1, 0, 0, 1, 1)
    with pytest.raises(ValueError, match="too small"):
        gg.conv_2d(ctx, k, ctx.new_tensor(gg.F32, [2, 8, 2, 1]), 1, 1, 0, 0, 1, 1)
    with pytest.raises(TypeError, match="dst_type"):
        gg.im2col(ctx, k, x2, 1, 1, 0, 0, 1, 1, True, gg.Q8_0)
    with pytest.raises(ValueError, match="p0 == 0"):
        gg.conv_transpose_1d(ctx, ctx.new_tensor(gg.F32, [3, 2, 4]), ctx.new_tensor(gg.F32, [5, 4]), 1, 1, 1)
    with pytest.raises(TypeError, match="conv_2d_direct"):
        gg.conv_2d_direct(ctx, k, None, 1, 1, 0, 0, 1, 1)
    with pytest.raises(ValueError, match="conv_3d_direct"):
        gg.conv_3d_direct(ctx, ctx.new_tensor(gg.F32, [3, 3, 3, 6]), ctx.new_tensor(gg.F32, [8, 8, 8, 4]),
                          1, 1, 1, 0, 0, 0, 1, 1, 1, 3, 1, 2)  # b.ne[3] != c*n
