"""A sequence's target logits do not depend on the other sequences sharing the cache or the
ubatch: decoded alone (its own context, cells from 0) and inside multi-sequence ubatches of a
context holding 2-3 other sequences of other lengths, its logit rows are bitwise equal, for F16
and F32 K/V caches, with flash attention on and off. This is what keeps a batched speculative
verify (SpeculativeDecoder.generate_batch) lossless: a near tie of the target's logits must
break the same way as in plain greedy decoding.

The cache gives every sequence its own region starting at a multiple of SEQ_ALIGN (cell =
base + position), so the sequence's columns meet the kernels' fixed lanes, K blocks and KV
chunks at the offsets they have alone, and the other sequences' columns only add exact zeros.
Without it the sequences' cells interleave, and the float GEMM's K blocks, the tiled
flash-attention lanes and the KV chunks fold the same values in another order.

The F16 flash-attention kernel keeps ggml's one-row order for up to 64 query tokens and uses a
faster tiled order above; a ubatch whose every row is an output (a verify) is attended in
pieces of at most 64 tokens (graph.FA_ROW_ORDER_MAX_TOKENS), so its rows still equal one-token
decoding; the last two tests cover that."""
import numpy as np
import pytest

import pyggml as gg
from pyggml.llm import Context, Model, write_tiny_llama
from pyggml.llm.kv_cache import SEQ_ALIGN
from pyggml.llm.speculative import SpeculativeDecoder
from pyggml.llm.speculative.seq_batch import decode_ubatch, seq_ubatch

CACHES = {"f16": gg.F16, "f32": gg.F32}
MAX_UBATCH = 64


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = write_tiny_llama(tmp_path_factory.mktemp("seqinv") / "t.gguf", arch="qwen3",
                            qk_norm=True, n_layer=2, n_embd=64, head_dim=16, seed=3)
    return Model.load(path)


def _ctx(model, cache, flash_attn, n_ctx, **kw):
    t = CACHES[cache]
    return Context(model, n_ctx=n_ctx, type_k=t, type_v=t, flash_attn=flash_attn, **kw)


def _decode_seqs(ctx, steps):
    """One ubatch of every (seq, tokens) continuing its sequence; logit rows per step."""
    parts = [(s, ctx.n_past(s), t, None) for s, t in steps]
    ub = seq_ubatch(parts, [np.ones(len(t), bool) for _, t in steps], embd=False)
    res = decode_ubatch(ctx, ub)
    rows = np.array(res.t_logits.numpy(), np.float32).reshape(ub.n_outputs, -1)
    return np.split(rows, np.cumsum([len(t) for _, t in steps])[:-1])


def _check(model, cache, flash_attn, n_ctx, prompt_lens, rounds, seed):
    """Prompts decoded one per ubatch, then `rounds` verify-like ubatches with every sequence
    (1..6 tokens each, others idle now and then), each followed by a random rejection
    (seq_rm of a suffix). Every row of every sequence is compared with its own context."""
    rng = np.random.default_rng(seed)
    n_seq = len(prompt_lens)
    multi = _ctx(model, cache, flash_attn, n_ctx, n_seq_max=n_seq)
    alone = [_ctx(model, cache, flash_attn, n_ctx) for _ in prompt_lens]
    what = f"{cache} flash_attn={flash_attn}"
    for s, n in enumerate(prompt_lens):
        p = [int(x) for x in rng.integers(0, 250, n)]
        got = np.array(multi.decode(p, logits_all=True, seq_id=s), copy=True)
        want = np.array(alone[s].decode(p, logits_all=True), copy=True)
        assert np.array_equal(got, want), f"{what}: prompt of sequence {s}"
    n_compared = 0
    for r in range(rounds):
        steps = []
        for s in range(n_seq):
            if rng.random() < 0.2:
                continue               # this sequence sits the round out
            steps.append((s, [int(x) for x in rng.integers(0, 250, rng.integers(1, 7))]))
        if not steps:
            continue
        assert sum(len(t) for _, t in steps) <= MAX_UBATCH
        got = _decode_seqs(multi, steps)
        for (s, t), rows in zip(steps, got):
            want = np.array(alone[s].decode(t, logits_all=True), copy=True)
            assert np.array_equal(rows, want), (
                f"{what}: round {r}, sequence {s} ({len(t)} tokens from position "
                f"{alone[s].n_past(0) - len(t)}): max |diff| {np.abs(rows - want).max():.3g}")
            n_compared += len(t)
            k = int(rng.integers(0, len(t) + 1))      # reject the last k tokens
            if k:
                n = multi.n_past(s)
                assert multi.seq_rm(s, n - k, -1) and alone[s].seq_rm(0, n - k, -1)
    assert n_compared > rounds


@pytest.mark.parametrize("flash_attn", [True, False])
@pytest.mark.parametrize("cache", list(CACHES))
def test_logits_alone_equal_batched(model, cache, flash_attn):
    _check(model, cache, flash_attn, n_ctx=128, prompt_lens=(9, 5, 13), rounds=10, seed=1)


@pytest.mark.parametrize("flash_attn", [True, False])
@pytest.mark.parametrize("cache", list(CACHES))
def test_logits_alone_equal_batched_past_block_boundaries(model, cache, flash_attn):
    """Sequences that cross the 256/512 KV chunk and K block boundaries, next to a short one
    (n_kv of the shared cache well above each sequence's own)."""
    _check(model, cache, flash_attn, n_ctx=4096, prompt_lens=(7, 250, 60, 505), rounds=8, seed=2)


def test_each_sequence_has_an_aligned_region(model):
    ctx = _ctx(model, "f16", True, n_ctx=100, n_seq_max=3)
    kv = ctx.memory
    assert kv.seq_region % SEQ_ALIGN == 0 and kv.seq_region >= 100 // 3
    assert kv.size >= 3 * kv.seq_region
    _decode_seqs(ctx, [(0, [1, 2, 3]), (2, [4, 5]), (1, [6])])
    _decode_seqs(ctx, [(1, [7, 8]), (0, [9])])
    c = kv.cells
    for s, n in ((0, 4), (1, 3), (2, 2)):
        cells = np.flatnonzero(c.seq[:, s])
        assert list(cells) == [s * kv.seq_region + p for p in range(n)]
        assert list(c.pos[cells]) == list(range(n))
    # a rejected suffix frees the cells; the next tokens take the same cells again
    ctx.seq_rm(0, 2, -1)
    _decode_seqs(ctx, [(0, [11, 12, 13])])
    assert list(np.flatnonzero(c.seq[:, 0])) == [0, 1, 2, 3, 4]
    # one sequence alone keeps the plain cache (no regions, n_ctx cells)
    assert _ctx(model, "f16", True, n_ctx=100).memory.seq_region == 0


def test_shared_cells_fall_back_to_the_search(model):
    """seq_cp lets a sequence share another's cells (outside its region): its next tokens still
    find cells, and its logits match decoding the copied prefix itself."""
    ctx = _ctx(model, "f32", False, n_ctx=64, n_seq_max=2)
    ref = _ctx(model, "f32", False, n_ctx=64)
    ctx.decode([5, 6, 7], seq_id=0)
    ctx.seq_cp(0, 1)
    ref.decode([5, 6, 7])
    got = np.array(ctx.decode([8, 9], logits_all=True, seq_id=1), copy=True)
    want = np.array(ref.decode([8, 9], logits_all=True), copy=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert ctx.n_past(1) == 5 and ctx.n_past(0) == 3


@pytest.mark.parametrize("flash_attn", [True, False])
@pytest.mark.parametrize("cache", list(CACHES))
def test_batched_greedy_streams_equal_plain_greedy(model, cache, flash_attn):
    """generate_batch with prompt-lookup drafts over 3 prompts of different lengths: every
    stream is that prompt's plain greedy decoding (full, partial and zero acceptance)."""
    prompts = [[3, 9, 4, 3, 9, 4, 3, 9, 4, 3, 9],
               [7, 7, 20, 21, 7, 7, 20],
               [1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 1, 2]]
    n = 40
    want = [list(_ctx(model, cache, flash_attn, 128).generate(p, n)) for p in prompts]
    ctx = _ctx(model, cache, flash_attn, 128, n_seq_max=3)
    dec = SpeculativeDecoder(ctx, "ngram", n_max=4, adaptive=False)
    got = [list(g) for g in dec.generate_batch(prompts, n)]
    assert got == want
    assert dec.stats["n_drafted"] > 0


def test_verify_ubatch_past_64_tokens_with_f16_flash_attention(model):
    """12 sequences x 6 tokens = 72 query tokens in one verify ubatch: past the 64 up to which
    the F16 kernel keeps the one-row order, so the graph attends in pieces of at most 64."""
    n_seq = 12
    rng = np.random.default_rng(5)
    multi = _ctx(model, "f16", True, 64, n_seq_max=n_seq)
    alone = [_ctx(model, "f16", True, 64) for _ in range(n_seq)]
    for s in range(n_seq):
        p = [int(x) for x in rng.integers(0, 250, 5 + s)]
        multi.decode(p, seq_id=s)
        alone[s].decode(p)
    steps = [(s, [int(x) for x in rng.integers(0, 250, 6)]) for s in range(n_seq)]
    got = _decode_seqs(multi, steps)
    for (s, t), rows in zip(steps, got):
        assert np.array_equal(rows, np.array(alone[s].decode(t, logits_all=True), copy=True))


@pytest.mark.parametrize("cache", ["f16", "f32"])
def test_wide_ubatch_with_every_row_an_output_equals_one_token_decoding(model, cache):
    """One sequence, 150 tokens in one ubatch with every row an output (a long verify): each
    row equals that token decoded alone after the ones before it, across the 64-token pieces
    and the 256-cell boundary."""
    rng = np.random.default_rng(11)
    prefix = [int(x) for x in rng.integers(0, 250, 120)]
    toks = [int(x) for x in rng.integers(0, 250, 150)]
    wide = _ctx(model, cache, True, 512)
    step = _ctx(model, cache, True, 512)
    wide.decode(prefix)
    step.decode(prefix)
    got = np.array(wide.decode(toks, logits_all=True), copy=True)
    assert got.shape[0] == len(toks)
    for i, t in enumerate(toks):
        want = np.array(step.decode([t]), copy=True).reshape(-1)
        assert np.array_equal(got[i], want), f"{cache}: row {i} of the wide ubatch"
