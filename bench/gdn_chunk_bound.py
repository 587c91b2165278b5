"""Would a chunked gated_delta_net pay off for prompts? A lower bound on its cost, next to the
token-by-token op, in one run.

    python bench/gdn_chunk_bound.py [-t THREADS] [--chunk 64] [--reps 15]

The chunked (WY / UT-transform) form processes a chunk of C tokens of one head with dense
products: three of S x S x C (W.S, Q.S and the state update K^T.V') and five of C x C x S
(K.K^T, Q.K^T, the two products with the inverted triangle, and the intra-chunk (Q.K^T).V').
This script times only those eight products, batched over the heads, through pyggml's mul_mat
with every operand contiguous (the best case: no triangular solve, no decay masks, no layout
copies) and compares them with gated_delta_net itself over the same C tokens. When the bound
alone is slower than the recurrent op, a chunked form built on these kernels cannot win.
Prints `uptime` first; ratios only, on a shared machine.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import checkout  # noqa: E402,F401  (this checkout's pyggml, not an installed copy)
import numpy as np  # noqa: E402

import pyggml as gg  # noqa: E402


def best_of(f, reps):
    f()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def recurrent_graph(S, H, C, rng):
    ctx = gg.Context(mem_size=(4 * S * S * H + 8 * S * H * C) * 4 + (8 << 20))

    def t(ne, lo, hi):
        x = ctx.new_tensor(gg.F32, list(ne))
        x.set(rng.uniform(lo, hi, size=ne[::-1]).astype(np.float32))
        return x
    q, k, v = t((S, H, C, 1), -0.1, 0.1), t((S, H, C, 1), -0.1, 0.1), t((S, H, C, 1), -1, 1)
    g, beta = t((1, H, C, 1), -0.5, -0.01), t((1, H, C, 1), 0.1, 1.0)
    state = t((S, S, H, 1), -1, 1)
    gf = gg.Graph(ctx)
    gf.build_forward_expand(gg.gated_delta_net(ctx, q, k, v, g, beta, state, 1))
    return ctx, gf


def products_graph(S, H, C, rng):
    shapes = [(S, S, C)] * 2 + [(C, S, S)] + [(S, C, C)] * 2 + [(C, S, C)] * 3   # (K, M, N)
    ctx = gg.Context(mem_size=sum((K * M + K * N + M * N) * H for K, M, N in shapes) * 4 + (8 << 20))
    gf = gg.Graph(ctx)
    flops = 0
    for K, M, N in shapes:
        a = ctx.new_tensor(gg.F32, [K, M, H])
        b = ctx.new_tensor(gg.F32, [K, N, H])
        a.set(rng.uniform(-1, 1, size=(H, M, K)).astype(np.float32))
        b.set(rng.uniform(-1, 1, size=(H, N, K)).astype(np.float32))
        gf.build_forward_expand(gg.mul_mat(ctx, a, b))
        flops += 2 * K * M * N * H
    return ctx, gf, flops


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    print("# " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"# threads={a.threads}, chunk C={a.chunk}; times are best of {a.reps}, the sides alternating")
    print(f"{'case':<34s} {'recurrent':>10s} {'bound':>10s} {'bound/rec':>9s} {'GEMM GFLOP/s':>12s}")
    rng = np.random.default_rng(0)
    for S, H in ((128, 32), (128, 16), (64, 32)):
        C = a.chunk
        _c1, rec = recurrent_graph(S, H, C, rng)
        _c2, prod, flops = products_graph(S, H, C, rng)
        tr, tp = [], []
        for _ in range(3):
            tr.append(best_of(lambda: rec.compute(a.threads), a.reps))
            tp.append(best_of(lambda: prod.compute(a.threads), a.reps))
        r, p = min(tr), min(tp)
        print(f"{f'S{S} H{H} T={C} (one chunk)':<34s} {r * 1e3:8.3f}ms {p * 1e3:8.3f}ms {p / r:9.2f} "
              f"{flops / p / 1e9:12.1f}", flush=True)
    print("# " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
