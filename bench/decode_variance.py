"""Where a 1-thread decode figure's spread comes from, on the tiny demo LLaMA at a long context.

    python bench/decode_variance.py [--samples 40] [--long 4096] [--gen 16]

Each sample times --gen greedy tokens after a --long-token context three ways: wall clock, the
calling thread's CPU time (the only thread computing at 1 thread, so the pool has no part in
it), and, just before, a fixed Python loop's CPU time (a probe of how fast the core runs code
that stays in its caches). It prints the spread (coefficient of variation) of each and:
  wall/cpu and its correlation with the share of the CPUs other processes used (/proc/stat):
      the time the thread waited for a core;
  corr(probe, decode CPU): how much of the CPU-time spread the whole core shares (clock
      frequency, a co-runner's pressure on caches and memory) rather than the decode itself.
Whether the context's memory got huge pages is printed too (AnonHugePages of the process).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import checkout  # noqa: E402,F401  (this checkout's pyggml, not an installed copy)
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired_stats import OthersLoad  # noqa: E402


def huge_kb():
    try:
        with open(f"/proc/{os.getpid()}/smaps_rollup") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def main():
    from pyggml.demo import load_demo_model
    from pyggml.llm import Context
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--long", type=int, default=4096)
    ap.add_argument("--gen", type=int, default=16)
    a = ap.parse_args()
    _, model = load_demo_model()
    ctx = Context(model, n_ctx=a.long + a.gen + 16, n_threads=1)
    rng = np.random.default_rng(1)
    ctx.decode_greedy([int(x) for x in rng.integers(3, 256, a.long)])

    def probe():
        x = 0
        for i in range(200000):
            x += i

    def decode():
        ctx.seq_rm(0, a.long, -1)
        tok = 5
        for _ in range(a.gen):
            tok = ctx.decode_greedy([tok])
    decode()
    rows = []
    for _ in range(a.samples):
        load = OthersLoad().start()
        t = time.thread_time()
        probe()
        p = time.thread_time() - t
        t, w = time.thread_time(), time.perf_counter()
        decode()
        rows.append((p, time.thread_time() - t, time.perf_counter() - w, load.stop()))
    P, D, W, O = (np.array(c, dtype=float) for c in zip(*rows))
    cv = lambda x: x.std() / x.mean()  # noqa: E731
    print(f"# {a.samples} samples of {a.gen} tokens after {a.long}, 1 thread; "
          f"AnonHugePages {huge_kb()} kB")
    print(f"decode tok/s, wall:        min {a.gen / W.max():8.0f}  median {a.gen / np.median(W):8.0f}  max {a.gen / W.min():8.0f}")
    print(f"decode tok/s, thread CPU:  min {a.gen / D.max():8.0f}  median {a.gen / np.median(D):8.0f}  max {a.gen / D.min():8.0f}"
          f"  (cv {cv(D):.3f}; the probe's cv {cv(P):.3f})")
    ratio = W / D
    if np.isnan(O).any() or O.std() == 0:
        corr_o = float("nan")
    else:
        corr_o = np.corrcoef(ratio, O)[0, 1]
    print(f"wall/cpu median {np.median(ratio):.2f} (max {ratio.max():.2f}); corr(wall/cpu, others' share) {corr_o:.2f}; "
          f"others' share median {np.nanmedian(O):.2f}")
    print(f"corr(probe CPU, decode CPU) {np.corrcoef(P, D)[0, 1]:.2f}")


if __name__ == "__main__":
    main()
