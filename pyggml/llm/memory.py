"""The memory interface (llama.cpp's llama_memory_i and llama_memory_context_i).

A `Memory` owns persistent state across decode calls (a KV cache, an iSWA pair of caches, the
dsv4 caches) and the host-side sequence operations on it. For a batch it plans every ubatch
up front (`init_batch`) and hands back one `MemoryContext` per ubatch.

A `MemoryContext` is what the graph sees for one ubatch: `apply()` commits the plan to the
cell tables, `parts()` lists the attention caches it exposes (one for a unified cache, two for
iSWA), and each part (`AttnPart`) offers the graph-side calls `build_attn` goes through
(`cpy_k`/`cpy_v` writes, `get_k`/`get_v` views) and the host-side fills of its inputs
(`set_input_k_idxs`, `set_input_v_idxs`, `set_input_kq_mask`). The no-cache case is an
`AttnPart` too: its "cache" is the ubatch's own K/V.
"""
from __future__ import annotations

import numpy as np

import pyggml as gg


class Memory:
    """Persistent state and sequence operations (llama_memory_seq_* semantics)."""

    def init_batch(self, ubatches: list) -> list | None:
        """One MemoryContext per ubatch, or None when they do not fit."""
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        """Remove positions [p0, p1) of seq (p < 0: open end; seq < 0: every sequence).
        False when the memory cannot remove that range (nothing is changed then)."""
        raise NotImplementedError

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        raise NotImplementedError

    def seq_keep(self, seq: int) -> None:
        raise NotImplementedError

    def seq_add(self, seq: int, p0: int, p1: int, delta: int) -> None:
        raise NotImplementedError(f"{type(self).__name__}: shifting positions is not supported")

    def seq_pos_min(self, seq: int) -> int:
        raise NotImplementedError

    def seq_pos_max(self, seq: int) -> int:
        raise NotImplementedError

    def update(self, n_threads: int) -> None:
        """Pending work before the next batch (K shifts); nothing by default."""


class AttnPart:
    """One attention cache as the graph of one ubatch sees it."""

    suffix = ""          # input tensor name suffix ("" or "_swa")
    n_kv = 0             # attended width
    v_trans = False      # V stored transposed (nb1 > nb2 in get_v's view)

    def is_layer(self, il: int) -> bool:
        return True

    # graph side
    def cpy_k(self, ctx, k_cur, k_idxs, il: int):
        raise NotImplementedError

    def cpy_v(self, ctx, v_cur, v_idxs, il: int):
        raise NotImplementedError

    def get_k(self, ctx, il: int):
        raise NotImplementedError

    def get_v(self, ctx, il: int):
        raise NotImplementedError

    # shapes of the inputs this part needs
    def k_idxs_len(self, n_tokens: int) -> int:
        return n_tokens

    def v_idxs_len(self, n_tokens: int) -> int:
        return n_tokens

    # host side
    def set_input_k_idxs(self, dst, ub) -> None:
        raise NotImplementedError

    def set_input_v_idxs(self, dst, ub) -> None:
        raise NotImplementedError

    def set_input_kq_mask(self, dst, ub, causal: bool = True) -> None:
        raise NotImplementedError


class MemoryContext:
    """The memory's plan for one ubatch."""

    def apply(self) -> None:
        """Commit this ubatch's cells (positions, sequence sets)."""

    def parts(self) -> list[AttnPart]:
        return []

    def shape_key(self) -> tuple:
        """What of this plan decides graph topology (tensor shapes)."""
        return tuple(p.n_kv for p in self.parts())


class NoCachePart(AttnPart):
    """Attention over the ubatch itself (embeddings, encoders): `cpy_k` keeps the current K/V
    of the layer for `get_k`; nothing persists. Mask [T, T, 1, 1], causal within a sequence."""

    def __init__(self, n_tokens: int, n_swa: int = 0, swa_type: int = 0):
        self.n_kv, self.n_swa, self.swa_type = n_tokens, n_swa, swa_type
        self._k, self._v = {}, {}

    def cpy_k(self, ctx, k_cur, k_idxs, il):
        self._k[il] = k_cur
        return None

    def cpy_v(self, ctx, v_cur, v_idxs, il):
        self._v[il] = v_cur
        return None

    def get_k(self, ctx, il):
        k = self._k[il]
        return gg.view_4d(ctx, k, k.ne[0], k.ne[1], k.ne[2], 1, k.nb[1], k.nb[2], k.nb[3], 0)

    def get_v(self, ctx, il):
        v = self._v[il]
        return gg.view_4d(ctx, v, v.ne[0], v.ne[1], v.ne[2], 1, v.nb[1], v.nb[2], v.nb[3], 0)

    def k_idxs_len(self, n_tokens):
        return 0

    def v_idxs_len(self, n_tokens):
        return 0

    @staticmethod
    def mask(ub, causal: bool = True) -> np.ndarray:
        pos = np.asarray(ub.pos, np.int64)
        ok = ub.seq_id[:, None] == ub.seq_id[None, :]
        if causal:
            ok &= pos[None, :] <= pos[:, None]
        return np.where(ok, np.float32(0), np.float32(-np.inf))

    def set_input_kq_mask(self, dst, ub, causal=True):
        dst.numpy()[...] = self.mask(ub, causal).reshape(dst.numpy().shape)


class NoCacheContext(MemoryContext):
    def __init__(self, n_tokens: int):
        self._parts = [NoCachePart(n_tokens)]

    def parts(self):
        return self._parts
