"""pyggml vs ggml's CPU backend (llama-cpp-python's bundled libggml, via bench/ggml_ref.py) in
one run, the two sides alternating on identical inputs (same weight bytes, same activations).

    python bench/compare_ggml.py [-t THREADS] [--reps R] [--quick] [FILTER ...]

Rows: mul_mat GEMV (n=1) and GEMM (n=128, 512) per weight type at K=4096 x M=4096 / 14336
(GEMV also as a fraction of the memcpy bandwidth measured in this run: weight bytes read per
second over read+write memcpy GB/s, bench_ops' convention), gated_delta_net and ssm_scan
GFLOP/s, flash_attn_ext over an F16 cache (decode n1 and a verify batch n9; K/V GB/s), F32 GEMM against numpy (OpenBLAS limited to the same threads), and the FMA peak
(build/bench_ops fma_peak, when built), mul_mat_id (64 experts, 6 used, K 2048 x M 1408, 1/32/128 tokens routed at random;
q4_K / q6_K with 8 experts, 2 used, 128/512 tokens: ~32/128 tokens an expert). FILTER words select rows by substring (any match).
Reported, never asserted. Prints `uptime` first: figures on a loaded machine are noisy.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from paired_stats import median_interval  # noqa: E402

TYPES = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K",
         "iq4_nl", "mxfp4", "nvfp4"]


def _limit_openblas(n_threads):
    sys.path.insert(0, str(ROOT / "bench" / "numpy_cases"))
    from mul_mat import _limit_openblas as lim  # the same OpenBLAS limiter compare_numpy uses
    return lim(n_threads)


CLOCK = time.perf_counter  # --thread-cpu: the calling thread's CPU time (with -t 1 both sides run on it)
SETTLE_S = 0.02  # both pools keep a core busy for several ms after a compute (OpenMP, our yield-poll): let them sleep first


def _timed(f, settle=None):
    settle() if settle else time.sleep(SETTLE_S)
    t0 = CLOCK()
    f()
    return CLOCK() - t0


def _alternate(fa, fb, reps, settle=None, pairs=None):
    """Best-of-reps seconds of fa and fb, run alternately after warm-ups; before every timed
    call the other side's spinning workers are given time to sleep (SETTLE_S, or `settle()`),
    so each side starts from idle workers and neither side's spinning steals the cores from the
    other. `pairs` (a list) receives each round's (fa, fb) seconds."""
    for _ in range(2):
        fa(), fb()
    ta, tb = [], []
    for _ in range(reps):
        ta.append(_timed(fa, settle))
        tb.append(_timed(fb, settle))
    if pairs is not None:
        pairs.extend(zip(ta, tb))
    return min(ta), min(tb)


def _memcpy_gbs(np):
    a = np.ones(64 << 20, dtype=np.float32)
    b = np.empty_like(a)
    ts = []
    for _ in range(5):
        t0 = time.perf_counter(); np.copyto(b, a); ts.append(time.perf_counter() - t0)
    return 2.0 * a.nbytes / min(ts) / 1e9


def _weights(gg, np, name, K, M):
    """(pyggml type, raw weight bytes) for an M x K weight: 64 quantized rows tiled."""
    t = getattr(gg, name.upper() if name not in ("q4_K", "q5_K", "q6_K") else name[:2].upper() + "_K")
    rng = np.random.default_rng(1)
    rows = rng.uniform(-1, 1, size=(min(M, 64), K)).astype(np.float32)
    if name == "f32":
        raw = rows.view(np.uint8)
    elif name == "f16":
        raw = rows.astype(np.float16).view(np.uint8)
    elif name == "bf16":
        raw = (rows.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    else:
        raw = np.frombuffer(gg.quantize(t, rows.ravel()), dtype=np.uint8)
    reps = (M + rows.shape[0] - 1) // rows.shape[0]
    return t, np.tile(raw.ravel(), reps)[: raw.size // rows.shape[0] * M]


def mul_mat_case(gg, np, ref, name, K, M, N, n_threads, reps):
    t, raw = _weights(gg, np, name, K, M)
    b = np.random.default_rng(2).uniform(-1, 1, size=(N, K)).astype(np.float32)
    ctx = gg.Context(mem_size=raw.size + b.nbytes + M * N * 4 + (16 << 20))
    a_t = ctx.new_tensor(t, [K, M])
    a_t.set({"f32": raw.view(np.float32), "f16": raw.view(np.float16), "bf16": raw.view(np.uint16)}.get(name, raw))
    b_t = ctx.new_tensor(gg.F32, [K, N]); b_t.set(b)
    out = gg.mul_mat(ctx, a_t, b_t)
    g = gg.Graph(ctx); g.build_forward_expand(out)
    ours = lambda: g.compute(n_threads=n_threads)  # noqa: E731
    if ref is None:
        return _alternate(ours, ours, reps)[0], None, raw.size
    rc = ref.context(raw.size + b.nbytes + M * N * 4 + (1 << 20))
    ra = rc.tensor(ref.TYPE[name], [K, M], raw)
    rb = rc.tensor(ref.TYPE["f32"], [K, N], b)
    theirs = rc.graph(ref.ggml_mul_mat(rc.ptr, ra, rb), n_threads)
    to, tt = _alternate(ours, theirs, reps)
    if N <= 128:  # same inputs: the outputs must agree (catches a broken harness)
        mine, other = out.numpy().reshape(-1), rc.read_f32(theirs.out, M * N)
        err = float(np.sum((mine - other) ** 2) / max(np.sum(other ** 2), 1e-30))
        if err > 1e-3:
            print(f"# WARNING {name} {K}x{M}x{N}: pyggml and ggml differ, NMSE {err:.2e}", flush=True)
    rc.free()
    return to, tt, raw.size


def mul_mat_id_case(gg, np, ref, name, K, M, E, U, T, n_threads, reps):
    """MoE expert matmul: E experts of M x K weights, U used per token, T tokens routed at
    random (uneven loads). GFLOP/s of the routed products."""
    t, raw = _weights(gg, np, name, K, M * E)
    rng = np.random.default_rng(7)
    b = rng.uniform(-1, 1, size=(T, 1, K)).astype(np.float32)
    ids = np.stack([rng.choice(E, U, replace=False) for _ in range(T)]).astype(np.int32)
    mem = raw.size + b.nbytes + ids.nbytes + M * U * T * 4 + (16 << 20)
    ctx = gg.Context(mem_size=mem)
    a_t = ctx.new_tensor(t, [K, M, E])
    a_t.set({"f32": raw.view(np.float32), "f16": raw.view(np.float16), "bf16": raw.view(np.uint16)}.get(name, raw))
    b_t = ctx.new_tensor(gg.F32, [K, 1, T]); b_t.set(b)
    i_t = ctx.new_tensor(gg.I32, [U, T]); i_t.set(ids)
    out = gg.mul_mat_id(ctx, a_t, b_t, i_t)
    g = gg.Graph(ctx); g.build_forward_expand(out)
    ours = lambda: g.compute(n_threads=n_threads)  # noqa: E731
    flops = 2.0 * K * M * U * T
    if ref is None:
        return flops / _alternate(ours, ours, reps)[0] / 1e9, None
    rc = ref.context(mem)
    ra = rc.tensor(ref.TYPE[name], [K, M, E], raw)
    rb = rc.tensor(ref.TYPE["f32"], [K, 1, T], b)
    ri = rc.tensor(ref.TYPE["i32"], [U, T], ids)
    theirs = rc.graph(ref.ggml_mul_mat_id(rc.ptr, ra, rb, ri), n_threads)
    to, tt = _alternate(ours, theirs, reps)
    mine, other = out.numpy().reshape(-1), rc.read_f32(theirs.out, M * U * T)
    err = float(np.sum((mine - other) ** 2) / max(np.sum(other ** 2), 1e-30))
    if err > 1e-3:
        print(f"# WARNING mul_mat_id {name} T{T}: pyggml and ggml differ, NMSE {err:.2e}", flush=True)
    rc.free()
    return flops / to / 1e9, flops / tt / 1e9


def gated_delta_net_case(gg, np, ref, T, n_threads, reps):
    S, H, Hk = 128, 32, 16
    rng = np.random.default_rng(3)
    arrs = {"q": ((S, Hk, T, 1), -0.1, 0.1), "k": ((S, Hk, T, 1), -0.1, 0.1), "v": ((S, H, T, 1), -1, 1),
            "g": ((1, H, T, 1), -0.5, -0.01), "beta": ((1, H, T, 1), 0.1, 1.0), "state": ((S, S, H, 1), -1, 1)}
    data = {k: rng.uniform(lo, hi, size=ne[::-1]).astype(np.float32) for k, (ne, lo, hi) in arrs.items()}
    ctx = gg.Context(mem_size=64 << 20)
    ts = {}
    for k, (ne, _, _) in arrs.items():
        ts[k] = ctx.new_tensor(gg.F32, list(ne)); ts[k].set(data[k])
    out = gg.gated_delta_net(ctx, ts["q"], ts["k"], ts["v"], ts["g"], ts["beta"], ts["state"], 1)
    g = gg.Graph(ctx); g.build_forward_expand(out)
    ours = lambda: g.compute(n_threads=n_threads)  # noqa: E731
    flops = 7.0 * S * S * H * T  # decay, k dot, update, q dot per state element and token
    if ref is None:
        return flops / _alternate(ours, ours, reps)[0] / 1e9, None
    rc = ref.context(64 << 20)
    rt = {k: rc.tensor(ref.TYPE["f32"], list(ne), data[k]) for k, (ne, _, _) in arrs.items()}
    theirs = rc.graph(ref.ggml_gated_delta_net(rc.ptr, rt["q"], rt["k"], rt["v"], rt["g"], rt["beta"],
                                               rt["state"], 1), n_threads)
    to, tt = _alternate(ours, theirs, reps)
    rc.free()
    return flops / to / 1e9, flops / tt / 1e9


def ssm_scan_case(gg, np, ref, T, n_threads, reps):
    ds, hd, nh, ng = 128, 64, 32, 1
    rng = np.random.default_rng(4)
    arrs = {"s": ((ds, hd, nh, 1), -1, 1), "x": ((hd, nh, T, 1), -1, 1), "dt": ((nh, T, 1), -1, 1),
            "A": ((1, nh), -1, -0.5), "B": ((ds, ng, T, 1), -1, 1), "C": ((ds, ng, T, 1), -1, 1)}
    data = {k: rng.uniform(lo, hi, size=ne[::-1]).astype(np.float32) for k, (ne, lo, hi) in arrs.items()}
    ids = np.zeros(1, dtype=np.int32)
    ctx = gg.Context(mem_size=64 << 20)
    ts = {}
    for k, (ne, _, _) in arrs.items():
        ts[k] = ctx.new_tensor(gg.F32, list(ne)); ts[k].set(data[k])
    ti = ctx.new_tensor(gg.I32, [1]); ti.set(ids)
    out = gg.ssm_scan(ctx, ts["s"], ts["x"], ts["dt"], ts["A"], ts["B"], ts["C"], ti, 1)
    g = gg.Graph(ctx); g.build_forward_expand(out)
    ours = lambda: g.compute(n_threads=n_threads)  # noqa: E731
    flops = 4.0 * ds * hd * nh * T  # update (fma + mul) and the y dot per state element and token
    if ref is None:
        return flops / _alternate(ours, ours, reps)[0] / 1e9, None
    rc = ref.context(64 << 20)
    rt = {k: rc.tensor(ref.TYPE["f32"], list(ne), data[k]) for k, (ne, _, _) in arrs.items()}
    ri = rc.tensor(ref.TYPE["i32"], [1], ids)
    theirs = rc.graph(ref.ggml_ssm_scan(rc.ptr, rt["s"], rt["x"], rt["dt"], rt["A"], rt["B"], rt["C"], ri, 1),
                      n_threads)
    to, tt = _alternate(ours, theirs, reps)
    rc.free()
    return flops / to / 1e9, flops / tt / 1e9


def flash_attn_case(gg, np, ref, KV, N, n_threads, reps):
    """F16 K/V cache of KV cells (all visible), D 128, 32 query / 8 KV heads, N query tokens:
    K/V GB/s (each KV head's rows once)."""
    D, H, Hkv = 128, 32, 8
    rng = np.random.default_rng(6)
    q = rng.uniform(-1, 1, size=(1, H, N, D)).astype(np.float32)
    k = rng.uniform(-1, 1, size=(1, Hkv, KV, D)).astype(np.float16)
    v = rng.uniform(-1, 1, size=(1, Hkv, KV, D)).astype(np.float16)
    m = np.zeros((1, 1, N, KV), dtype=np.float16)
    scale = 1.0 / np.sqrt(D)
    ctx = gg.Context(mem_size=k.nbytes + v.nbytes + q.nbytes * 2 + m.nbytes + (16 << 20))
    tq = ctx.new_tensor(gg.F32, [D, N, H, 1]); tq.set(q)
    tk = ctx.new_tensor(gg.F16, [D, KV, Hkv, 1]); tk.set(k)
    tv = ctx.new_tensor(gg.F16, [D, KV, Hkv, 1]); tv.set(v)
    tm = ctx.new_tensor(gg.F16, [KV, N, 1, 1]); tm.set(m)
    out = gg.flash_attn_ext(ctx, tq, tk, tv, tm, scale, 0.0, 0.0)
    g = gg.Graph(ctx); g.build_forward_expand(out)
    ours = lambda: g.compute(n_threads=n_threads)  # noqa: E731
    nbytes = k.nbytes + v.nbytes
    if ref is None:
        return nbytes / _alternate(ours, ours, reps)[0] / 1e9, None
    rc = ref.context(k.nbytes + v.nbytes + q.nbytes * 2 + m.nbytes + (16 << 20))
    rq, rk, rv = rc.tensor(ref.TYPE["f32"], [D, N, H, 1], q), rc.tensor(ref.TYPE["f16"], [D, KV, Hkv, 1], k), \
        rc.tensor(ref.TYPE["f16"], [D, KV, Hkv, 1], v)
    rm = rc.tensor(ref.TYPE["f16"], [KV, N, 1, 1], m)
    theirs = rc.graph(ref.ggml_flash_attn_ext(rc.ptr, rq, rk, rv, rm, scale, 0.0, 0.0), n_threads)
    to, tt = _alternate(ours, theirs, reps)
    mine, other = out.numpy().reshape(-1), rc.read_f32(theirs.out, D * H * N)
    err = float(np.sum((mine - other) ** 2) / max(np.sum(other ** 2), 1e-30))
    if err > 1e-3:  # F16 accumulators over a long, flat softmax: ~1e-4 apart is normal
        print(f"# WARNING flash_attn kv{KV} n{N}: pyggml and ggml differ, NMSE {err:.2e}", flush=True)
    rc.free()
    return nbytes / to / 1e9, nbytes / tt / 1e9


NUMPY_MIN_ROUNDS = 15  # the best-of-rounds figures swing by 10% on a shared machine with 3


def numpy_gemm_case(gg, np, K, M, N, n_threads, reps):
    """(pyggml GFLOP/s, numpy GFLOP/s, paired): best of the rounds each, and the median of the
    rounds' time ratios numpy / pyggml with its ~95% interval (paired_stats.median_interval; a
    round's two calls run back to back, so a change of the machine's load moves both)."""
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, size=(M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, size=(N, K)).astype(np.float32)
    ctx = gg.Context(mem_size=a.nbytes + b.nbytes + M * N * 4 + (16 << 20))
    ta = ctx.new_tensor(gg.F32, [K, M]); ta.set(a)
    tb = ctx.new_tensor(gg.F32, [K, N]); tb.set(b)
    g = gg.Graph(ctx); g.build_forward_expand(gg.mul_mat(ctx, ta, tb))
    at = a.T
    from mul_mat import quiesce  # OpenBLAS's workers spin ~0.1 s after a call, past SETTLE_S
    pairs = []
    to, tn = _alternate(lambda: g.compute(n_threads=n_threads), lambda: b @ at, max(reps, NUMPY_MIN_ROUNDS),
                        settle=quiesce, pairs=pairs)
    flops = 2.0 * K * M * N
    return flops / to / 1e9, flops / tn / 1e9, median_interval([tn_i / to_i for to_i, tn_i in pairs]) + (len(pairs),)


def fma_peak(n_threads):
    exe = ROOT / "build" / "bench_ops"
    if not exe.exists():
        return None
    r = subprocess.run([str(exe), "-t", str(n_threads), "fma_peak"], capture_output=True, text=True)
    vals = [float(m.group(1)) for m in re.finditer(r"fma_peak f32 avx(?:2|512)\s+([0-9.]+)", r.stdout)]
    return max(vals) if vals else None  # the 256-bit or 512-bit chains' row, whichever is higher


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="M=4096 only")
    ap.add_argument("--thread-cpu", action="store_true",
                    help="time by the calling thread's CPU clock (with -t 1: figures that hold on a loaded machine)")
    ap.add_argument("filters", nargs="*")
    a = ap.parse_args()
    if a.thread_cpu:
        if a.threads != 1:
            ap.error("--thread-cpu needs -t 1 (other threads' time is not counted)")
        global CLOCK
        CLOCK = time.thread_time
    how = _limit_openblas(a.threads)
    import numpy as np
    import pyggml as gg
    import ggml_ref
    ref = ggml_ref.load()
    want = lambda name: not a.filters or any(f in name + " " for f in a.filters)  # noqa: E731
    print("# " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"# threads={a.threads}  numpy BLAS: {how}  ggml: {ref.lib_dir if ref else 'n/a (' + (ggml_ref.cpu_mismatch_reason() or 'llama_cpp not importable') + ')'}")
    peak = fma_peak(a.threads) if want("fma_peak") else None
    copy = _memcpy_gbs(np)
    peak_text = f"{peak:.1f} GFLOP/s" if peak else "not measured (fma_peak filtered out or bench_ops not built)"
    print(f"# memcpy (read+write) {copy:.2f} GB/s   FMA peak {peak_text}")
    print(f"{'case':<40s} {'pyggml':>9s} {'other':>9s} {'unit':<8s} {'ratio':>6s} {'of copy':>8s}")

    def row(name, ours, other, unit, frac=None):
        r = f"{ours / other:6.2f}" if other else f"{'n/a':>6s}"
        o = f"{other:9.2f}" if other else f"{'n/a':>9s}"
        f = f"{frac:8.2f}" if frac is not None else ""
        print(f"{name:<40s} {ours:9.2f} {o} {unit:<8s} {r} {f}", flush=True)

    for M in ((4096,) if a.quick else (4096, 14336)):
        for N in (1, 128, 512):
            for name in TYPES:
                case = f"mul_mat {name} K4096 M{M} N{N}"
                if not want(case):
                    continue
                to, tt, nbytes = mul_mat_case(gg, np, ref, name, 4096, M, N, a.threads, a.reps)
                if N == 1:  # GEMV: weight GB/s
                    row(case + " ggml", nbytes / to / 1e9, nbytes / tt / 1e9 if tt else None, "GB/s",
                        nbytes / to / 1e9 / copy)
                else:
                    fl = 2.0 * 4096 * M * N
                    row(case + " ggml", fl / to / 1e9, fl / tt / 1e9 if tt else None, "GFLOP/s",
                        None)
    for T in (1, 32, 128):
        for name in ("f16", "q8_0", "q4_K", "mxfp4"):
            case = f"mul_mat_id {name} E64 U6 K2048 M1408 T{T} ggml"
            if want(case):
                row(case, *mul_mat_id_case(gg, np, ref, name, 2048, 1408, 64, 6, T, a.threads, a.reps), "GFLOP/s")
    for T in (128, 512):  # few experts: ~T/4 tokens each, MUL_MAT_ID's K-quant tiles from KTILE_MIN_COLUMNS on
        for name in ("q4_K", "q6_K"):
            case = f"mul_mat_id {name} E8 U2 K2048 M1408 T{T} ggml"
            if want(case):
                row(case, *mul_mat_id_case(gg, np, ref, name, 2048, 1408, 8, 2, T, a.threads, a.reps), "GFLOP/s")
    for T in (1, 64):
        if want(f"gated_delta_net T{T}"):
            row(f"gated_delta_net S128 H32 T{T} ggml", *gated_delta_net_case(gg, np, ref, T, a.threads, a.reps),
                "GFLOP/s")
    for T in (1, 256):
        if want(f"ssm_scan T{T}"):
            row(f"ssm_scan ds128 hd64 h32 T{T} ggml", *ssm_scan_case(gg, np, ref, T, a.threads, a.reps), "GFLOP/s")
    for KV in (4096, 16384):
        for N in (1, 9):
            case = f"flash_attn f16 D128 h32/8 kv{KV} n{N} ggml"
            if want(case):
                row(case, *flash_attn_case(gg, np, ref, KV, N, a.threads, a.reps), "GB/s")
    for K, M, N in ((1024, 1024, 1024), (4096, 4096, 512)):
        case = f"f32 gemm K{K} M{M} N{N} numpy"
        if want(case):
            ours, theirs, (med, lo, hi, cover, n) = numpy_gemm_case(gg, np, K, M, N, a.threads, a.reps)
            row(case, ours, theirs, "GFLOP/s")
            print(f"{'':<4s}paired, numpy time / pyggml time of each of {n} rounds: median {med:.2f} "
                  f"[{lo:.2f}, {hi:.2f}] ({cover:.0%})", flush=True)
    if peak:
        row("fma_peak f32", peak, None, "GFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
