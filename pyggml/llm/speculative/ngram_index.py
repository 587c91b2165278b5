"""The n-gram drafter's indexes of its history's windows: KeyIndex (key -> where it starts,
for the lookups) and WakeIndex, the history with its WAKE_MATCH-token window index that
absorb reads once a plain round. WakeIndex is the plain-Python reference of the C++
NgramWake (pyggml._core) the drafter uses: a quiet stretch then costs one C++ call a token,
not a Python function (tests hold the two to the same results)."""
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


class WakeIndex:
    """The drafter's token history (positions 0..) with a KeyIndex of its `width`-token
    windows, and the absorb rule: absorb(token, pos) writes a plain round's token and says
    True when the history's last `width` tokens occur earlier (with a token after them) and
    the window before it did not, nor did the one an ask last looked at (`ask_seen`). Writes
    by absorb are remembered from the lowest position they touched (`take_dirty`) for the
    drafter's other indexes, which are brought up to date at its next call; put and
    truncate are the drafter's own writes (made after take_dirty)."""

    def __init__(self, width: int):
        self.width = int(width)
        self.reset()

    def reset(self) -> None:
        self.hist: list = []
        self.index = KeyIndex(self.width)
        self.hit = False
        self.dirty = -1

    def __len__(self) -> int:
        return len(self.hist)

    @property
    def covered(self) -> int:
        return self.index.covered

    def counts(self) -> dict:
        """key -> how many windows before `covered` hold it."""
        return {k: len(v) for k, v in self.index.starts.items()}

    def tokens(self, start: int = 0) -> list:
        return self.hist[start:]

    def _mark(self, pos: int) -> None:
        if self.dirty < 0 or pos < self.dirty:
            self.dirty = pos

    def put(self, pos0: int, tokens) -> None:
        """Write tokens at pos0.. (dropping what follows; positions never written before pos0
        get distinct negative ids, which match nothing)."""
        hist, ix = self.hist, self.index
        if ix.covered + ix.width - 1 > pos0:
            ix.cut(hist, pos0)
        n = len(hist)
        if pos0 > n:
            hist.extend(range(-1 - n, -1 - pos0, -1))
        hist[pos0:] = tokens
        if self.dirty > pos0:
            self.dirty = pos0

    def truncate(self, keep: int) -> None:
        hist, ix = self.hist, self.index
        if keep < len(hist):
            if ix.covered + ix.width - 1 > keep:
                ix.cut(hist, keep)
            del hist[keep:]
            if self.dirty > keep:
                self.dirty = keep

    def _last_seen(self) -> bool:
        """Whether the last `width` tokens occur earlier (indexing the windows before the last
        token first)."""
        hist, ix = self.hist, self.index
        L = len(hist)
        if L <= ix.width:
            return False
        ix.extend(hist, L - 1)
        return tuple(hist[L - ix.width:]) in ix.starts

    def absorb(self, token, pos) -> bool:
        hist = self.hist
        L = len(hist)
        if pos == L:
            self._mark(L)
            hist.append(token)
        elif not (pos == L - 1 and hist[pos] == token):
            self._mark(min(pos, L))
            self.put(pos, [token])
        hit = self._last_seen()
        woke, self.hit = hit and not self.hit, hit
        return woke

    def ask_seen(self) -> bool:
        """An ask has looked at the history's end: only a later repeat's start wakes."""
        self.hit = self._last_seen()
        return self.hit

    def take_dirty(self):
        """(pos, hist[pos:]) for the lowest position absorb wrote since the last call, or None."""
        if self.dirty < 0:
            return None
        pos, self.dirty = self.dirty, -1
        return pos, self.hist[pos:]
