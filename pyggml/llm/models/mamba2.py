"""Mamba-2 (src/models/mamba.cpp with the mamba2 layer of mamba-base.cpp).

Each block is RMS norm -> mixer -> residual. The mixer projects to z | xBC | dt, runs a
causal depth-wise convolution over xBC (its last d_conv-1 inputs are the conv state),
SiLU, then the selective scan `ssm_scan` over x with B, C, dt (A a scalar per head), adds
D*x, gates with SiLU(z), RMS-normalizes per group and projects out.

With n_rs_seq snapshots (K = n_rs_seq + 1) the scan returns K states, most recent first,
and the conv windows ending 0..K-1 tokens before the end are kept too: the graph copies
slot k into plane k of the sequence's cell (only min(T, K) slots exist for T tokens).
Conv states are stored channel-packed ([conv_dim, d_conv-1] per row, the transpose of
upstream's rows).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pyggml as gg

from ..gguf_check import GGUFError
from ..gguf_keys import KeyReader
from ..graph import GraphContext, NormType
from ..memory_recurrent import RecurrentMemory
from . import register

TENSORS = {
    "attn_norm": "attn_norm.weight", "ssm_in": "ssm_in.weight",
    "ssm_conv1d": "ssm_conv1d.weight", "ssm_conv1d_b": "ssm_conv1d.bias",
    "ssm_dt_b": "ssm_dt.bias", "ssm_a": "ssm_a", "ssm_d": "ssm_d",
    "ssm_norm": "ssm_norm.weight", "ssm_out": "ssm_out.weight",
}


@dataclass(frozen=True)
class Mamba2HParams:
    """`mamba2.*` keys (llama.cpp's names: ssm_d_conv, ssm_d_inner, ...)."""
    arch: str
    n_vocab: int
    n_ctx_train: int          # context_length
    n_embd: int               # embedding_length
    n_layer: int              # block_count
    d_conv: int               # ssm.conv_kernel
    d_inner: int              # ssm.inner_size
    d_state: int              # ssm.state_size
    n_ssm_head: int           # ssm.time_step_rank (one dt per head)
    n_group: int              # ssm.group_count
    rms_eps: float            # attention.layer_norm_rms_epsilon
    bos_id: int | None = None
    eos_id: int | None = None
    # attention fields the shared builder reads; Mamba-2 has no attention or RoPE
    n_head: int = 1
    n_head_kv: int = 1
    head_dim_k: int = 1
    head_dim_v: int = 1
    n_rot: int = 0
    rope_type: int = -1
    rope_freq_base: float = 10000.0
    rope_freq_scale: float = 1.0

    @property
    def conv_dim(self) -> int:
        return self.d_inner + 2 * self.n_group * self.d_state

    @property
    def n_embd_r(self) -> int:
        return (self.d_conv - 1) * self.conv_dim

    @property
    def n_embd_s(self) -> int:
        return self.d_state * self.d_inner

    @classmethod
    def from_gguf(cls, kv: dict, arch: str) -> "Mamba2HParams":
        r = KeyReader(kv, arch)
        vals = {k: r.get(f"ssm.{g}", required=True) for k, g in (
            ("d_conv", "conv_kernel"), ("d_inner", "inner_size"), ("d_state", "state_size"),
            ("n_ssm_head", "time_step_rank"), ("n_group", "group_count"))}
        if min(vals.values()) <= 0 or vals["d_conv"] < 2:
            raise GGUFError(f"{arch}: ssm sizes must be positive (conv_kernel >= 2), got {vals}")
        if vals["d_inner"] % vals["n_ssm_head"] or vals["d_inner"] % vals["n_group"] \
                or vals["n_ssm_head"] % vals["n_group"]:
            raise GGUFError(f"{arch}: ssm.inner_size={vals['d_inner']} must be a multiple of "
                            f"time_step_rank={vals['n_ssm_head']} and group_count={vals['n_group']} "
                            f"(heads a multiple of groups)")
        tokens = kv.get("tokenizer.ggml.tokens")
        return cls(arch=arch, n_vocab=r.get("vocab_size", len(tokens) if isinstance(tokens, list) else 0),
                   n_ctx_train=r.get("context_length", required=True),
                   n_embd=r.get("embedding_length", required=True),
                   n_layer=r.get("block_count", required=True),
                   rms_eps=r.get("attention.layer_norm_rms_epsilon", required=True, kind=float),
                   bos_id=r.token_id("tokenizer.ggml.bos_token_id"),
                   eos_id=r.token_id("tokenizer.ggml.eos_token_id"), **vals)


def layer_weights(model, il: int) -> SimpleNamespace:
    return SimpleNamespace(**{f: model.get(f"blk.{il}.{n}") for f, n in TENSORS.items()})


def build_mamba2_layer(g: GraphContext, inp, cur, L, il: int, hp):
    """The Mamba-2 mixer of layer il on cur [n_embd, T] (one sequence per ubatch)."""
    c = g.ctx0
    r = inp.rctx
    d_conv, d_inner, d_state, n_head, n_group = hp.d_conv, hp.d_inner, hp.d_state, hp.n_ssm_head, hp.n_group
    head_dim, conv_dim = d_inner // n_head, hp.conv_dim
    n_seqs, T = r.n_seqs, r.n_seq_tokens
    K, n_written, size, head = r.K, r.n_written, r.size, r.head
    conv_all, ssm_all = r.get_r_l(il), r.get_s_l(il)

    conv = g.build_rs(inp, conv_all, hp.n_embd_r)
    conv = gg.reshape_3d(c, conv, conv_dim, d_conv - 1, n_seqs)

    zxbcdt = g.build_lora_mm(L.ssm_in, cur)
    zxbcdt = gg.reshape_3d(c, zxbcdt, zxbcdt.ne[0], T, n_seqs)
    es = gg.type_size(zxbcdt.type)
    z = gg.view_4d(c, zxbcdt, head_dim, n_head, T, n_seqs, head_dim * es, zxbcdt.nb[1],
                   zxbcdt.nb[2], 0)
    xbc = gg.view_3d(c, zxbcdt, conv_dim, T, n_seqs, zxbcdt.nb[1], zxbcdt.nb[2], d_inner * es)
    dt = gg.view_3d(c, zxbcdt, n_head, T, n_seqs, zxbcdt.nb[1], zxbcdt.nb[2],
                    (d_inner + conv_dim) * es)

    # conv input = [conv state | this ubatch's xBC] along time, channel-packed
    # ([conv_dim, d_conv-1+T]: the join and the windows kept as states are whole-row copies);
    # the conv reads its transposed view
    conv_x = gg.concat(c, conv, xbc, 1)
    row_count = (d_conv - 1) * conv_dim
    row_size = gg.row_size(conv_all.type, row_count)
    for slot in range(n_written):
        last = gg.view_2d(c, conv_x, row_count, n_seqs, conv_x.nb[2], (T - slot) * conv_x.nb[1])
        dst = gg.view_2d(c, conv_all, row_count, n_seqs, conv_all.nb[1],
                         (slot * size + head) * row_size)
        g.expand(gg.cpy(c, last, dst))
    xbc = gg.ssm_conv(c, gg.transpose(c, conv_x), L.ssm_conv1d)
    xbc = gg.silu(c, gg.add(c, xbc, L.ssm_conv1d_b))

    es = gg.type_size(xbc.type)
    x = gg.view_4d(c, xbc, head_dim, n_head, T, n_seqs, head_dim * es, xbc.nb[1], xbc.nb[2], 0)
    B = gg.view_4d(c, xbc, d_state, n_group, T, n_seqs, d_state * es, xbc.nb[1], xbc.nb[2],
                   d_inner * es)
    C = gg.view_4d(c, xbc, d_state, n_group, T, n_seqs, d_state * es, xbc.nb[1], xbc.nb[2],
                   (d_inner + n_group * d_state) * es)
    dt = gg.add(c, gg.cont(c, dt), L.ssm_dt_b)
    n_slots = ssm_all.ne[1]

    def scan(ctx, states, ids):
        s = gg.reshape_4d(ctx, states, d_state, head_dim, n_head, n_slots)
        return gg.ssm_scan(ctx, s, x, dt, L.ssm_a, B, C, ids, K)

    y_ssm = g.build_rs(inp, ssm_all, hp.n_embd_s, scan)
    D = d_state * d_inner
    srow = gg.row_size(ssm_all.type, D)
    yrow = gg.row_size(y_ssm.type, D)
    y_bytes = head_dim * n_head * T * n_seqs * gg.type_size(y_ssm.type)
    g.expand(gg.cpy(c, gg.view_3d(c, y_ssm, D, n_seqs, n_written, yrow, yrow * n_seqs, y_bytes),
                    gg.view_3d(c, ssm_all, D, n_seqs, n_written, ssm_all.nb[1], size * srow,
                               head * srow)))
    y = gg.view_4d(c, y_ssm, head_dim, n_head, T, n_seqs, x.nb[1], n_head * x.nb[1],
                   T * n_head * x.nb[1], 0)
    y = g.cb(gg.add(c, y, gg.mul(c, x, L.ssm_d)), "mamba2_y_add_d", il)
    y = gg.swiglu_split(c, gg.cont(c, z), y)
    y = gg.reshape_4d(c, y, d_inner // n_group, n_group, T, n_seqs)
    y = g.build_norm(y, L.ssm_norm, type=NormType.RMS, il=il)
    y = gg.reshape_2d(c, y, d_inner, T * n_seqs)
    return g.cb(g.build_lora_mm(L.ssm_out, y), "mamba_out", il)


@register("mamba2")
class Mamba2Graph(GraphContext):
    HParams = Mamba2HParams
    HYBRID_NODE_BUDGET = True

    @staticmethod
    def create_memory(model, hp: Mamba2HParams, cp):
        return RecurrentMemory(layers=range(hp.n_layer), n_embd_r=hp.n_embd_r,
                               n_embd_s=hp.n_embd_s, n_seq_max=cp.n_seq_max, n_rs_seq=cp.n_rs_seq)

    def build(self):
        m, hp, c = self.model, self.hparams, self.ctx0
        tok_embd = m.get("token_embd.weight")
        output = m.get("output.weight", required=False)
        if output is None:
            output = tok_embd
        inp_l = self.build_inp_embd(tok_embd)
        rs_inp = self.build_rs_inp()
        inp_out_ids = self.build_inp_out_ids()
        for il in range(self.n_layer):
            L = layer_weights(m, il)
            self.res.t_layer_inp.append(inp_l)
            cur = self.cb(self.build_norm(inp_l, L.attn_norm, type=NormType.RMS, il=il), "attn_norm", il)
            cur = build_mamba2_layer(self, rs_inp, cur, L, il, hp)
            if il == self.n_layer - 1:
                cur = gg.get_rows(c, cur, inp_out_ids)
                inp_l = gg.get_rows(c, inp_l, inp_out_ids)
            inp_l = self.cb(gg.add(c, cur, inp_l), "l_out", il)
        cur = self.cb(self.build_norm(inp_l, m.get("output_norm.weight"), type=NormType.RMS),
                      "result_norm")
        self.res.t_embd = cur
        cur = self.cb(self.build_lora_mm(output, cur), "result_output")
        self.res.t_logits = cur
        self.expand(cur)
        self.build_sampling()
        return self.res
