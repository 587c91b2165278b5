"""References of SUM_ROWS, MEAN and CUMSUM, numpy order."""
import numpy as np


def sum_rows(x):
    return np.sum(np.asarray(x, dtype=np.float64), axis=-1, keepdims=True)


def mean(x):
    return np.mean(np.asarray(x, dtype=np.float64), axis=-1, keepdims=True)


def cumsum_f32(x):
    """Sequential float32 inclusive prefix sum along the last axis (the CPU ref's rounding)."""
    x = np.asarray(x, dtype=np.float32)
    return np.cumsum(x, axis=-1, dtype=np.float32)


def cumsum(x):
    return np.cumsum(np.asarray(x, dtype=np.float64), axis=-1)
