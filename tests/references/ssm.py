"""SSM_CONV and SSM_SCAN, float64, numpy axis order.

ssm_conv: sx (n_s, d_inner, d_conv-1+n_t), c (d_inner, d_conv) -> (n_s, n_t, d_inner).
ssm_scan: s (n_slots, n_head, head_dim, d_state), x (n_seqs, n_tokens, n_head, head_dim),
dt (n_seqs, n_tokens, n_head), A (n_head, d_state) or (n_head, 1), B/C (n_seqs, n_tokens, n_group,
d_state), ids (n_seqs,) -> flat: y (n_seqs, n_tokens, n_head, head_dim) then K planes
(n_seqs, n_head, head_dim, d_state); planes j >= n_tokens are zeros (pyggml's documented choice).
"""
import numpy as np


def ssm_conv(sx, c):
    sx = np.asarray(sx, np.float64)
    c = np.asarray(c, np.float64)
    d_conv = c.shape[1]
    n_t = sx.shape[2] - d_conv + 1
    out = np.zeros((sx.shape[0], n_t, sx.shape[1]))
    for t in range(n_t):
        out[:, t, :] = np.sum(sx[:, :, t:t + d_conv] * c[None], axis=2)
    return out


def softplus(z):
    z = np.asarray(z, np.float64)
    return np.where(z > 20.0, z, np.log1p(np.exp(np.minimum(z, 20.0))))


def ssm_scan(s, x, dt, A, B, C, ids, K=1):
    s = np.asarray(s, np.float64)
    x = np.asarray(x, np.float64)
    dt = np.asarray(dt, np.float64)
    A = np.asarray(A, np.float64)
    B = np.asarray(B, np.float64)
    C = np.asarray(C, np.float64)
    n_seqs, n_tokens, n_head, head_dim = x.shape
    d_state = s.shape[-1]
    n_group = B.shape[2]
    hpg = n_head // n_group
    y = np.zeros((n_seqs, n_tokens, n_head, head_dim))
    planes = np.zeros((K, n_seqs, n_head, head_dim, d_state))
    for q in range(n_seqs):
        st = s[int(ids[q])].copy()  # (n_head, head_dim, d_state)
        for t in range(n_tokens):
            for h in range(n_head):
                g = h // hpg
                dl = float(softplus(dt[q, t, h]))
                dA = np.exp(dl * A[h])  # (1,) Mamba-2 or (d_state,) Mamba-1
                st[h] = st[h] * dA[None, :] + B[q, t, g][None, :] * (x[q, t, h][:, None] * dl)
                y[q, t, h] = st[h] @ C[q, t, g]
            j = n_tokens - 1 - t
            if K > 1 and 1 <= j < K:
                planes[j, q] = st
        planes[0, q] = st
    return np.concatenate([y.ravel(), planes.ravel()])
