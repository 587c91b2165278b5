"""float64 numpy forwards of Gemma 2 / Gemma 3 and Phi-3, written from the architectures'
definitions, over the weights of a loaded pyggml Model (F32 files from pyggml.llm.tiny).

Each returns the logits [T, V] of one causal sequence at positions 0..T-1."""
from __future__ import annotations

import numpy as np

from llama_ref import rms_norm


def weight(m, name):
    t = m.get(name, required=False)
    return None if t is None else np.asarray(t.numpy(), np.float64)


def rope_neox(x, pos, n_rot, base, freq_scale=1.0, factors=None, attn_factor=1.0):
    """x [T, H, d]: rotate (x[i], x[i + n_rot/2]) by pos*freq_scale*base^(-2i/n_rot)/factors[i],
    both outputs multiplied by attn_factor."""
    half = n_rot // 2
    i = np.arange(half)
    inv = base ** (-2.0 * i / n_rot)
    if factors is not None:
        inv = inv / factors
    theta = pos[:, None].astype(np.float64) * freq_scale * inv
    c, s = (np.cos(theta) * attn_factor)[:, None, :], (np.sin(theta) * attn_factor)[:, None, :]
    out = x.copy()
    a, b = x[..., :half], x[..., half:n_rot]
    out[..., :half], out[..., half:n_rot] = a * c - b * s, a * s + b * c
    return out


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def attention(q, k, v, allowed, soft_cap=0.0):
    """q [T, H, d] (already scaled), k/v [T, Hkv, d]; allowed [T, T] bool."""
    T, H, d = q.shape
    Hkv = k.shape[1]
    out = np.zeros((T, H, v.shape[2]))
    for h in range(H):
        g = h // (H // Hkv)
        s = q[:, h] @ k[:, g].T
        if soft_cap:
            s = soft_cap * np.tanh(s / soft_cap)
        s = np.where(allowed, s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        out[:, h] = p @ v[:, g]
    return out.reshape(T, -1)


def gemma_forward(m, hp, tokens):
    """Gemma 2 / Gemma 3 (QK-norm when the file has attn_q_norm)."""
    tokens = np.asarray(tokens)
    T, H, Hkv, d = len(tokens), hp.n_head, hp.n_head_kv, hp.head_dim_k
    eps, pos = hp.rms_eps, np.arange(T)
    emb = weight(m, "token_embd.weight")
    x = emb[tokens] * np.sqrt(hp.n_embd)
    causal = np.tril(np.ones((T, T), bool))
    window = causal & (pos[:, None] - pos[None, :] < max(hp.n_swa, 1))
    for il in range(hp.n_layer):
        W = lambda n: weight(m, f"blk.{il}.{n}")  # noqa: E731
        swa = bool(hp.n_swa) and hp.swa_layers[il]
        base = hp.rope_freq_base_swa if swa else hp.rope_freq_base
        scale = hp.rope_freq_scale_swa if swa else hp.rope_freq_scale
        h = rms_norm(x, eps) * W("attn_norm.weight")
        q = (h @ W("attn_q.weight").T).reshape(T, H, d)
        k = (h @ W("attn_k.weight").T).reshape(T, Hkv, d)
        v = (h @ W("attn_v.weight").T).reshape(T, Hkv, d)
        if W("attn_q_norm.weight") is not None:
            q = rms_norm(q, eps) * W("attn_q_norm.weight")
            k = rms_norm(k, eps) * W("attn_k_norm.weight")
        q = rope_neox(q, pos, hp.n_rot, base, scale) / np.sqrt(d)
        k = rope_neox(k, pos, hp.n_rot, base, scale)
        a = attention(q, k, v, window if swa else causal, hp.attn_soft_cap) @ W("attn_output.weight").T
        x = x + rms_norm(a, eps) * W("post_attention_norm.weight")
        h = rms_norm(x, eps) * W("ffn_norm.weight")
        f = (gelu_tanh(h @ W("ffn_gate.weight").T) * (h @ W("ffn_up.weight").T)) @ W("ffn_down.weight").T
        x = x + rms_norm(f, eps) * W("post_ffw_norm.weight")
    h = rms_norm(x, eps) * weight(m, "output_norm.weight")
    out = weight(m, "output.weight") if hp.arch == "gemma3" else None
    logits = h @ (emb if out is None else out).T
    if hp.final_soft_cap:
        logits = hp.final_soft_cap * np.tanh(logits / hp.final_soft_cap)
    return logits


def phi3_forward(m, hp, tokens, n_ctx):
    """Phi-3 with the LongRoPE factors a context of n_ctx tokens selects."""
    tokens = np.asarray(tokens)
    T, H, Hkv, d, F = len(tokens), hp.n_head, hp.n_head_kv, hp.head_dim_k, hp.n_ff
    eps, pos = hp.rms_eps, np.arange(T)
    long = -(-n_ctx // 256) * 256 > hp.n_ctx_orig
    factors = weight(m, "rope_factors_long.weight" if long else "rope_factors_short.weight")
    x = weight(m, "token_embd.weight")[tokens]
    causal = np.tril(np.ones((T, T), bool))
    for il in range(hp.n_layer):
        W = lambda n: weight(m, f"blk.{il}.{n}")  # noqa: E731
        h = rms_norm(x, eps) * W("attn_norm.weight")
        if W("attn_qkv.weight") is not None:
            qkv = h @ W("attn_qkv.weight").T
            q, k, v = np.split(qkv, [H * d, H * d + Hkv * d], axis=1)
        else:
            q, k, v = (h @ W(f"attn_{n}.weight").T for n in "qkv")
        q, k, v = q.reshape(T, H, d), k.reshape(T, Hkv, d), v.reshape(T, Hkv, d)
        q = rope_neox(q, pos, hp.n_rot, hp.rope_freq_base, hp.rope_freq_scale, factors,
                      hp.rope_attn_factor) / np.sqrt(d)
        k = rope_neox(k, pos, hp.n_rot, hp.rope_freq_base, hp.rope_freq_scale, factors,
                      hp.rope_attn_factor)
        x = x + attention(q, k, v, causal) @ W("attn_output.weight").T
        h = rms_norm(x, eps) * W("ffn_norm.weight")
        gu = h @ W("ffn_up.weight").T
        x = x + (silu(gu[:, :F]) * gu[:, F:]) @ W("ffn_down.weight").T
    h = rms_norm(x, eps) * weight(m, "output_norm.weight")
    out = weight(m, "output.weight")
    return h @ (weight(m, "token_embd.weight") if out is None else out).T
