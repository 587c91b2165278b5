"""MUL_MAT_ID's per-expert GEMM: with uneven random routing (experts with no token, experts with
more than one 64-column block, experts just under and over the GEMM's 8 columns), every
output is bitwise what MUL_MAT gives for that expert's weights and that column (MUL_MAT's
paths all give the dot kernel's bits), whatever the thread count, with non-contiguous b and
ids, 1..8 experts per token, and b broadcast over the slots or not. Also within the NMSE
bound of the float64 product. (At the avx512 level, an expert with at least
gg.KTILE_MIN_COLUMNS tokens takes the K-quant tiles as MUL_MAT does from that many columns on:
the MUL_MAT references below are taken a narrower window of columns at a time for the other
experts, all columns at once for those.)"""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

TABLE = {row["name"]: row for row in gg.type_traits()}
WTYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16, "q8_0": gg.Q8_0, "q4_K": gg.Q4_K,
          "mxfp4": gg.MXFP4, "q4_1": gg.Q4_1, "nvfp4": gg.NVFP4}


@pytest.fixture(params=["scalar", "avx2", "avx512"])
def isa(request):
    previous = gg.set_isa(request.param)
    yield request.param
    gg.set_isa(previous)


def _skewed_ids(rng, T, U, E):
    """Experts per token drawn with very uneven probabilities; the last two experts never."""
    p = 1.0 / np.arange(1, E - 1) ** 1.3
    p = np.concatenate([p, [0.0, 0.0]])
    p /= p.sum()
    return np.stack([rng.choice(E, U, replace=False, p=p) for _ in range(T)]).astype(np.int32)


def _mul_mat_id_strided(ctx, as_, bv, ids, n_threads):
    """The op on b (T, Nb, K) and ids (T, U) both held as views with padded rows (and b with
    padded slots): returns out (T, U, M)."""
    T, Nb, K = bv.shape
    U = ids.shape[1]
    big = ctx.new_tensor(gg.F32, [K + 7, Nb + 1, T])
    pad = np.zeros((T, Nb + 1, K + 7), dtype=np.float32)
    pad[:, :Nb, 3:3 + K] = bv
    big.set(pad)
    b = gg.view_3d(ctx, big, K, Nb, T, big.nb[1], big.nb[2], 3 * 4)
    ids_big = ctx.new_tensor(gg.I32, [U + 3, T])
    ids_pad = np.full((T, U + 3), -1, dtype=np.int32)
    ids_pad[:, 1:1 + U] = ids
    ids_big.set(ids_pad)
    out = gg.mul_mat_id(ctx, as_, b, gg.view_2d(ctx, ids_big, U, T, ids_big.nb[1], 4))
    compute(ctx, out, n_threads=n_threads)
    return values(out)[0]


def _per_expert_mul_mat(ctx, as_, bv, E, n_threads, tiles=False):
    """MUL_MAT of every expert's weights with every (token, slot) column of b: (E, T*Nb, M),
    in windows of fewer columns than the K-quant tiles take (tiles: all columns at once, which
    the tiles take where they can)."""
    T, Nb, K = bv.shape
    cols = bv.reshape(T * Nb, K)
    step = T * Nb if tiles else gg.KTILE_MIN_COLUMNS - 1
    parts = []
    for c0 in range(0, T * Nb, step):
        part = cols[c0:c0 + step]
        b = ctx.new_tensor(gg.F32, [K, len(part), E])
        b.set(np.broadcast_to(part, (E, len(part), K)).copy())
        out = gg.mul_mat(ctx, as_, b)
        compute(ctx, out, n_threads=n_threads)
        parts.append(values(out)[0])
    return np.concatenate(parts, axis=1)


def _tile_experts(isa, wtype, counts):
    """Experts that take the K-quant tiles (gg.KTILE_MIN_COLUMNS tokens on, the avx512 level)."""
    on = isa == "avx512" and bool(TABLE[wtype]["mul_mat_paths"].get("ktile"))
    return (counts >= gg.KTILE_MIN_COLUMNS) & on


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("U,Nb,T", [(1, 1, 150), (2, 2, 61), (6, 1, 53), (8, 8, 29), (3, 3, 1)])
def test_grouped_gemm_is_bitwise_the_mul_mat_columns(isa, wtype, U, Nb, T):
    K = {"q4_K": 512, "nvfp4": 320}.get(wtype, 288)
    M, E = 45, 23
    ctx = gg.Context(mem_size=128 << 20)
    rng = np.random.default_rng(U * 100 + T)
    as_, asv = new(ctx, WTYPES[wtype], [K, M, E], rng=rng)
    ids = _skewed_ids(rng, T, U, E)
    bv = rng.uniform(-1, 1, size=(T, Nb, K)).astype(np.float32)
    counts = np.bincount(ids.ravel(), minlength=E)
    assert counts[-1] == 0 and counts[-2] == 0
    if T > 50:  # the routing covers the GEMM and the dot experts
        assert counts.max() >= 8 and ((counts > 0) & (counts < 8)).any()

    got = _mul_mat_id_strided(ctx, as_, bv, ids, n_threads=2)
    for nth in (1, 3):
        assert np.array_equal(_mul_mat_id_strided(ctx, as_, bv, ids, n_threads=nth), got), f"{nth} threads"
    per_expert = _per_expert_mul_mat(ctx, as_, bv, E, n_threads=2)
    tiled = _tile_experts(isa, wtype, counts)
    if tiled.any():
        assert T * Nb >= gg.KTILE_MIN_COLUMNS
        per_expert[tiled] = _per_expert_mul_mat(ctx, as_, bv, E, n_threads=2, tiles=True)[tiled]
    want = np.empty_like(got)
    for t in range(T):
        for e in range(U):
            want[t, e] = per_expert[ids[t, e], t * Nb + e % Nb]
    assert np.array_equal(got, want), "not MUL_MAT's bits"
    # one column through MUL_MAT alone (its dot path), for a few slots
    for t in range(0, T, max(1, T // 4)):
        bt = ctx.new_tensor(gg.F32, [K, 1])
        bt.set(bv[t, 0])
        x = int(ids[t, 0])
        if tiled[x]:
            continue
        one = gg.mul_mat(ctx, gg.view_2d(ctx, as_, K, M, as_.nb[1], x * as_.nb[2]), bt)
        compute(ctx, one, n_threads=1)
        assert np.array_equal(values(one)[0, 0, 0], got[t, 0]), f"token {t} slot 0 vs the GEMV"
    assert_close(got, ref.mul_mat_id(asv[0], bv, ids), 5e-4, what="float64 product")


def test_every_token_on_one_expert_and_big_batch(isa):
    # one expert takes all slots (several column blocks, a tail of 1..3 columns on the dot
    # kernel; at the avx512 level the K-quant tiles)
    K, M, E, U, T = 256, 70, 4, 2, 67
    ctx = gg.Context(mem_size=64 << 20)
    rng = np.random.default_rng(9)
    as_, asv = new(ctx, gg.Q4_K, [K, M, E], rng=rng)
    ids = np.zeros((T, U), dtype=np.int32)
    ids[:, 1] = 3
    bv = rng.uniform(-1, 1, size=(T, 1, K)).astype(np.float32)
    got = _mul_mat_id_strided(ctx, as_, bv, ids, n_threads=2)
    tiles = isa == "avx512"                         # 67 tokens an expert: the K-quant tiles there
    per_expert = _per_expert_mul_mat(ctx, as_, bv, E, n_threads=1, tiles=tiles)
    assert np.array_equal(got[:, 0], per_expert[0]) and np.array_equal(got[:, 1], per_expert[3])
    assert_close(got, ref.mul_mat_id(asv[0], bv, ids), 5e-4)
