"""EAGLE3 draft heads (src/models/eagle3.cpp): one decoder layer fed by fused target features.

Two graphs, chosen by the batch:
* encoder (float rows only, no memory): the concatenated inputs of 3 target layers
  `f [3*D_t, T]` -> `rms(f)*enc.output_norm` (with `norm_before_fc`) -> `fc` -> `g [D, T]`,
  exported as `t_h_nextn`;
* decoder (token ids and g rows): `concat(rms(embd(tok))*attn_norm, rms(g)*attn_norm_2)`
  feeds Q/K/V (NORM RoPE, the KV cache, causal), the residual is g (or its norm with
  `norm_before_residual`), then the FFN; the pre-norm result is the next step's g
  (`t_h_nextn`), the logits come from `output` (the target's when absent) and, with a `d2t`
  table, are scattered into the target vocabulary (-inf elsewhere).
The token embedding is the target's when the draft has none.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pyggml as gg

from ..gguf_check import GGUFError
from ..gguf_keys import KeyReader
from ..graph import FfnGate, FfnOp, GraphContext, NormType
from ..inputs_draft import InpRows, draft_attention_hparams, shared_output, shared_tensor
from ..kv_cache import N_PAD, SWA_NONE, KVCache, pad_to
from ..model import ROPE_TYPE_NORM
from . import register
from .llama import layer_weights

TENSORS = {
    "attn_norm": "attn_norm.weight", "attn_norm_2": "attn_norm_2.weight",
    "wq": "attn_q.weight", "wk": "attn_k.weight", "wv": "attn_v.weight",
    "wo": "attn_output.weight", "ffn_norm": "ffn_norm.weight",
    "ffn_gate": "ffn_gate.weight", "ffn_up": "ffn_up.weight", "ffn_down": "ffn_down.weight",
}


@dataclass(frozen=True)
class Eagle3HParams:
    arch: str
    n_vocab: int
    n_ctx_train: int
    n_embd: int
    n_layer: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim_k: int
    head_dim_v: int
    n_rot: int
    rope_freq_base: float
    rope_freq_scale: float
    rope_type: int
    rms_eps: float
    target_layers: tuple          # exactly 3 target layer-input indices
    n_embd_target: int            # target_hidden_size
    norm_before_residual: bool
    norm_before_fc: bool

    @property
    def n_embd_enc(self) -> int:
        return len(self.target_layers) * self.n_embd_target

    @classmethod
    def from_gguf(cls, kv: dict, arch: str) -> "Eagle3HParams":
        r = KeyReader(kv, arch)
        common = draft_attention_hparams(r, kv, arch, ROPE_TYPE_NORM)
        if common["n_layer"] != 1:
            raise GGUFError(f"{arch}: EAGLE3 has exactly one decoder layer, "
                            f"block_count={common['n_layer']}")
        layers = kv.get(f"{arch}.target_layers")
        if not isinstance(layers, list) or len(layers) != 3:
            raise GGUFError(f"{arch}: '{arch}.target_layers' must list exactly 3 target layer "
                            f"ids, got {layers!r}")
        return cls(**common,
                   target_layers=tuple(int(x) for x in layers),
                   n_embd_target=r.get("target_hidden_size", required=True),
                   norm_before_residual=r.get("norm_before_residual", False, bool),
                   norm_before_fc=r.get("norm_before_fc", False, bool))


def scatter_d2t(g: GraphContext, logits, d2t, n_vocab: int, fill: float):
    """Rows of a draft vocabulary [V_draft, O] placed at target ids d2t in a [V, O] tensor
    filled with `fill`."""
    c = g.ctx0
    n_draft, n_out = logits.ne[0], logits.ne[1]
    if d2t.ne[0] != n_draft:
        raise ValueError(f"d2t maps {d2t.ne[0]} draft ids but the head has {n_draft} rows")
    full = gg.fill(c, c.new_tensor(gg.F32, [1, n_vocab, n_out]), fill)
    out = gg.set_rows(c, full, gg.reshape_3d(c, logits, 1, n_draft, n_out),
                      gg.reshape_3d(c, d2t, n_draft, 1, 1))
    return gg.reshape_2d(c, out, n_vocab, n_out)


@register("eagle3")
class Eagle3Graph(GraphContext):
    HParams = Eagle3HParams

    @staticmethod
    def create_memory(model, hp: Eagle3HParams, cp):
        return KVCache(n_layer=1, size=pad_to(cp.n_ctx, N_PAD), n_seq_max=cp.n_seq_max,
                       n_embd_k_gqa=hp.head_dim_k * hp.n_head_kv,
                       n_embd_v_gqa=hp.head_dim_v * hp.n_head_kv, head_dim_k=hp.head_dim_k,
                       head_dim_v=hp.head_dim_v, n_head_kv=hp.n_head_kv, type_k=cp.type_k,
                       type_v=cp.type_v, v_trans=not cp.flash_attn, swa_type=SWA_NONE,
                       k_shift=(hp, model.get("rope_freqs.weight", required=False)))

    def build(self):
        if self.ubatch.token is None:
            return self.build_encoder()
        return self.build_decoder()

    def build_encoder(self):
        m, hp, c = self.model, self.hparams, self.ctx0
        inp = self.res.add_input(InpRows(c, self.n_tokens, hp.n_embd_enc))
        cur = self.cb(inp.embd, "inp_embd")
        if hp.norm_before_fc:
            cur = self.cb(self.build_norm(cur, m.get("enc.output_norm.weight")), "enc_input_norm")
        cur = self.cb(self.build_lora_mm(m.get("fc.weight"), cur), "fc_out")
        self.res.t_h_nextn = cur
        self.expand(cur)
        return self.res

    def build_decoder(self):
        m, hp, c, p = self.model, self.hparams, self.ctx0, self.params
        d = self.n_embd_head_k
        L = layer_weights(m, 0, TENSORS)
        tok_embd = shared_tensor(m, p, "token_embd.weight")
        inp = self.res.add_input(InpRows(c, self.n_tokens, hp.n_embd, with_tokens=True))
        self.res.t_inp_tokens = inp.tokens
        e = self.cb(gg.get_rows(c, tok_embd, inp.tokens), "inp_embd")
        g = self.cb(inp.embd, "inp_g_embeddings")
        pos = self.build_inp_pos()
        inp_attn = self.build_attn_inp()
        out_ids = self.build_inp_out_ids()

        en = self.cb(self.build_norm(e, L.attn_norm, il=0), "embd_norm", 0)
        gn = self.cb(self.build_norm(g, L.attn_norm_2), "g_norm", 0)
        residual = gn if hp.norm_before_residual else g
        x = self.cb(gg.concat(c, en, gn, 0), "concat_embd", 0)
        q = gg.reshape_3d(c, self.cb(self.build_lora_mm(L.wq, x), "Qcur", 0), d, self.n_head, self.n_tokens)
        k = gg.reshape_3d(c, self.cb(self.build_lora_mm(L.wk, x), "Kcur", 0), d, self.n_head_kv, self.n_tokens)
        v = gg.reshape_3d(c, self.cb(self.build_lora_mm(L.wv, x), "Vcur", 0), d, self.n_head_kv, self.n_tokens)
        freqs = m.get("rope_freqs.weight", required=False)
        q = self.cb(self.build_rope(q, pos, freqs), "Qcur_rope", 0)
        k = self.cb(self.build_rope(k, pos, freqs), "Kcur_rope", 0)
        cur = self.build_attn(inp_attn, L.wo, None, q, k, v, kq_scale=1.0 / math.sqrt(d), il=0)
        ffn_inp = self.cb(gg.add(c, cur, residual), "ffn_inp", 0)
        cur = self.cb(self.build_norm(ffn_inp, L.ffn_norm, il=0), "post_attn_norm", 0)
        cur = self.build_ffn(cur, up=L.ffn_up, gate=L.ffn_gate, down=L.ffn_down,
                             type_op=FfnOp.SILU, type_gate=FfnGate.PAR, il=0)
        self.cb(cur, "ffn_out", 0)
        cur = self.cb(gg.add(c, cur, ffn_inp), "eagle3_prenorm", 0)
        cur = gg.get_rows(c, cur, out_ids)   # the rows that were asked for
        self.res.t_h_nextn = cur
        cur = self.cb(self.build_norm(cur, m.get("output_norm.weight"), type=NormType.RMS), "result_norm")
        cur = self.build_lora_mm(shared_output(m, p), cur)
        d2t = m.get("d2t", required=False)
        if d2t is not None:
            cur = scatter_d2t(self, cur, d2t, hp.n_vocab, -math.inf)
        self.res.t_logits = self.cb(cur, "result_output")
        self.expand(cur)
        self.build_sampling()
        return self.res
