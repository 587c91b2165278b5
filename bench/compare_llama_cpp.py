"""pyggml.llm vs llama.cpp (llama-cpp-python): prompt processing and decode tokens/s on a tiny
and a small (~100M parameters, F16 and Q8_0) random LLaMA, same threads, one run each.

    python bench/compare_llama_cpp.py [-t THREADS] [--prompt 128] [--gen 32] [--only tiny]

Prints one table: case, pyggml, llama.cpp, ratio (pyggml / llama.cpp; > 1 means faster).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

# numpy's OpenBLAS keeps its worker threads spinning after any BLAS call; on a 2-core machine
# they steal the cores both engines' thread pools need (measured: pyggml tiny decode at 2
# threads fell from ~5000 to ~200 tokens/s). Neither engine uses BLAS, so pin it to one thread.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

CASES = {
    "tiny-f32": dict(small=False, dtype="f32"),
    "small-f16": dict(small=True, dtype="f16"),
    "small-q8_0": dict(small=True, dtype="q8_0"),
}


def write_model(folder, name, small, dtype):
    from pyggml.llm import write_small_llama, write_tiny_llama
    path = os.path.join(folder, f"{name}.gguf")
    if not os.path.exists(path):
        if small:
            write_small_llama(path, dtype=dtype, seed=0)
        else:
            write_tiny_llama(path, n_vocab=256, n_embd=128, n_layer=4, n_head=4, n_head_kv=2,
                             n_ff=384, dtype=dtype, seed=0)
    return path


def bench_pyggml(path, prompt, n_gen, threads, flash_attn=True):
    from pyggml.llm import Context, Model
    ctx = Context(Model.load(path, progress=False), n_ctx=len(prompt) + n_gen + 8, n_threads=threads,
                  flash_attn=flash_attn, n_batch=512, n_ubatch=512)
    ctx.decode(prompt[:8])                 # warm-up: build both graph shapes once
    ctx.decode(prompt[8:9])
    ctx.reset()
    t0 = time.perf_counter()
    logits = ctx.decode(prompt)
    t1 = time.perf_counter()
    for _ in range(n_gen):
        logits = ctx.decode([int(np.argmax(logits[-1]))])
    t2 = time.perf_counter()
    return len(prompt) / (t1 - t0), n_gen / (t2 - t1)


def bench_llama_cpp(path, prompt, n_gen, threads, flash_attn=True):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=path, n_ctx=len(prompt) + n_gen + 8, n_batch=512, n_ubatch=512,
                          n_threads=threads, n_threads_batch=threads, flash_attn=flash_attn,
                          verbose=False)
    llm.eval(prompt[:8])
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt)
    t1 = time.perf_counter()
    for _ in range(n_gen):
        llm.eval([int(np.argmax(llm.scores[llm.n_tokens - 1]))])
    t2 = time.perf_counter()
    return len(prompt) / (t1 - t0), n_gen / (t2 - t1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--only", choices=list(CASES), action="append")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "pyggml-bench"))
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    rng = np.random.default_rng(0)
    print(f"{'case':<28s} {'pyggml':>12s} {'llama.cpp':>12s} {'ratio':>7s}   ({a.threads} threads, tokens/s)")
    for name in a.only or CASES:
        c = CASES[name]
        path = write_model(a.dir, name, c["small"], c["dtype"])
        n_vocab = 256 if not c["small"] else 32000
        prompt = [int(x) for x in rng.integers(3, n_vocab, size=a.prompt)]
        ours = bench_pyggml(path, prompt, a.gen, a.threads)
        theirs = bench_llama_cpp(path, prompt, a.gen, a.threads)
        for i, what in enumerate((f"pp{a.prompt}", f"tg{a.gen}")):
            print(f"{name + ' ' + what:<28s} {ours[i]:12.1f} {theirs[i]:12.1f} {ours[i] / theirs[i]:7.2f}")


if __name__ == "__main__":
    main()
