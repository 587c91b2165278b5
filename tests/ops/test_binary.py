"""ADD/SUB/MUL/DIV and their in-place forms: b tiles into a by modulo."""
import itertools

import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

OPS = ["add", "sub", "mul", "div"]
TYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16}
BOUND = {"f32": 1e-7, "f16": 1e-6, "bf16": 5e-5}


def _ctx():
    return gg.Context(mem_size=64 << 20)


def _range(op):
    return (0.9, 1.1) if op in ("mul", "div") else (-1.0, 1.0)


BCAST = [(1, 1, 1, 1)] + [tuple(2 if i == d else 1 for i in range(4)) for d in range(4)] + \
        [(2, 2, 1, 1), (1, 2, 2, 1), (1, 1, 2, 2), (2, 1, 1, 2), (2, 2, 2, 2), (3, 1, 2, 1)]


@pytest.mark.parametrize("reps", BCAST)
@pytest.mark.parametrize("op", OPS)
def test_broadcast_every_dim(op, reps):
    ctx = _ctx()
    ne_b = [10, 5, 4, 3]
    ne_a = [n * r for n, r in zip(ne_b, reps)]
    lo, hi = _range(op)
    a, xa = new(ctx, gg.F32, ne_a, rng=np.random.default_rng(1), lo=lo, hi=hi)
    b, xb = new(ctx, gg.F32, ne_b, rng=np.random.default_rng(2), lo=lo, hi=hi)
    r = getattr(gg, op)(ctx, a, b)
    compute(ctx, r)
    assert r.op == op.upper() and list(r.ne) == ne_a and r.type == gg.F32
    assert_close(values(r), ref.binary(op, xa, xb), 1e-7, op)


@pytest.mark.parametrize("ne_b", [[1, 1, 1, 1], [10, 1, 1, 1], [1, 5, 1, 1], [1, 1, 4, 1], [1, 1, 1, 3],
                                  [10, 5, 1, 1], [1, 5, 4, 3], [10, 1, 4, 1]])
@pytest.mark.parametrize("op", OPS)
def test_size_one_dims_and_scalar_b(op, ne_b):
    ctx = _ctx()
    lo, hi = _range(op)
    a, xa = new(ctx, gg.F32, [10, 5, 4, 3], rng=np.random.default_rng(3), lo=lo, hi=hi)
    b, xb = new(ctx, gg.F32, ne_b, rng=np.random.default_rng(4), lo=lo, hi=hi)
    r = getattr(gg, op)(ctx, a, b)
    compute(ctx, r)
    assert_close(values(r), ref.binary(op, xa, xb), 1e-7, op)


@pytest.mark.parametrize("tname", list(TYPES))
@pytest.mark.parametrize("op", OPS)
def test_b_permuted(op, tname):
    """Peer case: b is a permute {1,2,0,3} view (strided in every dim), same type as a."""
    ctx = _ctx()
    t = TYPES[tname]
    lo, hi = _range(op)
    a, xa = new(ctx, t, [10, 5, 4, 3], rng=np.random.default_rng(5), lo=lo, hi=hi)
    bs, _ = new(ctx, t, [4, 10, 5, 3], rng=np.random.default_rng(6), lo=lo, hi=hi)
    b = gg.permute(ctx, bs, 2, 0, 1, 3)  # -> [10, 5, 4, 3], permuted
    assert list(b.ne) == [10, 5, 4, 3] and b.is_permuted()
    r = getattr(gg, op)(ctx, a, b)
    compute(ctx, r)
    assert r.type == t
    assert_close(values(r), ref.binary(op, xa, values(b).astype(np.float64)), BOUND[tname], op)


@pytest.mark.parametrize("tname", ["f16", "bf16"])
@pytest.mark.parametrize("op", OPS)
def test_half_a_with_f32_b(op, tname):
    ctx = _ctx()
    lo, hi = _range(op)
    a, xa = new(ctx, TYPES[tname], [33, 4, 3], rng=np.random.default_rng(7), lo=lo, hi=hi)
    b, xb = new(ctx, gg.F32, [33, 1, 3], rng=np.random.default_rng(8), lo=lo, hi=hi)
    r = getattr(gg, op)(ctx, a, b)
    ri = getattr(gg, op + "_inplace")(ctx, a, b)
    compute(ctx, r)
    assert r.type == TYPES[tname]
    assert_close(values(r), ref.binary(op, xa, xb), BOUND[tname], op)
    compute(ctx, ri)
    assert_close(values(a), ref.binary(op, xa, xb), BOUND[tname], op + "_inplace")


@pytest.mark.parametrize("op", OPS)
def test_inplace_writes_a(op):
    ctx = _ctx()
    lo, hi = _range(op)
    a, xa = new(ctx, gg.F32, [17, 6, 2], rng=np.random.default_rng(9), lo=lo, hi=hi)
    b, xb = new(ctx, gg.F32, [17, 1, 2], rng=np.random.default_rng(10), lo=lo, hi=hi)
    r = getattr(gg, op + "_inplace")(ctx, a, b)
    assert r.view_src is a and r.data_ptr == a.data_ptr
    compute(ctx, r)
    assert_close(values(a), ref.binary(op, xa, xb), 1e-7, op)


def test_inplace_chain_of_16():
    ctx = _ctx()
    a, xa = new(ctx, gg.F32, [64, 3], rng=np.random.default_rng(11))
    t, exp = a, xa.copy()
    for i in range(16):
        b, xb = new(ctx, gg.F32, [64, 1], rng=np.random.default_rng(20 + i))
        t = gg.add_inplace(ctx, t, b)
        exp = exp + xb
    compute(ctx, t)
    assert_close(values(a), exp, 1e-7)


def test_overlapping_views_of_one_buffer():
    ctx = _ctx()
    buf, xbuf = new(ctx, gg.F32, [64], rng=np.random.default_rng(12))
    a = gg.view_2d(ctx, buf, 8, 6, 8 * 4, 0)
    b = gg.view_2d(ctx, buf, 8, 6, 8 * 4, 4 * 4)  # overlaps a, shifted by 4 elements
    xa = xbuf.ravel()[:48].reshape(6, 8)
    xb = xbuf.ravel()[4:52].reshape(6, 8)
    outs = [getattr(gg, op)(ctx, a, b) for op in OPS]
    compute(ctx, *outs)
    for op, r in zip(OPS, outs):
        assert_close(values(r).reshape(6, 8), ref.binary(op, xa, xb), 1e-7, op)
    # in place on the overlapping pair: out[i] = a[i] + a[i + 4] with a changing under it is
    # order dependent; only the non-aliased first row block is well defined, so use a copy of b
    c, xc = new(ctx, gg.F32, [8, 6], data=xb.astype(np.float32))
    r = gg.mul_inplace(ctx, a, c)
    compute(ctx, r)
    assert_close(values(buf).ravel()[:48].reshape(6, 8), xa * xb, 1e-7)


def test_div_by_zero_is_ieee():
    ctx = _ctx()
    a = ctx.from_numpy(np.array([1.0, -1.0, 0.0, 2.0, np.inf, -3.0], np.float32))
    b = ctx.from_numpy(np.array([0.0, 0.0, 0.0, -0.0, 0.0, np.inf], np.float32))
    r = gg.div(ctx, a, b)
    compute(ctx, r)
    got = values(r).ravel()
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2]) and got[3] == -np.inf
    assert got[4] == np.inf and got[5] == 0.0 and np.signbit(got[5])
    for tname in ("f16", "bf16"):
        ah, _ = new(ctx, TYPES[tname], [3], data=np.array([1.0, -1.0, 0.0], np.float32))
        rh = gg.div(ctx, ah, ctx.from_numpy(np.zeros(3, np.float32)))
        compute(ctx, rh)
        v = values(rh).ravel()
        assert v[0] == np.inf and v[1] == -np.inf and np.isnan(v[2])


@pytest.mark.parametrize("op", OPS)
def test_threads_1_vs_2(op):
    ctx = _ctx()
    lo, hi = _range(op)
    a, _ = new(ctx, gg.F32, [33, 17, 3], rng=np.random.default_rng(13), lo=lo, hi=hi)
    b, _ = new(ctx, gg.F32, [33, 1, 3], rng=np.random.default_rng(14), lo=lo, hi=hi)
    res = []
    for nt in (1, 2):
        r = getattr(gg, op)(ctx, a, b)
        compute(ctx, r, n_threads=nt)
        res.append(values(r))
    np.testing.assert_array_equal(res[0], res[1])


def test_empty_tensors():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [0, 3])
    b = ctx.new_tensor(gg.F32, [0, 1])
    r = gg.add(ctx, a, b)
    compute(ctx, r)
    assert list(r.ne) == [0, 3, 1, 1]


@pytest.mark.parametrize("op", OPS + [o + "_inplace" for o in OPS])
def test_errors_and_context_survives(op):
    ctx = _ctx()
    f = getattr(gg, op)
    a = ctx.new_tensor(gg.F32, [6, 4])
    with pytest.raises(ValueError, match=op):
        f(ctx, a, ctx.new_tensor(gg.F32, [4, 4]))  # 6 % 4 != 0
    with pytest.raises(ValueError, match=op):
        f(ctx, a, ctx.new_tensor(gg.F32, [0, 4]))  # empty b cannot tile into a non-empty a
    with pytest.raises(TypeError, match=op):
        f(ctx, a, ctx.new_tensor(gg.F16, [6, 4]))  # f32 a needs f32 b
    with pytest.raises(TypeError, match=op):
        f(ctx, ctx.new_tensor(gg.I32, [6, 4]), ctx.new_tensor(gg.I32, [6, 4]))
    with pytest.raises(ValueError, match=op):
        f(ctx, gg.transpose(ctx, a), ctx.new_tensor(gg.F32, [4, 6]))  # a's rows not packed
    with pytest.raises(TypeError):
        f(ctx, a, None)
    with pytest.raises(TypeError):
        f(ctx, None, a)
    b = ctx.new_tensor(gg.F32, [6, 1])
    a.set(np.full((4, 6), 3.0, np.float32))
    b.set(np.full((1, 6), 1.5, np.float32))
    r = f(ctx, a, b)
    compute(ctx, r)
    expected = {"add": 4.5, "sub": 1.5, "mul": 4.5, "div": 2.0}[op.replace("_inplace", "")]
    assert np.all(values(r) == expected)


def test_all_type_combinations_listed_by_spec():
    ctx = _ctx()
    for (ta, tb) in itertools.product(TYPES.values(), repeat=2):
        a, _ = new(ctx, ta, [8, 2])
        b, _ = new(ctx, tb, [8, 1])
        ok = ta == tb or tb == gg.F32
        if ok:
            r = gg.add(ctx, a, b)
            compute(ctx, r)
            assert r.type == ta
        else:
            with pytest.raises(TypeError, match="add"):
                gg.add(ctx, a, b)


def test_named_inplace_forms():
    ctx = _ctx()
    a, xa = new(ctx, gg.F32, [8, 2], rng=np.random.default_rng(30), lo=0.9, hi=1.1)
    b, xb = new(ctx, gg.F32, [8, 1], rng=np.random.default_rng(31), lo=0.9, hi=1.1)
    t = gg.add_inplace(ctx, a, b)
    t = gg.sub_inplace(ctx, t, b)
    t = gg.mul_inplace(ctx, t, b)
    t = gg.div_inplace(ctx, t, b)
    compute(ctx, t)
    assert_close(values(a), ref.binary("div", ref.binary("mul", ref.binary("sub", ref.binary("add", xa, xb), xb), xb), xb))


# ---- ADD1, ADD_ID ----

@pytest.mark.parametrize("combo", [("f32", "f32"), ("f16", "f32"), ("bf16", "f32"), ("f16", "f16"), ("bf16", "bf16")])
def test_add1(combo):
    from references.numerics import round_to
    ta, tb = combo
    T = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16}
    ctx = gg.Context(mem_size=16 << 20)
    a, x = new(ctx, T[ta], [43, 3, 2], rng=np.random.default_rng(1))
    b, y = new(ctx, T[tb], [1], data=np.array([0.375], np.float32))
    r = gg.add1(ctx, a, b)
    ri = gg.add1_inplace(ctx, gg.view_4d(ctx, a, 40, 3, 2, 1, a.nb[1], a.nb[2], a.nb[3], 3 * a.nb[0]), b)
    compute(ctx, r)
    assert r.op == "ADD1" and r.type == a.type
    want = round_to(x + y.item(), ta).astype(np.float64)
    bound = {"f32": 1e-7, "f16": 1e-6, "bf16": 5e-5}[ta]
    assert_close(values(r), want, bound, "add1")
    compute(ctx, ri)
    assert ri.data_ptr == a.data_ptr + 3 * a.nb[0]
    got = values(a)
    assert_close(got[..., 3:], want[..., 3:], bound, "add1_inplace")
    np.testing.assert_array_equal(got[..., :3], x[..., :3])  # outside the view: untouched


def test_add1_errors():
    ctx = gg.Context(mem_size=1 << 20)
    a = ctx.new_tensor(gg.F32, [4, 3])
    with pytest.raises(ValueError, match="add1"):
        gg.add1(ctx, a, ctx.new_tensor(gg.F32, [2]))
    with pytest.raises(TypeError, match="add1"):
        gg.add1(ctx, a, ctx.new_tensor(gg.I32, [1]))


@pytest.mark.parametrize("ne", [[35, 2, 7], [51, 3, 5], [1, 1, 1], [17, 4, 3, 2]])
def test_add_id(ne):
    ctx = gg.Context(mem_size=16 << 20)
    rng = np.random.default_rng(ne[0])
    a, x = new(ctx, gg.F32, ne, rng=rng)
    n_b = 5
    b, y = new(ctx, gg.F32, [ne[0], n_b], rng=rng)
    idx = rng.integers(0, n_b, size=(ne[2], ne[1]))
    # ids through a padded-row view (as the golden case feeds them)
    ids_full, _ = new(ctx, gg.I32, [ne[1] + 2, ne[2]], data=np.pad(idx, ((0, 0), (0, 2)), constant_values=99))
    ids = gg.view_2d(ctx, ids_full, ne[1], ne[2], ids_full.nb[1], 0)
    r = gg.add_id(ctx, a, b, ids)
    compute(ctx, r)
    assert r.op == "ADD_ID" and list(r.ne) == list(a.ne)
    want = x + y[0, 0][idx][None]  # b row ids[i1, i2] added to a[:, i1, i2, :]
    assert_close(values(r), want, 1e-7, "add_id")


def test_add_id_bad_index_and_shapes():
    ctx = gg.Context(mem_size=1 << 20)
    a = ctx.new_tensor(gg.F32, [4, 2, 3])
    a.set(np.zeros((3, 2, 4), np.float32))
    b = ctx.new_tensor(gg.F32, [4, 2])
    b.set(np.zeros((2, 4), np.float32))
    ids, _ = new(ctx, gg.I32, [2, 3], data=np.array([[0, 1], [1, 2], [0, 0]]))
    r = gg.add_id(ctx, a, b, ids)
    with pytest.raises(ValueError, match="add_id.*out of range"):
        compute(ctx, r)
    with pytest.raises(ValueError, match="add_id"):
        gg.add_id(ctx, a, ctx.new_tensor(gg.F32, [5, 2]), ids)
    with pytest.raises(ValueError, match="add_id"):
        gg.add_id(ctx, a, b, ctx.new_tensor(gg.I32, [3, 2]))
    with pytest.raises(TypeError, match="add_id"):
        gg.add_id(ctx, a, b, ctx.new_tensor(gg.F32, [2, 3]))
