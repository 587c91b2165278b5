"""Tiny random-weight Step3.5 GGUF writer (llama.cpp loads it): the fixture of the multi-head
MTP (MTP3) tests."""
from __future__ import annotations

import numpy as np

from .tiny import _finish, _near_bigram, _tiny_writer


def write_tiny_step35(path, *, n_vocab: int = 256, n_embd: int = 64, n_layer: int = 3,
                      n_nextn: int = 3, swa_pattern=None, n_swa: int = 8, n_head: int = 4,
                      n_head_kv: int = 2, head_dim: int = 32, n_rot: int = 16, n_ff: int = 128,
                      moe_layers=(1,), n_expert: int = 4, n_expert_used: int = 2,
                      n_ff_exp: int = 32, gate_layers=None, n_ctx_train: int = 1024,
                      rope_freq_base: float = 10000.0, rope_freq_base_swa: float = 5000.0,
                      rms_eps: float = 1e-6, bigram: float = 0.0, swiglu_clamp_exp=None,
                      swiglu_clamp_shexp=None, seed: int = 0) -> str:
    """Write a random-weight Step3.5 model (llama.cpp's `step35` keys and tensors, F32) to
    `path`; returns the path. `n_layer` trunk layers plus `n_nextn` NextN blocks (full
    layers with ``nextn.eh_proj [2D, D]``, ``nextn.enorm/hnorm [D]``; head 1 also has
    ``nextn.shared_head_norm``, head 2 ``nextn.shared_head_head`` and ``nextn.embed_tokens``).
    `swa_pattern` (one bool per block, default alternating window/full) marks the window
    layers (window `n_swa`); full-attention layers rotate n_rot/2 dims, window layers n_rot.
    `moe_layers` use sigmoid-routed experts with a bias and a shared expert; `gate_layers`
    (default every other block) carry the per-head ``attn_gate [D, H]``. `bigram` > 0 makes
    the model close to a bigram model with that residual-branch scale (MTP drafts then get
    accepted naturally). `swiglu_clamp_exp` / `swiglu_clamp_shexp` (one limit per block, 0
    for none) write the SwiGLU limits of the routed experts / the dense and shared FFNs."""
    import gguf
    n_all = n_layer + n_nextn
    if swa_pattern is None:
        swa_pattern = [il % 2 == 0 for il in range(n_all)]
    if gate_layers is None:
        gate_layers = [il for il in range(n_all) if il % 2 == 1]
    if len(swa_pattern) != n_all or n_head % n_head_kv or n_rot > head_dim or n_rot % 4:
        raise ValueError("write_tiny_step35: one swa flag per block, n_head % n_head_kv == 0, "
                         "n_rot a multiple of 4 and at most head_dim")
    D, V, F = n_embd, n_vocab, n_ff
    rng = np.random.default_rng(seed)
    w = _tiny_writer(path, "step35", "pyggml-tiny-step35",
                     {"vocab_size": V, "context_length": n_ctx_train, "embedding_length": D,
                      "block_count": n_all, "nextn_predict_layers": n_nextn,
                      "feed_forward_length": F, "attention.head_count": n_head,
                      "attention.head_count_kv": n_head_kv, "attention.key_length": head_dim,
                      "attention.value_length": head_dim, "rope.dimension_count": n_rot,
                      "attention.sliding_window": n_swa, "expert_feed_forward_length": n_ff_exp,
                      "expert_shared_feed_forward_length": n_ff_exp,
                      "expert_count": n_expert if moe_layers else 0,
                      "expert_used_count": n_expert_used if moe_layers else 0,
                      "expert_gating_func": 2},
                     {"rope.freq_base": rope_freq_base, "rope.freq_base_swa": rope_freq_base_swa,
                      "attention.layer_norm_rms_epsilon": rms_eps}, V)
    w.add_key_value("step35.attention.sliding_window_pattern", [bool(s) for s in swa_pattern],
                    gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.BOOL)
    for key, limits in (("swiglu_clamp_exp", swiglu_clamp_exp), ("swiglu_clamp_shexp", swiglu_clamp_shexp)):
        if limits is not None:
            if len(limits) != n_all:
                raise ValueError(f"write_tiny_step35: {key} needs one limit per block ({n_all})")
            w.add_key_value(f"step35.{key}", [float(x) for x in limits], gguf.GGUFValueType.ARRAY,
                            sub_type=gguf.GGUFValueType.FLOAT32)
    if bigram:
        _near_bigram(w, bigram, seed)

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm_w(name, n):
        w.add_tensor(name, rng.uniform(0.8, 1.2, size=n).astype(np.float32))

    def matrix(name, n_out, n_in, *lead):
        w.add_tensor(name, normal((*lead, n_out, n_in), 1.0 / np.sqrt(n_in)))

    def block(il):
        p = f"blk.{il}."
        norm_w(p + "attn_norm.weight", D)
        matrix(p + "attn_q.weight", n_head * head_dim, D)
        matrix(p + "attn_k.weight", n_head_kv * head_dim, D)
        matrix(p + "attn_v.weight", n_head_kv * head_dim, D)
        matrix(p + "attn_output.weight", D, n_head * head_dim)
        norm_w(p + "attn_q_norm.weight", head_dim)
        norm_w(p + "attn_k_norm.weight", head_dim)
        if il in gate_layers:
            matrix(p + "attn_gate.weight", n_head, D)
        norm_w(p + "ffn_norm.weight", D)
        if il in moe_layers:
            matrix(p + "ffn_gate_inp.weight", n_expert, D)
            w.add_tensor(p + "exp_probs_b.bias", normal((n_expert,), 0.1))
            matrix(p + "ffn_gate_exps.weight", n_ff_exp, D, n_expert)
            matrix(p + "ffn_up_exps.weight", n_ff_exp, D, n_expert)
            matrix(p + "ffn_down_exps.weight", D, n_ff_exp, n_expert)
            matrix(p + "ffn_gate_shexp.weight", n_ff_exp, D)
            matrix(p + "ffn_up_shexp.weight", n_ff_exp, D)
            matrix(p + "ffn_down_shexp.weight", D, n_ff_exp)
        else:
            matrix(p + "ffn_gate.weight", F, D)
            matrix(p + "ffn_up.weight", F, D)
            matrix(p + "ffn_down.weight", D, F)

    w.add_tensor("token_embd.weight", normal((V, D), 2.0 / np.sqrt(D)))
    for il in range(n_layer):
        block(il)
    for j in range(n_nextn):
        il = n_layer + j
        block(il)
        p = f"blk.{il}.nextn."
        matrix(p + "eh_proj.weight", D, 2 * D)
        norm_w(p + "enorm.weight", D)
        norm_w(p + "hnorm.weight", D)
        if j == 1:
            norm_w(p + "shared_head_norm.weight", D)
        if j == 2:
            w.add_tensor(p + "shared_head_head.weight", normal((V, D), 2.0 / np.sqrt(D)))
            w.add_tensor(p + "embed_tokens.weight", normal((V, D), 2.0 / np.sqrt(D)))
    norm_w("output_norm.weight", D)
    w.add_tensor("output.weight", normal((V, D), 2.0 / np.sqrt(D)))
    return _finish(w, path)
