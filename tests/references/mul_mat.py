"""numpy references of MUL_MAT and MUL_MAT_ID, written from their definitions.

Arrays are in numpy order: a (A3, A2, M, K), b (B3, B2, N, K) -> out (B3, B2, N, M).
`mul_mat` is the exact float64 product; `act_like_cpu` reproduces what ggml's CPU does to the
activations before the dot products (f16 / bf16 rounding, q8_0 quantization with id = 127/amax),
so `mul_mat(a, act_like_cpu(b, wtype))` is the CPU result up to f32 summation order.
"""
import numpy as np

from references.numerics import round_bf16, round_f16


def mul_mat(a, b):
    """out[i3, i2] = b[i3, i2] @ a[i3 // r3, i2 // r2].T (interleaved batch broadcast)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    A3, A2, M, K = a.shape
    B3, B2, N, K2 = b.shape
    assert K == K2 and B2 % A2 == 0 and B3 % A3 == 0
    r2, r3 = B2 // A2, B3 // A3
    out = np.empty((B3, B2, N, M), dtype=np.float64)
    for i3 in range(B3):
        for i2 in range(B2):
            out[i3, i2] = b[i3, i2] @ a[i3 // r3, i2 // r2].T
    return out


def quantize_q8_0_cpu(x, ties_even: bool = False):
    """q8_0 round trip of the CPU row quantizer: d = amax/127 stored as f16, q = round(x*127/amax)
    (f32 arithmetic; exact ties half away from zero as the scalar quantizer rounds them, or to
    even as the SIMD ones do); values are q * f16(d)."""
    x = np.asarray(x, dtype=np.float32)
    blocks = x.reshape(-1, 32)
    amax = np.max(np.abs(blocks), axis=1, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(amax != 0, np.float32(127) / amax, np.float32(0)).astype(np.float32)
    v = (blocks * idv).astype(np.float32)
    q = np.rint(v) if ties_even else np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))
    return (q * round_f16(d)).astype(np.float32).reshape(x.shape)


def act_like_cpu(b, wtype: str, ties_even: bool | None = None):
    """The activations as ggml's CPU feeds them to the dot products of `wtype` weights
    (ties_even None: as the active SIMD level of pyggml rounds q8_0 ties)."""
    b = np.asarray(b, dtype=np.float32)
    if wtype == "f16":
        return round_f16(b)
    if wtype == "bf16":
        return round_bf16(b)
    if wtype in ("q8_0", "q4_0", "nvfp4"):
        if ties_even is None:
            import pyggml as gg
            ties_even = gg.isa() != "scalar"
        return quantize_q8_0_cpu(b, ties_even)
    return b


def mul_mat_id(as_, b, ids):
    """as_ (E, M, K), b (T, Nb, K), ids (T, U) -> out (T, U, M) with
    out[t, e] = as_[ids[t, e]] @ b[t, e % Nb]."""
    as_ = np.asarray(as_, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    T, Nb, K = b.shape
    U = ids.shape[1]
    out = np.empty((T, U, as_.shape[1]), dtype=np.float64)
    for t in range(T):
        for e in range(U):
            out[t, e] = as_[ids[t, e]] @ b[t, e % Nb]
    return out
