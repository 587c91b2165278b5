"""LLaMA (src/models/llama.cpp), and the Qwen2 / Qwen3 variants that share its layer:
Q/K/V biases (qwen2), per-head Q/K RMS norms before RoPE (qwen3), NEOX RoPE (both), tied
output embeddings (any). Spec graph.md section 4.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import pyggml as gg

from ..graph import FFN_PAR, FFN_SILU, GATING_SOFTMAX, LLM_NORM_RMS, GraphContext
from . import register

# llama_layer field -> GGUF tensor name suffix under blk.{il}.
LAYER_TENSORS = {
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


def get_tensor(model, name):
    """The model's tensor or None."""
    try:
        return model.get(name, required=False)
    except KeyError:
        return None


def layer_weights(model, il: int) -> SimpleNamespace:
    return SimpleNamespace(**{f: get_tensor(model, f"blk.{il}.{n}") for f, n in LAYER_TENSORS.items()})


@register("llama", "qwen2", "qwen3")
class LlamaGraph(GraphContext):
    def build(self):
        m, hp, c = self.model, self.hparams, self.ctx0
        d = self.n_embd_head_k
        if self.n_embd_head_v != d:
            raise ValueError(f"llama: head_dim_k={d} must equal head_dim_v={self.n_embd_head_v}")
        kq_scale = float(getattr(hp, "attention_scale", 0.0) or 0.0) or 1.0 / math.sqrt(d)
        tok_embd = m.get("token_embd.weight")
        output = get_tensor(m, "output.weight")
        if output is None:  # tied embeddings
            output = tok_embd
        rope_factors = get_tensor(m, "rope_freqs.weight")
        use_kq_norm = bool(getattr(hp, "use_kq_norm", False))  # llama4-style, no weight

        inp_l = self.build_inp_embd(tok_embd)
        inp_pos = self.build_inp_pos()
        inp_attn = self.build_attn_inp_kv() if self.params.kv is not None else self.build_attn_inp_no_cache()
        inp_out_ids = self.build_inp_out_ids()

        for il in range(self.n_layer):
            L = layer_weights(m, il)
            self.res.t_layer_inp.append(inp_l)
            inp_sa = inp_l
            cur = self.cb(self.build_norm(inp_l, L.attn_norm, None, LLM_NORM_RMS, il), "attn_norm", il)

            q, k, v = self.build_qkv(L, cur, d, self.n_head, d, self.n_head_kv, il=il)
            if L.attn_q_norm is not None:  # qwen3: per-head norms before RoPE
                q = self.cb(self.build_norm(q, L.attn_q_norm, None, LLM_NORM_RMS, il), "Qcur_normed", il)
            q = self.build_rope(q, inp_pos, rope_factors)
            if L.attn_k_norm is not None:
                k = self.cb(self.build_norm(k, L.attn_k_norm, None, LLM_NORM_RMS, il), "Kcur_normed", il)
            k = self.build_rope(k, inp_pos, rope_factors)
            self.cb(q, "Qcur", il)
            self.cb(k, "Kcur", il)
            self.cb(v, "Vcur", il)
            if use_kq_norm:
                q = self.cb(self.build_norm(q, None, None, LLM_NORM_RMS, il), "Qcur_normed", il)
                k = self.cb(self.build_norm(k, None, None, LLM_NORM_RMS, il), "Kcur_normed", il)

            cur = self.build_attn(inp_attn, L.wo, L.bo, q, k, v, kq_scale=kq_scale, il=il)
            self.cb(cur, "attn_out", il)
            if il == self.n_layer - 1:  # keep only output rows before the last residual
                cur = gg.get_rows(c, cur, inp_out_ids)
                inp_sa = gg.get_rows(c, inp_sa, inp_out_ids)
            ffn_inp = self.cb(gg.add(c, cur, inp_sa), "ffn_inp", il)

            cur = self.cb(self.build_norm(ffn_inp, L.ffn_norm, None, LLM_NORM_RMS, il), "ffn_norm", il)
            if L.ffn_gate_inp is None:
                cur = self.build_ffn(cur, L.ffn_up, L.ffn_up_b, None, L.ffn_gate, L.ffn_gate_b, None,
                                     L.ffn_down, L.ffn_down_b, None, None, FFN_SILU, FFN_PAR, il)
                self.cb(cur, "ffn_out", il)
            else:
                cur = self.build_moe_ffn(cur, L.ffn_gate_inp, L.ffn_up_exps, L.ffn_gate_exps,
                                         L.ffn_down_exps, None, n_expert=hp.n_expert,
                                         n_expert_used=hp.n_expert_used, type_op=FFN_SILU,
                                         norm_w=True, w_scale=float(getattr(hp, "expert_weights_scale", 0.0) or 0.0),
                                         gating_op=GATING_SOFTMAX, il=il)
            cur = self.cb(gg.add(c, cur, ffn_inp), "l_out", il)
            inp_l = cur

        cur = self.cb(self.build_norm(inp_l, m.get("output_norm.weight"), None, LLM_NORM_RMS, -1),
                      "result_norm")
        self.res.t_embd = cur
        cur = self.cb(self.build_lora_mm(output, cur), "result_output")
        self.res.t_logits = cur
        self.expand(cur)
        self.build_sampling()
        return self.res
