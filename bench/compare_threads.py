"""Thread scaling of the CPU backend: 2 threads against 1 on a big F32 GEMM and on greedy decode
of the tiny demo LLaMA at a short and a 4096-token context, alternating the two thread counts
in one run (median of `rounds`). Also the host overhead per decoded token (everything but
graph compute, from Context.timings).

The GEMM row is timed in turns of its own before the decode rows: a turn is --gemm-calls
back-to-back computes at one thread count, the counts alternate (and which goes first), and
both get the same turns. The row is the median of the warm computes (all but a turn's first);
the best warm one and the median cold one (a turn's first, after the other count's turn and a
short pause) are printed under it.

    python bench/compare_threads.py [--rounds 5] [--gemm 1024] [--gemm-calls 6] [--long 4096]

On a shared machine read the ratios only, next to the load printed with them.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "uptime n/a"


def gemm_graph(n):
    import pyggml as gg
    rng = np.random.default_rng(0)
    ctx = gg.Context(3 * n * n * 4 + (1 << 20))
    a = ctx.from_numpy(rng.standard_normal((n, n), dtype=np.float32))
    b = ctx.from_numpy(rng.standard_normal((n, n), dtype=np.float32))
    g = gg.Graph(ctx)
    g.build_forward_expand(gg.mul_mat(ctx, a, b))
    g.compute(1)
    return g


def decode_tps(ctx, fill, n_gen=32):
    ctx.seq_rm(0, fill, -1)
    tok = 5
    t0 = time.perf_counter()
    for _ in range(n_gen):
        tok = ctx.decode_greedy([tok])
    return n_gen / (time.perf_counter() - t0)


def main():
    from pyggml.demo import load_demo_model
    from pyggml.llm import Context
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--gemm", type=int, default=1024)
    ap.add_argument("--gemm-calls", type=int, default=6, help="back-to-back GEMM computes per turn")
    ap.add_argument("--long", type=int, default=4096)
    a = ap.parse_args()
    print(f"# {uptime()}")
    g = gemm_graph(a.gemm)
    flops = 2.0 * a.gemm ** 3
    _, model = load_demo_model()
    rng = np.random.default_rng(1)
    ctxs, fills = {}, {"tg (16 cached)": 16, f"tg ({a.long} cached)": a.long}
    for t in (1, 2):
        for fill in fills.values():
            ctx = Context(model, n_ctx=fill + 64, n_threads=t)
            ctx.decode_greedy([int(x) for x in rng.integers(3, 256, fill)])
            ctxs[(t, fill)] = ctx
    res = {(what, t): [] for what in ["gemm", *fills] for t in (1, 2)}
    gemm_cold = {1: [], 2: []}
    for r in range(a.rounds):
        for t in ((1, 2) if r % 2 == 0 else (2, 1)):
            time.sleep(0.05)  # the other count's pool goes to sleep: each turn starts alike
            for i in range(a.gemm_calls):
                t0 = time.perf_counter()
                g.compute(t)
                (gemm_cold[t] if i == 0 else res[("gemm", t)]).append(flops / (time.perf_counter() - t0) / 1e9)
    host = {t: [] for t in (1, 2)}
    for _ in range(a.rounds):
        for t in (1, 2):
            for what, fill in fills.items():
                ctx = ctxs[(t, fill)]
                ctx.reset_timings()
                res[(what, t)].append(decode_tps(ctx, fill))
                tm = ctx.timings
                if fill == 16:
                    host[t].append((tm["t_decode_s"] - tm["t_compute_s"] - tm["t_build_s"])
                                   / tm["n_tokens"] * 1e6)
    print(f"{'case':<24s} {'1 thread':>10s} {'2 threads':>10s} {'ratio':>7s}")
    for what in ["gemm", *fills]:
        one, two = (statistics.median(res[(what, t)]) for t in (1, 2))
        unit = "GFLOP/s" if what == "gemm" else "tok/s"
        name = f"gemm {a.gemm}^3 f32" if what == "gemm" else what
        print(f"{name:<24s} {one:10.1f} {two:10.1f} {two / one:7.2f}   {unit}")
        if what == "gemm":
            best = [max(res[("gemm", t)]) for t in (1, 2)]
            cold = [statistics.median(gemm_cold[t]) for t in (1, 2)]
            print(f"{'  best warm':<24s} {best[0]:10.1f} {best[1]:10.1f} {best[1] / best[0]:7.2f}   {unit}")
            print(f"{'  cold (turn first)':<24s} {cold[0]:10.1f} {cold[1]:10.1f} {cold[1] / cold[0]:7.2f}   {unit}")
    print(f"host overhead per token (us, tiny demo model): 1 thread {statistics.median(host[1]):.1f}, "
          f"2 threads {statistics.median(host[2]):.1f}")
    print(f"# {uptime()}")


if __name__ == "__main__":
    main()
