"""KeyIndex: where each window of a growing token history starts, the index the n-gram
drafter's Python history (ngram.PyNgramHistory) reads; the C++ NgramHistory keeps the same
indexes."""
from __future__ import annotations


class KeyIndex:
    """Where every window of `width` tokens of a growing history starts: key (the window's
    tokens as a tuple) -> start positions, ascending. It covers the windows that start before
    `covered`; `extend` indexes more as the history grows and `cut` forgets the windows that
    reach past a position about to be rewritten (they are the latest of their keys, so each is
    its list's last entry)."""

    __slots__ = ("width", "starts", "covered")

    def __init__(self, width: int):
        self.width = int(width)
        self.starts: dict = {}
        self.covered = 0

    def extend(self, hist: list, end: int) -> None:
        """Index the windows lying inside hist[:end]."""
        w, starts = self.width, self.starts
        for p in range(self.covered, end - w + 1):
            key = tuple(hist[p:p + w])
            lst = starts.get(key)
            if lst is None:
                starts[key] = [p]
            else:
                lst.append(p)
        self.covered = max(self.covered, end - w + 1)

    def cut(self, hist: list, end: int) -> None:
        """Forget the windows reaching past hist[:end] (hist still holds their tokens)."""
        w, starts = self.width, self.starts
        first = max(end - w + 1, 0)
        for p in range(self.covered - 1, first - 1, -1):
            key = tuple(hist[p:p + w])
            lst = starts[key]
            lst.pop()
            if not lst:
                del starts[key]
        self.covered = min(self.covered, first)

    def get(self, key: tuple) -> list:
        return self.starts.get(key, ())
