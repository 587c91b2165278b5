"""DSpark drafts on a DeepSeek V4 backbone (a `dflash` file with `hyper_connection.count`).

The stages are full dsv4 blocks (hyper-connection streams, low-rank q, one shared K=V head
with RoPE on its tail, sinks, grouped low-rank output, sqrt-softplus MoE with a shared
expert), every one uncompressed and attending through a sliding window: the draft's KV is a
K-only window cache of all layers.

* Injection (float rows = the target's tapped layer inputs at the target positions):
  g = rms(fc . feats) * enc.output_norm; per layer the K row rope_tail(rms(wkv . g) *
  kv_norm) (plain RoPE at freq_base) is stored; t_embd = g.
* Noise block ([id_last, MASK...], non-causal): the streams start as the token embeddings,
  then per layer hc_pre -> attn_norm -> attention -> hc_post -> hc_pre -> ffn_norm -> MoE +
  shared expert -> hc_post; t_embd = hc_head(streams) (pre-norm, what the confidence head
  reads); logits = output . rms(t_embd) * output_norm (the target's output unless the draft
  has one); then the DSpark Markov head of every block.

The builders are DeepSeek4Graph's (and its NextN block's); the Markov head is DFlash's.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyggml as gg

from ..gguf_check import GGUFError
from ..gguf_keys import KeyReader
from ..graph import NormType
from ..inputs import InpAttn
from ..inputs_draft import InpBlocks, InpRows, n_blocks_of, shared_output, shared_tensor
from ..inputs_dsv4 import InpDSV4
from ..kv_cache import N_PAD, SWA_STANDARD, pad_to
from ..kv_cache_iswa import KVCacheISWA
from .deepseek4 import GLOBAL_TENSORS, TENSORS, DeepSeek4Graph, DeepSeek4HParams, DeepSeek4MtpGraph
from .llama import layer_weights

__all__ = ["DSparkDSV4HParams", "DSparkDSV4Graph", "dsv4_hparams"]


@dataclass(frozen=True)
class DSparkDSV4HParams(DeepSeek4HParams):
    """The dsv4 keys of the backbone plus what a DFlash-family drafter reads."""
    target_layers: tuple = ()
    block_size: int = 16
    sample_from_anchor: bool = True
    causal: bool = False
    has_confidence_head: bool = True
    mask_id: int | None = None
    selector_top_k: int = 0

    @property
    def n_embd_enc(self) -> int:
        return len(self.target_layers) * self.n_embd


def dsv4_hparams(kv: dict, arch: str, dflash: dict) -> DSparkDSV4HParams:
    """Read the backbone keys of a dflash file (the names llama.cpp's dflash loader reads
    under its own prefix); `dflash` holds the DFlash keys already read."""
    r = KeyReader(kv, arch)
    n_layer = r.get("block_count", required=True)
    gating = r.get("expert_gating_func", 0)
    if gating != 4:
        raise GGUFError(f"{arch}: a DSpark DSV4 draft needs expert_gating_func 4 (sqrt-softplus), "
                        f"got {gating}")
    ratios = kv.get(f"{arch}.attention.compress_ratios", [0] * n_layer)
    if not isinstance(ratios, list) or any(int(x) for x in ratios[:n_layer]):
        raise GGUFError(f"{arch}: a DSpark DSV4 draft needs uncompressed attention in every "
                        f"stage (compress_ratios all 0), got {ratios!r}")
    n_swa = r.get("attention.sliding_window", required=True)
    if n_swa <= 0:
        raise GGUFError(f"{arch}: a DSpark DSV4 draft needs attention.sliding_window > 0")
    clamp = r.get_arr("swiglu_clamp_exp", n_layer, 0.0, float)
    clamp_sh = r.get_arr("swiglu_clamp_shexp", n_layer, 0.0, float) \
        if r.has("swiglu_clamp_shexp") else clamp
    head_k = r.get("attention.key_length", required=True)
    base = r.get("rope.freq_base", 10000.0, float)
    n_ctx_train = r.get("context_length", required=True)
    tokens = kv.get("tokenizer.ggml.tokens")
    hp = DSparkDSV4HParams(
        arch=arch, n_vocab=r.get("vocab_size", len(tokens) if isinstance(tokens, list) else 0),
        n_ctx_train=n_ctx_train, n_embd=r.get("embedding_length", required=True),
        n_layer=n_layer, n_nextn=0, n_head=r.get("attention.head_count", required=True),
        n_head_kv=1, head_dim_k=head_k, head_dim_v=head_k,
        n_rot=r.get("rope.dimension_count", required=True), rope_freq_base=base,
        rope_freq_scale=1.0,
        rms_eps=r.get("attention.layer_norm_rms_epsilon", required=True, kind=float),
        n_lora_q=r.get("attention.q_lora_rank", required=True), n_swa=n_swa,
        n_ff_exp=r.get("expert_feed_forward_length", required=True),
        n_expert_shared=r.get("expert_shared_count", required=True),
        n_expert=r.get("expert_count", required=True),
        n_expert_used=r.get("expert_used_count", required=True),
        expert_weights_scale=r.get("expert_weights_scale", required=True, kind=float),
        expert_weights_norm=r.get("expert_weights_norm", required=True, kind=bool),
        swiglu_clamp_exp=clamp, swiglu_clamp_shexp=clamp_sh,
        indexer_n_head=0, indexer_head_size=0, indexer_top_k=0,
        o_groups=r.get("attention.output_group_count", required=True),
        o_lora_rank=r.get("attention.output_lora_rank", required=True),
        compress_rope_base=base, compress_ratios=(0,) * n_layer,
        hc=r.get("hyper_connection.count", required=True),
        sinkhorn_iters=r.get("hyper_connection.sinkhorn_iterations", required=True),
        hc_eps=r.get("hyper_connection.epsilon", required=True, kind=float),
        hash_layer_count=0, ext_factor=0.0, n_ctx_orig_yarn=n_ctx_train, **dflash)
    if hp.hc != 4:
        raise GGUFError(f"{arch}: hyper_connection.count must be 4, got {hp.hc}")
    if hp.o_groups <= 0 or hp.n_head % hp.o_groups:
        raise GGUFError(f"{arch}: head_count {hp.n_head} is not a multiple of "
                        f"output_group_count {hp.o_groups}")
    return hp


class InpDraftRaw(InpDSV4):
    """The window cache's attention input (causal or not), no compressors, no rotation."""

    def __init__(self, ctx, mctx, n_tokens: int, flash_attn: bool, causal: bool):
        self.mctx = mctx
        self.k_rot = {}
        self.raw = InpAttn(ctx, mctx, n_tokens, flash_attn, causal=causal)
        self.comp = {}


class DSparkDSV4Graph(DeepSeek4Graph):
    HParams = DSparkDSV4HParams

    @staticmethod
    def create_memory(model, hp: DSparkDSV4HParams, cp):
        d = hp.head_dim_k
        return KVCacheISWA(swa_layers=[True] * hp.n_layer, n_swa=hp.n_swa,
                           size=pad_to(cp.n_ctx, N_PAD), swa_type=SWA_STANDARD,
                           n_ubatch=cp.n_ubatch, n_seq_max=cp.n_seq_max, n_embd_k_gqa=d,
                           n_embd_v_gqa=d, head_dim_k=d, head_dim_v=d, n_head_kv=1,
                           type_k=cp.type_k, type_v=cp.type_k, k_only=True)

    def rotations(self) -> dict:
        return {}      # no indexer; unquantized caches keep plain keys

    def build(self):
        if self.model.get("d2t", required=False) is not None:
            raise NotImplementedError("dflash: a DSV4-backbone draft with a reduced vocabulary "
                                      "(d2t) is not supported")
        if self.ubatch.token is None:
            return self.build_injection()
        return self.build_block()

    def build_injection(self):
        m, hp, c, T = self.model, self.hparams, self.ctx0, self.n_tokens
        inp = self.res.add_input(InpRows(c, T, hp.n_embd_enc))
        feats = self.cb(inp.embd, "inp_target_features")
        pos = self.build_inp_pos()
        attn = self.res.add_input(InpDraftRaw(c, self.mctx, T, self.flash_attn, causal=True))
        g = self.build_lora_mm(m.get("fc.weight"), feats, m.get("fc.scale", required=False))
        g = self.cb(self.build_norm(g, m.get("enc.output_norm.weight"), type=NormType.RMS),
                    "inp_g_embeddings")
        for il in range(self.n_layer):
            L = layer_weights(m, il, TENSORS)
            kv = self.build_norm(gg.mul_mat(c, L.wkv, g), L.attn_kv_norm, type=NormType.RMS, il=il)
            kv = gg.reshape_3d(c, kv, hp.head_dim_k, 1, T)
            kv = self.cb(self.rope_tail(kv, pos, compressed=False), "kv_injected", il)
            lay = attn.raw.layer(il)
            self.expand(lay.part.cpy_k(c, kv, lay.k_idxs, il))
        self.res.t_embd = g
        self.expand(g)
        return self.res

    def build_block(self):
        from .dflash import DFlashGraph
        m, hp, c, p = self.model, self.hparams, self.ctx0, self.params
        D, T = self.n_embd, self.n_tokens
        n_blocks = n_blocks_of(self.ubatch)
        if T % n_blocks:
            raise ValueError(f"dflash: {T} block tokens do not split into {n_blocks} equal blocks")
        self.res.add_input(InpBlocks(n_blocks))
        e = self.cb(self.build_inp_embd(shared_tensor(m, p, "token_embd.weight")), "inp_noise_embd")
        tokens = self.res.t_inp_tokens
        pos = self.build_inp_pos()
        attn = self.res.add_input(InpDraftRaw(c, self.mctx, T, self.flash_attn,
                                              causal=p.causal_attn))
        x = self.cb(gg.repeat_4d(c, gg.reshape_3d(c, e, D, 1, T), D, hp.hc, T, 1), "hc_init")
        for il in range(self.n_layer):
            # the stages are the NextN block of the dsv4 trunk (raw window attention, routed
            # MoE + shared expert between the hyper-connection mixes)
            x = DeepSeek4MtpGraph.nextn_block(self, (attn, pos), x, il)
        cur = self.cb(self.build_hc_head(x, m.get(GLOBAL_TENSORS["hc_head_fn"]),
                                         m.get(GLOBAL_TENSORS["hc_head_scale"]),
                                         m.get(GLOBAL_TENSORS["hc_head_base"])), "hc_head")
        self.res.t_embd = cur          # pre-norm: the confidence head reads it
        cur = self.cb(self.build_norm(cur, m.get("output_norm.weight"), type=NormType.RMS),
                      "result_norm")
        own = m.get("output.weight", required=False)
        output = own if own is not None else shared_output(m, p)
        cur = self.cb(self.build_lora_mm(output, cur), "result_output")
        self.res.t_logits = cur
        self.expand(cur)
        if m.get("markov_w1.weight", required=False) is not None:
            DFlashGraph.markov_head(self, tokens, n_blocks)
        self.build_sampling()
        return self.res
