"""Compare pyggml kernels with numpy in one run.
Usage: python bench/compare_numpy.py [-t N] [--reps-scale R] [FILTER]

Case groups live in bench/numpy_cases/*.py; each module defines
``cases(n_threads) -> iterable of (case, pyggml_value, numpy_value, unit)`` where values are
throughputs (higher is better). Prints case, pyggml, numpy, ratio. A module whose ``cases``
also takes ``wants`` (a predicate on case names) and ``reps_scale`` skips the cases the filter
leaves out before timing them and multiplies its repetitions (more for a loaded machine).
"""
import inspect
import argparse
import importlib.util
import sys
from pathlib import Path
import checkout  # noqa: E402,F401  (this checkout's pyggml, not an installed copy)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--reps-scale", type=int, default=1, help="multiply every case's repetitions")
    ap.add_argument("filter", nargs="?", default="")
    args = ap.parse_args()
    print(f"{'case':<48s} {'pyggml':>12s} {'numpy':>12s} {'unit':<9s} {'ratio':>7s}")
    for path in sorted((Path(__file__).parent / "numpy_cases").glob("*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        params = inspect.signature(mod.cases).parameters
        extra = {}
        if "wants" in params:
            extra["wants"] = lambda name: not args.filter or args.filter in name
        if "reps_scale" in params:
            extra["reps_scale"] = args.reps_scale
        for case, ours, ref, unit in mod.cases(args.threads, **extra):
            if args.filter and args.filter not in case:
                continue
            ratio = ours / ref if ref else float("nan")
            print(f"{case:<48s} {ours:12.3f} {ref:12.3f} {unit:<9s} {ratio:7.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
