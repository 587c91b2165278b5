"""MUL_MAT for the block types whose kernels sum the even and the odd blocks of a row apart
(mxfp4, iq4_nl): with an odd number of blocks per row the last block joins the even sum, and
every kernel (one-row and two-row dots, the quantized GEMM tiles) must agree on that, so each
column of a wide product keeps the bits of the column multiplied alone, on odd row counts and
1 or 2 threads. Checked against the dequantized float64 product too."""
import numpy as np
import pytest

import pyggml as gg
from util import SIMD_LEVELS, assert_close, compute, new, values

TABLE = {row["name"]: row for row in gg.type_traits()}
TWO_PASS = ["mxfp4", "iq4_nl"]
WIDTHS = (1, 2, 3, 4, 5, 8, 9, 17, 64)
PEER = 5e-4


@pytest.mark.parametrize("simd", SIMD_LEVELS, indirect=True)
@pytest.mark.parametrize("name", TWO_PASS)
@pytest.mark.parametrize("blocks", [1, 3, 7, 40])
def test_odd_block_counts_keep_single_column_bits(simd, name, blocks):
    rng = np.random.default_rng(blocks)
    K, M = 32 * blocks, 9
    ctx = gg.Context(mem_size=64 << 20)
    w, wv = new(ctx, TABLE[name]["type"], [K, M], rng=rng)
    x, xv = new(ctx, gg.F32, [K, max(WIDTHS)], rng=rng, lo=-2.0, hi=2.0)
    nb1 = x.nb[1]
    singles = [gg.mul_mat(ctx, w, gg.view_2d(ctx, x, K, 1, nb1, j * nb1)) for j in range(max(WIDTHS))]
    wides = {N: gg.mul_mat(ctx, w, gg.view_2d(ctx, x, K, N, nb1, 0)) for N in WIDTHS}
    for n_threads in (1, 2):
        compute(ctx, *singles, *wides.values(), n_threads=n_threads)
        one = np.concatenate([values(o) for o in singles], axis=-2)
        for N, out in wides.items():
            bad = np.argwhere(values(out) != one[..., :N, :])
            assert bad.size == 0, f"{name} {simd} K={K} N={N} threads={n_threads}: {len(bad)} outputs differ"
        ref = np.einsum("mk,nk->nm", wv.reshape(M, K).astype(np.float64), xv.reshape(-1, K).astype(np.float64))
        assert_close(one.reshape(-1, M), ref, PEER, what=f"{name} {simd} K={K}")
