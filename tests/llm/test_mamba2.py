"""Mamba-2 (pyggml.llm.models.mamba2) on a tiny random GGUF: logits against a float64 numpy
forward written from the model's definition, ubatch splits, graph reuse, snapshot rollback
(seq_rm within n_rs_seq), and an oracle run against llama.cpp when llama_cpp imports."""
import os

import numpy as np
import pytest

from mamba2_ref import Mamba2Ref
from util import nmse

from pyggml.llm import Context, Model
from pyggml.llm.tiny import write_tiny_mamba2

MAX_NMSE = 1e-9          # f32 graph against the float64 reference
EQ_REL = 1e-6            # same arithmetic, other ubatch boundaries / rollback: per row
#                          ||got - want|| <= 1e-6 ||want|| (f32 rounding of other GEMM shapes)


SPLIT_REL = 3e-6         # 45 tokens through 3 recurrent layers in GEMM vs GEMV shapes: the
#                          f32 rounding compounds along the sequence (both stay ~1e-6 from float64)


def assert_same(got, want, tol=EQ_REL):
    got, want = np.atleast_2d(got), np.atleast_2d(want)
    assert got.shape == want.shape
    rel = [np.sqrt(nmse(w, g)) for w, g in zip(want, got)]
    assert max(rel) <= tol, f"row {int(np.argmax(rel))}: relative error {max(rel):.2e}"


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    # odd-ish sizes: 3 groups of 2 heads, head_dim 12, d_state 10, d_conv 4
    return write_tiny_mamba2(tmp_path_factory.mktemp("m2") / "m2.gguf", n_embd=48, n_layer=3,
                             d_inner=72, d_state=10, n_ssm_head=6, n_group=3, seed=5)


@pytest.fixture(scope="module")
def model(path):
    return Model.load(path)


@pytest.fixture(scope="module")
def ref(path):
    return Mamba2Ref(path)


def tokens(n, seed=0):
    return np.random.default_rng(seed).integers(3, 256, size=n)


def test_prompt_and_decode_match_numpy_reference(model, ref):
    toks = tokens(29)
    ctx = Context(model, n_ctx=128, n_ubatch=16)
    got = [ctx.decode(toks[:23], logits_all=True)]
    for t in toks[23:]:
        got.append(ctx.decode([int(t)]))
    got = np.concatenate(got).astype(np.float64)
    ref.reset()
    want = ref.forward(toks)
    errs = [nmse(w, g) for w, g in zip(want, got)]
    assert max(errs) <= MAX_NMSE, f"row {int(np.argmax(errs))}: NMSE {max(errs):.2e}"
    assert np.argmax(got, 1).tolist() == np.argmax(want, 1).tolist()


@pytest.mark.parametrize("n_rs_seq", [0, 3])
def test_snapshot_planes_do_not_change_logits(model, ref, n_rs_seq):
    toks = tokens(41, seed=1)
    ctx = Context(model, n_ctx=128, n_ubatch=16, n_rs_seq=n_rs_seq)
    got = ctx.decode(toks, logits_all=True).astype(np.float64)
    ref.reset()
    want = ref.forward(toks)
    assert max(nmse(w, g) for w, g in zip(want, got)) <= MAX_NMSE


@pytest.mark.parametrize("n_ubatch,n_rs_seq", [(1, 0), (7, 0), (7, 3), (37, 3), (37, 6)])
def test_ubatch_splits_equal_one_ubatch(model, n_ubatch, n_rs_seq):
    toks = tokens(45, seed=2)
    one = Context(model, n_ctx=128, n_ubatch=64, n_rs_seq=n_rs_seq).decode(toks, logits_all=True)
    ctx = Context(model, n_ctx=128, n_ubatch=n_ubatch, n_rs_seq=n_rs_seq)
    split = ctx.decode(toks, logits_all=True)
    assert ctx.timings["n_ubatch"] > 1
    assert_same(split, one, SPLIT_REL)


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


def straight(model, toks, n_rs_seq):
    ctx = Context(model, n_ctx=128, n_ubatch=32, n_rs_seq=n_rs_seq)
    return ctx, ctx.decode(toks, logits_all=True)


@pytest.mark.parametrize("r", [1, 2, 4])
def test_rollback_then_same_tokens_equals_straight_decode(model, r):
    n_rs, toks = 4, tokens(30, seed=4)
    _, want = straight(model, toks, n_rs)
    ctx = Context(model, n_ctx=128, n_ubatch=32, n_rs_seq=n_rs)
    ctx.decode(toks[:22])
    ctx.decode(toks[22:], logits_all=True)            # a verify batch of 8 "drafts"
    assert ctx.seq_rm(0, 30 - r, -1) is True
    assert ctx.n_past() == 30 - r
    got = ctx.decode(toks[30 - r:], logits_all=True)
    assert_same(got, want[30 - r:])
    nxt = [int(t) for t in tokens(3, seed=9)]          # and the state keeps going right
    _, want2 = straight(model, np.concatenate([toks, nxt]), n_rs)
    got2 = np.concatenate([ctx.decode([t]) for t in nxt])
    assert_same(got2, want2[30:])


def test_rollback_then_other_tokens_equals_their_straight_decode(model, ref):
    n_rs, toks = 3, tokens(20, seed=6)
    ctx = Context(model, n_ctx=128, n_ubatch=32, n_rs_seq=n_rs)
    ctx.decode(toks[:16])
    ctx.decode(toks[16:], logits_all=True)
    assert ctx.seq_rm(0, 18, -1)                       # reject the last 2 drafts
    other = [5, 77, 140]
    got = ctx.decode(other, logits_all=True).astype(np.float64)
    ref.reset()
    want = ref.forward(list(toks[:18]) + other)[18:]
    assert max(nmse(w, g) for w, g in zip(want, got)) <= MAX_NMSE


def test_rollback_outside_the_window_is_refused(model):
    toks = tokens(20, seed=7)
    ctx = Context(model, n_ctx=128, n_ubatch=32, n_rs_seq=3)
    ctx.decode(toks[:16])
    assert ctx.seq_rm(0, 12, -1) is False              # 4 > n_rs_seq
    assert ctx.seq_rm(0, 5, 10) is False               # a hole in the middle
    assert ctx.n_past() == 16                          # nothing changed
    ctx.decode([int(toks[16])])                        # a 1-token ubatch keeps no earlier plane
    assert ctx.seq_rm(0, 16, -1) is False
    ctx.decode(toks[17:20], logits_all=True)
    assert ctx.seq_rm(0, 19, -1) is True
    assert ctx.seq_rm(0, 18, -1) is False              # one pending rollback, not stacked
    got = ctx.decode([int(toks[19])])
    _, want = straight(model, toks, 3)
    assert_same(got[0], want[-1])
    plain = Context(model, n_ctx=64, n_ubatch=32)      # n_rs_seq = 0: no partial removal
    plain.decode(toks[:8])
    assert plain.seq_rm(0, 7, -1) is False


def test_whole_sequence_removal_and_copy(model):
    toks = tokens(10, seed=8)
    ctx = Context(model, n_ctx=64, n_ubatch=16, n_seq_max=2, n_rs_seq=2)
    first = ctx.decode(toks, logits_all=True)
    assert ctx.seq_rm(0, -1, -1) is True and ctx.n_past() == 0
    again = ctx.decode(toks, logits_all=True)          # a fresh cell starts from zeros
    np.testing.assert_array_equal(first, again)
    ctx.seq_cp(0, 1)
    a = ctx.decode([9], seq_id=0)
    b = ctx.decode([9], seq_id=1)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="whole sequences"):
        ctx.seq_cp(0, 1, 2, 5)


def test_a_failed_ubatch_forgets_the_sequence(model):
    from types import SimpleNamespace
    toks = tokens(10, seed=10)
    ctx = Context(model, n_ctx=64, n_ubatch=16, n_rs_seq=2)
    ctx.decode(toks)
    get = ctx._get_graph

    def failing(params):
        res = get(params)
        return SimpleNamespace(set_inputs=res.set_inputs, gf=SimpleNamespace(compute=boom))

    def boom(n_threads):
        raise RuntimeError("compute failed")

    ctx._get_graph = failing
    with pytest.raises(RuntimeError, match="compute failed"):
        ctx.decode([5, 6, 7])
    ctx._get_graph = get
    assert ctx.n_past() == 0                           # the state could not be rolled back
    fresh = Context(model, n_ctx=64, n_ubatch=16, n_rs_seq=2).decode(toks)
    np.testing.assert_array_equal(ctx.decode(toks), fresh)


def test_interleaved_sequences_equal_independent_runs(model):
    a, b = tokens(14, seed=12), tokens(11, seed=13)
    ctx = Context(model, n_ctx=64, n_ubatch=16, n_seq_max=3, n_rs_seq=2)
    got_b = [ctx.decode(b[:6], logits_all=True, seq_id=2)]
    got_a = [ctx.decode(a[:9], logits_all=True, seq_id=0)]
    got_b.append(ctx.decode(b[6:], logits_all=True, seq_id=2))
    assert ctx.seq_rm(0, 8, -1)                        # a rollback on one sequence only
    got_a.append(ctx.decode(a[8:], logits_all=True, seq_id=0))
    for toks, got in ((a, np.concatenate([got_a[0][:8], got_a[1]])), (b, np.concatenate(got_b))):
        alone = Context(model, n_ctx=64, n_ubatch=16, n_rs_seq=2)
        want = np.concatenate([alone.decode(toks[:8], logits_all=True),
                               alone.decode(toks[8:], logits_all=True)])
        assert_same(got, want, SPLIT_REL)


def test_n_ubatch_must_exceed_the_kept_tail(model):
    with pytest.raises(ValueError, match="n_ubatch=4"):
        Context(model, n_ctx=64, n_ubatch=4, n_rs_seq=4)


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
    print(f"\n{os.path.basename(str(path))}: max row NMSE {max(errs):.2e}")
    assert max(errs[:len(prompt)]) <= 1e-4 and max(errs) <= 1e-4
    assert toks == ref_toks
