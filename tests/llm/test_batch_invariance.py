"""Greedy speculative decoding is lossless only if the target computes a token's logits the
same way whether the token is decoded alone or inside a verify batch. These tests decode a
prefix, then the next tokens once as one batch (logits for every row) and once one token at
a time, and require the rows to be bitwise equal: for every weight type, with flash
attention on and off, and with caches past the sizes where the attention kernel changes
plan (512 cells and more)."""
import numpy as np
import pytest

from pyggml import demo
from pyggml.llm import Context, Model, write_tiny_llama
from pyggml.llm.speculative import Draft, Drafter, SpeculativeDecoder
from util import rows_batch_and_single

WIDTHS = (2, 9, 17)


def assert_rows_equal(batch, single, what):
    bad = [i for i in range(len(single)) if not np.array_equal(batch[i], single[i])]
    assert not bad, (f"{what}: rows {bad} differ between the batch and one-at-a-time decode "
                     f"(max |diff| {np.abs(batch - single).max():.3g})")


@pytest.fixture(scope="module", params=["f32", "f16", "q8_0", "q4_0"])
def tiny(request, tmp_path_factory):
    path = write_tiny_llama(tmp_path_factory.mktemp("inv") / f"{request.param}.gguf",
                            n_embd=96, n_ff=160, n_ctx_train=2048, dtype=request.param, seed=11)
    return request.param, Model.load(path)


@pytest.mark.parametrize("flash_attn", [True, False])
@pytest.mark.parametrize("n_prefix", [5, 600])
def test_tiny_rows_do_not_depend_on_batch_width(tiny, flash_attn, n_prefix):
    dtype, model = tiny
    rng = np.random.default_rng(n_prefix)
    prefix = rng.integers(0, 256, n_prefix).tolist()
    for width in WIDTHS:
        ids = rng.integers(0, 256, width).tolist()
        batch, single = rows_batch_and_single(model, prefix, ids, flash_attn, n_ctx=1024)
        assert_rows_equal(batch, single, f"{dtype} fa={flash_attn} prefix={n_prefix} w={width}")


@pytest.fixture(scope="module")
def smollm2():
    path, why = demo.fetch_smollm2()
    if path is None:
        pytest.skip(f"SmolLM2 cannot be fetched: {why}")
    return Model.load(path, progress=False)


@pytest.mark.parametrize("flash_attn", [True, False])
def test_smollm2_rows_do_not_depend_on_batch_width(smollm2, flash_attn):
    rng = np.random.default_rng(5)
    prefix = rng.integers(0, 49152, 530).tolist()
    ids = rng.integers(0, 49152, 9).tolist()
    batch, single = rows_batch_and_single(smollm2, prefix, ids, flash_attn, n_ctx=1024)
    assert_rows_equal(batch, single, f"SmolLM2 fa={flash_attn}")


class TrueContinuation(Drafter):
    """Drafts the target's own greedy continuation, so every verify batch is n_max+1 wide
    and nearly always fully accepted: any row the batch computes differently shows up as a
    different committed stream."""
    kind = "oracle"

    def __init__(self, full):
        self.full = full

    def draft(self, id_last, pos0, n_max):
        return Draft(ids=self.full[pos0 + 1:pos0 + 1 + n_max])


@pytest.mark.parametrize("n_max", [8, 16])
def test_smollm2_wide_drafts_commit_the_greedy_stream(smollm2, n_max):
    prompt = smollm2.tokenize("The history of the printing press begins")
    ctx = Context(smollm2, n_ctx=1024, n_threads=2)
    ref = list(ctx.generate(prompt, 96))
    ctx.reset()
    dec = SpeculativeDecoder(ctx, TrueContinuation(prompt + ref), n_max=n_max)
    assert list(dec.generate(prompt, 96)) == ref
