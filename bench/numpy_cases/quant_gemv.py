"""Quantized GEMV (n=1) of a 4096 x 14336 weight, every block weight type of the type table:
GB/s of weights read by pyggml against numpy's memcpy GB/s (np.copyto of 64 MiB, read+write),
the two timed alternately (15 reps each, medians) so load on a shared machine hits both.
The ratio column is then the fraction of the copy bandwidth (goal: >= 0.85)."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: compare_quant's harness

REPS = 15


def cases(n_threads):
    import pyggml as gg
    from compare_quant import Case, _memcpy, interleave
    copy, copy_bytes = _memcpy()
    for row in gg.type_traits():
        if not (row["is_quantized"] and row["is_weight"]):
            continue
        c = Case(gg, None, row["name"], 4096, 14336, 1, n_threads)
        ts = interleave([("py", c.ours), ("cp", copy)], REPS)
        yield (f"mul_mat {row['name']} gemv K4096 M14336 N1 vs memcpy", c.raw.size / statistics.median(ts["py"]) / 1e9,
               copy_bytes / statistics.median(ts["cp"]) / 1e9, "GB/s")
