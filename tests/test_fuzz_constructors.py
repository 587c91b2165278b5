"""Throws random inputs at every op constructor of gg.op_table(): random types and shapes
(including 0 and mismatched sizes), random views/permutes, None for tensors, random scalars.
Each call must succeed or raise ValueError/TypeError/NotImplementedError/MemoryError; small
successful graphs are also computed (values are not checked) under the same rule. Never a
crash. Deterministic (hypothesis derandomized) and bounded."""
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyggml as gg

ALLOWED = (ValueError, TypeError, NotImplementedError, MemoryError)
# Named GLU forms that ggml has but the op table's GLU row does not list.
EXTRA = ["geglu_erf", "geglu_erf_split", "geglu_erf_swapped", "geglu_quick", "geglu_quick_split",
         "geglu_quick_swapped"]
TYPES = [row["type"] for row in gg.type_traits()]  # every row of the type table
DIMS = [0, 1, 1, 2, 3, 4, 5, 8]
INTS = [-(2 ** 31), -7, -1, 0, 0, 1, 1, 2, 3, 4, 5, 8, 17, 64, 2 ** 31 - 1]
FLOATS = [0.0, 1.0, -1.0, 0.5, 1e-6, 2.0, 10.0, 1e30, float("nan"), float("inf"), float("-inf")]
MAX_COMPUTE_ELEMS = 1 << 16
# mostly small non-negative ints (so that calls often succeed and get computed), some edges
SMALL_OR_EDGE_INT = st.one_of(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4), st.sampled_from(INTS))


def _constructors():
    names = []
    for _op, _family, ctors in gg.op_table():
        names += ctors.split()
    return sorted(set(names + EXTRA))


def _signatures(name, fn):
    """Parameter annotations of each pybind overload, parsed from the docstring."""
    sigs = re.findall(r"^(?:\d+\. )?" + re.escape(name) + r"\((.*)\) ->", fn.__doc__ or "", re.M)
    out = []
    for s in sigs:
        params = [p for p in re.split(r", (?=\w+:)", s) if p]
        out.append([p.split(":", 1)[1].split("=")[0].strip() if ":" in p else "object" for p in params])
    return out


def _kind(ann):
    if "Context" in ann:
        return "ctx"
    if "Tensor" in ann:
        return "tensor"
    if "Sequence" in ann:
        return "list"
    if ann.endswith(".Type") or ann == "object":
        return "type"
    if "SupportsFloat" in ann or ann == "float":
        return "float"
    if ann == "bool":
        return "bool"
    return "int"  # ints and int-like enums (GluOp, UnaryOp, SortOrder, ...)


@st.composite
def _shape(draw, type_):
    n_dims = draw(st.integers(1, 4))
    ne = [draw(st.sampled_from(DIMS)) for _ in range(n_dims)]
    blck = gg.blck_size(type_)
    if blck > 1:
        ne[0] = blck * draw(st.sampled_from([0, 1, 1, 2]))
    return ne


def _fill(t):
    """Finite values (zeros for index types: valid wherever an index is expected)."""
    if not t.has_data or t.nbytes == 0:
        return
    if t.type in (gg.I32, gg.I64):
        t.set(np.zeros(t.numpy().size, dtype=np.int32 if t.type == gg.I32 else np.int64))
    elif gg.is_quantized(t.type):
        n = t.ne[0] // gg.blck_size(t.type) * t.ne[1] * t.ne[2] * t.ne[3]
        rng = np.random.default_rng(t.nbytes)
        t.set(gg.quantize(t.type, rng.uniform(-1, 1, size=n * gg.blck_size(t.type)).astype(np.float32)))
    else:
        t.set(np.linspace(-2.0, 2.0, t.numpy().size, dtype=np.float32))


@st.composite
def _tensor(draw, ctx, base):
    if draw(st.integers(0, 9)) == 0:
        return None
    if base is not None and draw(st.booleans()):
        type_, ne = base
        if draw(st.integers(0, 3)) == 0:
            type_ = draw(st.sampled_from([gg.F32, gg.F16, gg.BF16, gg.I32]))
    else:
        type_ = draw(st.sampled_from(TYPES))
        ne = draw(_shape(type_))
    try:
        t = ctx.new_tensor(type_, ne)
    except ALLOWED:
        return None
    _fill(t)
    how = draw(st.sampled_from(["plain", "plain", "plain", "transpose", "permute", "rows", "view1d"]))
    try:
        if how == "transpose":
            t = gg.transpose(ctx, t)
        elif how == "permute":
            axes = draw(st.permutations([0, 1, 2, 3]))
            t = gg.permute(ctx, t, *axes)
        elif how == "rows" and t.ne[1] > 1:  # padded rows: every other row of t
            t = gg.view_4d(ctx, t, t.ne[0], t.ne[1] // 2, t.ne[2], t.ne[3], 2 * t.nb[1], t.nb[2], t.nb[3], 0)
        elif how == "view1d" and t.ne[0] > 1 and gg.blck_size(t.type) == 1:
            t = gg.view_1d(ctx, t, t.ne[0] - 1, t.nb[0])
    except ALLOWED:
        pass
    return t


def _small(t):
    return all(0 <= n for n in t.ne) and t.nelements <= MAX_COMPUTE_ELEMS


@pytest.mark.parametrize("name", _constructors())
@settings(max_examples=6, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_inputs_never_crash(name, data):
    if not hasattr(gg, name):
        pytest.skip(f"{name} is not bound yet")
    fn = getattr(gg, name)
    sigs = _signatures(name, fn)
    assert sigs, f"{name}: no signature in its docstring"
    kinds = [_kind(a) for a in data.draw(st.sampled_from(sigs), label="signature")]
    ctx = gg.Context(mem_size=16 << 20)
    btype = data.draw(st.sampled_from([gg.F32, gg.F32, gg.F16, gg.BF16]), label="base type")
    base = (btype, data.draw(_shape(btype), label="base shape"))
    args, tensors = [], []
    for k in kinds:
        if k == "ctx":
            args.append(ctx)
        elif k == "tensor":
            t = data.draw(_tensor(ctx, base), label="tensor")
            args.append(t)
            if t is not None:
                tensors.append(t)
        elif k == "int":
            args.append(data.draw(SMALL_OR_EDGE_INT, label="int"))
        elif k == "float":
            args.append(data.draw(st.one_of(st.sampled_from([0.5, 1.0]), st.sampled_from(FLOATS)), label="float"))
        elif k == "bool":
            args.append(data.draw(st.booleans(), label="bool"))
        elif k == "type":
            args.append(data.draw(st.sampled_from(TYPES + [0, 1, 99, -1]), label="type"))
        else:
            args.append(data.draw(st.lists(st.sampled_from(INTS[2:10]), max_size=5), label="list"))
    try:
        out = fn(*args)
    except ALLOWED:
        return
    results = [out] if isinstance(out, gg.Tensor) else [t for t in tensors if t.op != "NONE"]
    if not results or not all(_small(t) for t in results + tensors):
        return
    g = gg.Graph(ctx)
    try:
        for t in results:
            g.build_forward_expand(t)
        g.compute(n_threads=2)
    except ALLOWED:
        return
    for t in results:
        if t.has_data and t.type in (gg.F32, gg.F16, gg.BF16, gg.I32):
            try:
                t.numpy()  # readable (numpy itself refuses e.g. empty views with huge dims)
            except ALLOWED:
                pass
    ctx2_ok = gg.add(ctx, ctx.new_tensor(gg.F32, [2]), ctx.new_tensor(gg.F32, [1]))
    assert ctx2_ok is not None  # the context still works


def test_every_table_constructor_is_fuzzed():
    names = _constructors()
    for _op, _family, ctors in gg.op_table():
        assert set(ctors.split()) <= set(names)


# ---- None and foreign objects in every argument position -----------------------------------
def _baseline(kind, ctx):
    """A plausible argument of this kind (so that only the replaced position is wrong)."""
    if kind == "ctx":
        return ctx
    if kind == "tensor":
        return ctx.from_numpy(np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4))
    return {"int": 1, "float": 1.0, "bool": False, "type": gg.F32, "list": [1, 1, 1, 1]}[kind]


def _foreign(ctx, other_ctx):
    return {"None": None, "ndarray": np.zeros(4, np.float32), "int": 3, "str": "x",
            "object": object(), "context": ctx, "list": [1.0, 2.0],
            "other_context_tensor": other_ctx.from_numpy(np.ones((4, 4), np.float32))}


@pytest.mark.parametrize("name", _constructors())
def test_none_and_foreign_objects_in_every_position(name):
    """Every argument position of every constructor, given None or an object of the wrong
    kind, either works (e.g. None for an optional tensor, an int for a float) or raises
    TypeError/ValueError/NotImplementedError; a non-tensor where a tensor is expected, or a
    non-context as the context, raises TypeError naming the op and the argument."""
    if not hasattr(gg, name):
        pytest.skip(f"{name} is not bound yet")
    fn = getattr(gg, name)
    ctx, other_ctx = gg.Context(mem_size=1 << 20), gg.Context(mem_size=1 << 20)
    for sig in _signatures(name, fn):
        kinds = [_kind(a) for a in sig]
        for pos, kind in enumerate(kinds):
            for label, value in _foreign(ctx, other_ctx).items():
                args = [_baseline(k, ctx) for k in kinds]
                args[pos] = value
                wrong_ctx = kind == "ctx" and label != "context"
                wrong_tensor = kind == "tensor" and label not in ("None", "other_context_tensor")
                try:
                    fn(*args)
                except ALLOWED as e:
                    if wrong_ctx:
                        assert isinstance(e, TypeError) and re.match(
                            rf"\[{name}\] \w+ must be a pyggml Context, got ", str(e)), (label, str(e))
                    if wrong_tensor:
                        assert isinstance(e, TypeError) and re.match(
                            rf"\[{name}\] \w+ must be a pyggml Tensor, got ", str(e)), (label, str(e))
                        if label == "ndarray":
                            assert "numpy.ndarray; use ctx.from_numpy" in str(e)
                else:
                    assert not wrong_ctx and not wrong_tensor, f"{name} accepted {label} at {pos}"
    # the process and both contexts still work
    y = gg.add(ctx, ctx.from_numpy(np.ones(3, np.float32)), other_ctx.from_numpy(np.ones(3, np.float32)))
    g = gg.Graph(ctx)
    g.build_forward_expand(y)
    g.compute(n_threads=1)
    np.testing.assert_array_equal(y.numpy(), [2, 2, 2])
