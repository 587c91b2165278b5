"""The CPU thread pool and its schedule: nodes with little work run on thread 0 alone (no
barrier between two such nodes), big ones are split. Results must not depend on the thread
count, the threshold, or on a machine whose cores are all busy."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import pyggml as gg

HERE = os.path.dirname(os.path.abspath(__file__))


def mixed_graph(rng):
    """Small element-wise chains around a large mul_mat, a softmax and a reduction: solo and
    split nodes alternate."""
    ctx = gg.Context(1 << 26)
    a = rng.standard_normal((67, 301)).astype(np.float32)      # numpy order: [rows, cols]
    b = rng.standard_normal((129, 301)).astype(np.float32)
    s = rng.standard_normal((1, 67)).astype(np.float32)
    ta, tb, ts = ctx.from_numpy(a), ctx.from_numpy(b), ctx.from_numpy(s)
    x = gg.scale(ctx, gg.add(ctx, ts, ts), 0.5)                 # tiny
    m = gg.mul_mat(ctx, ta, tb)                                 # [67, 129]: big
    y = gg.soft_max(ctx, gg.add(ctx, m, x))                     # broadcast add, softmax rows
    z = gg.sum_rows(ctx, gg.mul(ctx, y, y))                     # tiny reduction
    out = gg.scale(ctx, z, 3.0)
    g = gg.Graph(ctx)
    g.build_forward_expand(out)
    logits = b @ a.T + s
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    return g, out, 3.0 * (p * p).sum(axis=1)


@pytest.mark.parametrize("min_work", ["0", "131072", "1000000000"], ids=["split", "default", "solo"])
def test_results_do_not_depend_on_threads_or_the_threshold(monkeypatch, min_work):
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", min_work)
    g, out, ref = mixed_graph(np.random.default_rng(1))
    first = None
    for n_threads in (1, 2, 3, 5):
        g.compute(n_threads)
        got = np.array(out.numpy()).ravel()
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-6)
        if first is None:
            first = got
        np.testing.assert_array_equal(got, first)  # rows are split, sums are not: bit-equal


def test_llm_decode_is_the_same_with_and_without_solo_nodes(monkeypatch):
    sys.path.insert(0, os.path.join(HERE, "llm"))
    from llama_ref import ArrayModel, make_hparams, make_weights

    from pyggml.llm.context import Context
    hp = make_hparams(n_vocab=97)
    w = make_weights(hp, seed=8)
    outs = []
    for min_work, n_threads in (("0", 1), ("0", 3), ("131072", 2), ("1000000000", 2)):
        monkeypatch.setenv("PYGGML_CPU_MIN_WORK", min_work)
        ctx = Context(ArrayModel(hp, w), n_ctx=64, n_threads=n_threads)
        rows = [ctx.decode([5, 9, 1, 33], logits_all=True)]
        rows += [ctx.decode([t]) for t in (7, 2, 60)]
        outs.append(np.concatenate(rows))
    for o in outs[1:]:
        np.testing.assert_allclose(o, outs[0], rtol=1e-5, atol=1e-5)


BUSY = textwrap.dedent("""
    import os, sys, time
    os.environ["PYGGML_CPU_MIN_WORK"] = sys.argv[1]
    import numpy as np
    sys.path.insert(0, sys.argv[2])
    from test_threads import mixed_graph
    g, out, ref = mixed_graph(np.random.default_rng(4))
    t0 = time.perf_counter()
    for i in range(60):
        g.compute(4)                       # more threads than the cores left free
        np.testing.assert_allclose(np.array(out.numpy()).ravel(), ref, rtol=1e-4, atol=1e-6)
    print("OK", time.perf_counter() - t0)
""")


@pytest.mark.parametrize("min_work", ["0", "131072"], ids=["split", "default"])
def test_an_oversubscribed_machine_still_gives_correct_results(min_work):
    n_busy = 2 * (os.cpu_count() or 1)
    spin = "import time\nt = time.time() + 60\nwhile time.time() < t: pass\n"
    busy = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(n_busy)]
    try:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
        r = subprocess.run([sys.executable, "-c", BUSY, min_work, HERE], capture_output=True,
                           text=True, timeout=240, env=env)
    finally:
        for p in busy:
            p.kill()
        for p in busy:
            p.wait()
    assert r.returncode == 0 and r.stdout.startswith("OK"), r.stdout + r.stderr


def test_thread_count_above_the_cap_is_refused_with_the_cap_named():
    ctx = gg.Context(1 << 16)
    y = gg.scale(ctx, ctx.from_numpy(np.ones(4, np.float32)), 2.0)
    g = gg.Graph(ctx)
    g.build_forward_expand(y)
    cap = max(16, 4 * (os.cpu_count() or 1))
    g.compute(cap)
    np.testing.assert_array_equal(y.numpy(), 2.0)
    with pytest.raises(ValueError, match=f"more than {cap}"):
        g.compute(cap + 1)


def counts_of(fn):
    """What the CPU schedule did during fn(): the difference of gg.cpu_schedule_counts()."""
    before = gg.cpu_schedule_counts()
    fn()
    after = gg.cpu_schedule_counts()
    return {k: after[k] - before[k] for k in before}


def small_graph(rng):
    """Element-wise ops, a norm, a softmax and a mul_mat on a few hundred values: every node
    far below the default split bar."""
    ctx = gg.Context(1 << 22)
    a = rng.standard_normal((8, 32)).astype(np.float32)
    w = rng.standard_normal((16, 32)).astype(np.float32)
    ta, tw = ctx.from_numpy(a), ctx.from_numpy(w)
    x = gg.rms_norm(ctx, gg.mul(ctx, gg.add(ctx, ta, ta), ta), 1e-6)
    y = gg.soft_max(ctx, gg.mul_mat(ctx, tw, x))
    g = gg.Graph(ctx)
    g.build_forward_expand(y)
    x_ref = 2 * a * a
    x_ref = x_ref / np.sqrt((x_ref * x_ref).mean(axis=1, keepdims=True) + 1e-6)
    z = x_ref @ w.T
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return g, y, e / e.sum(axis=1, keepdims=True)


def test_small_nodes_run_on_thread_0_and_never_wake_the_workers(monkeypatch):
    monkeypatch.delenv("PYGGML_CPU_MIN_WORK", raising=False)
    monkeypatch.delenv("PYGGML_CPU_MIN_SHARE_WORK", raising=False)
    g, y, ref = small_graph(np.random.default_rng(5))
    for n_threads in (2, 4):
        c = counts_of(lambda: g.compute(n_threads))
        np.testing.assert_allclose(y.numpy(), ref, rtol=1e-4, atol=1e-6)
        assert c["computes"] == 1 and c["solo_steps"] == 5, c
        assert c["computes_with_workers"] == 0 and c["split_steps"] == 0, c
    # the same graph with no split bar does wake them: the counts see a split when there is one
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", "0")
    c = counts_of(lambda: g.compute(2))
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-4, atol=1e-6)
    assert c["computes_with_workers"] == 1 and c["split_steps"] == 5, c


def test_one_big_node_wakes_the_workers_and_only_its_step_splits(monkeypatch):
    monkeypatch.delenv("PYGGML_CPU_MIN_WORK", raising=False)
    monkeypatch.delenv("PYGGML_CPU_MIN_SHARE_WORK", raising=False)
    rng = np.random.default_rng(6)
    ctx = gg.Context(1 << 24)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    s = rng.standard_normal((1, 4)).astype(np.float32)
    big = gg.mul_mat(ctx, ctx.from_numpy(a), ctx.from_numpy(a))          # 256^3 multiply-adds
    tiny = gg.scale(ctx, ctx.from_numpy(s), 3.0)                          # 4 values
    g = gg.Graph(ctx)
    g.build_forward_expand(big)
    g.build_forward_expand(tiny)
    c = counts_of(lambda: g.compute(2))
    np.testing.assert_allclose(big.numpy(), a @ a.T, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.ravel(tiny.numpy()), 3 * s.ravel(), rtol=1e-6)
    assert c["computes_with_workers"] == 1 and c["split_steps"] == 1 and c["solo_steps"] == 1, c
    # one thread asked: nothing to wake, however big the node
    c = counts_of(lambda: g.compute(1))
    assert c["computes_with_workers"] == 0 and c["split_steps"] == 0 and c["solo_steps"] == 2, c


def stretches_graph(rng):
    """Two stretches of tiny nodes (4 and 3 of them) split by big products, then one tiny
    node: steps solo x4, split, solo x3, split, solo at the default bars."""
    ctx = gg.Context(1 << 24)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 256)).astype(np.float32)
    s = rng.standard_normal((1, 4)).astype(np.float32)
    ta, tb, ts = ctx.from_numpy(a), ctx.from_numpy(b), ctx.from_numpy(s)
    t2 = gg.add(ctx, gg.scale(ctx, ts, 2.0), ts)
    t4 = gg.scale(ctx, gg.mul(ctx, t2, t2), 0.5)
    big = gg.mul_mat(ctx, ta, ta)
    u3 = gg.mul(ctx, gg.add(ctx, gg.scale(ctx, ts, 3.0), ts), ts)
    big2 = gg.mul_mat(ctx, ta, tb)
    v = gg.add(ctx, t4, u3)
    g = gg.Graph(ctx)
    for t in (t4, big, u3, big2, v):
        g.build_forward_expand(t)
    t2_ref = 3.0 * s
    refs = {"big": a @ a.T, "big2": b @ a.T, "v": 0.5 * t2_ref * t2_ref + 4.0 * s * s}
    return g, {"big": big, "big2": big2, "v": v}, refs


STRETCHES = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from test_threads import stretches_graph
    g, outs, refs = stretches_graph(np.random.default_rng(8))
    for i in range(300):
        g.compute(2 + i % 2)
        np.testing.assert_allclose(np.ravel(outs["v"].numpy()), refs["v"].ravel(), rtol=1e-5)
    print("OK")
""")


def test_a_stretch_of_solo_steps_publishes_only_its_last_step(monkeypatch):
    # Inside a stretch of solo steps only thread 0 runs and the workers wait for the next split
    # step, so only the stretch's last step is published to them. Results and the split steps
    # must not change; a wrong skip (a step nobody publishes but someone waits for) hangs, so
    # repeated computes run in a child with a time limit.
    monkeypatch.delenv("PYGGML_CPU_MIN_WORK", raising=False)
    monkeypatch.delenv("PYGGML_CPU_MIN_SHARE_WORK", raising=False)
    monkeypatch.setenv("PYGGML_CPU_GROUPS", "0")   # each node its own step (groups: test_schedule_groups.py)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", STRETCHES, HERE], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0 and r.stdout.startswith("OK"), r.stdout + r.stderr
    g, outs, refs = stretches_graph(np.random.default_rng(8))
    for n_threads, solo, quiet in ((2, 8, 3 + 2), (3, 8, 3 + 2), (1, 10, 9)):
        c = counts_of(lambda: g.compute(n_threads))
        for name, t in outs.items():
            np.testing.assert_allclose(np.array(t.numpy()).reshape(refs[name].shape), refs[name],
                                       rtol=1e-4, atol=1e-3)
        assert c["solo_steps"] == solo and c["split_steps"] == 10 - solo, c
        assert c["quiet_solo_steps"] == quiet, c


@pytest.mark.parametrize("dtype", ["f32", "q4_0"])
def test_tiny_llm_decode_at_a_short_context_never_wakes_the_workers(monkeypatch, tmp_path, dtype):
    # the tiny bench models' one-token steps: every node is a few kilobytes, so a second
    # thread could only wait; at 2 threads the step must run as at 1
    monkeypatch.delenv("PYGGML_CPU_MIN_WORK", raising=False)
    monkeypatch.delenv("PYGGML_CPU_MIN_SHARE_WORK", raising=False)
    from pyggml.llm import Context, Model, tiny
    path = str(tmp_path / f"tiny-{dtype}.gguf")
    tiny.write_tiny_llama(path, seed=0, n_vocab=256, n_embd=128, n_layer=4, n_head=4, n_head_kv=2,
                          n_ff=384, n_ctx_train=512, dtype=dtype)
    model = Model.load(path, progress=False)
    toks = {}
    for n_threads in (1, 2):
        ctx = Context(model, n_ctx=128, n_threads=n_threads, flash_attn=True)
        tok = ctx.decode_greedy(list(range(3, 19)))
        out = [tok]

        def steps():
            nonlocal tok
            for _ in range(6):
                tok = ctx.decode_greedy([tok])
                out.append(tok)
        c = counts_of(steps)
        assert c["computes"] == 6 and c["solo_steps"] > 0, c
        assert c["computes_with_workers"] == 0 and c["split_steps"] == 0, c
        toks[n_threads] = out
    assert toks[1] == toks[2]


@pytest.mark.parametrize("kind", ["q8_0-repacked", "q8_0", "f16"])
def test_a_shared_products_units_claimed_from_both_ends_cover_every_row_once(monkeypatch, kind):
    # As a shared step, a one-column product's units are claimed by share 0 from the front and
    # by the other shares from the back: every row must be computed, by exactly the same
    # arithmetic as on one thread, however the claims from the two ends met. The outputs are
    # filled with NaN before each compute, so a unit that no claim reached shows. Six products
    # in a row, so that a worker woken late still finds units in the later ones.
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", "0")
    monkeypatch.setenv("PYGGML_CPU_GROUPS", "0")   # six shared steps, not one group
    rng = np.random.default_rng(11)
    # f16: above the float path's claim bar; every kind a few MiB, so that thread 0 cannot take
    # every unit of six products before a worker woken from its sleep arrives
    K, M = (768, 4096) if kind == "f16" else (1024, 8192)
    ctx = gg.Context(1 << 26)
    wf = rng.standard_normal((M, K)).astype(np.float32)
    if kind == "f16":
        w = ctx.from_numpy(wf.astype(np.float16))
        wv = wf.astype(np.float16).astype(np.float64)
    else:
        w = ctx.new_tensor(gg.Q8_0, [K, M])
        w.set(gg.quantize(gg.Q8_0, wf.ravel()))
        wv = np.asarray(gg.dequantize(gg.Q8_0, gg.quantize(gg.Q8_0, wf.ravel())), np.float64).reshape(M, K)
    handle = gg.repack_weights(w) if kind == "q8_0-repacked" else None
    assert (handle is not None) == gg.has_repack(w)
    xs = rng.standard_normal((6, 1, K)).astype(np.float32)
    ys = [gg.mul_mat(ctx, w, ctx.from_numpy(x)) for x in xs]
    g = gg.Graph(ctx)
    for y in ys:
        g.build_forward_expand(y)
    outs = {}
    for n_threads in (1, 2, 4):
        # until the back has served some units (a worker that wakes after thread 0 took every
        # unit from the front claims none), at most 100 computes
        back = 0
        for _ in range(1 if n_threads == 1 else 100):
            for y in ys:
                y.set(np.full((1, M), np.nan, np.float32))
            c = counts_of(lambda: g.compute(n_threads))
            assert c["split_steps"] == (0 if n_threads == 1 else len(ys)), c
            got = np.stack([np.array(y.numpy()).reshape(M) for y in ys])
            outs.setdefault(n_threads, got)
            np.testing.assert_array_equal(got, outs[1], err_msg=f"{n_threads} threads")
            back += c["back_claimed_units"]
            if back >= 8:
                break
        assert n_threads == 1 or back > 0, f"{n_threads} threads: no unit was claimed from the back"
        assert n_threads > 1 or back == 0
    ref = xs[:, 0, :].astype(np.float64) @ wv.T
    nmse = np.sum((outs[1] - ref) ** 2) / np.sum(ref ** 2)
    assert nmse < 5e-4, nmse


AFTER_IDLE = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from test_threads import mixed_graph
    g, out, ref = mixed_graph(np.random.default_rng(3))
    for n_threads in (2, 3, 2):
        time.sleep(0.05)  # past the workers' spin and yield: they sleep, the next run wakes them
        g.compute(n_threads)
        np.testing.assert_allclose(np.array(out.numpy()).ravel(), ref, rtol=1e-4, atol=1e-6)
    def allowed(tid):
        with open(f"/proc/self/task/{tid}/status") as f:
            return next(l.split(":")[1].strip() for l in f if l.startswith("Cpus_allowed_list"))
    tids = os.listdir("/proc/self/task")
    print(allowed(os.getpid()), *sorted({allowed(t) for t in tids}), sep="|")
""")


@pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two usable cores")
def test_workers_woken_after_idle_take_back_every_core_of_the_caller():
    # A run that wakes sleeping workers keeps them off the caller's core for the wake-up; each
    # must then take the caller's whole set back, or the pool would lose a core for good.
    r = subprocess.run([sys.executable, "-c", AFTER_IDLE, HERE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    main, *threads = r.stdout.strip().split("|")
    assert threads == [main], f"threads' allowed cores {threads}, the caller's {main}"


def test_workers_that_sit_a_run_out_never_run_the_next_one_twice(monkeypatch):
    # Thread counts alternate, so some workers sit every other run out. One that learns of a
    # run late, after the caller has begun the next, must not take the next run's job for the
    # one it saw: in the lockstep schedule an extra arrival opens a barrier early and rows go
    # uncomputed (the output is poisoned with NaN before each compute).
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", "0")
    monkeypatch.setenv("PYGGML_CPU_SHARES", "0")
    rng = np.random.default_rng(11)
    ctx = gg.Context(1 << 24)
    a = rng.standard_normal((331, 96)).astype(np.float32)
    b = rng.standard_normal((3, 96)).astype(np.float32)
    out = gg.mul_mat(ctx, ctx.from_numpy(a), ctx.from_numpy(b))
    g = gg.Graph(ctx)
    g.build_forward_expand(out)
    g.compute(1)
    first = np.array(out.numpy()).copy()
    np.testing.assert_allclose(first, b @ a.T, rtol=1e-4, atol=1e-4)
    for i in range(400):
        out.set(np.full(first.size, np.nan, dtype=np.float32))
        n_threads = (2, 7)[i % 2]
        if i % 16 == 0:
            time.sleep(0.002)  # past the workers' spin: some sleep, and wake late
        g.compute(n_threads)
        got = np.array(out.numpy())
        assert np.array_equal(got, first), f"compute {i} at {n_threads} threads: {int(np.sum(got != first))} outputs differ"
