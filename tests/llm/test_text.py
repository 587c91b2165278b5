"""Text on Model: tokenize / detokenize / token_to_piece / chat templates, and the streaming
helpers (TokenStream, TextStream).

Expected ids are computed in the tests from the vocabularies they write (byte tokens of the
tiny SPM vocab; a hand-made byte-level BPE vocab with known merges), never by pyggml's
tokenizer."""
import gguf
import numpy as np
import pytest

from pyggml.llm import Context, Model, write_tiny_llama
from pyggml.llm.generate import TextStream, TokenStream
from pyggml.llm.sampling import Sampler

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def gpt2_byte_chars():
    """GPT-2's byte -> printable character table (written out here, independently)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE = gpt2_byte_chars()
MERGES = ["u s", "e r", "us er", "Ġ w", "Ġw o", "o r", "Ġwo r", "Ġwor l", "Ġworl d", "h i"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def bpe_tokens():
    tokens = list(SPECIALS) + [BYTE[b] for b in range(256)]
    for m in MERGES:
        tokens.append(m.replace(" ", ""))
    return tokens


def write_text_only(path, tokenizer=True, template=CHATML):
    """A GGUF with llama hyperparameters and a byte-level BPE vocabulary but no tensors."""
    w = gguf.GGUFWriter(str(path), "llama")
    for k, v in (("context_length", 64), ("embedding_length", 8), ("block_count", 1),
                 ("feed_forward_length", 16), ("attention.head_count", 2)):
        w.add_uint32(f"llama.{k}", v)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    if tokenizer:
        toks = bpe_tokens()
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("default")
        w.add_token_list(toks)
        w.add_token_types([3] * len(SPECIALS) + [1] * (len(toks) - len(SPECIALS)))
        w.add_token_merges(MERGES)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_bos_token(False)
        if template is not None:
            w.add_chat_template(template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


@pytest.fixture(scope="module")
def bpe_model(tmp_path_factory):
    return Model.load(write_text_only(tmp_path_factory.mktemp("t") / "bpe.gguf"))


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    p = write_tiny_llama(str(tmp_path_factory.mktemp("t") / "spm.gguf"), n_layer=1)
    return Model.load(p)


def tid(name):
    return bpe_tokens().index(name)


# ---- tokenize / detokenize --------------------------------------------------------------
def test_spm_bytes_and_bos(spm_model):
    text = "Hi é!"
    expected = [1] + [3 + b for b in ("\u2581" + text.replace(" ", "\u2581")).encode()]
    assert spm_model.tokenize(text) == expected
    assert spm_model.tokenize(text, add_special=False) == expected[1:]
    # the tiny vocab has no word pieces: even the space marks are byte tokens, so they come
    # back as the bytes of U+2581 (as in llama.cpp), and only control tokens are affected
    # by the flags
    spelled = "\u2581" + text.replace(" ", "\u2581")
    assert spm_model.detokenize(expected[1:]) == spelled
    assert spm_model.detokenize(expected) == spelled
    assert spm_model.detokenize(expected, remove_special=True) == spelled
    assert spm_model.detokenize(expected, unparse_special=True) == "<s>" + spelled


def test_spm_token_to_piece(spm_model):
    assert spm_model.token_to_piece(3 + 0x41) == b"A"
    assert spm_model.token_to_piece(3 + 0xC3) == b"\xc3"     # half a UTF-8 character: bytes
    assert spm_model.token_to_piece(1) == b"<s>"
    assert spm_model.token_to_piece(1, special=False) == b""
    with pytest.raises(ValueError, match="out of range"):
        spm_model.token_to_piece(10_000)
    assert spm_model.is_eog(2) and not spm_model.is_eog(1)


def test_bpe_merges_and_specials(bpe_model):
    ids = bpe_model.tokenize("<|im_start|>user world", parse_special=True)
    assert ids == [tid("<|im_start|>"), tid("user"), tid("Ġworld")]
    # without parse_special the control text is plain text: bytes and merges, no special id
    plain = bpe_model.tokenize("<|im_start|>", parse_special=False)
    assert tid("<|im_start|>") not in plain
    assert bpe_model.detokenize(plain) == "<|im_start|>"
    assert bpe_model.tokenize("hi", add_special=True) == [tid("hi")]     # add_bos_token false
    assert bpe_model.detokenize(ids) == "user world"                   # control rendered as ""
    assert bpe_model.detokenize(ids, unparse_special=True) == "<|im_start|>user world"
    assert bpe_model.token_to_piece(tid("Ġworld")) == b" world"
    assert bpe_model.is_eog(tid("<|im_end|>"))
    s = "naïve\tcode()  \n"
    assert bpe_model.detokenize(bpe_model.tokenize(s)) == s


def test_tokenizer_is_lazy_and_cached(tmp_path):
    m = Model.load(write_text_only(tmp_path / "lazy.gguf"))
    assert "_tokenizer" not in m.__dict__
    tok = m.tokenizer
    assert m.tokenizer is tok and len(tok) == len(bpe_tokens())


def test_no_tokenizer_is_a_clear_error(tmp_path):
    m = Model.load(write_text_only(tmp_path / "none.gguf", tokenizer=False))
    with pytest.raises(ValueError, match=r"none\.gguf.*tokenizer"):
        m.tokenize("hello")
    assert m.chat_template is None


# ---- chat templates ----------------------------------------------------------------------
def test_apply_chat_template(bpe_model):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    prompt = bpe_model.apply_chat_template(msgs)
    assert prompt == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                      "<|im_start|>assistant\n")
    assert bpe_model.apply_chat_template(msgs, add_generation_prompt=False).endswith("hi<|im_end|>\n")
    assert bpe_model.chat_template is bpe_model.chat_template
    ids = bpe_model.tokenize(prompt, parse_special=True)
    assert ids.count(tid("<|im_start|>")) == 3 and ids.count(tid("<|im_end|>")) == 2


def test_missing_and_broken_templates(tmp_path):
    m = Model.load(write_text_only(tmp_path / "nt.gguf", template=None))
    assert m.chat_template is None
    with pytest.raises(ValueError, match="no chat template"):
        m.apply_chat_template([{"role": "user", "content": "x"}])
    m = Model.load(write_text_only(tmp_path / "bad.gguf", template="{% for m in messages %}"))
    with pytest.raises(ValueError, match="syntax error"):
        m.chat_template
    m = Model.load(write_text_only(tmp_path / "esc.gguf",
                                   template="{{ messages.__class__.__mro__ }}"))
    with pytest.raises(ValueError, match="sandbox"):
        m.apply_chat_template([{"role": "user", "content": "x"}])


# ---- streaming ---------------------------------------------------------------------------
def test_text_stream_holds_partial_utf8(spm_model):
    ts = TextStream(spm_model)
    assert ts.push(3 + ord("a")) == "a"
    assert ts.push(3 + 0xC3) == ""          # first byte of "é": nothing complete yet
    assert ts.push(3 + 0xA9) == "é"
    assert ts.push(1) == ""                 # BOS: a control token renders as nothing
    assert ts.push(3 + 0xE2) == ""
    assert ts.flush() == "\ufffd"           # a truncated character at the end is replaced
    assert ts.text == "aé\ufffd"


def test_token_stream_matches_generate_and_stops(spm_model):
    prompt = spm_model.tokenize("Hello")
    ctx = Context(spm_model, n_ctx=64, n_threads=1)
    ref = ctx.generate(prompt, 12)
    ctx.reset()
    st = TokenStream(ctx, prompt, 12)
    got = list(st)
    assert got == list(ref) and st.stop_reason == "n"
    assert ctx.n_past() == len(prompt) + 11 and st.pending == got[-1]
    assert st.timings["gen_tokens"] == 12 and st.timings["prompt_tokens"] == len(prompt)
    # a stop predicate ends the stream at the first id it accepts (that id is yielded)
    target = got[4]
    ctx.reset()
    st = TokenStream(ctx, prompt, 12, stop=lambda t: t == target)
    got2 = list(st)
    assert got2 == got[:got.index(target) + 1] and st.stop_reason == "stop"
    # n_ctx reached: stops early
    ctx2 = Context(spm_model, n_ctx=len(prompt) + 3, n_threads=1)
    st = TokenStream(ctx2, prompt, 10)
    assert len(list(st)) == 4 and st.stop_reason == "n_ctx"


def test_token_stream_seeded_sampler_reproducible(spm_model):
    prompt = spm_model.tokenize("abc")
    runs = []
    for _ in range(2):
        ctx = Context(spm_model, n_ctx=64, n_threads=1)
        runs.append(list(TokenStream(ctx, prompt, 10, sampler=Sampler(temperature=1.5, seed=7,
                                                                        repeat_penalty=1.3))))
    assert runs[0] == runs[1]
    assert len(set(runs[0])) > 1


def test_token_stream_rejects_bad_n(spm_model):
    ctx = Context(spm_model, n_ctx=16, n_threads=1)
    with pytest.raises(ValueError, match="n must be"):
        TokenStream(ctx, [1], -1)
    assert np.isfinite(ctx.decode([1])).all()
