"""Quantized mul_mat, pyggml vs ggml's CPU backend vs memcpy, robust to a loaded machine.

    python bench/compare_quant.py [--mode big|l2|small|gemm|widths] [-t THREADS] [--reps R] [--repack] [TYPE ...]

Every sample is taken in one process with the sides interleaved (pyggml, ggml, memcpy, the
order rotated each rep, idle workers before each timed call), so a burst of load hits all
sides alike. Prints for each side the median and the minimum, and the ratios of medians and
of minima (pyggml over the other side: > 1 means pyggml is faster). The big mode also prints
the median of the per-round ratios pyggml/memcpy (the two samples of one rotation round, taken
back to back) with its distribution-free ~95% interval: slow swings of the machine's bandwidth
move both sides of a round alike, so this ratio is the steadiest of the three.

Modes:
  big    GEMV (n=1) of a 4096 x 14336 weight on THREADS (default 2): weight GB/s of pyggml and
         ggml, and the memcpy (read+write) GB/s of a 64 MiB copy measured between them; every
         sample follows an untimed 64 MiB copy, so each starts with a cold L3.
  l2     GEMV of an L2-resident 4096 x 256 weight on 1 thread, 20 computes per sample: ns per
         weight block (which types are compute-bound, and against ggml).
  small  Q8_0 (or the given types) GEMV at the tiny test model's shapes (n_embd 128, n_ff 384,
         vocab 256) on THREADS: microseconds per call.
  gemm   n=128 (or --cols N) GEMM of a 4096 x 14336 weight on THREADS: GFLOP/s.
  widths SmolLM2-135M's shapes (576 x 1536, 1536 x 576, vocab 49152 x 576) at n = 1..9 and 64 on
         THREADS: microseconds per call.
--repack: pyggml's weights get their row-interleaved copy (gg.repack_weights) first.
--vs-isa LEVEL (gemm, l2, small, widths): pyggml capped at LEVEL (gg.set_isa) joins the rotation
as a third side; py/lv is pyggml at its own level over pyggml at LEVEL (> 1: its own is faster).
Per-call rows (l2, small, gemm, widths) time warm calls: each sample follows one untimed call.
Reported, never asserted. ggml comes from llama-cpp-python's bundled libraries (bench/ggml_ref.py).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS is not used; keep its threads out

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402

from paired_stats import median_interval  # noqa: E402

TYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "mxfp4",
         "nvfp4"]
SETTLE_S = 0.02  # both pools keep a core busy for several ms after a compute (OpenMP's spin count, our yield-poll): let them sleep first


def _type(gg, name):
    for row in gg.type_traits():
        if row["name"] == name:
            return row["type"]
    return None


def _weights(gg, t, K, M):
    """Raw bytes of an M x K weight of type t: 64 quantized random rows tiled (K-quant searches are slow)."""
    rows = np.random.default_rng(1).uniform(-1, 1, size=(min(M, 64), K)).astype(np.float32)
    raw = np.frombuffer(gg.quantize(t, rows.ravel()), dtype=np.uint8)
    reps = (M + rows.shape[0] - 1) // rows.shape[0]
    return np.tile(raw, reps)[: raw.size // rows.shape[0] * M]


class Case:
    """pyggml and ggml callables computing mul_mat(weight M x K of `name`, b K x N) on n_threads."""

    repack = False  # set by --repack
    vs_isa = None   # set by --vs-isa

    def __init__(self, gg, ref, name, K, M, N, n_threads, inner=1):
        t = _type(gg, name)
        self.raw = _weights(gg, t, K, M)
        b = np.random.default_rng(2).uniform(-1, 1, size=(N, K)).astype(np.float32)
        self.ctx = gg.Context(mem_size=self.raw.size + b.nbytes + M * N * 4 + (16 << 20))
        a_t = self.ctx.new_tensor(t, [K, M]); a_t.set(self.raw)
        self.repacked = gg.repack_weights(a_t) if Case.repack and gg.repack_supported(a_t) else None
        b_t = self.ctx.new_tensor(gg.F32, [K, N]); b_t.set(b)
        self.out = gg.mul_mat(self.ctx, a_t, b_t)
        g = gg.Graph(self.ctx); g.build_forward_expand(self.out)
        self.graph = g

        def ours():
            for _ in range(inner):
                g.compute(n_threads=n_threads)
        def ours_capped():
            prev = gg.set_isa(Case.vs_isa)
            try:
                ours()
            finally:
                gg.set_isa(prev)
        self.ours, self.theirs, self.rc = ours, None, None
        self.ours_capped = ours_capped if Case.vs_isa else None
        if ref is None or name not in ref.TYPE:
            return
        self.rc = ref.context(self.raw.size + b.nbytes + M * N * 4 + (1 << 20))
        ra = self.rc.tensor(ref.TYPE[name], [K, M], self.raw)
        rb = self.rc.tensor(ref.TYPE["f32"], [K, N], b)
        run = self.rc.graph(ref.ggml_mul_mat(self.rc.ptr, ra, rb), n_threads)

        def theirs():
            for _ in range(inner):
                run()
        self.theirs, self._run, self.M, self.N = theirs, run, M, N

    def check(self):
        """NMSE between the two outputs (same inputs: catches a broken harness), or None."""
        if self.theirs is None:
            return None
        self.ours(), self.theirs()
        mine = self.out.numpy().reshape(-1)
        other = self.rc.read_f32(self._run.out, self.M * self.N)
        return float(np.sum((mine - other) ** 2) / max(np.sum(other ** 2), 1e-30))


def _memcpy():
    a = np.ones(16 << 20, dtype=np.float32)  # 64 MiB: twice the L3, short enough to often run unpreempted
    b = np.empty_like(a)
    return (lambda: np.copyto(b, a)), 2.0 * a.nbytes


def interleave(sides, reps, warm=2, flush=None, prime=False):
    """{name: [seconds]} of every side, `reps` samples each, sides interleaved, order rotated;
    `flush` (untimed) runs before every sample. prime: one untimed call right before each
    sample, so a side's threads are awake when it is timed (after the settle both pools sleep,
    and a wake-up on this VM costs ~0.1 ms for ours and ms for OpenMP's: per-call rows of short
    products would time the wake-up, not the kernel)."""
    names = [n for n, f in sides if f is not None]
    fns = dict((n, f) for n, f in sides if f is not None)
    for _ in range(warm):
        for n in names:
            fns[n]()
    ts = {n: [] for n in names}
    for r in range(reps):
        for i in range(len(names)):
            n = names[(r + i) % len(names)]
            if flush is not None:
                flush()
            time.sleep(SETTLE_S)
            if prime:
                fns[n]()
            t0 = time.perf_counter()
            fns[n]()
            ts[n].append(time.perf_counter() - t0)
    return ts


def _med(x):
    return statistics.median(x)


def _paired_rate_ratio(t_py, t_cp, py_bytes, cp_bytes) -> str:
    """Median of the per-round rate ratios (py_bytes / t_py) / (cp_bytes / t_cp) and its interval."""
    med, lo, hi, _ = median_interval([(py_bytes / a) / (cp_bytes / b) for a, b in zip(t_py, t_cp)])
    return f"{med:.2f} [{lo:.2f}, {hi:.2f}]"


def mode_big(gg, ref, types, n_threads, reps):
    K, M = 4096, 14336
    cp, cp_bytes = _memcpy()
    flush, _ = _memcpy()
    print(f"# GEMV K{K} x M{M}, n=1, {n_threads} threads, {reps} interleaved reps; GB/s = weight bytes / time;"
          " memcpy = 2 x 64 MiB / time")
    print(f"{'type':<7s} {'MB':>6s} {'py med':>7s} {'py min':>7s} {'gg med':>7s} {'gg min':>7s} {'cp med':>7s}"
          f" {'cp min':>7s} {'py/cp':>6s} {'py/cp@min':>9s} {'py/gg':>6s} {'py/gg@min':>9s}"
          f"  {'py/cp paired [~95%]':>20s}")
    for name in types:
        c = Case(gg, ref, name, K, M, 1, n_threads)
        err = c.check()
        # every sample starts with a cold L3: in the rotation py and gg follow each other, and a
        # weight near the 32 MiB L3's size (q2_K's 19 MB) can keep part of itself there across
        # the other side's run (one thread, q2_K: the fastest tenth of 64-row units ran up to 1.2x
        # faster right after the same GEMV than after a 64 MiB copy), which flatters the minima
        ts = interleave([("py", c.ours), ("gg", c.theirs), ("cp", cp)], reps, flush=flush)
        nb = c.raw.size
        gbs = {s: (nb / _med(v) / 1e9, nb / min(v) / 1e9) for s, v in ts.items() if s != "cp"}
        cpg = (cp_bytes / _med(ts["cp"]) / 1e9, cp_bytes / min(ts["cp"]) / 1e9)
        gg_ = gbs.get("gg", (float("nan"), float("nan")))
        py = gbs["py"]
        print(f"{name:<7s} {nb / 1e6:6.1f} {py[0]:7.2f} {py[1]:7.2f} {gg_[0]:7.2f} {gg_[1]:7.2f} {cpg[0]:7.2f}"
              f" {cpg[1]:7.2f} {py[0] / cpg[0]:6.2f} {py[1] / cpg[1]:9.2f} {py[0] / gg_[0]:6.2f} {py[1] / gg_[1]:9.2f}"
              f"  {_paired_rate_ratio(ts['py'], ts['cp'], nb, cp_bytes):>20s}"
              + (f"   # WARNING outputs differ, NMSE {err:.1e}" if err is not None and err > 1e-3 else ""),
              flush=True)
        if c.rc is not None:
            c.rc.free()


def _per_call_table(gg, ref, types, shapes, n_threads, reps, inner, unit, scale):
    lv_head = f" {'lv med':>9s} {'lv min':>9s} {'py/lv':>6s} {'py/lv@min':>9s}" if Case.vs_isa else ""
    print(f"{'case':<28s} {'py med':>9s} {'py min':>9s} {'gg med':>9s} {'gg min':>9s} {'py/gg':>6s} {'py/gg@min':>9s}"
          + lv_head)
    nan2 = (float("nan"),) * 2
    for name in types:
        blck = next(r["blck_size"] for r in gg.type_traits() if r["name"] == name)
        skipped = None
        for K, M, N in shapes:
            if K % blck:  # e.g. the K-quants at SmolLM2's n_embd 576 (its Q4_K_M file keeps those rows q5_0 / q8_0)
                if (K, M) != skipped:
                    print(f"{name + f' {K}x{M}':<28s} skipped: K is not a multiple of the {blck}-value block")
                skipped = (K, M)
                continue
            c = Case(gg, ref, name, K, M, N, n_threads, inner)
            err = c.check()
            ts = interleave([("py", c.ours), ("gg", c.theirs), ("lv", c.ours_capped)], reps, prime=True)
            f = lambda s: scale(name, K, M, N, s / inner)  # noqa: E731
            py = (f(_med(ts["py"])), f(min(ts["py"])))
            gv = (f(_med(ts["gg"])), f(min(ts["gg"]))) if "gg" in ts else nan2
            lv = (f(_med(ts["lv"])), f(min(ts["lv"]))) if "lv" in ts else nan2
            # unit is a time (lower is better) or a rate (higher is better): ratio > 1 = pyggml faster
            lower = unit in ("ns/blk", "us")
            rm, rn = ((gv[0] / py[0], gv[1] / py[1]) if lower else (py[0] / gv[0], py[1] / gv[1]))
            lm, ln = ((lv[0] / py[0], lv[1] / py[1]) if lower else (py[0] / lv[0], py[1] / lv[1]))
            lv_cols = f" {lv[0]:9.2f} {lv[1]:9.2f} {lm:6.2f} {ln:9.2f}" if Case.vs_isa else ""
            print(f"{name + f' {K}x{M}x{N}':<28s} {py[0]:9.2f} {py[1]:9.2f} {gv[0]:9.2f} {gv[1]:9.2f} {rm:6.2f} {rn:9.2f}"
                  + lv_cols
                  + (f"   # WARNING outputs differ, NMSE {err:.1e}" if err is not None and err > 1e-3 else ""),
                  flush=True)
            if c.rc is not None:
                c.rc.free()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("big", "l2", "small", "gemm", "widths"), default="big")
    ap.add_argument("--repack", action="store_true", help="repacked pyggml weights (q4_0, q4_1, q8_0)")
    ap.add_argument("-t", "--threads", type=int, default=None)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--vs-isa", choices=("scalar", "avx2", "avx512"), default=None,
                    help="also time pyggml capped at this level, in the same rotation")
    ap.add_argument("--cols", type=int, default=128, help="gemm: activation columns (N); e.g. 16 for a verify batch")
    ap.add_argument("types", nargs="*")
    a = ap.parse_args()
    Case.repack = a.repack
    Case.vs_isa = a.vs_isa
    import pyggml as gg
    import ggml_ref
    ref = ggml_ref.load()
    known = {r["name"] for r in gg.type_traits()}
    types = [t for t in (a.types or TYPES) if t in known]
    print("# " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"# ggml: {ref.lib_dir if ref else 'n/a (' + (ggml_ref.cpu_mismatch_reason() or 'llama_cpp not importable') + ')'}")
    print(f"# pyggml level: {gg.isa()} (detected {gg.isa(True)})" + (f"; lv = capped at {a.vs_isa}" if a.vs_isa else ""))
    if a.mode == "big":
        mode_big(gg, ref, types, a.threads or 2, a.reps)
    elif a.mode == "l2":
        def ns_per_block(name, K, M, N, s):
            row = next(r for r in gg.type_traits() if r["name"] == name)
            return s / (M * K / row["blck_size"]) * 1e9
        print(f"# GEMV of an L2-resident weight, n=1, {a.threads or 1} thread(s), 20 computes per sample; ns per weight block")
        _per_call_table(gg, ref, types, [(4096, 256, 1)], a.threads or 1, a.reps, 20, "ns/blk", ns_per_block)
    elif a.mode == "small":
        types = a.types or ["q8_0"]
        shapes = [(128, 128, 1), (128, 64, 1), (128, 384, 1), (384, 128, 1), (128, 256, 1)]
        print(f"# GEMV at the tiny model's shapes (K x M x N), {a.threads or 2} threads, 50 computes per sample; us per call")
        _per_call_table(gg, ref, types, shapes, a.threads or 2, a.reps, 50, "us", lambda n, K, M, N, s: s * 1e6)
    elif a.mode == "widths":
        types = a.types or ["q4_1", "q8_0"]
        shapes = [(K, M, N) for K, M in ((576, 1536), (1536, 576), (576, 49152)) for N in (1, 2, 3, 4, 5, 6, 7, 8, 9, 64)]
        print(f"# SmolLM2 shapes (K x M x N), {a.threads or 2} threads, repack {a.repack}; us per call")
        _per_call_table(gg, ref, types, shapes, a.threads or 2, a.reps, 3, "us", lambda n, K, M, N, s: s * 1e6)
    else:
        print(f"# GEMM K4096 x M14336 x N{a.cols}, {a.threads or 2} threads; GFLOP/s")
        _per_call_table(gg, ref, types, [(4096, 14336, a.cols)], a.threads or 2, max(3, a.reps // 3), 1, "GFLOP/s",
                        lambda n, K, M, N, s: 2.0 * K * M * N / s / 1e9)
    return 0


if __name__ == "__main__":
    sys.exit(main())
