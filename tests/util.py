"""Shared test helpers: graph running, NMSE checks as the peer suite defines them."""
import numpy as np
import pytest

import pyggml as gg

# Kernel sets every SIMD-dispatched op is tested with (see the `simd` fixture in conftest.py).
SIMD_LEVELS = ["native", "avx2", "scalar"]


def nmse(expected, got) -> float:
    e = np.asarray(expected, dtype=np.float64)
    g = np.asarray(got, dtype=np.float64)
    den = float(np.sum(e * e))
    num = float(np.sum((e - g) ** 2))
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


def assert_close(got, expected, max_nmse: float = 1e-7, what: str = ""):
    """Peer-suite comparison: no unexpected NaN, identical inf positions/signs, NMSE bound
    over the finite entries."""
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != expected {expected.shape}"
    nan_g, nan_e = np.isnan(got), np.isnan(expected)
    assert not np.any(nan_g & ~nan_e), f"{what}: NaN where none expected ({int(np.sum(nan_g & ~nan_e))} entries)"
    assert np.array_equal(nan_g, nan_e), f"{what}: NaN positions differ"
    inf_g, inf_e = np.isinf(got), np.isinf(expected)
    assert np.array_equal(inf_g, inf_e), f"{what}: inf positions differ"
    assert np.array_equal(np.sign(got[inf_g]), np.sign(expected[inf_e])), f"{what}: inf signs differ"
    fin = ~(inf_e | nan_e)
    err = nmse(expected[fin], got[fin])
    assert err <= max_nmse, f"{what}: NMSE {err:.3e} > {max_nmse:.1e}"
    return err


def compute(ctx, *outputs, n_threads: int = 2):
    """Build a graph from the outputs, compute it, return the graph."""
    g = gg.Graph(ctx)
    for t in outputs:
        g.build_forward_expand(t)
    g.compute(n_threads=n_threads)
    return g


def values(t) -> np.ndarray:
    """float32 (or int) copy of a tensor's values with numpy shape (ne3, ne2, ne1, ne0)."""
    if t.type in (gg.I32, gg.I64):
        v = np.array(t.numpy())
    else:
        v = t.to_f32()
    return v.reshape(tuple(reversed(t.ne)))


def new(ctx, type_, ne, data=None, rng=None, lo=-1.0, hi=1.0):
    """New tensor of `type_` with ggml shape `ne`; filled from `data` (numpy shape ne
    reversed) or uniform [lo, hi). Returns (tensor, float64 values as stored)."""
    t = ctx.new_tensor(type_, list(ne))
    shape = tuple(reversed(list(ne) + [1] * (4 - len(ne))))
    if data is None:
        rng = rng or np.random.default_rng(0)
        data = rng.uniform(lo, hi, size=shape).astype(np.float32)
    data = np.asarray(data).reshape(shape)
    if gg.is_quantized(type_):
        t.set(gg.quantize(type_, data.astype(np.float32).ravel()))
    elif type_ == gg.F16:
        t.set(data.astype(np.float16))
    elif type_ in (gg.I32, gg.I64):
        t.set(data.astype(np.int32 if type_ == gg.I32 else np.int64))
    else:
        t.set(data.astype(np.float32))
    stored = values(t).astype(np.float64) if type_ not in (gg.I32, gg.I64) else values(t)
    return t, stored


def run_python(code: str, env_extra: dict, timeout: float = 120):
    """Run `code` in a fresh interpreter that imports the same pyggml as this process (not a
    source checkout on the current directory) with tests/ helpers importable. Returns the
    CompletedProcess."""
    import os
    import subprocess
    import sys
    import tempfile

    pyggml_root = os.path.dirname(os.path.dirname(os.path.abspath(gg.__file__)))
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    paths = [pyggml_root, tests_dir, os.path.join(tests_dir, "ops")]
    env = dict(os.environ, **env_extra)
    if env.get("PYGGML_BUILD_DIR"):   # a dev build given relative to our cwd
        env["PYGGML_BUILD_DIR"] = os.path.abspath(env["PYGGML_BUILD_DIR"])
    env["PYTHONPATH"] = os.pathsep.join(paths + [x for x in [env.get("PYTHONPATH")] if x])
    with tempfile.TemporaryDirectory() as cwd:   # keep '' on sys.path away from the checkout
        return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                              text=True, timeout=timeout)


def rows_batch_and_single(model, prefix, ids, flash_attn=False, n_ctx=256, n_threads=2):
    """The logit rows of `ids` decoded as one batch after `prefix`, and the same rows decoded
    one token at a time after it (what batch invariance compares)."""
    from pyggml.llm import Context
    ctx = Context(model, n_ctx=n_ctx, n_threads=n_threads, flash_attn=flash_attn)
    ctx.decode(prefix)
    batch = np.array(ctx.decode(ids, logits_all=True), copy=True)
    ctx.reset()
    ctx.decode(prefix)
    single = np.stack([np.array(ctx.decode([t]), copy=True)[-1] for t in ids])
    return batch, single


def check_spec_stat_sums(s, out):
    """A speculative decoder's stats add up: steps, drafted and accepted counts, rounds, the
    committed ids (prompt and plain steps included), the acceptance summaries and timers."""
    steps = s["steps"]
    assert s["n_verify_steps"] == len(steps)
    assert s["n_drafted"] == sum(len(x["draft"]) for x in steps)
    assert s["n_accepted"] == sum(x["n_accepted"] for x in steps)
    assert s["n_rounds"] == s["n_verify_steps"] + s["n_plain_steps"] == s["n_target_decodes"]
    assert s["n_tokens"] == len(out)
    # every round commits n_accepted + 1 ids, the prompt one more
    assert len(out) == 1 + s["n_plain_steps"] + sum(x["n_accepted"] + 1 for x in steps)
    if steps:
        assert s["mean_acceptance_length"] == pytest.approx(1 + s["n_accepted"] / len(steps))
        per = [sum(x["n_accepted"] > i for x in steps) / len(steps) for i in range(s["n_max"])]
        assert s["acceptance_rate_per_pos"] == pytest.approx(per)
    assert s["draft_s"] >= 0 and (s["verify_s"] > 0) == (s["n_rounds"] > 0)


def ktile_from(type_name):
    """The first column count from which MUL_MAT with weights of type_name takes the K-quant
    tiles (another summation order) at the current SIMD level; None when no count does."""
    import pyggml as gg
    row = next(r for r in gg.type_traits() if r["name"] == type_name)
    takes = "avx512" in row["mul_mat_paths"]["ktile"] and gg.isa() == "avx512"
    return gg.KTILE_MIN_COLUMNS if takes else None


def require_ggml_bits_comparable(avx512_kernels: bool = False):
    """Skip a bit-exact oracle test when llama.cpp's ggml is an AVX-512 build: its sums run in
    another order than its AVX2 build's, whose arithmetic pyggml's plain kernels reproduce.
    avx512_kernels: the kernels under test also reproduce the AVX-512 build at pyggml's avx512
    level, so an AVX-512 build is compared there (when this CPU has the level).
    Returns the pyggml level to run the test at ("avx2" or "avx512")."""
    import os
    import sys
    bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import ggml_ref
    reason = ggml_ref.avx512_flavour_reason()
    if not reason:
        return "avx2"
    import pyggml as gg
    if avx512_kernels and gg.isa(True) == "avx512":
        return "avx512"
    pytest.skip(reason)


def tiny_qwen3_target(folder, name="t.gguf", **kw):
    """The speculative tests' tiny qwen3 target (4 layers, 64 wide, 16-wide heads): the shape
    the tiny EAGLE3 / DFlash / DSpark drafts are written for. Returns the written path."""
    from pyggml.llm import write_tiny_llama
    return write_tiny_llama(folder / name, arch="qwen3", qk_norm=True, n_layer=4, n_embd=64,
                            head_dim=16, **kw)


def tiny_eagle3_draft(folder, name="e.gguf"):
    """A tiny EAGLE3 draft reading target layers 0, 1 and 3 of tiny_qwen3_target."""
    from pyggml.llm.tiny import write_tiny_eagle3
    return write_tiny_eagle3(folder / name, target_layers=(0, 1, 3))



def ggml_ref_avx512_vnni():
    """llama.cpp's ggml CPU backend through bench/ggml_ref.py where it is an AVX-512 VNNI build
    (whose tiled K-quant kernels the avx512 level's K-quant tiles match bit for bit); skips the
    test otherwise."""
    import os
    import sys
    pytest.importorskip("llama_cpp")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
    import ggml_ref
    g = ggml_ref.load()
    if g is None:
        pytest.skip("llama_cpp's ggml libraries are not there")
    if not (g.compiled_for["avx512"] and g.compiled_for["avx512_vnni"]):
        pytest.skip("llama.cpp's ggml here is not an AVX-512 VNNI build (its K-quant tiles sum otherwise)")
    return g


def _bits(x):
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)


def _run_schedule(monkeypatch, graph, outs, n_threads, shares, groups=False):
    """Outputs and the nodes run as shares (shared steps plus grouped nodes)."""
    monkeypatch.setenv("PYGGML_CPU_MIN_WORK", "0")  # every node split, whatever its size
    monkeypatch.setenv("PYGGML_CPU_SHARES", "1" if shares else "0")
    monkeypatch.setenv("PYGGML_CPU_GROUPS", "1" if groups else "0")
    for o in outs:  # a unit left out must not pass with the previous run's values
        o.set(np.full(tuple(reversed(o.ne)), np.nan, dtype=np.float32))
    before = gg.cpu_schedule_counts()
    graph.compute(n_threads=n_threads)
    after = gg.cpu_schedule_counts()
    shared = sum(after[k] - before[k] for k in ("shared_steps", "grouped_nodes"))
    return [values(o).copy() for o in outs], shared


def check_shared_schedules(monkeypatch, ctx, outs, want, max_nmse, what):
    """Barrier-free products (outs, of one graph) as shared steps: on 1 thread every output
    written and within max_nmse of want (float64 references); on 2, 3 and 5 threads (more
    threads than cores: shares start late, one thread runs several), as shares, as shares with
    independent nodes grouped (PYGGML_CPU_GROUPS) and as a gang (PYGGML_CPU_SHARES=0), the
    1-thread bits, and every output node run as shares exactly when shares are on (a share that
    met a barrier would raise)."""
    g = gg.Graph(ctx)
    for o in outs:
        g.build_forward_expand(o)
    # scratch read before another share wrote it shows as NaN, not as the last run's values
    was = gg.cpu_poison_scratch(True)
    try:
        _check_schedules(monkeypatch, g, outs, want, max_nmse, what)
    finally:
        gg.cpu_poison_scratch(was)


def _check_schedules(monkeypatch, g, outs, want, max_nmse, what):
    base, _ = _run_schedule(monkeypatch, g, outs, 1, True)
    for got, w in zip(base, want):
        assert np.isfinite(got).all(), f"{what} 1 thread: outputs left unwritten"
        assert_close(got, w, max_nmse, what=f"{what} 1 thread")
    def check(nt, shares, groups, label):
        got_all, shared = _run_schedule(monkeypatch, g, outs, nt, shares, groups)
        for i, (got, b0) in enumerate(zip(got_all, base)):
            bad = np.flatnonzero(_bits(got) != _bits(b0))
            assert bad.size == 0, f"{what} node {i} {label}: {bad.size} of {got.size} differ from 1 thread"
        # every product a shared step (and the other barrier-free nodes), or none
        ok = shared >= len(outs) if shares else shared == 0
        assert ok, f"{what} {label}: {shared} shared steps"

    for nt in (2, 3, 5):
        for shares, groups in ((True, False), (True, True), (False, False)):
            for rep in range(3):
                check(nt, shares, groups, f"threads={nt} shares={shares} groups={groups} rep {rep}")
    # Every item of a claimed conversion sleeps first: a share that ran out of items while the
    # other was still converting one must wait for it, or it reads the poisoned scratch.
    was = gg.cpu_slow_claimed_conversions(200)
    try:
        check(2, True, False, "threads=2, slow conversions")
    finally:
        gg.cpu_slow_claimed_conversions(was)


def moe_routing(counts, U, rng):
    """ids (T, U), T = sum(counts) / U, expert x picked by exactly counts[x] tokens, never twice
    by one token (each count at most T), tokens and slots in random order."""
    T = sum(counts) // U
    assert T * U == sum(counts) and max(counts) <= T
    seq = np.repeat(np.arange(len(counts)), counts)
    ids = seq.reshape(U, T).T.copy()       # token t: seq[t], seq[t + T], ... (distinct: runs <= T)
    ids = ids[rng.permutation(T)]
    for t in range(T):
        ids[t] = ids[t, rng.permutation(U)]
    assert (np.bincount(ids.ravel(), minlength=len(counts)) == counts).all()
    return ids.astype(np.int32)
