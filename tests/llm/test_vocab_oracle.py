"""Oracle: pyggml's tokenizers against llama.cpp itself (llama-cpp-python) on every test
vocabulary, including those without .inp/.out cases, over varied texts: Unicode scripts,
whitespace runs, code, numbers, special-token texts parsed and not parsed. Also compares
detokenization and single-token pieces."""
import pytest

from vocab_files import ALL_VOCABS, vocab_path

pytestmark = pytest.mark.oracle
llama_cpp = pytest.importorskip("llama_cpp")

from pyggml.llm.vocab import Vocab  # noqa: E402

TEXTS = [
    "", " ", "  ", "\t", "\n\n\n", " \n \r\n\t x", "Hello world", " Hello World!", "HELLO, y'all! It's 'quoted' we're",
    "3 33 333 3333 33333 1234567890 3.14159 -42 1e-9 0x1F", "  leading and trailing  ",
    "def f(x):\n    return x ** 2  # comment\n\n\tif x != 0: pass\n",
    "нещо на Български", "Ελληνικά κείμενο", "עברית", "العربية", "हिन्दी", "ภาษาไทย", "日本語のテキストです。",
    "中文文本，包含标点。", "한국어 텍스트", "Ǆǅǆ ǈ ǋ ﬁ ﬂ Å Å K K", "e\u0301 a\u0300 n\u0303",
    "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ 👍🏽 🇫🇷", "\u00a0\u2003\u3000 odd spaces\u2028",
    "a\u200bb\u200cc\u200dd", "\x00\x01\x1f\x7f control", "<s></s><unk><|endoftext|><|im_start|>user",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<start_of_turn>user\nHi<end_of_turn>", "[CLS] [SEP] [MASK] <mask>", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    " " * 40 + "x", "\n" * 17, "!!!???...,,,;;;:::", "http://example.com/a?b=c&d=e#f", "email@example.org",
    "Äpfel über Straße naïve café", "ﾊﾝｶｸ ｶﾀｶﾅ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙", "\U0001F999\U0001FAE8",
]


@pytest.fixture(scope="module", params=ALL_VOCABS)
def pair(request):
    path = vocab_path(request.param)
    try:
        ours = Vocab.load(path)
    except NotImplementedError as e:
        pytest.skip(str(e))
    ref = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    return request.param, ours, ref


def test_tokenize_matches_llama_cpp(pair):
    name, ours, ref = pair
    failed = []
    for text in TEXTS:
        for add_special in (False, True):
            for parse_special in (False, True):
                exp = ref.tokenize(text.encode("utf-8"), add_bos=add_special, special=parse_special)
                got = ours.tokenize(text, add_special=add_special, parse_special=parse_special)
                if list(exp) != got:
                    failed.append(f"{text!r} add={add_special} parse={parse_special}: {list(exp)[:12]} vs {got[:12]}")
    assert not failed, f"{name}: {len(failed)} differ\n" + "\n".join(failed[:12])


def _ref_piece(ref, tid, special):
    import ctypes
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(ref._model.vocab, tid, buf, 256, 0, special)
    return buf.raw[:n]


def _ref_detokenize(ref, ids, remove_special, unparse_special):
    import ctypes
    arr = (llama_cpp.llama_token * max(len(ids), 1))(*ids)
    cap = 64 + 64 * len(ids)
    buf = ctypes.create_string_buffer(cap)
    n = llama_cpp.llama_detokenize(ref._model.vocab, arr, len(ids), buf, cap, remove_special, unparse_special)
    assert n >= 0
    return buf.raw[:n]


def test_pieces_and_detokenize_match_llama_cpp(pair):
    name, ours, ref = pair
    n = ours.n_tokens
    for tid in sorted(set(range(min(n, 400))) | set(range(max(0, n - 400), n))):
        for special in (False, True):
            assert ours.token_to_piece(tid, special=special) == _ref_piece(ref, tid, special), (name, tid)
    for text in TEXTS:
        ids = ours.tokenize(text, add_special=True, parse_special=True)
        for remove_special in (False, True):
            for unparse in (False, True):
                exp = _ref_detokenize(ref, ids, remove_special, unparse)
                assert ours.detokenize_bytes(ids, remove_special, unparse) == exp, (name, text, remove_special, unparse)
