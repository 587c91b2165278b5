"""A float64 numpy LLaMA forward written from the architecture's definition, and a small
in-memory model (random weights in a pyggml context) to run pyggml.llm against it.

Weights are numpy arrays shaped (n_out, n_in) as math sees them; as pyggml tensors that is
ne = [n_in, n_out], the GGUF layout.
"""
from __future__ import annotations


import numpy as np

import pyggml as gg
from pyggml.llm.models.llama import LlamaHParams


def gguf_kv(*, arch="llama", n_vocab=96, n_embd=64, n_layer=2, n_head=4, n_head_kv=2,
            head_dim=None, n_ff=96, n_ctx_train=256, rms_eps=1e-5, rope_freq_base=10000.0,
            n_swa=0, swa_layers=None) -> dict:
    """The GGUF metadata a llama-family file with these sizes carries."""
    d = head_dim or n_embd // n_head
    kv = {"general.architecture": arch, f"{arch}.vocab_size": n_vocab,
          f"{arch}.context_length": n_ctx_train, f"{arch}.embedding_length": n_embd,
          f"{arch}.block_count": n_layer, f"{arch}.feed_forward_length": n_ff,
          f"{arch}.attention.head_count": n_head, f"{arch}.attention.head_count_kv": n_head_kv,
          f"{arch}.attention.key_length": d, f"{arch}.attention.value_length": d,
          f"{arch}.rope.dimension_count": d, f"{arch}.rope.freq_base": rope_freq_base,
          f"{arch}.attention.layer_norm_rms_epsilon": rms_eps}
    if n_swa:
        kv[f"{arch}.attention.sliding_window"] = n_swa
        kv[f"{arch}.attention.sliding_window_pattern"] = list(swa_layers)
    return kv


def make_hparams(**kw):
    """LlamaHParams as the loader reads them from gguf_kv(**kw)."""
    kv = gguf_kv(**kw)
    return LlamaHParams.from_gguf(kv, kv["general.architecture"])


def hparams_kv(hp) -> dict:
    """The metadata of a file with these hparams (what ArrayModel reports as its kv)."""
    return gguf_kv(arch=hp.arch, n_vocab=hp.n_vocab, n_embd=hp.n_embd, n_layer=hp.n_layer,
                   n_head=hp.n_head, n_head_kv=hp.n_head_kv, head_dim=hp.head_dim_k, n_ff=hp.n_ff,
                   n_ctx_train=hp.n_ctx_train, rms_eps=hp.rms_eps, rope_freq_base=hp.rope_freq_base,
                   n_swa=hp.n_swa, swa_layers=hp.swa_layers)


def make_weights(hp, seed=0, qk_norm=False, bias=False, tied=False) -> dict:
    rng = np.random.default_rng(seed)
    D, V, F, d = hp.n_embd, hp.n_vocab, hp.n_ff, hp.head_dim_k
    H, Hkv = hp.n_head, hp.n_head_kv

    def lin(n_out, n_in):
        return rng.normal(0, 1 / np.sqrt(n_in), size=(n_out, n_in))

    w = {"token_embd.weight": rng.normal(0, 1, size=(V, D)),
         "output_norm.weight": rng.uniform(0.5, 1.5, size=D)}
    if not tied:
        w["output.weight"] = lin(V, D)
    for il in range(hp.n_layer):
        p = f"blk.{il}."
        w[p + "attn_norm.weight"] = rng.uniform(0.5, 1.5, size=D)
        w[p + "attn_q.weight"] = lin(H * d, D)
        w[p + "attn_k.weight"] = lin(Hkv * d, D)
        w[p + "attn_v.weight"] = lin(Hkv * d, D)
        w[p + "attn_output.weight"] = lin(D, H * d)
        w[p + "ffn_norm.weight"] = rng.uniform(0.5, 1.5, size=D)
        w[p + "ffn_gate.weight"] = lin(F, D)
        w[p + "ffn_up.weight"] = lin(F, D)
        w[p + "ffn_down.weight"] = lin(D, F)
        if qk_norm:
            w[p + "attn_q_norm.weight"] = rng.uniform(0.5, 1.5, size=d)
            w[p + "attn_k_norm.weight"] = rng.uniform(0.5, 1.5, size=d)
        if bias:
            w[p + "attn_q.bias"] = rng.normal(0, 0.5, size=H * d)
            w[p + "attn_k.bias"] = rng.normal(0, 0.5, size=Hkv * d)
            w[p + "attn_v.bias"] = rng.normal(0, 0.5, size=Hkv * d)
    return w


class ArrayModel:
    """Duck-typed stand-in for pyggml.llm.model.Model over numpy weights (stored as F32)."""

    def __init__(self, hparams, weights: dict):
        self.hparams, self.arch = hparams, hparams.arch
        self.kv = hparams_kv(hparams)
        total = sum(a.size * 4 + 256 for a in weights.values()) + 4096
        self.ctx = gg.Context(mem_size=total)
        self.tensors = {}
        for name, a in weights.items():
            t = self.ctx.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
            t.name = name
            self.tensors[name] = t
        self.vocab = None

    def get(self, name, required=True):
        t = self.tensors.get(name)
        if t is None and required:
            raise KeyError(f"tensor {name!r} not in model")
        return t


# ---- the reference forward --------------------------------------------------------------------
def rms_norm(x, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def rope(x, pos, n_rot, base, neox):
    """x [T, H, d]; rotate the first n_rot dims by angle pos * base^(-2i/n_rot)."""
    x = x.copy()
    i = np.arange(n_rot // 2)
    theta = pos[:, None].astype(np.float64) * base ** (-2.0 * i / n_rot)     # [T, n_rot/2]
    cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    if neox:
        a, b = x[..., i].copy(), x[..., i + n_rot // 2].copy()
        x[..., i], x[..., i + n_rot // 2] = a * cos - b * sin, a * sin + b * cos
    else:
        a, b = x[..., 2 * i].copy(), x[..., 2 * i + 1].copy()
        x[..., 2 * i], x[..., 2 * i + 1] = a * cos - b * sin, a * sin + b * cos
    return x


def silu(x):
    return x / (1 + np.exp(-x))


def forward(hp, w: dict, tokens, layer_outs: list | None = None) -> np.ndarray:
    """Logits [T, V] for a single causal sequence at positions 0..T-1 (float64). Window
    layers (hp.swa_layers) see the last hp.n_swa positions. layer_outs collects each layer's
    output [T, D]."""
    tokens = np.asarray(tokens)
    T, d, H, Hkv = len(tokens), hp.head_dim_k, hp.n_head, hp.n_head_kv
    neox = hp.rope_type == 2
    pos = np.arange(T)
    x = w["token_embd.weight"][tokens].astype(np.float64)
    causal = np.tril(np.ones((T, T), bool))
    window = causal & (pos[:, None] - pos[None, :] < max(hp.n_swa, 1))
    for il in range(hp.n_layer):
        p = f"blk.{il}."
        allowed = window if hp.swa_layers and hp.swa_layers[il] else causal
        h = rms_norm(x, hp.rms_eps) * w[p + "attn_norm.weight"]
        q = h @ w[p + "attn_q.weight"].T + w.get(p + "attn_q.bias", 0)
        k = h @ w[p + "attn_k.weight"].T + w.get(p + "attn_k.bias", 0)
        v = h @ w[p + "attn_v.weight"].T + w.get(p + "attn_v.bias", 0)
        q, k, v = q.reshape(T, H, d), k.reshape(T, Hkv, d), v.reshape(T, Hkv, d)
        if p + "attn_q_norm.weight" in w:
            q = rms_norm(q, hp.rms_eps) * w[p + "attn_q_norm.weight"]
            k = rms_norm(k, hp.rms_eps) * w[p + "attn_k_norm.weight"]
        q = rope(q, pos, hp.n_rot, hp.rope_freq_base, neox)
        k = rope(k, pos, hp.n_rot, hp.rope_freq_base, neox)
        out = np.zeros((T, H, d))
        for hh in range(H):
            kh = hh // (H // Hkv)                     # GQA: consecutive heads share a KV head
            s = q[:, hh, :] @ k[:, kh, :].T / np.sqrt(d)
            s = np.where(allowed, s, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            s /= s.sum(axis=1, keepdims=True)
            out[:, hh, :] = s @ v[:, kh, :]
        x = x + out.reshape(T, H * d) @ w[p + "attn_output.weight"].T
        h = rms_norm(x, hp.rms_eps) * w[p + "ffn_norm.weight"]
        g = h @ w[p + "ffn_gate.weight"].T
        u = h @ w[p + "ffn_up.weight"].T
        x = x + (silu(g) * u) @ w[p + "ffn_down.weight"].T
        if layer_outs is not None:
            layer_outs.append(x.copy())
    h = rms_norm(x, hp.rms_eps) * w["output_norm.weight"]
    out_w = w.get("output.weight", w["token_embd.weight"])
    return h @ out_w.T
