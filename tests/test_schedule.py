"""The CPU schedule's three step kinds: solo (thread 0 alone), shared (barrier-free kernels whose
thread shares any thread may take, several on one thread when a peer is late) and gang (kernels
with barriers of their own, run by every thread at once). Every op the schedule lists as
barrier-free runs here split over several threads: a kernel that met a barrier there would
raise, and any share run twice, skipped or mixed up would change the bit-exact result."""
import numpy as np
import pytest

import pyggml as gg


def ops_graph(rng):
    """A chain through every barrier-free op kind, with gang nodes (a GEMM, a full sum)
    between them. Returns the graph, its outputs and numpy references of some of them."""
    ctx = gg.Context(1 << 26)
    n, m = 67, 41                                                   # odd sizes: uneven shares
    a_np = rng.standard_normal((m, n)).astype(np.float32)
    w_np = rng.standard_normal((53, n)).astype(np.float32)
    a, w = ctx.from_numpy(a_np), ctx.from_numpy(w_np)
    one = ctx.from_numpy(np.full((1, n), 0.75, np.float32))
    outs, refs = [], []

    x = gg.add(ctx, a, one)                                         # shared, broadcast
    refs.append((x, a_np + 0.75))
    x = gg.mul(ctx, gg.sub(ctx, x, a), gg.div(ctx, a, gg.scale(ctx, one, 2.0)))
    refs.append((x, (a_np + 0.75 - a_np) * (a_np / 1.5)))
    x = gg.clamp(ctx, gg.sqr(ctx, x), -1.0, 4.0)
    x = gg.sqrt(ctx, gg.add1(ctx, x, gg.scale(ctx, gg.sum(ctx, one), 0.0)))  # sum: gang
    x = gg.log(ctx, gg.add(ctx, x, one))
    x = gg.add(ctx, gg.sin(ctx, x), gg.cos(ctx, x))
    x = gg.leaky_relu(ctx, x, 0.1, False)
    x = gg.silu(ctx, gg.rms_norm(ctx, x, 1e-6))
    x = gg.gelu(ctx, gg.norm(ctx, x, 1e-5))
    x = gg.l2_norm(ctx, x, 1e-6)
    outs.append(x)
    h = gg.mul_mat(ctx, w, x)                                       # [53, 41] f32 GEMM: gang
    g1 = gg.glu(ctx, h, gg.GluOp.SWIGLU)                            # [26, 41]
    sm = gg.soft_max(ctx, g1)
    outs.append(sm)
    ids = ctx.from_numpy(np.array([3, 0, 40, 7, 7], np.int32))
    rows = gg.get_rows(ctx, sm, ids)                                # [26, 5]
    outs.append(rows)
    cache = ctx.from_numpy(np.zeros((9, 26), np.float32))
    put = gg.set_rows(ctx, cache, rows, ctx.from_numpy(np.array([8, 1, 4, 0, 2], np.int64)))
    outs.append(put)
    t = gg.cont(ctx, gg.transpose(ctx, put))                        # [9, 26]
    outs.append(gg.dup(ctx, t))
    outs.append(gg.cpy(ctx, t, ctx.new_tensor(gg.F16, [9, 26])))
    v = gg.mul_mat(ctx, w, gg.view_2d(ctx, x, n, 1, x.nb[1], 0))   # gemv: barrier-free
    outs.append(v)
    qf = ctx.from_numpy(rng.standard_normal((48, 64)).astype(np.float32))
    q = gg.cpy(ctx, qf, ctx.new_tensor(gg.Q8_0, [64, 48]))          # quantized in the graph
    outs.append(gg.mul_mat(ctx, q, ctx.from_numpy(rng.standard_normal((1, 64)).astype(np.float32))))
    outs.append(gg.fill(ctx, ctx.new_tensor(gg.F32, [7, 5]), 1.5))
    g = gg.Graph(ctx)
    for o in outs:
        g.build_forward_expand(o)
    return g, outs, refs, (x, w_np, v), (a, w, qf)


@pytest.mark.parametrize("min_work,min_share", [("0", None), ("4096", None), ("131072", None),
                                                ("16384", "512")],
                         ids=["all-split", "mixed", "default", "engaged-shares"])
def test_every_barrier_free_op_gives_the_same_bits_on_any_thread_count(monkeypatch, min_work,
                                                                       min_share):
    # engaged-shares: a few nodes split by the full bar, most barrier-free ones by the lower
    # bar that applies once the workers take part
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", min_work)
    if min_share is not None:
        monkeypatch.setenv("PYGGML_CPU_MIN_SHARE_WORK", min_share)
    rng = np.random.default_rng(3)
    g, outs, refs, (x, w_np, v), inputs = ops_graph(rng)
    g.compute(1)
    for t, ref in refs:
        np.testing.assert_allclose(t.to_f32(), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(v.to_f32()).ravel(), w_np @ np.array(x.to_f32())[0],
                               rtol=1e-4, atol=1e-5)
    # New inputs before every multi-thread compute: a share that is skipped would leave the
    # previous compute's values, which no longer match. Repeated: a race shows rarely.
    for _ in range(4):
        for n_threads in (2, 3, 5, 8):
            for t in inputs:
                t.numpy()[...] = rng.standard_normal(t.numpy().shape).astype(np.float32)
            g.compute(n_threads)
            got = [np.array(o.to_f32()).copy() for o in outs]
            g.compute(1)
            for o, f in zip(outs, got):
                np.testing.assert_array_equal(f, o.to_f32(), err_msg=f"{o.name} at {n_threads} threads")
