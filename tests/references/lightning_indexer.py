"""LIGHTNING_INDEXER, float64, numpy axis order.

q (S, n_batch, n_head, D), k (S, n_kv, 1, D) (already dequantized), weights (S, 1, n_batch, n_head),
mask (S_m, 1, >= n_batch, n_kv) -> (S, 1, n_batch, n_kv).
"""
import numpy as np


def lightning_indexer(q, k, weights, mask):
    q = np.asarray(q, np.float64)
    k = np.asarray(k, np.float64)
    w = np.asarray(weights, np.float64)
    m = np.asarray(mask, np.float64)
    S, n_batch, n_head, D = q.shape
    n_kv = k.shape[1]
    out = np.zeros((S, 1, n_batch, n_kv))
    for s in range(S):
        dots = np.einsum("thd,jd->thj", q[s], k[s, :, 0, :])  # (t, h, j)
        score = np.einsum("thj,th->tj", np.maximum(dots, 0.0), w[s, 0])
        with np.errstate(invalid="ignore"):
            out[s, 0] = score + m[s % m.shape[0], 0, :n_batch, :]
    return out
