"""Step3.5's per-layer SwiGLU limits (`step35.swiglu_clamp_exp` for the routed experts,
`step35.swiglu_clamp_shexp` for the dense and shared-expert FFNs): silu(gate) capped at L,
up clamped to [-L, L], in the trunk and in every NextN head. Checked against the float64
numpy forward (step35_ref.py) and against llama.cpp on a tiny file whose limits clamp about
an eighth of the SwiGLU inputs, with a layer of each kind left unlimited."""
import numpy as np
import pytest

from llama_cpp_mtp import drafter_loop, forced, run_mtp_loop
from step35_ref import Step35Ref
from util import nmse

import pyggml as gg
from pyggml.llm import Context, Model
from pyggml.llm.speculative.mtp import MtpDrafter
from pyggml.llm.tiny import write_tiny_step35

# 3 trunk layers + 3 NextN blocks; layers 1 and 3 are MoE
LIMIT_EXP = [0.0, 1.2, 0.0, 1.5, 0.0, 0.0]
LIMIT_SHEXP = [1.5, 1.0, 0.0, 1.2, 2.0, 1.4]
WRITER = dict(seed=1, moe_layers=(1, 3))


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return str(write_tiny_step35(tmp_path_factory.mktemp("s35clamp") / "clamp.gguf",
                                 swiglu_clamp_exp=LIMIT_EXP, swiglu_clamp_shexp=LIMIT_SHEXP, **WRITER))


@pytest.fixture(scope="module")
def unlimited_path(tmp_path_factory):
    return str(write_tiny_step35(tmp_path_factory.mktemp("s35plain") / "plain.gguf", **WRITER))


@pytest.fixture(scope="module")
def model(path):
    return Model.load(path)


def f32(model, **kw):
    return Context(model, **{"n_ctx": 256, "type_k": gg.F32, "type_v": gg.F32, **kw})


def tokens(n, seed=0):
    return [int(t) for t in np.random.default_rng(seed).integers(3, 256, size=n)]


def test_limits_are_read_per_block(model):
    hp = f32(model).hparams
    assert hp.swiglu_clamp_exp == tuple(float(np.float32(x)) for x in LIMIT_EXP)     # stored as F32
    assert hp.swiglu_clamp_shexp == tuple(float(np.float32(x)) for x in LIMIT_SHEXP)


def test_a_scalar_limit_applies_to_every_block(tmp_path):
    from pyggml.llm.models.step35 import Step35HParams
    m = Model.load(write_tiny_step35(tmp_path / "plain.gguf", **WRITER))
    kv = dict(m.kv, **{"step35.swiglu_clamp_shexp": 0.75})
    hp = Step35HParams.from_gguf(kv, "step35")
    assert hp.swiglu_clamp_shexp == (0.75,) * 6 and hp.swiglu_clamp_exp == (0.0,) * 6


def test_writer_wants_one_limit_per_block(tmp_path):
    with pytest.raises(ValueError, match="one limit per block"):
        write_tiny_step35(tmp_path / "bad.gguf", swiglu_clamp_exp=[1.0, 2.0])


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_trunk_and_every_head_match_numpy(model, path, unlimited_path, flash_attn):
    toks = tokens(20, seed=9)
    ref = Step35Ref(path)
    want, want_h = ref.trunk(toks)
    plain, _ = Step35Ref(unlimited_path).trunk(toks)
    assert min(nmse(w, p) for w, p in zip(want, plain)) > 1e-3     # the limits bite
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


def test_chained_heads_commit_the_greedy_stream(model):
    prompt = tokens(9, seed=4)
    greedy = list(f32(model).generate(prompt, 30))
    t = f32(model, embeddings_nextn=True)
    out, steps = drafter_loop(t, MtpDrafter(t), prompt, 30, 3, forced(greedy, [3, 1, 0, 2]))
    assert out == greedy and {0, 1, 2, 3} <= {s["n_accepted"] for s in steps}


# ---- llama.cpp -----------------------------------------------------------------------------
def llama_side(path):
    pytest.importorskip("llama_cpp")
    from llama_cpp_mtp import LlamaMtpSide
    try:
        return LlamaMtpSide(path, n_rs_seq=0)
    except (RuntimeError, AttributeError) as e:
        pytest.skip(f"llama.cpp MTP path unavailable: {e}")


@pytest.mark.oracle
def test_trunk_logits_and_h_nextn_match_llama_cpp(model, path):
    toks = tokens(30, seed=5)
    side = llama_side(path)
    want, want_h = side.target_decode(toks, 0)
    side.close()
    ctx = f32(model, flash_attn=False, embeddings_nextn=True)
    got = ctx.decode(toks, logits_all=True)
    assert max(nmse(w, g) for w, g in zip(want, got)) <= 1e-10
    assert max(nmse(w, g) for w, g in zip(want_h, ctx.embd_nextn)) <= 1e-10


@pytest.mark.oracle
def test_chained_drafts_and_draft_logits_match_llama_cpp(model, path):
    prompt = tokens(9, seed=7)
    greedy = list(f32(model).generate(prompt, 30))
    side = llama_side(path)
    want, wsteps = run_mtp_loop(side, prompt, 30, 3, forced(greedy, [3, 0, 2, 1]))
    side.close()
    t = f32(model, flash_attn=False, embeddings_nextn=True)
    got, gsteps = drafter_loop(t, MtpDrafter(t), prompt, 30, 3, forced(greedy, [3, 0, 2, 1]))
    assert want == greedy and got == greedy
    assert [s["draft"] for s in gsteps] == [s["draft"] for s in wsteps]
    assert [s["n_accepted"] for s in gsteps] == [s["n_accepted"] for s in wsteps]
    errs = [nmse(w, g) for a, b in zip(wsteps, gsteps) for w, g in zip(a["logits"], b["logits"])]
    print(f"\nstep35 MTP3 with SwiGLU limits: {len(gsteps)} steps, max draft-logits NMSE {max(errs):.2e}")
    assert max(errs) <= 1e-4
