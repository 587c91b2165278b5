"""Reference of ROPE. The angles follow ggml's F32 recipe step by step in
float32 (theta_scale**i by repeated F32 multiplication, then /ff, YaRN mix), because at large
positions the angle's own F32 rounding exceeds the test tolerance; cos/sin and the rotation
are float64. Arrays in numpy order (ne3, ne2, ne1, ne0)."""
import numpy as np

NORMAL, NEOX, MROPE, VISION, IMROPE = 0, 2, 8, 24, 40

f32 = np.float32


def _max(a, b):  # a > b ? a : b, IEEE literal
    return np.where(a > b, a, b).astype(np.float32)


def _min(a, b):  # a < b ? a : b
    return np.where(a < b, a, b).astype(np.float32)


def yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow):
    with np.errstate(divide="ignore", invalid="ignore"):
        def corr(n_rot):
            return f32(n_dims) * np.log(f32(n_ctx_orig) / (f32(n_rot) * f32(2) * f32(np.pi))) / (f32(2) * np.log(f32(freq_base)))
        lo = _max(f32(0), np.floor(corr(beta_fast)))
        hi = _min(f32(n_dims - 1), np.ceil(corr(beta_slow)))
    return f32(lo), f32(hi)


def rope_angles(pos, n_tokens, n_dims, mode, n_ctx_orig=0, freq_base=10000.0, freq_scale=1.0,
                ext_factor=0.0, attn_factor=1.0, beta_fast=0.0, beta_slow=0.0, freq_factors=None,
                sections=None):
    """(cos, sin) float64 arrays of shape (n_tokens, n_pairs) with the magnitude factor applied."""
    multi = (mode & MROPE) != 0
    vision = mode == VISION
    n_pairs = n_dims if vision else n_dims // 2
    pos = np.asarray(pos).astype(np.int64)
    theta_scale = np.power(f32(freq_base), f32(-2.0) / f32(n_dims), dtype=np.float32)
    theta = np.zeros((n_tokens, n_pairs), dtype=np.float32)
    if not multi:
        t = pos[:n_tokens].astype(np.float32)
        for i in range(n_pairs):
            theta[:, i] = t
            t = (t * theta_scale).astype(np.float32)
    else:
        s = list(sections)
        sect = sum(s)
        base = [pos[k * n_tokens:(k + 1) * n_tokens].astype(np.float32) for k in range(4)]
        th = [b.copy() for b in base]
        for i in range(n_pairs):
            sector = i % sect
            if vision:
                for k, start in enumerate((0, s[0], s[0] + s[1], s[0] + s[1] + s[2])):
                    if sector == start:
                        th[k] = base[k].copy()
                        break
            if mode == IMROPE:
                if sector % 3 == 1 and sector < 3 * s[1]:
                    k = 1
                elif sector % 3 == 2 and sector < 3 * s[2]:
                    k = 2
                elif sector % 3 == 0 and sector < 3 * s[0]:
                    k = 0
                else:
                    k = 3
            else:
                k = 0 if sector < s[0] else 1 if sector < s[0] + s[1] else 2 if sector < s[0] + s[1] + s[2] else 3
            theta[:, i] = th[k]
            th = [(x * theta_scale).astype(np.float32) for x in th]
    ff = np.ones(n_pairs, dtype=np.float32) if freq_factors is None else np.asarray(freq_factors, dtype=np.float32)[:n_pairs]
    theta_ext = (theta / ff).astype(np.float32)
    theta_int = (f32(freq_scale) * theta_ext).astype(np.float32)
    mscale = f32(attn_factor)
    if ext_factor != 0.0:
        lo, hi = yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            y = ((np.arange(n_pairs, dtype=np.float32) - lo) / _max(f32(0.001), f32(hi - lo))).astype(np.float32)
            ramp = (f32(1) - _min(f32(1), _max(f32(0), y))).astype(np.float32)
        mix = (ramp * f32(ext_factor)).astype(np.float32)
        ang = (theta_int * (f32(1) - mix) + theta_ext * mix).astype(np.float32)
        mscale = f32(mscale * (f32(1) + f32(0.1) * np.log(f32(1) / f32(freq_scale))))
    else:
        ang = theta_int
    ang = ang.astype(np.float64)
    return np.cos(ang) * float(mscale), np.sin(ang) * float(mscale)


def rope(x, pos, n_dims, mode, n_ctx_orig=0, freq_base=10000.0, freq_scale=1.0, ext_factor=0.0,
         attn_factor=1.0, beta_fast=0.0, beta_slow=0.0, freq_factors=None, sections=None, n_offs=0,
         backward=False):
    """x: (ne3, ne2, ne1, ne0); positions by dim 2 (numpy axis 1)."""
    x = np.asarray(x, dtype=np.float64)
    ne3, ne2, ne1, ne0 = x.shape
    c, s = rope_angles(pos, ne2, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                       attn_factor, beta_fast, beta_slow, freq_factors, sections)
    if backward:
        s = -s
    c = c[None, :, None, :]
    s = s[None, :, None, :]
    out = x.copy()
    if mode == VISION:
        i0, i1 = np.arange(n_dims), np.arange(n_dims) + n_dims
    elif mode == NORMAL:
        i0 = n_offs + 2 * np.arange(n_dims // 2)
        i1 = i0 + 1
    else:
        i0 = n_offs + np.arange(n_dims // 2)
        i1 = i0 + n_dims // 2
    x0, x1 = x[..., i0], x[..., i1]
    out[..., i0] = x0 * c - x1 * s
    out[..., i1] = x0 * s + x1 * c
    return out
