"""The packed float GEMM as a barrier-free shared step: when all of b's panels fit the pack
budget the threads claim panels to pack and then tasks from the step's counter, and a task waits
for each panel's ready flag. The results must equal, bit for bit, the gang schedule
(PYGGML_CPU_SHARES=0: packing split by thread, then a barrier) and 1 thread, on 2, 3 and 5
threads (more threads than cores: shares start late and one thread runs several), and match the
float64 product. Two GEMM nodes of one graph share the scratch, so the second must clear the
first's ready flags; odd sizes, a permuted b, f16 activations and broadcast batches are covered."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, new, values

WTYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16}
PEER = 5e-4


def _bits(x):
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)


def _run(monkeypatch, graph, outs, n_threads, shares):
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", "0")  # every node split, whatever its size
    monkeypatch.setenv("PYGGML_CPU_SHARES", "1" if shares else "0")
    for o in outs:  # a skipped output must not pass with the previous run's values
        o.set(np.full(tuple(reversed(o.ne)), np.nan, dtype=np.float32))
    graph.compute(n_threads=n_threads)
    return [values(o).copy() for o in outs]


def _graph(ctx, *outs):
    g = gg.Graph(ctx)
    for o in outs:
        g.build_forward_expand(o)
    return g


def _check_schedules(monkeypatch, ctx, outs, want, what):
    g = _graph(ctx, *outs)
    base = _run(monkeypatch, g, outs, 1, True)
    for got, w in zip(base, want):
        assert_close(got, w, PEER, what=f"{what} 1 thread")
    for nt in (2, 3, 5):
        for shares in (True, False):
            for rep in range(3):
                for i, (got, b0) in enumerate(zip(_run(monkeypatch, g, outs, nt, shares), base)):
                    bad = np.flatnonzero(_bits(got) != _bits(b0))
                    assert bad.size == 0, (f"{what} node {i} threads={nt} shares={shares} rep {rep}: "
                                           f"{bad.size} of {got.size} differ from 1 thread")


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("bt", ["f32", "f16"])
@pytest.mark.parametrize("K,M,N", [(67, 45, 70), (520, 37, 131), (1031, 101, 97)])
def test_shared_gemm_matches_gang_and_one_thread(monkeypatch, wtype, bt, K, M, N):
    rng = np.random.default_rng(K + M + N)
    ctx = gg.Context(mem_size=64 << 20)
    a, av = new(ctx, WTYPES[wtype], [K, M], rng=rng)
    b1, bv1 = new(ctx, WTYPES[bt], [K, N], rng=rng)
    b2, bv2 = new(ctx, WTYPES[bt], [K, N + 9], rng=rng)
    # two GEMMs of one graph (the second reuses the scratch and its ready flags), and a unary
    # node between them
    o1 = gg.mul_mat(ctx, a, b1)
    o2 = gg.mul_mat(ctx, a, gg.scale(ctx, b2, 0.5)) if bt == "f32" else gg.mul_mat(ctx, a, b2)
    bv2s = bv2 * 0.5 if bt == "f32" else bv2
    want = [ref.mul_mat(av, bv1), ref.mul_mat(av, bv2s)]
    _check_schedules(monkeypatch, ctx, [o1, o2], want, f"{wtype} b={bt} K={K} M={M} N={N}")


@pytest.mark.parametrize("wtype", list(WTYPES))
def test_shared_gemm_permuted_and_broadcast_b(monkeypatch, wtype):
    rng = np.random.default_rng(5)
    K, M, N = 133, 51, 67
    ctx = gg.Context(mem_size=64 << 20)
    a, av = new(ctx, WTYPES[wtype], [K, M, 2, 1], rng=rng)
    b0, bv0 = new(ctx, gg.F32, [K, 4, N, 3], rng=rng)
    b = gg.permute(ctx, b0, 0, 2, 1, 3)  # [K, N, 4, 3], columns 4 rows apart: not contiguous
    out = gg.mul_mat(ctx, a, b)
    bv = np.swapaxes(bv0, 1, 2)  # numpy (3, 4, N, K)
    want = ref.mul_mat(av, bv)
    _check_schedules(monkeypatch, ctx, [out], [want], f"{wtype} permuted broadcast b")


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("bt", ["f32", "f16"])
@pytest.mark.parametrize("K,M,N", [(4099, 131, 1), (300, 1029, 3), (1030, 517, 5)])
def test_shared_direct_claimed_units(monkeypatch, wtype, bt, K, M, N):
    """The direct (few-column) path as a shared step: with weights of 1 MiB or more its row
    units are claimed from the step's counter (smaller ones: one unit per share). Both must
    equal 1 thread and the gang schedule bit for bit, and match the float64 product."""
    rng = np.random.default_rng(K + M + N)
    ctx = gg.Context(mem_size=64 << 20)
    a, av = new(ctx, WTYPES[wtype], [K, M], rng=rng)
    b0, bv0 = new(ctx, WTYPES[bt], [K, 2 * N + 1], rng=rng)
    esz = 4 if bt == "f32" else 2
    b = gg.view_2d(ctx, b0, K, N, 2 * K * esz, K * esz)  # columns 1, 3, 5, ...: not contiguous
    out = gg.mul_mat(ctx, a, b)
    want = ref.mul_mat(av, bv0[:, :, 1::2][:, :, :N])
    _check_schedules(monkeypatch, ctx, [out], [want], f"{wtype} b={bt} K={K} M={M} N={N}")
