"""No input from Python crashes the process: wrong objects and None where a context or tensor is
expected, bad thread counts, unknown enum values, empty tensors, and tensors of another context
whose Python references are gone. Each case raises a clear TypeError/ValueError (or works, for
empty tensors, as ggml allows) and leaves the process usable."""
import gc

import numpy as np
import pytest

import pyggml as gg


@pytest.fixture()
def ctx():
    return gg.Context(mem_size=4 << 20)


def _f32(ctx, shape, start=0.0):
    n = int(np.prod(shape))
    return ctx.from_numpy(np.arange(start, start + n, dtype=np.float32).reshape(shape))


def _compute(ctx, *outs, n_threads=1):
    g = gg.Graph(ctx)
    for t in outs:
        g.build_forward_expand(t)
    g.compute(n_threads=n_threads)
    return g


@pytest.mark.parametrize("call", [
    lambda a: gg.add(None, a, a),
    lambda a: gg.scale(None, a, 2.0),
    lambda a: gg.mul_mat(None, a, a),
    lambda a: gg.view_1d(None, a, 2, 0),
    lambda a: gg.cast(None, a, gg.F16),
    lambda a: gg.soft_max(None, a),
    lambda a: gg.unary(None, a, gg.UnaryOp.ABS),
], ids=["add", "scale", "mul_mat", "view_1d", "cast", "soft_max", "unary"])
def test_ctx_none_is_a_type_error(ctx, call):
    a = _f32(ctx, (2, 4))
    with pytest.raises(TypeError, match=r"^\[\w+\] ctx must be a pyggml Context, got None; create one with gg.Context\(\)"):
        call(a)


def test_wrong_object_for_a_tensor_names_the_op_argument_and_the_fix(ctx):
    a = _f32(ctx, (4,))
    with pytest.raises(TypeError) as e:
        gg.add(ctx, a, np.zeros(4, np.float32))
    assert str(e.value) == ("[add] b must be a pyggml Tensor, got numpy.ndarray; "
                            "use ctx.from_numpy(...) to make a tensor of it")
    with pytest.raises(TypeError, match=r"^\[mul_mat\] a must be a pyggml Tensor, got str$"):
        gg.mul_mat(ctx, "x", a)
    with pytest.raises(TypeError, match=r"^\[scale\] ctx must be a pyggml Context, got pyggml.Tensor; "
                                        r"ops take the context first: gg.scale\(ctx, ...\)"):
        gg.scale(a, a, 2.0)
    with pytest.raises(TypeError, match=r"^\[add\] a must be a pyggml Tensor, got pyggml.Context"):
        gg.add(ctx, ctx, a)
    with pytest.raises(TypeError, match=r"^\[argsort\] order must be a gg.SortOrder or its int id, got str"):
        gg.argsort(ctx, a, "desc")
    with pytest.raises(TypeError, match=r"^\[flash_attn_ext_add_sinks\] node must be a pyggml Tensor"):
        gg.flash_attn_ext_add_sinks([1, 2], None)
    np.testing.assert_array_equal(_compute_add(ctx, a), 2 * np.arange(4))


def _compute_add(ctx, a):
    y = gg.add(ctx, a, a)
    _compute(ctx, y)
    return y.numpy()


def test_graph_rejects_none_and_foreign_objects(ctx):
    with pytest.raises(TypeError, match=r"^\[Graph\] ctx must be a pyggml Context, got None"):
        gg.Graph(None)
    with pytest.raises(TypeError, match=r"^\[Graph\] ctx must be a pyggml Context, got numpy.ndarray"):
        gg.Graph(np.zeros(3))
    g = gg.Graph(ctx)
    with pytest.raises(TypeError, match=r"^\[build_forward_expand\] tensor must be a pyggml Tensor, got None"):
        g.build_forward_expand(None)
    with pytest.raises(TypeError, match=r"^\[build_forward_expand\] tensor must be a pyggml Tensor, got numpy"):
        g.build_forward_expand(np.zeros(3))
    a = _f32(ctx, (3,))
    y = gg.scale(ctx, a, 3.0)
    g.build_forward_expand(y)
    g.compute(n_threads=1)
    np.testing.assert_array_equal(y.numpy(), [0, 3, 6])


@pytest.mark.parametrize("n_threads", [0, -1, -(2 ** 31)])
def test_compute_rejects_thread_counts_below_one(ctx, n_threads):
    y = gg.scale(ctx, _f32(ctx, (4,)), 2.0)
    g = gg.Graph(ctx)
    g.build_forward_expand(y)
    with pytest.raises(ValueError, match=rf"^\[compute\] n_threads={n_threads}: must be >= 1"):
        g.compute(n_threads=n_threads)
    g.compute(n_threads=None)                        # None: one per hardware thread
    np.testing.assert_array_equal(y.numpy(), [0, 2, 4, 6])


@pytest.mark.parametrize("n_threads", [10_000, 1_000_000, 2 ** 31 - 1])
def test_compute_refuses_absurd_thread_counts_with_the_reason(ctx, n_threads):
    y = gg.scale(ctx, _f32(ctx, (4,)), 2.0)
    g = gg.Graph(ctx)
    g.build_forward_expand(y)
    with pytest.raises(ValueError, match=r"more than \d+ \(4x the \d+ hardware threads, at least 16\)"):
        g.compute(n_threads=n_threads)
    g.compute(n_threads=16)                           # the cap itself is allowed on any machine
    np.testing.assert_array_equal(y.numpy(), [0, 2, 4, 6])
    with pytest.raises(TypeError):
        g.compute(n_threads="4")


@pytest.mark.parametrize("enum, bad", [(gg.Type, 99), (gg.Type, 4), (gg.Type, -1), (gg.UnaryOp, 99),
                                       (gg.GluOp, 1000), (gg.SortOrder, 7)])
def test_enum_of_an_unknown_value_is_a_value_error(enum, bad):
    with pytest.raises(ValueError, match=rf"^{bad} is not a valid {enum.__name__} \(members: "):
        enum(bad)


def test_enum_of_a_known_value_is_that_member():
    assert gg.Type(0) == gg.F32 and gg.Type(30) == gg.BF16 and str(gg.Type(8)) == "Type.Q8_0"
    assert gg.UnaryOp(10) == gg.UnaryOp.SILU and gg.SortOrder(1) == gg.SortOrder.DESC


def test_op_enum_arguments_take_members_and_int_ids(ctx):
    a = _f32(ctx, (4,), start=-2.0)
    r1, r2 = gg.unary(ctx, a, gg.UnaryOp.ABS), gg.unary(ctx, a, 0)
    _compute(ctx, r1, r2)
    np.testing.assert_array_equal(r1.numpy(), [2, 1, 0, 1])
    np.testing.assert_array_equal(r2.numpy(), [2, 1, 0, 1])
    with pytest.raises(NotImplementedError, match=r"\[unary\] unsupported unary op id 99"):
        gg.unary(ctx, a, 99)
    with pytest.raises(ValueError, match=r"\[argsort\] order=5 must be 0 \(ASC\) or 1 \(DESC\)"):
        gg.argsort(ctx, a, 5)
    with pytest.raises(ValueError, match=r"\[glu\] op is out of range for gg.GluOp"):
        gg.glu(ctx, _f32(ctx, (2, 4)), 2 ** 40)


@pytest.mark.parametrize("ne, shape", [([0], (0,)), ([4, 0], (0, 4)), ([3, 0, 2], (2, 0, 3)),
                                       ([0, 3], (3, 0)), ([1, 1, 0], (0, 1, 1)), ([4, 1, 1, 0], (0, 1, 1, 4))])
def test_empty_tensor_reads_back_empty(ctx, ne, shape):
    t = ctx.new_tensor(gg.F32, ne)
    assert t.nelements == 0
    assert t.numpy().shape == shape
    t.set(np.zeros(shape, np.float32))                 # an empty array of the right shape
    t.set(np.zeros(0, np.float32))                     # or a flat empty one
    assert t.to_f32().shape == shape
    with pytest.raises(ValueError, match="set: "):
        t.set(np.zeros(4, np.float32))
    assert np.from_dlpack(t).shape == shape


def test_empty_tensors_from_numpy_and_quantized(ctx):
    a = ctx.from_numpy(np.zeros((0, 4), np.float32))
    assert a.ne == [4, 0, 1, 1] and a.numpy().shape == (0, 4)
    q = ctx.new_tensor(gg.Q8_0, [32, 0])
    assert q.numpy().shape == (0, 34) and q.to_f32().shape == (0, 32)
    q.set(np.zeros((0, 34), np.uint8))


def test_ops_on_empty_tensors_give_empty_results(ctx):
    a = ctx.from_numpy(np.zeros((0, 4), np.float32))     # ne [4, 0]: zero rows
    w = _f32(ctx, (5, 4))
    e = ctx.new_tensor(gg.F32, [0, 3])                   # three empty rows
    outs = {
        "add": (gg.add(ctx, a, a), (0, 4)),
        "mul_mat": (gg.mul_mat(ctx, w, a), (0, 5)),
        "soft_max": (gg.soft_max(ctx, a), (0, 4)),
        "sum_rows": (gg.sum_rows(ctx, a), (0, 1)),
        "rms_norm": (gg.rms_norm(ctx, a, 1e-5), (0, 4)),
        "cast": (gg.cast(ctx, a, gg.F16), (0, 4)),
        "get_rows": (gg.get_rows(ctx, w, ctx.new_tensor(gg.I32, [0])), (0, 4)),
        "soft_max_empty_rows": (gg.soft_max(ctx, e), (3, 0)),
        "sum_rows_empty_rows": (gg.sum_rows(ctx, e), (3, 1)),
    }
    _compute(ctx, *[t for t, _ in outs.values()], n_threads=2)
    for name, (t, shape) in outs.items():
        assert t.numpy().shape == shape, name
    np.testing.assert_array_equal(outs["sum_rows_empty_rows"][0].numpy(), np.zeros((3, 1)))  # as numpy's sum


def test_tensor_of_another_context_keeps_that_context_alive():
    ctx1 = gg.Context(mem_size=1 << 20)
    ctx2 = gg.Context(mem_size=1 << 20)
    w = ctx2.from_numpy(np.arange(6, dtype=np.float32))
    view = gg.view_1d(ctx1, w, 3, 3 * 4)                  # a view into ctx2's arena
    y = gg.add(ctx1, view, ctx1.from_numpy(np.ones(3, np.float32)))
    del w, ctx2
    gc.collect()
    junk = [gg.Context(mem_size=1 << 20).from_numpy(np.full(1 << 18, 7, np.float32)) for _ in range(4)]
    _compute(ctx1, y)
    np.testing.assert_array_equal(y.numpy(), [4, 5, 6])
    del junk


def test_src_and_view_src_keep_their_tensors_alive():
    ctx = gg.Context(mem_size=1 << 20)
    y = gg.view_1d(ctx, ctx.from_numpy(np.arange(4, dtype=np.float32)), 2, 4)
    src, vsrc = y.src[0], y.view_src
    del y, ctx
    gc.collect()
    np.testing.assert_array_equal(src.numpy(), [0, 1, 2, 3])
    np.testing.assert_array_equal(vsrc.numpy(), [0, 1, 2, 3])
