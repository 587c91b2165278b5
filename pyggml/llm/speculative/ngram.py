"""Prompt-lookup drafting: no draft model, the context predicts itself.

The drafter keeps the tokens the target has in memory plus id_last (the prompt and every
token generated so far) and proposes what followed an earlier place that looks like the end
of that sequence. Text that copies or edits its own context (code rewriting, quoting, a
function that mirrors the previous one) drafts well; fresh text gives empty drafts, which
cost nothing but a lookup (the step decodes id_last alone).

Two lookup rules (option `lookup`):

* "longest" (default): among the earlier places where the last ngram_min tokens occur, the
  one whose exact match reaches furthest back wins (counted up to MATCH_CAP tokens and to
  no more than the tokens that follow the place; ties: the most recent), and the draft is
  at most as long as that match: a match of 2 tokens drafts 2, a match of 12 up to n_max.
  A verify step costs more with every drafted token (a CPU decode of 5 tokens costs about
  2.7 one-token decodes for a 135M Q4_1 model), so a draft should be long only where the
  source is a real copy. When no exact key occurs,
  the one-substitution rule tries: a place whose last SUB_WINDOW tokens equal ours but for
  at most one (an edit that renamed x to y keeps copying after the renamed token).
* "recent": the last N tokens (N = ngram_max down to ngram_min), the most recent earlier
  occurrence of the longest N that occurs, and the n_max tokens that followed it.

Options (keywords of SpeculativeDecoder):
  lookup      "longest" (default) or "recent"
  ngram_max   longest key of "recent" (default 3)
  ngram_min   shortest key (default 2: a one-token key drafts more often but is rejected so
              often that on text that is not a copy it costs more than it saves)
  substitute  the one-substitution fallback of "longest" (default True)
"""
from __future__ import annotations

import numpy as np

from .drafter import Draft, Drafter

MATCH_CAP = 64       # the longest backward match measured (longer ones draw the same)
SUB_WINDOW = 8       # tokens compared by the one-substitution rule


def find_continuation(seq: np.ndarray, n_max: int, ngram_max: int, ngram_min: int) -> list:
    """"recent": up to n_max tokens that followed the most recent earlier occurrence of
    seq's last N tokens, for the longest N in [ngram_min, ngram_max] that occurs."""
    L = len(seq)
    for N in range(min(ngram_max, L - 1), ngram_min - 1, -1):
        starts = _key_starts(seq, N)
        if len(starts):
            i = int(starts[-1]) + N
            return seq[i:i + n_max].tolist()
    return []


def _key_starts(seq: np.ndarray, N: int) -> np.ndarray:
    """Starts i < L - N of the earlier windows seq[i:i+N] equal to the last N tokens."""
    L = len(seq)
    if N < 1 or L <= N:
        return np.zeros(0, np.int64)
    key = seq[L - N:]
    if N == 2:          # the default key: one pass
        return np.flatnonzero((seq[:L - 2] == key[0]) & (seq[1:L - 1] == key[1]))
    starts = np.flatnonzero(seq[:L - N] == key[0])
    for j in range(1, N):
        if not len(starts):
            break
        starts = starts[seq[starts + j] == key[j]]
    return starts


def match_lengths(seq: np.ndarray, ends: np.ndarray, cap: int = MATCH_CAP) -> np.ndarray:
    """For each e in ends (e < L), how many tokens before e equal the tokens before L:
    the largest m <= min(cap, e) with seq[e-m:e] == seq[L-m:L]."""
    L = len(seq)
    ends = np.asarray(ends, np.int64)
    cap = min(cap, L)
    if not len(ends) or cap <= 0:
        return np.zeros(len(ends), np.int64)
    back = np.arange(1, cap + 1)
    idx = ends[:, None] - back[None, :]              # [n_ends, cap]: seq[e - k]
    eq = (seq[np.maximum(idx, 0)] == seq[L - back][None, :]) & (idx >= 0)
    return np.cumprod(eq, axis=1).sum(axis=1)


def find_substituted(seq: np.ndarray, window: int = SUB_WINDOW) -> int:
    """The continuation start e (window <= e < L) of the place whose last `window` tokens
    equal seq's last `window` but for at most one, the fewest differences first, then the
    most recent; -1 when there is none."""
    L = len(seq)
    if L <= window:
        return -1
    # one difference in the window leaves the last or the one before it equal: only places
    # where one of those two matches are counted in full
    ends = np.flatnonzero((seq[window - 1:L - 1] == seq[L - 1])
                          | (seq[window - 2:L - 2] == seq[L - 2])) + window
    if not len(ends):
        return -1
    back = np.arange(1, window + 1)
    diff = (seq[ends[:, None] - back[None, :]] != seq[L - back][None, :]).sum(axis=1)
    ok = np.flatnonzero(diff <= 1)
    if not len(ok):
        return -1
    return int(ends[ok[diff[ok] == diff[ok].min()][-1]])


def longest_match_draft(seq: np.ndarray, n_max: int, ngram_min: int = 2,
                        substitute: bool = True) -> list:
    """"longest": the continuation after the earlier occurrence of the last ngram_min tokens
    whose exact match reaches furthest back (ties: the most recent), at most as many tokens
    as that match is long; without one, the one-substitution place's n_max tokens."""
    starts = _key_starts(seq, ngram_min)
    if len(starts):
        ends = starts + ngram_min
        # a place is as good as its match, but no better than the tokens that follow it
        # (in a periodic stretch the latest places match far back and have little after)
        k = np.minimum(match_lengths(seq, ends), len(seq) - ends)
        best = int(np.flatnonzero(k == k.max())[-1])
        e = int(ends[best])
        return seq[e:e + min(n_max, int(k[best]))].tolist()
    if substitute:
        e = find_substituted(seq)
        if e >= 0:
            return seq[e:e + n_max].tolist()
    return []


class NgramDrafter(Drafter):
    kind = "ngram"

    def __init__(self, target_ctx, draft_model=None, ngram_max: int = 3, ngram_min: int = 2,
                 lookup: str = "longest", substitute: bool = True):
        if draft_model is not None:
            raise ValueError("SpeculativeDecoder('ngram'): prompt lookup uses no draft model "
                             "(pass draft=None)")
        for name, v in (("ngram_max", ngram_max), ("ngram_min", ngram_min)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"SpeculativeDecoder('ngram'): {name}={v!r} must be an "
                                 f"integer >= 1")
        if ngram_min > ngram_max:
            raise ValueError(f"SpeculativeDecoder('ngram'): ngram_min={ngram_min} is larger "
                             f"than ngram_max={ngram_max}")
        if lookup not in ("longest", "recent"):
            raise ValueError(f"SpeculativeDecoder('ngram'): lookup={lookup!r}; expected "
                             f"'longest' or 'recent'")
        if not isinstance(substitute, bool):
            raise ValueError(f"SpeculativeDecoder('ngram'): substitute={substitute!r} must be "
                             f"True or False")
        self.target = target_ctx
        self.ngram_max, self.ngram_min = int(ngram_max), int(ngram_min)
        self.lookup, self.substitute = lookup, substitute
        # tokens at positions 0.. of the target's sequence: buf[:n] (a growing array, so
        # that a lookup reads a view instead of converting a list every step)
        self._buf = np.zeros(256, np.int64)
        self._n = 0
        self._pos0 = 0

    @property
    def history(self) -> list:
        return self._buf[:self._n].tolist()

    def _put(self, pos0: int, tokens: np.ndarray) -> None:
        end = pos0 + len(tokens)
        if end > len(self._buf):
            grown = np.zeros(max(2 * len(self._buf), end), np.int64)
            grown[:self._n] = self._buf[:self._n]
            self._buf = grown
        if pos0 > self._n:
            # positions this drafter never saw (the sequence was in the target before the
            # decoder ran): distinct negative ids, which match nothing
            self._buf[self._n:pos0] = -1 - np.arange(self._n, pos0)
        self._buf[pos0:end] = tokens
        self._n = end

    def process(self, tokens, pos0, taps):
        self._put(pos0, np.asarray(tokens, np.int64).ravel())
        self._pos0 = pos0

    def draft(self, id_last, pos0, n_max):
        # id_last sits at pos0 (the next process() writes it there again)
        self._put(pos0, np.array([int(id_last)], np.int64))
        seq = self._buf[:pos0 + 1]
        if self.lookup == "recent":
            ids = find_continuation(seq, n_max, self.ngram_max, self.ngram_min)
        else:
            ids = longest_match_draft(seq, n_max, self.ngram_min, self.substitute)
        return Draft(ids=ids)

    def accept(self, n_accepted):
        self._n = min(self._n, self._pos0 + n_accepted + 1)

    def reset(self):
        self._n = 0
