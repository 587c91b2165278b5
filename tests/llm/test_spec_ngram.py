"""The n-gram drafter's proposals against a plain-Python reference written here (loops over
lists, no numpy), on hand-built and random histories, and the committed stream of every
lookup mode against plain greedy decoding."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyggml.llm import Context, Model, write_tiny_llama
from pyggml.llm.speculative import SpeculativeDecoder
from pyggml.llm.speculative.ngram import (LONG_MATCH, MATCH_CAP, SUB_PROBE, SUB_WINDOW,
                                          WAKE_MATCH, NgramDrafter, PyNgramHistory,
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


def ref_place(seq, ngram_min=2, substitute=True):
    """("exact", e, k) of the "longest" rule, ("sub", e, 0) of its fallback, or None."""
    L = len(seq)
    best_e, best_k = None, -1
    for e in range(ngram_min, L):
        if seq[e - ngram_min:e] != seq[L - ngram_min:]:
            continue
        m = 0
        while m < MATCH_CAP and e - m - 1 >= 0 and seq[e - m - 1] == seq[L - m - 1]:
            m += 1
        if min(m, L - e) >= best_k:
            best_e, best_k = e, min(m, L - e)
    if best_e is not None:
        return "exact", best_e, best_k
    if not substitute or L <= SUB_WINDOW:
        return None
    best = None
    for e in range(SUB_WINDOW, L):
        if sum(1 for j in range(1, SUB_WINDOW + 1) if seq[e - j] != seq[L - j]) <= 1:
            best = e
    return None if best is None else ("sub", best, 0)


class RefDrafter:
    """The drafter's length rules over ref_place, spelled out: an exact match of k tokens
    drafts min(k, hint) tokens, or min(k, n_max) when k >= LONG_MATCH; a substitution place
    drafts hint tokens, SUB_PROBE when a hint is given, the replaced token is the last one
    and that replacement was never accepted before (accepted in full, it is learned; a substitution
    elsewhere in the window is learned when one of its tokens is accepted)."""

    def __init__(self, ngram_min=2, substitute=True):
        self.ngram_min, self.substitute = ngram_min, substitute
        self.renames, self.pending = set(), None

    def draft(self, seq, n_max, hint):
        self.pending = None
        probing = bool(hint)
        hint = min(hint or n_max, n_max)
        place = ref_place(seq, self.ngram_min, self.substitute)
        if place is None:
            return []
        kind, e, k = place
        if kind == "exact":
            return seq[e:e + min(n_max if k >= LONG_MATCH else hint, k)]
        L = len(seq)
        diffs = [j for j in range(1, SUB_WINDOW + 1) if seq[e - j] != seq[L - j]]
        if diffs:
            j = diffs[0]
            pair = (seq[e - j], seq[L - j])
            if j == 1 and probing and pair not in self.renames:
                hint = min(hint, SUB_PROBE)
            self.pending = (pair, len(seq[e:e + hint]) if j == 1 else 1)
        return seq[e:e + hint]

    def accept(self, n_acc):
        if self.pending is not None and n_acc >= self.pending[1]:
            self.renames.add(self.pending[0])
        self.pending = None


def ref_recent(seq, n_max, ngram_max, ngram_min):
    L = len(seq)
    for N in range(min(ngram_max, L - 1), ngram_min - 1, -1):
        for i in range(L - N - 1, -1, -1):
            if seq[i:i + N] == seq[L - N:]:
                return seq[i + N:i + N + n_max]
    return []


def drafter_proposal(history, n_max, hint=0, **opt):
    """Feed a history through NgramDrafter as the decoder would: the last token is id_last
    (hint: the decoder's back-off length, 0 without the adaptive length)."""
    d = NgramDrafter(None, **opt)
    d.length_hint = hint
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
    # no exact [x, 21]: one substitution (20 -> 21) keeps copying after it; 21 is the last
    # token, so with the adaptive length an unknown replacement drafts a probe of SUB_PROBE
    h = [40, 10, 11, 12, 13, 14, 15, 16, 20, 30, 31, 32, 50, 10, 11, 12, 13, 14, 15, 16, 21]
    assert longest_match_draft(np.asarray(h), 3) == [30, 31, 32]
    assert drafter_proposal(h, 3) == [30, 31, 32]
    assert drafter_proposal(h, 3, hint=3) == [30, 31, 32][:SUB_PROBE]
    assert drafter_proposal(h, 3, substitute=False) == []
    # the replaced token inside the window: no probe
    h = [40, 10, 11, 12, 13, 14, 15, 20, 16, 30, 31, 32, 50, 10, 11, 12, 13, 14, 15, 21, 16]
    assert drafter_proposal(h, 3, hint=3) == [30, 31, 32]
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


def test_a_rename_accepted_once_is_trusted():
    # 20 -> 21 probed (SUB_PROBE tokens), accepted in full: the next place where 21 replaces
    # 20 drafts the whole budget; a rejected probe teaches nothing
    src = [10, 11, 12, 13, 14, 15, 16, 20, 30, 31, 32, 33, 34, 35]
    for n_acc, learned in ((SUB_PROBE, True), (SUB_PROBE - 1, False)):
        d = NgramDrafter(None)
        d.length_hint = 5
        d.process(np.array(src + [50] + src[:7], np.int32), 0, {})
        pos0 = len(src) + 8
        assert d.draft(21, pos0, 5).ids == [30, 31, 32, 33, 34][:SUB_PROBE]
        d.process(np.array([21, 30, 31], np.int32), pos0, {})
        d.accept(n_acc)
        assert ((20, 21) in d._renames) == learned
    # after it was learned: a second copy of the source, 21 for 20 again
    d = NgramDrafter(None)
    d.length_hint = 5
    d._renames.add((20, 21))
    d.process(np.array(src + [50] + src[:7], np.int32), 0, {})
    assert d.draft(21, len(src) + 8, 5).ids == [30, 31, 32, 33, 34]


def test_a_declined_probe_teaches_nothing():
    # after an ask whose draft verified nothing the decoder calls no accept() for an
    # absorbing drafter (Drafter.absorb): a probe drafted then (20 -> 21) and declined is
    # forgotten at the next draft, so a later accepted draft does not teach its rename
    src = [10, 11, 12, 13, 14, 15, 16, 20, 30, 31, 32, 33, 34, 35]
    d = NgramDrafter(None)
    d.length_hint = 5
    d.process(np.array(src + [50] + src[:7], np.int32), 0, {})
    pos0 = len(src) + 8
    assert d.draft(21, pos0, 5).ids == [30, 31, 32, 33, 34][:SUB_PROBE]   # declined
    d.absorb(40, pos0 + 1)                     # a plain round's token
    assert d.draft(41, pos0 + 2, 5).ids == []  # the next ask: nothing to draft
    d.process(np.array([41], np.int32), pos0 + 2, {})
    d.accept(SUB_PROBE)
    assert (20, 21) not in d._renames


def test_long_matches_exceed_the_back_off_length():
    # the decoder's back-off length (length_hint) bounds short matches; an exact match of
    # LONG_MATCH tokens or more drafts up to n_max
    body = list(range(100, 100 + LONG_MATCH + 6))
    d = NgramDrafter(None)
    d.process(np.array(body + [7] + body[:LONG_MATCH - 1], np.int32), 0, {})
    d.length_hint = 2
    assert d.draft(body[LONG_MATCH - 1], len(body) + LONG_MATCH, 6).ids == \
        body[LONG_MATCH:LONG_MATCH + 6]
    d = NgramDrafter(None)
    d.process(np.array(body + [7] + body[:LONG_MATCH - 3], np.int32), 0, {})
    d.length_hint = 2
    assert d.draft(body[LONG_MATCH - 3], len(body) + LONG_MATCH - 2, 6).ids == \
        body[LONG_MATCH - 2:LONG_MATCH]


@settings(max_examples=120, deadline=None, database=None)
@given(st.integers(0, 2 ** 31), st.integers(2, 14), st.integers(1, 4), st.booleans())
def test_drafter_against_reference_through_steps(seed, vocab, ngram_min, substitute):
    # random histories fed as the decoder feeds them (a prompt, then drafts, verify
    # batches, partial acceptance, varying back-off lengths): every proposal equals the
    # reference drafter's, through the indexes' growth and rollback
    rng = np.random.default_rng(seed)
    hist = [int(t) for t in rng.integers(0, vocab, int(rng.integers(0, 70)))]
    d = NgramDrafter(None, ngram_min=ngram_min, ngram_max=max(3, ngram_min),
                     substitute=substitute)
    ref = RefDrafter(ngram_min, substitute)
    d.process(np.array(hist, np.int32), 0, {})
    for _ in range(40):
        pos0, id_last = len(hist), int(rng.integers(0, vocab))
        n_max, hint = int(rng.integers(1, 10)), int(rng.integers(0, 10))
        d.length_hint = hint
        got = d.draft(id_last, pos0, n_max).ids
        assert got == ref.draft(hist + [id_last], n_max, hint)
        batch = [id_last] + (got if rng.random() < 0.7 else
                             [int(t) for t in rng.integers(0, vocab, int(rng.integers(0, 5)))])
        d.process(np.array(batch, np.int32), pos0, {})
        n_acc = int(rng.integers(0, len(batch)))
        d.accept(n_acc)
        ref.accept(n_acc)
        hist = hist + batch[:n_acc + 1]
        assert d.history == hist and d._renames == ref.renames


def _window_seen(hist, w):
    """Whether hist's last w tokens occur earlier, wholly before its last token."""
    L = len(hist)
    return L > w and any(hist[s:s + w] == hist[L - w:] for s in range(L - w))


class _ReferenceHistoryDrafter(NgramDrafter):
    history_class = PyNgramHistory   # the plain-Python reference of the C++ NgramHistory


@pytest.mark.parametrize("drafter_cls", [NgramDrafter, _ReferenceHistoryDrafter])
@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 31), vocab=st.integers(2, 6))
def test_absorb_against_a_direct_window_search(drafter_cls, seed, vocab):
    # plain rounds' tokens (absorb), with the rewrites a decoder makes between them (a draft
    # of id_last, a verify batch and its partial acceptance, a token absorbed again at its
    # position, a rollback): every wake equals a search of the history itself, and the wake
    # index holds exactly the windows before the last token (a window absorb indexed from a
    # stale copy of the history would show in both)
    rng = np.random.default_rng(seed)
    d = drafter_cls(None)
    w = WAKE_MATCH
    hist, hit = [], False
    for _ in range(120):
        r = rng.random()
        if r < 0.75 or len(hist) < 2:
            pos = len(hist) - int(rng.random() < 0.1) * min(len(hist), int(rng.integers(1, 4)))
            tok = int(rng.integers(0, vocab))
            hist = hist[:pos] + [tok]
            now = _window_seen(hist, w)
            assert d.absorb(tok, pos) == (now and not hit)
            hit = now
            counts = {}
            for s in range(max(len(hist) - w, 0)):
                key = tuple(hist[s:s + w])
                counts[key] = counts.get(key, 0) + 1
            if len(hist) > w:
                assert d._h.counts() == counts and d._h.covered == len(hist) - w
        else:
            # id_last is mostly the token absorbed last; a different one rewrites it
            pos0 = len(hist) - 1
            id_last = hist[-1] if rng.random() < 0.6 else int(rng.integers(0, vocab))
            hist[-1] = id_last
            ids = d.draft(id_last, pos0, 3).ids
            batch = [id_last] + [int(t) for t in rng.integers(0, vocab, len(ids))]
            d.process(np.array(batch, np.int32), pos0, {})
            n_acc = int(rng.integers(0, len(batch)))
            d.accept(n_acc)
            hist = hist[:pos0] + batch[:n_acc + 1]
            hit = _window_seen(hist[:pos0 + 1], w)   # draft() looked at id_last's window
        assert d.history == hist


def test_history_buffer_through_process_and_accept():
    # a long prompt (the buffer grows), then verify batches with partial acceptance: the
    # drafter's history is what a list of the committed tokens holds
    rng = np.random.default_rng(5)
    hist = [int(t) for t in rng.integers(0, 6, 600)]
    d, ref = NgramDrafter(None), RefDrafter()
    d.process(np.array(hist, np.int32), 0, {})
    for step in range(30):
        pos0 = len(hist)
        id_last = int(rng.integers(0, 6))
        assert d.draft(id_last, pos0, 5).ids == ref.draft(hist + [id_last], 5, 0)
        batch = [id_last] + [int(t) for t in rng.integers(0, 6, int(rng.integers(0, 5)))]
        d.process(np.array(batch, np.int32), pos0, {})
        n_acc = int(rng.integers(0, len(batch)))
        d.accept(n_acc)
        ref.accept(n_acc)
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
    # a verify costing a plain step: the cost gate (adaptive) passes every draft whole, so
    # the first round verifies the drafter's first draft (measured costs start with a
    # plain round)
    dec = SpeculativeDecoder(ctx, "ngram", n_max=n_max, lookup=lookup, substitute=substitute,
                             adaptive=adaptive, ngram_min=ngram_min,
                             ngram_max=max(3, ngram_min), cost_model=lambda w: 1.0)
    dec.reset()
    out = dec.generate(prompt, 40)
    assert list(out) == ref
    # the first step drafts whenever the reference rule finds a place (its budget is n_max)
    first = prompt + ref[:1]
    if lookup == "recent":
        found = ref_recent(first, n_max, max(3, ngram_min), ngram_min)
    else:
        found = RefDrafter(ngram_min, substitute).draft(first, n_max, n_max if adaptive else 0)
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
