"""Tiny random-weight Mamba-2 and Qwen3.5 (hybrid gated delta net) GGUF writers (llama.cpp
loads them): the fixtures of the recurrent-model tests and benchmarks."""
from __future__ import annotations

import numpy as np

from .tiny import _finish, _near_bigram, _tiny_writer


def write_tiny_mamba2(path, *, n_vocab: int = 256, n_embd: int = 64, n_layer: int = 2,
                      d_inner: int = 128, d_state: int = 16, n_ssm_head: int = 8, n_group: int = 2,
                      d_conv: int = 4, n_ctx_train: int = 1024, rms_eps: float = 1e-5,
                      seed: int = 0) -> str:
    """Write a random-weight Mamba-2 model (llama.cpp's `mamba2` keys and tensors, F32) to
    `path`; returns the path. Per layer: ``ssm_in [D, 2*d_inner + 2*G*N + H]`` (z | xBC |
    dt), ``ssm_conv1d [d_conv, d_inner + 2*G*N]`` (+ bias), ``ssm_dt.bias [H]``, ``ssm_a [1, H]``
    (negative), ``ssm_d [1, H]``, ``ssm_norm [d_inner/G, G]``, ``ssm_out [d_inner, D]``.
    dt biases are drawn so that softplus(dt) starts in [0.01, 0.1], as trained models do."""
    if d_inner % n_ssm_head or n_ssm_head % n_group or d_conv < 2:
        raise ValueError("write_tiny_mamba2: d_inner must be a multiple of n_ssm_head, n_ssm_head "
                         "of n_group, and d_conv >= 2")
    D, V, H, G, N = n_embd, n_vocab, n_ssm_head, n_group, d_state
    conv_dim = d_inner + 2 * G * N
    rng = np.random.default_rng(seed)
    w = _tiny_writer(path, "mamba2", "pyggml-tiny-mamba2",
                     {"vocab_size": V, "context_length": n_ctx_train, "embedding_length": D,
                      "block_count": n_layer, "ssm.conv_kernel": d_conv, "ssm.inner_size": d_inner,
                      "ssm.state_size": N, "ssm.time_step_rank": H, "ssm.group_count": G},
                     {"attention.layer_norm_rms_epsilon": rms_eps}, V)

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def uniform(shape, lo, hi):
        return rng.uniform(lo, hi, size=shape).astype(np.float32)

    w.add_tensor("token_embd.weight", normal((V, D), 2.0 / np.sqrt(D)))
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", uniform(D, 0.8, 1.2))
        w.add_tensor(p + "ssm_in.weight", normal((d_inner + conv_dim + H, D), 1.0 / np.sqrt(D)))
        w.add_tensor(p + "ssm_conv1d.weight", normal((conv_dim, d_conv), 1.0 / np.sqrt(d_conv)))
        w.add_tensor(p + "ssm_conv1d.bias", normal((conv_dim,), 0.1))
        dt0 = uniform(H, 0.01, 0.1)
        w.add_tensor(p + "ssm_dt.bias", np.log(np.expm1(dt0)).astype(np.float32))
        w.add_tensor(p + "ssm_a", -uniform((H, 1), 0.5, 4.0))
        w.add_tensor(p + "ssm_d", uniform((H, 1), 0.5, 1.5))
        w.add_tensor(p + "ssm_norm.weight", uniform((G, d_inner // G), 0.8, 1.2))
        w.add_tensor(p + "ssm_out.weight", normal((D, d_inner), 1.0 / np.sqrt(d_inner)))
    w.add_tensor("output_norm.weight", uniform(D, 0.8, 1.2))
    w.add_tensor("output.weight", normal((V, D), 2.0 / np.sqrt(D)))
    return _finish(w, path)


def write_tiny_qwen35(path, *, n_vocab: int = 256, n_embd: int = 64, n_layer: int = 4,
                      full_attention_interval: int = 4, n_nextn: int = 1, n_head: int = 4,
                      n_head_kv: int = 2, head_dim: int = 32, n_rot: int = 16,
                      rope_sections=(3, 3, 2, 0), n_ff: int = 128, d_state: int = 16,
                      n_k_head: int = 2, n_v_head: int = 4, d_conv: int = 4,
                      n_ctx_train: int = 1024, rope_freq_base: float = 10000.0,
                      rms_eps: float = 1e-6, bigram: float = 0.0, seed: int = 0) -> str:
    """Write a random-weight Qwen3.5 model (llama.cpp's `qwen35` keys and tensors, F32) to
    `path`; returns the path. `n_layer` trunk layers (every `full_attention_interval`-th is
    gated full attention, the others gated delta-net) plus `n_nextn` NextN blocks
    (block_count counts both). Delta-net layers: ``attn_qkv [D, 2*Hk*S + Hv*S]``,
    ``attn_gate [D, Hv*S]``, ``ssm_conv1d [d_conv, 2*Hk*S + Hv*S]``, ``ssm_dt.bias [Hv]``,
    ``ssm_a [Hv]`` (negative), ``ssm_beta/ssm_alpha [D, Hv]``, ``ssm_norm [S]``,
    ``ssm_out [Hv*S, D]``; attention layers: ``attn_q [D, 2*H*d]`` (q | gate per head),
    ``attn_k/attn_v [D, Hkv*d]``, ``attn_output [H*d, D]``, ``attn_q_norm/attn_k_norm [d]``.
    `bigram` > 0 makes the model close to a bigram model with that residual-branch scale
    (MTP drafts then get accepted naturally)."""
    import gguf
    if n_v_head % n_k_head or n_head % n_head_kv or n_rot > head_dim or n_rot % 2:
        raise ValueError("write_tiny_qwen35: n_v_head % n_k_head, n_head % n_head_kv must be 0 and "
                         "n_rot even, at most head_dim")
    D, V, S, F = n_embd, n_vocab, d_state, n_ff
    d_inner = S * n_v_head
    conv_dim = d_inner + 2 * n_k_head * S
    rng = np.random.default_rng(seed)
    w = _tiny_writer(path, "qwen35", "pyggml-tiny-qwen35",
                     {"vocab_size": V, "context_length": n_ctx_train, "embedding_length": D,
                      "block_count": n_layer + n_nextn, "nextn_predict_layers": n_nextn,
                      "feed_forward_length": F, "attention.head_count": n_head,
                      "attention.head_count_kv": n_head_kv, "attention.key_length": head_dim,
                      "attention.value_length": head_dim, "rope.dimension_count": n_rot,
                      "ssm.conv_kernel": d_conv, "ssm.inner_size": d_inner, "ssm.state_size": S,
                      "ssm.time_step_rank": n_v_head, "ssm.group_count": n_k_head,
                      "full_attention_interval": full_attention_interval},
                     {"rope.freq_base": rope_freq_base, "attention.layer_norm_rms_epsilon": rms_eps}, V)
    w.add_key_value("qwen35.rope.dimension_sections", [int(s) for s in rope_sections],
                    gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    if bigram:
        _near_bigram(w, bigram, seed)

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def uniform(shape, lo, hi):
        return rng.uniform(lo, hi, size=shape).astype(np.float32)

    def matrix(name, n_out, n_in):
        w.add_tensor(name, normal((n_out, n_in), 1.0 / np.sqrt(n_in)))

    def attention(p):
        matrix(p + "attn_q.weight", 2 * n_head * head_dim, D)
        matrix(p + "attn_k.weight", n_head_kv * head_dim, D)
        matrix(p + "attn_v.weight", n_head_kv * head_dim, D)
        matrix(p + "attn_output.weight", D, n_head * head_dim)
        w.add_tensor(p + "attn_q_norm.weight", uniform(head_dim, 0.8, 1.2))
        w.add_tensor(p + "attn_k_norm.weight", uniform(head_dim, 0.8, 1.2))

    def common(p):
        w.add_tensor(p + "attn_norm.weight", uniform(D, 0.8, 1.2))
        w.add_tensor(p + "post_attention_norm.weight", uniform(D, 0.8, 1.2))
        matrix(p + "ffn_gate.weight", F, D)
        matrix(p + "ffn_up.weight", F, D)
        matrix(p + "ffn_down.weight", D, F)

    w.add_tensor("token_embd.weight", normal((V, D), 2.0 / np.sqrt(D)))
    for i in range(n_layer):
        p = f"blk.{i}."
        common(p)
        if (i + 1) % full_attention_interval == 0:
            attention(p)
            continue
        matrix(p + "attn_qkv.weight", conv_dim, D)
        matrix(p + "attn_gate.weight", d_inner, D)
        w.add_tensor(p + "ssm_conv1d.weight", normal((conv_dim, d_conv), 1.0 / np.sqrt(d_conv)))
        w.add_tensor(p + "ssm_dt.bias", normal((n_v_head,), 0.5))
        w.add_tensor(p + "ssm_a", -np.exp(uniform(n_v_head, -1.0, 1.0)))
        matrix(p + "ssm_beta.weight", n_v_head, D)
        matrix(p + "ssm_alpha.weight", n_v_head, D)
        w.add_tensor(p + "ssm_norm.weight", uniform(S, 0.8, 1.2))
        matrix(p + "ssm_out.weight", D, d_inner)
    for j in range(n_nextn):
        p = f"blk.{n_layer + j}."
        common(p)
        attention(p)
        matrix(p + "nextn.eh_proj.weight", D, 2 * D)
        w.add_tensor(p + "nextn.enorm.weight", uniform(D, 0.8, 1.2))
        w.add_tensor(p + "nextn.hnorm.weight", uniform(D, 0.8, 1.2))
    w.add_tensor("output_norm.weight", uniform(D, 0.8, 1.2))
    w.add_tensor("output.weight", normal((V, D), 2.0 / np.sqrt(D)))
    return _finish(w, path)
