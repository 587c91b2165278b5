"""Hybrid memory (llama.cpp's llama_memory_hybrid): a KV cache for the attention layers
next to recurrent states for the others, planned and edited together.

`seq_rm` checks the recurrent part first: when its states cannot drop the range (beyond
the snapshot window) nothing changes in either part and it returns False; otherwise both
parts drop it (the KV cache can always remove a tail).
"""
from __future__ import annotations

from .kv_cache import KVCache
from .memory import Memory, MemoryContext
from .memory_recurrent import RecurrentContext, RecurrentMemory


class HybridMemory(Memory):
    def __init__(self, attn: KVCache, recr: RecurrentMemory):
        self.attn, self.recr = attn, recr
        self.n_rs_seq = recr.n_rs_seq
        self.keep_tail = recr.keep_tail
        # per-token calls answered by the KV cache alone: bound once, no extra frame per call
        self.update = attn.update
        self.seq_pos_min = attn.seq_pos_min
        self.seq_pos_max = attn.seq_pos_max

    def init_batch(self, ubatches):
        a = self.attn.init_batch(ubatches)
        if a is None:
            return None
        r = self.recr.init_batch(ubatches)
        if len(a) == 1:
            return [HybridContext(a[0], r[0])]
        return [HybridContext(x, y) for x, y in zip(a, r)]

    def clear(self):
        self.attn.clear()
        self.recr.clear()

    def seq_rm(self, seq, p0=-1, p1=-1):
        saved = (list(self.recr.pos), list(self.recr.rs_idx), list(self.recr.fresh),
                 list(self.recr.valid))
        if not self.recr.seq_rm(seq, p0, p1):
            return False
        if not self.attn.seq_rm(seq, p0, p1):
            self.recr.pos, self.recr.rs_idx, self.recr.fresh, self.recr.valid = map(list, saved)
            return False
        return True

    def seq_cp(self, src, dst, p0=-1, p1=-1):
        self.recr.seq_cp(src, dst, p0, p1)     # refuses partial copies before anything changes
        self.attn.seq_rm(dst, -1, -1)
        self.attn.seq_cp(src, dst, p0, p1)

    def seq_keep(self, seq):
        self.attn.seq_keep(seq)
        self.recr.seq_keep(seq)


class HybridContext(MemoryContext):
    """The KV plan and the recurrent plan of one ubatch (the attention part is one unified
    cache: its n_kv is the attention's share of the shape key)."""

    def __init__(self, attn, recr: RecurrentContext):
        self.attn, self._recr = attn, recr
        self.parts = attn.parts

    def apply(self):
        self.attn.apply()
        self._recr.apply()

    def recr(self) -> RecurrentContext:
        return self._recr

    def shape_key(self):
        return (self.attn.n_kv, self._recr.key)
