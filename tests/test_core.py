"""The tensor model, contexts, graphs, the memory planner and error behaviour."""
import numpy as np
import pytest

import pyggml as gg
from util import assert_close, compute


def test_types_traits():
    assert gg.type_size(gg.F32) == 4 and gg.blck_size(gg.F32) == 1
    assert gg.type_size(gg.Q8_0) == 34 and gg.blck_size(gg.Q8_0) == 32
    assert gg.type_size(gg.Q4_0) == 18 and gg.blck_size(gg.Q4_0) == 32
    assert gg.type_size(gg.NVFP4) == 36 and gg.blck_size(gg.NVFP4) == 64
    assert int(gg.BF16) == 30 and int(gg.I64) == 27 and int(gg.NVFP4) == 40
    assert gg.row_size(gg.Q4_0, 96) == 54


def test_new_tensor_layout_and_numpy_view():
    ctx = gg.Context(1 << 20)
    t = ctx.new_tensor(gg.F32, [5, 3, 2])
    assert t.ne == [5, 3, 2, 1]
    assert t.nb == [4, 20, 60, 120]
    v = t.numpy()
    assert v.shape == (2, 3, 5) and v.dtype == np.float32
    v[1, 2, 4] = 7.0                    # zero-copy: writes land in the tensor
    assert t.numpy()[1, 2, 4] == 7.0
    assert t.numpy().ctypes.data == t.data_ptr
    q = ctx.new_tensor(gg.Q8_0, [64, 3])
    assert q.numpy().shape == (3, 68) and q.numpy().dtype == np.uint8
    assert ctx.new_tensor(gg.F16, [4]).numpy().dtype == np.float16
    assert ctx.new_tensor(gg.BF16, [4]).numpy().dtype == np.uint16


def test_contiguity_predicates_and_views():
    ctx = gg.Context(1 << 20)
    a = ctx.from_numpy(np.arange(24, dtype=np.float32).reshape(2, 3, 4))  # ne [4, 3, 2]
    assert a.ne == [4, 3, 2, 1] and a.is_contiguous()
    p = gg.permute(ctx, a, 0, 2, 1, 3)   # swap dims 1 and 2
    assert p.ne == [4, 2, 3, 1] and not p.is_contiguous() and p.is_permuted()
    np.testing.assert_array_equal(p.numpy(), a.numpy().transpose(1, 0, 2))
    tr = gg.transpose(ctx, a)
    assert tr.ne == [3, 4, 2, 1]
    np.testing.assert_array_equal(tr.numpy(), a.numpy().transpose(0, 2, 1))
    # permute moves source dim k to position axis_k (the inverse of numpy's transpose axes)
    p2 = gg.permute(ctx, a, 2, 0, 1, 3)
    assert p2.ne == [3, 2, 4, 1]
    v = gg.view_2d(ctx, a, 2, 3, a.nb[1], 4)     # 2 columns starting at element 1
    np.testing.assert_array_equal(v.numpy(), a.numpy()[0, :, 1:3])
    assert v.view_src is a and v.view_offs == 4
    vv = gg.view_1d(ctx, v, 2, 4)   # chained views collapse onto the root owner
    assert vv.view_src is a and vv.view_offs == 8
    r = gg.reshape_2d(ctx, a, 12, 2)
    assert r.ne == [12, 2, 1, 1]
    np.testing.assert_array_equal(r.numpy().ravel(), a.numpy().ravel())


def test_view_out_of_bounds_raises():
    ctx = gg.Context(1 << 20)
    a = ctx.new_tensor(gg.F32, [8, 2])
    with pytest.raises(ValueError, match="view_2d"):
        gg.view_2d(ctx, a, 8, 3, a.nb[1], 0)
    with pytest.raises(ValueError, match="view_1d"):
        gg.view_1d(ctx, a, 4, 60)
    with pytest.raises(ValueError, match="permute"):
        gg.permute(ctx, a, 0, 0, 1, 2)
    with pytest.raises(ValueError, match="reshape"):
        gg.reshape_2d(ctx, a, 5, 3)
    with pytest.raises(ValueError, match="contiguous"):
        gg.reshape_1d(ctx, gg.transpose(ctx, a), 16)


def test_errors_leave_context_usable():
    ctx = gg.Context(1 << 20)
    a = ctx.from_numpy(np.ones((3, 4), np.float32))
    b = ctx.from_numpy(np.ones((3, 5), np.float32))
    n_before = ctx.n_tensors
    with pytest.raises(ValueError) as e:
        gg.add(ctx, a, b)
    msg = str(e.value)
    assert "[add]" in msg and "[4, 3, 1, 1]" in msg and "[5, 3, 1, 1]" in msg
    assert ctx.n_tensors == n_before      # nothing recorded by the failed constructor
    with pytest.raises(TypeError):
        gg.add(ctx, a, None)
    y = gg.add(ctx, a, a)
    compute(ctx, y)
    np.testing.assert_array_equal(y.numpy(), np.full((3, 4), 2.0, np.float32))


def test_arena_exhausted_raises_memory_error():
    ctx = gg.Context(mem_size=4096)
    ctx.new_tensor(gg.F32, [512])
    with pytest.raises(MemoryError, match="2048 of 4096 are left"):
        ctx.new_tensor(gg.F32, [1024])
    t = ctx.new_tensor(gg.F32, [256])     # still usable
    t.set(np.arange(256, dtype=np.float32))
    assert t.numpy()[255] == 255


def test_bad_new_tensor_args():
    ctx = gg.Context(1 << 16)
    with pytest.raises(ValueError):
        ctx.new_tensor(gg.F32, [])
    with pytest.raises(ValueError):
        ctx.new_tensor(gg.F32, [1, 2, 3, 4, 5])
    with pytest.raises(ValueError):
        ctx.new_tensor(gg.F32, [-1])
    with pytest.raises(ValueError, match="block size"):
        ctx.new_tensor(gg.Q8_0, [33])
    with pytest.raises(MemoryError):
        ctx.new_tensor(gg.F32, [1 << 30, 1 << 30])
    with pytest.raises(MemoryError, match="too large"):   # 4 * 2**62 wraps size_t
        ctx.new_tensor(gg.F32, [2 ** 62])
    no_alloc = gg.Context(1 << 16, no_alloc=True)
    with pytest.raises(MemoryError, match="too large"):
        no_alloc.new_tensor(gg.Q8_0, [32 * 2 ** 55])


def test_set_validates_size_and_dtype():
    ctx = gg.Context(1 << 16)
    t = ctx.new_tensor(gg.F32, [4, 3])
    with pytest.raises(ValueError, match="set"):
        t.set(np.zeros(11, np.float32))
    with pytest.raises(ValueError, match="expects numpy shape"):
        t.set(np.zeros((4, 3), np.float32))
    t.set(np.arange(12))                  # flat arrays of the right size are accepted
    assert t.numpy()[2, 3] == 11
    q = ctx.new_tensor(gg.Q8_0, [32])
    with pytest.raises(TypeError):
        q.set(np.zeros(32, np.float32))
    h = ctx.new_tensor(gg.F16, [3])
    h.set(np.array([1.0, 65520.0, -np.inf]))
    assert np.isinf(h.numpy()[1]) and h.numpy()[2] == -np.inf


def test_f16_bf16_conversions_bit_exact():
    x = np.array([1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 65504.0, 65519.0, 65520.0, 2.0 ** -24,
                  2.0 ** -25, 3 * 2.0 ** -26, -0.0, np.inf, -np.inf, 1e-8], dtype=np.float32)
    np.testing.assert_array_equal(gg.fp32_to_fp16_bits(x), x.astype(np.float16).view(np.uint16))
    nan = np.array([np.nan], np.float32)
    assert gg.fp32_to_fp16_bits(nan)[0] & 0x7E00 == 0x7E00
    b = gg.fp32_to_bf16_bits(np.array([1.0, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, -np.inf], np.float32))
    np.testing.assert_array_equal(b, np.array([0x3F80, 0x3F80, 0x3F82, 0xFF80], np.uint16))
    qn = gg.fp32_to_bf16_bits(np.array([0x7F800001], np.uint32).view(np.float32))[0]
    assert qn & 0x7FC0 == 0x7FC0   # NaN is quieted, not turned into inf


def _q8_0_reference(x):
    blocks = x.reshape(-1, 32).astype(np.float32)
    amax = np.max(np.abs(blocks), axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d == 0, 1, d), 0).astype(np.float32)
    q = np.round(blocks * inv[:, None])     # ties are measure-zero on random data
    return d.astype(np.float16), q.astype(np.int8)


def test_q8_0_and_q4_0_block_layout():
    rng = np.random.default_rng(1)
    x = rng.uniform(-3, 3, 96).astype(np.float32)
    raw = gg.quantize(gg.Q8_0, x)
    assert raw.size == 3 * 34
    d, q = _q8_0_reference(x)
    blocks = raw.reshape(3, 34)
    np.testing.assert_array_equal(blocks[:, :2].copy().view(np.float16).ravel(), d)
    np.testing.assert_array_equal(blocks[:, 2:].view(np.int8), q)
    deq = gg.dequantize(gg.Q8_0, raw)
    np.testing.assert_allclose(deq, (q.astype(np.float32) * d.astype(np.float32)[:, None]).ravel())
    r4 = gg.quantize(gg.Q4_0, x).reshape(3, 18)
    d4 = r4[:, :2].copy().view(np.float16).astype(np.float32).ravel()
    lo, hi = (r4[:, 2:] & 15).astype(np.int32) - 8, (r4[:, 2:] >> 4).astype(np.int32) - 8
    vals = np.concatenate([lo, hi], axis=1) * d4[:, None]
    np.testing.assert_allclose(gg.dequantize(gg.Q4_0, r4.ravel()), vals.ravel())
    # the element of largest magnitude maps to level -8 exactly
    for b in range(3):
        k = np.argmax(np.abs(x[b * 32:(b + 1) * 32]))
        assert np.concatenate([lo, hi], axis=1)[b, k] == -8
    # within half a step, except where the clamp at level 7 costs a full step
    assert np.all(np.abs(vals - x.reshape(3, 32)) <= np.abs(d4)[:, None] + 1e-6)
    zero = gg.quantize(gg.Q8_0, np.zeros(32, np.float32))
    assert not zero.any()


def test_graph_order_leafs_names_and_str(tmp_path):
    ctx = gg.Context(1 << 20)
    a = gg.set_name(ctx.from_numpy(np.ones((2, 4), np.float32)), "a")
    b = gg.set_name(ctx.from_numpy(np.ones(4, np.float32)), "b")
    s = gg.set_name(gg.add(ctx, a, b), "s")
    y = gg.set_name(gg.mul(ctx, s, s), "y")
    g = gg.Graph(ctx)
    g.build_forward_expand(y)
    g.build_forward_expand(y)          # already present: nothing added
    assert [n.name for n in g.nodes] == ["s", "y"]
    assert [l.name for l in g.leafs] == ["a", "b"]
    assert g.nodes[-1] is y
    text = str(g)
    assert "ADD" in text and "MUL" in text and "[4, 2, 1, 1]" in text
    dot = tmp_path / "g.dot"
    g.to_dot(str(dot))
    body = dot.read_text()
    assert body.startswith("digraph") and "->" in body
    g.set_profiling(True)
    g.compute(n_threads=2)
    assert len(g.node_times) == 2 and all(t >= 0 for t in g.node_times)
    np.testing.assert_array_equal(y.numpy(), np.full((2, 4), 4.0, np.float32))


def test_execution_follows_insertion_order_for_side_effects():
    """A write expanded before an unrelated reader runs first: here an
    in-place add into `cache` followed by a node reading a plain view of `cache`."""
    ctx = gg.Context(1 << 20)
    cache = ctx.from_numpy(np.zeros(4, np.float32))
    one = ctx.from_numpy(np.ones(4, np.float32))
    write = gg.add_inplace(ctx, cache, one)
    reader = gg.mul(ctx, gg.view_1d(ctx, cache, 4, 0), one)
    g = gg.Graph(ctx)
    g.build_forward_expand(write)
    g.build_forward_expand(reader)
    g.compute(n_threads=2)
    np.testing.assert_array_equal(reader.numpy(), np.ones(4, np.float32))


def test_memory_planner_reuses_intermediates():
    ctx = gg.Context(1 << 20, no_alloc=True)
    x = ctx.new_tensor(gg.F32, [1024, 4])
    w = ctx.new_tensor(gg.F32, [1024])
    h = x
    for _ in range(8):
        h = gg.silu(ctx, gg.mul(ctx, h, w))
    g = gg.Graph(ctx)
    g.build_forward_expand(h)
    with pytest.raises(ValueError, match="no storage"):
        x.numpy()
    g.alloc()
    stats = g.plan_stats()
    assert stats["sum_intermediate_bytes"] == 16 * 1024 * 4 * 4
    assert stats["peak_bytes"] <= 3 * 1024 * 4 * 4    # live set is at most a few buffers
    xv = np.random.default_rng(0).uniform(-1, 1, (4, 1024)).astype(np.float32)
    wv = np.random.default_rng(1).uniform(0.5, 1.5, 1024).astype(np.float32)
    x.set(xv)
    w.set(wv)
    g.compute(n_threads=2)
    ref = xv.astype(np.float64)
    for _ in range(8):
        ref = ref * wv
        ref = ref / (1 + np.exp(-ref))
    assert_close(h.numpy(), ref, 1e-7)


def test_threads_give_same_result():
    rng = np.random.default_rng(3)
    ctx = gg.Context(16 << 20)
    a = ctx.from_numpy(rng.uniform(-2, 2, (37, 129)).astype(np.float32))
    y = gg.tanh(ctx, gg.add(ctx, a, a))
    outs = []
    for n in (1, 2, 3, 4):
        compute(ctx, y, n_threads=n)
        outs.append(np.array(y.numpy()))
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


def test_tensor_from_buffer_is_zero_copy():
    buf = np.arange(32, dtype=np.float32).view(np.uint8)
    ctx = gg.Context(1 << 16, no_alloc=True)
    t = ctx.tensor_from_buffer(buf, gg.F32, [8, 4])
    assert t.data_ptr == buf.ctypes.data
    with pytest.raises(ValueError, match="needs 160 bytes"):
        ctx.tensor_from_buffer(buf, gg.F32, [8, 5])


def test_op_table_lists_every_op_once():
    table = gg.op_table()
    names = [n for n, _, _ in table]
    assert len(names) == len(set(names))
    for required in ("MUL_MAT", "FLASH_ATTN_EXT", "SSM_SCAN", "DSV4_HC_COMB", "LIGHTNING_INDEXER",
                     "FILL", "CPY", "GLU", "ROPE", "SOFT_MAX", "SET_ROWS", "GET_ROWS"):
        assert required in names
