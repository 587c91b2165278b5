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
from util import check_shared_schedules, new

TABLE = {row["name"]: row for row in gg.type_traits()}
KQUANTS = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K"]
PEER = 5e-4
PRIVATE_VALUES = 16 * 4096  # mul_mat_common.h kPrivateConvertValues: up to this, each share converts all

pytestmark = pytest.mark.usefixtures("avx512_level")  # tests/conftest.py


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
    check_shared_schedules(monkeypatch, ctx, [out], [ref.mul_mat(wvb, bv)], PEER, f"{name} {case}")


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
    check_shared_schedules(monkeypatch, ctx, [o1, o2], [ref.mul_mat(wv, bv1), ref.mul_mat(wv, bv2 * 0.5)], PEER,
                           f"{name} two nodes")

