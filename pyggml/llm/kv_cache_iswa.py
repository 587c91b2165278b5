"""Interleaved sliding-window attention memory (llama.cpp's llama_kv_cache_iswa).

Two unified caches driven by the same ubatches: `base` stores the full-attention layers
(size n_ctx, no window), `swa` the sliding-window layers (window n_swa; its cells are reused
once they slide out of every sequence's window, so it can be smaller). Every sequence
operation is applied to both. A ubatch's context exposes two attention parts; each layer
reads the part whose `is_layer(il)` holds, and its inputs carry the `_swa` suffix for the
window part.
"""
from __future__ import annotations

from .kv_cache import N_PAD, SWA_STANDARD, KVCache, KVCacheContext, pad_to
from .memory import Memory, MemoryContext


class KVCacheISWA(Memory):
    def __init__(self, *, swa_layers, n_swa: int, size: int, swa_type: int = SWA_STANDARD,
                 swa_full: bool = False, n_ubatch: int = 512, n_seq_max: int = 1, layers=None,
                 k_shift_swa=None, **cache_kw):
        """swa_layers[il] says whether layer il is a sliding-window layer; `layers` lists the
        layers stored (default all; an MTP context stores the NextN layers only). The window
        cache holds `size` cells when swa_full, else pad256(min(size, n_swa*n_seq_max + n_ubatch)).
        `k_shift_swa` replaces the K-shift settings for the window cache (its layers may
        have their own RoPE base)."""
        if n_swa <= 0:
            raise ValueError(f"KVCacheISWA: n_swa must be positive, got {n_swa}")
        keep = set(range(len(swa_layers)) if layers is None else layers)
        swa = [il for il, s in enumerate(swa_layers) if s and il in keep]
        full = [il for il, s in enumerate(swa_layers) if not s and il in keep]
        size_swa = size if swa_full else min(size, pad_to(n_swa * n_seq_max + n_ubatch, N_PAD))
        n_layer = len(swa_layers)
        self.base = KVCache(n_layer=n_layer, size=size, layers=full, n_seq_max=n_seq_max, **cache_kw)
        swa_kw = dict(cache_kw)
        if k_shift_swa is not None:
            swa_kw["k_shift"] = k_shift_swa
        self.swa = KVCache(n_layer=n_layer, size=size_swa, layers=swa, n_seq_max=n_seq_max,
                           n_swa=n_swa, swa_type=swa_type, **swa_kw)
        self.n_seq_max = n_seq_max

    @property
    def caches(self):
        return (self.base, self.swa)

    def init_batch(self, ubatches):
        a = self.base.init_batch(ubatches)
        b = self.swa.init_batch(ubatches)
        if a is None or b is None:
            return None
        for cb in b:
            cb.suffix = "_swa"
        return [KVCacheISWAContext(x, y) for x, y in zip(a, b)]

    def clear(self):
        for c in self.caches:
            c.clear()

    def seq_rm(self, seq, p0=-1, p1=-1):
        ok = True
        for c in self.caches:
            ok = c.seq_rm(seq, p0, p1) and ok
        return ok

    def seq_cp(self, src, dst, p0=-1, p1=-1):
        for c in self.caches:
            c.seq_cp(src, dst, p0, p1)

    def seq_keep(self, seq):
        for c in self.caches:
            c.seq_keep(seq)

    def seq_add(self, seq, p0, p1, delta):
        for c in self.caches:
            c.seq_add(seq, p0, p1, delta)

    def seq_pos_min(self, seq):
        # the window cache forgets old positions; the full cache knows where a sequence starts
        return self.swa.seq_pos_min(seq) if not self.base.layers else self.base.seq_pos_min(seq)

    def seq_pos_max(self, seq):
        return self.swa.seq_pos_max(seq)

    def update(self, n_threads):
        for c in self.caches:
            c.update(n_threads)


class KVCacheISWAContext(MemoryContext):
    def __init__(self, base: KVCacheContext, swa: KVCacheContext):
        self.base, self.swa = base, swa

    def apply(self):
        self.base.apply()
        self.swa.apply()

    def parts(self):
        return [p for p in (self.base, self.swa) if p.kv.layers]
