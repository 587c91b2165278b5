"""Context options and sequence calls over the memory interface, for the unified cache and
the iSWA pair: several sequences in one context equal independent runs, decode/seq_rm/decode
equals the shorter decode, F32 caches, named outputs, generation stopping at n_ctx, and the
errors of bad ids. References: the float64 numpy forward in llama_ref.py and independent
contexts."""
import numpy as np
import pytest

import pyggml as gg
from llama_ref import ArrayModel, forward, make_hparams, make_weights
from util import assert_close, nmse

from pyggml.llm import Context
from pyggml.llm.kv_cache import KVCache
from pyggml.llm.kv_cache_iswa import KVCacheISWA

NMSE = 1e-5

MEMORIES = {
    "unified": dict(n_layer=2),
    "iswa": dict(n_layer=3, n_swa=5, swa_layers=[True, False, True]),
}


def build(kind, seed=0):
    hp = make_hparams(arch="llama", n_head=4, n_head_kv=2, **MEMORIES[kind])
    w = make_weights(hp, seed=seed)
    return hp, w, ArrayModel(hp, w)


def test_iswa_memory_is_chosen_and_sized():
    hp, _, model = build("iswa")
    ctx = Context(model, n_ctx=600, n_ubatch=32)
    mem = ctx.memory
    assert isinstance(mem, KVCacheISWA)
    assert mem.base.layers == [1] and mem.swa.layers == [0, 2]
    assert mem.base.size == 768 and mem.swa.size == 256           # pad256(5 + 32)
    assert isinstance(Context(build("unified")[2], n_ctx=64).memory, KVCache)


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_iswa_matches_the_windowed_reference(flash_attn):
    hp, w, model = build("iswa", seed=2)
    toks = np.random.default_rng(1).integers(0, hp.n_vocab, size=23)
    ref = forward(hp, w, toks)
    ctx = Context(model, n_ctx=64, flash_attn=flash_attn, n_ubatch=7)
    got = ctx.decode(toks, logits_all=True)
    assert_close(got, ref, NMSE, "iswa prompt")
    # the window matters: without it the reference differs
    full = forward(make_hparams(arch="llama", n_head=4, n_head_kv=2, n_layer=3), w, toks)
    assert nmse(full, ref) > 1e-3


def test_iswa_window_cache_reuses_cells_over_a_long_sequence():
    hp, w, model = build("iswa", seed=4)
    toks = np.random.default_rng(3).integers(0, hp.n_vocab, size=300)
    ctx = Context(model, n_ctx=320, flash_attn=False, n_ubatch=32)
    assert ctx.memory.swa.size == 256 < 300
    rows = [ctx.decode(toks[:290], logits_all=True)]
    rows += [ctx.decode(toks[i:i + 1]) for i in range(290, 300)]
    ref = forward(hp, w, toks)
    assert_close(np.concatenate(rows), ref, NMSE, "long iswa")


@pytest.mark.parametrize("kind", list(MEMORIES))
@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_several_sequences_equal_independent_runs(kind, flash_attn):
    hp, w, model = build(kind, seed=5)
    rng = np.random.default_rng(7)
    seqs = [list(rng.integers(0, hp.n_vocab, size=n)) for n in (11, 7, 15)]
    shared = Context(model, n_ctx=64, n_seq_max=3, flash_attn=flash_attn, n_ubatch=4)
    got = {s: [] for s in range(3)}
    cut = [0, 0, 0]
    for step in ([5, 3, 6], [2, 4, 1], [4, 0, 8]):   # interleaved chunks per sequence
        for s, n in enumerate(step):
            if n:
                got[s].append(shared.decode(seqs[s][cut[s]:cut[s] + n], seq_id=s, logits_all=True))
                cut[s] += n
    for s in range(3):
        alone = Context(model, n_ctx=64, flash_attn=flash_attn, n_ubatch=4)
        ref = alone.decode(seqs[s][:cut[s]], logits_all=True)
        assert_close(np.concatenate(got[s]), ref, 1e-9, f"sequence {s}")
        assert shared.n_past(s) == cut[s]


@pytest.mark.parametrize("kind", list(MEMORIES))
def test_decode_seq_rm_decode_equals_the_shorter_decode(kind):
    hp, w, model = build(kind, seed=8)
    toks = list(np.random.default_rng(9).integers(0, hp.n_vocab, size=16))
    other = list(np.random.default_rng(10).integers(0, hp.n_vocab, size=5))
    ctx = Context(model, n_ctx=64, flash_attn=False, n_seq_max=2)
    ctx.decode(toks, seq_id=0)
    ctx.decode(other, seq_id=1)
    assert ctx.seq_rm(0, 9, -1) is True
    assert ctx.n_past(0) == 9 and ctx.n_past(1) == 5
    got = ctx.decode([3, 4], logits_all=True)
    short = Context(model, n_ctx=64, flash_attn=False).decode(toks[:9] + [3, 4], logits_all=True)
    assert_close(got, short[-2:], 1e-9, "after seq_rm")
    assert_close(ctx.decode([6], seq_id=1),
                 Context(model, n_ctx=64, flash_attn=False).decode(other + [6]), 1e-9, "untouched seq")
    assert ctx.seq_rm(-1, -1, -1) and ctx.n_past(0) == 0 and ctx.n_past(1) == 0


def test_seq_cp_and_seq_keep():
    hp, w, model = build("unified", seed=11)
    toks = list(np.random.default_rng(12).integers(0, hp.n_vocab, size=8))
    ctx = Context(model, n_ctx=64, n_seq_max=2, flash_attn=False)
    ctx.decode(toks[:6])
    ctx.seq_cp(0, 1)                                   # seq 1 continues from seq 0's prefix
    got1 = ctx.decode(toks[6:], seq_id=1, logits_all=True)
    assert_close(got1, forward(hp, w, toks)[6:], NMSE, "copied prefix")
    ctx.seq_keep(1)
    assert ctx.n_past(0) == 0 and ctx.n_past(1) == 8


def test_f32_caches_are_exact_without_flash_attention():
    hp, w, model = build("unified", seed=13)
    toks = np.random.default_rng(14).integers(0, hp.n_vocab, size=12)
    ref = forward(hp, w, toks)
    f32 = Context(model, n_ctx=64, flash_attn=False, type_k=gg.F32, type_v=gg.F32)
    f16 = Context(model, n_ctx=64, flash_attn=False)
    assert f32.memory.type_k == gg.F32 and f16.memory.type_k == gg.F16
    e32 = nmse(ref, f32.decode(toks, logits_all=True))
    e16 = nmse(ref, f16.decode(toks, logits_all=True))
    assert e32 < 1e-10 and e32 < e16


def test_named_outputs_are_kept_and_match_the_reference():
    hp, w, model = build("unified", seed=15)
    toks = np.random.default_rng(16).integers(0, hp.n_vocab, size=9)
    outs = []
    forward(hp, w, toks, layer_outs=outs)
    ctx = Context(model, n_ctx=64, outputs=("l_out-0", "attn_norm-1"))
    ctx.decode(toks)
    assert_close(ctx.output("l_out-0").reshape(9, -1), outs[0], NMSE, "l_out-0")
    assert ctx.output("attn_norm-1").shape[-1] == hp.n_embd
    with pytest.raises(KeyError, match="not kept"):
        ctx.output("l_out-1")
    res = ctx._last
    assert res.get("l_out-1").ne[:2] == [hp.n_embd, 1]    # last layer: output rows only
    with pytest.raises(KeyError, match="similar: l_out-0"):
        res.get("l_out-7")


def test_decode_rejects_text_and_bad_ids():
    _, _, model = build("unified")
    ctx = Context(model, n_ctx=16)
    with pytest.raises(TypeError, match="token ids"):
        ctx.decode("hello")
    with pytest.raises(TypeError, match="token ids"):
        ctx.decode(b"hi")
    with pytest.raises(TypeError, match="token ids"):
        ctx.decode([object()])
    with pytest.raises(ValueError, match="seq_id 1 out of range"):
        ctx.decode([1], seq_id=1)
    with pytest.raises(ValueError, match="n_seq_max"):
        Context(model, n_seq_max=0)


def test_generate_stops_at_n_ctx_and_keeps_what_it_made():
    hp, w, model = build("unified", seed=17)
    ctx = Context(model, n_ctx=12)
    out = ctx.generate([1, 2, 3, 4], 20)
    assert out.stop_reason == "n_ctx" and out.truncated
    assert len(out) == 9 and ctx.n_past() == 12                  # 4 prompt + 8 decoded + 1 pending
    seq = [1, 2, 3, 4]
    for _ in range(len(out)):
        seq.append(int(np.argmax(forward(hp, w, seq)[-1])))
    assert list(out) == seq[4:]
    full = Context(model, n_ctx=64).generate([1, 2, 3, 4], 5)
    assert full.stop_reason == "n" and not full.truncated and list(full) == seq[4:9]
    assert ctx.last_timings["stop_reason"] == "n_ctx"
