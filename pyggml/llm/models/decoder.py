"""The standard pre-norm decoder stack that the attention architectures share (llama, phi3,
gemma2/3, step35): tensor lookup, the common `<arch>.*` keys, KV memory arguments, the
attention block, the dense and MoE feed-forward parts, the layer loop and the output head.

A layer, as every one of those architectures writes it:

    cur = attn_norm(x) -> attention (the architecture's) -> [rows cropped to the outputs]
          -> [attn_post_norm]
    h   = cur + x                                         ("ffn_inp"; gemma: "sa_out")
    cur = ffn_norm(h) -> feed-forward (the architecture's) -> [ffn_post_norm]
    out = cur + h                                         ("l_out")

An architecture file subclasses `DecoderGraph`, names its tensors (`TENSORS`, `REQUIRED`),
and overrides `build_attention` / `build_feed_forward` (usually one call to the shared
`build_self_attn` / `build_dense_ffn` / `build_moe_part` with its own options); what stays
in the file is what is specific to it.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

import pyggml as gg

from ..gguf_check import GGUFError
from ..gguf_keys import KeyReader
from ..graph import FfnGate, FfnOp, GraphContext, NormType
from ..kv_cache import SWA_STANDARD, KVCache, cells_for
from ..kv_cache_iswa import KVCacheISWA

TOKEN_EMBD, OUTPUT_NORM, OUTPUT = "token_embd.weight", "output_norm.weight", "output.weight"


def get_tensor(model, name):
    """The model's tensor or None."""
    try:
        return model.get(name, required=False)
    except KeyError:
        return None


def layer_weights(model, il: int, tensors: dict, required=()) -> SimpleNamespace:
    """Layer il's tensors as attributes (field -> GGUF name under `blk.{il}.`); a missing
    tensor is None, or a KeyError for the fields named in `required`."""
    return SimpleNamespace(**{f: model.get(f"blk.{il}.{n}") if f in required
                              else get_tensor(model, f"blk.{il}.{n}") for f, n in tensors.items()})


@dataclass(frozen=True)
class AttentionHParams:
    """The `<arch>.*` keys every attention architecture reads (`attention_hparams`); an
    architecture's own hparams dataclass extends it with its specific keys."""
    arch: str
    n_vocab: int              # vocab_size, else len(tokenizer.ggml.tokens), else token_embd ne[1]
    n_ctx_train: int          # context_length
    n_embd: int               # embedding_length
    n_layer: int              # block_count
    n_ff: int                 # feed_forward_length
    n_head: int               # attention.head_count
    n_head_kv: int            # attention.head_count_kv (default n_head)
    head_dim_k: int           # attention.key_length (default n_embd / n_head)
    head_dim_v: int           # attention.value_length (default n_embd / n_head)
    n_rot: int                # rope.dimension_count (default head_dim_k)
    rope_freq_base: float     # rope.freq_base (10000)
    rope_freq_scale: float    # 1 / rope.scaling.factor (or scale_linear; 1 when absent)
    rms_eps: float            # attention.layer_norm_rms_epsilon
    bos_id: int | None        # tokenizer.ggml.bos_token_id
    eos_id: int | None        # tokenizer.ggml.eos_token_id


def attention_hparams(kv: dict, arch: str, *, n_ff_default=None, rms_eps_default=None) -> dict:
    """The AttentionHParams fields read with llama.cpp's defaults, as keyword arguments for
    an architecture's hparams dataclass. A default of None makes the key required."""
    r = KeyReader(kv, arch)
    n_embd = r.get("embedding_length", required=True)
    n_layer = r.get("block_count", required=True)
    n_head = r.get("attention.head_count", required=True)
    if n_embd <= 0 or n_layer <= 0 or n_head <= 0:
        raise GGUFError(f"{arch}: embedding_length, block_count and head_count must be positive")
    head_k = r.get("attention.key_length", n_embd // n_head)
    factor = r.get("rope.scaling.factor", 0.0, float) or r.get("rope.scale_linear", 0.0, float)
    tokens = kv.get("tokenizer.ggml.tokens")
    return dict(arch=arch, n_vocab=r.get("vocab_size", len(tokens) if isinstance(tokens, list) else 0),
                n_ctx_train=r.get("context_length", required=True), n_embd=n_embd,
                n_layer=n_layer,
                n_ff=r.get("feed_forward_length", n_ff_default, required=n_ff_default is None),
                n_head=n_head, n_head_kv=r.get("attention.head_count_kv", n_head),
                head_dim_k=head_k, head_dim_v=r.get("attention.value_length", n_embd // n_head),
                n_rot=r.get("rope.dimension_count", head_k),
                rope_freq_base=r.get("rope.freq_base", 10000.0, float),
                rope_freq_scale=1.0 / factor if factor else 1.0,
                rms_eps=r.get("attention.layer_norm_rms_epsilon", rms_eps_default, float,
                              required=rms_eps_default is None),
                bos_id=r.token_id("tokenizer.ggml.bos_token_id"),
                eos_id=r.token_id("tokenizer.ggml.eos_token_id"))


def kv_cache_args(hp, cp) -> dict:
    """The arguments a KVCache (or each cache of a KVCacheISWA) takes from the hparams and
    the context params: per-layer K/V widths, cell count, types, V layout."""
    return dict(size=cells_for(cp.n_ctx, cp.n_seq_max), n_seq_max=cp.n_seq_max,
                n_embd_k_gqa=hp.head_dim_k * hp.n_head_kv, n_embd_v_gqa=hp.head_dim_v * hp.n_head_kv,
                head_dim_k=hp.head_dim_k, head_dim_v=hp.head_dim_v, n_head_kv=hp.n_head_kv,
                type_k=cp.type_k, type_v=cp.type_v, v_trans=not cp.flash_attn)


def unified_kv_cache(hp, cp, **kw) -> KVCache:
    return KVCache(n_layer=hp.n_layer, **kv_cache_args(hp, cp), **kw)


def iswa_kv_cache(hp, cp, swa_layers, n_swa: int, **kw) -> KVCacheISWA:
    """Window layers in their own cache (standard sliding window), the others in the base one."""
    return KVCacheISWA(swa_layers=swa_layers, n_swa=n_swa, swa_type=SWA_STANDARD,
                       n_ubatch=cp.n_ubatch, **kv_cache_args(hp, cp), **kw)


class DecoderGraph(GraphContext):
    """The shared layer stack (module docstring); subclasses emit their graph in build()."""

    TENSORS: dict = {}
    REQUIRED: tuple = ()           # TENSORS fields that must exist in every layer
    FFN_INP_NAME = "ffn_inp"       # the cb name of the residual between attention and FFN

    # ---- weights --------------------------------------------------------------------------
    def layer(self, il: int) -> SimpleNamespace:
        return layer_weights(self.model, il, self.TENSORS, self.REQUIRED)

    def token_embd_and_output(self, tied: bool = False):
        """(tok_embd, output matrix): the output is the token embedding when the file has
        none (tied embeddings) or when `tied` says the architecture always ties them."""
        tok_embd = self.model.get(TOKEN_EMBD)
        output = None if tied else get_tensor(self.model, OUTPUT)
        return tok_embd, tok_embd if output is None else output

    def check_head_dims(self) -> int:
        """The head size, for architectures whose K and V heads must be the same size."""
        d = self.n_embd_head_k
        if self.n_embd_head_v != d:
            raise ValueError(f"{self.hparams.arch}: head_dim_k={d} must equal "
                             f"head_dim_v={self.n_embd_head_v}")
        return d

    # ---- inputs ---------------------------------------------------------------------------
    def build_decoder_inputs(self, tok_embd):
        """(embeddings, positions, attention input, output ids), in llama.cpp's order."""
        x = self.build_inp_embd(tok_embd)
        return x, self.build_inp_pos(), self.build_attn_inp(), self.build_inp_out_ids()

    # ---- attention --------------------------------------------------------------------------
    def build_self_attn(self, inp_attn, pos, cur, L, il: int, *, kq_scale: float,
                        rope_factors=None, q_scale: float = 0.0):
        """Q/K/V (fused or separate, + biases), per-head Q/K RMS norms where the layer has
        them, RoPE with this graph's settings, an optional Q pre-scale, attention through
        the memory, the output projection (+ bias)."""
        d = self.n_embd_head_k
        q, k, v = self.build_qkv(L, cur, d, self.n_head, d, self.n_head_kv, il=il)
        q_norm, k_norm = getattr(L, "attn_q_norm", None), getattr(L, "attn_k_norm", None)
        if q_norm is not None:
            q = self.cb(self.build_norm(q, q_norm, type=NormType.RMS, il=il), "Qcur_normed", il)
        q = self.build_rope(q, pos, rope_factors)
        if k_norm is not None:
            k = self.cb(self.build_norm(k, k_norm, type=NormType.RMS, il=il), "Kcur_normed", il)
        k = self.build_rope(k, pos, rope_factors)
        self.cb(q, "Qcur", il)
        self.cb(k, "Kcur", il)
        self.cb(v, "Vcur", il)
        if q_scale:
            q = self.cb(gg.scale(self.ctx0, q, q_scale), "Qcur_scaled", il)
        cur = self.build_attn(inp_attn, L.wo, getattr(L, "bo", None), q, k, v, kq_scale=kq_scale, il=il)
        return self.cb(cur, "attn_out", il)

    def build_attention(self, inp_attn, pos, cur, L, il: int):
        """The architecture's attention on the normed layer input; returns its output."""
        raise NotImplementedError

    # ---- feed-forward ---------------------------------------------------------------------
    def build_dense_ffn(self, cur, L, il: int, *, type_op=FfnOp.SILU, type_gate=FfnGate.PAR,
                        suffix: str = "", name: str = "ffn_out"):
        """The layer's dense FFN from its `ffn_up/gate/down{suffix}` weights (and `_b`
        biases where present), named `name`."""
        def w(part):
            return getattr(L, f"ffn_{part}{suffix}", None)
        cur = self.build_ffn(cur, up=w("up"), up_b=w("up_b"), gate=w("gate"), gate_b=w("gate_b"),
                             down=w("down"), down_b=w("down_b"), type_op=type_op,
                             type_gate=type_gate, il=il)
        return self.cb(cur, name, il)

    def build_moe_part(self, cur, L, il: int, *, gating, norm_w: bool, w_scale: float = 0.0):
        """Routed SwiGLU experts (selection bias `ffn_exp_probs_b` where present), plus the
        shared expert `ffn_*_shexp` when the layer has one."""
        hp = self.hparams
        moe = self.build_moe_ffn(cur, L.ffn_gate_inp, L.ffn_up_exps, L.ffn_gate_exps,
                                 L.ffn_down_exps, getattr(L, "ffn_exp_probs_b", None),
                                 n_expert=hp.n_expert, n_expert_used=hp.n_expert_used,
                                 type_op=FfnOp.SILU, norm_w=norm_w, w_scale=w_scale,
                                 gating_op=gating, il=il)
        if getattr(L, "ffn_up_shexp", None) is None:
            return moe
        sh = self.build_dense_ffn(cur, L, il, suffix="_shexp", name="ffn_shared_out")
        return self.cb(gg.add(self.ctx0, moe, sh), "ffn_out", il)

    def build_feed_forward(self, cur, L, il: int):
        """The architecture's feed-forward on the normed residual; returns its output."""
        raise NotImplementedError

    # ---- the stack --------------------------------------------------------------------------
    def build_layer(self, inp_attn, pos, x, il: int, out_ids=None):
        """One decoder layer on x; `out_ids` keeps only the output rows before the first
        residual (the last layer of a trunk)."""
        c, L = self.ctx0, self.layer(il)
        cur = self.cb(self.build_norm(x, L.attn_norm, type=NormType.RMS, il=il), "attn_norm", il)
        cur = self.build_attention(inp_attn, pos, cur, L, il)
        if out_ids is not None:
            cur, x = gg.get_rows(c, cur, out_ids), gg.get_rows(c, x, out_ids)
        post = getattr(L, "attn_post_norm", None)
        if post is not None:
            cur = self.cb(self.build_norm(cur, post, type=NormType.RMS, il=il), "attn_post_norm", il)
        ffn_inp = self.cb(gg.add(c, cur, x), self.FFN_INP_NAME, il)
        cur = self.cb(self.build_norm(ffn_inp, L.ffn_norm, type=NormType.RMS, il=il), "ffn_norm", il)
        cur = self.build_feed_forward(cur, L, il)
        post = getattr(L, "ffn_post_norm", None)
        if post is not None:
            cur = self.cb(self.build_norm(cur, post, type=NormType.RMS, il=il), "ffn_post_norm", il)
        return self.cb(gg.add(c, cur, ffn_inp), "l_out", il)

    def build_layers(self, x, inp_attn, pos, out_ids, crop_last: bool = True):
        """Every trunk layer in turn (their inputs recorded for draft taps); the last one
        crops to the output rows unless `crop_last` is False."""
        for il in range(self.n_layer):
            self.res.t_layer_inp.append(x)
            crop = out_ids if crop_last and il == self.n_layer - 1 else None
            x = self.build_layer(inp_attn, pos, x, il, crop)
        return x

    def build_output(self, x, output, *, output_b=None, final_soft_cap: float = 0.0):
        """Final RMS norm (t_embd), the output matrix (+ bias, + `cap * tanh(l / cap)`),
        t_logits, and the in-graph sampler when asked; returns the GraphResult."""
        c = self.ctx0
        x = self.cb(self.build_norm(x, self.model.get(OUTPUT_NORM), type=NormType.RMS), "result_norm")
        self.res.t_embd = x
        x = self.build_lora_mm(output, x)
        if output_b is not None:
            x = gg.add(c, x, output_b)
        if final_soft_cap:  # 1/cap rounded once, in float32
            inv = float(np.float32(1) / np.float32(final_soft_cap))
            x = gg.scale(c, gg.tanh(c, gg.scale(c, x, inv)), final_soft_cap)
        self.res.t_logits = self.cb(x, "result_output")
        self.expand(x)
        self.build_sampling()
        return self.res
