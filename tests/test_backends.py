"""Backends: selection, errors, DLPack, and device-vs-CPU comparisons (run when a GPU is present)."""
import numpy as np
import pytest

import pyggml as gg
from util import assert_close

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
