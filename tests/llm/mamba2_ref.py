"""A float64 numpy Mamba-2 forward, written from the model's definition (token by token),
to check pyggml's mamba2 graph independently of ggml's ops."""
from __future__ import annotations

import numpy as np


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def load_weights(path):
    """Weights as float64 numpy arrays in numpy (row-major) order, and the hparams."""
    import gguf
    r = gguf.GGUFReader(path)
    kv = {f.name: f.contents() for f in r.fields.values()}
    a = "mamba2"
    hp = dict(D=kv[f"{a}.embedding_length"], L=kv[f"{a}.block_count"],
              d_conv=kv[f"{a}.ssm.conv_kernel"], d_inner=kv[f"{a}.ssm.inner_size"],
              N=kv[f"{a}.ssm.state_size"], H=kv[f"{a}.ssm.time_step_rank"],
              G=kv[f"{a}.ssm.group_count"], eps=kv[f"{a}.attention.layer_norm_rms_epsilon"])
    W = {t.name: np.array(t.data, np.float64).reshape([int(x) for x in reversed(t.shape)])
         for t in r.tensors}
    return hp, W


class Mamba2Ref:
    """State per layer: conv window [d_conv-1, conv_dim] and SSM state [H, head_dim, N]."""

    def __init__(self, path):
        self.hp, self.W = load_weights(path)
        self.reset()

    def reset(self):
        h = self.hp
        conv_dim = h["d_inner"] + 2 * h["G"] * h["N"]
        self.conv = [np.zeros((h["d_conv"] - 1, conv_dim)) for _ in range(h["L"])]
        self.ssm = [np.zeros((h["H"], h["d_inner"] // h["H"], h["N"])) for _ in range(h["L"])]

    def snapshot(self):
        return [c.copy() for c in self.conv], [s.copy() for s in self.ssm]

    def restore(self, snap):
        self.conv = [c.copy() for c in snap[0]]
        self.ssm = [s.copy() for s in snap[1]]

    def step(self, tok: int) -> np.ndarray:
        h, W = self.hp, self.W
        di, N, H, G = h["d_inner"], h["N"], h["H"], h["G"]
        P = di // H
        x = W["token_embd.weight"][tok].copy()
        for il in range(h["L"]):
            p = f"blk.{il}."
            u = _rms(x, W[p + "attn_norm.weight"], h["eps"])
            zxbcdt = W[p + "ssm_in.weight"] @ u
            z, xbc, dt = zxbcdt[:di], zxbcdt[di:di + di + 2 * G * N], zxbcdt[2 * di + 2 * G * N:]
            win = np.concatenate([self.conv[il], xbc[None, :]], 0)      # [d_conv, conv_dim]
            self.conv[il] = win[1:]
            xbc = _silu((win * W[p + "ssm_conv1d.weight"].T).sum(0) + W[p + "ssm_conv1d.bias"])
            xs = xbc[:di].reshape(H, P)
            B = xbc[di:di + G * N].reshape(G, N)
            C = xbc[di + G * N:].reshape(G, N)
            dt = _softplus(dt + W[p + "ssm_dt.bias"])
            A = W[p + "ssm_a"].reshape(H)
            Dd = W[p + "ssm_d"].reshape(H)
            y = np.zeros((H, P))
            for hh in range(H):
                g = hh // (H // G)
                s = self.ssm[il][hh] * np.exp(dt[hh] * A[hh]) + np.outer(xs[hh] * dt[hh], B[g])
                self.ssm[il][hh] = s
                y[hh] = s @ C[g] + Dd[hh] * xs[hh]
            y = y.reshape(di) * _silu(z)
            y = _rms(y.reshape(G, di // G), W[p + "ssm_norm.weight"], h["eps"]).reshape(di)
            x = x + W[p + "ssm_out.weight"] @ y
        x = _rms(x, W["output_norm.weight"], h["eps"])
        return W["output.weight"] @ x

    def forward(self, toks) -> np.ndarray:
        return np.stack([self.step(int(t)) for t in toks])
