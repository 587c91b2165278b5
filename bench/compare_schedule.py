"""The CPU schedule with thread shares (barrier-free nodes: any thread takes the next share, a
late thread finds them done) against the lockstep one (PYGGML_CPU_SHARES=0: every thread runs
its own share and all wait for the slowest), alternating in one process: prompt tokens/s of
tiny random LLaMAs, plus the per-token host time of a greedy decode (min and quartile: on a
shared machine the median mostly measures the load).

    python bench/compare_schedule.py [-t 2] [--rounds 9] [--only f32 --only q4_0 ...]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import checkout  # noqa: E402,F401  (this checkout's pyggml, not an installed copy)
import numpy as np  # noqa: E402

from compare_llama_cpp import TINY, uptime  # noqa: E402  (the bench folder is the script's)
from host_overhead import host_times  # noqa: E402


def host_us(ctx, n=1000):
    """Per-token host time (decode minus graph compute) of n greedy tokens: (min, p25)."""
    xs, _ = host_times(ctx, n, ctx.decode_greedy(list(range(3, 19))))
    xs.sort()
    return xs[0], xs[len(xs) // 4]


def main():
    from pyggml.llm import Context, Model, tiny
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--only", action="append", choices=["f32", "f16", "q8_0", "q4_0"])
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "pyggml-bench"))
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    print(f"# {uptime()}")
    print(f"# {a.threads} threads, median of {a.rounds} alternating rounds, prompt tokens/s")
    print(f"{'case':<18s} {'shares':>9s} {'lockstep':>9s} {'ratio':>7s}")
    rng = np.random.default_rng(0)
    prompts = {n: [int(x) for x in rng.integers(3, 256, size=n)] for n in (128, 512)}
    for dtype in a.only or ["f32", "f16", "q8_0", "q4_0"]:
        path = os.path.join(a.dir, f"tiny-{dtype}.gguf")
        if not os.path.exists(path):
            tiny.write_tiny_llama(path, seed=0, dtype=dtype, **TINY)
        ctx = Context(Model.load(path, progress=False), n_ctx=640, n_threads=a.threads,
                      n_batch=512, n_ubatch=512)
        res = {}
        for _ in range(a.rounds):
            for mode in ("1", "0"):
                os.environ["PYGGML_CPU_SHARES"] = mode
                for n, toks in prompts.items():
                    ctx.reset()
                    t0 = time.perf_counter()
                    ctx.decode_greedy(toks)
                    res.setdefault((mode, n), []).append(n / (time.perf_counter() - t0))
        os.environ.pop("PYGGML_CPU_SHARES")
        for n in prompts:
            s, lk = statistics.median(res[("1", n)]), statistics.median(res[("0", n)])
            print(f"{'tiny-' + dtype + f' pp{n}':<18s} {s:9.1f} {lk:9.1f} {s / lk:7.2f}", flush=True)
        ctx.reset()
        lo, q1 = host_us(ctx)
        print(f"{'tiny-' + dtype + ' host':<18s} min {lo:.1f} us, p25 {q1:.1f} us per decoded token")
    print(f"# {uptime()}")


if __name__ == "__main__":
    main()
