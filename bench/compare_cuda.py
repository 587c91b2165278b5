"""GPU benchmarks against the H200's peaks (about 4.8 TB/s HBM, ~990 TFLOP/s dense F16).
Usage: PYGGML_BUILD_DIR=build/device python bench/compare_cuda.py
Prints case, pyggml, unit, peak, fraction. Timings include one graph launch and sync."""
import argparse
import time

import checkout  # noqa: E402,F401  (this checkout's pyggml, not an installed copy)
import numpy as np

import pyggml as gg

HBM_GBS = 4800.0
F16_TFLOPS = 990.0


def timed(g, reps=5):
    g.compute()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        g.compute()
        t.append(time.perf_counter() - t0)
    return float(np.median(t))


def gemm(m, n, k, wtype):
    ctx = gg.Context(((m * k + k * n) * 4 + m * n * 4) + (64 << 20), backend="cuda:0")
    a = ctx.new_tensor(wtype, [k, m])
    b = ctx.new_tensor(gg.F32, [k, n])
    y = gg.mul_mat(ctx, a, b)
    g = gg.Graph(ctx)
    g.build_forward_expand(y)
    return timed(g, reps=3)


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    dev = "cuda:0"
    if dev not in gg.backends():
        print("no CUDA device: nothing to measure")
        return 0
    print(f"{'case':<44s} {'pyggml':>10s} {'unit':<8s} {'peak':>8s} {'fraction':>8s}")
    for wtype, name in ((gg.Q4_0, "q4_0"), (gg.Q8_0, "q8_0"), (gg.F16, "f16")):
        m, k = 14336, 4096
        t = gemm(m, 1, k, wtype)
        gbs = gg.row_size(wtype, k) * m / t / 1e9
        print(f"{'gemv ' + name + ' 4096x14336':<44s} {gbs:10.1f} {'GB/s':<8s} {HBM_GBS:8.0f} {gbs / HBM_GBS:8.3f}")
    n = 4096
    t = gemm(n, n, n, gg.F16)
    tf = 2 * n ** 3 / t / 1e12
    print(f"{'gemm f16 4096^3':<44s} {tf:10.2f} {'TFLOP/s':<8s} {F16_TFLOPS:8.0f} {tf / F16_TFLOPS:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
