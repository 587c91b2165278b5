"""dup / dup_inplace / cpy / cast / cont / cont_Nd."""
import itertools

import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

TYPE_NAMES = {gg.F32: "f32", gg.F16: "f16", gg.BF16: "bf16", gg.I32: "i32", gg.I64: "i64",
              gg.Q8_0: "q8_0", gg.Q4_0: "q4_0", gg.NVFP4: "nvfp4"}


def ctx_(mb=64):
    return gg.Context(mem_size=mb << 20)


def raw(t):
    """Storage units of a tensor as an integer array (numpy order), bit exact."""
    v = np.array(t.numpy())
    if t.type == gg.F32:
        return v.view(np.uint32)
    if t.type == gg.F16:
        return v.view(np.uint16)
    return v


def np_permute(a, axes):
    """numpy values of gg.permute(a, *axes) given a's numpy values (ne reversed)."""
    g = np.asarray(a).transpose(3, 2, 1, 0)
    return np.transpose(g, np.argsort(axes)).transpose(3, 2, 1, 0)


def f32_tensor(ctx, arr):
    arr = np.asarray(arr, dtype=np.float32)
    t = ctx.new_tensor(gg.F32, [arr.size])
    t.set(arr)
    return t


def nvfp4_available():
    try:
        gg.quantize(gg.NVFP4, np.zeros(64, dtype=np.float32))
        return True
    except NotImplementedError:
        return False


# ---------------------------------------------------------------- scalar conversion edges

F16_EDGES = np.array([
    1 + 2**-11, 1 + 3 * 2**-11, 1 - 2**-12, 2048 + 1, 2048 + 3, 65504, 65519.996, 65520, -65520, 1e6,
    2**-24, 2**-25, 3 * 2**-25, 2**-26, 2**-14, 2**-14 - 2**-25, 1.5 * 2**-24, 1e-8, -1e-8, 0.0, -0.0,
    np.inf, -np.inf, np.nan, -np.nan, 3.14159, -2.71828, 1e-30, -1e-45,
], dtype=np.float32)


def test_cast_f32_to_f16_bit_exact_edges():
    ctx = ctx_()
    x = np.concatenate([F16_EDGES, np.array([0x7F800001, 0xFFC12345, 0x7FBFFFFF], dtype=np.uint32).view(np.float32)])
    a = f32_tensor(ctx, x)
    r = gg.cast(ctx, a, gg.F16)
    assert r.op == "CPY" and r.type == gg.F16 and r.ne == a.ne
    compute(ctx, r)
    np.testing.assert_array_equal(raw(r), ref.f16_bits(x))
    # the spot values of (independent of the reference helper)
    bits = raw(r)
    assert bits[0] == 0x3C00          # 1 + 2^-11 ties to even -> 1
    assert bits[1] == 0x3C02          # 1 + 3*2^-11 ties to even -> up
    assert bits[7] == 0x7C00 and bits[8] == 0xFC00  # >= 65520 -> inf
    assert bits[6] == 0x7BFF          # just below 65520 -> 65504
    assert bits[10] == 0x0001 and bits[11] == 0x0000  # subnormal min, tie to even -> 0
    assert bits[20] == 0x8000         # -0 keeps its sign
    assert bits[23] == 0x7E00 and bits[24] == 0xFE00  # NaN -> quiet NaN with sign


def test_cast_f32_to_f16_random_bits_vs_scalar_rule():
    rng = np.random.default_rng(1)
    u = rng.integers(0, 2**32, size=20011, dtype=np.uint64).astype(np.uint32)
    x = u.view(np.float32)
    ctx = ctx_()
    a = f32_tensor(ctx, x)
    r = gg.cast(ctx, a, gg.F16)
    compute(ctx, r)
    np.testing.assert_array_equal(raw(r), ref.f16_bits(x))
    # the hardware-assisted rows and the scalar tail agree on values near f16's range too
    y = (rng.standard_normal(4099) * 3e4).astype(np.float32)
    b = f32_tensor(ctx, y)
    s = gg.cast(ctx, b, gg.F16)
    compute(ctx, s)
    np.testing.assert_array_equal(raw(s), ref.f16_bits(y))


def test_cast_f32_to_bf16_bit_exact_edges():
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -0.0, np.inf, -np.inf,
                  3.4028235e38, -3.4028235e38, 1e-40, -1e-45, 65536.5], dtype=np.float32)
    nans = np.array([0x7F800001, 0x7FC00000, 0xFF800001, 0x7FFFFFFF, 0xFFBF0000], dtype=np.uint32).view(np.float32)
    rng = np.random.default_rng(2)
    rnd = rng.integers(0, 2**32, size=5003, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([x, nans, rnd])
    ctx = ctx_()
    a = f32_tensor(ctx, x)
    r = gg.cast(ctx, a, gg.BF16)
    compute(ctx, r)
    bits = raw(r)
    np.testing.assert_array_equal(bits, ref.bf16_bits(x))
    assert bits[1] == 0x3F80 and bits[2] == 0x3F82 and bits[3] == 0x3F81  # ties to even, above tie
    assert bits[4] == 0x8000 and bits[5] == 0x7F80 and bits[6] == 0xFF80
    assert bits[7] == 0x7F80  # FLT_MAX rounds to inf
    assert bits[12] == 0x7FC0  # signalling NaN 0x7F800001 -> quiet bit forced
    assert bits[14] == 0xFFC0


@pytest.mark.parametrize("mid", [gg.F16, gg.BF16])
def test_inf_nan_round_trip(mid):
    x = np.array([-np.inf, np.inf, np.nan, -np.nan, 1.0, -0.0], dtype=np.float32)
    ctx = ctx_()
    a = f32_tensor(ctx, x)
    b = gg.cast(ctx, gg.cast(ctx, a, mid), gg.F32)
    compute(ctx, b)
    v = values(b).ravel()
    assert v[0] == -np.inf and v[1] == np.inf and np.isnan(v[2]) and np.isnan(v[3])
    assert np.signbit(v[3]) and v[4] == 1.0 and np.signbit(v[5])


@pytest.mark.parametrize("st,dt", [(gg.F16, gg.F32), (gg.BF16, gg.F32), (gg.F16, gg.BF16), (gg.BF16, gg.F16),
                                   (gg.F32, gg.F16), (gg.F32, gg.BF16)])
def test_cast_float_matrix(st, dt):
    ctx = ctx_()
    a, av = new(ctx, st, [37, 5, 3, 2], lo=-300, hi=300)
    r = gg.cast(ctx, a, dt)
    compute(ctx, r)
    expected = ref.convert_values(av.astype(np.float32), TYPE_NAMES[dt])
    np.testing.assert_array_equal(values(r).astype(np.float64), expected)


def test_cast_f32_to_i32_truncation_and_documented_saturation():
    x = np.array([2.5, -2.5, 2.9, -2.9, 0.5, -0.5, -0.0, 7.0, 1e9, -1e9, 16777217.0,
                  2147483520.0, -2147483648.0, 2147483648.0, 3e9, -3e9, np.inf, -np.inf, np.nan],
                 dtype=np.float32)
    ctx = ctx_()
    a = f32_tensor(ctx, x)
    r = gg.cast(ctx, a, gg.I32)
    compute(ctx, r)
    got = np.array(r.numpy())
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got[:12], [2, -2, 2, -2, 0, 0, 0, 7, 1000000000, -1000000000, 16777216, 2147483520])
    imax, imin = 2**31 - 1, -2**31
    np.testing.assert_array_equal(got[12:], [imin, imax, imax, imin, imax, imin, 0])
    np.testing.assert_array_equal(got, ref.f32_to_i32(x))


def test_cast_i32_to_f32_nearest():
    x = np.array([0, 1, -1, 2**24, 2**24 + 1, 2**24 + 3, 2**31 - 1, -2**31, 123456789, -987654321], dtype=np.int32)
    ctx = ctx_()
    a = ctx.new_tensor(gg.I32, [x.size])
    a.set(x)
    r = gg.cast(ctx, a, gg.F32)
    compute(ctx, r)
    np.testing.assert_array_equal(values(r).ravel(), x.astype(np.float32))  # numpy rounds to nearest even


def test_f32_i32_round_trip_permuted_and_transposed_destination():
    ctx = ctx_()
    rng = np.random.default_rng(3)
    x = rng.integers(-1000, 1000, size=(4, 3, 2, 256)).astype(np.float32)
    a, _ = new(ctx, gg.F32, [256, 2, 3, 4], data=x)
    ap = gg.permute(ctx, a, 0, 2, 1, 3)
    i = gg.cast(ctx, ap, gg.I32)
    # transposed i32 destination
    d = ctx.new_tensor(gg.I32, [3, 256, 2, 4])
    dt = gg.transpose(ctx, d)
    c = gg.cpy(ctx, i, dt)
    back = gg.cast(ctx, c, gg.F32)
    compute(ctx, back)
    expected = np_permute(x, (0, 2, 1, 3))
    np.testing.assert_array_equal(np.array(i.numpy()), expected.astype(np.int32))
    np.testing.assert_array_equal(values(back), expected)


# ---------------------------------------------------------------- quantization

def _quant_cases():
    rng = np.random.default_rng(4)
    blocks = [rng.uniform(-150, 150, 32), np.zeros(32), np.r_[1000.0, rng.uniform(-1, 1, 31)],
              np.r_[rng.uniform(-1, 1, 31), -1000.0], np.full(32, -3.0), rng.standard_normal(32) * 1e-3,
              np.linspace(-1, 1, 32)]
    return np.concatenate(blocks).astype(np.float32)


@pytest.mark.parametrize("qt", [gg.Q8_0, gg.Q4_0])
@pytest.mark.parametrize("st", [gg.F32, gg.F16, gg.BF16])
def test_quantize_matches_reference_algorithm(qt, st):
    x = _quant_cases()
    ctx = ctx_()
    for nblk in (1, 2, 3, 7):  # ne0 = 1, 2, 3 blocks (odd counts) and whole data
        a, av = new(ctx, st, [32 * nblk, len(x) // (32 * nblk)] if nblk != 3 else [96, 2],
                    data=np.resize(x, (len(x) // (32 * nblk), 32 * nblk) if nblk != 3 else (2, 96)))
        r = gg.cast(ctx, a, qt)
        compute(ctx, r)
        name = TYPE_NAMES[qt]
        expected = ref.QUANTIZERS[name](av.astype(np.float32).ravel())  # q8_0: CPU form id=127/amax
        np.testing.assert_array_equal(np.array(r.numpy()).ravel(), expected)


def test_q8_0_cpu_form_differs_from_reference_only_on_ties():
    # both forms agree on ordinary data; the CPU form is what cast uses
    rng = np.random.default_rng(5)
    x = rng.uniform(-150, 150, 32 * 64).astype(np.float32)
    cpu = ref.quantize_q8_0_np(x, cpu_form=True)
    refq = ref.quantize_q8_0_np(x, cpu_form=False)
    assert np.mean(cpu != refq) < 1e-3
    np.testing.assert_array_equal(gg.quantize(gg.Q8_0, x, reference=False), cpu)


def test_q8_0_rows_bit_exact_on_ties_and_random():
    """The row quantizer behind cast/set_rows (SIMD where available) equals the scalar CPU
    form on exact .5 ties (half away from zero), tiny and huge scales, and random data."""
    rng = np.random.default_rng(11)
    ties = np.concatenate([np.r_[127.0, np.arange(-15.5, 15.5, 1.0)[:31]], np.r_[-127.0, -np.arange(0.5, 31.5, 1.0)]])
    x = np.concatenate([ties, rng.uniform(-1e-30, 1e-30, 32), rng.uniform(-3e38, 3e38, 32),
                        rng.standard_normal(32 * 300) * 10]).astype(np.float32)
    ctx = ctx_()
    a = f32_tensor(ctx, x)
    r = gg.cast(ctx, a, gg.Q8_0)
    compute(ctx, r)
    got = np.array(r.numpy()).ravel()
    np.testing.assert_array_equal(got, ref.quantize_q8_0_np(x))
    np.testing.assert_array_equal(got, gg.quantize(gg.Q8_0, x, reference=False))
    q = got[:68].reshape(2, 34)[:, 2:].view(np.int8)
    assert q[0, 1] == -16 and q[0, 16] == -1 and q[0, 17] == 1 and q[1, 1] == -1  # ties away from 0


@pytest.mark.parametrize("qt", [gg.Q8_0, gg.Q4_0])
def test_quantize_permuted_source_and_tolerance(qt):
    ctx = ctx_()
    a, av = new(ctx, gg.F32, [256, 4, 4, 4], lo=-150, hi=150)
    ap = gg.permute(ctx, a, 0, 2, 1, 3)
    r = gg.cast(ctx, ap, qt)
    compute(ctx, r)
    pv = np_permute(av, (0, 2, 1, 3)).astype(np.float32)
    expected = ref.QUANTIZERS[TYPE_NAMES[qt]](pv.ravel())
    np.testing.assert_array_equal(np.array(r.numpy()).ravel(), expected)
    # peer-suite bound: one quantization step
    f = 1.0 if qt == gg.Q4_0 else 1 / 8
    bound = ((150 / 8) * f) ** 2 / (0.25 * 150**2 * pv.size) * pv.size  # per element average
    assert_close(values(r), pv, max_nmse=((150 / 8) * f) ** 2 / (0.25 * 150**2))
    assert bound > 0


@pytest.mark.parametrize("qt", [gg.Q8_0, gg.Q4_0])
def test_dequantize_to_f32_and_transposed_destination(qt):
    ctx = ctx_()
    q, qv = new(ctx, qt, [64, 3, 2, 1], lo=-5, hi=5)
    r = gg.cast(ctx, q, gg.F32)
    d = ctx.new_tensor(gg.F32, [3, 64, 2, 1])
    c = gg.cpy(ctx, q, gg.transpose(ctx, d))  # same shape as q, transposed storage
    compute(ctx, r, c)
    expected = ref.DEQUANTIZERS[TYPE_NAMES[qt]](np.array(q.numpy()).ravel()).reshape(qv.shape)
    np.testing.assert_array_equal(values(r), expected)
    np.testing.assert_array_equal(values(c), expected)
    np.testing.assert_array_equal(values(d), expected.transpose(0, 1, 3, 2))


def test_quantize_reshaped_destination_logical_order():
    ctx = ctx_()
    a, av = new(ctx, gg.F32, [32, 3, 2, 1], lo=-2, hi=2)
    at = gg.transpose(ctx, gg.cont(ctx, gg.transpose(ctx, a)))  # same values, non-contiguous storage
    b = ctx.new_tensor(gg.Q8_0, [64, 3])
    c = gg.cpy(ctx, at, b)
    compute(ctx, c)
    np.testing.assert_array_equal(np.array(b.numpy()).ravel(), ref.quantize_q8_0_np(av.astype(np.float32).ravel()))


@pytest.mark.skipif(not nvfp4_available(), reason="NVFP4 (quant_nvfp4.cpp) not implemented yet")
def test_nvfp4_quantize_dequantize():
    rng = np.random.default_rng(6)
    sub = [rng.uniform(-1, 1, 16), np.zeros(16), rng.uniform(-1e-4, 1e-4, 16),  # UE4M3 subnormal
           rng.uniform(-5000, 5000, 16),  # saturates at 448
           rng.uniform(-6, 6, 16), np.r_[1.0, np.zeros(15)], rng.uniform(0, 100, 16), -np.ones(16)]
    x = np.concatenate(sub).astype(np.float32)  # 2 blocks of 64
    ctx = ctx_()
    for st in (gg.F32, gg.F16):
        a, av = new(ctx, st, [128, 1], data=x)
        r = gg.cast(ctx, a, gg.NVFP4)
        back = gg.cast(ctx, r, gg.F32)
        compute(ctx, back)
        expected = ref.quantize_nvfp4_np(av.astype(np.float32).ravel())
        np.testing.assert_array_equal(np.array(r.numpy()).ravel(), expected)
        np.testing.assert_array_equal(values(back).ravel(), ref.dequantize_nvfp4_np(expected))


def test_nvfp4_cast_raises_not_implemented_or_works():
    ctx = ctx_()
    a, _ = new(ctx, gg.F32, [64, 2])
    r = gg.cast(ctx, a, gg.NVFP4)
    assert r.type == gg.NVFP4
    if nvfp4_available():
        compute(ctx, r)
    else:
        with pytest.raises(NotImplementedError):
            compute(ctx, r)


# ---------------------------------------------------------------- same-type (bit exact) copies

@pytest.mark.parametrize("t", [gg.F32, gg.F16, gg.BF16, gg.I32, gg.Q8_0, gg.Q4_0])
@pytest.mark.parametrize("k", [1, 3])
def test_same_type_copy_bit_exact(t, k):
    ctx = ctx_()
    bs = gg.blck_size(t)
    ne = [k * max(bs, 8), 2, 3, 4]
    if t in (gg.I32,):
        a, _ = new(ctx, t, ne, data=np.random.default_rng(7).integers(-2**31, 2**31 - 1, size=tuple(reversed(ne))))
    elif gg.is_quantized(t):
        a, _ = new(ctx, t, ne, lo=-3, hi=3)
    else:
        a = ctx.new_tensor(t, ne)
        nb = gg.type_size(t)
        bits = np.random.default_rng(8).integers(0, 2**(8 * nb), size=int(np.prod(ne)), dtype=np.uint64)
        a.numpy().view(np.uint32 if nb == 4 else np.uint16)[...] = bits.astype(np.uint32 if nb == 4 else np.uint16).reshape(tuple(reversed(ne)))
    src = raw(a).copy()
    # plain dup, dup of a permuted source, cpy permuted -> permuted destination
    d = gg.dup(ctx, a)
    ap = gg.permute(ctx, a, 0, 2, 1, 3)
    dp = gg.dup(ctx, ap)
    a3 = gg.permute(ctx, a, 0, 3, 1, 2)
    dst = ctx.new_tensor(t, [ne[0], ne[3], ne[2], ne[1]])  # permute(0,2,1,3) of it has a3's shape
    dv = gg.permute(ctx, dst, 0, 2, 1, 3)
    assert dv.ne == a3.ne
    c = gg.cpy(ctx, a3, dv)
    compute(ctx, d, dp, c)
    # raw() of a block type is (ne3, ne2, ne1, row bytes): permuting dims 1..3 moves whole rows
    np.testing.assert_array_equal(raw(d), src)
    np.testing.assert_array_equal(raw(dp), np_permute(src, (0, 2, 1, 3)))
    np.testing.assert_array_equal(raw(c), np_permute(src, (0, 3, 1, 2)))
    np.testing.assert_array_equal(raw(dst), np_permute(np_permute(src, (0, 3, 1, 2)), (0, 2, 1, 3)))


def test_dup_inplace_and_dup_keep_nan_payloads():
    ctx = ctx_()
    x = np.array([0x7F800001, 0xFFC12345, 0x7FBFFFFF, 0x3F800000], dtype=np.uint32)
    a = ctx.new_tensor(gg.F32, [4])
    a.numpy().view(np.uint32)[...] = x
    d = gg.dup(ctx, a)
    di = gg.dup_inplace(ctx, a)
    assert di.view_src is not None and d.op == "DUP" and di.op == "DUP"
    compute(ctx, d, di)
    np.testing.assert_array_equal(raw(d), x)
    np.testing.assert_array_equal(raw(a), x)


# ---------------------------------------------------------------- logical order / layouts

@pytest.mark.parametrize("t", [gg.F32, gg.F16])
def test_reshape_through_copy_every_permutation(t):
    ctx = ctx_(128)
    rng = np.random.default_rng(9)
    for dims in itertools.permutations([3, 5, 7, 32]):
        for target in ([3, 5, 7, 32], [32, 7, 5, 3]):
            a, av = new(ctx, t, list(dims), rng=rng)
            b = ctx.new_tensor(t, target)
            c = gg.cpy(ctx, a, b)
            # the same elements read through a permuted (non-contiguous) view
            base, bv = new(ctx, t, [dims[1], dims[0], dims[2], dims[3]], rng=rng)
            pv = gg.permute(ctx, base, 1, 0, 2, 3)
            assert pv.ne == list(dims)
            b2 = ctx.new_tensor(t, target)
            c2 = gg.cpy(ctx, pv, b2)
            compute(ctx, c, c2)
            shape = tuple(reversed(target))
            np.testing.assert_array_equal(values(c), ref.logical_copy(av, shape))
            np.testing.assert_array_equal(values(b2), ref.logical_copy(np_permute(bv, (1, 0, 2, 3)), shape))


def test_reshape_through_copy_q4_0_blocks():
    ctx = ctx_()
    for dims in itertools.permutations([3, 5, 7]):
        a, av = new(ctx, gg.Q4_0, [32] + list(dims))
        b = ctx.new_tensor(gg.Q4_0, [32, 7, 5, 3])
        c = gg.cpy(ctx, a, b)
        compute(ctx, c)
        np.testing.assert_array_equal(np.array(b.numpy()).ravel(), np.array(a.numpy()).ravel())


@pytest.mark.parametrize("st,dt", [(gg.F32, gg.F16), (gg.F16, gg.F32), (gg.F32, gg.F32), (gg.F16, gg.F16),
                                   (gg.BF16, gg.F32), (gg.F32, gg.BF16)])
def test_transposed_and_strided_destination(st, dt):
    ctx = ctx_()
    a, av = new(ctx, st, [13, 11, 3, 2], lo=-4, hi=4)
    d = ctx.new_tensor(dt, [11, 13, 3, 2])
    c = gg.cpy(ctx, a, gg.transpose(ctx, d))
    # a strided view destination: padded rows of a bigger tensor, padding must stay untouched
    big = ctx.new_tensor(dt, [20, 11, 3, 2])
    big.set(np.full((2, 3, 11, 20), 7.0, dtype=np.float32))
    es = gg.type_size(dt)
    v = gg.view_4d(ctx, big, 13, 11, 3, 2, big.nb[1], big.nb[2], big.nb[3], 3 * es)
    c2 = gg.cpy(ctx, a, v)
    compute(ctx, c, c2, n_threads=2)
    expected = ref.convert_values(av.astype(np.float32), TYPE_NAMES[dt])
    np.testing.assert_array_equal(values(c), expected)
    np.testing.assert_array_equal(values(d), expected.transpose(0, 1, 3, 2))
    bigv = values(big)
    np.testing.assert_array_equal(bigv[..., 3:16], expected)
    assert np.all(bigv[..., :3] == 7.0) and np.all(bigv[..., 16:] == 7.0)


@pytest.mark.parametrize("t", [gg.F32, gg.I32, gg.F16, gg.BF16])
@pytest.mark.parametrize("ne", [[2, 1, 1, 1], [2, 1, 3, 5], [2, 3, 5, 7], [1, 4, 4, 1], [1, 8, 17, 1], [10, 10, 10, 1]])
def test_cont_transposed_and_row_slices(t, ne):
    ctx = ctx_()
    if t == gg.I32:
        a, av = new(ctx, t, ne, data=np.arange(int(np.prod(ne))).reshape(tuple(reversed(ne))))
    else:
        a, av = new(ctx, t, ne)
    at = gg.transpose(ctx, a)
    c = gg.cont(ctx, at)
    # single-row offset view slice
    row = gg.view_4d(ctx, a, ne[0], 1, ne[2], ne[3], a.nb[1], a.nb[2], a.nb[3], a.nb[1] * (ne[1] - 1))
    c2 = gg.cont(ctx, row)
    assert c.op == "CONT" and c.ne == at.ne and c.type == t
    compute(ctx, c, c2)
    np.testing.assert_array_equal(values(c), np.asarray(av).transpose(0, 1, 3, 2))
    np.testing.assert_array_equal(values(c2), np.asarray(av)[:, :, ne[1] - 1:ne[1], :])


@pytest.mark.parametrize("axes", [(2, 1, 0, 3), (1, 2, 0, 3), (0, 2, 1, 3)])
@pytest.mark.parametrize("t", [gg.F32, gg.F16])
def test_cont_permutations(axes, t):
    ctx = ctx_()
    a, av = new(ctx, t, [33, 17, 9, 1])
    p = gg.permute(ctx, a, *axes)
    c = gg.cont(ctx, p)
    compute(ctx, c)
    np.testing.assert_array_equal(values(c), np_permute(av, axes))


def test_cont_nd_shapes_and_logical_order():
    ctx = ctx_()
    a, av = new(ctx, gg.F32, [6, 5, 4, 3])
    at = gg.permute(ctx, a, 1, 2, 0, 3)
    vals = np_permute(av, (1, 2, 0, 3))
    outs = [gg.cont_1d(ctx, at, 360), gg.cont_2d(ctx, at, 20, 18), gg.cont_3d(ctx, at, 10, 4, 9),
            gg.cont_4d(ctx, at, 2, 3, 4, 15), gg.cont(ctx, at)]
    compute(ctx, *outs)
    for o in outs:
        assert o.is_contiguous() and o.op == "CONT"
        np.testing.assert_array_equal(values(o).ravel(), vals.ravel())
    assert outs[1].ne == [20, 18, 1, 1] and outs[3].ne == [2, 3, 4, 15]


def test_cont_of_quantized_reshape():
    ctx = ctx_()
    a, _ = new(ctx, gg.Q8_0, [64, 6])
    c = gg.cont_2d(ctx, a, 32, 12)
    compute(ctx, c)
    np.testing.assert_array_equal(np.array(c.numpy()).ravel(), np.array(a.numpy()).ravel())


def test_long_transposed_copy_and_threads():
    ctx = ctx_(32)
    a, av = new(ctx, gg.F32, [2, 200003])
    c1 = gg.cont(ctx, gg.transpose(ctx, a))
    c2 = gg.cast(ctx, gg.transpose(ctx, a), gg.F16)
    compute(ctx, c1, c2, n_threads=1)
    v1, v2 = values(c1).copy(), raw(c2).copy()
    compute(ctx, c1, c2, n_threads=2)
    np.testing.assert_array_equal(values(c1), v1)
    np.testing.assert_array_equal(raw(c2), v2)
    np.testing.assert_array_equal(v1, av.T.reshape(v1.shape))
    np.testing.assert_array_equal(v2, ref.f16_bits(av.T.astype(np.float32)).reshape(v2.shape))


def test_empty_copy_is_noop():
    ctx = ctx_()
    a = ctx.new_tensor(gg.F32, [0, 4])
    b = ctx.new_tensor(gg.F16, [4, 0])
    c = gg.cpy(ctx, a, b)
    d = gg.cast(ctx, a, gg.BF16)
    compute(ctx, c, d)
    assert d.ne == [0, 4, 1, 1]


def test_cpy_result_is_view_of_b_and_cast_self_source():
    ctx = ctx_()
    a, av = new(ctx, gg.F32, [8, 2])
    b = ctx.new_tensor(gg.F16, [16])
    b.name = "dst"
    c = gg.cpy(ctx, a, b)
    assert c.op == "CPY" and c.view_src is not None and c.src[1].name == "dst" and c.ne == b.ne
    k = gg.cast(ctx, a, gg.BF16)
    assert k.op == "CPY" and k.src[0] is not None and k.view_src is None
    assert k.src[1] is k or (k.src[1].ne == k.ne and k.src[1].type == gg.BF16 and k.src[1].name == k.name)
    compute(ctx, c, k)
    np.testing.assert_array_equal(values(b).ravel(), ref.convert_values(av.ravel().astype(np.float32), "f16"))
    np.testing.assert_array_equal(values(k), ref.convert_values(av.astype(np.float32), "bf16"))


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("st,dt", [(gg.F16, gg.I32), (gg.I32, gg.F16), (gg.BF16, gg.I32), (gg.I32, gg.BF16),
                                   (gg.Q8_0, gg.F16), (gg.Q4_0, gg.BF16), (gg.Q8_0, gg.Q4_0), (gg.I32, gg.Q8_0),
                                   (gg.I64, gg.F32), (gg.F32, gg.I64), (gg.Q4_0, gg.I32)])
def test_rejected_pairs_raise_type_error(st, dt):
    ctx = ctx_()
    a = ctx.new_tensor(st, [64, 2])
    with pytest.raises(TypeError) as e:
        gg.cast(ctx, a, dt)
    msg = str(e.value)
    assert "cast" in msg and gg.type_name(st) in msg and gg.type_name(dt) in msg
    b = ctx.new_tensor(dt, [64, 2])
    with pytest.raises(TypeError) as e:
        gg.cpy(ctx, a, b)
    assert "cpy" in str(e.value) and gg.type_name(st) in str(e.value) and gg.type_name(dt) in str(e.value)
    # the context still works
    x, xv = new(ctx, gg.F32, [4])
    y = gg.cast(ctx, x, gg.F16)
    compute(ctx, y)
    np.testing.assert_array_equal(values(y), ref.convert_values(xv.astype(np.float32), "f16"))


def test_shape_errors():
    ctx = ctx_()
    a = ctx.new_tensor(gg.F32, [6, 4])
    with pytest.raises(ValueError, match="cpy"):
        gg.cpy(ctx, a, ctx.new_tensor(gg.F32, [5, 5]))
    with pytest.raises(ValueError, match="cont_2d"):
        gg.cont_2d(ctx, a, 5, 5)
    with pytest.raises(ValueError, match="cont_4d"):
        gg.cont_4d(ctx, a, 2, 2, 2, -3)
    with pytest.raises(ValueError, match="cast"):
        gg.cast(ctx, a, gg.Q8_0)  # ne0 = 6 is not a multiple of 32
    q = ctx.new_tensor(gg.Q8_0, [32, 4, 2])
    f = ctx.new_tensor(gg.F32, [32, 2, 4])
    with pytest.raises(ValueError, match="contiguous"):
        gg.cpy(ctx, f, gg.permute(ctx, q, 0, 2, 1, 3))  # quantized destination must be contiguous
    with pytest.raises(TypeError, match="dup"):
        gg.dup(ctx, None)
    with pytest.raises(TypeError, match="cast"):
        gg.cast(ctx, None, gg.F16)
    with pytest.raises(TypeError, match="cpy"):
        gg.cpy(ctx, a, None)
    with pytest.raises(TypeError):
        gg.cast(ctx, a, 99)
    # int type ids are accepted
    r = gg.cast(ctx, a, 1)
    assert r.type == gg.F16
    x, xv = new(ctx, gg.F32, [6, 4])
    y = gg.dup(ctx, x)
    compute(ctx, y)
    np.testing.assert_array_equal(values(y), xv)
