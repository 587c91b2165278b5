"""The per-token host path: the KQ mask and slot search filled in C++ against the numpy rule,
the incremental cell counts against a recount, and greedy sampling in the graph against
np.argmax."""
import numpy as np
import pytest

import pyggml as gg
from llama_ref import ArrayModel, make_hparams, make_weights

from pyggml.llm.context import Context
from pyggml.llm.inputs import UBatch
from pyggml.llm.kv_cache import (SWA_CHUNKED, SWA_NONE, SWA_STANDARD, SWA_SYMMETRIC, KVCache,
                                 is_masked_swa)

SWA_TYPES = [(SWA_NONE, 0), (SWA_STANDARD, 5), (SWA_CHUNKED, 4), (SWA_SYMMETRIC, 6),
             (SWA_STANDARD, 1)]


def numpy_mask(pos, seq, q_pos, q_seq, n_kv, causal, swa_type, n_swa):
    """The mask rule in numpy (the fill the C++ helper replaced)."""
    pk = pos[:n_kv][None, :]
    pq = np.asarray(q_pos, np.int64)[:, None]
    ok = (pk >= 0) & seq[:n_kv][:, q_seq].T
    if causal:
        ok &= pk <= pq
    if swa_type != SWA_NONE:
        ok &= ~is_masked_swa(n_swa, swa_type, pk, pq)
    return np.where(ok, np.float32(0), np.float32(-np.inf))


def random_table(rng, n_cells, n_seq, fill=0.7):
    pos = np.where(rng.random(n_cells) < fill, rng.integers(0, 3 * n_cells, n_cells), -1)
    seq = (rng.random((n_cells, n_seq)) < 0.5) & (pos >= 0)[:, None]
    pos = np.where(seq.any(axis=1), pos, -1).astype(np.int64)   # a used cell has a sequence
    return pos, seq


@pytest.mark.parametrize("swa_type,n_swa", SWA_TYPES)
@pytest.mark.parametrize("dtype", [gg.F16, gg.F32], ids=["f16", "f32"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
def test_cpp_mask_equals_the_numpy_fill(swa_type, n_swa, dtype, causal):
    rng = np.random.default_rng(7 + swa_type + 3 * n_swa)
    ctx = gg.Context(1 << 22)
    for n_cells, n_kv, T, n_seq in ((37, 37, 1, 1), (300, 259, 7, 3), (517, 512, 13, 5)):
        pos, seq = random_table(rng, n_cells, n_seq)
        q_pos = rng.integers(-2, 3 * n_cells, T).astype(np.int32)
        q_seq = rng.integers(0, n_seq, T).astype(np.int32)
        q_pos[0] = -5                           # before every cell: an all-masked causal row
        if n_seq > 1:
            seq[:, n_seq - 1] = False           # a sequence with no cells: all-masked rows
            q_seq[-1] = n_seq - 1
        dst = ctx.new_tensor(dtype, [n_kv, T, 1, 1])
        dst.numpy()[...] = 7                    # every element must be written
        gg._core.llm_fill_kq_mask(dst, pos, seq, q_pos, q_seq, causal, swa_type, n_swa)
        ref = numpy_mask(pos, seq, q_pos, q_seq, n_kv, causal, swa_type, n_swa)
        got = dst.numpy().astype(np.float32).reshape(T, n_kv)
        np.testing.assert_array_equal(got, ref, err_msg=f"cells={n_cells} T={T} seqs={n_seq}")
        if causal:
            assert np.all(got[0] == -np.inf)
        if n_seq > 1:
            assert np.all(got[-1] == -np.inf)


def test_cache_fill_matches_kq_mask_after_real_decoding_steps():
    kv = KVCache(n_layer=1, n_embd_k_gqa=8, n_embd_v_gqa=8, head_dim_k=4, head_dim_v=4,
                 n_head_kv=2, size=300, n_seq_max=3, n_swa=7, swa_type=SWA_STANDARD)
    ctx = gg.Context(1 << 20)
    nxt = [0, 0, 0]
    rng = np.random.default_rng(3)
    for step in range(40):
        s = int(rng.integers(0, 3))
        n = int(rng.integers(1, 6))
        ub = UBatch(pos=np.arange(nxt[s], nxt[s] + n, dtype=np.int32),
                    seq_id=np.full(n, s, np.int32), output=np.ones(n, bool))
        mctx, = kv.init_batch([ub])
        mctx.apply()
        nxt[s] += n
        dst = ctx.new_tensor(gg.F16, [mctx.n_kv, n, 1, 1])
        mctx.set_input_kq_mask(dst, ub)
        np.testing.assert_array_equal(dst.numpy().astype(np.float32).reshape(n, -1),
                                      kv.kq_mask(ub, mctx.n_kv), err_msg=f"step {step}")


def test_mask_fill_refuses_bad_arguments():
    ctx = gg.Context(1 << 16)
    pos, seq = np.full(8, -1, np.int64), np.zeros((8, 2), bool)
    q = np.zeros(1, np.int32)
    with pytest.raises(ValueError, match="cells wide"):
        gg._core.llm_fill_kq_mask(ctx.new_tensor(gg.F16, [9, 1]), pos, seq, q, q)
    with pytest.raises(ValueError, match="q_seq"):
        gg._core.llm_fill_kq_mask(ctx.new_tensor(gg.F16, [8, 1]), pos, seq, q, q + 2)
    with pytest.raises(TypeError, match="f16 or f32"):
        gg._core.llm_fill_kq_mask(ctx.new_tensor(gg.I32, [8, 1]), pos, seq, q, q)
    with pytest.raises(ValueError, match="one entry per mask row"):
        gg._core.llm_fill_kq_mask(ctx.new_tensor(gg.F32, [8, 2]), pos, seq, q, q)
    with pytest.raises(ValueError, match="swa_type"):
        gg._core.llm_fill_kq_mask(ctx.new_tensor(gg.F32, [8, 1]), pos, seq, q, q, True, 9, 1)


def numpy_slot(pos, seq, head, n, swa_type, n_swa, seq_next):
    """The slot rule in numpy: usable cells scanned from head with wrap-around."""
    ok = pos < 0
    if swa_type != SWA_NONE and n_swa > 0:
        one = seq.sum(axis=1) == 1
        owner = np.argmax(seq, axis=1)
        ok |= one & is_masked_swa(n_swa, swa_type, pos, seq_next[owner])
    free = np.flatnonzero(ok)
    if len(free) < n:
        return None
    return np.concatenate([free[free >= head], free[free < head]])[:n]


@pytest.mark.parametrize("swa_type,n_swa", SWA_TYPES)
def test_cpp_slot_search_equals_the_numpy_scan(swa_type, n_swa):
    rng = np.random.default_rng(11 + swa_type)
    for n_cells, n_seq, fill in ((1, 1, 0.0), (41, 2, 0.8), (333, 4, 0.95), (64, 3, 1.0)):
        pos, seq = random_table(rng, n_cells, n_seq, fill)
        seq_next = np.array([pos[seq[:, s]].max() + 1 if seq[:, s].any() else 0
                             for s in range(n_seq)], np.int64) + int(rng.integers(0, 9))
        for head in (0, n_cells // 2, n_cells - 1):
            for n in (1, 3, n_cells):
                ref = numpy_slot(pos, seq, head, n, swa_type, n_swa, seq_next)
                got = gg._core.llm_kv_find_slot(pos, seq, head, n, swa_type, n_swa, seq_next)
                if ref is None:
                    assert got is None
                else:
                    np.testing.assert_array_equal(got, ref)


def numpy_seq_rm(pos, seq, shift, s, p0, p1):
    """The removal rule in numpy (the pass the C++ helper replaced): clear s's flag (every
    flag for s < 0) on its cells in [p0, p1), free the cells left without a sequence;
    returns the lowest freed cell or -1."""
    p0 = 0 if p0 < 0 else p0
    p1 = np.iinfo(np.int64).max if p1 < 0 else p1
    sel = (pos >= p0) & (pos < p1)
    if s < 0:
        sel &= pos >= 0
        seq[sel] = False
    else:
        sel &= seq[:, s]
        seq[sel, s] = False
    dead = sel & ~seq.any(axis=1)
    pos[dead], shift[dead] = -1, 0
    return int(np.flatnonzero(dead)[0]) if dead.any() else -1


def test_cpp_seq_rm_equals_the_numpy_removal():
    rng = np.random.default_rng(17)
    for n_cells, n_seq, fill in ((1, 1, 1.0), (41, 2, 0.8), (333, 4, 0.95), (64, 3, 1.0),
                                 (512, 1, 0.6)):
        for _ in range(20):
            pos, seq = random_table(rng, n_cells, n_seq, fill)
            shift = rng.integers(-3, 4, n_cells) * (pos >= 0)
            s = int(rng.integers(-1, n_seq))
            p0, p1 = int(rng.integers(-1, 3 * n_cells)), int(rng.integers(-1, 3 * n_cells))
            ref = [a.copy() for a in (pos, seq, shift)]
            want = numpy_seq_rm(*ref, s, p0, p1)
            assert gg._core.llm_kv_seq_rm(pos, seq, shift, s, p0, p1) == want
            for got, exp in zip((pos, seq, shift), ref):
                np.testing.assert_array_equal(got, exp)


def test_seq_rm_refuses_tables_it_cannot_write_in_place():
    pos, seq, shift = np.full(8, -1, np.int64), np.zeros((8, 2), bool), np.zeros(8, np.int64)
    with pytest.raises(ValueError, match="cell table"):
        gg._core.llm_kv_seq_rm(pos.astype(np.int32), seq, shift, 0, 0, -1)
    with pytest.raises(ValueError, match="cell table"):
        gg._core.llm_kv_seq_rm(pos, seq[:4], shift, 0, 0, -1)
    with pytest.raises(ValueError, match="cell table"):
        gg._core.llm_kv_seq_rm(pos, np.asfortranarray(np.zeros((8, 2), bool)), shift, 0, 0, -1)
    with pytest.raises(ValueError, match="seq out of range"):
        gg._core.llm_kv_seq_rm(pos, seq, shift, 2, 0, -1)


def recount(kv):
    c = kv.cells
    used = np.flatnonzero(c.pos >= 0)
    seq_max = [int(c.pos[c.seq[:, s]].max()) if c.seq[:, s].any() else -1
               for s in range(c.seq.shape[1])]
    return len(used), (int(used[-1]) + 1 if len(used) else 0), seq_max


def test_incremental_cell_counts_equal_a_recount_through_sequence_operations():
    rng = np.random.default_rng(5)
    kv = KVCache(n_layer=1, n_embd_k_gqa=8, n_embd_v_gqa=8, head_dim_k=4, head_dim_v=4,
                 n_head_kv=2, size=97, n_seq_max=3, n_swa=9, swa_type=SWA_STANDARD)
    nxt = [0, 0, 0]
    for step in range(200):
        op = rng.integers(0, 10)
        s = int(rng.integers(0, 3))
        if op < 6:
            n = int(rng.integers(1, 8))
            ubs = [UBatch(pos=np.arange(nxt[s] + i * n, nxt[s] + (i + 1) * n, dtype=np.int32),
                          seq_id=np.full(n, s, np.int32), output=np.ones(n, bool))
                   for i in range(int(rng.integers(1, 3)))]
            plans = kv.init_batch(ubs)
            if plans is not None:
                for p in plans:
                    p.apply()
                nxt[s] += n * len(ubs)
        elif op == 6:
            p0 = int(rng.integers(0, max(nxt[s], 1)))
            kv.seq_rm(s, p0, -1)
            nxt[s] = min(nxt[s], p0) if kv.seq_pos_max(s) < 0 else kv.seq_pos_max(s) + 1
        elif op == 7:
            kv.seq_cp(s, (s + 1) % 3)
            nxt[(s + 1) % 3] = kv.seq_pos_max((s + 1) % 3) + 1
        elif op == 8:
            kv.seq_add(s, 0, -1, int(rng.integers(-3, 4)))
            nxt[s] = kv.seq_pos_max(s) + 1
        else:
            kv.seq_keep(s)
            nxt = [kv.seq_pos_max(i) + 1 for i in range(3)]
        used, max_p1, seq_max = recount(kv)
        assert kv.cells.used() == used and kv.cells.used_max_p1() == max_p1, f"step {step}"
        assert [kv.seq_pos_max(i) for i in range(3)] == seq_max, f"step {step}"


def tiny_context(**kw):
    hp = make_hparams(n_vocab=97)
    return Context(ArrayModel(hp, make_weights(hp, seed=4)), n_ctx=64, **kw), hp


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
def test_decode_greedy_equals_argmax_of_the_logits(flash_attn):
    ctx, _ = tiny_context(flash_attn=flash_attn)
    ref, _ = tiny_context(flash_attn=flash_attn)
    toks = [3, 14, 15, 92, 65]
    tok = ctx.decode_greedy(toks)
    lg = ref.decode(toks)
    for step in range(12):
        assert tok == int(np.argmax(lg[-1])), f"step {step}"
        # the row is still there, copied on demand, and equals the plain decode's
        np.testing.assert_array_equal(ctx.logits, lg)
        tok, lg = ctx.decode_greedy([tok]), ref.decode([tok])
    # generate defaults to the in-graph greedy path; a host argmax sampler gives the same ids
    a, b = tiny_context(flash_attn=flash_attn)[0], tiny_context(flash_attn=flash_attn)[0]
    assert a.generate(toks, 10) == b.generate(toks, 10, sampler=lambda row: int(np.argmax(row)))


def test_top_k_1_is_argmax_on_ties_nan_and_inf():
    rows = [np.array([1, 5, 5, 2], np.float32), np.array([-np.inf] * 5, np.float32),
            np.array([0, np.nan, 3, np.nan], np.float32), np.array([np.nan, 1], np.float32),
            np.array([-0.0, 0.0, -1], np.float32), np.array([2], np.float32),
            np.array([-3, np.inf, np.inf, 7], np.float32)]
    rng = np.random.default_rng(2)
    big = rng.integers(-4, 4, (5, 49157)).astype(np.float32)   # many ties, odd length
    for r in rows:
        ctx = gg.Context(1 << 20)
        t = gg.top_k(ctx, ctx.from_numpy(r.reshape(1, -1)), 1)
        g = gg.Graph(ctx)
        g.build_forward_expand(t)
        g.compute(1)
        assert int(t.numpy().ravel()[0]) == int(np.argmax(r)), r
    ctx = gg.Context(1 << 22)
    t = gg.top_k(ctx, ctx.from_numpy(big), 1)
    g = gg.Graph(ctx)
    g.build_forward_expand(t)
    g.compute(2)
    np.testing.assert_array_equal(t.numpy().ravel(), np.argmax(big, axis=1))
