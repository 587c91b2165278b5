"""Tokenizers against llama.cpp's own tokenizer cases (texts and the ids llama.cpp produced),
plus small hand-built vocabularies for the special-token rules."""
import functools

import pytest

from pyggml.llm.vocab import (ATTR_CONTROL, Vocab, detokenize, token_to_piece, tokenize)

from vocab_files import CASE_VOCABS, read_cases, vocab_path


@functools.lru_cache(maxsize=4)
def _vocab(name):
    return Vocab.load(vocab_path(name))


@pytest.mark.parametrize("name", CASE_VOCABS)
def test_llama_cpp_tokenizer_cases(name):
    path = vocab_path(name)
    vocab = _vocab(name)
    cases = read_cases(path)
    assert len(cases) >= 40
    failed = []
    for text, expected in cases.items():
        got = vocab.tokenize(text, add_special=False, parse_special=False)
        if got != expected:
            failed.append(f"{text!r}: expected {expected[:16]} got {got[:16]}")
    assert not failed, f"{name}: {len(failed)}/{len(cases)} cases differ:\n" + "\n".join(failed[:10])


# Byte-level BPE without space cleaning and SPM give the text back exactly.
@pytest.mark.parametrize("name", ["qwen2", "deepseek-coder", "command-r", "llama-spm", "deepseek-llm"])
def test_detokenize_gives_the_text_back(name):
    vocab = _vocab(name)
    for text in read_cases(vocab_path(name)):
        ids = vocab.tokenize(text, add_special=False)
        assert vocab.detokenize(ids) == text, (name, text)
        if vocab.kind == "bpe":
            assert b"".join(vocab.token_to_piece(i) for i in ids) == text.encode("utf-8")


def test_llama3_specials_bos_and_parse_special():
    v = _vocab("llama-bpe")
    assert v.bos_id == 128000 and v.add_bos
    assert v.tokenize("Hello", add_special=True) == [128000, 9906]
    assert v.tokenize("Hello", add_special=False) == [9906]
    bot = "<|begin_of_text|>"
    assert v.tokenize(bot + "Hello", add_special=False, parse_special=True) == [128000, 9906]
    as_text = v.tokenize(bot, add_special=False, parse_special=False)
    assert 128000 not in as_text and len(as_text) > 1
    assert v.detokenize(as_text) == bot
    eot = v.token_to_id["<|eot_id|>"]
    assert v.eot_id == eot and v.is_eog(eot) and v.is_eog(v.eos_id) and not v.is_eog(9906)
    assert v.detokenize([128000, 9906]) == "Hello"                      # control hidden ...
    assert v.detokenize([128000, 9906], unparse_special=True) == bot + "Hello"   # ... unless asked
    assert token_to_piece(v, 128000) == bot.encode()
    assert v.token_to_piece(128000, special=False) == b""


def test_spm_leading_space_bos_and_remove_special():
    v = _vocab("llama-spm")
    ids = tokenize(v, "Hello world", add_special=True)
    assert ids[0] == v.bos_id == 1
    assert v.tokens[ids[1]] == "\u2581Hello"                            # the leading-space rule
    assert v.detokenize(ids[1:]) == "Hello world"                         # first space dropped
    # llama_detokenize keeps that space once a BOS came first, removed or not
    assert detokenize(v, ids, remove_special=True) == " Hello world"
    assert v.detokenize(ids) == " Hello world"
    # after a special token the next text gets a leading space again
    ids2 = v.tokenize("</s>Hi", add_special=False, parse_special=True)
    assert ids2[0] == 2 and v.tokens[ids2[1]].startswith("\u2581")
    # byte fallback: a character outside the vocabulary becomes its UTF-8 bytes
    ids3 = v.tokenize("\U0001F999", add_special=False)
    assert [v.tokens[i] for i in ids3[-4:]] == ["<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"]
    assert v.detokenize(ids3) == "\U0001F999"


def test_space_cleaning_of_word_level_vocabularies():
    v = _vocab("gemma-4")                       # cleans " ?" " !" " ." " ," and " 's"
    ids = v.tokenize("Who ? me ! it 's", add_special=False)
    assert v.detokenize(ids) == "Who? me! it's"
    q = _vocab("qwen2")                         # keeps the text as it was
    assert q.detokenize(q.tokenize("Who ? me", add_special=False)) == "Who ? me"


def test_wpm_unknown_word_and_sep():
    v = _vocab("bert-bge")
    ids = v.tokenize("hello \u0378\u0379", add_special=True)
    assert ids[0] == v.bos_id == 101 and ids[-1] == v.sep_id == 102
    assert ids[-2] == v.unk_id == 100


# ---------------------------------------------------------------- hand-built vocabularies
def _spm(tokens, scores=None, types=None, **extra):
    kv = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
          "tokenizer.ggml.scores": scores or [0.0] * len(tokens),
          "tokenizer.ggml.token_type": types or [1] * len(tokens)}
    kv.update(extra)
    return Vocab.from_kv(kv)


def _bytes_tokens():
    return [f"<0x{b:02X}>" for b in range(256)]


def test_spm_merges_by_score_not_by_length():
    base = ["<unk>", "<s>", "</s>"] + _bytes_tokens()
    # "abc": pieces "ab" (score -5) and "bc" (score -1): the better-scored "bc" wins, then
    # "a"+"bc" is not a token, so the result is a, bc.
    toks = base + ["\u2581", "a", "b", "c", "ab", "bc", "\u2581a"]
    scores = [0.0] * len(base) + [-1.0, -2.0, -2.0, -2.0, -5.0, -1.0, -9.0]
    types = [2, 3, 3] + [6] * 256 + [1] * 7
    v = _spm(toks, scores, types, **{"tokenizer.ggml.add_space_prefix": False})
    ids = v.tokenize("abc", add_special=False)
    assert [v.tokens[i] for i in ids] == ["a", "bc"]
    # with the leading space, "bc" (-1) still merges first; "ab" is then stale and "▁a" (-9),
    # the only pair left, merges last.
    v2 = _spm(toks, scores, types)
    assert [v2.tokens[i] for i in v2.tokenize("abc", add_special=False)] == ["\u2581a", "bc"]


def test_special_partition_longest_first_and_control_only_when_asked():
    base = ["<unk>", "<s>", "</s>"] + _bytes_tokens()
    toks = base + ["\u2581", "x", "<a>", "<ab>", "USER"]
    types = [2, 3, 3] + [6] * 256 + [1, 1, 3, 3, 4]
    v = _spm(toks, types=types, **{"tokenizer.ggml.add_space_prefix": False})
    a, ab, user = (v.token_to_id[t] for t in ("<a>", "<ab>", "USER"))
    x = v.token_to_id["x"]
    assert v.tokenize("x<ab>x", add_special=False, parse_special=True) == [x, ab, x]
    assert v.tokenize("<a><ab>", add_special=False, parse_special=True) == [a, ab]
    # control tokens stay text without parse_special; user-defined tokens are always cut out
    plain = v.tokenize("<a>USER", add_special=False, parse_special=False)
    assert a not in plain and plain[-1] == user
    assert v.attrs[a] & ATTR_CONTROL


def test_bad_input_raises():
    v = _spm(["<unk>", "<s>", "</s>"] + _bytes_tokens())
    with pytest.raises(ValueError, match="out of range"):
        v.detokenize([10 ** 6])
    with pytest.raises(TypeError):
        v.tokenize(123)
    with pytest.raises(ValueError, match="tokenizer"):
        Vocab.from_kv({})
    with pytest.raises(NotImplementedError, match="rwkv"):
        Vocab.from_kv({"tokenizer.ggml.model": "rwkv", "tokenizer.ggml.tokens": ["a"]})
    with pytest.raises(ValueError, match="pre-tokenizer"):
        Vocab.from_kv({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "nonesuch",
                       "tokenizer.ggml.tokens": ["a"], "tokenizer.ggml.merges": []})


def test_from_gguf_reader_matches_load():
    gguf = pytest.importorskip("gguf")
    path = vocab_path("llama-spm")
    a = Vocab.from_gguf_reader(gguf.GGUFReader(str(path)))
    b = _vocab("llama-spm")
    text = "Hello world, 3333 \u00c4pfel \U0001F999"
    assert a.tokenize(text) == b.tokenize(text) and a.tokens == b.tokens


# ---------------------------------------------------------------- UGM (t5)
def test_ugm_xlm_roberta_vocabulary():
    v = _vocab("nomic-bert-moe")
    assert v.kind == "ugm"
    assert v.tokenize("Hello world", add_special=True) == [0, 35378, 8999, 2]   # <s> ▁Hello ▁world </s>
    # the precompiled map applies NFKC (full-width letters, ligatures); extra spaces merge
    assert v.tokenize("ＡＢＣ ﬁ", add_special=False) == v.tokenize("ABC fi", add_special=False)
    assert v.tokenize("  Hello   world  ", add_special=False) == v.tokenize("Hello world", add_special=False)
    assert v.detokenize(v.tokenize("Hello world", add_special=False)) == "Hello world"


def _ugm(tokens, scores, types, **extra):
    kv = {"tokenizer.ggml.model": "t5", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
          "tokenizer.ggml.token_type": types, "tokenizer.ggml.add_space_prefix": True}
    kv.update(extra)
    return Vocab.from_kv(kv)


def test_ugm_picks_the_best_total_score_and_merges_unknowns():
    toks = ["<pad>", "</s>", "<unk>", "\u2581ab", "\u2581a", "b", "\u2581", "c"]
    scores = [0.0, 0.0, 0.0, -1.0, -0.4, -0.4, -2.0, -3.0]
    types = [3, 3, 2, 1, 1, 1, 1, 1]
    v = _ugm(toks, scores, types)
    t = {s: i for i, s in enumerate(toks)}
    assert v.tokenize("ab", add_special=False) == [t["\u2581a"], t["b"]]          # -0.8 beats -1.0
    scores2 = list(scores)
    scores2[3] = -0.5
    v2 = _ugm(toks, scores2, types)
    assert v2.tokenize("ab", add_special=False) == [t["\u2581ab"]]                # now -0.5 wins
    # "xyz" has no token: the three unknown characters become one <unk>
    assert v.tokenize("abxyzc", add_special=False) == [t["\u2581a"], t["b"], 2, t["c"]]
    assert v.tokenize("ab", add_special=True) == [t["\u2581a"], t["b"], 1]       # EOS added, no BOS


def test_spm_word_by_word_equals_whole_text_merging():
    """The word cache is an optimization: the heap over the whole text must agree with it."""
    v = _vocab("llama-spm")
    assert v._spm_cache is not None
    text = "\n".join(read_cases(vocab_path("llama-spm"))) * 2 + " aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    fast = v.tokenize(text, add_special=False)
    saved, v._spm_cache = v._spm_cache, None
    try:
        slow = v.tokenize(text, add_special=False)
    finally:
        v._spm_cache = saved
    assert fast == slow


def test_ugm_word_by_word_equals_whole_text_viterbi():
    v = _vocab("nomic-bert-moe")
    assert v._ugm._cache is not None
    text = "\n".join(read_cases(vocab_path("llama-spm"))) + " x\u0378\u0379 \u0378y \u0378 \u0379z ＡＢＣ ﬁ"
    fast = v.tokenize(text, add_special=False)
    saved, v._ugm._cache = v._ugm._cache, None
    try:
        slow = v.tokenize(text, add_special=False)
    finally:
        v._ugm._cache = saved
    assert fast == slow


def test_wpm_chunk_cache_equals_direct_tokenization():
    v = _vocab("bert-bge")
    text = "\n".join(read_cases(vocab_path("bert-bge"))) + " a\u00a0b\u3000c \x1c\x1dd caf\u00e9 CAF\u00c9!"
    fast = v.tokenize(text, add_special=False)
    saved, v._wpm_cache = v._wpm_cache, None
    try:
        slow = v.tokenize(text, add_special=False)
    finally:
        v._wpm_cache = saved
    assert fast == slow
    assert v.tokenize("CAF\u00c9", add_special=False) == v.tokenize("cafe", add_special=False)  # lowercase, accents


# ---------------------------------------------------------------- pre-tokenizer splits
def test_every_pre_tokenizer_splits_losslessly():
    from pyggml.llm.vocab_bpe import _PRE, pre_tokenizer
    from pyggml.llm.unicode_split import regex_split
    text = ("Hello, y'all! HowAre you 😁 ?我想在apple工作1314151天～ ﾊﾝｶｸ  \t\n\n  x  "
            "e\u0301 Ελληνικά 12345678 <sentinel:12> IMGIMGABZ    def f():\r\n  return 0\u00a0\u3000.")
    assert len(_PRE) > 80
    for name in _PRE:
        pieces = regex_split(text, pre_tokenizer(name)[0])
        assert "".join(pieces) == text and all(pieces), name


def test_pre_tokenizer_splits_follow_their_regexes():
    from pyggml.llm.vocab_bpe import pre_tokenizer
    from pyggml.llm.unicode_split import regex_split

    def split(name, text):
        return regex_split(text, pre_tokenizer(name)[0])
    assert split("gpt-2", "Hello world's  end 123") == ["Hello", " world", "'s", " ", " end", " 123"]
    assert split("llama3", "Hello 12345\n\n  x") == ["Hello", " ", "123", "45", "\n\n", " ", " x"]
    assert split("qwen2", "ab 123") == ["ab", " ", "1", "2", "3"]
    assert split("gpt-4o", "HelloWorld camelCase") == ["Hello", "World", " camel", "Case"]
    assert split("tiny_aya", "1234567") == ["1", "234", "567"]
    # the digit grouping cuts only where a group ends: other text rides with the next group
    assert regex_split("ab1234cd 12 x", ["\\p{AFMoE_digits}"]) == ["ab1", "234", "cd 12", " x"]
    assert split("afmoe", "ab1234cd 12 x\u4e2d\u6587") == ["ab", "1", "234", "cd", " ", "12", " x", "\u4e2d\u6587"]
    assert split("deepseek-llm", "abc  \n") == ["abc", "  ", "\n"]
    # Kimi-K2: Han runs apart, letters of other scripts as llama-3 does, contractions attached
    assert split("kimi-k2", "Hello中文世界 it's 12345 日本ok") == \
        ["Hello", "中文世界", " it's", " ", "123", "45", " ", "日本", "ok"]
    assert split("kimi-k2", "\u00c9t\u00e9 Сергей\u4e00") == ["\u00c9t\u00e9", " Сергей", "\u4e00"]
    with pytest.raises(ValueError, match="unknown pre-tokenizer"):
        pre_tokenizer("no-such-pre")


def test_special_tokens_found_in_long_texts():
    v = _vocab("llama-bpe")
    a, b = "x = [1, 2, 3]  # some code that is long enough " * 3, " and more text after it\n" * 3
    bot, eot = v.token_to_id["<|begin_of_text|>"], v.token_to_id["<|eot_id|>"]
    ids = v.tokenize("<|begin_of_text|>" + a + "<|eot_id|>" + b, add_special=False, parse_special=True)
    assert ids == [bot] + v.tokenize(a, add_special=False) + [eot] + v.tokenize(b, add_special=False)
    d = _vocab("deepseek-llm")                    # thousands of user-defined tokens ([PAD...], single chars)
    text = a + "\u00f8" + b
    ids = d.tokenize(text, add_special=False)
    assert d.token_to_id["\u00f8"] in ids and d.detokenize(ids) == text


def test_text_stream_holds_back_partial_characters():
    v = _vocab("llama-spm")
    ids = v.tokenize("a\U0001F999b \u00e9", add_special=False)      # the emoji is four byte tokens
    stream = v.text_stream()
    outs = [stream.push(i) for i in ids]
    assert "".join(outs) + stream.flush() == " a\U0001F999b \u00e9"
    assert all("\ufffd" not in o for o in outs)
    assert "" in outs                                                 # bytes were held back
    s2 = v.text_stream()
    s2.push(v.token_to_id["<0xF0>"])                                  # a lead byte alone
    assert s2.flush() == "\ufffd"


def test_bpe_merge_list_and_heap_agree():
    from pyggml.llm.unicode_split import byte_encode, regex_split
    v = _vocab("qwen2")
    bpe = v._bpe
    words = set()
    for text in read_cases(vocab_path("qwen2")):
        words.update(byte_encode(w) for w in regex_split(text, bpe.patterns))
    words.update(["\u0120" * 300, "a" * 301, byte_encode("supercalifragilistic" * 20)])
    for w in words:
        assert bpe._merge(list(w)) == bpe._merge_heap(list(w)), w


def test_cached_multi_pattern_split_equals_uncached():
    from pyggml.llm.unicode_split import PreSplitter, regex_split
    from pyggml.llm.vocab_bpe import pre_tokenizer
    text = "\n".join(read_cases(vocab_path("gpt-2"))) * 2
    for name in ("deepseek-llm", "deepseek-coder", "starcoder", "default", "falcon", "deepseek-v3", "laguna"):
        patterns = pre_tokenizer(name)[0]
        cached = PreSplitter(patterns)
        assert cached(text) == regex_split(text, patterns) == cached(text), name
