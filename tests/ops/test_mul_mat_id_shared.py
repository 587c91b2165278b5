"""MUL_MAT_ID as a barrier-free shared step (csrc/cpu/mul_mat_id.cpp): the shares claim the
experts' column groups to convert (mm::convert_claimed, as MUL_MAT's claimed columns), wait only
for groups being converted at that moment, then claim the units. The outputs must equal, bit for
bit, the gang schedule (PYGGML_CPU_SHARES=0: the groups split by thread, then a barrier) and 1
thread, on 2, 3 and 5 threads, with every output written, and match the float64 product; the
node runs as a shared step (cpu_schedule_counts' shared_steps; a share that met a barrier would
raise). K-quant experts at and over gg.KTILE_MIN_COLUMNS tokens take the tiles, the others the
dot kernels; q4_0's experts of 8 tokens on the quantized GEMM; f16 the float tiles."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import check_shared_schedules, moe_routing, new

TABLE = {row["name"]: row for row in gg.type_traits()}
TYPES = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q4_0", "f16"]
PEER = 5e-4
TH = gg.KTILE_MIN_COLUMNS

pytestmark = pytest.mark.usefixtures("avx512_level")  # tests/conftest.py

CASES = [  # K, M, expert token counts (zeros: experts without tokens), U, Nb
    (512, 37, [TH, TH + 1, 5, 0, 20, 0, 10], 2, 1),    # tile experts at/over the threshold, GEMM and dot ones
    (768, 21, [35, 0, 35, 12, 0, 23], 3, 3),           # b per slot, a last tile call of 3 columns
    (256, 70, [260, 0, 130, 130], 2, 2),               # two 256-token tile units of one expert
]


def _mul_mat_id_graph(name, K, M, counts, U, Nb, seed):
    rng = np.random.default_rng(seed)
    ctx = gg.Context(mem_size=128 << 20)
    as_, asv = new(ctx, TABLE[name]["type"], [K, M, len(counts)], rng=rng)
    ids = moe_routing(counts, U, rng)
    T = ids.shape[0]
    b, bv = new(ctx, gg.F32, [K, Nb, T], rng=rng, lo=-2.0, hi=2.0)
    t_ids, _ = new(ctx, gg.I32, [U, T], data=ids)
    out = gg.mul_mat_id(ctx, as_, b, t_ids)
    return ctx, out, ref.mul_mat_id(asv[0], bv[0], ids)[None], (as_, asv[0], t_ids, ids)


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "K{}_M{}_E{}_U{}_Nb{}".format(c[0], c[1], len(c[2]), *c[3:]))
def test_shared_mul_mat_id_matches_gang_and_one_thread(monkeypatch, name, case):
    K, M, counts, U, Nb = case
    ctx, out, want, _ = _mul_mat_id_graph(name, K, M, counts, U, Nb, seed=K + M)
    check_shared_schedules(monkeypatch, ctx, [out], [want], PEER, f"{name} {case}")


def test_two_shared_mul_mat_id_nodes_of_one_graph(monkeypatch):
    """Each step has its own claim counters: the second node converts all of its own groups."""
    ctx, o1, w1, (as_, asv, t_ids, ids) = _mul_mat_id_graph("q4_K", 512, 29, [TH + 2, 0, 9, TH + 1], 2, 1, seed=5)
    b2, bv2 = new(ctx, gg.F32, [512, 1, ids.shape[0]], rng=np.random.default_rng(6))
    o2 = gg.mul_mat_id(ctx, as_, b2, t_ids)
    w2 = ref.mul_mat_id(asv, bv2[0], ids)[None]
    check_shared_schedules(monkeypatch, ctx, [o1, o2], [w1, w2], PEER, "two nodes")


@pytest.mark.parametrize("n_threads", [2, 5])
def test_bad_id_raises_as_shares(monkeypatch, n_threads):
    """An id out of range: every share finds it before claiming a group, so the step raises a
    clear error (no share waits for a group nobody converts)."""
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", "0")
    monkeypatch.setenv("PYGGML_CPU_SHARES", "1")
    ctx, out, _, (_, _, t_ids, ids) = _mul_mat_id_graph("q4_K", 512, 37, [TH, TH, 4], 2, 1, seed=1)
    ids = ids.copy()
    ids[7, 1] = 3
    t_ids.set(ids)
    g = gg.Graph(ctx)
    g.build_forward_expand(out)
    with pytest.raises(ValueError, match=r"out of range"):
        g.compute(n_threads=n_threads)
