"""EAGLE3's draft computes a batch of (token, g) pairs as it computes them one at a time, bit
for bit: the encoder, the pair decodes and the draft logits after them (resumed drafts may
then be compared exactly with drafts of a decoder that asked every round)."""
import numpy as np
import pytest

from pyggml.llm import Context, Model
from pyggml.llm.speculative.eagle3 import Eagle3Drafter
from util import tiny_eagle3_draft, tiny_qwen3_target

N = 12


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("e3batch")
    target = Model.load(tiny_qwen3_target(d))
    draft = Model.load(tiny_eagle3_draft(d))
    return target, draft


def _run(models, chunk, toks, feats):
    """The g rows, the pair decodes' pre-norm rows and the next draft logits, with the
    encoder and the pairs taken `chunk` rows at a time."""
    target, draft = models
    dr = Eagle3Drafter(Context(target, n_ctx=64), draft)
    g = np.concatenate([dr.encode(feats[i:i + chunk]) for i in range(0, N + 1, chunk)])
    h = []
    for i in range(0, N, chunk):
        j = min(N, i + chunk)
        dr.ctx.process(np.arange(i, j), token=toks[i + 1:j + 1], embd=g[i:j],
                       output=np.ones(j - i, bool))
        h.append(np.array(dr.ctx.h_nextn))
    logits = dr.ctx.process([N], token=[int(toks[-1])], embd=g[N:N + 1], output=[True])
    return g, np.concatenate(h), np.array(logits)


def test_eagle3_draft_is_batch_invariant(models):
    rng = np.random.default_rng(0)
    toks = rng.integers(1, 200, N + 1).astype(np.int32)
    feats = rng.standard_normal((N + 1, 3 * models[0].hparams.n_embd)).astype(np.float32)
    one = _run(models, 1, toks, feats)
    for chunk in (4, N):
        for a, b in zip(_run(models, chunk, toks, feats), one):
            assert np.array_equal(a, b), chunk
    # the comparison can fail: a pair's token off by one moves the rows
    toks2 = toks.copy()
    toks2[5] += 1
    assert not np.array_equal(_run(models, N, toks2, feats)[2], one[2])
