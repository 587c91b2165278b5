"""FLASH_ATTN_EXT against the float64 reference of
tests/references/flash_attn.py: GQA, dim-3 streams, mask broadcast over heads/streams,
D_k != D_v, V a view of K, strided cache views and permuted inputs, fully masked rows,
ALiBi, softcap, sinks, decode/prefill sizes, every K/V type, the SIMD paths, thread counts,
the n_kv_max sparse hint (equal to the dense op; debug-mode contract check), op_params and
constructor/modifier validation."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, nmse, values

TOL = 5e-4  # peer-suite NMSE bound of FLASH_ATTN_EXT
NEG_INF = -np.inf


def _ctx(mb=256):
    return gg.Context(mem_size=mb << 20)


def _mask(rng, KV, N, Hm=1, Sm=1, kind="random", KVm=None, Nm=None):
    """F16-representable mask, numpy order (Sm, Hm, Nm, KVm)."""
    KVm = KVm or KV
    Nm = Nm or N
    m = rng.uniform(-1, 1, size=(Sm, Hm, Nm, KVm))
    if kind == "random":  # peer style: blocks set to -inf or 0
        for _ in range(max(1, KV // 32)):
            r0, c0 = rng.integers(0, Nm), rng.integers(0, KVm)
            m[..., r0:r0 + 4, c0:c0 + 16] = rng.choice([NEG_INF, 0.0])
    elif kind == "causal":  # query t sees columns <= KV - N + t
        for t in range(Nm):
            m[..., t, max(0, KV - N + t + 1):] = NEG_INF
    elif kind == "zeros":
        m[:] = 0.0
    return m.astype(np.float16)


def fa_case(D=64, Dv=None, N=5, H=4, Hkv=2, KV=113, S=1, kt=gg.F16, vt=None, mask="random", Hm=1,
            Sm=1, scale=None, max_bias=0.0, softcap=0.0, sinks=None, n_kv_max=0, threads=2, seed=0,
            kv_layout="plain", mask_data=None, prec=None, q_lo=-1.0, q_hi=1.0):
    """Builds and runs one flash_attn_ext graph; returns (result, got, expected, extras)."""
    rng = np.random.default_rng(seed)
    Dv = Dv or D
    vt = vt or kt
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    ctx = _ctx()
    q, qv = new(ctx, gg.F32, [D, N, H, S], rng=rng, lo=q_lo, hi=q_hi)
    if kv_layout == "plain":
        k, kv_ = new(ctx, kt, [D, KV, Hkv, S], rng=rng)
        v, vv = new(ctx, vt, [Dv, KV, Hkv, S], rng=rng)
    elif kv_layout == "cache_view":  # views into a larger cache: padded dims 1..3, offset cells
        cap, off = KV + 9, 5
        kb, kbv = new(ctx, kt, [D, cap, Hkv + 1, S], rng=rng)
        vb, vbv = new(ctx, vt, [Dv, cap, Hkv + 1, S], rng=rng)
        k = gg.view_4d(ctx, kb, D, KV, Hkv, S, kb.nb[1], kb.nb[2], kb.nb[3], off * kb.nb[1])
        v = gg.view_4d(ctx, vb, Dv, KV, Hkv, S, vb.nb[1], vb.nb[2], vb.nb[3], off * vb.nb[1])
        kv_, vv = kbv[:, :Hkv, off:off + KV, :], vbv[:, :Hkv, off:off + KV, :]
    elif kv_layout == "permuted":  # stored [D, H_kv, KV, S], permuted {0,2,1,3}
        kb, kbv = new(ctx, kt, [D, Hkv, KV, S], rng=rng)
        vb, vbv = new(ctx, vt, [Dv, Hkv, KV, S], rng=rng)
        k = gg.permute(ctx, kb, 0, 2, 1, 3)
        v = gg.permute(ctx, vb, 0, 2, 1, 3)
        kv_, vv = kbv.transpose(0, 2, 1, 3), vbv.transpose(0, 2, 1, 3)
    elif kv_layout == "v_view_of_k":  # MLA style: V = the first Dv dims of K
        assert vt == kt and Dv <= D
        k, kv_ = new(ctx, kt, [D, KV, Hkv, S], rng=rng)
        v = gg.view_4d(ctx, k, Dv, KV, Hkv, S, k.nb[1], k.nb[2], k.nb[3], 0)
        vv = kv_[..., :Dv]
    else:
        raise ValueError(kv_layout)
    m = mv = None
    if mask is not None:
        mdata = mask_data if mask_data is not None else _mask(rng, KV, N, Hm, Sm, kind=mask)
        m, mv = new(ctx, gg.F16, list(reversed(mdata.shape)), data=mdata)
    r = gg.flash_attn_ext(ctx, q, k, v, m, scale, max_bias, softcap)
    sv = None
    if sinks is not None:
        s, sv = new(ctx, gg.F32, [H], data=np.asarray(sinks, dtype=np.float32).reshape(H))
        gg.flash_attn_ext_add_sinks(r, s)
        sv = sv.ravel()
    if prec is not None:
        gg.flash_attn_ext_set_prec(r, prec)
    if n_kv_max:
        gg.flash_attn_ext_set_n_kv_max(r, n_kv_max)
    compute(ctx, r, n_threads=threads)
    want = ref.flash_attn_ext(qv, kv_, vv, mv, scale, max_bias, softcap, sv)
    return r, values(r), want, dict(ctx=ctx, q=qv, k=kv_, v=vv, mask=mv)


def check(**kw):
    r, got, want, extra = fa_case(**kw)
    assert r.op == "FLASH_ATTN_EXT"
    assert_close(got, want, TOL)
    return r, got, want, extra


# ---------------------------------------------------------------------------------------
# Shapes, GQA, broadcasts, layouts
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("ratio", [1, 2, 4, 8, 12])
def test_gqa_ratios(ratio):
    r, got, want, _ = check(H=2 * ratio, Hkv=2, N=6, KV=113, seed=ratio)
    assert list(r.ne) == [64, 2 * ratio, 6, 1]  # [D_v, H, N, S]


@pytest.mark.parametrize("Sm", [1, 3])
@pytest.mark.parametrize("Hm", [1, 4])
def test_streams_and_mask_broadcast(Sm, Hm):
    r, got, want, _ = check(S=3, H=4, Hkv=2, N=7, KV=70, Hm=Hm, Sm=Sm, seed=10 * Sm + Hm)
    assert list(r.ne) == [64, 4, 7, 3]


def test_mask_broadcast_really_differs_per_head_and_stream():
    """A per-(head, stream) mask gives a different answer than its first slice broadcast."""
    rng = np.random.default_rng(3)
    m = _mask(rng, 40, 3, Hm=2, Sm=2, kind="zeros")
    m[0, 1, :, :20] = NEG_INF
    m[1, 0, :, 20:] = NEG_INF
    _, got, want, _ = check(S=2, H=2, Hkv=1, N=3, KV=40, mask_data=m)
    _, got1, want1, _ = check(S=2, H=2, Hkv=1, N=3, KV=40, mask_data=m[:1, :1].copy())
    assert not np.allclose(got, got1)


@pytest.mark.parametrize("D,Dv,kt", [(64, 72, gg.F16), (72, 64, gg.F32), (65, 67, gg.F16),
                                     (65, 67, gg.F32), (96, 32, gg.BF16)])
def test_dk_ne_dv(D, Dv, kt):
    r, *_ = check(D=D, Dv=Dv, kt=kt, N=5, KV=57, H=4, Hkv=2, seed=D + Dv)
    assert r.ne[0] == Dv


@pytest.mark.parametrize("kt", [gg.F16, gg.Q8_0])
def test_v_view_of_k(kt):
    check(D=192, Dv=128, kt=kt, kv_layout="v_view_of_k", N=3, H=8, Hkv=1, KV=97)


@pytest.mark.parametrize("layout", ["cache_view", "permuted"])
@pytest.mark.parametrize("kt", [gg.F16, gg.F32, gg.Q4_0])
def test_strided_kv(layout, kt):
    check(kv_layout=layout, kt=kt, S=2, H=4, Hkv=2, N=6, KV=50, seed=7)


def test_permuted_q():
    rng = np.random.default_rng(1)
    ctx = _ctx()
    D, N, H, KV = 32, 5, 4, 37
    qb, qbv = new(ctx, gg.F32, [D, H, N, 1], rng=rng)
    q = gg.permute(ctx, qb, 0, 2, 1, 3)
    k, kv_ = new(ctx, gg.F16, [D, KV, 2, 1], rng=rng)
    v, vv = new(ctx, gg.F16, [D, KV, 2, 1], rng=rng)
    r = gg.flash_attn_ext(ctx, q, k, v, None, 0.2, 0.0, 0.0)
    compute(ctx, r)
    assert_close(values(r), ref.flash_attn_ext(qbv.transpose(0, 2, 1, 3), kv_, vv, None, 0.2), TOL)


def test_mask_wider_and_taller_than_needed():
    rng = np.random.default_rng(5)
    m = _mask(rng, 64, 32, KVm=64, Nm=32)  # KV 43 < 64 columns, N 9 < 32 rows
    check(N=9, KV=43, mask_data=m, D=128, H=2, Hkv=2)


# ---------------------------------------------------------------------------------------
# Mask values, sinks, ALiBi, softcap
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("sinks", [None, "pos", "neg"])
def test_fully_masked_rows_give_zeros(sinks):
    rng = np.random.default_rng(2)
    m = _mask(rng, 59, 5)
    m[0, 0, 1, :] = NEG_INF
    m[0, 0, 3, :] = NEG_INF
    sk = None if sinks is None else np.full(4, 10.0 if sinks == "pos" else -10.0)
    r, got, want, _ = check(N=5, KV=59, mask_data=m, sinks=sk, D=80)
    assert np.all(got[0, 1] == 0.0) and np.all(got[0, 3] == 0.0)
    assert np.all(np.isfinite(got))


def test_all_rows_masked_and_kv_tiles_skipped():
    rng = np.random.default_rng(2)
    m = np.full((1, 1, 4, 300), NEG_INF, dtype=np.float16)
    m[0, 0, 2, 250] = 0.5  # a single finite entry far into the cache: tiles before are skipped
    r, got, want, extra = check(N=4, KV=300, mask_data=m, H=2, Hkv=1)
    assert np.all(got[0, [0, 1, 3]] == 0.0)
    # one finite entry: the output is exactly that V row (for both heads)
    np.testing.assert_allclose(got[0, 2], extra["v"][0, 0, [250, 250]], rtol=1e-6, atol=1e-6)


def test_single_finite_entry_per_row():
    rng = np.random.default_rng(4)
    KV, N = 77, 6
    m = np.full((1, 1, N, KV), NEG_INF, dtype=np.float16)
    cols = rng.integers(0, KV, size=N)
    m[0, 0, np.arange(N), cols] = 0.25
    r, got, want, extra = check(N=N, KV=KV, mask_data=m, kt=gg.F32, H=2, Hkv=1)
    for t in range(N):  # softmax over one entry: the output equals V[col]
        np.testing.assert_allclose(got[0, t, 0], extra["v"][0, 0, cols[t]], rtol=1e-6, atol=1e-6)


def test_very_negative_finite_mask_values_participate():
    rng = np.random.default_rng(6)
    KV, N = 40, 3
    m = np.full((1, 1, N, KV), -60000.0, dtype=np.float16)  # finite: every entry takes part
    m[0, 0, 0, :] = NEG_INF
    m[0, 0, 0, 7] = -60000.0  # row 0: only one (very negative) finite entry
    r, got, want, extra = check(N=N, KV=KV, mask_data=m, kt=gg.F32, H=2, Hkv=1)
    np.testing.assert_allclose(got[0, 0, 0], extra["v"][0, 0, 7], rtol=1e-6, atol=1e-6)
    assert np.any(got[0, 1] != 0.0)


def test_no_mask():
    check(mask=None, N=5, KV=119, kt=gg.F32, H=2, Hkv=1)


@pytest.mark.parametrize("H,Hkv", [(12, 4), (8, 8), (6, 3)])
def test_alibi(H, Hkv):
    rng = np.random.default_rng(H)
    KV, N = 96, 5
    pos_k = np.arange(KV)
    pos_q = np.arange(KV - N, KV)
    dist = -np.abs(pos_q[:, None] - pos_k[None, :]).astype(np.float64)
    dist[pos_k[None, :] > pos_q[:, None]] = NEG_INF
    m = dist.astype(np.float16).reshape(1, 1, N, KV)
    check(H=H, Hkv=Hkv, N=N, KV=KV, mask_data=m, max_bias=8.0, D=128)


@pytest.mark.parametrize("softcap", [10.0, 30.0])
def test_softcap(softcap):
    check(softcap=softcap, scale=1.0, N=5, KV=45, q_lo=-3, q_hi=3)  # logits large enough to cap


@pytest.mark.parametrize("sink", [10.0, -10.0, "mixed"])
def test_sinks(sink):
    sk = np.array([10.0, -10.0, 3.0, -0.5]) if sink == "mixed" else np.full(4, sink)
    check(sinks=sk, N=7, KV=61, D=80, kt=gg.F32)


def test_sinks_alibi_softcap_long_kv_q8():
    """Peer-style kv=1025 case with sinks + ALiBi + softcap 30 (Q8_0 K/V)."""
    rng = np.random.default_rng(9)
    check(kt=gg.Q8_0, KV=1025, N=3, H=8, Hkv=2, max_bias=8.0, softcap=30.0,
          sinks=rng.uniform(-10, 10, size=8), D=64)


# ---------------------------------------------------------------------------------------
# Sizes, types, threads, SIMD paths
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("KV", [1, 17, 113, 1025])
@pytest.mark.parametrize("N", [1, 64])
def test_sizes(N, KV):
    check(N=N, KV=KV, H=4, Hkv=1, mask="causal" if KV >= N else "random", seed=N + KV)


def test_kv_4096_decode_and_prefill():
    check(N=1, KV=4096, H=8, Hkv=2, D=64, mask="causal")
    check(N=65, KV=4096, H=2, Hkv=1, D=64, mask="causal")


@pytest.mark.parametrize("kt", [gg.F32, gg.F16, gg.BF16, gg.Q8_0, gg.Q4_0])
def test_kv_types(kt):
    check(kt=kt, N=5, KV=113, H=8, Hkv=2, D=64, seed=int(kt.value) if hasattr(kt, "value") else 0)


@pytest.mark.parametrize("kt,vt", [(gg.Q8_0, gg.Q4_0), (gg.Q4_0, gg.F16), (gg.F16, gg.F32),
                                   (gg.F16, gg.Q4_0), (gg.BF16, gg.F16), (gg.F32, gg.Q8_0)])
def test_mixed_kv_types(kt, vt):
    check(kt=kt, vt=vt, N=4, KV=75, H=4, Hkv=2, D=64, mask=None if vt == gg.Q4_0 else "random")


def test_nvfp4_kv():
    check(kt=gg.NVFP4, vt=gg.NVFP4, N=3, KV=50, H=4, Hkv=2, D=64)


@pytest.mark.parametrize("simd", ["scalar", "avx2", "avx512"], indirect=True)
@pytest.mark.parametrize("case", ["odd", "decode", "softcap_sinks", "sparse"])
def test_simd_paths(simd, case):
    if case == "odd":
        check(D=65, Dv=67, N=7, KV=93, H=6, Hkv=2, kt=gg.F32)
    elif case == "decode":
        check(N=1, KV=1025, H=8, Hkv=2, D=128, mask="causal")
    elif case == "softcap_sinks":
        check(softcap=10.0, sinks=np.linspace(-10, 10, 4), max_bias=8.0, N=9, KV=70, D=48)
    else:
        rng = np.random.default_rng(1)
        m = _sparse_mask(rng, 300, 9, 20)
        check(mask_data=m, N=9, KV=300, n_kv_max=20, D=64)


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_thread_counts_agree(threads):
    base = fa_case(N=1, KV=1500, H=4, Hkv=1, mask="causal", threads=1, seed=3)[1]
    _, got, want, _ = fa_case(N=1, KV=1500, H=4, Hkv=1, mask="causal", threads=threads, seed=3)
    assert_close(got, want, TOL)
    assert_close(got, base, 1e-10)  # KV split and merge is only a reordering of F32 sums
    _, got, want, _ = fa_case(N=37, KV=200, H=8, Hkv=2, threads=threads, seed=4)
    assert_close(got, want, TOL)


def test_kv_zero_gives_zeros():
    ctx = _ctx()
    q, _ = new(ctx, gg.F32, [32, 3, 2, 1])
    k = ctx.new_tensor(gg.F16, [32, 0, 1, 1])
    v = ctx.new_tensor(gg.F16, [32, 0, 1, 1])
    r = gg.flash_attn_ext(ctx, q, k, v, None, 1.0, 0.0, 0.0)
    s, _ = new(ctx, gg.F32, [2], data=np.array([1.0, -3.0], dtype=np.float32))
    gg.flash_attn_ext_add_sinks(r, s)
    compute(ctx, r)
    assert np.all(values(r) == 0.0)


def test_prec_values_do_not_change_the_result_for_f32_kv():
    a = fa_case(prec=10, seed=5, kt=gg.F32)[1]
    b = fa_case(prec=0, seed=5, kt=gg.F32)[1]
    np.testing.assert_array_equal(a, b)


def test_default_prec_f16_kv_rounds_like_ggml():
    """F16 K/V, few query tokens: DEFAULT precision keeps Q and the V accumulator in F16 (as
    ggml's CPU kernel), F32 accumulates in F32; both are close to the float64 reference and
    they differ (so the default really takes the F16 path)."""
    r16, d16, want, _ = fa_case(prec=0, seed=5, N=7, KV=300)
    r32, d32, want32, _ = fa_case(prec=10, seed=5, N=7, KV=300)
    assert_close(d16, want, TOL)
    assert_close(d32, want32, TOL)
    assert nmse(d32, d16) > 0.0
    assert nmse(want, d32) < nmse(want, d16)


# ---------------------------------------------------------------------------------------
# n_kv_max: sparse hint
# ---------------------------------------------------------------------------------------

def _sparse_mask(rng, KV, N, n_max, Hm=1, Sm=1, exact=True, window=False):
    """Each row gets at most n_max finite entries (row 0 exactly n_max when `exact`), values
    in {-0.03125 k} like the peer tests; `window`: overlapping sliding windows plus extras."""
    m = np.full((Sm, Hm, N, KV), NEG_INF)
    for s in range(Sm):
        for h in range(Hm):
            for t in range(N):
                c = n_max if (exact and t == 0) else int(rng.integers(1, n_max + 1))
                if window:
                    end = KV - N + t + 1
                    w = min(c, end)
                    cols = np.arange(end - w, end)
                else:
                    cols = rng.choice(KV, size=min(c, KV), replace=False)
                m[s, h, t, cols] = -0.03125 * rng.integers(0, 8, size=len(cols))
    return m.astype(np.float16)


def _dense_vs_sparse(n_kv_max, mask_data, **kw):
    r_s, got_s, want, _ = fa_case(mask_data=mask_data, n_kv_max=n_kv_max, **kw)
    # dense at F32 precision: the sparse kernel accumulates in F32 too
    r_d, got_d, _, _ = fa_case(mask_data=mask_data, n_kv_max=0, prec=10, **kw)
    assert r_s.op_params[4] == n_kv_max and r_d.op_params[4] == 0
    assert_close(got_s, want, TOL)
    assert_close(got_s, got_d, 1e-7)
    return got_s, got_d


@pytest.mark.parametrize("which", ["exact", "larger", "ge_kv"])
@pytest.mark.parametrize("window", [False, True])
def test_sparse_equals_dense(which, window):
    rng = np.random.default_rng(11)
    KV, N, n = 700, 19, 40
    m = _sparse_mask(rng, KV, N, n, window=window)
    finite = np.isfinite(m.astype(np.float64)).sum(axis=-1).max()
    assert finite == n
    n_kv_max = {"exact": n, "larger": 3 * n, "ge_kv": KV + 5}[which]
    _dense_vs_sparse(n_kv_max, m, N=N, KV=KV, H=8, Hkv=2, D=64, seed=12)


@pytest.mark.parametrize("kt", [gg.F32, gg.Q8_0])
def test_sparse_streams_heads_sinks_alibi_softcap(kt):
    rng = np.random.default_rng(13)
    KV, N, n = 520, 11, 33
    m = _sparse_mask(rng, KV, N, n, Hm=2, Sm=2)
    _dense_vs_sparse(n, m, N=N, KV=KV, S=2, H=12, Hkv=1, Hm=2, Sm=2, D=64, kt=kt,
                     sinks=rng.uniform(-10, 10, size=12), max_bias=8.0, softcap=20.0, seed=14)


def test_sparse_decode_long_kv_and_union_groups():
    rng = np.random.default_rng(15)
    m = _sparse_mask(rng, 4096, 1, 128)
    _dense_vs_sparse(128, m, N=1, KV=4096, H=8, Hkv=1, D=64)
    # 24 queries: some share a sliding window, others pick disjoint random sets
    m = np.concatenate([_sparse_mask(rng, 900, 12, 30, window=True),
                        _sparse_mask(rng, 900, 12, 30)], axis=2)
    _dense_vs_sparse(30, m, N=24, KV=900, H=4, Hkv=4, D=32)


@pytest.mark.parametrize("kt,layout,D,Dv", [(gg.F16, "plain", 256, 256), (gg.F32, "plain", 65, 67),
                                          (gg.Q8_0, "plain", 128, 128),
                                          (gg.F16, "v_view_of_k", 256, 256),  # V the same rows as K
                                          (gg.F16, "v_view_of_k", 192, 128)])
def test_sparse_windows_gather_union_rows(kt, layout, D, Dv):
    # KV wider than one window and unions larger than one window's gather buffer, so every
    # query tile spans several windows; rows of one tile pick mostly disjoint random columns,
    # some tokens share a sliding window, one token sees nothing, heads see different columns.
    rng = np.random.default_rng(21)
    KV, N, n = 2600, 21, 300
    m = np.concatenate([_sparse_mask(rng, KV, 14, n, Hm=2),
                        _sparse_mask(rng, KV, 7, n, Hm=2, window=True)], axis=2)
    m[0, :, 3, :] = NEG_INF
    m[0, 1, 9, :] = NEG_INF
    got, _ = _dense_vs_sparse(n, m, N=N, KV=KV, H=4, Hkv=2, Hm=2, D=D, Dv=Dv, kt=kt, kv_layout=layout, seed=22)
    assert np.all(got[0, 3] == 0.0)
    # very sparse rows over a long cache: windows end at their column limit, not their union
    # (enough query tiles that the KV range is not split among threads)
    m = _sparse_mask(rng, 9000, 16, 8)
    _dense_vs_sparse(8, m, N=16, KV=9000, H=8, Hkv=8, D=D, Dv=Dv, kt=kt, kv_layout=layout, seed=26)


@pytest.mark.parametrize("n_kv_max", [1, 2, 63, 64, 65, 299, 300, 301, 10 ** 6])
def test_sparse_n_kv_max_edges(n_kv_max):
    rng = np.random.default_rng(23)
    KV, N = 300, 13
    m = _sparse_mask(rng, KV, N, min(n_kv_max, KV))
    _dense_vs_sparse(n_kv_max, m, N=N, KV=KV, H=6, Hkv=3, D=40, seed=24)


@pytest.mark.parametrize("threads", [1, 3])
def test_sparse_thread_counts_and_kv_split(threads):
    rng = np.random.default_rng(25)
    m = _sparse_mask(rng, 3000, 1, 200)   # decode: the KV range is split among threads
    _dense_vs_sparse(200, m, N=1, KV=3000, H=4, Hkv=1, D=64, threads=threads)
    m = _sparse_mask(rng, 1100, 37, 90)
    _dense_vs_sparse(90, m, N=37, KV=1100, H=8, Hkv=2, D=64, threads=threads)
    # decode with a dense window: tiles of a single token hold up to 127 columns
    m = _sparse_mask(rng, 2000, 1, 700, Hm=2, window=True)
    _dense_vs_sparse(700, m, N=1, KV=2000, H=4, Hkv=2, Hm=2, D=64, threads=threads)


def test_sparse_with_fully_masked_rows():
    rng = np.random.default_rng(16)
    m = _sparse_mask(rng, 300, 10, 12)
    m[0, 0, 4, :] = NEG_INF
    m[0, 0, 5, :] = NEG_INF
    got, _ = _dense_vs_sparse(12, m, N=10, KV=300, H=2, Hkv=1, D=32)
    assert np.all(got[0, 4:6] == 0.0)


def test_n_kv_max_zero_disables():
    ctx = _ctx()
    q, _ = new(ctx, gg.F32, [32, 2, 2, 1])
    k, _ = new(ctx, gg.F16, [32, 10, 1, 1])
    m, _ = new(ctx, gg.F16, [10, 2, 1, 1])
    r = gg.flash_attn_ext(ctx, q, k, k, m, 1.0, 0.0, 0.0)
    assert r.op_params[4] == 0
    gg.flash_attn_ext_set_n_kv_max(r, 7)
    assert r.op_params[4] == 7
    gg.flash_attn_ext_set_n_kv_max(r, 0)
    assert r.op_params[4] == 0


def test_contract_violation_raises_in_debug_mode():
    rng = np.random.default_rng(17)
    KV, N = 300, 6
    m = _sparse_mask(rng, KV, N, 10)
    m[0, 0, 3, :] = NEG_INF
    m[0, 0, 3, 100:125] = 0.0  # row 3 has 25 finite entries > n_kv_max = 10
    try:
        gg.set_debug(True)
        with pytest.raises(ValueError, match=r"n_kv_max.*token 3.*25 finite entries"):
            fa_case(mask_data=m, N=N, KV=KV, n_kv_max=10, H=2, Hkv=1, D=32)
        # a run honouring the contract works in debug mode; the process stays usable
        check(mask_data=_sparse_mask(rng, KV, N, 10), N=N, KV=KV, n_kv_max=10, H=2, Hkv=1, D=32)
    finally:
        gg.set_debug(False)
    # without debug mode the violated promise is still computed exactly (pyggml's choice)
    _dense_vs_sparse(10, m, N=N, KV=KV, H=2, Hkv=1, D=32)


# ---------------------------------------------------------------------------------------
# op_params, modifiers, validation
# ---------------------------------------------------------------------------------------

def _f32_bits(x):
    return int(np.array([x], dtype=np.float32).view(np.int32)[0])


def test_op_params_layout_and_sources():
    ctx = _ctx()
    q, _ = new(ctx, gg.F32, [32, 3, 4, 1])
    k, _ = new(ctx, gg.F16, [32, 20, 2, 1])
    v, _ = new(ctx, gg.F16, [16, 20, 2, 1])
    m, _ = new(ctx, gg.F16, [20, 3, 1, 1])
    r = gg.flash_attn_ext(ctx, q, k, v, m, 0.125, 8.0, 30.0)
    p = r.op_params
    assert p[0] == _f32_bits(0.125) and p[1] == _f32_bits(8.0) and p[2] == _f32_bits(30.0)
    assert p[3] == 0 and p[4] == 0 and all(x == 0 for x in p[5:])
    assert r.type == gg.F32 and list(r.ne) == [16, 4, 3, 1]
    src = r.src  # trailing empty slots are trimmed
    assert len(src) == 4 and src[3] is not None  # q, k, v, mask; no sinks
    gg.flash_attn_ext_set_prec(r, 10)
    assert r.op_params[3] == 10 and gg.flash_attn_ext_get_prec(r) == 10
    gg.flash_attn_ext_set_prec(r, 0)
    assert gg.flash_attn_ext_get_prec(r) == 0
    for bad in (1, 2, 11, -1):
        with pytest.raises(ValueError, match="flash_attn_ext_set_prec"):
            gg.flash_attn_ext_set_prec(r, bad)
    with pytest.raises(ValueError, match="flash_attn_ext_set_n_kv_max"):
        gg.flash_attn_ext_set_n_kv_max(r, -1)
    gg.flash_attn_ext_set_n_kv_max(r, 16)
    assert r.op_params[4] == 16
    s, _ = new(ctx, gg.F32, [4])
    gg.flash_attn_ext_add_sinks(r, s)
    assert len(r.src) == 5 and r.src[4] is not None
    with pytest.raises(ValueError, match="already set"):
        gg.flash_attn_ext_add_sinks(r, s)
    gg.flash_attn_ext_add_sinks(r, None)
    assert len(r.src) == 4
    with pytest.raises(ValueError, match="flash_attn_ext_add_sinks"):
        gg.flash_attn_ext_add_sinks(r, new(ctx, gg.F32, [3])[0])
    with pytest.raises(TypeError, match="flash_attn_ext_add_sinks"):
        gg.flash_attn_ext_add_sinks(r, new(ctx, gg.F16, [4])[0])
    # modifiers on other nodes
    other = gg.add(ctx, q, q)
    for fn, arg in ((gg.flash_attn_ext_add_sinks, s), (gg.flash_attn_ext_set_prec, 10),
                    (gg.flash_attn_ext_set_n_kv_max, 3)):
        with pytest.raises(ValueError, match="flash_attn_ext"):
            fn(other, arg)
    with pytest.raises(ValueError, match="flash_attn_ext_get_prec"):
        gg.flash_attn_ext_get_prec(other)
    with pytest.raises(TypeError):
        gg.flash_attn_ext_set_prec(None, 10)


def _bad(ctx, exc, match, q=None, k=None, v=None, m="default", max_bias=0.0, **sizes):
    rng = np.random.default_rng(0)
    q = q if q is not None else new(ctx, gg.F32, [32, 3, 4, 1], rng=rng)[0]
    k = k if k is not None else new(ctx, gg.F16, [32, 20, 2, 1], rng=rng)[0]
    v = v if v is not None else new(ctx, gg.F16, [32, 20, 2, 1], rng=rng)[0]
    if isinstance(m, str):
        m = new(ctx, gg.F16, [20, 3, 1, 1], rng=rng)[0]
    n0 = ctx.n_tensors
    with pytest.raises(exc, match=match):
        gg.flash_attn_ext(ctx, q, k, v, m, 1.0, max_bias, 0.0)
    assert ctx.n_tensors == n0  # validated before creating anything


def test_bad_shapes_and_types_raise():
    ctx = _ctx()
    T = lambda t, ne: new(ctx, t, ne)[0]  # noqa: E731
    _bad(ctx, ValueError, r"flash_attn_ext.*k.ne\[0\]", k=T(gg.F16, [16, 20, 2, 1]))
    _bad(ctx, ValueError, r"flash_attn_ext.*GQA", k=T(gg.F16, [32, 20, 3, 1]))
    _bad(ctx, ValueError, r"flash_attn_ext.*GQA", v=T(gg.F16, [32, 20, 3, 1]))
    _bad(ctx, ValueError, r"flash_attn_ext.*v.ne\[1\]", v=T(gg.F16, [32, 19, 2, 1]))
    _bad(ctx, ValueError, r"flash_attn_ext.*ne\[3\]", k=T(gg.F16, [32, 20, 2, 2]),
         v=T(gg.F16, [32, 20, 2, 2]))
    _bad(ctx, ValueError, r"flash_attn_ext.*mask.ne\[0\]", m=T(gg.F16, [19, 3, 1, 1]))
    _bad(ctx, ValueError, r"flash_attn_ext.*mask.ne\[1\]", m=T(gg.F16, [20, 2, 1, 1]))
    _bad(ctx, ValueError, r"flash_attn_ext.*mask broadcast", m=T(gg.F16, [20, 3, 3, 1]))
    _bad(ctx, ValueError, r"flash_attn_ext.*mask must be contiguous",
         m=gg.view_2d(ctx, T(gg.F16, [24, 3]), 20, 3, 48, 0))
    _bad(ctx, ValueError, r"flash_attn_ext.*max_bias", m=None, max_bias=8.0)
    _bad(ctx, ValueError, r"flash_attn_ext.*q rows", q=gg.transpose(ctx, T(gg.F32, [3, 32, 4, 1])))
    _bad(ctx, ValueError, r"flash_attn_ext.*k and v rows",
         k=gg.transpose(ctx, T(gg.F16, [20, 32, 2, 1])))
    _bad(ctx, TypeError, r"flash_attn_ext.*mask must be f16", m=T(gg.F32, [20, 3, 1, 1]))
    _bad(ctx, TypeError, r"flash_attn_ext.*q must be f32", q=T(gg.F16, [32, 3, 4, 1]))
    _bad(ctx, TypeError, r"flash_attn_ext.*k and v must be", k=T(gg.I32, [32, 20, 2, 1]))
    with pytest.raises(TypeError, match="flash_attn_ext"):
        gg.flash_attn_ext(ctx, None, T(gg.F16, [32, 20, 2, 1]), T(gg.F16, [32, 20, 2, 1]), None, 1.0, 0.0, 0.0)
    # the context still works after the errors
    q, qv = new(ctx, gg.F32, [32, 3, 4, 1])
    k, kv_ = new(ctx, gg.F16, [32, 20, 2, 1])
    r = gg.flash_attn_ext(ctx, q, k, k, None, 0.5, 0.0, 0.0)
    compute(ctx, r)
    assert_close(values(r), ref.flash_attn_ext(qv, kv_, kv_, None, 0.5), TOL)
