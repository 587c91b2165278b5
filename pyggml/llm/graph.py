"""The graph builder (llama.cpp's llm_graph_context).

`GraphParams` fully determines a graph's topology (its `key()`), `GraphResult` owns one
built graph with its inputs and named outputs, `GraphContext` holds the shared builders that
the per-architecture graphs in `models/` compose (the feed-forward ones live in graph_ffn.py
and are mixed in). Intermediates are named as llama.cpp's callback names them (`attn_norm-0`,
`Qcur-0`, ..., `result_output`) so graphs can be compared node by node, and
`GraphResult.get(name)` finds them by that name.

Attention goes through the memory interface (memory.py): `build_attn` asks the input for the
cache part of layer il and calls its `cpy_k/cpy_v` (writes) and `get_k/get_v` (views); it
does not know which memory it talks to.
"""
from __future__ import annotations

from dataclasses import InitVar, dataclass
from enum import IntEnum
from typing import Any

import pyggml as gg

from .graph_ffn import ClampMode, FfnBuilders, FfnGate, FfnOp, Gating
from .inputs import InpAttn, InpEmbd, InpOutIds, InpPos, UBatch
from .memory import NoCacheContext
from .memory_recurrent import InpRS, build_rs

# Query tokens up to which the CPU's F16 flash attention keeps ggml's one-row order
# (csrc/cpu/flash_attn_rowwise.cpp); past it a tiled order that differs in the last bits.
FA_ROW_ORDER_MAX_TOKENS = 64


class GraphType(IntEnum):          # llm_graph_type
    DEFAULT = 0
    ENCODER = 1
    DECODER = 2
    DECODER_MTP = 3                 # the NextN draft graph (models' MtpGraph)


class NormType(IntEnum):            # llm_norm_type
    NORM = 0                        # layer norm (norm_eps)
    RMS = 1                         # rms norm (norm_rms_eps)


# flat names, as llama.cpp spells the enum members
LLM_NORM, LLM_NORM_RMS = NormType.NORM, NormType.RMS
(FFN_SILU, FFN_GELU, FFN_RELU, FFN_RELU_SQR, FFN_SWIGLU, FFN_GEGLU, FFN_REGLU,
 FFN_SWIGLU_OAI_MOE) = tuple(FfnOp)
FFN_SEQ, FFN_PAR = FfnGate.SEQ, FfnGate.PAR
CLAMP_ACTIVATED, CLAMP_GATE_INPUT = ClampMode.ACTIVATED, ClampMode.GATE_INPUT
GATING_SOFTMAX, GATING_SIGMOID, GATING_SOFTMAX_WEIGHT, GATING_SQRT_SOFTPLUS = tuple(Gating)


def graph_max_nodes(n_tensors: int, n_tokens: int = 0, hybrid: bool = False) -> int:
    """Upstream's node budget (dsv4/hybrid families: max(40*T, 32*n_tensors)), doubled: a
    pyggml Graph's capacity counts leafs (weights, inputs) as well as nodes."""
    if hybrid:
        return 2 * max(40 * n_tokens, 32 * n_tensors, 1024)
    return 2 * max(1024, 8 * n_tensors)


@dataclass
class GraphParams:
    """Everything that decides a graph's topology, plus the per-step state inputs read.

    `mctx` is the memory's plan for this ubatch (None: attention over the ubatch itself).
    `outputs` names extra tensors (by their cb name) to keep readable after compute.
    `kv`, `slot`, `n_kv`: shorthand for a unified KVCache with a planned slot.
    `gtype` DECODER_MTP selects the architecture's NextN draft graph; `nextn_layer_offset`
    picks which NextN block it runs. `nextn_masked` places the trunk's output crop before
    the last layer's residual (h_nextn then has output rows only) instead of just before
    the head (h_nextn keeps every row)."""
    arch: str
    hparams: Any
    ubatch: UBatch
    n_outputs: int
    flash_attn: bool = True
    mctx: Any = None
    causal_attn: bool = True
    samplers: tuple = ()      # backend samplers (only "greedy" is supported)
    outputs: tuple = ()
    gtype: GraphType = GraphType.DEFAULT
    nextn_layer_offset: int = 0
    nextn_masked: bool = False
    embeddings_nextn: bool = False   # the context reads h_nextn (graphs may skip it otherwise)
    n_ctx: int = 0            # the context's n_ctx (phi3's LongRoPE picks its factors by it)
    kv: InitVar[Any] = None
    slot: InitVar[Any] = None
    n_kv: InitVar[int] = 0

    def __post_init__(self, kv, slot, n_kv):
        if kv is not None and self.mctx is None:
            from .kv_cache import KVCacheContext
            self.mctx = KVCacheContext(kv, slot, self.ubatch)
            if n_kv:
                self.mctx.n_kv = int(n_kv)

    def key(self) -> tuple:
        """The shape key; taken once (the memory plan is applied before params are made)."""
        k = self.__dict__.get("_key")
        if k is None:
            ub = self.ubatch
            mkey = None if self.mctx is None else (type(self.mctx).__name__, self.mctx.shape_key())
            k = self.__dict__["_key"] = (
                self.arch, ub.n_tokens, self.n_outputs, mkey, ub.token is not None,
                ub.embd is not None, self.flash_attn, self.causal_attn, tuple(self.samplers),
                tuple(self.outputs), int(self.gtype), self.nextn_layer_offset, self.nextn_masked,
                self.embeddings_nextn)
        return k

    def allow_reuse(self, other: "GraphParams") -> bool:
        return other is not None and self.key() == other.key()


class GraphResult:
    """One built graph: its compute context (no_alloc), inputs and named outputs."""

    def __init__(self, max_nodes: int = 8192):
        self.ctx = gg.Context(mem_size=1 << 20, no_alloc=True)
        self.gf = gg.Graph(self.ctx, max_nodes)
        self.inputs: list = []
        self.t_inp_tokens = self.t_inp_embd = None
        self.t_logits = self.t_embd = self.t_sampled = self.t_h_nextn = None
        self.t_layer_inp: list = []
        self.params: GraphParams | None = None
        self.model = None
        self._by_name: dict | None = None
        self._sampled = None

    def sampled_view(self):
        """The ids the in-graph greedy sampler took, int32 [n_outputs]: a view of the
        graph's storage, valid until its next compute."""
        if self._sampled is None:
            if self.t_sampled is None:
                raise RuntimeError("GraphResult: this graph has no backend sampler (build it "
                                   "with samplers=('greedy',))")
            self._sampled = self.t_sampled.numpy().reshape(-1)
        return self._sampled

    def add_input(self, inp):
        self.inputs.append(inp)
        return inp

    def set_inputs(self, ub: UBatch) -> None:
        for inp in self.inputs:
            inp.set_input(ub)

    def can_reuse(self, params: GraphParams) -> bool:
        if self.params is None or not self.params.allow_reuse(params):
            return False
        ok = True
        for inp in self.inputs:  # no short-circuit: can_reuse also re-binds the memory state
            ok = inp.can_reuse(params) and ok
        if ok:
            self.params = params
        return ok

    def names(self) -> dict:
        """cb name -> tensor (graph nodes, then leafs; a later node of the same name wins)."""
        if self._by_name is None:
            d = {}
            for t in list(self.gf.leafs) + list(self.gf.nodes):
                if t.name:
                    d[t.name] = t
            self._by_name = d
        return self._by_name

    def get(self, name: str):
        """The tensor the builder named `name` (e.g. "l_out-3", "result_norm"). Its data is
        only kept after compute when the graph was built with the name in params.outputs."""
        t = self.names().get(name)
        if t is None:
            near = sorted(n for n in self.names() if n.split("-")[0] == name.split("-")[0])[:8]
            raise KeyError(f"GraphResult: no tensor named {name!r}"
                           + (f" (similar: {', '.join(near)})" if near else ""))
        return t

    def set_outputs(self) -> None:
        self._by_name = None
        for t in (self.t_logits, self.t_embd, self.t_sampled, self.t_h_nextn):
            if t is not None:
                t.set_output()
        if self.params is not None:
            for name in self.params.outputs:
                self.get(name).set_output()


class GraphContext(FfnBuilders):
    """Shared builders. Subclasses (models/) emit their graph in build().

    Scalars that only some architectures have (soft cap, SWIGLU clamp limits, embedding
    scale, q/k/v clamp) are attributes with neutral defaults that a model's builder sets
    from its own hyperparameters."""

    attn_soft_cap = 0.0
    max_alibi_bias = 0.0
    clamp_kqv = 0.0
    embedding_scale = 0.0
    swiglu_clamp_exp = None      # per-layer limits (sequence) for MoE experts
    swiglu_clamp_shexp = None    # per-layer limits for dense / shared-expert FFNs
    swiglu_clamp_mode = ClampMode.ACTIVATED
    HYBRID_NODE_BUDGET = False   # dsv4 / hybrid families: the larger node budget

    def __init__(self, model, params: GraphParams, res: GraphResult):
        hp = params.hparams
        self.model, self.params, self.res, self.hparams = model, params, res, hp
        self.ctx0, self.gf = res.ctx, res.gf
        self.ubatch = params.ubatch
        self.mctx = params.mctx
        self.n_tokens, self.n_outputs = params.ubatch.n_tokens, params.n_outputs
        self.n_embd, self.n_layer = hp.n_embd, hp.n_layer
        self.n_head, self.n_head_kv = hp.n_head, hp.n_head_kv
        self.n_embd_head_k, self.n_embd_head_v = hp.head_dim_k, hp.head_dim_v
        self.n_rot, self.rope_type = hp.n_rot, hp.rope_type
        self.freq_base, self.freq_scale = hp.rope_freq_base, hp.rope_freq_scale
        self.n_ctx_orig = hp.n_ctx_train
        self.ext_factor, self.attn_factor = 0.0, 1.0     # no YaRN
        self.beta_fast, self.beta_slow = 32.0, 1.0
        self.norm_rms_eps = hp.rms_eps
        self.norm_eps = hp.rms_eps
        self.flash_attn = params.flash_attn
        res.params = params
        res.model = model  # weights must outlive the graph that reads them

    # ---- naming / graph ---------------------------------------------------------------------
    @staticmethod
    def cb(t, name: str, il: int = -1):
        """Name a tensor as llama.cpp's graph callback does: `name-il` or `name`."""
        t.name = f"{name}-{il}" if il >= 0 else name
        return t

    def expand(self, t):
        self.gf.build_forward_expand(t)
        return t

    # ---- inputs -------------------------------------------------------------------------------
    def build_inp_embd(self, tok_embd):
        """Token embeddings [n_embd, T] (get_rows), or the float rows of an embeddings batch."""
        use_embd = self.ubatch.token is None
        inp = self.res.add_input(InpEmbd(self.ctx0, self.n_tokens, self.n_embd, use_embd))
        self.res.t_inp_tokens = inp.tokens
        cur = inp.embd if use_embd else gg.get_rows(self.ctx0, tok_embd, inp.tokens)
        self.res.t_inp_embd = cur
        if self.embedding_scale:
            cur = gg.scale(self.ctx0, cur, self.embedding_scale)
        self.cb(cur, "embd")
        return self.expand(cur)

    def build_inp_pos(self):
        return self.res.add_input(InpPos(self.ctx0, self.n_tokens)).pos

    def build_inp_out_ids(self):
        return self.res.add_input(InpOutIds(self.ctx0, self.n_outputs)).out_ids

    def build_attn_inp(self) -> InpAttn:
        """The attention input of this graph's memory (every part it exposes), or over the
        ubatch itself when the params carry no memory."""
        mctx = self.mctx if self.mctx is not None else NoCacheContext(self.n_tokens)
        return self.res.add_input(InpAttn(self.ctx0, mctx, self.n_tokens, self.flash_attn,
                                          self.params.causal_attn))

    def build_rs_inp(self):
        """The recurrent-state input (`s_copy`) of this graph's recurrent or hybrid memory."""
        return self.res.add_input(InpRS(self.ctx0, self.mctx.recr()))

    def build_rs(self, inp, states_all, state_size: int, get_state_rows=None):
        """The starting states [state_size, n_seqs] of this ubatch (memory_recurrent.build_rs)."""
        return build_rs(self, inp, states_all, state_size, get_state_rows)

    # the llama.cpp spellings of the same thing
    build_attn_inp_kv = build_attn_inp
    build_attn_inp_kv_iswa = build_attn_inp

    def build_attn_inp_no_cache(self) -> InpAttn:
        return self.res.add_input(InpAttn(self.ctx0, NoCacheContext(self.n_tokens), self.n_tokens,
                                          self.flash_attn, self.params.causal_attn))

    # ---- basic blocks ---------------------------------------------------------------------------
    def build_lora_mm(self, w, cur, w_s=None):
        """mul_mat with an optional per-tensor/per-row scale (applied before LoRA; no LoRA
        adapters are supported here)."""
        res = gg.mul_mat(self.ctx0, w, cur)
        if w_s is not None:
            res = gg.mul(self.ctx0, res, w_s)
        return res

    def build_lora_mm_id(self, w, cur, ids, w_s=None):
        res = gg.mul_mat_id(self.ctx0, w, cur, ids)
        if w_s is not None:
            n_expert, n_tokens = w_s.ne[0], cur.ne[2]
            s = gg.reshape_3d(self.ctx0, w_s, 1, n_expert, 1)
            s = gg.repeat_4d(self.ctx0, s, 1, n_expert, n_tokens, 1)
            res = gg.mul(self.ctx0, res, gg.get_rows(self.ctx0, s, ids))
        return res

    def build_norm(self, cur, mw=None, mb=None, type: NormType = NormType.RMS, il: int = -1):
        """rms (or layer) norm over ne0, then *w, then +b. On [d, H, T] it normalizes per head."""
        if type == NormType.RMS:
            cur = gg.rms_norm(self.ctx0, cur, self.norm_rms_eps)
        elif type == NormType.NORM:
            cur = gg.norm(self.ctx0, cur, self.norm_eps)
        else:
            raise ValueError(f"build_norm: unknown norm type {type}")
        if mw is not None or mb is not None:
            self.cb(cur, "norm", il)
        if mw is not None:
            cur = gg.mul(self.ctx0, cur, mw)
            if mb is not None:
                self.cb(cur, "norm_w", il)
        if mb is not None:
            cur = gg.add(self.ctx0, cur, mb)
        return cur

    def build_qkv(self, layer, cur, n_embd_head_q, n_head_q, n_embd_head_k=None, n_head_k=None,
                  n_embd_head_v=None, n_head_v=None, il: int = -1):
        """Q [dq, Hq, T], K [dk, Hk, T], V [dv, Hv, T] from the fused attn_qkv (strided views)
        or from separate wq/wk/wv (+ biases, + optional clamp). `layer` is a namespace of the
        layer's tensors (absent tensors may be None or missing)."""
        dk = n_embd_head_k or n_embd_head_q
        hk = n_head_k or n_head_q
        dv = n_embd_head_v or dk
        hv = n_head_v or hk
        c, T = self.ctx0, cur.ne[1]
        e_q, e_k = n_embd_head_q * n_head_q, dk * hk
        clamp = self.clamp_kqv

        def w(name):
            return getattr(layer, name, None)

        if w("wqkv") is not None:
            qkv = self.cb(self.build_lora_mm(w("wqkv"), cur, w("wqkv_s")), "wqkv", il)
            if w("bqkv") is not None:
                qkv = self.cb(gg.add(c, qkv, w("bqkv")), "wqkv_b", il)
            elif all(w(b) is not None for b in ("bq", "bk", "bv")):
                b = gg.concat(c, gg.concat(c, w("bq"), w("bk"), 0), w("bv"), 0)
                qkv = self.cb(gg.add(c, qkv, b), "wqkv_b", il)
            if clamp > 0:
                qkv = self.cb(gg.clamp(c, qkv, -clamp, clamp), "wqkv_clamped", il)
            es = gg.type_size(qkv.type)
            q = gg.view_3d(c, qkv, n_embd_head_q, n_head_q, T, es * n_embd_head_q, qkv.nb[1], 0)
            k = gg.view_3d(c, qkv, dk, hk, T, es * dk, qkv.nb[1], es * e_q)
            v = gg.view_3d(c, qkv, dv, hv, T, es * dv, qkv.nb[1], es * (e_q + e_k))
        else:
            outs = []
            for nm, wn, bn, sn, d, h in (("Qcur", "wq", "bq", "wq_s", n_embd_head_q, n_head_q),
                                         ("Kcur", "wk", "bk", "wk_s", dk, hk),
                                         ("Vcur", "wv", "bv", "wv_s", dv, hv)):
                t = self.cb(self.build_lora_mm(w(wn), cur, w(sn)), nm, il)
                if w(bn) is not None:
                    t = self.cb(gg.add(c, t, w(bn)), nm, il)
                if clamp > 0:
                    t = self.cb(gg.clamp(c, t, -clamp, clamp), nm + "_clamped", il)
                outs.append(gg.reshape_3d(c, t, d, h, T))
            q, k, v = outs
        return self.cb(q, "Qcur", il), self.cb(k, "Kcur", il), self.cb(v, "Vcur", il)

    def build_rope(self, x, pos, freq_factors=None, n_rot: int | None = None, mode: int | None = None):
        """rope_ext with this model's RoPE scalars."""
        return gg.rope_ext(self.ctx0, x, pos, freq_factors, n_rot or self.n_rot,
                           self.rope_type if mode is None else mode, self.n_ctx_orig,
                           self.freq_base, self.freq_scale, self.ext_factor, self.attn_factor,
                           self.beta_fast, self.beta_slow)

    # ---- attention ------------------------------------------------------------------------------
    def build_attn_mha(self, q, k, v, kq_b=None, kq_mask=None, sinks=None, v_mla=None,
                       kq_scale: float = 1.0, il: int = -1, n_kv_max: int = 0):
        """q [d, H, T], k [d, Hkv, n_kv, S], v likewise (or transposed: nb1 > nb2).
        Returns [d_v*H, T]."""
        c = self.ctx0
        v_trans = v.nb[1] > v.nb[2]
        n_stream = k.ne[3]
        q = gg.view_4d(c, q, q.ne[0], q.ne[1], q.ne[2] // n_stream, n_stream, q.nb[1], q.nb[2],
                       q.nb[2] * (q.ne[2] // n_stream), 0)
        q = gg.permute(c, q, 0, 2, 1, 3)
        k = gg.permute(c, k, 0, 2, 1, 3)
        v = gg.permute(c, v, 0, 2, 1, 3)
        if self.flash_attn and kq_b is None:
            if v_trans:
                v = gg.transpose(c, v)
            # upstream casts F32 K/V to F16 here (its kernels want F16); pyggml's kernel reads
            # F32 directly, so F32 caches stay exact with flash attention too
            cur = self.cb(self._flash_attn(q, k, v, kq_mask, kq_scale, sinks, n_kv_max), "fattn", il)
            if v_mla is not None:
                cur = gg.permute(c, cur, 0, 2, 1, 3)
                cur = self.cb(gg.mul_mat(c, v_mla, cur), "fattn_mla", il)
                cur = gg.cont(c, gg.permute(c, cur, 0, 2, 1, 3))
            cur = gg.reshape_2d(c, cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        else:
            kq = self.cb(gg.mul_mat(c, k, q), "kq", il)
            if self.attn_soft_cap:
                cap = self.attn_soft_cap
                kq = self.cb(gg.scale(c, kq, 1.0 / cap), "kq_scaled_1", il)
                kq = self.cb(gg.tanh(c, kq), "kq_tanh", il)
                kq = self.cb(gg.scale(c, kq, cap), "kq_scaled_2", il)
            if kq_b is not None:
                kq = self.cb(gg.add(c, kq, kq_b), "kq_plus_kq_b", il)
            kq = gg.soft_max_ext(c, kq, kq_mask, kq_scale, self.max_alibi_bias)
            if sinks is not None:
                gg.soft_max_add_sinks(kq, sinks)
            self.cb(kq, "kq_soft_max", il)
            if not v_trans:
                v = self.cb(gg.cont(c, gg.transpose(c, v)), "v_cont", il)
            kqv = self.cb(gg.mul_mat(c, v, kq), "kqv", il)
            if v_mla is not None:
                kqv = self.cb(gg.mul_mat(c, v_mla, kqv), "kqv_mla", il)
            cur = gg.permute(c, kqv, 0, 2, 1, 3)
            cur = gg.cont_2d(c, cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        return self.expand(cur)

    def _flash_attn(self, q, k, v, kq_mask, kq_scale, sinks, n_kv_max):
        """FLASH_ATTN_EXT over q [d, N, H, S]. The CPU computes F16 K/V rows in ggml's
        one-row order for up to FA_ROW_ORDER_MAX_TOKENS query tokens and with a faster tiled
        order above. When every row is an output (a speculative verify, several sequences at
        once) each row must equal its one-token decode, so such ubatches are attended in
        pieces of at most that many tokens; a prompt (one output row) keeps the fast path."""
        c = self.ctx0
        n = q.ne[1]
        rows = FA_ROW_ORDER_MAX_TOKENS
        split = (n > rows and self.n_outputs == self.n_tokens and not n_kv_max
                 and k.type == gg.F16 and v.type == gg.F16)
        parts = []
        for t0 in range(0, n, rows) if split else [0]:
            m = min(rows, n - t0) if split else n
            qq, mm = q, kq_mask
            if split:
                qq = gg.view_4d(c, q, q.ne[0], m, q.ne[2], q.ne[3], q.nb[1], q.nb[2], q.nb[3],
                                t0 * q.nb[1])
                if kq_mask is not None:
                    mm = gg.view_4d(c, kq_mask, kq_mask.ne[0], m, kq_mask.ne[2], kq_mask.ne[3],
                                    kq_mask.nb[1], kq_mask.nb[2], kq_mask.nb[3], t0 * kq_mask.nb[1])
            cur = gg.flash_attn_ext(c, qq, k, v, mm, kq_scale, self.max_alibi_bias,
                                    self.attn_soft_cap)
            if sinks is not None:
                gg.flash_attn_ext_add_sinks(cur, sinks)
            if n_kv_max:
                gg.flash_attn_ext_set_n_kv_max(cur, int(n_kv_max))
            parts.append(cur)
        cur = parts[0]
        for p in parts[1:]:
            cur = gg.concat(c, cur, p, 2)  # [d_v, H, tokens, S]
        return cur

    def build_attn(self, inp: InpAttn, wo, wo_b, q_cur, k_cur, v_cur, kq_b=None, sinks=None,
                   v_mla=None, kq_scale: float = 1.0, il: int = -1, wo_s=None, n_kv_max: int = 0):
        """Attention through the memory interface: the input gives this layer's cache part;
        its writes (cpy_k, cpy_v) are expanded first, then the attention reads its views
        (get_k, get_v), then wo (+ wo_s, + wo_b). k_cur/v_cur None: the layer reuses K/V
        that another layer wrote."""
        c = self.ctx0
        self.expand(q_cur)
        if v_cur is not None:
            self.expand(v_cur)
        if k_cur is not None:
            self.expand(k_cur)
        lay = inp.layer(il)
        part = lay.part
        # writes first: the views below have no data edge to them
        if k_cur is not None:
            w = part.cpy_k(c, k_cur, lay.k_idxs, il)
            if w is not None:
                self.expand(w)
        if v_cur is not None:
            w = part.cpy_v(c, v_cur, lay.v_idxs, il)
            if w is not None:
                self.expand(w)
        k, v = part.get_k(c, il), part.get_v(c, il)
        cur = self.build_attn_mha(q_cur, k, v, kq_b, lay.kq_mask, sinks, v_mla, kq_scale, il,
                                  n_kv_max)
        self.cb(cur, "kqv_out", il)
        if wo is not None:
            cur = self.build_lora_mm(wo, cur, wo_s)
        if wo_b is not None:
            cur = gg.add(c, cur, wo_b)
        return cur

    # ---- sampling -------------------------------------------------------------------------------
    def build_sampling(self):
        """Backend greedy sampling: argmax of every logits row in-graph (`sampled` I32 [1, O]).
        top_k with k = 1 takes the largest value, the lowest id on ties and NaN above every
        number: exactly np.argmax of the row, so host and graph sampling agree. It exists so
        a greedy loop reads one id per row instead of the whole logits row."""
        if "greedy" not in self.params.samplers or self.res.t_logits is None:
            return None
        t = self.cb(gg.top_k(self.ctx0, self.res.t_logits, 1), "sampled")
        self.res.t_sampled = t
        return self.expand(t)
