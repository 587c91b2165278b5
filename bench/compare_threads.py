"""Thread scaling of the CPU backend: 2 threads against 1 on a big F32 GEMM and on greedy decode
of the tiny demo LLaMA at a short and a 4096-token context. Also the host overhead per decoded
token at both contexts (everything but graph compute and builds, from Context.timings): it does
not shrink with threads, so it caps the ratio.

    python bench/compare_threads.py [--pairs 9] [--gemm 1024] [--gemm-calls 6] [--gen 64]
                                    [--min-sample-ms 50] [--long 4096] [--max-others 1.0]
                                    [--no-per-core]

Every row comes from --pairs pairs: one sample at 1 thread and one at 2 back to back, which
goes first alternating from pair to pair; the ratio (2 threads over 1, > 1: faster) is the
median of the per-pair ratios and the bracket its distribution-free ~95% interval (order
statistics, bench/paired_stats.py). A GEMM sample is --gemm-calls back-to-back computes after
an untimed one (pages and caches warm); a decode sample is --gen greedy tokens from the same
cached context, repeated until it lasts about --min-sample-ms at 1 thread. Next to the wall-clock figures:
  cpu 2/1   the process's CPU seconds per unit of work at 2 threads over those at 1: 1.0 when
            the second thread only does work, above when it waits by spinning (a tiny decode
            node run on two threads, a pool that spins between nodes);
  1t wall/cpu  the 1-thread samples' wall time over their CPU time (of the calling thread,
            the only one computing): near 1.0 when the 1-thread figure moves with the work
            itself (clock frequency, caches), above when the thread waited for a core.
`others` is the median share of the CPUs other processes kept busy during a pair; pairs above
--max-others are dropped and redone. On a shared machine read the ratios, never the absolute
figures.

Each row is then measured against each core ("vs each core"; --no-per-core skips it): --pairs
rounds of 1 thread pinned to one CPU, 1 thread pinned to another, and 2 threads on both, the
order rotating. The two cores of a virtual machine need not be equally fast (a core whose host
sibling is busy runs slower); the unpinned 1-thread sample runs on whichever core the kernel
picks, while 2 threads get both, so the paired ratio cannot exceed (fast + slow) / fast. The
ratio printed here is the 2-thread speed over the mean of the two cores' 1-thread speeds: 2.0
when the threads split the work perfectly over the cores as they are, whatever their speeds.

Each decode row is followed by its per-token figures: --pairs blocks of --gen tokens at each
thread count, alternating, every token timed alone; the ratio of the lower quartiles (and of
the medians) of the token times. A token slowed by the machine (another tenant on a core, which
hits 2 threads more often than 1) moves the upper tail, not the lower quartile: the quartile
ratio is what the code does on a quiet machine, the paired ratio what this run got.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import checkout  # noqa: E402,F401  (this checkout's pyggml, not an installed copy)
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired_stats import OthersLoad, Paired, repeats_for  # noqa: E402


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


def timed(fn):
    """(wall s, process CPU s, calling thread's CPU s) of fn()."""
    w, p, t = time.perf_counter(), time.process_time(), time.thread_time()
    fn()
    return time.perf_counter() - w, time.process_time() - p, time.thread_time() - t


def decode_run(ctx, fill, n_gen, reps=1):
    def run():
        for _ in range(reps):
            ctx.seq_rm(0, fill, -1)
            tok = 5
            for _ in range(n_gen):
                tok = ctx.decode_greedy([tok])
    return run


def token_times(ctxs, fill, n_gen, blocks):
    """{threads: sorted per-token decode wall times (s)} of `blocks` alternating blocks."""
    out = {1: [], 2: []}
    for b in range(blocks):
        for t in ((1, 2) if b % 2 == 0 else (2, 1)):
            ctx = ctxs[(t, fill)]
            ctx.seq_rm(0, fill, -1)
            tok = 5
            for _ in range(n_gen):
                w = time.perf_counter()
                tok = ctx.decode_greedy([tok])
                out[t].append(time.perf_counter() - w)
    for v in out.values():
        v.sort()
    return out


def gemm_run(g, t, calls):
    def run():
        for _ in range(calls):
            g.compute(t)
    return run


def paired(samples, n_pairs, max_others):
    """samples: {1: (prepare, run), 2: (prepare, run)}. Returns (Paired wall 2t/1t,
    [(wall, cpu, thread cpu) per 1-thread sample], [same at 2], others' shares, dropped)."""
    wall, one, two, others, dropped = Paired(), [], [], [], 0
    while len(wall.a) < n_pairs and dropped <= 3 * n_pairs:
        order = (1, 2) if (len(wall.a) + dropped) % 2 == 0 else (2, 1)
        got = {}
        load = OthersLoad().start()
        for t in order:
            prepare, run = samples[t]
            prepare()
            time.sleep(0.05)    # the other count's pool goes to sleep: each sample starts alike
            got[t] = timed(run)
        busy = load.stop()
        if busy is not None and busy > max_others:
            dropped += 1
            continue
        wall.add(got[2][0], got[1][0])          # ratio: 1-thread s / 2-thread s = speedup
        one.append(got[1])
        two.append(got[2])
        others.append(busy)
    return wall, one, two, others, dropped


def two_cpus():
    """The first two CPUs this process may run on, or None (fewer, or no affinity calls)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return tuple(cpus[:2]) if len(cpus) >= 2 else None


def per_core_rounds(samples, n_rounds, cpus):
    """Rounds of three samples, the order rotating: 1 thread pinned to cpus[0], 1 thread pinned
    to cpus[1], 2 threads on both. Returns (Paired: 2-thread time against the time at the two
    cores' mean 1-thread speed, [1-thread s on cpus[0]], [same on cpus[1]]). Only the calling
    thread is pinned; the pool's workers were started before, with every CPU allowed."""
    allowed = os.sched_getaffinity(0)
    fair, on = Paired(), {cpus[0]: [], cpus[1]: []}
    kinds = [(1, {cpus[0]}), (1, {cpus[1]}), (2, set(cpus))]
    try:
        for r in range(n_rounds):
            got = {}
            for t, mask in kinds[r % 3:] + kinds[:r % 3]:
                os.sched_setaffinity(0, mask)
                prepare, run = samples[t]
                prepare()
                time.sleep(0.05)
                got[(t, min(mask))] = timed(run)[0]
            ta, tb = got[(1, cpus[0])], got[(1, cpus[1])]
            on[cpus[0]].append(ta)
            on[cpus[1]].append(tb)
            # the time 1 thread takes at the mean of the two cores' speeds
            fair.add(got[(2, min(cpus))], 2.0 / (1.0 / ta + 1.0 / tb))
    finally:
        os.sched_setaffinity(0, allowed)
    return fair, on[cpus[0]], on[cpus[1]]


def main():
    from pyggml.demo import load_demo_model
    from pyggml.llm import Context
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", "--rounds", dest="pairs", type=int, default=9)
    ap.add_argument("--gemm", type=int, default=1024)
    ap.add_argument("--gemm-calls", type=int, default=6, help="timed GEMM computes per sample")
    ap.add_argument("--gen", type=int, default=64, help="decoded tokens per sample")
    ap.add_argument("--min-sample-ms", type=float, default=50.0,
                    help="decode samples repeat --gen tokens until they last about this long")
    ap.add_argument("--long", type=int, default=4096)
    ap.add_argument("--max-others", type=float, default=1.0,
                    help="drop (and redo) a pair during which other processes kept more than this "
                         "share of the CPUs busy (0..1; 1: keep all)")
    ap.add_argument("--no-per-core", action="store_true",
                    help="skip the rounds that pin 1 thread to each of two cores in turn")
    a = ap.parse_args()
    pin = None if a.no_per_core else two_cpus()
    print(f"# {uptime()}")
    g = gemm_graph(a.gemm)
    _, model = load_demo_model()
    rng = np.random.default_rng(1)
    rows = {f"gemm {a.gemm}^3 f32": None}
    fills = {"tg (16 cached)": 16, f"tg ({a.long} cached)": a.long}
    ctxs = {}
    for t in (1, 2):
        for fill in fills.values():
            ctx = Context(model, n_ctx=fill + a.gen + 16, n_threads=t)
            ctx.decode_greedy([int(x) for x in rng.integers(3, 256, fill)])
            decode_run(ctx, fill, 4)()                  # the one-token graph built
            ctxs[(t, fill)] = ctx
    print(f"# ratio: median of {a.pairs} alternating pairs 2 threads / 1 thread [~95% interval]")
    print(f"{'case':<24s} {'1 thread':>10s} {'2 threads':>10s} {'ratio':>7s} {'interval':>14s}"
          f" {'cpu 2/1':>8s} {'1t wall/cpu':>12s}  others")
    host = {}
    for name in [*rows, *fills]:
        if name in fills:
            fill = fills[name]
            # repeats set by the 1-thread run: both samples last at least --min-sample-ms
            reps = repeats_for(lambda r: timed(decode_run(ctxs[(1, fill)], fill, a.gen, r))[0], a.min_sample_ms / 1e3)
            samples = {t: (lambda: None, decode_run(ctxs[(t, fill)], fill, a.gen, reps)) for t in (1, 2)}
            for t in (1, 2):
                ctxs[(t, fill)].reset_timings()     # the host overhead: every sample's tokens
            units, unit = a.gen * reps, "tok/s"
        else:
            samples = {t: (lambda t=t: g.compute(t), gemm_run(g, t, a.gemm_calls)) for t in (1, 2)}
            units, unit = 2.0 * a.gemm ** 3 * a.gemm_calls / 1e9, "GFLOP/s"
        wall, one, two, others, dropped = paired(samples, a.pairs, a.max_others)
        if name in fills:
            for t in (1, 2):
                tm = ctxs[(t, fills[name])].timings
                host[(t, name)] = (tm["t_decode_s"] - tm["t_compute_s"] - tm["t_build_s"]) / tm["n_tokens"] * 1e6
        if not wall.a:
            print(f"{name:<24s} (every pair dropped: the machine stayed busier than --max-others)")
            continue
        med, lo, hi, cover = wall.ratio()
        w1 = units / statistics.median(s[0] for s in one)
        w2 = units / statistics.median(s[0] for s in two)
        cpu21 = statistics.median(s[1] for s in two) / statistics.median(s[1] for s in one)
        wc = statistics.median(s[0] / s[2] for s in one)
        busy = [x for x in others if x is not None]
        load = f"{statistics.median(busy) * 100:4.0f}%" if busy else "  n/a"
        print(f"{name:<24s} {w1:10.1f} {w2:10.1f} {med:7.2f} {f'[{lo:.2f}, {hi:.2f}]':>14s}"
              f" {cpu21:8.2f} {wc:12.2f}  {load}   {unit}" + (f" ({dropped} pairs dropped)" if dropped else "")
              + (f" (interval covers {cover * 100:.0f}%: too few pairs)" if cover < 0.95 else ""))
        cpus = sorted(units / s[2] for s in one)
        print(f"{'  1t on its CPU time':<24s} {statistics.median(cpus):10.1f} (min {cpus[0]:.1f}, max {cpus[-1]:.1f})")
        if pin:
            fair, ta, tb = per_core_rounds(samples, a.pairs, pin)
            med, lo, hi, _ = fair.ratio()
            sa, sb = units / statistics.median(ta), units / statistics.median(tb)
            print(f"{'  vs each core':<24s} {sa:10.1f} {sb:10.1f} {med:7.2f} {f'[{lo:.2f}, {hi:.2f}]':>14s}"
                  f"   1t pinned to cpu {pin[0]} / cpu {pin[1]}; ratio: 2 threads over the two cores' mean"
                  f" (the cores' speeds {min(sa, sb) / max(sa, sb):.2f} apart)")
        if name in fills:
            tt = token_times(ctxs, fills[name], a.gen, a.pairs)
            q = {t: (v[len(v) // 4], statistics.median(v)) for t, v in tt.items()}
            print(f"{'  per token, quartile':<24s} {q[1][0] * 1e6:8.1f}us {q[2][0] * 1e6:8.1f}us {q[1][0] / q[2][0]:7.2f}"
                  f"   (medians {q[1][1] * 1e6:.1f} / {q[2][1] * 1e6:.1f} us: {q[1][1] / q[2][1]:.2f})")
    for name in fills:
        if (1, name) in host:
            print(f"host overhead per token (us, tiny demo model, {name}): 1 thread {host[(1, name)]:.1f}, "
                  f"2 threads {host[(2, name)]:.1f}")
    print(f"# {uptime()}")


if __name__ == "__main__":
    main()
