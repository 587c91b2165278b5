"""The avx512 float kernels tuned on Zen 4: the 32 x 12 GEMM tile of 16-row lane passes
(simd/float_gemm_avx512.cpp, simd/float_lanes_avx512.h) and the AVX512-BF16 pair form of bf16
weights (simd/float_bf16_avx512.cpp), against float64 numpy, on the tile's edges: M not a
multiple of 32 (rows past the panel), N not a multiple of 12 (columns past the panel), K not a
multiple of the 16- / 32-value chunk or of the 512-value block, non-contiguous and broadcast b,
f32 / f16 / bf16 activations, 1 / 2 / 3 threads, widths on both sides of the switch from the
direct tiles to the packed GEMM (64 columns). Bounds: the peer NMSE 5e-4 against the float64
product of the stored weights and b, and 1e-9 against the product with b rounded as ggml's CPU
rounds it (any error in packing, the tile's edges or the lanes' tree is far above that).

Each catches, for instance: a transpose that swaps two lanes or pairs in pack_a / pack_b
(every output off); a tail mask one value short (K = 33, 513, 1055); a store mask that
writes rows past mv or skips the second half of the panel (M = 17, 45); the last column panel
losing its columns past nv (N = 67, 130); the pair form computing from f32 columns as if they
were bf16 (bf16 b and f32 b disagree); the pair form not being selected at all (bits equal to
the f32 form's)."""
import numpy as np
import pytest

import pyggml as gg
from references.mul_mat import act_like_cpu, mul_mat
from util import assert_close, compute, new, values

PEER = 5e-4
WTYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16}
BTYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16}

needs_avx512 = pytest.mark.skipif(gg.isa(detected=True) != "avx512", reason="the CPU has no AVX-512")


@pytest.fixture(params=["pairs", "f32-form"])
def bf16_form(request):
    """The avx512 level with the AVX512-BF16 pair form of bf16 weights on (skipped where the CPU
    lacks it) or off; restores the level and the setting."""
    if gg.isa(detected=True) != "avx512":
        pytest.skip("the CPU has no AVX-512")
    on = request.param == "pairs"
    if on and not gg.avx512_bf16(detected=True):
        pytest.skip("the CPU has no AVX512-BF16")
    prev_isa, prev_bf16 = gg.set_isa("avx512"), gg.set_avx512_bf16(on)
    assert gg.avx512_bf16() == on
    yield request.param
    gg.set_isa(prev_isa)
    gg.set_avx512_bf16(prev_bf16)


def _check(ctx, a, av, b, bv, wtype, n_threads, what):
    out = gg.mul_mat(ctx, a, b)
    compute(ctx, out, n_threads=n_threads)
    got = values(out)
    assert_close(got, mul_mat(av, bv), PEER, what=f"{what} exact")
    assert_close(got, mul_mat(av, act_like_cpu(bv, wtype)), 1e-9, what=f"{what} cpu-emulation")
    return got


SHAPES = [(33, 17, 5), (513, 45, 13), (512, 32, 64), (1055, 33, 67), (96, 64, 130), (7, 50, 70)]


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("K,M,N", SHAPES)
@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_tile_edges(bf16_form, wtype, K, M, N, n_threads):
    if wtype != "bf16" and bf16_form == "f32-form":
        pytest.skip("the setting concerns bf16 weights only")
    rng = np.random.default_rng(K * 7 + M * 3 + N)
    ctx = gg.Context(mem_size=32 << 20)
    a, av = new(ctx, WTYPES[wtype], [K, M], rng=rng)
    b, bv = new(ctx, gg.F32, [K, N], rng=rng)
    _check(ctx, a, av, b, bv, wtype, n_threads, f"{bf16_form} {wtype} K={K} M={M} N={N} t={n_threads}")


@pytest.mark.parametrize("bt", list(BTYPES))
@pytest.mark.parametrize("N", [3, 70])
def test_bf16_activation_types(bf16_form, bt, N):
    """bf16 weights with f32, f16 and bf16 b: bf16 b is read in place by the pair form's direct
    tiles and widened for its GEMM; the others are rounded to bf16 first."""
    rng = np.random.default_rng(N)
    K, M = 545, 37
    ctx = gg.Context(mem_size=32 << 20)
    a, av = new(ctx, gg.BF16, [K, M], rng=rng)
    b, bv = new(ctx, BTYPES[bt], [K, N], rng=rng)
    _check(ctx, a, av, b, bv, "bf16", 2, f"{bf16_form} b={bt} N={N}")


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("N", [4, 80])
def test_noncontiguous_and_broadcast_b(bf16_form, wtype, N):
    """b's rows padded (a view) and a [K, M, 2, 1] broadcast over b [K, N, 4, 3]."""
    if wtype != "bf16" and bf16_form == "f32-form":
        pytest.skip("the setting concerns bf16 weights only")
    rng = np.random.default_rng(5 + N)
    K, M = 529, 35
    ctx = gg.Context(mem_size=64 << 20)
    a, av = new(ctx, WTYPES[wtype], [K, M, 2, 1], rng=rng)
    b0, b0v = new(ctx, gg.F32, [K + 5, N, 4, 3], rng=rng)
    b = gg.view_4d(ctx, b0, K, N, 4, 3, b0.nb[1], b0.nb[2], b0.nb[3], 0)
    _check(ctx, a, av, b, b0v[..., :K], wtype, 3, f"{bf16_form} {wtype} N={N} strided broadcast")


@needs_avx512
def test_pair_form_is_in_effect():
    """With AVX512-BF16 the pair form sums each pair before the lane's accumulator: some
    outputs differ in their last bits from the f32 form's (both within the bounds above)."""
    if not gg.avx512_bf16(detected=True):
        pytest.skip("the CPU has no AVX512-BF16")
    K, M = 1000, 40
    outs = {}
    prev_isa = gg.set_isa("avx512")
    try:
        for on in (True, False):
            prev = gg.set_avx512_bf16(on)
            ctx = gg.Context(mem_size=32 << 20)
            a, _ = new(ctx, gg.BF16, [K, M], rng=np.random.default_rng(3))
            b, _ = new(ctx, gg.F32, [K, 100], rng=np.random.default_rng(4))
            narrow = gg.mul_mat(ctx, a, gg.view_2d(ctx, b, K, 2, b.nb[1], 0))
            wide = gg.mul_mat(ctx, a, b)
            compute(ctx, narrow, wide)
            outs[on] = (values(narrow).ravel(), values(wide).ravel())
            gg.set_avx512_bf16(prev)
    finally:
        gg.set_isa(prev_isa)
    for i, path in enumerate(("direct", "packed")):
        assert not np.array_equal(outs[True][i].view(np.uint32), outs[False][i].view(np.uint32)), path


@pytest.mark.parametrize("n_threads", [1, 2])
def test_pair_form_rounds_raw_columns_like_the_direct_tiles(bf16_form, n_threads):
    """The pair form's GEMM packs f32 columns (K a multiple of 32) without rounding them first:
    its packing rounds to bf16 itself. Columns of halfway cases (low 16 bits 0x8000, both
    parities), values a unit above and below them and denormals must give each column the bits the direct tiles give it alone (they read the column rounded
    by the scalar conversion), and the product of b rounded to nearest even."""
    rng = np.random.default_rng(11)
    K, M, N = 1024, 40, 80
    ctx = gg.Context(mem_size=32 << 20)
    a, av = new(ctx, gg.BF16, [K, M], rng=rng)
    bits = rng.uniform(-2, 2, size=(N, K)).astype(np.float32).view(np.uint32)
    bits[:, 0::4] = (bits[:, 0::4] & 0xFFFF0000) | 0x8000          # ties (even and odd bf16 mantissas)
    bits[:, 1::4] = (bits[:, 1::4] & 0xFFFF0000) | 0x7FFF          # just below a tie
    bits[:, 2::8] = (bits[:, 2::8] & 0xFFFF0000) | 0x8001          # just above a tie
    bits[:, 6::16] = (bits[:, 6::16] & 0x80000000) | rng.integers(1, 0x800000, size=bits[:, 6::16].shape, dtype=np.uint32)
    bv = bits.view(np.float32)
    b = ctx.new_tensor(gg.F32, [K, N])
    b.set(bv)
    wide = gg.mul_mat(ctx, a, b)
    singles = [gg.mul_mat(ctx, a, gg.view_2d(ctx, b, K, 1, b.nb[1], j * b.nb[1])) for j in range(N)]
    compute(ctx, wide, *singles, n_threads=n_threads)
    w = values(wide).reshape(N, M)
    for j, s in enumerate(singles):
        got, want = w[j].view(np.uint32), values(s).reshape(M).view(np.uint32)
        assert np.array_equal(got, want), f"{bf16_form} column {j}: {np.flatnonzero(got != want).size} outputs differ"
    bv4 = bv.reshape(1, 1, N, K)
    assert_close(values(wide).reshape(1, 1, N, M), mul_mat(av, act_like_cpu(bv4, "bf16")), 1e-9, what="cpu-emulation")


@pytest.mark.parametrize("M", [16, 47, 48, 49, 63, 64])
@pytest.mark.parametrize("N", [76, 80])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_half_panels_match_single_columns(bf16_form, M, N, n_threads):
    """The GEMM tile runs its 32 rows as two 16-row halves (the second skipped where a panel's
    last rows are all past M) and a panel's last 4 or 8 columns in narrower tiles: M ends a
    panel at 15, 16, 17, 31 and 32 rows, N ends the last column panel at 4 and 8 columns, K
    crosses two 512-value blocks with a 16-value tail, and b's rows are padded (a view). Every
    column must have the bits the direct tiles give it alone, for each weight type."""
    K = 1040
    for wname, wtype in WTYPES.items():
        if wname != "bf16" and bf16_form == "f32-form":
            continue
        rng = np.random.default_rng(M * 131 + N)
        ctx = gg.Context(mem_size=64 << 20)
        a, av = new(ctx, wtype, [K, M], rng=rng)
        b0, b0v = new(ctx, gg.F32, [K + 3, N], rng=rng)
        nb1 = (K + 3) * 4
        wide = gg.mul_mat(ctx, a, gg.view_2d(ctx, b0, K, N, nb1, 0))
        singles = [gg.mul_mat(ctx, a, gg.view_2d(ctx, b0, K, 1, nb1, j * nb1)) for j in range(N)]
        compute(ctx, wide, *singles, n_threads=n_threads)
        w = values(wide).reshape(N, M).view(np.uint32)
        one = np.stack([values(s).reshape(M) for s in singles]).view(np.uint32)
        bad = np.argwhere(w != one)
        assert bad.size == 0, f"{bf16_form} {wname} M={M} N={N}: {len(bad)} outputs differ, first (column, row) {tuple(bad[0])}"
        bv = b0v[..., :K]
        assert_close(values(wide).reshape(1, 1, N, M), mul_mat(av, act_like_cpu(bv, wname)), 1e-9,
                     what=f"{bf16_form} {wname} M={M} N={N} cpu-emulation")


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("K,row_values", [(4000, 4000), (4096, 4096), (4097, 4097), (2048, 2048), (3001, 4096), (1999, 2050)])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_one_column_over_long_rows(bf16_form, wtype, K, row_values, n_threads):
    """One column over rows of 4 to 8 KiB is dotted one row at a time (f16 / bf16 weights up to
    8 KiB apart, f32 up to 4 KiB; simd/float_gemm_avx512.h), the wider columns by the packed
    GEMM, whose f16 weights are packed as f16 (simd/float_gemm_avx512.cpp): weights of
    row_values values a row, the first K used (a view where row_values > K), 37 rows (not a
    multiple of the 8-row tiles), b's rows padded. Each single column must have the bits of its
    column in the 70-column GEMM, and both the product of b rounded as ggml's CPU rounds it."""
    if wtype != "bf16" and bf16_form == "f32-form":
        pytest.skip("the setting concerns bf16 weights only")
    M, N = 37, 70
    rng = np.random.default_rng(K + row_values + M)
    ctx = gg.Context(mem_size=64 << 20)
    a0, a0v = new(ctx, WTYPES[wtype], [row_values, M], rng=rng)
    a = gg.view_2d(ctx, a0, K, M, a0.nb[1], 0) if row_values > K else a0
    b0, b0v = new(ctx, gg.F32, [K + 3, N], rng=rng)
    nb1 = (K + 3) * 4
    wide = gg.mul_mat(ctx, a, gg.view_2d(ctx, b0, K, N, nb1, 0))
    picks = [0, 1, 11, 12, 35, 69]
    singles = [gg.mul_mat(ctx, a, gg.view_2d(ctx, b0, K, 1, nb1, j * nb1)) for j in picks]
    compute(ctx, wide, *singles, n_threads=n_threads)
    w = values(wide).reshape(N, M)
    for j, s in zip(picks, singles):
        got, want = values(s).reshape(M).view(np.uint32), w[j].view(np.uint32)
        assert np.array_equal(got, want), f"{bf16_form} {wtype} K={K} column {j}: {np.flatnonzero(got != want).size} rows differ"
    av, bv = a0v[..., :K], b0v[..., :K]
    what = f"{bf16_form} {wtype} K={K} rows of {row_values}"
    assert_close(values(wide).reshape(1, 1, N, M), mul_mat(av, act_like_cpu(bv, wtype)), 1e-9, what=what)
    one = np.stack([values(s).reshape(M) for s in singles]).reshape(1, 1, len(picks), M)
    assert_close(one, mul_mat(av, act_like_cpu(bv[:, :, picks, :], wtype)), 1e-9, what=what + " single columns")


@pytest.mark.parametrize("K", [47, 48, 528, 1071])
@pytest.mark.parametrize("M", [37, 64])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_f16_packing_of_line_pairs(K, M, n_threads):
    """The avx512 set packs f16 weights 16 rows by two 16-value chunks (one 64-byte line of each
    row) at a time (simd/float_gemm_avx512.cpp pack_f16): K blocks of an odd number of chunks
    (48: 3, 528: 32 then 1), a last chunk cut short (47, 1071), rows past M in a panel (37), and
    the weights a view of rows 8 KiB apart (4096 values: the stride whose lines share L1 sets).
    Every column must have the bits the direct tiles give it alone and the product of b rounded to
    f16."""
    if gg.isa(detected=True) != "avx512":
        pytest.skip("the CPU has no AVX-512")
    prev = gg.set_isa("avx512")
    try:
        N, row_values = 70, 4096
        rng = np.random.default_rng(K * 5 + M)
        ctx = gg.Context(mem_size=64 << 20)
        a0, a0v = new(ctx, gg.F16, [row_values, M], rng=rng)
        a = gg.view_2d(ctx, a0, K, M, a0.nb[1], 0)
        b, bv = new(ctx, gg.F32, [K, N], rng=rng)
        wide = gg.mul_mat(ctx, a, b)
        picks = [0, 12, 35, 69]
        singles = [gg.mul_mat(ctx, a, gg.view_2d(ctx, b, K, 1, b.nb[1], j * b.nb[1])) for j in picks]
        compute(ctx, wide, *singles, n_threads=n_threads)
        w = values(wide).reshape(N, M)
        for j, s in zip(picks, singles):
            got, want = w[j].view(np.uint32), values(s).reshape(M).view(np.uint32)
            assert np.array_equal(got, want), f"K={K} M={M} column {j}: {np.flatnonzero(got != want).size} rows differ"
        assert_close(values(wide).reshape(1, 1, N, M), mul_mat(a0v[..., :K], act_like_cpu(bv, "f16")), 1e-9,
                     what=f"f16 K={K} M={M} rows of {row_values}")
    finally:
        gg.set_isa(prev)
