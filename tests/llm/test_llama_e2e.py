"""End to end: pyggml.llm logits for a tiny LLaMA against the float64 numpy forward in
llama_ref.py (GQA; Qwen2-style biases; Qwen3-style QK-norm; tied embeddings), on the flash
and the non-flash paths, full prompt vs incremental decode, graph reuse on and off."""
import numpy as np
import pytest

import pyggml as gg
from llama_ref import ArrayModel, forward, make_hparams, make_weights
from util import assert_close

from pyggml.llm import Context

# F16 K/V cache rounding bounds the agreement (relative ~5e-4 per element)
NMSE = 1e-5

VARIANTS = {
    "llama_gqa": dict(hp=dict(arch="llama", n_head=4, n_head_kv=2), w=dict()),
    "qwen2_bias_tied": dict(hp=dict(arch="qwen2", n_head=4, n_head_kv=1), w=dict(bias=True, tied=True)),
    "qwen3_qknorm": dict(hp=dict(arch="qwen3", n_head=4, n_head_kv=2, head_dim=24),
                         w=dict(qk_norm=True)),
}


def build(name, seed=0):
    v = VARIANTS[name]
    hp = make_hparams(**v["hp"])
    w = make_weights(hp, seed=seed, **v["w"])
    return hp, w, ArrayModel(hp, w)


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
@pytest.mark.parametrize("name", list(VARIANTS))
def test_prompt_logits_match_reference(name, flash_attn):
    hp, w, model = build(name)
    toks = np.random.default_rng(1).integers(0, hp.n_vocab, size=13)
    ref = forward(hp, w, toks)
    ctx = Context(model, n_ctx=64, n_threads=2, flash_attn=flash_attn)
    got = ctx.decode(toks, logits_all=True)
    assert got.shape == (13, hp.n_vocab) and got.dtype == np.float32
    assert_close(got, ref, NMSE, f"{name} fa={flash_attn}")
    last = Context(model, n_ctx=64, flash_attn=flash_attn).decode(toks)
    assert last.shape == (1, hp.n_vocab)
    assert_close(last, ref[-1:], NMSE, "last row only")


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_incremental_decode_equals_full_prompt(flash_attn):
    hp, w, model = build("llama_gqa", seed=3)
    toks = np.random.default_rng(2).integers(0, hp.n_vocab, size=20)
    ref = forward(hp, w, toks)
    full = Context(model, n_ctx=64, flash_attn=flash_attn).decode(toks, logits_all=True)
    ctx = Context(model, n_ctx=64, flash_attn=flash_attn)
    rows = [ctx.decode(toks[:7], logits_all=True)]
    rows += [ctx.decode(toks[i:i + 1]) for i in range(7, 12)]
    rows.append(ctx.decode(toks[12:], logits_all=True))
    inc = np.concatenate(rows)
    # flash attention rounds Q and its V accumulator to F16 (as ggml's CPU kernel does): the
    # last-bit differences between 1-column and many-column f32 matmuls can become one F16 step
    assert_close(inc, full, 1e-7 if flash_attn else 1e-9, "incremental vs full")
    assert_close(inc, ref, NMSE, "incremental vs reference")
    assert ctx.timings["n_graph_reuse"] >= 3  # the 1-token steps share one graph


def test_ubatch_split_and_graph_reuse_off_give_the_same_logits():
    hp, w, model = build("qwen3_qknorm")
    toks = np.random.default_rng(5).integers(0, hp.n_vocab, size=17)
    ref = forward(hp, w, toks)
    a = Context(model, n_ctx=64, n_ubatch=5).decode(toks, logits_all=True)
    assert_close(a, ref, NMSE, "ubatch 5")
    b = Context(model, n_ctx=64, n_ubatch=5, graph_reuse=False).decode(toks, logits_all=True)
    np.testing.assert_array_equal(a, b)


def test_generate_greedy_matches_reference_argmax():
    hp, w, model = build("llama_gqa", seed=7)
    prompt = [5, 17, 3, 42]
    ctx = Context(model, n_ctx=64)
    out = ctx.generate(prompt, 8)
    seq = list(prompt)
    for _ in range(8):
        seq.append(int(np.argmax(forward(hp, w, seq)[-1])))
    assert out == seq[len(prompt):]
    assert ctx.n_past() == len(prompt) + 7   # the last id is not decoded yet


def test_kv_seq_rm_then_redecode_matches():
    hp, w, model = build("llama_gqa", seed=9)
    toks = np.random.default_rng(4).integers(0, hp.n_vocab, size=10)
    ctx = Context(model, n_ctx=64, flash_attn=False)
    ctx.decode(toks)
    assert ctx.seq_rm(0, 6, -1)                         # roll back to 6 tokens
    got = ctx.decode(toks[6:], logits_all=True)
    ref = forward(hp, w, toks)[6:]
    assert_close(got, ref, NMSE, "after seq_rm")


def test_errors_are_value_errors_with_clear_messages():
    hp, w, model = build("llama_gqa")
    ctx = Context(model, n_ctx=16)
    with pytest.raises(ValueError, match="out of range"):
        ctx.decode([1, hp.n_vocab])
    with pytest.raises(ValueError, match="out of range"):
        ctx.decode([-1])
    with pytest.raises(ValueError, match="empty batch"):
        ctx.decode([])
    ctx.decode(list(range(10)))
    with pytest.raises(ValueError, match="n_ctx is 16"):
        ctx.decode(list(range(7)))
    ctx.decode(list(range(6)))                        # still usable, exactly full now
    assert ctx.n_past() == 16


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_seq_add_k_shift_matches_a_fresh_forward(flash_attn):
    # one layer: cached K/V depend only on (token, position), so after removing tokens and
    # shifting the rest down, the cache must equal a fresh decode of the shortened sequence
    hp = make_hparams(arch="llama", n_layer=1)
    w = make_weights(hp, seed=13)
    model = ArrayModel(hp, w)
    toks = list(np.random.default_rng(8).integers(0, hp.n_vocab, size=12))
    ctx = Context(model, n_ctx=64, flash_attn=flash_attn)
    ctx.decode(toks)
    assert ctx.seq_rm(0, 3, 6)                          # drop positions 3, 4, 5
    ctx.seq_add(0, 6, -1, -3)                      # 6..11 -> 3..8
    assert ctx.n_past() == 9
    nxt = [7, 9]
    got = ctx.decode(nxt, logits_all=True)
    kept = toks[:3] + toks[6:] + nxt
    assert_close(got, forward(hp, w, kept)[-2:], NMSE, "after K shift")


def test_two_sequences_share_one_cache_without_interference():
    hp, w, model = build("llama_gqa", seed=21)
    rng = np.random.default_rng(6)
    a, b = list(rng.integers(0, hp.n_vocab, size=9)), list(rng.integers(0, hp.n_vocab, size=6))
    ctx = Context(model, n_ctx=64, n_seq_max=2, flash_attn=False)
    ctx.decode(a[:5], seq_id=0)
    ctx.decode(b[:4], seq_id=1)
    ctx.decode(a[5:8], seq_id=0)
    got_b = ctx.decode(b[4:], seq_id=1, logits_all=True)
    got_a = ctx.decode(a[8:], seq_id=0)
    assert_close(got_a, forward(hp, w, a)[-1:], NMSE, "seq 0")
    assert_close(got_b, forward(hp, w, b)[4:], NMSE, "seq 1")
    ctx.seq_cp(0, 1)                               # seq 1 now also sees seq 0's cells...
    ctx.seq_keep(0)                                # ...then only seq 0 remains
    assert ctx.n_past(1) == 0 and ctx.n_past(0) == 9
