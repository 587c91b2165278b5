"""KV cache host side: slots, n_kv padding, sequence operations and the KQ mask, checked
against a direct numpy construction of the rule in."""
import numpy as np
import pytest

import pyggml as gg
from pyggml.llm.inputs import UBatch
from pyggml.llm.kv_cache import SWA_CHUNKED, SWA_NONE, SWA_STANDARD, SWA_SYMMETRIC, KVCache


def make_cache(size=512, n_seq_max=4, v_trans=False, **kw):
    return KVCache(n_layer=2, n_embd_k_gqa=16, n_embd_v_gqa=16, head_dim_k=8, head_dim_v=8,
                   n_head_kv=2, size=size, v_trans=v_trans, n_seq_max=n_seq_max, **kw)


def put(kv, pos, seq):
    ub = UBatch(pos=np.asarray(pos, np.int32), seq_id=np.asarray(seq, np.int32),
                output=np.ones(len(pos), bool))
    slot = kv.find_slot(ub)
    assert slot is not None
    kv.apply_ubatch(slot, ub)
    return ub, slot


def reference_mask(cells_pos, cells_seq, q_pos, q_seq, n_kv, causal=True, n_swa=0, swa_type=SWA_NONE):
    """Element by element, as the mask rule reads."""
    out = np.full((len(q_pos), n_kv), -np.inf, np.float32)
    for i, (p1, s) in enumerate(zip(q_pos, q_seq)):
        for j in range(n_kv):
            if cells_pos[j] < 0 or s not in cells_seq[j]:
                continue
            p0 = cells_pos[j]
            if causal and p0 > p1:
                continue
            if swa_type == SWA_STANDARD and p1 - p0 >= n_swa:
                continue
            if swa_type == SWA_CHUNKED and p0 < (p1 // n_swa) * n_swa:
                continue
            if swa_type == SWA_SYMMETRIC and abs(p1 - p0) > n_swa // 2:
                continue
            out[i, j] = 0
    return out


def test_slots_n_kv_and_mask_single_sequence():
    kv = make_cache()
    assert kv.get_n_kv() == 256                      # padded even when empty
    ub, slot = put(kv, range(5), [0] * 5)
    assert list(slot.idxs) == [0, 1, 2, 3, 4]
    assert kv.get_n_kv() == 256
    ub2, slot2 = put(kv, [5, 6], [0, 0])
    assert list(slot2.idxs) == [5, 6]
    m = kv.kq_mask(ub2, 256)
    ref = reference_mask(kv.cells.pos, [set(np.flatnonzero(r)) for r in kv.cells.seq], ub2.pos,
                         ub2.seq_id, 256)
    np.testing.assert_array_equal(m, ref)
    assert np.all(m[0, :6] == 0) and m[0, 6] == -np.inf and np.all(m[1, :7] == 0)


def test_n_kv_grows_in_steps_of_256_and_caps_at_size():
    kv = make_cache(size=768, n_seq_max=1)
    put(kv, range(256), [0] * 256)
    assert kv.get_n_kv() == 256
    put(kv, [256], [0])
    assert kv.get_n_kv() == 512
    put(kv, range(257, 700), [0] * 443)
    assert kv.get_n_kv() == 768


def test_multi_sequence_mask_and_seq_ops():
    kv = make_cache()
    put(kv, [0, 1, 2], [0, 0, 0])
    put(kv, [0, 1], [1, 1])
    kv.seq_cp(0, 2, 0, 2)                             # seq 2 shares positions 0, 1 of seq 0
    ub, _ = put(kv, [2, 3, 2], [2, 0, 1])
    seqs = [set(np.flatnonzero(r)) for r in kv.cells.seq]
    ref = reference_mask(kv.cells.pos, seqs, ub.pos, ub.seq_id, 256)
    np.testing.assert_array_equal(kv.kq_mask(ub, 256), ref)
    assert kv.seq_pos_max(0) == 3 and kv.seq_pos_max(1) == 2 and kv.seq_pos_max(2) == 2

    kv.seq_rm(0, 2, -1)                               # drop positions >= 2 of seq 0
    assert kv.seq_pos_max(0) == 1
    assert kv.cells.pos[0] == 0 and 2 in seqs[0]      # shared cells survive
    kv.seq_keep(1)
    assert kv.seq_pos_max(0) == -1 and kv.seq_pos_max(2) == -1 and kv.seq_pos_max(1) == 2
    assert kv.cells.used() == 3
    # freed cells are reused from the lowest index
    _, slot = put(kv, [0], [3])
    assert slot.idxs[0] == 0


def test_seq_add_shifts_positions_and_records_k_shift():
    kv = make_cache()
    put(kv, range(6), [0] * 6)
    kv.seq_rm(0, 1, 3)                                # drop positions 1, 2
    kv.seq_add(0, 3, -1, -2)                          # 3, 4, 5 -> 1, 2, 3
    assert sorted(kv.cells.pos[kv.cells.pos >= 0]) == [0, 1, 2, 3]
    assert kv.cells.has_shift
    assert list(kv.cells.shift[3:6]) == [-2, -2, -2]
    kv.seq_add(0, 0, 1, -5)                           # position 0 would become -5: dropped
    assert kv.seq_pos_min(0) == 1


def test_seq_rm_all_sequences_and_clear():
    kv = make_cache()
    put(kv, [0, 1], [0, 0])
    put(kv, [0, 1], [1, 1])
    kv.seq_rm(-1, 1, -1)
    assert kv.cells.used() == 2
    kv.clear()
    assert kv.cells.used() == 0 and kv.head == 0


@pytest.mark.parametrize("swa_type,n_swa", [(SWA_STANDARD, 3), (SWA_CHUNKED, 4), (SWA_SYMMETRIC, 4)])
def test_swa_mask_and_cell_reuse(swa_type, n_swa):
    kv = make_cache(size=256, n_seq_max=1, swa_type=swa_type, n_swa=n_swa)
    put(kv, range(10), [0] * 10)
    ub = UBatch(pos=np.array([10, 11], np.int32), seq_id=np.zeros(2, np.int32),
                output=np.ones(2, bool))
    got = kv.kq_mask(ub, 256)
    seqs = [set(np.flatnonzero(r)) for r in kv.cells.seq]
    ref = reference_mask(kv.cells.pos, seqs, ub.pos, ub.seq_id, 256, n_swa=n_swa, swa_type=swa_type)
    np.testing.assert_array_equal(got, ref)


def test_swa_overwrite_purges_older_positions():
    kv = make_cache(size=256, n_seq_max=1, swa_type=SWA_STANDARD, n_swa=2)
    put(kv, range(256), [0] * 256)                   # cache full
    _, slot = put(kv, [256], [0])                     # position 0 slid out of the window
    assert slot.idxs[0] == 0
    assert kv.seq_pos_min(0) == 1 and kv.cells.pos[0] == 256


def test_full_cache_returns_no_slot():
    kv = make_cache(size=256, n_seq_max=1)
    put(kv, range(250), [0] * 250)
    ub = UBatch(pos=np.arange(250, 260, dtype=np.int32), seq_id=np.zeros(10, np.int32),
                output=np.ones(10, bool))
    assert kv.find_slot(ub) is None


def test_bad_sequence_ids_raise():
    kv = make_cache(n_seq_max=2)
    with pytest.raises(ValueError, match="sequence id 5"):
        kv.seq_keep(5)
    with pytest.raises(ValueError, match="sequence id 3"):
        kv.seq_cp(0, 3)


def test_index_fills():
    kv = make_cache(v_trans=True)
    ctx = gg.Context(1 << 16)
    ub, slot = put(kv, [0, 1, 2], [0, 0, 0])
    k_idx = ctx.new_tensor(gg.I64, [3])
    v_idx = ctx.new_tensor(gg.I64, [3 * 16])
    kv.set_input_k_idxs(k_idx, slot)
    kv.set_input_v_idxs(v_idx, slot)
    np.testing.assert_array_equal(k_idx.numpy(), [0, 1, 2])
    exp = [c + j * kv.size for c in slot.idxs for j in range(16)]  # channel j of cell c
    np.testing.assert_array_equal(v_idx.numpy(), exp)
