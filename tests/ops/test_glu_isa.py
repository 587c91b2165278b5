"""The vectorised GLU rows (every GLU op: the SIMD table of cpu/glu_simd.h) against the scalar table and the float64 references: odd row
lengths (vector body and scalar tail), edge values (+-inf, NaN, exp overflow, values at the
clamp limits), fused and split forms, F32 and F16 storage."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, values

EDGES = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 88.0, 89.0, -88.0, -89.0, -1000.0, 1000.0,
                  7.0, -7.0, 6.999, 1e-30, -3.5], np.float32)


def _data(n, seed, edges):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-12, 12, size=(3, n)).astype(np.float32)
    if edges:
        x.ravel()[:len(EDGES)] = EDGES
        x.ravel()[len(EDGES):2 * len(EDGES)] = EDGES[::-1]
    return x


def _run(level, op, g, u, t, split, alpha=1.702, limit=7.0):
    prev = gg.set_isa(level)
    try:
        ctx = gg.Context(mem_size=16 << 20)
        def put(x):
            a = ctx.new_tensor(t, [x.shape[1], x.shape[0]])
            a.set(x.astype(np.float16 if t == gg.F16 else np.float32))
            return a
        if split:
            a, b = put(g), put(u)
        else:
            a, b = put(np.concatenate([g, u], axis=1)), None
        if op == "swiglu_oai":
            r = gg.swiglu_oai(ctx, a, b, alpha, limit) if split else gg.swiglu_oai(ctx, a, None, alpha, limit)
        elif op == "swiglu_clamp":
            r = gg.swiglu_clamp(ctx, a, b, limit) if split else gg.swiglu_clamp(ctx, a, None, limit)
        else:
            r = getattr(gg, op + "_split")(ctx, a, b) if split else getattr(gg, op)(ctx, a)
        compute(ctx, r)
        return values(r).reshape(g.shape).astype(np.float64)
    finally:
        gg.set_isa(prev)


def _same_special(a, b):
    """NaN where the other is NaN, equal infinities."""
    assert np.array_equal(np.isnan(a), np.isnan(b))
    fin = np.isfinite(a) & np.isfinite(b)
    assert np.array_equal(a[~fin & ~np.isnan(a)], b[~fin & ~np.isnan(b)])
    return fin


@pytest.mark.parametrize("op", ["reglu", "swiglu", "geglu", "geglu_erf", "geglu_quick", "swiglu_oai",
                                "swiglu_clamp"])
@pytest.mark.parametrize("n", [8, 37, 4096])
@pytest.mark.parametrize("tname,split", [("f32", True), ("f32", False), ("f16", True)])
def test_avx2_rows_equal_scalar_rows(op, n, tname, split):
    if gg.isa(detected=True) == "scalar":
        pytest.skip("no AVX2 on this CPU")
    t = {"f32": gg.F32, "f16": gg.F16}[tname]
    edges = n >= 37 and t == gg.F32
    g, u = _data(n, 1, edges), _data(n, 2, edges)
    if t == gg.F16:
        g, u = g.astype(np.float16).astype(np.float32), u.astype(np.float16).astype(np.float32)
    s = _run("scalar", op, g, u, t, split)
    v = _run("avx2", op, g, u, t, split)
    fin = _same_special(v, s)
    assert_close(v[fin], s[fin], 1e-12 if t == gg.F32 else 1e-6, f"{op} avx2 vs scalar")
    if op == "geglu":  # the same f16 table entries: the same bits
        assert np.array_equal(v[fin], s[fin]), "geglu avx2 vs scalar bits"
    if op in ("reglu", "swiglu", "geglu", "geglu_erf", "geglu_quick") and not edges:
        bound = 1e-6 if t == gg.F16 or op == "geglu" else 1e-7
        assert_close(v, ref.glu_act(op, g, u), bound, f"{op} vs reference")


def test_avx2_geglu_erf_pointwise():
    """The vector erf over a dense range (both pieces, their boundary, the saturation at 4,
    tiny values): within 2.5e-7 * |x| of the float64 GELU, as the scalar f32 loop is; u = 1
    and u = -3 (the up factor)."""
    if gg.isa(detected=True) == "scalar":
        pytest.skip("no AVX2 on this CPU")
    x = np.concatenate([np.linspace(-8, 8, 40001), np.sqrt(2) * np.array([1.0, np.nextafter(1, 0), 4.0]),
                        [1e-20, -1e-20, 1e-6, -3e-4]]).astype(np.float32)
    pad = (-len(x)) % 8
    x = np.concatenate([x, np.zeros(pad, np.float32)])[None, :]
    for up in (1.0, -3.0):
        u = np.full_like(x, up)
        want = ref.glu_act("geglu_erf", x, u)
        for level in ("avx2", "scalar"):
            got = _run(level, "geglu_erf", x, u, gg.F32, True)
            err = np.abs(got - want) / np.maximum(np.abs(x.astype(np.float64) * up), 1e-30)
            assert err.max() <= 2.5e-7, f"{level}: worst at x={x.ravel()[err.argmax()]} ({err.max():.2e})"
