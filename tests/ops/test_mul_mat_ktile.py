"""The avx512 level's K-quant tiles (csrc/cpu/quant_ktile.h): MUL_MAT with q2_K..q6_K weights
and at least gg.KTILE_MIN_COLUMNS columns sums each sub-block in integers, scales it once, and
runs the floats once per super-block.

* against llama.cpp's AVX-512 ggml (its tiled K-quant kernels, through bench/ggml_ref.py):
  the same bits, for odd row counts, several super-blocks, column counts across the tiles'
  8-column calls and 256-column units, broadcast batches, 1 and 2 threads, and with the
  weights repacked (Model.load's path, which the tiles take over from the threshold on);
* within the peer NMSE of the float64 product of the stored weights: every K-quant, odd sizes,
  non-contiguous b, broadcast batches, f16 b;
* the threshold: a product one column narrower keeps every column's one-column bits (the
  verify batches of speculative decoding), from the threshold on the columns take the tiles'
  bits (not the one-column ones) and are again the same whatever the width.
"""

import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, ggml_ref_avx512_vnni, new, values

TABLE = {row["name"]: row for row in gg.type_traits()}
KQUANTS = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K"]
REPACKABLE = ["q4_K", "q5_K", "q6_K"]
PEER = 5e-4

pytestmark = pytest.mark.usefixtures("avx512_level")  # tests/conftest.py


def test_the_table_lists_the_tiles():
    for name in KQUANTS:
        assert TABLE[name]["mul_mat_paths"]["ktile"] == ["avx512"], name
    assert all(not r["mul_mat_paths"].get("ktile") for n, r in TABLE.items() if n not in KQUANTS)
    assert gg.KTILE_MIN_COLUMNS >= 18  # above the widest verify batch of speculative decoding


def _product(name, K, M, N, rng, repack=False, a_batches=(1, 1), b_batches=(1, 1), n_threads=2):
    """(ours, raw weight bytes, b values, dequantized weights)."""
    ctx = gg.Context(mem_size=128 << 20)
    w, wv = new(ctx, TABLE[name]["type"], [K, M, *a_batches], rng=rng)
    b, bv = new(ctx, gg.F32, [K, N, *b_batches], rng=rng, lo=-2.0, hi=2.0)
    handle = gg.repack_weights(w) if repack else None
    out = gg.mul_mat(ctx, w, b)
    compute(ctx, out, n_threads=n_threads)
    del handle
    return values(out), np.array(w.numpy()).view(np.uint8).ravel(), bv, wv


# ---- llama.cpp's bits ----

@pytest.fixture(scope="module")
def ggml():
    return ggml_ref_avx512_vnni()


def _ggml_product(g, name, raw, bv, K, M, N, a_batches, b_batches, n_threads):
    rc = g.context(raw.size + bv.nbytes * 2 + (8 << 20))
    ra = rc.tensor(g.TYPE[name], [K, M, *a_batches], raw)
    rb = rc.tensor(g.TYPE["f32"], [K, N, *b_batches], bv.astype(np.float32))
    run = rc.graph(g.ggml_mul_mat(rc.ptr, ra, rb), n_threads)
    run()
    n = M * N * b_batches[0] * b_batches[1]
    return rc.read_f32(run.out, n).reshape(b_batches[1], b_batches[0], N, M)


CASES = [  # K, M, N, weight batches, b batches
    (512, 37, 32, (1, 1), (1, 1)),     # the threshold; rows: 2 panels + 5
    (768, 21, 45, (1, 1), (1, 1)),     # a last call of 5 columns
    (256, 16, 130, (1, 1), (1, 1)),    # one super-block, a partial last call
    (512, 19, 300, (1, 1), (1, 1)),    # two 256-column units
    (512, 13, 33, (2, 1), (4, 2)),     # broadcast batches
]


@pytest.mark.oracle
@pytest.mark.parametrize("name", KQUANTS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "K{}_M{}_N{}_a{}x{}_b{}x{}".format(*c[:3], *c[3], *c[4]))
def test_ggml_bits(ggml, name, case):
    K, M, N, ab, bb = case
    for n_threads in (1, 2):
        ours, raw, bv, _ = _product(name, K, M, N, np.random.default_rng(K + M + N), a_batches=ab,
                                    b_batches=bb, n_threads=n_threads)
        theirs = _ggml_product(ggml, name, raw, bv, K, M, N, ab, bb, n_threads)
        bad = np.argwhere(ours.view(np.uint32) != theirs.view(np.uint32))
        assert bad.size == 0, (f"{name} {case} threads={n_threads}: {len(bad)} of {ours.size} outputs differ "
                               f"from ggml's, first at {tuple(bad[0])}: {ours[tuple(bad[0])]!r} vs "
                               f"{theirs[tuple(bad[0])]!r}")


@pytest.mark.oracle
@pytest.mark.parametrize("name", REPACKABLE)
def test_ggml_bits_with_repacked_weights(ggml, name):
    """Model.load repacks q4_K / q5_K / q6_K: from the threshold on the tiles still run."""
    K, M, N = 512, 29, 64
    ours, raw, bv, _ = _product(name, K, M, N, np.random.default_rng(5), repack=True)
    theirs = _ggml_product(ggml, name, raw, bv, K, M, N, (1, 1), (1, 1), 2)
    assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32)), name


# ---- accuracy and layouts ----

@pytest.mark.parametrize("name", KQUANTS)
def test_close_to_the_float64_product(name):
    """Odd sizes; b a non-contiguous view (padded, offset rows) broadcast over batches; f16 b."""
    rng = np.random.default_rng(11)
    K, M, N = 768, 23, 41
    ctx = gg.Context(mem_size=128 << 20)
    w, wv = new(ctx, TABLE[name]["type"], [K, M, 2, 1], rng=rng)
    big = ctx.new_tensor(gg.F32, [K + 7, N, 4, 2])
    full = rng.uniform(-1, 1, size=(2, 4, N, K + 7)).astype(np.float32)
    big.set(full)
    b = gg.view_4d(ctx, big, K, N, 4, 2, big.nb[1], big.nb[2], big.nb[3], 3 * 4)
    assert not b.is_contiguous()
    out = gg.mul_mat(ctx, w, b)
    h, hv = new(ctx, gg.F16, [K, N], rng=rng)
    w2 = gg.view_2d(ctx, w, K, M, w.nb[1], 0)
    out16 = gg.mul_mat(ctx, w2, h)
    compute(ctx, out, out16, n_threads=2)
    assert_close(values(out), ref.mul_mat(wv, full[..., 3:3 + K]), PEER, what=f"{name} strided, broadcast")
    assert_close(values(out16), ref.mul_mat(wv[:, :1], hv), PEER, what=f"{name} f16 b")


@pytest.mark.parametrize("name", KQUANTS)
def test_threshold(name):
    """One column under the threshold: the one-column bits; from it on: the tiles' bits, the
    same for a column whatever the width (and not the one-column ones)."""
    rng = np.random.default_rng(12)
    T = gg.KTILE_MIN_COLUMNS
    K, M = 512, 21
    ctx = gg.Context(mem_size=128 << 20)
    w, wv = new(ctx, TABLE[name]["type"], [K, M], rng=rng)
    x, xv = new(ctx, gg.F32, [K, 2 * T + 3], rng=rng, lo=-2.0, hi=2.0)
    view = lambda n0, n: gg.view_2d(ctx, x, K, n, x.nb[1], n0 * x.nb[1])  # noqa: E731
    singles = [gg.mul_mat(ctx, w, view(j, 1)) for j in range(T)]
    under = gg.mul_mat(ctx, w, view(0, T - 1))
    at, wide = gg.mul_mat(ctx, w, view(0, T)), gg.mul_mat(ctx, w, view(0, 2 * T + 3))
    compute(ctx, under, at, wide, *singles, n_threads=2)
    one = np.concatenate([values(s) for s in singles], axis=-2)
    assert np.array_equal(values(under), one[..., :T - 1, :]), f"{name}: under the threshold"
    assert np.array_equal(values(at), values(wide)[..., :T, :]), f"{name}: at the threshold vs wider"
    assert not np.array_equal(values(at), one), f"{name}: the tiles did not run"
    assert_close(values(wide), ref.mul_mat(wv, xv), PEER, what=name)


@pytest.mark.parametrize("name", REPACKABLE)
def test_repacked_weights_give_the_plain_bits(name):
    K, M, N = 512, 27, 40
    plain, *_ = _product(name, K, M, N, np.random.default_rng(13))
    repacked, *_ = _product(name, K, M, N, np.random.default_rng(13), repack=True)
    assert np.array_equal(plain, repacked), name
