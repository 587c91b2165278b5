"""Python-side conveniences layered over the C++ core (numpy I/O, printing, dot export)."""
from __future__ import annotations

import numpy as np

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # editors and type checkers see every op from the generated stub
    from ._core import *  # noqa: F401,F403

_core = sys.modules["pyggml._core"]

Type = _core.Type
Tensor = _core.Tensor
Graph = _core.Graph
UnaryOp = _core.UnaryOp
GluOp = _core.GluOp

F32, F16, BF16, I32, I64 = Type.F32, Type.F16, Type.BF16, Type.I32, Type.I64
Q8_0, Q4_0, NVFP4 = Type.Q8_0, Type.Q4_0, Type.NVFP4

_NUMPY_TYPES = {np.dtype(np.float32): F32, np.dtype(np.float16): F16, np.dtype(np.int32): I32,
                np.dtype(np.int64): I64}


def _to_bf16_bits(x: np.ndarray) -> np.ndarray:
    return _core.fp32_to_bf16_bits(np.ascontiguousarray(x, dtype=np.float32).ravel()).reshape(x.shape)


class Backend:
    """A compute backend: ``Backend("cpu")`` or ``Backend("cuda:0")`` (see :func:`backends`)."""

    def __init__(self, name: str = "cpu"):
        name = name.strip().lower()
        if name == "cpu":
            self.kind, self.device = "cpu", -1
        elif name.startswith("cuda"):
            try:
                idx = int(name.split(":", 1)[1]) if ":" in name else 0
            except ValueError:
                raise ValueError(f"Backend({name!r}): expected 'cuda' or 'cuda:N' with N a device index") from None
            if idx < 0 or idx >= _core.cuda_device_count():
                why = "this build has no CUDA support" if not _core.cuda_built() else \
                    f"{_core.cuda_device_count()} CUDA device(s) present"
                raise ValueError(f"Backend({name!r}): no such device ({why})")
            self.kind, self.device = "cuda", idx
        else:
            raise ValueError(f"Backend({name!r}): unknown backend; expected 'cpu' or 'cuda:N'")
        self.name = "cpu" if self.kind == "cpu" else f"cuda:{self.device}"

    def __repr__(self):
        return f"Backend({self.name!r})"

    def __eq__(self, other):
        return isinstance(other, Backend) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


def backends() -> list:
    """Names of the backends present: always 'cpu', plus 'cuda:N' per visible GPU."""
    return ["cpu"] + [f"cuda:{i}" for i in range(_core.cuda_device_count())]


def _device_of(backend) -> int:
    if backend is None:
        return -1
    if isinstance(backend, str):
        backend = Backend(backend)
    if not isinstance(backend, Backend):
        raise TypeError(f"backend must be a Backend, a name or None, got {type(backend).__name__}")
    return backend.device


class Context(_core.Context):
    """Creates tensors. With ``no_alloc=False`` every tensor gets storage in an arena of
    ``mem_size`` bytes; with ``no_alloc=True`` storage is assigned by ``Graph.alloc()``.
    ``backend`` ("cpu", "cuda:0" or a :class:`Backend`) chooses where the storage lives;
    a graph computes on the backend of its context."""

    def __init__(self, mem_size: int = 64 << 20, no_alloc: bool = False, backend=None):
        super().__init__(mem_size, no_alloc, _device_of(backend))

    @property
    def backend(self) -> Backend:
        return Backend("cpu" if self.device < 0 else f"cuda:{self.device}")


def _prepare_for(t: Tensor, view: np.ndarray, array) -> np.ndarray:
    """Convert `array` to t's storage units with `view`'s shape, validating size and shape."""
    arr = np.asarray(array)
    if t.type == BF16 and arr.dtype != np.uint16:
        arr = _to_bf16_bits(arr.astype(np.float32))
    elif _core.is_quantized(t.type) and arr.dtype != np.uint8:
        raise TypeError(f"set: {t.name!r} is {_core.type_name(t.type)}; pass its raw block bytes "
                        f"as uint8 (got {arr.dtype})")
    if arr.size != view.size:
        raise ValueError(f"set: {t.name!r} has ne={t.ne} ({view.size} storage units, numpy "
                         f"shape {view.shape}); got an array of shape {arr.shape} ({arr.size})")
    if arr.ndim > 1 and arr.shape != view.shape:
        a_shape, v_shape = tuple(arr.shape), tuple(view.shape)
        while len(a_shape) > len(v_shape) and a_shape[0] == 1:
            a_shape = a_shape[1:]
        while len(v_shape) > len(a_shape) and v_shape[0] == 1:
            v_shape = v_shape[1:]
        if a_shape != v_shape:
            raise ValueError(f"set: {t.name!r} expects numpy shape {view.shape} (ne={t.ne} "
                             f"reversed); got {arr.shape}")
    with np.errstate(over="ignore"):   # f16 overflow to inf is the defined behaviour
        return arr.reshape(view.shape).astype(view.dtype, copy=False)


def _tensor_set(self: Tensor, array) -> Tensor:
    """Copy ``array`` into the tensor (numpy shape = ne reversed, or a flat array of the
    right size). F16 tensors take float arrays (rounded to nearest even), BF16 tensors take
    uint16 bit patterns or floats, block types take raw uint8 bytes. On a device backend
    this uploads (the tensor must be contiguous). Returns the tensor."""
    view = self.numpy()
    data = _prepare_for(self, view, array)
    if self.device >= 0:
        self._upload(np.ascontiguousarray(data).view(np.uint8).ravel())
    else:
        view[...] = data
    return self


def _tensor_get_f32(self: Tensor) -> np.ndarray:
    """A float32 copy of the values (dequantized / widened), numpy shape as numpy()."""
    view = self.numpy()
    if self.type == F32:
        return np.array(view)
    if self.type == F16:
        return view.astype(np.float32)
    if self.type == BF16:
        return (view.astype(np.uint32) << 16).view(np.float32)
    if self.type in (I32, I64):
        return view.astype(np.float32)
    rows = np.ascontiguousarray(view)
    out = _core.dequantize(self.type, rows.ravel())
    return out.reshape(view.shape[:-1] + (self.ne[0],))


Tensor.set = _tensor_set
Tensor.to_f32 = _tensor_get_f32


def set_name(t: Tensor, name: str) -> Tensor:
    """ggml_set_name: name a tensor, returns it."""
    t.name = name
    return t


def _ctx_from_numpy(self: Context, array, type: Type | None = None, name: str | None = None) -> Tensor:
    """New tensor holding a copy of ``array``; ne is the numpy shape reversed. ``type``
    defaults from the dtype (float64 becomes F32)."""
    arr = np.asarray(array)
    if type is None:
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        if arr.dtype not in _NUMPY_TYPES:
            raise TypeError(f"from_numpy: no tensor type for dtype {arr.dtype}; pass type=")
        type = _NUMPY_TYPES[arr.dtype]
    shape = list(reversed(arr.shape)) or [1]
    if _core.is_quantized(type):
        if arr.dtype != np.uint8:
            raise TypeError("from_numpy: block types need uint8 block bytes")
        shape[0] = shape[0] // _core.type_size(type) * _core.blck_size(type)
    if len(shape) > 4:
        raise ValueError(f"from_numpy: at most 4 dims, got shape {arr.shape}")
    t = self.new_tensor(type, shape)
    if name:
        t.name = name
    t.set(arr)
    return t


Context.from_numpy = _ctx_from_numpy


def _graph_str(self: Graph) -> str:
    lines = [f"graph: {self.n_nodes} nodes, {len(self.leafs)} leafs"]
    times = self.node_times
    for i, n in enumerate(self.nodes):
        t = f"  {times[i] * 1e3:9.3f} ms" if len(times) == self.n_nodes else ""
        lines.append(f"{i:4d} {n.op:<18s} {n.name:<28s} {_core.type_name(n.type):<6s} "
                     f"{n.ne}{t}")
    return "\n".join(lines)


def _graph_to_dot(self: Graph, path: str) -> None:
    """Write the graph in Graphviz dot format (leafs as boxes, nodes as ellipses)."""
    ids = {}
    out = ["digraph pyggml {", "  rankdir=TB;"]
    for i, leaf in enumerate(self.leafs):
        ids[id(leaf)] = f"l{i}"
        out.append(f'  l{i} [shape=box,label="{leaf.name}\\n{_core.type_name(leaf.type)} {leaf.ne}"];')
    for i, n in enumerate(self.nodes):
        ids[id(n)] = f"n{i}"
        out.append(f'  n{i} [label="{n.op}\\n{n.name}\\n{_core.type_name(n.type)} {n.ne}"];')
    for i, n in enumerate(self.nodes):
        for s in n.src:
            if s is not None and id(s) in ids:
                out.append(f"  {ids[id(s)]} -> n{i};")
    out.append("}")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


Graph.__str__ = _graph_str
Graph.to_dot = _graph_to_dot


# Every op constructor and helper of the extension: gg.X(ctx, args...) as ggml_X.
_ops = []
for _name in dir(_core):
    if _name.startswith("_") or _name in ("Type", "Tensor", "Context", "Graph", "UnaryOp", "GluOp") \
            or _name in globals():
        continue
    globals()[_name] = getattr(_core, _name)
    _ops.append(_name)

__all__ = ["Type", "Tensor", "Context", "Graph", "UnaryOp", "GluOp", "F32", "F16", "BF16", "I32",
           "I64", "Q8_0", "Q4_0", "NVFP4", "set_name", "backends", "Backend"] + _ops
