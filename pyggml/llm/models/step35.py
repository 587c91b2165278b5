"""Step3.5 (src/models/step35.cpp): a pure attention trunk with interleaved sliding-window
layers, and its multi-head MTP (`nextn_predict_layers` = N NextN blocks, chained by the
drafter: draft step i runs head i).

Each layer: RMS norm, Q/K/V (optional per-head Q/K RMS norms), NEOX RoPE on part of each
head — the window layers rotate `rope.dimension_count_swa` (default rope.dimension_count)
dims with base `rope.freq_base_swa`, the full-attention layers half of
`rope.dimension_count` with `rope.freq_base` — attention over the iSWA memory, an optional
per-head sigmoid gate `attn_gate [D, H]` on the attention output, the output projection,
residual; RMS norm, a SwiGLU FFN (dense, or sigmoid-routed experts plus a shared expert),
residual. The per-block keys `swiglu_clamp_exp` (routed experts) and `swiglu_clamp_shexp`
(dense and shared-expert FFNs) limit the SwiGLU: silu(gate) clamped to at most L, up to
[-L, L] (0: no limit). The trunk exports its last layer's output before the final norm as `h_nextn`
(every row, or only the output rows when masked); the NextN blocks are full Step3.5 layers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pyggml as gg

from ..gguf_check import GGUFError
from ..gguf_keys import KeyReader
from ..graph import FfnGate, FfnOp, Gating, NormType
from ..model import ROPE_TYPE_NEOX
from . import register
from .decoder import DecoderGraph, get_tensor, iswa_kv_cache
from .nextn import NextNGraph, check_nextn_tensors

REQUIRED = {"attn_norm": "attn_norm.weight", "wq": "attn_q.weight", "wk": "attn_k.weight",
            "wv": "attn_v.weight", "wo": "attn_output.weight", "ffn_norm": "ffn_norm.weight"}
OPTIONAL = {"attn_q_norm": "attn_q_norm.weight", "attn_k_norm": "attn_k_norm.weight",
            "attn_gate": "attn_gate.weight",
            "ffn_gate": "ffn_gate.weight", "ffn_up": "ffn_up.weight", "ffn_down": "ffn_down.weight",
            "ffn_gate_inp": "ffn_gate_inp.weight", "ffn_up_exps": "ffn_up_exps.weight",
            "ffn_gate_exps": "ffn_gate_exps.weight", "ffn_down_exps": "ffn_down_exps.weight",
            "ffn_exp_probs_b": "exp_probs_b.bias",
            "ffn_gate_shexp": "ffn_gate_shexp.weight", "ffn_up_shexp": "ffn_up_shexp.weight",
            "ffn_down_shexp": "ffn_down_shexp.weight"}
TENSORS = {**REQUIRED, **OPTIONAL}


@dataclass(frozen=True)
class Step35HParams:
    """`step35.*` keys. n_layer counts the trunk; block_count = n_layer + n_nextn."""
    arch: str
    n_vocab: int
    n_ctx_train: int
    n_embd: int
    n_layer: int              # block_count - nextn_predict_layers
    n_nextn: int              # nextn_predict_layers
    n_ff: int                 # feed_forward_length (dense layers)
    n_head: int
    n_head_kv: int
    head_dim_k: int
    head_dim_v: int
    n_rot_full: int           # rope.dimension_count / 2 (full-attention layers)
    n_rot_swa: int            # rope.dimension_count_swa (default rope.dimension_count)
    rope_freq_base: float     # full-attention layers
    rope_freq_base_swa: float # window layers (default 10000)
    rms_eps: float
    n_swa: int                # attention.sliding_window
    swa_layers: tuple         # attention.sliding_window_pattern, one per block (NextN too)
    n_ff_exp: int             # expert_feed_forward_length (required)
    n_expert: int = 0
    n_expert_used: int = 0
    expert_gating: int = Gating.SIGMOID
    expert_weights_scale: float = 0.0
    expert_weights_norm: bool = False
    swiglu_clamp_exp: tuple = ()    # per block (NextN too): SwiGLU limit of the routed experts
    swiglu_clamp_shexp: tuple = ()  # per block: limit of the dense / shared-expert FFN (0: none)
    rope_freq_scale: float = 1.0
    rope_type: int = ROPE_TYPE_NEOX
    bos_id: int | None = None
    eos_id: int | None = None

    @property
    def n_rot(self) -> int:
        return self.n_rot_full

    def is_swa(self, il: int) -> bool:
        return bool(self.swa_layers[il])

    @classmethod
    def from_gguf(cls, kv: dict, arch: str) -> "Step35HParams":
        r = KeyReader(kv, arch)
        n_all = r.get("block_count", required=True)
        n_nextn = r.get("nextn_predict_layers", 0)
        n_embd = r.get("embedding_length", required=True)
        n_head = r.get("attention.head_count", required=True)
        if n_all - n_nextn <= 0 or n_head <= 0 or n_embd <= 0:
            raise GGUFError(f"{arch}: needs trunk layers, heads and a positive embedding length "
                            f"(block_count {n_all}, nextn {n_nextn}, heads {n_head})")
        head_k = r.get("attention.key_length", n_embd // n_head)
        n_rot = r.get("rope.dimension_count", head_k)
        if r.get("rope.scaling.factor", 0.0, float) not in (0.0, 1.0):
            raise GGUFError(f"{arch}: RoPE scaling is not supported by pyggml's step35 yet")
        tokens = kv.get("tokenizer.ggml.tokens")
        return cls(arch=arch, n_vocab=r.get("vocab_size", len(tokens) if isinstance(tokens, list) else 0),
                   n_ctx_train=r.get("context_length", required=True), n_embd=n_embd,
                   n_layer=n_all - n_nextn, n_nextn=n_nextn, n_ff=r.get("feed_forward_length", 0),
                   n_head=n_head, n_head_kv=r.get("attention.head_count_kv", n_head),
                   head_dim_k=head_k, head_dim_v=r.get("attention.value_length", head_k),
                   n_rot_full=n_rot // 2, n_rot_swa=r.get("rope.dimension_count_swa", n_rot),
                   rope_freq_base=r.get("rope.freq_base", 10000.0, float),
                   rope_freq_base_swa=r.get("rope.freq_base_swa", 10000.0, float),
                   rms_eps=r.get("attention.layer_norm_rms_epsilon", required=True, kind=float),
                   n_swa=r.get("attention.sliding_window", required=True),
                   swa_layers=r.get_arr("attention.sliding_window_pattern", n_all, kind=bool,
                                        required=True),
                   n_ff_exp=r.get("expert_feed_forward_length", required=True),
                   n_expert=r.get("expert_count", 0), n_expert_used=r.get("expert_used_count", 0),
                   expert_gating=r.get("expert_gating_func", 0) or Gating.SIGMOID,
                   expert_weights_scale=r.get("expert_weights_scale", 0.0, float),
                   expert_weights_norm=r.get("expert_weights_norm", False, bool),
                   swiglu_clamp_exp=r.get_arr("swiglu_clamp_exp", n_all, 0.0, float),
                   swiglu_clamp_shexp=r.get_arr("swiglu_clamp_shexp", n_all, 0.0, float),
                   bos_id=r.token_id("tokenizer.ggml.bos_token_id"),
                   eos_id=r.token_id("tokenizer.ggml.eos_token_id"))


@register("step35")
class Step35Graph(DecoderGraph):
    HParams = Step35HParams
    TENSORS = TENSORS
    REQUIRED = tuple(REQUIRED)

    def __init__(self, model, params, res):
        super().__init__(model, params, res)
        # the SwiGLU limits clamp silu(gate) from above and up to [-L, L], layer by layer
        self.swiglu_clamp_exp = self.hparams.swiglu_clamp_exp
        self.swiglu_clamp_shexp = self.hparams.swiglu_clamp_shexp

    @staticmethod
    def create_memory(model, hp: Step35HParams, cp):
        """iSWA caches of the trunk layers, or (MTP context) of the NextN layers only. A
        trunk-only file (NextN blocks declared, their tensors elsewhere) decodes; only an
        MTP context needs the NextN tensors."""
        if cp.ctx_type == "mtp":
            if hp.n_nextn <= 0:
                raise ValueError(f"{hp.arch}: an MTP context needs NextN blocks; the model has none")
            check_nextn_tensors(model, hp.n_layer, hp.n_nextn, REQUIRED.values())
            layers = range(hp.n_layer, hp.n_layer + hp.n_nextn)
        else:
            layers = range(hp.n_layer)
        return iswa_kv_cache(hp, cp, hp.swa_layers, hp.n_swa, layers=list(layers))

    def build_attention(self, inp_attn, pos, cur, L, il):
        """Q/K/V with per-head norms, partial NEOX RoPE whose width and base depend on the
        layer kind, attention, the optional per-head sigmoid gate, the output projection."""
        c, hp = self.ctx0, self.hparams
        d, dv, H, Hkv = hp.head_dim_k, hp.head_dim_v, hp.n_head, hp.n_head_kv
        q, k, v = self.build_qkv(L, cur, d, H, d, Hkv, dv, Hkv, il=il)
        if L.attn_q_norm is not None:
            q = self.cb(self.build_norm(q, L.attn_q_norm, type=NormType.RMS, il=il), "Qcur_normed", il)
        if L.attn_k_norm is not None:
            k = self.cb(self.build_norm(k, L.attn_k_norm, type=NormType.RMS, il=il), "Kcur_normed", il)
        swa = hp.is_swa(il)
        factors = None if swa else get_tensor(self.model, "rope_freqs.weight")
        self.freq_base = hp.rope_freq_base_swa if swa else hp.rope_freq_base
        n_rot = hp.n_rot_swa if swa else hp.n_rot_full
        q = self.cb(self.build_rope(q, pos, factors, n_rot=n_rot), "Qcur_pos", il)
        k = self.cb(self.build_rope(k, pos, factors, n_rot=n_rot), "Kcur_pos", il)
        out = self.build_attn(inp_attn, None, None, q, k, v, kq_scale=1.0 / math.sqrt(d), il=il)
        self.cb(out, "attn_out", il)
        if L.attn_gate is not None:              # per-head sigmoid gate
            T = out.ne[1]
            gate = self.cb(gg.sigmoid(c, self.build_lora_mm(L.attn_gate, cur)), "attn_gate_sigmoid", il)
            out = gg.mul(c, gg.reshape_3d(c, out, dv, H, T), gg.reshape_3d(c, gate, 1, H, T))
            out = self.cb(gg.reshape_2d(c, out, dv * H, T), "attn_gated", il)
        return self.cb(self.build_lora_mm(L.wo, out), "attn_proj", il)

    def build_feed_forward(self, cur, L, il):
        """The dense SwiGLU FFN, or sigmoid-routed experts + the shared expert."""
        hp = self.hparams
        if L.ffn_gate_inp is None:
            return self.build_dense_ffn(cur, L, il, type_op=FfnOp.SILU, type_gate=FfnGate.PAR)
        return self.build_moe_part(cur, L, il, gating=Gating(hp.expert_gating),
                                   norm_w=hp.expert_weights_norm, w_scale=hp.expert_weights_scale)

    def build(self):
        c = self.ctx0
        tok_embd, output = self.token_embd_and_output()
        x, pos, inp_attn, out_ids = self.build_decoder_inputs(tok_embd)
        masked = self.params.nextn_masked
        x = self.build_layers(x, inp_attn, pos, out_ids, crop_last=masked)
        self.res.t_h_nextn = self.cb(x, "h_nextn")          # pre-norm
        if not masked:
            x = gg.get_rows(c, x, out_ids)
        return self.build_output(x, output)


class Step35MtpGraph(NextNGraph, Step35Graph):
    """The draft graph of NextN head `nextn_layer_offset`: one full Step3.5 layer over the
    draft's iSWA cache, h_nextn at the pre-norm point (output rows)."""
    H_NEXTN_POST_NORM = False

    def nextn_inputs(self):
        return self.build_attn_inp(), self.build_inp_pos()

    def nextn_block(self, inputs, x, il):
        inp_attn, pos = inputs
        return self.build_layer(inp_attn, pos, x, il)


Step35Graph.MtpGraph = Step35MtpGraph
