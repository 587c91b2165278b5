"""MUL_MAT_ID (MoE prompt processing) of pyggml at two instruction-set levels, interleaved.

    python bench/compare_isa_moe.py [-t THREADS] [--reps R] [--levels avx512,avx2] [TYPE ...]

E experts of K x M weights, T tokens routed to U experts each (uniform random): per-expert GEMMs
of about T * U / E columns. Samples of the levels alternate (gg.set_isa between computes, order
rotated each rep), so a burst of load hits both alike. Prints the median and minimum ms per
call of each level and the ratios (first level over the others: > 1 means it is faster).
Reported, never asserted.
"""
import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--levels", default="avx512,avx2")
    ap.add_argument("--shape", default="2048,1408,16,256,4", help="K,M,E,T,U")
    ap.add_argument("types", nargs="*")
    a = ap.parse_args()
    import pyggml as gg
    K, M, E, T, U = (int(v) for v in a.shape.split(","))
    levels = a.levels.split(",")
    table = {r["name"]: r for r in gg.type_traits()}
    print("# " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"# MUL_MAT_ID K{K} M{M} E{E} T{T} U{U}, {a.threads} threads; ms per call; detected {gg.isa(True)}")
    print(f"{'type':<8s}" + "".join(f" {lv + ' med':>11s} {lv + ' min':>11s}" for lv in levels)
          + "".join(f" {levels[0] + '/' + lv:>13s}" for lv in levels[1:]))
    rng = np.random.default_rng(0)
    for name in a.types or ["q4_0", "q8_0", "q4_K", "q6_K"]:
        t = table[name]["type"]
        rows = rng.uniform(-1, 1, size=(64, K)).astype(np.float32)
        raw = np.frombuffer(gg.quantize(t, rows.ravel()), dtype=np.uint8)
        raw = np.tile(raw, M * E // 64)
        ctx = gg.Context(mem_size=raw.size + (K + M) * T * U * 4 + (64 << 20))
        w = ctx.new_tensor(t, [K, M, E]); w.set(raw)
        b = ctx.new_tensor(gg.F32, [K, 1, T]); b.set(rng.uniform(-1, 1, size=(T, 1, K)).astype(np.float32))
        ids = ctx.new_tensor(gg.I32, [U, T]); ids.set(np.stack([rng.permutation(E)[:U] for _ in range(T)]).astype(np.int32))
        g = gg.Graph(ctx); g.build_forward_expand(gg.mul_mat_id(ctx, w, b, ids))
        ts = {lv: [] for lv in levels}
        for r in range(a.reps + 1):
            for i in range(len(levels)):
                lv = levels[(r + i) % len(levels)]
                prev = gg.set_isa(lv)
                t0 = time.perf_counter()
                g.compute(n_threads=a.threads)
                dt = time.perf_counter() - t0
                gg.set_isa(prev)
                if r:
                    ts[lv].append(dt * 1e3)
        med = {lv: statistics.median(v) for lv, v in ts.items()}
        mn = {lv: min(v) for lv, v in ts.items()}
        print(f"{name:<8s}" + "".join(f" {med[lv]:11.2f} {mn[lv]:11.2f}" for lv in levels)
              + "".join(f" {med[lv] / med[levels[0]]:6.2f}/{mn[lv] / mn[levels[0]]:<6.2f}" for lv in levels[1:]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
