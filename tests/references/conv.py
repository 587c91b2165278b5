"""numpy references of the conv, pool and upscale families (numpy order: ne reversed)."""
import numpy as np


def _out(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def im2col_nd(x, ks, s, p, d):
    """x (N, C, *spatial) float64, ks/s/p/d per spatial axis (outermost first) ->
    columns (N, *out, C, *ks): patch values with zero padding."""
    nsp = len(ks)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pi, pi) for pi in p])
    outs = [_out(x.shape[2 + i], ks[i], s[i], p[i], d[i]) for i in range(nsp)]
    cols = np.zeros((x.shape[0], *outs, x.shape[1], *ks))
    for kidx in np.ndindex(*ks):
        sl = [slice(None), slice(None)]
        for i in range(nsp):
            start = kidx[i] * d[i]
            sl.append(slice(start, start + s[i] * (outs[i] - 1) + 1, s[i]))
        patch = xp[tuple(sl)]  # (N, C, *outs)
        patch = np.moveaxis(patch, 1, -1)  # (N, *outs, C)
        cols[(slice(None),) * (1 + nsp) + (slice(None),) + kidx] = patch
    return cols


def conv_nd(x, k, s, p, d):
    """Cross-correlation: x (N, IC, *sp), k (OC, IC, *ks) -> (N, OC, *out)."""
    nsp = k.ndim - 2
    cols = im2col_nd(x, k.shape[2:], s, p, d)  # (N, *out, IC, *ks)
    flat = cols.reshape(cols.shape[: 1 + nsp] + (-1,))
    y = flat @ k.reshape(k.shape[0], -1).T  # (N, *out, OC)
    return np.moveaxis(y, -1, 1)


def conv_2d_dw(x, k, s, p, d):
    """Depth-wise: x (N, C, H, W), k (C, 1, KH, KW) -> (N, C, OH, OW)."""
    return np.concatenate([conv_nd(x[:, c:c + 1], k[c:c + 1], s, p, d) for c in range(x.shape[1])], axis=1)


def conv_transpose_2d(x, k, s):
    """x (N, IC, H, W), k (IC, OC, KH, KW) (ggml [KW, KH, OC, IC]) -> (N, OC, (H-1)s+KH, (W-1)s+KW)."""
    N, IC, H, W = x.shape
    _, OC, KH, KW = k.shape
    y = np.zeros((N, OC, (H - 1) * s + KH, (W - 1) * s + KW))
    for iy in range(H):
        for ix in range(W):
            y[:, :, iy * s:iy * s + KH, ix * s:ix * s + KW] += np.einsum("ni,iokl->nokl", x[:, :, iy, ix], k)
    return y


def pool_1d(x, op, k, s, p):
    """Along the last axis; max ignores padding, avg divides by the in-bounds count."""
    L = x.shape[-1]
    OL = (L + 2 * p - k) // s + 1
    out = np.empty(x.shape[:-1] + (OL,))
    for o in range(OL):
        lo, hi = max(0, o * s - p), min(L, o * s - p + k)
        win = x[..., lo:hi]
        if op == 0:
            out[..., o] = win.max(axis=-1) if hi > lo else -np.finfo(np.float32).max
        else:
            out[..., o] = win.sum(axis=-1) / (hi - lo) if hi > lo else 0.0
    return out


def pool_2d(x, op, k0, k1, s0, s1, p0, p1):
    """Along the last two axes (H, W); avg always divides by k0*k1; float paddings: the output
    size uses them as floats, the windows truncated."""
    H, W = x.shape[-2:]
    OW = int((W + 2 * p0 - k0) / s0 + 1)
    OH = int((H + 2 * p1 - k1) / s1 + 1)
    ip0, ip1 = int(p0), int(p1)
    out = np.empty(x.shape[:-2] + (OH, OW))
    for oy in range(OH):
        y0, y1 = max(0, oy * s1 - ip1), min(H, oy * s1 - ip1 + k1)
        for ox in range(OW):
            x0, x1 = max(0, ox * s0 - ip0), min(W, ox * s0 - ip0 + k0)
            win = x[..., y0:y1, x0:x1].reshape(x.shape[:-2] + (-1,))
            if op == 0:
                out[..., oy, ox] = win.max(axis=-1) if win.shape[-1] else -np.finfo(np.float32).max
            else:
                out[..., oy, ox] = win.sum(axis=-1) / (k0 * k1)
    return out


def _src_coord(out_n, in_n, align):
    i = np.arange(out_n, dtype=np.float64)
    if align:  # no half-pixel offset; the corner-to-corner scale where both sizes allow it
        return i * (in_n - 1) / (out_n - 1) if out_n > 1 and in_n > 1 else i * in_n / out_n
    return (i + 0.5) * in_n / out_n - 0.5


def upscale(x, ne, mode):
    """x (ne3, ne2, ne1, ne0) -> ne (ggml order). mode 0 nearest, 1 bilinear (| 256 align corners)."""
    ne0, ne1, ne2, ne3 = ne

    def nearest(out_n, in_n):  # ggml divides by the float32 scale out/in and truncates
        sf = np.float32(out_n) / np.float32(in_n)
        return (np.arange(out_n, dtype=np.float32) / sf).astype(np.int64)

    x = x[nearest(ne3, x.shape[0])][:, nearest(ne2, x.shape[1])]
    if mode & 0xFF == 0:
        return x[:, :, nearest(ne1, x.shape[2])][:, :, :, nearest(ne0, x.shape[3])]
    align = bool(mode & 256)
    ys, xs = _src_coord(ne1, x.shape[2], align), _src_coord(ne0, x.shape[3], align)
    if mode & 0xFF == 2:
        return _bicubic(x, ys, xs)

    def taps(c, n):
        f = np.floor(c).astype(int)
        lo, hi = np.clip(f, 0, n - 1), np.clip(f + 1, 0, n - 1)
        return lo, hi, np.clip(c - lo, 0.0, 1.0)

    y0, y1, dy = taps(ys, x.shape[2])
    x0, x1, dx = taps(xs, x.shape[3])
    a, b = x[:, :, y0][:, :, :, x0], x[:, :, y0][:, :, :, x1]
    c, d = x[:, :, y1][:, :, :, x0], x[:, :, y1][:, :, :, x1]
    dy, dx = dy[:, None], dx[None, :]
    return a * (1 - dx) * (1 - dy) + b * dx * (1 - dy) + c * (1 - dx) * dy + d * dx * dy


def _keys(t, a=-0.75):
    """Keys' cubic convolution kernel (a = -0.75, as PyTorch and ggml)."""
    t = np.abs(t)
    return np.where(t <= 1, ((a + 2) * t - (a + 3)) * t * t + 1,
                    np.where(t < 2, ((a * t - 5 * a) * t + 8 * a) * t - 4 * a, 0.0))


def _bicubic(x, ys, xs):
    def taps(c, n):
        f = np.floor(c).astype(int)
        idx = np.clip(f[:, None] + np.arange(-1, 3)[None, :], 0, n - 1)  # (out, 4)
        w = _keys((c - f)[:, None] - np.arange(-1, 3)[None, :])
        return idx, w

    yi, wy = taps(ys, x.shape[2])
    xi, wx = taps(xs, x.shape[3])
    g = x[:, :, yi][:, :, :, :, xi]  # (n3, n2, oy, 4, ox, 4)
    return np.einsum("abyixj,yi,xj->abyx", g, wy, wx)
