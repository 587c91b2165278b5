"""References of SCALE, CLAMP, ARANGE, TRI."""
import numpy as np


def scale_bias(x, s, b=0.0):
    x = np.asarray(x, dtype=np.float64)
    return x * s + b


def clamp(x, lo, hi):
    """Comparison semantics of the CPU reference: v = x if x < hi else hi (NaN -> hi), then
    v if v > lo else lo."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        v = np.where(x < hi, x, hi)
        return np.where(v > lo, v, lo)


def arange(start, stop, step):
    n = int(np.ceil(np.float32(np.float32(stop) - np.float32(start)) / np.float32(step)))
    return np.float32(start) + np.float32(step) * np.arange(n, dtype=np.float32)


TRI_UPPER_DIAG, TRI_UPPER, TRI_LOWER_DIAG, TRI_LOWER = 0, 1, 2, 3


def tri(x, kind):
    """x numpy (..., n(i1 rows), n(i0 cols)); keep where the predicate on (i0, i1) holds."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    i0 = np.arange(n)[None, :]
    i1 = np.arange(n)[:, None]
    keep = {TRI_UPPER_DIAG: i0 >= i1, TRI_UPPER: i0 > i1, TRI_LOWER_DIAG: i0 <= i1, TRI_LOWER: i0 < i1}[kind]
    return np.where(keep, x, 0.0)
