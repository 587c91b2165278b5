"""The C++ NgramHistory (the n-gram drafter's history, window indexes, absorb rule and
"longest" lookup) against its plain-Python reference ngram.PyNgramHistory: random streams of
the calls a decoder and the drafter make give the same answers and leave the same history,
wake-window counts and flags."""
import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyggml.llm.speculative.ngram import PyNgramHistory, _cpp_history


def _state(h):
    return (len(h), list(h.tokens()), h.counts(), h.covered, h.hit)


def _run_stream(seed: int, vocab: int, ngram_min: int, substitute: bool, n_ops: int = 250):
    """Returns how many absorbs woke and how many lookups found a place (exact, substituted)."""
    rng = np.random.default_rng(seed)
    fast, ref = _cpp_history(ngram_min, substitute), PyNgramHistory(ngram_min, substitute)
    n_woke, found = 0, {"exact": 0, "sub": 0}
    copy_from = None
    for _ in range(n_ops):
        r, L = rng.random(), len(ref)
        if r < 0.55:                     # a plain round's token: mostly appended
            pos = L
            u = rng.random()
            if u < 0.1 and L:
                pos = L - 1                 # id_last again (same or another token)
            elif u < 0.15:
                pos = max(L - int(rng.integers(1, 6)), 0)    # a rollback
            elif u < 0.18:
                pos = L + int(rng.integers(1, 4))            # positions never seen
            tok = int(rng.integers(0, vocab))
            if pos == L - 1 and rng.random() < 0.5:
                tok = ref.tokens()[pos]
            elif pos == L and copy_from is not None and copy_from < L and rng.random() < 0.9:
                tok = ref.tokens()[copy_from]   # copying an earlier stretch, with edits
                copy_from += 1
            elif pos == L and L > 12 and rng.random() < 0.3:
                copy_from = int(rng.integers(0, L - 8))
            got = fast.absorb(tok, pos)
            assert got == ref.absorb(tok, pos)
            n_woke += got
        elif r < 0.65:                   # a verify batch or a prompt
            pos0 = int(rng.integers(0, L + 3))
            toks = [int(t) for t in rng.integers(0, vocab, int(rng.integers(0, 12)))]
            fast.put(pos0, toks)
            ref.put(pos0, toks)
        elif r < 0.72:
            keep = int(rng.integers(0, L + 2))
            fast.truncate(keep)
            ref.truncate(keep)
        elif r < 0.77:
            assert fast.ask_seen() == ref.ask_seen()
        else:                            # an ask: the lookup of the history's end
            n_max, hint = int(rng.integers(1, 10)), int(rng.integers(1, 10))
            got = fast.draft_longest(n_max, min(hint, n_max))
            assert got == ref.draft_longest(n_max, min(hint, n_max))
            if got[2] is not None:
                found["sub" if got[2] < 0 else "exact"] += 1
        assert _state(fast) == _state(ref)
    return n_woke, found


@settings(max_examples=150, deadline=None, database=None)
@given(st.integers(0, 2 ** 31), st.integers(2, 12), st.integers(1, 6), st.booleans())
def test_history_matches_the_python_reference(seed, vocab, ngram_min, substitute):
    _run_stream(seed, vocab, ngram_min, substitute)


def test_streams_wake_and_find_places():
    # the streams above wake and find exact places (their copies of earlier stretches)
    woke, exact = 0, 0
    for s in range(8):
        w, f = _run_stream(s, 30, 2, True)
        woke, exact = woke + w, exact + f["exact"]
    assert woke > 10 and exact > 50


@pytest.mark.parametrize("ngram_min", [1, 2, 3, 6])
def test_edited_copies_ask_after_every_token(ngram_min):
    # a source, then copies of it with a token renamed here and there, asked about after
    # every token (with the back-off length and without): the substitution rule's places,
    # exact ones and their classes as the reference gives them
    rng = np.random.default_rng(ngram_min)
    fast, ref = _cpp_history(ngram_min, True), PyNgramHistory(ngram_min, True)
    src = [int(t) for t in rng.integers(0, 40, 40)]
    stream = list(src)
    for _ in range(4):
        stream += [int(t) if rng.random() > 0.12 else int(rng.integers(40, 60)) for t in src]
    n_sub = n_probe = 0
    for pos, tok in enumerate(stream):
        assert fast.absorb(tok, pos) == ref.absorb(tok, pos)
        for n_max, hint in ((6, 6), (6, 2)):
            got = fast.draft_longest(n_max, hint)
            assert got == ref.draft_longest(n_max, hint)
            # an ask of the last token again (as the decoder's, id_last at its position)
            assert fast.ask(pos, tok, n_max, hint) == ref.ask(pos, tok, n_max, hint) == got
            n_sub += got[2] == -1
            n_probe += got[3] is not None and got[3][0] == 1
    assert n_sub >= 10 and n_probe >= 5


def test_deepcopy_is_independent():
    h = _cpp_history(2, True)
    for p, t in enumerate([1, 2, 3, 4, 9, 1, 2, 3]):
        h.absorb(t, p)
    c = copy.deepcopy(h)
    assert c.absorb(4, 8) and _state(c) != _state(h)
    assert h.absorb(4, 8)            # the original still wakes on its own 1 2 3 4 repeat


def test_cloned_drafter_absorbs_into_its_own_history():
    from pyggml.llm.speculative.ngram import NgramDrafter
    d = NgramDrafter(None)
    d.process(np.array([3, 4, 5], np.int32), 0, {})
    c = d.clone()
    c.absorb(9, 3)
    assert c.history == [3, 4, 5, 9] and d.history == [3, 4, 5]


@pytest.mark.parametrize("call", [lambda: _cpp_history(0, True), lambda: _cpp_history(7, True),
                                  lambda: _cpp_history(2, True).put(-1, [1]),
                                  lambda: _cpp_history(2, True).truncate(-2),
                                  lambda: _cpp_history(2, True).absorb(1, -3)])
def test_bad_arguments_raise(call):
    with pytest.raises(ValueError):
        call()
