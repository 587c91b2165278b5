"""A float64 numpy Qwen3.5 forward (hybrid trunk: gated delta-net and gated full attention),
written from the model's definition token by token, to check pyggml's qwen35 graph."""
from __future__ import annotations

import numpy as np

from mamba2_ref import _rms, _silu, _softplus


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


class Qwen35Ref:
    def __init__(self, path):
        import gguf
        r = gguf.GGUFReader(path)
        kv = {f.name: f.contents() for f in r.fields.values()}
        a = "qwen35"
        g = lambda k: kv[f"{a}.{k}"]  # noqa: E731
        self.hp = h = dict(
            D=g("embedding_length"), L=g("block_count") - g("nextn_predict_layers"),
            H=g("attention.head_count"), Hkv=g("attention.head_count_kv"),
            d=g("attention.key_length"), n_rot=g("rope.dimension_count"),
            base=g("rope.freq_base"), eps=g("attention.layer_norm_rms_epsilon"),
            d_conv=g("ssm.conv_kernel"), S=g("ssm.state_size"), Hv=g("ssm.time_step_rank"),
            Hk=g("ssm.group_count"), interval=g("full_attention_interval"))
        self.rec = [(i + 1) % h["interval"] != 0 for i in range(h["L"])]
        self.W = {t.name: np.array(t.data, np.float64).reshape([int(x) for x in reversed(t.shape)])
                  for t in r.tensors}
        self.reset()

    def reset(self):
        h = self.hp
        conv_dim = h["S"] * (h["Hv"] + 2 * h["Hk"])
        self.pos = 0
        self.conv = {i: np.zeros((h["d_conv"] - 1, conv_dim)) for i in range(h["L"]) if self.rec[i]}
        self.ssm = {i: np.zeros((h["Hv"], h["S"], h["S"])) for i in range(h["L"]) if self.rec[i]}
        self.k = {i: [] for i in range(h["L"]) if not self.rec[i]}
        self.v = {i: [] for i in range(h["L"]) if not self.rec[i]}

    def rope(self, x, p):
        """NEOX-style rotation of the first n_rot dims of each row (IMROPE with equal streams)."""
        n = self.hp["n_rot"]
        half = n // 2
        theta = p * self.hp["base"] ** (-2.0 * np.arange(half) / n)
        c, s = np.cos(theta), np.sin(theta)
        out = x.copy()
        x0, x1 = x[..., :half], x[..., half:n]
        out[..., :half] = x0 * c - x1 * s
        out[..., half:n] = x0 * s + x1 * c
        return out

    def attn(self, il, u):
        h, W, p = self.hp, self.W, f"blk.{il}."
        H, Hkv, d, eps = h["H"], h["Hkv"], h["d"], h["eps"]
        qg = (W[p + "attn_q.weight"] @ u).reshape(H, 2 * d)
        q, gate = qg[:, :d], qg[:, d:]
        q = self.rope(_rms(q, W[p + "attn_q_norm.weight"], eps), self.pos)
        k = (W[p + "attn_k.weight"] @ u).reshape(Hkv, d)
        k = self.rope(_rms(k, W[p + "attn_k_norm.weight"], eps), self.pos)
        v = (W[p + "attn_v.weight"] @ u).reshape(Hkv, d)
        self.k[il].append(k)
        self.v[il].append(v)
        K, V = np.stack(self.k[il]), np.stack(self.v[il])        # [n, Hkv, d]
        out = np.zeros((H, d))
        for hh in range(H):
            kh = hh // (H // Hkv)
            s = K[:, kh] @ q[hh] / np.sqrt(d)
            w = np.exp(s - s.max())
            out[hh] = (w / w.sum()) @ V[:, kh]
        out = out * _sigmoid(gate)
        return W[p + "attn_output.weight"] @ out.reshape(-1)

    def linear(self, il, u):
        h, W, p = self.hp, self.W, f"blk.{il}."
        S, Hk, Hv, eps = h["S"], h["Hk"], h["Hv"], h["eps"]
        qkv = W[p + "attn_qkv.weight"] @ u
        z = (W[p + "attn_gate.weight"] @ u).reshape(Hv, S)
        beta = _sigmoid(W[p + "ssm_beta.weight"] @ u)
        g = _softplus(W[p + "ssm_alpha.weight"] @ u + W[p + "ssm_dt.bias"]) * W[p + "ssm_a"]
        win = np.concatenate([self.conv[il], qkv[None, :]], 0)
        self.conv[il] = win[1:]
        co = _silu((win * W[p + "ssm_conv1d.weight"].T).sum(0))
        q = co[:S * Hk].reshape(Hk, S)
        k = co[S * Hk:2 * S * Hk].reshape(Hk, S)
        v = co[2 * S * Hk:].reshape(Hv, S)
        l2 = lambda x: x / np.sqrt((x * x).sum(-1, keepdims=True) + eps)  # noqa: E731
        q, k = l2(q), l2(k)
        o = np.zeros((Hv, S))
        for hh in range(Hv):
            kq = hh % Hk                                          # k/q heads tile over v heads
            M = self.ssm[il][hh] * np.exp(g[hh])                  # M[i, j]: key dim i, value dim j
            delta = (v[hh] - M.T @ k[kq]) * beta[hh]
            M = M + np.outer(k[kq], delta)
            self.ssm[il][hh] = M
            o[hh] = M.T @ q[kq] / np.sqrt(S)
        o = _rms(o, W[p + "ssm_norm.weight"], eps) * _silu(z)
        return W[p + "ssm_out.weight"] @ o.reshape(-1)

    def step(self, tok: int) -> np.ndarray:
        h, W = self.hp, self.W
        x = W["token_embd.weight"][tok].copy()
        for il in range(h["L"]):
            p = f"blk.{il}."
            u = _rms(x, W[p + "attn_norm.weight"], h["eps"])
            x = x + (self.linear(il, u) if self.rec[il] else self.attn(il, u))
            u = _rms(x, W[p + "post_attention_norm.weight"], h["eps"])
            gate = W[p + "ffn_gate.weight"] @ u
            x = x + W[p + "ffn_down.weight"] @ (_silu(gate) * (W[p + "ffn_up.weight"] @ u))
        self.pos += 1
        return W["output.weight"] @ _rms(x, W["output_norm.weight"], h["eps"])

    def forward(self, toks) -> np.ndarray:
        return np.stack([self.step(int(t)) for t in toks])
