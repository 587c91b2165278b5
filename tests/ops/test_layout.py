"""Layout ops: the metadata-only views and the copying ops REPEAT, CONCAT, PAD against numpy."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

TYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16, "i32": gg.I32}


def _ctx():
    return gg.Context(mem_size=64 << 20)


def _new(ctx, type_, ne, seed=0):
    rng = np.random.default_rng(seed)
    if type_ == gg.I32:
        data = rng.integers(-1000, 1000, size=tuple(reversed(ne))).astype(np.int32)
        return new(ctx, type_, ne, data=data)
    return new(ctx, type_, ne, rng=rng, lo=-3, hi=3)


# ---------------------------------------------------------------- views (metadata only)

def test_view_1d_2d_3d_4d_against_strided_reads():
    ctx = _ctx()
    a, x = _new(ctx, gg.F32, [6, 5, 4, 3])
    flat = np.ascontiguousarray(x, dtype=np.float32).ravel()
    es = 4
    cases = [
        (gg.view_1d(ctx, a, 7, 3 * es), [7, 1, 1, 1], [es, 7 * es, 7 * es, 7 * es], 3 * es),
        (gg.view_2d(ctx, a, 4, 5, a.nb[1], 2 * es), [4, 5, 1, 1], [es, a.nb[1], 5 * a.nb[1], 5 * a.nb[1]], 2 * es),
        (gg.view_3d(ctx, a, 3, 2, 4, a.nb[1], a.nb[2], a.nb[1]), [3, 2, 4, 1],
         [es, a.nb[1], a.nb[2], 4 * a.nb[2]], a.nb[1]),
        (gg.view_4d(ctx, a, 2, 3, 2, 3, 2 * a.nb[1], a.nb[2], a.nb[3], es), [2, 3, 2, 3],
         [es, 2 * a.nb[1], a.nb[2], a.nb[3]], es),
    ]
    for v, ne, nb, off in cases:
        assert v.op == "VIEW" and list(v.ne) == ne and list(v.nb) == nb
        assert v.view_src is a and v.view_offs == off
        got = values(v).reshape(tuple(reversed(ne)))
        np.testing.assert_array_equal(got, ref.strided_view(flat, ne, nb, off, es))


def test_view_of_view_collapses_to_root():
    ctx = _ctx()
    a, _ = _new(ctx, gg.F32, [8, 4])
    v1 = gg.view_1d(ctx, a, 16, 8)
    v2 = gg.view_1d(ctx, v1, 4, 4)
    assert v2.view_src is a and v2.view_offs == 12
    np.testing.assert_array_equal(values(v2).ravel(), values(a).ravel()[3:7])


def test_view_tensor_and_reshape():
    ctx = _ctx()
    a, x = _new(ctx, gg.F32, [6, 5, 4])
    vt = gg.view_tensor(ctx, a)
    assert list(vt.ne) == list(a.ne) and list(vt.nb) == list(a.nb)
    np.testing.assert_array_equal(values(vt), x.astype(np.float32))
    flat = x.astype(np.float32).ravel()
    for r, ne in [(gg.reshape_1d(ctx, a, 120), [120]), (gg.reshape_2d(ctx, a, 12, 10), [12, 10]),
                  (gg.reshape_3d(ctx, a, 2, 3, 20), [2, 3, 20]), (gg.reshape_4d(ctx, a, 5, 4, 3, 2), [5, 4, 3, 2]),
                  (gg.reshape(ctx, a, ctx.new_tensor(gg.F32, [30, 4])), [30, 4])]:
        assert r.op == "RESHAPE" and list(r.ne) == ne + [1] * (4 - len(ne))
        np.testing.assert_array_equal(values(r).ravel(), flat)
    with pytest.raises(ValueError, match="reshape_2d"):
        gg.reshape_2d(ctx, a, 7, 7)
    with pytest.raises(ValueError, match="reshape_2d"):
        gg.reshape_2d(ctx, gg.transpose(ctx, gg.reshape_2d(ctx, a, 12, 10)), 12, 10)


@pytest.mark.parametrize("axes", [(0, 2, 1, 3), (1, 2, 0, 3), (3, 2, 1, 0), (2, 0, 3, 1), (0, 1, 2, 3)])
def test_permute_matches_numpy(axes):
    ctx = _ctx()
    a, x = _new(ctx, gg.F32, [2, 3, 4, 5])
    p = gg.permute(ctx, a, *axes)
    for k in range(4):  # source dim k moves to position axes[k]
        assert p.ne[axes[k]] == a.ne[k] and p.nb[axes[k]] == a.nb[k]
    np.testing.assert_array_equal(values(p), ref.permute(x, axes).astype(np.float32))
    assert p.op == "PERMUTE" and p.op_params[:4] == list(axes)


def test_transpose():
    ctx = _ctx()
    a, x = _new(ctx, gg.F32, [3, 5, 2])
    t = gg.transpose(ctx, a)
    assert list(t.ne) == [5, 3, 2, 1] and t.nb[0] == a.nb[1] and t.nb[1] == a.nb[0]
    np.testing.assert_array_equal(values(t), np.swapaxes(x, -1, -2).astype(np.float32).reshape(values(t).shape))


def test_view_errors():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [8, 4])
    with pytest.raises(ValueError, match="view_1d"):
        gg.view_1d(ctx, a, 33, 0)
    with pytest.raises(ValueError, match="view_2d"):
        gg.view_2d(ctx, a, 8, 5, a.nb[1], 0)
    with pytest.raises(ValueError, match="view_4d"):
        gg.view_4d(ctx, a, 8, 2, 2, 2, 2 ** 62, 4, 4, 0)  # stride overflow must not wrap
    with pytest.raises(ValueError, match="permute"):
        gg.permute(ctx, a, 0, 0, 1, 2)
    with pytest.raises(TypeError):
        gg.view_1d(ctx, None, 1, 0)
    with pytest.raises(TypeError):
        gg.transpose(ctx, None)
    with pytest.raises(TypeError):
        gg.view_tensor(ctx, None)
    assert values(gg.view_1d(ctx, a, 4, 0)).size == 4


# ---------------------------------------------------------------- REPEAT

@pytest.mark.parametrize("reps", [(2, 1, 1, 1), (1, 2, 1, 1), (1, 1, 2, 1), (1, 1, 1, 2), (2, 2, 2, 2), (3, 1, 2, 1)])
@pytest.mark.parametrize("ne3", [1, 3])
def test_repeat_each_dim(reps, ne3):
    ctx = _ctx()
    a, x = _new(ctx, gg.F32, [10, 5, 4, ne3])
    ne = [n * r for n, r in zip([10, 5, 4, ne3], reps)]
    b = ctx.new_tensor(gg.F32, ne)
    r = gg.repeat(ctx, a, b)
    r4 = gg.repeat_4d(ctx, a, *ne)
    compute(ctx, r, r4)
    assert r.op == "REPEAT" and list(r.ne) == ne
    expected = ref.repeat(x, tuple(reversed(ne)))
    np.testing.assert_array_equal(values(r), expected.astype(np.float32))
    np.testing.assert_array_equal(values(r4), values(r))


@pytest.mark.parametrize("tname", list(TYPES))
def test_repeat_types_and_strided_source(tname):
    ctx = _ctx()
    a, x = _new(ctx, TYPES[tname], [6, 4, 3], seed=4)
    p = gg.permute(ctx, a, 1, 0, 2, 3)  # [4, 6, 3], dim 0 strided
    r = gg.repeat_4d(ctx, p, 8, 12, 3, 2)
    compute(ctx, r)
    xp = ref.permute(x.reshape(1, 3, 4, 6), (1, 0, 2, 3))
    np.testing.assert_array_equal(values(r), ref.repeat(xp, (2, 3, 12, 8)).astype(values(r).dtype))


def test_repeat_errors():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [3, 2])
    with pytest.raises(ValueError, match="repeat"):
        gg.repeat(ctx, a, ctx.new_tensor(gg.F32, [4, 2]))
    with pytest.raises(ValueError, match="repeat_4d"):
        gg.repeat_4d(ctx, a, 6, 3, 1, 1)
    with pytest.raises(ValueError, match="repeat_4d"):
        gg.repeat_4d(ctx, ctx.new_tensor(gg.F32, [0]), 3, 1, 1, 1)
    with pytest.raises(TypeError):
        gg.repeat(ctx, a, None)
    r = gg.repeat_4d(ctx, ctx.new_tensor(gg.F32, [0]), 0, 3, 1, 1)
    compute(ctx, r)
    assert list(r.ne) == [0, 3, 1, 1]


# ---------------------------------------------------------------- CONCAT

@pytest.mark.parametrize("dim", [0, 1, 2, 3])
@pytest.mark.parametrize("tname", ["f32", "f16", "bf16", "i32"])
def test_concat_every_dim(dim, tname):
    ctx = _ctx()
    ne_a = [11, 12, 13, 14]
    ne_b = list(ne_a)
    ne_b[dim] = 7
    a, xa = _new(ctx, TYPES[tname], ne_a, seed=1)
    b, xb = _new(ctx, TYPES[tname], ne_b, seed=2)
    r = gg.concat(ctx, a, b, dim)
    compute(ctx, r)
    assert r.op == "CONCAT" and r.op_params[0] == dim and r.type == a.type
    np.testing.assert_array_equal(values(r), ref.concat(values(a), values(b), dim))


@pytest.mark.parametrize("dim", [0, 1, 2, 3])
def test_concat_strided_inputs(dim):
    """a: padded view (offset, gaps in every dim); b: a view with dims 0/1 swapped (dim 0 strided)."""
    ctx = _ctx()
    big_a, _ = _new(ctx, gg.F32, [9, 8, 7, 6], seed=3)
    big_b, _ = _new(ctx, gg.F32, [8, 9, 7, 6], seed=4)
    a = gg.view_4d(ctx, big_a, 5, 4, 3, 2, big_a.nb[1], big_a.nb[2], big_a.nb[3], big_a.nb[1])
    ne_b = [5, 4, 3, 2]
    ne_b[dim] = 2
    vb = gg.view_4d(ctx, big_b, ne_b[1], ne_b[0], ne_b[2], ne_b[3], big_b.nb[1], big_b.nb[2], big_b.nb[3], 4)
    b = gg.permute(ctx, vb, 1, 0, 2, 3)
    assert list(b.ne) == ne_b and b.nb[0] != 4
    r = gg.concat(ctx, a, b, dim)
    compute(ctx, r)
    np.testing.assert_array_equal(values(r), ref.concat(values(a), values(b), dim))


def test_concat_quantized_dim0_and_rows():
    ctx = _ctx()
    a, _ = new(ctx, gg.Q8_0, [128, 3], rng=np.random.default_rng(0))
    b, _ = new(ctx, gg.Q8_0, [256, 3], rng=np.random.default_rng(1))
    r0 = gg.concat(ctx, a, b, 0)
    c, _ = new(ctx, gg.Q8_0, [128, 2], rng=np.random.default_rng(2))
    r1 = gg.concat(ctx, a, c, 1)
    compute(ctx, r0, r1)
    np.testing.assert_array_equal(values(r0), np.concatenate([values(a), values(b)], axis=-1))
    np.testing.assert_array_equal(values(r1), np.concatenate([values(a), values(c)], axis=-2))


def test_concat_errors():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [4, 3])
    with pytest.raises(ValueError, match="concat"):
        gg.concat(ctx, a, ctx.new_tensor(gg.F32, [4, 2]), 0)
    with pytest.raises(TypeError, match="concat"):
        gg.concat(ctx, a, ctx.new_tensor(gg.F16, [4, 3]), 0)
    with pytest.raises(ValueError, match="concat"):
        gg.concat(ctx, a, a, 4)
    with pytest.raises(TypeError):
        gg.concat(ctx, a, None, 0)
    r = gg.concat(ctx, a, ctx.new_tensor(gg.F32, [0, 3]), 0)
    compute(ctx, r)
    np.testing.assert_array_equal(values(r), values(a))


# ---------------------------------------------------------------- PAD

def _pad_input(ctx, kind, ne, seed=0):
    if kind == "contiguous":
        return _new(ctx, gg.F32, ne, seed)
    if kind == "view":
        big, xb = _new(ctx, gg.F32, [n + 2 for n in ne], seed)
        v = gg.view_4d(ctx, big, *ne, big.nb[1], big.nb[2], big.nb[3], big.nb[1] + 4)
        return v, values(v).astype(np.float64)
    # permuted: a [ne1, ne0, ne2, ne3] tensor with dims 0 and 1 swapped
    src, _ = _new(ctx, gg.F32, [ne[1], ne[0], ne[2], ne[3]], seed)
    p = gg.permute(ctx, src, 1, 0, 2, 3)
    return p, values(p).astype(np.float64)


@pytest.mark.parametrize("circular", [False, True])
@pytest.mark.parametrize("kind", ["contiguous", "view", "permuted"])
@pytest.mark.parametrize("pads", [(1, 2, 3, 4, 5, 6, 7, 8), (0, 2, 0, 4, 0, 6, 0, 8), (3, 0, 0, 1, 2, 0, 0, 0)])
def test_pad_ext(pads, kind, circular):
    ctx = _ctx()
    a, x = _pad_input(ctx, kind, [11, 9, 5, 4])
    fn = gg.pad_ext_circular if circular else gg.pad_ext
    r = fn(ctx, a, *pads)
    compute(ctx, r)
    lp, rp = pads[0::2], pads[1::2]
    assert r.op == "PAD" and r.op_params[:9] == list(pads) + [int(circular)]
    np.testing.assert_array_equal(values(r), ref.pad_ext(x, lp, rp, circular).astype(np.float32))


@pytest.mark.parametrize("circular", [False, True])
def test_pad_right_only(circular):
    ctx = _ctx()
    a, x = _new(ctx, gg.F32, [33, 17, 2])
    r = (gg.pad_circular if circular else gg.pad)(ctx, a, 4, 3, 1, 0)
    compute(ctx, r)
    assert list(r.ne) == [37, 20, 3, 1]
    np.testing.assert_array_equal(values(r), ref.pad_ext(x, (0, 0, 0, 0), (4, 3, 1, 0), circular).astype(np.float32))


@pytest.mark.parametrize("tname", ["f16", "bf16", "i32"])
def test_pad_other_types(tname):
    ctx = _ctx()
    a, x = _new(ctx, TYPES[tname], [5, 3])
    r = gg.pad_ext(ctx, a, 2, 1, 1, 0, 0, 0, 0, 0)
    compute(ctx, r)
    np.testing.assert_array_equal(values(r), ref.pad_ext(values(a), (2, 1, 0, 0), (1, 0, 0, 0)))


def test_pad_long_rows_and_large_pads():
    ctx = _ctx()
    for n in (1023, 2049):
        a, x = _new(ctx, gg.F32, [n])
        r = gg.pad(ctx, a, 1, 0, 0, 0)
        compute(ctx, r)
        np.testing.assert_array_equal(values(r).ravel(), np.append(x.ravel().astype(np.float32), 0))
    a, x = _new(ctx, gg.F32, [100])
    r = gg.pad_ext(ctx, a, 100, 0, 0, 0, 0, 0, 0, 0)
    rc = gg.pad_ext_circular(ctx, a, 250, 0, 0, 0, 0, 0, 0, 0)  # wraps more than once
    compute(ctx, r, rc)
    np.testing.assert_array_equal(values(r).ravel()[100:], x.ravel().astype(np.float32))
    assert np.all(values(r).ravel()[:100] == 0)
    np.testing.assert_array_equal(values(rc).ravel(), np.pad(x.ravel(), (250, 0), mode="wrap").astype(np.float32))


def test_pad_errors_and_threads():
    ctx = _ctx()
    a, x = _new(ctx, gg.F32, [7, 6, 5])
    with pytest.raises(ValueError, match="pad_ext"):
        gg.pad_ext(ctx, a, -1, 0, 0, 0, 0, 0, 0, 0)
    with pytest.raises(TypeError, match="pad"):
        gg.pad(ctx, ctx.new_tensor(gg.Q8_0, [32]), 1, 0, 0, 0)
    with pytest.raises(ValueError, match="pad_circular"):
        gg.pad_circular(ctx, ctx.new_tensor(gg.F32, [0, 2]), 1, 0, 0, 0)
    with pytest.raises(TypeError):
        gg.pad(ctx, None, 1, 0, 0, 0)
    outs = []
    for nt in (1, 2):
        r = gg.pad_ext_circular(ctx, a, 1, 2, 3, 1, 0, 2, 1, 1)
        compute(ctx, r, n_threads=nt)
        outs.append(values(r))
    np.testing.assert_array_equal(outs[0], outs[1])
    z = gg.pad(ctx, ctx.new_tensor(gg.F32, [0, 2]), 3, 0, 0, 0)  # zero padding of an empty tensor
    compute(ctx, z)
    assert list(z.ne) == [3, 2, 1, 1] and np.all(values(z) == 0)


# ---------------------------------------------------------------- roll, pad_reflect_1d

@pytest.mark.parametrize("tname", list(TYPES))
@pytest.mark.parametrize("shifts", [(9, 0, 2, 0), (-3, 1, -4, 1), (0, 0, 0, 0), (16, -2, 4, -1)])
def test_roll_matches_numpy(shifts, tname):
    ctx = _ctx()
    a, x = _new(ctx, TYPES[tname], [17, 3, 5, 2], seed=2)
    r = gg.roll(ctx, a, *shifts)
    compute(ctx, r)
    assert r.op == "ROLL" and r.type == a.type and list(r.ne) == list(a.ne)
    want = np.roll(x, shift=tuple(reversed(shifts)), axis=(0, 1, 2, 3))
    np.testing.assert_array_equal(values(r), want)


def test_roll_permuted_input():
    ctx = _ctx()
    a, x = _new(ctx, gg.F32, [5, 9, 3, 2], seed=3)
    ap = gg.permute(ctx, a, 0, 2, 1, 3)
    r = gg.roll(ctx, ap, 3, 2, 7, -1)
    compute(ctx, r)
    xp = values(ap)
    np.testing.assert_array_equal(values(r), np.roll(xp, shift=(-1, 7, 2, 3), axis=(0, 1, 2, 3)))


def test_roll_errors():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [5, 3])
    with pytest.raises(ValueError, match="roll.*shift0"):
        gg.roll(ctx, a, 5, 0, 0, 0)
    with pytest.raises(ValueError, match="roll.*shift2"):
        gg.roll(ctx, a, 0, 0, -1, 0)
    with pytest.raises(ValueError, match="roll"):
        gg.roll(ctx, gg.transpose(ctx, a), 0, 0, 0, 0)
    with pytest.raises(TypeError, match="roll"):
        gg.roll(ctx, ctx.new_tensor(gg.Q8_0, [32]), 0, 0, 0, 0)


@pytest.mark.parametrize("ne,p0,p1", [([23, 7], 9, 12), ([19, 3, 2], 8, 13), ([5], 4, 4), ([2, 3, 1, 2], 1, 0),
                                      ([6, 2], 0, 0)])
def test_pad_reflect_1d(ne, p0, p1):
    ctx = _ctx()
    a, x = _new(ctx, gg.F32, ne, seed=ne[0])
    r = gg.pad_reflect_1d(ctx, a, p0, p1)
    compute(ctx, r)
    assert r.op == "PAD_REFLECT_1D" and list(r.ne) == [ne[0] + p0 + p1] + list(a.ne[1:])
    want = np.pad(x, [(0, 0)] * 3 + [(p0, p1)], mode="reflect")
    np.testing.assert_array_equal(values(r), want)


def test_pad_reflect_1d_strided_input_and_errors():
    ctx = _ctx()
    a, x = _new(ctx, gg.F32, [6, 8], seed=4)
    t = gg.transpose(ctx, a)  # rows of 8 strided elements
    r = gg.pad_reflect_1d(ctx, t, 3, 7)
    compute(ctx, r)
    np.testing.assert_array_equal(values(r)[0, 0], np.pad(x[0, 0].T, [(0, 0), (3, 7)], mode="reflect"))
    with pytest.raises(ValueError, match="pad_reflect_1d"):
        gg.pad_reflect_1d(ctx, a, 6, 0)   # p must be < ne0
    with pytest.raises(ValueError, match="pad_reflect_1d"):
        gg.pad_reflect_1d(ctx, a, 0, -1)
    with pytest.raises(TypeError, match="pad_reflect_1d"):
        gg.pad_reflect_1d(ctx, ctx.new_tensor(gg.F16, [6]), 1, 1)
