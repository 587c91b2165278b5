"""The dsv4 memory's per-ubatch compressor plan (built in C++) against a position-by-position
reference: every index list of every ratio, for ubatches of 1..300 tokens at block-aligned
and unaligned starts, several sequences, with and without snapshot planes and a pending
rollback."""
import numpy as np
import pytest

import pyggml as gg
from pyggml import _core
from pyggml.llm.inputs import UBatch
from pyggml.llm.kv_cache_dsv4 import CSA_RATIO, HCA_RATIO, CompCache, build_comp_plan


def reference_plan(cache, pos, s, overlap, rs):
    """Each list written out position by position (how the plan is defined)."""
    r, S, T = cache.ratio, cache.S, len(pos)
    p_start, p_end = pos[0], pos[-1]
    scratch, syn = cache.rows_state, cache.rows_state + T

    def src(p):
        if p < 0:
            return syn
        if p >= p_start:
            return scratch + p - p_start
        return cache.row(0, s, p % S)

    prev, cur, w_idx, w_pos = [], [], [], []
    for p in pos:
        if (p + 1) % r == 0:
            b = p + 1 - r
            w_idx.append(s * cache.size + p // r)
            w_pos.append(b)
            prev += [src(b - r + j) for j in range(r)]
            cur += [src(b + j) for j in range(r)]
    if w_idx:
        while len(w_idx) < -(-T // r):
            w_idx.append(s * cache.size + cache.size - 1)
            w_pos.append(0)
            prev += [scratch] * r
            cur += [scratch] * r
    last = {}
    for i, p in enumerate(pos):
        last[p % S] = i
    slots = sorted(last)
    snap_src, snap_dst = [], []
    for d in range(1, cache.n_rs + 1):
        for q in range(S):
            snap_dst.append(cache.row(d, s, q))
            if d < T:
                top = p_end - d
                p_q = top - ((top - q) % S)
                snap_src.append(cache.rows_all + p_q - p_start if p_q >= p_start else cache.row(0, s, q))
            else:
                plane = rs + d - T
                snap_src.append(cache.row(plane if plane <= cache.n_rs else 0, s, q))
    restore = [cache.row(rs, s, q) for q in range(S)] if rs else []
    return dict(state_pos=[p % r for p in pos], read_idxs=(prev if overlap else []) + cur,
                write_idxs=w_idx, write_pos=w_pos, persist_src=[last[k] for k in slots],
                persist_dst=[cache.row(0, s, k) for k in slots], restore_src=restore,
                restore_dst=[cache.row(0, s, q) for q in range(S)] if rs else [],
                snap_src=snap_src, snap_dst=snap_dst, n_visible=[(p + 1) // r for p in pos])


@pytest.mark.parametrize("ratio", [CSA_RATIO, HCA_RATIO])
@pytest.mark.parametrize("n_rs", [0, 3])
def test_plan_matches_the_position_by_position_reference(ratio, n_rs):
    cache = CompCache(name="t", layers=[0], ratio=ratio, width=8, state_width=16, n_ctx=2048,
                      n_seq_max=3, type_k=gg.F32, n_rs=n_rs)
    rng = np.random.default_rng(ratio + n_rs)
    starts = [0, 1, 3, 4, 127, 128, 130, 511] + rng.integers(0, 1500, 6).tolist()
    n_checked = 0
    for p0 in starts:
        for T in (1, 2, 3, 4, 5, 37, 128, 129, 300):
            s = int(rng.integers(0, 3))
            rs = int(rng.integers(0, n_rs + 1)) if n_rs else 0
            pos = list(range(p0, p0 + T))
            ub = UBatch(pos=np.array(pos, np.int32), seq_id=np.full(T, s, np.int32),
                        output=np.ones(T, bool))
            got = build_comp_plan(cache, ub, overlap=ratio == CSA_RATIO, rs=rs)
            ref = reference_plan(cache, pos, s, ratio == CSA_RATIO, rs)
            for name, want in ref.items():
                have = getattr(got, name)
                assert have.tolist() == list(want), (name, p0, T, s, rs)
            for name in ("read_idxs", "state_pos", "write_pos", "persist_src", "restore_src", "snap_src"):
                assert getattr(got, name).dtype == np.int32, name
            for name in ("write_idxs", "persist_dst", "restore_dst", "snap_dst"):
                assert getattr(got, name).dtype == np.int64, name
            n_checked += 1
    assert n_checked == len(starts) * 9


def test_a_ubatch_of_two_sequences_or_a_gap_is_refused():
    cache = CompCache(name="t", layers=[0], ratio=4, width=8, state_width=16, n_ctx=64,
                      n_seq_max=2, type_k=gg.F32, n_rs=0)
    for pos, seq in (([0, 1, 2], [0, 0, 1]), ([0, 2, 3], [0, 0, 0])):
        ub = UBatch(pos=np.array(pos, np.int32), seq_id=np.array(seq, np.int32), output=np.ones(3, bool))
        with pytest.raises(ValueError, match="consecutive positions of one sequence"):
            build_comp_plan(cache, ub, overlap=True, rs=0)


@pytest.mark.parametrize("type", [gg.F16, gg.F32])
def test_comp_mask_shows_the_completed_blocks_of_each_token(type):
    ctx = gg.Context(1 << 20)
    pos = np.array([0, 2, 3, 4, 7, 8, 1030, 2000], np.int32)   # 2000 // 4 > n_kv: all visible
    for ratio in (4, 128):
        t = ctx.new_tensor(type, [300, len(pos), 1, 1])
        t.numpy()[...] = 7                                          # every value is rewritten
        _core.dsv4_fill_comp_mask(t, pos, ratio)
        want = np.where(np.arange(300)[None, :] < ((pos + 1) // ratio)[:, None], 0.0, -np.inf)
        assert np.array_equal(np.asarray(t.numpy(), np.float64).reshape(len(pos), 300), want)
    with pytest.raises(ValueError, match="one entry per mask row"):
        _core.dsv4_fill_comp_mask(t, pos[:3], 4)
    with pytest.raises(TypeError, match="dst"):
        _core.dsv4_fill_comp_mask(np.zeros(4), pos, 4)


def test_plan_arguments_are_checked():
    pos, seq = np.array([5, 6], np.int32), np.zeros(2, np.int32)
    with pytest.raises(ValueError, match="rs=2 is outside"):
        _core.dsv4_comp_plan(pos, seq, 4, 8, 256, 8, 8, 1, 1, True, 2)
    with pytest.raises(ValueError, match="seq_id 3 is outside"):
        _core.dsv4_comp_plan(pos, seq + 3, 4, 8, 256, 8, 8, 1, 0, True, 0)
    with pytest.raises(ValueError, match="non-zero length"):
        _core.dsv4_comp_plan(pos[:0], seq[:0], 4, 8, 256, 8, 8, 1, 0, True, 0)
