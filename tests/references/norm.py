"""References of NORM and RMS_NORM, float64, rows along the last numpy axis."""
import numpy as np


def rms_norm(x, eps):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def norm(x, eps):
    x = np.asarray(x, dtype=np.float64)
    mu = np.mean(x, axis=-1, keepdims=True)
    d = x - mu
    with np.errstate(divide="ignore", invalid="ignore"):
        return d / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + eps)
