"""`pyggml run -p` (streamed text, --json, sampling flags) and `pyggml chat` (stdin), driven in
subprocesses. The expected ids come from an in-process Context with the same settings; the
expected text from the tiny vocabulary's byte tokens, decoded here."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyggml.llm import Context, Model, write_tiny_llama
from pyggml.llm.sampling import Sampler

ROOT = Path(__file__).resolve().parents[2]
CHATML = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
          "{% if add_generation_prompt %}<s>assistant: {% endif %}")


def cli(*args, stdin=None, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "pyggml", *args], input=stdin, capture_output=True,
                          text=True, encoding="utf-8", timeout=timeout, env=env, cwd=str(ROOT))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_llama(str(tmp_path_factory.mktemp("cli") / "t.gguf"), n_embd=32, n_layer=1,
                            n_head=2, n_head_kv=1, n_ff=48, seed=3, chat_template=CHATML)


def byte_text(ids):
    """What the tiny vocab's ids spell: byte tokens 3.. are bytes, <unk>/<s>/</s> nothing."""
    return bytes(i - 3 for i in ids if i >= 3).decode("utf-8", errors="replace")


def reference(path, prompt_ids, n, sampler=None, stop_eog=True):
    m = Model.load(path)
    ctx = Context(m, n_ctx=256, n_threads=1)
    out = []
    logits = ctx.decode(prompt_ids)
    if sampler is not None:
        sampler.accept(prompt_ids)
    for _ in range(n):
        tok = int(sampler(logits[-1])) if sampler is not None else int(logits[-1].argmax())
        out.append(tok)
        if stop_eog and tok == 2:
            break
        logits = ctx.decode([tok])
    return out


def test_run_prompt_streams_text_and_json(tiny):
    prompt = "Hi é"
    ids = [1] + [3 + b for b in ("\u2581" + prompt.replace(" ", "\u2581")).encode()]
    want = reference(tiny, ids, 12)
    r = cli("run", tiny, "-p", prompt, "-n", "12", "--json", "-t", "1")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["prompt_tokens"] == ids and d["tokens"] == want
    assert d["text"] == byte_text(want)
    assert d["timings"]["gen_tokens"] == len(want) and d["timings"]["prompt_tokens"] == len(ids)
    r = cli("run", tiny, "-p", prompt, "-n", "12", "-t", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == prompt + byte_text(want) + "\n"
    assert "t/s" in r.stderr and "generated" in r.stderr


def test_run_tokens_mode_still_prints_ids(tiny):
    r = cli("run", tiny, "--tokens", "1,40,50", "-n", "5", "-t", "1")
    assert r.returncode == 0, r.stderr
    assert [int(x) for x in r.stdout.splitlines()[0].split()] == reference(tiny, [1, 40, 50], 5,
                                                                          stop_eog=False)


def test_run_sampling_flags(tiny):
    ids = [1] + [3 + b for b in "\u2581abc".encode()]
    flags = ["--temp", "1.3", "--top-k", "20", "--top-p", "0.9", "--min-p", "0.01",
             "--repeat-penalty", "1.2", "--seed", "11", "--ignore-eos"]
    r1 = cli("run", tiny, "-p", "abc", "-n", "16", "--json", "-t", "1", *flags)
    r2 = cli("run", tiny, "-p", "abc", "-n", "16", "--json", "-t", "1", *flags)
    assert r1.returncode == 0, r1.stderr
    t1, t2 = json.loads(r1.stdout)["tokens"], json.loads(r2.stdout)["tokens"]
    assert t1 == t2                                             # seeded: reproducible
    s = Sampler(temperature=1.3, top_k=20, top_p=0.9, min_p=0.01, repeat_penalty=1.2, seed=11)
    assert t1 == reference(tiny, ids, 16, sampler=s, stop_eog=False)
    r3 = cli("run", tiny, "-p", "abc", "-n", "16", "--json", "-t", "1", *flags[:-3], "--seed", "12")
    assert json.loads(r3.stdout)["tokens"] != t1


def test_run_errors_are_one_line(tiny, tmp_path):
    r = cli("run", tiny, "-n", "2")
    assert r.returncode != 0 and "give a prompt" in r.stderr
    r = cli("run", tiny, "-p", "x", "--tokens", "1", "-n", "2")
    assert r.returncode != 0 and "not both" in r.stderr
    r = cli("run", tiny, "-p", "x", "--temp", "0.7", "--top-p", "0", "-n", "2")
    assert r.returncode != 0 and "top_p" in r.stderr and "Traceback" not in r.stderr
    r = cli("chat", write_tiny_llama(str(tmp_path / "nt.gguf"), n_layer=1), stdin="hi\n")
    assert r.returncode != 0 and "no chat template" in r.stderr and "Traceback" not in r.stderr


def test_chat_turns_reuse_the_cache_and_match_fresh_decodes(tiny):
    m = Model.load(tiny)
    n = 8
    r = cli("chat", tiny, "--system", "be brief", "-n", str(n), "-t", "1",
            stdin="hi there\n\nwhat now?\n/exit\nnever read\n")
    assert r.returncode == 0, r.stderr
    messages = [{"role": "system", "content": "be brief"}]
    expected = ""
    for user in ("hi there", "what now?"):
        messages.append({"role": "user", "content": user})
        prompt = m.tokenize(m.apply_chat_template(messages), parse_special=True)
        reply = reference(tiny, prompt, n)
        text = byte_text(reply)
        messages.append({"role": "assistant", "content": text})
        expected += text + "\n"
    assert r.stdout == expected
    assert r.stderr.count("[prompt") == 2
    # the second turn decoded only what the cache lacked (the first turn's prompt was reused)
    first, second = [int(ln.split()[1]) for ln in r.stderr.splitlines() if ln.startswith("[prompt")]
    full = len(m.tokenize(m.apply_chat_template(messages[:-1]), parse_special=True))
    assert second < full - first // 2


def test_chat_reset_forgets(tiny):
    r = cli("chat", tiny, "-n", "6", "-t", "1", stdin="hello\n/reset\nhello\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout                          # reply + "\n", twice (a reply may hold newlines)
    half = len(out) // 2
    assert out.endswith("\n") and len(out) % 2 == 0 and out[:half] == out[half:]
    assert r.stderr.count("[prompt") == 2
