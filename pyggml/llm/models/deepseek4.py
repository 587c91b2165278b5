"""DeepSeek V4 (llama.cpp's src/models/deepseek4.cpp).

Every layer carries `hc` hyper-connection streams: hc_pre mixes them into one attention
input (with a Sinkhorn-normalised stream-mixing matrix for hc_post), hc_post writes the
sub-block's output back into all streams. Attention: a low-rank q with per-head RMS, one
shared K=V head, RoPE on the trailing n_rot dims (and the inverse rotation on the output),
sinks, a grouped low-rank output projection. Layers attend their raw keys through a sliding
window and, by their compression ratio, also compressed keys: ratio 128 (HCA) all visible
blocks, ratio 4 (CSA) the top-k blocks a lightning indexer picks; both are expressed as
masks over the concatenated keys. MoE with sqrt-softplus gating, hash routing by token id in
the first layers, a shared expert, SWIGLU clamped on the gate input.

The trunk exports all hc streams of the last layer flattened [hc*D, .] as `h_nextn` (every
row, or the output rows when masked). The NextN (MTP) block runs in DeepSeek4MtpGraph: the
streams of h are RMS-normed per stream, the token's normed embedding repeated to every
stream, eh_proj per stream, then one dsv4 block attending raw keys through the window only
(its compression ratio must be 0, and it may not be hash-routed), over a K-only window
cache of the NextN layer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pyggml as gg

from ..gguf_check import GGUFError
from ..gguf_keys import KeyReader
from ..graph import ClampMode, FfnGate, FfnOp, Gating, GraphContext, NormType
from ..inputs import InpAttn, _input
from ..inputs_dsv4 import InpDSV4, hadamard_size
from ..kv_cache import N_PAD, SWA_STANDARD, pad_to
from ..kv_cache_dsv4 import CSA_RATIO, HCA_RATIO, DSV4Memory
from ..kv_cache_iswa import KVCacheISWA
from ..model import ROPE_TYPE_NORM
from . import register
from .llama import layer_weights
from .nextn import InpEmbdH, NextNGraph, check_nextn_tensors

TENSORS = {
    "attn_norm": "attn_norm.weight", "attn_sinks": "attn_sinks.weight",
    "wq_a": "attn_q_a.weight", "attn_q_a_norm": "attn_q_a_norm.weight", "wq_b": "attn_q_b.weight",
    "wkv": "attn_kv.weight", "attn_kv_norm": "attn_kv_a_norm.weight",
    "wo_a": "attn_output_a.weight", "wo_b": "attn_output_b.weight",
    "hc_attn_fn": "hc_attn_fn.weight", "hc_attn_base": "hc_attn_base.weight",
    "hc_attn_scale": "hc_attn_scale.weight",
    "hc_ffn_fn": "hc_ffn_fn.weight", "hc_ffn_base": "hc_ffn_base.weight",
    "hc_ffn_scale": "hc_ffn_scale.weight",
    "comp_wkv": "attn_compressor_kv.weight", "comp_wgate": "attn_compressor_gate.weight",
    "comp_ape": "attn_compressor_ape.weight", "comp_norm": "attn_compressor_norm.weight",
    "indexer_proj": "indexer.proj.weight", "indexer_q_b": "indexer.attn_q_b.weight",
    "indexer_comp_wkv": "indexer_compressor_kv.weight",
    "indexer_comp_wgate": "indexer_compressor_gate.weight",
    "indexer_comp_ape": "indexer_compressor_ape.weight",
    "indexer_comp_norm": "indexer_compressor_norm.weight",
    "ffn_norm": "ffn_norm.weight", "ffn_gate_inp": "ffn_gate_inp.weight",
    "ffn_gate_tid2eid": "ffn_gate_tid2eid.weight", "ffn_exp_probs_b": "exp_probs_b.bias",
    "ffn_exp_probs_b_vl": "exp_probs_b_vl.bias",
    "ffn_gate_exps": "ffn_gate_exps.weight", "ffn_up_exps": "ffn_up_exps.weight",
    "ffn_down_exps": "ffn_down_exps.weight",
    "ffn_gate_shexp": "ffn_gate_shexp.weight", "ffn_up_shexp": "ffn_up_shexp.weight",
    "ffn_down_shexp": "ffn_down_shexp.weight",
}
GLOBAL_TENSORS = {"tok_embd": "token_embd.weight", "output_norm": "output_norm.weight",
                  "output": "output.weight", "hc_head_fn": "output_hc_fn.weight",
                  "hc_head_base": "output_hc_base.weight", "hc_head_scale": "output_hc_scale.weight"}


@dataclass(frozen=True)
class DeepSeek4HParams:
    """`deepseek4.*` keys (llama.cpp names in comments; defaults as its loader)."""
    arch: str
    n_vocab: int
    n_ctx_train: int              # context_length
    n_embd: int                   # embedding_length
    n_layer: int                  # block_count - nextn_predict_layers (trunk layers)
    n_nextn: int                  # nextn_predict_layers
    n_head: int                   # attention.head_count
    n_head_kv: int                # attention.head_count_kv (1: the shared K=V head)
    head_dim_k: int               # attention.key_length (the full head, K = V)
    head_dim_v: int               # attention.value_length
    n_rot: int                    # rope.dimension_count (the roped tail)
    rope_freq_base: float         # rope.freq_base (raw layers)
    rope_freq_scale: float        # 1 / rope.scaling.factor
    rms_eps: float                # attention.layer_norm_rms_epsilon
    n_lora_q: int                 # attention.q_lora_rank
    n_swa: int                    # attention.sliding_window
    n_ff_exp: int                 # expert_feed_forward_length
    n_expert_shared: int          # expert_shared_count
    n_expert: int                 # expert_count
    n_expert_used: int            # expert_used_count
    expert_weights_scale: float   # expert_weights_scale
    expert_weights_norm: bool     # expert_weights_norm
    swiglu_clamp_exp: tuple       # swiglu_clamp_exp (scalar or per layer)
    swiglu_clamp_shexp: tuple     # swiglu_clamp_shexp (default: swiglu_clamp_exp)
    indexer_n_head: int           # attention.indexer.head_count
    indexer_head_size: int        # attention.indexer.key_length
    indexer_top_k: int            # attention.indexer.top_k
    o_groups: int                 # attention.output_group_count
    o_lora_rank: int              # attention.output_lora_rank
    compress_rope_base: float     # attention.compress_rope_freq_base
    compress_ratios: tuple        # attention.compress_ratios (0, 4 or 128 per layer)
    hc: int                       # hyper_connection.count
    sinkhorn_iters: int           # hyper_connection.sinkhorn_iterations
    hc_eps: float                 # hyper_connection.epsilon
    hash_layer_count: int         # hash_layer_count
    ext_factor: float             # 1 with rope.scaling.type yarn, else 0
    n_ctx_orig_yarn: int          # rope.scaling.original_context_length (default context_length)
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    rope_type: int = ROPE_TYPE_NORM

    @property
    def n_embd_nextn(self) -> int:
        """h_nextn rows carry every stream."""
        return self.hc * self.n_embd

    @classmethod
    def from_gguf(cls, kv: dict, arch: str) -> "DeepSeek4HParams":
        r = KeyReader(kv, arch)
        n_layer_all = r.get("block_count", required=True)
        n_nextn = r.get("nextn_predict_layers", 0)
        n_layer = n_layer_all - n_nextn
        n_embd = r.get("embedding_length", required=True)
        n_head = r.get("attention.head_count", required=True)
        head_k = r.get("attention.key_length", required=True)
        gating = r.get("expert_gating_func", 0)
        if gating != Gating.SQRT_SOFTPLUS:
            raise GGUFError(f"{arch}: expert_gating_func must be 4 (sqrt-softplus), got {gating}")
        ratios = kv.get(f"{arch}.attention.compress_ratios")
        if not isinstance(ratios, list) or len(ratios) < n_layer_all:
            raise GGUFError(f"{arch}.attention.compress_ratios must list at least block_count "
                            f"({n_layer_all}) ratios, got {ratios!r}")
        clamp = r.get_arr("swiglu_clamp_exp", n_layer_all, 0.0, float)
        clamp_sh = r.get_arr("swiglu_clamp_shexp", n_layer_all, 0.0, float) \
            if r.has("swiglu_clamp_shexp") else clamp
        factor = r.get("rope.scaling.factor", 0.0, float)
        yarn = r.get("rope.scaling.type", "none", str) == "yarn"
        tokens = kv.get("tokenizer.ggml.tokens")
        n_ctx_train = r.get("context_length", required=True)
        hp = cls(arch=arch, n_vocab=r.get("vocab_size", len(tokens) if isinstance(tokens, list) else 0),
                 n_ctx_train=n_ctx_train, n_embd=n_embd, n_layer=n_layer, n_nextn=n_nextn, n_head=n_head,
                 n_head_kv=r.get("attention.head_count_kv", 1), head_dim_k=head_k,
                 head_dim_v=r.get("attention.value_length", head_k),
                 n_rot=r.get("rope.dimension_count", required=True),
                 rope_freq_base=r.get("rope.freq_base", 10000.0, float),
                 rope_freq_scale=1.0 / factor if factor else 1.0,
                 rms_eps=r.get("attention.layer_norm_rms_epsilon", required=True, kind=float),
                 n_lora_q=r.get("attention.q_lora_rank", required=True),
                 n_swa=r.get("attention.sliding_window", required=True),
                 n_ff_exp=r.get("expert_feed_forward_length", required=True),
                 n_expert_shared=r.get("expert_shared_count", required=True),
                 n_expert=r.get("expert_count", required=True),
                 n_expert_used=r.get("expert_used_count", required=True),
                 expert_weights_scale=r.get("expert_weights_scale", required=True, kind=float),
                 expert_weights_norm=r.get("expert_weights_norm", required=True, kind=bool),
                 swiglu_clamp_exp=clamp, swiglu_clamp_shexp=clamp_sh,
                 indexer_n_head=r.get("attention.indexer.head_count", required=True),
                 indexer_head_size=r.get("attention.indexer.key_length", required=True),
                 indexer_top_k=r.get("attention.indexer.top_k", required=True),
                 o_groups=r.get("attention.output_group_count", required=True),
                 o_lora_rank=r.get("attention.output_lora_rank", required=True),
                 compress_rope_base=r.get("attention.compress_rope_freq_base", required=True, kind=float),
                 compress_ratios=tuple(int(x) for x in ratios[:n_layer_all]),
                 hc=r.get("hyper_connection.count", required=True),
                 sinkhorn_iters=r.get("hyper_connection.sinkhorn_iterations", required=True),
                 hc_eps=r.get("hyper_connection.epsilon", required=True, kind=float),
                 hash_layer_count=r.get("hash_layer_count", 0),
                 ext_factor=1.0 if yarn else 0.0,
                 n_ctx_orig_yarn=r.get("rope.scaling.original_context_length", n_ctx_train))
        if hp.hc != 4:
            raise GGUFError(f"{arch}: hyper_connection.count must be 4, got {hp.hc}")
        if hp.n_head % hp.o_groups:
            raise GGUFError(f"{arch}: head_count {n_head} is not a multiple of output_group_count {hp.o_groups}")
        if any(x not in (0, CSA_RATIO, HCA_RATIO) for x in hp.compress_ratios):
            raise GGUFError(f"{arch}: compress ratios must be 0, 4 or 128, got {hp.compress_ratios}")
        if n_nextn and (any(hp.compress_ratios[n_layer:]) or hp.hash_layer_count > n_layer):
            raise GGUFError(f"{arch}: NextN blocks must have compression ratio 0 and must not be "
                            f"hash-routed (ratios {hp.compress_ratios[n_layer:]}, hash layers "
                            f"{hp.hash_layer_count})")
        return hp


def rope_attn_factor(freq_scale: float, ext_factor: float) -> float:
    """Cancels YaRN's magnitude gain so every dsv4 rotation has magnitude 1."""
    return 1.0 if ext_factor == 0.0 else 1.0 / (1.0 + 0.1 * math.log(1.0 / freq_scale))


@register("deepseek4")
class DeepSeek4Graph(GraphContext):
    HParams = DeepSeek4HParams
    HYBRID_NODE_BUDGET = True
    swiglu_clamp_mode = ClampMode.GATE_INPUT

    @staticmethod
    def create_memory(model, hp: DeepSeek4HParams, cp):
        if cp.ctx_type == "mtp":       # a K-only window cache of the NextN layer
            if hp.n_nextn != 1:
                raise ValueError(f"{hp.arch}: an MTP context needs exactly one NextN block, "
                                 f"the model has {hp.n_nextn}")
            check_nextn_tensors(model, hp.n_layer, 1, ("attn_norm.weight", "attn_kv.weight"))
            d = hp.head_dim_k
            return KVCacheISWA(swa_layers=[True] * (hp.n_layer + 1), layers=[hp.n_layer],
                               n_swa=hp.n_swa, size=pad_to(cp.n_ctx, N_PAD), swa_type=SWA_STANDARD,
                               n_ubatch=cp.n_ubatch, n_seq_max=cp.n_seq_max, n_embd_k_gqa=d,
                               n_embd_v_gqa=d, head_dim_k=d, head_dim_v=d, n_head_kv=1,
                               type_k=cp.type_k, type_v=cp.type_k, k_only=True)
        return DSV4Memory(n_layer=hp.n_layer, ratios=hp.compress_ratios, head_dim=hp.head_dim_k,
                          indexer_head_dim=hp.indexer_head_size, n_swa=hp.n_swa, n_ctx=cp.n_ctx,
                          n_seq_max=cp.n_seq_max, type_k=cp.type_k, n_rs_seq=cp.n_rs_seq,
                          n_ubatch=cp.n_ubatch)

    def __init__(self, model, params, res):
        super().__init__(model, params, res)
        hp = self.hparams
        self.swiglu_clamp_exp, self.swiglu_clamp_shexp = hp.swiglu_clamp_exp, hp.swiglu_clamp_shexp
        self.n_ctx_orig = hp.n_ctx_orig_yarn
        self.ext_factor = hp.ext_factor
        self.beta_fast, self.beta_slow = hp.beta_fast, hp.beta_slow

    # ---- hyper-connections ----------------------------------------------------------------
    def build_hc_pre(self, x, fn, scale, base, il):
        """(mixed input [D, T], post [hc, T], comb [hc, hc, T]) from the streams x [D, hc, T]."""
        c, hp = self.ctx0, self.hparams
        hc, T = hp.hc, x.ne[2]
        flat = gg.rms_norm(c, gg.reshape_2d(c, x, hc * self.n_embd, T), self.norm_rms_eps)
        mixes = self.cb(gg.mul_mat(c, fn, flat), "hc_mixes", il)
        fs = gg.type_size(scale.type)

        def part(n, i0, si):
            v = gg.view_2d(c, mixes, n, T, mixes.nb[1], i0 * fs)
            v = gg.mul(c, v, gg.view_1d(c, scale, 1, si * fs))
            return gg.add(c, v, gg.view_1d(c, base, n, i0 * fs))

        pre = gg.scale_bias(c, gg.sigmoid(c, part(hc, 0, 0)), 1.0, hp.hc_eps)
        self.cb(pre, "hc_pre", il)
        post = self.cb(gg.scale(c, gg.sigmoid(c, part(hc, hc, 1)), 2.0), "hc_post", il)
        comb = self.cb(gg.dsv4_hc_comb(c, mixes, scale, base, hp.hc_eps, hp.sinkhorn_iters), "hc_comb", il)
        return gg.dsv4_hc_pre(c, x, pre), post, comb

    def build_hc_head(self, x, fn, scale, base):
        c, hp = self.ctx0, self.hparams
        flat = gg.rms_norm(c, gg.reshape_2d(c, x, hp.hc * self.n_embd, x.ne[2]), self.norm_rms_eps)
        mixes = self.cb(gg.mul_mat(c, fn, flat), "hc_head_mixes")
        pre = gg.sigmoid(c, gg.add(c, gg.mul(c, mixes, scale), base))
        pre = self.cb(gg.scale_bias(c, pre, 1.0, hp.hc_eps), "hc_head_pre")
        return gg.dsv4_hc_pre(c, x, pre)

    def build_hc_mean(self, x):
        c, hc = self.ctx0, self.hparams.hc
        acc = gg.view_2d(c, x, x.ne[0], x.ne[2], x.nb[2], 0)
        for s in range(1, hc):
            acc = gg.add(c, acc, gg.view_2d(c, x, x.ne[0], x.ne[2], x.nb[2], s * x.nb[1]))
        return gg.scale(c, acc, 1.0 / hc)

    # ---- rope helpers -------------------------------------------------------------------------
    def rope_tail(self, x, pos, compressed: bool, back: bool = False):
        """Rotate the last n_rot dims of x [d, H, T]: compressed layers (and compressors, the
        indexer) use the compress base with the context's YaRN, raw layers the plain base."""
        hp = self.hparams
        if compressed:
            base, fs, ext = hp.compress_rope_base, hp.rope_freq_scale, hp.ext_factor
            n_orig, bf, bs = self.n_ctx_orig, self.beta_fast, self.beta_slow
        else:
            base, fs, ext, n_orig, bf, bs = hp.rope_freq_base, 1.0, 0.0, 0, 0.0, 0.0
        op = gg.rope_ext_back if back else gg.rope_ext
        y = op(self.ctx0, x, pos, None, hp.n_rot, hp.rope_type, n_orig, base, fs, ext,
               rope_attn_factor(fs, ext), bf, bs)
        return gg.rope_set_offset(y, x.ne[0] - hp.n_rot)

    def rotate(self, x, rot):
        """Blockwise Hadamard rotation of x's rows (blocks of rot.ne[0] values)."""
        c, n = self.ctx0, rot.ne[0]
        flat = gg.reshape_2d(c, gg.cont(c, x), n, x.nelements // n)
        return gg.reshape_4d(c, gg.mul_mat(c, rot, flat), *x.ne)

    def rotations(self) -> dict:
        """Which caches hold rotated keys: the indexer's always; the raw and compressed ones
        when the key head equals the indexer head (whatever the cache type)."""
        hp = self.hparams
        rot = {"lid": hadamard_size(hp.indexer_head_size)}
        if hp.head_dim_k == hp.indexer_head_size:
            n = hadamard_size(hp.head_dim_k)
            rot.update(raw=n, csa=n, hca=n)
        if not any(r == CSA_RATIO for r in hp.compress_ratios[:hp.n_layer]):
            rot.pop("lid")
        return rot

    # ---- compressors --------------------------------------------------------------------------
    def build_compressor(self, a, ci, cache, wkv, wgate, ape, norm, width: int, overlap: bool,
                         name: str, il: int):
        """This ubatch's value/score rows, the ring (restored from a snapshot plane after a
        rollback), every block completed in this ubatch compressed into the compressed cache
        (no compression when none completes), then
        the snapshot planes and the ring updated. Order: restore -> compress -> snapshot ->
        persist (writes in place; the graph runs nodes in insertion order)."""
        c, nb = self.ctx0, ci.n_blocks
        kv = self.cb(gg.mul_mat(c, wkv, a), f"{name}_state_kv", il)
        sc = gg.add(c, gg.mul_mat(c, wgate, a), gg.get_rows(c, ape, ci.state_pos))
        self.cb(sc, f"{name}_state_score_ape", il)
        st_kv, st_sc = cache.s_kv[il], cache.s_score[il]
        if ci.restore_src is not None:
            st_kv = self.expand(gg.set_rows(c, st_kv, gg.get_rows(c, st_kv, ci.restore_src), ci.restore_dst))
            st_sc = self.expand(gg.set_rows(c, st_sc, gg.get_rows(c, st_sc, ci.restore_src), ci.restore_dst))
        if nb:
            self.build_compress_blocks(ci, cache, kv, sc, st_kv, st_sc, norm, width, overlap, name, il)
        if ci.snap_src is not None:
            st_kv = self.expand(gg.set_rows(c, st_kv, gg.get_rows(c, gg.concat(c, st_kv, kv, 1), ci.snap_src),
                                            ci.snap_dst))
            st_sc = self.expand(gg.set_rows(c, st_sc, gg.get_rows(c, gg.concat(c, st_sc, sc, 1), ci.snap_src),
                                            ci.snap_dst))
        self.expand(gg.set_rows(c, st_kv, gg.get_rows(c, kv, ci.persist_src), ci.persist_dst))
        self.expand(gg.set_rows(c, st_sc, gg.get_rows(c, sc, ci.persist_src), ci.persist_dst))

    def build_compress_blocks(self, ci, cache, kv, sc, st_kv, st_sc, norm, width: int,
                              overlap: bool, name: str, il: int):
        """The blocks of this ubatch (softmax over each window per channel, normed, tail-roped
        at the block start, rotated where the cache stores rotated keys) into the cache."""
        c = self.ctx0
        r, nb = cache.ratio, ci.n_blocks

        def source(state, new, neg_inf):
            """[ring plane 0 | this ubatch's rows | synthetic row (0, or -inf for scores)]."""
            ring = gg.view_2d(c, state, state.ne[0], cache.rows_state, state.nb[1], 0)
            t = gg.concat(c, ring, new, 1)
            if overlap:
                row = gg.view_2d(c, new, new.ne[0], 1, new.nb[1], 0)
                row = gg.scale_bias(c, row, 0.0, -math.inf) if neg_inf else gg.scale(c, row, 0.0)
                t = gg.concat(c, t, row, 1)
            return t

        rows_kv = gg.get_rows(c, source(st_kv, kv, False), ci.read_idxs)
        rows_sc = gg.get_rows(c, source(st_sc, sc, True), ci.read_idxs)
        if overlap:
            n_read = r * nb
            es = gg.type_size(rows_kv.type)

            def halves(t):
                prev = gg.cont(c, gg.view_2d(c, t, width, n_read, t.nb[1], 0))
                cur = gg.cont(c, gg.view_2d(c, t, width, n_read, t.nb[1], n_read * t.nb[1] + width * es))
                return gg.concat(c, gg.reshape_3d(c, prev, width, r, nb),
                                 gg.reshape_3d(c, cur, width, r, nb), 1)
            values, scores = halves(rows_kv), halves(rows_sc)
        else:
            values = gg.reshape_3d(c, rows_kv, width, r, nb)
            scores = gg.reshape_3d(c, rows_sc, width, r, nb)
        values = gg.cont(c, gg.permute(c, values, 1, 0, 2, 3))
        weights = gg.soft_max(c, gg.cont(c, gg.permute(c, scores, 1, 0, 2, 3)))
        comp = gg.sum_rows(c, gg.mul(c, values, weights))
        comp = gg.cont(c, gg.permute(c, comp, 1, 0, 2, 3))              # [width, 1, nb]
        self.cb(comp, f"{name}_state_compress", il)
        comp = self.build_norm(comp, norm, type=NormType.RMS, il=il)
        comp = self.cb(self.rope_tail(comp, ci.write_pos, compressed=True), f"{name}_state_compress", il)
        if name in self.inp.k_rot:   # the cache stores rotated keys
            comp = self.cb(self.rotate(comp, self.inp.k_rot[name]), f"{name}_state_compress_rot", il)
        self.expand(gg.set_rows(c, cache.k[il], gg.reshape_2d(c, comp, width, nb), ci.write_idxs))

    # ---- attention ------------------------------------------------------------------------------
    def build_lid_top_k(self, L, ci, qr, a, pos, il):
        c, hp, mem = self.ctx0, self.hparams, self.mctx.mem
        di, Hi, T = hp.indexer_head_size, hp.indexer_n_head, a.ne[1]
        iq = gg.reshape_3d(c, gg.mul_mat(c, L.indexer_q_b, qr), di, Hi, T)
        iq = self.cb(self.rope_tail(iq, pos, compressed=True), "lid_q_rope", il)
        iq = self.cb(self.rotate(iq, self.inp.k_rot["lid"]), "lid_q_rot", il)
        iw = gg.scale(c, gg.mul_mat(c, L.indexer_proj, a), 1.0 / math.sqrt(di * Hi))
        self.cb(iw, "lid_weights", il)
        k = self.mctx.get_comp_k(c, mem.lid, il, ci.n_kv, ci.stream)
        score = gg.lightning_indexer(c, gg.reshape_4d(c, iq, di, Hi, T, 1), k,
                                     gg.reshape_4d(c, iw, Hi, T, 1, 1), ci.lid_mask)
        self.cb(score, "lid_score_masked", il)
        k_top = min(score.ne[0], hp.indexer_top_k)
        return self.cb(gg.top_k(c, score, k_top), "lid_top_k", il)

    def build_top_k_mask(self, kq_mask, top, il):
        """-inf everywhere but the selected compressed rows, plus the visibility mask."""
        c = self.ctx0
        n_kv, T = kq_mask.ne[0], kq_mask.ne[1]
        m = gg.fill(c, kq_mask, -math.inf)
        m = gg.view_4d(c, m, 1, n_kv, T, 1, m.nb[0], m.nb[1], m.nb[1] * T, 0)
        zeros = gg.fill(c, c.new_tensor(kq_mask.type, [1, top.ne[0], T, 1]), 0.0)
        m = gg.set_rows(c, m, zeros, gg.reshape_3d(c, top, top.ne[0], T, 1))
        m = gg.view_4d(c, m, n_kv, T, 1, 1, m.nb[2], m.nb[2] * T, m.nb[2] * T, 0)
        return self.cb(gg.add(c, m, kq_mask), "csa_top_k_mask", il)

    def build_attention(self, L, inp: InpDSV4, a, pos, il):
        c, hp = self.ctx0, self.hparams
        d, H, T = hp.head_dim_k, self.n_head, a.ne[1]
        ratio = hp.compress_ratios[il]
        compressed = ratio != 0
        qr = self.cb(gg.mul_mat(c, L.wq_a, a), "qr", il)
        qr = self.cb(self.build_norm(qr, L.attn_q_a_norm, type=NormType.RMS, il=il), "qr_norm", il)
        q = gg.reshape_3d(c, gg.mul_mat(c, L.wq_b, qr), d, H, T)
        q = self.cb(gg.rms_norm(c, q, self.norm_rms_eps), "q_norm", il)
        q = self.cb(self.rope_tail(q, pos, compressed), "q", il)
        kv = self.build_norm(gg.mul_mat(c, L.wkv, a), L.attn_kv_norm, type=NormType.RMS, il=il)
        kv = self.cb(gg.reshape_3d(c, kv, d, 1, T), "kv_norm", il)
        kv = self.cb(self.rope_tail(kv, pos, compressed), "kv", il)

        mem = self.mctx.mem if ratio else None
        if ratio == CSA_RATIO:
            ci = inp.comp[CSA_RATIO]
            self.build_compressor(a, ci, mem.csa, L.comp_wkv, L.comp_wgate, L.comp_ape, L.comp_norm,
                                  d, True, "csa", il)
            self.build_compressor(a, ci, mem.lid, L.indexer_comp_wkv, L.indexer_comp_wgate,
                                  L.indexer_comp_ape, L.indexer_comp_norm, hp.indexer_head_size,
                                  True, "lid", il)
        elif ratio == HCA_RATIO:
            ci = inp.comp[HCA_RATIO]
            self.build_compressor(a, ci, mem.hca, L.comp_wkv, L.comp_wgate, L.comp_ape, L.comp_norm,
                                  d, False, "hca", il)

        lay = inp.raw.layer(il)
        raw_rot = inp.k_rot.get("raw")
        if raw_rot is not None:      # rotated raw keys: rotate q alike, the output back below
            q, kv = self.rotate(q, raw_rot), self.rotate(kv, raw_rot)
        self.expand(q)
        self.expand(kv)
        self.expand(lay.part.cpy_k(c, kv, lay.k_idxs, il))
        raw_k = self.cb(lay.part.get_k(c, il), "raw_k", il)
        raw_mask = lay.kq_mask
        n_kv_max = 0
        if ratio == 0:
            k_all, mask = raw_k, raw_mask
        else:
            ci = inp.comp[ratio]
            cache = mem.csa if ratio == CSA_RATIO else mem.hca
            comp_k = self.mctx.get_comp_k(c, cache, il, ci.n_kv, ci.stream)
            k_all = gg.concat(c, raw_k, comp_k, 2)
            if ratio == CSA_RATIO:
                top = self.build_lid_top_k(L, ci, qr, a, pos, il)
                comp_mask = self.build_top_k_mask(ci.kq_mask, top, il)
                n_kv_max = min(raw_mask.ne[0], hp.n_swa) + top.ne[0]
            else:
                comp_mask = ci.kq_mask
            mask = gg.concat(c, raw_mask, comp_mask, 0)
        self.cb(k_all, "k_all", il)
        out = self.build_attn_mha(q, k_all, k_all, None, mask, L.attn_sinks, None,
                                  1.0 / math.sqrt(d), il, n_kv_max)
        if raw_rot is not None:
            out = self.rotate(out, raw_rot)
        out = self.rope_tail(gg.reshape_3d(c, out, d, H, T), pos, compressed, back=True)
        self.cb(out, "attn_derope", il)
        g = hp.o_groups
        out = gg.permute(c, gg.reshape_3d(c, out, d * H // g, g, T), 0, 2, 1, 3)
        wo_a = gg.reshape_3d(c, L.wo_a, d * H // g, hp.o_lora_rank, g)
        oa = self.cb(gg.mul_mat(c, wo_a, out), "attn_wo_a", il)          # [R_o, T, G]
        oa = gg.cont_2d(c, gg.permute(c, oa, 0, 2, 1, 3), hp.o_lora_rank * g, T)
        return self.cb(gg.mul_mat(c, L.wo_b, oa), "attn_out", il)

    # ---- the graph ------------------------------------------------------------------------------
    def build(self):
        m, hp, c = self.model, self.hparams, self.ctx0
        if self.mctx is None or not hasattr(self.mctx, "plan"):
            raise ValueError("deepseek4: the graph needs the dsv4 memory (decode through a Context)")
        D, hc, T = self.n_embd, hp.hc, self.n_tokens
        want = set(self.params.outputs)
        e = self.build_inp_embd(m.get(GLOBAL_TENSORS["tok_embd"]))
        pos = self.build_inp_pos()
        out_ids = self.build_inp_out_ids()
        inp = self.inp = self.res.add_input(InpDSV4(c, self.mctx, T, self.flash_attn, self.rotations()))
        x = self.cb(gg.repeat_4d(c, gg.reshape_3d(c, e, D, 1, T), D, hc, T, 1), "hc_init")

        for il in range(self.n_layer):
            L = layer_weights(m, il, TENSORS)
            if f"layer_inp-{il}" in want:
                self.expand(self.cb(self.build_hc_mean(x), "layer_inp", il))
            residual = x
            cur, post, comb = self.build_hc_pre(x, L.hc_attn_fn, L.hc_attn_scale, L.hc_attn_base, il)
            self.cb(cur, "hc_attn_pre", il)
            cur = self.cb(self.build_norm(cur, L.attn_norm, type=NormType.RMS, il=il), "attn_norm", il)
            cur = self.build_attention(L, inp, cur, pos, il)
            x = self.cb(gg.dsv4_hc_post(c, cur, residual, post, comb), "hc_attn_post", il)

            residual = x
            cur, post, comb = self.build_hc_pre(x, L.hc_ffn_fn, L.hc_ffn_scale, L.hc_ffn_base, il)
            self.cb(cur, "hc_ffn_pre", il)
            cur = self.cb(self.build_norm(cur, L.ffn_norm, type=NormType.RMS, il=il), "ffn_norm", il)
            selected, probs_b = None, L.ffn_exp_probs_b
            if self.ubatch.token is None:
                probs_b = L.ffn_exp_probs_b_vl if L.ffn_exp_probs_b_vl is not None else probs_b
            elif il < hp.hash_layer_count:
                selected = gg.get_rows(c, L.ffn_gate_tid2eid, self.res.t_inp_tokens)
                probs_b = None
            moe = self.build_moe_ffn(cur, L.ffn_gate_inp, L.ffn_up_exps, L.ffn_gate_exps,
                                     L.ffn_down_exps, probs_b, n_expert=hp.n_expert,
                                     n_expert_used=hp.n_expert_used, type_op=FfnOp.SILU,
                                     norm_w=hp.expert_weights_norm, w_scale=hp.expert_weights_scale,
                                     gating_op=Gating.SQRT_SOFTPLUS, il=il,
                                     selected_experts_in=selected)
            sh = self.build_ffn(cur, up=L.ffn_up_shexp, gate=L.ffn_gate_shexp, down=L.ffn_down_shexp,
                                type_op=FfnOp.SILU, type_gate=FfnGate.PAR, il=il)
            self.cb(sh, "ffn_shexp", il)
            cur = self.cb(gg.add(c, moe, sh), "ffn_out", il)
            x = self.cb(gg.dsv4_hc_post(c, cur, residual, post, comb), "l_out", il)

        if f"layer_inp-{self.n_layer}" in want:
            self.expand(self.cb(self.build_hc_mean(x), "layer_inp", self.n_layer))
        full = gg.reshape_2d(c, x, D * hc, T)
        flat = gg.get_rows(c, full, out_ids)                                     # [hc*D, O]
        if "h_nextn" in want or self.params.embeddings_nextn:
            self.res.t_h_nextn = self.cb(flat if self.params.nextn_masked else full, "h_nextn")
        x = gg.reshape_3d(c, flat, D, hc, self.n_outputs)
        cur = self.cb(self.build_hc_head(x, m.get(GLOBAL_TENSORS["hc_head_fn"]),
                                         m.get(GLOBAL_TENSORS["hc_head_scale"]),
                                         m.get(GLOBAL_TENSORS["hc_head_base"])), "hc_head")
        cur = self.cb(self.build_norm(cur, m.get(GLOBAL_TENSORS["output_norm"]), type=NormType.RMS),
                      "result_norm")
        self.res.t_embd = cur
        cur = self.cb(gg.mul_mat(c, m.get(GLOBAL_TENSORS["output"]), cur), "result_output")
        self.res.t_logits = cur
        self.expand(cur)
        self.build_sampling()
        return self.res



class InpDSV4Raw(InpDSV4):
    """The NextN block's attention input: the raw window cache only (with its Hadamard
    rotation when the model rotates raw keys), no compressors."""

    def __init__(self, ctx, mctx, n_tokens: int, flash_attn: bool, rotations: dict):
        self.mctx = mctx
        self.k_rot = {name: _input(ctx, gg.F32, [n, n], f"dsv4_{name}_k_rot")
                      for name, n in rotations.items() if name == "raw"}
        self.raw = InpAttn(ctx, mctx, n_tokens, flash_attn, causal=True)
        self.comp = {}


class DeepSeek4MtpGraph(NextNGraph, DeepSeek4Graph):
    """The NextN draft graph: entries carry all hc streams of h; one dsv4 block (raw window
    attention, routed MoE + shared expert) between hc_pre/hc_post; h_nextn is the flattened
    streams of the output rows; then the hc head, the shared head norm and the head."""

    def nextn_width(self) -> int:
        return self.hparams.n_embd_nextn

    def build_nextn_embed(self, W, il):
        c, hp, D, T = self.ctx0, self.hparams, self.n_embd, self.n_tokens
        hc = hp.hc
        inp = self.res.add_input(InpEmbdH(c, T, self.nextn_width()))
        self.res.t_inp_tokens = inp.tokens
        emb_w = W.embed_tokens if W.embed_tokens is not None else self.model.get("token_embd.weight")
        e = self.cb(gg.get_rows(c, emb_w, inp.tokens), "mtp_tok_embd", il)
        self.res.t_inp_embd = e
        h = self.build_norm(gg.reshape_3d(c, inp.h, D, hc, T), W.hnorm, type=NormType.RMS, il=il)
        self.cb(h, "mtp_hnorm", il)
        e = self.build_norm(e, W.enorm, type=NormType.RMS, il=il)
        e = gg.repeat_4d(c, gg.reshape_3d(c, e, D, 1, T), D, hc, T, 1)
        self.cb(e, "mtp_enorm", il)
        x = self.cb(gg.concat(c, e, h, 0), "mtp_concat", il)                  # [2D, hc, T]
        return self.cb(self.build_lora_mm(W.eh_proj, x), "mtp_eh_proj", il)   # [D, hc, T]

    def nextn_inputs(self):
        pos = self.build_inp_pos()
        inp = self.res.add_input(InpDSV4Raw(self.ctx0, self.mctx, self.n_tokens, self.flash_attn,
                                            self.rotations()))
        return inp, pos

    def nextn_block(self, inputs, x, il):
        c, hp = self.ctx0, self.hparams
        inp, pos = inputs
        L = layer_weights(self.model, il, TENSORS)
        residual = x
        cur, post, comb = self.build_hc_pre(x, L.hc_attn_fn, L.hc_attn_scale, L.hc_attn_base, il)
        cur = self.cb(self.build_norm(cur, L.attn_norm, type=NormType.RMS, il=il), "attn_norm", il)
        cur = self.build_attention(L, inp, cur, pos, il)
        x = self.cb(gg.dsv4_hc_post(c, cur, residual, post, comb), "hc_attn_post", il)
        residual = x
        cur, post, comb = self.build_hc_pre(x, L.hc_ffn_fn, L.hc_ffn_scale, L.hc_ffn_base, il)
        cur = self.cb(self.build_norm(cur, L.ffn_norm, type=NormType.RMS, il=il), "ffn_norm", il)
        moe = self.build_moe_ffn(cur, L.ffn_gate_inp, L.ffn_up_exps, L.ffn_gate_exps,
                                 L.ffn_down_exps, L.ffn_exp_probs_b, n_expert=hp.n_expert,
                                 n_expert_used=hp.n_expert_used, type_op=FfnOp.SILU,
                                 norm_w=hp.expert_weights_norm, w_scale=hp.expert_weights_scale,
                                 gating_op=Gating.SQRT_SOFTPLUS, il=il)
        sh = self.build_ffn(cur, up=L.ffn_up_shexp, gate=L.ffn_gate_shexp, down=L.ffn_down_shexp,
                            type_op=FfnOp.SILU, type_gate=FfnGate.PAR, il=il)
        cur = self.cb(gg.add(c, moe, sh), "ffn_out", il)
        return self.cb(gg.dsv4_hc_post(c, cur, residual, post, comb), "l_out", il)

    def build_nextn_head(self, x, W, out_ids):
        c, m, hp = self.ctx0, self.model, self.hparams
        D, hc = self.n_embd, hp.hc
        flat = gg.get_rows(c, gg.reshape_2d(c, x, D * hc, self.n_tokens), out_ids)
        self.res.t_h_nextn = self.cb(flat, "h_nextn")
        x = gg.reshape_3d(c, flat, D, hc, self.n_outputs)
        cur = self.cb(self.build_hc_head(x, m.get(GLOBAL_TENSORS["hc_head_fn"]),
                                         m.get(GLOBAL_TENSORS["hc_head_scale"]),
                                         m.get(GLOBAL_TENSORS["hc_head_base"])), "mtp_hc_head")
        norm_w = W.shared_head_norm if W.shared_head_norm is not None else m.get(GLOBAL_TENSORS["output_norm"])
        cur = self.cb(self.build_norm(cur, norm_w, type=NormType.RMS), "mtp_shared_head_norm")
        self.res.t_embd = cur
        head = W.shared_head_head if W.shared_head_head is not None else m.get(GLOBAL_TENSORS["output"])
        cur = self.cb(gg.mul_mat(c, head, cur), "result_output")
        self.res.t_logits = cur
        return self.expand(cur)


DeepSeek4Graph.MtpGraph = DeepSeek4MtpGraph
