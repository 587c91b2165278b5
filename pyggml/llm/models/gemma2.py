"""Gemma 2 (src/models/gemma2.cpp).

The token embeddings are scaled by sqrt(n_embd); each layer is

    x = x + post_attention_norm(attn(attn_norm(x)))
    x = x + post_ffw_norm(ffn(ffn_norm(x)))          ffn: GELU(tanh) GEGLU

with every norm an RMS norm. Q is pre-scaled by the attention scale (1/sqrt(head_dim), or
1/sqrt(n_embd/n_head) for the 27B shape: the "query_pre_attn_scalar" of the reference
implementation), so the attention itself runs with scale 1 and the logit soft cap
`cap * tanh(kq / cap)` is the same with and without flash attention. The output logits get a
final soft cap. Layers alternate between a sliding window (even layers by default) and full
attention; the window layers have their own cache (iSWA) and their own RoPE base and scale.

`GemmaGraph` is the layer shared with Gemma 3 (models/gemma3.py), which adds per-head Q/K
RMS norms and makes the window and the final soft cap optional.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

import pyggml as gg

from ..gguf_check import GGUFError
from ..gguf_keys import KeyReader
from ..graph import FfnGate, FfnOp
from ..model import ROPE_TYPE_NEOX
from . import register
from .decoder import (AttentionHParams, DecoderGraph, attention_hparams, iswa_kv_cache,
                      unified_kv_cache)

TENSORS = {
    "attn_norm": "attn_norm.weight",
    "wq": "attn_q.weight", "wk": "attn_k.weight", "wv": "attn_v.weight",
    "wqkv": "attn_qkv.weight",
    "wo": "attn_output.weight",
    "attn_q_norm": "attn_q_norm.weight", "attn_k_norm": "attn_k_norm.weight",
    "attn_post_norm": "post_attention_norm.weight",
    "ffn_norm": "ffn_norm.weight",
    "ffn_gate": "ffn_gate.weight", "ffn_up": "ffn_up.weight", "ffn_down": "ffn_down.weight",
    "ffn_post_norm": "post_ffw_norm.weight",
}
# block_count of the 27B shapes, whose attention scale uses n_embd / n_head
LAYERS_27B = {"gemma2": 46, "gemma3": 62}


def swa_pattern(r: KeyReader, n_layer: int, n_pattern: int) -> tuple:
    """Which layers use the window: the boolean per-layer `attention.sliding_window_pattern`,
    or that key (or `n_pattern`) as a period whose last layer is the full-attention one."""
    key = "attention.sliding_window_pattern"
    v = r.kv.get(f"{r.arch}.{key}")
    if isinstance(v, list):
        return tuple(bool(x) for x in r.get_arr(key, n_layer, kind=bool))
    n = r.get(key, n_pattern)
    if n < 0:
        raise GGUFError(f"{r.arch}: {key} must be non-negative, got {n}")
    return tuple(n == 0 or il % n < n - 1 for il in range(n_layer))


@dataclass(frozen=True)
class GemmaHParams(AttentionHParams):
    """`<arch>.*` keys of Gemma 2 / Gemma 3 (defaults as llama.cpp's loader); the base
    rope_freq_base / rope_freq_scale are those of the full-attention layers."""
    rope_freq_base_swa: float   # rope.freq_base_swa: window layers
    rope_freq_scale_swa: float  # window layers (gemma2: as the full layers; gemma3: 1)
    n_swa: int                # attention.sliding_window (0: no window layers)
    swa_layers: tuple         # True = window layer
    attn_soft_cap: float      # attn_logit_softcapping (0: none)
    final_soft_cap: float     # final_logit_softcapping (0: none)
    attention_scale: float    # the Q pre-scale
    rope_type: int = ROPE_TYPE_NEOX

    @staticmethod
    def common(kv: dict, arch: str) -> dict:
        c = attention_hparams(kv, arch)
        n_embd, n_head, head_k = c["n_embd"], c["n_head"], c["head_dim_k"]
        scale_dim = n_embd // n_head if c["n_layer"] == LAYERS_27B.get(arch) else head_k
        c["attention_scale"] = float(np.float32(1.0) / np.sqrt(np.float32(scale_dim)))
        return c

    @classmethod
    def from_gguf(cls, kv: dict, arch: str) -> "GemmaHParams":
        """Gemma 2: every file has a window (default 4096) on alternating layers, an attention
        soft cap (default 50) and a final soft cap (default 30)."""
        c = cls.common(kv, arch)
        r = KeyReader(kv, arch)
        return cls(**c, n_swa=r.get("attention.sliding_window", 4096),
                   swa_layers=swa_pattern(r, c["n_layer"], 2),
                   rope_freq_base_swa=r.get("rope.freq_base_swa", c["rope_freq_base"], float),
                   rope_freq_scale_swa=c["rope_freq_scale"],
                   attn_soft_cap=r.get("attn_logit_softcapping", 50.0, float),
                   final_soft_cap=r.get("final_logit_softcapping", 30.0, float))

    def is_swa(self, il: int) -> bool:
        return bool(self.n_swa) and self.swa_layers[il]


class GemmaGraph(DecoderGraph):
    HParams = GemmaHParams
    TENSORS = TENSORS
    FFN_INP_NAME = "sa_out"
    SCALE_EMBEDDINGS_ALWAYS = True   # gemma3 leaves raw embedding batches unscaled
    OUTPUT_ALWAYS_TIED = True        # gemma2 files have no output matrix of their own

    @staticmethod
    def create_memory(model, hp: GemmaHParams, cp):
        """An iSWA pair (window layers apart, with their own RoPE base for K shifts), or one
        unified cache when no layer uses the window."""
        if hp.n_swa and any(hp.swa_layers):
            hp_swa = dataclasses.replace(hp, rope_freq_base=hp.rope_freq_base_swa,
                                         rope_freq_scale=hp.rope_freq_scale_swa)
            return iswa_kv_cache(hp, cp, hp.swa_layers, hp.n_swa, k_shift=(hp, None),
                                 k_shift_swa=(hp_swa, None))
        return unified_kv_cache(hp, cp, k_shift=(hp, None))

    def build_attention(self, inp_attn, pos, cur, L, il):
        hp = self.hparams
        swa = hp.is_swa(il)
        self.freq_base = hp.rope_freq_base_swa if swa else hp.rope_freq_base
        self.freq_scale = hp.rope_freq_scale_swa if swa else hp.rope_freq_scale
        return self.build_self_attn(inp_attn, pos, cur, L, il, q_scale=hp.attention_scale,
                                    kq_scale=1.0)

    def build_feed_forward(self, cur, L, il):
        return self.build_dense_ffn(cur, L, il, type_op=FfnOp.GELU, type_gate=FfnGate.PAR)

    def build(self):
        hp = self.hparams
        self.check_head_dims()
        self.attn_soft_cap = hp.attn_soft_cap
        tok_embd, output = self.token_embd_and_output(tied=self.OUTPUT_ALWAYS_TIED)
        x, pos, inp_attn, out_ids = self.build_decoder_inputs(tok_embd)
        if self.SCALE_EMBEDDINGS_ALWAYS or self.ubatch.token is not None:
            x = self.cb(gg.scale(self.ctx0, x, float(np.sqrt(np.float32(hp.n_embd)))), "inp_scaled")
        x = self.build_layers(x, inp_attn, pos, out_ids)
        return self.build_output(x, output, final_soft_cap=hp.final_soft_cap)


@register("gemma2")
class Gemma2Graph(GemmaGraph):
    pass
