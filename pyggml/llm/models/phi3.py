"""Phi-3 (src/models/phi3.cpp).

A pre-norm layer like LLaMA's with fused tensors: one `attn_qkv` projection (Q | K | V rows;
separate attn_q/attn_k/attn_v are accepted too) and one `ffn_up` of 2*n_ff rows whose halves
are the SwiGLU gate and the linear branch (no ffn_gate). Q is pre-scaled by 1/sqrt(head_dim),
RoPE is NEOX.

LongRoPE: the global `rope_factors_short` / `rope_factors_long` tensors divide the RoPE
frequencies; the long ones are used when the context (n_ctx padded to 256) is longer than
`rope.scaling.original_context_length` (default context_length), and every rotation is
multiplied by `rope.scaling.attn_factor` (default 1).

Sliding window: llama.cpp reads `attention.sliding_window` for phi3 and then disables it
(every layer attends to the whole context), so this builder does the same: the key is read
into `n_swa_file` and not used.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..gguf_keys import KeyReader
from ..graph import FfnGate, FfnOp
from ..kv_cache import N_PAD, pad_to
from ..model import ROPE_TYPE_NEOX
from . import register
from .decoder import (AttentionHParams, DecoderGraph, attention_hparams, get_tensor,
                      unified_kv_cache)

TENSORS = {
    "attn_norm": "attn_norm.weight",
    "wqkv": "attn_qkv.weight",
    "wq": "attn_q.weight", "wk": "attn_k.weight", "wv": "attn_v.weight",
    "wo": "attn_output.weight", "bo": "attn_output.bias",
    "ffn_norm": "ffn_norm.weight",
    "ffn_up": "ffn_up.weight", "ffn_down": "ffn_down.weight",
}
OUTPUT_BIAS = "output.bias"
ROPE_LONG, ROPE_SHORT = "rope_factors_long.weight", "rope_factors_short.weight"


@dataclass(frozen=True)
class Phi3HParams(AttentionHParams):
    """`phi3.*` keys (defaults as llama.cpp's loader)."""
    rope_attn_factor: float   # rope.scaling.attn_factor (1)
    n_ctx_orig: int           # rope.scaling.original_context_length (default context_length)
    n_swa_file: int = 0       # attention.sliding_window as written (not used, see module doc)
    rope_type: int = ROPE_TYPE_NEOX

    @classmethod
    def from_gguf(cls, kv: dict, arch: str) -> "Phi3HParams":
        c = attention_hparams(kv, arch)
        r = KeyReader(kv, arch)
        return cls(**c, rope_attn_factor=r.get("rope.scaling.attn_factor", 1.0, float),
                   n_ctx_orig=r.get("rope.scaling.original_context_length", c["n_ctx_train"]),
                   n_swa_file=r.get("attention.sliding_window", 0))


def rope_factors(model, hp: Phi3HParams, n_ctx: int):
    """The LongRoPE frequency factors for a context of n_ctx tokens (None without them)."""
    long = pad_to(n_ctx, N_PAD) > hp.n_ctx_orig
    return get_tensor(model, ROPE_LONG if long else ROPE_SHORT)


@register("phi3")
class Phi3Graph(DecoderGraph):
    HParams = Phi3HParams
    TENSORS = TENSORS

    @staticmethod
    def create_memory(model, hp: Phi3HParams, cp):
        return unified_kv_cache(hp, cp, k_shift=(hp, rope_factors(model, hp, cp.n_ctx)))

    def layer(self, il):
        L = super().layer(il)
        n_ff = self.hparams.n_ff
        if L.ffn_up is None or L.ffn_up.ne[1] != 2 * n_ff:
            raise ValueError(f"{self.hparams.arch}: blk.{il}.ffn_up.weight must hold 2*n_ff = "
                             f"{2 * n_ff} rows (gate | up), got {None if L.ffn_up is None else L.ffn_up.ne}")
        return L

    def build_attention(self, inp_attn, pos, cur, L, il):
        return self.build_self_attn(inp_attn, pos, cur, L, il, rope_factors=self.rope_factors,
                                    q_scale=self.q_scale, kq_scale=1.0)

    def build_feed_forward(self, cur, L, il):
        return self.build_dense_ffn(cur, L, il, type_op=FfnOp.SWIGLU, type_gate=FfnGate.SEQ)

    def build(self):
        hp = self.hparams
        d = self.check_head_dims()
        self.attn_factor = hp.rope_attn_factor
        self.n_ctx_orig = hp.n_ctx_orig
        self.rope_factors = rope_factors(self.model, hp, self.params.n_ctx or hp.n_ctx_train)
        self.q_scale = float(np.float32(1) / np.sqrt(np.float32(d)))
        tok_embd, output = self.token_embd_and_output()
        x, pos, inp_attn, out_ids = self.build_decoder_inputs(tok_embd)
        x = self.build_layers(x, inp_attn, pos, out_ids)
        return self.build_output(x, output, output_b=get_tensor(self.model, OUTPUT_BIAS))
