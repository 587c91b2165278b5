"""Prompt-lookup drafting: no draft model, the context predicts itself.

The drafter keeps the tokens the target has in memory plus id_last. To draft it takes the
last N of them (N = ngram_max down to ngram_min), finds the most recent earlier place where
the same N tokens occur, and proposes the tokens that followed there. Text that copies or
edits its own context (code rewriting, quoting, summaries with names) drafts well; fresh text
gives empty drafts, which cost nothing but a lookup.

Options (keywords of SpeculativeDecoder):
  ngram_max  longest key tried first (default 3)
  ngram_min  shortest key accepted (default 2: a one-token key drafts more often but is
             rejected so often that on text that is not a copy it costs more than it saves)
"""
from __future__ import annotations

import numpy as np

from .drafter import Draft, Drafter


def find_continuation(seq: np.ndarray, n_max: int, ngram_max: int, ngram_min: int) -> list:
    """Up to n_max tokens that followed the most recent earlier occurrence of seq's last N
    tokens, for the longest N in [ngram_min, ngram_max] that occurs."""
    L = len(seq)
    for N in range(min(ngram_max, L - 1), ngram_min - 1, -1):
        key = seq[L - N:]
        # candidate starts i < L - N whose window seq[i:i+N] equals the key
        starts = np.flatnonzero(seq[:L - N] == key[0])
        if N > 1 and len(starts):
            ok = np.ones(len(starts), bool)
            for j in range(1, N):
                ok &= seq[starts + j] == key[j]
            starts = starts[ok]
        if len(starts):
            i = int(starts[-1]) + N
            return seq[i:i + n_max].tolist()
    return []


class NgramDrafter(Drafter):
    kind = "ngram"

    def __init__(self, target_ctx, draft_model=None, ngram_max: int = 3, ngram_min: int = 2):
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
        self.target = target_ctx
        self.ngram_max, self.ngram_min = int(ngram_max), int(ngram_min)
        self.history: list = []   # tokens at positions 0.. of the target's sequence
        self._pos0 = 0

    def process(self, tokens, pos0, taps):
        del self.history[pos0:]
        self.history.extend(int(t) for t in np.asarray(tokens).ravel())
        self._pos0 = pos0

    def draft(self, id_last, pos0, n_max):
        seq = np.asarray(self.history[:pos0] + [int(id_last)], np.int64)
        return Draft(ids=find_continuation(seq, n_max, self.ngram_max, self.ngram_min))

    def accept(self, n_accepted):
        del self.history[self._pos0 + n_accepted + 1:]

    def reset(self):
        self.history.clear()
