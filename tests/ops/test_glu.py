"""GLU family against the float64 references in tests/references/glu.py."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

TYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16}
OPS = ["reglu", "geglu", "swiglu", "geglu_erf", "geglu_quick"]
GLU_ID = {"reglu": 0, "geglu": 1, "swiglu": 2, "swiglu_oai": 3, "geglu_erf": 4, "geglu_quick": 5,
          "swiglu_clamp": 6}


def _ctx():
    return gg.Context(mem_size=32 << 20)


def _bound(op, tname):
    b = {"f32": 1e-7, "f16": 1e-6, "bf16": 5e-5}[tname]
    return max(b, 1e-6) if op == "geglu" else b  # ggml's f16 GELU table


def _input(ctx, type_, ne, view, seed, lo=-150.0, hi=150.0):
    """A tensor of shape ne (contiguous, or a padded-row view into a buffer 3x as wide)."""
    rng = np.random.default_rng(seed)
    if not view:
        return new(ctx, type_, ne, rng=rng, lo=lo, hi=hi)
    big, xb = new(ctx, type_, [ne[0] * 3] + list(ne[1:]), rng=rng, lo=lo, hi=hi)
    v = gg.view_4d(ctx, big, ne[0], ne[1], ne[2], ne[3], big.nb[1], big.nb[2], big.nb[3], 0)
    assert not v.is_contiguous()
    return v, xb[..., :ne[0]]


@pytest.mark.parametrize("shape", [[128, 2, 2, 2], [5, 7, 11, 13]])
@pytest.mark.parametrize("view", [False, True])
@pytest.mark.parametrize("tname", list(TYPES))
@pytest.mark.parametrize("op", OPS)
def test_fused_and_swapped(op, tname, view, shape):
    ctx = _ctx()
    a, x = _input(ctx, TYPES[tname], shape, view, seed=hash((op, tname, view)) % 1000)
    r = getattr(gg, op)(ctx, a)
    rs = getattr(gg, op + "_swapped")(ctx, a)
    rg = gg.glu(ctx, a, GLU_ID[op], True)
    compute(ctx, r, rs, rg)
    assert r.op == "GLU" and r.type == a.type
    assert list(r.ne) == [shape[0] // 2] + shape[1:]  # odd ne0: the last element is ignored
    assert r.op_params[:2] == [GLU_ID[op], 0] and rs.op_params[:2] == [GLU_ID[op], 1]
    assert_close(values(r), ref.glu_fused(op, x), _bound(op, tname), op)
    assert_close(values(rs), ref.glu_fused(op, x, swapped=True), _bound(op, tname), op + "_swapped")
    np.testing.assert_array_equal(values(rg), values(rs))


@pytest.mark.parametrize("shape", [[128, 2, 2, 2], [5, 7, 11, 13]])
@pytest.mark.parametrize("view", [False, True])
@pytest.mark.parametrize("tname", list(TYPES))
@pytest.mark.parametrize("op", OPS)
def test_split(op, tname, view, shape):
    ctx = _ctx()
    a, xa = _input(ctx, TYPES[tname], shape, view, seed=1)
    b, xb = _input(ctx, TYPES[tname], shape, view, seed=2)
    r = getattr(gg, op + "_split")(ctx, a, b)
    rg = gg.glu_split(ctx, a, b, GLU_ID[op])
    compute(ctx, r, rg)
    assert list(r.ne) == shape and r.src[1] is not None
    assert_close(values(r), ref.glu_act(op, xa, xb), _bound(op, tname), op + "_split")
    np.testing.assert_array_equal(values(rg), values(r))


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("view", [False, True])
@pytest.mark.parametrize("alpha,limit", [(0.5, 2.0), (1.702, 7.0), (1.702, 2.0), (0.5, 7.0)])
def test_swiglu_oai(alpha, limit, view, split):
    ctx = _ctx()
    shape = [128, 2, 2, 2] if split else [256, 2, 2, 2]
    a, xa = _input(ctx, gg.F32, shape, view, seed=3, lo=-10, hi=10)
    if split:
        b, xb = _input(ctx, gg.F32, shape, view, seed=4, lo=-10, hi=10)
        r = gg.swiglu_oai(ctx, a, b, alpha, limit)
        expected = ref.glu_act("swiglu_oai", xa, xb, alpha=alpha, limit=limit)
    else:
        r = gg.swiglu_oai(ctx, a, None, alpha, limit)
        expected = ref.glu_fused("swiglu_oai", xa, alpha=alpha, limit=limit)
    compute(ctx, r)
    assert r.op_params[0] == 3 and r.op_params[1] == 0
    assert_close(values(r), expected, 1e-7, "swiglu_oai")


@pytest.mark.parametrize("tname", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("view", [False, True])
@pytest.mark.parametrize("limit", [2.0, 10.0])
def test_swiglu_clamp(limit, view, split, tname):
    """Gate values beyond +-limit: the gate is clamped from above only, before SiLU."""
    ctx = _ctx()
    shape = [128, 2, 2, 2] if split else [256, 2, 2, 2]
    a, xa = _input(ctx, TYPES[tname], shape, view, seed=5, lo=-25, hi=25)
    if split:
        b, xb = _input(ctx, TYPES[tname], shape, view, seed=6, lo=-25, hi=25)
        r = gg.swiglu_clamp(ctx, a, b, limit)
        g, u = xa, xb
    else:
        r = gg.swiglu_clamp(ctx, a, None, limit)
        n = shape[0] // 2
        g, u = xa[..., :n], xa[..., n:]
    compute(ctx, r)
    assert r.op_params[0] == 6
    expected = ref.glu_act("swiglu_clamp", g, u, limit=limit)
    assert_close(values(r), expected, {"f32": 1e-7, "f16": 1e-6, "bf16": 5e-5}[tname], "swiglu_clamp")
    # the silu-then-clamp formulation differs wherever silu(gate) exceeds the limit
    alt = np.minimum(ref.silu(g), limit) * np.clip(u, -limit, limit)
    big = ref.silu(g) > limit + 1
    assert np.any(big)
    assert not np.allclose(values(r)[big], alt[big])


def test_swiglu_clamp_exact_points():
    ctx = _ctx()
    g = np.array([20.0, 20.0, -20.0, 3.0, -3.0, 0.5], np.float32)
    u = np.array([1.0, 50.0, 50.0, -50.0, 5.0, 0.25], np.float32)
    a, b = ctx.from_numpy(g), ctx.from_numpy(u)
    r = gg.swiglu_clamp(ctx, a, b, 10.0)
    compute(ctx, r)
    silu = lambda x: x / (1 + np.exp(-x))
    exp = [silu(10.0) * 1, silu(10.0) * 10, silu(-20.0) * 10, silu(3.0) * -10, silu(-3.0) * 5, silu(0.5) * 0.25]
    np.testing.assert_allclose(values(r).ravel(), exp, rtol=1e-6)


def test_generic_constructors_leave_limit_zero():
    """SWIGLU_CLAMP through glu/glu_split gets limit 0: output identically 0."""
    ctx = _ctx()
    a, _ = new(ctx, gg.F32, [16, 3], rng=np.random.default_rng(0), lo=-5, hi=5)
    b, _ = new(ctx, gg.F32, [16, 3], rng=np.random.default_rng(1), lo=-5, hi=5)
    r1 = gg.glu(ctx, a, gg.GluOp.SWIGLU_CLAMP, False)
    r2 = gg.glu_split(ctx, a, b, 6)
    compute(ctx, r1, r2)
    assert r1.op_params[3] == 0 and r2.op_params[3] == 0
    assert np.all(values(r1) == 0) and np.all(values(r2) == 0)


def test_sigmoid_overflow_and_reglu_nan():
    ctx = _ctx()
    g = np.array([-1000.0, 1000.0, -150.0, 150.0, 0.0, -1.0], np.float32)
    u = np.array([2.0, 2.0, 3.0, 3.0, np.nan, np.nan], np.float32)
    a, b = ctx.from_numpy(g), ctx.from_numpy(u)
    rs = gg.swiglu_split(ctx, a, b)
    rr = gg.reglu_split(ctx, a, b)
    compute(ctx, rs, rr)
    s = values(rs).ravel()
    assert np.all(np.isfinite(s[:4]))
    np.testing.assert_allclose(s[:4], [0.0, 2000.0, -150 * 3 / (1 + np.exp(150.0)), 450.0], atol=1e-30)
    # REGLU with a non-positive gate is 0 even when up is NaN
    assert values(rr).ravel()[4] == 0 and values(rr).ravel()[5] == 0


def test_threads_1_vs_2():
    ctx = _ctx()
    a, _ = new(ctx, gg.F32, [64, 33, 3], rng=np.random.default_rng(2), lo=-20, hi=20)
    outs = []
    for nt in (1, 2):
        r = gg.swiglu(ctx, a)
        compute(ctx, r, n_threads=nt)
        outs.append(values(r))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_empty_and_one_element_rows():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [1, 4])  # ne0 = 1: fused output has ne0 = 0
    a.set(np.ones((4, 1), np.float32))
    r = gg.swiglu(ctx, a)
    z = ctx.new_tensor(gg.F32, [8, 0])
    rz = gg.geglu(ctx, z)
    compute(ctx, r, rz)
    assert list(r.ne) == [0, 4, 1, 1] and list(rz.ne) == [4, 0, 1, 1]


def test_errors_and_context_survives():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [8, 4])
    with pytest.raises(TypeError, match="swiglu"):
        gg.swiglu(ctx, ctx.new_tensor(gg.I32, [8, 4]))
    with pytest.raises(TypeError, match="swiglu_split"):
        gg.swiglu_split(ctx, a, ctx.new_tensor(gg.F16, [8, 4]))
    with pytest.raises(ValueError, match="geglu_split"):
        gg.geglu_split(ctx, a, ctx.new_tensor(gg.F32, [8, 5]))
    with pytest.raises(ValueError, match="reglu"):
        gg.reglu(ctx, gg.transpose(ctx, a))  # elements not packed
    with pytest.raises(ValueError, match="swiglu_clamp"):
        gg.swiglu_clamp(ctx, a, None, -1.0)
    with pytest.raises(ValueError, match="glu"):
        gg.glu(ctx, a, 42, False)
    with pytest.raises(TypeError):
        gg.swiglu(ctx, None)
    with pytest.raises(TypeError):
        gg.glu_split(ctx, a, None, 2)
    with pytest.raises(TypeError):
        gg.swiglu_oai(ctx, None, None, 1.0, 1.0)
    a.set(np.arange(32, dtype=np.float32).reshape(4, 8) / 10)
    r = gg.swiglu(ctx, a)
    compute(ctx, r)
    assert_close(values(r), ref.glu_fused("swiglu", values(a)), 1e-7)


def test_named_swapped_forms():
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [10, 3], rng=np.random.default_rng(8), lo=-4, hi=4)
    outs = {"reglu": gg.reglu_swapped(ctx, a), "geglu": gg.geglu_swapped(ctx, a),
            "swiglu": gg.swiglu_swapped(ctx, a), "geglu_erf": gg.geglu_erf_swapped(ctx, a),
            "geglu_quick": gg.geglu_quick_swapped(ctx, a)}
    compute(ctx, *outs.values())
    for op, r in outs.items():
        assert_close(values(r), ref.glu_fused(op, x, swapped=True), _bound(op, "f32"), op)
