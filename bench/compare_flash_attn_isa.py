"""Decode FLASH_ATTN_EXT over an F16 KV cache: pyggml at each instruction-set level and ggml's
CPU backend (the llama-cpp-python build in use; LLAMA_CPP_LIB_PATH picks another), interleaved.

    python bench/compare_flash_attn_isa.py [-t THREADS] [--reps R] [--kv 4096,16384]
                                           [--shape D,H,HKV,N] [--levels avx512,avx2] [--no-ggml]

Default shape: SmolLM2-135M's attention (head size 64, 9 query / 3 KV heads), one query token,
a causal-style mask of zeros. Each sample is one compute; the engines take turns (order rotated
every rep), so a burst of load on this shared machine hits all of them alike. Reported per
engine: median CPU microseconds per call (process CPU time, every thread's: robust to other
processes taking the cores, unlike wall time) and median wall microseconds, then CPU-time
ratios against the first engine (> 1: the first is faster). Reported, never asserted.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import numpy as np  # noqa: E402


def build_cases(gg, ref, D, H, Hkv, N, KV, n_threads, levels, cache_layout, layers):
    """One graph per engine of `layers` independent attention ops (each its own K/V, as a
    model's layers), so that with many layers K/V stream from memory as in a decode."""
    rng = np.random.default_rng(3)
    q = rng.uniform(-1, 1, size=(1, H, N, D)).astype(np.float32)
    kvs = [(rng.uniform(-1, 1, size=(1, Hkv, KV, D)).astype(np.float16),
            rng.uniform(-1, 1, size=(1, Hkv, KV, D)).astype(np.float16)) for _ in range(layers)]
    m = np.zeros((1, 1, N, KV), dtype=np.float16)
    scale = 1.0 / np.sqrt(D)
    mem = layers * (2 * kvs[0][0].nbytes + q.nbytes + (1 << 16)) + q.nbytes + m.nbytes + (16 << 20)

    def as_cache(x):  # the KV cache's [D * Hkv, cells] rows of every head
        return np.ascontiguousarray(x[0].transpose(1, 0, 2)).reshape(KV, -1)

    ctx = gg.Context(mem_size=mem)
    tq = ctx.new_tensor(gg.F32, [D, N, H, 1]); tq.set(q)
    tm = ctx.new_tensor(gg.F16, [KV, N, 1, 1]); tm.set(m)
    g = gg.Graph(ctx)
    for k, v in kvs:
        if cache_layout:  # viewed per head (a permuted view), as a model's graph does
            ck = ctx.new_tensor(gg.F16, [D * Hkv, KV]); ck.set(as_cache(k))
            cv = ctx.new_tensor(gg.F16, [D * Hkv, KV]); cv.set(as_cache(v))
            tk = gg.permute(ctx, gg.view_3d(ctx, ck, D, Hkv, KV, ck.nb[0] * D, ck.nb[1], 0), 0, 2, 1, 3)
            tv = gg.permute(ctx, gg.view_3d(ctx, cv, D, Hkv, KV, cv.nb[0] * D, cv.nb[1], 0), 0, 2, 1, 3)
        else:
            tk = ctx.new_tensor(gg.F16, [D, KV, Hkv, 1]); tk.set(k)
            tv = ctx.new_tensor(gg.F16, [D, KV, Hkv, 1]); tv.set(v)
        g.build_forward_expand(gg.flash_attn_ext(ctx, tq, tk, tv, tm, scale, 0.0, 0.0))

    def at(level):
        def run():
            prev = gg.set_isa(level)
            try:
                g.compute(n_threads=n_threads)
            finally:
                gg.set_isa(prev)
        return run
    engines = {f"pyggml {lv}": at(lv) for lv in levels}
    keep = [ctx, g]
    if ref is not None:
        rc = ref.context(mem)
        f16 = ref.TYPE["f16"]
        rq = rc.tensor(ref.TYPE["f32"], [D, N, H, 1], q)
        rm = rc.tensor(f16, [KV, N, 1, 1], m)
        outs = []
        for k, v in kvs:
            if cache_layout:
                rk, rv = (ref.ggml_permute(rc.ptr, ref.ggml_view_3d(rc.ptr, rc.tensor(f16, [D * Hkv, KV], as_cache(x)),
                                                                    D, Hkv, KV, 2 * D, 2 * D * Hkv, 0), 0, 2, 1, 3)
                          for x in (k, v))
            else:
                rk, rv = rc.tensor(f16, [D, KV, Hkv, 1], k), rc.tensor(f16, [D, KV, Hkv, 1], v)
            outs.append(ref.ggml_flash_attn_ext(rc.ptr, rq, rk, rv, rm, scale, 0.0, 0.0))
        engines["ggml"] = rc.graph(outs, n_threads)
        keep.append(rc)
    return engines, keep


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--kv", default="4096,16384")
    ap.add_argument("--shape", default="64,9,3,1", help="D,H,HKV,N")
    ap.add_argument("--levels", default="avx512,avx2")
    ap.add_argument("--no-ggml", action="store_true")
    ap.add_argument("--layers", type=int, default=1,
                    help="independent ops per compute (30: SmolLM2's K/V, which outgrow the caches)")
    ap.add_argument("--cache-layout", action="store_true",
                    help="K/V as views of a [D*HKV, KV] cache (as in a model's graph)")
    a = ap.parse_args()
    import pyggml as gg
    ref = None
    if not a.no_ggml:
        import ggml_ref
        ref = ggml_ref.load()
    D, H, Hkv, N = (int(x) for x in a.shape.split(","))
    detected = gg.isa(True)
    order = ["scalar", "avx2", "avx512"]
    levels = [lv for lv in a.levels.split(",") if order.index(lv) <= order.index(detected)]
    print("# " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"# flash_attn_ext F16 K/V D{D} h{H}/{Hkv} n{N} x{a.layers} layers"
          f"{' (cache layout)' if a.cache_layout else ''}, {a.threads} threads, {a.reps} reps; detected {detected}; "
          f"ggml: {ref.lib_dir if ref else 'n/a'}")
    for KV in (int(x) for x in a.kv.split(",")):
        engines, keep = build_cases(gg, ref, D, H, Hkv, N, KV, a.threads, levels, a.cache_layout, a.layers)
        names = list(engines)
        cpu = {n: [] for n in names}
        wall = {n: [] for n in names}
        for r in range(a.reps + 2):
            for i in range(len(names)):
                n = names[(r + i) % len(names)]
                time.sleep(0.002)  # let the other side's pool go idle
                c0, w0 = time.process_time(), time.perf_counter()
                engines[n]()
                c1, w1 = time.process_time(), time.perf_counter()
                if r >= 2:
                    cpu[n].append((c1 - c0) * 1e6)
                    wall[n].append((w1 - w0) * 1e6)
        med = {n: statistics.median(cpu[n]) for n in names}
        for n in names:
            ratio = med[n] / med[names[0]]
            print(f"kv{KV:<6d} {n:<16s} cpu {med[n]:9.1f} us  wall {statistics.median(wall[n]):9.1f} us  "
                  f"{names[0]} faster by {ratio:5.2f}x", flush=True)
        del keep
    return 0


if __name__ == "__main__":
    sys.exit(main())
