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
from ..graph import FfnGate, FfnOp, GraphContext, NormType
from ..kv_cache import N_PAD, SWA_STANDARD, KVCache, pad_to
from ..kv_cache_iswa import KVCacheISWA
from ..model import ROPE_TYPE_NEOX
from . import register
from .llama import get_tensor, layer_weights

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
GLOBAL_TENSORS = {"tok_embd": "token_embd.weight", "output_norm": "output_norm.weight",
                  "output": "output.weight"}
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
class GemmaHParams:
    """`<arch>.*` keys of Gemma 2 / Gemma 3 (defaults as llama.cpp's loader)."""
    arch: str
    n_vocab: int
    n_ctx_train: int          # context_length
    n_embd: int               # embedding_length
    n_layer: int              # block_count
    n_ff: int                 # feed_forward_length
    n_head: int               # attention.head_count
    n_head_kv: int            # attention.head_count_kv (default n_head)
    head_dim_k: int           # attention.key_length (default n_embd / n_head)
    head_dim_v: int           # attention.value_length (default n_embd / n_head)
    n_rot: int                # rope.dimension_count (default head_dim_k)
    rope_freq_base: float     # rope.freq_base (10000): full-attention layers
    rope_freq_scale: float    # 1 / rope.scaling.factor: full-attention layers
    rope_freq_base_swa: float   # rope.freq_base_swa: window layers
    rope_freq_scale_swa: float  # window layers (gemma2: as the full layers; gemma3: 1)
    rms_eps: float            # attention.layer_norm_rms_epsilon (required)
    n_swa: int                # attention.sliding_window (0: no window layers)
    swa_layers: tuple         # True = window layer
    attn_soft_cap: float      # attn_logit_softcapping (0: none)
    final_soft_cap: float     # final_logit_softcapping (0: none)
    attention_scale: float    # the Q pre-scale
    rope_type: int = ROPE_TYPE_NEOX
    bos_id: int | None = None
    eos_id: int | None = None

    @staticmethod
    def common(kv: dict, arch: str) -> dict:
        r = KeyReader(kv, arch)
        n_embd = r.get("embedding_length", required=True)
        n_layer = r.get("block_count", required=True)
        n_head = r.get("attention.head_count", required=True)
        if n_embd <= 0 or n_layer <= 0 or n_head <= 0:
            raise GGUFError(f"{arch}: embedding_length, block_count and head_count must be positive")
        head_k = r.get("attention.key_length", n_embd // n_head)
        factor = r.get("rope.scaling.factor", 0.0, float) or r.get("rope.scale_linear", 0.0, float)
        tokens = kv.get("tokenizer.ggml.tokens")
        scale_dim = n_embd // n_head if n_layer == LAYERS_27B.get(arch) else head_k
        return dict(arch=arch, n_vocab=r.get("vocab_size", len(tokens) if isinstance(tokens, list) else 0),
                    n_ctx_train=r.get("context_length", required=True), n_embd=n_embd,
                    n_layer=n_layer, n_ff=r.get("feed_forward_length", required=True),
                    n_head=n_head, n_head_kv=r.get("attention.head_count_kv", n_head),
                    head_dim_k=head_k, head_dim_v=r.get("attention.value_length", n_embd // n_head),
                    n_rot=r.get("rope.dimension_count", head_k),
                    rope_freq_base=r.get("rope.freq_base", 10000.0, float),
                    rope_freq_scale=1.0 / factor if factor else 1.0,
                    rms_eps=r.get("attention.layer_norm_rms_epsilon", required=True, kind=float),
                    attention_scale=float(np.float32(1.0) / np.sqrt(np.float32(scale_dim))),
                    bos_id=r.token_id("tokenizer.ggml.bos_token_id"),
                    eos_id=r.token_id("tokenizer.ggml.eos_token_id"))

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


class GemmaGraph(GraphContext):
    HParams = GemmaHParams
    SCALE_EMBEDDINGS_ALWAYS = True   # gemma3 leaves raw embedding batches unscaled
    OUTPUT_ALWAYS_TIED = True        # gemma2 files have no output matrix of their own

    @staticmethod
    def create_memory(model, hp: GemmaHParams, cp):
        """An iSWA pair (window layers apart, with their own RoPE base for K shifts), or one
        unified cache when no layer uses the window."""
        kw = dict(n_embd_k_gqa=hp.head_dim_k * hp.n_head_kv, n_embd_v_gqa=hp.head_dim_v * hp.n_head_kv,
                  head_dim_k=hp.head_dim_k, head_dim_v=hp.head_dim_v, n_head_kv=hp.n_head_kv,
                  type_k=cp.type_k, type_v=cp.type_v, v_trans=not cp.flash_attn)
        size = pad_to(cp.n_ctx, N_PAD)
        if hp.n_swa and any(hp.swa_layers):
            hp_swa = dataclasses.replace(hp, rope_freq_base=hp.rope_freq_base_swa,
                                         rope_freq_scale=hp.rope_freq_scale_swa)
            return KVCacheISWA(swa_layers=hp.swa_layers, n_swa=hp.n_swa, size=size,
                               swa_type=SWA_STANDARD, n_ubatch=cp.n_ubatch, n_seq_max=cp.n_seq_max,
                               k_shift=(hp, None), k_shift_swa=(hp_swa, None), **kw)
        return KVCache(n_layer=hp.n_layer, size=size, n_seq_max=cp.n_seq_max,
                       k_shift=(hp, None), **kw)

    def build(self):
        m, hp, c = self.model, self.hparams, self.ctx0
        d = self.n_embd_head_k
        if self.n_embd_head_v != d:
            raise ValueError(f"{hp.arch}: head_dim_k={d} must equal head_dim_v={self.n_embd_head_v}")
        self.attn_soft_cap = hp.attn_soft_cap
        tok_embd = m.get(GLOBAL_TENSORS["tok_embd"])
        output = None if self.OUTPUT_ALWAYS_TIED else get_tensor(m, GLOBAL_TENSORS["output"])
        if output is None:  # tied embeddings
            output = tok_embd

        inp_l = self.build_inp_embd(tok_embd)
        if self.SCALE_EMBEDDINGS_ALWAYS or self.ubatch.token is not None:
            inp_l = self.cb(gg.scale(c, inp_l, float(np.sqrt(np.float32(hp.n_embd)))), "inp_scaled")
        inp_pos = self.build_inp_pos()
        inp_attn = self.build_attn_inp()
        inp_out_ids = self.build_inp_out_ids()

        for il in range(self.n_layer):
            L = layer_weights(m, il, TENSORS)
            swa = hp.is_swa(il)
            self.freq_base = hp.rope_freq_base_swa if swa else hp.rope_freq_base
            self.freq_scale = hp.rope_freq_scale_swa if swa else hp.rope_freq_scale
            self.res.t_layer_inp.append(inp_l)
            cur = self.cb(self.build_norm(inp_l, L.attn_norm, type=NormType.RMS, il=il), "attn_norm", il)

            q, k, v = self.build_qkv(L, cur, d, self.n_head, d, self.n_head_kv, il=il)
            if L.attn_q_norm is not None:
                q = self.cb(self.build_norm(q, L.attn_q_norm, type=NormType.RMS, il=il), "Qcur_normed", il)
            q = self.build_rope(q, inp_pos)
            if L.attn_k_norm is not None:
                k = self.cb(self.build_norm(k, L.attn_k_norm, type=NormType.RMS, il=il), "Kcur_normed", il)
            k = self.build_rope(k, inp_pos)
            self.cb(q, "Qcur", il)
            self.cb(k, "Kcur", il)
            self.cb(v, "Vcur", il)
            q = gg.scale(c, q, hp.attention_scale)

            cur = self.build_attn(inp_attn, L.wo, None, q, k, v, kq_scale=1.0, il=il)
            if il == self.n_layer - 1:  # keep only output rows before the last residual
                cur = gg.get_rows(c, cur, inp_out_ids)
                inp_l = gg.get_rows(c, inp_l, inp_out_ids)
            cur = self.cb(self.build_norm(cur, L.attn_post_norm, type=NormType.RMS, il=il),
                          "attn_post_norm", il)
            sa_out = self.cb(gg.add(c, cur, inp_l), "sa_out", il)

            cur = self.cb(self.build_norm(sa_out, L.ffn_norm, type=NormType.RMS, il=il), "ffn_norm", il)
            cur = self.build_ffn(cur, up=L.ffn_up, gate=L.ffn_gate, down=L.ffn_down,
                                 type_op=FfnOp.GELU, type_gate=FfnGate.PAR, il=il)
            self.cb(cur, "ffn_out", il)
            cur = self.cb(self.build_norm(cur, L.ffn_post_norm, type=NormType.RMS), "ffn_post_norm", il)
            inp_l = self.cb(gg.add(c, cur, sa_out), "l_out", il)

        cur = self.cb(self.build_norm(inp_l, m.get(GLOBAL_TENSORS["output_norm"]), type=NormType.RMS),
                      "result_norm")
        self.res.t_embd = cur
        cur = self.build_lora_mm(output, cur)
        if hp.final_soft_cap:
            cap = hp.final_soft_cap
            cur = gg.scale(c, gg.tanh(c, gg.scale(c, cur, float(np.float32(1) / np.float32(cap)))), cap)
        self.res.t_logits = self.cb(cur, "result_output")
        self.expand(cur)
        self.build_sampling()
        return self.res


@register("gemma2")
class Gemma2Graph(GemmaGraph):
    pass
