"""Graph inputs: ubatch construction, fills, masks, reuse checks."""
import numpy as np

import pyggml as gg
from pyggml.llm.graph import GraphParams
from pyggml.llm.inputs import InpAttn, InpEmbd, InpOutIds, InpPos, UBatch
from pyggml.llm.kv_cache import KVCache
from pyggml.llm.memory import NoCacheContext


def test_ubatch_from_tokens_defaults_to_last_output():
    ub = UBatch.from_tokens([4, 5, 6], pos0=10, seq_id=2)
    assert list(ub.pos) == [10, 11, 12] and list(ub.seq_id) == [2, 2, 2]
    assert ub.n_outputs == 1 and list(ub.out_ids) == [2]


def test_fills_token_pos_out_ids():
    ctx = gg.Context(1 << 16)
    ub = UBatch.from_tokens([4, 5, 6, 7], pos0=3, output=[True, False, True, True])
    e, p, o = InpEmbd(ctx, 4, 8), InpPos(ctx, 4), InpOutIds(ctx, ub.n_outputs)
    for inp in (e, p, o):
        inp.set_input(ub)
    assert list(e.tokens.numpy()) == [4, 5, 6, 7]
    assert list(p.pos.numpy()) == [3, 4, 5, 6]
    assert list(o.out_ids.numpy()) == [0, 2, 3]
    assert e.tokens.name == "inp_tokens" and p.pos.name == "inp_pos" and o.out_ids.name == "out_ids"
    assert e.tokens.flags & 1  # flagged as an input


def test_no_cache_mask_is_causal_within_sequences():
    ctx = gg.Context(1 << 16)
    ub = UBatch(pos=np.array([0, 1, 0, 2], np.int32), seq_id=np.array([0, 0, 1, 0], np.int32),
                output=np.ones(4, bool))
    inp = InpAttn(ctx, NoCacheContext(4), 4, flash_attn=True)
    inp.set_input(ub)
    m = inp.kq_mask.numpy().astype(np.float32).reshape(4, 4)
    exp = np.full((4, 4), -np.inf, np.float32)
    for i in range(4):
        for j in range(4):
            if ub.seq_id[i] == ub.seq_id[j] and ub.pos[j] <= ub.pos[i]:
                exp[i, j] = 0
    np.testing.assert_array_equal(m, exp)
    assert inp.kq_mask.type == gg.F16
    assert InpAttn(ctx, NoCacheContext(4), 4, flash_attn=False).kq_mask.type == gg.F32


def test_attn_kv_can_reuse_compares_shapes_and_rebinds():
    kv = KVCache(n_layer=1, n_embd_k_gqa=8, n_embd_v_gqa=8, head_dim_k=4, head_dim_v=4,
                 n_head_kv=2, size=512)
    ctx = gg.Context(1 << 20)
    ub = UBatch.from_tokens([1])
    mctx, = kv.init_batch([ub])
    mctx.apply()
    inp = InpAttn(ctx, mctx, 1, True)
    assert inp.kq_mask.ne == [256, 1, 1, 1] and inp.k_idxs.type == gg.I64
    kv2 = KVCache(n_layer=1, n_embd_k_gqa=8, n_embd_v_gqa=8, head_dim_k=4, head_dim_v=4,
                  n_head_kv=2, size=512)
    mctx2, = kv2.init_batch([ub])
    mctx2.apply()
    p = GraphParams(arch="llama", hparams=None, ubatch=ub, n_outputs=1, mctx=mctx2)
    assert inp.can_reuse(p) and inp.mctx is mctx2
    mctx2.n_kv = 512
    assert not inp.can_reuse(p)
