"""get_rows / set_rows."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

QUANT_NAMES = {gg.Q8_0: "q8_0", gg.Q4_0: "q4_0", gg.NVFP4: "nvfp4"}


def ctx_(mb=64):
    return gg.Context(mem_size=mb << 20)


def idx_tensor(ctx, idx, type_=gg.I32):
    """Index tensor from numpy (numpy order, ne reversed)."""
    idx = np.asarray(idx)
    t = ctx.new_tensor(type_, list(reversed(idx.shape)))
    t.set(idx.astype(np.int32 if type_ == gg.I32 else np.int64))
    return t


def nvfp4_available():
    try:
        gg.quantize(gg.NVFP4, np.zeros(64, dtype=np.float32))
        return True
    except NotImplementedError:
        return False


# ---------------------------------------------------------------- get_rows

@pytest.mark.parametrize("t", [gg.F32, gg.F16, gg.BF16, gg.Q8_0, gg.Q4_0])
def test_get_rows_types_repeated_out_of_order(t):
    ctx = ctx_()
    a, av = new(ctx, t, [64, 7, 1, 1])
    idx = np.array([6, 0, 3, 3, 1, 6, 2, 0], dtype=np.int32)
    b = idx_tensor(ctx, idx)
    r = gg.get_rows(ctx, a, b)
    assert r.type == gg.F32 and r.ne == [64, 8, 1, 1] and r.op == "GET_ROWS"
    compute(ctx, r)
    np.testing.assert_array_equal(values(r), ref.get_rows(av, idx[None, None]))


def test_get_rows_i32_passthrough():
    ctx = ctx_()
    rng = np.random.default_rng(1)
    data = rng.integers(-2**31, 2**31 - 1, size=(1, 1, 5, 9))
    a, av = new(ctx, gg.I32, [9, 5], data=data)
    idx = np.array([4, 4, 0, 2], dtype=np.int32)
    r = gg.get_rows(ctx, a, idx_tensor(ctx, idx))
    assert r.type == gg.I32
    compute(ctx, r)
    np.testing.assert_array_equal(np.array(r.numpy()).reshape(1, 1, 4, 9), ref.get_rows(data, idx[None, None]))


@pytest.mark.skipif(not nvfp4_available(), reason="NVFP4 (quant_nvfp4.cpp) not implemented yet")
def test_get_rows_nvfp4():
    ctx = ctx_()
    a, av = new(ctx, gg.NVFP4, [128, 5])
    idx = np.array([4, 1, 1], dtype=np.int32)
    r = gg.get_rows(ctx, a, idx_tensor(ctx, idx))
    compute(ctx, r)
    np.testing.assert_array_equal(values(r), ref.get_rows(av, idx[None, None]))


def test_get_rows_batched_per_batch_index_lists_and_views():
    ctx = ctx_()
    rng = np.random.default_rng(2)
    a_full, afv = new(ctx, gg.F32, [40, 9, 3, 2])
    # source as an offset view: columns 5..36 of rows 1..8 of every matrix
    a = gg.view_4d(ctx, a_full, 32, 8, 3, 2, a_full.nb[1], a_full.nb[2], a_full.nb[3], a_full.nb[1] + 5 * 4)
    av = afv[:, :, 1:9, 5:37]
    idx = rng.integers(0, 8, size=(2, 3, 6)).astype(np.int32)  # per-batch index lists
    b = idx_tensor(ctx, idx)
    # index tensor with padded rows (strided view)
    wide = np.full((2, 3, 11), -1, dtype=np.int32)
    wide[..., :6] = idx
    bw = idx_tensor(ctx, wide)
    bv = gg.view_4d(ctx, bw, 6, 3, 2, 1, bw.nb[1], bw.nb[2], bw.nb[3], 0)
    # index tensor with a non-unit element stride (transposed storage)
    bt_base = idx_tensor(ctx, np.ascontiguousarray(idx.transpose(0, 2, 1)))  # ne [3, 6, 2]
    bt = gg.permute(ctx, bt_base, 1, 0, 2, 3)  # ne [6, 3, 2], nb0 = 12
    assert bt.ne[:3] == [6, 3, 2] and bt.nb[0] == 12
    r1, r2, r3 = (gg.get_rows(ctx, a, x) for x in (b, bv, bt))
    compute(ctx, r1, r2, r3)
    expected = ref.get_rows(av, idx)
    for r in (r1, r2, r3):
        assert r.ne == [32, 6, 3, 2]
        np.testing.assert_array_equal(values(r), expected)


def test_get_rows_f16_batched_and_threads():
    ctx = ctx_()
    a, av = new(ctx, gg.F16, [256, 5, 7, 1])
    idx = np.random.default_rng(3).integers(0, 5, size=(1, 7, 4)).astype(np.int32)
    r = gg.get_rows(ctx, a, idx_tensor(ctx, idx))
    compute(ctx, r, n_threads=1)
    v1 = values(r).copy()
    compute(ctx, r, n_threads=2)
    np.testing.assert_array_equal(values(r), v1)
    assert_close(values(r), ref.get_rows(av, idx), 1e-7)


def test_get_rows_many_rows():
    ctx = ctx_()
    a, av = new(ctx, gg.F32, [4, 70000])
    idx = np.random.default_rng(4).integers(0, 70000, size=(1, 1, 5000)).astype(np.int32)
    idx[0, 0, :2] = [69999, 65536]
    r = gg.get_rows(ctx, a, idx_tensor(ctx, idx))
    compute(ctx, r)
    np.testing.assert_array_equal(values(r), ref.get_rows(av, idx))


@pytest.mark.parametrize("bad", [-1, 5, 1 << 30])
def test_get_rows_out_of_range_index_raises(bad):
    ctx = ctx_()
    a, _ = new(ctx, gg.F32, [8, 5])
    r = gg.get_rows(ctx, a, idx_tensor(ctx, np.array([0, bad, 1], dtype=np.int32)))
    with pytest.raises(ValueError) as e:
        compute(ctx, r)
    msg = str(e.value)
    assert "get_rows" in msg and str(bad) in msg and "5 rows" in msg
    # the context and the process stay usable
    ok = gg.get_rows(ctx, a, idx_tensor(ctx, np.array([4], dtype=np.int32)))
    compute(ctx, ok)
    assert values(ok).shape[-2:] == (1, 8)


def test_get_rows_constructor_errors():
    ctx = ctx_()
    a = ctx.new_tensor(gg.F32, [8, 5, 3])
    with pytest.raises(TypeError, match="get_rows"):
        gg.get_rows(ctx, a, ctx.new_tensor(gg.I64, [2, 3]))
    with pytest.raises(TypeError, match="get_rows"):
        gg.get_rows(ctx, a, ctx.new_tensor(gg.F32, [2, 3]))
    with pytest.raises(ValueError, match="get_rows"):
        gg.get_rows(ctx, a, ctx.new_tensor(gg.I32, [2, 1]))  # no broadcast over dim 2
    with pytest.raises(ValueError, match="get_rows"):
        gg.get_rows(ctx, gg.transpose(ctx, a), ctx.new_tensor(gg.I32, [2, 3]))
    with pytest.raises(TypeError, match="get_rows"):
        gg.get_rows(ctx, a, None)
    with pytest.raises(TypeError, match="get_rows"):
        gg.get_rows(ctx, ctx.new_tensor(gg.I64, [8, 5]), ctx.new_tensor(gg.I32, [2]))
    r = gg.get_rows(ctx, a, ctx.new_tensor(gg.I32, [2, 3]))
    assert r.ne == [8, 2, 3, 1]


# ---------------------------------------------------------------- set_rows

def _set_rows_expected(dst_type, before, src_vals, idx, src_type):
    src32 = src_vals.astype(np.float32)
    if dst_type == gg.F32:
        conv = lambda row: row.astype(np.float64)
    elif dst_type == gg.F16:
        conv = lambda row: ref.convert_values(row, "f16")
    elif dst_type == gg.BF16:
        conv = lambda row: ref.convert_values(row, "bf16")
    else:
        name = QUANT_NAMES[dst_type]
        conv = lambda row: ref.DEQUANTIZERS[name](ref.QUANTIZERS[name](row))
    return ref.set_rows(before, src32, idx, convert=lambda row: conv(np.asarray(row, dtype=np.float32)))


DST_TYPES = [gg.F32, gg.F16, gg.BF16, gg.Q8_0, gg.Q4_0, gg.NVFP4]


@pytest.mark.parametrize("dst_type", DST_TYPES)
@pytest.mark.parametrize("src_type", [gg.F32, gg.F16])
@pytest.mark.parametrize("idx_type", [gg.I32, gg.I64])
def test_set_rows_types(dst_type, src_type, idx_type):
    if dst_type == gg.NVFP4 and not nvfp4_available():
        pytest.skip("NVFP4 (quant_nvfp4.cpp) not implemented yet")
    ctx = ctx_()
    n = 64 if dst_type != gg.NVFP4 else 128
    dst, before = new(ctx, dst_type, [n, 9, 2, 1], lo=-2, hi=2)
    src, sv = new(ctx, src_type, [n, 4, 2, 1], lo=-3, hi=3)
    idx = np.array([[[7, 0, 3, 8], [1, 2, 5, 4]]], dtype=np.int64)  # numpy (1, 2, 4): c is [4, 2, 1]
    c = idx_tensor(ctx, idx, idx_type)
    raw_before = np.array(dst.numpy()).copy()
    r = gg.set_rows(ctx, dst, src, c)
    assert r.op == "SET_ROWS" and r.view_src is not None and r.type == dst_type
    assert r.src[0] is not None and r.src[2] is not None
    compute(ctx, r)
    expected = _set_rows_expected(dst_type, before, sv, idx, src_type)
    np.testing.assert_array_equal(values(dst), expected.astype(np.float32))
    # untouched rows keep their exact bytes
    touched = {(j, int(i)) for j in range(2) for i in idx[0, j]}
    raw_after = np.array(dst.numpy())
    for j in range(2):
        for i in range(9):
            if (j, i) not in touched:
                np.testing.assert_array_equal(raw_after[j, i], raw_before[j, i])


def test_set_rows_index_broadcast_over_dims_2_3():
    ctx = ctx_()
    dst, before = new(ctx, gg.F32, [16, 11, 4, 3])
    src, sv = new(ctx, gg.F32, [16, 7, 4, 3])
    rng = np.random.default_rng(5)
    idx = np.stack([np.stack([rng.permutation(11)[:7] for _ in range(2)]) for _ in range(3)])  # (3, 2, 7): c [7, 2, 3]
    c = idx_tensor(ctx, idx, gg.I64)
    r = gg.set_rows(ctx, dst, src, c)
    compute(ctx, r)
    np.testing.assert_array_equal(values(dst), ref.set_rows(before, sv, idx).astype(np.float32))
    # ne2 % ne11 with ne11 = 1 and ne3 % ne12 with ne12 = 1 too
    idx1 = rng.permutation(11)[:7].reshape(1, 1, 7)
    dst2, before2 = new(ctx, gg.F32, [16, 11, 4, 3])
    r2 = gg.set_rows(ctx, dst2, src, idx_tensor(ctx, idx1))
    compute(ctx, r2)
    np.testing.assert_array_equal(values(dst2), ref.set_rows(before2, sv, idx1).astype(np.float32))


def test_set_rows_strided_source_and_index_views():
    ctx = ctx_()
    dst, before = new(ctx, gg.F16, [8, 6, 1, 1])
    big, bigv = new(ctx, gg.F32, [12, 5])
    src = gg.view_2d(ctx, big, 8, 3, big.nb[1], 2 * 4)  # padded rows, offset columns
    sv = bigv[:, :, :3, 2:10]
    wide = idx_tensor(ctx, np.array([[[5, 0, 2, 99, 99]]], dtype=np.int64), gg.I64)
    c = gg.view_1d(ctx, wide, 3, 0)
    r = gg.set_rows(ctx, dst, src, c)
    compute(ctx, r)
    idx = np.array([[[5, 0, 2]]])
    np.testing.assert_array_equal(values(dst), ref.set_rows(before, sv, idx, convert=lambda row: ref.convert_values(row.astype(np.float32), "f16")).astype(np.float32))


def test_set_rows_later_reader_sees_writes_kv_cache_pattern():
    """KV-cache pattern: set_rows into a cache expanded first; a plain view of the cache read
    by a later node (no data edge) sees the writes."""
    ctx = ctx_()
    cache = ctx.new_tensor(gg.F16, [32, 16])
    cache.set(np.zeros((16, 32), dtype=np.float16))
    k, kv = new(ctx, gg.F32, [32, 3])
    pos = idx_tensor(ctx, np.array([4, 5, 6], dtype=np.int64), gg.I64)
    w = gg.set_rows(ctx, cache, k, pos)
    view = gg.view_2d(ctx, cache, 32, 8, cache.nb[1], 0)
    reader = gg.scale(ctx, gg.cast(ctx, view, gg.F32), 2.0)
    g = gg.Graph(ctx)
    g.build_forward_expand(w)
    g.build_forward_expand(reader)
    g.compute(n_threads=2)
    got = values(reader)
    expected = np.zeros((1, 1, 8, 32))
    expected[..., 4:7, :] = ref.convert_values(kv.astype(np.float32), "f16")[0, 0] * 2
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_set_rows_f32_into_f16_cache_rows(n_threads):
    """The prompt's KV-cache write (f32 rows into f16 rows of a 2-D cache): an odd row length
    (SIMD body and tail), specials (inf, NaN, f16 overflow and subnormals), a destination view
    with padded rows, many rows over several threads, and an index past the cache."""
    ctx = ctx_()
    n, cells, rows = 37, 300, 129
    big = ctx.new_tensor(gg.F16, [n + 3, cells])
    raw0 = np.random.default_rng(7).uniform(-1, 1, size=(cells, n + 3)).astype(np.float16)
    big.set(raw0)
    dst = gg.view_2d(ctx, big, n, cells, big.nb[1], 0)
    src, sv = new(ctx, gg.F32, [n, rows], lo=-4, hi=4)
    sv = np.array(sv, dtype=np.float32)
    sv[0, 0, 0, :5] = [np.inf, -np.inf, np.nan, 7e4, 3e-7]
    src.set(sv[0, 0])
    idx = np.random.default_rng(8).permutation(cells)[:rows].astype(np.int64)
    r = gg.set_rows(ctx, dst, src, idx_tensor(ctx, idx, gg.I64))
    g = gg.Graph(ctx)
    g.build_forward_expand(r)
    g.compute(n_threads=n_threads)
    got = np.array(big.numpy()).reshape(cells, n + 3)
    want = raw0.copy()
    want[idx, :n] = ref.convert_values(sv[0, 0], "f16").astype(np.float16)
    np.testing.assert_array_equal(got.view(np.uint16)[:, n:], raw0.view(np.uint16)[:, n:])
    np.testing.assert_array_equal(got[:, :n], want[:, :n])  # NaN == NaN for assert_array_equal
    bad = gg.set_rows(ctx, dst, src, idx_tensor(ctx, np.r_[idx[:-1], cells], gg.I64))
    with pytest.raises(ValueError, match=f"set_rows.*{cells}"):
        compute(ctx, bad)


@pytest.mark.parametrize("bad", [-1, 6, 2**40])
def test_set_rows_out_of_range_index_raises(bad):
    ctx = ctx_()
    dst, before = new(ctx, gg.F32, [8, 6])
    src, _ = new(ctx, gg.F32, [8, 2])
    idx_type = gg.I64 if abs(bad) > 2**31 else gg.I32
    r = gg.set_rows(ctx, dst, src, idx_tensor(ctx, np.array([1, bad]), idx_type))
    with pytest.raises(ValueError) as e:
        compute(ctx, r)
    msg = str(e.value)
    assert "set_rows" in msg and str(bad) in msg and "6 rows" in msg
    v = values(dst)
    np.testing.assert_array_equal(v[..., [0, 2, 3, 4, 5], :], before[..., [0, 2, 3, 4, 5], :])
    ok = gg.set_rows(ctx, dst, src, idx_tensor(ctx, np.array([0, 5])))
    compute(ctx, ok)


def test_set_rows_constructor_errors():
    ctx = ctx_()
    a = ctx.new_tensor(gg.F32, [8, 6, 2])
    b = ctx.new_tensor(gg.F32, [8, 3, 2])
    c = ctx.new_tensor(gg.I64, [3, 2])
    with pytest.raises(TypeError, match="set_rows"):
        gg.set_rows(ctx, a, ctx.new_tensor(gg.BF16, [8, 3, 2]), c)
    with pytest.raises(TypeError, match="set_rows"):
        gg.set_rows(ctx, a, b, ctx.new_tensor(gg.F32, [3, 2]))
    with pytest.raises(TypeError, match="set_rows"):
        gg.set_rows(ctx, ctx.new_tensor(gg.I32, [8, 6, 2]), b, c)
    with pytest.raises(ValueError, match="set_rows"):
        gg.set_rows(ctx, a, ctx.new_tensor(gg.F32, [7, 3, 2]), c)
    with pytest.raises(ValueError, match="set_rows"):
        gg.set_rows(ctx, a, b, ctx.new_tensor(gg.I64, [4, 2]))
    with pytest.raises(ValueError, match="set_rows"):
        gg.set_rows(ctx, a, b, ctx.new_tensor(gg.I64, [3, 3]))  # 2 % 3 != 0
    with pytest.raises(ValueError, match="set_rows"):
        gg.set_rows(ctx, a, ctx.new_tensor(gg.F32, [8, 3, 3]), ctx.new_tensor(gg.I64, [3, 3]))
    with pytest.raises(TypeError, match="set_rows"):
        gg.set_rows(ctx, a, None, c)
    r = gg.set_rows(ctx, a, b, c)
    assert r.ne == a.ne
