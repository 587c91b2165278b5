"""Writers for small random-weight draft models (EAGLE3, DFlash, DFlash2, DSpark) that pair
with a tiny qwen3/llama target from :func:`pyggml.llm.tiny.write_tiny_llama`.

They use llama.cpp's keys and tensor names, so llama.cpp loads them as drafts of that target.
The draft vocabulary is the target's (same token list), with a mask token for DFlash blocks
(`tokenizer.ggml.mask_token_id`, the last id by default). `token_embd` and `output` are
omitted unless asked for: the draft then shares the target's.
"""
from __future__ import annotations

import os

import numpy as np

from .tiny import _tiny_writer
from .tiny_deepseek4 import write_dsv4_backbone_keys

__all__ = ["write_tiny_eagle3", "write_tiny_dflash", "write_tiny_dspark_dsv4"]

DFLASH_KINDS = ("dflash", "dflash2", "dspark")


def _writer(path, arch, n_vocab, mask_id=None):
    w = _tiny_writer(path, arch, f"pyggml-tiny-{arch}", {}, {}, n_vocab)
    if mask_id is not None:
        w.add_uint32("tokenizer.ggml.mask_token_id", int(mask_id))
    return w


def _int_array(w, key, values):
    import gguf
    w.add_key_value(key, [int(v) for v in values], gguf.GGUFValueType.ARRAY,
                    sub_type=gguf.GGUFValueType.INT32)


def _finish(w, path):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return os.fspath(path)


class _Rand:
    def __init__(self, w, seed):
        self.w, self.rng = w, np.random.default_rng(seed)

    def matrix(self, name, n_out, n_in, std=None):
        """numpy (n_out, n_in) == ggml [n_in, n_out]."""
        std = 1.0 / np.sqrt(n_in) if std is None else std
        self.w.add_tensor(name, (self.rng.standard_normal((n_out, n_in)) * std).astype(np.float32))

    def array(self, name, shape, std):
        self.w.add_tensor(name, (self.rng.standard_normal(shape) * std).astype(np.float32))

    def norm(self, name, n):
        self.w.add_tensor(name, self.rng.uniform(0.8, 1.2, size=n).astype(np.float32))


def _common_keys(w, arch, *, n_vocab, n_embd, n_layer, n_ff, n_head, n_head_kv, head_dim,
                 n_ctx_train, rope_freq_base, rms_eps):
    for key, val in (("vocab_size", n_vocab), ("context_length", n_ctx_train),
                     ("embedding_length", n_embd), ("block_count", n_layer),
                     ("feed_forward_length", n_ff), ("attention.head_count", n_head),
                     ("attention.head_count_kv", n_head_kv), ("attention.key_length", head_dim),
                     ("attention.value_length", head_dim), ("rope.dimension_count", head_dim)):
        w.add_uint32(f"{arch}.{key}", int(val))
    w.add_float32(f"{arch}.rope.freq_base", float(rope_freq_base))
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", float(rms_eps))


def write_tiny_eagle3(path, *, n_vocab: int = 256, n_embd: int = 64, target_layers=(0, 1, 3),
                      n_head: int = 4, n_head_kv: int = 2, head_dim: int = 16, n_ff: int = 128,
                      n_ctx_train: int = 512, own_output: bool = True, own_embd: bool = False,
                      n_draft_vocab: int | None = None, rope_sections=None, norm_before_fc: bool = False,
                      norm_before_residual: bool = False, rope_freq_base: float = 10000.0,
                      rms_eps: float = 1e-6, seed: int = 1) -> str:
    """A random EAGLE3 head for a target of width `n_embd` and vocabulary `n_vocab`.
    `n_draft_vocab` < n_vocab adds a `d2t` table (sorted random target ids) and an own
    output over the draft vocabulary."""
    import gguf
    if len(target_layers) != 3:
        raise ValueError("write_tiny_eagle3: EAGLE3 taps exactly 3 target layers")
    D, V, H, Hkv, d, F = n_embd, n_vocab, n_head, n_head_kv, head_dim, n_ff
    a = "eagle3"
    w = _writer(path, a, V)
    _common_keys(w, a, n_vocab=V, n_embd=D, n_layer=1, n_ff=F, n_head=H, n_head_kv=Hkv,
                 head_dim=d, n_ctx_train=n_ctx_train, rope_freq_base=rope_freq_base, rms_eps=rms_eps)
    _int_array(w, f"{a}.target_layers", target_layers)
    w.add_uint32(f"{a}.target_hidden_size", D)
    if norm_before_fc:
        w.add_bool(f"{a}.norm_before_fc", True)
    if norm_before_residual:
        w.add_bool(f"{a}.norm_before_residual", True)
    r = _Rand(w, seed)
    n_enc = 3 * D
    r.matrix("fc.weight", D, n_enc)
    if norm_before_fc:
        r.norm("enc.output_norm.weight", n_enc)
    r.norm("output_norm.weight", D)
    Vd = V if n_draft_vocab is None else int(n_draft_vocab)
    if own_output or n_draft_vocab is not None:
        r.matrix("output.weight", Vd, D, 2.0 / np.sqrt(D))
    if own_embd:
        r.matrix("token_embd.weight", V, D, 2.0 / np.sqrt(D))
    if n_draft_vocab is not None:
        ids = np.sort(r.rng.choice(V, size=Vd, replace=False)).astype(np.int64)
        w.add_tensor("d2t", ids, raw_dtype=gguf.GGMLQuantizationType.I64)
    p = "blk.0."
    r.norm(p + "attn_norm.weight", D)
    r.norm(p + "attn_norm_2.weight", D)
    r.matrix(p + "attn_q.weight", H * d, 2 * D)
    r.matrix(p + "attn_k.weight", Hkv * d, 2 * D)
    r.matrix(p + "attn_v.weight", Hkv * d, 2 * D)
    r.matrix(p + "attn_output.weight", D, H * d)
    r.norm(p + "ffn_norm.weight", D)
    r.matrix(p + "ffn_gate.weight", F, D)
    r.matrix(p + "ffn_up.weight", F, D)
    r.matrix(p + "ffn_down.weight", D, F)
    return _finish(w, path)


def write_tiny_dflash(path, *, kind: str = "dflash", n_vocab: int = 256, n_embd: int = 64,
                      target_layers=(1, 3), n_layer: int = 1, n_head: int = 4, n_head_kv: int = 2,
                      head_dim: int = 16, n_ff: int = 128, n_ctx_train: int = 512,
                      block_size: int = 4, mask_id: int | None = None,
                      sample_from_anchor: bool = True, markov_rank: int = 8,
                      confidence_head: bool = True, conv_kernel: int = 3, conv_group: int = 16,
                      selector_rank: int = 8, selector_top_k: int = 4, own_output: bool = False,
                      n_draft_vocab: int | None = None, rope_sections=None,
                      swa: tuple | None = None, extras: bool = False,
                      rope_freq_base: float = 10000.0, rms_eps: float = 1e-6, seed: int = 2) -> str:
    """A random DFlash-family draft: `kind` "dflash" (plain), "dspark" (+ Markov head
    `markov_w1 [R, V]`, `markov_w2 [R, V]`, optional confidence head) or "dflash2" (+ the
    per-layer block convolutions and the candidate selector). `swa=(n_swa, pattern)` gives
    per-layer sliding windows (pattern: one bool per layer). `extras` adds every optional
    piece of the architecture: embedding, attention and value scales, GELU, `fc.scale`, per
    layer attention sinks, post-attention / post-FFN norms and an output scale, a first layer
    without attn_v (V shares K), and for dflash2 a logit scale and final soft cap.
    `n_draft_vocab` < n_vocab gives a reduced draft vocabulary: an own output over it and a
    `d2t` table (sorted random target ids)."""
    import gguf
    if kind not in DFLASH_KINDS:
        raise ValueError(f"write_tiny_dflash: kind must be one of {DFLASH_KINDS}, got {kind!r}")
    D, V, H, Hkv, d, F, L = n_embd, n_vocab, n_head, n_head_kv, head_dim, n_ff, n_layer
    mask_id = V - 1 if mask_id is None else mask_id
    a = "dflash"
    w = _writer(path, a, V, mask_id)
    _common_keys(w, a, n_vocab=V, n_embd=D, n_layer=L, n_ff=F, n_head=H, n_head_kv=Hkv,
                 head_dim=d, n_ctx_train=n_ctx_train, rope_freq_base=rope_freq_base, rms_eps=rms_eps)
    _int_array(w, f"{a}.target_layers", target_layers)
    w.add_uint32(f"{a}.block_size", block_size)
    if kind == "dspark":
        w.add_bool(f"{a}.sample_from_anchor", bool(sample_from_anchor))
        w.add_bool(f"{a}.has_confidence_head", bool(confidence_head))
    if kind == "dflash2":
        if D % conv_group or D < selector_top_k * (selector_top_k + 1):
            raise ValueError("write_tiny_dflash: dflash2 needs n_embd % conv_group == 0 and "
                             "n_embd >= top_k * (top_k + 1)")
        for key, val in (("conv_kernel_size", conv_kernel), ("conv_group_size", conv_group),
                         ("selector_rank", selector_rank), ("selector_top_k", selector_top_k)):
            w.add_uint32(f"{a}.{key}", val)
    if extras:
        for key, val in (("embedding_scale", 1.5), ("attention.scale", 0.2),
                         ("attention.value_scale", 0.9)):
            w.add_float32(f"{a}.{key}", val)
        w.add_string(f"{a}.hidden_activation", "gelu")
        if kind == "dflash2":
            w.add_float32(f"{a}.logit_scale", 0.8)
            w.add_float32(f"{a}.final_logit_softcapping", 5.0)
    if rope_sections is not None:   # the degenerate M-RoPE of drafts for Qwen3.5 targets
        _int_array(w, f"{a}.rope.dimension_sections", rope_sections)
    if swa is not None:
        n_swa, pattern = swa
        if len(pattern) != L:
            raise ValueError("write_tiny_dflash: the SWA pattern needs one flag per layer")
        w.add_uint32(f"{a}.attention.sliding_window", int(n_swa))
        w.add_array(f"{a}.attention.sliding_window_pattern", [bool(x) for x in pattern])
    r = _Rand(w, seed)
    r.matrix("fc.weight", D, len(target_layers) * D)
    if extras:
        w.add_tensor("fc.scale", np.array([0.7], np.float32))
    r.norm("enc.output_norm.weight", D)
    r.norm("output_norm.weight", D)
    Vd = V if n_draft_vocab is None else int(n_draft_vocab)
    if own_output or n_draft_vocab is not None:
        r.matrix("output.weight", Vd, D, 2.0 / np.sqrt(D))
    if n_draft_vocab is not None:
        ids = np.sort(r.rng.choice(V, size=Vd, replace=False)).astype(np.int64)
        w.add_tensor("d2t", ids, raw_dtype=gguf.GGMLQuantizationType.I64)
    for il in range(L):
        p = f"blk.{il}."
        r.norm(p + "attn_norm.weight", D)
        r.matrix(p + "attn_q.weight", H * d, D)
        r.matrix(p + "attn_k.weight", Hkv * d, D)
        if not (extras and il == 0):
            r.matrix(p + "attn_v.weight", Hkv * d, D)
        r.matrix(p + "attn_output.weight", D, H * d)
        if extras:
            r.array(p + "attn_sinks.weight", (H,), 1.0)
            r.norm(p + "post_attention_norm.weight", D)
            r.norm(p + "post_ffw_norm.weight", D)
            w.add_tensor(p + "layer_output_scale.weight", np.array([0.8 + 0.1 * il], np.float32))
        r.norm(p + "attn_q_norm.weight", d)
        r.norm(p + "attn_k_norm.weight", d)
        r.norm(p + "ffn_norm.weight", D)
        r.matrix(p + "ffn_gate.weight", F, D)
        r.matrix(p + "ffn_up.weight", F, D)
        r.matrix(p + "ffn_down.weight", D, F)
        if kind == "dflash2":
            G = D // conv_group
            for s in ("attn", "ffn"):
                r.array(p + f"{s}_conv_base", (2, conv_kernel, D), 0.3)
                r.matrix(p + f"{s}_conv_proj.weight", 2 * conv_kernel * G, D, 0.3 / np.sqrt(D))
    if kind == "dspark":
        R = markov_rank
        r.matrix("markov_w1.weight", V, R, 1.0)
        r.matrix("markov_w2.weight", Vd, R, 1.0 / np.sqrt(R))
        if confidence_head:
            r.matrix("conf_proj.weight", 1, D + R)
            r.array("conf_proj.bias", (1,), 0.5)
    if kind == "dflash2":
        rk = selector_rank
        r.matrix("selector_predecessor.weight", V, rk, 1.0)
        r.matrix("selector_successor.weight", V, rk, 1.0)
        r.matrix("selector_hidden.weight", rk, D)
    return _finish(w, path)


def write_tiny_dspark_dsv4(path, *, n_vocab: int = 256, n_embd: int = 64, target_layers=(1, 3),
                           n_layer: int = 2, n_head: int = 4, head_dim: int = 32, n_rot: int = 16,
                           q_lora_rank: int = 32, o_groups: int = 2, o_lora_rank: int = 16,
                           n_swa: int = 24, n_expert: int = 4, n_expert_used: int = 2,
                           n_ff_exp: int = 32, n_expert_shared: int = 1,
                           expert_weights_scale: float = 1.5, swiglu_clamp: float = 2.0,
                           sinkhorn_iters: int = 3, hc_eps: float = 1e-6, block_size: int = 4,
                           mask_id: int | None = None, sample_from_anchor: bool = True,
                           markov_rank: int = 8, confidence_head: bool = True,
                           n_ctx_train: int = 512, rope_freq_base: float = 10000.0,
                           rms_eps: float = 1e-6, seed: int = 3) -> str:
    """A random DSpark draft on a DeepSeek V4 backbone (`dflash` + `hyper_connection.count`):
    `n_layer` uncompressed dsv4 stages with 4 hyper-connection streams, a window of `n_swa`,
    routed MoE with a shared expert, the Markov head (+ confidence head); token embedding and
    output are the target's."""
    import gguf
    D, V, H, d, E, F, L, hc = n_embd, n_vocab, n_head, head_dim, n_expert, n_ff_exp, n_layer, 4
    mix = (2 + hc) * hc
    mask_id = V - 1 if mask_id is None else mask_id
    a = "dflash"
    w = _writer(path, a, V, mask_id)
    write_dsv4_backbone_keys(
        w, a, n_vocab=V, n_ctx_train=n_ctx_train, n_embd=D, n_layer=L, n_ff=F, n_head=H,
        head_dim=d, n_rot=n_rot, q_lora_rank=q_lora_rank, n_swa=n_swa,
        n_expert_shared=n_expert_shared, n_expert=E, n_expert_used=n_expert_used,
        o_groups=o_groups, o_lora_rank=o_lora_rank, hc=hc, sinkhorn_iters=sinkhorn_iters,
        rope_freq_base=rope_freq_base, rms_eps=rms_eps, expert_weights_scale=expert_weights_scale,
        swiglu_clamp=swiglu_clamp, hc_eps=hc_eps, compress_ratios=[0] * L,
        extra_uint32=(("block_size", block_size),))
    _int_array(w, f"{a}.target_layers", target_layers)
    w.add_bool(f"{a}.sample_from_anchor", bool(sample_from_anchor))
    w.add_bool(f"{a}.has_confidence_head", bool(confidence_head))
    r = _Rand(w, seed)
    r.matrix("fc.weight", D, len(target_layers) * D)
    r.norm("enc.output_norm.weight", D)
    r.norm("output_norm.weight", D)
    r.matrix("output_hc_fn.weight", hc, hc * D)
    r.array("output_hc_base.weight", (hc,), 0.5)
    w.add_tensor("output_hc_scale.weight", r.rng.uniform(0.5, 1.5, size=1).astype(np.float32))
    for il in range(L):
        p = f"blk.{il}."
        r.norm(p + "attn_norm.weight", D)
        r.array(p + "attn_sinks.weight", (H,), 1.0)
        r.matrix(p + "attn_q_a.weight", q_lora_rank, D)
        r.norm(p + "attn_q_a_norm.weight", q_lora_rank)
        r.matrix(p + "attn_q_b.weight", H * d, q_lora_rank)
        r.matrix(p + "attn_kv.weight", d, D)
        r.norm(p + "attn_kv_a_norm.weight", d)
        r.matrix(p + "attn_output_a.weight", o_lora_rank * o_groups, H * d // o_groups)
        r.matrix(p + "attn_output_b.weight", D, o_groups * o_lora_rank)
        for s in ("attn", "ffn"):
            r.matrix(p + f"hc_{s}_fn.weight", mix, hc * D)
            r.array(p + f"hc_{s}_base.weight", (mix,), 0.5)
            w.add_tensor(p + f"hc_{s}_scale.weight", r.rng.uniform(0.5, 1.5, size=3).astype(np.float32))
        r.matrix(p + "ffn_gate_inp.weight", E, D)
        r.array(p + "exp_probs_b.bias", (E,), 0.1)
        r.norm(p + "ffn_norm.weight", D)
        for name, shape in (("ffn_gate_exps", (E, F, D)), ("ffn_up_exps", (E, F, D)),
                            ("ffn_down_exps", (E, D, F))):
            r.array(p + name + ".weight", shape, 1.0 / np.sqrt(shape[-1]))
        r.matrix(p + "ffn_gate_shexp.weight", F * n_expert_shared, D)
        r.matrix(p + "ffn_up_shexp.weight", F * n_expert_shared, D)
        r.matrix(p + "ffn_down_shexp.weight", D, F * n_expert_shared)
    R = markov_rank
    r.matrix("markov_w1.weight", V, R, 1.0)
    r.matrix("markov_w2.weight", V, R, 1.0 / np.sqrt(R))
    if confidence_head:
        r.matrix("conf_proj.weight", 1, D + R)
        r.array("conf_proj.bias", (1,), 0.5)
    return _finish(w, path)
