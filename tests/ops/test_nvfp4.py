"""NVFP4 block type: quantizer/dequantizer against the numpy reference and gguf."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import compute, values

try:
    import gguf
    import gguf.quants as gq
    _GGUF_NVFP4 = hasattr(gguf.GGMLQuantizationType, "NVFP4") and hasattr(gq, "NVFP4")
except ImportError:  # pragma: no cover - gguf is a test dependency
    _GGUF_NVFP4 = False


def _gguf_can_quantize():
    if not _GGUF_NVFP4:
        return False
    try:
        gq.quantize(np.zeros((1, 64), dtype=np.float32), gguf.GGMLQuantizationType.NVFP4)
        return True
    except NotImplementedError:
        return False


def _check_against_ref(x):
    x = np.asarray(x, dtype=np.float32).ravel()
    q = gg.quantize(gg.NVFP4, x)
    q_ref = ref.nvfp4_quantize(x)
    np.testing.assert_array_equal(q, q_ref)
    d = gg.dequantize(gg.NVFP4, q)
    np.testing.assert_array_equal(d, ref.nvfp4_dequantize(q_ref))
    return q, d


def test_scale_decode_all_codes():
    """Every UE4M3 byte decodes as the UE4M3 format defines (exercised through dequantize)."""
    for u in range(256):
        blk = np.zeros(36, dtype=np.uint8)
        blk[:4] = u
        blk[4:] = 0x22  # code 2 -> LUT value 2 -> 2*scale
        d = gg.dequantize(gg.NVFP4, blk)
        expected = 2.0 * ref.nvfp4_scale(u)
        assert np.all(d == np.float32(expected)), (u, d[0], expected)
    assert ref.nvfp4_scale(0x7E) * 2 == 448.0
    assert ref.nvfp4_scale(0x01) * 2 == 2.0 ** -9
    # bit 7 ignored
    assert ref.nvfp4_scale(0x80 | 0x38) == ref.nvfp4_scale(0x38)


def test_dequant_every_nibble():
    blk = np.zeros(36, dtype=np.uint8)
    blk[:4] = [0x38, 0x40, 0x30, 0x01]  # scales 1, 2, 0.5, 2^-9 (halved: 0.5, 1, .25, 2^-10)
    nib = np.arange(16, dtype=np.uint8)
    blk[4:12] = nib[:8] | (nib[8:] << 4)
    blk[12:36] = np.tile(blk[4:12], 3)
    d = gg.dequantize(gg.NVFP4, blk).reshape(4, 16)
    e2m1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, 0, -.5, -1, -1.5, -2, -3, -4, -6])
    for s, sc in enumerate([1.0, 2.0, 0.5, 2.0 ** -9]):
        np.testing.assert_array_equal(d[s], (e2m1 * sc).astype(np.float32))
    np.testing.assert_array_equal(d.ravel(), ref.nvfp4_dequantize(blk))


@pytest.mark.parametrize("ne0", [64, 128, 192])
def test_quantize_random_matches_reference(ne0):
    rng = np.random.default_rng(ne0)
    x = rng.uniform(-1, 1, size=(3, ne0)).astype(np.float32)
    x[1] *= 37.0
    q, d = _check_against_ref(x)
    assert q.size == 3 * ne0 // 64 * 36
    # quantization error is bounded by half a step of the coarsest E2M1 gap (2*scale per LUT unit)
    err = np.abs(d - x.ravel())
    assert np.all(np.isfinite(d))
    assert float(np.max(err)) <= float(np.max(np.abs(x))) / 6 * 1.2 + 1e-6


def test_all_zero_subblocks():
    x = np.zeros(128, dtype=np.float32)
    x[16:32] = np.linspace(-1, 1, 16)  # one live sub-block, others zero
    q, d = _check_against_ref(x)
    blocks = q.reshape(-1, 36)
    assert blocks[0, 0] == 0 and blocks[0, 2] == 0 and blocks[0, 3] == 0 and blocks[1, 0] == 0
    assert np.all(blocks[0, 4:12] == 0)  # zero sub-block -> index 0 (+0) everywhere
    assert np.all(d[:16] == 0) and np.all(d[64:] == 0)
    assert not np.any(np.signbit(d[:16]))


def test_negative_zero_prefers_positive_zero():
    x = np.full(64, -0.0, dtype=np.float32)
    x[0] = 6.0
    q, d = _check_against_ref(x)
    assert np.all(q.reshape(36)[5:12] == 0)  # all zero codes (+0, index 0)
    assert d[0] == 6.0


def test_ties_first_index_wins():
    # scale code 0x38 (1.0, halved 0.5): grid values 0, .5, 1, 1.5, 2, 3, 4, 6.
    # amax 6 -> amax/6 = 1 -> code 0x38 exactly. Values halfway between grid points pick the lower index.
    x = np.zeros(64, dtype=np.float32)
    x[:16] = [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -2.5, -5.0, 0, -0.0, 4.0, -6.0]
    q, d = _check_against_ref(x)
    assert q[0] == 0x38
    expect = [6.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 0.0, -0.5, -2.0, -4.0, 0, 0, 4.0, -6.0]
    np.testing.assert_array_equal(d[:16], np.array(expect, dtype=np.float32))


def test_subnormal_scales():
    # amax/6 in the UE4M3 subnormal range (< 2^-6) and below its smallest step
    x = np.zeros(64 * 6, dtype=np.float32)
    amaxes = [6 * 2.0 ** -9, 6 * 3.4 * 2.0 ** -9, 6 * 7.6 * 2.0 ** -9, 6 * 0.4 * 2.0 ** -9,
              6 * 0.6 * 2.0 ** -9, 6 * 2.0 ** -6 * 0.99]
    rng = np.random.default_rng(1)
    for b, a in enumerate(amaxes):
        v = rng.uniform(-a, a, size=64).astype(np.float32)
        v[0] = a
        x[b * 64:(b + 1) * 64] = v
    q, _ = _check_against_ref(x)
    codes = q.reshape(-1, 36)[:, 0]
    assert codes[0] == 1 and codes[1] == 3 and codes[2] == 7 and codes[3] == 0 and codes[4] == 1
    assert codes[5] == 7  # 0.99*2^-6 -> x*512+0.5 = 8.4 clamps to 7


def test_saturation_448():
    x = np.zeros(64 * 4, dtype=np.float32)
    x[0] = 6 * 448.0         # exactly the top code
    x[64] = 6 * 300.0        # exponent field 15 -> 0x7E (448)
    x[128] = 1e30            # clamped
    x[192] = np.inf          # clamped; all other elements pick 0
    x[193] = 5.0
    q, d = _check_against_ref(x)
    codes = q.reshape(-1, 36)[:, 0]
    assert list(codes) == [0x7E, 0x7E, 0x7E, 0x7E]
    assert d[0] == 6 * 448.0 and d[64] == 4 * 448.0  # 1800 -> nearest grid value 4*448 = 1792
    # 1e30 minus any grid value rounds to 1e30 in F32: all distances tie, index 0 (+0) wins
    assert d[128] == 0.0
    # inf is at infinite distance from every grid value: the first index (+0) wins
    assert d[192] == 0.0 and d[193] == 0.0


def test_normal_rounding_carry():
    # amax/6 = 1.9999 -> mantissa rounds up and carries into the exponent -> code for 2.0
    x = np.zeros(64, dtype=np.float32)
    x[0] = np.float32(1.9999) * 6
    q, _ = _check_against_ref(x)
    assert q[0] == (8 << 3)  # exponent 1+7, mantissa 0
    # round half-up on the 4th fraction bit: 1.0625 (= 1 + 1/16) -> 1.125
    x[0] = np.float32(1.0625) * 6
    q, _ = _check_against_ref(x)
    assert q[0] == (7 << 3) | 1


def test_gguf_dequantize_agrees():
    if not _GGUF_NVFP4:
        pytest.skip("installed gguf package has no NVFP4 support")
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 192)).astype(np.float32)
    x[0, :40] = 0
    q = gg.quantize(gg.NVFP4, x.ravel())
    d_gguf = gq.dequantize(q.reshape(4, -1), gguf.GGMLQuantizationType.NVFP4)
    np.testing.assert_array_equal(gg.dequantize(gg.NVFP4, q), np.asarray(d_gguf, np.float32).ravel())
    # gguf's vectorised UE4M3 encoder (written after ggml's) agrees with ours on positive inputs
    vals = np.concatenate([np.float32(2.0) ** np.arange(-12, 10, 0.37, dtype=np.float32),
                           np.array([448, 500, 1e-5, 7.7 / 512, 240, 250, 255.9], np.float32)])
    enc_gguf = gq.NVFP4.fp32_to_ue4m3(vals.astype(np.float32))
    enc_ref = np.array([ref.ue4m3_encode(v) for v in vals], dtype=np.uint8)
    np.testing.assert_array_equal(enc_ref, enc_gguf)


def test_gguf_quantize_agrees():
    if not _gguf_can_quantize():
        pytest.skip("installed gguf.quants implements NVFP4 dequantization only (no quantize_blocks)")
    rng = np.random.default_rng(6)
    x = rng.normal(size=(2, 128)).astype(np.float32)
    q_gguf = gq.quantize(x, gguf.GGMLQuantizationType.NVFP4)
    np.testing.assert_array_equal(gg.quantize(gg.NVFP4, x.ravel()), np.asarray(q_gguf).ravel())


def test_round_trip_is_idempotent():
    rng = np.random.default_rng(7)
    x = rng.uniform(-3, 3, size=256).astype(np.float32)
    d1 = gg.dequantize(gg.NVFP4, gg.quantize(gg.NVFP4, x))
    d2 = gg.dequantize(gg.NVFP4, gg.quantize(gg.NVFP4, d1))
    np.testing.assert_array_equal(d1, d2)


def test_quantize_bad_length():
    with pytest.raises(ValueError):
        gg.quantize(gg.NVFP4, np.zeros(65, dtype=np.float32))
    with pytest.raises(ValueError):
        gg.dequantize(gg.NVFP4, np.zeros(35, dtype=np.uint8))


def test_tensor_storage_round_trip():
    """A NVFP4 tensor set from floats reads back as the dequantized reference values."""
    ctx = gg.Context(1 << 20)
    rng = np.random.default_rng(8)
    x = rng.uniform(-1, 1, size=(3, 128)).astype(np.float32)
    t = ctx.new_tensor(gg.NVFP4, [128, 3])
    t.set(gg.quantize(gg.NVFP4, x.ravel()))
    np.testing.assert_array_equal(values(t).ravel(), ref.nvfp4_dequantize(ref.nvfp4_quantize(x)))


def test_golden_nvfp4_bytes_requantize_identically():
    """NVFP4 weights recorded from ggml: our dequantization equals gguf's, and quantizing the
    dequantized values reproduces ggml's bytes (every code is a fixed point of the quantizer)."""
    import golden
    paths = [p for p in golden.case_files() if "nvfp4" in p.stem]
    if not paths:
        pytest.skip("golden cases not available")
    for p in paths:
        z = np.load(p)
        for n in z["input_names"]:
            if str(z[f"in_{n}_type"]) != "nvfp4":
                continue
            raw = np.asarray(z[f"in_{n}"]).ravel()
            d = gg.dequantize(gg.NVFP4, raw)
            np.testing.assert_array_equal(d, ref.nvfp4_dequantize(raw))
            np.testing.assert_array_equal(gg.quantize(gg.NVFP4, d), raw)
