"""Unigram language-model tokenizer (``tokenizer.ggml.model = t5``): SentencePiece's precompiled
normalization map, then the best-scoring segmentation (Viterbi) over the normalized bytes.

The precompiled charsmap is ``u32 size | size bytes of a double array | replacement strings``.
The double array is a trie over input bytes, XOR-compressed: each 32-bit node packs BASE
(bits 10-30, shifted left by 8 when bit 9 is set), LCHECK (bits 0-7, plus bit 31) and LEAF
(bit 8); a leaf's child holds the offset of a NUL-terminated replacement string.
"""
from __future__ import annotations

import numpy as np

_SPACE_MARK = "\u2581".encode("utf-8")


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
        data = text.encode("utf-8")
        out = bytearray()
        prepended = in_word = False
        pos = 0
        while pos < len(data):
            chunk, used = self._normalize_prefix(data, pos)
            for c in chunk:
                if c != 0x20:
                    if not in_word:
                        in_word = True
                        if (self.prepend_space and not prepended) or self.merge_spaces:
                            out += self.space
                            prepended = True
                    out.append(c)
                else:
                    in_word = False
                    if not self.merge_spaces:
                        out += self.space
            pos += used
        return bytes(out)

    def tokenize(self, text: str, out: list) -> None:
        s = self.normalize(text)
        n = len(s)
        if n == 0:
            return
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
        out.extend(reversed(res))
