"""ACC and SET (set, set_1d, set_2d and the _inplace forms): b added / written into a byte-strided
view of a, against numpy's as_strided on a copy of a."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import pyggml as gg
from util import assert_close, compute, new, values


def _ctx():
    return gg.Context(mem_size=16 << 20)


def _expected(x, y, nb, offset, op):
    """a's values with b added to / written into the view of ggml byte strides nb (nb[0] the
    element size) at byte offset, computed on a flat copy through numpy strides."""
    es = nb[0]
    out = np.array(x, dtype=np.float64 if op == "acc" else x.dtype).ravel()
    scale = out.itemsize // es if out.itemsize >= es else 1
    strides = tuple(reversed([s * scale for s in nb]))
    view = as_strided(out[offset // es:], shape=y.shape, strides=strides)
    if op == "acc":
        view += y
    else:
        view[...] = y
    return out.reshape(x.shape)


CASES = [  # a ne, b ne, (nb1, nb2, nb3) in elements, offset in elements
    ([15, 9], [59], (15, 135, 135), 24),
    ([27, 5, 2], [5, 3, 2], (27, 135, 270), 75),
    ([33, 7], [27, 3], (33, 231, 231), 134),
    ([9, 9, 2], [5, 7], (9, 81, 162), 93),
    ([12, 4, 3, 2], [3, 2, 2, 2], (12, 48, 144), 5),
    ([16, 8], [4, 3], (32, 96, 96), 2),   # every other row of a
    ([7], [7], (7, 7, 7), 0),
]


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("op", ["acc", "set"])
def test_acc_set(op, case, inplace):
    ctx = _ctx()
    ane, bne, nbs, off = case
    rng = np.random.default_rng(len(ane) + off)
    a, x = new(ctx, gg.F32, ane, rng=rng)
    b, y = new(ctx, gg.F32, bne, rng=rng)
    nb = [4] + [4 * s for s in nbs]
    fn = getattr(gg, {"acc": "acc_inplace", "set": "set_inplace"}[op] if inplace else op)
    r = fn(ctx, a, b, nb[1], nb[2], nb[3], 4 * off)
    assert r.op == op.upper() and list(r.ne) == list(a.ne)
    assert (r.data_ptr == a.data_ptr) == inplace
    compute(ctx, r)
    want = _expected(x.astype(np.float32), y.astype(np.float32), nb, 4 * off, op)
    assert_close(values(r), want, 1e-7 if op == "acc" else 0.0, op)
    if not inplace:  # a itself is unchanged
        np.testing.assert_array_equal(values(a), x)


@pytest.mark.parametrize("inplace", [False, True])
def test_set_1d_2d(inplace):
    ctx = _ctx()
    rng = np.random.default_rng(3)
    a, x = new(ctx, gg.F32, [27, 5, 2], rng=rng)
    b1, y1 = new(ctx, gg.F32, [43], rng=rng)
    b2, y2 = new(ctx, gg.F32, [5, 7], rng=rng)
    set_1d, set_2d = ("set_1d_inplace", "set_2d_inplace") if inplace else ("set_1d", "set_2d")
    r1 = getattr(gg, set_1d)(ctx, a, b1, 4 * 168)
    compute(ctx, r1)
    want1 = _expected(x.astype(np.float32), y1.astype(np.float32), list(a.nb), 4 * 168, "set")
    np.testing.assert_array_equal(values(r1), want1)
    c, z = new(ctx, gg.F32, [9, 9, 2], rng=rng)
    r2 = getattr(gg, set_2d)(ctx, c, b2, 36, 372)
    compute(ctx, r2)
    want2 = _expected(z.astype(np.float32), y2.astype(np.float32), [4, 36, c.nb[2], c.nb[3]], 372, "set")
    np.testing.assert_array_equal(values(r2), want2)


def test_set_i32_and_strided_b():
    """i32 set, and a b whose dims 1..3 are strided (a view with padded rows)."""
    ctx = _ctx()
    xa = np.arange(60, dtype=np.int32).reshape(4, 15)
    a, _ = new(ctx, gg.I32, [15, 4], data=xa)
    big, yb = new(ctx, gg.I32, [8, 6], data=-np.arange(48, dtype=np.int32).reshape(6, 8))
    b = gg.view_2d(ctx, big, 5, 3, big.nb[1] * 2, 4)
    r = gg.set(ctx, a, b, a.nb[1], a.nb[2], a.nb[3], 4 * 16)
    compute(ctx, r)
    want = xa.copy()
    want[1:4, 1:6] = yb[0, 0, ::2, 1:6]
    np.testing.assert_array_equal(values(r)[0, 0], want)
    f, xf = new(ctx, gg.F32, [15, 4], rng=np.random.default_rng(0))
    bigf, ybf = new(ctx, gg.F32, [8, 6], rng=np.random.default_rng(1))
    bf = gg.view_2d(ctx, bigf, 5, 3, bigf.nb[1] * 2, 4)
    ra = gg.acc(ctx, f, bf, f.nb[1], f.nb[2], f.nb[3], 4 * 16)
    compute(ctx, ra)
    wa = xf[0, 0].copy()
    wa[1:4, 1:6] += ybf[0, 0, ::2, 1:6]
    assert_close(values(ra)[0, 0], wa, 1e-7, "acc strided b")


def test_threads_agree():
    ctx = _ctx()
    a, _ = new(ctx, gg.F32, [64, 33, 3], rng=np.random.default_rng(8))
    b, _ = new(ctx, gg.F32, [30, 31, 3], rng=np.random.default_rng(9))
    res = []
    for nt in (1, 2, 4):
        r = gg.acc(ctx, a, b, a.nb[1], a.nb[2], a.nb[3], 4 * 65)
        compute(ctx, r, n_threads=nt)
        res.append(values(r))
    np.testing.assert_array_equal(res[0], res[1])
    np.testing.assert_array_equal(res[0], res[2])


def test_errors():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [8, 4])
    b = ctx.new_tensor(gg.F32, [3, 2])
    with pytest.raises(ValueError, match="acc.*past a"):
        gg.acc(ctx, a, b, a.nb[1], a.nb[2], a.nb[3], 4 * 27)   # last row ends past a
    gg.acc(ctx, a, b, a.nb[1], a.nb[2], a.nb[3], 4 * 21)      # ends exactly at the end: fine
    with pytest.raises(ValueError, match="set.*multiples"):
        gg.set(ctx, a, b, a.nb[1], a.nb[2], a.nb[3], 2)
    with pytest.raises(ValueError, match="set_2d"):
        gg.set_2d(ctx, a, b, 2 ** 31, 0)
    with pytest.raises(ValueError, match="acc"):
        gg.acc(ctx, a, ctx.new_tensor(gg.F32, [9, 4]), a.nb[1], a.nb[2], a.nb[3], 0)  # more elements
    with pytest.raises(ValueError, match="acc"):
        gg.acc(ctx, gg.transpose(ctx, a), b, 16, 64, 64, 0)    # a not contiguous
    with pytest.raises(TypeError, match="acc"):
        gg.acc(ctx, ctx.new_tensor(gg.F16, [8, 4]), b, 16, 64, 64, 0)
    with pytest.raises(TypeError, match="set"):
        gg.set(ctx, a, ctx.new_tensor(gg.I32, [3, 2]), 32, 128, 128, 0)
    with pytest.raises(TypeError):
        gg.set_1d(ctx, None, b, 0)
