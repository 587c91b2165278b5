"""A/B of two pyggml builds against ggml (or numpy): rounds of bench/compare_ggml.py, one process
per build and round, the builds alternating, so both see the same load drift; each process's
ratio is measured against the reference in that process. Prints per row the median of pyggml's
own figure per build and their quotient B / A (what to read on a loaded machine, where ggml's
spinning threads can lose several times their idle speed), and the median ratio to the reference.

    python bench/ab_builds.py BUILD_A BUILD_B [--rounds R] [--reps N] [-t THREADS] FILTER ...

BUILD_*: folders holding a _core extension (PYGGML_BUILD_DIR). Reported, never asserted.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_run(build, args, filters):
    env = dict(os.environ, PYGGML_BUILD_DIR=build, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, str(ROOT / "bench" / "compare_ggml.py"), "--quick", "--reps", str(args.reps),
           "-t", str(args.threads), *(["--thread-cpu"] if args.thread_cpu else []), *filters]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        if line.startswith("#") or line.startswith("case"):
            continue
        parts = line.split()
        try:
            # name ... ours other unit ratio [of copy]
            i = next(k for k in range(len(parts)) if parts[k] in ("GB/s", "GFLOP/s"))
            rows[" ".join(parts[:i - 2])] = (float(parts[i - 2]), float(parts[i + 1]))  # (ours, ratio)
        except (StopIteration, ValueError):
            continue
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("builds", nargs=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--thread-cpu", action="store_true", help="passed on: -t 1 timed by the thread's CPU clock")
    ap.add_argument("filters", nargs="+")
    a = ap.parse_args()
    print("# " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    seen = {b: {} for b in a.builds}
    for r in range(a.rounds):
        order = a.builds if r % 2 == 0 else a.builds[::-1]
        for b in order:
            for k, v in one_run(b, a, a.filters).items():
                seen[b].setdefault(k, []).append(v)
    print("# " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    names = list(seen[a.builds[0]])
    med = lambda xs, i: statistics.median(x[i] for x in xs) if xs else float("nan")  # noqa: E731
    print(f"{'case':<44s} {'ours A':>8s} {'ours B':>8s} {'B/A':>6s} {'ref A':>6s} {'ref B':>6s}"
          f"   (A={a.builds[0]}, B={a.builds[1]}; medians of {a.rounds} rounds)")
    for n in names:
        ra, rb = seen[a.builds[0]].get(n, []), seen[a.builds[1]].get(n, [])
        oa, ob = med(ra, 0), med(rb, 0)
        print(f"{n:<44s} {oa:8.2f} {ob:8.2f} {ob / oa:6.3f} {med(ra, 1):6.2f} {med(rb, 1):6.2f}"
              f"   B/A per round {' '.join(f'{y[0] / x[0]:.2f}' for x, y in zip(ra, rb))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
