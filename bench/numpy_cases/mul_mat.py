"""mul_mat throughput: pyggml vs numpy (OpenBLAS) in one run, same thread count.

numpy's BLAS is limited to ``n_threads`` by calling OpenBLAS's ``*set_num_threads*`` through
ctypes on the library numpy has loaded (found in /proc/self/maps); where that is not possible
OPENBLAS_NUM_THREADS is set before numpy is imported (only effective if numpy was not imported
yet). numpy computes ``b @ a.T`` in f32 for every weight type (dequantized once, outside the
timing): for quantized weights that is what a numpy user would run, so the comparison shows the
bandwidth advantage of computing on the compressed weights.

Each side runs in alternating turns of CALLS_PER_TURN back-to-back calls after the other side's
threads went idle; the figure is the median of the warm calls (all but a turn's first), and a
'#' line gives the best warm call and the median cold one (a turn's first) of both sides.
"""
import ctypes
import os
import re
import statistics
import subprocess
import sys
import threading
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


def _helper_threads_cpu_ns():
    """CPU nanoseconds run so far by this process's threads other than the calling one."""
    me = str(threading.get_native_id())
    total = 0
    for tid in os.listdir("/proc/self/task"):
        if tid == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def quiesce(max_s=0.5, window_s=0.01):
    """Wait until no other thread of the process runs (at most max_s). After a call OpenBLAS's
    workers spin for about 0.1 s (measured here: 60-100% of a core each), so a side timed right
    after numpy's shares the cores with them: on 2 cores a 20 ms GEMM read at 0.5-0.65 of its
    speed. pyggml's pool sleeps within 50 us."""
    if not os.path.exists("/proc/self/task"):
        time.sleep(0.15)
        return
    end = time.perf_counter() + max_s
    prev = _helper_threads_cpu_ns()
    while time.perf_counter() < end:
        time.sleep(window_s)
        cur = _helper_threads_cpu_ns()
        if cur - prev < window_s * 1e9 * 0.02:
            return
        prev = cur


CALLS_PER_TURN = 4


def _alternate(fa, fb, turns, n_threads, calls=CALLS_PER_TURN):
    """Seconds of fa and fb timed in alternating turns (the first side of a turn alternates too).
    A turn is `calls` back-to-back calls of one side, started once the other side's threads have
    gone idle (quiesce): its first call is the cold one (the side's threads wake up, its buffers
    may have left the caches), the others warm. Neither side gets a warm-up the other does not.
    Returns, per side, {"warm": [...], "cold": [...]} in seconds. On one thread the process CPU
    time is read: on a shared machine it leaves out the time other processes hold the core, so
    the ratio stays meaningful under load (both sides run on this thread)."""
    clock = time.process_time if n_threads == 1 else time.perf_counter
    res = ({"warm": [], "cold": []}, {"warm": [], "cold": []})
    for turn in range(turns):
        order = (0, 1) if turn % 2 == 0 else (1, 0)
        for side in order:
            f = (fa, fb)[side]
            if n_threads > 1:
                quiesce()
            for i in range(calls):
                t0 = clock()
                f()
                res[side]["cold" if i == 0 else "warm"].append(clock() - t0)
    return res


def _summary(flops, ts):
    """GFLOP/s of the median and the best warm call, and of the median cold call."""
    g = lambda t: flops / t / 1e9  # noqa: E731
    return g(statistics.median(ts["warm"])), g(min(ts["warm"])), g(statistics.median(ts["cold"]))


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
    ts_ours, ts_np = _alternate(lambda: g.compute(n_threads=n_threads), lambda: wb @ ant, reps, n_threads)
    flops = 2.0 * K * M * N
    return _summary(flops, ts_ours), _summary(flops, ts_np)


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
    peak = None
    if any(wants(c[0]) and " gemm " in c[0] for c in shapes):
        peak = fma_peak(n_threads)
        print(f"# FMA peak ({n_threads} threads, build/bench_ops fma_peak): "
              f"{f'{peak:.1f} GFLOP/s' if peak else 'n/a (bench_ops not built)'}", flush=True)
    for case, t, K, M, N, reps in shapes:
        if wants(case):
            (ours, ours_best, ours_cold), (theirs, theirs_best, theirs_cold) = _case(
                gg, np, n_threads, t, K, M, N, reps * reps_scale)
            print(f"#   {case}: warm best pyggml {ours_best:.1f} numpy {theirs_best:.1f} ({ours_best / theirs_best:.2f}); "
                  f"cold (first of a turn) pyggml {ours_cold:.1f} numpy {theirs_cold:.1f} ({ours_cold / theirs_cold:.2f}) GFLOP/s",
                  flush=True)
            if peak and " gemm " in case:
                print(f"#   {case}: pyggml {ours / peak:.2f}, numpy {theirs / peak:.2f} of the FMA peak", flush=True)
            yield (case, ours, theirs, "GFLOP/s")


def fma_peak(n_threads):
    """The f32 FMA peak of n_threads cores in GFLOP/s (bench_ops' fma_peak case: the best of 3 runs
    of its 256-bit and 512-bit rows), or None."""
    exe = Path(__file__).resolve().parents[2] / "build" / "bench_ops"
    if not exe.exists():
        return None
    best = None
    for _ in range(3):  # the best of three: a run that shares a core with another process reads low
        r = subprocess.run([str(exe), "-t", str(n_threads), "fma_peak"], capture_output=True, text=True)
        for m in re.finditer(r"fma_peak f32 avx(?:2|512)\s+([0-9.]+)", r.stdout):  # 256- and 512-bit chains
            best = max(best or 0.0, float(m.group(1)))
    return best
