"""Oracle: pyggml.llm's DeepSeek V4 against llama.cpp itself (llama-cpp-python) on tiny random
deepseek4 GGUFs (several seeds; ratios 0/4/128 mixed, top-k smaller than the visible
compressed rows, YaRN on and off, a hash layer), a 270-token prompt so HCA blocks complete,
F32 caches, llama.cpp without flash attention. Requires logits NMSE <= 1e-5 on every row and
16 identical greedy tokens, for pyggml with flash attention off and on and with n_ubatch 37."""
import os

import numpy as np
import pytest

from util import nmse

pytestmark = pytest.mark.oracle
llama_cpp = pytest.importorskip("llama_cpp")

import pyggml as gg  # noqa: E402
from pyggml.llm import Context, Model  # noqa: E402
from pyggml.llm.tiny import write_tiny_deepseek4  # noqa: E402

N_STEPS = 16
MAX_NMSE = 1e-5
GGML_TYPE_F32 = 0

MODELS = {
    "mixed_s0": dict(seed=0),
    "yarn_s1": dict(seed=1, yarn_factor=4.0, compress_ratios=(4, 128, 0, 4)),
    "topk4_s2": dict(seed=2, indexer_top_k=4, compress_ratios=(128, 4, 4, 0), hash_layer_count=2),
}


@pytest.fixture(scope="module", params=list(MODELS))
def gguf_path(request, tmp_path_factory):
    return write_tiny_deepseek4(tmp_path_factory.mktemp("oracle_dsv4") / f"{request.param}.gguf",
                                **MODELS[request.param])


def prompt():
    return [int(t) for t in np.random.default_rng(3).integers(3, 256, size=270)]


def run_llama_cpp(path, toks):
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=512, n_batch=512, n_ubatch=512, n_threads=2,
                          logits_all=True, flash_attn=False, type_k=GGML_TYPE_F32,
                          type_v=GGML_TYPE_F32, verbose=False, seed=0)
    llm.eval(list(toks))
    rows = [np.array(llm.scores[:len(toks)], np.float64)]
    out = []
    for _ in range(N_STEPS):
        tok = int(np.argmax(rows[-1][-1]))
        out.append(tok)
        llm.eval([tok])
        rows.append(np.array(llm.scores[llm.n_tokens - 1:llm.n_tokens], np.float64))
    return np.concatenate(rows), out


def run_pyggml(path, toks, **kw):
    ctx = Context(Model.load(path), n_ctx=512, n_threads=2, type_k=gg.F32, type_v=gg.F32, **kw)
    rows = [ctx.decode(toks, logits_all=True).astype(np.float64)]
    out = []
    for _ in range(N_STEPS):
        tok = int(np.argmax(rows[-1][-1]))
        out.append(tok)
        rows.append(ctx.decode([tok]).astype(np.float64))
    return np.concatenate(rows), out


@pytest.mark.parametrize("kw", [dict(flash_attn=False), dict(flash_attn=True),
                                dict(flash_attn=False, n_ubatch=37)],
                         ids=["nofa", "fa", "ubatch37"])
def test_logits_and_greedy_tokens_match_llama_cpp(gguf_path, kw):
    toks = prompt()
    ref, ref_toks = run_llama_cpp(gguf_path, toks)
    got, got_toks = run_pyggml(gguf_path, toks, **kw)
    assert got.shape == ref.shape
    errs = [nmse(r, g) for r, g in zip(ref, got)]
    worst = int(np.argmax(errs))
    print(f"\n{os.path.basename(str(gguf_path))} {kw}: max row NMSE {errs[worst]:.2e} (row {worst}), "
          f"mean {np.mean(errs):.2e}, greedy equal: {got_toks == ref_toks}")
    assert max(errs) <= MAX_NMSE
    assert got_toks == ref_toks
