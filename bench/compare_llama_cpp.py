"""pyggml.llm vs llama.cpp (through llama-cpp-python's C API): prompt processing and greedy
decode tokens/s, same threads, in one run, the two engines alternating.

    python bench/compare_llama_cpp.py [-t THREADS] [--rounds 3] [--only tiny-f16 ...]
                                      [--long 4096] [--no-long | --long-only] [--cpu-time]

Cases: tiny random LLaMAs (F32, F16, Q8_0, Q4_0), a ~100M one (F16, Q8_0; --only small-*),
SmolLM2-135M Q4_1 when the demo has fetched it and, made from it by llama.cpp's own quantizer
(once, into the cache folder: tests/llm/llama_cpp_quantize.py), SmolLM2 Q4_K_M (Q4_K/Q6_K
ffn_down, Q5_0/Q8_0 elsewhere), the tiny recurrent models (mamba2,
qwen35) and a tiny DeepSeek V4 (dsv4). Columns: pp128, pp512 (one prompt of that length),
tg32 (32 greedy tokens after 16), tg@LONG (16 greedy tokens after a LONG-token context; both
engines with flash attention and F16 caches; each engine computes that context once and every
round decodes from it again, so `--long 16384 --long-only --only smollm2-q4_1` costs two
long prefills; tokens/s from the median per-token time). Each engine decodes with its own
per-token path: pyggml's decode_greedy (argmax in the graph) and llama.cpp's llama_decode
with a reused batch plus an argmax of its logits row. Each figure is the median over
`rounds` alternating runs; the ratio is pyggml / llama.cpp (> 1: pyggml is faster).
The machine's load (uptime) is printed before and after: on a shared machine read ratios
only, never the absolute figures.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

# numpy's OpenBLAS keeps its worker threads spinning after any BLAS call; on a 2-core machine
# they steal the cores both engines' thread pools need. Neither engine uses BLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "llm"))      # llama_cpp_quantize

TINY = dict(n_vocab=256, n_embd=128, n_layer=4, n_head=4, n_head_kv=2, n_ff=384, n_ctx_train=8192)
CASES = {
    "tiny-f32": ("llama", dict(TINY, dtype="f32")),
    "tiny-f16": ("llama", dict(TINY, dtype="f16")),
    "tiny-q8_0": ("llama", dict(TINY, dtype="q8_0")),
    "tiny-q4_0": ("llama", dict(TINY, dtype="q4_0")),
    "small-f16": ("small", dict(dtype="f16")),
    "small-q8_0": ("small", dict(dtype="q8_0")),
    "smollm2-q4_1": ("smollm2", {}),
    "smollm2-q4_k_m": ("smollm2-kquant", {}),
    "mamba2": ("mamba2", {}),
    "qwen35": ("qwen35", {}),
    "dsv4": ("deepseek4", {}),
}
DEFAULT = ["tiny-f32", "tiny-f16", "tiny-q8_0", "tiny-q4_0", "smollm2-q4_1", "smollm2-q4_k_m",
           "mamba2", "qwen35", "dsv4"]


def model_path(folder, name):
    from pyggml.llm import tiny
    kind, kw = CASES[name]
    if kind == "smollm2":
        from pyggml.demo import SMOLLM2, cache_dir
        p = os.path.join(cache_dir(), SMOLLM2.file)
        return p if os.path.exists(p) else None
    if kind == "smollm2-kquant":
        from llama_cpp_quantize import smollm2_q4_k_m
        return smollm2_q4_k_m()
    path = os.path.join(folder, f"{name}.gguf")
    if not os.path.exists(path):
        if kind == "llama":
            tiny.write_tiny_llama(path, seed=0, **kw)
        elif kind == "small":
            tiny.write_small_llama(path, seed=0, **kw)
        elif kind == "mamba2":
            tiny.write_tiny_mamba2(path)
        elif kind == "deepseek4":
            tiny.write_tiny_deepseek4(path)
        else:
            tiny.write_tiny_qwen35(path)
    return path


class Ours:
    def __init__(self, path, n_ctx, threads):
        from pyggml.llm import Context, Model
        self.model = Model.load(path, progress=False)
        self.ctx = Context(self.model, n_ctx=n_ctx, n_threads=threads, n_batch=512, n_ubatch=512,
                           flash_attn=True)
        self.n_vocab = self.ctx.hparams.n_vocab

    def reset(self):
        self.ctx.reset()
        self.long_state = None

    def truncate(self, n):
        return self.ctx.seq_rm(0, n, -1)

    def prompt(self, toks):
        return self.ctx.decode_greedy(toks)

    def step(self, tok):
        return self.ctx.decode_greedy([tok])


class Theirs:
    def __init__(self, path, n_ctx, threads):
        import llama_cpp as lc
        self.lc = lc
        self._quiet = lc.llama_log_callback(lambda level, text, user: None)  # kept alive here
        lc.llama_log_set(self._quiet, ctypes.c_void_p())
        lc.llama_backend_init()
        mp = lc.llama_model_default_params()
        self.model = lc.llama_model_load_from_file(path.encode(), mp)
        cp = lc.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx, 512, 512, 1
        cp.n_threads = cp.n_threads_batch = threads
        cp.flash_attn_type = lc.LLAMA_FLASH_ATTN_TYPE_ENABLED   # not "auto": always on, as ours
        self.ctx = lc.llama_init_from_model(self.model, cp)
        self.n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self.model))
        self.batch = lc.llama_batch_init(512, 0, 1)
        self.n_past = 0

    def reset(self):
        self.lc.llama_memory_clear(self.lc.llama_get_memory(self.ctx), True)
        self.n_past = 0
        self.long_state = None

    def truncate(self, n):
        if not self.lc.llama_memory_seq_rm(self.lc.llama_get_memory(self.ctx), 0, n, -1):
            return False
        self.n_past = n
        return True

    def _decode(self, toks):
        b, n = self.batch, len(toks)
        for k in range(0, n, 512):
            part = toks[k:k + 512]
            b.n_tokens = len(part)
            for i, t in enumerate(part):
                b.token[i], b.pos[i], b.n_seq_id[i] = t, self.n_past + i, 1
                b.seq_id[i][0] = 0
                b.logits[i] = 1 if k + i == n - 1 else 0
            if self.lc.llama_decode(self.ctx, b) != 0:
                raise RuntimeError("llama_decode failed")
            self.n_past += len(part)
        ptr = self.lc.llama_get_logits_ith(self.ctx, -1)
        row = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(self.n_vocab,))
        return int(np.argmax(row))

    def prompt(self, toks):
        return self._decode(toks)

    def step(self, tok):
        return self._decode([tok])

    def close(self):
        self.lc.llama_batch_free(self.batch)
        self.lc.llama_free(self.ctx)
        self.lc.llama_model_free(self.model)


# llama.cpp's CPU backend runs on OpenMP here: after each llama_decode its libgomp workers spin
# for several milliseconds (the GOMP spin count), holding a core that whatever is timed next
# needs; in an alternating run that is the other engine's first case. Every timed part starts
# after this pause, so each engine starts from sleeping workers and neither pays for the other.
SETTLE_S = 0.02
# what the figures time: wall seconds, or with --cpu-time the process's CPU seconds (every
# thread's), which other processes on a busy machine hardly move: with -t 1 a robust ratio of
# the work each engine does per token (with more threads it also counts their spin-waits)
clock = time.perf_counter


def run_case(engine, prompts, n_gen):
    """tokens/s of one engine: each prompt from an empty context, then n_gen greedy tokens
    after a 16-token prompt."""
    out = {}
    for name, toks in prompts.items():
        engine.reset()
        time.sleep(SETTLE_S)
        t0 = clock()
        engine.prompt(toks)
        out[name] = len(toks) / (clock() - t0)
    engine.reset()
    tok = engine.prompt(prompts["pp128"][:16])
    time.sleep(SETTLE_S)
    t0 = clock()
    for _ in range(n_gen):
        tok = engine.step(tok)
    out[f"tg{n_gen}"] = n_gen / (clock() - t0)
    return out


def run_case_long(engine, prompts, long_ctx, n_gen=16):
    """Per-token seconds of n_gen greedy tokens after a long_ctx-token context. The context
    is computed once per engine (a 16384-token prefill takes minutes); later rounds drop the
    generated tokens and decode from the same state again. A memory that cannot drop a tail
    (a recurrent state without snapshots) computes the context again."""
    if not long_ctx:
        return {}
    if getattr(engine, "long_state", None) is None or not engine.truncate(long_ctx):
        engine.reset()
        engine.long_state = engine.prompt(prompts["long"])
    tok = engine.long_state
    time.sleep(SETTLE_S)
    times = []
    for _ in range(n_gen):
        t0 = clock()
        tok = engine.step(tok)
        times.append(clock() - t0)
    return {f"tg@{long_ctx}": times}


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "uptime n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--long", type=int, default=4096)
    ap.add_argument("--no-long", action="store_true")
    ap.add_argument("--long-only", action="store_true", help="only the tg@LONG column")
    ap.add_argument("--only", choices=list(CASES), action="append")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "pyggml-bench"))
    ap.add_argument("--cpu-time", action="store_true", help="time CPU seconds, not wall (see `clock`)")
    a = ap.parse_args()
    global clock
    if a.cpu_time:
        clock = time.process_time
    os.makedirs(a.dir, exist_ok=True)
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        sys.exit("llama_cpp (llama-cpp-python) does not import: nothing to compare against")
    print(f"# {uptime()}")
    print(f"# {a.threads} threads, median of {a.rounds} alternating rounds, tokens/s"
          + (" of CPU time" if a.cpu_time else ""))
    print(f"{'case':<26s} {'pyggml':>10s} {'llama.cpp':>10s} {'ratio':>7s}")
    for name in a.only or DEFAULT:
        # each case draws its prompts from its own seed: a case sees the same tokens whether it
        # runs alone or after others (the decoded tokens, and with them each step's attention
        # pattern, follow from the prompt)
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        path = model_path(a.dir, name)
        if path is None:
            print(f"{name:<26s} (model not in the cache: run `python -m pyggml demo` once)")
            continue
        long_ctx = 0 if a.no_long else a.long
        n_ctx = max(640, long_ctx + 32) if long_ctx else 640
        ours, theirs = Ours(path, n_ctx, a.threads), Theirs(path, n_ctx, a.threads)
        n_vocab = min(ours.n_vocab, theirs.n_vocab)
        prompts = {f"pp{n}": [int(x) for x in rng.integers(3, n_vocab, size=n)] for n in (128, 512)}
        if long_ctx:
            prompts["long"] = [int(x) for x in rng.integers(3, n_vocab, size=long_ctx)]
        res = {"ours": [], "theirs": []}
        run_case(ours, {"pp128": prompts["pp128"]}, 4)      # warm-up: graphs, pages
        run_case(theirs, {"pp128": prompts["pp128"]}, 4)
        short = {k: v for k, v in prompts.items() if k != "long"}
        for k in range(a.rounds):
            for side, engine in (("ours", ours), ("theirs", theirs)):
                res[side].append({} if a.long_only else run_case(engine, short, a.gen))
        # the long column after the short ones: each engine computes its long context once
        for k in range(a.rounds if long_ctx else 0):
            for side, engine in (("ours", ours), ("theirs", theirs)):
                res[side][k].update(run_case_long(engine, prompts, long_ctx))
        theirs.close()
        for col in res["ours"][0]:
            if col.startswith("tg@"):
                # tokens/s from the median per-token time over every round: a token that a
                # busy machine delayed moves a round's total, hardly the median
                o = 1.0 / statistics.median(x for r in res["ours"] for x in r[col])
                t = 1.0 / statistics.median(x for r in res["theirs"] for x in r[col])
            else:
                o = statistics.median(r[col] for r in res["ours"])
                t = statistics.median(r[col] for r in res["theirs"])
            print(f"{name + ' ' + col:<26s} {o:10.1f} {t:10.1f} {o / t:7.2f}", flush=True)
    print(f"# {uptime()}")


if __name__ == "__main__":
    main()
