"""Qwen3.5 (pyggml.llm.models.qwen35) on a tiny random GGUF (3 gated delta-net layers, one
gated full-attention layer, one NextN block): logits against a float64 numpy forward,
ubatch splits, snapshot rollback through the hybrid memory, and an oracle run against
llama.cpp when llama_cpp imports."""
import os

import numpy as np
import pytest

from qwen35_ref import Qwen35Ref
from util import nmse

import pyggml as gg
from pyggml.llm import Context, Model
from pyggml.llm.tiny import write_tiny_qwen35

MAX_NMSE = 1e-9          # f32 graph against the float64 reference
EQ_REL = 1e-6            # rollback: per row ||got - want|| <= 1e-6 ||want||
SPLIT_REL = 3e-5         # ubatch splits: rows computed by the GEMM path (ubatches of 8 or more)
#                          carry up to ~1.5e-5 relative f32 rounding on this model (measured
#                          against float64), the GEMV path less; so the split test also checks
#                          both against the float64 reference


def assert_same(got, want, tol=EQ_REL):
    got, want = np.atleast_2d(got), np.atleast_2d(want)
    assert got.shape == want.shape
    rel = [np.sqrt(nmse(w, g)) for w, g in zip(want, got)]
    assert max(rel) <= tol, f"row {int(np.argmax(rel))}: relative error {max(rel):.2e}"
FUSED = hasattr(gg, "gated_delta_net")


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return write_tiny_qwen35(tmp_path_factory.mktemp("q35") / "q35.gguf", seed=3)


@pytest.fixture(scope="module")
def model(path):
    return Model.load(path)


@pytest.fixture(scope="module")
def ref(path):
    return Qwen35Ref(path)


def tokens(n, seed=0):
    return np.random.default_rng(seed).integers(3, 256, size=n)


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_prompt_and_decode_match_numpy_reference(model, ref, flash_attn):
    toks = tokens(25)
    ctx = Context(model, n_ctx=128, n_ubatch=16, flash_attn=flash_attn, type_k=gg.F32,
                  type_v=gg.F32)
    got = [ctx.decode(toks[:21], logits_all=True)] + [ctx.decode([int(t)]) for t in toks[21:]]
    got = np.concatenate(got).astype(np.float64)
    ref.reset()
    want = ref.forward(toks)
    errs = [nmse(w, g) for w, g in zip(want, got)]
    assert max(errs) <= MAX_NMSE, f"row {int(np.argmax(errs))}: NMSE {max(errs):.2e}"


def test_nextn_block_is_loaded(model):
    ctx = Context(model, n_ctx=32)
    assert ctx.hparams.n_layer == 4 and ctx.hparams.n_nextn == 1
    assert ctx.hparams.recurrent == (True, True, True, False)
    from pyggml.llm.models.qwen35 import Qwen35Graph
    assert Qwen35Graph.check_nextn(model, ctx.hparams) is None


def f32_ctx(model, **kw):
    return Context(model, n_ctx=128, type_k=gg.F32, type_v=gg.F32, **kw)


@pytest.mark.parametrize("n_ubatch,n_rs_seq", [(1, 0), (7, 3), (37, 3)])
def test_ubatch_splits_equal_one_ubatch(model, ref, n_ubatch, n_rs_seq):
    toks = tokens(41, seed=2)
    one = f32_ctx(model, n_ubatch=64, n_rs_seq=n_rs_seq).decode(toks, logits_all=True)
    ctx = f32_ctx(model, n_ubatch=n_ubatch, n_rs_seq=n_rs_seq)
    split = ctx.decode(toks, logits_all=True)
    assert ctx.timings["n_ubatch"] > 1
    assert_same(split, one, SPLIT_REL)
    ref.reset()
    want = ref.forward(toks)
    assert max(nmse(w, g) for w, g in zip(want, split)) <= MAX_NMSE


@pytest.mark.parametrize("r", [1, 3])
def test_rollback_then_same_tokens_equals_straight_decode(model, r):
    """The straight run has the rollback run's ubatch shapes (prefix of 18, then the rest in
    ubatches under 8 tokens), so both use the same matmul paths and only the starting state's
    origin differs: a snapshot plane versus the state computed up to there."""
    n_rs, toks = 3, tokens(24, seed=4)
    base = f32_ctx(model, n_ubatch=32, n_rs_seq=n_rs)
    base.decode(toks[:18])
    base.decode(toks[18:24 - r])
    want = base.decode(toks[24 - r:], logits_all=True)
    ctx = f32_ctx(model, n_ubatch=32, n_rs_seq=n_rs)
    ctx.decode(toks[:18])
    ctx.decode(toks[18:], logits_all=True)             # a verify batch of 6 "drafts"
    assert ctx.seq_rm(0, 24 - r, -1) is True
    assert ctx.n_past() == 24 - r
    got = ctx.decode(toks[24 - r:], logits_all=True)
    assert_same(got, want)


def test_rollback_then_other_tokens_and_refusals(model, ref):
    toks = tokens(20, seed=6)
    ctx = f32_ctx(model, n_ubatch=32, n_rs_seq=3)
    ctx.decode(toks[:15])
    ctx.decode(toks[15:], logits_all=True)
    assert ctx.seq_rm(0, 15, -1) is False              # 5 > n_rs_seq: both caches unchanged
    assert ctx.n_past() == 20
    assert ctx.seq_rm(0, 18, -1) is True
    other = [9, 200]
    got = ctx.decode(other, logits_all=True).astype(np.float64)
    ref.reset()
    want = ref.forward(list(toks[:18]) + other)[18:]
    assert max(nmse(w, g) for w, g in zip(want, got)) <= MAX_NMSE


def test_graph_reuse_gives_the_same_logits(model):
    toks = tokens(12, seed=3)
    out = {}
    for reuse in (True, False):
        ctx = Context(model, n_ctx=64, n_ubatch=8, n_rs_seq=2, graph_reuse=reuse)
        rows = [ctx.decode(toks[:8], logits_all=True)] + [ctx.decode([int(t)]) for t in toks[8:]]
        out[reuse] = np.concatenate(rows)
        if reuse:
            assert ctx.timings["n_graph_reuse"] >= 2
    np.testing.assert_array_equal(out[True], out[False])


def test_fused_projections_equal_separate_ones(path, monkeypatch):
    """Small projections sharing an input run as one mul_mat over a fused weight copy; each
    output row is the same dot product, so prompt (split into ubatches) and decode logits
    equal those of the separate mul_mats, with fewer mul_mat nodes."""
    from pyggml.llm.models import qwen35
    toks = tokens(23, seed=8)
    out, n_mm = {}, {}
    for fuse in (True, False):
        monkeypatch.setattr(qwen35, "FUSE_MAX_BYTES", 1 << 20 if fuse else 0)
        ctx = f32_ctx(Model.load(path), n_ubatch=7, n_rs_seq=2)
        rows = [ctx.decode(toks[:19], logits_all=True)] + [ctx.decode([int(t)]) for t in toks[19:]]
        out[fuse] = np.concatenate(rows)
        n_mm[fuse] = sum(str(n.op) == "MUL_MAT" for n in ctx._last.gf.nodes)
    np.testing.assert_array_equal(out[True], out[False])
    # per delta-net layer 4 -> 1 and 2 -> 1 (ffn), per attention layer 3 -> 1 and 2 -> 1
    assert n_mm[False] - n_mm[True] == 3 * (3 + 1) + (2 + 1)


def test_long_prompt_keeps_the_decode_graphs_cached(model):
    """A long prompt's ubatches each have their own n_kv (one graph each); small graphs stay
    cached past MAX_GRAPHS, so returning to the short prompt and decode shapes builds nothing."""
    ctx = Context(model, n_ctx=1600, n_ubatch=256)
    short, long = tokens(16, seed=9), tokens(1536, seed=10)

    def short_run():
        ctx.reset()
        tok = ctx.decode_greedy(short)
        return [tok := ctx.decode_greedy([tok]) for _ in range(4)]

    first = short_run()
    ctx.reset()
    ctx.decode_greedy(long)                      # 6 ubatches, n_kv 256 .. 1536
    assert len(ctx._graphs) > Context.MAX_GRAPHS
    built = ctx.timings["n_graph_build"]
    assert short_run() == first
    assert ctx.timings["n_graph_build"] == built


def test_interleaved_sequences_equal_independent_runs(model, ref):
    a, b = tokens(12, seed=12), tokens(9, seed=13)
    ctx = f32_ctx(model, n_ubatch=16, n_seq_max=2, n_rs_seq=2)
    got_b = [ctx.decode(b[:5], logits_all=True, seq_id=1)]
    got_a = [ctx.decode(a[:7], logits_all=True, seq_id=0)]
    got_b.append(ctx.decode(b[5:], logits_all=True, seq_id=1))
    assert ctx.seq_rm(0, 6, -1)
    got_a.append(ctx.decode(a[6:], logits_all=True, seq_id=0))
    for toks, got in ((a, np.concatenate([got_a[0][:6], got_a[1]])), (b, np.concatenate(got_b))):
        ref.reset()
        want = ref.forward(toks)
        assert max(nmse(w, g) for w, g in zip(want, got)) <= MAX_NMSE


@pytest.mark.skipif(not FUSED, reason="gated_delta_net not built")
@pytest.mark.parametrize("S,Hk,H,T,K", [(16, 2, 4, 5, 3), (8, 1, 3, 2, 4), (16, 4, 4, 7, 1)])
def test_composite_delta_net_matches_the_op(monkeypatch, S, Hk, H, T, K):
    """The basic-op fallback the model uses without the op computes what the op does
    (outputs, then min(T, K) states most recent first; q/k heads tile over v heads)."""
    from pyggml.llm.models import qwen35
    rng = np.random.default_rng(S + T)
    ctx = gg.Context(mem_size=64 << 20)

    def t(shape, f=lambda x: x):
        x = f(rng.standard_normal(shape)).astype(np.float32)
        tt = ctx.new_tensor(gg.F32, list(reversed(shape)))
        tt.numpy()[...] = x
        return tt

    q, k, v = t((1, T, Hk, S), lambda x: 0.3 * x), t((1, T, Hk, S), lambda x: 0.3 * x), t((1, T, H, S))
    g, beta = t((1, T, H, 1), lambda x: -np.abs(x)), t((1, T, H, 1), lambda x: 1 / (1 + np.exp(-x)))
    st = t((1, H, S, S), lambda x: 0.5 * x)
    op = gg.gated_delta_net(ctx, q, k, v, g, beta, st, K)
    with monkeypatch.context() as mp:
        mp.delattr(gg, "gated_delta_net")
        co = qwen35.gated_delta_net(ctx, q, k, v, g, beta, st, K)
    gf = gg.Graph(ctx, 8192)
    gf.build_forward_expand(op)
    gf.build_forward_expand(co)
    gf.compute(2)
    n = S * H * T + min(T, K) * S * S * H
    o, c = np.asarray(op.numpy()).ravel()[:n], np.asarray(co.numpy()).ravel()[:n]
    assert nmse(o, c) <= 1e-12


@pytest.mark.oracle
def test_logits_and_greedy_tokens_match_llama_cpp(path):
    llama_cpp = pytest.importorskip("llama_cpp")
    prompt = [int(t) for t in tokens(19, seed=3)]
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_batch=64, n_ubatch=64, n_threads=2,
                          logits_all=True, verbose=False, seed=0)
    llm.eval(prompt)
    ref_rows, ref_toks = [np.array(llm.scores[:len(prompt)], np.float64)], []
    ctx = Context(Model.load(path), n_ctx=256, n_ubatch=64)
    rows, toks = [ctx.decode(prompt, logits_all=True).astype(np.float64)], []
    for _ in range(32):
        ref_toks.append(int(np.argmax(ref_rows[-1][-1])))
        llm.eval([ref_toks[-1]])
        ref_rows.append(np.array(llm.scores[llm.n_tokens - 1:llm.n_tokens], np.float64))
        toks.append(int(np.argmax(rows[-1][-1])))
        rows.append(ctx.decode([toks[-1]]).astype(np.float64))
    ref, got = np.concatenate(ref_rows), np.concatenate(rows)
    errs = [nmse(r, g) for r, g in zip(ref, got)]
    print(f"\n{os.path.basename(str(path))}: max row NMSE {max(errs):.2e} (fused op: {FUSED})")
    assert max(errs) <= 1e-4
    assert toks == ref_toks


@pytest.mark.oracle
def test_rollback_matches_llama_cpp(path):
    """The same calls on both: decode a prefix, a verify batch of 6, seq_rm the last 2,
    decode 2 other tokens; every returned row within NMSE 1e-4 of llama.cpp's."""
    pytest.importorskip("llama_cpp")
    from llama_cpp_driver import LlamaCppContext
    try:   # llama.cpp's default cache types and flash-attention choice, as pyggml's Context
        llm = LlamaCppContext.open(path, n_rs_seq=3, kv_f32=False, flash_attn=None)
    except RuntimeError as e:
        pytest.skip(str(e))
    toks = [int(t) for t in tokens(24, seed=11)]
    ctx = Context(Model.load(path), n_ctx=256, n_ubatch=64, n_rs_seq=3)
    pairs = [(llm.decode(toks[:18], True), ctx.decode(toks[:18], logits_all=True)),
             (llm.decode(toks[18:], True), ctx.decode(toks[18:], logits_all=True))]
    assert llm.seq_rm(22) is True and ctx.seq_rm(0, 22, -1) is True
    pairs.append((llm.decode([7, 99], True), ctx.decode([7, 99], logits_all=True)))
    assert llm.seq_rm(10) is False and ctx.seq_rm(0, 10, -1) is False
    llm.close()
    errs = [nmse(r, g) for a, b in pairs for r, g in zip(a, b)]
    assert max(errs) <= 1e-4, f"max row NMSE {max(errs):.2e}"
