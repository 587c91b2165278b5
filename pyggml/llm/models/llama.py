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
from types import SimpleNamespace

import pyggml as gg

from ..gguf_check import GGUFError
from ..gguf_keys import KeyReader
from ..graph import FfnGate, FfnOp, Gating, GraphContext, NormType
from ..kv_cache import N_PAD, SWA_NONE, SWA_STANDARD, KVCache, pad_to
from ..kv_cache_iswa import KVCacheISWA
from ..model import rope_type_for_arch
from . import register

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
GLOBAL_TENSORS = {"tok_embd": "token_embd.weight", "output_norm": "output_norm.weight",
                  "output": "output.weight", "rope_freqs": "rope_freqs.weight"}


def get_tensor(model, name):
    """The model's tensor or None."""
    try:
        return model.get(name, required=False)
    except KeyError:
        return None


def layer_weights(model, il: int, tensors: dict = TENSORS) -> SimpleNamespace:
    return SimpleNamespace(**{f: get_tensor(model, f"blk.{il}.{n}") for f, n in tensors.items()})


@dataclass(frozen=True)
class LlamaHParams:
    """`<arch>.*` keys of the llama family (defaults as llama.cpp's loader)."""
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
    rope_freq_scale: float    # 1 / rope.scaling.factor (1 when absent)
    rope_type: int            # NORM (llama) or NEOX (qwen2, qwen3)
    rms_eps: float            # attention.layer_norm_rms_epsilon
    n_expert: int = 0         # expert_count
    n_expert_used: int = 0    # expert_used_count
    n_swa: int = 0            # attention.sliding_window (pyggml extension, see the module doc)
    swa_layers: tuple = ()    # attention.sliding_window_pattern: True = window layer
    bos_id: int | None = None
    eos_id: int | None = None

    @classmethod
    def from_gguf(cls, kv: dict, arch: str) -> "LlamaHParams":
        r = KeyReader(kv, arch)
        n_embd = r.get("embedding_length", required=True)
        n_layer = r.get("block_count", required=True)
        n_head = r.get("attention.head_count", required=True)
        if n_embd <= 0 or n_layer <= 0 or n_head <= 0:
            raise GGUFError(f"{arch}: embedding_length, block_count and head_count must be positive")
        n_head_kv = r.get("attention.head_count_kv", n_head)
        head_k = r.get("attention.key_length", n_embd // n_head)
        head_v = r.get("attention.value_length", n_embd // n_head)
        factor = r.get("rope.scaling.factor", 0.0, float) or r.get("rope.scale_linear", 0.0, float)
        tokens = kv.get("tokenizer.ggml.tokens")
        n_vocab = r.get("vocab_size", len(tokens) if isinstance(tokens, list) else 0)
        n_swa = r.get("attention.sliding_window", 0)
        swa_layers = ()
        if n_swa and r.has("attention.sliding_window_pattern"):
            swa_layers = r.get_arr("attention.sliding_window_pattern", n_layer, kind=bool)
        return cls(arch=arch, n_vocab=n_vocab, n_ctx_train=r.get("context_length", required=True),
                   n_embd=n_embd, n_layer=n_layer, n_ff=r.get("feed_forward_length", 0),
                   n_head=n_head, n_head_kv=n_head_kv, head_dim_k=head_k, head_dim_v=head_v,
                   n_rot=r.get("rope.dimension_count", head_k),
                   rope_freq_base=r.get("rope.freq_base", 10000.0, float),
                   rope_freq_scale=1.0 / factor if factor else 1.0,
                   rope_type=rope_type_for_arch(arch),
                   rms_eps=r.get("attention.layer_norm_rms_epsilon", 1e-5, float),
                   n_expert=r.get("expert_count", 0), n_expert_used=r.get("expert_used_count", 0),
                   n_swa=n_swa, swa_layers=swa_layers,
                   bos_id=r.token_id("tokenizer.ggml.bos_token_id"),
                   eos_id=r.token_id("tokenizer.ggml.eos_token_id"))


@register("llama", "qwen2", "qwen3")
class LlamaGraph(GraphContext):
    HParams = LlamaHParams

    @staticmethod
    def create_memory(model, hp: LlamaHParams, cp):
        """A unified KV cache, or an iSWA pair when some layers use a sliding window."""
        kw = dict(n_embd_k_gqa=hp.head_dim_k * hp.n_head_kv, n_embd_v_gqa=hp.head_dim_v * hp.n_head_kv,
                  head_dim_k=hp.head_dim_k, head_dim_v=hp.head_dim_v, n_head_kv=hp.n_head_kv,
                  type_k=cp.type_k, type_v=cp.type_v, v_trans=not cp.flash_attn,
                  k_shift=(hp, get_tensor(model, GLOBAL_TENSORS["rope_freqs"])))
        size = pad_to(cp.n_ctx, N_PAD)
        if hp.n_swa and any(hp.swa_layers):
            return KVCacheISWA(swa_layers=hp.swa_layers, n_swa=hp.n_swa, size=size,
                               swa_type=SWA_STANDARD, n_ubatch=cp.n_ubatch,
                               n_seq_max=cp.n_seq_max, **kw)
        return KVCache(n_layer=hp.n_layer, size=size, n_seq_max=cp.n_seq_max,
                       n_swa=hp.n_swa, swa_type=SWA_STANDARD if hp.n_swa else SWA_NONE, **kw)

    def build(self):
        m, hp, c = self.model, self.hparams, self.ctx0
        d = self.n_embd_head_k
        if self.n_embd_head_v != d:
            raise ValueError(f"{hp.arch}: head_dim_k={d} must equal head_dim_v={self.n_embd_head_v}")
        kq_scale = 1.0 / math.sqrt(d)
        tok_embd = m.get(GLOBAL_TENSORS["tok_embd"])
        output = get_tensor(m, GLOBAL_TENSORS["output"])
        if output is None:  # tied embeddings
            output = tok_embd
        rope_factors = get_tensor(m, GLOBAL_TENSORS["rope_freqs"])

        inp_l = self.build_inp_embd(tok_embd)
        inp_pos = self.build_inp_pos()
        inp_attn = self.build_attn_inp()
        inp_out_ids = self.build_inp_out_ids()

        for il in range(self.n_layer):
            L = layer_weights(m, il)
            self.res.t_layer_inp.append(inp_l)
            inp_sa = inp_l
            cur = self.cb(self.build_norm(inp_l, L.attn_norm, type=NormType.RMS, il=il), "attn_norm", il)

            q, k, v = self.build_qkv(L, cur, d, self.n_head, d, self.n_head_kv, il=il)
            if L.attn_q_norm is not None:  # qwen3: per-head norms before RoPE
                q = self.cb(self.build_norm(q, L.attn_q_norm, type=NormType.RMS, il=il), "Qcur_normed", il)
            q = self.build_rope(q, inp_pos, rope_factors)
            if L.attn_k_norm is not None:
                k = self.cb(self.build_norm(k, L.attn_k_norm, type=NormType.RMS, il=il), "Kcur_normed", il)
            k = self.build_rope(k, inp_pos, rope_factors)
            self.cb(q, "Qcur", il)
            self.cb(k, "Kcur", il)
            self.cb(v, "Vcur", il)

            cur = self.build_attn(inp_attn, L.wo, L.bo, q, k, v, kq_scale=kq_scale, il=il)
            self.cb(cur, "attn_out", il)
            if il == self.n_layer - 1:  # keep only output rows before the last residual
                cur = gg.get_rows(c, cur, inp_out_ids)
                inp_sa = gg.get_rows(c, inp_sa, inp_out_ids)
            ffn_inp = self.cb(gg.add(c, cur, inp_sa), "ffn_inp", il)

            cur = self.cb(self.build_norm(ffn_inp, L.ffn_norm, type=NormType.RMS, il=il), "ffn_norm", il)
            if L.ffn_gate_inp is None:
                cur = self.build_ffn(cur, up=L.ffn_up, up_b=L.ffn_up_b, gate=L.ffn_gate,
                                     gate_b=L.ffn_gate_b, down=L.ffn_down, down_b=L.ffn_down_b,
                                     type_op=FfnOp.SILU, type_gate=FfnGate.PAR, il=il)
                self.cb(cur, "ffn_out", il)
            else:
                cur = self.build_moe_ffn(cur, L.ffn_gate_inp, L.ffn_up_exps, L.ffn_gate_exps,
                                         L.ffn_down_exps, n_expert=hp.n_expert,
                                         n_expert_used=hp.n_expert_used, type_op=FfnOp.SILU,
                                         norm_w=True, gating_op=Gating.SOFTMAX, il=il)
            cur = self.cb(gg.add(c, cur, ffn_inp), "l_out", il)
            inp_l = cur

        cur = self.cb(self.build_norm(inp_l, m.get(GLOBAL_TENSORS["output_norm"]), type=NormType.RMS),
                      "result_norm")
        self.res.t_embd = cur
        cur = self.cb(self.build_lora_mm(output, cur), "result_output")
        self.res.t_logits = cur
        self.expand(cur)
        self.build_sampling()
        return self.res
