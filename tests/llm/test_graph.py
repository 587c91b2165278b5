"""Graph builders: llama.cpp node names and order, FFN variants (gate types, clamp
semantics, bias/scale order), MoE, fused QKV and no-cache attention against numpy."""
import math

import numpy as np
import pytest

import pyggml as gg
from llama_ref import ArrayModel, make_hparams, make_weights, rms_norm, silu
from util import assert_close

from pyggml.llm import graph as G
from pyggml.llm.context import Context
from pyggml.llm.graph import GraphContext, GraphParams, GraphResult
from pyggml.llm.inputs import UBatch
from pyggml.llm.kv_cache import KVCache
from pyggml.llm.models import build_graph


def built_graph(flash_attn, n_tokens=3, **hp_kw):
    hp = make_hparams(**hp_kw)
    model = ArrayModel(hp, make_weights(hp))
    kv = KVCache.for_model(hp, 256, v_trans=not flash_attn)
    ub = UBatch.from_tokens(list(range(n_tokens)))
    mctx, = kv.init_batch([ub])
    mctx.apply()
    p = GraphParams(arch=hp.arch, hparams=hp, ubatch=ub, n_outputs=1, flash_attn=flash_attn,
                    mctx=mctx)
    return build_graph(model, p, GraphResult()), ub


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_llama_node_names_order_and_mask_type(flash_attn):
    res, _ = built_graph(flash_attn)
    names = [n.name for n in res.gf.nodes]
    for il in (0, 1):
        for nm in ("attn_norm", "Qcur", "Kcur", "Vcur", "kqv_out", "attn_out", "ffn_inp",
                   "ffn_norm", "ffn_out", "l_out"):
            assert f"{nm}-{il}" in names, f"{nm}-{il} missing"
    assert names[-1] == "result_output" and "result_norm" in names
    attn = "fattn-0" if flash_attn else "kq-0"
    assert attn in names
    # cache writes come before the attention that reads the cache views
    writes = [i for i, n in enumerate(res.gf.nodes) if n.op == "SET_ROWS"]
    assert len(writes) == 4 and writes[1] < names.index(attn)
    leafs = {t.name: t for t in res.gf.leafs}
    for nm in ("inp_tokens", "inp_pos", "out_ids", "attn_inp_k_idxs", "attn_inp_v_idxs",
               "attn_inp_kq_mask"):
        assert nm in leafs, nm
    mask = leafs["attn_inp_kq_mask"]
    assert mask.type == (gg.F16 if flash_attn else gg.F32)
    assert mask.ne == [256, 3, 1, 1]
    assert res.t_logits.ne == [96, 1, 1, 1]


def test_unused_inputs_are_not_allocated_and_fills_skip_them():
    hp = make_hparams()
    model = ArrayModel(hp, make_weights(hp))
    ub = UBatch.from_tokens([1, 2, 3])
    res = GraphResult()
    g = GraphContext(model, GraphParams(arch="llama", hparams=hp, ubatch=ub, n_outputs=1), res)
    x = g.build_inp_embd(model.get("token_embd.weight"))
    pos = g.build_inp_pos()                             # never consumed
    g.expand(gg.scale(g.ctx0, x, 2.0))
    res.gf.alloc()
    assert not pos.has_data
    res.set_inputs(ub)                                  # must not touch pos
    res.gf.compute(1)
    np.testing.assert_allclose(res.gf.nodes[-1].numpy(),
                               2 * model.get("token_embd.weight").numpy()[[1, 2, 3]], rtol=1e-6)


# ---- builders against numpy ------------------------------------------------------------------
class Bench:
    """A GraphContext over an allocated weight context, for builder tests."""

    def __init__(self, T=5, **hp_kw):
        self.hp = make_hparams(**hp_kw)
        self.rng = np.random.default_rng(0)
        self.wctx = gg.Context(16 << 20)
        self.res = GraphResult()
        ub = UBatch.from_tokens(np.zeros(T, np.int32))
        self.g = GraphContext(None, GraphParams(arch="llama", hparams=self.hp, ubatch=ub,
                                                n_outputs=T), self.res)

    def w(self, *shape, scale=None):
        a = self.rng.normal(0, scale or 1 / math.sqrt(shape[-1]), size=shape)
        return self.wctx.from_numpy(a.astype(np.float32)), a.astype(np.float32).astype(np.float64)

    def run(self, t):
        self.g.expand(t)
        self.res.gf.compute(2)
        return t.to_f32().astype(np.float64)


def _act(x, kind):
    return {"silu": silu, "relu": lambda v: np.maximum(v, 0)}[kind](x)


@pytest.mark.parametrize("case", ["swiglu_par", "silu_seq", "relu_par", "relu_sqr", "swiglu_fused",
                                  "clamp_activated", "clamp_gate_input", "bias_scale_order"])
def test_build_ffn_variants(case):
    b = Bench()
    D, F, T = 16, 24, 5
    x, xv = b.w(T, D, scale=1.0)
    up, upv = b.w(F, D)
    gate, gatev = b.w(F, D)
    down, downv = b.w(D, F)
    g = b.g
    kw = {}
    if case == "swiglu_par":
        y = g.build_ffn(x, up=up, gate=gate, down=down, type_op=G.FfnOp.SILU, type_gate=G.FfnGate.PAR)
        h = silu(xv @ gatev.T) * (xv @ upv.T)
    elif case == "silu_seq":
        gate2, gate2v = b.w(F, F)
        y = g.build_ffn(x, up=up, gate=gate2, down=down, type_op=G.FfnOp.SILU, type_gate=G.FfnGate.SEQ)
        h = silu((xv @ upv.T) @ gate2v.T)
    elif case == "relu_par":
        y = g.build_ffn(x, up=up, gate=gate, down=down, type_op=G.FfnOp.RELU, type_gate=G.FfnGate.PAR)
        h = np.maximum(xv @ gatev.T, 0) * (xv @ upv.T)
    elif case == "relu_sqr":
        y = g.build_ffn(x, up=up, down=down, type_op=G.FfnOp.RELU_SQR)
        h = np.maximum(xv @ upv.T, 0) ** 2
    elif case == "swiglu_fused":
        up2, up2v = b.w(2 * F, D)
        y = g.build_ffn(x, up=up2, down=down, type_op=G.FfnOp.SWIGLU)
        u = xv @ up2v.T
        h = silu(u[:, :F]) * u[:, F:]
    elif case in ("clamp_activated", "clamp_gate_input"):
        L = 0.5
        g.swiglu_clamp_shexp = [L]
        if case == "clamp_gate_input":
            g.swiglu_clamp_mode = G.ClampMode.GATE_INPUT
        y = g.build_ffn(x, up=up, gate=gate, down=down, type_op=G.FfnOp.SILU,
                        type_gate=G.FfnGate.PAR, il=0)
        gv, uv = xv @ gatev.T, np.clip(xv @ upv.T, -L, L)
        if case == "clamp_activated":
            h = np.minimum(silu(gv), L) * uv
        else:
            h = silu(np.minimum(gv, L)) * uv
    else:  # bias then scale, on up, gate and down
        up_b, up_bv = b.w(F, scale=1.0)
        up_s, up_sv = b.w(F, scale=1.0)
        gate_b, gate_bv = b.w(F, scale=1.0)
        gate_s, gate_sv = b.w(F, scale=1.0)
        down_b, down_bv = b.w(D, scale=1.0)
        down_s, down_sv = b.w(D, scale=1.0)
        y = g.build_ffn(x, up=up, up_b=up_b, up_s=up_s, gate=gate, gate_b=gate_b, gate_s=gate_s,
                        down=down, down_b=down_b, down_s=down_s, type_op=G.FfnOp.SILU,
                        type_gate=G.FfnGate.PAR)
        u = (xv @ upv.T + up_bv) * up_sv
        gg_ = (xv @ gatev.T + gate_bv) * gate_sv
        ref = ((silu(gg_) * u) @ downv.T + down_bv) * down_sv
        assert_close(b.run(y), ref, 1e-6, case)
        return
    ref = h @ downv.T
    assert_close(b.run(y), ref, 1e-6, case)


def test_build_moe_ffn_matches_numpy():
    b = Bench(T=6)
    D, F, E, K, T = 16, 8, 4, 2, 6
    x, xv = b.w(T, D, scale=1.0)
    gate_inp, giv = b.w(E, D, scale=1.0)
    up, upv = b.w(E, F, D)
    gate, gatev = b.w(E, F, D)
    down, downv = b.w(E, D, F)
    y = b.g.build_moe_ffn(x, gate_inp, up, gate, down, n_expert=E, n_expert_used=K, norm_w=True,
                          w_scale=1.5, il=0)
    assert y.name == "ffn_moe_out-0"
    got = b.run(y)
    logits = xv @ giv.T
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    ref = np.zeros((T, D))
    for t in range(T):
        sel = np.argsort(-p[t])[:K]
        wts = p[t, sel] / p[t, sel].sum() * 1.5
        for e, wt in zip(sel, wts):
            h = silu(gatev[e] @ xv[t]) * (upv[e] @ xv[t])
            ref[t] += wt * (downv[e] @ h)
    assert_close(got, ref, 1e-6, "moe")


def test_fused_qkv_equals_separate_projections():
    from types import SimpleNamespace
    b = Bench(T=4)
    D, d, H, Hkv, T = 16, 4, 4, 2, 4
    x, xv = b.w(T, D, scale=1.0)
    wqkv, wv_ = b.w((H + 2 * Hkv) * d, D)
    bqkv, bv_ = b.w((H + 2 * Hkv) * d, scale=1.0)
    q, k, v = b.g.build_qkv(SimpleNamespace(wqkv=wqkv, bqkv=bqkv), x, d, H, d, Hkv, il=0)
    assert (q.name, k.name, v.name) == ("Qcur-0", "Kcur-0", "Vcur-0")
    assert q.ne[:3] == [d, H, T] and k.ne[:3] == [d, Hkv, T] and v.ne[:3] == [d, Hkv, T]
    outs = [gg.cont(b.g.ctx0, t) for t in (q, k, v)]
    for t in outs:
        b.g.expand(t)
    b.res.gf.compute(1)
    full = xv @ wv_.T + bv_
    np.testing.assert_allclose(outs[0].to_f32().reshape(T, -1), full[:, :H * d], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[1].to_f32().reshape(T, -1), full[:, H * d:(H + Hkv) * d], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[2].to_f32().reshape(T, -1), full[:, (H + Hkv) * d:], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("softcap", [0.0, 2.0], ids=["nocap", "softcap"])
@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_no_cache_attention_with_sinks(flash_attn, softcap):
    # softcap: FA caps scale*qk, the non-FA path caps qk before scaling; they agree at scale 1
    scale = 1.0 if softcap else 0.3
    b = Bench(T=5)
    b.g.attn_soft_cap = softcap
    d, H, Hkv, T = 8, 4, 2, 5
    b.g.flash_attn = flash_attn
    b.g.params.flash_attn = flash_attn
    q, qv = b.w(T, H, d, scale=1.0)
    k, kv_ = b.w(T, Hkv, d, scale=1.0)
    v, vv = b.w(T, Hkv, d, scale=1.0)
    sinks, sv = b.w(H, scale=1.0)
    inp = b.g.build_attn_inp_no_cache()
    y = b.g.build_attn(inp, None, None, q, k, v, sinks=sinks, kq_scale=scale, il=0, n_kv_max=T)
    assert y.name == "kqv_out-0" and y.ne[:2] == [d * H, T]
    b.g.expand(y)
    b.res.gf.alloc()
    b.res.set_inputs(b.g.ubatch)
    b.res.gf.compute(2)
    got = y.to_f32()
    ref = np.zeros((T, H, d))
    for h in range(H):
        s = qv[:, h] @ kv_[:, h // 2].T
        s = softcap * np.tanh(s / softcap) if softcap else s * scale
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        m = np.maximum(s.max(1), sv[h])
        e = np.exp(s - m[:, None])
        den = e.sum(1) + np.exp(sv[h] - m)
        ref[:, h] = (e / den[:, None]) @ vv[:, h // 2]
    assert_close(got, ref.reshape(T, H * d), 1e-6, "attention")


def test_backend_greedy_sampling_node():
    hp = make_hparams()
    model = ArrayModel(hp, make_weights(hp))
    ctx = Context(model, n_ctx=32, backend_sampling=True)
    logits = ctx.decode([1, 2, 3])
    res = next(iter(ctx._graphs.values()))
    assert res.t_sampled is not None and res.t_sampled.name == "sampled"
    assert int(res.t_sampled.numpy().ravel()[0]) == int(np.argmax(logits[-1]))
