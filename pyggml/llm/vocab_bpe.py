"""Byte-pair encoding (``tokenizer.ggml.model = gpt2`` and ``gemma4``): the pre-tokenizer split
chosen by ``tokenizer.ggml.pre``, GPT-2's byte-level mapping, and rank-ordered merges."""
from __future__ import annotations

import heapq

from .unicode_split import PreSplitter, byte_encode

# ---------------------------------------------------------------- pre-tokenizer patterns
# The split patterns of each pre-tokenizer family, applied in order (each splits the pieces of
# the previous one). \p{Lu} .. \p{Lo} all mean "letter" in the collapsed-text technique.
# Non-ASCII characters are written as escapes so that no editor normalization can change them.
PATTERNS: dict[str, tuple[str, ...]] = {
    "llama3": (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
        "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    "jais2": (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
        "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)"
        "|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S"
        ")|\\s{1,2}(?!\\S)|\\s{1}",
    ),
    "dbrx": (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
        "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    "deepseek_llm": (
        "[\r\n]",
        "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295"
        "-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-"
        "\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5"
        "\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-"
        "\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-"
        "\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-"
        "\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-"
        "\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e"
        "\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-"
        "\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17"
        "\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-"
        "\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-"
        "\U0001e943]+",
        "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
        "\\s+$",
        "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
        "\\p{N}+",
    ),
    "deepseek3_llm": (
        "\\p{N}{1,3}",
        "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
        "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    ),
    "spark2_5": (
        "\\p{N}{1,3}",
        "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
        "\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
        "\\p{N}",
    ),
    "youtu": (
        "[\uac00-\ud7a3\u3131-\u318e]+|[\uff01\u2026\u201c\u201d\u2018\u2019\u2014\uff1a\uff1b"
        "\uff0c\u3001-\u303f\ufe30-\ufe4f]+|[\u3105-\u312f]+|[\u4e00-\u9fa5\u3040-\u309f\u30a0-"
        "\u30ff]+",
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
        "+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{L"
        "u}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'["
        "vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s"
        "+(?!\\S)|\\s+",
    ),
    "deepseek_coder": (
        "[\r\n]",
        "\\s?\\p{L}+",
        "\\s?\\p{P}+",
        "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
        "\\p{N}",
    ),
    "falcon": (
        "[\\p{P}\\$\\+<=>\\^~\\|`]+",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        "[0-9][0-9][0-9]",
    ),
    "starcoder": (
        "\\p{N}",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    ),
    "gpt2": (
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    ),
    "stablelm2": (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
        "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    "qwen35": (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}"
        "\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    "poro": (
        " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+",
    ),
    "chatglm4": (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
        "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    "viking": (
        " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+",
        "\\p{N}",
    ),
    "tekken": (
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N"
        "}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*"
        "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    "chameleon": (
        "<sentinel:[0-9]+>",
        "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
        "([\\t\\n]|    |  )",
        "\\p{N}",
        "[\\p{P}!-/:-@\\[-`{-~]",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    ),
    "gpt4o": (
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR]"
        "[eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?="
        "[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3"
        "}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    "granite_emb_multi": (
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]"
        "|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{"
        "M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL"
        "][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    "tiny_aya": (
        "\\d{1,3}(?=(?:\\d{3})*\\b)",
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
        "+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{L"
        "u}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'["
        "vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]"
        "+|\\s+(?!\\S)|\\s+",
    ),
    "superbpe": (
        "\\p{N}+",
        "(?=(\\d{3})+(?!\\d))",
    ),
    "bailingmoe": (
        "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s"
        "\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    ),
    "seed_coder": (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
        "\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    "ufakzeka": (
        "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?"
        "!\\S)|\\s+",
    ),
    "grok_2": (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
        "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    "laguna": (
        "[^\\n]+|[\\n]+",
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
        "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    "exaone_moe": (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L"
        "}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?"
        "!\\S)|\\s+",
    ),
    "gemma4": (
        "[^\\n]+|[\\n]+",
    ),
    "sarvam_moe": (
        "[^\\n]+|[\\n]+",
    ),
    "minicpm5": (
        "\\p{N}{1,3}",
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
        "\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
    "whitespace": (
        "\\S+",
    ),
    "default": (
        "[\\p{P}\\$\\+<=>\\^~\\|]+",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        "\\p{N}+",
        "[0-9][0-9][0-9]",
    ),
    "kimi_k2": (
        "\\p{Han}+",
    ),
    "afmoe": (
        "\\p{AFMoE_digits}",
        "[\u4e00-\u9fff\u3400-\u4dbf\u8c48-\ufaff\u3040-\u309f\u30a0-\u30ff\uff65-\uff9f\u2f00-\u2fdf"
        "\u0e40-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f\uaa60-\uaa7f\ua9e0-\ua9ff\uac00-\ud7af"
        "\u1100-\u11ff]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
        "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ),
}

# tokenizer.ggml.pre -> (pattern family, options). Options: "keep" (no space cleaning when
# detokenizing), "ignore_merges" (a piece that is a token is taken whole), "add_bos",
# "no_bos" (no BOS token), "escape_whitespaces" (spaces become U+2581 before merging) and
# "raw_utf8" (merge over UTF-8 text instead of GPT-2's byte characters).
_PRE: dict[str, tuple[str, frozenset]] = {}


def _reg(names, patterns, *opts):
    for n in names.split():
        _PRE[n] = (patterns, frozenset(opts))


_reg("default", "default")
_reg("llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano", "llama3",
     "ignore_merges", "add_bos")
_reg("dbrx smaug-bpe", "dbrx")
_reg("deepseek-llm", "deepseek_llm", "keep")
_reg("deepseek-coder", "deepseek_coder", "keep")
_reg("deepseek-v3 hunyuan-dense joyai-llm hy_v4", "deepseek3_llm", "keep")
_reg("spark2_5", "spark2_5", "keep")
_reg("youtu", "youtu", "keep", "ignore_merges")
_reg("falcon", "falcon")
_reg("mpt olmo jais exaone4", "gpt2")
_reg("trillion granite-docling", "gpt2", "keep")
_reg("gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert "
     "jina-v1-en jina-v2-code roberta-bpe", "gpt2")
_reg("jais-2", "jais2")
_reg("starcoder refact codeshell exaone minerva-7b mellum2", "starcoder")
_reg("command-r smollm", "starcoder", "keep")
_reg("stablelm2 megrez", "stablelm2")
_reg("qwen2 deepseek-r1-qwen kormo f2llmv2 hunyuan solar-open", "stablelm2", "keep")
_reg("qwen35", "qwen35", "keep")
_reg("poro-chat", "poro", "keep")
_reg("bloom gpt3-finnish", "poro")
_reg("viking", "viking", "keep")
_reg("chatglm-bpe", "chatglm4", "no_bos")
_reg("glm4 glm5", "chatglm4", "no_bos", "ignore_merges")
_reg("tekken", "tekken", "keep", "ignore_merges", "add_bos")
_reg("chameleon", "chameleon", "keep", "add_bos")
_reg("gpt-4o llama4 kanana2 talkie minimax-m2", "gpt4o", "keep")
_reg("granite-embed-multi-97m", "granite_emb_multi", "keep", "ignore_merges")
_reg("tiny_aya cohere2moe", "tiny_aya", "keep")
_reg("superbpe", "superbpe", "keep")
_reg("bailingmoe bailingmoe2 llada-moe", "bailingmoe", "keep")
_reg("seed-coder", "seed_coder", "keep")
_reg("ufakzeka", "ufakzeka", "keep")
_reg("grok-2", "grok_2", "keep")
_reg("laguna", "laguna", "keep")
_reg("exaone-moe", "exaone_moe")
_reg("minicpm5", "minicpm5", "ignore_merges")
_reg("gemma4 granite-embed-multi-311m", "gemma4", "escape_whitespaces", "raw_utf8")
_reg("sarvam-moe", "sarvam_moe", "keep", "escape_whitespaces", "raw_utf8")
_reg("whitespace", "whitespace", "raw_utf8")
_reg("afmoe", "afmoe", "keep")
_reg("kimi-k2", "kimi_k2", "keep")
def pre_tokenizer(name: str):
    """(patterns, options) for a tokenizer.ggml.pre value; ValueError for an unknown one."""
    if name not in _PRE:
        raise ValueError(f"unknown pre-tokenizer type '{name}' (tokenizer.ggml.pre); known: "
                         f"{', '.join(sorted(_PRE))}")
    key, opts = _PRE[name]
    return PATTERNS[key], opts


def parse_merges(merges) -> dict[tuple[str, str], int]:
    """'left right' strings -> {(left, right): rank}; the split is at the first space after
    the first character (a merge's left part may itself be a space)."""
    ranks = {}
    for i, m in enumerate(merges):
        pos = m.find(" ", 1)
        pair = (m[:pos], m[pos + 1:]) if pos >= 0 else ("", "")
        ranks.setdefault(pair, i)
    return ranks


_NO_RANK = 1 << 62


class BpeTokenizer:
    def __init__(self, token_to_id: dict, ranks: dict, patterns, ignore_merges: bool,
                 byte_level: bool, newline_runs_whole: bool):
        self.token_to_id = token_to_id
        self.ranks = ranks
        self.patterns = patterns
        self.split = PreSplitter(patterns)
        self.ignore_merges = ignore_merges
        self.byte_level = byte_level
        self.newline_runs_whole = newline_runs_whole
        self._cache: dict[str, tuple[int, ...]] = {}

    def tokenize(self, text: str, out: list) -> None:
        cache = self._cache              # piece of text -> ids (keyed before the byte mapping)
        get = cache.get
        for w in self.split(text):
            ids = get(w)
            if ids is None:
                ids = self._word(byte_encode(w) if self.byte_level else w)
                if len(cache) < 500_000:
                    cache[w] = ids
            out.extend(ids)

    def _word(self, word: str) -> tuple[int, ...]:
        tid = self.token_to_id.get(word)
        if tid is not None and (self.ignore_merges or
                                (self.newline_runs_whole and not word.strip("\n"))):
            return (tid,)
        symbols = self._merge(list(word))
        out = []
        for s in symbols:
            tid = self.token_to_id.get(s)
            if tid is not None:
                out.append(tid)
                continue
            for b in s.encode("utf-8"):         # fallback: one token per byte, when it exists
                if self.byte_level:
                    t = self.token_to_id.get(chr(b)) if b < 0x80 else None
                else:
                    t = self.token_to_id.get(f"<0x{b:02X}>")
                if t is not None:
                    out.append(t)
        return tuple(out)

    def _merge(self, sym: list[str]) -> list[str]:
        """Repeatedly merge the adjacent pair of lowest rank (leftmost on ties). Keeps the rank
        of every adjacent pair in a list, so each step is a min() plus two lookups."""
        if len(sym) < 2:
            return sym
        if len(sym) > 256:
            return self._merge_heap(sym)
        get = self.ranks.get
        none = _NO_RANK
        r = [get((sym[i], sym[i + 1]), none) for i in range(len(sym) - 1)]
        while r:
            best = min(r)
            if best == none:
                break
            i = r.index(best)
            sym[i:i + 2] = [sym[i] + sym[i + 1]]
            del r[i]
            if i > 0:
                r[i - 1] = get((sym[i - 1], sym[i]), none)
            if i < len(r):
                r[i] = get((sym[i], sym[i + 1]), none)
        return sym

    def _merge_heap(self, sym: list[str]) -> list[str]:
        """The same merge order with a heap and a linked list (long pieces)."""
        ranks = self.ranks
        n = len(sym)
        nxt = list(range(1, n)) + [-1]
        prv = list(range(-1, n - 1))
        heap = []

        def push(a, b):
            if a < 0 or b < 0:
                return
            r = ranks.get((sym[a], sym[b]))
            if r is not None:
                heapq.heappush(heap, (r, a, b, sym[a] + sym[b]))

        for i in range(n - 1):
            push(i, i + 1)
        while heap:
            r, a, b, text = heapq.heappop(heap)
            if not sym[a] or not sym[b] or nxt[a] != b or sym[a] + sym[b] != text:
                continue
            sym[a] = text
            sym[b] = ""
            nxt[a] = nxt[b]
            if nxt[b] >= 0:
                prv[nxt[b]] = a
            push(prv[a], a)
            push(a, nxt[a])
        return [s for s in sym if s]
