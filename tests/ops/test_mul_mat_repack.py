"""MUL_MAT with repacked (row-interleaved) weights (gg.repack_weights): q4_0, q4_1, q5_0, q8_0
and the K-quants q4_K, q5_K, q6_K (256-value super-blocks, q8_K activations).

The repacked path serves every column count, so a column's result must not depend on the
columns beside it (speculative decoding's verify batches rely on it), nor on the thread
count, and must stay within the mul_mat tolerance of the dequantized float64 product. Row
counts that are not a multiple of the 8-row groups, K of an odd number of blocks, broadcast
and permuted b, f16 b, the scalar twin of the AVX2 kernels (same bits), and the switch back
to the plain path when the handle is dropped are all checked."""
import gc

import numpy as np
import pytest

import pyggml as gg
from util import SIMD_LEVELS, assert_close, compute, ktile_from, new, values

TYPES = {"q4_0": gg.Q4_0, "q4_1": gg.Q4_1, "q5_0": gg.Q5_0, "q8_0": gg.Q8_0,
         "q4_K": gg.Q4_K, "q5_K": gg.Q5_K, "q6_K": gg.Q6_K}
K_QUANTS = ("q4_K", "q5_K", "q6_K")
WIDTHS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 33, 64, 65, 130)
PEER = 5e-4


def row_len(name, blocks):
    """K of `blocks` 32-value blocks, or of about half as many 256-value super-blocks."""
    return 256 * (blocks // 2 + 1) if name in K_QUANTS else 32 * blocks


def column_views(ctx, x, K, N):
    nb1 = x.nb[1]
    return gg.view_2d(ctx, x, K, N, nb1, 0), [gg.view_2d(ctx, x, K, 1, nb1, j * nb1) for j in range(N)]


def ref_product(wv, xv, M, K):
    return np.einsum("mk,nk->nm", wv.reshape(M, K).astype(np.float64), xv.reshape(-1, K).astype(np.float64))


@pytest.mark.parametrize("simd", SIMD_LEVELS, indirect=True)
@pytest.mark.parametrize("name", list(TYPES))
@pytest.mark.parametrize("M", [21, 8, 3])
def test_repacked_columns_do_not_depend_on_width(simd, name, M):
    rng = np.random.default_rng(41 + M)
    K = row_len(name, 7)
    ctx = gg.Context(mem_size=128 << 20)
    w, wv = new(ctx, TYPES[name], [K, M], rng=rng)
    x, xv = new(ctx, gg.F32, [K, max(WIDTHS)], rng=rng, lo=-2.0, hi=2.0)
    handle = gg.repack_weights(w)
    assert gg.has_repack(w) and handle.nbytes >= w.nbytes
    _, singles = column_views(ctx, x, K, max(WIDTHS))
    single_outs = [gg.mul_mat(ctx, w, s) for s in singles]
    wide_outs = {N: gg.mul_mat(ctx, w, column_views(ctx, x, K, N)[0]) for N in WIDTHS}
    for n_threads in (1, 2):
        compute(ctx, *single_outs, *wide_outs.values(), n_threads=n_threads)
        one = np.concatenate([values(o) for o in single_outs], axis=-2)
        # from the K-quant tiles' threshold on (avx512 level): the widest product's bits
        tiles_from, widest = ktile_from(name), values(wide_outs[max(WIDTHS)])
        for N, out in wide_outs.items():
            expect = one if tiles_from is None or N < tiles_from else widest
            bad = np.argwhere(values(out) != expect[..., :N, :])
            assert bad.size == 0, (f"{name} {simd} M={M} N={N} threads={n_threads}: {len(bad)} outputs "
                                   f"differ from the {'single-column' if expect is one else 'widest'} product, "
                                   f"first at {tuple(bad[0][-2:])}")
        assert_close(one.reshape(-1, M), ref_product(wv, xv, M, K), PEER, what=f"{name} {simd} M={M}")
        assert_close(widest.reshape(-1, M), ref_product(wv, xv, M, K), PEER, what=f"{name} {simd} M={M} widest")


@pytest.mark.parametrize("name", list(TYPES))
def test_scalar_twin_gives_the_avx2_bits(name):
    if gg.isa(True) == "scalar":
        pytest.skip("no AVX2 on this CPU")
    rng = np.random.default_rng(42)
    K, M, N = row_len(name, 9), 29, 11
    ctx = gg.Context(mem_size=64 << 20)
    w, _ = new(ctx, TYPES[name], [K, M], rng=rng)
    x, _ = new(ctx, gg.F32, [K, N], rng=rng, lo=-3.0, hi=3.0)
    handle = gg.repack_weights(w)  # noqa: F841 (kept alive for the computes)
    out = gg.mul_mat(ctx, w, x)
    got = {}
    for level in ("avx2", "scalar"):
        prev = gg.set_isa(level)
        try:
            compute(ctx, out, n_threads=2)
        finally:
            gg.set_isa(prev)
        got[level] = values(out).copy()
    assert np.array_equal(got["avx2"], got["scalar"]), name


@pytest.mark.parametrize("name", list(TYPES))
def test_dropping_the_handle_returns_to_the_plain_path(name):
    rng = np.random.default_rng(43)
    K, M, N = row_len(name, 5), 19, 6
    ctx = gg.Context(mem_size=64 << 20)
    w, wv = new(ctx, TYPES[name], [K, M], rng=rng)
    x, xv = new(ctx, gg.F32, [K, N], rng=rng)
    out = gg.mul_mat(ctx, w, x)
    compute(ctx, out)
    plain = values(out).copy()
    handle = gg.repack_weights(w)
    compute(ctx, out)
    repacked = values(out).copy()
    assert_close(repacked.reshape(N, M), ref_product(wv, xv, M, K), PEER, what=name)
    assert_close(repacked, plain, PEER, what=name)
    del handle
    gc.collect()
    assert not gg.has_repack(w)
    compute(ctx, out)
    assert np.array_equal(values(out), plain), f"{name}: the plain path's bits after the handle is gone"


def test_a_second_copy_replaces_the_first_and_either_drop_order_is_safe():
    """The tensor refers to its newest copy only: dropping the older handle changes nothing,
    dropping the newer one returns to the plain path even while the older one lives."""
    rng = np.random.default_rng(48)
    ctx = gg.Context(mem_size=16 << 20)
    w, _ = new(ctx, gg.Q5_0, [32 * 6, 12], rng=rng)
    x, _ = new(ctx, gg.F32, [32 * 6, 3], rng=rng)
    out = gg.mul_mat(ctx, w, x)
    compute(ctx, out)
    plain = values(out).copy()
    first = gg.repack_weights(w)
    compute(ctx, out)
    repacked = values(out).copy()
    second = gg.repack_weights(w)
    del first
    gc.collect()
    assert gg.has_repack(w)
    compute(ctx, out)
    assert np.array_equal(values(out), repacked)
    third = gg.repack_weights(w)  # noqa: F841 (an older copy kept alive below)
    older = second
    del second
    del third
    gc.collect()
    assert not gg.has_repack(w) and older.nbytes > 0
    compute(ctx, out)
    assert np.array_equal(values(out), plain)


@pytest.mark.parametrize("name", list(TYPES))
def test_broadcast_and_permuted_batches(name):
    """3-D weights broadcast over b's batches (2 -> 4 and 1 -> 2), b a permuted view: each
    (column, batch) equals that column times its weight matrix alone (repacked as a 2-D
    tensor of the same bytes)."""
    rng = np.random.default_rng(44)
    K, M, N = row_len(name, 3), 13, 37
    ctx = gg.Context(mem_size=128 << 20)
    w, wv = new(ctx, TYPES[name], [K, M, 2, 1], rng=rng)
    raw = np.array(w.numpy()).reshape(2, -1)  # bytes of each matrix
    mats = []
    for i in range(2):
        t = ctx.new_tensor(TYPES[name], [K, M])
        np.asarray(t.numpy()).reshape(-1)[:] = raw[i]
        mats.append(t)
    handles = [gg.repack_weights(t) for t in [w] + mats]  # noqa: F841
    braw, bvals = new(ctx, gg.F32, [K, 4, N, 2], rng=rng)
    b = gg.permute(ctx, braw, 0, 2, 1, 3)  # [K, N, 4, 2]
    wide = gg.mul_mat(ctx, w, b)
    picks = [(n, i2, i3) for n in (0, 1, 8, 17, 36) for i2 in range(4) for i3 in range(2)]
    singles, firsts = [], []
    width = ktile_from(name) or 1  # the K-quant tiles: the column within another window that wide
    for n, i2, i3 in picks:
        n0 = n if width == 1 else max(0, min(n - 1, N - width))
        firsts.append(n0)
        col = gg.view_2d(ctx, braw, K, width, braw.nb[2], n0 * braw.nb[2] + i2 * braw.nb[1] + i3 * braw.nb[3])
        singles.append(gg.mul_mat(ctx, mats[i2 // 2], col))
    compute(ctx, wide, *singles, n_threads=2)
    got = values(wide)
    for (n, i2, i3), n0, s in zip(picks, firsts, singles):
        assert np.array_equal(got[i3, i2, n], values(s).reshape(-1, M)[n - n0]), f"{name} column {n} batch ({i2}, {i3})"
    bv = np.transpose(bvals, (0, 2, 1, 3)).astype(np.float64)
    a = np.repeat(wv.astype(np.float64), 2, axis=1)
    assert_close(got, np.einsum("xymk,xynk->xynm", np.repeat(a, 2, axis=0), bv), PEER, what=name)


@pytest.mark.parametrize("name", list(TYPES))
def test_f16_activations_and_three_threads(name):
    rng = np.random.default_rng(45)
    K, M, N = row_len(name, 2), 7, 19
    ctx = gg.Context(mem_size=64 << 20)
    w, wv = new(ctx, TYPES[name], [K, M], rng=rng)
    x, xv = new(ctx, gg.F16, [K, N], rng=rng)
    handle = gg.repack_weights(w)  # noqa: F841
    wide = gg.mul_mat(ctx, w, x)
    singles = [gg.mul_mat(ctx, w, gg.view_2d(ctx, x, K, 1, x.nb[1], j * x.nb[1])) for j in range(N)]
    compute(ctx, wide, *singles, n_threads=3)
    one = np.concatenate([values(s) for s in singles], axis=-2)
    assert np.array_equal(values(wide), one), name
    assert_close(values(wide).reshape(N, M), ref_product(wv, xv, M, K), PEER, what=name)


def test_edge_values_and_large_magnitudes():
    """q8_0 weights at -128 and 127 against activations at the quantizer's extremes (the
    16-bit pair sums at their largest), and zero columns."""
    K, M, N = 32 * 4, 9, 5
    ctx = gg.Context(mem_size=16 << 20)
    w = ctx.new_tensor(gg.Q8_0, [K, M])
    blocks = np.asarray(w.numpy()).reshape(M, K // 32, 34)
    blocks[:, :, 0:2] = np.frombuffer(np.float16(0.5).tobytes(), np.uint8)
    q = np.where(np.arange(32) % 2 == 0, -128, 127).astype(np.int8).view(np.uint8)
    blocks[:, :, 2:] = q
    blocks[1, :, 2:] = np.int8(-128).view(np.uint8)
    xv = np.zeros((N, K), np.float32)
    xv[0] = np.where(np.arange(K) % 2 == 0, -7.0, 7.0)
    xv[1] = -7.0
    xv[3] = 1e-3 * np.arange(K)
    x = ctx.from_numpy(xv)
    out = gg.mul_mat(ctx, w, x)
    compute(ctx, out)
    plain = values(out).copy()
    handle = gg.repack_weights(w)  # noqa: F841
    compute(ctx, out)
    wd = w.to_f32().reshape(M, K).astype(np.float64)
    assert_close(values(out).reshape(N, M), xv.astype(np.float64) @ wd.T, PEER, what="edges")
    assert_close(values(out), plain, 1e-6, what="edges vs plain")
    assert np.all(values(out)[0, 0, 2] == 0.0)


# where each type's f16 scales sit in its block: (block bytes, offsets of d / dmin)
BLOCK_SCALES = {"q4_0": (18, (0,)), "q4_1": (20, (0, 2)), "q5_0": (22, (0,)), "q8_0": (34, (0,)),
                "q4_K": (144, (0, 2)), "q5_K": (176, (0, 2)), "q6_K": (210, (208,))}


@pytest.mark.parametrize("simd", SIMD_LEVELS, indirect=True)
@pytest.mark.parametrize("name", list(TYPES))
def test_random_block_bytes_and_extreme_activations(simd, name):
    """Every level, high bit, sub-block scale and min drawn from random bytes (all values of
    each field, q6_K's signed scales down to -128), f16 scales set sane; activations at the
    quantizer's extremes (+-7 alternating, all -7, tiny ramps, zero): against the float64
    product of the dequantized weights, and every width equal to the single columns."""
    rng = np.random.default_rng(47)
    K, M, N = row_len(name, 4), 11, 6
    size, offsets = BLOCK_SCALES[name]
    ctx = gg.Context(mem_size=32 << 20)
    w = ctx.new_tensor(TYPES[name], [K, M])
    blocks = np.asarray(w.numpy()).reshape(M, -1, size)
    blocks[:] = rng.integers(0, 256, blocks.shape, dtype=np.uint8)
    for off in offsets:
        scales = rng.uniform(0.01, 0.1, blocks.shape[:2]).astype(np.float16)
        blocks[:, :, off:off + 2] = scales[..., None].view(np.uint8)
    xv = np.zeros((N, K), np.float32)
    xv[0] = np.where(np.arange(K) % 2 == 0, -7.0, 7.0)
    xv[1] = -7.0
    xv[2] = 1e-3 * np.arange(K)
    xv[4] = rng.uniform(-3, 3, K)
    xv[5] = np.where(np.arange(K) % 3 == 0, 7.0, 0.0)
    x = ctx.from_numpy(xv)
    handle = gg.repack_weights(w)  # noqa: F841
    wide = gg.mul_mat(ctx, w, x)
    singles = [gg.mul_mat(ctx, w, gg.view_2d(ctx, x, K, 1, x.nb[1], j * x.nb[1])) for j in range(N)]
    compute(ctx, wide, *singles, n_threads=2)
    got = values(wide).reshape(N, M)
    assert np.array_equal(got, np.concatenate([values(s).reshape(1, M) for s in singles])), name
    wd = w.to_f32().reshape(M, K).astype(np.float64)
    assert_close(got, xv.astype(np.float64) @ wd.T, PEER, what=f"{name} {simd}")
    assert np.all(got[3] == 0.0)


def test_views_and_unsupported_tensors_take_the_plain_path():
    rng = np.random.default_rng(46)
    ctx = gg.Context(mem_size=16 << 20)
    f32, _ = new(ctx, gg.F32, [64, 4], rng=rng)
    with pytest.raises(NotImplementedError, match="repack_weights"):
        gg.repack_weights(f32)
    assert not gg.repack_supported(f32)
    w, _ = new(ctx, gg.Q4_0, [64, 16], rng=rng)
    x, _ = new(ctx, gg.F32, [64, 3], rng=rng)
    half = gg.view_2d(ctx, w, 64, 8, w.nb[1], 8 * w.nb[1])
    out_view = gg.mul_mat(ctx, half, x)
    compute(ctx, out_view)
    plain = values(out_view).copy()
    handle = gg.repack_weights(w)  # noqa: F841
    assert gg.has_repack(w) and not gg.has_repack(half)
    compute(ctx, out_view)
    assert np.array_equal(values(out_view), plain)
    with pytest.raises(TypeError):
        gg.repack_weights(np.zeros(4))
