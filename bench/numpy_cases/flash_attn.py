"""flash_attn_ext vs a numpy implementation (softmax(Q·Kᵀ·scale + mask)·V per KV head group,
float32, F16 K/V widened to float32 once outside the timing), head size 128, 32 query heads /
8 KV heads, n_kv 4096, batch 1 and 32. Throughput in GFLOP/s (4·N·H·KV·D)."""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root (pyggml/)


def _best(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def _case(gg, np, n_threads, N, KV, H=32, Hkv=8, D=128, reps=5):
    rng = np.random.default_rng(0)
    ctx = gg.Context(mem_size=4 * D * KV * Hkv * 2 + 16 * N * H * (D + KV) + (64 << 20))
    qv = rng.uniform(-1, 1, size=(1, H, N, D)).astype(np.float32)
    kv = rng.uniform(-1, 1, size=(1, Hkv, KV, D)).astype(np.float16)
    vv = rng.uniform(-1, 1, size=(1, Hkv, KV, D)).astype(np.float16)
    mv = np.zeros((1, 1, N, KV), dtype=np.float16)
    for t in range(N):  # causal: the batch is the last N positions
        mv[0, 0, t, KV - N + t + 1:] = -np.inf
    q = ctx.from_numpy(qv)
    k = ctx.from_numpy(kv)
    v = ctx.from_numpy(vv)
    m = ctx.from_numpy(mv)
    scale = 1.0 / np.sqrt(D)
    out = gg.flash_attn_ext(ctx, q, k, v, m, scale, 0.0, 0.0)
    g = gg.Graph(ctx)
    g.build_forward_expand(out)
    t_ours = _best(lambda: g.compute(n_threads=n_threads), reps)

    r = H // Hkv
    k32, v32, m32 = kv.astype(np.float32)[0], vv.astype(np.float32)[0], mv.astype(np.float32)[0, 0]

    def numpy_attn():
        qg = qv[0].reshape(Hkv, r * N, D)                       # heads of a group stacked
        s = np.matmul(qg, k32.transpose(0, 2, 1)) * scale       # (Hkv, r*N, KV)
        s = s.reshape(Hkv, r, N, KV) + m32
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        return np.matmul(s.reshape(Hkv, r * N, KV), v32)

    t_np = _best(numpy_attn, reps)
    flops = 4.0 * N * H * KV * D
    return flops / t_ours / 1e9, flops / t_np / 1e9


def cases(n_threads):
    try:
        from mul_mat import _limit_openblas  # same BLAS thread cap as the mul_mat cases
        _limit_openblas(n_threads)
    except Exception:  # noqa: BLE001
        pass
    import numpy as np
    import pyggml as gg
    for N, reps in ((1, 21), (32, 5)):
        yield (f"flash_attn f16 D128 kv4096 h32/8 n{N}", *_case(gg, np, n_threads, N, 4096, reps=reps), "GFLOP/s")
