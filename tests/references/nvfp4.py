"""NVFP4 block (de)quantization written from (scalar numpy, easy to audit).

Block: 4 UE4M3 scale bytes, then 32 bytes of E2M1 nibbles; sub-block s covers elements
16s..16s+15, byte 8s+j holds element j (low nibble) and j+8 (high nibble).
"""
import numpy as np

NVFP4_LUT = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float32)


def nvfp4_scale(u: int) -> float:
    """UE4M3 byte -> scale, decoded and halved (the LUT above is doubled)."""
    u = int(u)
    if u in (0x00, 0x7F):
        return 0.0
    e = (u >> 3) & 0xF
    m = u & 7
    v = m * 2.0 ** -9 if e == 0 else (1.0 + m / 8.0) * 2.0 ** (e - 7)
    return float(np.float32(0.5 * v))


def ue4m3_encode(x) -> int:
    """Non-negative float32 -> UE4M3 code, rounding rules of."""
    x = np.float32(x)
    if not (x > 0):
        return 0
    x = min(x, np.float32(448.0))
    bits = int(np.array([x], dtype=np.float32).view(np.uint32)[0])
    exp = ((bits >> 23) & 0xFF) - 127 + 7
    if exp <= 0:
        m = int(np.float32(x * np.float32(512.0) + np.float32(0.5)))
        m = min(m, 7)
        return 0 if m < 1 else m
    if exp >= 15:
        return 0x7E
    man = ((bits >> 20) & 7) + ((bits >> 19) & 1)
    if man > 7:
        man = 0
        exp += 1
    if exp >= 15:
        return 0x7E
    return (exp << 3) | man


def nvfp4_quantize(x) -> np.ndarray:
    """float32 values (length a multiple of 64) -> uint8 bytes, 36 per block."""
    x = np.asarray(x, dtype=np.float32).ravel()
    assert x.size % 64 == 0
    out = np.zeros((x.size // 64, 36), dtype=np.uint8)
    cand = NVFP4_LUT
    for b in range(x.size // 64):
        for s in range(4):
            v = x[b * 64 + 16 * s: b * 64 + 16 * s + 16]
            amax = np.float32(0.0)
            for a in np.abs(v):
                if a > amax:
                    amax = a
            code = ue4m3_encode(np.float32(amax / np.float32(6.0)))
            scale = np.float32(nvfp4_scale(code))
            out[b, s] = code
            vals = (cand * scale).astype(np.float32)
            q = np.zeros(16, dtype=np.uint8)
            for j in range(16):
                err = np.abs(vals - v[j]).astype(np.float32)
                best = 0
                for i in range(1, 16):
                    if err[i] < err[best]:
                        best = i
                q[j] = best
            out[b, 4 + 8 * s: 4 + 8 * s + 8] = q[:8] | (q[8:] << 4)
    return out.ravel()


def nvfp4_dequantize(raw) -> np.ndarray:
    raw = np.asarray(raw, dtype=np.uint8).reshape(-1, 36)
    out = np.zeros((raw.shape[0], 64), dtype=np.float32)
    for b in range(raw.shape[0]):
        for s in range(4):
            sc = np.float32(nvfp4_scale(raw[b, s]))
            for j in range(8):
                byte = int(raw[b, 4 + 8 * s + j])
                out[b, 16 * s + j] = NVFP4_LUT[byte & 15] * sc
                out[b, 16 * s + j + 8] = NVFP4_LUT[byte >> 4] * sc
    return out.ravel()
