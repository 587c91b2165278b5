"""Unigram language-model tokenizer (``tokenizer.ggml.model = t5``): SentencePiece's precompiled
normalization map, then the best-scoring segmentation (Viterbi) over the normalized bytes.

The precompiled charsmap is ``u32 size | size bytes of a double array | replacement strings``.
The double array is a trie over input bytes, XOR-compressed: each 32-bit node packs BASE
(bits 10-30, shifted left by 8 when bit 9 is set), LCHECK (bits 0-7, plus bit 31) and LEAF
(bit 8); a leaf's child holds the offset of a NUL-terminated replacement string.
"""
from __future__ import annotations

import re

import numpy as np

_SPACE_MARK = "\u2581".encode("utf-8")


# A word: a run of space marks and what follows up to the next mark (no token spans the
# boundary before a mark that follows another character, so words segment independently).
_WORDS = re.compile(b"(?:\xe2\x96\x81)+(?:(?!\xe2\x96\x81).)*|(?:(?!\xe2\x96\x81).)+", re.DOTALL)


class CharsMap:
    """The precompiled normalization map: longest-prefix replacement of input bytes."""

    def __init__(self, blob: bytes):
        if len(blob) < 4:
            raise ValueError("precompiled_charsmap is too small for its size header")
        size = int.from_bytes(blob[:4], "little")
        if size + 4 >= len(blob) or size % 4:
            raise ValueError(f"precompiled_charsmap: double array of {size} bytes does not fit in {len(blob)}")
        self.nodes = np.frombuffer(blob, dtype="<u4", count=size // 4, offset=4).tolist()
        self.strings = blob[4 + size:]

    def starting_bytes(self) -> set[int]:
        """Bytes that begin at least one mapped sequence."""
        root = self._base(0)
        out = set()
        for c in range(1, 256):
            i = root ^ c
            if i < len(self.nodes) and self.nodes[i] & ((1 << 31) | 0xFF) == c:
                out.add(c)
        return out

    def _node(self, i: int) -> int:
        if i >= len(self.nodes):
            raise ValueError("precompiled_charsmap: index out of the double array")
        return self.nodes[i]

    def _base(self, i: int) -> int:
        n = self._node(i)
        return (n >> 10) << ((n & (1 << 9)) >> 6)

    def longest(self, data: bytes, start: int):
        """(replacement bytes, consumed) for the longest mapped prefix at `start`, or None."""
        best_len, best_off = 0, 0
        node = self._base(0)
        for pos in range(start, len(data)):
            c = data[pos]
            if c == 0:
                break
            node ^= c
            packed = self._node(node)
            if packed & ((1 << 31) | 0xFF) != c:
                break
            leaf = (packed >> 8) & 1
            node ^= self._base(node)
            if leaf:
                best_len = pos - start + 1
                best_off = self._node(node) & ((1 << 31) - 1)
        if not best_len:
            return None
        if best_off >= len(self.strings):
            raise ValueError("precompiled_charsmap: replacement offset out of bounds")
        end = self.strings.find(b"\0", best_off)
        if end < 0:
            raise ValueError("precompiled_charsmap: unterminated replacement string")
        return self.strings[best_off:end], best_len


class UgmTokenizer:
    def __init__(self, tokens, scores, attrs, unk_id, charsmap: CharsMap | None, add_space_prefix: bool,
                 remove_extra_whitespaces: bool, escape_whitespaces: bool = True,
                 normal=4, user_defined=16, unused=2):
        self.unk_id = unk_id
        self.charsmap = charsmap
        self.prepend_space = add_space_prefix
        self.merge_spaces = remove_extra_whitespaces
        self.space = _SPACE_MARK if escape_whitespaces else b" "
        self.matcher: dict[bytes, tuple[int, float]] = {}
        self.user_defined: set[bytes] = set()
        normal_scores = [s for s, a in zip(scores, attrs) if a & normal]
        self.unknown_score = (min(normal_scores) if normal_scores else 3.4028234663852886e38) - 10.0
        for i, (t, s, a) in enumerate(zip(tokens, scores, attrs)):
            b = t.encode("utf-8")
            if a & (normal | user_defined | unused):
                self.matcher[b] = (i, 0.0 if a & user_defined else float(s))
            if a & user_defined:
                self.user_defined.add(b)
        self.max_len = max((len(b) for b in self.matcher), default=1)
        self.max_user_len = max((len(b) for b in self.user_defined), default=0)
        slow = set(range(0x80, 0x100)) | {b[0] for b in self.user_defined if b}
        if charsmap is not None:
            slow |= charsmap.starting_bytes()
        # positions that need the general normalization step; other ASCII bytes map to themselves
        self._slow_start = re.compile(b"[" + b"".join(re.escape(bytes([c])) for c in sorted(slow)) + b"]")
        from .vocab_spm import spans_no_space_boundary
        splittable = escape_whitespaces and spans_no_space_boundary(tokens)
        self._cache = {} if splittable else None

    def _normalize_prefix(self, data: bytes, pos: int):
        for n in range(min(self.max_user_len, len(data) - pos), 0, -1):
            if data[pos:pos + n] in self.user_defined:
                return data[pos:pos + n], n
        if self.charsmap is not None:
            hit = self.charsmap.longest(data, pos)
            if hit is not None:
                return hit
        b = data[pos]
        n = 1 if b < 0x80 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4
        chunk = data[pos:pos + n]
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError:
            return b"\xef\xbf\xbd", 1
        return chunk, n

    def normalize(self, text: str) -> bytes:
        data = text.encode("utf-8", "surrogatepass")
        parts, pos = [], 0
        search = self._slow_start.search
        while pos < len(data):
            m = search(data, pos)
            if m is None:
                parts.append(data[pos:])
                break
            start = m.start()
            parts.append(data[pos:start])
            chunk, used = self._normalize_prefix(data, start)
            parts.append(chunk)
            pos = start + used
        norm = b"".join(parts)
        # spaces: merged into one mark before each word, or each kept as a mark with one
        # extra mark before the first word
        if self.merge_spaces:
            return b"".join(self.space + w for w in norm.split(b" ") if w)
        out = norm.replace(b" ", self.space)
        if self.prepend_space:
            first = len(norm) - len(norm.lstrip(b" "))
            if first < len(norm):
                k = first * len(self.space)
                out = out[:k] + self.space + out[k:]
        return out

    def tokenize(self, text: str, out: list) -> None:
        s = self.normalize(text)
        if self._cache is None:
            out.extend(self._viterbi(s))
            return
        get = self._cache.get
        prev_unknown = False
        for w in _WORDS.findall(s):
            ids = get(w)
            if ids is None:
                ids = self._viterbi(w)
                if len(self._cache) < 500_000:
                    self._cache[w] = ids
            if not ids:
                continue
            if prev_unknown and ids[0] == self.unk_id:
                ids = ids[1:]                     # a run of unknowns stays one token across words
            if ids:
                out.extend(ids)
                prev_unknown = ids[-1] == self.unk_id

    def _viterbi(self, s: bytes) -> tuple:
        n = len(s)
        if n == 0:
            return ()
        neg = -float("inf")
        best_score = [neg] * (n + 1)
        best_tok = [self.unk_id] * (n + 1)
        best_from = [0] * (n + 1)
        best_score[0] = 0.0
        matcher = self.matcher
        pos = 0
        while pos < n:
            b = s[pos]
            cp_len = min(1 if b < 0x80 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4, n - pos)
            base = best_score[pos]
            whole_char = False
            for end in range(pos + 1, min(n, pos + self.max_len) + 1):
                hit = matcher.get(s[pos:end])
                if hit is None:
                    continue
                if end - pos == cp_len:
                    whole_char = True
                score = base + hit[1]
                if score > best_score[end]:
                    best_score[end], best_tok[end], best_from[end] = score, hit[0], pos
            if not whole_char:
                end = pos + cp_len
                score = base + self.unknown_score
                if score > best_score[end]:
                    best_score[end], best_tok[end], best_from[end] = score, self.unk_id, pos
            pos += cp_len
        res = []
        prev_unknown = False
        i = n
        while True:
            tid = best_tok[i]
            unknown = tid == self.unk_id
            if not (prev_unknown and unknown):
                res.append(tid)
            if best_from[i] == 0:
                break
            prev_unknown = unknown
            i = best_from[i]
        return tuple(reversed(res))
