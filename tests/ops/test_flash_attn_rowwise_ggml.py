"""The row-wise F16 flash-attention kernel (csrc/cpu/flash_attn_rowwise.cpp) against ggml's
own CPU kernel (llama-cpp-python's bundled libggml, through bench/ggml_ref.py): over one KV
chunk (<= 512 columns) the two must give the same bits, on any thread count of ours; an AVX2
ggml at pyggml's avx2 level, an AVX-512 one at the avx512 level (dots 64 dims a step, 16-lane
V accumulators: the D % 64 tails, masked V lanes). The cases reach every path of the
kernel: score groups of 1, 2 and 3 vectors per converted K row, a D % 32 tail, soft cap,
blocks with and without a new maximum (and pairs of vectors where only one rescales), -inf
holes that drop columns, masks that differ per token, an all-masked row, short last blocks.
"""
import os
import sys

import numpy as np
import pytest

import pyggml as gg
from util import require_ggml_bits_comparable

pytestmark = pytest.mark.oracle

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))


@pytest.fixture(scope="module")
def ref():
    pytest.importorskip("llama_cpp")
    import ggml_ref
    g = ggml_ref.load()
    if g is None:
        pytest.skip("llama_cpp's ggml libraries are not there")
    # an AVX2 ggml is reproduced at pyggml's avx2 level, an AVX-512 one at the avx512 level
    return g, require_ggml_bits_comparable(avx512_kernels=True)


def _inputs(rng, D, H, Hkv, KV, N, q_scale, holes, trend):
    q = rng.uniform(-1, 1, size=(1, H, N, D)) * q_scale
    k = rng.uniform(-1, 1, size=(1, Hkv, KV, D))
    if trend:
        # K rows drift along one direction: heads that look along it see a new maximum at
        # nearly every column (a rescale per step), heads that look against it see none
        u = np.zeros(D)
        u[::3] = 1.0
        k = 0.2 * k + np.linspace(-2, 2, KV)[None, None, :, None] * u
        sign = np.where(np.arange(H) % 2 == 0, 1.0, -1.0)[None, :, None, None]
        q = 0.1 * q + sign * u * q_scale
    v = rng.uniform(-1, 1, size=(1, Hkv, KV, D))
    m = rng.choice([0.0, -0.5, -1.0], size=(1, 1, N, KV))
    m[rng.random(m.shape) < holes] = -np.inf
    for t in range(N):  # causal tail: masks differ per token
        m[..., t, KV - N + t + 1:] = -np.inf
    if N > 2:
        m[..., 1, :] = -np.inf  # an all-masked row
    return (q.astype(np.float32), k.astype(np.float16), v.astype(np.float16), m.astype(np.float16))


CASES = [
    # D, H, Hkv, KV, N, q scale, -inf holes, soft cap, drifting K
    (32, 4, 2, 512, 1, 2.0, 0.0, 0.0, False),    # pairs of vectors, no compaction
    (32, 4, 2, 512, 1, 3.0, 0.0, 0.0, True),     # one vector of each pair rescales
    (32, 4, 2, 300, 2, 1.0, 0.2, 0.0, True),     # holes: dropped columns, short last block
    (64, 9, 3, 512, 1, 2.0, 0.0, 0.0, False),    # groups of 3
    (64, 9, 3, 433, 1, 4.0, 0.1, 0.0, True),
    (64, 16, 1, 200, 2, 2.0, 0.3, 0.0, False),   # 32 vectors: two items of 16
    (40, 6, 2, 200, 3, 2.0, 0.2, 0.0, False),    # D % 32 tail
    (128, 8, 8, 511, 1, 1.0, 0.0, 30.0, False),  # soft cap, one vector per item
    (128, 8, 4, 33, 5, 2.0, 0.0, 0.0, True),     # fewer than 8 columns in the last block
    (96, 5, 1, 64, 1, 8.0, 0.0, 0.0, False),     # groups of 3 + 2, peaked softmax
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "D{}_h{}x{}_kv{}_n{}_s{}_holes{}_cap{}_{}".format(
    *c[:8], "drift" if c[8] else "flat"))
def test_rowwise_gives_ggml_bits_over_one_chunk(ref, case, threads):
    ref, level = ref
    D, H, Hkv, KV, N, q_scale, holes, cap, trend = case
    if level == "avx512" and D % 64 >= 32:
        pytest.skip(f"D={D}: the avx512 level runs the 8-lane kernel (ggml's AVX2 bits) where ggml's "
                    "AVX-512 build sums the last 32+ dims one by one in f64")
    rng = np.random.default_rng(D * 1000 + KV + N)
    q, k, v, m = _inputs(rng, D, H, Hkv, KV, N, q_scale, holes, trend)
    scale = 1.0 / np.sqrt(D)
    size = k.nbytes + v.nbytes + 2 * q.nbytes + m.nbytes + (16 << 20)
    ctx = gg.Context(mem_size=size)
    tq = ctx.new_tensor(gg.F32, [D, N, H, 1]); tq.set(q)
    tk = ctx.new_tensor(gg.F16, [D, KV, Hkv, 1]); tk.set(k)
    tv = ctx.new_tensor(gg.F16, [D, KV, Hkv, 1]); tv.set(v)
    tm = ctx.new_tensor(gg.F16, [KV, N, 1, 1]); tm.set(m)
    out = gg.flash_attn_ext(ctx, tq, tk, tv, tm, scale, 0.0, cap)
    g = gg.Graph(ctx)
    g.build_forward_expand(out)
    previous = gg.set_isa(level)
    try:
        g.compute(n_threads=threads)
    finally:
        gg.set_isa(previous)
    mine = out.numpy().reshape(-1)

    rc = ref.context(size)
    try:
        rq = rc.tensor(ref.TYPE["f32"], [D, N, H, 1], q)
        rk = rc.tensor(ref.TYPE["f16"], [D, KV, Hkv, 1], k)
        rv = rc.tensor(ref.TYPE["f16"], [D, KV, Hkv, 1], v)
        rm = rc.tensor(ref.TYPE["f16"], [KV, N, 1, 1], m)
        # ggml on one thread: with more it may split the KV axis of a decode row its own way
        run = rc.graph(ref.ggml_flash_attn_ext(rc.ptr, rq, rk, rv, rm, scale, 0.0, cap), 1)
        run()
        theirs = rc.read_f32(run.out, D * H * N).copy()
    finally:
        rc.free()
    assert np.isfinite(mine).all() and np.abs(mine).max() > 0
    if N > 2:  # the all-masked row is zeros on both sides
        assert not mine.reshape(N, H, D)[1].any()
    np.testing.assert_array_equal(mine, theirs)
