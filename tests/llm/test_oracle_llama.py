"""Oracle: pyggml.llm against llama.cpp itself (llama-cpp-python) on tiny random GGUF models.

For each model and attention path: the prompt's logits (logits_all) and 32 greedy steps.
Requires logits NMSE <= 1e-4 on every row and identical greedy tokens."""
import os

import numpy as np
import pytest

from util import nmse

pytestmark = pytest.mark.oracle
llama_cpp = pytest.importorskip("llama_cpp")

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
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_batch=64, n_ubatch=64, n_threads=2,
                          logits_all=True, flash_attn=flash_attn, verbose=False, seed=0)
    llm.eval(list(prompt))
    rows = [np.array(llm.scores[:len(prompt)], np.float64)]
    toks = []
    for _ in range(N_STEPS):
        tok = int(np.argmax(rows[-1][-1]))
        toks.append(tok)
        llm.eval([tok])
        rows.append(np.array(llm.scores[llm.n_tokens - 1:llm.n_tokens], np.float64))
    return np.concatenate(rows), toks


def run_pyggml(path, prompt, flash_attn):
    ctx = Context(Model.load(path), n_ctx=256, n_threads=2, flash_attn=flash_attn, n_ubatch=64)
    rows = [ctx.decode(prompt, logits_all=True).astype(np.float64)]
    toks = []
    for _ in range(N_STEPS):
        tok = int(np.argmax(rows[-1][-1]))
        toks.append(tok)
        rows.append(ctx.decode([tok]).astype(np.float64))
    return np.concatenate(rows), toks


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
