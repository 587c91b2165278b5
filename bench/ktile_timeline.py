"""Per-thread timeline of the K-quant tile GEMM (n = 128, K 4096 x M 14336) at 1 and 2 threads.

    cmake -S . -B build-timeline -DPYGGML_BUILD_PYTHON=ON -DCMAKE_BUILD_TYPE=Release \\
          -DCMAKE_CXX_FLAGS=-DPYGGML_KTILE_TIMELINE && cmake --build build-timeline -j2
    PYGGML_BUILD_DIR=$PWD/build-timeline PYTHONPATH=$PWD python bench/ktile_timeline.py [--reps R] [--flush] [TYPE]

Needs a build with PYGGML_KTILE_TIMELINE (csrc/cpu/ktile_timeline.h): every share of the tile
driver then reports when it started, the columns it converted and when its conversion ended
(claims and waits included), its units and their decode and tile CPU time, its wall and CPU time
and its cores. The samples (1 and 2 threads alternating, each after a 3 ms pause; --flush: after
a 64 MiB copy too, a cold L3 as between the sides of bench/compare_quant.py) run in a child
process whose stderr is read here. Printed: the 1-thread wall and per-unit costs; at 2 threads,
over all samples and over the concurrent ones (the two shares on two cores, neither preempted:
CPU time >= 95% of wall), the wall, the second share's start delay, the conversion's end, the
end imbalance and each share's per-unit decode and tile CPU time. Where the 2-thread wall over
the concurrent samples is half the 1-thread wall, what is lost in the others is the machine's load.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
K, M, N = 4096, 14336, 128


def child(name, reps, flush):
    sys.path.insert(0, str(ROOT / "bench"))
    import numpy as np

    import pyggml as gg
    from compare_quant import Case

    g = Case(gg, None, name, K, M, N, 2).graph
    big = np.ones(16 << 20, dtype=np.float32)
    copy = np.empty_like(big)
    for nt in (1, 2):
        g.compute(n_threads=nt)
    for _ in range(reps):
        for nt in (1, 2):
            if flush:
                np.copyto(copy, big)
            time.sleep(0.003)
            t0 = time.perf_counter()
            g.compute(n_threads=nt)
            print(f"SAMPLE nt={nt} wall_ms={(time.perf_counter() - t0) * 1e3:.3f}", file=sys.stderr, flush=True)


def _fields(line):
    return {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.]+)", line)}


def parse(text):
    samples, shares = [], []
    for line in text.splitlines():
        if line.startswith("KTILE_TIMELINE"):
            shares.append(_fields(line))
        elif line.startswith("SAMPLE"):
            s = _fields(line)
            s["shares"], shares = sorted(shares, key=lambda x: x["t0_ns"]), []
            samples.append(s)
    return samples


def concurrent(s):
    sh = s["shares"]
    return (len(sh) == 2 and sh[0]["core0"] != sh[1]["core0"]
            and all(x["core0"] == x["core1"] and x["cpu_us"] >= 0.95 * x["wall_us"] for x in sh))


def med(xs):
    xs = list(xs)
    return statistics.median(xs) if xs else float("nan")


def report_two(label, samples):
    if not samples:
        print(f"2 threads, {label}: none")
        return float("nan")
    def first(s): return s["shares"][0]
    def second(s): return s["shares"][-1]
    def end_us(s, x): return (x["t0_ns"] - first(s)["t0_ns"]) / 1e3 + x["wall_us"]
    wall = med(s["wall_ms"] for s in samples)
    print(f"2 threads, {label} ({len(samples)}): wall med {wall:.2f} ms, min {min(s['wall_ms'] for s in samples):.2f}; "
          f"second share starts +{med((second(s)['t0_ns'] - first(s)['t0_ns']) / 1e3 for s in samples):.0f} us; "
          f"conversion ends +{med(first(s)['conv_end_us'] for s in samples):.0f} us (first share); end imbalance "
          f"{med(abs(end_us(s, first(s)) - end_us(s, second(s))) for s in samples):.0f} us")
    for i, pick in enumerate((first, second)):
        xs = [pick(s) for s in samples]
        print(f"  share started {'first' if i == 0 else 'second'}: columns {med(x['columns'] for x in xs):.0f}, "
              f"units {med(x['units'] for x in xs):.0f}, per unit: decode {med(x['decode_cpu_us'] / x['units'] for x in xs):.2f} "
              f"us + tile {med(x['tile_cpu_us'] / x['units'] for x in xs):.2f} us CPU")
    return wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("type", nargs="?", default="q4_K")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--flush", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.type, a.reps, a.flush)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    cmd = [sys.executable, __file__, a.type, "--reps", str(a.reps), "--child"] + (["--flush"] if a.flush else [])
    r = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    samples = parse(r.stderr)
    if r.returncode or not any(s["shares"] for s in samples):
        sys.exit(r.stderr[-2000:] + "\nno timeline lines: build with -DPYGGML_KTILE_TIMELINE (see the docstring)")
    print(f"# {load}\n# {a.type} GEMM K{K} x M{M} x N{N}, {a.reps} samples a thread count{', cold L3' if a.flush else ''}")
    one = [s for s in samples if s["nt"] == 1 and s["shares"]]
    x1 = [s["shares"][0] for s in one]
    w1 = med(s["wall_ms"] for s in one)
    print(f"1 thread ({len(one)}): wall med {w1:.2f} ms, min {min(s['wall_ms'] for s in one):.2f}; per unit: decode "
          f"{med(x['decode_cpu_us'] / x['units'] for x in x1):.2f} us + tile {med(x['tile_cpu_us'] / x['units'] for x in x1):.2f} us CPU")
    two = [s for s in samples if s["nt"] == 2 and s["shares"]]
    w_all = report_two("all", two)
    w_conc = report_two("concurrent", [s for s in two if concurrent(s)])
    print(f"scaling (1t wall med / 2t wall med): all {w1 / w_all:.2f}, concurrent {w1 / w_conc:.2f}")


if __name__ == "__main__":
    main()
