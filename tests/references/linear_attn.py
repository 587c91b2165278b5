"""numpy references of the recurrent linear-attention ops (float64, per head S x S states).

Inputs in numpy order: per-token tensors (T, H, S); states (n_seqs, H, S, S) with [i, j] =
row i, column j of ggml's row-major per-head matrix. Each returns (y (T, H, S), final states)."""
import numpy as np


def _run(T, n_seqs, state, step):
    per = T // n_seqs
    st = state.copy()
    ys = []
    for t in range(T):
        s = t // per
        y, st[s] = step(t, st[s])
        ys.append(y)
    return np.stack(ys), st


def gla(k, v, q, g, state, scale):
    def step(t, S):  # S (H, i, j)
        S = S * g[t][:, :, None] + k[t][:, :, None] * v[t][:, None, :]
        return np.einsum("hi,hij->hj", q[t] * scale, S), S
    return _run(k.shape[0], state.shape[0], state, step)


def wkv6(k, v, r, tf, td, state):
    def step(t, S):
        kv = k[t][:, :, None] * v[t][:, None, :]
        y = np.einsum("hi,hij->hj", r[t], tf[:, :, None] * kv + S)
        return y, S * td[t][:, :, None] + kv
    return _run(k.shape[0], state.shape[0], state, step)


def wkv7(r, w, k, v, a, b, state):
    def step(t, S):  # S (H, i (value), j (key))
        sa = np.einsum("hij,hj->hi", S, a[t])
        S = S * w[t][:, None, :] + v[t][:, :, None] * k[t][:, None, :] + sa[:, :, None] * b[t][:, None, :]
        return np.einsum("hij,hj->hi", S, r[t]), S
    return _run(k.shape[0], state.shape[0], state, step)


def gated_delta_net(q, k, v, g, beta, state, K):
    """q, k (B_k, T, H_k, S), v (B, T, H, S), g (B, T, H, 1 or S), beta (B, T, H, 1),
    state (B, H, j, i) as ggml stores it ([i (key), j (value)] with i innermost).
    Returns (out (B, T, H, S), snapshots (K, B, H, j, i)); slots j >= T are zero."""
    B, T, H, S = v.shape
    Bk, Hk = q.shape[0], q.shape[2]
    out = np.zeros((B, T, H, S))
    snaps = np.zeros((K,) + state.shape)
    for b in range(B):
        for h in range(H):
            M = state[b, h].T.copy()  # M[i, j] = S[i][j]
            qb, hk = b // (B // Bk), h % Hk
            for t in range(T):
                gt = g[b, t, h]
                M = M * np.exp(gt)[:, None] if gt.shape[0] == S and S > 1 else M * np.exp(gt[0])
                kt, qt = k[qb, t, hk], q[qb, t, hk]
                delta = (v[b, t, h] - M.T @ kt) * beta[b, t, h, 0]
                M = M + np.outer(kt, delta)
                out[b, t, h] = (M.T @ qt) / np.sqrt(S)
                slot = T - 1 - t
                if slot < K:
                    snaps[slot, b, h] = M.T
    return out, snaps
