"""One-column (and few-column) MUL_MAT with block weights hands its row chunks out from a
counter of the node (the backend zeroes one per step): every row must be computed exactly once
on every compute of the same graph, whatever the thread count (more threads than chunks
included), the schedule (shares any thread may take, the lockstep schedule, one thread alone),
and give the bits of the one-thread product. The output is poisoned with NaN before each
compute, so a row a stale counter skipped shows up."""
import numpy as np
import pytest

import pyggml as gg
from util import assert_close, new, values

TABLE = {row["name"]: row for row in gg.type_traits()}
TYPES = ["q4_0", "q4_1", "q5_0", "q8_0", "q2_K", "q4_K", "q6_K", "iq4_nl", "mxfp4", "nvfp4"]
TYPES = [t for t in TYPES if t in TABLE]
PEER = 5e-4


def poisoned_compute(graph, out, n_threads):
    out.set(np.full(out.ne[0] * out.ne[1], np.nan, dtype=np.float32))
    graph.compute(n_threads=n_threads)
    return values(out).copy()


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("M, N", [(333, 1), (7, 1), (1031, 3)])
def test_every_row_once_on_every_compute(monkeypatch, name, M, N):
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", "0")  # split even the small nodes
    rng = np.random.default_rng(5)
    K = TABLE[name]["blck_size"] * (3 if TABLE[name]["blck_size"] == 256 else 9)
    ctx = gg.Context(mem_size=64 << 20)
    w, wv = new(ctx, TABLE[name]["type"], [K, M], rng=rng)
    x, xv = new(ctx, gg.F32, [K, N], rng=rng, lo=-2.0, hi=2.0)
    out = gg.mul_mat(ctx, w, x)
    g = gg.Graph(ctx)
    g.build_forward_expand(out)
    first = poisoned_compute(g, out, 1)
    ref = np.einsum("mk,nk->nm", wv.reshape(M, K).astype(np.float64), xv.reshape(N, K).astype(np.float64))
    assert_close(first.reshape(N, M), ref, PEER, what=name)
    for shares in ("1", "0"):  # shares any thread takes; the lockstep schedule
        monkeypatch.setenv("PYGGML_CPU_SHARES", shares)
        for n_threads in (2, 3, 2, 7, 2):
            got = poisoned_compute(g, out, n_threads)
            bad = np.argwhere(got != first)
            assert bad.size == 0, (f"{name} M={M} N={N} threads={n_threads} shares={shares}: {len(bad)} outputs "
                                   f"differ from one thread's (NaN: a row not computed), first at {tuple(bad[0])}")
