"""The CPU schedule kept with a graph (cpu/schedule.h) against planning it at every compute, on
greedy decode of the tiny demo LLaMA at a --long token context (compare_threads.py's tg case),
at 1 and 2 threads.

    python bench/compare_plan_reuse.py [--pairs 15] [--gen 64] [--long 4096]

Every row comes from --pairs pairs of samples, one with gg.cpu_plan_reuse(False) and one with
it on, back to back, the order alternating from pair to pair. A sample is --gen tokens. Per
decoded token (one compute each):
  plan us     wall microseconds the compute spent finding or making its schedule
              (cpu_schedule_counts' plan_ns), median over the samples;
  thread us   CPU microseconds of the calling thread per token (the host work and thread 0's
              share of the compute), median;
  saved       median over pairs of (fresh - kept) calling-thread CPU microseconds per token,
              with its distribution-free ~95% interval (bench/paired_stats.py).
On a shared machine read the plan column and the paired difference, not absolute figures.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import checkout  # noqa: E402,F401  (this checkout's pyggml, not an installed copy)
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_threads import uptime  # noqa: E402
from paired_stats import Paired  # noqa: E402


def sample(gg, ctx, fill, n_gen, reuse):
    """(plan us per compute, calling-thread CPU us per token, plans built) of n_gen tokens."""
    gg.cpu_plan_reuse(reuse)
    ctx.seq_rm(0, fill, -1)
    before = gg.cpu_schedule_counts()
    t0 = time.thread_time()
    tok = 5
    for _ in range(n_gen):
        tok = ctx.decode_greedy([tok])
    cpu = time.thread_time() - t0
    after = gg.cpu_schedule_counts()
    computes = after["computes"] - before["computes"]
    return ((after["plan_ns"] - before["plan_ns"]) / 1e3 / computes, cpu / n_gen * 1e6,
            after["plans_built"] - before["plans_built"])


def main():
    import pyggml as gg
    from pyggml.demo import load_demo_model
    from pyggml.llm import Context
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--long", type=int, default=4096)
    a = ap.parse_args()
    print(f"# {uptime()}")
    _, model = load_demo_model()
    rng = np.random.default_rng(1)
    prompt = [int(x) for x in rng.integers(3, 256, a.long)]
    print(f"{'threads':>7s} {'plan us fresh':>14s} {'plan us kept':>13s} {'thread us fresh':>16s}"
          f" {'thread us kept':>15s} {'saved us [~95%]':>22s} {'built/kept sample':>18s}")
    try:
        for t in (1, 2):
            ctx = Context(model, n_ctx=a.long + a.gen + 16, n_threads=t)
            ctx.decode_greedy(prompt)
            sample(gg, ctx, a.long, 4, True)  # the one-token graph built
            fresh, kept, diff = [], [], Paired()
            for i in range(a.pairs):
                got = {}
                for reuse in ((False, True) if i % 2 == 0 else (True, False)):
                    got[reuse] = sample(gg, ctx, a.long, a.gen, reuse)
                fresh.append(got[False])
                kept.append(got[True])
                diff.add(got[True][1], got[False][1])
            med, lo, hi, _ = diff.difference()
            print(f"{t:7d} {statistics.median(s[0] for s in fresh):14.2f} {statistics.median(s[0] for s in kept):13.2f}"
                  f" {statistics.median(s[1] for s in fresh):16.1f} {statistics.median(s[1] for s in kept):15.1f}"
                  f" {f'{med:.2f} [{lo:.2f}, {hi:.2f}]':>22s} {f'{fresh[-1][2]}/{kept[-1][2]}':>18s}")
    finally:
        gg.cpu_plan_reuse(True)
    print(f"# {uptime()}")


if __name__ == "__main__":
    main()
