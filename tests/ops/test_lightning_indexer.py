"""LIGHTNING_INDEXER against a float64 reference (K dequantized as stored)."""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

K_TYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16, "q8_0": gg.Q8_0, "q4_0": gg.Q4_0, "nvfp4": gg.NVFP4}


def _mask_values(rng, shape, p_inf=0.1):
    m = rng.uniform(-1, 1, size=shape).astype(np.float16)
    m[rng.uniform(size=shape) < p_inf] = -np.inf
    return m


def _run(D, n_head, n_batch, n_kv, S, S_m, k_type="f32", seed=0, n_threads=2, mask_rows=None):
    ctx = gg.Context(64 << 20)
    rng = np.random.default_rng(seed)
    q, qv = new(ctx, gg.F32, [D, n_head, n_batch, S], rng=rng)
    k, kv = new(ctx, K_TYPES[k_type], [D, 1, n_kv, S], rng=rng)
    w, wv = new(ctx, gg.F32, [n_head, n_batch, 1, S], rng=rng, lo=0, hi=1.0 / n_head)
    rows = mask_rows or n_batch
    mask = ctx.new_tensor(gg.F16, [n_kv, rows, 1, S_m])
    mv = _mask_values(rng, (S_m, 1, rows, n_kv))
    mask.set(mv)
    r = gg.lightning_indexer(ctx, q, k, w, mask)
    assert list(r.ne) == [n_kv, n_batch, 1, S] and r.type == gg.F32
    compute(ctx, r, n_threads=n_threads)
    exp = ref.lightning_indexer(qv, kv, wv, mv.astype(np.float64))
    return values(r), exp


@pytest.mark.parametrize("n_kv", [1, 7, 8, 63, 64, 65, 256])
@pytest.mark.parametrize("k_type", ["f32", "f16", "bf16", "q8_0", "q4_0"])
def test_kv_sizes_and_types(n_kv, k_type):
    got, exp = _run(128, 32 if n_kv % 2 else 64, 5, n_kv, 4, 1, k_type, seed=n_kv)
    assert_close(got, exp, 1e-6)


@pytest.mark.parametrize("n_head", [32, 64])
@pytest.mark.parametrize("S,S_m", [(1, 1), (4, 4), (4, 1), (4, 2)])
def test_heads_and_streams(n_head, S, S_m):
    got, exp = _run(128, n_head, 9, 40, S, S_m, "f16", seed=n_head + S + S_m)
    assert_close(got, exp, 1e-6)


def test_batch_32_and_nvfp4_k():
    got, exp = _run(128, 64, 32, 65, 4, 1, "q8_0", seed=3)
    assert_close(got, exp, 1e-6)
    got, exp = _run(128, 16, 3, 17, 2, 1, "nvfp4", seed=4)
    assert_close(got, exp, 1e-6)


def test_odd_head_dim_and_padded_mask_rows():
    """D not a multiple of the SIMD width, mask with more rows than n_batch (extra rows ignored)."""
    got, exp = _run(37, 5, 3, 11, 2, 1, "f32", seed=5, mask_rows=7)
    assert_close(got, exp, 1e-6)


def test_relu_clips_negative_dots_and_inf_mask():
    ctx = gg.Context(1 << 20)
    D, H, N, KV = 4, 2, 1, 3
    q = ctx.new_tensor(gg.F32, [D, H, N, 1])
    q.set(np.array([[1, 0, 0, 0], [0, 1, 0, 0]], np.float32))
    k = ctx.new_tensor(gg.F32, [D, 1, KV, 1])
    # kv 0: dots (+2, -3); kv 1: (-1, -1); kv 2: (+1, +1)
    k.set(np.array([[2, -3, 0, 0], [-1, -1, 0, 0], [1, 1, 0, 0]], np.float32).reshape(3, 1, 4))
    w = ctx.new_tensor(gg.F32, [H, N, 1, 1])
    w.set(np.array([0.5, 2.0], np.float32))
    m = ctx.new_tensor(gg.F16, [KV, N, 1, 1])
    m.set(np.array([0.0, 0.25, -np.inf], np.float16))
    r = gg.lightning_indexer(ctx, q, k, w, m)
    compute(ctx, r)
    got = values(r).ravel()
    assert got[0] == 1.0       # relu(2)*0.5 + relu(-3)*2 + 0
    assert got[1] == 0.25      # both dots clipped to 0, mask only
    assert got[2] == -np.inf   # -inf mask propagates


def test_strided_q_and_k_views():
    """q as a head-permuted view, K as a strided (padded) cache view."""
    D, H, N, KV, S = 64, 8, 3, 21, 2
    ctx = gg.Context(16 << 20)
    rng = np.random.default_rng(7)
    qt, qtv = new(ctx, gg.F32, [D, N, H, S], rng=rng)
    q = gg.permute(ctx, qt, 0, 2, 1, 3)  # [D, H, N, S]
    kbig, kbv = new(ctx, gg.F16, [D, 1, KV + 4, S], rng=rng)
    k = gg.view_4d(ctx, kbig, D, 1, KV, S, kbig.nb[1], kbig.nb[2], kbig.nb[3], 2 * kbig.nb[2])
    w, wv = new(ctx, gg.F32, [H, N, 1, S], rng=rng)
    mask = ctx.new_tensor(gg.F16, [KV, N, 1, 1])
    mv = _mask_values(rng, (1, 1, N, KV))
    mask.set(mv)
    r = gg.lightning_indexer(ctx, q, k, w, mask)
    compute(ctx, r)
    exp = ref.lightning_indexer(np.swapaxes(qtv, 1, 2), kbv[:, 2:2 + KV], wv, mv.astype(np.float64))
    assert_close(values(r), exp, 1e-6)


@pytest.mark.parametrize("k_type", ["f32", "q4_0"])
def test_threads_agree(k_type):
    a, _ = _run(128, 32, 4, 100, 2, 1, k_type, seed=9, n_threads=1)
    b, _ = _run(128, 32, 4, 100, 2, 1, k_type, seed=9, n_threads=2)
    np.testing.assert_array_equal(a, b)


def test_rejects():
    ctx = gg.Context(1 << 20)
    q = ctx.new_tensor(gg.F32, [32, 4, 3, 2])
    k = ctx.new_tensor(gg.F16, [32, 1, 10, 2])
    w = ctx.new_tensor(gg.F32, [4, 3, 1, 2])
    m = ctx.new_tensor(gg.F16, [10, 3, 1, 1])
    with pytest.raises(TypeError, match="lightning_indexer"):
        gg.lightning_indexer(ctx, q, k, w, None)
    with pytest.raises(TypeError, match="lightning_indexer"):
        gg.lightning_indexer(ctx, q, k, w, ctx.new_tensor(gg.F32, [10, 3, 1, 1]))
    with pytest.raises(TypeError, match="lightning_indexer"):
        gg.lightning_indexer(ctx, ctx.new_tensor(gg.F16, [32, 4, 3, 2]), k, w, m)
    with pytest.raises(TypeError, match="lightning_indexer"):
        gg.lightning_indexer(ctx, q, ctx.new_tensor(gg.I32, [32, 1, 10, 2]), w, m)
    with pytest.raises(ValueError, match="lightning_indexer"):
        gg.lightning_indexer(ctx, q, ctx.new_tensor(gg.F16, [32, 2, 10, 2]), w, m)
    with pytest.raises(ValueError, match="lightning_indexer"):
        gg.lightning_indexer(ctx, q, k, ctx.new_tensor(gg.F32, [4, 3, 1, 1]), m)
    with pytest.raises(ValueError, match="lightning_indexer"):
        gg.lightning_indexer(ctx, q, k, w, ctx.new_tensor(gg.F16, [10, 3, 1, 3]))  # 2 % 3 != 0
    with pytest.raises(ValueError, match="lightning_indexer"):
        gg.lightning_indexer(ctx, q, k, w, ctx.new_tensor(gg.F16, [11, 3, 1, 1]))
    with pytest.raises(ValueError, match="lightning_indexer"):
        gg.lightning_indexer(ctx, q, k, w, ctx.new_tensor(gg.F16, [10, 2, 1, 1]))
    qt = gg.transpose(ctx, ctx.new_tensor(gg.F32, [4, 32, 3, 2]))
    with pytest.raises(ValueError, match="lightning_indexer"):
        gg.lightning_indexer(ctx, qt, k, w, m)
    assert list(gg.lightning_indexer(ctx, q, k, w, m).ne) == [10, 3, 1, 2]


@pytest.mark.parametrize("simd", ["scalar", "avx2"], indirect=True)
def test_other_isa_paths(simd):
    """The plain loop and the AVX2 kernel (gg.set_isa) match the reference too."""
    got, exp = _run(37, 5, 3, 70, 2, 1, 'f16', seed=1)
    assert_close(got, exp, 1e-6)
    got, exp = _run(128, 64, 4, 65, 1, 1, 'q8_0', seed=2)
    assert_close(got, exp, 1e-6)
