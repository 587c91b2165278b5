"""tools/train_eagle3.py on a tiny target: a few training steps lower the loss, the GGUF it
writes loads in pyggml as an EAGLE3 draft whose logits are the torch model's (the first step
and a chained second step, which checks the position and attention conventions the training
unrolls), and speculative greedy decoding with it equals plain greedy. Needs PyTorch (the
`train` extra); skipped without it. The llama.cpp check is an oracle test."""
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pyggml.llm import Context, Model, write_tiny_llama  # noqa: E402
from pyggml.llm.context_draft import DraftContext  # noqa: E402
from pyggml.llm.speculative import SpeculativeDecoder  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import train_eagle3 as te  # noqa: E402

SEQ = 48
LAYERS = (1, 2, 3)


def token_stream(rng, n, n_vocab):
    """Repetitive token text (short motifs repeated with noise): something a draft can learn."""
    motifs = [rng.integers(3, n_vocab, size=rng.integers(3, 7)) for _ in range(6)]
    out = []
    while len(out) < n:
        m = motifs[rng.integers(len(motifs))]
        out += [int(t) if rng.random() > 0.1 else int(rng.integers(3, n_vocab)) for t in m]
    return out[:n]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("eagle3train")
    target = write_tiny_llama(d / "target.gguf", n_vocab=256, n_embd=64, n_layer=4, n_head=4,
                              n_head_kv=2, n_ff=128, tied_embeddings=True, seed=3)
    rng = np.random.default_rng(0)
    texts = [token_stream(rng, SEQ, 256) for _ in range(12)]
    store = te.extract(target, str(d / "feats"), seq_len=SEQ, target_layers=LAYERS, threads=1,
                       max_tokens=10 ** 6, minutes=5, seed=0, texts=texts)
    tt = te.target_tensors(target)
    model, d2t, hp, report = te.train(store, tt, n_vocab_draft=200, n_ff=96, ttt_steps=2,
                                      batch=4, lr=3e-3, minutes=5, max_steps=40, threads=1,
                                      seed=0, val_segments=2)
    path = te.write_gguf(d / "draft.gguf", model, d2t, hp, tt, out_type="f32")
    return dict(target=target, store=store, model=model, d2t=d2t, report=report, path=path)


def test_features_are_the_target_layer_inputs(trained):
    store = trained["store"]
    assert len(store) == 12 and store.feats.shape == (12, SEQ, 3 * 64)
    tgt = Model.load(trained["target"])
    names = ("l_out-0", "l_out-1", "l_out-2")       # inputs of layers 1, 2, 3
    ctx = Context(tgt, n_ctx=SEQ, n_threads=1, outputs=names)
    logits = ctx.decode(store.tokens[5], logits_all=True)
    ref = np.concatenate([ctx.output(n).reshape(SEQ, -1) for n in names], 1)
    np.testing.assert_allclose(np.asarray(store.feats[5], np.float32), ref, rtol=2e-3, atol=2e-3)
    assert np.array_equal(store.argmax[5], logits.argmax(1))


def test_training_lowers_the_loss(trained):
    rep = trained["report"]
    assert rep["steps"] == 40
    first, last = rep["first_loss"], rep["last_loss"]
    assert last[0] < 0.8 * first[0] and last[1] < first[1], (first, last)
    val_before, val_after = rep["val_before"][0], rep["val_after"][0]
    assert val_after[0] < val_before[0], (val_before, val_after)


def torch_logits(trained, seg):
    store, model, d2t = trained["store"], trained["model"], trained["d2t"]
    feats = torch.from_numpy(np.asarray(store.feats[seg], np.float32))[None]
    toks = torch.from_numpy(store.tokens[seg].astype(np.int64))
    nxt = torch.cat([toks[1:], toks[-1:]])[None]
    with torch.no_grad():
        steps = model(feats, nxt, 2)
    full = []
    for lg in steps:
        f = np.full((SEQ, 256), -np.inf, np.float32)
        f[:, d2t] = lg[0].numpy()
        full.append(f)
    return full


def nmse(ours, ref):
    ok = np.isfinite(ref)
    assert np.array_equal(ok, np.isfinite(ours)), "the -inf entries (d2t) differ"
    return float(np.mean((ours[ok] - ref[ok]) ** 2) / np.mean(ref[ok] ** 2))


def test_pyggml_draft_graph_equals_the_torch_model(trained):
    """Step 0 at i: (token[i+1], g[i]); step 1 at p+1: (token[p+2], h0[p]) after the real
    pairs at 0..p, as the drafter chains its own tokens."""
    seg = 7
    store = trained["store"]
    ref0, ref1 = torch_logits(trained, seg)
    tgt, dm = Model.load(trained["target"]), Model.load(trained["path"])
    dc = DraftContext(dm, other=tgt, n_ctx=SEQ, n_threads=1, n_batch=SEQ, n_ubatch=SEQ)
    feats = np.asarray(store.feats[seg], np.float32)
    toks = store.tokens[seg]
    dc.process(np.arange(SEQ), embd=feats, output=np.ones(SEQ, bool), memory=False)
    g = dc.h_nextn.copy()
    n = SEQ - 1
    lg0 = dc.process(np.arange(n), token=toks[1:], embd=g[:n], output=np.ones(n, bool))
    h0 = dc.h_nextn.copy()
    assert nmse(lg0, ref0[:n]) < 1e-5
    for p in (SEQ - 4, 9, 0):          # each drops the positions after p, then chains one
        dc.seq_rm(0, p + 1, -1)
        lg1 = dc.process([p + 1], token=[toks[p + 2]], embd=h0[p][None], output=[True])
        assert nmse(lg1, ref1[p + 1:p + 2]) < 1e-5, p


def test_speculative_greedy_with_the_trained_draft(trained):
    tgt = Model.load(trained["target"])
    prompt = [int(t) for t in trained["store"].tokens[3][:30]]
    ref = list(Context(tgt, n_ctx=256, n_threads=1).generate(prompt, 40))
    ctx = Context(tgt, n_ctx=256, n_threads=1)
    dec = SpeculativeDecoder(ctx, kind="eagle3", draft=Model.load(trained["path"]), n_max=4)
    assert list(dec.generate(prompt, 40)) == ref
    s = dec.stats
    assert s["n_drafted"] > 0 and s["mean_acceptance_length"] >= 1.0


@pytest.mark.oracle
def test_llama_cpp_runs_the_trained_draft(trained):
    pytest.importorskip("llama_cpp")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "llm"))
    from llama_cpp_spec import LlamaEagle3Draft, LlamaTarget, speculative_loop
    prompt = [int(t) for t in trained["store"].tokens[3][:30]]
    tgt = Model.load(trained["target"])
    ref = list(Context(tgt, n_ctx=256, n_threads=1).generate(prompt, 24))
    target = LlamaTarget(trained["target"], LAYERS, n_ctx=256)
    drafter = LlamaEagle3Draft(trained["path"], target, 4)
    out, steps = speculative_loop(target, drafter, prompt, 24)
    assert out == ref
    dec = SpeculativeDecoder(Context(tgt, n_ctx=256, n_threads=1), kind="eagle3",
                             draft=Model.load(trained["path"]), n_max=4, adaptive=False)
    dec.generate(prompt, 24)
    ours, theirs = [st["draft"] for st in dec.stats["steps"]], [st["draft"] for st in steps]
    # the last step may draft fewer tokens on one side (n clamped to what is left to generate)
    assert len(ours) >= len(theirs) - 1 and len(ours) > 3
    for a, b in zip(ours, theirs):
        k = min(len(a), len(b))
        assert a[:k] == b[:k]
