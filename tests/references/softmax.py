"""Reference of SOFT_MAX, float64. Arrays in numpy order (ne3, ne2, ne1, ne0)."""
import numpy as np


def alibi_slopes(n_head, max_bias):
    """slope(h) for h < n_head, as FLASH_ATTN_EXT / SOFT_MAX define it."""
    if max_bias <= 0.0:
        return np.ones(n_head)
    n_log2 = 2 ** int(np.floor(np.log2(n_head)))
    m0 = 2.0 ** (-max_bias / n_log2)
    m1 = 2.0 ** (-(max_bias / 2.0) / n_log2)
    h = np.arange(n_head)
    return np.where(h < n_log2, m0 ** (h + 1), m1 ** (2 * (h - n_log2) + 1))


def soft_max(a, mask=None, scale=1.0, max_bias=0.0, sinks=None):
    """a: (ne3, ne2, ne1, ne0); mask: (m3, m2, m1 >= ne1, ne0) broadcast over dims 2/3 by modulo,
    rows 0..ne1-1 used; sinks: (ne2,) raw logits added to the denominator."""
    a = np.asarray(a, dtype=np.float64)
    ne3, ne2, ne1, ne0 = a.shape
    z = a * scale
    if mask is not None:
        m = np.asarray(mask, dtype=np.float64)
        m3, m2 = m.shape[0], m.shape[1]
        idx3 = np.arange(ne3) % m3
        idx2 = np.arange(ne2) % m2
        mm = m[idx3][:, idx2][:, :, :ne1, :]
        slope = alibi_slopes(ne2, max_bias).reshape(1, ne2, 1, 1)
        z = z + slope * mm
    with np.errstate(invalid="ignore", over="ignore"):
        M = np.max(z, axis=-1, keepdims=True)
        if sinks is not None:
            s = np.asarray(sinks, dtype=np.float64).reshape(1, ne2, 1, 1)
            M = np.maximum(M, s)
        e = np.exp(z - M)
        Z = np.sum(e, axis=-1, keepdims=True)
        if sinks is not None:
            Z = Z + np.exp(s - M)
        return e / Z
