"""Cost per column of K-quant MUL_MAT around the K-quant tiles' threshold, two builds alternating:
build A with the tiles from its gg.KTILE_MIN_COLUMNS (32), build B made with a lower one (say 8,
the constant kt::kMinColumns edited in a copy of the tree), so for N between the two B runs the
tiles where A runs the narrower paths (the quantized GEMM, or the repacked tiles with --repack).
At and over A's threshold both run the tiles: that ratio shows the noise.

    python bench/ktile_crossover.py BUILD_A BUILD_B [--rounds R] [--shape cache|stream]
                                    [--repack] [--ns 8,16,...] [--types q4_K,...]

One worker process per build and round, the order alternating; a worker times each product by
its own thread's CPU time (1 thread), median of its calls. Prints per type and N the median over
rounds of ns per super-block x row x column for each build and B / A (< 1: B, the tiles, is
cheaper). Shapes: cache, K 4096 x M 128 (the weights stay in L2); stream, K 4096 x M 14336 (the
weights come from memory every call). Reported, never asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {"cache": (4096, 128, 15), "stream": (4096, 14336, 3)}  # K, M, timed calls per N


def worker(args):
    import numpy as np
    import pyggml as gg
    K, M, calls = SHAPES[args.shape]
    rng = np.random.default_rng(0)
    res = {"threshold": gg.KTILE_MIN_COLUMNS, "t": {}}
    for name in args.types:
        t = {r["name"]: r["type"] for r in gg.type_traits()}[name]
        rows = rng.uniform(-1, 1, size=(64, K)).astype(np.float32)
        raw = np.tile(np.frombuffer(gg.quantize(t, rows.ravel()), dtype=np.uint8), M // 64)
        nmax = max(args.ns)
        ctx = gg.Context(mem_size=raw.size + 2 * nmax * (K + M) * 4 * len(args.ns) + (64 << 20))
        w = ctx.new_tensor(t, [K, M]); w.set(raw)
        handle = gg.repack_weights(w) if args.repack else None
        for n in args.ns:
            b = ctx.new_tensor(gg.F32, [K, n]); b.set(rng.uniform(-1, 1, size=(n, K)).astype(np.float32))
            g = gg.Graph(ctx); g.build_forward_expand(gg.mul_mat(ctx, w, b))
            g.compute(n_threads=1)
            ts = []
            for _ in range(calls):
                t0 = time.thread_time(); g.compute(n_threads=1); ts.append(time.thread_time() - t0)
            res["t"][f"{name} {n}"] = statistics.median(ts) * 1e9 / (K // 256 * M * n)
        del handle
    print(json.dumps(res))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("builds", nargs="*")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shape", choices=list(SHAPES), default="cache")
    ap.add_argument("--repack", action="store_true", help="weights repacked as Model.load does (q4_K..q6_K)")
    ap.add_argument("--ns", default="8,12,16,20,24,28,31,32,40,48,64")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--types", default="q2_K,q3_K,q4_K,q5_K,q6_K")
    a = ap.parse_args()
    a.ns = [int(v) for v in a.ns.split(",")]
    a.types = a.types.split(",")
    if a.worker:
        return worker(a)
    if len(a.builds) != 2:
        ap.error("two builds: A (the tiles from its threshold) and B (a lower threshold)")
    print("# " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    runs = {0: [], 1: []}
    for r in range(a.rounds):
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            env = dict(os.environ, PYGGML_BUILD_DIR=a.builds[i], PYTHONPATH=str(ROOT))
            cmd = [sys.executable, __file__, "--worker", "--shape", a.shape, "--ns", ",".join(map(str, a.ns)),
                   "--types", ",".join(a.types), *(["--repack"] if a.repack else [])]
            runs[i].append(json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True,
                                                     check=True).stdout.splitlines()[-1]))
    th = [runs[i][0]["threshold"] for i in (0, 1)]
    K, M, _ = SHAPES[a.shape]
    print(f"# K{K} M{M} {'repacked ' if a.repack else ''}weights, 1 thread, {a.rounds} rounds; thresholds A {th[0]}, "
          f"B {th[1]}; ns per super-block x row x column (thread CPU time), medians over rounds")
    print(f"{'type':<6s} {'N':>4s} {'A':>8s} {'B':>8s} {'B/A':>6s}  paths")
    for key in runs[0][0]["t"]:
        name, n = key.split()
        va = statistics.median(x["t"][key] for x in runs[0])
        vb = statistics.median(x["t"][key] for x in runs[1])
        paths = " / ".join("tiles" if int(n) >= t else "narrow" for t in th)
        print(f"{name:<6s} {n:>4s} {va:8.3f} {vb:8.3f} {vb / va:6.2f}  {paths}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
