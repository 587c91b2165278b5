"""References of ARGSORT and TOP_K, numpy order; ties compared by value."""
import numpy as np


def argsort(x, order=0):
    x = np.asarray(x, dtype=np.float64)
    return np.argsort(-x if order == 1 else x, axis=-1, kind="stable")


def top_k_values(x, k):
    """The k largest values of each row, sorted descending (order-free comparison key)."""
    x = np.asarray(x, dtype=np.float64)
    return -np.sort(-x, axis=-1)[..., :k]
