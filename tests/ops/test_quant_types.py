"""The type table and every block type in it: dequantization against gguf.quants (bit exact),
quantization (cpy / set_rows / gg.quantize agree; gguf's quantizers where it has them), and
get_rows, cpy, set_rows, mul_mat (GEMV and GEMM, every kernel set), mul_mat_id and flash
attention K/V on each type against a dequantize-then-f32 numpy reference (NMSE 5e-4)."""
import numpy as np
import pytest

import pyggml as gg
from util import SIMD_LEVELS, assert_close, compute, new, values

try:
    import gguf
    import gguf.quants as gq
except ImportError:  # pragma: no cover - gguf is a test dependency
    gguf = None

PEER = 5e-4
TABLE = {row["name"]: row for row in gg.type_traits()}
BLOCK_TYPES = [n for n, r in TABLE.items() if r["is_quantized"]]
WEIGHT_TYPES = [n for n in BLOCK_TYPES if TABLE[n]["is_weight"]]
ACTIVATION_TYPES = {"q8_1", "q8_K"}  # vec_dot types only: no mul_mat weight kernel, as in ggml
# Byte offsets of each block's float16 scale fields (randomised as finite values below) and of
# mxfp4's E8M0 exponent; every other byte of a block is free.
F16_FIELDS = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0], "q8_1": [0, 2],
              "q2_K": [80, 82], "q3_K": [108], "q4_K": [0, 2], "q5_K": [0, 2], "q6_K": [208],
              "iq4_nl": [0], "mxfp4": [], "nvfp4": [], "q8_K": []}
# The types this file tests; a new row in the table fails test_table_rows_are_tested.
TESTED = set(F16_FIELDS)


def T(name):
    return TABLE[name]["type"]


def test_table_rows_are_tested():
    assert set(BLOCK_TYPES) == TESTED, f"untested block types: {set(BLOCK_TYPES) ^ TESTED}"


@pytest.mark.parametrize("name", BLOCK_TYPES)
def test_table_row_is_complete(name):
    r = TABLE[name]
    assert r["has_to_float"] and r["has_from_float"], f"{name}: missing dequantizer or quantizer"
    assert gg.type_name(r["type"]) == name and int(r["type"]) == r["id"]
    assert gg.blck_size(r["type"]) == r["blck_size"] and gg.type_size(r["type"]) == r["type_size"]
    if gguf is not None and hasattr(gguf.GGMLQuantizationType, name.upper()) and name != "q8_1":
        # (gguf's q8_1 size is the old 40-byte layout; ggml's block is 36 bytes)
        gt = gguf.GGMLQuantizationType[name.upper()]
        assert gguf.constants.GGML_QUANT_SIZES[gt] == (r["blck_size"], r["type_size"])
        assert int(gt) == r["id"]
    vt = TABLE[gg.type_name(r["vec_dot_type"])]
    assert vt["blck_size"] == r["blck_size"] or r["blck_size"] % vt["blck_size"] == 0
    if name in ACTIVATION_TYPES:
        assert not r["is_weight"] and r["mul_mat"] == []
    else:
        assert r["is_weight"]
        assert "scalar" in r["mul_mat"] and "avx2" in r["mul_mat"], f"{name}: mul_mat kernels {r['mul_mat']}"


def test_gguf_check_sizes_follow_the_table():
    from pyggml.llm import gguf_check
    for r in gg.type_traits():
        assert gguf_check.GGML_TYPE_BLOCKS[r["id"]] == (r["blck_size"], r["type_size"]), r["name"]
        assert gguf_check.GGML_TYPE_NAMES[r["id"]] == r["name"]


def random_blocks(name, nblocks, rng, edge=False):
    """Random block bytes with finite scale fields (negative, tiny, large and zero included)."""
    r = TABLE[name]
    raw = rng.integers(0, 256, size=(nblocks, r["type_size"]), dtype=np.uint8)
    for off in F16_FIELDS[name]:
        h = rng.integers(0, 1 << 16, size=nblocks, dtype=np.uint16)
        h = np.where((h & 0x7C00) == 0x7C00, h & 0x83FF, h)  # no inf / NaN
        if edge:  # zero, +-max, smallest subnormal, negative one
            h[: 5] = [0x0000, 0x7BFF, 0xFBFF, 0x0001, 0xBC00][: min(5, nblocks)]
        raw[:, off:off + 2] = h.view(np.uint8).reshape(nblocks, 2)
    if name == "q8_K":
        d = rng.uniform(-2, 2, size=nblocks).astype(np.float32)
        raw[:, 0:4] = d.view(np.uint8).reshape(nblocks, 4)
    if name == "mxfp4" and edge:
        raw[: 4, 0] = [0, 1, 127, 254][: min(4, nblocks)]
    if edge:
        raw[-1, :] = 0  # an all-zero block
    return raw


def gguf_dequantize(name, raw):
    if gguf is None or not hasattr(gguf.GGMLQuantizationType, name.upper()):
        pytest.skip(f"gguf has no {name}")
    gt = gguf.GGMLQuantizationType[name.upper()]
    try:
        return np.asarray(gq.dequantize(raw, gt), np.float32).ravel()
    except NotImplementedError:
        pytest.skip(f"gguf cannot dequantize {name}")


@pytest.mark.parametrize("edge", [False, True])
@pytest.mark.parametrize("name", [n for n in BLOCK_TYPES if n not in ("q8_1", "q8_K")])
def test_dequantize_matches_gguf_bit_exact(name, edge):
    rng = np.random.default_rng(abs(hash(name)) % 1000 + edge)
    raw = random_blocks(name, 37, rng, edge)
    ours = gg.dequantize(T(name), raw.ravel())
    theirs = gguf_dequantize(name, raw)
    np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32))


def test_dequantize_activation_types():
    rng = np.random.default_rng(5)
    raw = random_blocks("q8_K", 3, rng)
    d = raw[:, 0:4].copy().view(np.float32).ravel()
    q = raw[:, 4:260].view(np.int8).astype(np.float32)
    np.testing.assert_array_equal(gg.dequantize(gg.Q8_K, raw.ravel()), (d[:, None] * q).ravel())
    raw = random_blocks("q8_1", 3, rng)
    d = raw[:, 0:2].copy().view(np.float16).astype(np.float32).ravel()
    q = raw[:, 4:36].view(np.int8).astype(np.float32)
    np.testing.assert_array_equal(gg.dequantize(gg.Q8_1, raw.ravel()), (q * d[:, None]).ravel())


def test_activation_quantizers_keep_their_invariants():
    x = np.random.default_rng(1).uniform(-3, 3, 512).astype(np.float32)
    k = gg.quantize(gg.Q8_K, x).reshape(2, 292)
    qs = k[:, 4:260].view(np.int8).astype(np.int32)
    bsums = k[:, 260:292].copy().view(np.int16).reshape(2, 16)
    np.testing.assert_array_equal(bsums, qs.reshape(2, 16, 16).sum(-1))
    assert np.all(np.abs(qs).max(1) == 127)
    assert_close(gg.dequantize(gg.Q8_K, k.ravel()), x, 1e-4)
    one = gg.quantize(gg.Q8_1, x).reshape(16, 36)
    d32 = np.abs(x.reshape(16, 32)).max(1) / np.float32(127)   # s uses d before f16 rounding
    s = one[:, 2:4].copy().view(np.float16).ravel()
    sums = one[:, 4:].view(np.int8).astype(np.float32).sum(1)
    np.testing.assert_array_equal(s, (sums * d32).astype(np.float16))


def sample(name, nrows, rng):
    K = TABLE[name]["blck_size"] * (3 if TABLE[name]["blck_size"] < 256 else 2)
    x = rng.uniform(-1, 1, size=(nrows, K)).astype(np.float32)
    x[0, : TABLE[name]["blck_size"]] = 0.0                       # a zero block
    x[1 % nrows, 5] = 40.0                                        # an outlier
    x[2 % nrows, :] *= -1e-3                                      # a tiny row
    return x


@pytest.mark.parametrize("name", [n for n in BLOCK_TYPES if n not in ACTIVATION_TYPES])
def test_quantize_matches_gguf_where_it_quantizes(name):
    if gguf is None or not hasattr(gguf.GGMLQuantizationType, name.upper()):
        pytest.skip(f"gguf has no {name}")
    x = sample(name, 7, np.random.default_rng(3))
    try:
        theirs = np.asarray(gq.quantize(x, gguf.GGMLQuantizationType[name.upper()]), np.uint8).ravel()
    except NotImplementedError:
        pytest.skip(f"gguf cannot quantize {name}")
    np.testing.assert_array_equal(gg.quantize(T(name), x.ravel()), theirs)


@pytest.mark.parametrize("name", [n for n in BLOCK_TYPES if n not in ACTIVATION_TYPES])
def test_quantize_is_a_fixed_point_and_accurate(name):
    """Quantizing dequantized values gives the same values back (the scale searches find the
    grid they came from) and the error is what the bit width allows."""
    x = sample(name, 5, np.random.default_rng(4))
    q = gg.quantize(T(name), x.ravel())
    d = gg.dequantize(T(name), q)
    bits = TABLE[name]["type_size"] * 8 / TABLE[name]["blck_size"]
    rows = x.shape[0]
    good = np.ones(x.shape, bool)
    good[1 % rows] = False  # the outlier's row
    assert_close(d.reshape(x.shape)[good], x[good], 4.0 ** -(bits - 2.5), what=f"{name} error")
    d2 = gg.dequantize(T(name), gg.quantize(T(name), d))
    assert_close(d2, d, 1e-3 if name in ("q2_K", "q3_K") else 1e-5, what=f"{name} fixed point")


@pytest.mark.parametrize("name", [n for n in BLOCK_TYPES if n not in ACTIVATION_TYPES])
def test_cpy_set_rows_get_rows_round_trip(name):
    rng = np.random.default_rng(6)
    x = sample(name, 7, rng)
    K, tq = x.shape[1], T(name)
    expect_bytes = gg.quantize(tq, x.ravel(), reference=False).reshape(7, -1)
    ctx = gg.Context(mem_size=16 << 20)
    a, _ = new(ctx, gg.F32, [K, 7], data=x)
    dst = ctx.new_tensor(tq, [K, 7])
    c = gg.cpy(ctx, a, dst)
    compute(ctx, c)
    np.testing.assert_array_equal(np.array(c.numpy()).view(np.uint8).reshape(7, -1), expect_bytes)
    # set_rows: rows 0, 3, 5 of an 11-row tensor from a strided (every other row) f32 source
    big, _ = new(ctx, gg.F32, [K, 6], data=np.repeat(x[:3], 2, axis=0))
    src = gg.view_2d(ctx, big, K, 3, big.nb[1] * 2, 0)
    rows = ctx.new_tensor(tq, [K, 11])
    rows.set(np.zeros(rows.nbytes, np.uint8))
    ids, _ = new(ctx, gg.I64, [3], data=np.array([5, 0, 3]))
    sr = gg.set_rows(ctx, rows, src, ids)
    compute(ctx, sr)
    got = np.array(sr.numpy()).view(np.uint8).reshape(11, -1)
    for r, i in zip(range(3), [5, 0, 3]):
        np.testing.assert_array_equal(got[i], expect_bytes[r])
    # get_rows back to f32
    gidx, _ = new(ctx, gg.I32, [4], data=np.array([3, 3, 5, 0]))
    gr = gg.get_rows(ctx, sr, gidx)
    compute(ctx, gr)
    deq = gg.dequantize(tq, expect_bytes.ravel()).reshape(7, K)
    np.testing.assert_array_equal(values(gr).reshape(4, K), deq[[2, 2, 0, 1]])


def mm_reference(a, b):
    """float64 product of dequantized weights a (..., M, K) and activations b (..., N, K)."""
    ra, rb = a.shape[1], b.shape[1]
    a = np.repeat(a, rb // ra, axis=1) if rb != ra else a
    a = np.repeat(a, b.shape[0] // a.shape[0], axis=0) if b.shape[0] != a.shape[0] else a
    return np.einsum("xymk,xynk->xynm", a, b)


@pytest.mark.parametrize("simd", SIMD_LEVELS, indirect=True)
@pytest.mark.parametrize("N", [1, 3, 7, 33])
@pytest.mark.parametrize("name", WEIGHT_TYPES)
def test_mul_mat_gemv_gemm(simd, name, N):
    """Odd row counts, GEMV and a few columns (dot kernels) and N=33 (GEMM for 32-value blocks),
    every kernel set."""
    rng = np.random.default_rng(N)
    K = 512 if TABLE[name]["blck_size"] == 256 else 320
    ctx = gg.Context(mem_size=64 << 20)
    a, av = new(ctx, T(name), [K, 37], rng=rng)
    b, bv = new(ctx, gg.F32, [K, N], rng=rng)
    out = gg.mul_mat(ctx, a, b)
    compute(ctx, out)
    assert_close(values(out), mm_reference(av, bv), PEER, what=f"{name} N={N} {simd}")
    # the activations really are quantized to the vec_dot type, once per column, as ggml does
    emul = 1e-6 if gg.type_name(TABLE[name]["vec_dot_type"]) == "q8_1" else 1e-9
    assert_close(values(out), mm_reference(av, as_vec_dot(name, bv)), emul, what=f"{name} emulation")


def as_vec_dot(name, b):
    """b's rows converted to the weights' vec_dot type with the CPU quantizer, as f32."""
    vt = TABLE[name]["vec_dot_type"]
    flat = b.reshape(-1, b.shape[-1]).astype(np.float32)
    rows = [gg.dequantize(vt, gg.quantize(vt, r, reference=False)) for r in flat]
    return np.stack(rows).reshape(b.shape)


@pytest.mark.parametrize("simd", SIMD_LEVELS, indirect=True)
@pytest.mark.parametrize("name", WEIGHT_TYPES)
def test_mul_mat_noncontiguous_broadcast(simd, name):
    """Weights broadcast over b's batches (2 -> 4, 1 -> 3); b a permuted, non-contiguous view."""
    rng = np.random.default_rng(11)
    K = 256 if TABLE[name]["blck_size"] == 256 else 192
    ctx = gg.Context(mem_size=64 << 20)
    a, av = new(ctx, T(name), [K, 13, 2, 1], rng=rng)
    for N in (5, 20):
        braw, bvals = new(ctx, gg.F32, [K, 4, N, 3], rng=rng)   # ne1 and ne2 swapped below
        b = gg.permute(ctx, braw, 0, 2, 1, 3)                    # [K, N, 4, 3], not contiguous
        out = gg.mul_mat(ctx, a, b)
        compute(ctx, out)
        bv = np.transpose(bvals, (0, 2, 1, 3))
        assert_close(values(out), mm_reference(av, bv), PEER, what=f"{name} N={N}")


@pytest.mark.parametrize("simd", ["native", "scalar"], indirect=True)
@pytest.mark.parametrize("name", WEIGHT_TYPES)
def test_mul_mat_id(simd, name):
    rng = np.random.default_rng(12)
    K, M, E, U, Tn = (256 if TABLE[name]["blck_size"] == 256 else 64), 11, 4, 2, 5
    ctx = gg.Context(mem_size=32 << 20)
    a, av = new(ctx, T(name), [K, M, E], rng=rng)
    b, bv = new(ctx, gg.F32, [K, U, Tn], rng=rng)
    idx = rng.integers(0, E, size=(Tn, U)).astype(np.int32)
    ids, _ = new(ctx, gg.I32, [U, Tn], data=idx)
    out = gg.mul_mat_id(ctx, a, b, ids)
    compute(ctx, out)
    expect = np.einsum("tumk,tuk->tum", av[0][idx], bv[0])
    assert_close(values(out)[0], expect, PEER)


@pytest.mark.parametrize("name", WEIGHT_TYPES)
def test_flash_attn_quantized_kv(name):
    rng = np.random.default_rng(13)
    D = 256 if TABLE[name]["blck_size"] == 256 else 64
    N, KV, H = 3, 40, 2
    ctx = gg.Context(mem_size=32 << 20)
    q, qv = new(ctx, gg.F32, [D, N, H], rng=rng)
    k, kv = new(ctx, T(name), [D, KV, H], rng=rng)
    v, vv = new(ctx, T(name), [D, KV, H], rng=rng)
    scale = 1.0 / np.sqrt(D)
    out = gg.flash_attn_ext(ctx, q, k, v, None, scale, 0.0, 0.0)
    compute(ctx, out)
    s = np.einsum("hnd,hkd->hnk", qv[0], kv[0]) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    expect = np.einsum("hnk,hkd->nhd", p, vv[0])      # result is [D, H, N]
    assert_close(values(out)[0], expect, PEER)


@pytest.mark.parametrize("name", sorted(ACTIVATION_TYPES))
def test_activation_types_are_refused_as_weights(name):
    ctx = gg.Context(mem_size=4 << 20)
    a = ctx.new_tensor(T(name), [256, 4])
    b = ctx.new_tensor(gg.F32, [256, 2])
    with pytest.raises(TypeError, match=name):
        gg.mul_mat(ctx, a, b)


@pytest.mark.parametrize("bt", [gg.F16, gg.BF16])
@pytest.mark.parametrize("name", WEIGHT_TYPES)
def test_mul_mat_half_activations(name, bt):
    """f16 / bf16 activations are widened, then quantized to the vec_dot type like f32 ones."""
    rng = np.random.default_rng(14)
    K = 256 if TABLE[name]["blck_size"] == 256 else 128
    ctx = gg.Context(mem_size=32 << 20)
    a, av = new(ctx, T(name), [K, 19], rng=rng)
    for N in (2, 17):
        b, bv = new(ctx, bt, [K, N], rng=rng)
        out = gg.mul_mat(ctx, a, b)
        compute(ctx, out)
        assert_close(values(out), mm_reference(av, bv), PEER, what=f"{name} N={N}")
