"""The packed float GEMM's running sums where dst's columns are a multiple of 4 KiB apart (M a
multiple of 1024) and K spans several 512-value blocks: a task keeps them in a scratch block and copies them to dst at its end
(cpu/mul_mat_float.cpp, sums_in_scratch). The scratch only moves where the sums are kept, so
every column must have the bits the direct tiles give it alone, on each instruction set, for
f32 / f16 / bf16 weights: K not a multiple of the chunk or of the 512-value block, N ending a
column panel short, a weight view with padded rows, batches (each task writing its own dst
matrix), 1 / 2 / 3 threads, the shared step and the gang schedule; and the product must match
numpy's of the stored weights and b rounded as ggml's CPU rounds it.

Catches, for instance: a copy-out that skips a task's last column or row (columns 63 / 76 of
N = 77, rows past the first panel), sums read back from dst instead of the scratch after the
first K block (K = 1040: three blocks), a scratch column stride below the task's rows (rows
overwritten), tasks of two batches writing one dst matrix."""
import numpy as np
import pytest

import pyggml as gg
from references.mul_mat import act_like_cpu, mul_mat
from util import assert_close, new, values

WTYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16}


def _isas():
    det = gg.isa(detected=True)
    return [i for i in ("scalar", "avx2", "avx512") if i == "scalar" or i == "avx2" and det in ("avx2", "avx512")
            or i == det]


@pytest.fixture(params=_isas())
def isa(request):
    prev = gg.set_isa(request.param)
    yield request.param
    gg.set_isa(prev)


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("K,M,N,row_values,batches", [
    (1040, 1024, 77, 1040, 1), (517, 1024, 64, 530, 2), (600, 2048, 70, 600, 1)])
@pytest.mark.parametrize("n_threads,shares", [(1, True), (2, True), (3, True), (2, False)])
def test_columns_match_single_columns(monkeypatch, isa, wtype, K, M, N, row_values, batches, n_threads, shares):
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", "0")
    monkeypatch.setenv("PYGGML_CPU_SHARES", "1" if shares else "0")
    rng = np.random.default_rng(K + M + N + batches)
    ctx = gg.Context(mem_size=96 << 20)
    a0, a0v = new(ctx, WTYPES[wtype], [row_values, M, batches], rng=rng)
    a = gg.view_3d(ctx, a0, K, M, batches, a0.nb[1], a0.nb[2], 0) if row_values > K else a0
    b, bv = new(ctx, gg.F32, [K, N, batches], rng=rng)
    wide = gg.mul_mat(ctx, a, b)
    assert wide.nb[1] % 4096 == 0  # the case under test
    picks = [0, 11, 12, N - 2, N - 1]
    singles = [gg.mul_mat(ctx, a, gg.view_3d(ctx, b, K, 1, batches, b.nb[1], b.nb[2], j * b.nb[1])) for j in picks]
    g = gg.Graph(ctx)
    for o in (wide, *singles):
        g.build_forward_expand(o)
    wide.set(np.full(tuple(reversed(wide.ne)), np.nan, dtype=np.float32))
    g.compute(n_threads=n_threads)
    w = values(wide).reshape(batches, N, M)
    for j, s in zip(picks, singles):
        got, want = w[:, j].view(np.uint32), values(s).reshape(batches, M).view(np.uint32)
        bad = np.argwhere(got != want)
        assert bad.size == 0, f"{isa} {wtype} column {j}: {len(bad)} outputs differ, first (batch, row) {tuple(bad[0])}"
    av = a0v[..., :K]
    assert_close(values(wide), mul_mat(av, act_like_cpu(bv, wtype)), 1e-9,
                 what=f"{isa} {wtype} K={K} M={M} N={N} batches={batches} cpu-emulation")
