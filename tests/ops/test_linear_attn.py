"""gated_linear_attn, rwkv_wkv6, rwkv_wkv7 against float64 numpy recurrences, on every SIMD
level, odd head sizes and several sequences."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import SIMD_LEVELS, assert_close, compute, new, values


def _inputs(ctx, rng, S, H, T, names, lo=-1.0, hi=1.0):
    out = {}
    for n in names:
        t, v = new(ctx, gg.F32, [S, H, T], rng=rng, lo=lo, hi=hi)
        out[n] = (t, v[0])  # (T, H, S)
    return out


def _state(ctx, rng, S, H, n_seqs):
    t, v = new(ctx, gg.F32, [S * S * H, n_seqs], rng=rng)
    return t, v[0, 0].reshape(n_seqs, H, S, S)


def _split(r, S, H, T, n_seqs):
    v = values(r)[0, 0]
    return v[:T].reshape(T, H, S), v[T:].reshape(n_seqs, H, S, S)


CASES = [(64, 2, 5, 1), (64, 1, 6, 2), (13, 3, 6, 3), (8, 2, 1, 1)]


@pytest.mark.parametrize("simd", SIMD_LEVELS, indirect=True)
@pytest.mark.parametrize("S,H,T,n_seqs", CASES)
def test_gated_linear_attn(simd, S, H, T, n_seqs):
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(S + T)
    x = _inputs(ctx, rng, S, H, T, ["k", "v", "q"])
    g, gv = new(ctx, gg.F32, [S, H, T], rng=rng, lo=0.5, hi=1.0)
    st, sv = _state(ctx, rng, S, H, n_seqs)
    r = gg.gated_linear_attn(ctx, x["k"][0], x["v"][0], x["q"][0], g, st, 0.125)
    compute(ctx, r)
    y, s = ref.gla(x["k"][1], x["v"][1], x["q"][1], gv[0], sv, 0.125)
    gy, gs = _split(r, S, H, T, n_seqs)
    assert_close(gy, y, 1e-7, what="y")
    assert_close(gs, s, 1e-7, what="state")


@pytest.mark.parametrize("simd", SIMD_LEVELS, indirect=True)
@pytest.mark.parametrize("S,H,T,n_seqs", CASES)
def test_rwkv_wkv6(simd, S, H, T, n_seqs):
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(S * 3 + T)
    x = _inputs(ctx, rng, S, H, T, ["k", "v", "r"])
    tf, tfv = new(ctx, gg.F32, [S, H], rng=rng)
    td, tdv = new(ctx, gg.F32, [S, H, T], rng=rng, lo=0.5, hi=1.0)
    st, sv = _state(ctx, rng, S, H, n_seqs)
    r = gg.rwkv_wkv6(ctx, x["k"][0], x["v"][0], x["r"][0], tf, td, st)
    compute(ctx, r)
    y, s = ref.wkv6(x["k"][1], x["v"][1], x["r"][1], tfv[0, 0], tdv[0], sv)
    gy, gs = _split(r, S, H, T, n_seqs)
    assert_close(gy, y, 1e-7, what="y")
    assert_close(gs, s, 1e-7, what="state")


@pytest.mark.parametrize("simd", SIMD_LEVELS, indirect=True)
@pytest.mark.parametrize("S,H,T,n_seqs", CASES)
def test_rwkv_wkv7(simd, S, H, T, n_seqs):
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(S * 5 + T)
    x = _inputs(ctx, rng, S, H, T, ["r", "k", "v"])
    w, wv = new(ctx, gg.F32, [S, H, T], rng=rng, lo=0.5, hi=1.0)
    # a, b as llama.cpp feeds them: a = -kk, b = kk * iclr with kk L2-normalised rows
    kk = rng.uniform(-1, 1, (T, H, S))
    kk /= np.linalg.norm(kk, axis=-1, keepdims=True)
    a, av = new(ctx, gg.F32, [S, H, T], data=-kk[None])
    b, bv = new(ctx, gg.F32, [S, H, T], data=(kk * 0.5)[None])
    st, sv = _state(ctx, rng, S, H, n_seqs)
    r = gg.rwkv_wkv7(ctx, x["r"][0], w, x["k"][0], x["v"][0], a, b, st)
    compute(ctx, r)
    y, s = ref.wkv7(x["r"][1], wv[0], x["k"][1], x["v"][1], av[0], bv[0], sv)
    gy, gs = _split(r, S, H, T, n_seqs)
    assert_close(gy, y, 1e-7, what="y")
    assert_close(gs, s, 1e-7, what="state")


def test_threads_agree():
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(1)
    S, H, T = 64, 3, 4
    x = _inputs(ctx, rng, S, H, T, ["k", "v", "q", "g"])
    st, _ = _state(ctx, rng, S, H, 2)
    r = gg.gated_linear_attn(ctx, *(x[n][0] for n in ("k", "v", "q", "g")), st, 1.0)
    compute(ctx, r, n_threads=1)
    one = values(r).copy()
    compute(ctx, r, n_threads=3)
    np.testing.assert_array_equal(one, values(r))


def test_linear_attn_rejects():
    ctx = gg.Context(4 << 20)
    k = ctx.new_tensor(gg.F32, [8, 2, 5])
    st = ctx.new_tensor(gg.F32, [8 * 8 * 2, 2])
    with pytest.raises(ValueError, match="multiple of n_seqs"):
        gg.gated_linear_attn(ctx, k, k, k, k, st, 1.0)  # 5 tokens over 2 sequences
    st1 = ctx.new_tensor(gg.F32, [8 * 8 * 2, 1])
    with pytest.raises(ValueError, match="rwkv_wkv6"):
        gg.rwkv_wkv6(ctx, k, k, k, ctx.new_tensor(gg.F32, [8, 3]), k, st1)
    with pytest.raises(ValueError, match="contiguous"):
        gg.rwkv_wkv7(ctx, gg.transpose(ctx, k), k, k, k, k, k, st1)
    with pytest.raises(ValueError, match="state"):
        gg.rwkv_wkv7(ctx, k, k, k, k, k, k, ctx.new_tensor(gg.F32, [100, 1]))
    with pytest.raises(TypeError, match="gated_linear_attn"):
        gg.gated_linear_attn(ctx, k, k, None, k, st1, 1.0)
