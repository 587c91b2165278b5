"""gated_delta_net against a float64 numpy delta rule: scalar and per-channel (KDA) gates,
grouped q/k heads, batch broadcast, permuted inputs, K snapshots, every SIMD level."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import SIMD_LEVELS, assert_close, compute, new, values


def _l2(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _case(ctx, rng, S, H, Hk, T, B, Bk, kda, permuted=False):
    qv = _l2(rng.uniform(-1, 1, (Bk, T, Hk, S)))
    kv = _l2(rng.uniform(-1, 1, (Bk, T, Hk, S)))
    vv = rng.uniform(-1, 1, (B, T, H, S))
    if permuted:  # stored [S, T, H, B], viewed as [S, H, T, B]
        def put(x):
            t, _ = new(ctx, gg.F32, [x.shape[3], x.shape[1], x.shape[2], x.shape[0]],
                       data=np.ascontiguousarray(np.swapaxes(x, 1, 2)))
            return gg.permute(ctx, t, 0, 2, 1, 3)
        q, k, v = put(qv), put(kv), put(vv)
    else:
        q = new(ctx, gg.F32, [S, Hk, T, Bk], data=qv)[0]
        k = new(ctx, gg.F32, [S, Hk, T, Bk], data=kv)[0]
        v = new(ctx, gg.F32, [S, H, T, B], data=vv)[0]
    g, gv = new(ctx, gg.F32, [S if kda else 1, H, T, B], rng=rng, lo=-0.7, hi=-0.01)
    beta, bv = new(ctx, gg.F32, [1, H, T, B], rng=rng, lo=0.1, hi=1.0)
    st, sv = new(ctx, gg.F32, [S, S, H, B], rng=rng, lo=-0.5, hi=0.5)
    return (q, k, v, g, beta, st), (qv, kv, vv, gv, bv, sv)


def _check(r, refs, S, H, T, B, K):
    out, snaps = ref.gated_delta_net(*refs, K)
    v = values(r)[0, 0]
    assert list(r.ne) == [S * H, T * B + K * S * B, 1, 1]
    assert_close(v[:T * B].reshape(B, T, H, S), out, 1e-7, what="out")
    assert_close(v[T * B:].reshape(K, B, H, S, S), snaps, 1e-7, what="states")


@pytest.mark.parametrize("simd", SIMD_LEVELS, indirect=True)
@pytest.mark.parametrize("S,H,Hk,T,B,Bk,kda,K", [
    (16, 2, 2, 5, 1, 1, False, 1),
    (32, 2, 2, 5, 2, 2, False, 3),
    (16, 2, 1, 3, 2, 2, True, 1),
    (128, 2, 1, 4, 1, 1, True, 2),
    (19, 4, 2, 6, 3, 1, True, 4),
    (8, 1, 1, 2, 1, 1, False, 5),  # K > T: the slots past T are zero
    (128, 3, 3, 1, 2, 2, False, 1),  # one token: rows read from the input state (decode)
    (72, 2, 1, 1, 1, 1, True, 2),    # S % 32 != 0: the row kernel's 8-float rest
    (64, 2, 2, 7, 1, 1, False, 3),   # first token by rows, the later ones by 4-row blocks
    (16, 2, 2, 1, 1, 1, False, 2),   # a small state: copied, then 4-row blocks
])
def test_gated_delta_net(simd, S, H, Hk, T, B, Bk, kda, K):
    ctx = gg.Context(32 << 20)
    rng = np.random.default_rng(S * 7 + H + T + K)
    ts, refs = _case(ctx, rng, S, H, Hk, T, B, Bk, kda)
    r = gg.gated_delta_net(ctx, *ts, K)
    compute(ctx, r)
    _check(r, refs, S, H, T, B, K)


def test_gated_delta_net_permuted_and_threads():
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(3)
    S, H, T, B = 16, 4, 3, 2
    ts, refs = _case(ctx, rng, S, H, H, T, B, B, True, permuted=True)
    assert ts[0].nb[2] < ts[0].nb[1]  # q, k, v are views with heads and tokens swapped
    r = gg.gated_delta_net(ctx, *ts, 2)
    compute(ctx, r, n_threads=1)
    _check(r, refs, S, H, T, B, 2)
    one = values(r).copy()
    compute(ctx, r, n_threads=3)
    np.testing.assert_array_equal(one, values(r))


def test_gated_delta_net_rejects():
    ctx = gg.Context(4 << 20)
    S, H, T = 8, 2, 3
    q = ctx.new_tensor(gg.F32, [S, H, T, 1])
    g = ctx.new_tensor(gg.F32, [1, H, T, 1])
    st = ctx.new_tensor(gg.F32, [S, S, H, 1])
    with pytest.raises(ValueError, match="K must be"):
        gg.gated_delta_net(ctx, q, q, q, g, g, st, 0)
    with pytest.raises(ValueError, match="g must be"):
        gg.gated_delta_net(ctx, q, q, q, ctx.new_tensor(gg.F32, [3, H, T, 1]), g, st)
    with pytest.raises(ValueError, match="state must be"):
        gg.gated_delta_net(ctx, q, q, q, g, g, ctx.new_tensor(gg.F32, [S, S, H + 1, 1]))
    with pytest.raises(ValueError, match="q, k must be"):
        gg.gated_delta_net(ctx, ctx.new_tensor(gg.F32, [S, 3, T, 1]), ctx.new_tensor(gg.F32, [S, 3, T, 1]), q, g, g, st)
    with pytest.raises(TypeError, match="gated_delta_net"):
        gg.gated_delta_net(ctx, q, q, ctx.new_tensor(gg.F16, [S, H, T, 1]), g, g, st)
    with pytest.raises(ValueError, match="rows must be contiguous"):
        gg.gated_delta_net(ctx, gg.transpose(ctx, q), q, q, g, g, st)
