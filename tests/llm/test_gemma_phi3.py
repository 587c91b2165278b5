"""Gemma 2, Gemma 3 and Phi-3 against float64 numpy forwards of their definitions
(gemma_phi3_ref.py), on tiny files from pyggml.llm.tiny, plus their hparams loaders.

The prompt (40 tokens) is longer than the window (8), decoded in ubatches of 16, then a few
tokens one at a time; each variant also names reference changes that must move the logits
(so a feature the builder skipped could not pass unnoticed)."""
import dataclasses

import numpy as np
import pytest

import pyggml as gg
from pyggml.llm import Context, Model
from pyggml.llm.models import load_hparams
from pyggml.llm.models.gemma2 import GemmaHParams
from pyggml.llm.models.gemma3 import Gemma3HParams
from pyggml.llm.models.phi3 import Phi3HParams
from pyggml.llm.tiny import write_tiny_gemma2, write_tiny_gemma3, write_tiny_phi3
from gemma_phi3_ref import gemma_forward, phi3_forward
from util import nmse

PROMPT = [int(t) for t in np.random.default_rng(5).integers(3, 256, size=40)]
N_STEPS = 4
MAX_NMSE = 1e-5   # F32 weights and caches; ggml's GELU reads its input rounded to F16

# name -> (writer, writer kwargs, n_ctx, reference changes that must alter the logits)
VARIANTS = {
    "gemma2": (write_tiny_gemma2, {}, 256,
               {"no window": dict(n_swa=0), "no attn cap": dict(attn_soft_cap=0.0),
                "no final cap": dict(final_soft_cap=0.0)}),
    "gemma2_pattern": (write_tiny_gemma2, dict(swa_pattern=[False, True, True, False],
                                               rope_freq_base_swa=500.0), 256,
                       {"swa base": dict(rope_freq_base_swa=10000.0)}),
    "gemma3": (write_tiny_gemma3, {}, 256,
               {"no window": dict(n_swa=0), "one base": dict(rope_freq_base_swa=1000000.0),
                "no scaling": dict(rope_freq_scale=1.0)}),
    "gemma3_full_cap": (write_tiny_gemma3, dict(n_swa=None, final_soft_cap=2.0, tied_embeddings=False),
                        256, {"no final cap": dict(final_soft_cap=0.0)}),
    "phi3_short": (write_tiny_phi3, {}, 256, {"attn factor 1": dict(rope_attn_factor=1.0)}),
    "phi3_long": (write_tiny_phi3, dict(fused_qkv=False), 512, {"short factors": dict(n_ctx_orig=4096)}),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("gemma_phi3")
    return {k: v[0](str(d / f"{k}.gguf"), seed=7, **v[1]) for k, v in VARIANTS.items()}


def reference(m, hp, tokens, n_ctx):
    if hp.arch == "phi3":
        return phi3_forward(m, hp, tokens, n_ctx)
    return gemma_forward(m, hp, tokens)


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_matches_numpy_reference(files, variant, flash_attn):
    _, _, n_ctx, changes = VARIANTS[variant]
    m = Model.load(files[variant])
    ctx = Context(m, n_ctx=n_ctx, n_threads=2, flash_attn=flash_attn, n_ubatch=16,
                  type_k=gg.F32, type_v=gg.F32)
    got = [ctx.decode(PROMPT, logits_all=True)]
    toks = list(PROMPT)
    for _ in range(N_STEPS):
        toks.append(int(np.argmax(got[-1][-1])))
        got.append(ctx.decode([toks[-1]]))
    got = np.concatenate(got)
    hp = ctx.hparams
    ref = reference(m, hp, toks, n_ctx)
    assert got.shape == ref.shape
    assert 0.3 < ref.std() < 10
    err = nmse(ref, got)
    print(f"\n{variant} fa={flash_attn}: NMSE vs numpy {err:.2e}")
    assert err <= MAX_NMSE, f"{variant}: NMSE {err:.3e}"
    for what, change in changes.items():
        alt = reference(m, dataclasses.replace(hp, **change), toks, n_ctx)
        assert nmse(alt, got) > 100 * MAX_NMSE, f"{variant}: '{what}' does not change the logits"


def test_n_ubatch_split_does_not_change_results(files):
    m = Model.load(files["gemma3"])
    rows = [Context(m, n_ctx=256, n_ubatch=nu, type_k=gg.F32, type_v=gg.F32).decode(PROMPT, logits_all=True)
            for nu in (40, 7)]
    assert nmse(rows[0], rows[1]) < 1e-8   # float32 rounding of other matmul blockings only


def kv_of(arch, **extra):
    kv = {"general.architecture": arch, f"{arch}.context_length": 1024, f"{arch}.embedding_length": 64,
          f"{arch}.block_count": 6, f"{arch}.feed_forward_length": 128, f"{arch}.attention.head_count": 4,
          f"{arch}.attention.layer_norm_rms_epsilon": 1e-6}
    kv.update({f"{arch}.{k}": v for k, v in extra.items()})
    return kv


def test_gemma2_hparams_defaults():
    hp = GemmaHParams.from_gguf(kv_of("gemma2"), "gemma2")
    assert hp.n_swa == 4096 and hp.swa_layers == (True, False) * 3
    assert hp.attn_soft_cap == 50.0 and hp.final_soft_cap == 30.0
    assert hp.rope_freq_base_swa == hp.rope_freq_base == 10000.0
    assert hp.attention_scale == pytest.approx(1 / np.sqrt(16))
    hp = GemmaHParams.from_gguf(kv_of("gemma2", **{"attention.sliding_window_pattern": 3,
                                                   "rope.freq_base_swa": 100.0}), "gemma2")
    assert hp.swa_layers == (True, True, False) * 2 and hp.rope_freq_base_swa == 100.0


def test_gemma3_hparams_window_is_optional():
    hp = Gemma3HParams.from_gguf(kv_of("gemma3"), "gemma3")
    assert hp.n_swa == 0 and not any(hp.swa_layers) and hp.final_soft_cap == 0.0
    hp = Gemma3HParams.from_gguf(kv_of("gemma3", **{"attention.sliding_window": 512,
                                                    "rope.scaling.factor": 8.0}), "gemma3")
    assert hp.swa_layers == (True,) * 5 + (False,)
    assert hp.rope_freq_base_swa == 10000.0 and hp.rope_freq_scale_swa == 1.0
    assert hp.rope_freq_scale == 0.125 and hp.attn_soft_cap == 0.0


def test_gemma_27b_attention_scale_uses_n_embd_over_n_head():
    kv = kv_of("gemma2", **{"block_count": 46, "attention.key_length": 32, "attention.value_length": 32})
    assert GemmaHParams.from_gguf(kv, "gemma2").attention_scale == pytest.approx(1 / 4)
    kv = kv_of("gemma2", **{"attention.key_length": 32, "attention.value_length": 32})
    assert GemmaHParams.from_gguf(kv, "gemma2").attention_scale == pytest.approx(1 / np.sqrt(32))


def test_phi3_hparams_and_disabled_window(files):
    hp = Phi3HParams.from_gguf(kv_of("phi3", **{"attention.sliding_window": 2047}), "phi3")
    assert hp.n_swa_file == 2047 and hp.rope_attn_factor == 1.0 and hp.n_ctx_orig == 1024
    hp = load_hparams(Model.load(files["phi3_short"]))
    assert hp.n_ctx_orig == 256 and hp.rope_attn_factor == pytest.approx(1.2)


def test_gemma_iswa_memory_and_bad_pattern(files):
    m = Model.load(files["gemma2"])
    ctx = Context(m, n_ctx=256)
    assert [c.layers for c in ctx.memory.caches] == [[1, 3], [0, 2]]
    with pytest.raises(ValueError, match="sliding_window_pattern"):
        GemmaHParams.from_gguf(kv_of("gemma2", **{"attention.sliding_window_pattern": [True, False]}),
                               "gemma2")
