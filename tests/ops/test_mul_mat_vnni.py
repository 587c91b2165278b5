"""The avx512 level's VNNI integer dots (vpdpbusd / vpdpwssd) on every quantized weight type and
every MUL_MAT path: the dot kernels (one column, dot1x), the two-row dots (narrow widths, odd
row counts), the quantized GEMM tiles (8+ columns), the repacked-weight tiles and MUL_MAT_ID.
Their integer sums are exact whatever the instruction, and the float operations are the AVX2
kernels' one for one, so every output must be bitwise the avx2 level's (and within the peer
NMSE of the float64 product of the stored weights). Also, from the type table: wherever the
avx2 level has a kernel of its own for a path, the avx512 level has one too (a type that fell
back to the AVX2 kernel would give the same bits, so only the table shows it). Exception: from
gg.KTILE_MIN_COLUMNS columns on (MUL_MAT_ID: tokens an expert), q2_K..q6_K take the avx512 level's
K-quant tiles, another summation order (llama.cpp's AVX-512 one, test_mul_mat_ktile.py,
test_mul_mat_id_ktile.py): there only the NMSE is checked."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

PEER = 5e-4
TABLE = {row["name"]: row for row in gg.type_traits()}
QTYPES = [n for n, r in TABLE.items() if r["is_weight"] and r["is_quantized"]]
REPACKABLE = ["q4_0", "q4_1", "q5_0", "q8_0", "q4_K", "q5_K", "q6_K"]
PATHS = ("dot", "dot2", "dot1x", "dot1x2", "dot2x", "gemm", "repack", "ktile")
KTILE = [n for n in QTYPES if "avx512" in TABLE[n]["mul_mat_paths"]["ktile"]]


def takes_ktile(name, N):
    """Whether the avx512 level runs this product (N columns, or tokens of an expert; an array
    of them gives an array) through the K-quant tiles."""
    return (name in KTILE) & (np.asarray(N) >= gg.KTILE_MIN_COLUMNS)

needs_avx512 = pytest.mark.skipif(gg.isa(detected=True) != "avx512", reason="no AVX-512 on this CPU")


def row_len(name):
    """An odd number of blocks: the two-pass kernels' last block has no odd partner."""
    bs = TABLE[name]["blck_size"]
    return bs * (3 if bs == 256 else 9 if bs == 32 else 5)


def under_isas(ctx, out, n_threads, levels=("avx2", "avx512")):
    """out computed under each level; the values as float32 arrays."""
    got = {}
    for level in levels:
        prev = gg.set_isa(level)
        try:
            assert gg.isa() == level
            compute(ctx, out, n_threads=n_threads)
            got[level] = values(out).copy()
        finally:
            gg.set_isa(prev)
    return got


def assert_same_bits(got, what):
    a, b = got["avx2"], got["avx512"]
    bad = np.argwhere(a.view(np.uint32) != b.view(np.uint32))
    assert bad.size == 0, (f"{what}: {len(bad)} of {a.size} outputs of the avx512 level differ from the "
                           f"avx2 level's, first at {tuple(bad[0])}: {a[tuple(bad[0])]!r} vs {b[tuple(bad[0])]!r}")


@pytest.mark.parametrize("name", QTYPES)
def test_avx512_has_its_own_kernel_wherever_avx2_has(name):
    paths = TABLE[name]["mul_mat_paths"]
    assert set(paths) == set(PATHS)
    assert "avx2" in paths["dot"] and "avx512" in TABLE[name]["mul_mat"], TABLE[name]["mul_mat"]
    for path, levels in paths.items():
        if "avx2" in levels:
            assert "avx512" in levels, f"{name}: the avx512 level reuses the avx2 {path} kernel ({levels})"
    assert "avx512" in paths["gemm"], f"{name}: no quantized GEMM on the avx512 level ({paths})"
    if name != "nvfp4":  # (no level has a two-row nvfp4 dot)
        assert "avx512" in paths["dot2"], f"{name}: no two-row dot on the avx512 level ({paths})"
    if name in REPACKABLE:
        assert "avx512" in paths["repack"], f"{name}: no repacked tile on the avx512 level ({paths})"
    assert (name in KTILE) == name.endswith("_K"), f"{name}: K-quant tiles {paths['ktile']}"


@needs_avx512
@pytest.mark.parametrize("name", QTYPES)
@pytest.mark.parametrize("N", [1, 2, 3, 5, 8, 9, 33, 64, 130])
def test_mul_mat_bits_match_avx2(name, N):
    """GEMV (N = 1: dot / dot1x), narrow widths (two-row dots over an odd row count) and the
    GEMM widths, on 1 and 2 threads."""
    rng = np.random.default_rng(N)
    K, M = row_len(name), 37
    ctx = gg.Context(mem_size=64 << 20)
    a, av = new(ctx, TABLE[name]["type"], [K, M], rng=rng)
    b, bv = new(ctx, gg.F32, [K, N], rng=rng)
    out = gg.mul_mat(ctx, a, b)
    for nth in (1, 2):
        got = under_isas(ctx, out, nth)
        if not takes_ktile(name, N):
            assert_same_bits(got, f"{name} N={N} threads={nth}")
    assert_close(got["avx512"], ref.mul_mat(av, bv), PEER, what=f"{name} N={N}")


@needs_avx512
@pytest.mark.parametrize("name", QTYPES)
@pytest.mark.parametrize("N", [1, 4, 40])
def test_broadcast_and_strided_b(name, N):
    """Broadcast batches (a [K, M, 2, 1] against b [K, N, 4, 2]) with b a view whose rows are
    padded and offset (not contiguous)."""
    rng = np.random.default_rng(7 + N)
    K, M = row_len(name), 19
    ctx = gg.Context(mem_size=64 << 20)
    a, av = new(ctx, TABLE[name]["type"], [K, M, 2, 1], rng=rng)
    big = ctx.new_tensor(gg.F32, [K + 5, N, 4, 2])
    full = rng.uniform(-1, 1, size=(2, 4, N, K + 5)).astype(np.float32)
    big.set(full)
    b = gg.view_4d(ctx, big, K, N, 4, 2, big.nb[1], big.nb[2], big.nb[3], 2 * 4)
    assert not b.is_contiguous()
    out = gg.mul_mat(ctx, a, b)
    got = under_isas(ctx, out, 2)
    if not takes_ktile(name, N):
        assert_same_bits(got, f"{name} N={N} broadcast, strided b")
    assert_close(got["avx512"], ref.mul_mat(av, full[..., 2:2 + K]), PEER, what=f"{name} N={N}")


@needs_avx512
@pytest.mark.parametrize("name", REPACKABLE)
@pytest.mark.parametrize("N", [1, 3, 6, 7, 8, 13, 64, 130])
def test_repacked_bits_match_avx2(name, N):
    """Repacked weights (gg.repack_weights) of a row count that is not a multiple of 8. The
    avx512 level's K-quant tiles take up to 8 columns per call (avx2's: 4): 6, 7 and 13 (8 + 5)
    reach every partial width, 130 a partial column block."""
    rng = np.random.default_rng(3 * N)
    K, M = row_len(name), 21
    ctx = gg.Context(mem_size=64 << 20)
    a, av = new(ctx, TABLE[name]["type"], [K, M], rng=rng)
    b, bv = new(ctx, gg.F32, [K, N], rng=rng, lo=-2.0, hi=2.0)
    handle = gg.repack_weights(a)
    assert gg.has_repack(a)
    out = gg.mul_mat(ctx, a, b)
    for nth in (1, 2):
        got = under_isas(ctx, out, nth)
        if not takes_ktile(name, N):
            assert_same_bits(got, f"{name} repacked N={N} threads={nth}")
    assert_close(got["avx512"], ref.mul_mat(av, bv), PEER, what=f"{name} repacked N={N}")
    del handle


@needs_avx512
@pytest.mark.parametrize("name", QTYPES)
@pytest.mark.parametrize("T,U,Nb", [(1, 2, 1), (37, 3, 3), (90, 2, 1)])
def test_mul_mat_id_bits_match_avx2(name, T, U, Nb):
    """MUL_MAT_ID with experts used by a few tokens (dots) and by many (per-expert GEMM)."""
    rng = np.random.default_rng(T + U)
    K, M, E = row_len(name), 27, 5
    ctx = gg.Context(mem_size=64 << 20)
    as_, asv = new(ctx, TABLE[name]["type"], [K, M, E], rng=rng)
    b, bv = new(ctx, gg.F32, [K, Nb, T], rng=rng)
    p = np.array([0.55, 0.25, 0.12, 0.08, 0.0])
    ids_np = np.stack([rng.choice(E, U, replace=False, p=p) for _ in range(T)]).astype(np.int32)
    ids = ctx.new_tensor(gg.I32, [U, T])
    ids.set(ids_np)
    out = gg.mul_mat_id(ctx, as_, b, ids)
    counts = np.bincount(ids_np.ravel(), minlength=E)
    dots = ~takes_ktile(name, counts[ids_np])       # (T, U): slots whose expert keeps the dot bits
    assert dots.any()
    for nth in (1, 2):
        got = under_isas(ctx, out, nth)
        assert_same_bits({k: v[0][dots] for k, v in got.items()}, f"{name} mul_mat_id T={T} U={U} threads={nth}")
    assert_close(got["avx512"][0], ref.mul_mat_id(asv[0], bv[0], ids_np), PEER, what=f"{name} mul_mat_id")
