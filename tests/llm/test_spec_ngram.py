"""The n-gram drafter's proposals against a plain-Python reference written here (loops over
lists, no numpy), on hand-built and random histories, and the committed stream of every
lookup mode against plain greedy decoding."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyggml.llm import Context, Model, write_tiny_llama
from pyggml.llm.speculative import SpeculativeDecoder
from pyggml.llm.speculative.ngram import (MATCH_CAP, SUB_WINDOW, NgramDrafter,
                                          longest_match_draft)


def ref_longest(seq, n_max, ngram_min=2, substitute=True):
    """The "longest" rule, spelled out token by token."""
    L = len(seq)
    best_e, best_k = None, -1
    for e in range(ngram_min, L):               # continuation start after a key occurrence
        if seq[e - ngram_min:e] != seq[L - ngram_min:]:
            continue
        m = 0
        while m < MATCH_CAP and e - m - 1 >= 0 and seq[e - m - 1] == seq[L - m - 1]:
            m += 1
        k = min(m, L - e)                        # no better than what follows it
        if k >= best_k:                          # ">=": the later place wins a tie
            best_e, best_k = e, k
    if best_e is not None:
        return seq[best_e:best_e + min(n_max, best_k)]
    if not substitute or L <= SUB_WINDOW:
        return []
    best_e, best_d = None, 2
    for e in range(SUB_WINDOW, L):
        d = sum(1 for j in range(1, SUB_WINDOW + 1) if seq[e - j] != seq[L - j])
        if d <= best_d and d <= 1:
            best_e, best_d = e, d
    return [] if best_e is None else seq[best_e:best_e + n_max]


def ref_recent(seq, n_max, ngram_max, ngram_min):
    L = len(seq)
    for N in range(min(ngram_max, L - 1), ngram_min - 1, -1):
        for i in range(L - N - 1, -1, -1):
            if seq[i:i + N] == seq[L - N:]:
                return seq[i + N:i + N + n_max]
    return []


def drafter_proposal(history, n_max, **opt):
    """Feed a history through NgramDrafter as the decoder would: the last token is id_last."""
    d = NgramDrafter(None, **opt)
    d.process(np.array(history[:-1], np.int32), 0, {})
    return d.draft(history[-1], len(history) - 1, n_max).ids


def test_hand_built_histories():
    # [1, 2] occurs twice; the earlier place also matches the 9 before it: it wins
    h = [9, 1, 2, 3, 4, 5, 0, 1, 2, 7, 7, 9, 1, 2]
    assert drafter_proposal(h, 4) == [3, 4, 5]          # match 3 long: at most 3 drafted
    assert drafter_proposal(h, 2) == [3, 4]
    # the recent rule: the longest key that occurs ([9, 1, 2] with ngram_max 3), else the
    # most recent [1, 2]; n_max tokens either way
    assert drafter_proposal(h, 4, lookup="recent") == [3, 4, 5, 0]
    assert drafter_proposal(h, 4, lookup="recent", ngram_max=2) == [7, 7, 9, 1]
    # a tie in match length: the most recent place
    h = [7, 1, 2, 5, 6, 8, 1, 2, 9, 6, 1, 2]
    assert drafter_proposal(h, 4) == [9, 6]
    # the match reaches the start of the history (6 tokens): at most 6 drafted
    h = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 3, 1, 4, 1, 5, 9]
    assert drafter_proposal(h, 8) == [2, 6, 5, 3, 5, 8]
    assert drafter_proposal(h, 3) == [2, 6, 5]
    # no exact [x, 21]: one substitution (20 -> 21) keeps copying after it
    h = [40, 10, 11, 12, 13, 14, 15, 16, 20, 30, 31, 32, 50, 10, 11, 12, 13, 14, 15, 16, 21]
    assert drafter_proposal(h, 3) == [30, 31, 32]
    assert drafter_proposal(h, 3, substitute=False) == []
    # two substitutions: nothing
    h = [10, 11, 12, 13, 14, 15, 16, 20, 30, 31, 50, 10, 11, 12, 13, 14, 15, 17, 21]
    assert drafter_proposal(h, 3) == []
    # nothing to copy, and too short histories
    assert drafter_proposal([1, 2, 3, 4, 5, 6], 4) == []
    assert drafter_proposal([7], 4) == [] and drafter_proposal([7, 7], 4) == []


def test_match_cap_bounds_the_measured_match():
    # a long periodic history: many places match beyond MATCH_CAP; the most recent ones
    # have fewer tokens after them than they match, and count as that many
    h = [1, 2, 3] * 40
    assert drafter_proposal(h, 5) == ref_longest(h, 5) == [1, 2, 3, 1, 2]
    d = NgramDrafter(None)
    d.process(np.array(h[:-1], np.int32), 0, {})
    seq = np.asarray(h, np.int64)
    from pyggml.llm.speculative.ngram import match_lengths
    assert match_lengths(seq, np.array([len(h) - 3, 100]))[0] == MATCH_CAP


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=90), st.integers(1, 9),
       st.integers(1, 3), st.booleans())
def test_longest_matches_reference(hist, n_max, ngram_min, substitute):
    got = longest_match_draft(np.asarray(hist, np.int64), n_max, ngram_min, substitute)
    assert got == ref_longest(hist, n_max, ngram_min, substitute)


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.integers(0, 12), min_size=9, max_size=60), st.integers(1, 6))
def test_substitution_rule_matches_reference(hist, n_max):
    # a vocabulary of 13 rarely repeats a pair exactly: the fallback is exercised
    got = longest_match_draft(np.asarray(hist, np.int64), n_max, 2, True)
    assert got == ref_longest(hist, n_max, 2, True)


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=60), st.integers(1, 6),
       st.integers(1, 4), st.integers(1, 4))
def test_recent_matches_reference(hist, n_max, a, b):
    lo, hi = min(a, b), max(a, b)
    got = drafter_proposal(hist, n_max, lookup="recent", ngram_max=hi, ngram_min=lo)
    assert got == ref_recent(hist, n_max, hi, lo)


def test_history_buffer_through_process_and_accept():
    # a long prompt (the buffer grows), then verify batches with partial acceptance: the
    # drafter's history is what a list of the committed tokens holds
    rng = np.random.default_rng(5)
    hist = [int(t) for t in rng.integers(0, 6, 600)]
    d = NgramDrafter(None)
    d.process(np.array(hist, np.int32), 0, {})
    for step in range(30):
        pos0 = len(hist)
        id_last = int(rng.integers(0, 6))
        want = ref_longest(hist + [id_last], 5)
        assert d.draft(id_last, pos0, 5).ids == want
        batch = [id_last] + [int(t) for t in rng.integers(0, 6, int(rng.integers(0, 5)))]
        d.process(np.array(batch, np.int32), pos0, {})
        n_acc = int(rng.integers(0, len(batch)))
        d.accept(n_acc)
        hist = hist + batch[:n_acc + 1]
        assert d.history == hist
    d.reset()
    assert d.history == []


def test_positions_never_seen_match_nothing():
    # the target held 5 positions before the drafter saw any: the lookup only copies from
    # what it was shown, and the unseen stretch is no match for anything
    d = NgramDrafter(None)
    d.process(np.array([4, 1, 2, 3, 1], np.int32), 5, {})
    assert d.draft(2, 10, 4).ids == [3, 1]
    assert d.history[:5] == [-1, -2, -3, -4, -5]
    d = NgramDrafter(None)
    d.process(np.array([8], np.int32), 3, {})
    assert d.draft(9, 4, 4).ids == []         # -4, 8, 9 ... nothing seen twice


def test_bad_options():
    with pytest.raises(ValueError, match="lookup='nearest'"):
        NgramDrafter(None, lookup="nearest")
    with pytest.raises(ValueError, match="substitute=1"):
        NgramDrafter(None, substitute=1)


# ---- losslessness: the committed stream is plain greedy for every mode --------------------

PROMPT = [5, 9, 14, 27, 9, 14, 33, 60, 5, 9, 14, 71, 88, 3, 40, 41, 42, 5, 9, 14, 27, 9]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    m = Model.load(write_tiny_llama(tmp_path_factory.mktemp("ngram") / "t.gguf", seed=7))
    ctx = Context(m, n_ctx=160)
    return m, ctx


FAST = settings(max_examples=8, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FAST
@given(st.lists(st.integers(0, 40), min_size=4, max_size=40), st.integers(1, 8),
       st.sampled_from(["longest", "recent"]), st.booleans(),
       st.sampled_from([True, False, "cost"]), st.integers(1, 3))
def test_every_lookup_mode_is_lossless(tiny, body, n_max, lookup, substitute, adaptive,
                                       ngram_min):
    m, ctx = tiny
    # a prompt that repeats itself with one edit, so that every rule finds something
    prompt = body + [99] + body[:-1] + [100] + body
    ctx.reset()
    ref = list(ctx.generate(prompt, 40))
    dec = SpeculativeDecoder(ctx, "ngram", n_max=n_max, lookup=lookup, substitute=substitute,
                             adaptive=adaptive, ngram_min=ngram_min,
                             ngram_max=max(3, ngram_min))
    dec.reset()
    out = dec.generate(prompt, 40)
    assert list(out) == ref
    # the first step drafts whenever the reference rule finds a place (its budget is n_max)
    first = prompt + ref[:1]
    if lookup == "recent":
        found = ref_recent(first, n_max, max(3, ngram_min), ngram_min)
    else:
        found = ref_longest(first, n_max, ngram_min, substitute)
    assert (dec.stats["n_verify_steps"] > 0) or not found
    if found:
        assert dec.stats["steps"][0]["draft"] == found


def test_default_drafts_on_a_self_copying_stream(tiny):
    # the tiny model's greedy stream is itself repetitive after this prompt: drafting finds
    # matches, some accepted, and the stream stays greedy's
    m, ctx = tiny
    ctx.reset()
    ref = list(ctx.generate(PROMPT, 60))
    dec = SpeculativeDecoder(ctx, "ngram", n_max=8)
    dec.reset()
    assert list(dec.generate(PROMPT, 60)) == ref
    assert dec.stats["n_drafted"] > 0
