"""A float64 numpy Step3.5 forward (trunk and NextN heads), written from the model's
definition token by token, to check pyggml's step35 graphs without llama.cpp."""
from __future__ import annotations

import numpy as np

from mamba2_ref import _rms, _silu


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _swiglu(g, up, limit):
    """silu(g) * up; with a limit L > 0, silu(g) is capped at L and up clamped to [-L, L]."""
    if limit > 1e-6:
        return np.minimum(_silu(g), limit) * np.clip(up, -limit, limit)
    return _silu(g) * up


class Step35Ref:
    def __init__(self, path):
        import gguf
        r = gguf.GGUFReader(path)
        kv = {f.name: f.contents() for f in r.fields.values()}
        g = lambda k, d=None: kv.get(f"step35.{k}", d)  # noqa: E731
        n_rot = g("rope.dimension_count")
        self.hp = dict(D=g("embedding_length"), L=g("block_count") - g("nextn_predict_layers"),
                       H=g("attention.head_count"), Hkv=g("attention.head_count_kv"),
                       d=g("attention.key_length"), rot_full=n_rot // 2,
                       rot_swa=g("rope.dimension_count_swa", n_rot),
                       base=g("rope.freq_base"), base_swa=g("rope.freq_base_swa", 10000.0),
                       eps=g("attention.layer_norm_rms_epsilon"), n_swa=g("attention.sliding_window"),
                       k_used=g("expert_used_count", 0))
        self.swa = [bool(x) for x in g("attention.sliding_window_pattern")]
        n_all = len(self.swa)
        self.limit_exp = [float(x) for x in g("swiglu_clamp_exp", [0.0] * n_all)]
        self.limit_shexp = [float(x) for x in g("swiglu_clamp_shexp", [0.0] * n_all)]
        self.W = {t.name: np.array(t.data, np.float64).reshape([int(x) for x in reversed(t.shape)])
                  for t in r.tensors}
        self.kv = {}

    def rope(self, x, p, il):
        n = self.hp["rot_swa"] if self.swa[il] else self.hp["rot_full"]
        base = self.hp["base_swa"] if self.swa[il] else self.hp["base"]
        half = n // 2
        theta = p * base ** (-2.0 * np.arange(half) / n)
        c, s = np.cos(theta), np.sin(theta)
        out = x.copy()
        out[..., :half] = x[..., :half] * c - x[..., half:n] * s
        out[..., half:n] = x[..., :half] * s + x[..., half:n] * c
        return out

    def attn(self, il, u, p):
        h, W, pre = self.hp, self.W, f"blk.{il}."
        H, Hkv, d, eps = h["H"], h["Hkv"], h["d"], h["eps"]
        q = (W[pre + "attn_q.weight"] @ u).reshape(H, d)
        k = (W[pre + "attn_k.weight"] @ u).reshape(Hkv, d)
        v = (W[pre + "attn_v.weight"] @ u).reshape(Hkv, d)
        if pre + "attn_q_norm.weight" in W:
            q = _rms(q, W[pre + "attn_q_norm.weight"], eps)
        if pre + "attn_k_norm.weight" in W:
            k = _rms(k, W[pre + "attn_k_norm.weight"], eps)
        q, k = self.rope(q, p, il), self.rope(k, p, il)
        cache = self.kv.setdefault(il, [])
        cache.append((p, k, v))
        seen = [(pk, kk, vv) for pk, kk, vv in cache
                if not (self.swa[il] and p - pk >= h["n_swa"])]
        K = np.stack([c[1] for c in seen])
        V = np.stack([c[2] for c in seen])
        out = np.zeros((H, d))
        for hh in range(H):
            kh = hh // (H // Hkv)
            s = K[:, kh] @ q[hh] / np.sqrt(d)
            w = np.exp(s - s.max())
            out[hh] = (w / w.sum()) @ V[:, kh]
        if pre + "attn_gate.weight" in W:
            out = out * _sigmoid(W[pre + "attn_gate.weight"] @ u)[:, None]
        return W[pre + "attn_output.weight"] @ out.reshape(-1)

    def ffn(self, il, u):
        W, pre = self.W, f"blk.{il}."
        lim_sh, lim_exp = self.limit_shexp[il], self.limit_exp[il]
        dense = lambda g, up, dn, x: W[dn] @ _swiglu(W[g] @ x, W[up] @ x, lim_sh)  # noqa: E731
        if pre + "ffn_gate_inp.weight" not in W:
            return dense(pre + "ffn_gate.weight", pre + "ffn_up.weight", pre + "ffn_down.weight", u)
        probs = _sigmoid(W[pre + "ffn_gate_inp.weight"] @ u)
        sel = np.argsort(-(probs + W[pre + "exp_probs_b.bias"]), kind="stable")[:self.hp["k_used"]]
        out = np.zeros_like(u)
        for e in sel:
            g = W[pre + "ffn_gate_exps.weight"][e] @ u
            up = W[pre + "ffn_up_exps.weight"][e] @ u
            out += probs[e] * (W[pre + "ffn_down_exps.weight"][e] @ _swiglu(g, up, lim_exp))
        return out + dense(pre + "ffn_gate_shexp.weight", pre + "ffn_up_shexp.weight",
                           pre + "ffn_down_shexp.weight", u)

    def block(self, il, x, p):
        W, eps, pre = self.W, self.hp["eps"], f"blk.{il}."
        x = x + self.attn(il, _rms(x, W[pre + "attn_norm.weight"], eps), p)
        return x + self.ffn(il, _rms(x, W[pre + "ffn_norm.weight"], eps))

    def head(self, x, norm_w, out_w):
        return self.W[out_w] @ _rms(x, self.W[norm_w], self.hp["eps"])

    def trunk(self, toks):
        """(logits [T, V], pre-norm h_nextn [T, D]) of the trunk over toks at 0..T-1."""
        rows, hs = [], []
        for p, t in enumerate(toks):
            x = self.W["token_embd.weight"][t].copy()
            for il in range(self.hp["L"]):
                x = self.block(il, x, p)
            hs.append(x)
            rows.append(self.head(x, "output_norm.weight", "output.weight"))
        return np.stack(rows), np.stack(hs)

    def nextn(self, j, toks, hs):
        """(logits, h_out) of NextN head j over the entries (toks[p], hs[p]) at 0..T-1."""
        W, eps, il = self.W, self.hp["eps"], self.hp["L"] + j
        pre = f"blk.{il}.nextn."
        emb = W.get(pre + "embed_tokens.weight", W["token_embd.weight"])
        norm_w = pre + "shared_head_norm.weight" if pre + "shared_head_norm.weight" in W else "output_norm.weight"
        out_w = pre + "shared_head_head.weight" if pre + "shared_head_head.weight" in W else "output.weight"
        rows, outs = [], []
        for p, (t, h) in enumerate(zip(toks, hs)):
            x = W[pre + "eh_proj.weight"] @ np.concatenate(
                [_rms(emb[t], W[pre + "enorm.weight"], eps), _rms(h, W[pre + "hnorm.weight"], eps)])
            x = self.block(il, x, p)
            outs.append(x)
            rows.append(self.head(x, norm_w, out_w))
        return np.stack(rows), np.stack(outs)
