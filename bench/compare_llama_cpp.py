"""pyggml.llm vs llama.cpp (through llama-cpp-python's C API): prompt processing and greedy
decode tokens/s, same threads, in one run, the two engines alternating.

    python bench/compare_llama_cpp.py [-t THREADS] [--pairs 9] [--min-sample-ms 30]
                                      [--max-others 1.0] [--only tiny-f16 ...] [--long 4096] [--no-long | --long-only]
                                      [--cpu-time]

Cases: tiny random LLaMAs (F32, F16, Q8_0, Q4_0), a ~100M one (F32, F16, Q8_0, Q4_0; --only small-*),
SmolLM2-135M Q4_1 when the demo has fetched it and, made from it by llama.cpp's own quantizer
(once, into the cache folder: tests/llm/llama_cpp_quantize.py), SmolLM2 Q4_K_M (Q4_K/Q6_K
ffn_down, Q5_0/Q8_0 elsewhere), the tiny recurrent models (mamba2,
qwen35) and a tiny DeepSeek V4 (dsv4). Columns: pp128, pp512 (one prompt of that length, from
an empty context), tg32 (32 greedy tokens after 16), tg@LONG (16 greedy tokens after a
LONG-token context; both engines with flash attention and F16 caches; each engine computes
that context once and every sample decodes from it again, so `--long 16384 --long-only
--only smollm2-q4_1` costs two long prefills). Each engine decodes with its own per-token
path: pyggml's decode_greedy (argmax in the graph) and llama.cpp's llama_decode with a reused
batch plus an argmax of its logits row.

Every figure comes from --pairs pairs: a pair is one sample of each engine back to back, which
engine goes first alternating from pair to pair, and its ratio pyggml / llama.cpp tokens/s
(> 1: pyggml is faster) cancels a load that moved both. The ratio printed is the median over
the pairs, the interval after it the distribution-free ~95% one of that median (order
statistics, bench/paired_stats.py): a row is below 1.0 only when its interval is. A sample
repeats its column's run (`reps`, the last column) until it lasts about --min-sample-ms: one
prefill of a tiny model takes a few milliseconds, too short to time on a busy machine. The
tokens/s columns are the medians over the samples. `others` is the median share of the CPUs
that other processes kept busy during a pair (/proc/stat less this process's own CPU time);
--max-others drops and redoes the pairs above a bound. The machine's load (uptime) is printed
before and after: on a shared machine read the ratios, never the absolute figures.
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

import checkout  # noqa: E402,F401  (this checkout's pyggml, not an installed copy)
import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "llm"))      # llama_cpp_quantize
sys.path.insert(0, os.path.join(ROOT, "bench"))
from paired_stats import OthersLoad, Paired, repeats_for  # noqa: E402

TINY = dict(n_vocab=256, n_embd=128, n_layer=4, n_head=4, n_head_kv=2, n_ff=384, n_ctx_train=8192)
CASES = {
    "tiny-f32": ("llama", dict(TINY, dtype="f32")),
    "tiny-f16": ("llama", dict(TINY, dtype="f16")),
    "tiny-q8_0": ("llama", dict(TINY, dtype="q8_0")),
    "tiny-q4_0": ("llama", dict(TINY, dtype="q4_0")),
    "small-f32": ("small", dict(dtype="f32")),
    "small-f16": ("small", dict(dtype="f16")),
    "small-q8_0": ("small", dict(dtype="q8_0")),
    "small-q4_0": ("small", dict(dtype="q4_0")),
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
# needs; in an alternating run that is the other engine's sample. Every sample starts after
# this pause, so each engine starts from sleeping workers and neither pays for the other.
SETTLE_S = 0.02
# what the figures time: wall seconds, or with --cpu-time the process's CPU seconds (every
# thread's), which other processes on a busy machine hardly move: with -t 1 a robust ratio of
# the work each engine does per token (with more threads it also counts their spin-waits)
clock = time.perf_counter


def time_prompt(engine, toks, reps):
    """Seconds of `reps` prefills of `toks`, each from an empty context (the resets untimed)."""
    total = 0.0
    for _ in range(reps):
        engine.reset()
        t0 = clock()
        engine.prompt(toks)
        total += clock() - t0
    return total


def start_decode(engine, prompt):
    """Computes `prompt` and keeps (its length, its greedy next token) as the state that
    time_decode starts every repeat from."""
    engine.reset()
    engine.decode_start = (len(prompt), engine.prompt(prompt), prompt)


def time_decode(engine, n_gen, reps):
    """Seconds of `reps` runs of n_gen greedy tokens, each from the state start_decode kept:
    the generated tokens are dropped between runs (the same tokens, the same attention every
    run). A memory that cannot drop a tail (a recurrent state without snapshots) computes the
    prompt again, untimed."""
    n_ctx, first, prompt = engine.decode_start
    total = 0.0
    for _ in range(reps):
        if not engine.truncate(n_ctx):
            engine.reset()
            engine.prompt(prompt)
        tok = first
        t0 = clock()
        for _ in range(n_gen):
            tok = engine.step(tok)
        total += clock() - t0
    return total


def paired_columns(engines, columns, n_pairs, min_s, max_others=1.0):
    """For every column (name -> (tokens per repeat, sample(engine, reps) -> seconds, setup,
    most reps)), n_pairs pairs of one sample per engine, back to back, which engine goes first
    alternating from pair to pair. A pair during which other processes kept more than
    max_others of the CPUs busy is dropped and run again (at most 3 * n_pairs extra tries).
    Returns name -> (Paired seconds per token ours/theirs, reps, others' shares, dropped)."""
    out = {}
    for name, (n_tok, sample, setup, max_reps) in columns.items():
        for e in engines:
            if setup:
                setup(e)
        # the same repeats for both engines, enough for the faster one's sample to last min_s
        reps = min(max_reps, max(repeats_for(lambda r, e=e: sample(e, r), min_s) for e in engines))
        pairs, others, dropped = Paired(), [], 0
        while len(pairs.a) < n_pairs and dropped <= 3 * n_pairs:
            order = (0, 1) if (len(pairs.a) + dropped) % 2 == 0 else (1, 0)
            sec = [0.0, 0.0]
            load = OthersLoad().start()
            for i in order:
                time.sleep(SETTLE_S)
                sec[i] = sample(engines[i], reps) / (n_tok * reps)
            busy = load.stop()
            if busy is not None and busy > max_others:
                dropped += 1
                continue
            pairs.add(sec[0], sec[1])      # ratio theirs/ours seconds = ours/theirs tokens/s
            others.append(busy)
        out[name] = (pairs, reps, others, dropped)
    return out


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "uptime n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--pairs", "--rounds", dest="pairs", type=int, default=9,
                    help="alternating pairs per figure (9: a ~96%% interval of the median ratio)")
    ap.add_argument("--min-sample-ms", type=float, default=30.0,
                    help="repeat a column's run until one sample lasts about this long")
    ap.add_argument("--max-others", type=float, default=1.0,
                    help="drop (and redo) a pair during which other processes kept more than this "
                         "share of the CPUs busy (0..1; 1: keep all)")
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
    import ggml_ref
    reason = ggml_ref.cpu_mismatch_reason()
    if reason:
        sys.exit(reason)
    min_s = a.min_sample_ms / 1000.0
    print(f"# {uptime()}")
    print(f"# {a.threads} threads, tokens/s" + (" of CPU time" if a.cpu_time else "")
          + f"; ratio: median of {a.pairs} alternating pairs, [interval] its distribution-free ~95% one;"
          f" a sample repeats a run `reps` times to last >= {a.min_sample_ms:g} ms")
    print(f"{'case':<26s} {'pyggml':>10s} {'llama.cpp':>10s} {'ratio':>7s} {'interval':>15s}  reps  others")
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
        engines = (Ours(path, n_ctx, a.threads), Theirs(path, n_ctx, a.threads))
        n_vocab = min(e.n_vocab for e in engines)
        prompts = {f"pp{n}": [int(x) for x in rng.integers(3, n_vocab, size=n)] for n in (128, 512)}
        columns = {}
        if not a.long_only:
            for col, toks in prompts.items():
                columns[col] = (len(toks), lambda e, r, t=toks: time_prompt(e, t, r), None, 256)
            columns[f"tg{a.gen}"] = (a.gen, lambda e, r: time_decode(e, a.gen, r),
                                     lambda e: start_decode(e, prompts["pp128"][:16]), 256)
        if long_ctx:
            # the long context is computed once per engine (a 16384-token prefill takes
            # minutes); every sample decodes 16 tokens from it again
            long_prompt = [int(x) for x in rng.integers(3, n_vocab, size=long_ctx)]
            columns[f"tg@{long_ctx}"] = (16, lambda e, r: time_decode(e, 16, r),
                                         lambda e: start_decode(e, long_prompt), 16)
        res = paired_columns(engines, columns, a.pairs, min_s, a.max_others)
        engines[1].close()
        for col, (pairs, reps, others, dropped) in res.items():
            if not pairs.a:
                print(f"{name + ' ' + col:<26s} (every pair dropped: the machine stayed busier than --max-others)")
                continue
            o = 1.0 / statistics.median(pairs.a)
            t = 1.0 / statistics.median(pairs.b)
            med, lo, hi, cover = pairs.ratio()
            busy = [x for x in others if x is not None]
            load = f"{statistics.median(busy) * 100:4.0f}%" if busy else "  n/a"
            print(f"{name + ' ' + col:<26s} {o:10.1f} {t:10.1f} {med:7.2f} {f'[{lo:.2f}, {hi:.2f}]':>15s}"
                  f"  {reps:4d}  {load}" + (f" ({dropped} pairs dropped)" if dropped else "")
                  + (f" (interval covers {cover * 100:.0f}%: too few pairs)" if cover < 0.95 else ""), flush=True)
    print(f"# {uptime()}")


if __name__ == "__main__":
    main()
