"""The CPU schedule kept with a graph (cpu/schedule.h): a graph computed again with the same
thread count and settings runs the plan of its last compute (cpu_schedule_counts' plans_reused),
and plans afresh whenever a decision may change: the thread count, a weight repacked or its copy
dropped, a node modifier (flash_attn_ext_set_n_kv_max), the schedule's environment settings, the
ISA level, nodes added to the graph. A stale plan shows in the steps a compute ran (solo, split,
shared), or as a kernel scheduled barrier-free meeting a barrier (which raises); every case also
checks the results against numpy and against a compute planned afresh (gg.cpu_plan_reuse(False))."""
import gc

import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, new, values

STEP_KEYS = ("computes", "solo_steps", "split_steps", "shared_steps", "plans_built", "plans_reused")


def run(g, n_threads):
    """Computes g; returns what the schedule did (differences of cpu_schedule_counts)."""
    before = gg.cpu_schedule_counts()
    g.compute(n_threads)
    after = gg.cpu_schedule_counts()
    return {k: after[k] - before[k] for k in STEP_KEYS}


def steps(c):
    return c["solo_steps"], c["split_steps"], c["shared_steps"]


def fresh(g, n_threads, outs):
    """The outputs and steps of a compute planned afresh."""
    was = gg.cpu_plan_reuse(False)
    try:
        c = run(g, n_threads)
    finally:
        gg.cpu_plan_reuse(was)
    assert c["plans_built"] == 1 and c["plans_reused"] == 0
    return [values(o).copy() for o in outs], steps(c)


@pytest.fixture
def split_everything(monkeypatch):
    """Every node splits at 2 threads (no solo bar), shares on."""
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", "0")
    monkeypatch.delenv("PYGGML_CPU_MIN_SHARE_WORK", raising=False)
    monkeypatch.delenv("PYGGML_CPU_SHARES", raising=False)


def float_graph(rng):
    """Barrier-free and gang nodes: add, rms_norm, an f32 GEMM, softmax. Returns the graph, its
    output and the numpy reference."""
    ctx = gg.Context(1 << 24)
    a_np = rng.standard_normal((24, 40)).astype(np.float32)
    w_np = rng.standard_normal((33, 40)).astype(np.float32)
    a, w = ctx.from_numpy(a_np), ctx.from_numpy(w_np)
    x = gg.rms_norm(ctx, gg.add(ctx, a, a), 1e-6)
    out = gg.soft_max(ctx, gg.mul_mat(ctx, w, x))
    x_np = 2.0 * a_np.astype(np.float64)
    x_np /= np.sqrt(np.mean(x_np * x_np, axis=-1, keepdims=True) + 1e-6)
    h = x_np @ w_np.T.astype(np.float64)
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    g = gg.Graph(ctx)
    g.build_forward_expand(out)
    return ctx, g, out, (e / e.sum(axis=-1, keepdims=True)).reshape(1, 1, 24, 33)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_a_graph_computed_again_reuses_its_plan(split_everything, n_threads):
    _, g, out, want = float_graph(np.random.default_rng(1))
    first = run(g, n_threads)
    assert first["plans_built"] == 1 and first["plans_reused"] == 0
    got = values(out).copy()
    assert_close(got, want, 1e-10)
    for _ in range(3):
        again = run(g, n_threads)
        assert again["plans_built"] == 0 and again["plans_reused"] == 1
        assert steps(again) == steps(first)
        np.testing.assert_array_equal(values(out), got)
    fresh_out, fresh_steps = fresh(g, n_threads, [out])
    assert fresh_steps == steps(first)
    np.testing.assert_array_equal(fresh_out[0], got)
    if n_threads == 2:
        assert first["solo_steps"] == 0 and first["split_steps"] > 0
    else:
        assert first["split_steps"] == 0


def test_a_new_thread_count_plans_again(split_everything):
    _, g, out, want = float_graph(np.random.default_rng(2))
    one = run(g, 1)
    two = run(g, 2)
    assert two["plans_built"] == 1
    assert one["split_steps"] == 0 and two["solo_steps"] == 0 and two["split_steps"] > 0
    back = run(g, 1)
    assert back["plans_built"] == 1 and steps(back) == steps(one)
    assert_close(values(out), want, 1e-10)
    assert run(g, 1)["plans_reused"] == 1


def test_the_schedule_settings_plan_again(monkeypatch, split_everything):
    _, g, out, want = float_graph(np.random.default_rng(3))
    shared = run(g, 2)
    assert shared["shared_steps"] > 0
    monkeypatch.setenv("PYGGML_CPU_SHARES", "0")                  # lockstep: gang steps only
    lockstep = run(g, 2)
    assert lockstep["plans_built"] == 1 and lockstep["shared_steps"] == 0 and lockstep["split_steps"] > 0
    monkeypatch.delenv("PYGGML_CPU_SHARES")
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", str(1 << 40))       # nothing worth a split
    solo = run(g, 2)
    assert solo["plans_built"] == 1 and solo["split_steps"] == 0
    assert_close(values(out), want, 1e-10)


def test_another_isa_level_plans_again(split_everything):
    _, g, out, want = float_graph(np.random.default_rng(4))
    run(g, 2)
    prev = gg.set_isa("scalar")
    try:
        c = run(g, 2)
        assert c["plans_built"] == 1
        assert_close(values(out), want, 1e-10)
    finally:
        gg.set_isa(prev)
    assert run(g, 2)["plans_built"] == 1


def test_nodes_added_to_the_graph_plan_again(split_everything):
    ctx, g, out, want = float_graph(np.random.default_rng(5))
    run(g, 2)
    extra = gg.scale(ctx, out, 3.0)
    g.build_forward_expand(extra)
    c = run(g, 2)
    assert c["plans_built"] == 1
    assert_close(values(extra), 3.0 * want, 1e-10)                # a stale plan never runs it
    # another graph over the same nodes has a plan of its own
    g2 = gg.Graph(ctx)
    g2.build_forward_expand(extra)
    assert run(g2, 2)["plans_built"] == 1
    assert run(g, 2)["plans_reused"] == 1


def test_a_weight_repacked_or_dropped_between_computes_plans_again(split_everything):
    # 16 columns of 256: the plain q4_0 path is the quantized GEMM (barriers: a gang step), the
    # repacked one converts its few columns privately (barrier-free: a shared step)
    rng = np.random.default_rng(6)
    K, M, N = 256, 40, 16
    ctx = gg.Context(1 << 24)
    w, wv = new(ctx, gg.Q4_0, [K, M], rng=rng)
    x, xv = new(ctx, gg.F32, [K, N], rng=rng)
    out = gg.mul_mat(ctx, w, x)
    g = gg.Graph(ctx)
    g.build_forward_expand(out)
    want = (xv.reshape(N, K) @ wv.reshape(M, K).T).reshape(1, 1, N, M)

    plain = run(g, 2)
    assert (plain["split_steps"], plain["shared_steps"]) == (1, 0)
    plain_out = values(out).copy()
    assert_close(plain_out, want, 5e-4)

    handle = gg.repack_weights(w)
    repacked = run(g, 2)
    assert repacked["plans_built"] == 1
    assert (repacked["split_steps"], repacked["shared_steps"]) == (1, 1)
    repacked_out = values(out).copy()
    assert_close(repacked_out, want, 5e-4)
    assert run(g, 2)["plans_reused"] == 1
    fresh_out, fresh_steps = fresh(g, 2, [out])
    assert fresh_steps == steps(repacked)
    np.testing.assert_array_equal(fresh_out[0], repacked_out)

    del handle
    gc.collect()
    assert not gg.has_repack(w)
    dropped = run(g, 2)                     # a stale plan would share the GEMM: its barrier raises
    assert dropped["plans_built"] == 1
    assert (dropped["split_steps"], dropped["shared_steps"]) == (1, 0)
    np.testing.assert_array_equal(values(out), plain_out)


def test_a_node_modifier_plans_again(split_everything):
    # flash attention with n_kv_max takes the sparse kernel (barriers: a gang step); without,
    # the dense one (a shared step)
    rng = np.random.default_rng(7)
    D, N, H, KV = 32, 3, 2, 96
    ctx = gg.Context(1 << 24)
    q, qv = new(ctx, gg.F32, [D, N, H, 1], rng=rng)
    k, kv = new(ctx, gg.F16, [D, KV, H, 1], rng=rng)
    v, vv = new(ctx, gg.F16, [D, KV, H, 1], rng=rng)
    mask_np = np.full((1, 1, N, KV), -np.inf, np.float32)
    for t in range(N):
        mask_np[0, 0, t, rng.choice(KV, size=20, replace=False)] = 0.0
    m, mv = new(ctx, gg.F16, [KV, N, 1, 1], data=mask_np)
    r = gg.flash_attn_ext(ctx, q, k, v, m, 1.0 / np.sqrt(D), 0.0, 0.0)
    g = gg.Graph(ctx)
    g.build_forward_expand(r)
    want = ref.flash_attn_ext(qv, kv, vv, mv, 1.0 / np.sqrt(D), 0.0, 0.0, None)

    dense = run(g, 2)
    assert (dense["split_steps"], dense["shared_steps"]) == (1, 1)
    assert_close(values(r), want, 1e-5)
    gg.flash_attn_ext_set_n_kv_max(r, 32)
    sparse = run(g, 2)                      # a stale plan would share the sparse kernel: it raises
    assert sparse["plans_built"] == 1
    assert (sparse["split_steps"], sparse["shared_steps"]) == (1, 0)
    assert_close(values(r), want, 1e-5)
    gg.flash_attn_ext_set_n_kv_max(r, 0)
    back = run(g, 2)
    assert back["plans_built"] == 1 and steps(back) == steps(dense)
    assert_close(values(r), want, 1e-5)


def test_nodes_added_after_a_compute_are_checked_again():
    # a graph computed again skips compute's checks (Graph::compute): not once its lists grew
    ctx = gg.Context(1 << 20)
    a = ctx.from_numpy(np.arange(8, dtype=np.float32))
    ro = ctx.tensor_from_buffer(np.frombuffer(bytes(32), dtype=np.uint8), gg.F32, [8])  # read-only
    doubled = gg.scale(ctx, a, 2.0)
    g = gg.Graph(ctx)
    g.build_forward_expand(doubled)
    for _ in range(2):
        g.compute(1)
        np.testing.assert_array_equal(values(doubled).ravel(), 2.0 * np.arange(8))
    g.build_forward_expand(gg.cpy(ctx, doubled, ro))
    for _ in range(2):                                            # refused every time, not once
        with pytest.raises(ValueError, match="read-only"):
            g.compute(1)
    assert not np.frombuffer(ro.numpy().tobytes(), np.uint8).any()
