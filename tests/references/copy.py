"""References of the copy ops: bit-level conversions and block
quantizers written in numpy from the block formats."""
import numpy as np


def f16_bits(x):
    """float32 -> IEEE half bits: round to nearest even, overflow to inf, subnormals kept,
    NaN -> 0x7E00 with the input's sign."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        h = x.astype(np.float16).view(np.uint16).copy()
    nan = np.isnan(x)
    sign = ((x.view(np.uint32) >> 16) & 0x8000).astype(np.uint16)
    h[nan] = sign[nan] | np.uint16(0x7E00)
    return h


def bf16_bits(x):
    """float32 -> bf16 bits: NaN keeps its upper 16 bits with the quiet bit forced; otherwise
    add 0x7FFF + lsb and shift (round to nearest even)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    q = (u >> 16) | 64
    return np.where(np.isnan(x), q, r).astype(np.uint16)


def f16_value(bits):
    return np.asarray(bits, dtype=np.uint16).view(np.float16).astype(np.float32)


def bf16_value(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_i32(x):
    """pyggml's documented F32 -> I32: truncate toward zero, NaN -> 0, saturate."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros(x.shape, dtype=np.int64)
    fin = ~np.isnan(x)
    out[fin] = np.clip(np.trunc(x[fin]), -2.0**31, 2.0**31 - 1).astype(np.int64)
    return out.astype(np.int32)


def convert_values(x, dst: str):
    """Value of float32 `x` after conversion to the plain type `dst` (as float64/int)."""
    x = np.asarray(x, dtype=np.float32)
    if dst == "f32":
        return x.astype(np.float64)
    if dst == "f16":
        return f16_value(f16_bits(x)).astype(np.float64)
    if dst == "bf16":
        return bf16_value(bf16_bits(x)).astype(np.float64)
    if dst == "i32":
        return f32_to_i32(x)
    raise ValueError(dst)


def logical_copy(src, dst_shape):
    """cpy/cont_Nd: elements taken in the logical order of the source (numpy C order of the
    (ne3, ne2, ne1, ne0) array) and written in the logical order of the destination."""
    return np.asarray(src).reshape(-1).reshape(dst_shape)


def _round_half_away(v):
    v = np.asarray(v, dtype=np.float32)
    a = np.abs(v)
    f = np.floor(a)
    r = f + ((a - f) >= np.float32(0.5))
    return np.copysign(r, v)


def quantize_q8_0_np(x, cpu_form=True):
    """Q8_0 block bytes (34 per 32 values). cpu_form: id = 127/amax (the CPU backend's row
    quantizer behind CPY/SET_ROWS); otherwise id = 1/d (the reference of)."""
    v = np.asarray(x, dtype=np.float32).reshape(-1, 32)
    amax = np.max(np.abs(v), axis=1).astype(np.float32)
    d = (amax / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        if cpu_form:
            ide = np.where(amax != 0, np.float32(127.0) / amax, np.float32(0)).astype(np.float32)
        else:
            ide = np.where(d != 0, np.float32(1.0) / d, np.float32(0)).astype(np.float32)
    q = _round_half_away((v * ide[:, None]).astype(np.float32)).astype(np.int8)
    out = np.zeros((v.shape[0], 34), dtype=np.uint8)
    out[:, 0:2] = f16_bits(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.reshape(-1)


def dequantize_q8_0_np(b):
    b = np.asarray(b, dtype=np.uint8).reshape(-1, 34)
    d = f16_value(b[:, 0:2].copy().view(np.uint16).reshape(-1)).astype(np.float32)
    q = b[:, 2:].copy().view(np.int8).astype(np.float32)
    return (q * d[:, None]).astype(np.float32).reshape(-1)


def quantize_q4_0_np(x):
    """Q4_0 reference quantizer of (18 bytes per 32 values)."""
    v = np.asarray(x, dtype=np.float32).reshape(-1, 32)
    idx = np.argmax(np.abs(v), axis=1)  # first maximum wins, as the strict '<' scan
    m = v[np.arange(v.shape[0]), idx]
    d = (m / np.float32(-8.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        ide = np.where(d != 0, np.float32(1.0) / d, np.float32(0)).astype(np.float32)
    t = ((v * ide[:, None]).astype(np.float32) + np.float32(8.5)).astype(np.float32)
    q = np.minimum(15, np.trunc(t).astype(np.int64)).astype(np.uint8)
    out = np.zeros((v.shape[0], 18), dtype=np.uint8)
    out[:, 0:2] = f16_bits(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.reshape(-1)


def dequantize_q4_0_np(b):
    b = np.asarray(b, dtype=np.uint8).reshape(-1, 18)
    d = f16_value(b[:, 0:2].copy().view(np.uint16).reshape(-1)).astype(np.float32)
    lo = (b[:, 2:] & 15).astype(np.float32) - 8
    hi = (b[:, 2:] >> 4).astype(np.float32) - 8
    return (np.concatenate([lo, hi], axis=1) * d[:, None]).astype(np.float32).reshape(-1)


_NVFP4_LUT = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float32)


def nvfp4_scale(u):
    """UE4M3 decode, halved."""
    u = int(u)
    if u in (0x00, 0x7F):
        return np.float32(0.0)
    e, m = (u >> 3) & 0xF, u & 7
    v = m * 2.0**-9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return np.float32(v * 0.5)


def _ue4m3_encode(x):
    x = np.float32(x)
    if not (x > 0):
        return 0
    x = min(float(x), 448.0)
    e = int(np.frexp(x)[1]) - 1  # floor(log2(x)), exact
    if e + 7 >= 1:  # normal range
        f = x / 2.0**e - 1.0  # in [0, 1)
        m = int(np.floor(f * 16))  # top 4 fraction bits
        m3 = (m >> 1) + (m & 1)  # round half up on the 4th bit
        ee = e + 7
        if m3 == 8:
            m3, ee = 0, ee + 1
        if ee >= 15:
            return 0x7E
        return (ee << 3) | m3
    m = int(np.float32(np.float32(x) * np.float32(512.0)) + np.float32(0.5))
    return 0 if m < 1 else min(m, 7)


def quantize_nvfp4_np(x):
    """NVFP4 reference quantizer of (36 bytes per 64 values)."""
    v = np.asarray(x, dtype=np.float32).reshape(-1, 64)
    out = np.zeros((v.shape[0], 36), dtype=np.uint8)
    for b in range(v.shape[0]):
        for s in range(4):
            sub = v[b, 16 * s:16 * s + 16]
            amax = np.float32(np.max(np.abs(sub)))
            u = _ue4m3_encode(np.float32(amax / np.float32(6.0)))
            sc = nvfp4_scale(u)
            out[b, s] = u
            codes = np.argmin(np.abs(_NVFP4_LUT[None, :] * sc - sub[:, None]), axis=1)
            out[b, 4 + 8 * s:4 + 8 * s + 8] = codes[:8] | (codes[8:] << 4)
    return out.reshape(-1)


def dequantize_nvfp4_np(b):
    b = np.asarray(b, dtype=np.uint8).reshape(-1, 36)
    out = np.zeros((b.shape[0], 64), dtype=np.float32)
    for i in range(b.shape[0]):
        for s in range(4):
            sc = nvfp4_scale(b[i, s])
            qs = b[i, 4 + 8 * s:4 + 8 * s + 8]
            codes = np.concatenate([qs & 15, qs >> 4])
            out[i, 16 * s:16 * s + 16] = _NVFP4_LUT[codes] * sc
    return out.reshape(-1)


QUANTIZERS = {"q8_0": quantize_q8_0_np, "q4_0": quantize_q4_0_np, "nvfp4": quantize_nvfp4_np}
DEQUANTIZERS = {"q8_0": dequantize_q8_0_np, "q4_0": dequantize_q4_0_np, "nvfp4": dequantize_nvfp4_np}
