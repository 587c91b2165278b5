"""Per-token host time of greedy decoding on the tiny demo-sized LLaMA (bench/compare_llama_cpp.py's
TINY, F32 by default), with graph reuse: everything decode_greedy spends outside Graph.compute
(Context.timings: t_decode_s - t_compute_s - t_build_s), min / p25 / median over N tokens, for
the one-token shortcut (fast_decode, the default) and the general path alternating in one run.
Also what Graph.compute itself costs beyond its nodes' kernels (its wall time minus the sum of
the backend's own per-node timer, profiling on): the schedule, the checks, the thread hand-over.

    python bench/host_overhead.py [-t 2] [-n 2000] [--rounds 3] [--dtype f32]

On a shared machine the median mostly measures the load: read it next to `uptime`.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import checkout  # noqa: E402,F401  (this checkout's pyggml, not an installed copy)
from compare_llama_cpp import TINY, uptime  # noqa: E402  (the bench folder is the script's)


def host_times(ctx, n, tok):
    """Per-token host microseconds of n greedy tokens (the context wraps back to 16 cached)."""
    xs = []
    for _ in range(n):
        if ctx.n_past() >= ctx.n_ctx - 1:
            ctx.seq_rm(0, 16, -1)
        ctx.reset_timings()
        tok = ctx.decode_greedy([tok])
        tm = ctx.timings
        xs.append((tm["t_decode_s"] - tm["t_compute_s"] - tm["t_build_s"]) * 1e6)
    return xs, tok


def compute_overhead(ctx, tok, n=300):
    """(median wall us of Graph.compute, median us of the sum of its node times) on the
    context's current one-token graph."""
    tok = ctx.decode_greedy([tok])
    g = ctx._last.gf
    g.set_profiling(True)
    walls, kernels = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        g.compute(ctx.n_threads)
        walls.append(time.perf_counter() - t0)
        kernels.append(sum(g.node_times))
    g.set_profiling(False)
    return statistics.median(walls) * 1e6, statistics.median(kernels) * 1e6, len(g.nodes)


def q(xs, f):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(f * len(xs)))]


def main():
    from pyggml.llm import Context, Model, tiny
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", "--tokens", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "q8_0", "q4_0"])
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "pyggml-bench"))
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    path = os.path.join(a.dir, f"tiny-{a.dtype}.gguf")
    if not os.path.exists(path):
        tiny.write_tiny_llama(path, seed=0, dtype=a.dtype, **TINY)
    model = Model.load(path, progress=False)
    print(f"# {uptime()}")
    print(f"# tiny-{a.dtype}, {a.threads} threads, {a.rounds} alternating rounds of {a.tokens} tokens")
    ctxs, toks, res = {}, {}, {}
    for fast in (True, False):
        ctx = Context(model, n_ctx=640, n_threads=a.threads)
        ctx.fast_decode = fast
        toks[fast] = ctx.decode_greedy(list(range(3, 19)))
        toks[fast] = ctx.decode_greedy([toks[fast]])
        ctxs[fast], res[fast] = ctx, []
    for _ in range(a.rounds):
        for fast in (True, False):
            xs, toks[fast] = host_times(ctxs[fast], a.tokens, toks[fast])
            res[fast] += xs
    print(f"{'host us per token':<28s} {'min':>7s} {'p25':>7s} {'median':>7s}")
    for fast, label in ((True, "shortcut (fast_decode)"), (False, "general path")):
        xs = res[fast]
        print(f"{label:<28s} {q(xs, 0):7.1f} {q(xs, 0.25):7.1f} {q(xs, 0.5):7.1f}")
    wall, kern, n_nodes = compute_overhead(ctxs[True], toks[True])
    print(f"Graph.compute of the decode graph ({n_nodes} nodes): wall {wall:.1f} us, kernels "
          f"{kern:.1f} us, outside the kernels {wall - kern:.1f} us (medians)")
    print(f"# {uptime()}")


if __name__ == "__main__":
    main()
