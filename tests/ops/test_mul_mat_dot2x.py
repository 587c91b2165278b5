"""The two-row dots over converted columns with extras (dot2x: q8_0 and iq4_nl at the avx512
level, q4_0, q5_0 and mxfp4 at avx2 and avx512). They take the weights as unsigned levels (q8_0:
the byte xor 0x80, i.e. value + 128; q4_0 / q5_0: their own levels, offset 8 / 16; iq4_nl: value
+ 128; mxfp4: doubled E2M1 value + 12) and start each lane's integer dot from the column's
-offset x (sum of its 4-value group), so every lane ends at the signed values' integer and the
float operations are the one-row dot's (iq4_nl, mxfp4: even and odd blocks in two chains): the
same bits.

Independent checks of those bits, on weight bytes at the int8 extremes (q8_0 values -128 and
127 among random ones, f16 scales of either sign), activation blocks at the int8 extremes, odd
block counts, widths 1..9 and 1 or 2 threads:
  - an odd row count whose last row repeats row 0: a unit's odd last row takes the one-row dot
    kernel, the others the pairs, so output row M - 1 must equal row 0 bit for bit;
  - each column of a wide product equals that column multiplied alone;
  - q8_0: the avx512 level equals the avx2 level's sign-trick kernels bit for bit;
  - all of them within the peer NMSE of the float64 product of the stored weights."""
import numpy as np
import pytest

import pyggml as gg
from util import assert_close, compute, new, values

TABLE = {row["name"]: row for row in gg.type_traits()}
PEER = 5e-4
WIDTHS = tuple(range(1, 10))
BLOCK_BYTES = {"q8_0": 34, "q4_0": 18, "q5_0": 22, "iq4_nl": 18, "mxfp4": 17}
TYPES = list(BLOCK_BYTES)
AVX512_ONLY = {"q8_0", "iq4_nl"}  # levels above 128: maddubs would saturate, vpdpbusd only
needs_avx512 = pytest.mark.skipif(gg.isa(detected=True) != "avx512", reason="no AVX-512 on this CPU")


def test_the_type_table_names_the_kernels():
    have = {n: r["mul_mat_paths"].get("dot2x") for n, r in TABLE.items() if r["mul_mat_paths"].get("dot2x")}
    assert set(have) == set(TYPES), have
    for name in TYPES:
        assert have[name] == (["avx512"] if name in AVX512_ONLY else ["avx2", "avx512"]), (name, have[name])


def random_weights(name, K, M, rng):
    """M rows of raw blocks, every byte random but the scale (f16 of either sign, finite; mxfp4:
    E8M0 exponents around 1); q8_0 rows get -128 and 127 at random places too. The last row
    repeats row 0."""
    raw = rng.integers(0, 256, size=(M, K // 32, BLOCK_BYTES[name]), dtype=np.uint8)
    if name == "mxfp4":
        raw[:, :, 0] = rng.integers(118, 137, size=raw.shape[:2])
    else:
        d = rng.uniform(1e-3, 0.1, size=raw.shape[:2]) * rng.choice([-1.0, 1.0], size=raw.shape[:2])
        raw[:, :, :2] = d.astype(np.float16)[..., None].view(np.uint8)
    if name == "q8_0":
        qs = raw[:, :, 2:].view(np.int8)
        qs[rng.random(qs.shape) < 0.1] = -128
        qs[rng.random(qs.shape) < 0.1] = 127
    raw[-1] = raw[0]
    return raw.ravel()


def extreme_activations(K, N, rng):
    """N columns of K values whose q8_0 blocks hit the int8 extremes."""
    x = rng.uniform(-2.0, 2.0, size=(N, K)).astype(np.float32)
    blocks = x.reshape(N, K // 32, 32)
    for n in range(N):
        b = blocks[n]
        b[0::4] = 3.0                                          # every value +127
        b[1::4] = np.where(np.arange(32) % 2 == 0, 3.0, -3.0)  # +-127 alternating
        b[2::4] = 0.0                                          # d = 0
        b[3::4] = 1e-3
        b[3::4, (7 * n) % 32] = -5.0                           # one outlier: -127, the rest 0
        if n % 3 == 1:
            b[:] = -b                                          # every value -127 in the first kind
    return x


def products(name, K, M, rng):
    ctx = gg.Context(mem_size=96 << 20)
    w = ctx.new_tensor(TABLE[name]["type"], [K, M])
    w.set(random_weights(name, K, M, rng))
    wv = values(w).astype(np.float64).reshape(M, K)
    x, xv = new(ctx, gg.F32, [K, max(WIDTHS)], data=extreme_activations(K, max(WIDTHS), rng))
    nb1 = x.nb[1]
    singles = [gg.mul_mat(ctx, w, gg.view_2d(ctx, x, K, 1, nb1, j * nb1)) for j in range(max(WIDTHS))]
    wides = {N: gg.mul_mat(ctx, w, gg.view_2d(ctx, x, K, N, nb1, 0)) for N in WIDTHS}
    ref = xv.reshape(-1, K).astype(np.float64) @ wv.T
    return ctx, singles, wides, ref


def check_bits(name, level, K, M, singles, wides, ref, n_threads):
    one = np.concatenate([values(o).reshape(1, M) for o in singles])
    assert np.isfinite(one).all()
    what = f"{name} {level} K={K} threads={n_threads}"
    for N, out in wides.items():
        got = values(out).reshape(N, M)
        bad = np.argwhere(got.view(np.uint32) != one[:N].view(np.uint32))
        assert bad.size == 0, f"{what} N={N}: {len(bad)} outputs differ from the columns alone, first {tuple(bad[0])}"
        rows = got[:, [0, M - 1]].view(np.uint32)
        assert (rows[:, 0] == rows[:, 1]).all(), f"{what} N={N}: the pairs' row 0 and the one-row dot's copy of it differ"
    assert_close(one, ref, PEER, what=what)
    return one


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("blocks", [9, 33, 37])  # K 288, 1056, 1184 (odd counts: a lone last even block)
def test_pairs_keep_the_one_row_bits(name, blocks):
    rng = np.random.default_rng(blocks)
    K, M = 32 * blocks, 11
    ctx, singles, wides, ref = products(name, K, M, rng)
    got = {}
    for level in ("avx2", "avx512"):
        if level == "avx512" and gg.isa(detected=True) != "avx512":
            continue
        prev = gg.set_isa(level)
        try:
            for n_threads in (1, 2):
                compute(ctx, *singles, *wides.values(), n_threads=n_threads)
                got[level] = check_bits(name, level, K, M, singles, wides, ref, n_threads)
        finally:
            gg.set_isa(prev)
    if len(got) == 2 and name in AVX512_ONLY:  # the avx2 level: the sign-trick pairs
        assert np.array_equal(got["avx2"].view(np.uint32), got["avx512"].view(np.uint32)), f"{name} K={K}"


@needs_avx512
def test_mul_mat_id_experts_keep_the_one_row_bits():
    """MUL_MAT_ID takes the same kernels per expert: each token's row equals the token's
    product with its expert alone (a plain MUL_MAT of one column)."""
    rng = np.random.default_rng(5)
    K, M, E, T = 32 * 9, 11, 3, 7
    ctx = gg.Context(mem_size=64 << 20)
    w = ctx.new_tensor(gg.Q8_0, [K, M, E])
    w.set(np.concatenate([random_weights("q8_0", K, M, rng) for _ in range(E)]))
    x, _ = new(ctx, gg.F32, [K, 1, T], data=extreme_activations(K, T, rng))
    ids_np = np.array([[0], [2], [2], [1], [2], [0], [2]], dtype=np.int32)
    ids = ctx.new_tensor(gg.I32, [1, T]); ids.set(ids_np)
    out = gg.mul_mat_id(ctx, w, x, ids)
    alone = []
    for t in range(T):
        we = gg.view_2d(ctx, w, K, M, w.nb[1], int(ids_np[t, 0]) * w.nb[2])
        xt = gg.view_2d(ctx, x, K, 1, x.nb[1], t * x.nb[2])
        alone.append(gg.mul_mat(ctx, we, xt))
    for n_threads in (1, 2):
        compute(ctx, out, *alone, n_threads=n_threads)
        got = values(out).reshape(T, M)
        want = np.concatenate([values(a).reshape(1, M) for a in alone])
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), f"threads={n_threads}"
