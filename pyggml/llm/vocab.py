"""Tokenizers from a GGUF vocabulary (``tokenizer.ggml.*`` keys), with llama.cpp's semantics.

    vocab = Vocab.load("model.gguf")            # or Vocab.from_kv(header.kv), Vocab.from_gguf_reader(r)
    ids = vocab.tokenize("Hello world", add_special=True, parse_special=False)
    text = vocab.detokenize(ids, remove_special=False, unparse_special=False)
    piece = vocab.token_to_piece(ids[0])        # bytes: a token may hold part of a UTF-8 character

Kinds: SPM (``llama``: score-ordered merges, ``<0xNN>`` byte fallback, a leading space),
BPE (``gpt2``/``gemma4``: ranked merges after the pre-tokenizer split named by
``tokenizer.ggml.pre``), WPM (``bert``: greedy longest match) and UGM (``t5``: SentencePiece
normalization map, then the best-scoring segmentation). Special tokens (control,
user-defined, unknown) are cut out of the text before tokenizing; control and unknown ones
only when ``parse_special`` is true.
"""
from __future__ import annotations

import os

from .unicode_split import CHAR_TO_BYTE
from .vocab_bpe import BpeTokenizer, parse_merges, pre_tokenizer
from .vocab_ugm import CharsMap, UgmTokenizer
from .vocab_spm import spans_no_space_boundary, spm_tokenize, spm_tokenize_words, wpm_tokenize

__all__ = ["Vocab", "TextStream", "tokenize", "detokenize", "token_to_piece",
           "ATTR_UNKNOWN", "ATTR_UNUSED", "ATTR_NORMAL", "ATTR_CONTROL", "ATTR_USER_DEFINED",
           "ATTR_BYTE", "ATTR_LSTRIP", "ATTR_RSTRIP"]

# Token attributes (bit flags) and the GGUF token types they come from.
ATTR_UNKNOWN, ATTR_UNUSED, ATTR_NORMAL, ATTR_CONTROL = 1, 2, 4, 8
ATTR_USER_DEFINED, ATTR_BYTE, ATTR_NORMALIZED, ATTR_LSTRIP, ATTR_RSTRIP = 16, 32, 64, 128, 256
_TYPE_TO_ATTR = {0: 0, 1: ATTR_NORMAL, 2: ATTR_UNKNOWN, 3: ATTR_CONTROL, 4: ATTR_USER_DEFINED,
                 5: ATTR_UNUSED, 6: ATTR_BYTE}
_SPECIAL = ATTR_CONTROL | ATTR_UNKNOWN
_C_SPACE = " \t\n\v\f\r"          # isspace() in the C locale
_SPACE_MARK = "\u2581"            # SentencePiece's visible space

_EOT_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
              "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>")
_EOG_TEXTS = frozenset(("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
                        "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                        "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
                        "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["))
_FIM_TEXTS = {
    "fim_pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
                "<|code_prefix|>", "<|prefix|>"),
    "fim_suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
                "<|code_suffix|>", "<|suffix|>"),
    "fim_mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
                "<|code_middle|>", "<|middle|>"),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}
_ID_KEYS = {"bos": "bos_token_id", "eos": "eos_token_id", "eot": "eot_token_id",
            "eom": "eom_token_id", "unk": "unknown_token_id", "sep": "seperator_token_id",
            "pad": "padding_token_id", "mask": "mask_token_id", "fim_pre": "fim_pre_token_id",
            "fim_suf": "fim_suf_token_id", "fim_mid": "fim_mid_token_id", "fim_pad": "fim_pad_token_id",
            "fim_rep": "fim_rep_token_id", "fim_sep": "fim_sep_token_id"}


class Vocab:
    """A tokenizer vocabulary. Build with :meth:`load`, :meth:`from_kv` or :meth:`from_gguf_reader`."""

    kind: str                 # "spm", "bpe" or "wpm"

    # ------------------------------------------------------------ construction
    @classmethod
    def load(cls, path) -> "Vocab":
        from .gguf_check import read_gguf_header
        return cls.from_kv(read_gguf_header(os.fspath(path), values=True).kv)

    @classmethod
    def from_gguf_reader(cls, reader) -> "Vocab":
        """From a ``gguf.GGUFReader`` (slow on large vocabularies: prefer :meth:`load`)."""
        kv = {}
        for name, field in reader.fields.items():
            if name.startswith("tokenizer.") or name.startswith("general."):
                kv[name] = _reader_field_value(field)
        return cls.from_kv(kv)

    @classmethod
    def from_kv(cls, kv: dict) -> "Vocab":
        self = cls()
        self._init(kv)
        return self

    def _init(self, kv: dict) -> None:
        def key(name, default=None):
            return kv.get("tokenizer.ggml." + name, default)

        model = key("model")
        if model is None:
            raise ValueError("GGUF has no tokenizer (tokenizer.ggml.model is missing)")
        self.model = model
        pre = key("pre") or "default"
        tokens = key("tokens")
        if not isinstance(tokens, list) or not tokens:
            raise ValueError("tokenizer.ggml.tokens is missing or empty")
        n = len(tokens)
        ids = dict.fromkeys(_ID_KEYS)
        self.add_bos = self.add_eos = self.add_sep = False
        self.add_space_prefix = False
        self.escape_whitespaces = False
        self.clean_spaces = True
        self.ignore_merges = False
        raw_utf8 = False
        patterns = ()
        if model == "llama":
            self.kind = "spm"
            ids.update(bos=1, eos=2, unk=0)
            self.add_space_prefix, self.clean_spaces, self.add_bos = True, False, True
            pre = "default"
        elif model == "bert":
            self.kind = "wpm"
            ids.update(bos=101, unk=100, sep=102, pad=0, mask=103)
            self.add_bos = self.add_sep = True
            pre = "default"
        elif model == "t5":
            self.kind = "ugm"
            ids.update(eos=1, unk=2, pad=0)
            self.add_eos, self.clean_spaces = True, False
            pre = "default"
        elif model in ("gpt2", "gemma4"):
            self.kind = "bpe"
            if model == "gemma4":
                pre = "gemma4"
            else:
                ids.update(bos=11, eos=11)
            patterns, opts = pre_tokenizer(pre)
            self.clean_spaces = "keep" not in opts
            self.ignore_merges = "ignore_merges" in opts
            self.add_bos = "add_bos" in opts
            if "no_bos" in opts:
                ids["bos"] = None
            self.escape_whitespaces = "escape_whitespaces" in opts
            raw_utf8 = "raw_utf8" in opts
        else:
            raise NotImplementedError(f"tokenizer '{model}' (tokenizer.ggml.model) is not supported: "
                                      f"pyggml implements llama (SPM), gpt2/gemma4 (BPE), bert (WPM) and t5 (UGM)")
        self.pre = pre
        self.add_space_prefix = bool(key("add_space_prefix", self.add_space_prefix))

        self.tokens = [t if t else f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
        scores = key("scores")
        self.scores = [float(s) for s in scores] if scores is not None else [0.0] * n
        types = key("token_type")
        self.attrs = [_TYPE_TO_ATTR.get(t, 0) for t in types] if types is not None else [ATTR_NORMAL] * n
        self.token_to_id = {t: i for i, t in enumerate(self.tokens)}
        self.max_token_len = max(len(t.encode("utf-8")) for t in self.tokens)

        for name, k in _ID_KEYS.items():
            if ids[name] is not None and ids[name] >= n:
                ids[name] = None
            v = key(k)
            if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < n:
                ids[name] = v
        for flag in ("add_bos", "add_eos", "add_sep"):
            v = key(flag + "_token")
            if v is not None:
                setattr(self, flag, bool(v))
        if pre == "gemma4":
            self.add_bos = True
        self.lowercase = bool(key("normalizer.lowercase", True))
        self.strip_accents = bool(key("normalizer.strip_accents", self.lowercase))

        self._detect_special_by_text(ids)
        for name, v in ids.items():
            setattr(self, name + "_id", v)

        self._bpe = None
        self._ugm = None
        self._wpm_cache = {} if self.kind == "wpm" else None
        if self.kind == "ugm":
            blob = key("precompiled_charsmap")
            charsmap = CharsMap(bytes(int(b) & 0xFF for b in blob)) if blob else None
            self._ugm = UgmTokenizer(self.tokens, self.scores, self.attrs, self.unk_id, charsmap,
                                     self.add_space_prefix, bool(key("remove_extra_whitespaces", False)))
        self._spm_cache = {} if self.kind == "spm" and spans_no_space_boundary(self.tokens) else None
        if self.kind == "bpe":
            merges = key("merges")
            if merges is None and pre == "kimi-k2":
                merges = []
            if merges is None:
                raise ValueError("tokenizer.ggml.merges is missing (required by a BPE vocabulary)")
            self._bpe = BpeTokenizer(self.token_to_id, parse_merges(merges), patterns,
                                     self.ignore_merges, byte_level=not raw_utf8,
                                     newline_runs_whole=(pre == "gemma4"))

        self.chat_template = kv.get("tokenizer.chat_template")
        self.chat_templates = {k[len("tokenizer.chat_template."):]: v for k, v in kv.items()
                               if k.startswith("tokenizer.chat_template.") and isinstance(v, str)}
        self._apply_model_attrs(kv.get("general.name") or "", kv.get("general.architecture") or "")
        self._special_ids = sorted((i for i, a in enumerate(self.attrs)
                                    if a & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)),
                                   key=lambda i: -len(self.tokens[i].encode("utf-8")))
        self._pieces = [self._piece(i) for i in range(n)]

    def _detect_special_by_text(self, ids: dict) -> None:
        """Find EOT/EOM/FIM tokens by their text when the GGUF does not name them, mark them
        control, and collect the end-of-generation set."""
        attrs, t2i = self.attrs, self.token_to_id
        # the first listed text present wins (e.g. <|eot_id|> over <|end_of_text|>)
        for name, texts in (("eot", _EOT_TEXTS), ("eom", ("<|eom_id|>",)), *_FIM_TEXTS.items()):
            if ids[name] is not None:
                continue
            for text in texts:
                if text in t2i:
                    ids[name] = t2i[text]
                    attrs[t2i[text]] |= ATTR_CONTROL
                    break
        for text, i in t2i.items():
            if attrs[i] & ATTR_CONTROL and not attrs[i] & ATTR_UNUSED and "unused" in text:
                attrs[i] |= ATTR_UNUSED
        eog = {ids[k] for k in ("fim_pad", "fim_rep", "fim_sep") if ids[k] is not None}
        for text, i in t2i.items():
            if text in _EOG_TEXTS:
                eog.add(i)
                attrs[i] |= ATTR_CONTROL
            if text in ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"):
                attrs[i] = ATTR_USER_DEFINED
        eog |= {ids[k] for k in ("eos", "eot", "eom") if ids[k] is not None}
        texts = {self.tokens[i]: i for i in eog}
        if "<|end|>" in texts and (("<|return|>" in texts and "<|call|>" in texts)
                                   or ("<|calls|>" in texts and "<|flush|>" in texts)):
            eog.discard(texts["<|end|>"])
            attrs[texts["<|end|>"]] = ATTR_USER_DEFINED
        if "</s>" in texts and ("<|tool_response>" in texts or "<|plamo:eos|>" in texts):
            eog.discard(texts["</s>"])
            attrs[texts["</s>"]] = ATTR_NORMAL
        self.eog_ids = frozenset(eog)

    def _apply_model_attrs(self, name: str, arch: str) -> None:
        """Strip rules some models attach to their special tokens."""
        name, t2i = name.lower(), self.token_to_id
        specials = [i for i, a in enumerate(self.attrs) if a & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)]
        if any(s in self.pre for s in ("jina-v2-de", "jina-v2-es", "jina-v2-code")) or \
                any(s in arch for s in ("nomic-bert-moe", "jina-bert-v3")):
            if "<mask>" in t2i:
                self.attrs[t2i["<mask>"]] |= ATTR_LSTRIP
        elif "phi-3" in name or "phi3" in name:
            for i in specials:
                self.attrs[i] |= ATTR_RSTRIP
            if "</s>" in t2i:
                self.attrs[t2i["</s>"]] |= ATTR_RSTRIP
            for t in ("<unk>", "<s>", "<|endoftext|>"):
                if t in t2i:
                    self.attrs[t2i[t]] &= ~ATTR_RSTRIP
        elif "modern-bert" in name and "[MASK]" in t2i:
            self.attrs[t2i["[MASK]"]] |= ATTR_LSTRIP

    # ------------------------------------------------------------ properties
    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def __repr__(self) -> str:
        return f"Vocab({self.kind.upper()}, model={self.model!r}, pre={self.pre!r}, n_tokens={len(self.tokens)})"

    def is_eog(self, token_id: int) -> bool:
        return token_id in self.eog_ids

    def is_control(self, token_id: int) -> bool:
        return bool(self.attrs[token_id] & ATTR_CONTROL)

    def token_text(self, token_id: int) -> str:
        return self.tokens[self._check_id(token_id)]

    def _check_id(self, token_id) -> int:
        if not isinstance(token_id, int) and hasattr(token_id, "__index__"):
            token_id = token_id.__index__()
        if not isinstance(token_id, int) or not 0 <= token_id < len(self.tokens):
            raise ValueError(f"token id {token_id!r} is out of range for a vocabulary of {len(self.tokens)} tokens")
        return token_id

    def byte_to_token(self, b: int) -> int:
        if self.kind == "spm":
            tid = self.token_to_id.get(f"<0x{b:02X}>")
            if tid is None:
                tid = self.token_to_id.get(chr(b)) if b < 0x80 else None
        else:
            from .unicode_split import BYTE_TO_CHAR
            tid = self.token_to_id.get(BYTE_TO_CHAR[b])
        if tid is None:
            if self.unk_id is not None:
                return self.unk_id
            raise ValueError(f"vocabulary has no token for byte 0x{b:02X} and no unknown token")
        return tid

    # ------------------------------------------------------------ tokenize
    def _partition(self, text: str, parse_special: bool) -> list:
        """Cut special tokens out of `text`, longest first: a list of (start, end) raw spans
        and token ids."""
        frags: list = [(0, len(text))]
        chars = set(text) if len(text) > 64 else None
        prefix_seen: dict[str, bool] = {}     # cheap filters before scanning the text per token
        for tid in self._special_ids:
            attr = self.attrs[tid]
            if not parse_special and attr & _SPECIAL:
                continue
            tok = self.tokens[tid]
            if chars is not None:
                if tok[0] not in chars:
                    continue
                absent = False
                for n in (2, 4, 8):             # shared prefixes ("<|", "[PAD") are checked once
                    if len(tok) <= n:
                        break
                    seen = prefix_seen.get(tok[:n])
                    if seen is None:
                        seen = prefix_seen[tok[:n]] = tok[:n] in text
                    if not seen:
                        absent = True
                        break
                if absent:
                    continue
            if tok not in text:
                continue
            out = []
            for fr in frags:
                if type(fr) is int:
                    out.append(fr)
                    continue
                s, e = fr
                while True:
                    m = text.find(tok, s, e)
                    if m < 0:
                        if s < e:
                            out.append((s, e))
                        break
                    left = m
                    if attr & ATTR_LSTRIP:
                        while left > s and text[left - 1] in _C_SPACE:
                            left -= 1
                    if left > s:
                        out.append((s, left))
                    out.append(tid)
                    s = m + len(tok)
                    if attr & ATTR_RSTRIP:
                        while s < e and text[s] in _C_SPACE:
                            s += 1
            frags = out
        return frags

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = False) -> list[int]:
        """Text -> token ids. `add_special`: add BOS/EOS (SEP for BERT) as the vocabulary asks;
        `parse_special`: turn control-token texts such as "<|im_start|>" into their ids."""
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", errors="replace")
        if not isinstance(text, str):
            raise TypeError(f"tokenize: text must be str or bytes, got {type(text).__name__}")
        frags = self._partition(text, parse_special) if text else []
        out: list[int] = []
        kind = self.kind
        if add_special and (self.add_bos or kind == "wpm"):
            if self.bos_id is None:
                raise ValueError("vocabulary asks for a BOS token but defines none")
            out.append(self.bos_id)
        if kind == "spm":
            prev_special = True
            for fr in frags:
                if type(fr) is int:
                    out.append(fr)
                    prev_special = True
                    continue
                piece = text[fr[0]:fr[1]]
                if self.add_space_prefix and prev_special:
                    piece = " " + piece
                piece = piece.replace(" ", _SPACE_MARK)
                if self._spm_cache is not None:
                    spm_tokenize_words(piece, self.token_to_id, self.scores, self.byte_to_token,
                                       self._spm_cache, out)
                else:
                    spm_tokenize(piece, self.token_to_id, self.scores, self.byte_to_token, out)
                prev_special = False
        elif kind == "bpe":
            for fr in frags:
                if type(fr) is int:
                    out.append(fr)
                    continue
                piece = text[fr[0]:fr[1]]
                if self.escape_whitespaces:
                    piece = piece.replace(" ", _SPACE_MARK)
                self._bpe.tokenize(piece, out)
        elif kind == "ugm":
            for fr in frags:
                if type(fr) is int:
                    out.append(fr)
                    continue
                self._ugm.tokenize(text[fr[0]:fr[1]], out)
        else:
            for fr in frags:
                if type(fr) is int:
                    out.append(fr)
                    continue
                wpm_tokenize(text[fr[0]:fr[1]], self.token_to_id, self.max_token_len, self.unk_id,
                             self.lowercase, self.strip_accents, out, self._wpm_cache)
        if add_special:
            if kind == "wpm":
                if self.sep_id is None:
                    raise ValueError("vocabulary asks for a SEP token but defines none")
                out.append(self.sep_id)
            elif self.add_eos:
                if self.eos_id is None:
                    raise ValueError("vocabulary asks for an EOS token but defines none")
                out.append(self.eos_id)
        return out

    # ------------------------------------------------------------ detokenize
    def _piece(self, tid: int) -> bytes:
        """The bytes a token stands for when special tokens are rendered."""
        text, attr = self.tokens[tid], self.attrs[tid]
        if attr & (_SPECIAL | ATTR_USER_DEFINED):
            return text.encode("utf-8")
        if attr & ATTR_NORMAL:
            if self.kind != "bpe" or self.escape_whitespaces:
                return text.replace(_SPACE_MARK, " ").encode("utf-8")
            out = bytearray()
            for ch in text:
                b = CHAR_TO_BYTE.get(ch)
                if b is None:
                    out += b"[UNK_BYTE_0x" + ch.encode("utf-8").hex().encode() + text.encode("utf-8") + b"]"
                else:
                    out.append(b)
            return bytes(out)
        if attr & ATTR_BYTE:
            return bytes([int(text[3:5], 16)])
        return b""

    def token_to_piece(self, token_id: int, special: bool = True) -> bytes:
        """The bytes of one token (llama_token_to_piece); control/unknown tokens give b"" unless
        `special`."""
        tid = self._check_id(token_id)
        if not special and self.attrs[tid] & _SPECIAL:
            return b""
        return self._pieces[tid]

    def detokenize_bytes(self, ids, remove_special: bool = False, unparse_special: bool = False) -> bytes:
        ids = [self._check_id(i) for i in ids]
        remove_space = self.add_space_prefix
        if remove_special and self.add_bos and ids and ids[0] == self.bos_id:
            remove_space = False
            ids = ids[1:]
        if remove_special and self.add_eos and ids and ids[-1] == self.eos_id:
            ids = ids[:-1]
        parts = []
        for tid in ids:
            p = self.token_to_piece(tid, special=unparse_special)
            if remove_space and p.startswith(b" "):
                p = p[1:]
            remove_space = False
            parts.append(p)
        raw = b"".join(parts)
        return _clean_spaces(raw) if self.clean_spaces else raw

    def text_stream(self, special: bool = False) -> "TextStream":
        """An incremental decoder for streaming generated tokens as text."""
        return TextStream(self, special)

    def detokenize(self, ids, remove_special: bool = False, unparse_special: bool = False) -> str:
        """Token ids -> text (llama_detokenize); invalid UTF-8 becomes U+FFFD."""
        return self.detokenize_bytes(ids, remove_special, unparse_special).decode("utf-8", errors="replace")


def _reader_field_value(field):
    """A GGUFReader field as a Python value (``contents()`` where the gguf package has it)."""
    if hasattr(field, "contents"):
        return field.contents()
    string, array = 8, 9                      # GGUF value types

    def one(i, t):
        part = field.parts[i]
        return bytes(part).decode("utf-8", errors="replace") if t == string else part.tolist()[0]
    types = [int(t) for t in field.types]
    if types[0] == array:
        return [one(i, types[1]) for i in field.data]
    return one(field.data[0], types[0])


class TextStream:
    """Turns generated token ids into text as they arrive: a token may end inside a UTF-8
    character, so bytes are held back until the character completes.

        stream = vocab.text_stream()
        for tid in generated:
            print(stream.push(tid), end="", flush=True)
        print(stream.flush())
    """

    def __init__(self, vocab: "Vocab", special: bool = False):
        import codecs
        self.vocab, self.special = vocab, special
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        return self._decoder.decode(self.vocab.token_to_piece(token_id, special=self.special))

    def flush(self) -> str:
        """Whatever is held back (an incomplete character becomes U+FFFD)."""
        return self._decoder.decode(b"", final=True)


def _clean_spaces(raw: bytes) -> bytes:
    """Undo the spaces that word-level tokenizers put before punctuation and contractions:
    " ?", " !", " .", " ," lose the space, " ' " loses both, " 's", " 'm", " 're", " 've" lose it."""
    if len(raw) < 2:
        return raw
    src = raw
    out = bytearray(src[:1])
    for i in range(1, len(src)):
        x = src[i]
        if src[i - 1] == 0x20 and x in b"?!.,":
            out.pop()
        out.append(x)
    src = bytearray(out)
    out = bytearray(src[:1])
    i = 1
    while i < len(src):
        x = src[i]
        if x == 0x27 and i + 1 < len(src) and src[i - 1] == 0x20 and src[i + 1] == 0x20:
            out.pop()
            i += 1
            src[i] = 0                      # the next space is dropped and no longer counts as one
        out.append(x)
        i += 1
    src = bytes(out)
    out = bytearray(src[:1])
    n = len(src)
    for i in range(1, n):
        x = src[i]
        if src[i - 1] == 0x20 and x == 0x27 and i + 1 < n:
            x1 = src[i + 1]
            if x1 in b"sm":
                out.pop()
            elif x1 not in b"td" and i + 2 < n and (x1, src[i + 2]) in ((0x72, 0x65), (0x76, 0x65)):
                out.pop()
        out.append(x)
    return bytes(out)


# Function forms, for callers that hold a Vocab.
def tokenize(vocab: Vocab, text: str, add_special: bool = True, parse_special: bool = False) -> list[int]:
    return vocab.tokenize(text, add_special, parse_special)


def detokenize(vocab: Vocab, ids, remove_special: bool = False, unparse_special: bool = False) -> str:
    return vocab.detokenize(ids, remove_special, unparse_special)


def token_to_piece(vocab: Vocab, token_id: int, special: bool = True) -> bytes:
    return vocab.token_to_piece(token_id, special)
