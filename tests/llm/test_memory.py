"""The memory interface: a memory written here, in the test (one K and one V row per position,
one sequence), plugged into the llama builder through create_memory, decodes to the same
logits as the numpy reference. build_attn knows nothing of it but the interface."""
import numpy as np

import pyggml as gg
from llama_ref import ArrayModel, forward, make_hparams, make_weights
from util import assert_close

from pyggml.llm import Context
from pyggml.llm.memory import AttnPart, Memory, MemoryContext
from pyggml.llm.models.llama import LlamaGraph


class PositionMemory(Memory):
    """K/V row p holds position p of sequence 0; attended width = the whole store."""

    def __init__(self, hp, size):
        self.size, self.d, self.h = size, hp.head_dim_k, hp.n_head_kv
        self.ctx = gg.Context(mem_size=2 * hp.n_layer * size * self.d * self.h * 4 + (1 << 16))
        self.k = [self.ctx.new_tensor(gg.F32, [self.d * self.h, size]) for _ in range(hp.n_layer)]
        self.v = [self.ctx.new_tensor(gg.F32, [self.d * self.h, size]) for _ in range(hp.n_layer)]
        for t in self.k + self.v:
            t.numpy()[...] = 0
        self.n_past = 0

    def init_batch(self, ubatches):
        return [PositionContext(self, ub) for ub in ubatches]

    def seq_pos_max(self, seq):
        return self.n_past - 1

    def seq_rm(self, seq, p0=-1, p1=-1):
        self.n_past = min(self.n_past, max(p0, 0))
        return True

    def clear(self):
        self.n_past = 0


class PositionContext(MemoryContext, AttnPart):
    def __init__(self, mem, ub):
        self.mem, self.ub, self.n_kv = mem, ub, mem.size

    def apply(self):
        self.mem.n_past = int(self.ub.pos[-1]) + 1

    def parts(self):
        return [self]

    def cpy_k(self, ctx, k_cur, k_idxs, il):
        return gg.set_rows(ctx, self.mem.k[il], gg.reshape_2d(ctx, k_cur, k_cur.ne[0] * k_cur.ne[1], k_cur.ne[2]), k_idxs)

    def cpy_v(self, ctx, v_cur, v_idxs, il):
        return gg.set_rows(ctx, self.mem.v[il], gg.reshape_2d(ctx, v_cur, v_cur.ne[0] * v_cur.ne[1], v_cur.ne[2]), v_idxs)

    def _view(self, ctx, t):
        es = gg.type_size(t.type)
        return gg.view_4d(ctx, t, self.mem.d, self.mem.h, self.n_kv, 1, es * self.mem.d, t.nb[1], t.nb[1] * self.n_kv, 0)

    def get_k(self, ctx, il):
        return self._view(ctx, self.mem.k[il])

    def get_v(self, ctx, il):
        return self._view(ctx, self.mem.v[il])

    def set_input_k_idxs(self, dst, ub):
        dst.numpy()[...] = ub.pos

    set_input_v_idxs = set_input_k_idxs

    def set_input_kq_mask(self, dst, ub, causal=True):
        j = np.arange(self.n_kv)[None, :]
        ok = j <= np.asarray(ub.pos)[:, None]
        dst.numpy()[...] = np.where(ok, 0.0, -np.inf).astype(np.float32).reshape(dst.numpy().shape)


def test_a_foreign_memory_drives_build_attn(monkeypatch):
    hp = make_hparams(arch="llama", n_head=4, n_head_kv=2)
    w = make_weights(hp, seed=31)
    model = ArrayModel(hp, w)
    monkeypatch.setattr(LlamaGraph, "create_memory", staticmethod(lambda m, h, cp: PositionMemory(h, 64)))
    toks = np.random.default_rng(32).integers(0, hp.n_vocab, size=14)
    for fa in (True, False):
        ctx = Context(model, n_ctx=64, flash_attn=fa, n_ubatch=5)
        assert isinstance(ctx.memory, PositionMemory)
        rows = [ctx.decode(toks[:9], logits_all=True), ctx.decode(toks[9:], logits_all=True)]
        assert_close(np.concatenate(rows), forward(hp, w, toks), 1e-5, f"fa={fa}")
        assert ctx.seq_rm(0, 4) and ctx.n_past() == 4
        assert_close(ctx.decode(toks[4:6], logits_all=True), forward(hp, w, toks[:6])[4:], 1e-5, "after rm")
