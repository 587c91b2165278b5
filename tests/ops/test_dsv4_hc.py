"""DSV4_HC_COMB / DSV4_HC_PRE / DSV4_HC_POST against float64 references."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values


def _comb_case(T, n_iter, eps=1e-6, seed=0, mix_range=2.0, scale_hi=0.5):
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(seed)
    mixes, mv = new(ctx, gg.F32, [24, T], rng=rng, lo=-mix_range, hi=mix_range)
    scale, sv = new(ctx, gg.F32, [3], rng=rng, lo=-scale_hi, hi=scale_hi)
    base, bv = new(ctx, gg.F32, [24], rng=rng, lo=-0.25, hi=0.25)
    r = gg.dsv4_hc_comb(ctx, mixes, scale, base, eps, n_iter)
    return ctx, r, (mv, sv, bv)


@pytest.mark.parametrize("T,n_iter", [(1, 1), (17, 4), (257, 8), (17, 20), (513, 20), (1, 20)])
@pytest.mark.parametrize("eps", [1e-6, 0.0])
def test_comb(T, n_iter, eps):
    ctx, r, (mv, sv, bv) = _comb_case(T, n_iter, eps, seed=T + n_iter)
    assert list(r.ne) == [4, 4, T, 1] and r.type == gg.F32
    compute(ctx, r)
    exp = ref.dsv4_hc_comb(mv.reshape(T, 24), sv.ravel(), bv.ravel(), eps, n_iter)
    assert_close(values(r).reshape(T, 4, 4), exp, 1e-7)


def test_comb_large_logits_stable():
    ctx, r, (mv, sv, bv) = _comb_case(33, 7, 1e-4, seed=3, mix_range=2.0, scale_hi=1.0)
    ctx2 = gg.Context(1 << 20)
    big = ctx2.new_tensor(gg.F32, [24, 5])
    bigv = np.random.default_rng(4).uniform(-400, 400, size=(5, 24)).astype(np.float32)
    big.set(bigv)
    sc = ctx2.new_tensor(gg.F32, [3])
    sc.set(np.array([0, 0, 1.0], np.float32))
    base = ctx2.new_tensor(gg.F32, [24])
    base.set(np.zeros(24, np.float32))
    out = gg.dsv4_hc_comb(ctx2, big, sc, base, 1e-6, 3)
    compute(ctx2, out)
    got = values(out).reshape(5, 4, 4)
    assert np.all(np.isfinite(got))
    assert_close(got, ref.dsv4_hc_comb(bigv, [0, 0, 1.0], np.zeros(24), 1e-6, 3), 1e-7)


def test_comb_ignores_gate_entries():
    """Only scale[2] and the last hc*hc entries of mixes/base matter; indexing 2hc + d + hc*s."""
    T = 9
    rng = np.random.default_rng(11)
    mv = rng.uniform(-2, 2, size=(T, 24)).astype(np.float32)
    bv = rng.uniform(-0.25, 0.25, size=24).astype(np.float32)
    results = []
    for variant in range(2):
        ctx = gg.Context(1 << 20)
        m2, b2 = mv.copy(), bv.copy()
        sv = np.array([0.3, -0.2, 0.4], np.float32)
        if variant:
            m2[:, :8] = rng.uniform(-50, 50, size=(T, 8))
            b2[:8] = rng.uniform(-50, 50, size=8)
            sv[:2] = [7.0, -9.0]
        t_m = ctx.new_tensor(gg.F32, [24, T]); t_m.set(m2)
        t_s = ctx.new_tensor(gg.F32, [3]); t_s.set(sv)
        t_b = ctx.new_tensor(gg.F32, [24]); t_b.set(b2)
        r = gg.dsv4_hc_comb(ctx, t_m, t_s, t_b, 1e-6, 4)
        compute(ctx, r)
        results.append(values(r).copy())
    np.testing.assert_array_equal(results[0], results[1])
    # one-hot logits: a big logit at (d=2, s=1) makes column s=1 concentrate on dst 2
    ctx = gg.Context(1 << 20)
    m = np.zeros((1, 24), np.float32)
    m[0, 8 + 2 + 4 * 1] = 30.0
    t_m = ctx.new_tensor(gg.F32, [24, 1]); t_m.set(m)
    t_s = ctx.new_tensor(gg.F32, [3]); t_s.set(np.array([0, 0, 1], np.float32))
    t_b = ctx.new_tensor(gg.F32, [24]); t_b.set(np.zeros(24, np.float32))
    r = gg.dsv4_hc_comb(ctx, t_m, t_s, t_b, 0.0, 1)
    compute(ctx, r)
    v = values(r).reshape(4, 4)  # (src, dst)
    # softmax: column s=1 ~ one-hot at d=2, other columns 1/4; src normalisation of row d=2
    # divides by 1 + 3/4, so P[2, 1] = 1/1.75 (wrong indexing would land elsewhere)
    assert np.argmax(v[1]) == 2 and abs(v[1, 2] - 1 / 1.75) < 1e-6
    assert_close(v, ref.dsv4_hc_comb(m, [0, 0, 1], np.zeros(24), 0.0, 1)[0], 1e-7)


def test_comb_sinkhorn_converges():
    ctx, r, (mv, sv, bv) = _comb_case(64, 20, 1e-6, seed=5)
    compute(ctx, r)
    v = values(r).reshape(64, 4, 4).astype(np.float64)
    np.testing.assert_allclose(v.sum(axis=1), 1.0, atol=1e-3)  # sums over src
    np.testing.assert_allclose(v.sum(axis=2), 1.0, atol=1e-3)  # sums over dst


def test_comb_threads_agree():
    ctx, r, _ = _comb_case(37, 5, seed=9)
    compute(ctx, r, n_threads=1)
    a = values(r).copy()
    compute(ctx, r, n_threads=2)
    np.testing.assert_array_equal(a, values(r))


def test_comb_rejects():
    ctx = gg.Context(1 << 20)
    for ne0 in (15, 35, 25):  # hc 3, hc 5, not (2+hc)*hc
        m = ctx.new_tensor(gg.F32, [ne0, 2])
        with pytest.raises(ValueError, match="dsv4_hc_comb"):
            gg.dsv4_hc_comb(ctx, m, ctx.new_tensor(gg.F32, [3]), ctx.new_tensor(gg.F32, [ne0]), 1e-6, 1)
    m = ctx.new_tensor(gg.F32, [24, 2])
    s = ctx.new_tensor(gg.F32, [3])
    b = ctx.new_tensor(gg.F32, [24])
    with pytest.raises(ValueError, match="dsv4_hc_comb"):
        gg.dsv4_hc_comb(ctx, m, s, b, 1e-6, 0)
    with pytest.raises(ValueError, match="dsv4_hc_comb"):
        gg.dsv4_hc_comb(ctx, m, ctx.new_tensor(gg.F32, [2]), b, 1e-6, 1)
    with pytest.raises(ValueError, match="dsv4_hc_comb"):
        gg.dsv4_hc_comb(ctx, m, s, ctx.new_tensor(gg.F32, [23]), 1e-6, 1)
    with pytest.raises(ValueError, match="dsv4_hc_comb"):
        gg.dsv4_hc_comb(ctx, ctx.new_tensor(gg.F32, [24, 2, 2]), s, b, 1e-6, 1)
    with pytest.raises(TypeError, match="dsv4_hc_comb"):
        gg.dsv4_hc_comb(ctx, ctx.new_tensor(gg.F16, [24, 2]), s, b, 1e-6, 1)
    with pytest.raises(TypeError, match="dsv4_hc_comb"):
        gg.dsv4_hc_comb(ctx, None, s, b, 1e-6, 1)
    ok = gg.dsv4_hc_comb(ctx, m, s, b, 1e-6, 1)  # context still usable
    assert list(ok.ne) == [4, 4, 2, 1]


# ---------------------------------------------------------------- pre


@pytest.mark.parametrize("hc", [1, 2, 3, 4, 5, 8, 65])
@pytest.mark.parametrize("gated", [False, True])
def test_pre_hc(hc, gated):
    n_embd, T = 128, 17
    ctx = gg.Context(32 << 20)
    rng = np.random.default_rng(hc)
    x, xv = new(ctx, gg.F32, [n_embd, hc, T], rng=rng)
    if gated:
        g, gv = new(ctx, gg.F32, [n_embd, hc, T], rng=rng, lo=-4, hi=4)
        r = gg.dsv4_hc_pre_gated(ctx, x, g, 1.0 / hc)
        exp = ref.dsv4_hc_pre_gated(xv[0], gv[0], 1.0 / hc)
    else:
        w, wv = new(ctx, gg.F32, [hc, T], rng=rng, lo=0, hi=1)
        r = gg.dsv4_hc_pre(ctx, x, w)
        exp = ref.dsv4_hc_pre(xv[0], wv[0, 0])
    assert list(r.ne) == [n_embd, T, 1, 1]
    compute(ctx, r)
    assert_close(values(r)[0, 0], exp, 1e-7)


@pytest.mark.parametrize("n_embd,T", [(1, 1), (31, 17), (128, 257), (4096, 21), (1025, 3)])
def test_pre_sizes(n_embd, T):
    ctx = gg.Context(64 << 20)
    rng = np.random.default_rng(n_embd)
    x, xv = new(ctx, gg.F32, [n_embd, 4, T], rng=rng)
    w, wv = new(ctx, gg.F32, [4, T], rng=rng, lo=0, hi=1)
    g, gv = new(ctx, gg.F32, [n_embd, 4, T], rng=rng, lo=-4, hi=4)
    r = gg.dsv4_hc_pre(ctx, x, w)
    rg = gg.dsv4_hc_pre_gated(ctx, x, g, 0.37)
    compute(ctx, r, rg)
    assert_close(values(r)[0, 0], ref.dsv4_hc_pre(xv[0], wv[0, 0]), 1e-7)
    assert_close(values(rg)[0, 0], ref.dsv4_hc_pre_gated(xv[0], gv[0], 0.37), 1e-7)


def test_pre_strided_inputs():
    """x as a padded view (row stride > n_embd) and as a permuted view (nb0 != 4); weights transposed."""
    n_embd, hc, T = 37, 4, 6
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(2)
    big, bv = new(ctx, gg.F32, [n_embd + 5, hc + 1, T], rng=rng)
    xview = gg.view_4d(ctx, big, n_embd, hc, T, 1, big.nb[1], big.nb[2], big.nb[2] * T, 4 * 3)
    xval = bv[0, :, :hc, 3:3 + n_embd]
    wt, wtv = new(ctx, gg.F32, [T, hc], rng=rng, lo=0, hi=1)  # transposed storage
    w = gg.transpose(ctx, wt)
    r = gg.dsv4_hc_pre(ctx, xview, w)
    gt, gtv = new(ctx, gg.F32, [hc, n_embd, T], rng=rng, lo=-4, hi=4)
    gate = gg.permute(ctx, gt, 1, 0, 2, 3)  # [n_embd, hc, T] with nb0 != 4
    rg = gg.dsv4_hc_pre_gated(ctx, xview, gate, 0.5)
    # x permuted too (nb0 != 4)
    xt, xtv = new(ctx, gg.F32, [hc, n_embd, T], rng=rng)
    rp = gg.dsv4_hc_pre(ctx, gg.permute(ctx, xt, 1, 0, 2, 3), w)
    compute(ctx, r, rg, rp)
    wv = wtv[0, 0].T  # (T, hc)
    assert_close(values(r)[0, 0], ref.dsv4_hc_pre(xval, wv), 1e-7)
    assert_close(values(rg)[0, 0], ref.dsv4_hc_pre_gated(xval, np.swapaxes(gtv[0], 1, 2), 0.5), 1e-7)
    assert_close(values(rp)[0, 0], ref.dsv4_hc_pre(np.swapaxes(xtv[0], 1, 2), wv), 1e-7)


def test_pre_threads_agree():
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(3)
    x, _ = new(ctx, gg.F32, [3000, 4, 5], rng=rng)
    w, _ = new(ctx, gg.F32, [4, 5], rng=rng)
    r = gg.dsv4_hc_pre(ctx, x, w)
    compute(ctx, r, n_threads=1)
    a = values(r).copy()
    compute(ctx, r, n_threads=2)
    np.testing.assert_array_equal(a, values(r))


def test_pre_rejects():
    ctx = gg.Context(1 << 20)
    x = ctx.new_tensor(gg.F32, [8, 4, 3])
    with pytest.raises(ValueError, match="dsv4_hc_pre"):
        gg.dsv4_hc_pre(ctx, x, ctx.new_tensor(gg.F32, [3, 3]))
    with pytest.raises(ValueError, match="dsv4_hc_pre"):
        gg.dsv4_hc_pre(ctx, ctx.new_tensor(gg.F32, [8, 4, 3, 2]), ctx.new_tensor(gg.F32, [4, 3]))
    with pytest.raises(TypeError, match="dsv4_hc_pre"):
        gg.dsv4_hc_pre(ctx, x, ctx.new_tensor(gg.F16, [4, 3]))
    with pytest.raises(TypeError, match="dsv4_hc_pre"):
        gg.dsv4_hc_pre(ctx, x, None)
    with pytest.raises(ValueError, match="dsv4_hc_pre_gated"):
        gg.dsv4_hc_pre_gated(ctx, x, ctx.new_tensor(gg.F32, [8, 4, 2]), 1.0)
    with pytest.raises(TypeError, match="dsv4_hc_pre_gated"):
        gg.dsv4_hc_pre_gated(ctx, x, ctx.new_tensor(gg.BF16, [8, 4, 3]), 1.0)
    assert list(gg.dsv4_hc_pre(ctx, x, ctx.new_tensor(gg.F32, [4, 3])).ne) == [8, 3, 1, 1]


# ---------------------------------------------------------------- post


@pytest.mark.parametrize("n_embd,hc,T", [(1, 4, 1), (31, 4, 17), (128, 4, 257), (4096, 4, 21), (31, 3, 5),
                                         (65, 1, 3), (33, 8, 4)])
@pytest.mark.parametrize("with_comb", [True, False])
def test_post(n_embd, hc, T, with_comb):
    ctx = gg.Context(64 << 20)
    rng = np.random.default_rng(n_embd * 10 + hc)
    x, xv = new(ctx, gg.F32, [n_embd, T], rng=rng)
    res, rv = new(ctx, gg.F32, [n_embd, hc, T], rng=rng)
    post, pv = new(ctx, gg.F32, [hc, T], rng=rng, lo=0, hi=2)
    comb, cv = new(ctx, gg.F32, [hc, hc, T], rng=rng, lo=0, hi=1) if with_comb else (None, None)
    r = gg.dsv4_hc_post(ctx, x, res, post, comb)
    assert list(r.ne) == [n_embd, hc, T, 1]
    compute(ctx, r)
    exp = ref.dsv4_hc_post(xv[0, 0], rv[0], pv[0, 0], cv[0] if with_comb else None)
    assert_close(values(r)[0], exp, 1e-7)


def test_post_strided_and_threads():
    n_embd, hc, T = 50, 4, 7
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(21)
    big, bv = new(ctx, gg.F32, [n_embd + 3, hc, T], rng=rng)
    res = gg.view_3d(ctx, big, n_embd, hc, T, big.nb[1], big.nb[2], 8)
    rval = bv[0, :, :, 2:2 + n_embd]
    xt, xtv = new(ctx, gg.F32, [T, n_embd], rng=rng)
    x = gg.transpose(ctx, xt)  # nb0 != 4
    post, pv = new(ctx, gg.F32, [hc, T], rng=rng, lo=0, hi=2)
    ct, ctv = new(ctx, gg.F32, [hc, hc, T], rng=rng)
    comb = gg.permute(ctx, ct, 1, 0, 2, 3)  # comb[d, s] = ct[s, d]
    r = gg.dsv4_hc_post(ctx, x, res, post, comb)
    compute(ctx, r, n_threads=1)
    a = values(r).copy()
    compute(ctx, r, n_threads=2)
    np.testing.assert_array_equal(a, values(r))
    cval = np.swapaxes(ctv[0], 1, 2)  # numpy (t, s, d) of comb
    assert_close(a[0], ref.dsv4_hc_post(xtv[0, 0].T, rval, pv[0, 0], cval), 1e-7)


def test_post_rejects():
    ctx = gg.Context(1 << 20)
    x = ctx.new_tensor(gg.F32, [8, 3])
    res = ctx.new_tensor(gg.F32, [8, 4, 3])
    post = ctx.new_tensor(gg.F32, [4, 3])
    with pytest.raises(ValueError, match="dsv4_hc_post"):
        gg.dsv4_hc_post(ctx, ctx.new_tensor(gg.F32, [8, 2]), res, post, None)
    with pytest.raises(ValueError, match="dsv4_hc_post"):
        gg.dsv4_hc_post(ctx, x, res, ctx.new_tensor(gg.F32, [3, 3]), None)
    with pytest.raises(ValueError, match="dsv4_hc_post"):
        gg.dsv4_hc_post(ctx, x, res, post, ctx.new_tensor(gg.F32, [4, 3, 3]))
    with pytest.raises(TypeError, match="dsv4_hc_post"):
        gg.dsv4_hc_post(ctx, x, res, post, ctx.new_tensor(gg.F16, [4, 4, 3]))
    with pytest.raises(TypeError, match="dsv4_hc_post"):
        gg.dsv4_hc_post(ctx, x, None, post, None)
    assert list(gg.dsv4_hc_post(ctx, x, res, post, None).ne) == [8, 4, 3, 1]


@pytest.mark.parametrize("simd", ["scalar", "avx2"], indirect=True)
def test_other_isa_paths_match(simd):
    """The plain loops and the AVX2 kernels (gg.set_isa) give the reference results too."""
    ctx = gg.Context(1 << 22)
    rng = np.random.default_rng(0)
    x = ctx.new_tensor(gg.F32, [77, 4, 3]); xv = rng.uniform(-1, 1, (3, 4, 77)).astype(np.float32); x.set(xv)
    w = ctx.new_tensor(gg.F32, [4, 3]); wv = rng.uniform(0, 1, (3, 4)).astype(np.float32); w.set(wv)
    r = gg.dsv4_hc_pre(ctx, x, w)
    g = gg.Graph(ctx); g.build_forward_expand(r); g.compute(n_threads=1)
    exp = np.einsum('thi,th->ti', xv.astype(np.float64), wv)
    got = r.to_f32().reshape(3, 77)
    assert np.sum((got - exp) ** 2) / np.sum(exp ** 2) < 1e-12


@pytest.mark.parametrize("simd", ["scalar", "avx2", "native"], indirect=True)
@pytest.mark.parametrize("T", [1, 8, 13, 33])
def test_comb_isa_paths_match(simd, T):
    """The Sinkhorn block (eight tokens per call, a partly filled last block) at every SIMD level."""
    ctx, r, (mv, sv, bv) = _comb_case(T, 20, 1e-6, seed=100 + T)
    compute(ctx, r, n_threads=2)
    exp = ref.dsv4_hc_comb(mv.reshape(T, 24), sv.ravel(), bv.ravel(), 1e-6, 20)
    assert_close(values(r).reshape(T, 4, 4), exp, 1e-7)


@pytest.mark.parametrize("simd", ["scalar", "avx2", "native"], indirect=True)
@pytest.mark.parametrize("n_embd", [1, 7, 8, 77, 1031])
def test_pre_gated_isa_paths_match(simd, n_embd):
    """The vector sigmoid path (whole vectors plus a scalar tail) at every SIMD level, gates up to +-30."""
    hc, T = 4, 5
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(n_embd)
    x, xv = new(ctx, gg.F32, [n_embd, hc, T], rng=rng)
    g, gv = new(ctx, gg.F32, [n_embd, hc, T], rng=rng, lo=-30, hi=30)
    r = gg.dsv4_hc_pre_gated(ctx, x, g, 0.3)
    compute(ctx, r)
    assert_close(values(r)[0, 0], ref.dsv4_hc_pre_gated(xv[0], gv[0], 0.3), 1e-7)


def test_empty_token_count_is_noop():
    ctx = gg.Context(1 << 20)
    x = ctx.new_tensor(gg.F32, [8, 4, 0])
    w = ctx.new_tensor(gg.F32, [4, 0])
    r = gg.dsv4_hc_pre(ctx, x, w)
    m = gg.dsv4_hc_comb(ctx, ctx.new_tensor(gg.F32, [24, 0]), ctx.new_tensor(gg.F32, [3]),
                        ctx.new_tensor(gg.F32, [24]), 1e-6, 3)
    p = gg.dsv4_hc_post(ctx, ctx.new_tensor(gg.F32, [8, 0]), x, w, None)
    assert list(r.ne) == [8, 0, 1, 1] and list(m.ne) == [4, 4, 0, 1] and list(p.ne) == [8, 4, 0, 1]
    compute(ctx, r, m, p)
