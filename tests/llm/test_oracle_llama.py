"""Oracle: pyggml.llm against llama.cpp itself (llama-cpp-python) on tiny random GGUF models.

For each model and attention path: the prompt's logits (logits_all) and 32 greedy steps.
Requires logits NMSE <= 1e-4 on every row and identical greedy tokens."""
import os

import numpy as np
import pytest

from util import nmse

pytestmark = pytest.mark.oracle
llama_cpp = pytest.importorskip("llama_cpp")

from llama_cpp_driver import llama_cpp_greedy, pyggml_greedy  # noqa: E402

from pyggml.llm import Context, Model, write_tiny_llama  # noqa: E402

N_STEPS = 32
MAX_NMSE = 1e-4

MODELS = {
    "llama_gqa": dict(arch="llama", n_vocab=256, n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=128),
    "llama_gqa_f16": dict(arch="llama", n_vocab=256, n_embd=64, n_layer=2, n_head=8, n_head_kv=2,
                          n_ff=160, dtype="f16", tied_embeddings=True),
    "llama_q8_0": dict(arch="llama", n_vocab=256, n_embd=64, n_layer=2, n_head=4, n_head_kv=2,
                       n_ff=128, dtype="q8_0"),
    "qwen3_qknorm": dict(arch="qwen3", n_vocab=256, n_embd=64, n_layer=2, n_head=4, n_head_kv=2,
                         n_ff=128, head_dim=32, qk_norm=True),
}


@pytest.fixture(scope="module", params=list(MODELS))
def gguf_path(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("oracle") / f"{request.param}.gguf"
    return write_tiny_llama(path, seed=11, **MODELS[request.param])


def run_llama_cpp(path, prompt, flash_attn):
    return llama_cpp_greedy(path, prompt, N_STEPS, flash_attn=flash_attn)


def run_pyggml(path, prompt, flash_attn):
    ctx = Context(Model.load(path), n_ctx=256, n_threads=2, flash_attn=flash_attn, n_ubatch=64)
    return pyggml_greedy(ctx, prompt, N_STEPS)


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_logits_and_greedy_tokens_match_llama_cpp(gguf_path, flash_attn):
    prompt = [int(t) for t in np.random.default_rng(3).integers(3, 256, size=19)]
    ref, ref_toks = run_llama_cpp(gguf_path, prompt, flash_attn)
    got, got_toks = run_pyggml(gguf_path, prompt, flash_attn)
    assert got.shape == ref.shape
    errs = [nmse(r, g) for r, g in zip(ref, got)]
    worst = int(np.argmax(errs))
    print(f"\n{os.path.basename(str(gguf_path))} fa={flash_attn}: "
          f"max row NMSE {errs[worst]:.2e} (row {worst}), mean {np.mean(errs):.2e}, "
          f"greedy equal: {got_toks == ref_toks}")
    assert errs[worst] <= MAX_NMSE, f"row {worst}: NMSE {errs[worst]:.3e}"
    assert got_toks == ref_toks
