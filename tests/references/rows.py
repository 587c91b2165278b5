"""References of GET_ROWS / SET_ROWS. Arrays in numpy order (ne3, ne2, ne1, ne0)."""
import numpy as np


def get_rows(a, idx):
    """a: (ne3, ne2, ne1, ne0); idx: int array (ne3, ne2, n_idx) (numpy order of b's
    [n_idx, ne2, ne3]). out[k, j, r, :] = a[k, j, idx[k, j, r], :]."""
    a = np.asarray(a)
    idx = np.asarray(idx).reshape(a.shape[0], a.shape[1], -1)
    out = np.empty((a.shape[0], a.shape[1], idx.shape[2], a.shape[3]), dtype=a.dtype)
    for k in range(a.shape[0]):
        for j in range(a.shape[1]):
            out[k, j] = a[k, j, idx[k, j]]
    return out


def set_rows(dst, src, idx, convert=lambda rows: rows):
    """dst: (ne3, ne2, ne1, ne0) values before; src: (ne3, ne2, n_rows, ne0); idx: int array
    (c2, c1, n_rows) (numpy order of c's [n_rows, c1, c2]). Returns the new dst values:
    dst[k, j, idx[k % c2, j % c1, i], :] = convert(src[k, j, i, :])."""
    out = np.array(dst, copy=True)
    idx = np.asarray(idx).reshape(-1, np.asarray(idx).shape[-2], np.asarray(idx).shape[-1])
    c2, c1 = idx.shape[0], idx.shape[1]
    for k in range(src.shape[0]):
        for j in range(src.shape[1]):
            for i in range(src.shape[2]):
                out[k, j, idx[k % c2, j % c1, i]] = convert(src[k, j, i])
    return out
