"""Qwen3.5 (src/models/qwen35.cpp with the gated delta-net layer of delta-net-base.cpp).

A hybrid trunk: every `full_attention_interval`-th layer is gated full attention (Q and a
per-head output gate from one projection, per-head RMS norms on Q and K, IMROPE, sigmoid
gate on the attention output), the others are gated delta-net layers: one projection to
q | k | v through a causal conv (its last d_conv-1 inputs are the conv state), SiLU, L2
norms on q and k, the delta rule `gated_delta_net` with the decay g = softplus(alpha +
dt_bias) * A and the write strength beta = sigmoid(b), then an RMS norm gated by SiLU(z).
Each layer ends with a post-attention RMS norm and a SwiGLU FFN. The NextN (MTP) block
after the trunk (a gated full-attention layer) runs only in the MTP draft graph
(Qwen35MtpGraph, over a KV cache of the NextN layer alone); the trunk exports its
post-norm hidden state as `h_nextn` (every row, or only the output rows when masked).

With n_rs_seq snapshots (K = n_rs_seq + 1) the delta-net op returns K states, most recent
first; conv windows ending 0..K-1 tokens before the end are written too (their start is
clamped at the ubatch's first conv input, as upstream does). Conv states are stored
channel-packed (see build_conv_state), the transpose of upstream's rows. Small projections
that share an input (qkv | z | beta | alpha, q | k | v, gate | up) run as one mul_mat over a
fused weight copy (see fused_weight); the logits are the same bits as separate mul_mats.
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

import pyggml as gg

from ..gguf_check import GGUFError
from ..gguf_keys import KeyReader
from ..graph import FfnGate, FfnOp, GraphContext, NormType
from ..inputs import GraphInput, _host_view, _input
from ..kv_cache import N_PAD, KVCache, cells_for, pad_to
from ..memory_hybrid import HybridMemory
from ..memory_recurrent import RecurrentMemory
from . import register
from .nextn import NEXTN, NEXTN_OPTIONAL, NextNGraph, check_nextn_tensors

ROPE_TYPE_IMROPE = 40
ROPE_SECTIONS = 4

COMMON = {"attn_norm": "attn_norm.weight", "post_norm": "post_attention_norm.weight",
          "ffn_gate": "ffn_gate.weight", "ffn_up": "ffn_up.weight", "ffn_down": "ffn_down.weight"}
ATTN = {"wq": "attn_q.weight", "wk": "attn_k.weight", "wv": "attn_v.weight",
        "wo": "attn_output.weight", "q_norm": "attn_q_norm.weight", "k_norm": "attn_k_norm.weight"}
LINEAR = {"wqkv": "attn_qkv.weight", "wqkv_gate": "attn_gate.weight",
          "ssm_conv1d": "ssm_conv1d.weight", "ssm_dt_b": "ssm_dt.bias", "ssm_a": "ssm_a",
          "ssm_beta": "ssm_beta.weight", "ssm_alpha": "ssm_alpha.weight",
          "ssm_norm": "ssm_norm.weight", "ssm_out": "ssm_out.weight"}
TENSORS = {**COMMON, **ATTN, **LINEAR}


@dataclass(frozen=True)
class Qwen35HParams:
    """`qwen35.*` keys. n_layer counts the trunk; block_count = n_layer + n_nextn."""
    arch: str
    n_vocab: int
    n_ctx_train: int
    n_embd: int
    n_layer: int              # block_count - nextn_predict_layers
    n_nextn: int              # nextn_predict_layers
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim_k: int           # attention.key_length (= value_length)
    head_dim_v: int
    n_rot: int                # rope.dimension_count
    rope_sections: tuple      # rope.dimension_sections (4)
    rope_freq_base: float
    rms_eps: float
    d_conv: int               # ssm.conv_kernel
    d_inner: int              # ssm.inner_size
    d_state: int              # ssm.state_size (head size of q, k and v)
    n_v_head: int             # ssm.time_step_rank
    n_k_head: int             # ssm.group_count
    recurrent: tuple          # per trunk layer: True = delta-net layer
    rope_freq_scale: float = 1.0
    rope_type: int = ROPE_TYPE_IMROPE
    bos_id: int | None = None
    eos_id: int | None = None

    @property
    def conv_dim(self) -> int:
        return self.d_inner + 2 * self.n_k_head * self.d_state

    @property
    def n_embd_r(self) -> int:
        return (self.d_conv - 1) * self.conv_dim

    @property
    def n_embd_s(self) -> int:
        return self.d_state * self.d_inner

    @classmethod
    def from_gguf(cls, kv: dict, arch: str) -> "Qwen35HParams":
        r = KeyReader(kv, arch)
        n_all = r.get("block_count", required=True)
        n_nextn = r.get("nextn_predict_layers", 0)
        n_layer = n_all - n_nextn
        n_embd = r.get("embedding_length", required=True)
        n_head = r.get("attention.head_count", required=True)
        head_k = r.get("attention.key_length", n_embd // max(n_head, 1))
        head_v = r.get("attention.value_length", head_k)
        ssm = {k: r.get(f"ssm.{g}", required=True) for k, g in (
            ("d_conv", "conv_kernel"), ("d_inner", "inner_size"), ("d_state", "state_size"),
            ("n_v_head", "time_step_rank"), ("n_k_head", "group_count"))}
        if n_layer <= 0 or n_head <= 0 or min(ssm.values()) <= 0 or head_k != head_v:
            raise GGUFError(f"{arch}: needs trunk layers, heads, positive ssm sizes and "
                            f"key_length == value_length (got {n_layer}, {n_head}, {ssm}, "
                            f"{head_k}/{head_v})")
        if ssm["d_inner"] != ssm["d_state"] * ssm["n_v_head"] or ssm["n_v_head"] % ssm["n_k_head"]:
            raise GGUFError(f"{arch}: ssm.inner_size must be state_size * time_step_rank and "
                            f"time_step_rank a multiple of group_count, got {ssm}")
        if r.has("attention.recurrent_layers"):
            rec = tuple(bool(x) for x in r.get_arr("attention.recurrent_layers", n_all, kind=bool))[:n_layer]
        else:
            interval = r.get("full_attention_interval", 4)
            rec = tuple((i + 1) % interval != 0 for i in range(n_layer))
        sections = r.get_arr("rope.dimension_sections", ROPE_SECTIONS, required=True)
        tokens = kv.get("tokenizer.ggml.tokens")
        return cls(arch=arch, n_vocab=r.get("vocab_size", len(tokens) if isinstance(tokens, list) else 0),
                   n_ctx_train=r.get("context_length", required=True), n_embd=n_embd,
                   n_layer=n_layer, n_nextn=n_nextn, n_ff=r.get("feed_forward_length", required=True),
                   n_head=n_head, n_head_kv=r.get("attention.head_count_kv", n_head),
                   head_dim_k=head_k, head_dim_v=head_v, n_rot=r.get("rope.dimension_count", head_k),
                   rope_sections=tuple(int(s) for s in sections),
                   rope_freq_base=r.get("rope.freq_base", 10000.0, float),
                   rms_eps=r.get("attention.layer_norm_rms_epsilon", required=True, kind=float),
                   recurrent=rec, bos_id=r.token_id("tokenizer.ggml.bos_token_id"),
                   eos_id=r.token_id("tokenizer.ggml.eos_token_id"), **ssm)


class InpPosMulti(GraphInput):
    """Positions I32 [4*T] for IMROPE: text tokens carry their position in every stream."""

    def __init__(self, ctx, n_tokens: int):
        self.pos = _input(ctx, gg.I32, [ROPE_SECTIONS * n_tokens], "inp_pos")
        self.n_tokens = n_tokens
        self._view = False

    def set_input(self, ub):
        if self._view is False:
            v = _host_view(self.pos)
            self._view = None if v is None else v.reshape(ROPE_SECTIONS, -1)
        if self._view is not None:
            self._view[...] = ub.pos[0] if self.n_tokens == 1 else ub.pos

    def can_reuse(self, params):
        return self.n_tokens == len(params.ubatch.pos)


def gated_delta_net(c, q, k, v, g, beta, state, K: int):
    """ggml's gated_delta_net when this build has it; else the same recurrence token by token
    from basic ops, packed the same way: outputs [S, H, T, n_seqs] (scaled by 1/sqrt(S)),
    then min(T, K) states [S, S, H, n_seqs], most recent first."""
    if hasattr(gg, "gated_delta_net"):
        return gg.gated_delta_net(c, q, k, v, g, beta, state, K)
    S, H, T = v.ne[0], v.ne[1], v.ne[2]
    if v.ne[3] != 1:
        raise ValueError("gated_delta_net (composite): one sequence per ubatch")
    if q.ne[1] != H:
        q = gg.repeat_4d(c, q, S, H, T, 1)
        k = gg.repeat_4d(c, k, S, H, T, 1)

    def tok(x, t, rows):
        x = gg.view_3d(c, x, x.ne[0], x.ne[1], 1, x.nb[1], x.nb[2], t * x.nb[2])
        return gg.reshape_3d(c, gg.cont(c, x), rows, 1, H) if rows else gg.cont(c, x)

    s = gg.reshape_3d(c, state, S, S, H)
    outs, snaps = [], []
    for t in range(T):
        qt, kt, vt = tok(q, t, S), tok(k, t, S), tok(v, t, S)
        gt = gg.reshape_3d(c, tok(g, t, 0), 1, 1, H)
        bt = gg.reshape_3d(c, tok(beta, t, 0), 1, 1, H)
        s = gg.mul(c, s, gg.exp(c, gt))
        delta = gg.mul(c, gg.sub(c, vt, gg.mul_mat(c, s, kt)), bt)
        s = gg.add(c, s, gg.mul_mat(c, gg.reshape_3d(c, kt, 1, S, H),
                                     gg.reshape_3d(c, delta, 1, S, H)))
        outs.append(gg.reshape_1d(c, gg.mul_mat(c, s, qt), S * H))
        if T - 1 - t < K:
            snaps.append(gg.reshape_1d(c, s, S * S * H))
    out = outs[0]
    for o in outs[1:]:
        out = gg.concat(c, out, o, 0)
    out = gg.scale(c, out, 1.0 / math.sqrt(S))
    for st in reversed(snaps):                       # slot 0 (the final state) first
        out = gg.concat(c, out, st, 0)
    return out


def l2_norm(c, x, eps: float):
    """x / sqrt(||x||^2 + eps) over dim 0, as upstream computes it (an RMS norm rescaled)."""
    n = x.ne[0]
    return gg.scale(c, gg.rms_norm(c, x, eps / n), 1.0 / math.sqrt(n))


# Projections that read the same input are run as one wider mul_mat over a fused copy of
# their weights when the copy is small: there a mat-vec costs about as much as a graph node's
# fixed overhead, so one node instead of four pays; big weights keep their own mul_mats (no
# copy of the model). Each output row is the same dot product either way (same bits).
FUSE_MAX_BYTES = 1 << 20


def fused_weight(model, names):
    """One weight [K, sum of rows] holding the rows of `names` in order (cached on the model),
    or None when they cannot be joined (different types or K, not 2-D, not in host memory)
    or are too big."""
    cache = model.__dict__.setdefault("_fused_weights", {})
    key = tuple(names)
    if key in cache:
        return cache[key]
    parts = [model.get(n, required=False) for n in names]
    fused = None
    if all(t is not None for t in parts):
        ne0, typ = parts[0].ne[0], parts[0].type
        total = sum(t.nbytes for t in parts)
        if total <= FUSE_MAX_BYTES and all(
                t.type == typ and t.ne[0] == ne0 and t.ne[2] == 1 and t.ne[3] == 1
                and t.is_contiguous() and t.backend_name == "cpu" for t in parts):
            raw_buf = np.empty(total + 64, np.uint8)       # 64-byte aligned, as the kernels like
            start = -raw_buf.ctypes.data % 64
            buf = raw_buf[start:start + total]
            off = 0
            for t in parts:
                raw = (ctypes.c_uint8 * t.nbytes).from_address(t.data_ptr)
                buf[off:off + t.nbytes] = np.frombuffer(raw, np.uint8)
                off += t.nbytes
            ctx = gg.Context(mem_size=0, no_alloc=True)
            fused = ctx.tensor_from_buffer(buf, typ, [ne0, sum(t.ne[1] for t in parts)])
            fused.name = "+".join(names)
            cache.setdefault("_contexts", []).append(ctx)
    cache[key] = fused
    return fused


def split_rows(c, out, widths, T, n_seqs):
    """Views [w, T, n_seqs] of consecutive row blocks of a fused mul_mat's output."""
    es, nb1 = gg.type_size(out.type), out.nb[1]
    views, off = [], 0
    for w in widths:
        views.append(gg.view_3d(c, out, w, T, n_seqs, nb1, nb1 * T, off * es))
        off += w
    return views


@register("qwen35")
class Qwen35Graph(GraphContext):
    HParams = Qwen35HParams
    HYBRID_NODE_BUDGET = True

    @staticmethod
    def create_memory(model, hp: Qwen35HParams, cp):
        Qwen35Graph.check_nextn(model, hp)
        e = hp.head_dim_k * hp.n_head_kv
        if cp.ctx_type == "mtp":          # the draft context: a plain cache of the NextN block
            if hp.n_nextn != 1:
                raise ValueError(f"{hp.arch}: an MTP context needs exactly one NextN block, "
                                 f"the model has {hp.n_nextn}")
            return KVCache(n_layer=hp.n_layer + hp.n_nextn, layers=[hp.n_layer], n_embd_k_gqa=e,
                           n_embd_v_gqa=e, head_dim_k=hp.head_dim_k, head_dim_v=hp.head_dim_v,
                           n_head_kv=hp.n_head_kv, size=pad_to(cp.n_ctx, N_PAD),
                           type_k=cp.type_k, type_v=cp.type_v, v_trans=not cp.flash_attn,
                           n_seq_max=cp.n_seq_max)
        attn_layers = [il for il in range(hp.n_layer) if not hp.recurrent[il]]
        rec_layers = [il for il in range(hp.n_layer) if hp.recurrent[il]]
        kv = KVCache(n_layer=hp.n_layer, layers=attn_layers, n_embd_k_gqa=e, n_embd_v_gqa=e,
                     head_dim_k=hp.head_dim_k, head_dim_v=hp.head_dim_v, n_head_kv=hp.n_head_kv,
                     size=cells_for(cp.n_ctx, cp.n_seq_max), type_k=cp.type_k, type_v=cp.type_v,
                     v_trans=not cp.flash_attn, n_seq_max=cp.n_seq_max)
        rs = RecurrentMemory(layers=rec_layers, n_embd_r=hp.n_embd_r, n_embd_s=hp.n_embd_s,
                             n_seq_max=cp.n_seq_max, n_rs_seq=cp.n_rs_seq)
        return HybridMemory(kv, rs)

    @staticmethod
    def check_nextn(model, hp):
        """The NextN blocks' tensors (attention block + eh_proj, enorm, hnorm) must all exist."""
        check_nextn_tensors(model, hp.n_layer, hp.n_nextn, list(COMMON.values()) + list(ATTN.values()))

    def nextn_weights(self, j: int = 0) -> SimpleNamespace:
        """The tensors of NextN block j (optional ones None)."""
        il = self.hparams.n_layer + j
        m = self.model
        names = {**COMMON, **ATTN, **NEXTN}
        w = {f: m.get(f"blk.{il}.{n}") for f, n in names.items()}
        w.update({f: m.get(f"blk.{il}.{n}", required=False) for f, n in NEXTN_OPTIONAL.items()})
        return SimpleNamespace(**w)

    def layer(self, il: int) -> SimpleNamespace:
        names = {**COMMON, **(LINEAR if self.hparams.recurrent[il] else ATTN)}
        return SimpleNamespace(**{f: self.model.get(f"blk.{il}.{n}") for f, n in names.items()})

    # ---- gated full attention ------------------------------------------------------------
    def build_layer_attn(self, inp, cur, pos, L, il):
        c, hp = self.ctx0, self.hparams
        d, H, Hkv, T = hp.head_dim_k, hp.n_head, hp.n_head_kv, self.n_tokens
        wqkv = fused_weight(self.model, [L.wq.name, L.wk.name, L.wv.name])
        if wqkv is not None:               # q | gate per head, then k, then v in one mul_mat
            qg, k, v = split_rows(c, self.build_lora_mm(wqkv, cur),
                                  (2 * d * H, d * Hkv, d * Hkv), T, 1)
        else:
            qg, k, v = (self.build_lora_mm(w, cur) for w in (L.wq, L.wk, L.wv))
        self.cb(qg, "Qcur_full", il)
        es, nb1 = gg.type_size(qg.type), qg.nb[1]
        q = gg.view_3d(c, qg, d, H, T, 2 * d * es, nb1, 0)
        gate = gg.view_3d(c, qg, d, H, T, 2 * d * es, nb1, d * es)
        # the sigmoid reads the strided gate rows itself (no copy first); same values
        gate = self.cb(gg.reshape_2d(c, gg.sigmoid(c, gate), d * H, T), "gate_reshaped", il)
        q = self.cb(self.build_norm(q, L.q_norm, type=NormType.RMS, il=il), "Qcur_normed", il)
        k = gg.view_3d(c, k, d, Hkv, T, d * es, k.nb[1], 0)
        k = self.cb(self.build_norm(k, L.k_norm, type=NormType.RMS, il=il), "Kcur_normed", il)
        v = gg.view_3d(c, v, d, Hkv, T, d * es, v.nb[1], 0)
        rope = dict(n_dims=hp.n_rot, sections=list(hp.rope_sections), mode=ROPE_TYPE_IMROPE,
                    n_ctx_orig=hp.n_ctx_train, freq_base=hp.rope_freq_base, freq_scale=1.0,
                    ext_factor=0.0, attn_factor=1.0, beta_fast=32.0, beta_slow=1.0)
        q = self.cb(gg.rope_multi(c, q, pos, None, **rope), "Qcur", il)
        k = self.cb(gg.rope_multi(c, k, pos, None, **rope), "Kcur", il)
        self.cb(v, "Vcur", il)
        cur = self.build_attn(inp, None, None, q, k, v, kq_scale=1.0 / math.sqrt(d), il=il)
        cur = self.cb(gg.mul(c, cur, gate), "attn_gated", il)
        return self.cb(self.build_lora_mm(L.wo, cur), "attn_output", il)

    # ---- gated delta-net ---------------------------------------------------------------
    def build_conv_state(self, inp, conv_all, qkv_mixed, d_conv, conv_dim):
        """[conv state | this ubatch's inputs] along time, writing the state planes. A state row
        holds its d_conv-1 inputs channel-packed ([conv_dim, d_conv-1]), so the join and every
        window written back are whole-row copies; the conv reads the transposed view."""
        c, r = self.ctx0, inp.rctx
        conv = self.build_rs(inp, conv_all, self.hparams.n_embd_r)
        conv = gg.reshape_3d(c, conv, conv_dim, d_conv - 1, r.n_seqs)
        conv_in = gg.concat(c, conv, qkv_mixed, 1)       # [conv_dim, d_conv-1+T, n_seqs]
        row_count = (d_conv - 1) * conv_dim
        row_size = gg.row_size(conv_all.type, row_count)
        T = conv_in.ne[1] - (d_conv - 1)
        for slot in range(r.K):                        # every plane, windows clamped at 0
            start = max(0, T - slot)
            last = gg.view_2d(c, conv_in, row_count, r.n_seqs, conv_in.nb[2], start * conv_in.nb[1])
            dst = gg.view_2d(c, conv_all, row_count, r.n_seqs, conv_all.nb[1],
                             (slot * r.size + r.head) * row_size)
            self.expand(gg.cpy(c, last, dst))
        return gg.transpose(c, conv_in)

    def build_layer_attn_linear(self, inp, cur, L, il):
        c, hp, r = self.ctx0, self.hparams, inp.rctx
        S, Hk, Hv, T, n_seqs = hp.d_state, hp.n_k_head, hp.n_v_head, self.n_tokens, r.n_seqs
        conv_dim = hp.conv_dim
        ws = (L.wqkv, L.wqkv_gate, L.ssm_beta, L.ssm_alpha)
        fused = fused_weight(self.model, [w.name for w in ws])
        if fused is not None:              # qkv | z | beta | alpha in one mul_mat
            qkv, z, beta, alpha = split_rows(c, self.build_lora_mm(fused, cur),
                                             (conv_dim, S * Hv, Hv, Hv), T, n_seqs)
        else:
            qkv, z, beta, alpha = (gg.reshape_3d(c, self.build_lora_mm(w, cur), w.ne[1], T, n_seqs)
                                   for w in ws)
        self.cb(qkv, "linear_attn_qkv_mixed", il)
        self.cb(z, "z", il)
        fs = gg.type_size(z.type)
        beta = gg.view_4d(c, beta, 1, Hv, T, n_seqs, fs, beta.nb[1], beta.nb[2], 0)
        beta = self.cb(gg.sigmoid(c, beta), "beta_sigmoid", il)
        g = gg.mul(c, gg.softplus(c, gg.add(c, alpha, L.ssm_dt_b)), L.ssm_a)
        g = gg.reshape_4d(c, self.cb(g, "gate", il), 1, Hv, T, n_seqs)

        conv_all, ssm_all = r.get_r_l(il), r.get_s_l(il)
        conv_in = self.build_conv_state(inp, conv_all, qkv, L.ssm_conv1d.ne[0], conv_dim)
        state = self.build_rs(inp, ssm_all, hp.n_embd_s)
        state = gg.reshape_4d(c, state, S, S, Hv, n_seqs)
        conv_out = self.cb(gg.silu(c, gg.ssm_conv(c, conv_in, L.ssm_conv1d)), "conv_output_silu", il)
        es = gg.type_size(conv_out.type)
        nb1 = conv_out.nb[1]
        # q and k heads are adjacent: one row-wise L2 norm over both (same rows, fewer nodes)
        qk = gg.view_4d(c, conv_out, S, 2 * Hk, T, n_seqs, S * es, nb1, nb1 * T, 0)
        qk = l2_norm(c, qk, hp.rms_eps)
        q = gg.view_4d(c, qk, S, Hk, T, n_seqs, S * es, qk.nb[2], qk.nb[3], 0)
        k = gg.view_4d(c, qk, S, Hk, T, n_seqs, S * es, qk.nb[2], qk.nb[3], S * Hk * es)
        v = gg.view_4d(c, conv_out, S, Hv, T, n_seqs, S * es, nb1, nb1 * T, 2 * S * Hk * es)

        K = r.K
        out = gated_delta_net(c, q, k, v, g, beta, state, K)
        D = S * S * Hv
        n_scores = S * Hv * T * n_seqs
        fs = gg.type_size(out.type)
        row = gg.row_size(ssm_all.type, D)
        n_written = r.n_written
        self.expand(gg.cpy(c, gg.view_3d(c, out, D, n_seqs, n_written, D * fs, D * n_seqs * fs,
                                          n_scores * fs),
                           gg.view_3d(c, ssm_all, D, n_seqs, n_written, ssm_all.nb[1],
                                      r.size * row, r.head * row)))
        o = gg.view_4d(c, out, S, Hv, T, n_seqs, S * fs, S * Hv * fs, S * Hv * T * fs, 0)
        o = self.cb(o, "attn_output", il)
        z4 = gg.view_4d(c, z, S, Hv, T, n_seqs, S * fs, z.nb[1], z.nb[2], 0)
        o = gg.mul(c, self.build_norm(o, L.ssm_norm, type=NormType.RMS, il=il), gg.silu(c, z4))
        o = self.cb(gg.reshape_3d(c, o, S * Hv, T, n_seqs), "final_output", il)
        cur = self.build_lora_mm(L.ssm_out, o)
        return self.cb(gg.reshape_2d(c, cur, hp.n_embd, T * n_seqs), "linear_attn_out", il)

    def build_ffn_block(self, cur, residual, L, il):
        """Residual, post-attention norm, SwiGLU FFN, residual."""
        c = self.ctx0
        cur = self.cb(gg.add(c, cur, residual), "attn_residual", il)
        post = self.cb(self.build_norm(cur, L.post_norm, type=NormType.RMS, il=il), "attn_post_norm", il)
        gate_up = fused_weight(self.model, [L.ffn_gate.name, L.ffn_up.name])
        if gate_up is not None:            # gate | up in one mul_mat, SwiGLU over its halves
            ffn = self.build_ffn(post, up=gate_up, down=L.ffn_down, type_op=FfnOp.SWIGLU,
                                 type_gate=FfnGate.PAR, il=il)
        else:
            ffn = self.build_ffn(post, up=L.ffn_up, gate=L.ffn_gate, down=L.ffn_down,
                                 type_op=FfnOp.SILU, type_gate=FfnGate.PAR, il=il)
        self.cb(ffn, "ffn_out", il)
        return self.cb(gg.add(c, ffn, cur), "l_out", il)

    def build(self):
        m, hp, c = self.model, self.hparams, self.ctx0
        tok_embd = m.get("token_embd.weight")
        output = m.get("output.weight", required=False)
        if output is None:
            output = tok_embd
        inp_l = self.build_inp_embd(tok_embd)
        inp_attn = self.build_attn_inp()
        inp_rs = self.build_rs_inp()
        pos = self.res.add_input(InpPosMulti(c, self.n_tokens)).pos
        inp_out_ids = self.build_inp_out_ids()
        masked = self.params.nextn_masked
        # when nobody reads h_nextn or other taps (named outputs keep every row), the last
        # layer runs on the output rows only, as when masked
        crop_early = masked or not (self.params.embeddings_nextn or self.params.outputs)
        crop = self.n_outputs < self.n_tokens     # else out_ids is the identity: nothing to crop
        for il in range(hp.n_layer):
            L = self.layer(il)
            self.res.t_layer_inp.append(inp_l)
            cur = self.cb(self.build_norm(inp_l, L.attn_norm, type=NormType.RMS, il=il), "attn_norm", il)
            self.expand(cur)
            if hp.recurrent[il]:
                cur = self.build_layer_attn_linear(inp_rs, cur, L, il)
            else:
                cur = self.build_layer_attn(inp_attn, cur, pos, L, il)
            res_in = inp_l
            if il == hp.n_layer - 1 and crop_early and crop:   # h_nextn of the output rows only
                cur = gg.get_rows(c, cur, inp_out_ids)
                res_in = gg.get_rows(c, res_in, inp_out_ids)
            inp_l = self.build_ffn_block(cur, res_in, L, il)
        cur = self.cb(self.build_norm(inp_l, m.get("output_norm.weight"), type=NormType.RMS), "h_nextn")
        self.res.t_h_nextn = cur
        if not crop_early:                        # every row kept until here: crop for the head
            cur = self.cb(gg.get_rows(c, cur, inp_out_ids), "result_norm")
        self.res.t_embd = cur
        cur = self.cb(self.build_lora_mm(output, cur), "result_output")
        self.res.t_logits = cur
        self.expand(cur)
        self.build_sampling()
        return self.res


class Qwen35MtpGraph(NextNGraph, Qwen35Graph):
    """The NextN draft graph: one gated full-attention block over the draft's own KV cache,
    h_nextn at the post-norm point (every row; draft batches that read it are all outputs
    or a single entry)."""
    H_NEXTN_POST_NORM = True

    def nextn_inputs(self):
        pos = self.res.add_input(InpPosMulti(self.ctx0, self.n_tokens)).pos
        return self.build_attn_inp(), pos

    def nextn_block(self, inputs, x, il):
        inp_attn, pos = inputs
        L = self.nextn_weights(il - self.hparams.n_layer)
        cur = self.cb(self.build_norm(x, L.attn_norm, type=NormType.RMS, il=il), "attn_norm", il)
        cur = self.build_layer_attn(inp_attn, cur, pos, L, il)
        return self.build_ffn_block(cur, x, L, il)


Qwen35Graph.MtpGraph = Qwen35MtpGraph
