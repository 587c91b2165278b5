"""Reference of FLASH_ATTN_EXT, float64, written from the op's definition (online softmax not used).

Arrays are in numpy order (ne reversed):
  q (S, H, N, D_k), k (S, H_kv, KV, D_k), v (S, H_v, KV, D_v), mask (S_m, H_m, >=N, >=KV) or None,
  sinks (H,) or None. Returns (S, N, H, D_v): the permuted layout [D_v, H, N, S] of ggml.
"""
import numpy as np


def fa_alibi_slopes(n_head, max_bias):
    """slope(h) of (1 for every head when max_bias == 0)."""
    if max_bias == 0.0:
        return np.ones(n_head)
    n_head_log2 = 2 ** int(np.floor(np.log2(n_head)))
    m0 = 2.0 ** (-max_bias / n_head_log2)
    m1 = 2.0 ** (-(max_bias / 2.0) / n_head_log2)
    return np.array([m0 ** (h + 1) if h < n_head_log2 else m1 ** (2 * (h - n_head_log2) + 1)
                     for h in range(n_head)])


def flash_attn_ext(q, k, v, mask=None, scale=1.0, max_bias=0.0, logit_softcap=0.0, sinks=None):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    S, H, N, _ = q.shape
    KV = k.shape[2]
    Dv = v.shape[3]
    rk, rv = H // k.shape[1], H // v.shape[1]
    slopes = fa_alibi_slopes(H, max_bias)
    out = np.zeros((S, N, H, Dv))
    for s in range(S):
        for h in range(H):
            x = q[s, h] @ k[s, h // rk].T * scale                       # (N, KV)
            if logit_softcap != 0.0:
                x = logit_softcap * np.tanh(x / logit_softcap)
            if mask is not None:
                m = np.asarray(mask, dtype=np.float64)[s % mask.shape[0], h % mask.shape[1], :N, :KV]
                excluded = np.isneginf(m)
                with np.errstate(invalid="ignore"):
                    x = np.where(excluded, -np.inf, x + slopes[h] * m)
            M = np.max(x, axis=1, initial=-np.inf)                      # (N,)
            if sinks is not None:
                M = np.maximum(M, float(sinks[h]))
            finite = np.isfinite(M)
            Mf = np.where(finite, M, 0.0)
            w = np.where(np.isneginf(x), 0.0, np.exp(np.where(np.isneginf(x), 0.0, x - Mf[:, None])))
            Z = w.sum(axis=1)
            if sinks is not None:
                Z = Z + np.where(finite, np.exp(float(sinks[h]) - Mf), 0.0)
            acc = w @ v[s, h // rv]                                     # (N, Dv)
            safe = np.where(Z == 0.0, 1.0, Z)
            out[s, :, h, :] = np.where((Z == 0.0)[:, None], 0.0, acc / safe[:, None])
    return out
