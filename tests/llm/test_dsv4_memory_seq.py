"""The DeepSeek V4 memory's sequence edits beyond seq_rm: whole-sequence seq_cp (several
sequences decoded after a copy equal independent runs, also right after a pending rollback
and over a sequence that held other tokens), the refusal of partial copies under llama.cpp's
condition (p0 <= 0 and p1 < 0) and of position shifts (seq_add; llama.cpp reports
can_shift = false), each leaving the memory unchanged."""
import numpy as np
import pytest

import pyggml as gg
from util import assert_close

from pyggml.llm import Context, Model
from pyggml.llm.tiny import write_tiny_deepseek4


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return Model.load(write_tiny_deepseek4(tmp_path_factory.mktemp("dsv4seq") / "m.gguf", seed=0))


def toks(n, seed):
    return [int(t) for t in np.random.default_rng(seed).integers(3, 256, size=n)]


def f32_ctx(model, **kw):
    return Context(model, n_ctx=512, flash_attn=False, type_k=gg.F32, type_v=gg.F32, **kw)


def fresh(model, ids):
    return f32_ctx(model).decode(ids, logits_all=True)


def test_seq_cp_then_both_sequences_decode_like_independent_runs(model):
    # 262 positions: CSA blocks, one complete HCA block and a partial one are copied
    pre, a, b = toks(262, 1), toks(5, 2), toks(3, 3)
    ctx = f32_ctx(model, n_seq_max=3)
    ctx.decode(toks(30, 4), seq_id=1)            # dst held other tokens: they are replaced
    ctx.decode(pre)
    ctx.seq_cp(0, 1)
    assert ctx.n_past(1) == 262
    got_b = ctx.decode(b, seq_id=1, logits_all=True)
    got_a = ctx.decode(a, seq_id=0, logits_all=True)
    assert_close(got_a, fresh(model, pre + a)[-5:], 1e-10, "source after the copy")
    assert_close(got_b, fresh(model, pre + b)[-3:], 1e-10, "copy")
    ctx.seq_cp(1, 2, 0, -1)                     # p0 = 0 is the whole sequence too
    assert_close(ctx.decode([9], seq_id=2), fresh(model, pre + b + [9])[-1:], 1e-10, "copy of the copy")


def test_seq_cp_after_a_pending_rollback(model):
    pre, tail = toks(131, 5), toks(4, 6)
    ctx = f32_ctx(model, n_seq_max=2, n_rs_seq=3)
    ctx.decode(pre)
    assert ctx.seq_rm(0, 128, -1)               # roll back across the HCA block end at 127
    ctx.seq_cp(0, 1)
    want = fresh(model, pre[:128] + tail)[-4:]
    assert_close(ctx.decode(tail, seq_id=1, logits_all=True), want, 1e-10, "copy")
    assert_close(ctx.decode(tail, seq_id=0, logits_all=True), want, 1e-10, "source")


@pytest.mark.parametrize("p0,p1", [(10, -1), (0, 20), (-1, 0), (5, 100), (-1, 10 ** 6)])
def test_partial_seq_cp_is_refused_and_changes_nothing(model, p0, p1):
    pre = toks(40, 7)
    ctx = f32_ctx(model, n_seq_max=2)
    ctx.decode(pre)
    ctx.decode(toks(6, 8), seq_id=1)
    with pytest.raises(ValueError, match=r"seq_cp copies whole sequences only .*p0 <= 0 and p1 < 0"):
        ctx.seq_cp(0, 1, p0, p1)
    assert ctx.n_past(1) == 6
    assert_close(ctx.decode([5], seq_id=1), fresh(model, toks(6, 8) + [5])[-1:], 1e-10, "dst")
    assert_close(ctx.decode([5]), fresh(model, pre + [5])[-1:], 1e-10, "src")


def test_seq_add_shifts_are_refused_zero_or_empty_ones_accepted(model):
    pre = toks(50, 9)
    ctx = f32_ctx(model, n_seq_max=2)
    ctx.decode(pre)
    ctx.seq_add(0, 0, -1, 0)                    # nothing to shift
    ctx.seq_add(0, 10, 10, 5)                   # empty range
    ctx.seq_add(0, 60, -1, -3)                  # no position in range
    ctx.seq_add(1, 0, -1, 4)                    # empty sequence
    for args in [(0, 0, -1, 3), (0, 40, -1, -2), (0, 10, 20, 1)]:
        with pytest.raises(ValueError, match="seq_add cannot shift positions.*K-shift is not supported"):
            ctx.seq_add(*args)
    assert ctx.n_past(0) == 50
    assert_close(ctx.decode([4, 5], logits_all=True), fresh(model, pre + [4, 5])[-2:], 1e-10, "unchanged")
