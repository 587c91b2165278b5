"""UNARY (every named op, + _inplace, and xielu), SQR, SQRT, LOG, SIN, COS and LEAKY_RELU against float64 references rounded to the storage type."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from references.numerics import round_to
from util import assert_close, compute, new, values

NAMED = ["abs", "sgn", "neg", "step", "tanh", "elu", "relu", "sigmoid", "gelu", "gelu_quick", "silu",
         "hardswish", "hardsigmoid", "exp", "expm1", "softplus", "gelu_erf", "floor", "ceil", "round",
         "trunc", "sqr", "sqrt", "log", "sin", "cos"]
UNARY_ID = {"abs": 0, "sgn": 1, "neg": 2, "step": 3, "tanh": 4, "elu": 5, "relu": 6, "sigmoid": 7,
            "gelu": 8, "gelu_quick": 9, "silu": 10, "hardswish": 11, "hardsigmoid": 12, "exp": 13,
            "expm1": 14, "softplus": 15, "gelu_erf": 16, "floor": 18, "ceil": 19, "round": 20, "trunc": 21}
TYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16}
INPLACE = {"log": "log_inplace", "sin": "sin_inplace", "cos": "cos_inplace"}  # their own ops in ggml


def _ctx():
    return gg.Context(mem_size=64 << 20)


def _range(op, tname):
    if op in ("sqrt", "log"):
        return 0.0, 150.0
    if op in ("sin", "cos"):
        return -20.0, 20.0  # f32 sinf/cosf of large arguments differ from float64 in the last bits
    if tname == "f16" and op in ("exp", "expm1"):
        return -10.0, 10.0  # exp(150) does not fit f16 (peer suite uses [-10, 10])
    return -150.0, 150.0


def _bound(op, tname):
    b = {"f32": 1e-7, "f16": 1e-6, "bf16": 5e-5}[tname]
    return max(b, 1e-6) if op == "gelu" else b  # ggml's f16 GELU table


def _expected(op, x, tname):
    with np.errstate(over="ignore"):  # exp(150) rounds to inf in the storage type, as computed
        return round_to(ref.unary(op, x), tname).astype(np.float64)


def _input(ctx, t, ne, view, seed, lo, hi):
    rng = np.random.default_rng(seed)
    if not view:
        return new(ctx, t, ne, rng=rng, lo=lo, hi=hi)
    big, xb = new(ctx, t, [ne[0] + 3] + ne[1:], rng=rng, lo=lo, hi=hi)
    v = gg.view_4d(ctx, big, ne[0], ne[1], ne[2], ne[3], big.nb[1], big.nb[2], big.nb[3], 2 * big.nb[0])
    return v, xb[..., 2:2 + ne[0]]


@pytest.mark.parametrize("view", [False, True])
@pytest.mark.parametrize("tname", list(TYPES))
@pytest.mark.parametrize("op", NAMED)
def test_named_unary(op, tname, view):
    ctx = _ctx()
    lo, hi = _range(op, tname)
    shape = [5, 7, 11, 13] if view else [128, 2, 2, 2]
    a, x = _input(ctx, TYPES[tname], shape, view, seed=len(op), lo=lo, hi=hi)
    r = getattr(gg, op)(ctx, a)
    compute(ctx, r)
    assert r.type == a.type and list(r.ne) == shape and r.is_contiguous()
    assert r.op == ("UNARY" if op in UNARY_ID else op.upper())
    if op in UNARY_ID:
        assert r.op_params[0] == UNARY_ID[op]
    assert_close(values(r), _expected(op, x, tname), _bound(op, tname), op)


@pytest.mark.parametrize("tname", list(TYPES))
@pytest.mark.parametrize("op", NAMED)
def test_inplace(op, tname):
    ctx = _ctx()
    lo, hi = _range(op, tname)
    a, x = _input(ctx, TYPES[tname], [9, 4, 3, 1], True, seed=3, lo=lo, hi=hi)
    r = getattr(gg, INPLACE.get(op, op + "_inplace"))(ctx, a)
    assert r.data_ptr == a.data_ptr and list(r.nb) == list(a.nb)
    compute(ctx, r)
    assert_close(values(a), _expected(op, x, tname), _bound(op, tname), op + "_inplace")


def test_generic_unary_with_int_and_enum():
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [16, 2], rng=np.random.default_rng(0), lo=-5, hi=5)
    r1 = gg.unary(ctx, a, gg.UnaryOp.SILU)
    r2 = gg.unary(ctx, a, 10)
    r3 = gg.unary_inplace(ctx, gg.dup(ctx, a) if hasattr(gg, "dup") else a, 6)
    compute(ctx, r1, r2, r3)
    assert_close(values(r1), ref.unary("silu", x))
    np.testing.assert_array_equal(values(r1), values(r2))
    assert_close(values(r3), ref.unary("relu", x))


def test_edge_values():
    ctx = _ctx()
    x = np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, 19.9, 20.0, 20.1, 100.0, -100.0], np.float32)
    a = ctx.from_numpy(x)
    relu, sp, sg, ex, si = gg.relu(ctx, a), gg.softplus(ctx, a), gg.sigmoid(ctx, a), gg.exp(ctx, a), gg.silu(ctx, a)
    compute(ctx, relu, sp, sg, ex, si)
    r = values(relu).ravel()
    assert r[0] == 0 and r[1] == 0 and not np.signbit(r[1])  # relu(NaN) = 0, relu(-0) = +0
    s = values(sp).ravel()
    assert s[7] == np.float32(20.1) and s[8] == 100.0  # softplus passes x through above 20
    np.testing.assert_allclose(s[5:7], np.log1p(np.exp(x[5:7].astype(np.float64))), rtol=1e-6)
    assert s[9] >= 0 and s[9] < 1e-40
    g = values(sg).ravel()
    assert g[3] == 0 and g[4] == 1 and g[8] == 1 and 0 <= g[9] < 1e-40  # saturates cleanly
    e = values(ex).ravel()
    assert e[4] == np.inf and e[3] == 0 and e[8] == np.inf  # exp(100) overflows f32
    si_v = values(si).ravel()
    assert np.isfinite(si_v[8]) and si_v[9] <= 0


def test_threads_1_vs_2():
    ctx = _ctx()
    a, _ = new(ctx, gg.BF16, [77, 31], rng=np.random.default_rng(4), lo=-10, hi=10)
    res = []
    for nt in (1, 2):
        r = gg.gelu(ctx, a)
        compute(ctx, r, n_threads=nt)
        res.append(values(r))
    np.testing.assert_array_equal(res[0], res[1])


@pytest.mark.parametrize("op", ["silu", "sqr", "sqrt", "relu_inplace", "unary"])
def test_errors_and_context_survives(op):
    ctx = _ctx()
    f = getattr(gg, op)
    extra = (10,) if op == "unary" else ()
    with pytest.raises(TypeError, match=op):
        f(ctx, ctx.new_tensor(gg.I32, [4]), *extra)
    a = ctx.new_tensor(gg.F32, [4, 3])
    with pytest.raises(ValueError, match=op):
        f(ctx, gg.transpose(ctx, a), *extra)  # rows not packed
    with pytest.raises(TypeError):
        f(ctx, None, *extra)
    if op == "unary":
        with pytest.raises(NotImplementedError, match="unary"):
            gg.unary(ctx, a, 17)  # XIELU is not supported
        with pytest.raises(NotImplementedError, match="unary"):
            gg.unary(ctx, a, 99)
    a.set(np.full((3, 4), 4.0, np.float32))
    r = f(ctx, a, *extra)
    compute(ctx, r)
    assert np.isfinite(values(r)).all()


def test_sqr_sqrt_inplace_named():
    ctx = _ctx()
    a, x = new(ctx, gg.F32, [8, 2], rng=np.random.default_rng(9), lo=0, hi=10)
    t = gg.sqrt_inplace(ctx, gg.sqr_inplace(ctx, a))
    compute(ctx, t)
    assert_close(values(a), x, 1e-7)


def test_all_22_unary_sub_ops_are_bound():
    """Every ggml_unary_op has its named constructor, numbered as ggml numbers it."""
    names = {**UNARY_ID, "xielu": 17}
    assert sorted(names.values()) == list(range(22))
    for name, op_id in names.items():
        assert hasattr(gg, name), name
        assert int(getattr(gg.UnaryOp, name.upper())) == op_id


def test_log_sin_cos_edges():
    ctx = _ctx()
    x = np.array([0.0, -0.0, -1.0, np.inf, 1.0, np.pi, -np.pi / 2, 1e-30], np.float32)
    a = ctx.from_numpy(x)
    lg, sn, cs = gg.log(ctx, a), gg.sin(ctx, a), gg.cos(ctx, a)
    compute(ctx, lg, sn, cs)
    lv = values(lg).ravel()
    assert lv[0] == -np.inf and lv[1] == -np.inf and np.isnan(lv[2]) and lv[3] == np.inf and lv[4] == 0
    assert np.isnan(values(sn).ravel()[3]) and np.isnan(values(cs).ravel()[3])  # sin(inf) = NaN
    fin = np.isfinite(x)
    np.testing.assert_allclose(values(sn).ravel()[fin], np.sin(x[fin].astype(np.float64)), atol=2e-7)
    np.testing.assert_allclose(values(cs).ravel()[fin], np.cos(x[fin].astype(np.float64)), atol=2e-7)


@pytest.mark.parametrize("tname", list(TYPES))
@pytest.mark.parametrize("slope", [0.01, 0.0, -0.5, 1.5])
def test_leaky_relu(slope, tname):
    ctx = _ctx()
    a, x = _input(ctx, TYPES[tname], [37, 3, 5, 1], True, seed=11, lo=-4, hi=4)
    r = gg.leaky_relu(ctx, a, slope, False)
    compute(ctx, r)
    assert r.op == "LEAKY_RELU" and r.type == a.type and r.is_contiguous()
    want = round_to(ref.leaky_relu(x, slope), tname).astype(np.float64)
    assert_close(values(r), want, {"f32": 1e-7, "f16": 1e-6, "bf16": 5e-5}[tname], "leaky_relu")


def test_leaky_relu_inplace_and_signed_zero():
    ctx = _ctx()
    x = np.array([[-2.0, -0.0, 0.0, 3.0, -np.inf, np.inf]], np.float32)
    a = ctx.from_numpy(x)
    r = gg.leaky_relu(ctx, a, 0.25, True)
    assert r.data_ptr == a.data_ptr
    compute(ctx, r)
    got = values(a).ravel()
    np.testing.assert_array_equal(got, [-0.5, 0.0, 0.0, 3.0, -np.inf, np.inf])
    with pytest.raises(TypeError, match="leaky_relu"):
        gg.leaky_relu(ctx, ctx.new_tensor(gg.I32, [4]), 0.1, False)


@pytest.mark.parametrize("tname", list(TYPES))
@pytest.mark.parametrize("params", [(4.0, 20.0, 0.5, 1e-7), (0.8, 0.8, 0.5, -1e-6), (25.0, -3.0, 0.0, 0.1)])
def test_xielu(params, tname):
    ctx = _ctx()
    a, x = _input(ctx, TYPES[tname], [41, 3, 2, 1], True, seed=5, lo=-6, hi=6)
    r = gg.xielu(ctx, a, *params)
    compute(ctx, r)
    assert r.op == "UNARY" and r.op_params[0] == 17 and r.type == a.type
    want = round_to(ref.xielu(x, *params), tname).astype(np.float64)
    assert_close(values(r), want, {"f32": 1e-7, "f16": 1e-6, "bf16": 5e-5}[tname], "xielu")
    with pytest.raises(ValueError, match="xielu"):
        gg.xielu(ctx, gg.transpose(ctx, ctx.new_tensor(gg.F32, [4, 3])), *params)


@pytest.mark.parametrize("simd", ["native", "scalar"], indirect=True)
@pytest.mark.parametrize("n", [1, 7, 8, 37, 1000])
def test_silu_rows_simd_and_edges(simd, n):
    """SiLU's SIMD row kernel (f32 rows packed in dim 0) on odd lengths, a strided view and edge
    values: the float64 reference, with -0 for large negative inputs, NaN for -inf and NaN."""
    ctx = _ctx()
    rng = np.random.default_rng(n)
    x = rng.uniform(-30, 30, size=(3, n)).astype(np.float32)
    edges = np.array([0.0, -0.0, 88.0, 89.0, -88.0, -89.0, -100.0, -1e30, 1e30, np.inf, -np.inf, np.nan],
                     np.float32)
    x[1, :min(n, edges.size)] = edges[:min(n, edges.size)]
    a = ctx.new_tensor(gg.F32, [n, 3])
    a.set(x)
    wide = ctx.new_tensor(gg.F32, [n + 5, 3])                  # rows of n inside wider rows
    wide.set(np.pad(x, ((0, 0), (0, 5))))
    view = gg.view_2d(ctx, wide, n, 3, wide.nb[1], 0)
    r, rv = gg.silu(ctx, a), gg.silu(ctx, view)
    compute(ctx, r, rv)
    with np.errstate(over="ignore", invalid="ignore"):
        x64 = x.astype(np.float64)
        want = x64 / (1.0 + np.exp(-x64))
    got = values(r).reshape(3, n)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=4e-7, atol=1e-30)  # e^89 overflows f32
    assert np.all(np.signbit(got[ok & (x < -88.8)]))          # x / inf: a negative zero
    np.testing.assert_array_equal(values(rv).reshape(3, n), got)
