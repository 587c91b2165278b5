"""MUL_MAT with f32 / f16 / bf16 weights gives every output column the same bits whatever the
number of columns computed with it (speculative decoding verifies n+1 tokens in one batch and
must reproduce one-token decoding exactly). The column counts cross the switch from the direct
tiles to the packed GEMM (64 columns), the tiles' 4-column groups and
64-column blocks, the GEMM's column panels and blocks, and K crosses the 512-value summation
block with odd tails; non-contiguous b, broadcast batches, f16 activations,
1 / 2 / 3 threads and MUL_MAT_ID's float dots (one expert's tokens in one call) are checked the
same way, on the native kernel set, the avx512 set without its AVX512-BF16 pair form of bf16
weights (where the CPU has AVX-512), the avx2 set and the scalar one. Accuracy stays within the peer bound
(NMSE 5e-4 against the float64 product) and within 1e-9 of the product with b converted as
ggml's CPU converts it."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

WTYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16}
COLUMNS = [1, 2, 3, 7, 8, 9, 16, 17, 31, 33, 64, 65, 128]
PEER = 5e-4


def _columns_view(ctx, b, n, nb1, k):
    """The first n columns of b (k values each, rows nb1 bytes apart) as a 2-D view."""
    return gg.view_2d(ctx, b, k, n, nb1, 0)


def _bitwise_equal(got, want, what):
    g, w = np.asarray(got, dtype=np.float32), np.asarray(want, dtype=np.float32)
    bad = np.flatnonzero(g.view(np.uint32) != w.view(np.uint32))
    assert bad.size == 0, f"{what}: {bad.size} of {g.size} values differ, first at {bad[0]}: {g.flat[bad[0]]!r} != {w.flat[bad[0]]!r}"


@pytest.mark.parametrize("simd", ["native", "avx512-nobf16", "avx2", "scalar"], indirect=True)
@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("K,M", [(7, 37), (67, 41), (520, 19), (1024, 29), (1031, 53), (2048, 13)])
def test_column_is_independent_of_batch_width(simd, wtype, K, M):
    rng = np.random.default_rng(K + M)
    ctx = gg.Context(mem_size=96 << 20)
    nmax = max(COLUMNS)
    a, av = new(ctx, WTYPES[wtype], [K, M], rng=rng)
    # b's rows padded to K + 3 values: every view below is non-contiguous
    b0, b0v = new(ctx, gg.F32, [K + 3, nmax], rng=rng)
    nb1 = (K + 3) * 4
    singles = [gg.mul_mat(ctx, a, gg.view_2d(ctx, b0, K, 1, nb1, j * nb1)) for j in range(nmax)]
    batches = {n: gg.mul_mat(ctx, a, _columns_view(ctx, b0, n, nb1, K)) for n in COLUMNS}
    compute(ctx, *singles, *batches.values())
    single = np.stack([values(s).reshape(M) for s in singles])  # (nmax, M)
    for n, out in batches.items():
        _bitwise_equal(values(out).reshape(n, M), single[:n], f"{wtype} K={K} M={M} N={n}")
    bv = b0v[:, :, :, :K]
    got = values(batches[nmax]).reshape(1, 1, nmax, M)
    assert_close(got, ref.mul_mat(av, bv), PEER, what="exact")
    assert_close(got, ref.mul_mat(av, ref.act_like_cpu(bv, wtype)), 1e-9, what="cpu-emulation")


@pytest.mark.parametrize("simd", ["native", "avx512-nobf16", "avx2", "scalar"], indirect=True)
@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("K", [67, 1029])
def test_wide_batches_match_single_columns(simd, wtype, K):
    """About a thousand columns, in the packed GEMM for every weight kind."""
    rng = np.random.default_rng(K)
    M, nmax = 37, 1030
    ctx = gg.Context(mem_size=96 << 20)
    a, av = new(ctx, WTYPES[wtype], [K, M], rng=rng)
    b, bv = new(ctx, gg.F32, [K, nmax], rng=rng)
    picks = [0, 1, 63, 64, 511, 1022, 1023, 1029]
    singles = [gg.mul_mat(ctx, a, gg.view_2d(ctx, b, K, 1, K * 4, j * K * 4)) for j in picks]
    batches = {n: gg.mul_mat(ctx, a, gg.view_2d(ctx, b, K, n, K * 4, 0)) for n in (1023, 1024, nmax)}
    compute(ctx, *singles, *batches.values())
    for n, out in batches.items():
        w = values(out).reshape(n, M)
        for j, s in zip(picks, singles):
            if j < n:
                _bitwise_equal(w[j], values(s).reshape(M), f"{wtype} K={K} N={n} column {j}")
    assert_close(values(batches[nmax]), ref.mul_mat(av, ref.act_like_cpu(bv, wtype)), 1e-9, what="cpu-emulation")


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("bt", ["f32", "f16"])
def test_broadcast_batches_match_single_columns(wtype, bt):
    """a [K, M, 2, 1] broadcast over b [K, N, 4, 3]: every (column, batch) of the batched node
    equals the 1-column product of its weight slice, on 1, 2 and 3 threads."""
    rng = np.random.default_rng(11)
    K, M, N = 523, 29, 33
    ctx = gg.Context(mem_size=64 << 20)
    a, _ = new(ctx, WTYPES[wtype], [K, M, 2, 1], rng=rng)
    b, _ = new(ctx, WTYPES[bt], [K, N, 4, 3], rng=rng)
    wide = gg.mul_mat(ctx, a, b)
    esz = 4 if bt == "f32" else 2
    arow = gg.row_size(WTYPES[wtype], K)
    singles = {}
    for i3 in range(3):
        for i2 in range(4):
            aslice = gg.view_2d(ctx, a, K, M, arow, (i2 // 2) * arow * M)
            for n in (0, 5, N - 1):
                off = ((i3 * 4 + i2) * N + n) * K * esz
                singles[(i3, i2, n)] = gg.mul_mat(ctx, aslice, gg.view_2d(ctx, b, K, 1, K * esz, off))
    for nt in (1, 2, 3):
        compute(ctx, wide, *singles.values(), n_threads=nt)
        w = values(wide)  # (3, 4, N, M)
        for (i3, i2, n), s in singles.items():
            _bitwise_equal(w[i3, i2, n], values(s).reshape(M), f"{wtype} b={bt} batch=({i2},{i3}) n={n} threads={nt}")


@pytest.mark.parametrize("simd", ["native", "avx512-nobf16", "avx2", "scalar"], indirect=True)
@pytest.mark.parametrize("wtype", list(WTYPES))
def test_permuted_b_matches_single_columns(simd, wtype):
    """b is a permuted view (its columns 2 rows apart in memory, batches interleaved)."""
    rng = np.random.default_rng(12)
    K, M, N = 100, 70, 20
    ctx = gg.Context(mem_size=32 << 20)
    a, _ = new(ctx, WTYPES[wtype], [K, M], rng=rng)
    b0, _ = new(ctx, gg.F32, [K, 2, N], rng=rng)
    b = gg.permute(ctx, b0, 0, 2, 1, 3)  # [K, N, 2]
    wide = gg.mul_mat(ctx, a, b)
    singles = [[gg.mul_mat(ctx, a, gg.view_2d(ctx, b0, K, 1, K * 4, (n * 2 + i) * K * 4)) for n in range(N)]
               for i in range(2)]
    compute(ctx, wide, *[s for row in singles for s in row])
    w = values(wide)  # (1, 2, N, M)
    for i in range(2):
        _bitwise_equal(w[0, i], np.stack([values(s).reshape(M) for s in singles[i]]), f"{wtype} batch {i}")


@pytest.mark.parametrize("simd", ["native", "avx512-nobf16", "avx2", "scalar"], indirect=True)
@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("K,T", [(300, 9), (2048, 9), (2048, 1)])
def test_mul_mat_id_float_matches_mul_mat(simd, wtype, K, T):
    """Tokens routed to one expert are dotted together: each output equals that expert's
    1-column mul_mat (K 2048: f16 / bf16 rows 4 KiB apart, which the avx512 tiles dot one row at
    a time for one column; one token: every expert a single column)."""
    rng = np.random.default_rng(13)
    M, E, U = 23, 3, 2
    ctx = gg.Context(mem_size=32 << 20)
    as_, _ = new(ctx, WTYPES[wtype], [K, M, E], rng=rng)
    b, _ = new(ctx, gg.F32, [K, 1, T], rng=rng)
    ids_np = np.array([[t % E, (t + 1) % E] for t in range(T)], dtype=np.int32)
    ids = ctx.new_tensor(gg.I32, [U, T])
    ids.set(ids_np)
    out = gg.mul_mat_id(ctx, as_, b, ids)
    arow = gg.row_size(WTYPES[wtype], K)
    singles = {(u, t): gg.mul_mat(ctx, gg.view_2d(ctx, as_, K, M, arow, int(ids_np[t, u]) * arow * M),
                                  gg.view_2d(ctx, b, K, 1, K * 4, t * K * 4))
               for t in range(T) for u in range(U)}
    compute(ctx, out, *singles.values())
    got = values(out)  # (1, T, U, M)
    for (u, t), s in singles.items():
        _bitwise_equal(got[0, t, u], values(s).reshape(M), f"{wtype} slot {u} token {t}")
