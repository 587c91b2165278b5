"""MUL_MAT with block weights gives every column the same bits whatever the number of columns
beside it: column j of mul_mat(W, X[:, :N]) equals mul_mat(W, X[:, j:j+1]) exactly, for every
quantized weight type of the type table, N across the dot path (below 8 columns, or 6 for
q4_1 / q5_1; 4-column kernels, two-row pairs) and the quantized GEMM (8-column groups,
64-column blocks, tails of 1..4 columns left to the dot kernel, wider ones padded), odd row
counts, K of several blocks, 1 and 2 threads, broadcast batches and non-contiguous b.
Speculative decoding's losslessness rests on this (a verify batch must score each draft token
as a single-token decode would). The results are also checked against the dequantized float64
product, so a path that is consistent but wrong fails too.

The one exception: at the avx512 level q2_K..q6_K take the K-quant tiles (another summation
order) from gg.KTILE_MIN_COLUMNS columns on. Every narrower product keeps the one-column bits,
and from the threshold on the columns are again the same whatever the width (checked against
the widest product)."""
import numpy as np
import pytest

import pyggml as gg
from util import SIMD_LEVELS, assert_close, compute, ktile_from, new, values

TABLE = {row["name"]: row for row in gg.type_traits()}
QUANT_WEIGHTS = [n for n, r in TABLE.items() if r["is_weight"] and r["is_quantized"]]
WIDTHS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 31, 32, 33, 38, 64, 65, 128)
PEER = 5e-4


def k_of(name, blocks=5):
    return TABLE[name]["blck_size"] * blocks if TABLE[name]["blck_size"] == 256 else 64 * blocks


def column_views(ctx, x, K, N):
    """x's first N columns as one tensor, and each of them alone (views of the same data)."""
    nb1 = x.nb[1]
    return gg.view_2d(ctx, x, K, N, nb1, 0), [gg.view_2d(ctx, x, K, 1, nb1, j * nb1) for j in range(N)]


@pytest.mark.parametrize("simd", SIMD_LEVELS, indirect=True)
@pytest.mark.parametrize("name", QUANT_WEIGHTS)
def test_column_results_do_not_depend_on_width(simd, name):
    rng = np.random.default_rng(31)
    K, M = k_of(name), 21
    ctx = gg.Context(mem_size=128 << 20)
    w, wv = new(ctx, TABLE[name]["type"], [K, M], rng=rng)
    x, xv = new(ctx, gg.F32, [K, max(WIDTHS)], rng=rng, lo=-2.0, hi=2.0)
    _, singles = column_views(ctx, x, K, max(WIDTHS))
    single_outs = [gg.mul_mat(ctx, w, s) for s in singles]
    wide_outs = {N: gg.mul_mat(ctx, w, column_views(ctx, x, K, N)[0]) for N in WIDTHS}
    for n_threads in (1, 2):
        compute(ctx, *single_outs, *wide_outs.values(), n_threads=n_threads)
        one = np.concatenate([values(o) for o in single_outs], axis=-2)  # (1, 1, 128, M)
        tiles_from = ktile_from(name)
        widest = values(wide_outs[max(WIDTHS)])
        for N, out in wide_outs.items():
            got = values(out)
            # below the K-quant tiles' threshold: the one-column bits; from it on: the widest's
            expect = one if tiles_from is None or N < tiles_from else widest
            bad = np.argwhere(got != expect[..., :N, :])
            assert bad.size == 0, (f"{name} {simd} N={N} threads={n_threads}: {len(bad)} outputs differ "
                                   f"from the {'single-column' if expect is one else 'widest'} product, first at (col, row) "
                                   f"{tuple(bad[0][-2:])}")
        ref = np.einsum("mk,nk->nm", wv.reshape(M, K).astype(np.float64), xv.reshape(-1, K).astype(np.float64))
        assert_close(one.reshape(-1, M), ref, PEER, what=f"{name} {simd}")
        assert_close(widest.reshape(-1, M), ref, PEER, what=f"{name} {simd} widest")


@pytest.mark.parametrize("name", QUANT_WEIGHTS)
def test_broadcast_and_permuted_batches(name):
    """Weights broadcast over b's batches (2 -> 4 and 1 -> 2), b a permuted (non-contiguous)
    view: each (column, batch) equals the same column multiplied alone (where the K-quant tiles
    take the product: the same column within another window of gg.KTILE_MIN_COLUMNS columns)."""
    rng = np.random.default_rng(32)
    K, M, N = k_of(name, 3), 13, 37
    ctx = gg.Context(mem_size=128 << 20)
    w, wv = new(ctx, TABLE[name]["type"], [K, M, 2, 1], rng=rng)
    braw, bvals = new(ctx, gg.F32, [K, 4, N, 2], rng=rng)
    b = gg.permute(ctx, braw, 0, 2, 1, 3)  # [K, N, 4, 2]
    wide = gg.mul_mat(ctx, w, b)
    picks = [(n, i2, i3) for n in (0, 1, 8, 17, 36) for i2 in range(4) for i3 in range(2)]
    singles, firsts = [], []
    width = ktile_from(name) or 1
    for n, i2, i3 in picks:  # columns n0.. of batch (i2, i3), n among them: a [K, width] view of braw
        n0 = n if width == 1 else max(0, min(n - 1, N - width))  # n not always first
        firsts.append(n0)
        col = gg.view_2d(ctx, braw, K, width, braw.nb[2], n0 * braw.nb[2] + i2 * braw.nb[1] + i3 * braw.nb[3])
        wsl = gg.view_2d(ctx, w, K, M, w.nb[1], (i2 // 2) * w.nb[2])
        singles.append(gg.mul_mat(ctx, wsl, col))
    compute(ctx, wide, *singles, n_threads=2)
    got = values(wide)  # (2, 4, N, M)
    for (n, i2, i3), n0, s in zip(picks, firsts, singles):
        assert np.array_equal(got[i3, i2, n], values(s).reshape(-1, M)[n - n0]), f"{name} column {n} batch ({i2}, {i3})"
    bv = np.transpose(bvals, (0, 2, 1, 3)).astype(np.float64)  # (2, 4, N, K)
    a = np.repeat(wv.astype(np.float64), 2, axis=1)  # (1, 4, M, K)
    assert_close(got, np.einsum("xymk,xynk->xynm", np.repeat(a, 2, axis=0), bv), PEER, what=name)


@pytest.mark.parametrize("name", QUANT_WEIGHTS)
def test_f16_activations_and_thread_counts(name):
    """F16 b (widened before quantization) and 3 threads: same bits as one column alone."""
    rng = np.random.default_rng(33)
    K, M, N = k_of(name, 2), 7, 19
    ctx = gg.Context(mem_size=64 << 20)
    w, _ = new(ctx, TABLE[name]["type"], [K, M], rng=rng)
    x, _ = new(ctx, gg.F16, [K, N], rng=rng)
    wide = gg.mul_mat(ctx, w, x)
    singles = [gg.mul_mat(ctx, w, gg.view_2d(ctx, x, K, 1, x.nb[1], j * x.nb[1])) for j in range(N)]
    compute(ctx, wide, *singles, n_threads=3)
    one = np.concatenate([values(s) for s in singles], axis=-2)
    assert np.array_equal(values(wide), one), name


@pytest.mark.parametrize("simd", SIMD_LEVELS, indirect=True)
@pytest.mark.parametrize("name", QUANT_WEIGHTS)
def test_long_rows_one_column(simd, name):
    """Rows longer than the dot path's short-row bound (1024 values), where one column takes
    the one-row dot or, for some types (q4_0, q5_0), the two-row dot's one-column form: each
    column alone equals that column of 2..5-column products, odd row counts (the last row
    alone), 1 and 2 threads; and the float64 product within the peer NMSE."""
    rng = np.random.default_rng(34)
    bs = TABLE[name]["blck_size"]
    K, M, N = bs * (5 if bs == 256 else 65), 9, 5
    ctx = gg.Context(mem_size=64 << 20)
    w, wv = new(ctx, TABLE[name]["type"], [K, M], rng=rng)
    x, xv = new(ctx, gg.F32, [K, N], rng=rng, lo=-2.0, hi=2.0)
    _, singles = column_views(ctx, x, K, N)
    single_outs = [gg.mul_mat(ctx, w, s) for s in singles]
    wide_outs = {n: gg.mul_mat(ctx, w, column_views(ctx, x, K, n)[0]) for n in range(2, N + 1)}
    for n_threads in (1, 2):
        compute(ctx, *single_outs, *wide_outs.values(), n_threads=n_threads)
        one = np.concatenate([values(o) for o in single_outs], axis=-2)
        for n, out in wide_outs.items():
            bad = np.argwhere(values(out) != one[..., :n, :])
            assert bad.size == 0, (f"{name} {simd} N={n} threads={n_threads}: {len(bad)} outputs differ "
                                   f"from the single-column product, first at (col, row) {tuple(bad[0][-2:])}")
        ref = np.einsum("mk,nk->nm", wv.reshape(M, K).astype(np.float64), xv.reshape(-1, K).astype(np.float64))
        assert_close(one.reshape(-1, M), ref, PEER, what=f"{name} {simd}")
