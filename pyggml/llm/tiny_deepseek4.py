"""Tiny random-weight DeepSeek V4 GGUF writer (llama.cpp loads it): the fixture of the dsv4
tests and benchmarks, optionally with MTP (NextN) blocks."""
from __future__ import annotations

import os

import numpy as np

from .tiny import _add_vocab, _near_bigram


def write_tiny_deepseek4(path, *, n_vocab: int = 256, n_embd: int = 64, n_head: int = 4,
                         head_dim: int = 128, n_rot: int = 32, q_lora_rank: int = 32,
                         o_groups: int = 2, o_lora_rank: int = 16, indexer_n_head: int = 16,
                         indexer_head_dim: int = 64, indexer_top_k: int = 8, n_swa: int = 16,
                         n_expert: int = 4, n_expert_used: int = 2, n_ff_exp: int = 32,
                         n_expert_shared: int = 1, expert_weights_scale: float = 1.5,
                         swiglu_clamp: float = 2.0, hc: int = 4, sinkhorn_iters: int = 3,
                         hc_eps: float = 1e-6, hash_layer_count: int = 1,
                         compress_ratios=(0, 4, 128, 4), compress_rope_base: float = 160000.0,
                         rope_freq_base: float = 10000.0, n_ctx_train: int = 1024,
                         yarn_factor: float | None = None, rms_eps: float = 1e-6,
                         n_nextn: int = 0, bigram: float = 0.0, seed: int = 0) -> str:
    """Write a random-weight DeepSeek V4 model (llama.cpp's `deepseek4` keys and tensors;
    F32 weights) to `path`; returns the path. `n_nextn` (0 or 1) appends a NextN (MTP) block:
    a raw-window dsv4 layer (ratio 0, routed) with ``nextn.eh_proj [2D, D]`` and
    ``nextn.enorm/hnorm [D]``; `bigram` > 0 makes the model close to a bigram model. The defaults exercise every
    path: raw (0), CSA (4) and HCA (128) layers, a hash-routed first layer, 16 indexer heads
    (so indexer scores rarely tie) and a SWIGLU clamp of 2 (so a few percent of the values
    are clamped). `yarn_factor` adds YaRN scaling (compressed layers only use it)."""
    import gguf

    path = os.fspath(path)
    ratios = [int(r) for r in compress_ratios]
    if any(r not in (0, 4, 128) for r in ratios):
        raise ValueError(f"write_tiny_deepseek4: compress ratios must be 0, 4 or 128, got {ratios}")
    if hc != 4 or n_head % o_groups or indexer_head_dim % 64 or n_rot > min(head_dim, indexer_head_dim):
        raise ValueError("write_tiny_deepseek4: needs hc == 4, n_head % o_groups == 0, the indexer "
                         "head a multiple of 64 and n_rot <= both head sizes")
    if n_nextn not in (0, 1) or hash_layer_count > len(ratios):
        raise ValueError("write_tiny_deepseek4: n_nextn must be 0 or 1 and the hash layers "
                         "within the trunk")
    ratios = ratios + [0] * n_nextn
    L, D, V, H, d, E, F = len(ratios), n_embd, n_vocab, n_head, head_dim, n_expert, n_ff_exp
    di, Hi, mix = indexer_head_dim, indexer_n_head, (2 + hc) * hc
    rng = np.random.default_rng(seed)
    a = "deepseek4"
    w = gguf.GGUFWriter(path, a)
    w.add_name("pyggml-tiny-dsv4")
    if bigram:
        _near_bigram(w, bigram, seed)
    write_dsv4_backbone_keys(
        w, a, n_vocab=V, n_ctx_train=n_ctx_train, n_embd=D, n_layer=L, n_ff=F, n_head=H,
        head_dim=d, n_rot=n_rot, q_lora_rank=q_lora_rank, n_swa=n_swa,
        n_expert_shared=n_expert_shared, n_expert=E, n_expert_used=n_expert_used,
        o_groups=o_groups, o_lora_rank=o_lora_rank, hc=hc, sinkhorn_iters=sinkhorn_iters,
        rope_freq_base=rope_freq_base, rms_eps=rms_eps, expert_weights_scale=expert_weights_scale,
        swiglu_clamp=swiglu_clamp, hc_eps=hc_eps, compress_ratios=ratios,
        extra_uint32=(("attention.indexer.head_count", Hi), ("attention.indexer.key_length", di),
                      ("attention.indexer.top_k", indexer_top_k),
                      ("hash_layer_count", hash_layer_count), ("nextn_predict_layers", n_nextn)),
        extra_float32=(("attention.compress_rope_freq_base", compress_rope_base),))
    if yarn_factor is not None:
        w.add_string(f"{a}.rope.scaling.type", "yarn")
        w.add_float32(f"{a}.rope.scaling.factor", float(yarn_factor))
        w.add_uint32(f"{a}.rope.scaling.original_context_length", n_ctx_train)
    w.add_file_type(0)
    _add_vocab(w, V)

    def t(name, *shape, std=None, kind="normal"):
        # numpy shape (..., n_out, n_in) == ggml [n_in, n_out, ...]
        if kind == "norm":
            arr = rng.uniform(0.8, 1.2, size=shape)
        elif kind == "uniform":
            arr = rng.uniform(0.5, 1.5, size=shape)
        else:
            arr = rng.standard_normal(shape) * (std if std is not None else 1.0 / np.sqrt(shape[-1]))
        w.add_tensor(name, arr.astype(np.float32))

    t("token_embd.weight", V, D, std=1.0)
    t("output_norm.weight", D, kind="norm")
    t("output.weight", V, D, std=2.0 / np.sqrt(D))
    t("output_hc_fn.weight", hc, hc * D)
    t("output_hc_base.weight", hc, std=0.5)
    t("output_hc_scale.weight", 1, kind="uniform")
    for il, r in enumerate(ratios):
        p = f"blk.{il}."
        t(p + "attn_norm.weight", D, kind="norm")
        t(p + "attn_sinks.weight", H, std=1.0)
        t(p + "attn_q_a.weight", q_lora_rank, D)
        t(p + "attn_q_a_norm.weight", q_lora_rank, kind="norm")
        t(p + "attn_q_b.weight", H * d, q_lora_rank)
        t(p + "attn_kv.weight", d, D)
        t(p + "attn_kv_a_norm.weight", d, kind="norm")
        t(p + "attn_output_a.weight", o_lora_rank * o_groups, H * d // o_groups)
        t(p + "attn_output_b.weight", D, o_groups * o_lora_rank)
        for s in ("attn", "ffn"):
            t(p + f"hc_{s}_fn.weight", mix, hc * D)
            t(p + f"hc_{s}_base.weight", mix, std=0.5)
            t(p + f"hc_{s}_scale.weight", 3, kind="uniform")
        if r:
            coff = 2 if r == 4 else 1
            t(p + "attn_compressor_kv.weight", coff * d, D)
            t(p + "attn_compressor_gate.weight", coff * d, D)
            t(p + "attn_compressor_ape.weight", r, coff * d, std=0.5)
            t(p + "attn_compressor_norm.weight", d, kind="norm")
        if r == 4:
            t(p + "indexer.proj.weight", Hi, D)
            t(p + "indexer.attn_q_b.weight", Hi * di, q_lora_rank)
            t(p + "indexer_compressor_kv.weight", 2 * di, D)
            t(p + "indexer_compressor_gate.weight", 2 * di, D)
            t(p + "indexer_compressor_ape.weight", r, 2 * di, std=0.5)
            t(p + "indexer_compressor_norm.weight", di, kind="norm")
        t(p + "ffn_gate_inp.weight", E, D)
        if il < hash_layer_count:
            ids = np.stack([rng.permutation(E)[:n_expert_used] for _ in range(V)]).astype(np.int32)
            w.add_tensor(p + "ffn_gate_tid2eid.weight", ids)
        else:
            t(p + "exp_probs_b.bias", E, std=0.1)
        t(p + "ffn_norm.weight", D, kind="norm")
        t(p + "ffn_gate_exps.weight", E, F, D)
        t(p + "ffn_up_exps.weight", E, F, D)
        t(p + "ffn_down_exps.weight", E, D, F)
        t(p + "ffn_gate_shexp.weight", F * n_expert_shared, D)
        t(p + "ffn_up_shexp.weight", F * n_expert_shared, D)
        t(p + "ffn_down_shexp.weight", D, F * n_expert_shared)
        if il >= L - n_nextn:
            t(p + "nextn.eh_proj.weight", D, 2 * D)
            t(p + "nextn.enorm.weight", D, kind="norm")
            t(p + "nextn.hnorm.weight", D, kind="norm")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_dsv4_backbone_keys(w, a, *, n_vocab, n_ctx_train, n_embd, n_layer, n_ff, n_head, head_dim,
                             n_rot, q_lora_rank, n_swa, n_expert_shared, n_expert, n_expert_used,
                             o_groups, o_lora_rank, hc, sinkhorn_iters, rope_freq_base, rms_eps,
                             expert_weights_scale, swiglu_clamp, hc_eps, compress_ratios,
                             extra_uint32=(), extra_float32=()):
    """The hyperparameters every DeepSeek V4 stack carries (the target and the DSpark draft
    on its backbone), under architecture `a`; `extra_*` add the keys only one of them has."""
    import gguf
    for key, val in (("vocab_size", n_vocab), ("context_length", n_ctx_train),
                     ("embedding_length", n_embd), ("block_count", n_layer),
                     ("feed_forward_length", n_ff), ("attention.head_count", n_head),
                     ("attention.head_count_kv", 1), ("attention.key_length", head_dim),
                     ("attention.value_length", head_dim), ("rope.dimension_count", n_rot),
                     ("attention.q_lora_rank", q_lora_rank), ("attention.sliding_window", n_swa),
                     ("expert_feed_forward_length", n_ff), ("expert_shared_count", n_expert_shared),
                     ("expert_count", n_expert), ("expert_used_count", n_expert_used),
                     ("expert_gating_func", 4), ("attention.output_group_count", o_groups),
                     ("attention.output_lora_rank", o_lora_rank), ("hyper_connection.count", hc),
                     ("hyper_connection.sinkhorn_iterations", sinkhorn_iters), *extra_uint32):
        w.add_uint32(f"{a}.{key}", int(val))
    for key, val in (("rope.freq_base", rope_freq_base), ("attention.layer_norm_rms_epsilon", rms_eps),
                     ("expert_weights_scale", expert_weights_scale), ("swiglu_clamp_exp", swiglu_clamp),
                     ("hyper_connection.epsilon", hc_eps), *extra_float32):
        w.add_float32(f"{a}.{key}", float(val))
    w.add_bool(f"{a}.expert_weights_norm", True)
    w.add_key_value(f"{a}.attention.compress_ratios", list(compress_ratios), gguf.GGUFValueType.ARRAY,
                    sub_type=gguf.GGUFValueType.UINT32)
