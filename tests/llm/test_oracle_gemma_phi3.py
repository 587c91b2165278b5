"""Oracle: Gemma 2, Gemma 3 and Phi-3 in pyggml.llm against llama.cpp itself
(llama-cpp-python) on tiny random-weight files from pyggml.llm.tiny.

For each file and attention path (flash attention on and off): the prompt's logits
(logits_all) and 32 greedy steps, NMSE <= 1e-4 on every row and identical greedy tokens.
The prompts are longer than the sliding window (8) and are split into several ubatches on
both sides; `gemma3_wrap` decodes past 256 cells so the window cache (swa_full off, as in
pyggml) reuses cells that slid out of the window."""
import os

import numpy as np
import pytest

from util import nmse

pytestmark = pytest.mark.oracle
llama_cpp = pytest.importorskip("llama_cpp")

from llama_cpp_driver import llama_cpp_greedy, pyggml_greedy  # noqa: E402

from pyggml.llm import Context, Model  # noqa: E402
from pyggml.llm.models import load_hparams  # noqa: E402
from pyggml.llm.tiny import write_tiny_gemma2, write_tiny_gemma3, write_tiny_phi3  # noqa: E402

N_STEPS = 32
MAX_NMSE = 1e-4

# name -> (writer, kwargs, n_ctx, prompt length, n_ubatch)
MODELS = {
    "gemma2": (write_tiny_gemma2, {}, 256, 40, 16),
    "gemma2_pattern": (write_tiny_gemma2, dict(swa_pattern=[False, True, True, False],
                                               rope_freq_base_swa=500.0), 256, 40, 16),
    "gemma3": (write_tiny_gemma3, {}, 256, 40, 16),
    "gemma3_full_cap": (write_tiny_gemma3, dict(n_swa=None, final_soft_cap=2.0, tied_embeddings=False),
                        256, 40, 16),
    "gemma3_wrap": (write_tiny_gemma3, dict(n_layer=3, n_ctx_train=2048), 512, 250, 64),
    "phi3_short": (write_tiny_phi3, {}, 256, 40, 16),
    "phi3_long": (write_tiny_phi3, dict(fused_qkv=False), 512, 40, 16),
    "phi3_swa_key": (write_tiny_phi3, dict(n_swa=8, long_rope=False, tied_embeddings=True), 256, 40, 16),
}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request, tmp_path_factory):
    writer, kw, n_ctx, n_prompt, n_ubatch = MODELS[request.param]
    path = writer(str(tmp_path_factory.mktemp("oracle_gemma_phi3") / f"{request.param}.gguf"),
                  seed=11, **kw)
    prompt = [int(t) for t in np.random.default_rng(3).integers(3, 256, size=n_prompt)]
    return request.param, path, n_ctx, prompt, n_ubatch


def run_llama_cpp(path, prompt, flash_attn, n_ctx, n_ubatch):
    return llama_cpp_greedy(path, prompt, N_STEPS, n_ctx=n_ctx, n_ubatch=n_ubatch,
                            flash_attn=flash_attn, swa_full=False)


def run_pyggml(path, prompt, flash_attn, n_ctx, n_ubatch):
    ctx = Context(Model.load(path), n_ctx=n_ctx, n_threads=2, flash_attn=flash_attn, n_ubatch=n_ubatch)
    return pyggml_greedy(ctx, prompt, N_STEPS)


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_logits_and_greedy_tokens_match_llama_cpp(model, flash_attn):
    name, path, n_ctx, prompt, n_ubatch = model
    ref, ref_toks = run_llama_cpp(path, prompt, flash_attn, n_ctx, n_ubatch)
    got, got_toks = run_pyggml(path, prompt, flash_attn, n_ctx, n_ubatch)
    assert got.shape == ref.shape
    assert 0.3 < ref.std() < 10, "logits should be O(1), not near-ties"
    errs = [nmse(r, g) for r, g in zip(ref, got)]
    worst = int(np.argmax(errs))
    print(f"\n{name} fa={flash_attn}: max row NMSE {errs[worst]:.2e} (row {worst}), "
          f"prompt max {max(errs[:len(prompt)]):.2e}, greedy equal: {got_toks == ref_toks}")
    assert errs[worst] <= MAX_NMSE, f"row {worst}: NMSE {errs[worst]:.3e}"
    assert got_toks == ref_toks


def test_llama_cpp_hparams_agree(model):
    name, path, *_ = model
    llm = llama_cpp.Llama(model_path=path, verbose=False, n_ctx=64, n_threads=1)
    try:
        mp = llm.model
        theirs = dict(n_embd=llama_cpp.llama_model_n_embd(mp), n_layer=llama_cpp.llama_model_n_layer(mp),
                      n_head=llama_cpp.llama_model_n_head(mp), n_head_kv=llama_cpp.llama_model_n_head_kv(mp),
                      rope_type=llama_cpp.llama_model_rope_type(mp), n_vocab=llm.n_vocab(),
                      n_swa=llama_cpp.llama_model_n_swa(mp))
    finally:
        llm.close()
    hp = load_hparams(Model.load(path))
    ours = {k: getattr(hp, k, None) for k in theirs}
    ours["n_swa"] = getattr(hp, "n_swa", 0)   # phi3: llama.cpp drops the window it reads
    assert ours == theirs, os.path.basename(path)
