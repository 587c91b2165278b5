"""The C++ NgramWake (the n-gram drafter's history, wake-window index and absorb rule) against
its plain-Python reference ngram_index.WakeIndex: random streams of the calls a decoder and the
drafter make give the same answers and leave the same history, window counts and flags."""
import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyggml import _core
from pyggml.llm.speculative.ngram import WAKE_MATCH, NgramDrafter
from pyggml.llm.speculative.ngram_index import WakeIndex


def _state(w):
    return (len(w), list(w.tokens()), w.counts(), w.covered, w.hit)


def _run_stream(seed: int, vocab: int, width: int, n_ops: int = 200):
    rng = np.random.default_rng(seed)
    fast, ref = _core.NgramWake(width), WakeIndex(width)
    n_woke = 0
    for _ in range(n_ops):
        r, L = rng.random(), len(ref)
        if r < 0.6:                     # a plain round's token: mostly appended
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
            got = fast.absorb(tok, pos)
            assert got == ref.absorb(tok, pos)
            n_woke += got
        elif r < 0.72:                  # the drafter's own write (after taking absorb's)
            assert fast.take_dirty() == ref.take_dirty()
            pos0 = int(rng.integers(0, L + 3))
            toks = [int(t) for t in rng.integers(0, vocab, int(rng.integers(0, 6)))]
            fast.put(pos0, toks)
            ref.put(pos0, toks)
        elif r < 0.8:
            assert fast.take_dirty() == ref.take_dirty()
            keep = int(rng.integers(0, L + 2))
            fast.truncate(keep)
            ref.truncate(keep)
        elif r < 0.9:
            assert fast.ask_seen() == ref.ask_seen()
        else:
            assert fast.take_dirty() == ref.take_dirty()
        assert _state(fast) == _state(ref)
    return n_woke


@settings(max_examples=120, deadline=None, database=None)
@given(st.integers(0, 2 ** 31), st.integers(2, 5), st.sampled_from([1, 2, WAKE_MATCH, 8]))
def test_wake_index_matches_the_python_reference(seed, vocab, width):
    _run_stream(seed, vocab, width)


def test_streams_wake_often_enough_to_test_something():
    # a small vocabulary repeats windows all the time: the streams above do wake
    assert sum(_run_stream(s, 3, WAKE_MATCH) for s in range(5)) > 10


def test_take_dirty_reports_the_lowest_position_absorb_wrote():
    w = _core.NgramWake(4)
    for p, t in enumerate([5, 6, 7, 8, 9]):
        w.absorb(t, p)
    assert w.take_dirty() == (0, [5, 6, 7, 8, 9])
    assert w.take_dirty() is None
    w.absorb(9, 4)                   # the same token at the last position: nothing written
    assert w.take_dirty() is None
    w.absorb(1, 7)                   # 5 and 6 never seen: distinct negative ids
    assert w.take_dirty() == (5, [-6, -7, 1])
    w.absorb(3, 2)
    w.absorb(4, 3)
    assert w.take_dirty() == (2, [3, 4])


def test_deepcopy_is_independent():
    w = _core.NgramWake(2)
    for p, t in enumerate([1, 2, 1]):
        w.absorb(t, p)
    c = copy.deepcopy(w)
    assert c.absorb(2, 3) and _state(c) != _state(w)
    assert w.absorb(2, 3)            # the original still wakes on its own 1, 2 repeat


def test_cloned_drafter_absorbs_into_its_own_history():
    d = NgramDrafter(None)
    d.process(np.array([3, 4, 5], np.int32), 0, {})
    c = d.clone()
    c.absorb(9, 3)
    assert c.history == [3, 4, 5, 9] and d.history == [3, 4, 5]


@pytest.mark.parametrize("call", [lambda: _core.NgramWake(0), lambda: _core.NgramWake(9),
                                  lambda: _core.NgramWake(4).put(-1, [1]),
                                  lambda: _core.NgramWake(4).truncate(-2),
                                  lambda: _core.NgramWake(4).absorb(1, -3)])
def test_bad_arguments_raise(call):
    with pytest.raises(ValueError):
        call()
