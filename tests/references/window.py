"""numpy references of the window family (SAM helpers; numpy order: ne reversed)."""
import numpy as np


def win_part(x, w):
    """x (H, W, C) -> (npx*npy, w, w, C), window py*npx + px."""
    H, W, C = x.shape
    npy, npx = -(-H // w), -(-W // w)
    xp = np.zeros((npy * w, npx * w, C))
    xp[:H, :W] = x
    return xp.reshape(npy, w, npx, w, C).transpose(0, 2, 1, 3, 4).reshape(npy * npx, w, w, C)


def win_unpart(x, w0, h0, w):
    """x (n_windows, w, w, C) -> (h0, w0, C)."""
    npy, npx = -(-h0 // w), -(-w0 // w)
    C = x.shape[-1]
    full = x.reshape(npy, npx, w, w, C).transpose(0, 2, 1, 3, 4).reshape(npy * w, npx * w, C)
    return full[:h0, :w0]


def get_rel_pos(a, h):
    """a (2h-1, C) -> (h (q), h (k), C): [q, k] = a[q - k + h - 1]."""
    q = np.arange(h)[:, None]
    k = np.arange(h)[None, :]
    return a[q - k + h - 1]


def add_rel_pos(a, pw, ph):
    """a (B, W*qh, W*W), pw/ph (B, qh, W, W) -> a + pw[..., kw] + ph[..., kh] at column kh*W + kw."""
    B, qh, W, _ = pw.shape
    pwr = pw.reshape(B, qh * W, W)  # row r = i1 + W*i2
    phr = ph.reshape(B, qh * W, W)
    add = phr[:, :, :, None] + pwr[:, :, None, :]  # [b, r, kh, kw]
    return a + add.reshape(B, qh * W, W * W)
