"""conv_2d throughput: pyggml (im2col + GEMM composite, and the direct op) vs numpy in one run.

numpy's conv is what a numpy user writes: a zero-padded copy, sliding_window_view for the
patches, and one tensordot (BLAS) over (IC, KH, KW). Same thread count for both (OpenBLAS is
capped the way mul_mat.py caps it). GFLOP/s counts 2*OC*IC*KH*KW per output pixel.
"""
import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root (pyggml/)

_spec = importlib.util.spec_from_file_location("_mm_bench", Path(__file__).with_name("mul_mat.py"))
_mm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mm)


def _case(gg, np, n_threads, fn, ktype, W, H, IC, OC, K, reps):
    rng = np.random.default_rng(0)
    ctx = gg.Context(mem_size=(W * H * IC * K * K * 4 * 3) + (256 << 20))
    k = ctx.new_tensor(ktype, [K, K, IC, OC])
    kv = rng.uniform(-1, 1, size=(OC, IC, K, K)).astype(np.float32)
    k.set(kv.astype(np.float16) if ktype == gg.F16 else kv)
    x = ctx.new_tensor(gg.F32, [W, H, IC, 1])
    xv = rng.uniform(-1, 1, size=(1, IC, H, W)).astype(np.float32)
    x.set(xv)
    p = K // 2
    out = getattr(gg, fn)(ctx, k, x, 1, 1, p, p, 1, 1)
    g = gg.Graph(ctx)
    g.build_forward_expand(out)
    t_ours = _mm._best(lambda: g.compute(n_threads=n_threads), reps)

    def numpy_conv():
        xp = np.pad(xv[0], ((0, 0), (p, p), (p, p)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (K, K), axis=(1, 2))  # (IC, H, W, K, K)
        return np.tensordot(kv, win, axes=([1, 2, 3], [0, 3, 4]))  # (OC, H, W)

    t_np = _mm._best(numpy_conv, reps)
    got = np.asarray(out.to_f32()).reshape(OC, H, W)
    err = float(np.sum((got - numpy_conv()) ** 2) / np.sum(numpy_conv() ** 2))
    assert err < 5e-4, f"{fn}: NMSE {err} against numpy"
    flops = 2.0 * OC * IC * K * K * W * H
    return flops / t_ours / 1e9, flops / t_np / 1e9


def _dw_case(gg, np, n_threads, W, C, K, reps):
    rng = np.random.default_rng(1)
    ctx = gg.Context(mem_size=W * W * C * 4 * 4 + (64 << 20))
    k = ctx.new_tensor(gg.F32, [K, K, 1, C])
    kv = rng.uniform(-1, 1, size=(C, 1, K, K)).astype(np.float32)
    k.set(kv)
    x = ctx.new_tensor(gg.F32, [W, W, C, 1])
    xv = rng.uniform(-1, 1, size=(1, C, W, W)).astype(np.float32)
    x.set(xv)
    p = K // 2
    out = gg.conv_2d_dw_direct(ctx, k, x, 1, 1, p, p, 1, 1)
    g = gg.Graph(ctx)
    g.build_forward_expand(out)
    t_ours = _mm._best(lambda: g.compute(n_threads=n_threads), reps)

    def numpy_dw():
        xp = np.pad(xv[0], ((0, 0), (p, p), (p, p)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (K, K), axis=(1, 2))  # (C, H, W, K, K)
        return np.einsum("chwij,cij->chw", win, kv[:, 0], optimize=True)

    t_np = _mm._best(numpy_dw, reps)
    err = float(np.sum((np.asarray(out.to_f32()).reshape(C, W, W) - numpy_dw()) ** 2) / np.sum(numpy_dw() ** 2))
    assert err < 1e-6, f"conv_2d_dw_direct: NMSE {err} against numpy"
    flops = 2.0 * C * K * K * W * W
    return flops / t_ours / 1e9, flops / t_np / 1e9


def cases(n_threads):
    how = _mm._limit_openblas(n_threads)
    import numpy as np
    import pyggml as gg
    print(f"# numpy BLAS threads: {how}", flush=True)
    for W, IC, OC in ((64, 32, 64), (128, 64, 64)):
        for fn, kt, kn in (("conv_2d", gg.F16, "f16"), ("conv_2d_direct", gg.F32, "f32")):
            yield (f"{fn} {kn} {W}x{W} IC{IC} OC{OC} k3", *_case(gg, np, n_threads, fn, kt, W, W, IC, OC, 3, 5),
                   "GFLOP/s")
    yield ("conv_2d_dw_direct f32 128x128 C64 k3", *_dw_case(gg, np, n_threads, 128, 64, 3, 5), "GFLOP/s")
