"""Group steps of the CPU schedule (cpu/schedule.h): independent barrier-free nodes, such as a
layer's Q, K and V products, run at once, their items (whole nodes, or shares of big ones) taken
by the threads from one counter. Nodes join only when neither writes bytes the other (or a node
they move ahead of) reads or writes: the buffer planner reuses the storage of dead tensors, so a
later node may write where an earlier one still reads. Every case compares against numpy, a
1-thread compute and the same compute without groups (PYGGML_CPU_GROUPS=0), bit for bit."""
import numpy as np
import pytest

import pyggml as gg
from util import assert_close


def grouped(g, n_threads):
    before = gg.cpu_schedule_counts()["grouped_nodes"]
    g.compute(n_threads)
    return gg.cpu_schedule_counts()["grouped_nodes"] - before


@pytest.fixture(params=["shares", "whole"])
def split_small(request, monkeypatch):
    """'shares': every node splits (members run as n_threads shares each); 'whole': only the
    share bar is gone, so members below the full bar run whole, one item each."""
    monkeypatch.delenv("PYGGML_CPU_GROUPS", raising=False)
    monkeypatch.delenv("PYGGML_CPU_SHARES", raising=False)
    if request.param == "shares":
        monkeypatch.setenv("PYGGML_CPU_MIN_WORK", "0")
    else:
        monkeypatch.setenv("PYGGML_CPU_MIN_WORK", "200000")
        monkeypatch.setenv("PYGGML_CPU_MIN_SHARE_WORK", "0")
    return request.param


def attention_inputs(rng, wtype, K=67, M=45, N=3):
    """A layer's input projections as the llama graph orders them: q = Wq x, then an op on q
    (q dies there: the planner may hand its storage to v), v = Wv x, k = Wk x, an op on k; the
    output sums them. Plus a big GEMM that engages the workers in the 'whole' setting."""
    ctx = gg.Context(1 << 24, no_alloc=True)
    x = ctx.new_tensor(gg.F32, [K, N])
    ws = [ctx.new_tensor(wtype, [K, M]) for _ in range(3)]
    big_a, big_b = ctx.new_tensor(gg.F32, [256, 256]), ctx.new_tensor(gg.F32, [256, 256])
    q = gg.scale(ctx, gg.mul_mat(ctx, ws[0], x), 0.5)
    v = gg.mul_mat(ctx, ws[1], x)
    k = gg.silu(ctx, gg.mul_mat(ctx, ws[2], x))
    out = gg.add(ctx, gg.add(ctx, q, k), v)
    big = gg.mul_mat(ctx, big_a, big_b)
    g = gg.Graph(ctx)
    g.build_forward_expand(big)
    g.build_forward_expand(out)
    g.alloc()
    x_np = rng.uniform(-1, 1, (N, K)).astype(np.float32)
    w_np = [rng.uniform(-1, 1, (M, K)).astype(np.float32) for _ in range(3)]
    x.set(x_np)
    for w, wn in zip(ws, w_np):
        w.set(wn.astype(np.float16) if wtype == gg.F16 else wn)
        if wtype == gg.F16:
            wn[...] = wn.astype(np.float16)
    a_np = rng.uniform(-1, 1, (256, 256)).astype(np.float32)
    big_a.set(a_np)
    big_b.set(a_np)
    h = [x_np.astype(np.float64) @ wn.T.astype(np.float64) for wn in w_np]
    want = 0.5 * h[0] + h[2] / (1 + np.exp(-h[2])) + h[1]
    return g, out, want


def test_decode_like_projections_group_and_match(split_small, monkeypatch):
    rng = np.random.default_rng(7)
    for wtype in (gg.F32, gg.F16):
        g, out, want = attention_inputs(rng, wtype)
        g.compute(1)
        one = out.numpy().copy()
        assert_close(one, want, 1e-10 if wtype == gg.F32 else 1e-6)
        for n_threads in (2, 3, 4):
            assert grouped(g, n_threads) >= 2, (split_small, n_threads)
            np.testing.assert_array_equal(out.numpy(), one)
            monkeypatch.setenv("PYGGML_CPU_GROUPS", "0")
            assert grouped(g, n_threads) == 0
            np.testing.assert_array_equal(out.numpy(), one)
            monkeypatch.delenv("PYGGML_CPU_GROUPS")


def test_reused_storage_keeps_nodes_apart(split_small):
    """a = W1 x dies in b = relu(a); c = W2 x is planned into a's storage, and d = W3 x after
    it. Run with a, c would overwrite a before b reads it: c must not join a's group (d may)."""
    rng = np.random.default_rng(3)
    ctx = gg.Context(1 << 24, no_alloc=True)
    K, M, N = 40, 32, 2
    x = ctx.new_tensor(gg.F32, [K, N])
    ws = [ctx.new_tensor(gg.F32, [K, M]) for _ in range(3)]
    big_a = ctx.new_tensor(gg.F32, [256, 256])
    a = gg.mul_mat(ctx, ws[0], x)
    b = gg.relu(ctx, a)
    c = gg.mul_mat(ctx, ws[1], x)
    d = gg.mul_mat(ctx, ws[2], x)
    a.name, b.name, c.name = "a", "b", "c"
    out = gg.add(ctx, gg.add(ctx, b, gg.sqr(ctx, c)), d)
    g = gg.Graph(ctx)
    g.build_forward_expand(gg.mul_mat(ctx, big_a, big_a))
    g.build_forward_expand(out)
    g.alloc()
    assert c.data_ptr == a.data_ptr, "the planner no longer reuses a's storage: rebuild the case"
    x_np = rng.uniform(-1, 1, (N, K)).astype(np.float32)
    w_np = [rng.uniform(-1, 1, (M, K)).astype(np.float32) for _ in range(3)]
    x.set(x_np)
    for w, wn in zip(ws, w_np):
        w.set(wn)
    big_a.set(rng.uniform(-1, 1, (256, 256)).astype(np.float32))
    h = [x_np.astype(np.float64) @ wn.T.astype(np.float64) for wn in w_np]
    want = np.maximum(h[0], 0) + h[1] ** 2 + h[2]
    ia, ib, ic = (next(i for i, n in enumerate(g.nodes) if n.name == name) for name in "abc")
    for n_threads in (2, 3):
        for _ in range(3):
            g.compute(n_threads)
            assert_close(out.numpy(), want, 1e-10)
        steps = g.cpu_schedule
        group_of = {i: k for k, (mode, nodes) in enumerate(steps) for i in nodes}
        assert any(mode == "group" for mode, _ in steps)
        assert group_of[ic] != group_of[ia]     # c writes where a's reader b still reads
        assert group_of[ib] != group_of[ia]     # b reads a
        assert group_of[ib] < group_of[ic]      # and comes before c overwrites a


def test_decode_of_the_demo_model_is_the_same_with_groups(monkeypatch):
    """The llama decode step at 2 threads with a low split bar (the workers take part as at a
    long context): Q/K/V and gate/up run as groups, and the logits equal, bit for bit, those
    of 1 thread and of 2 threads without groups."""
    from pyggml.demo import load_demo_model
    from pyggml.llm import Context
    _, model = load_demo_model()
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", "2048")
    prompt = [(7 * i) % 250 + 3 for i in range(40)]
    runs = {}
    for name, n_threads, groups in (("1t", 1, True), ("2t", 2, True), ("2t-no-groups", 2, False)):
        if groups:
            monkeypatch.delenv("PYGGML_CPU_GROUPS", raising=False)
        else:
            monkeypatch.setenv("PYGGML_CPU_GROUPS", "0")
        ctx = Context(model, n_ctx=128, n_threads=n_threads)
        last = np.asarray(ctx.decode(prompt))
        before = gg.cpu_schedule_counts()["grouped_nodes"]
        logits, tok = [], int(np.argmax(last.reshape(-1, last.shape[-1])[-1]))
        for _ in range(6):
            row = np.array(ctx.decode([tok]), copy=True).reshape(-1)
            logits.append(row)
            tok = int(np.argmax(row))
        runs[name] = (np.stack(logits), gg.cpu_schedule_counts()["grouped_nodes"] - before)
    assert runs["2t"][1] >= 6 * 4 * 2, runs["2t"][1]     # gate/up of every layer at least
    assert runs["1t"][1] == 0 and runs["2t-no-groups"][1] == 0
    np.testing.assert_array_equal(runs["2t"][0], runs["1t"][0])
    np.testing.assert_array_equal(runs["2t-no-groups"][0], runs["1t"][0])


def test_profiled_group_members_get_their_times(split_small):
    """A member's time is thread 0's time in its items, the group's wait goes to its first
    member: no time counted twice (the node times fit in the compute's wall time), none lost
    (every group's first member has some)."""
    import time
    g, out, _ = attention_inputs(np.random.default_rng(5), gg.F32)
    g.set_profiling(True)
    g.compute(2)
    for _ in range(5):
        t0 = time.perf_counter()
        assert grouped(g, 2) >= 2
        wall = time.perf_counter() - t0
        times = g.node_times
        assert len(times) == len(g.nodes) and all(t >= 0 for t in times)
        assert sum(times) <= wall
        for mode, nodes in g.cpu_schedule:
            if mode == "group":
                assert times[nodes[0]] > 0


def test_members_keep_their_scratch_apart(split_small):
    """Products of f16 weights convert their activations into scratch: members of one group on
    different activations must each convert into their own region."""
    rng = np.random.default_rng(11)
    ctx = gg.Context(1 << 24, no_alloc=True)
    K, M, N = 96, 40, 2
    xs = [ctx.new_tensor(gg.F32, [K, N]) for _ in range(4)]
    ws = [ctx.new_tensor(gg.F16, [K, M]) for _ in range(4)]
    big_a = ctx.new_tensor(gg.F32, [256, 256])
    outs = [gg.mul_mat(ctx, w, x) for w, x in zip(ws, xs)]
    g = gg.Graph(ctx)
    g.build_forward_expand(gg.mul_mat(ctx, big_a, big_a))
    for o in outs:
        g.build_forward_expand(o)
    g.alloc()
    big_a.set(rng.uniform(-1, 1, (256, 256)).astype(np.float32))
    want = []
    for w, x in zip(ws, xs):
        x_np = rng.uniform(-1, 1, (N, K)).astype(np.float32)
        w_np = rng.uniform(-1, 1, (M, K)).astype(np.float16)
        x.set(x_np)
        w.set(w_np)
        want.append(x_np.astype(np.float64) @ w_np.T.astype(np.float64))
    g.compute(1)
    one = [o.numpy().copy() for o in outs]
    for o, wn in zip(one, want):
        assert_close(o, wn, 1e-6)
    for n_threads in (2, 3, 4):
        for _ in range(10):
            assert grouped(g, n_threads) >= 2
            for o, ref1 in zip(outs, one):
                np.testing.assert_array_equal(o.numpy(), ref1)


def test_members_with_a_gang_form_run_whole(split_small):
    """MUL_MAT_ID and FLASH_ATTN_EXT are barrier-free as shares (they claim their work from the
    step's counters) but take barriers in their gang form, which a group member run whole (one
    item, one thread, no counters) also takes. A barrier met by one thread meets nobody: it must
    not be reported as a schedule bug (a tiny DeepSeek V4 prompt at 2 threads raised it from its
    MoE products). Small MoE and attention nodes beside an independent product, after a big GEMM
    that engages the workers: 2 and 3 threads give the 1-thread bits, which match numpy."""
    rng = np.random.default_rng(11)
    ctx = gg.Context(1 << 24, no_alloc=True)
    K, M, E, U, T, D, KV = 64, 24, 4, 2, 3, 32, 40
    x = ctx.new_tensor(gg.F32, [K, T])
    w = ctx.new_tensor(gg.F32, [K, M])
    experts = ctx.new_tensor(gg.F32, [K, M, E])
    moe_in = ctx.new_tensor(gg.F32, [K, 1, T])
    ids = ctx.new_tensor(gg.I32, [U, T])
    q = ctx.new_tensor(gg.F32, [D, T, 2, 1])
    k = ctx.new_tensor(gg.F16, [D, KV, 2, 1])
    v = ctx.new_tensor(gg.F16, [D, KV, 2, 1])
    big_a = ctx.new_tensor(gg.F32, [256, 256])
    dense = gg.mul_mat(ctx, w, x)
    moe = gg.mul_mat_id(ctx, experts, moe_in, ids)
    att = gg.flash_attn_ext(ctx, q, k, v, None, 0.25, 0.0, 0.0)
    g = gg.Graph(ctx)
    g.build_forward_expand(gg.mul_mat(ctx, big_a, big_a))
    for out in (dense, moe, att):
        g.build_forward_expand(out)
    g.alloc()
    x_np = rng.uniform(-1, 1, (T, K)).astype(np.float32)
    w_np = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    e_np = rng.uniform(-1, 1, (E, M, K)).astype(np.float32)
    m_np = rng.uniform(-1, 1, (T, 1, K)).astype(np.float32)
    ids_np = np.array([[0, 3], [2, 0], [3, 1]], dtype=np.int32)
    q_np = rng.uniform(-1, 1, (1, 2, T, D)).astype(np.float32)
    k_np = rng.uniform(-1, 1, (1, 2, KV, D)).astype(np.float16)
    v_np = rng.uniform(-1, 1, (1, 2, KV, D)).astype(np.float16)
    for t, a in ((x, x_np), (w, w_np), (experts, e_np), (moe_in, m_np), (ids, ids_np), (q, q_np), (k, k_np),
                 (v, v_np), (big_a, rng.uniform(-1, 1, (256, 256)).astype(np.float32))):
        t.set(a)
    want_moe = np.einsum("tumk,tk->tum", e_np[ids_np].astype(np.float64), m_np[:, 0].astype(np.float64))
    s = 0.25 * np.einsum("htd,hjd->htj", q_np[0].astype(np.float64), k_np[0].astype(np.float64))
    p = np.exp(s - s.max(-1, keepdims=True))
    want_att = np.einsum("htj,hjd->thd", p / p.sum(-1, keepdims=True), v_np[0].astype(np.float64))
    g.compute(1)
    one = [o.numpy().copy() for o in (dense, moe, att)]
    assert_close(one[0].reshape(T, M), x_np.astype(np.float64) @ w_np.T.astype(np.float64), 1e-10)
    assert_close(one[1].reshape(T, U, M), want_moe, 1e-10)
    assert_close(one[2].reshape(T, 2, D), want_att, 1e-6)
    for n_threads in (2, 3):
        assert grouped(g, n_threads) >= 2, (split_small, n_threads)
        for got, want in zip((dense, moe, att), one):
            np.testing.assert_array_equal(got.numpy(), want)
        members = [g.nodes[i].op for mode, nodes in g.cpu_schedule if mode == "group" for i in nodes]
        assert "MUL_MAT_ID" in members and "FLASH_ATTN_EXT" in members, (split_small, g.cpu_schedule)
