"""Step3.5 (pyggml.llm.models.step35) and its multi-head MTP on a tiny random GGUF (3 trunk
layers and 3 NextN heads, alternating window/full attention with a window of 8, partial
RoPE on the full layers, per-head attention gates, one MoE layer, the optional NextN shared
head tensors): trunk logits and h_nextn against llama.cpp, the head offset, the drafter's
chained heads committing exactly the greedy stream, and the drafts and draft logits of
every step against llama.cpp's MTP context.

A second file, `limits`, has per-block SwiGLU limits (`swiglu_clamp_exp` on its two MoE
layers' experts, `swiglu_clamp_shexp` on the dense and shared-expert FFNs, one block of each
kind unlimited) that clamp about an eighth of the SwiGLU inputs; the numpy and llama.cpp
checks run on it too."""
import numpy as np
import pytest

from llama_cpp_mtp import PyggmlMtpSide, drafter_loop, forced, llama_mtp_side, run_mtp_loop
from step35_ref import Step35Ref
from util import nmse

import pyggml as gg
from pyggml.llm import Context, Model
from pyggml.llm.speculative.mtp import MtpDrafter
from pyggml.llm.tiny import write_tiny_step35


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return str(write_tiny_step35(tmp_path_factory.mktemp("s35") / "s35.gguf", seed=1))


@pytest.fixture(scope="module")
def model(path):
    return Model.load(path)


# 3 trunk layers + 3 NextN blocks; blocks 1 and 3 are MoE
LIMIT_EXP = [0.0, 1.2, 0.0, 1.5, 0.0, 0.0]
LIMIT_SHEXP = [1.5, 1.0, 0.0, 1.2, 2.0, 1.4]
LIMITS_WRITER = dict(seed=1, moe_layers=(1, 3))


@pytest.fixture(scope="module")
def limits_path(tmp_path_factory):
    return str(write_tiny_step35(tmp_path_factory.mktemp("limits") / "limits.gguf",
                                 swiglu_clamp_exp=LIMIT_EXP, swiglu_clamp_shexp=LIMIT_SHEXP,
                                 **LIMITS_WRITER))


@pytest.fixture(scope="module", params=["plain", "limits"])
def variant(request, path, limits_path):
    """(model, path) of the plain file and of the one with SwiGLU limits."""
    p = path if request.param == "plain" else limits_path
    return Model.load(p), p


@pytest.fixture(scope="module")
def bigram_path(tmp_path_factory):
    """A near-bigram variant: its MTP drafts get accepted without forcing."""
    return str(write_tiny_step35(tmp_path_factory.mktemp("bigram") / "bigram.gguf", bigram=0.5, seed=1))


def f32(model, **kw):
    return Context(model, **{"n_ctx": 256, "type_k": gg.F32, "type_v": gg.F32, **kw})


def tokens(n, seed=0):
    return [int(t) for t in np.random.default_rng(seed).integers(3, 256, size=n)]


def test_hparams_and_memory_layout(model):
    t, d = f32(model), f32(model, ctx_type="mtp")
    hp = t.hparams
    assert (hp.n_layer, hp.n_nextn, hp.n_rot_full, hp.n_rot_swa) == (3, 3, 8, 16)
    assert hp.swa_layers == (True, False, True, False, True, False)
    assert sorted(t.memory.base.layers + t.memory.swa.layers) == [0, 1, 2]
    assert sorted(d.memory.base.layers + d.memory.swa.layers) == [3, 4, 5]


def test_swiglu_limits_are_read_per_block(limits_path, tmp_path):
    from pyggml.llm.models.step35 import Step35HParams
    hp = f32(Model.load(limits_path)).hparams
    assert hp.swiglu_clamp_exp == tuple(float(np.float32(x)) for x in LIMIT_EXP)   # stored as F32
    assert hp.swiglu_clamp_shexp == tuple(float(np.float32(x)) for x in LIMIT_SHEXP)
    plain = Model.load(write_tiny_step35(tmp_path / "plain.gguf", **LIMITS_WRITER))
    hp = Step35HParams.from_gguf(dict(plain.kv, **{"step35.swiglu_clamp_shexp": 0.75}), "step35")
    assert hp.swiglu_clamp_shexp == (0.75,) * 6 and hp.swiglu_clamp_exp == (0.0,) * 6
    with pytest.raises(ValueError, match="one limit per block"):
        write_tiny_step35(tmp_path / "bad.gguf", swiglu_clamp_exp=[1.0, 2.0])


def test_swiglu_limits_bite(limits_path, tmp_path):
    toks = tokens(20, seed=9)
    plain = write_tiny_step35(tmp_path / "plain.gguf", **LIMITS_WRITER)
    want, _ = Step35Ref(limits_path).trunk(toks)
    unlimited, _ = Step35Ref(plain).trunk(toks)
    assert min(nmse(w, u) for w, u in zip(want, unlimited)) > 1e-3


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_trunk_and_every_head_match_numpy(variant, flash_attn):
    model, path = variant
    toks = tokens(20, seed=9)                       # longer than the window of 8
    ref = Step35Ref(path)
    want, want_h = ref.trunk(toks)
    t = f32(model, flash_attn=flash_attn, embeddings_nextn=True)
    got = t.decode(toks, logits_all=True)
    assert max(nmse(w, g) for w, g in zip(want, got)) <= 1e-9
    assert max(nmse(w, g) for w, g in zip(want_h, t.embd_nextn)) <= 1e-9
    hs = np.concatenate([np.zeros((1, 64)), want_h[:-1]])
    for j in range(3):
        w_l, w_h = ref.nextn(j, toks, hs)
        d = f32(model, ctx_type="mtp", flash_attn=flash_attn)
        d.set_nextn_layer_offset(j)
        g_l = d.decode(toks, embd=hs.astype(np.float32), logits_all=True)
        assert max(nmse(w, g) for w, g in zip(w_l, g_l)) <= 1e-9, f"head {j}"
        assert max(nmse(w, g) for w, g in zip(w_h, d.embd_nextn)) <= 1e-9, f"head {j}"


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_trunk_h_nextn_is_pre_norm_and_masking_moves_the_crop(model, flash_attn):
    toks = tokens(21, seed=2)
    ctx = f32(model, flash_attn=flash_attn, embeddings_nextn=True)
    lg = ctx.decode(toks)
    H = ctx.embd_nextn.astype(np.float64)
    assert H.shape == (21, 64)
    w_norm = np.asarray(model.get("output_norm.weight").numpy(), np.float64)
    w_out = np.asarray(model.get("output.weight").numpy(), np.float64)
    x = H[-1] / np.sqrt((H[-1] ** 2).mean() + 1e-6) * w_norm
    assert nmse(w_out @ x, lg[-1]) <= 1e-10
    masked = f32(model, flash_attn=flash_attn, embeddings_nextn=True, nextn_masked=True)
    lg2 = masked.decode(toks)
    assert masked.embd_nextn.shape == (1, 64)
    assert nmse(H[-1], masked.embd_nextn[0]) <= 1e-12 and nmse(lg[-1], lg2[-1]) <= 1e-12


def test_mtp_context_needs_the_nextn_tensors(tmp_path):
    import gguf
    src = write_tiny_step35(tmp_path / "full.gguf", n_layer=2, n_nextn=1, moe_layers=())
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(str(tmp_path / "trunk.gguf"), "step35")
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_key_value(f.name, f.contents(), vt, sub_type=f.types[-1])
        else:
            w.add_key_value(f.name, f.contents(), vt)
    for t in r.tensors:
        if not t.name.startswith("blk.2."):
            w.add_tensor(t.name, np.array(t.data))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    trunk = Model.load(tmp_path / "trunk.gguf")
    want = f32(Model.load(src)).decode([1, 2, 3])
    assert np.array_equal(f32(trunk).decode([1, 2, 3]), want)      # the trunk decodes
    with pytest.raises(KeyError, match="blk.2"):
        f32(trunk, ctx_type="mtp")


def test_each_head_offset_runs_its_own_block(model):
    toks = tokens(6, seed=3)
    t = f32(model, embeddings_nextn=True)
    t.decode(toks, logits_all=True)
    hs = np.concatenate([np.zeros((1, 64), np.float32), t.embd_nextn[:-1]])
    rows = []
    for off in range(3):
        d = f32(model, ctx_type="mtp")
        d.set_nextn_layer_offset(off)
        rows.append(d.decode(toks, embd=hs)[-1])
        d.seq_rm(0, 0, -1)
        d.set_nextn_layer_offset(off)
        assert np.array_equal(rows[-1], d.decode(toks, embd=hs)[-1])   # same head, same rows
    assert min(nmse(rows[i], rows[j]) for i in range(3) for j in range(i)) > 1e-2
    with pytest.raises(ValueError, match="offset"):
        d.set_nextn_layer_offset(3)


def test_chained_heads_commit_the_greedy_stream(model):
    prompt = tokens(9, seed=4)
    greedy = list(f32(model).generate(prompt, 40))
    t = f32(model, embeddings_nextn=True)
    dr = MtpDrafter(t)
    assert dr.bind(t, 8) == 3                                  # clamped to the head count
    out, steps = drafter_loop(t, dr, prompt, 40, 8, forced(greedy, [3, 1, 0, 2]))
    assert out == greedy and {0, 1, 2, 3} <= {s["n_accepted"] for s in steps}
    assert all(len(s["draft"]) == 3 for s in steps)
    tm = dr.ctx.timings                       # per-head graphs are kept and reused
    assert tm["n_graph_reuse"] > 4 * tm["n_graph_build"]
    side = PyggmlMtpSide(f32(model, embeddings_nextn=True), f32(model, ctx_type="mtp"))
    out2, steps2 = run_mtp_loop(side, prompt, 40, 8, forced(greedy, [3, 1, 0, 2]))
    assert out2 == greedy and [s["draft"] for s in steps] == [s["draft"] for s in steps2]
    t3 = f32(model, embeddings_nextn=True)
    assert drafter_loop(t3, MtpDrafter(t3), prompt, 40, 3)[0] == greedy


# ---- llama.cpp -----------------------------------------------------------------------------
def llama_side(path):
    return llama_mtp_side(path, n_rs_seq=0)


@pytest.mark.oracle
def test_trunk_logits_and_h_nextn_match_llama_cpp(variant):
    model, path = variant
    toks = tokens(30, seed=5)              # longer than the window: SWA masking matters
    side = llama_side(path)
    want, want_h = side.target_decode(toks, 0)
    side.close()
    ctx = f32(model, flash_attn=False, embeddings_nextn=True)
    got = ctx.decode(toks, logits_all=True)
    assert max(nmse(w, g) for w, g in zip(want, got)) <= 1e-10
    assert max(nmse(w, g) for w, g in zip(want_h, ctx.embd_nextn)) <= 1e-10


@pytest.mark.oracle
@pytest.mark.parametrize("policy", ["natural", "forced", "forced_limits"])
def test_chained_drafts_and_draft_logits_match_llama_cpp(model, path, bigram_path, limits_path,
                                                         policy):
    if policy != "forced":
        path = bigram_path if policy == "natural" else limits_path
        model = Model.load(path)
    prompt = tokens(9, seed=7)
    greedy = list(f32(model).generate(prompt, 36))
    mk = (lambda: None) if policy == "natural" else (lambda: forced(greedy, [3, 0, 2, 1, 3]))
    side = llama_side(path)
    want, wsteps = run_mtp_loop(side, prompt, 36, 3, mk())
    side.close()
    t = f32(model, flash_attn=False, embeddings_nextn=True)
    got, gsteps = drafter_loop(t, MtpDrafter(t), prompt, 36, 3, mk())
    assert want == greedy and got == greedy
    assert [s["draft"] for s in gsteps] == [s["draft"] for s in wsteps]
    assert [s["n_accepted"] for s in gsteps] == [s["n_accepted"] for s in wsteps]
    errs = [nmse(w, g) for a, b in zip(wsteps, gsteps) for w, g in zip(a["logits"], b["logits"])]
    print(f"\nstep35 MTP3 ({policy}): {len(gsteps)} steps, accepted "
          f"{[s['n_accepted'] for s in gsteps]}, max draft-logits NMSE {max(errs):.2e}")
    assert max(errs) <= 1e-4


def test_speculative_decoder_mtp_equals_plain_greedy(model):
    from pyggml.llm.speculative import SpeculativeDecoder
    prompt = tokens(9, seed=8)
    want = list(Context(model, n_ctx=256).generate(prompt, 32))
    dec = SpeculativeDecoder(Context(model, n_ctx=256), kind="mtp", n_max=3)
    assert list(dec.generate(prompt, 32)) == want


def test_natural_chained_drafts_of_a_near_bigram_model_are_accepted_losslessly(bigram_path):
    model = Model.load(bigram_path)
    prompt = tokens(9, seed=7)
    greedy = list(f32(model).generate(prompt, 36))
    t = f32(model, embeddings_nextn=True)
    out, steps = drafter_loop(t, MtpDrafter(t), prompt, 36, 3)
    acc = [s["n_accepted"] for s in steps]
    assert out == greedy and 0 < sum(acc) and max(acc) == 3 and min(acc) < 3
