"""SentencePiece-style BPE (``tokenizer.ggml.model = llama``) and BERT WordPiece (``bert``)."""
from __future__ import annotations

import heapq
import re
import unicodedata

from .unicode_split import WHITESPACE, codepoint_class, to_lower


_WORDS = re.compile("\u2581+[^\u2581]*|[^\u2581]+")


def spans_no_space_boundary(tokens) -> bool:
    """True when no token holds U+2581 right after another character than U+2581: then no
    merge can cross the boundary before a space that follows a non-space, and each such word
    can be tokenized on its own (same result, and cacheable)."""
    mark = "\u2581"
    for t in tokens:
        k = t.find(mark, 1)
        while k > 0:
            if t[k - 1] != mark:
                return False
            k = t.find(mark, k + 1)
    return True


def spm_tokenize_words(text: str, token_to_id: dict, scores: list, byte_token, cache: dict, out: list) -> None:
    """spm_tokenize word by word (valid when :func:`spans_no_space_boundary` holds)."""
    get = cache.get
    for w in _WORDS.findall(text):
        ids = get(w)
        if ids is None:
            tmp: list = []
            spm_tokenize(w, token_to_id, scores, byte_token, tmp)
            ids = tuple(tmp)
            if len(cache) < 500_000:
                cache[w] = ids
        out.extend(ids)


def spm_tokenize(text: str, token_to_id: dict, scores: list, byte_token, out: list) -> None:
    """Merge adjacent pieces whose concatenation is a token, highest score first (leftmost on
    ties), until none is left; pieces that are not tokens become one byte token per UTF-8 byte.
    `byte_token(b)` gives the id of byte b."""
    sym = list(text)
    n = len(sym)
    if n == 0:
        return
    if n <= 256:
        _spm_short(sym, token_to_id, scores, byte_token, out)
        return
    nxt = list(range(1, n)) + [-1]
    prv = list(range(-1, n - 1))
    heap = []
    get = token_to_id.get

    def push(a, b):
        if a < 0 or b < 0:
            return
        t = sym[a] + sym[b]
        tid = get(t)
        if tid is not None:
            # max-heap on score, then min on left index
            heapq.heappush(heap, (-scores[tid], a, b, len(t)))

    for i in range(n - 1):
        push(i, i + 1)
    while heap:
        _, a, b, size = heapq.heappop(heap)
        sa, sb = sym[a], sym[b]
        if not sa or not sb or len(sa) + len(sb) != size or nxt[a] != b:
            continue
        sym[a] = sa + sb
        sym[b] = ""
        nxt[a] = nxt[b]
        if nxt[b] >= 0:
            prv[nxt[b]] = a
        push(prv[a], a)
        push(a, nxt[a])
    i = 0
    while i != -1:
        s = sym[i]
        tid = get(s)
        if tid is not None:
            out.append(tid)
        else:
            for byte in s.encode("utf-8"):
                out.append(byte_token(byte))
        i = nxt[i]


def _spm_short(sym: list, token_to_id: dict, scores: list, byte_token, out: list) -> None:
    """The same merge order, keeping the score of every adjacent pair in a list (faster than
    the heap on short words)."""
    get = token_to_id.get
    none = float("-inf")

    def pair_score(a, b):
        tid = get(a + b)
        return none if tid is None else scores[tid]

    r = [pair_score(sym[i], sym[i + 1]) for i in range(len(sym) - 1)]
    while r:
        best = max(r)
        if best == none:
            break
        i = r.index(best)
        sym[i:i + 2] = [sym[i] + sym[i + 1]]
        del r[i]
        if i > 0:
            r[i - 1] = pair_score(sym[i - 1], sym[i])
        if i < len(r):
            r[i] = pair_score(sym[i], sym[i + 1])
    for s in sym:
        tid = get(s)
        if tid is not None:
            out.append(tid)
        else:
            for byte in s.encode("utf-8"):
                out.append(byte_token(byte))


# ---------------------------------------------------------------- WordPiece
def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B920 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def _first_of_nfd(ch: str) -> str:
    return unicodedata.normalize("NFD", ch)[0]


def wpm_words(text: str, lowercase: bool, strip_accents: bool) -> list[str]:
    """BERT's basic split: whitespace separates words; control characters vanish; punctuation,
    ASCII symbols and CJK ideographs become one-character words."""
    words = [""]
    for ch in text:
        if strip_accents:
            ch = _first_of_nfd(ch)
        if ch in WHITESPACE:
            if words[-1]:
                words.append("")
            continue
        cls = codepoint_class(ch)
        if ch == "\0" or ch == "\ufffd" or cls == "C":
            continue
        if strip_accents and cls == "M":
            continue
        s = to_lower(ch) if lowercase else ch
        cp = ord(ch)
        if cls == "P" or (cp < 0x7F and cls == "S") or _is_cjk(cp):
            if words[-1]:
                words.append("")
            words[-1] = s
            words.append("")
        else:
            words[-1] += s
    if not words[-1]:
        words.pop()
    return words


_WHITESPACE_RUNS = re.compile("[" + "".join(sorted(WHITESPACE)) + "]+")


def wpm_tokenize(text: str, token_to_id: dict, max_token_len: int, unk_id, lowercase: bool,
                 strip_accents: bool, out: list, cache: dict | None = None) -> None:
    """Greedy longest-match over each word prefixed by U+2581; a word with an unmatchable
    position becomes the unknown token. Lengths count UTF-8 bytes, as the vocabulary does.
    Whitespace ends every word, so whitespace-separated chunks are cached independently."""
    if cache is None:
        _wpm_chunk(text, token_to_id, max_token_len, unk_id, lowercase, strip_accents, out)
        return
    for chunk in _WHITESPACE_RUNS.split(text):
        if not chunk:
            continue
        ids = cache.get(chunk)
        if ids is None:
            tmp: list = []
            _wpm_chunk(chunk, token_to_id, max_token_len, unk_id, lowercase, strip_accents, tmp)
            ids = tuple(tmp)
            if len(cache) < 500_000:
                cache[chunk] = ids
        out.extend(ids)


def _wpm_chunk(text, token_to_id, max_token_len, unk_id, lowercase, strip_accents, out) -> None:
    get = token_to_id.get
    for word in wpm_words(text, lowercase, strip_accents):
        if not word:
            continue
        w = "\u2581" + word
        raw = w.encode("utf-8")
        n = len(raw)
        start = len(out)
        i = 0
        while i < n:
            match = False
            for j in range(min(n, i + max_token_len + 1), i, -1):
                try:
                    piece = raw[i:j].decode("utf-8")
                except UnicodeDecodeError:
                    continue
                tid = get(piece)
                if tid is not None:
                    out.append(tid)
                    match = True
                    i = j
                    break
            if not match:
                del out[start:]
                break
        if len(out) == start:
            out.append(unk_id)
