"""MTP drafting with Qwen3.5's NextN block (pyggml.llm.speculative.mtp) on a tiny random
GGUF (one gated delta-net layer, one gated full-attention layer, one NextN block): the
draft graph against a float64 numpy NextN block, the h_nextn export (post-norm, masked and
unmasked crops), graph reuse, the drafter's loop committing exactly the greedy stream
through full, partial and zero acceptance with the recurrent target rolled back by seq_rm,
and oracle runs against llama.cpp's MTP context."""
import numpy as np
import pytest

from llama_cpp_mtp import PyggmlMtpSide, drafter_loop, forced, run_mtp_loop
from mamba2_ref import _rms, _silu
from qwen35_ref import Qwen35Ref
from util import nmse

import pyggml as gg
from pyggml.llm import Context, Model
from pyggml.llm.speculative.mtp import MtpDrafter, top1
from pyggml.llm.tiny import write_tiny_qwen35

N_RS = 4


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return str(write_tiny_qwen35(tmp_path_factory.mktemp("q35mtp") / "q35mtp.gguf", n_layer=2,
                                 full_attention_interval=2, n_nextn=1, seed=5))


@pytest.fixture(scope="module")
def model(path):
    return Model.load(path)


@pytest.fixture(scope="module")
def bigram_path(tmp_path_factory):
    """A near-bigram variant: its MTP drafts get accepted without forcing."""
    return str(write_tiny_qwen35(tmp_path_factory.mktemp("bigram") / "bigram.gguf", n_layer=2, full_attention_interval=2, n_nextn=1, bigram=0.5, seed=5))


def target(model, **kw):
    kw = {"n_ctx": 256, "type_k": gg.F32, "type_v": gg.F32, "n_rs_seq": N_RS,
          "embeddings_nextn": True, **kw}
    return Context(model, **kw)


def tokens(n, seed=0):
    return [int(t) for t in np.random.default_rng(seed).integers(3, 256, size=n)]


class NextNRef(Qwen35Ref):
    """The NextN block in float64: entry (token, h) at the next position."""

    def mtp_step(self, tok, h):
        hp, W = self.hp, self.W
        L, eps, p = hp["L"], hp["eps"], f"blk.{hp['L']}."
        self.k.setdefault(L, [])
        self.v.setdefault(L, [])
        e = _rms(W["token_embd.weight"][tok], W[p + "nextn.enorm.weight"], eps)
        x = W[p + "nextn.eh_proj.weight"] @ np.concatenate([e, _rms(h, W[p + "nextn.hnorm.weight"], eps)])
        x = x + self.attn(L, _rms(x, W[p + "attn_norm.weight"], eps))
        u = _rms(x, W[p + "post_attention_norm.weight"], eps)
        x = x + W[p + "ffn_down.weight"] @ (_silu(W[p + "ffn_gate.weight"] @ u) * (W[p + "ffn_up.weight"] @ u))
        self.pos += 1
        h_out = _rms(x, W["output_norm.weight"], eps)
        return W["output.weight"] @ h_out, h_out


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_draft_graph_matches_numpy_nextn_block(model, path, flash_attn):
    t = target(model, flash_attn=flash_attn)
    d = Context(model, n_ctx=256, type_k=gg.F32, type_v=gg.F32, ctx_type="mtp",
                flash_attn=flash_attn)
    toks = tokens(13, seed=1)
    t.decode(toks, logits_all=True)
    H = t.embd_nextn.astype(np.float64)
    hs = np.concatenate([np.zeros((1, H.shape[1])), H[:-1]])
    ref = NextNRef(path)
    want = [ref.mtp_step(tk, h) for tk, h in zip(toks, hs)]
    got_l = d.decode(toks[:9], embd=hs[:9], logits_all=True)
    got_h = d.embd_nextn
    for i in range(9, 13):                       # then one entry at a time
        got_l = np.concatenate([got_l, d.decode(toks[i:i + 1], embd=hs[i:i + 1])])
        got_h = np.concatenate([got_h, d.embd_nextn])
    assert got_l.shape == (13, 256) and got_h.shape == (13, 64)
    assert max(nmse(w[0], g) for w, g in zip(want, got_l)) <= 1e-9
    assert max(nmse(w[1], g) for w, g in zip(want, got_h)) <= 1e-9


def test_target_h_nextn_is_post_norm_and_masking_moves_the_crop(model):
    toks = tokens(11, seed=2)
    unmasked = target(model)
    lg = unmasked.decode(toks, logits_all=False)
    H = unmasked.embd_nextn
    assert H.shape == (11, 64)                                     # every token's row
    out_w = np.asarray(model.get("output.weight").numpy(), np.float64)
    assert nmse(out_w @ H[-1].astype(np.float64), lg[-1]) <= 1e-10  # logits = output @ h_nextn
    masked = target(model, nextn_masked=True)
    lg2 = masked.decode(toks, logits_all=False)
    assert masked.embd_nextn.shape == (1, 64)                       # output rows only
    assert nmse(H[-1], masked.embd_nextn[0]) <= 1e-12 and nmse(lg[-1], lg2[-1]) <= 1e-12
    off = target(model, embeddings_nextn=False)
    off.decode(toks)
    assert off.embd_nextn is None


def test_draft_graph_reuse_and_the_offset_in_its_key(model):
    toks = tokens(8, seed=3)
    t = target(model)
    t.decode(toks, logits_all=True)
    hs = np.concatenate([np.zeros((1, 64), np.float32), t.embd_nextn[:-1]])
    rows = {}
    for reuse in (True, False):
        d = Context(model, n_ctx=256, type_k=gg.F32, type_v=gg.F32, ctx_type="mtp",
                    graph_reuse=reuse)
        rows[reuse] = np.concatenate([d.decode(toks[i:i + 1], embd=hs[i:i + 1]) for i in range(8)])
        if reuse:
            assert d.timings["n_graph_reuse"] >= 6
    assert np.array_equal(rows[True], rows[False])
    from pyggml.llm.graph import GraphParams, GraphType
    from pyggml.llm.inputs import UBatch
    ub = UBatch.from_tokens([1])
    keys = {GraphParams(arch="qwen35", hparams=None, ubatch=ub, n_outputs=1, gtype=g,
                        nextn_layer_offset=o, nextn_masked=m).key()
            for g in (GraphType.DEFAULT, GraphType.DECODER_MTP) for o in (0, 1) for m in (0, 1)}
    assert len(keys) == 8


def test_mtp_context_refuses_bad_input(model, tmp_path):
    d = Context(model, n_ctx=64, ctx_type="mtp", n_outputs_max=1)
    with pytest.raises(ValueError, match="hidden row per entry"):
        d.decode([1, 2])
    with pytest.raises(ValueError, match=r"expected \(2, 64\)"):
        d.decode([1, 2], embd=np.zeros((2, 63), np.float32))
    with pytest.raises(ValueError, match="n_outputs_max"):
        d.decode([1, 2], embd=np.zeros((2, 64), np.float32), logits_all=True)
    with pytest.raises(ValueError, match="only for an MTP context"):
        target(model).decode([1], embd=np.zeros((1, 64), np.float32))
    with pytest.raises(ValueError, match="offset"):
        d.set_nextn_layer_offset(1)
    with pytest.raises(ValueError, match="ctx_type"):
        Context(model, ctx_type="draft")
    from pyggml.llm.tiny import write_tiny_llama
    llama = Model.load(write_tiny_llama(tmp_path / "l.gguf"))
    with pytest.raises(NotImplementedError, match="NextN"):
        Context(llama, ctx_type="mtp")
    plain_llama = Context(llama, n_ctx=64, embeddings_nextn=True)   # exports no h_nextn
    assert plain_llama.decode([1, 2]).shape[0] == 1 and plain_llama.embd_nextn is None
    plain = Model.load(write_tiny_qwen35(tmp_path / "q0.gguf", n_layer=2,
                                         full_attention_interval=2, n_nextn=0))
    with pytest.raises(ValueError, match="no NextN blocks"):
        MtpDrafter(Context(plain, n_ctx=64))
    with pytest.raises(ValueError, match="exactly one NextN block"):
        Context(plain, n_ctx=64, ctx_type="mtp")
    with pytest.raises(ValueError, match="n_rs_seq"):
        MtpDrafter(target(model, n_rs_seq=1)).bind(target(model, n_rs_seq=1), 3)


def test_top1_probability_is_a_softmax_over_the_ten_best():
    x = np.array([0.0, 3.0, 1.0, -2.0, 3.0, 0.5, 0.1, 0.2, 0.3, 0.4, 0.6, -5.0], np.float32)
    tok, p = top1(x)
    best = np.sort(x.astype(np.float64))[-10:]
    assert tok == 1 and abs(p - np.exp(3.0) / np.exp(best).sum()) < 1e-12


def test_drafter_commits_the_greedy_stream_through_every_acceptance(model):
    prompt = tokens(9, seed=4)
    greedy = list(Context(model, n_ctx=256, type_k=gg.F32, type_v=gg.F32).generate(prompt, 40))
    t = target(model)
    dr = MtpDrafter(t)
    out, steps = drafter_loop(t, dr, prompt, 40, 3, forced(greedy, [3, 1, 0, 2, 3]))
    assert out == greedy
    accepted = [s["n_accepted"] for s in steps]
    assert {0, 1, 2, 3} <= set(accepted)
    # the drafter's own drafts: the same as the stand-alone loop over the same contexts
    t2 = target(model)
    side = PyggmlMtpSide(t2, Context(model, n_ctx=256, type_k=gg.F32, type_v=gg.F32,
                                     ctx_type="mtp", n_outputs_max=1))
    out2, steps2 = run_mtp_loop(side, prompt, 40, 3, forced(greedy, [3, 1, 0, 2, 3]))
    assert out2 == greedy
    assert [s["draft"] for s in steps] == [s["draft"] for s in steps2]
    # its natural drafts (no forcing): still the greedy stream
    t3 = target(model)
    out3, _ = drafter_loop(t3, MtpDrafter(t3), prompt, 40, 3)
    assert out3 == greedy


def test_draft_p_min_and_n_min(model):
    prompt = tokens(9, seed=6)
    t = target(model)
    dr = MtpDrafter(t, p_min=1.01)            # no probability reaches it: empty drafts
    dr.bind(t, 3)
    t.decode(prompt, logits_all=True)
    dr.process(prompt, 0, {"h_nextn": t.embd_nextn})
    assert dr.draft(5, len(prompt), 3).ids == []
    dr2 = MtpDrafter(t, n_min=4)              # fewer than n_min drafted: dropped
    dr2.process(prompt, 0, {"h_nextn": t.embd_nextn})
    assert dr2.draft(5, len(prompt), 3).ids == []
    dr3 = MtpDrafter(t)
    dr3.process(prompt, 0, {"h_nextn": t.embd_nextn})
    dr3.accept(0)                             # no verify batch yet: nothing to accept
    assert np.array_equal(dr3.pending_h, t.embd_nextn[-1])
    d = dr3.draft(5, len(prompt), 3)
    assert len(d.ids) == 3 and d.logits.shape == (3, 256)
    assert [int(np.argmax(r)) for r in d.logits] == d.ids


# ---- llama.cpp -----------------------------------------------------------------------------
def llama_side(path, **kw):
    pytest.importorskip("llama_cpp")
    from llama_cpp_mtp import LlamaMtpSide
    try:
        return LlamaMtpSide(path, **kw)
    except (RuntimeError, AttributeError) as e:
        pytest.skip(f"llama.cpp MTP path unavailable: {e}")


@pytest.mark.oracle
@pytest.mark.parametrize("policy", ["natural", "forced"])
def test_drafts_and_draft_logits_match_llama_cpp(model, path, bigram_path, policy):
    if policy == "natural":
        path = bigram_path
        model = Model.load(path)
    prompt = tokens(9, seed=7)
    greedy = list(Context(model, n_ctx=256, type_k=gg.F32, type_v=gg.F32).generate(prompt, 36))
    mk = (lambda: None) if policy == "natural" else \
        (lambda: forced(greedy, [3, 0, 2, 1, 3, 3]))
    side = llama_side(path, n_rs_seq=N_RS)
    want, wsteps = run_mtp_loop(side, prompt, 36, 3, mk())
    side.close()
    t = target(model, flash_attn=False)
    got, gsteps = drafter_loop(t, MtpDrafter(t), prompt, 36, 3, mk())
    assert want == greedy and got == greedy
    assert [s["draft"] for s in gsteps] == [s["draft"] for s in wsteps]
    assert [s["n_accepted"] for s in gsteps] == [s["n_accepted"] for s in wsteps]
    errs = [nmse(w, g) for a, b in zip(wsteps, gsteps) for w, g in zip(a["logits"], b["logits"])]
    print(f"\nqwen35 MTP ({policy}): {len(gsteps)} steps, accepted "
          f"{[s['n_accepted'] for s in gsteps]}, max draft-logits NMSE {max(errs):.2e}")
    assert max(errs) <= 1e-4


def test_speculative_decoder_mtp_equals_plain_greedy(model):
    from pyggml.llm.speculative import SpeculativeDecoder
    prompt = tokens(9, seed=8)
    want = list(Context(model, n_ctx=256, n_rs_seq=N_RS).generate(prompt, 32))
    ctx = Context(model, n_ctx=256, n_rs_seq=N_RS)
    dec = SpeculativeDecoder(ctx, kind="mtp", n_max=3)
    assert list(dec.generate(prompt, 32)) == want


def test_natural_drafts_of_a_near_bigram_model_are_accepted_losslessly(bigram_path):
    model = Model.load(bigram_path)
    prompt = tokens(9, seed=7)
    greedy = list(Context(model, n_ctx=256, type_k=gg.F32, type_v=gg.F32).generate(prompt, 36))
    t = target(model)
    out, steps = drafter_loop(t, MtpDrafter(t), prompt, 36, 3)
    acc = [s["n_accepted"] for s in steps]
    assert out == greedy and 0 < sum(acc) and max(acc) == 3 and min(acc) < 3
