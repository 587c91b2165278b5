"""Decode and prompt tokens/s on a real model, SmolLM2-135M-Instruct (Q4_1, fetched once into
the cache folder like the demo): pyggml, and llama.cpp (llama-cpp-python) when importable,
same prompt, same threads, greedy, one run each after a warm-up.

    python bench/smollm2_decode.py [-t 2] [--gen 64]

Prints one line per engine and the decode ratio (pyggml / llama.cpp; > 1 means faster).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# numpy's OpenBLAS worker threads spin after a BLAS call and steal the cores (see
# compare_llama_cpp.py); neither engine uses BLAS
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import checkout  # noqa: E402,F401  (this checkout's pyggml, not an installed copy)
import numpy as np  # noqa: E402

PROMPT = "Write a short paragraph about the history of the printing press."


def bench_pyggml(path, threads, n_gen):
    from pyggml.llm import Context, Model
    model = Model.load(path, progress=False)
    prompt = model.tokenize(model.apply_chat_template([{"role": "user", "content": PROMPT}]),
                            parse_special=True)
    ctx = Context(model, n_ctx=len(prompt) + n_gen + 8, n_threads=threads)
    ctx.generate(prompt[:4], 2)
    ctx.reset()
    ctx.generate(prompt, n_gen)
    t = ctx.last_timings
    return prompt, t["prompt_tokens_per_s"], t["gen_tokens_per_s"]


def bench_llama_cpp(path, threads, n_gen, prompt):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=path, n_ctx=len(prompt) + n_gen + 8, n_threads=threads,
                          n_threads_batch=threads, flash_attn=True, verbose=False, seed=0)
    llm.eval(prompt[:4])
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt)
    t1 = time.perf_counter()
    for _ in range(n_gen - 1):
        llm.eval([int(np.argmax(llm.scores[llm.n_tokens - 1]))])
    t2 = time.perf_counter()
    return len(prompt) / (t1 - t0), (n_gen - 1) / (t2 - t1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=64)
    a = ap.parse_args()
    from pyggml import demo
    path, why = demo.fetch_smollm2()
    if path is None:
        print(f"SmolLM2 is not available: {why}")
        return 1
    prompt, pp, tg = bench_pyggml(path, a.threads, a.gen)
    print(f"pyggml     {a.threads} threads: prompt {len(prompt)} tokens {pp:8.1f} t/s, decode {a.gen} tokens {tg:8.1f} t/s")
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print("llama.cpp  not importable (llama_cpp): no comparison")
        return 0
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ggml_ref
    reason = ggml_ref.cpu_mismatch_reason()
    if reason:
        print(f"llama.cpp  {reason}: no comparison")
        return 0
    lpp, ltg = bench_llama_cpp(path, a.threads, a.gen, prompt)
    print(f"llama.cpp  {a.threads} threads: prompt {len(prompt)} tokens {lpp:8.1f} t/s, decode {a.gen} tokens {ltg:8.1f} t/s")
    print(f"ratio      prompt {pp / lpp:.2f}, decode {tg / ltg:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
