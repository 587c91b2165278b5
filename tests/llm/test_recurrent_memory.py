"""Host-side contract of the recurrent and hybrid memories: ubatch splitting that keeps the
trailing n_rs_seq + 1 tokens together, seq_rm within / outside the snapshot window, the
single-use rollback index consumed by the next ubatch's s_copy, whole-sequence copies."""
import numpy as np
import pytest

from pyggml.llm.inputs import UBatch, split_sizes
from pyggml.llm.kv_cache import KVCache
from pyggml.llm.memory_hybrid import HybridMemory
from pyggml.llm.memory_recurrent import RecurrentMemory


@pytest.mark.parametrize("n,n_ubatch,tail", [(45, 7, 4), (45, 37, 4), (10, 7, 4), (8, 7, 4),
                                              (64, 16, 5), (3, 16, 4), (45, 1, 0), (100, 9, 8)])
def test_split_keeps_the_tail_in_one_ubatch(n, n_ubatch, tail):
    sizes = split_sizes(n, n_ubatch, tail)
    assert sum(sizes) == n and all(0 < s <= n_ubatch for s in sizes)
    if tail:
        assert sizes[-1] >= min(tail, n)
    if not tail:
        assert sizes == [n_ubatch] * (n // n_ubatch) + ([n % n_ubatch] if n % n_ubatch else [])


def test_split_refuses_a_ubatch_no_longer_than_the_tail():
    with pytest.raises(ValueError, match="n_ubatch=4 must exceed"):
        split_sizes(10, 4, 4)


def ub(p0, n, seq=0):
    return UBatch.from_tokens(np.arange(n) % 7, pos0=p0, seq_id=seq)


def decode(mem, p0, n, seq=0):
    (ctx,) = mem.init_batch([ub(p0, n, seq)])
    ctx.apply()
    return ctx


def make(n_rs=3, n_seq=2):
    return RecurrentMemory(layers=[0, 2], n_embd_r=6, n_embd_s=10, n_seq_max=n_seq, n_rs_seq=n_rs)


def test_state_tables_hold_one_plane_per_snapshot():
    m = make(n_rs=3, n_seq=2)
    assert m.r_l[2].ne[:2] == [6, 8] and m.s_l[0].ne[:2] == [10, 8]
    assert m.has_layer(2) and not m.has_layer(1)


def test_rollback_index_is_single_use_and_read_from_its_plane():
    m = make()
    first = decode(m, 0, 10)
    assert first.rs_zero == m.row(0, 0) and first.s_copy().tolist() == [0]
    assert m.seq_rm(0, 8, -1) and m.seq_pos_max(0) == 7
    nxt, = m.init_batch([ub(8, 2)])
    assert nxt.rs_zero == -1 and nxt.s_copy().tolist() == [m.row(2, 0)]
    nxt.apply()
    assert m.rs_idx[0] == 0
    again, = m.init_batch([ub(10, 1)])
    assert again.s_copy().tolist() == [m.row(0, 0)]


def test_sequence_one_reads_its_own_cell():
    m = make()
    decode(m, 0, 6, seq=1)
    assert m.seq_rm(1, 5, -1)
    c, = m.init_batch([ub(5, 1, seq=1)])
    assert c.head == 1 and c.s_copy().tolist() == [m.row(1, 1)]


@pytest.mark.parametrize("p0,p1", [(6, -1), (2, 5), (9, 12)])
def test_refusals_change_nothing(p0, p1):
    m = make()
    decode(m, 0, 10)
    before = (list(m.pos), list(m.rs_idx), list(m.valid))
    ok = m.seq_rm(0, p0, p1)
    if (p0, p1) == (9, 12):
        assert ok and m.seq_pos_max(0) == 8           # the last position only: r = 1
        return
    assert ok is False and (list(m.pos), list(m.rs_idx), list(m.valid)) == before


def test_window_is_what_the_last_ubatch_wrote_and_rollbacks_do_not_stack():
    m = make(n_rs=3)
    decode(m, 0, 2)                                    # 2 tokens: plane 1 is the only past state
    assert m.valid[0] == 1 and m.seq_rm(0, 1, -1) is True
    m = make(n_rs=3)
    decode(m, 0, 3)                                    # planes 1, 2 written
    assert m.seq_rm(0, 0, 2) is False                  # a hole
    assert m.seq_rm(0, 2, -1) is True                  # r = 1
    assert m.seq_rm(0, 1, -1) is False                 # one pending: rollbacks do not stack
    assert m.seq_rm(0, -1, -1) is True                 # the whole sequence always goes
    assert m.seq_pos_max(0) == -1 and m.fresh[0] and m.rs_idx[0] == 0
    m = make(n_rs=3)
    decode(m, 0, 1)                                    # a 1-token ubatch keeps no earlier plane
    decode(m, 1, 1)
    assert m.seq_rm(0, 1, -1) is False
    m = make(n_rs=0)
    decode(m, 0, 5)
    assert m.seq_rm(0, 4, -1) is False


def test_every_sequence_is_all_or_nothing():
    m = make()
    decode(m, 0, 4, seq=0)
    assert m.seq_rm(-1, 2, -1) is False
    assert m.seq_rm(-1, -1, -1) is True and m.seq_pos_max(0) == -1


def test_copy_and_keep():
    m = make()
    decode(m, 0, 5, seq=0)
    m.r_l[0].numpy()[m.row(1, 0)] = 3.0
    m.seq_cp(0, 1)
    assert m.seq_pos_max(1) == 4 and np.all(m.r_l[0].numpy()[m.row(1, 1)] == 3.0)
    with pytest.raises(ValueError, match="whole sequences"):
        m.seq_cp(0, 1, 1, 3)
    m.seq_keep(1)
    assert m.seq_pos_max(0) == -1 and m.seq_pos_max(1) == 4


def test_hybrid_refusal_leaves_the_kv_cache_alone():
    kv = KVCache(n_layer=2, layers=[1], n_embd_k_gqa=8, n_embd_v_gqa=8, head_dim_k=8,
                 head_dim_v=8, n_head_kv=1, size=256, n_seq_max=1)
    h = HybridMemory(kv, RecurrentMemory(layers=[0], n_embd_r=4, n_embd_s=4, n_rs_seq=2))
    (c,) = h.init_batch([ub(0, 9)])
    c.apply()
    assert h.keep_tail == 3
    assert h.seq_rm(0, 5, -1) is False and kv.seq_pos_max(0) == 8
    assert h.seq_rm(0, 7, -1) is True and kv.seq_pos_max(0) == 6 and h.recr.seq_pos_max(0) == 6
