"""LLaMA (src/models/llama.cpp), and the Qwen2 / Qwen3 variants that share its layer:
Q/K/V biases (qwen2), per-head Q/K RMS norms before RoPE (qwen3), NEOX RoPE (both), tied
output embeddings (any).

Sliding-window attention: when `attention.sliding_window` and the boolean per-layer
`attention.sliding_window_pattern` are present, the window layers get their own cache (iSWA
memory). llama.cpp's llama loader reads neither key, so llama.cpp-compatible files have none.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..gguf_keys import KeyReader
from ..graph import FfnGate, FfnOp, Gating
from ..kv_cache import SWA_NONE, SWA_STANDARD
from ..model import rope_type_for_arch
from . import register
from .decoder import (AttentionHParams, DecoderGraph, attention_hparams, get_tensor,  # noqa: F401
                      iswa_kv_cache, layer_weights, unified_kv_cache)

# llama_layer field -> GGUF tensor name under blk.{il}.
TENSORS = {
    "attn_norm": "attn_norm.weight",
    "wq": "attn_q.weight", "wk": "attn_k.weight", "wv": "attn_v.weight",
    "wqkv": "attn_qkv.weight",
    "bq": "attn_q.bias", "bk": "attn_k.bias", "bv": "attn_v.bias", "bqkv": "attn_qkv.bias",
    "wo": "attn_output.weight", "bo": "attn_output.bias",
    "attn_q_norm": "attn_q_norm.weight", "attn_k_norm": "attn_k_norm.weight",
    "ffn_norm": "ffn_norm.weight",
    "ffn_gate": "ffn_gate.weight", "ffn_up": "ffn_up.weight", "ffn_down": "ffn_down.weight",
    "ffn_gate_b": "ffn_gate.bias", "ffn_up_b": "ffn_up.bias", "ffn_down_b": "ffn_down.bias",
    "ffn_gate_inp": "ffn_gate_inp.weight", "ffn_up_exps": "ffn_up_exps.weight",
    "ffn_gate_exps": "ffn_gate_exps.weight", "ffn_down_exps": "ffn_down_exps.weight",
}
ROPE_FREQS = "rope_freqs.weight"


@dataclass(frozen=True)
class LlamaHParams(AttentionHParams):
    """`<arch>.*` keys of the llama family (defaults as llama.cpp's loader)."""
    rope_type: int            # NORM (llama) or NEOX (qwen2, qwen3)
    n_expert: int = 0         # expert_count
    n_expert_used: int = 0    # expert_used_count
    n_swa: int = 0            # attention.sliding_window (pyggml extension, see the module doc)
    swa_layers: tuple = ()    # attention.sliding_window_pattern: True = window layer

    @classmethod
    def from_gguf(cls, kv: dict, arch: str) -> "LlamaHParams":
        c = attention_hparams(kv, arch, n_ff_default=0, rms_eps_default=1e-5)
        r = KeyReader(kv, arch)
        n_swa = r.get("attention.sliding_window", 0)
        swa_layers = ()
        if n_swa and r.has("attention.sliding_window_pattern"):
            swa_layers = r.get_arr("attention.sliding_window_pattern", c["n_layer"], kind=bool)
        return cls(**c, rope_type=rope_type_for_arch(arch),
                   n_expert=r.get("expert_count", 0), n_expert_used=r.get("expert_used_count", 0),
                   n_swa=n_swa, swa_layers=swa_layers)


@register("llama", "qwen2", "qwen3")
class LlamaGraph(DecoderGraph):
    HParams = LlamaHParams
    TENSORS = TENSORS

    @staticmethod
    def create_memory(model, hp: LlamaHParams, cp):
        """A unified KV cache, or an iSWA pair when some layers use a sliding window."""
        k_shift = (hp, get_tensor(model, ROPE_FREQS))
        if hp.n_swa and any(hp.swa_layers):
            return iswa_kv_cache(hp, cp, hp.swa_layers, hp.n_swa, k_shift=k_shift)
        return unified_kv_cache(hp, cp, n_swa=hp.n_swa, swa_type=SWA_STANDARD if hp.n_swa else SWA_NONE,
                                k_shift=k_shift)

    def build_attention(self, inp_attn, pos, cur, L, il):
        return self.build_self_attn(inp_attn, pos, cur, L, il, rope_factors=self.rope_factors,
                                    kq_scale=1.0 / math.sqrt(self.n_embd_head_k))

    def build_feed_forward(self, cur, L, il):
        if L.ffn_gate_inp is None:
            return self.build_dense_ffn(cur, L, il, type_op=FfnOp.SILU, type_gate=FfnGate.PAR)
        return self.build_moe_part(cur, L, il, gating=Gating.SOFTMAX, norm_w=True)

    def build(self):
        self.check_head_dims()
        tok_embd, output = self.token_embd_and_output()
        self.rope_factors = get_tensor(self.model, ROPE_FREQS)
        x, pos, inp_attn, out_ids = self.build_decoder_inputs(tok_embd)
        x = self.build_layers(x, inp_attn, pos, out_ids)
        return self.build_output(x, output)
