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

import pyggml as gg

from ..gguf_check import GGUFError
from ..gguf_keys import KeyReader
from ..graph import FfnGate, FfnOp, GraphContext, NormType
from ..kv_cache import N_PAD, KVCache, pad_to
from ..model import ROPE_TYPE_NEOX
from . import register
from .llama import get_tensor, layer_weights

TENSORS = {
    "attn_norm": "attn_norm.weight",
    "wqkv": "attn_qkv.weight",
    "wq": "attn_q.weight", "wk": "attn_k.weight", "wv": "attn_v.weight",
    "wo": "attn_output.weight", "bo": "attn_output.bias",
    "ffn_norm": "ffn_norm.weight",
    "ffn_up": "ffn_up.weight", "ffn_down": "ffn_down.weight",
}
GLOBAL_TENSORS = {"tok_embd": "token_embd.weight", "output_norm": "output_norm.weight",
                  "output": "output.weight", "output_b": "output.bias",
                  "rope_long": "rope_factors_long.weight", "rope_short": "rope_factors_short.weight"}


@dataclass(frozen=True)
class Phi3HParams:
    """`phi3.*` keys (defaults as llama.cpp's loader)."""
    arch: str
    n_vocab: int
    n_ctx_train: int          # context_length
    n_embd: int               # embedding_length
    n_layer: int              # block_count
    n_ff: int                 # feed_forward_length (ffn_up holds 2 * n_ff rows)
    n_head: int               # attention.head_count
    n_head_kv: int            # attention.head_count_kv (default n_head)
    head_dim_k: int           # attention.key_length (default n_embd / n_head)
    head_dim_v: int           # attention.value_length (default n_embd / n_head)
    n_rot: int                # rope.dimension_count (default head_dim_k)
    rope_freq_base: float     # rope.freq_base (10000)
    rope_freq_scale: float    # 1 / rope.scaling.factor (1 when absent)
    rope_attn_factor: float   # rope.scaling.attn_factor (1)
    n_ctx_orig: int           # rope.scaling.original_context_length (default context_length)
    rms_eps: float            # attention.layer_norm_rms_epsilon (required)
    n_swa_file: int = 0       # attention.sliding_window as written (not used, see module doc)
    rope_type: int = ROPE_TYPE_NEOX
    bos_id: int | None = None
    eos_id: int | None = None

    @classmethod
    def from_gguf(cls, kv: dict, arch: str) -> "Phi3HParams":
        r = KeyReader(kv, arch)
        n_embd = r.get("embedding_length", required=True)
        n_layer = r.get("block_count", required=True)
        n_head = r.get("attention.head_count", required=True)
        if n_embd <= 0 or n_layer <= 0 or n_head <= 0:
            raise GGUFError(f"{arch}: embedding_length, block_count and head_count must be positive")
        head_k = r.get("attention.key_length", n_embd // n_head)
        factor = r.get("rope.scaling.factor", 0.0, float) or r.get("rope.scale_linear", 0.0, float)
        n_ctx_train = r.get("context_length", required=True)
        tokens = kv.get("tokenizer.ggml.tokens")
        return cls(arch=arch, n_vocab=r.get("vocab_size", len(tokens) if isinstance(tokens, list) else 0),
                   n_ctx_train=n_ctx_train, n_embd=n_embd, n_layer=n_layer,
                   n_ff=r.get("feed_forward_length", required=True), n_head=n_head,
                   n_head_kv=r.get("attention.head_count_kv", n_head), head_dim_k=head_k,
                   head_dim_v=r.get("attention.value_length", n_embd // n_head),
                   n_rot=r.get("rope.dimension_count", head_k),
                   rope_freq_base=r.get("rope.freq_base", 10000.0, float),
                   rope_freq_scale=1.0 / factor if factor else 1.0,
                   rope_attn_factor=r.get("rope.scaling.attn_factor", 1.0, float),
                   n_ctx_orig=r.get("rope.scaling.original_context_length", n_ctx_train),
                   rms_eps=r.get("attention.layer_norm_rms_epsilon", required=True, kind=float),
                   n_swa_file=r.get("attention.sliding_window", 0),
                   bos_id=r.token_id("tokenizer.ggml.bos_token_id"),
                   eos_id=r.token_id("tokenizer.ggml.eos_token_id"))


def rope_factors(model, hp: Phi3HParams, n_ctx: int):
    """The LongRoPE frequency factors for a context of n_ctx tokens (None without them)."""
    long = pad_to(n_ctx, N_PAD) > hp.n_ctx_orig
    return get_tensor(model, GLOBAL_TENSORS["rope_long" if long else "rope_short"])


@register("phi3")
class Phi3Graph(GraphContext):
    HParams = Phi3HParams

    @staticmethod
    def create_memory(model, hp: Phi3HParams, cp):
        return KVCache(n_layer=hp.n_layer, size=pad_to(cp.n_ctx, N_PAD), n_seq_max=cp.n_seq_max,
                       n_embd_k_gqa=hp.head_dim_k * hp.n_head_kv,
                       n_embd_v_gqa=hp.head_dim_v * hp.n_head_kv, head_dim_k=hp.head_dim_k,
                       head_dim_v=hp.head_dim_v, n_head_kv=hp.n_head_kv, type_k=cp.type_k,
                       type_v=cp.type_v, v_trans=not cp.flash_attn,
                       k_shift=(hp, rope_factors(model, hp, cp.n_ctx)))

    def build(self):
        m, hp, c = self.model, self.hparams, self.ctx0
        d = self.n_embd_head_k
        if self.n_embd_head_v != d:
            raise ValueError(f"{hp.arch}: head_dim_k={d} must equal head_dim_v={self.n_embd_head_v}")
        self.attn_factor = hp.rope_attn_factor
        self.n_ctx_orig = hp.n_ctx_orig
        tok_embd = m.get(GLOBAL_TENSORS["tok_embd"])
        output = get_tensor(m, GLOBAL_TENSORS["output"])
        if output is None:  # tied embeddings
            output = tok_embd
        output_b = get_tensor(m, GLOBAL_TENSORS["output_b"])
        factors = rope_factors(m, hp, self.params.n_ctx or hp.n_ctx_train)
        q_scale = float(np.float32(1) / np.sqrt(np.float32(d)))

        inp_l = self.build_inp_embd(tok_embd)
        inp_pos = self.build_inp_pos()
        inp_attn = self.build_attn_inp()
        inp_out_ids = self.build_inp_out_ids()

        for il in range(self.n_layer):
            L = layer_weights(m, il, TENSORS)
            if L.ffn_up is None or L.ffn_up.ne[1] != 2 * hp.n_ff:
                raise ValueError(f"{hp.arch}: blk.{il}.ffn_up.weight must hold 2*n_ff = {2 * hp.n_ff} "
                                 f"rows (gate | up), got {None if L.ffn_up is None else L.ffn_up.ne}")
            self.res.t_layer_inp.append(inp_l)
            residual = inp_l
            cur = self.cb(self.build_norm(inp_l, L.attn_norm, type=NormType.RMS, il=il), "attn_norm", il)
            q, k, v = self.build_qkv(L, cur, d, self.n_head, d, self.n_head_kv, il=il)
            q = self.cb(self.build_rope(q, inp_pos, factors), "Qcur", il)
            k = self.cb(self.build_rope(k, inp_pos, factors), "Kcur", il)
            q = self.cb(gg.scale(c, q, q_scale), "Qcur", il)
            cur = self.build_attn(inp_attn, L.wo, L.bo, q, k, v, kq_scale=1.0, il=il)
            if il == self.n_layer - 1:  # keep only output rows before the last residual
                cur = gg.get_rows(c, cur, inp_out_ids)
                residual = gg.get_rows(c, residual, inp_out_ids)
            residual = self.cb(gg.add(c, cur, residual), "ffn_inp", il)

            cur = self.cb(self.build_norm(residual, L.ffn_norm, type=NormType.RMS, il=il), "ffn_norm", il)
            cur = self.build_ffn(cur, up=L.ffn_up, down=L.ffn_down, type_op=FfnOp.SWIGLU,
                                 type_gate=FfnGate.SEQ, il=il)
            self.cb(cur, "ffn_out", il)
            inp_l = self.cb(gg.add(c, residual, cur), "l_out", il)

        cur = self.cb(self.build_norm(inp_l, m.get(GLOBAL_TENSORS["output_norm"]), type=NormType.RMS),
                      "result_norm")
        self.res.t_embd = cur
        cur = self.build_lora_mm(output, cur)
        if output_b is not None:
            cur = gg.add(c, cur, output_b)
        self.res.t_logits = self.cb(cur, "result_output")
        self.expand(cur)
        self.build_sampling()
        return self.res
