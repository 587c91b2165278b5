"""The K-quant tiles (csrc/cpu/quant_ktile.h) as a barrier-free shared step: where b has too
many values for every share to convert all of it, the shares claim b's columns to convert, wait
only for the columns being converted at that moment, then claim tile units. The results must
equal, bit for bit, the gang schedule (PYGGML_CPU_SHARES=0: the conversion split by thread, then
a barrier) and 1 thread, on 2, 3 and 5 threads (more threads than cores: shares start late and
one thread runs several), with every output written (the outputs start as NaN), and match the
float64 product. Such a product runs as a shared step (cpu_schedule_counts' shared_steps)."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, new, values

TABLE = {row["name"]: row for row in gg.type_traits()}
KQUANTS = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K"]
PEER = 5e-4
PRIVATE_VALUES = 16 * 4096  # mul_mat_common.h kPrivateConvertValues: up to this, each share converts all

pytestmark = pytest.mark.usefixtures("avx512_level")  # tests/conftest.py


def _bits(x):
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)


def _run(monkeypatch, graph, outs, n_threads, shares):
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", "0")  # every node split, whatever its size
    monkeypatch.setenv("PYGGML_CPU_SHARES", "1" if shares else "0")
    for o in outs:  # a unit left out must not pass with the previous run's values
        o.set(np.full(tuple(reversed(o.ne)), np.nan, dtype=np.float32))
    before = gg.cpu_schedule_counts()["shared_steps"]
    graph.compute(n_threads=n_threads)
    return [values(o).copy() for o in outs], gg.cpu_schedule_counts()["shared_steps"] - before


def _check_schedules(monkeypatch, ctx, outs, want, what):
    g = gg.Graph(ctx)
    for o in outs:
        g.build_forward_expand(o)
    base, _ = _run(monkeypatch, g, outs, 1, True)
    for got, w in zip(base, want):
        assert np.isfinite(got).all(), f"{what} 1 thread: outputs left unwritten"
        assert_close(got, w, PEER, what=f"{what} 1 thread")
    for nt in (2, 3, 5):
        for shares in (True, False):
            for rep in range(3):
                got_all, shared = _run(monkeypatch, g, outs, nt, shares)
                for i, (got, b0) in enumerate(zip(got_all, base)):
                    bad = np.flatnonzero(_bits(got) != _bits(b0))
                    assert bad.size == 0, (f"{what} node {i} threads={nt} shares={shares} rep {rep}: "
                                           f"{bad.size} of {got.size} differ from 1 thread")
                # every product a shared step (and the other barrier-free nodes), or none
                ok = shared >= len(outs) if shares else shared == 0
                assert ok, f"{what} threads={nt} shares={shares}: {shared} shared steps"


CASES = [  # K, M, N, weight batches, b batches; every b above PRIVATE_VALUES
    (512, 37, 160, (1, 1), (1, 1)),    # rows: 2 panels + 5
    (768, 45, 97, (1, 1), (1, 1)),     # a last call of one column
    (512, 19, 300, (1, 1), (1, 1)),    # two 256-column units
    (512, 13, 40, (2, 1), (4, 2)),     # broadcast batches
    (256, 520, 300, (1, 1), (1, 1)),   # 33 row chunks: on 1-2 threads a unit takes all 300 columns
]


@pytest.mark.parametrize("name", KQUANTS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "K{}_M{}_N{}_a{}x{}_b{}x{}".format(*c[:3], *c[3], *c[4]))
def test_shared_tiles_match_gang_and_one_thread(monkeypatch, name, case):
    K, M, N, ab, bb = case
    assert K * N * bb[0] * bb[1] > PRIVATE_VALUES and N >= gg.KTILE_MIN_COLUMNS
    rng = np.random.default_rng(K + M + N)
    ctx = gg.Context(mem_size=64 << 20)
    w, wv = new(ctx, TABLE[name]["type"], [K, M, *ab], rng=rng)
    b, bv = new(ctx, gg.F32, [K, N, *bb], rng=rng, lo=-2.0, hi=2.0)
    out = gg.mul_mat(ctx, w, b)
    wvb = np.repeat(np.repeat(wv, bb[1] // ab[1], axis=0), bb[0] // ab[0], axis=1)
    _check_schedules(monkeypatch, ctx, [out], [ref.mul_mat(wvb, bv)], f"{name} {case}")


@pytest.mark.parametrize("name", ["q4_K", "q6_K"])
def test_two_shared_tile_nodes_of_one_graph(monkeypatch, name):
    """Each step has its own claim counters: the second product converts all of its own b."""
    K, M, N = 1024, 29, 70
    rng = np.random.default_rng(3)
    ctx = gg.Context(mem_size=64 << 20)
    w, wv = new(ctx, TABLE[name]["type"], [K, M], rng=rng)
    b1, bv1 = new(ctx, gg.F32, [K, N], rng=rng)
    b2, bv2 = new(ctx, gg.F32, [K, N + 9], rng=rng)
    o1 = gg.mul_mat(ctx, w, b1)
    o2 = gg.mul_mat(ctx, w, gg.scale(ctx, b2, 0.5))
    _check_schedules(monkeypatch, ctx, [o1, o2], [ref.mul_mat(wv, bv1), ref.mul_mat(wv, bv2 * 0.5)],
                     f"{name} two nodes")

