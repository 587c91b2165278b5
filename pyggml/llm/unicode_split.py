"""Unicode facts for the tokenizers: codepoint classes, GPT-2's byte-to-text mapping, and the
pre-tokenizer regex splits.

The stdlib ``re`` has no ``\\p{L}``-style classes, so the splits use the "collapsed text"
technique: every non-ASCII codepoint is replaced by one marker character standing for its
class (letter, number, punctuation, accent mark, symbol, whitespace, other), and every
``\\p{X}`` in a pattern becomes a character class of that marker plus the ASCII members of X.
A regex over the collapsed text then matches exactly where the Unicode-aware regex would
match over the original (the two texts have the same length), and the pieces are cut from
the original text. Patterns with literal non-ASCII ranges and no ``\\p{..}`` run on the
original text, with non-ASCII whitespace folded to ``\\v`` so that ASCII ``\\s`` sees it.

Classes come from ``unicodedata`` (Unicode 14 on Python 3.11) plus the codepoints assigned in
Unicode 15.0/15.1, so that all Python versions classify like a 15.1 table.
"""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["codepoint_class", "is_whitespace", "collapse", "byte_encode", "byte_decode_char",
           "BYTE_TO_CHAR", "CHAR_TO_BYTE", "compile_split", "regex_split", "PreSplitter", "to_lower"]

# Class names: the first letter of the Unicode general category, with 'U' for unassigned.
LETTER, NUMBER, PUNCT, MARK, SYMBOL, SEPARATOR, CONTROL, UNDEFINED = "LNPMSZCU"

# The White_Space property (the \s of Unicode regex engines).
WHITESPACE = frozenset(map(chr, [
    0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
    0x2028, 0x2029, 0x202F, 0x205F, 0x3000]))

# Codepoints assigned in Unicode 15.0 and 15.1 (unassigned in Python 3.11's Unicode 14 data):
# (first, last, class).
_UNICODE_15_ADDITIONS = (
    (0xCF3, 0xCF3, "M"), (0xECE, 0xECE, "M"), (0x2FFC, 0x2FFF, "S"), (0x31EF, 0x31EF, "S"),
    (0x10EFD, 0x10EFF, "M"), (0x1123F, 0x11240, "L"), (0x11241, 0x11241, "M"),
    (0x11B00, 0x11B09, "P"), (0x11F00, 0x11F01, "M"), (0x11F02, 0x11F02, "L"),
    (0x11F03, 0x11F03, "M"), (0x11F04, 0x11F10, "L"), (0x11F12, 0x11F33, "L"),
    (0x11F34, 0x11F3A, "M"), (0x11F3E, 0x11F42, "M"), (0x11F43, 0x11F4F, "P"),
    (0x11F50, 0x11F59, "N"), (0x1342F, 0x1342F, "L"), (0x13439, 0x1343F, "C"),
    (0x13440, 0x13440, "M"), (0x13441, 0x13446, "L"), (0x13447, 0x13455, "M"),
    (0x1B132, 0x1B132, "L"), (0x1B155, 0x1B155, "L"), (0x1D2C0, 0x1D2D3, "N"),
    (0x1DF25, 0x1DF2A, "L"), (0x1E030, 0x1E06D, "L"), (0x1E08F, 0x1E08F, "M"),
    (0x1E4D0, 0x1E4EB, "L"), (0x1E4EC, 0x1E4EF, "M"), (0x1E4F0, 0x1E4F9, "N"),
    (0x1F6DC, 0x1F6DC, "S"), (0x1F774, 0x1F776, "S"), (0x1F77B, 0x1F77F, "S"),
    (0x1F7D9, 0x1F7D9, "S"), (0x1FA75, 0x1FA77, "S"), (0x1FA87, 0x1FA88, "S"),
    (0x1FAAD, 0x1FAAF, "S"), (0x1FABB, 0x1FABD, "S"), (0x1FABF, 0x1FABF, "S"),
    (0x1FACE, 0x1FACF, "S"), (0x1FADA, 0x1FADB, "S"), (0x1FAE8, 0x1FAE8, "S"),
    (0x1FAF7, 0x1FAF8, "S"), (0x2B739, 0x2B739, "L"), (0x2EBF0, 0x2EE5D, "L"),
    (0x31350, 0x323AF, "L"),
)


def codepoint_class(ch: str) -> str:
    """One of L N P M S Z C (general category's first letter) or U (unassigned)."""
    cat = unicodedata.category(ch)
    if cat != "Cn":
        return cat[0]
    cp = ord(ch)
    for lo, hi, cls in _UNICODE_15_ADDITIONS:
        if lo <= cp <= hi:
            return cls
    return UNDEFINED


def is_whitespace(ch: str) -> bool:
    return ch in WHITESPACE


def to_lower(ch: str) -> str:
    """Simple one-codepoint lowercase (multi-codepoint expansions keep the original)."""
    low = ch.lower()
    return low if len(low) == 1 else ch


# ---------------------------------------------------------------- collapsed text
# Marker characters for the classes of non-ASCII codepoints in the collapsed text.
_MARKER = {NUMBER: "\xd1", LETTER: "\xd2", PUNCT: "\xd3", MARK: "\xd4", SYMBOL: "\xd5"}
_MARKER_OTHER = "\xd0"
_WS_FALLBACK = "\x0b"


class _CollapseTable(dict):
    """str.translate table: ASCII maps to itself, other codepoints to their class marker.
    Filled lazily: a text touches a few hundred distinct codepoints, not 1.1 million."""

    def __missing__(self, cp: int) -> str:
        ch = chr(cp)
        if ch in WHITESPACE:
            out = _WS_FALLBACK
        else:
            out = _MARKER.get(codepoint_class(ch), _MARKER_OTHER)
        self[cp] = out
        return out


_COLLAPSE = _CollapseTable((i, chr(i)) for i in range(128))


class _WhitespaceTable(dict):
    """str.translate table folding non-ASCII whitespace to \\v and keeping everything else."""

    def __missing__(self, cp: int):
        out = _WS_FALLBACK if cp >= 128 and chr(cp) in WHITESPACE else chr(cp)
        self[cp] = out
        return out


_FOLD_WS = _WhitespaceTable()


def collapse(text: str) -> str:
    return text.translate(_COLLAPSE)


def _ascii_members(cls: str) -> str:
    """The ASCII members of a class, escaped for use inside [...]."""
    return "".join(re.escape(chr(i)) for i in range(128)
                   if chr(i) not in WHITESPACE and codepoint_class(chr(i)) == cls)


_CATEGORY_CLASS = {"N": NUMBER, "L": LETTER, "P": PUNCT, "M": MARK, "S": SYMBOL,
                   "Lu": LETTER, "Ll": LETTER, "Lt": LETTER, "Lm": LETTER, "Lo": LETTER}
_PROP = re.compile(r"\\p\{(\w+)\}")


def _translate_pattern(pattern: str) -> tuple[str, bool]:
    """A pattern in the tokenizers' regex dialect -> (Python pattern, runs on collapsed text)."""
    uses_classes = bool(_PROP.search(pattern))
    if uses_classes and any(ord(c) >= 128 for c in pattern):
        raise ValueError(f"pre-tokenizer regex mixes \\p{{..}} classes and non-ASCII characters: {pattern!r}")
    out, inside, i = [], False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            m = _PROP.match(pattern, i)
            if m:
                name = m.group(1)
                if name not in _CATEGORY_CLASS:
                    raise ValueError(f"pre-tokenizer regex uses unsupported class \\p{{{name}}}: {pattern!r}")
                cls = _CATEGORY_CLASS[name]
                body = _MARKER[cls] + _ascii_members(cls)
                out.append(body if inside else "[" + body + "]")
                i = m.end()
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[" and not inside:
            inside = True
        elif c == "]" and inside:
            inside = False
        elif c == "$" and not inside:
            c = r"\Z"                      # end of the piece only (Python's $ also matches before a final \n)
        out.append(c)
        i += 1
    return "".join(out), uses_classes


def _digit_groups(subject: str) -> list[int]:
    """Digit runs split into groups of three from the right (the leading group has the rest);
    the other characters stay attached to the group that follows them (the reference split
    emits a piece only where a digit group ends)."""
    out, prev, pos, n = [], 0, 0, len(subject)
    while pos < n:
        if subject[pos] in _DIGITS:
            start = pos
            while pos < n and subject[pos] in _DIGITS:
                pos += 1
            rem = (pos - start) % 3
            for stop in ([start + rem] if rem else []) + list(range(start + rem + 3, pos + 1, 3)):
                out.append(stop - prev)
                prev = stop
            continue
        pos += 1
    if prev < n:
        out.append(n - prev)
    return out


_DIGITS = frozenset("0123456789" + _MARKER[NUMBER])   # numbers in the collapsed text


def is_han(cp: int) -> bool:
    """CJK ideographs (unified, extensions A-F, compatibility)."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0x2CEB0 <= cp <= 0x2EBEF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


_HAN_MARKER = "\xce"


class _HanCollapseTable(_CollapseTable):
    """The collapse table with Han ideographs on a marker of their own."""

    def __missing__(self, cp: int) -> str:
        out = _HAN_MARKER if is_han(cp) else _CollapseTable.__missing__(self, cp)
        self[cp] = out
        return out


_HAN_COLLAPSE = _HanCollapseTable((i, chr(i)) for i in range(128))
_L, _N = _MARKER[LETTER] + "A-Za-z", _MARKER[NUMBER] + "0-9"
# Kimi-K2's split: Han runs, then the llama-3 split with letters that exclude Han.
_KIMI = re.compile(
    f"{_HAN_MARKER}+|[^\\r\\n{_L}{_N}{_HAN_MARKER}]?[{_L}]+(?:'[sStTmMdD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?"
    f"|[{_N}]{{1,3}}| ?[^\\s{_L}{_N}{_HAN_MARKER}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", re.ASCII)


def _kimi_split(subject: str) -> list[int]:
    return _pieces(_KIMI, None, subject.translate(_HAN_COLLAPSE))


# Patterns the reference replaces by hand-written splits (matched by their exact text):
# pattern -> (function, runs on collapsed text).
_CUSTOM = {"\\p{AFMoE_digits}": (_digit_groups, True), "\\d{1,3}(?=(?:\\d{3})*\\b)": (_digit_groups, True),
           "\\p{Han}+": (_kimi_split, False)}


@lru_cache(maxsize=None)
def compile_split(pattern: str):
    """Compile a pre-tokenizer pattern: (compiled regex, runs on collapsed text, splitter).
    The splitter is the pattern wrapped in one capturing group, for ``re.split`` (None when
    the pattern has groups of its own); for a hand-written split it is that function."""
    if pattern in _CUSTOM:
        fn, collapsed = _CUSTOM[pattern]
        return None, collapsed, fn
    py, collapsed = _translate_pattern(pattern)
    rx = re.compile(py, re.ASCII)
    splitter = re.compile("(" + py + ")", re.ASCII) if rx.groups == 0 else None
    return rx, collapsed, splitter


def _pieces(rx, splitter, subject: str) -> list[int]:
    """Lengths of the matches and of the unmatched stretches between them, in order."""
    if rx is None:
        return splitter(subject)
    if splitter is not None:
        return [len(p) for p in splitter.split(subject) if p]
    out, prev = [], 0
    for m in rx.finditer(subject):
        a, b = m.span()
        if a > prev:
            out.append(a - prev)
        if b > a:
            out.append(b - a)
        prev = max(prev, b)
    if prev < len(subject):
        out.append(len(subject) - prev)
    return out


class PreSplitter:
    """Split text by each pattern in turn: every piece from the previous pattern is split into
    the matches and the unmatched stretches between them (both kept, in order).

    The first pattern runs over the whole text; what the later ones do to a piece depends on
    the piece alone, so those results are cached by piece (pieces are mostly words and lines,
    which repeat)."""

    def __init__(self, patterns, cache_size: int = 200_000):
        self.compiled = [compile_split(p) for p in patterns]
        self.cache_size = cache_size
        self._cache: dict = {}

    @staticmethod
    def _subjects(text: str, need_collapsed: bool, need_folded: bool):
        if text.isascii():
            return text, text
        return (collapse(text) if need_collapsed else None,
                text.translate(_FOLD_WS) if need_folded else None)

    def _lengths(self, text: str, level: int) -> list[int]:
        """Final piece lengths of `text` after patterns[level:]."""
        compiled = self.compiled
        if level >= len(compiled):
            return [len(text)]
        rx, use_collapsed, splitter = compiled[level]
        collapsed, folded = self._subjects(text, use_collapsed, not use_collapsed)
        first = _pieces(rx, splitter, collapsed if use_collapsed else folded)
        if level + 1 == len(compiled):
            return first
        out, pos = [], 0
        cache, nxt = self._cache, level + 1
        for n in first:
            piece = text[pos:pos + n]
            pos += n
            key = (nxt, piece)
            sub = cache.get(key)
            if sub is None:
                sub = self._lengths(piece, nxt)
                if len(cache) < self.cache_size:
                    cache[key] = sub
            out.extend(sub)
        return out

    def __call__(self, text: str) -> list[str]:
        if not text:
            return []
        c = self.compiled
        if len(c) == 1 and c[0][0] is not None and c[0][2] is not None and text.isascii():
            return [p for p in c[0][2].split(text) if p]
        out, pos = [], 0
        for n in self._lengths(text, 0):
            out.append(text[pos:pos + n])
            pos += n
        return out


def regex_split(text: str, patterns) -> list[str]:
    """:class:`PreSplitter` applied once (no cache kept)."""
    return PreSplitter(patterns, cache_size=0)(text)


# ---------------------------------------------------------------- GPT-2 byte mapping
def _byte_to_char() -> list[str]:
    """GPT-2's reversible byte -> printable codepoint map: printable Latin-1 bytes map to
    themselves, the other 68 to U+0100 upwards in byte order."""
    keep = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    out, n = [], 0
    for b in range(256):
        if b in keep:
            out.append(chr(b))
        else:
            out.append(chr(256 + n))
            n += 1
    return out


BYTE_TO_CHAR: list[str] = _byte_to_char()
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in enumerate(BYTE_TO_CHAR)}
_BYTE_TABLE = {b: c for b, c in enumerate(BYTE_TO_CHAR)}


def byte_encode(word: str) -> str:
    """A text piece as GPT-2 byte-level characters (one per UTF-8 byte)."""
    return word.encode("utf-8", "surrogatepass").decode("latin-1").translate(_BYTE_TABLE)


def byte_decode_char(ch: str) -> int | None:
    return CHAR_TO_BYTE.get(ch)
