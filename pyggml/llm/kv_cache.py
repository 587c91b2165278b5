"""The unified KV cache (llama.cpp's llama_kv_cache with one stream).

Host side: a cell table (position and sequence set per cell), slot search, the KQ mask and
the set_rows indices. Graph side: `cpy_k`/`cpy_v` write the ubatch's K/V rows in place into
persistent per-layer tensors (set_rows), `get_k`/`get_v` are views of those tensors of width
n_kv. The builder expands the writes BEFORE building the attention that reads the views:
nodes run in insertion order and the views have no data edge to the writes.

`KVCache` is a `Memory`; `init_batch` plans a slot for every ubatch and returns one
`KVCacheContext` (a `MemoryContext` that is its own single `AttnPart`) per ubatch.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import pyggml as gg
from pyggml import _core

from .memory import AttnPart, Memory, MemoryContext

N_PAD = 256  # n_kv is padded to a multiple of this (topology stays fixed across steps)
# Sequence regions start at multiples of this: the widest fixed reduction block over the KV
# axis of the CPU kernels (the float GEMM's K block, the F16 flash-attention chunk; the
# other chunk and lane widths divide it).
SEQ_ALIGN = 512

SWA_NONE, SWA_STANDARD, SWA_CHUNKED, SWA_SYMMETRIC = 0, 1, 2, 3


def pad_to(n: int, p: int) -> int:
    return (n + p - 1) // p * p


def cells_for(n_ctx: int, n_seq_max: int) -> int:
    """Cells of a full-attention cache: n_ctx padded to N_PAD for one sequence. For several,
    n_ctx stays the total (as llama.cpp's): each sequence's share n_ctx / n_seq_max is padded
    up to SEQ_ALIGN, so that every sequence gets its own aligned region (KVCache.seq_region).
    A sequence that outgrows its share still finds cells (the plain search places it), but
    its bits may then depend on the others'."""
    if n_seq_max <= 1:
        return pad_to(n_ctx, N_PAD)
    return pad_to(-(-n_ctx // n_seq_max), SEQ_ALIGN) * n_seq_max


def is_masked_swa(n_swa: int, swa_type: int, p0, p1):
    """True where key position p0 is outside the window of query position p1 (numpy-aware)."""
    if swa_type == SWA_NONE or n_swa <= 0:
        return np.zeros(np.broadcast(p0, p1).shape, bool) if np.ndim(p0) or np.ndim(p1) else False
    if swa_type == SWA_STANDARD:
        return p1 - p0 >= n_swa
    if swa_type == SWA_CHUNKED:
        return p0 < (p1 // n_swa) * n_swa
    if swa_type == SWA_SYMMETRIC:
        return np.abs(p1 - p0) > n_swa // 2
    raise ValueError(f"unknown swa_type {swa_type}")


@dataclass
class SlotInfo:
    """Cells the tokens of one ubatch occupy, in token order (single stream)."""
    idxs: np.ndarray  # int64 [T]


class KVCells:
    """Cell metadata: pos (-1 = empty), a boolean sequence set per cell, pending RoPE shifts.

    The counts the per-token path asks for (cells used, the highest used cell, each
    sequence's last position) are kept up to date when a ubatch only fills empty cells
    (`add`), and recounted once after anything else changed the table: whoever writes `pos`
    or `seq` directly calls `changed()`."""

    def __init__(self, size: int, n_seq_max: int):
        self.pos = np.full(size, -1, np.int64)
        self.seq = np.zeros((size, n_seq_max), bool)
        self.shift = np.zeros(size, np.int64)
        self.has_shift = False
        self.changed()

    @property
    def size(self) -> int:
        return len(self.pos)

    def changed(self) -> None:
        self._counted = False

    def _count(self) -> None:
        self._n_used, self._max_p1, self._seq_max = _core.llm_kv_count(self.pos, self.seq)
        self._counted = True

    def add(self, cells: np.ndarray, pos: np.ndarray, seq: np.ndarray) -> None:
        """Fill empty `cells` with positions `pos` of sequences `seq` (one per cell)."""
        if len(cells) == 1:     # a decoded token: plain scalars, no fancy indexing
            cell, s, p = int(cells[0]), int(seq[0]), int(pos[0])
            self.pos[cell] = p
            self.seq[cell, s] = True
            if self._counted:
                self._n_used += 1
                if cell >= self._max_p1:
                    self._max_p1 = cell + 1
                if p > self._seq_max[s]:
                    self._seq_max[s] = p
            return
        self.pos[cells] = pos
        self.seq[cells, seq] = True
        if self._counted:
            self._n_used += len(cells)
            self._max_p1 = max(self._max_p1, int(cells.max()) + 1)
            np.maximum.at(self._seq_max, seq, pos)

    def is_empty(self) -> np.ndarray:
        return self.pos < 0

    def used(self) -> int:
        if not self._counted:
            self._count()
        return self._n_used

    def used_max_p1(self) -> int:
        if not self._counted:
            self._count()
        return self._max_p1

    def free(self, cells) -> None:
        self.pos[cells] = -1
        self.seq[cells] = False
        self.shift[cells] = 0
        self.changed()

    def seq_pos_max(self, seq: int) -> int:
        if not self._counted:
            self._count()
        return int(self._seq_max[seq])

    def seq_next_pos(self) -> np.ndarray:
        """Every sequence's next position (last + 1; 0 when empty), int64 [n_seq]."""
        if not self._counted:
            self._count()
        return self._seq_max + 1

    def seq_pos_min(self, seq: int) -> int:
        sel = self.seq[:, seq]
        return int(self.pos[sel].min()) if sel.any() else -1


class KVCache(Memory):
    """Unified KV cache: K [E_k, size] and V [E_v, size] per layer (V transposed when v_trans).

    v_trans follows upstream: True without flash attention (kqv = mul_mat(V^T, softmax)
    reads contiguous rows), False with it. `layers` lists the model layers this cache stores
    (default: all n_layer); an iSWA memory gives each of its two caches one half.
    `k_shift = (hparams, rope_factors)` enables re-roping cached K after seq_add.
    """

    def __init__(self, *, n_layer: int, n_embd_k_gqa: int, n_embd_v_gqa: int, head_dim_k: int,
                 head_dim_v: int, n_head_kv: int, size: int, type_k=gg.F16, type_v=gg.F16,
                 v_trans: bool = False, n_seq_max: int = 1, n_swa: int = 0,
                 swa_type: int = SWA_NONE, n_pad: int = N_PAD, layers=None, k_shift=None,
                 k_only: bool = False):
        if size <= 0:
            raise ValueError(f"KVCache: size must be positive, got {size}")
        self.layers = list(range(n_layer)) if layers is None else [int(i) for i in layers]
        self._slot_of = {il: i for i, il in enumerate(self.layers)}
        n_layer = len(self.layers)
        self.k_shift = k_shift
        self.size, self.n_layer, self.n_seq_max = size, n_layer, n_seq_max
        self.head_dim_k, self.head_dim_v, self.n_head_kv = head_dim_k, head_dim_v, n_head_kv
        self.e_k, self.e_v = n_embd_k_gqa, n_embd_v_gqa
        self.k_only = k_only              # V is a view of K (MLA-style, dsv4's K=V head)
        if k_only:
            n_embd_v_gqa, head_dim_v, v_trans, type_v = n_embd_k_gqa, head_dim_k, False, type_k
            self.e_v, self.head_dim_v = n_embd_v_gqa, head_dim_v
        self.type_k, self.type_v, self.v_trans = type_k, type_v, v_trans
        self.n_swa, self.swa_type, self.n_pad = n_swa, swa_type, max(n_pad, N_PAD)
        self.cells = KVCells(size, n_seq_max)
        self.head = 0
        self.seq_region = self._seq_region()
        per_layer = gg.row_size(type_k, self.e_k) * size + \
            (0 if k_only else gg.row_size(type_v, self.e_v) * size)
        self.ctx = gg.Context(mem_size=n_layer * (per_layer + 1024) + 4096)
        self.k_l, self.v_l = [], []
        for il in range(n_layer):
            k = self.ctx.new_tensor(type_k, [self.e_k, size])
            k.name = f"cache_k_l{self.layers[il]}"
            k.numpy()[...] = 0  # garbage could turn into NaN through 0-weight products
            self.k_l.append(k)
            if not k_only:
                v = self.ctx.new_tensor(type_v, [self.e_v, size])
                v.name = f"cache_v_l{self.layers[il]}"
                v.numpy()[...] = 0
                self.v_l.append(v)

    @classmethod
    def for_model(cls, hp, size: int, **kw) -> "KVCache":
        return cls(n_layer=hp.n_layer, n_embd_k_gqa=hp.head_dim_k * hp.n_head_kv,
                   n_embd_v_gqa=hp.head_dim_v * hp.n_head_kv, head_dim_k=hp.head_dim_k,
                   head_dim_v=hp.head_dim_v, n_head_kv=hp.n_head_kv, size=size, **kw)

    def has_layer(self, il: int) -> bool:
        return il in self._slot_of

    def _layer(self, il: int) -> int:
        try:
            return self._slot_of[il]
        except KeyError:
            raise ValueError(f"KVCache: layer {il} is not stored in this cache "
                             f"(layers {self.layers})") from None

    # ---- memory interface ---------------------------------------------------------------
    def init_batch(self, ubatches):
        """Plan a slot for every ubatch (simulating their writes, then restoring the cells)."""
        if len(ubatches) == 1:   # nothing to simulate: the one slot is found in the table as is
            slot = self.find_slot(ubatches[0])
            return None if slot is None else [KVCacheContext(self, slot, ubatches[0])]
        saved = self._save()
        plans = []
        try:
            for ub in ubatches:
                slot = self.find_slot(ub)
                if slot is None:
                    return None
                self.apply_ubatch(slot, ub)
                plans.append(KVCacheContext(self, slot, ub))
        finally:
            self._restore(saved)
        return plans

    def _save(self):
        c = self.cells
        return c.pos.copy(), c.seq.copy(), c.shift.copy(), c.has_shift, self.head

    def _restore(self, saved) -> None:
        c = self.cells
        c.pos[:], c.seq[:], c.shift[:], c.has_shift, self.head = saved
        c.changed()

    def update(self, n_threads: int) -> None:
        if self.cells.has_shift and self.k_shift is not None:
            hp, rope_factors = self.k_shift
            self.apply_k_shift(hp, n_threads, rope_factors)

    # ---- host side: slots -------------------------------------------------------------
    def _seq_region(self) -> int:
        """Cells per sequence region, 0 when the policy is off. With several sequences and
        room for each to have n_pad-aligned cells of its own, sequence s's position p goes
        to cell s * region + p: its cells then sit at the column offsets (modulo the
        kernels' lane, block and chunk widths, which divide SEQ_ALIGN) they have when it is
        decoded alone from cell 0, and the other sequences' cells only add masked columns,
        whose exact zeros change no sum. So a sequence's logits are bit-identical alone and
        sharing a ubatch / the cache with others (what keeps a batched speculative verify
        lossless). Sliding-window caches (which overwrite cells) keep the plain search."""
        if self.n_seq_max <= 1 or (self.swa_type != SWA_NONE and self.n_swa > 0):
            return 0
        return self.size // self.n_seq_max // SEQ_ALIGN * SEQ_ALIGN

    def _region_slot(self, ub) -> np.ndarray | None:
        """Cells seq * region + pos for every token of ub, or None when a position is
        past its region or a cell is taken (then the plain search places the ubatch)."""
        region, c = self.seq_region, self.cells
        if ub.n_tokens == 1:
            p, s = int(ub.pos[0]), int(ub.seq_id[0])
            cell = s * region + p
            if not 0 <= p < region or c.pos[cell] >= 0:
                return None
            return np.array([cell], np.int64)
        pos = np.asarray(ub.pos, np.int64)
        if pos.min() < 0 or pos.max() >= region:
            return None
        cells = np.asarray(ub.seq_id, np.int64) * region + pos
        if (c.pos[cells] >= 0).any() or len(np.unique(cells)) != len(cells):
            return None
        return cells

    def clear(self) -> None:
        self.cells.free(slice(None))
        self.cells.has_shift = False
        self.head = 0

    def find_slot(self, ub) -> SlotInfo | None:
        """Cells for every token of the ubatch (not necessarily contiguous), scanning from
        head with wrap-around; None when the cache is full. The scan (in C++) stops when the
        ubatch fits, so it costs the cells it looks at, not the cache size."""
        n = ub.n_tokens
        if n > self.size:
            return None
        if self.seq_region:
            idxs = self._region_slot(ub)
            if idxs is not None:
                return SlotInfo(idxs=idxs)
        head = self.head
        if head > self.cells.used() + 2 * n:  # plenty of room before head: refill from 0
            head = 0
        c = self.cells
        swa = self.swa_type != SWA_NONE and self.n_swa > 0
        idxs = _core.llm_kv_find_slot(c.pos, c.seq, head, n, self.swa_type if swa else SWA_NONE,
                                      self.n_swa, c.seq_next_pos() if swa else None)
        return None if idxs is None else SlotInfo(idxs=idxs)

    def apply_ubatch(self, slot: SlotInfo, ub) -> None:
        """Write positions and sequence ids of the ubatch into the cells of its slot."""
        c = self.cells
        cells = slot.idxs
        if (c.pos[int(cells[0])] < 0 if len(cells) == 1 else not (c.pos[cells] >= 0).any()):
            # the common case: only empty cells
            c.add(cells, ub.pos, ub.seq_id)
        else:
            rm_upto = {}  # seq -> highest position an SWA overwrite evicted
            for i, cell in enumerate(cells):
                if c.pos[cell] >= 0:
                    for s in np.flatnonzero(c.seq[cell]):
                        rm_upto[int(s)] = max(rm_upto.get(int(s), -1), int(c.pos[cell]))
                    c.free(cell)
                c.pos[cell] = ub.pos[i]
                c.seq[cell, ub.seq_id[i]] = True
            c.changed()
            for s, p in rm_upto.items():  # older entries of that sequence would be orphaned
                self.seq_rm(s, -1, p + 1)
        self.head = int(cells[-1]) + 1
        if self.head >= self.size:
            self.head = 0

    def get_n_kv(self) -> int:
        """Attended width: used cells padded to n_pad (>= 256), at most the cache size."""
        p = self.n_pad
        return min(self.size, max(p, pad_to(self.cells.used_max_p1(), p)))

    # ---- host side: sequence operations ------------------------------------------------
    def _range(self, seq: int, p0: int, p1: int) -> np.ndarray:
        p0 = 0 if p0 is None or p0 < 0 else p0
        p1 = np.iinfo(np.int64).max if p1 is None or p1 < 0 else p1
        c = self.cells
        sel = (c.pos >= p0) & (c.pos < p1)
        if seq is None or seq < 0:
            return sel & ~c.is_empty()
        self._check_seq(seq)
        return sel & c.seq[:, seq]

    def _check_seq(self, seq: int) -> None:
        if not 0 <= seq < self.n_seq_max:
            raise ValueError(f"sequence id {seq} out of range [0, {self.n_seq_max})")

    def _drop_empty(self, touched: np.ndarray) -> None:
        c = self.cells
        dead = touched & ~c.seq.any(axis=1)
        if dead.any():
            c.free(dead)
            first = int(np.flatnonzero(dead)[0])
            if first < self.head:
                self.head = first

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        """Remove positions [p0, p1) of seq (seq < 0: of every sequence): one C++ pass over
        the cell table (a speculative decoder calls this after every rejected draft)."""
        if seq is None or seq < 0:
            seq = -1
        else:
            self._check_seq(seq)
        c = self.cells
        first = _core.llm_kv_seq_rm(c.pos, c.seq, c.shift, int(seq),
                                    -1 if p0 is None else int(p0), -1 if p1 is None else int(p1))
        c.changed()
        if 0 <= first < self.head:
            self.head = first
        return True

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        """Let dst share the cells of src in [p0, p1) (unified cache: no data copy)."""
        self._check_seq(dst)
        sel = self._range(src, p0, p1)
        self.cells.seq[sel, dst] = True
        self.cells.changed()

    def seq_keep(self, seq: int) -> None:
        """Drop every sequence but seq."""
        self._check_seq(seq)
        c = self.cells
        keep = c.seq[:, seq].copy()
        c.seq[:] = False
        c.seq[keep, seq] = True
        c.changed()
        self._drop_empty(~keep)

    def seq_add(self, seq: int, p0: int, p1: int, delta: int) -> None:
        """Shift positions [p0, p1) of seq by delta; cached K are re-roped on the next
        update(). Cells moved below position 0 are dropped."""
        if delta == 0:
            return
        c = self.cells
        sel = self._range(seq, p0, p1)
        c.pos[sel] += delta
        c.shift[sel] += delta
        c.changed()
        c.has_shift = c.has_shift or bool(sel.any())
        gone = sel & (c.pos < 0)
        if gone.any():
            c.seq[gone] = False
            self._drop_empty(gone)

    def seq_pos_max(self, seq: int) -> int:
        self._check_seq(seq)
        return self.cells.seq_pos_max(seq)

    def seq_pos_min(self, seq: int) -> int:
        self._check_seq(seq)
        return self.cells.seq_pos_min(seq)

    # ---- host side: input fills --------------------------------------------------------
    def set_input_k_idxs(self, dst, slot: SlotInfo) -> None:
        dst.numpy()[...] = slot.idxs

    def set_input_v_idxs(self, dst, slot: SlotInfo) -> None:
        if not self.v_trans:
            dst.numpy()[...] = slot.idxs
            return
        # one index per (token, channel): channel j of cell c lives at j*size + c
        chans = np.arange(self.e_v, dtype=np.int64) * self.size
        dst.numpy()[...] = (slot.idxs[:, None] + chans[None, :]).ravel()

    def kq_mask(self, ub, n_kv: int, causal: bool = True) -> np.ndarray:
        """Additive mask [T, n_kv] (numpy order): 0 where token i may attend cell j."""
        c = self.cells
        pos_k = c.pos[:n_kv][None, :]
        pos_q = np.asarray(ub.pos, np.int64)[:, None]
        ok = (pos_k >= 0) & c.seq[:n_kv][:, ub.seq_id].T
        if causal:
            ok &= pos_k <= pos_q
        if self.swa_type != SWA_NONE:
            ok &= ~is_masked_swa(self.n_swa, self.swa_type, pos_k, pos_q)
        return np.where(ok, np.float32(0), np.float32(-np.inf))

    def set_input_kq_mask(self, dst, ub, causal: bool = True) -> None:
        """`kq_mask` written straight into dst (in C++: one pass over the n_kv cells)."""
        c = self.cells
        _core.llm_fill_kq_mask(dst, c.pos, c.seq, ub.pos, ub.seq_id, causal, self.swa_type,
                               self.n_swa)

    # ---- graph side ---------------------------------------------------------------------
    def cpy_k(self, ctx, k_cur, k_idxs, il: int):
        """set_rows of k_cur [d, Hkv, T] (dims 0, 1 mergeable) into rows k_idxs of the
        layer's K, in place."""
        k_cur = gg.view_2d(ctx, k_cur, self.e_k, k_cur.ne[2], k_cur.nb[2], 0)
        return gg.set_rows(ctx, self.k_l[self._layer(il)], k_cur, k_idxs)

    def cpy_v(self, ctx, v_cur, v_idxs, il: int):
        if self.k_only:
            return None
        v = self.v_l[self._layer(il)]
        n_tokens = v_cur.ne[2]
        if not self.v_trans:
            v_cur = gg.view_2d(ctx, v_cur, self.e_v, n_tokens, v_cur.nb[2], 0)
            return gg.set_rows(ctx, v, v_cur, v_idxs)
        # transposed: every element is its own row, indices from set_input_v_idxs
        if v_cur.nb[2] == gg.row_size(v_cur.type, self.e_v):
            v_cur = gg.reshape_2d(ctx, v_cur, self.e_v, n_tokens)
        else:
            v_cur = gg.cont_2d(ctx, v_cur, self.e_v, n_tokens)
        v_view = gg.reshape_2d(ctx, v, 1, self.e_v * self.size)
        return gg.set_rows(ctx, v_view, gg.reshape_2d(ctx, v_cur, 1, self.e_v * n_tokens), v_idxs)

    def get_k(self, ctx, il: int, n_kv: int):
        """View [d_k, Hkv, n_kv, 1] of the layer's K."""
        k = self.k_l[self._layer(il)]
        es = gg.row_size(self.type_k, self.head_dim_k)
        return gg.view_4d(ctx, k, self.head_dim_k, self.n_head_kv, n_kv, 1,
                          es, k.nb[1], k.nb[1] * self.size, 0)

    def get_v(self, ctx, il: int, n_kv: int):
        """View of the layer's V: [d_v, Hkv, n_kv, 1], or transposed [n_kv, Hkv, d_v, 1]
        with nb1 > nb2 (how the attention core recognises a transposed V)."""
        if self.k_only:
            return self.get_k(ctx, il, n_kv)
        v = self.v_l[self._layer(il)]
        if not self.v_trans:
            es = gg.row_size(self.type_v, self.head_dim_v)
            return gg.view_4d(ctx, v, self.head_dim_v, self.n_head_kv, n_kv, 1,
                              es, v.nb[1], v.nb[1] * self.size, 0)
        el = gg.type_size(self.type_v)
        return gg.view_4d(ctx, v, n_kv, self.n_head_kv, self.head_dim_v, 1,
                          el * self.size * self.head_dim_v, el * self.size,
                          el * self.size * self.e_v, 0)

    def apply_k_shift(self, hp, n_threads: int = 1, rope_factors=None) -> None:
        """Re-rope cached K by each cell's pending shift (after seq_add), in place."""
        c = self.cells
        if not c.has_shift:
            return
        ctx = gg.Context(mem_size=1 << 20, no_alloc=True)
        g = gg.Graph(ctx, 64 + 8 * self.n_layer)
        pos = ctx.new_tensor(gg.I32, [self.size])
        pos.name = "inp_k_shift"
        pos.set_input()
        for k in self.k_l:
            view = gg.view_3d(ctx, k, self.head_dim_k, self.n_head_kv, self.size,
                              gg.row_size(k.type, self.head_dim_k), k.nb[1], 0)
            x = view if k.type == gg.F32 else gg.cpy(ctx, view, ctx.new_tensor(gg.F32, view.ne))
            x = gg.rope_ext(ctx, x, pos, rope_factors, hp.n_rot, hp.rope_type, hp.n_ctx_train,
                            hp.rope_freq_base, hp.rope_freq_scale, 0.0,
                            getattr(hp, "rope_attn_factor", 1.0), 32.0, 1.0)
            g.build_forward_expand(gg.cpy(ctx, x, view))
        g.alloc()
        pos.numpy()[...] = c.shift
        g.compute(n_threads)
        c.shift[:] = 0
        c.has_shift = False


class KVCacheContext(MemoryContext, AttnPart):
    """A unified cache's plan for one ubatch: its slot; n_kv is fixed when applied."""

    def __init__(self, kv: KVCache, slot: SlotInfo, ub, suffix: str = ""):
        self.kv, self.slot, self.ub, self.suffix = kv, slot, ub, suffix
        self.v_trans = kv.v_trans
        self.n_kv = kv.get_n_kv()

    def apply(self) -> None:
        self.kv.apply_ubatch(self.slot, self.ub)
        self.n_kv = self.kv.get_n_kv()

    def parts(self):
        return [self]

    def is_layer(self, il):
        return self.kv.has_layer(il)

    def cpy_k(self, ctx, k_cur, k_idxs, il):
        return self.kv.cpy_k(ctx, k_cur, k_idxs, il)

    def cpy_v(self, ctx, v_cur, v_idxs, il):
        return self.kv.cpy_v(ctx, v_cur, v_idxs, il)

    def get_k(self, ctx, il):
        return self.kv.get_k(ctx, il, self.n_kv)

    def get_v(self, ctx, il):
        return self.kv.get_v(ctx, il, self.n_kv)

    def v_idxs_len(self, n_tokens):
        if self.kv.k_only:
            return 0
        return n_tokens * self.kv.e_v if self.kv.v_trans else n_tokens

    def set_input_k_idxs(self, dst, ub):
        self.kv.set_input_k_idxs(dst, self.slot)

    def set_input_v_idxs(self, dst, ub):
        self.kv.set_input_v_idxs(dst, self.slot)

    def set_input_kq_mask(self, dst, ub, causal=True):
        self.kv.set_input_kq_mask(dst, ub, causal)
