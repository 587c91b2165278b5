"""DeepSeek-V4 hyper-connection ops, float64, numpy axis order (ne reversed).

Shapes: mixes (T, (2+hc)*hc), scale (>=3,), base ((2+hc)*hc,) -> comb (T, src, dst);
x (T, hc, n_embd), weights (T, hc), gate like x -> (T, n_embd);
post: x (T, n_embd), residual (T, hc, n_embd), post (T, hc), comb (T, src, dst) or None
-> (T, hc, n_embd).
"""
import numpy as np


def dsv4_hc_comb(mixes, scale, base, eps, n_iter, hc=4):
    mixes = np.asarray(mixes, np.float64).reshape(-1, (2 + hc) * hc)
    scale = np.asarray(scale, np.float64).ravel()
    base = np.asarray(base, np.float64).ravel()
    T = mixes.shape[0]
    out = np.zeros((T, hc, hc))  # (t, src, dst)
    for t in range(T):
        P = np.zeros((hc, hc))  # P[d, s]
        for d in range(hc):
            for s in range(hc):
                k = 2 * hc + d + hc * s
                P[d, s] = mixes[t, k] * scale[2] + base[k]
        P = np.exp(P - P.max(axis=0, keepdims=True))
        P = P / P.sum(axis=0, keepdims=True) + eps       # softmax over dst, + eps
        P = P / (eps + P.sum(axis=1, keepdims=True))     # normalise over src
        for _ in range(n_iter - 1):
            P = P / (eps + P.sum(axis=0, keepdims=True))  # over dst
            P = P / (eps + P.sum(axis=1, keepdims=True))  # over src
        out[t] = P.T
    return out


def dsv4_hc_pre(x, weights):
    x = np.asarray(x, np.float64)
    w = np.asarray(weights, np.float64)
    return np.einsum("thi,th->ti", x, w)


def dsv4_hc_pre_gated(x, gate, scale):
    x = np.asarray(x, np.float64)
    g = np.asarray(gate, np.float64)
    return scale * np.sum(x / (1.0 + np.exp(-g)), axis=1)


def dsv4_hc_post(x, residual, post, comb=None):
    x = np.asarray(x, np.float64)
    r = np.asarray(residual, np.float64)
    p = np.asarray(post, np.float64)
    out = x[:, None, :] * p[:, :, None]
    if comb is None:
        return out + r
    c = np.asarray(comb, np.float64)  # (t, src, dst)
    return out + np.einsum("tsi,tsd->tdi", r, c)
