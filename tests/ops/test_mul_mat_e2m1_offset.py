"""One-column MUL_MAT of mxfp4, nvfp4 and iq4_nl through the offset-form kernels: the weights
are looked up as unsigned levels (value + 12 for the E2M1 types; iq4_nl at the avx512 level value
+ 128, exact under vpdpbusd) and each activation column carries, beside its q8_0 blocks, -offset x
the sum of every 4-value group, as the integer dot's starting value, and its widened scale
(mxfp4, iq4_nl: in aligned per-block records with the block's values; nvfp4: with its values in
the order a block's masked bytes give them). The avx2 level's iq4_nl kernel reads the values and
scale from there with the signed values. Those kernels serve a column multiplied alone with rows
longer than 1024 values, two rows per call (mxfp4, iq4_nl) and the odd row of a unit alone;
narrower products pair rows through the two-row offset dots where the level has them (dot2x,
test_mul_mat_dot2x.py) or the signed-value ones, wider ones take the GEMM tiles. All must
give the same bits, on random weight bytes, activation blocks at the int8 extremes (every value
+-127, alternating signs, an outlier, all zero), odd block counts, widths 1..64 and 1 or 2
threads, and match the float64 product of the dequantized weights."""
import numpy as np
import pytest

import pyggml as gg
from util import assert_close, compute, new, values

TABLE = {row["name"]: row for row in gg.type_traits()}
PEER = 5e-4
WIDTHS = tuple(range(1, 10)) + (16, 17, 33, 64)
BLOCK = {"mxfp4": (32, 17), "nvfp4": (64, 36), "iq4_nl": (32, 18)}  # values, bytes per block


def random_weights(name, K, M, rng, exps=None):
    """Raw blocks with every nibble random; finite scales (mxfp4 E8M0 bytes from `exps`,
    nvfp4 UE4M3 codes below 0x7F, iq4_nl f16 d of either sign)."""
    per, size = BLOCK[name]
    raw = rng.integers(0, 256, size=(M, K // per, size), dtype=np.uint8)
    if name == "iq4_nl":
        d = rng.uniform(1e-3, 0.1, size=raw.shape[:2]) * rng.choice([-1.0, 1.0], size=raw.shape[:2])
        raw[:, :, :2] = d.astype(np.float16)[..., None].view(np.uint8)
    elif name == "mxfp4":
        raw[:, :, 0] = rng.choice(np.asarray(exps if exps is not None else range(118, 137)), size=raw.shape[:2])
    else:
        raw[:, :, :4] = rng.integers(0x08, 0x70, size=raw.shape[:2] + (4,))
    return raw.ravel()


def test_the_type_table_names_the_row_pair_kernels():
    have = {n for n, r in TABLE.items() if r["mul_mat_paths"].get("dot1x2")}
    assert have == {"mxfp4", "iq4_nl"}
    for name in have:
        assert TABLE[name]["mul_mat_paths"]["dot1x2"] == TABLE[name]["mul_mat_paths"]["dot1x"], name


def extreme_activations(K, N, rng):
    """N columns of K values whose q8_0 blocks hit the int8 extremes."""
    x = rng.uniform(-2.0, 2.0, size=(N, K)).astype(np.float32)
    blocks = x.reshape(N, K // 32, 32)
    for n in range(N):
        kind = n % 5
        b = blocks[n]
        b[0::4] = 3.0                                        # every value +127
        b[1::4] = np.where(np.arange(32) % 2 == 0, 3.0, -3.0)  # +-127 alternating
        b[2::4] = 0.0                                        # d = 0
        if kind:
            b[3::4] = 1e-3
            b[3::4, (7 * n) % 32] = -5.0                     # one outlier: -127, the rest 0
        if kind == 2:
            b[:] = -b                                        # every value -127
    return x


def weight_tensor(ctx, name, K, M, rng, exps=None):
    w = ctx.new_tensor(TABLE[name]["type"], [K, M])
    w.set(random_weights(name, K, M, rng, exps))
    return w, values(w).astype(np.float64).reshape(M, K)


def single_and_wide(ctx, w, x, K, widths):
    nb1 = x.nb[1]
    singles = [gg.mul_mat(ctx, w, gg.view_2d(ctx, x, K, 1, nb1, j * nb1)) for j in range(max(widths))]
    wides = {N: gg.mul_mat(ctx, w, gg.view_2d(ctx, x, K, N, nb1, 0)) for N in widths}
    return singles, wides


@pytest.mark.parametrize("simd", ["native", "avx2"], indirect=True)
@pytest.mark.parametrize("name", ["mxfp4", "nvfp4", "iq4_nl"])
@pytest.mark.parametrize("blocks64", [17, 21, 32])  # 64-value units: mxfp4 / iq4_nl get 35, 43, 64 blocks
def test_single_columns_keep_the_wide_bits(simd, name, blocks64):
    rng = np.random.default_rng(blocks64)
    K, M = 64 * blocks64 + (32 if name != "nvfp4" and blocks64 != 32 else 0), 7  # odd 32-value counts
    ctx = gg.Context(mem_size=96 << 20)
    w, wv = weight_tensor(ctx, name, K, M, rng)
    xs = extreme_activations(K, max(WIDTHS), rng)
    x, xv = new(ctx, gg.F32, [K, max(WIDTHS)], data=xs)
    singles, wides = single_and_wide(ctx, w, x, K, WIDTHS)
    for n_threads in (1, 2):
        compute(ctx, *singles, *wides.values(), n_threads=n_threads)
        one = np.concatenate([values(o) for o in singles], axis=-2)
        assert np.isfinite(one).all()
        for N, out in wides.items():
            bad = np.argwhere(values(out) != one[..., :N, :])
            assert bad.size == 0, f"{name} {simd} K={K} N={N} threads={n_threads}: {len(bad)} outputs differ"
        ref = wv @ xv.reshape(-1, K).astype(np.float64).T
        assert_close(one.reshape(-1, M), ref.T, PEER, what=f"{name} {simd} K={K}")


def test_mxfp4_extreme_exponents_keep_the_wide_bits():
    """E8M0 bytes 0, 1 (subnormal scales), 2 and the largest finite products: the single
    column's scales come from the same table as the signed kernels'."""
    rng = np.random.default_rng(11)
    K, M = 32 * 35, 3
    ctx = gg.Context(mem_size=32 << 20)
    w, _ = weight_tensor(ctx, "mxfp4", K, M, rng, exps=[0, 1, 2, 3, 127, 128, 160])
    x, _ = new(ctx, gg.F32, [K, 5], data=extreme_activations(K, 5, rng))
    singles, wides = single_and_wide(ctx, w, x, K, (2, 5))
    compute(ctx, *singles, *wides.values(), n_threads=1)
    one = np.concatenate([values(o) for o in singles], axis=-2)
    for N, out in wides.items():
        np.testing.assert_array_equal(values(out), one[..., :N, :])


@pytest.mark.parametrize("simd", ["native", "avx2"], indirect=True)
@pytest.mark.parametrize("name", ["mxfp4", "iq4_nl"])
@pytest.mark.parametrize("M", [2, 9, 37, 130])
def test_row_pairs_keep_the_one_row_bits(simd, name, M):
    """One column against M rows: the two-row kernel pairs row i of a unit with the row half a
    unit later (an odd unit's last row goes alone); each output must equal that row multiplied
    alone (the one-row kernel) and the same column inside a product 5 wide (the signed kernels)."""
    rng = np.random.default_rng(M)
    K = 32 * 37
    ctx = gg.Context(mem_size=96 << 20)
    w, wv = weight_tensor(ctx, name, K, M, rng)
    x, xv = new(ctx, gg.F32, [K, 5], data=extreme_activations(K, 5, rng))
    col = gg.view_2d(ctx, x, K, 1, x.nb[1], 3 * x.nb[1])
    alone = [gg.mul_mat(ctx, gg.view_2d(ctx, w, K, 1, w.nb[1], m * w.nb[1]), col) for m in range(M)]
    paired, wide = gg.mul_mat(ctx, w, col), gg.mul_mat(ctx, w, x)
    for n_threads in (1, 2):
        compute(ctx, paired, wide, *alone, n_threads=n_threads)
        got = values(paired).reshape(M)
        rows = np.array([values(o).reshape(()) for o in alone])
        bad = np.flatnonzero(got.view(np.uint32) != rows.view(np.uint32))
        assert bad.size == 0, f"{name} {simd} M={M} threads={n_threads}: rows {bad.tolist()} differ from the row alone"
        np.testing.assert_array_equal(got, values(wide).reshape(5, M)[3])
    assert_close(got, wv @ xv.reshape(5, K)[3].astype(np.float64), PEER, what=f"{name} {simd} M={M}")
