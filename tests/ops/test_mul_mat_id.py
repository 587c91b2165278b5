"""MUL_MAT_ID's expert grouping: every token's rows are bitwise what the op gives for that
token alone (or in any other batch), whatever the batch puts on each expert and whatever
the thread count, and they match the numpy product. Odd sizes, a token that picks the same
expert twice, experts no token picks, an expert with more than one column block of tokens,
b broadcast over the slots (Nb = 1), every kernel set. (At the avx512 level an expert with at
least gg.KTILE_MIN_COLUMNS K-quant tokens takes the K-quant tiles, whose bits are not the token
alone's: test_mul_mat_id_ktile.py covers those; here such slots are left out of the token-alone
check only.)"""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

WTYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16, "q8_0": gg.Q8_0, "q4_0": gg.Q4_0,
          "q4_1": gg.Q4_1, "q5_0": gg.Q5_0, "q4_K": gg.Q4_K, "q6_K": gg.Q6_K, "nvfp4": gg.NVFP4,
          "mxfp4": gg.MXFP4, "iq4_nl": gg.IQ4_NL}
EMULATED = ("f32", "f16", "bf16", "q8_0", "q4_0", "nvfp4")   # activations as the reference converts them
KTILE = {row["name"]: bool(row["mul_mat_paths"].get("ktile")) for row in gg.type_traits()}


@pytest.fixture(params=["scalar", "avx2", "avx512"])
def isa(request):
    previous = gg.set_isa(request.param)
    yield request.param
    gg.set_isa(previous)


def _weights(wtype, K, M, E, seed):
    ctx = gg.Context(mem_size=64 << 20)
    rng = np.random.default_rng(seed)
    as_, asv = new(ctx, WTYPES[wtype], [K, M, E], rng=rng)
    return ctx, as_, asv[0]


def _mul_mat_id(ctx, as_, bv, ids, n_threads):
    """out (T, U, M) of the op on activations bv (T, Nb, K) and ids (T, U)."""
    T, Nb, K = bv.shape
    b = ctx.new_tensor(gg.F32, [K, Nb, T])
    b.set(bv.astype(np.float32))
    t_ids = ctx.new_tensor(gg.I32, [ids.shape[1], T])
    t_ids.set(ids.astype(np.int32))
    out = gg.mul_mat_id(ctx, as_, b, t_ids)
    compute(ctx, out, n_threads=n_threads)
    return values(out)[0]


def _ids(rng, T, U, E, unused):
    """Experts per token from the used ones only, a repeat inside some tokens."""
    used = [e for e in range(E) if e not in unused]
    ids = np.stack([rng.choice(used, U, replace=False) for _ in range(T)]).astype(np.int32)
    ids[::3, -1] = ids[::3, 0]          # the same expert twice in one token
    return ids


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("Nb", [1, 3])
def test_each_token_equals_the_token_alone(isa, wtype, Nb):
    K = 256 if wtype in ("q4_K", "q6_K") else 192
    M, E, U, T = 37, 7, 3, 75           # expert 0 gets > 64 tokens: two column blocks
    ctx, as_, asv = _weights(wtype, K, M, E, seed=Nb)
    rng = np.random.default_rng(Nb + 10)
    ids = _ids(rng, T, U, E, unused={2, 5})
    ids[:, 0] = 0
    bv = rng.uniform(-1, 1, size=(T, Nb, K)).astype(np.float32)
    full = _mul_mat_id(ctx, as_, bv, ids, n_threads=2)
    assert np.array_equal(full, _mul_mat_id(ctx, as_, bv, ids, n_threads=1)), "thread count"
    order = rng.permutation(T)          # the same tokens, grouped and ordered differently
    shuffled = _mul_mat_id(ctx, as_, bv[order], ids[order], n_threads=2)
    assert np.array_equal(shuffled, full[order]), "another batch order"
    counts = np.bincount(ids.ravel(), minlength=E)
    tiled = (counts[ids] >= gg.KTILE_MIN_COLUMNS) & (isa == "avx512" and KTILE[wtype])
    for t in range(0, T, 7):
        alone = _mul_mat_id(ctx, as_, bv[t:t + 1], ids[t:t + 1], n_threads=2)
        assert np.array_equal(alone[0][~tiled[t]], full[t][~tiled[t]]), f"token {t} alone"
    want = ref.mul_mat_id(asv, bv, ids)
    assert_close(full, want, 5e-4, what="exact")
    if wtype in EMULATED:
        assert_close(full, ref.mul_mat_id(asv, ref.act_like_cpu(bv, wtype), ids), 1e-9,
                     what="cpu-emulation")


def test_unused_experts_leave_no_trace_and_odd_rows():
    # an expert whose weights are NaN is never read when no token picks it
    K, M, E, U, T = 64, 9, 5, 2, 11
    ctx = gg.Context(mem_size=16 << 20)
    rng = np.random.default_rng(3)
    w = rng.uniform(-1, 1, size=(E, M, K)).astype(np.float32)
    w[4] = np.nan
    as_, asv = new(ctx, gg.F32, [K, M, E], data=w)
    ids = np.stack([rng.choice(4, U, replace=False) for _ in range(T)]).astype(np.int32)
    bv = rng.uniform(-1, 1, size=(T, 1, K)).astype(np.float32)
    got = _mul_mat_id(ctx, as_, bv, ids, n_threads=2)
    assert np.isfinite(got).all()
    assert_close(got, ref.mul_mat_id(asv[0], bv, ids), 1e-9)


@pytest.mark.parametrize("wtype", ["mxfp4", "iq4_nl", "nvfp4", "q4_0", "q8_0"])
def test_decode_rows_longer_than_the_two_row_bar(isa, wtype):
    # one token (every expert one column) with rows past the short-row bar takes MUL_MAT's
    # one-column kernels (the ones with activation extras where the type has them; an odd
    # row count leaves a row to the one-row kernel): bitwise each expert's mul_mat of the
    # token, and the token's rows in a batch where its experts have several columns
    K, M, E, U, T = 1536, 45, 6, 3, 5
    ctx, as_, asv = _weights(wtype, K, M, E, seed=11)
    rng = np.random.default_rng(12)
    ids = np.stack([rng.choice(E, U, replace=False) for _ in range(T)]).astype(np.int32)
    bv = rng.uniform(-1, 1, size=(T, 1, K)).astype(np.float32)
    batch = _mul_mat_id(ctx, as_, bv, ids, n_threads=2)
    for t in range(T):
        alone = _mul_mat_id(ctx, as_, bv[t:t + 1], ids[t:t + 1], n_threads=2)
        assert np.array_equal(alone[0], batch[t]), f"token {t}"
        b = ctx.new_tensor(gg.F32, [K, 1])
        b.set(bv[t].astype(np.float32))
        for e, x in enumerate(ids[t]):
            a = gg.view_2d(ctx, as_, K, M, as_.nb[1], int(x) * as_.nb[2])
            mm = gg.mul_mat(ctx, a, b)
            compute(ctx, mm, n_threads=1)
            assert np.array_equal(values(mm)[0, 0, 0], alone[0, e]), f"token {t}, expert {x}"
    assert_close(batch, ref.mul_mat_id(asv, bv, ids), 5e-4)
