"""fill / fill_inplace."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import compute, new, values


def ctx_(mb=64):
    return gg.Context(mem_size=mb << 20)


def raw(t):
    v = np.array(t.numpy())
    return v.view(np.uint32) if t.type == gg.F32 else v.view(np.uint16)


VALUES = [0.0, -0.0, 2.0, -152.0, 3.5, 1e-30, 65504.0, 65520.0, 1e9, -1e9, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("t", [gg.F32, gg.F16])
@pytest.mark.parametrize("c", VALUES)
def test_fill_values_bit_exact(t, c):
    ctx = ctx_()
    a, _ = new(ctx, t, [13, 5, 3, 2])
    r = gg.fill(ctx, a, c)
    assert r.op == "FILL" and r.type == t and r.ne == a.ne and r.view_src is None
    compute(ctx, r)
    np.testing.assert_array_equal(raw(r), ref.fill(tuple(reversed(a.ne)), c, "f32" if t == gg.F32 else "f16"))


def test_fill_f32_nan_payload_and_f16_overflow():
    ctx = ctx_()
    nan_payload = np.array([0x7FC12345], dtype=np.uint32).view(np.float32)[0]
    a = ctx.new_tensor(gg.F32, [7])
    r = gg.fill(ctx, a, float(nan_payload))
    h = gg.fill(ctx, ctx.new_tensor(gg.F16, [7]), 70000.0)
    hn = gg.fill(ctx, ctx.new_tensor(gg.F16, [7]), float("-nan"))
    compute(ctx, r, h, hn)
    assert np.all(raw(r) == 0x7FC12345)  # F32 keeps the (quiet NaN) bit pattern; a Python float cannot carry a signalling NaN
    assert np.all(raw(h) == 0x7C00)      # F16 overflows to inf
    assert np.all(raw(hn) == 0xFE00)     # F16 NaN is quiet, sign kept


def test_fill_one_element_and_large():
    ctx = ctx_(256)
    one = gg.fill(ctx, ctx.new_tensor(gg.F32, [1]), 1e-6)
    big = gg.fill(ctx, ctx.new_tensor(gg.F32, [303, 207, 11, 3]), 2.0)
    compute(ctx, one, big, n_threads=2)
    assert values(one).ravel().tolist() == [np.float32(1e-6)]
    assert np.all(values(big) == 2.0)


@pytest.mark.parametrize("t", [gg.F32, gg.F16])
def test_fill_inplace_and_contiguous_view(t):
    ctx = ctx_()
    a, av = new(ctx, t, [10, 6])
    r = gg.fill_inplace(ctx, a, -np.inf)
    assert r.view_src is not None
    # in-place fill of a contiguous view (rows 2..3) of another tensor
    b, bv = new(ctx, t, [10, 6])
    v = gg.view_1d(ctx, b, 20, 2 * b.nb[1])
    rv = gg.fill_inplace(ctx, v, 5.0)
    compute(ctx, r, rv)
    assert np.all(values(a) == -np.inf)
    expected = bv.copy()
    expected[..., 2:4, :] = 5.0
    np.testing.assert_array_equal(values(b), expected)


def test_fill_empty_is_noop():
    ctx = ctx_()
    r = gg.fill(ctx, ctx.new_tensor(gg.F32, [0, 3]), 1.0)
    compute(ctx, r)
    assert r.ne == [0, 3, 1, 1]


def test_fill_threads_agree():
    ctx = ctx_()
    a = ctx.new_tensor(gg.F16, [1025, 3])
    r = gg.fill(ctx, a, 0.1)
    compute(ctx, r, n_threads=1)
    v1 = raw(r).copy()
    compute(ctx, r, n_threads=2)
    np.testing.assert_array_equal(raw(r), v1)


def test_fill_errors():
    ctx = ctx_()
    a = ctx.new_tensor(gg.F32, [4, 6])
    with pytest.raises(ValueError, match="fill"):
        gg.fill(ctx, gg.transpose(ctx, a), 1.0)
    with pytest.raises(ValueError, match="fill_inplace"):
        gg.fill_inplace(ctx, gg.view_2d(ctx, a, 3, 6, a.nb[1], 0), 1.0)
    for t in (gg.BF16, gg.I32, gg.Q8_0):
        with pytest.raises(TypeError, match="fill"):
            gg.fill(ctx, ctx.new_tensor(t, [32]), 1.0)
    with pytest.raises(TypeError, match="fill"):
        gg.fill(ctx, None, 1.0)
    r = gg.fill(ctx, a, 3.0)
    compute(ctx, r)
    assert np.all(values(r) == 3.0)
