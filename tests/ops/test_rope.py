"""ROPE against the reference: every mode, partial rotation (tail copied), the
n_offs window, freq_factors, YaRN (incl. n_ctx_orig = 0), large positions, multi-stream
positions, backward, F16, offset views, in-place, op_params layout, errors."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

NORMAL, NEOX, MROPE, VISION, IMROPE = 0, 2, 8, 24, 40
from util import SIMD_LEVELS as SIMD  # the `simd` fixture lives in conftest.py



def _ctx():
    return gg.Context(mem_size=128 << 20)


def _f16(x):
    return np.asarray(x, np.float64).astype(np.float16).astype(np.float64)


def run_rope(ne, n_dims, mode, *, type_=gg.F32, sections=None, n_ctx_orig=0, freq_base=10000.0,
             freq_scale=1.0, ext_factor=0.0, attn_factor=1.0, beta_fast=32.0, beta_slow=1.0,
             freq_factors=False, back=False, n_offs=0, pos=None, inplace=False, seed=0, n_threads=2):
    rng = np.random.default_rng(seed)
    ctx = _ctx()
    a, x = new(ctx, type_, ne, rng=rng)
    ne2 = ne[2] if len(ne) > 2 else 1
    multi = (mode & MROPE) != 0
    if pos is None:
        pos = rng.integers(0, 512, size=(4 if multi else 1) * ne2)
    b, _ = new(ctx, gg.I32, [len(pos)], data=np.asarray(pos, np.int32))
    c = fv = None
    if freq_factors:
        c, fv = new(ctx, gg.F32, [n_dims if mode == VISION else n_dims // 2], rng=rng, lo=0.8, hi=1.6)
        fv = fv.ravel()
    args = (n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow)
    if multi:
        fn = gg.rope_multi_back if back else (gg.rope_multi_inplace if inplace else gg.rope_multi)
        r = fn(ctx, a, b, c, n_dims, list(sections), mode, *args)
    else:
        fn = gg.rope_ext_back if back else (gg.rope_ext_inplace if inplace else gg.rope_ext)
        r = fn(ctx, a, b, c, n_dims, mode, *args)
    if n_offs:
        assert gg.rope_set_offset(r, n_offs) is r
    compute(ctx, r, n_threads=n_threads)
    want = ref.rope(x, pos, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                    beta_fast, beta_slow, fv, sections, n_offs, back)
    if type_ == gg.F16:
        want = _f16(want)
    return r, values(r), want, x, a


# ---- the peer grid: {F32,F16} x fwd/back x freq_scale x ext_factor x attn_factor x ff ----
SHAPES = [
    ("llama", [128, 4, 3], 128, NORMAL, None),
    ("neox20", [80, 6, 2], 20, NEOX, None),
    ("neox64", [64, 5, 2], 64, NEOX, None),
    ("mrope", [128, 3, 2], 128, MROPE, [21, 21, 21, 0]),
    ("imrope", [128, 3, 2], 32, IMROPE, [5, 5, 5, 0]),
    ("vision", [80, 4, 2], 40, VISION, [10, 10, 10, 10]),
]


@pytest.mark.parametrize("ff", [False, True])
@pytest.mark.parametrize("attn_factor", [1.0, 1.4245])
@pytest.mark.parametrize("ext_factor", [0.0, 0.7465])
@pytest.mark.parametrize("freq_scale", [1.0, 1.4245])
@pytest.mark.parametrize("back", [False, True])
@pytest.mark.parametrize("type_", [gg.F32, gg.F16], ids=["f32", "f16"])
@pytest.mark.parametrize("shape", SHAPES, ids=[s[0] for s in SHAPES])
def test_peer_grid(shape, type_, back, freq_scale, ext_factor, attn_factor, ff):
    _, ne, n_dims, mode, sections = shape
    r, got, want, _, _ = run_rope(ne, n_dims, mode, type_=type_, sections=sections, freq_scale=freq_scale,
                                  ext_factor=ext_factor, attn_factor=attn_factor, freq_factors=ff, back=back,
                                  seed=n_dims)
    assert r.op == "ROPE" and list(r.ne)[:len(ne)] == ne and r.type == type_
    assert_close(got, want, 1e-7)


@pytest.mark.parametrize("simd", SIMD, indirect=True)
@pytest.mark.parametrize("mode,ne,n_dims,sections", [
    (NORMAL, [18, 3, 4], 18, None), (NORMAL, [40, 2, 3], 34, None), (NEOX, [38, 3, 2], 38, None),
    (NEOX, [70, 2, 2], 66, None), (MROPE, [40, 2, 3], 36, [6, 6, 6, 0]), (IMROPE, [40, 2, 3], 36, [6, 6, 6, 0]),
    (VISION, [36, 2, 3], 18, [5, 4, 0, 0])])
def test_simd_paths_and_tail(simd, mode, ne, n_dims, sections):
    """Odd pair counts (vector tails); n_dims < ne0 leaves the tail unchanged (bit exact)."""
    for type_ in (gg.F32, gg.F16):
        _, got, want, x, _ = run_rope(ne, n_dims, mode, type_=type_, sections=sections, ext_factor=0.5,
                                      freq_scale=0.5, n_ctx_orig=64)
        assert_close(got, want, 1e-7, f"{simd}/{type_}")
        if mode != VISION:
            np.testing.assert_array_equal(got[..., n_dims:], x[..., n_dims:])


@pytest.mark.parametrize("mode,n_dims,sections", [(NORMAL, 32, None), (NEOX, 32, None),
                                                  (MROPE, 24, [4, 4, 4, 0]), (IMROPE, 24, [4, 4, 4, 0])])
def test_offset_window(mode, n_dims, sections):
    ne = [96, 3, 4]
    r, got, want, x, _ = run_rope(ne, n_dims, mode, sections=sections, n_offs=32, seed=4)
    assert r.op_params[15] == 32
    assert_close(got, want, 1e-7)
    np.testing.assert_array_equal(got[..., :32], x[..., :32])
    np.testing.assert_array_equal(got[..., 32 + n_dims:], x[..., 32 + n_dims:])
    # trailing window (dsv4 rope_tail)
    _, got, want, x, _ = run_rope(ne, n_dims, mode, sections=sections, n_offs=96 - n_dims, seed=5)
    assert_close(got, want, 1e-7)
    np.testing.assert_array_equal(got[..., :96 - n_dims], x[..., :96 - n_dims])


@pytest.mark.parametrize("mode", [NORMAL, NEOX])
@pytest.mark.parametrize("n_ctx_orig,beta_fast,beta_slow", [(0, 32.0, 1.0), (4096, 32.0, 1.0), (2048, 16.0, 2.0)])
def test_yarn(mode, n_ctx_orig, beta_fast, beta_slow):
    for fs, ef, af in [(0.25, 1.0, 1.0), (1.4245, 0.7465, 1.4245), (0.5, 0.3, 1.0)]:
        _, got, want, _, _ = run_rope([64, 3, 5], 64, mode, n_ctx_orig=n_ctx_orig, freq_base=500000.0,
                                      freq_scale=fs, ext_factor=ef, attn_factor=af, beta_fast=beta_fast,
                                      beta_slow=beta_slow, freq_factors=True, seed=7)
        assert_close(got, want, 1e-7, f"fs={fs} ef={ef}")


def test_yarn_n_ctx_orig_zero_edge():
    """n_ctx_orig = 0: corr dims (0, -inf): only pair 0 is extrapolated."""
    lo, hi = ref.yarn_corr_dims(64, 0, 10000.0, 32.0, 1.0)
    assert lo == 0.0 and hi == -np.inf
    # with ext_factor = 1 pair 0 uses theta_ext, the others theta_int (freq_scale * theta_ext)
    pos = np.array([3, 100], np.int32)
    c, s = ref.rope_angles(pos, 2, 64, NEOX, 0, 10000.0, 0.5, 1.0, 1.0, 32.0, 1.0)
    m = 1.0 + 0.1 * np.log(2.0)
    assert np.allclose(c[:, 0], np.cos(pos.astype(np.float64)) * m, rtol=1e-6)
    assert np.allclose(c[:, 1], np.cos(0.5 * pos * 10000.0 ** (-2 / 64)) * m, rtol=1e-5)
    _, got, want, _, _ = run_rope([64, 2, 2], 64, NEOX, pos=pos, n_ctx_orig=0, freq_scale=0.5, ext_factor=1.0)
    assert_close(got, want, 1e-7)


@pytest.mark.parametrize("mode", [NORMAL, NEOX])
def test_large_positions(mode):
    pos = np.array([0, 1, 8191, 8192, 10000, 65535, 500000, 1_000_000_000], np.int32)  # last: libm fallback
    _, got, want, x, _ = run_rope([128, 4, 8], 128, mode, pos=pos, freq_base=10000.0)
    assert_close(got, want, 1e-7)
    # position 0 is the identity
    np.testing.assert_array_equal(got[:, 0], x[:, 0])


@pytest.mark.parametrize("mode,sections", [(MROPE, [8, 12, 12, 0]), (IMROPE, [11, 11, 10, 0]),
                                           (MROPE, [10, 10, 8, 4]), (IMROPE, [8, 8, 8, 8]),
                                           (VISION, [16, 16, 0, 0]), (VISION, [8, 8, 8, 8])])
def test_multi_unequal_streams(mode, sections):
    ne2 = 5
    rng = np.random.default_rng(9)
    pos = np.concatenate([rng.integers(0, 300, ne2), rng.integers(0, 40, ne2), rng.integers(1000, 9000, ne2),
                          rng.integers(0, 7, ne2)])
    ne0 = 64 if mode != VISION else 64
    n_dims = 64 if mode != VISION else 32
    for ff in (False, True):
        _, got, want, _, _ = run_rope([ne0, 3, ne2], n_dims, mode, sections=sections, pos=pos, freq_factors=ff,
                                      ext_factor=0.5, freq_scale=0.7, n_ctx_orig=128)
        assert_close(got, want, 1e-7)


def test_mrope_text_positions_equal_neox():
    """Equal t/h/w streams, sections[3] == 0: MROPE equals NEOX."""
    ne2 = 6
    p = np.arange(ne2) * 7 + 3
    pos = np.concatenate([p, p, p, np.zeros(ne2, int)])
    _, got_m, _, _, _ = run_rope([64, 2, ne2], 64, MROPE, sections=[12, 10, 10, 0], pos=pos, seed=1)
    _, got_n, _, _, _ = run_rope([64, 2, ne2], 64, NEOX, pos=p, seed=1)
    np.testing.assert_array_equal(got_m, got_n)


@pytest.mark.parametrize("mode,sections", [(NORMAL, None), (NEOX, None), (MROPE, [8, 12, 12, 0]),
                                           (VISION, [16, 16, 0, 0])])
def test_back_inverts_forward(mode, sections):
    ctx = _ctx()
    ne2 = 4
    a, x = new(ctx, gg.F32, [64, 3, ne2], rng=np.random.default_rng(2))
    multi = (mode & MROPE) != 0
    pos = np.random.default_rng(3).integers(0, 10000, (4 if multi else 1) * ne2).astype(np.int32)
    b, _ = new(ctx, gg.I32, [len(pos)], data=pos)
    n_dims = 32 if mode == VISION else 64
    args = (0, 10000.0, 1.0, 0.0, 1.0, 0.0, 0.0)
    if multi:
        y = gg.rope_multi(ctx, a, b, None, n_dims, sections, mode, *args)
        z = gg.rope_multi_back(ctx, y, b, None, n_dims, sections, mode, *args)
    else:
        y = gg.rope_ext(ctx, a, b, None, n_dims, mode, *args)
        z = gg.rope_ext_back(ctx, y, b, None, n_dims, mode, *args)
    assert z.op == "ROPE" and z.op_params[0] == 1 and y.op_params[0] == 0
    compute(ctx, z)
    assert_close(values(z), x, 1e-12)


@pytest.mark.parametrize("type_", [gg.F32, gg.F16], ids=["f32", "f16"])
@pytest.mark.parametrize("mode,sections", [(NORMAL, None), (NEOX, None), (MROPE, [6, 5, 5, 0]),
                                           (IMROPE, [6, 5, 5, 0]), (VISION, [4, 4, 4, 4])])
def test_dim0_offset_view(type_, mode, sections):
    """a is a view starting inside dim 0 of a bigger tensor (padded row strides, offset)."""
    ctx = _ctx()
    big, xb = new(ctx, type_, [36, 16, 41], rng=np.random.default_rng(8))
    es = gg.type_size(type_)
    v = gg.view_3d(ctx, big, 32, 16, 41, big.nb[1], big.nb[2], 4 * es)
    x = xb[..., 4:36]
    n_dims = 16 if mode == VISION else 32
    multi = (mode & MROPE) != 0
    pos = np.random.default_rng(1).integers(0, 2000, (4 if multi else 1) * 41).astype(np.int32)
    b, _ = new(ctx, gg.I32, [len(pos)], data=pos)
    args = (0, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0)
    if multi:
        r = gg.rope_multi(ctx, v, b, None, n_dims, sections, mode, *args)
    else:
        r = gg.rope_ext(ctx, v, b, None, n_dims, mode, *args)
    compute(ctx, r)
    want = ref.rope(x, pos, n_dims, mode, *args, None, sections)
    if type_ == gg.F16:
        want = _f16(want)
    assert_close(values(r), want, 1e-7)


@pytest.mark.parametrize("type_", [gg.F32, gg.F16], ids=["f32", "f16"])
@pytest.mark.parametrize("mode,sections", [(NORMAL, None), (NEOX, None), (IMROPE, [4, 4, 4, 0])])
def test_inplace(type_, mode, sections):
    ne = [40, 3, 5, 3]  # ne3 = 3
    r, got, want, _, a = run_rope(ne, 24 if mode != NORMAL else 40, mode, type_=type_, sections=sections,
                                  inplace=True, ext_factor=0.2, freq_scale=0.9, n_ctx_orig=100, seed=6)
    assert r.data_ptr == a.data_ptr
    assert_close(got, want, 1e-7)
    assert_close(values(a), want, 1e-7, "a overwritten")


def test_rope_plain_and_threads():
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [64, 7, 11, 2], rng=np.random.default_rng(1))
    pos = np.arange(11, dtype=np.int32) * 3
    b, _ = new(ctx, gg.I32, [11], data=pos)
    r = gg.rope(ctx, a, b, 48, NEOX)
    r_i = gg.rope_inplace(ctx, gg.dup(ctx, a), b, 48, NEOX)
    outs = []
    for nt in (1, 2, 3):
        compute(ctx, r, r_i, n_threads=nt)
        outs.append(values(r).copy())
        np.testing.assert_array_equal(values(r_i), outs[-1])
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
    assert_close(outs[0], ref.rope(x, pos, 48, NEOX), 1e-7)


def test_op_params_layout():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [64, 2, 3])
    b = ctx.new_tensor(gg.I32, [12])
    r = gg.rope_multi(ctx, a, b, None, 48, [4, 8, 12, 0], IMROPE, 4096, 500000.0, 0.5, 1.0, 1.25, 32.0, 1.0)
    p = np.array(r.op_params, np.int32)
    f = p.view(np.float32)
    assert p[0] == 0 and p[1] == 48 and p[2] == IMROPE and p[3] == 0 and p[4] == 4096
    assert f[5:11].tolist() == [500000.0, 0.5, 1.0, 1.25, 32.0, 1.0]
    assert p[11:15].tolist() == [4, 8, 12, 0] and p[15] == 0
    gg.rope_set_offset(r, 16)
    assert r.op_params[15] == 16
    r2 = gg.rope_ext(ctx, a, ctx.new_tensor(gg.I32, [3]), None, 64, NEOX, 0, 10000.0, 1.0, 0.0, 1.0, 0.0, 0.0)
    assert np.array(r2.op_params, np.int32)[11:16].tolist() == [0, 0, 0, 0, 0]
    assert len(r2.src) == 2 and r2.src[0].data_ptr == a.data_ptr


def test_errors():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [64, 2, 3])
    b = ctx.new_tensor(gg.I32, [3])
    b4 = ctx.new_tensor(gg.I32, [12])
    args = (0, 10000.0, 1.0, 0.0, 1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="rope_ext"):
        gg.rope_ext(ctx, a, b, None, 64, 1, *args)          # mode & 1
    with pytest.raises(ValueError, match="rope_ext"):
        gg.rope_ext(ctx, a, b, None, 63, NEOX, *args)       # odd n_dims
    with pytest.raises(ValueError, match="rope_ext"):
        gg.rope_ext(ctx, a, b, None, 66, NEOX, *args)       # n_dims > ne0
    with pytest.raises(ValueError, match="rope_ext"):
        gg.rope_ext(ctx, a, b4, None, 64, NEOX, *args)      # wrong number of positions
    with pytest.raises(ValueError, match="rope_ext"):
        gg.rope_ext(ctx, a, b, None, 64, MROPE, *args)      # multi mode without sections
    with pytest.raises(TypeError, match="rope_ext"):
        gg.rope_ext(ctx, a, ctx.new_tensor(gg.F32, [3]), None, 64, NEOX, *args)
    with pytest.raises(TypeError, match="rope_ext"):
        gg.rope_ext(ctx, ctx.new_tensor(gg.BF16, [64, 2, 3]), b, None, 64, NEOX, *args)
    with pytest.raises(TypeError, match="rope_ext"):
        gg.rope_ext(ctx, a, None, None, 64, NEOX, *args)
    with pytest.raises(ValueError, match="rope_ext"):
        gg.rope_ext(ctx, a, b, ctx.new_tensor(gg.F32, [31]), 64, NEOX, *args)  # freq_factors too short
    with pytest.raises(ValueError, match="rope_ext"):
        gg.rope_ext(ctx, gg.transpose(ctx, a), b, None, 2, NEOX, *args)       # strided rows
    with pytest.raises(ValueError, match="rope_multi"):
        gg.rope_multi(ctx, a, b4, None, 64, [0, 0, 0, 4], MROPE, *args)      # empty t/h/w sections
    with pytest.raises(ValueError, match="rope_multi"):
        gg.rope_multi(ctx, a, b4, None, 64, [-1, 4, 4, 0], MROPE, *args)
    with pytest.raises(ValueError, match="VISION"):
        gg.rope_multi(ctx, a, b4, None, 64, [8, 8, 0, 0], VISION, *args)     # n_dims != ne0/2
    with pytest.raises(ValueError, match="rope_multi"):
        gg.rope_multi(ctx, a, b4, None, 32, [8, 8, 0], VISION, *args)        # 3 sections
    r = gg.rope_ext(ctx, a, b, None, 32, NEOX, *args)
    for bad in (-2, 3, 34):
        with pytest.raises(ValueError, match="rope_set_offset"):
            gg.rope_set_offset(r, bad)
    rv = gg.rope_multi(ctx, a, b4, None, 32, [8, 8, 0, 0], VISION, *args)
    with pytest.raises(ValueError, match="VISION"):
        gg.rope_set_offset(rv, 2)
    with pytest.raises(TypeError, match="rope_set_offset"):
        gg.rope_set_offset(a, 2)
    # the context still works
    _, got, want, _, _ = run_rope([16, 2, 3], 16, NORMAL)
    assert_close(got, want, 1e-7)
    x, xv = new(ctx, gg.F32, [8, 1, 3])
    bb, _ = new(ctx, gg.I32, [3], data=np.array([1, 2, 3], np.int32))
    rr = gg.rope(ctx, x, bb, 8, NORMAL)
    compute(ctx, rr)
    assert_close(values(rr), ref.rope(xv, [1, 2, 3], 8, NORMAL), 1e-7)


def test_nodes_sharing_positions_each_match_the_reference():
    """One graph of rope nodes over the same positions, differing in exactly one parameter each
    (mode, n_dims, base, scale, YaRN, sections, backward, freq factors), then the positions
    changed and the graph computed again: each thread keeps the (cos, sin) rows of the tokens
    it rotated, and a row may only be reused for the same parameters and positions."""
    rng = np.random.default_rng(12)
    ctx = _ctx()
    T = 37
    x = rng.uniform(-1, 1, size=(1, T, 6, 32)).astype(np.float32)
    a = ctx.from_numpy(x)
    pos = ctx.new_tensor(gg.I32, [T])
    pos4 = ctx.new_tensor(gg.I32, [4 * T])
    ffv = rng.uniform(0.8, 1.6, size=16).astype(np.float32)
    ff = ctx.from_numpy(ffv)
    base = dict(n_dims=32, mode=NORMAL, n_ctx_orig=4096, freq_base=10000.0, freq_scale=1.0,
                ext_factor=0.0, attn_factor=1.0, beta_fast=32.0, beta_slow=1.0)
    # equal neighbours reuse rows within a compute; the first node meets the rows of the last
    # one (same parameters) in the next compute, after the positions changed
    mrope = dict(mode=MROPE, sections=[4, 4, 4, 4])
    variants = [mrope, mrope, {}, {}, dict(mode=NEOX), dict(n_dims=16), dict(freq_base=500.0),
                dict(freq_scale=0.25), dict(ext_factor=1.0), dict(attn_factor=0.5),
                dict(back=True), dict(ff=True), dict(mode=MROPE, sections=[8, 4, 2, 2]), mrope]
    nodes = []
    for v in variants:
        kw = dict(base)
        kw.update({k: val for k, val in v.items() if k in base})
        args = (kw["n_ctx_orig"], kw["freq_base"], kw["freq_scale"], kw["ext_factor"],
                kw["attn_factor"], kw["beta_fast"], kw["beta_slow"])
        c = ff if v.get("ff") else None
        if "sections" in v:
            r = gg.rope_multi(ctx, a, pos4, c, kw["n_dims"], v["sections"], kw["mode"], *args)
        else:
            fn = gg.rope_ext_back if v.get("back") else gg.rope_ext
            r = fn(ctx, a, pos, c, kw["n_dims"], kw["mode"], *args)
        nodes.append((r, kw, v))
    g = gg.Graph(ctx)
    for r, _, _ in nodes:
        g.build_forward_expand(r)
    for step in range(3):
        p = rng.integers(0, 3000, size=T).astype(np.int32)
        if step == 2:
            p[:20] = pos.numpy()[:20]      # some tokens keep their positions, some move
        # the other M-RoPE streams move at every step, also where the first one stays
        p4 = np.concatenate([p, (p * 3 + step) % 1000, (p * 7) % 1000, p // 2]).astype(np.int32)
        pos.numpy()[...] = p
        pos4.numpy()[...] = p4
        for n_threads in (1, 3):
            g.compute(n_threads)
            for r, kw, v in nodes:
                multi = "sections" in v
                want = ref.rope(x, p4 if multi else p, kw["n_dims"], kw["mode"], kw["n_ctx_orig"],
                                kw["freq_base"], kw["freq_scale"], kw["ext_factor"],
                                kw["attn_factor"], kw["beta_fast"], kw["beta_slow"],
                                ffv if v.get("ff") else None, v.get("sections"), 0,
                                v.get("back", False))
                assert_close(values(r), want, 1e-10, f"rope {v} step {step} t{n_threads}")
