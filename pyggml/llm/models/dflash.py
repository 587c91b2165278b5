"""DFlash block-diffusion drafts and their DSpark / DFlash2 variants (src/models/dflash.cpp).

One decoder, two modes chosen by the batch:
* KV injection (float rows only): the concatenated inputs of the target's `target_layers`
  at the target's positions go through `fc` and `rms * enc.output_norm` (the encoder, folded
  in), then every layer's K (per-head rms * attn_k_norm, NEOX RoPE) and V (or K with a
  weightless rms when the layer has no attn_v) are written into the draft's cache. No
  attention, no logits: the fused target features become the draft's context.
* Noise block (token ids): `[id_last, MASK...]` through the layers with attention over the
  injected context and the whole block (non-causal unless `attention.causal`), per-layer
  sliding windows when `attention.sliding_window_pattern` says so; logits for every row.
  DSpark adds a low-rank Markov bias chained in-graph over the block's slots; DFlash2 adds
  a causal block convolution around attention and FFN and a candidate selector whose
  lattice it exports in `t_h_nextn`.
The token embedding and output matrix are the target's when the draft has none.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pyggml as gg

from ..gguf_check import GGUFError
from ..gguf_keys import KeyReader
from ..graph import FfnGate, FfnOp, GraphContext, NormType
from ..inputs_draft import (InpBlocks, InpRows, draft_attention_hparams, n_blocks_of,
                            shared_output, shared_tensor)
from ..kv_cache import N_PAD, SWA_NONE, SWA_STANDARD, KVCache, pad_to
from ..kv_cache_iswa import KVCacheISWA
from ..model import ROPE_TYPE_NEOX
from . import register
from .eagle3 import scatter_d2t
from .llama import layer_weights

TENSORS = {
    "attn_norm": "attn_norm.weight", "wq": "attn_q.weight", "wk": "attn_k.weight",
    "wv": "attn_v.weight", "wo": "attn_output.weight", "attn_q_norm": "attn_q_norm.weight",
    "attn_k_norm": "attn_k_norm.weight", "attn_post_norm": "post_attention_norm.weight",
    "ffn_post_norm": "post_ffw_norm.weight", "out_scale": "layer_output_scale.weight",
    "attn_sinks": "attn_sinks.weight", "ffn_norm": "ffn_norm.weight",
    "ffn_gate": "ffn_gate.weight", "ffn_up": "ffn_up.weight", "ffn_down": "ffn_down.weight",
    "attn_conv_base": "attn_conv_base", "attn_conv_proj": "attn_conv_proj.weight",
    "ffn_conv_base": "ffn_conv_base", "ffn_conv_proj": "ffn_conv_proj.weight",
}


def _flag(kv, key, default: bool) -> bool:
    """A boolean key that converters write as a bool or as the string "true"/"false"."""
    v = kv.get(key)
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        return v == "true"
    raise GGUFError(f"key '{key}' must be a bool or 'true'/'false', got {v!r}")


@dataclass(frozen=True)
class DFlashHParams:
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
    target_layers: tuple
    block_size: int = 16
    sample_from_anchor: bool = True
    causal: bool = False
    has_confidence_head: bool = True
    embedding_scale: float = 0.0
    attention_scale: float = 0.0
    value_scale: float = 0.0
    ffn_op: int = FfnOp.SILU
    logit_scale: float = 0.0
    final_logit_softcapping: float = 0.0
    n_swa: int = 0
    swa_layers: tuple = ()
    conv_kernel: int = 0
    conv_group: int = 0
    selector_rank: int = 0
    selector_top_k: int = 0
    mask_id: int | None = None

    @property
    def n_embd_enc(self) -> int:
        return len(self.target_layers) * self.n_embd

    @classmethod
    def from_gguf(cls, kv: dict, arch: str) -> "DFlashHParams":
        r = KeyReader(kv, arch)
        layers = kv.get(f"{arch}.target_layers")
        if not isinstance(layers, list) or not layers:
            raise GGUFError(f"{arch}: DFlash drafts need '{arch}.target_layers' (the target "
                            f"layer inputs they read), got {layers!r}")
        if r.has("hyper_connection.count"):     # the DeepSeek V4 backbone (DSpark)
            from .dflash_dsv4 import dsv4_hparams
            return dsv4_hparams(kv, arch, dict(
                target_layers=tuple(int(x) for x in layers), block_size=r.get("block_size", 16),
                sample_from_anchor=_flag(kv, f"{arch}.sample_from_anchor", True),
                causal=_flag(kv, f"{arch}.attention.causal", False),
                has_confidence_head=_flag(kv, f"{arch}.has_confidence_head", True),
                mask_id=r.token_id("tokenizer.ggml.mask_token_id")))
        common = draft_attention_hparams(r, kv, arch, ROPE_TYPE_NEOX)
        n_layer = common["n_layer"]
        sections = kv.get(f"{arch}.rope.dimension_sections")
        if isinstance(sections, list) and len(sections) > 3 and sections[3]:
            # text and injected rows carry positions (p, p, p, 0): with no section reading the
            # 4th, M-RoPE rotates every pair by p as NEOX does
            raise NotImplementedError(f"{arch}: M-RoPE drafts with a 4th rope section "
                                      f"({sections}) are not supported")
        act = kv.get(f"{arch}.hidden_activation", "silu")
        if act not in ("silu", "gelu", "gelu_pytorch_tanh"):
            raise GGUFError(f"{arch}: unsupported hidden activation {act!r}")
        n_swa = r.get("attention.sliding_window", 0)
        swa_layers = ()
        if n_swa:
            swa_layers = r.get_arr("attention.sliding_window_pattern", n_layer, kind=bool,
                                   required=True)
        return cls(**common,
                   target_layers=tuple(int(x) for x in layers),
                   block_size=r.get("block_size", 16),
                   sample_from_anchor=_flag(kv, f"{arch}.sample_from_anchor", True),
                   causal=_flag(kv, f"{arch}.attention.causal", False),
                   has_confidence_head=_flag(kv, f"{arch}.has_confidence_head", True),
                   embedding_scale=r.get("embedding_scale", 0.0, float),
                   attention_scale=r.get("attention.scale", 0.0, float),
                   value_scale=r.get("attention.value_scale", 0.0, float),
                   ffn_op=FfnOp.SILU if act == "silu" else FfnOp.GELU,
                   logit_scale=r.get("logit_scale", 0.0, float),
                   final_logit_softcapping=r.get("final_logit_softcapping", 0.0, float),
                   n_swa=n_swa, swa_layers=swa_layers,
                   conv_kernel=r.get("conv_kernel_size", 0), conv_group=r.get("conv_group_size", 0),
                   selector_rank=r.get("selector_rank", 0),
                   selector_top_k=r.get("selector_top_k", 0),
                   mask_id=r.token_id("tokenizer.ggml.mask_token_id"))


@register("dflash")
class DFlashGraph(GraphContext):
    HParams = DFlashHParams

    @staticmethod
    def create_memory(model, hp: DFlashHParams, cp):
        if not isinstance(hp, DFlashHParams):      # the DSV4 backbone
            from .dflash_dsv4 import DSparkDSV4Graph
            return DSparkDSV4Graph.create_memory(model, hp, cp)
        kw = dict(n_embd_k_gqa=hp.head_dim_k * hp.n_head_kv, n_embd_v_gqa=hp.head_dim_v * hp.n_head_kv,
                  head_dim_k=hp.head_dim_k, head_dim_v=hp.head_dim_v, n_head_kv=hp.n_head_kv,
                  type_k=cp.type_k, type_v=cp.type_v, v_trans=not cp.flash_attn,
                  k_shift=(hp, model.get("rope_freqs.weight", required=False)))
        size = pad_to(cp.n_ctx, N_PAD)
        if hp.n_swa and any(hp.swa_layers):
            return KVCacheISWA(swa_layers=hp.swa_layers, n_swa=hp.n_swa, size=size,
                               swa_type=SWA_STANDARD, n_ubatch=cp.n_ubatch,
                               n_seq_max=cp.n_seq_max, **kw)
        return KVCache(n_layer=hp.n_layer, size=size, n_seq_max=cp.n_seq_max, swa_type=SWA_NONE, **kw)

    def build(self):
        if not isinstance(self.hparams, DFlashHParams):   # the DSV4 backbone
            from .dflash_dsv4 import DSparkDSV4Graph
            return DSparkDSV4Graph(self.model, self.params, self.res).build()
        if self.n_embd_head_k != self.n_embd_head_v:
            raise ValueError(f"dflash: head_dim_k={self.n_embd_head_k} must equal head_dim_v")
        self.embedding_scale = self.hparams.embedding_scale
        if self.ubatch.token is None:
            return self.build_injection()
        return self.build_block()

    def _rope(self, x, pos):
        return self.build_rope(x, pos, self.model.get("rope_freqs.weight", required=False))

    def _k_v(self, L, h, il):
        """K and V [d, Hkv, T] of layer il from h (V = rms(K) without weight when no attn_v)."""
        c, d, T = self.ctx0, self.n_embd_head_k, h.ne[1]
        k = gg.reshape_3d(c, self.build_lora_mm(L.wk, h), d, self.n_head_kv, T)
        if L.wv is None:
            v = gg.rms_norm(c, k, self.norm_rms_eps)
        else:
            v = gg.reshape_3d(c, self.build_lora_mm(L.wv, h), d, self.n_head_kv, T)
        k = self.build_norm(k, L.attn_k_norm, il=il)
        return k, v

    def build_injection(self):
        m, hp, c = self.model, self.hparams, self.ctx0
        inp = self.res.add_input(InpRows(c, self.n_tokens, hp.n_embd_enc))
        feats = self.cb(inp.embd, "inp_target_features")
        pos = self.build_inp_pos()
        inp_attn = self.build_attn_inp()
        g = self.build_lora_mm(m.get("fc.weight"), feats, m.get("fc.scale", required=False))
        g = self.cb(self.build_norm(g, m.get("enc.output_norm.weight")), "inp_g_embeddings")
        for il in range(self.n_layer):
            L = layer_weights(m, il, TENSORS)
            k, v = self._k_v(L, g, il)
            k = self.cb(self._rope(k, pos), "Kcur_injected", il)
            self.cb(v, "Vcur_injected", il)
            lay = inp_attn.layer(il)
            for w in (lay.part.cpy_k(c, k, lay.k_idxs, il), lay.part.cpy_v(c, v, lay.v_idxs, il)):
                if w is not None:
                    self.expand(w)
        self.res.t_embd = g
        self.expand(g)
        return self.res

    def build_block(self):
        m, hp, c, p = self.model, self.hparams, self.ctx0, self.params
        d, T = self.n_embd_head_k, self.n_tokens
        n_blocks = n_blocks_of(self.ubatch)
        if T % n_blocks:
            raise ValueError(f"dflash: {T} block tokens do not split into {n_blocks} equal blocks")
        self.res.add_input(InpBlocks(n_blocks))
        tok_embd = shared_tensor(m, p, "token_embd.weight")
        x = self.build_inp_embd(tok_embd)
        self.cb(x, "inp_noise_embd")
        tokens = self.res.t_inp_tokens
        pos = self.build_inp_pos()
        inp_attn = self.build_attn_inp()
        kq_scale = hp.attention_scale or 1.0 / math.sqrt(d)
        for il in range(self.n_layer):
            L = layer_weights(m, il, TENSORS)
            h = self.cb(self.build_norm(x, L.attn_norm, il=il), "noise_norm", il)
            attn_dyn = None
            if L.attn_conv_proj is not None:
                attn_dyn = self.build_lora_mm(L.attn_conv_proj, h)
                h = self.cb(self.block_conv(h, attn_dyn, L.attn_conv_base, 0, n_blocks), "attn_conv_in", il)
            q = gg.reshape_3d(c, self.build_lora_mm(L.wq, h), d, self.n_head, T)
            q = self.build_norm(q, L.attn_q_norm, il=il)
            k, v = self._k_v(L, h, il)
            q = self.cb(self._rope(q, pos), "Qcur", il)
            k = self.cb(self._rope(k, pos), "Kcur", il)
            self.cb(v, "Vcur", il)
            cur = self.build_attn(inp_attn, L.wo, None, q, k, v, sinks=L.attn_sinks,
                                  kq_scale=kq_scale, il=il)
            if hp.value_scale:
                cur = self.cb(gg.scale(c, cur, hp.value_scale), "attn_out_scaled", il)
            if attn_dyn is not None:
                cur = self.cb(self.block_conv(cur, attn_dyn, L.attn_conv_base, 1, n_blocks), "attn_conv_out", il)
            if L.attn_post_norm is not None:
                cur = self.cb(self.build_norm(cur, L.attn_post_norm, il=il), "attn_post_norm", il)
            ffn_inp = self.cb(gg.add(c, cur, x), "ffn_inp", il)
            cur = self.cb(self.build_norm(ffn_inp, L.ffn_norm, il=il), "ffn_norm", il)
            ffn_dyn = None
            if L.ffn_conv_proj is not None:
                ffn_dyn = self.build_lora_mm(L.ffn_conv_proj, cur)
                cur = self.cb(self.block_conv(cur, ffn_dyn, L.ffn_conv_base, 0, n_blocks), "ffn_conv_in", il)
            cur = self.build_ffn(cur, up=L.ffn_up, gate=L.ffn_gate, down=L.ffn_down,
                                 type_op=hp.ffn_op, type_gate=FfnGate.PAR, il=il)
            self.cb(cur, "ffn_out", il)
            if ffn_dyn is not None:
                cur = self.cb(self.block_conv(cur, ffn_dyn, L.ffn_conv_base, 1, n_blocks), "ffn_conv_out", il)
            if L.ffn_post_norm is not None:
                cur = self.cb(self.build_norm(cur, L.ffn_post_norm, il=il), "ffn_post_norm", il)
            cur = gg.add(c, cur, ffn_inp)
            if L.out_scale is not None:
                cur = gg.mul(c, cur, L.out_scale)
            x = self.cb(cur, "l_out", il)

        h = self.cb(self.build_norm(x, m.get("output_norm.weight"), type=NormType.RMS), "result_norm")
        self.res.t_embd = h
        own = m.get("output.weight", required=False)
        if own is None and m.get("token_embd.weight", required=False) is not None:
            own = m.get("token_embd.weight")   # a draft with its own embedding ties its head
        output = own if own is not None else shared_output(m, p)
        cur = self.build_lora_mm(output, h)
        selector = m.get("selector_hidden.weight", required=False)
        if selector is not None:   # the selector reads logits with the target's transforms
            if hp.logit_scale:
                cur = gg.scale(c, cur, hp.logit_scale)
            if hp.final_logit_softcapping > 0:
                cap = hp.final_logit_softcapping
                cur = gg.scale(c, gg.tanh(c, gg.scale(c, cur, 1.0 / cap)), cap)
        d2t = m.get("d2t", required=False)
        if d2t is not None:
            cur = scatter_d2t(self, cur, d2t, hp.n_vocab, -math.inf)
        self.res.t_logits = self.cb(cur, "result_output")
        self.expand(cur)
        if m.get("markov_w1.weight", required=False) is not None:
            self.markov_head(tokens, n_blocks)
        if selector is not None:
            self.selector(tokens, n_blocks)
        self.build_sampling()     # greedy drafts read the argmax of every (biased) row
        return self.res

    # ---- DSpark ------------------------------------------------------------------------------
    def markov_head(self, tokens, n_blocks: int):
        """logits'(i) = logits(i) + markov_w2 . markov_w1[prev(i)] per block, prev(first slot) =
        the anchor token, prev(i) = argmax logits'(i-1); every block in one op per slot."""
        m, hp, c = self.model, self.hparams, self.ctx0
        w1, w2 = m.get("markov_w1.weight"), m.get("markov_w2.weight")
        w2_s = m.get("markov_w2.scale", required=False)
        conf_w = m.get("conf_proj.weight", required=False)
        conf_b = m.get("conf_proj.bias", required=False)
        base = self.res.t_logits
        V, T = base.ne[0], base.ne[1]
        B = T // n_blocks
        if B > hp.block_size:   # untrained block length: the bias is left out
            return
        stride = B * base.nb[1]
        prev = gg.cont_1d(c, gg.view_2d(c, tokens, 1, n_blocks, B * tokens.nb[0], 0), n_blocks)
        start = 0 if hp.sample_from_anchor else 1
        cols, confs = [], []
        if start:   # slot 0 is a bonus anchor: its logits pass through unbiased
            cols.append(gg.cont(c, gg.view_2d(c, base, V, n_blocks, stride, 0)))
            if conf_w is not None:
                confs.append(gg.sigmoid(c, gg.cont(c, gg.view_2d(c, base, 1, n_blocks, stride, 0))))
        emb = self.res.t_embd
        d2t = m.get("d2t", required=False)
        for i in range(start, B):
            u = gg.get_rows(c, w1, prev)                       # [R, n_blocks]
            bias = self.build_lora_mm(w2, u, w2_s)             # [V_draft, n_blocks]
            if d2t is not None:
                bias = scatter_d2t(self, bias, d2t, V, 0.0)
            col = gg.add(c, gg.view_2d(c, base, V, n_blocks, stride, i * base.nb[1]), bias)
            cols.append(col)
            if conf_w is not None:
                e_i = gg.cont(c, gg.view_2d(c, emb, emb.ne[0], n_blocks, B * emb.nb[1], i * emb.nb[1]))
                conf = gg.mul_mat(c, conf_w, gg.concat(c, e_i, u, 0))
                if conf_b is not None:
                    conf = gg.add(c, conf, conf_b)
                confs.append(gg.sigmoid(c, conf))
            if i + 1 < B:
                prev = gg.argmax(c, col)
        out = cols[0]
        for col in cols[1:]:
            out = gg.concat(c, out, col, 1)
        # slot-major [V, n_blocks, B] back to the batch's block-major rows
        out = gg.cont(c, gg.permute(c, gg.reshape_3d(c, out, V, n_blocks, B), 0, 2, 1, 3))
        out = self.cb(gg.reshape_2d(c, out, V, T), "result_output")
        if confs:
            conf = confs[0]
            for x in confs[1:]:
                conf = gg.concat(c, conf, x, 1)
            conf = gg.cont(c, gg.permute(c, gg.reshape_3d(c, conf, 1, n_blocks, B), 0, 2, 1, 3))
            conf = gg.repeat(c, gg.reshape_2d(c, conf, 1, T), emb)
            self.res.t_h_nextn = self.cb(conf, "dspark_confidence")
            self.expand(conf)
        self.res.t_logits = out
        self.expand(out)

    # ---- DFlash2 -----------------------------------------------------------------------------
    def block_conv(self, h, dyn, base, side: int, n_blocks: int):
        """Causal depth-wise convolution along each block's slots with per-token weights:
        out[:, t] = sum_tap (dyn[group, tap, side, t] + base[:, tap, side]) * h[:, t - tap]."""
        hp, c = self.hparams, self.ctx0
        D, T = h.ne[0], h.ne[1]
        K, g = hp.conv_kernel, hp.conv_group
        G, B = D // g, T // n_blocks
        h = gg.cont_2d(c, h, D, T)
        blocks = gg.reshape_3d(c, h, D, B, n_blocks)
        coeffs = gg.reshape_4d(c, gg.cont_2d(c, dyn, dyn.ne[0], T), G, K, 2, T)
        side_c = gg.cont(c, gg.view_3d(c, coeffs, G, K, T, coeffs.nb[1], coeffs.nb[3], side * coeffs.nb[2]))
        side_c = gg.repeat_4d(c, gg.reshape_4d(c, side_c, 1, G, K, T), g, G, K, T)
        base_side = gg.reshape_4d(c, gg.view_1d(c, base, D * K, side * base.nb[2]), g, G, K, 1)
        weights = gg.add(c, side_c, base_side)                   # [g, G, K, T]
        out = None
        for tap in range(min(K, B)):
            vals = blocks
            if tap:
                prev = gg.view_3d(c, blocks, D, B - tap, n_blocks, blocks.nb[1], blocks.nb[2], 0)
                vals = gg.pad_ext(c, prev, 0, 0, tap, 0, 0, 0, 0, 0)
            vals = gg.reshape_2d(c, vals, D, T)
            w = gg.view_4d(c, weights, g, G, 1, T, weights.nb[1], weights.nb[2], weights.nb[3],
                           tap * weights.nb[2])
            term = gg.mul(c, gg.reshape_2d(c, gg.cont(c, w), D, T), vals)
            out = term if out is None else gg.add(c, out, term)
        return out

    def selector(self, tokens, n_blocks: int):
        """Per slot p >= 1: the top-k candidates and the k x k transition scores from the
        previous slot's candidates (the anchor for p = 1), packed into rows of width D."""
        m, hp, c = self.model, self.hparams, self.ctx0
        k, r = hp.selector_top_k, hp.selector_rank
        logits, emb = self.res.t_logits, self.res.t_embd
        D, T = self.n_embd, self.n_tokens
        B = T // n_blocks
        n_slots = min(B, hp.block_size)
        tab_prev = m.get("selector_predecessor.weight")
        tab_next = m.get("selector_successor.weight")
        cand = gg.top_k(c, logits, k)                                               # [k, T]
        unary = gg.reshape_2d(c, gg.get_rows(c, gg.reshape_3d(c, logits, 1, logits.ne[0], T), cand), k, T)
        gate = self.build_lora_mm(m.get("selector_hidden.weight"), emb)              # [r, T]

        def at_slot(t, width, p):     # [width, n_blocks]: slot p of every block
            t3 = gg.reshape_3d(c, t, width, B, n_blocks)
            return gg.cont(c, gg.view_2d(c, t3, width, n_blocks, t3.nb[2], p * t3.nb[1]))

        rows = gg.fill(c, c.new_tensor(gg.F32, [D, 1, n_blocks]), 0.0)
        for p in range(1, n_slots):
            cand_p = at_slot(cand, k, p)
            if p == 1:
                pred = gg.cont_1d(c, gg.view_2d(c, tokens, 1, n_blocks, B * tokens.nb[0], 0), n_blocks)
                n_pred = 1
            else:
                pred = gg.reshape_1d(c, at_slot(cand, k, p - 1), k * n_blocks)
                n_pred = k
            pred_v = gg.reshape_3d(c, gg.get_rows(c, tab_prev, pred), r, n_pred, n_blocks)
            succ = gg.reshape_3d(c, gg.get_rows(c, tab_next, gg.reshape_1d(c, cand_p, k * n_blocks)),
                                 r, k, n_blocks)
            gate_p = gg.reshape_3d(c, at_slot(gate, r, p), r, 1, n_blocks)
            cond = gg.mul(c, pred_v, gg.repeat(c, gate_p, pred_v))
            score = gg.mul_mat(c, succ, cond)                                       # [k, n_pred, nb]
            if n_pred == 1:
                score = gg.repeat_4d(c, score, k, k, n_blocks, 1)
            un = gg.reshape_3d(c, at_slot(unary, k, p), k, 1, n_blocks)
            score = gg.add(c, score, gg.repeat(c, un, score))
            row = gg.concat(c, gg.reshape_3d(c, gg.cast(c, cand_p, gg.F32), k, 1, n_blocks),
                            gg.reshape_3d(c, score, k * k, 1, n_blocks), 0)
            row = gg.pad(c, row, D - k - k * k, 0, 0, 0)
            rows = gg.concat(c, rows, row, 1)
        packed = self.cb(gg.reshape_2d(c, rows, D, n_slots * n_blocks), "dflash2_lattice")
        self.res.t_h_nextn = packed
        self.expand(packed)
