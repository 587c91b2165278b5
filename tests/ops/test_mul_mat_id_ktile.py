"""MUL_MAT_ID with K-quant experts at the avx512 level (csrc/cpu/quant_ktile.h): an expert with
at least gg.KTILE_MIN_COLUMNS tokens takes MUL_MAT's K-quant tiles, per expert MUL_MAT's rule.

* against llama.cpp's AVX-512 ggml (its tiled kernel takes MUL_MAT_ID's experts too, through
  bench/ggml_ref.py): the same bits for every token of an expert at or above the threshold,
  for experts of exactly the threshold, one more, and more than one 256-token block, b
  broadcast over the slots or not, 1 and 2 threads (under the threshold ggml tiles experts of
  8 tokens on, we keep the dot path's bits: those are not compared);
* every expert's outputs are bitwise MUL_MAT's on that expert's weights and the expert's
  columns (which also takes the tiles from the threshold on), so an expert one token under the
  threshold keeps the one-column dot bits and an expert at it gets the tiles' bits;
* batch invariance: under the threshold a token's result is the token alone's; at or above,
  it does not depend on how many tokens the expert has, nor on their order or the threads;
* within the peer NMSE of the float64 product.
"""

import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, ggml_ref_avx512_vnni, moe_routing, new, values

TABLE = {row["name"]: row for row in gg.type_traits()}
KQUANTS = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K"]
PEER = 5e-4
TH = gg.KTILE_MIN_COLUMNS

pytestmark = pytest.mark.usefixtures("avx512_level")  # tests/conftest.py


def _mul_mat_id(ctx, as_, bv, ids, n_threads=2):
    """out (T, U, M) for b values bv (T, Nb, K) and ids (T, U)."""
    T, Nb, K = bv.shape
    b = ctx.new_tensor(gg.F32, [K, Nb, T])
    b.set(bv)
    t_ids = ctx.new_tensor(gg.I32, [ids.shape[1], T])
    t_ids.set(ids)
    out = gg.mul_mat_id(ctx, as_, b, t_ids)
    compute(ctx, out, n_threads=n_threads)
    return values(out)[0]


def _setup(name, K, M, counts, U, Nb, seed):
    rng = np.random.default_rng(seed)
    ctx = gg.Context(mem_size=256 << 20)
    as_, asv = new(ctx, TABLE[name]["type"], [K, M, len(counts)], rng=rng)
    ids = moe_routing(counts, U, rng)
    bv = rng.uniform(-2, 2, size=(ids.shape[0], Nb, K)).astype(np.float32)
    return ctx, as_, asv[0], ids, bv


# ---- llama.cpp's bits ----

@pytest.fixture(scope="module")
def ggml():
    return ggml_ref_avx512_vnni()


def _ggml_mul_mat_id(g, name, as_, bv, ids, n_threads):
    raw = np.array(as_.numpy()).view(np.uint8).ravel()
    K, M, E = as_.ne[:3]
    T, Nb, _ = bv.shape
    U = ids.shape[1]
    rc = g.context(raw.size + bv.nbytes + ids.nbytes + M * U * T * 4 + (8 << 20))
    ra = rc.tensor(g.TYPE[name], [K, M, E], raw)
    rb = rc.tensor(g.TYPE["f32"], [K, Nb, T], bv)
    ri = rc.tensor(g.TYPE["i32"], [U, T], ids)
    run = rc.graph(g.ggml_mul_mat_id(rc.ptr, ra, rb, ri), n_threads)
    run()
    out = rc.read_f32(run.out, M * U * T).reshape(T, U, M)
    rc.free()
    return out


ORACLE_CASES = [  # K, M, expert token counts, U, Nb
    (512, 37, [TH, TH + 1, 5, 0, 20], 2, 1),        # the threshold, one over; dot experts beside
    (768, 21, [45, 45, 45, 45, 0, 0], 3, 3),        # a last tile call of 5 columns, b per slot
    (256, 16, [260, 130, 130], 2, 2),               # two 256-token blocks (the second of 4)
]


@pytest.mark.oracle
@pytest.mark.parametrize("name", KQUANTS)
@pytest.mark.parametrize("case", ORACLE_CASES, ids=lambda c: "K{}_M{}_E{}_U{}_Nb{}".format(c[0], c[1], len(c[2]), *c[3:]))
def test_ggml_bits_for_tile_experts(ggml, name, case):
    K, M, counts, U, Nb = case
    ctx, as_, _, ids, bv = _setup(name, K, M, counts, U, Nb, seed=K + M)
    tiled = np.asarray(counts)[ids] >= TH          # (T, U): slots of tile experts
    assert tiled.any()
    for n_threads in (1, 2):
        ours = _mul_mat_id(ctx, as_, bv, ids, n_threads)[tiled]
        theirs = _ggml_mul_mat_id(ggml, name, as_, bv, ids, n_threads)[tiled]
        bad = np.argwhere(ours.view(np.uint32) != theirs.view(np.uint32))
        assert bad.size == 0, (f"{name} {case} threads={n_threads}: {len(bad)} of {ours.size} outputs differ "
                               f"from ggml's, first at {tuple(bad[0])}: {ours[tuple(bad[0])]!r} vs "
                               f"{theirs[tuple(bad[0])]!r}")


# ---- MUL_MAT's rule per expert ----

def _expert_mul_mat(ctx, as_, bv, ids, x, n_threads=2):
    """MUL_MAT of expert x's weights with x's columns gathered (token order): (n, M) and the
    (token, slot) pairs."""
    T, Nb, K = bv.shape
    pairs = [(t, e) for t in range(T) for e in range(ids.shape[1]) if ids[t, e] == x]
    b = ctx.new_tensor(gg.F32, [K, len(pairs)])
    b.set(np.stack([bv[t, e % Nb] for t, e in pairs]))
    w = gg.view_2d(ctx, as_, K, as_.ne[1], as_.nb[1], x * as_.nb[2])
    out = gg.mul_mat(ctx, w, b)
    compute(ctx, out, n_threads=n_threads)
    return values(out)[0, 0], pairs


@pytest.mark.parametrize("name", KQUANTS)
@pytest.mark.parametrize("Nb", [1, 2])
def test_each_expert_is_bitwise_mul_mat(name, Nb):
    """Experts of TH - 1 (the dot bits), TH and TH + 9 tokens (the tiles), 3 and none; the
    expert offset of the weights and the slot scatter of the outputs."""
    K, M = 512, 35
    counts = [TH - 1, TH, 3, TH + 9, 0]
    counts.append(TH + 9 + (sum(counts) + TH + 9) % 2)   # an even total: T tokens of 2 slots
    ctx, as_, asv, ids, bv = _setup(name, K, M, counts, 2, Nb, seed=Nb)
    got = _mul_mat_id(ctx, as_, bv, ids)
    for x in range(len(counts)):
        if counts[x] == 0:
            continue
        want, pairs = _expert_mul_mat(ctx, as_, bv, ids, x)
        mine = np.stack([got[t, e] for t, e in pairs])
        assert np.array_equal(mine.view(np.uint32), want.view(np.uint32)), f"{name} expert {x} ({counts[x]} tokens)"
    assert_close(got, ref.mul_mat_id(asv, bv, ids), PEER, what=name)


@pytest.mark.parametrize("name", KQUANTS)
def test_batch_invariance_around_the_threshold(name):
    """A token's outputs do not depend on the batch: under the threshold they are the token
    alone's (one-column dots); at and over it the same whatever the expert's token count, the
    order of the tokens and the threads, and not the one-column bits (the tiles ran)."""
    K, M, U, Nb = 512, 19, 2, 1
    rng = np.random.default_rng(21)
    ctx = gg.Context(mem_size=256 << 20)
    as_, asv = new(ctx, TABLE[name]["type"], [K, M, 3], rng=rng)
    T = 2 * TH + 5
    bv = rng.uniform(-2, 2, size=(T, Nb, K)).astype(np.float32)
    ids = np.zeros((T, U), dtype=np.int32)
    ids[:, 1] = 2                                   # expert 2 takes every token
    ids[TH - 1:, 0] = 1                             # expert 0: the first TH - 1 tokens
    alone = np.stack([_mul_mat_id(ctx, as_, bv[t:t + 1], ids[t:t + 1])[0] for t in range(T)])
    for width in (TH - 1, TH, TH + 1, T):
        sub = _mul_mat_id(ctx, as_, bv[:width], ids[:width])
        # expert 0 (TH - 1 tokens at most): the token alone's bits
        assert np.array_equal(sub[:, 0][ids[:width, 0] == 0], alone[:width, 0][ids[:width, 0] == 0]), width
        if width < TH:
            assert np.array_equal(sub, alone[:width]), f"{name}: {width} tokens, under the threshold"
    wide = _mul_mat_id(ctx, as_, bv, ids)
    at = _mul_mat_id(ctx, as_, bv[:TH], ids[:TH], n_threads=1)
    assert np.array_equal(at[:, 1], wide[:TH, 1]), f"{name}: expert 2 at the threshold vs with {T} tokens"
    assert not np.array_equal(at[:, 1], alone[:TH, 1]), f"{name}: the tiles did not run"
    order = rng.permutation(T)
    assert np.array_equal(_mul_mat_id(ctx, as_, bv[order], ids[order], n_threads=1), wide[order]), name
    assert_close(wide, ref.mul_mat_id(asv[0], bv, ids), PEER, what=name)


def test_wide_k_and_rows_past_the_panels():
    """K of 16 super-blocks (panel records past one page), M not a multiple of 16, q4_K and
    q6_K in one graph: the float64 product and MUL_MAT per expert."""
    K, M = 4096, 50
    for name in ("q4_K", "q6_K"):
        ctx, as_, asv, ids, bv = _setup(name, K, M, [40, 0, 40, 34, 6], 2, 1, seed=3)
        got = _mul_mat_id(ctx, as_, bv, ids)
        assert_close(got, ref.mul_mat_id(asv, bv, ids), PEER, what=name)
        want, pairs = _expert_mul_mat(ctx, as_, bv, ids, 3)
        assert np.array_equal(np.stack([got[t, e] for t, e in pairs]), want), name


@pytest.mark.parametrize("btype", ["f16", "bf16"])
def test_half_precision_activations(btype):
    """b in f16 / bf16 (widened, then quantized as the dot path does): a tile expert's outputs
    are MUL_MAT's on the same half-precision columns, and near the float64 product."""
    K, M, counts, U = 512, 24, [TH + 6, 10, TH + 6, 0], 2
    ctx, as_, asv, ids, bv = _setup("q4_K", K, M, counts, U, 1, seed=8)
    gtype = {"f16": gg.F16, "bf16": gg.BF16}[btype]
    T = ids.shape[0]
    b, bh = new(ctx, gtype, [K, 1, T], data=bv)
    t_ids = ctx.new_tensor(gg.I32, [U, T])
    t_ids.set(ids)
    out = gg.mul_mat_id(ctx, as_, b, t_ids)
    pairs = [(t, e) for t in range(T) for e in range(U) if ids[t, e] == 2]
    cols, _ = new(ctx, gtype, [K, len(pairs)], data=np.stack([bv[t, 0] for t, _ in pairs]))
    ref_out = gg.mul_mat(ctx, gg.view_2d(ctx, as_, K, M, as_.nb[1], 2 * as_.nb[2]), cols)
    compute(ctx, out, ref_out)
    got = values(out)[0]
    assert np.array_equal(np.stack([got[t, e] for t, e in pairs]), values(ref_out)[0, 0]), btype
    assert_close(got, ref.mul_mat_id(asv, bh[0], ids), PEER, what=btype)


def test_experts_bigger_than_l2():
    """An expert of more than 1 MiB (its panels prefetch the next ones, streamed weights) and M
    not a multiple of 16: the float64 product, and each row's bits are MUL_MAT's on a few rows of
    the expert (a matrix small enough to stay in L2)."""
    K, M, name = 4096, 470, "q4_K"
    ctx, as_, asv, ids, bv = _setup(name, K, M, [TH + 3, TH + 3], 2, 1, seed=31)
    assert M * as_.nb[1] > 1 << 20
    got = _mul_mat_id(ctx, as_, bv, ids)
    assert_close(got, ref.mul_mat_id(asv, bv, ids), PEER, what=name)
    for x, m0 in ((0, 448), (1, 0)):
        pairs = [(t, e) for t in range(ids.shape[0]) for e in range(2) if ids[t, e] == x]
        b = ctx.new_tensor(gg.F32, [K, len(pairs)])
        b.set(np.stack([bv[t, 0] for t, _ in pairs]))
        rows = gg.view_2d(ctx, as_, K, M - m0 if m0 else 48, as_.nb[1], x * as_.nb[2] + m0 * as_.nb[1])
        out = gg.mul_mat(ctx, rows, b)
        compute(ctx, out)
        mine = np.stack([got[t, e, m0:m0 + rows.ne[1]] for t, e in pairs])
        assert np.array_equal(mine, values(out)[0, 0]), f"expert {x} rows from {m0}"
