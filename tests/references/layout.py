"""References of the copying layout ops and of ggml's view/permute
conventions. Arrays in numpy order (ne3, ne2, ne1, ne0); `dim` in ggml order."""
import numpy as np


def repeat(a, shape):
    """Tile a (numpy order) to `shape` (numpy order)."""
    return np.tile(a, tuple(s // d for s, d in zip(shape, a.shape)))


def concat(a, b, dim):
    return np.concatenate([a, b], axis=3 - dim)


def pad_ext(a, lp, rp, circular=False):
    """lp, rp: per ggml dim (lp0..lp3). Zero padding or wrap-around."""
    width = [(lp[3 - i], rp[3 - i]) for i in range(4)]
    return np.pad(a, width, mode="wrap" if circular else "constant")


def permute(a, axes):
    """ggml_permute: source dim k goes to result position axes[k] (ggml order)."""
    inv = [0, 0, 0, 0]
    for k, p in enumerate(axes):
        inv[p] = k
    # result ggml dim j = source ggml dim inv[j]; numpy axis of ggml dim d is 3 - d
    return np.transpose(a, [3 - inv[3 - j] for j in range(4)])


def strided_view(flat, ne, nb, offset, itemsize):
    """What a ggml view with ne/nb (bytes) and byte offset reads out of a flat buffer."""
    out = np.empty(tuple(reversed(ne)), dtype=flat.dtype)
    base = flat.view(np.uint8)
    for i3 in range(ne[3]):
        for i2 in range(ne[2]):
            for i1 in range(ne[1]):
                for i0 in range(ne[0]):
                    o = offset + i0 * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3]
                    out[i3, i2, i1, i0] = base[o:o + itemsize].view(flat.dtype)[0]
    return out
