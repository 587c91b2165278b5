"""The one SIMD dispatch: gg.isa()/gg.set_isa() switch every kernel family in-process."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, values

LEVELS = ["scalar", "avx2", "avx512"]


def test_levels_and_cap():
    detected = gg.isa(detected=True)
    assert detected in LEVELS
    previous = gg.set_isa("scalar")
    try:
        assert gg.isa() == "scalar"
        assert gg.set_isa("avx2") == "scalar"          # returns the cap it replaced
        assert gg.isa() == ("scalar" if detected == "scalar" else "avx2")
        gg.set_isa("avx512")                            # never above what the CPU runs
        assert gg.isa() == detected
        gg.set_isa("native")
        assert gg.isa() == detected
        with pytest.raises(ValueError, match="unknown level 'sse9'"):
            gg.set_isa("sse9")
        assert gg.isa() == detected                     # a bad name changes nothing
    finally:
        gg.set_isa(previous)


def _families(ctx, rng):
    """One op of every SIMD family, on rows long enough to leave the vector tails."""
    x = ctx.from_numpy(rng.uniform(-3, 3, (3, 1003)).astype(np.float32))
    w = ctx.from_numpy(rng.uniform(-1, 1, (7, 1003)).astype(np.float32))
    return {
        "mul_mat": (gg.mul_mat(ctx, w, x), lambda: ref.mul_mat(values(w), values(x))),
        "soft_max": (gg.soft_max(ctx, x), None),
        "rms_norm": (gg.rms_norm(ctx, x, 1e-6), lambda: ref.rms_norm(values(x), 1e-6)),
        "cast_f16": (gg.cast(ctx, x, gg.F16), lambda: values(x).astype(np.float16)),
    }


def _run_all(level):
    previous = gg.set_isa(level)
    try:
        ctx = gg.Context(8 << 20)
        outs = _families(ctx, np.random.default_rng(0))
        compute(ctx, *[o for o, _ in outs.values()])
        return {k: (values(o).astype(np.float64), want) for k, (o, want) in outs.items()}
    finally:
        gg.set_isa(previous)


@pytest.mark.skipif(gg.isa(detected=True) == "scalar", reason="this CPU runs only the plain loops")
def test_set_isa_switches_the_kernels_in_process():
    """A float-sum kernel changes its rounding with the vector width: the results of the
    scalar and the vector tables differ in the last bits, and both match the reference."""
    plain, vector = _run_all("scalar"), _run_all("native")
    for name in plain:
        got_p, want = plain[name]
        got_v, _ = vector[name]
        if want is not None:
            assert_close(got_p, want(), 1e-7, f"{name}/scalar")
            assert_close(got_v, want(), 1e-7, f"{name}/{gg.isa()}")
    # the f32 sums (dots, softmax exp sums) really ran on different tables
    assert not np.array_equal(plain["mul_mat"][0], vector["mul_mat"][0])
    assert not np.array_equal(plain["soft_max"][0], vector["soft_max"][0])
    # conversions are bit exact on every level
    np.testing.assert_array_equal(plain["cast_f16"][0], vector["cast_f16"][0])


def test_cap_is_pinned_for_one_compute():
    """set_isa between computes takes effect at the next compute; a graph can be recomputed
    under another level without rebuilding it."""
    ctx = gg.Context(8 << 20)
    rng = np.random.default_rng(1)
    a = ctx.from_numpy(rng.uniform(-1, 1, (5, 515)).astype(np.float32))
    b = ctx.from_numpy(rng.uniform(-1, 1, (9, 515)).astype(np.float32))
    out = gg.mul_mat(ctx, a, b)
    g = gg.Graph(ctx)
    g.build_forward_expand(out)
    results = []
    previous = gg.set_isa("scalar")
    try:
        for level in ("scalar", "native", "scalar"):
            gg.set_isa(level)
            g.compute(2)
            results.append(values(out).copy())
    finally:
        gg.set_isa(previous)
    np.testing.assert_array_equal(results[0], results[2])
    assert_close(results[1], ref.mul_mat(values(a), values(b)), 1e-7)
