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
  With the decoder's adaptive length, the back-off length (`length_hint`) bounds every
  draft but an exact match of LONG_MATCH tokens or more, and a substitution of id_last
  itself first drafts a SUB_PROBE-token probe (see the constants). The lookups read
  incremental indexes of the history's windows (KeyIndex), so a step costs a dict access
  and a look at the places found, not a scan of the history.
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

import copy

import numpy as np

from ... import _core
from .drafter import Draft, Drafter
from .ngram_index import KeyIndex

MATCH_CAP = 64       # the longest backward match measured (longer ones draw the same)
# an exact match at least this long drafts up to n_max even while the decoder's back-off
# length is shorter (a rejection elsewhere says little about a long verbatim copy)
LONG_MATCH = 8
# with the adaptive length (a length_hint given), a one-substitution place whose differing
# token is the last one (id_last itself) drafts at most this many, unless that same
# replacement (old token -> id_last) was accepted before: with subword tokens the new token
# is often the start of a different word (the copy said "push", the model wrote "en" of
# "enqueue"), while a rename (x -> y) repeats
SUB_PROBE = 2
SUB_WINDOW = 8       # tokens compared by the one-substitution rule
# draft classes (Drafter.draft_class) for the decoder's cost gate: the acceptance of a draft
# depends on where it came from far more than on its position
CLASS_OTHER, CLASS_SUB, CLASS_SHORT, CLASS_MEDIUM, CLASS_LONG = range(5)
MEDIUM_MATCH = 4     # an exact match this long or longer is "medium" (LONG_MATCH: "long")
# a plain round whose stream ends in a WAKE_MATCH-token window seen before ends the decoder's
# quiet stretch (absorb): a copy starting between two asks is asked about after at most
# WAKE_MATCH of its tokens, not after the rest of the stretch (up to MAX_QUIET_LONG)
WAKE_MATCH = MEDIUM_MATCH
# the gate's prior (q1, q2) per class: a long verbatim match is most likely a copy
CLASS_PRIOR = {CLASS_MEDIUM: (0.6, 0.85), CLASS_LONG: (0.8, 0.9)}


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


# above this many places a lookup measures matches with numpy instead of a Python loop
VECTOR_FROM = 24


class PyNgramHistory:
    """The drafter's history (tokens at positions 0..) with incremental indexes of its windows
    (KeyIndex: the ngram_min-token keys, the token pairs that anchor the one-substitution
    search, the WAKE_MATCH-token windows absorb reads), so a lookup costs a dict access and a
    look at the places found, not a scan of the history. The plain-Python reference of the
    C++ NgramHistory (pyggml._core), which serves the default options with the same calls:
    absorb, put, truncate, ask_seen, draft_longest, tokens."""

    def __init__(self, ngram_min: int, substitute: bool):
        self.ngram_min, self.substitute = int(ngram_min), bool(substitute)
        # a window with no exact key differs from ours in its last ngram_min tokens only, so
        # the two before them match exactly: that pair finds the substitution candidates
        # (when the window holds them; otherwise the numpy search runs)
        self._sub_pairs = self.ngram_min + 2 <= SUB_WINDOW
        self.reset()

    def reset(self) -> None:
        # a list (the indexes and the Python comparisons read it) and a growing array (the
        # numpy lookups read a view of it instead of converting the list)
        self._hist: list = []
        self._buf = np.zeros(256, np.int64)
        self._buf_n = 0                # entries of _buf equal to the list's
        self._keys = KeyIndex(self.ngram_min)
        self._pairs = self._keys if self.ngram_min == 2 else KeyIndex(2)
        self._wake = KeyIndex(WAKE_MATCH)
        self._ix = ((self._keys, self._wake) if self._pairs is self._keys
                    else (self._keys, self._pairs, self._wake))
        self.hit = False               # the last window absorb or ask_seen looked at occurred

    def __len__(self) -> int:
        return len(self._hist)

    def tokens(self, start: int = 0) -> list:
        return self._hist[start:]

    def counts(self) -> dict:
        """The wake index: window -> how many windows before `covered` hold it."""
        return {k: len(v) for k, v in self._wake.starts.items()}

    @property
    def covered(self) -> int:
        return self._wake.covered

    def seq(self) -> np.ndarray:
        """The history as an int64 array (a view of the growing buffer, brought up to date
        from the list only when a numpy lookup needs it)."""
        hist, n = self._hist, self._buf_n
        L = len(hist)
        if n < L:
            if L > len(self._buf):
                grown = np.zeros(max(2 * len(self._buf), L), np.int64)
                grown[:n] = self._buf[:n]
                self._buf = grown
            self._buf[n:L] = hist[n:L]
            self._buf_n = L
        return self._buf[:L]

    def put(self, pos0: int, tokens: list) -> None:
        """Write tokens at pos0.. (dropping what follows)."""
        hist = self._hist
        for ix in self._ix:
            if ix.covered + ix.width - 1 > pos0:
                ix.cut(hist, pos0)
        n = len(hist)
        if pos0 > n:
            # positions this drafter never saw (the sequence was in the target before the
            # decoder ran): distinct negative ids, which match nothing
            hist.extend(range(-1 - n, -1 - pos0, -1))
        if pos0 < self._buf_n:
            self._buf_n = pos0
        hist[pos0:] = tokens

    def truncate(self, keep: int) -> None:
        """Keep the first `keep` tokens (the indexes never hold a window reaching past them)."""
        if keep < len(self._hist):
            for ix in self._ix:
                if ix.covered + ix.width - 1 > keep:
                    ix.cut(self._hist, keep)
            del self._hist[keep:]
            if keep < self._buf_n:
                self._buf_n = keep

    def _last_seen(self) -> bool:
        """Whether the last WAKE_MATCH tokens occur earlier (with a token after them)."""
        hist, wake = self._hist, self._wake
        L = len(hist)
        if L <= wake.width:
            return False
        wake.extend(hist, L - 1)
        return tuple(hist[L - wake.width:]) in wake.starts

    def absorb(self, token, pos) -> bool:
        """NgramDrafter.absorb: write a plain round's token at pos; True when the last
        WAKE_MATCH tokens occur earlier and the window looked at before did not."""
        hist = self._hist
        L = len(hist)
        if pos == L:
            hist.append(token)
        elif not (pos == L - 1 and hist[pos] == token):
            self.put(pos, [token])
        hit = self._last_seen()
        woke, self.hit = hit and not self.hit, hit
        return woke

    def ask_seen(self) -> bool:
        """An ask has looked at the history's end: only a later repeat's start wakes."""
        self.hit = self._last_seen()
        return self.hit

    def ask(self, pos0: int, id_last: int, n_max: int, hint: int):
        """An ask of the "longest" rule: id_last written at pos0, its window seen (ask_seen),
        then draft_longest."""
        self.put(pos0, [id_last])
        self.ask_seen()
        return self.draft_longest(n_max, hint)

    # ---- the "longest" rule over the indexes --------------------------------------------------
    def draft_longest(self, n_max: int, hint: int):
        """The "longest" rule's draft of the history's end: (ids, draft class, the exact
        match's length (-1: a substitution, None: no place), None or (j, replaced token,
        replacement) of a substitution place whose window differs at position L - j)."""
        hist = self._hist
        L, m = len(hist), self.ngram_min
        if L <= m:                     # no key fits before ours
            return longest_match_draft(self.seq(), hint, m, self.substitute), CLASS_OTHER, \
                None, None
        keys = self._keys
        keys.extend(hist, L - 1)       # windows with at least one token after them
        starts = keys.get(tuple(hist[L - m:]))
        if starts:
            return self._best_exact(starts, n_max, hint)
        if not self.substitute:
            return [], CLASS_OTHER, None, None
        if not self._sub_pairs:
            return self._sub_draft(find_substituted(self.seq()), hint)
        if L <= SUB_WINDOW:
            return [], CLASS_OTHER, None, None
        pairs = self._pairs
        if pairs is not keys:
            pairs.extend(hist, L - 1)
        e = self._substituted(pairs.get((hist[L - m - 2], hist[L - m - 1])))
        return self._sub_draft(e, hint)

    def _sub_draft(self, e: int, hint: int):
        if e < 0:
            return [], CLASS_OTHER, None, None
        hist = self._hist
        L = len(hist)
        # the replaced token: the one of the window that differs (none: an exact place of a
        # key longer than ngram_min's reach, nothing to learn)
        j = next((j for j in range(1, SUB_WINDOW + 1) if hist[e - j] != hist[L - j]), 0)
        return hist[e:e + hint], CLASS_SUB, -1, (j, hist[e - j], hist[L - j]) if j else None

    def _best_exact(self, starts: list, n_max: int, hint: int):
        """The place after the key occurrence whose match reaches furthest back (capped by
        MATCH_CAP and by the tokens that follow it); ties: the most recent."""
        hist = self._hist
        L, m = len(hist), self.ngram_min
        if len(starts) > VECTOR_FROM:
            ends = np.asarray(starts, np.int64) + m
            k = np.minimum(match_lengths(self.seq(), ends), L - ends)
            best = int(np.flatnonzero(k == k.max())[-1])
            e, k_best = int(ends[best]), int(k[best])
        else:
            e, k_best = -1, -1
            for s in starts:           # ascending: ">=" lets the later place win a tie
                end = s + m
                cap = min(MATCH_CAP, end)
                j = m                  # the key itself matches
                while j < cap and hist[end - j - 1] == hist[L - j - 1]:
                    j += 1
                k = min(j, cap, L - end)
                if k >= k_best:
                    e, k_best = end, k
        cls = (CLASS_LONG if k_best >= LONG_MATCH else
               CLASS_MEDIUM if k_best >= MEDIUM_MATCH else CLASS_SHORT)
        return (hist[e:e + min(n_max if k_best >= LONG_MATCH else hint, k_best)], cls, k_best,
                None)

    def _substituted(self, pair_starts) -> int:
        """find_substituted's place among the windows anchored by the pair before our last
        ngram_min tokens: the most recent one differing from ours in at most one of the
        SUB_WINDOW tokens (none differs in none: that would be an exact key)."""
        if not pair_starts:
            return -1
        hist = self._hist
        L, w = len(hist), SUB_WINDOW
        shift = self.ngram_min + 2          # anchor start -> continuation start
        if len(pair_starts) > VECTOR_FROM:
            ends = np.asarray(pair_starts, np.int64) + shift
            ends = ends[(ends >= w) & (ends < L)]
            if not len(ends):
                return -1
            seq = self.seq()
            back = np.arange(1, w + 1)
            diff = (seq[ends[:, None] - back[None, :]] != seq[L - back][None, :]).sum(axis=1)
            ok = np.flatnonzero(diff <= 1)
            return int(ends[ok[-1]]) if len(ok) else -1
        tail = hist[L - w:]
        for s in reversed(pair_starts):
            e = s + shift
            if e >= L or e < w:
                continue
            window = hist[e - w:e]
            diff = 0
            for a, b in zip(window, tail):
                if a != b:
                    diff += 1
                    if diff > 1:
                        break
            if diff <= 1:
                return e
        return -1


def _cpp_history(ngram_min: int, substitute: bool):
    return _core.NgramHistory(WAKE_MATCH, ngram_min, substitute, MATCH_CAP, LONG_MATCH,
                              MEDIUM_MATCH, SUB_WINDOW, (CLASS_OTHER, CLASS_SUB, CLASS_SHORT,
                                                         CLASS_MEDIUM, CLASS_LONG))


class NgramDrafter(Drafter):
    """Prompt lookup over the target's history (see the module docstring): the history and
    its indexes are a C++ NgramHistory for the "longest" rule (PyNgramHistory, its Python
    reference, otherwise: `history_class`), which proposes what `longest_match_draft`
    proposes on the same history."""

    kind = "ngram"
    own_length = True
    # absorb wakes the decoder at the start of a WAKE_MATCH-token repeat, whose draft is an
    # exact match of WAKE_MATCH .. LONG_MATCH - 1 tokens (a longer one would have repeated a
    # token earlier): a medium one, or a short one where the place has few tokens after it
    wake_classes = (CLASS_SHORT, CLASS_MEDIUM)
    # (ngram_min, substitute) -> the history; None: the C++ one where it serves the options
    history_class = None

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
        make = self.history_class
        if make is None:
            # the C++ history serves the "longest" rule with its substitution pairs (the
            # window holds them); other options take the Python one's numpy searches
            fast = lookup == "longest" and self.ngram_min + 2 <= SUB_WINDOW
            make = _cpp_history if fast else PyNgramHistory
        self._h = make(self.ngram_min, substitute)
        # absorb is the history's own call: one call a token in quiet stretches
        self.absorb = self._h.absorb
        self._pos0 = 0
        # replacements of a token accepted after a one-substitution probe (see SUB_PROBE)
        self._renames: set = set()
        self._probe, self._probing = None, False
        self.last_match = 0

    @property
    def _n(self) -> int:
        return len(self._h)

    @property
    def history(self) -> list:
        return list(self._h.tokens())

    def __deepcopy__(self, memo):
        # absorb is bound to this drafter's history: the copy binds its own
        new = object.__new__(type(self))
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            if k != "absorb":
                new.__dict__[k] = copy.deepcopy(v, memo)
        new.absorb = new._h.absorb
        return new

    def absorb(self, token, pos):
        """A plain round's token at pos (see Drafter.absorb): written to the history, and True
        when the history's last WAKE_MATCH tokens occur earlier with a token after them and
        the window before it (or at the last draft()) did not: a copy wakes the decoder once,
        at its start, and a run of matches the asks declined does not keep waking it. One
        window looked up (each instance calls its history's absorb directly)."""
        return self._h.absorb(token, pos)

    def process(self, tokens, pos0, taps):
        self._pos0 = pos0
        h = self._h
        if len(tokens) == 1 and pos0 == len(h) - 1 and h.tokens(pos0)[0] == tokens[0]:
            return                     # id_last alone, as draft() wrote it
        h.put(pos0, np.asarray(tokens).ravel().tolist())

    def draft(self, id_last, pos0, n_max):
        # id_last sits at pos0 (the next process() writes it there again); a probe whose
        # draft was declined (no accept() follows, see Drafter.absorb) is forgotten
        h = self._h
        self._probe = None
        # n_max: what the decoder takes; the back-off length (length_hint, 0: none) bounds
        # every draft but an exact match of LONG_MATCH tokens or more
        hint = min(self.length_hint or n_max, n_max)
        self._probing = bool(self.length_hint)
        # the history's end has been seen (ask_seen): only a later start of a repeat wakes
        if self.lookup == "recent":
            h.put(pos0, [int(id_last)])
            h.ask_seen()
            self.draft_class = CLASS_OTHER
            return Draft(ids=find_continuation(h.seq(), hint, self.ngram_max,
                                               self.ngram_min))
        ids, self.draft_class, match, sub = h.ask(pos0, int(id_last), n_max, hint)
        if match is not None:
            self.last_match = match
        if sub is not None:
            j, pair = sub[0], (sub[1], sub[2])
            if j == 1 and self._probing and pair not in self._renames:
                ids = ids[:SUB_PROBE]
            # accepted (in full when it was a probe): the replacement is a rename to trust
            self._probe = (pair, len(ids) if j == 1 else 1)
        return Draft(ids=ids)

    def class_prior(self, cls):
        return CLASS_PRIOR.get(cls)

    def accept(self, n_accepted):
        if self._probe is not None:
            if n_accepted >= self._probe[1]:
                self._renames.add(self._probe[0])
            self._probe = None
        # the rejected drafts leave the history
        self._h.truncate(self._pos0 + n_accepted + 1)

    def reset(self):
        self._h.reset()             # (absorb stays bound to it)
        self._renames, self._probe = set(), None
