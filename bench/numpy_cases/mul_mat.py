"""mul_mat throughput: pyggml vs numpy (OpenBLAS) in one run, same thread count.

numpy's BLAS is limited to ``n_threads`` by calling OpenBLAS's ``*set_num_threads*`` through
ctypes on the library numpy has loaded (found in /proc/self/maps); where that is not possible
OPENBLAS_NUM_THREADS is set before numpy is imported (only effective if numpy was not imported
yet). numpy computes ``b @ a.T`` in f32 for every weight type (dequantized once, outside the
timing): for quantized weights that is what a numpy user would run, so the comparison shows the
bandwidth advantage of computing on the compressed weights.
"""
import ctypes
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root (pyggml/)


def _limit_openblas(n_threads):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(n_threads))
    import numpy  # noqa: F401  (loads OpenBLAS)
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "openblas" in line.lower() and line.strip().endswith(".so")}
    except OSError:
        libs = set()
    for lib in libs:
        try:
            h = ctypes.CDLL(lib)
        except OSError:
            continue
        for sym in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
                    "openblas_set_num_threads"):
            fn = getattr(h, sym, None)
            if fn is not None:
                fn(ctypes.c_int(n_threads))
                return f"{os.path.basename(lib)}:{sym}({n_threads})"
    return f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}"


def _best(fn, reps=5):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def _alternate(fa, fb, reps, n_threads):
    """Best-of-reps seconds of fa and fb, run alternately after a warm-up of each. On one thread
    the process CPU time is read: on a shared machine it leaves out the time other processes
    hold the core, so the ratio stays meaningful under load (both sides run on this thread)."""
    clock = time.process_time if n_threads == 1 else time.perf_counter
    fa(), fb()
    ta, tb = [], []
    for _ in range(reps):
        for f, ts in ((fa, ta), (fb, tb)):
            t0 = clock()
            f()
            ts.append(clock() - t0)
    return min(ta), min(tb)


def _case(gg, np, n_threads, wtype, K, M, N, reps):
    rng = np.random.default_rng(0)
    ctx = gg.Context(mem_size=(K * M * 4 + K * N * 8 + M * N * 8) + (64 << 20))
    a = ctx.new_tensor(wtype, [K, M])
    wa = rng.uniform(-1, 1, size=(M, K)).astype(np.float32)
    if gg.is_quantized(wtype) and M > 64:  # 64 quantized rows repeated: the K-quant searches are slow
        a.set(np.tile(gg.quantize(wtype, wa[:64].ravel()), M // 64 + 1)[: a.nbytes])
    elif gg.is_quantized(wtype):
        a.set(gg.quantize(wtype, wa.ravel()))
    else:
        a.set(wa.astype(np.float16) if wtype == gg.F16 else wa)
    b = ctx.new_tensor(gg.F32, [K, N])
    wb = rng.uniform(-1, 1, size=(N, K)).astype(np.float32)
    b.set(wb)
    out = gg.mul_mat(ctx, a, b)
    g = gg.Graph(ctx)
    g.build_forward_expand(out)
    an = a.to_f32().reshape(M, K)  # numpy works on f32 weights
    ant = an.T
    t_ours, t_np = _alternate(lambda: g.compute(n_threads=n_threads), lambda: wb @ ant, reps, n_threads)
    flops = 2.0 * K * M * N
    return flops / t_ours / 1e9, flops / t_np / 1e9


def cases(n_threads, wants=lambda name: True, reps_scale=1):
    how = _limit_openblas(n_threads)
    import numpy as np
    import pyggml as gg
    print(f"# numpy BLAS threads: {how}", flush=True)
    shapes = [("mul_mat f32 gemm 1024x1024x1024", gg.F32, 1024, 1024, 1024, 7),
              ("mul_mat f32 gemm K4096 M4096 N512", gg.F32, 4096, 4096, 512, 3)]
    for name, t in (("f32", gg.F32), ("f16", gg.F16), ("q8_0", gg.Q8_0), ("q4_0", gg.Q4_0)):
        shapes.append((f"mul_mat {name} gemv K4096 M14336 N1", t, 4096, 14336, 1, 7))
    shapes.append(("mul_mat q4_0 gemm K4096 M4096 N512", gg.Q4_0, 4096, 4096, 512, 3))
    # every other block weight type of the type table: decode GEMV and prompt GEMM (n = 128)
    for row in gg.type_traits():
        if not (row["is_quantized"] and row["is_weight"]) or row["name"] in ("q8_0", "q4_0"):
            continue
        t, name = row["type"], row["name"]
        shapes.append((f"mul_mat {name} gemv K4096 M14336 N1", t, 4096, 14336, 1, 7))
        shapes.append((f"mul_mat {name} gemm K4096 M14336 N128", t, 4096, 14336, 128, 3))
    for case, t, K, M, N, reps in shapes:
        if wants(case):
            yield (case, *_case(gg, np, n_threads, t, K, M, N, reps * reps_scale), "GFLOP/s")
