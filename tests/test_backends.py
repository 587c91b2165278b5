"""Backends: selection, errors, DLPack, and device-vs-CPU comparisons (run when a GPU is present)."""
import numpy as np
import pytest

import pyggml as gg
from util import assert_close, values

DEVICES = [b for b in gg.backends() if b != "cpu"]
needs_gpu = pytest.mark.skipif(not DEVICES, reason="no CUDA device in this build/machine "
                               f"(cuda_built={gg.cuda_built()}, backends={gg.backends()})")


def test_backend_selection_and_errors():
    assert gg.backends()[0] == "cpu"
    assert gg.Backend("cpu") == gg.Backend(" CPU ")
    with pytest.raises(ValueError, match="unknown backend"):
        gg.Backend("tpu")
    with pytest.raises(ValueError, match="no such device"):
        gg.Backend("cuda:99")
    ctx = gg.Context(1 << 16, backend=gg.Backend("cpu"))
    assert ctx.backend == gg.Backend("cpu") and ctx.device == -1
    with pytest.raises(TypeError):
        gg.Context(1 << 16, backend=3.5)


def test_dlpack_cpu_roundtrip_is_zero_copy():
    ctx = gg.Context(1 << 16)
    t = ctx.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    a = np.from_dlpack(t)
    assert a.shape == (3, 4) and a.ctypes.data == t.data_ptr
    tr = gg.transpose(ctx, t)
    np.testing.assert_array_equal(np.from_dlpack(tr), np.arange(12, dtype=np.float32).reshape(3, 4).T)
    assert t.__dlpack_device__() == (1, 0)
    q = ctx.new_tensor(gg.Q8_0, [32])
    with pytest.raises(TypeError, match="q8_0"):
        q.__dlpack__()


def _llama_ops(ctx, rng):
    """A small set of LLaMA-layer ops; returns the output tensors."""
    x = ctx.from_numpy(rng.uniform(-1, 1, (5, 64)).astype(np.float32))
    w = ctx.from_numpy(rng.uniform(-1, 1, (48, 64)).astype(np.float32))
    outs = [gg.mul_mat(ctx, w, x), gg.silu(ctx, x), gg.add(ctx, x, x)]
    if hasattr(gg, "rms_norm"):
        outs.append(gg.rms_norm(ctx, x, 1e-5))
    if hasattr(gg, "soft_max_ext"):
        outs.append(gg.soft_max_ext(ctx, x, None, 0.5, 0.0))
    return outs


@needs_gpu
@pytest.mark.parametrize("device", DEVICES)
def test_device_matches_cpu_on_llama_ops(device):
    results = {}
    for backend in ("cpu", device):
        rng = np.random.default_rng(0)
        ctx = gg.Context(16 << 20, backend=backend)
        outs = _llama_ops(ctx, rng)
        g = gg.Graph(ctx)
        for o in outs:
            g.build_forward_expand(o)
        g.compute(2)
        results[backend] = [o.to_f32() for o in outs]
    for ref, got in zip(results["cpu"], results[device]):
        assert_close(got, ref.astype(np.float64), 5e-4)


@needs_gpu
def test_device_numpy_is_a_host_copy_and_dlpack_is_on_device():
    ctx = gg.Context(1 << 20, backend=DEVICES[0])
    t = ctx.new_tensor(gg.F32, [8])
    t.set(np.arange(8, dtype=np.float32))
    h = t.numpy()
    assert not h.flags.writeable
    np.testing.assert_array_equal(h, np.arange(8, dtype=np.float32))
    assert t.__dlpack_device__()[0] == 2
    with pytest.raises(MemoryError):
        gg.Context(1 << 50, backend=DEVICES[0])


def _sample_graph(ctx):
    """A few nodes of different families, with a layout-only node in between."""
    rng = np.random.default_rng(0)
    x = ctx.from_numpy(rng.uniform(-1, 1, (4, 64)).astype(np.float32))
    w = ctx.from_numpy(rng.uniform(-1, 1, (8, 64)).astype(np.float32))
    y = gg.mul_mat(ctx, w, x)
    return {"mul_mat": y, "transpose": gg.transpose(ctx, y), "argsort": gg.argsort(ctx, y, 0),
            "rms_norm": gg.rms_norm(ctx, y, 1e-6), "cumsum": gg.cumsum(ctx, y)}


def test_cpu_supports_every_op_it_has():
    ctx = gg.Context(1 << 20)
    cpu = gg.Backend("cpu")
    for name, t in _sample_graph(ctx).items():
        assert cpu.supports_op(t), name
        assert cpu.unsupported_reason(t) == ""
    assert gg.backend_unsupported_reason("cpu", ctx.new_tensor(gg.F32, [3])) == ""
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        gg.backend_unsupported_reason("tpu", ctx.new_tensor(gg.F32, [3]))
    assert gg.backends() == gg.backend_names() and gg.backend_kinds()[0] == ("cpu", 1)


@pytest.mark.skipif(not gg.cuda_built(), reason="this build has no CUDA backend")
def test_cuda_support_is_per_op_and_type():
    """What the CUDA kernels handle, asked of the kind (no GPU needed): an explicit list, so an
    op without a CUDA kernel, or a type its kernel does not read, is refused with the reason."""
    ctx = gg.Context(1 << 22)
    ask = lambda t: gg.backend_unsupported_reason("cuda", t)
    g = _sample_graph(ctx)
    assert ask(g["mul_mat"]) == "" and ask(g["rms_norm"]) == "" and ask(g["transpose"]) == ""
    assert "no CUDA kernel" in ask(g["argsort"]) and "no CUDA kernel" in ask(g["cumsum"])
    x = ctx.new_tensor(gg.F32, [64, 3])
    for wtype, ok in [(gg.F16, True), (gg.Q8_0, True), (gg.Q4_0, True), (gg.NVFP4, False)]:
        why = ask(gg.mul_mat(ctx, ctx.new_tensor(wtype, [64, 5]), x))
        assert (why == "") == ok, (wtype, why)
        if not ok:
            assert "nvfp4" in why
    assert "quantizing" in ask(gg.cpy(ctx, x, ctx.new_tensor(gg.Q8_0, [64, 3])))
    assert ask(gg.cpy(ctx, x, ctx.new_tensor(gg.F16, [64, 3]))) == ""
    idx = ctx.new_tensor(gg.I32, [2])
    assert ask(gg.get_rows(ctx, ctx.new_tensor(gg.Q4_0, [64, 5]), idx)) == ""
    assert "nvfp4" in ask(gg.get_rows(ctx, ctx.new_tensor(gg.NVFP4, [64, 5]), idx))
    pos = ctx.new_tensor(gg.I32, [3])
    h = ctx.new_tensor(gg.F32, [64, 2, 3])
    assert ask(gg.rope_ext(ctx, h, pos, None, 64, 2, 4096, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0)) == ""


@needs_gpu
@pytest.mark.parametrize("device", DEVICES)
def test_device_refuses_unsupported_op_before_running(device):
    ctx = gg.Context(1 << 20, backend=device)
    x = ctx.new_tensor(gg.F32, [16, 2])
    x.set(np.arange(32, dtype=np.float32).reshape(2, 16))
    first = gg.scale(ctx, x, 2.0)          # supported, would run first
    first.set(np.full((2, 16), -7.0, np.float32))
    last = gg.argsort(ctx, first, 0)       # no CUDA kernel
    assert not gg.Backend(device).supports_op(last)
    g = gg.Graph(ctx)
    g.build_forward_expand(last)
    with pytest.raises(NotImplementedError, match=rf"ARGSORT.*{device}"):
        g.compute(1)
    np.testing.assert_array_equal(values(first), np.full((2, 16), -7.0, np.float32))  # nothing ran
