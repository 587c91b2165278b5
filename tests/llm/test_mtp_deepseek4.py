"""DeepSeek V4's NextN (MTP) block on a tiny random GGUF (raw, CSA and HCA trunk layers, a
hash-routed first layer, one raw-window NextN block): the trunk with the block appended
still matches llama.cpp, h_nextn carries every hc stream (and reproduces the logits through
a numpy hc head), the drafter commits exactly the greedy stream with the dsv4 memory rolled
back by seq_rm, and the draft tokens and logits of every step equal llama.cpp's MTP context
fed the same target rows."""
import numpy as np
import pytest

from llama_cpp_mtp import MixedMtpSide, PyggmlMtpSide, drafter_loop, forced, run_mtp_loop
from util import nmse

import pyggml as gg
from pyggml.llm import Context, Model
from pyggml.llm.gguf_check import GGUFError
from pyggml.llm.speculative.mtp import MtpDrafter
from pyggml.llm.tiny import write_tiny_deepseek4

N_RS = 4
HC, D = 4, 64


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return str(write_tiny_deepseek4(tmp_path_factory.mktemp("ds4mtp") / "ds4mtp.gguf", seed=1,
                                    n_nextn=1))


@pytest.fixture(scope="module")
def model(path):
    return Model.load(path)


@pytest.fixture(scope="module")
def bigram_path(tmp_path_factory):
    """A near-bigram variant: its MTP drafts get accepted without forcing."""
    return str(write_tiny_deepseek4(tmp_path_factory.mktemp("bigram") / "bigram.gguf", seed=1,
                                    n_nextn=1, bigram=1.5))


def f32(model, **kw):
    return Context(model, **{"n_ctx": 256, "type_k": gg.F32, "type_v": gg.F32,
                             "flash_attn": False, **kw})


def target(model, **kw):
    return f32(model, **{"n_rs_seq": N_RS, "embeddings_nextn": True, **kw})


def tokens(n, seed=0):
    return [int(t) for t in np.random.default_rng(seed).integers(3, 256, size=n)]


def weights(path):
    import gguf
    r = gguf.GGUFReader(path)
    return {t.name: np.array(t.data, np.float64).reshape([int(x) for x in reversed(t.shape)])
            for t in r.tensors}


def hc_head_logits(W, h, eps=1e-6):
    """numpy: the hc head (a sigmoid-weighted sum of the streams), the output norm, the head."""
    x = h.reshape(HC, D)
    mixes = W["output_hc_fn.weight"] @ (h / np.sqrt((h ** 2).mean() + eps))
    pre = 1 / (1 + np.exp(-(mixes * W["output_hc_scale.weight"].ravel()[0] + W["output_hc_base.weight"])))
    y = ((pre + eps)[:, None] * x).sum(0)
    return W["output.weight"] @ (y / np.sqrt((y ** 2).mean() + eps) * W["output_norm.weight"])


def test_h_nextn_carries_every_stream_of_every_row(model, path):
    toks = tokens(21, seed=2)
    t = target(model)
    lg = t.decode(toks, logits_all=True)
    assert t.n_embd_nextn == HC * D and t.embd_nextn.shape == (21, HC * D)
    W = weights(path)
    assert max(nmse(hc_head_logits(W, h.astype(np.float64)), row)
               for h, row in zip(t.embd_nextn, lg)) <= 1e-10
    masked = target(model, nextn_masked=True)
    masked.decode(toks)
    assert masked.embd_nextn.shape == (1, HC * D)
    assert nmse(t.embd_nextn[-1], masked.embd_nextn[0]) <= 1e-12


def test_draft_context_memory_and_refusals(model, tmp_path):
    d = f32(model, ctx_type="mtp")
    assert [c.layers for c in d.memory.caches] == [[], [4]]       # the NextN layer's window
    assert d.memory.swa.k_only and d.memory.swa.n_swa == 16
    with pytest.raises(ValueError, match=r"expected \(1, 256\)"):
        d.decode([1], embd=np.zeros((1, 64), np.float32))
    bad = write_tiny_deepseek4(tmp_path / "bad.gguf", n_nextn=1, compress_ratios=(0, 4, 128, 4))
    import gguf
    r = gguf.GGUFReader(bad)
    assert int(r.fields["deepseek4.nextn_predict_layers"].contents()) == 1
    from pyggml.llm.models.deepseek4 import DeepSeek4HParams
    kv = {f.name: f.contents() for f in r.fields.values()}
    kv["deepseek4.attention.compress_ratios"] = [0, 4, 128, 4, 4]
    with pytest.raises(GGUFError, match="ratio 0"):
        DeepSeek4HParams.from_gguf(kv, "deepseek4")


def test_drafter_commits_the_greedy_stream_with_dsv4_rollback(model):
    prompt = tokens(9, seed=4)
    greedy = list(f32(model).generate(prompt, 32))
    t = target(model)
    out, steps = drafter_loop(t, MtpDrafter(t), prompt, 32, 3, forced(greedy, [3, 1, 0, 2]))
    assert out == greedy and {0, 1, 2, 3} <= {s["n_accepted"] for s in steps}
    side = PyggmlMtpSide(target(model), f32(model, ctx_type="mtp", n_outputs_max=1))
    out2, steps2 = run_mtp_loop(side, prompt, 32, 3, forced(greedy, [3, 1, 0, 2]))
    assert out2 == greedy and [s["draft"] for s in steps] == [s["draft"] for s in steps2]


def test_natural_drafts_of_a_near_bigram_model_are_accepted_losslessly(bigram_path):
    model = Model.load(bigram_path)
    prompt = tokens(9, seed=7)
    greedy = list(f32(model).generate(prompt, 36))
    t = target(model)
    out, steps = drafter_loop(t, MtpDrafter(t), prompt, 36, 3)
    acc = [s["n_accepted"] for s in steps]
    assert out == greedy and 0 < sum(acc) and max(acc) == 3 and min(acc) < 3


# ---- llama.cpp -----------------------------------------------------------------------------
def llama_side(path):
    pytest.importorskip("llama_cpp")
    from llama_cpp_mtp import LlamaMtpSide
    try:
        return LlamaMtpSide(path, n_rs_seq=N_RS)
    except (RuntimeError, AttributeError) as e:
        pytest.skip(f"llama.cpp MTP path unavailable: {e}")


@pytest.mark.oracle
def test_trunk_with_a_nextn_block_matches_llama_cpp(model, path):
    toks = tokens(30, seed=5)
    side = llama_side(path)
    want, _ = side.target_decode(toks, 0)
    side.close()
    got = target(model).decode(toks, logits_all=True)
    assert max(nmse(w, g) for w, g in zip(want, got)) <= 1e-10


@pytest.mark.oracle
@pytest.mark.parametrize("policy", ["natural", "forced"])
def test_drafts_and_draft_logits_match_llama_cpp(model, path, bigram_path, policy):
    if policy == "natural":
        path = bigram_path
        model = Model.load(path)
    prompt = tokens(9, seed=7)
    greedy = list(f32(model).generate(prompt, 36))
    mk = (lambda: None) if policy == "natural" else (lambda: forced(greedy, [3, 0, 2, 1, 3]))
    side = llama_side(path)
    want, wsteps = run_mtp_loop(MixedMtpSide(target(model), side), prompt, 36, 3, mk())
    side.close()
    t = target(model)
    got, gsteps = drafter_loop(t, MtpDrafter(t), prompt, 36, 3, mk())
    assert want == greedy and got == greedy
    assert [s["draft"] for s in gsteps] == [s["draft"] for s in wsteps]
    errs = [nmse(w, g) for a, b in zip(wsteps, gsteps) for w, g in zip(a["logits"], b["logits"])]
    print(f"\ndeepseek4 MTP ({policy}): {len(gsteps)} steps, accepted "
          f"{[s['n_accepted'] for s in gsteps]}, max draft-logits NMSE {max(errs):.2e}")
    assert max(errs) <= 1e-4


def test_speculative_decoder_mtp_equals_plain_greedy(model):
    from pyggml.llm.speculative import SpeculativeDecoder
    prompt = tokens(9, seed=8)
    want = list(Context(model, n_ctx=256, n_rs_seq=N_RS).generate(prompt, 32))
    dec = SpeculativeDecoder(Context(model, n_ctx=256, n_rs_seq=N_RS), kind="mtp", n_max=3)
    assert list(dec.generate(prompt, 32)) == want
