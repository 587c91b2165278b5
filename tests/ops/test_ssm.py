"""SSM_CONV and SSM_SCAN against float64 references."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

# ---------------------------------------------------------------- ssm_conv


@pytest.mark.parametrize("d_conv", [3, 4, 9])
@pytest.mark.parametrize("n_t_kind", ["one", "d_conv", "64"])
@pytest.mark.parametrize("n_s", [1, 4])
def test_conv(d_conv, n_t_kind, n_s):
    n_t = {"one": 1, "d_conv": d_conv, "64": 64}[n_t_kind]
    d_inner = 67
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(d_conv * 100 + n_t + n_s)
    sx, sxv = new(ctx, gg.F32, [d_conv - 1 + n_t, d_inner, n_s], rng=rng)
    c, cv = new(ctx, gg.F32, [d_conv, d_inner], rng=rng)
    r = gg.ssm_conv(ctx, sx, c)
    assert list(r.ne) == [d_inner, n_t, n_s, 1]
    compute(ctx, r)
    assert_close(values(r)[0], ref.ssm_conv(sxv[0], cv[0, 0]), 1e-7)


def test_conv_no_flip_and_history():
    """A filter [0, 0, 1] (d_conv 3) returns the newest input; [1, 0, 0] the oldest history column."""
    ctx = gg.Context(1 << 20)
    sx = ctx.new_tensor(gg.F32, [5, 2, 1])  # history 2 + 3 tokens
    sxv = np.array([[10, 20, 1, 2, 3], [-10, -20, -1, -2, -3]], np.float32)
    sx.set(sxv)
    c = ctx.new_tensor(gg.F32, [3, 2])
    c.set(np.array([[0, 0, 1], [1, 0, 0]], np.float32))
    r = gg.ssm_conv(ctx, sx, c)
    compute(ctx, r)
    v = values(r)[0, 0]  # (n_t, d_inner)
    np.testing.assert_array_equal(v[:, 0], [1, 2, 3])
    np.testing.assert_array_equal(v[:, 1], [-10, -20, -1])


def test_conv_threads_and_rejects():
    ctx = gg.Context(4 << 20)
    rng = np.random.default_rng(1)
    sx, _ = new(ctx, gg.F32, [3 + 10, 130, 2], rng=rng)
    c, _ = new(ctx, gg.F32, [4, 130], rng=rng)
    r = gg.ssm_conv(ctx, sx, c)
    compute(ctx, r, n_threads=1)
    a = values(r).copy()
    compute(ctx, r, n_threads=2)
    np.testing.assert_array_equal(a, values(r))
    with pytest.raises(ValueError, match="ssm_conv"):
        gg.ssm_conv(ctx, sx, ctx.new_tensor(gg.F32, [4, 129]))
    with pytest.raises(ValueError, match="ssm_conv"):
        gg.ssm_conv(ctx, ctx.new_tensor(gg.F32, [2, 130, 2]), c)  # shorter than d_conv - 1
    with pytest.raises(TypeError, match="ssm_conv"):
        gg.ssm_conv(ctx, ctx.new_tensor(gg.F16, [13, 130, 2]), c)
    with pytest.raises(TypeError, match="ssm_conv"):
        gg.ssm_conv(ctx, sx, None)
    assert list(gg.ssm_conv(ctx, sx, c).ne) == [130, 10, 2, 1]


@pytest.mark.parametrize("d_conv", [2, 4, 5, 11])
@pytest.mark.parametrize("n_t", [1, 3, 70])
@pytest.mark.parametrize("n_s", [1, 2])
@pytest.mark.parametrize("d_inner", [7, 64, 131])
def test_conv_channel_packed_view(d_conv, n_t, n_s, d_inner):
    """sx as the transposed view of a [d_inner, d_conv-1+n_t, n_s] buffer (channels packed, the
    layout the recurrent models keep their conv state in) equals the packed-time result bit for
    bit (the taps are summed in the same order) and the float64 reference."""
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(d_conv * 1000 + n_t * 10 + n_s + d_inner)
    buf, bv = new(ctx, gg.F32, [d_inner, d_conv - 1 + n_t, n_s], rng=rng)
    c, cv = new(ctx, gg.F32, [d_conv, d_inner], rng=rng)
    x = np.swapaxes(bv[0], 1, 2)                       # (n_s, d_inner, time)
    packed = ctx.new_tensor(gg.F32, [d_conv - 1 + n_t, d_inner, n_s])
    packed.set(np.ascontiguousarray(x).astype(np.float32))
    r_view, r_packed = gg.ssm_conv(ctx, gg.transpose(ctx, buf), c), gg.ssm_conv(ctx, packed, c)
    for n_threads in (1, 3):
        compute(ctx, r_view, r_packed, n_threads=n_threads)
        np.testing.assert_array_equal(values(r_view), values(r_packed))
    assert_close(values(r_view)[0], ref.ssm_conv(x, cv[0, 0]), 1e-7)


def test_conv_other_strides():
    """A view packed in neither dim (every other channel of a buffer, time outermost)."""
    ctx = gg.Context(4 << 20)
    rng = np.random.default_rng(7)
    d_conv, n_t, d_inner = 4, 5, 9
    buf, bv = new(ctx, gg.F32, [2 * d_inner, d_conv - 1 + n_t], rng=rng)
    c, cv = new(ctx, gg.F32, [d_conv, d_inner], rng=rng)
    v = gg.view_3d(ctx, buf, 1, d_inner, d_conv - 1 + n_t, 8, buf.nb[1], 0)   # channel 2i
    sx = gg.permute(ctx, v, 2, 1, 0, 3)
    assert list(sx.ne[:3]) == [d_conv - 1 + n_t, d_inner, 1] and sx.nb[0] != 4 and sx.nb[1] != 4
    r = gg.ssm_conv(ctx, sx, c)
    compute(ctx, r)
    x = np.swapaxes(bv[0, 0][:, 0::2], 0, 1)[None]    # (1, d_inner, time)
    assert_close(values(r)[0], ref.ssm_conv(x, cv[0, 0]), 1e-7)


# ---------------------------------------------------------------- ssm_scan


def _scan_inputs(ctx, rng, d_state, head_dim, n_head, n_group, T, n_seqs, mamba=2, n_slots=None, ids=None,
                 dt_values=None, weak=False):
    n_slots = n_slots or n_seqs
    s, sv = new(ctx, gg.F32, [d_state, head_dim, n_head, n_slots], rng=rng)
    x, xv = new(ctx, gg.F32, [head_dim, n_head, T, n_seqs], rng=rng)
    dt, dtv = new(ctx, gg.F32, [n_head, T, n_seqs], rng=rng, data=dt_values)
    lo, hi = (-0.02, -0.005) if weak else (-1.0, -0.5)
    A, Av = new(ctx, gg.F32, [d_state if mamba == 1 else 1, n_head], rng=rng, lo=lo, hi=hi)
    B, Bv = new(ctx, gg.F32, [d_state, n_group, T, n_seqs], rng=rng)
    C, Cv = new(ctx, gg.F32, [d_state, n_group, T, n_seqs], rng=rng)
    ids = list(rng.permutation(n_seqs)) if ids is None else ids
    idt = ctx.new_tensor(gg.I32, [n_seqs])
    idt.set(np.array(ids, np.int32))
    tensors = (s, x, dt, A, B, C, idt)
    vals = (sv, xv, dtv[0], Av[0, 0], Bv, Cv, ids)
    return tensors, vals


def _ref_scan(vals, K):
    sv, xv, dtv, Av, Bv, Cv, ids = vals
    return ref.ssm_scan(sv, xv, dtv, Av, Bv, Cv, ids, K)


def _bound(head_dim):
    return 1e-7 if head_dim == 1 else 2e-7


@pytest.mark.parametrize("d_state,head_dim,n_head,n_group,T,n_seqs,K", [
    (16, 5, 8, 2, 7, 2, 1),
    (64, 16, 8, 8, 4, 2, 1),
    (128, 64, 4, 1, 1, 1, 1),
    (32, 8, 4, 2, 65, 2, 1),
    (96, 16, 16, 8, 5, 1, 1),
    (128, 64, 16, 2, 4, 2, 4),   # all planes written
    (128, 64, 16, 2, 8, 2, 3),
    (17, 3, 6, 3, 9, 3, 2),      # odd d_state (SIMD tail)
])
def test_scan_mamba2(d_state, head_dim, n_head, n_group, T, n_seqs, K):
    ctx = gg.Context(64 << 20)
    rng = np.random.default_rng(d_state + head_dim + T)
    ts, vals = _scan_inputs(ctx, rng, d_state, head_dim, n_head, n_group, T, n_seqs)
    r = gg.ssm_scan(ctx, *ts, K)
    Ny = head_dim * n_head * T * n_seqs
    Ns = d_state * head_dim * n_head * n_seqs
    assert list(r.ne) == [Ny + K * Ns, 1, 1, 1] and r.type == gg.F32
    compute(ctx, r)
    got = values(r).ravel()
    exp = _ref_scan(vals, K)
    assert_close(got[:Ny], exp[:Ny], _bound(head_dim), "y")
    for j in range(K):
        assert_close(got[Ny + j * Ns:Ny + (j + 1) * Ns], exp[Ny + j * Ns:Ny + (j + 1) * Ns], _bound(head_dim),
                     f"plane {j}")


@pytest.mark.parametrize("T,n_seqs", [(1, 1), (4, 2), (32, 4)])
def test_scan_mamba1(T, n_seqs):
    ctx = gg.Context(64 << 20)
    rng = np.random.default_rng(T)
    ts, vals = _scan_inputs(ctx, rng, 16, 1, 96, 1, T, n_seqs, mamba=1)
    r = gg.ssm_scan(ctx, *ts, 1)
    compute(ctx, r)
    assert_close(values(r).ravel(), _ref_scan(vals, 1), 1e-7)


def test_scan_ids_subset_of_larger_pool():
    """States are read through ids from a bigger pool and written densely at position q."""
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(4)
    ids = [3, 0, 4]
    ts, vals = _scan_inputs(ctx, rng, 16, 4, 4, 2, 5, 3, n_slots=6, ids=ids)
    r = gg.ssm_scan(ctx, *ts, 1)
    compute(ctx, r)
    got = values(r).ravel()
    exp = _ref_scan(vals, 1)
    assert_close(got, exp, 2e-7)
    # with identity ids the result differs (the indirection is honoured)
    exp_id = _ref_scan(vals[:6] + ([0, 1, 2],), 1)
    assert not np.allclose(exp, exp_id)


def test_scan_mamba1_ids_permutation():
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(5)
    ts, vals = _scan_inputs(ctx, rng, 16, 1, 40, 1, 6, 3, mamba=1, n_slots=5, ids=[4, 2, 0])
    r = gg.ssm_scan(ctx, *ts, 1)
    compute(ctx, r)
    assert_close(values(r).ravel(), _ref_scan(vals, 1), 1e-7)


@pytest.mark.parametrize("mamba", [1, 2])
def test_scan_dt_extremes(mamba):
    """dt > 20 passes softplus through unchanged; very negative dt gives dl ~ 0 (state kept)."""
    n_head, T, n_seqs = 8, 6, 2
    rng = np.random.default_rng(6)
    dtv = rng.uniform(-1, 1, size=(1, n_seqs, T, n_head)).astype(np.float32)
    dtv[0, 0, :, :3] = [20.5, 25.0, 40.0]
    dtv[0, 1, :, 3:6] = [-30.0, -80.0, -120.0]
    dtv[0, 0, 2, 7] = 20.0  # exactly at the threshold: log1p(exp(20))
    ctx = gg.Context(16 << 20)
    hd = 1 if mamba == 1 else 4
    ts, vals = _scan_inputs(ctx, rng, 16, hd, n_head, 2 if mamba == 2 else 1, T, n_seqs, mamba=mamba,
                            dt_values=dtv)
    r = gg.ssm_scan(ctx, *ts, 1)
    compute(ctx, r)
    got = values(r).ravel()
    exp = _ref_scan(vals, 1)
    assert np.all(np.isfinite(got))
    assert_close(got, exp, _bound(hd))


def test_scan_weak_decay_long():
    ctx = gg.Context(64 << 20)
    rng = np.random.default_rng(7)
    ts, vals = _scan_inputs(ctx, rng, 32, 8, 8, 2, 300, 1, weak=True)
    r = gg.ssm_scan(ctx, *ts, 1)
    compute(ctx, r)
    assert_close(values(r).ravel(), _ref_scan(vals, 1), 2e-7)


def test_scan_rollback_planes_equal_shorter_scans():
    """Plane j equals a K=1 scan over the first T-j tokens (max abs <= 1e-6); plane 0 equals K=1."""
    d_state, hd, nh, ng, T, ns, K = 128, 16, 8, 2, 8, 2, 3
    ctx = gg.Context(64 << 20)
    rng = np.random.default_rng(8)
    (s, x, dt, A, B, C, ids), vals = _scan_inputs(ctx, rng, d_state, hd, nh, ng, T, ns)
    rk = gg.ssm_scan(ctx, s, x, dt, A, B, C, ids, K)
    Ny = hd * nh * T * ns
    Ns = d_state * hd * nh * ns
    outs = []
    for j in range(K):
        Tj = T - j
        xj = gg.view_4d(ctx, x, hd, nh, Tj, ns, x.nb[1], x.nb[2], x.nb[3], 0)
        dtj = gg.cont(ctx, gg.view_3d(ctx, dt, nh, Tj, ns, dt.nb[1], dt.nb[2], 0))
        Bj = gg.view_4d(ctx, B, d_state, ng, Tj, ns, B.nb[1], B.nb[2], B.nb[3], 0)
        Cj = gg.view_4d(ctx, C, d_state, ng, Tj, ns, C.nb[1], C.nb[2], C.nb[3], 0)
        outs.append(gg.ssm_scan(ctx, s, xj, dtj, A, Bj, Cj, ids, 1))
    compute(ctx, rk, *outs)
    got = values(rk).ravel()
    for j in range(K):
        oj = values(outs[j]).ravel()
        Nyj = hd * nh * (T - j) * ns
        diff = np.abs(got[Ny + j * Ns:Ny + (j + 1) * Ns].astype(np.float64) - oj[Nyj:Nyj + Ns])
        assert float(np.max(diff)) <= 1e-6, (j, float(np.max(diff)))
    np.testing.assert_array_equal(got[:Ny], values(outs[0]).ravel()[:Ny])
    np.testing.assert_array_equal(got[Ny:Ny + Ns], values(outs[0]).ravel()[Ny:Ny + Ns])


def test_scan_planes_beyond_tokens_zero_filled():
    d_state, hd, nh, ng, T, ns, K = 16, 4, 4, 2, 2, 2, 5
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(9)
    ts, vals = _scan_inputs(ctx, rng, d_state, hd, nh, ng, T, ns)
    r = gg.ssm_scan(ctx, *ts, K)
    r.set(np.full(r.ne[0], 7.0, np.float32))  # stale contents must not survive
    compute(ctx, r)
    got = values(r).ravel()
    exp = _ref_scan(vals, K)  # reference zero-fills planes j >= T
    Ny = hd * nh * T * ns
    Ns = d_state * hd * nh * ns
    assert np.all(got[Ny + T * Ns:] == 0.0)
    assert_close(got, exp, 2e-7)


def test_scan_overlapping_xbc_views():
    """x, B and C as views of one fused xBC buffer; C overlaps x and B."""
    d_state, hd, nh, ng, T, ns = 16, 8, 4, 2, 5, 2
    L = hd * nh + 2 * ng * d_state
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(10)
    buf, bv = new(ctx, gg.F32, [L, T, ns], rng=rng)
    bv = bv[0]  # (ns, T, L)
    x = gg.view_4d(ctx, buf, hd, nh, T, ns, hd * 4, buf.nb[1], buf.nb[2], 0)
    B = gg.view_4d(ctx, buf, d_state, ng, T, ns, d_state * 4, buf.nb[1], buf.nb[2], hd * nh * 4)
    c_off = 3  # elements: C starts inside x and runs into B
    C = gg.view_4d(ctx, buf, d_state, ng, T, ns, d_state * 4, buf.nb[1], buf.nb[2], c_off * 4)
    s, sv = new(ctx, gg.F32, [d_state, hd, nh, ns], rng=rng)
    dt, dtv = new(ctx, gg.F32, [nh, T, ns], rng=rng)
    A, Av = new(ctx, gg.F32, [1, nh], rng=rng, lo=-1, hi=-0.5)
    ids = ctx.new_tensor(gg.I32, [ns])
    ids.set(np.array([1, 0], np.int32))
    r = gg.ssm_scan(ctx, s, x, dt, A, B, C, ids, 1)
    compute(ctx, r)
    xv = bv[:, :, :hd * nh].reshape(ns, T, nh, hd)
    Bv = bv[:, :, hd * nh:hd * nh + ng * d_state].reshape(ns, T, ng, d_state)
    Cv = bv[:, :, c_off:c_off + ng * d_state].reshape(ns, T, ng, d_state)
    exp = ref.ssm_scan(sv, xv, dtv[0], Av[0, 0], Bv, Cv, [1, 0], 1)
    assert_close(values(r).ravel(), exp, 2e-7)


def test_scan_threads_agree():
    ctx = gg.Context(32 << 20)
    rng = np.random.default_rng(11)
    ts, _ = _scan_inputs(ctx, rng, 64, 16, 12, 4, 9, 2)
    r = gg.ssm_scan(ctx, *ts, 3)
    compute(ctx, r, n_threads=1)
    a = values(r).copy()
    compute(ctx, r, n_threads=2)
    np.testing.assert_array_equal(a, values(r))


def test_scan_rejects():
    ctx = gg.Context(8 << 20)
    rng = np.random.default_rng(12)
    (s, x, dt, A, B, C, ids), _ = _scan_inputs(ctx, rng, 16, 4, 4, 2, 3, 2)
    (s1, x1, dt1, A1, B1, C1, ids1), _ = _scan_inputs(ctx, rng, 16, 1, 8, 1, 3, 2, mamba=1)
    with pytest.raises(ValueError, match="ssm_scan.*Mamba-1"):
        gg.ssm_scan(ctx, s1, x1, dt1, A1, B1, C1, ids1, 2)
    with pytest.raises(ValueError, match="ssm_scan"):
        gg.ssm_scan(ctx, s, x, dt, A, B, C, ids, 0)
    with pytest.raises(ValueError, match="ssm_scan"):  # n_head % n_group != 0
        Bbad = ctx.new_tensor(gg.F32, [16, 3, 3, 2])
        gg.ssm_scan(ctx, s, x, dt, A, Bbad, Bbad, ids, 1)
    with pytest.raises(ValueError, match="ssm_scan"):
        gg.ssm_scan(ctx, s, x, ctx.new_tensor(gg.F32, [4, 2, 2]), A, B, C, ids, 1)
    with pytest.raises(ValueError, match="ssm_scan"):
        gg.ssm_scan(ctx, s, x, dt, ctx.new_tensor(gg.F32, [2, 4]), B, C, ids, 1)
    with pytest.raises(ValueError, match="ssm_scan"):
        gg.ssm_scan(ctx, s, x, dt, A, B, ctx.new_tensor(gg.F32, [16, 2, 3, 1]), ids, 1)
    with pytest.raises(ValueError, match="ssm_scan"):
        gg.ssm_scan(ctx, s, x, dt, A, B, C, ctx.new_tensor(gg.I32, [3]), 1)
    with pytest.raises(TypeError, match="ssm_scan"):
        gg.ssm_scan(ctx, s, x, dt, A, B, C, ctx.new_tensor(gg.F32, [2]), 1)
    with pytest.raises(TypeError, match="ssm_scan"):
        gg.ssm_scan(ctx, s, x, dt, A, B, C, None, 1)
    with pytest.raises(TypeError, match="ssm_scan"):
        gg.ssm_scan(ctx, s, ctx.new_tensor(gg.F16, [4, 4, 3, 2]), dt, A, B, C, ids, 1)
    with pytest.raises(ValueError, match="ssm_scan"):  # x with padded dim 1
        xb = ctx.new_tensor(gg.F32, [5, 4, 3, 2])
        xv = gg.view_4d(ctx, xb, 4, 4, 3, 2, xb.nb[1], xb.nb[2], xb.nb[3], 0)
        gg.ssm_scan(ctx, s, xv, dt, A, B, C, ids, 1)
    # ids outside the pool are caught when the graph runs, as a ValueError
    bad = ctx.new_tensor(gg.I32, [2])
    bad.set(np.array([0, 5], np.int32))
    r = gg.ssm_scan(ctx, s, x, dt, A, B, C, bad, 1)
    with pytest.raises(ValueError, match="ssm_scan"):
        compute(ctx, r)
    ok = gg.ssm_scan(ctx, s, x, dt, A, B, C, ids, 1)
    compute(ctx, ok)
    assert np.all(np.isfinite(values(ok)))


@pytest.mark.parametrize("simd", ["scalar", "avx2"], indirect=True)
def test_scan_other_isa_paths(simd):
    """The plain loop and the AVX2 kernel (gg.set_isa) match the reference too."""
    test_scan_mamba2(17, 3, 6, 3, 9, 3, 2)
    test_scan_mamba2(128, 64, 16, 2, 4, 2, 4)


def test_empty_inputs():
    ctx = gg.Context(1 << 20)
    sx = ctx.new_tensor(gg.F32, [3, 5, 0])
    c = ctx.new_tensor(gg.F32, [4, 5])
    r = gg.ssm_conv(ctx, sx, c)
    assert list(r.ne) == [5, 0, 0, 1]
    r2 = gg.ssm_conv(ctx, ctx.new_tensor(gg.F32, [3, 5, 2]), c)  # n_t = 0
    assert list(r2.ne) == [5, 0, 2, 1]
    compute(ctx, r, r2)


@pytest.mark.parametrize("d_state,head_dim,n_head,n_group,T,n_seqs,K", [
    (37, 7, 6, 3, 11, 3, 3),     # d_state tail of 5, one row after the 4-row blocks
    (131, 13, 4, 2, 6, 2, 6),    # K == T: every plane written; three 4-row blocks and a lone row
    (8, 4, 2, 1, 3, 4, 5),       # exact vector width; planes past T zero-filled
    (128, 64, 4, 1, 1, 2, 1),    # decode shape
])
def test_scan_simd_equals_scalar(d_state, head_dim, n_head, n_group, T, n_seqs, K):
    """The native SIMD scan (AVX2 state rows, four accumulators) equals the plain loop (PYGGML_ISA=scalar) on
    odd sizes, several sequences in a permuted pool and K snapshot planes."""
    ctx = gg.Context(64 << 20)
    rng = np.random.default_rng(1000 + d_state + head_dim)
    ts, vals = _scan_inputs(ctx, rng, d_state, head_dim, n_head, n_group, T, n_seqs)
    outs = {}
    for level in ("scalar", "native"):
        previous = gg.set_isa(level)
        try:
            r = gg.ssm_scan(ctx, *ts, K)
            compute(ctx, r)
            outs[level] = values(r).ravel().copy()
        finally:
            gg.set_isa(previous)
    Ny = head_dim * n_head * T * n_seqs
    Ns = d_state * head_dim * n_head * n_seqs
    assert_close(outs["native"][:Ny], outs["scalar"][:Ny], 1e-12, "y")
    for j in range(K):
        sl = slice(Ny + j * Ns, Ny + (j + 1) * Ns)
        assert_close(outs["native"][sl], outs["scalar"][sl], 1e-12, f"plane {j}")
    if K > T:
        assert not np.any(outs["scalar"][Ny + T * Ns:])
    exp = _ref_scan(vals, K)
    assert_close(outs["native"], exp, _bound(head_dim), "native vs float64 reference")
