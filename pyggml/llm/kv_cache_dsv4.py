"""The DeepSeek V4 memory (llama.cpp's llama_kv_cache_dsv4), and its per-ubatch plan.

It composes:
* `raw`: a K-only unified cache with the sliding window `n_swa` (every dsv4 layer attends
  its raw keys through the window; K = V), of n_swa * n_seq_max + n_ubatch cells (padded):
  cells whose keys left every window are reused;
* compressed K caches, zero-initialised, one row per completed block of `ratio` positions:
  CSA (ratio 4, head d) and LID (ratio 4, the indexer head di) on ratio-4 layers, HCA
  (ratio 128, head d) on ratio-128 layers. Sequence s owns rows [s*size, (s+1)*size);
* compressor states: per compressed cache a value and a score table F32 holding, per
  sequence, a ring of the token rows of its last 8 (ratio 4, overlapping blocks read two
  windows) or 128 positions, carried across ubatches, plus n_rs_seq snapshot planes: plane k
  is the ring as it was k positions before the end, so `seq_rm` of up to n_rs_seq trailing
  positions restores the ring from plane k when the sequence continues.

Per ubatch, a `CompPlan` holds for each ratio the host-computed indices the graph uses
(ape rows, the rows each completed block reads from [ring | this ubatch's rows | synthetic
row], the compressed row it writes and its RoPE position, the ring restore, snapshot and
persist lists) and the visibility of compressed rows (a token at position p sees rows
j < (p+1)//ratio). Shapes are stable across steps: every
ubatch where a block completes writes ceil(T/ratio) blocks per sequence (blocks that do not
complete are dummies that write the last row of the sequence's cache, which no token can see
before it becomes a real row); one where none completes (most decode steps) writes none and
its graph has no compression; compressed masks are at least 256 wide.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import pyggml as gg
from pyggml import _core

from .kv_cache import N_PAD, SWA_STANDARD, KVCache, KVCacheContext, pad_to
from .memory import Memory, MemoryContext

CSA_RATIO, HCA_RATIO = 4, 128


class CompCache:
    """Compressed K rows [width, size*n_seq] and, per layer, the compressor state: a value and
    a score table F32 [state_width, S_state*n_seq*(1+n_rs)]. Row (plane, seq, q) =
    (plane*n_seq + seq)*S_state + q holds, in plane 0, the token rows of the last S_state
    positions (slot q = pos % S_state) and, in plane k, that ring as it was k positions
    before the sequence's end (valid for k <= valid[seq])."""

    def __init__(self, *, name: str, layers, ratio: int, width: int, state_width: int,
                 n_ctx: int, n_seq_max: int, type_k, n_rs: int):
        self.name, self.layers, self.ratio = name, list(layers), ratio
        self.width, self.state_width, self.n_seq_max, self.n_rs = width, state_width, n_seq_max, n_rs
        self.size = pad_to(max(1, -(-n_ctx // ratio)), N_PAD)          # rows per sequence
        self.S = 2 * ratio if ratio == CSA_RATIO else ratio             # ring rows per sequence
        self.rows_state = self.S * n_seq_max                           # plane 0 of every stream
        self.rows_all = self.rows_state * (1 + n_rs)
        nbytes = len(self.layers) * (gg.row_size(type_k, width) * self.size * n_seq_max
                                     + 2 * 4 * state_width * self.rows_all + 3072)
        self.ctx = gg.Context(mem_size=nbytes + 4096)
        self.k, self.s_kv, self.s_score = {}, {}, {}
        for il in self.layers:
            k = self.ctx.new_tensor(type_k, [width, self.size * n_seq_max])
            kv = self.ctx.new_tensor(gg.F32, [state_width, self.rows_all])
            sc = self.ctx.new_tensor(gg.F32, [state_width, self.rows_all])
            k.name, kv.name, sc.name = (f"cache_{name}_k_l{il}", f"{name}_state_kv_l{il}",
                                        f"{name}_state_score_l{il}")
            self.k[il], self.s_kv[il], self.s_score[il] = k, kv, sc
        self.clear()

    def row(self, plane: int, seq: int, q: int) -> int:
        return (plane * self.n_seq_max + seq) * self.S + q

    def clear(self) -> None:
        for il in self.layers:
            for t in (self.k[il], self.s_kv[il], self.s_score[il]):
                t.numpy()[...] = 0

    def copy_seq(self, src: int, dst: int) -> None:
        for il in self.layers:
            k = self.k[il].numpy()
            k[dst * self.size:(dst + 1) * self.size] = k[src * self.size:(src + 1) * self.size]
            for t in (self.s_kv[il], self.s_score[il]):
                a = t.numpy()
                for plane in range(1 + self.n_rs):
                    a[self.row(plane, dst, 0):self.row(plane, dst, self.S)] = \
                        a[self.row(plane, src, 0):self.row(plane, src, self.S)]


@dataclass
class CompPlan:
    """One ratio's indices for one ubatch (rows "scratch" = rows_state + token index of the
    graph's source table [plane 0 | this ubatch's rows | synthetic row])."""
    ratio: int
    state_pos: np.ndarray      # I32 [T]   pos % ratio: the ape row
    read_idxs: np.ndarray      # I32 [ratio*nb] (overlap: [2*ratio*nb], all previous halves first)
    write_idxs: np.ndarray     # I64 [nb]  compressed row each block writes
    write_pos: np.ndarray      # I32 [nb]  block start position (RoPE position of its key)
    persist_src: np.ndarray    # I32       ubatch token whose row each touched ring slot takes
    persist_dst: np.ndarray    # I64       its ring row (plane 0), sorted
    restore_src: np.ndarray    # I32 [S]   plane rs -> plane 0 of the stream (empty when rs == 0)
    restore_dst: np.ndarray    # I64 [S]
    snap_src: np.ndarray       # I32 [n_rs*S] rows of [all planes | this ubatch's rows]
    snap_dst: np.ndarray       # I64 [n_rs*S]
    pos: np.ndarray            # I32 [T]   the ubatch's positions
    n_kv: int                  # mask width
    stream: int                # the sequence whose compressed rows the graph views

    @property
    def n_visible(self) -> np.ndarray:
        """[T] compressed rows visible to each token."""
        return (self.pos.astype(np.int64) + 1) // self.ratio

    def key(self) -> tuple:
        k = self.__dict__.get("_key")
        if k is None:
            k = self.__dict__["_key"] = (self.ratio, len(self.write_idxs), len(self.persist_src),
                                         len(self.restore_src), len(self.snap_src), self.n_kv,
                                         self.stream)
        return k


def build_comp_plan(cache: CompCache, ub, overlap: bool, rs: int) -> CompPlan:
    """The plan of one ubatch of one sequence; `rs` is the rollback depth its first token
    continues from (the ring is restored from plane rs; nothing to restore when rs is 0).
    The lists are built in C++ (csrc/python/bind_dsv4_host.cpp): they are rebuilt for every
    decoded token."""
    pos = np.asarray(ub.pos, np.int32)
    lists = _core.dsv4_comp_plan(pos, np.asarray(ub.seq_id, np.int32), cache.ratio, cache.S, cache.size,
                                 cache.rows_state, cache.rows_all, cache.n_seq_max, cache.n_rs,
                                 overlap, rs)
    n_vis = (int(pos[-1]) + 1) // cache.ratio
    n_kv = min(cache.size, max(N_PAD, pad_to(n_vis, N_PAD)))
    return CompPlan(cache.ratio, *lists, pos=pos, n_kv=n_kv, stream=int(ub.seq_id[0]))


def scratch_all(cache: CompCache) -> int:
    """Where this ubatch's rows start in the snapshot source [all planes | ubatch rows]."""
    return cache.rows_all


class DSV4Memory(Memory):
    def __init__(self, *, n_layer: int, ratios, head_dim: int, indexer_head_dim: int, n_swa: int,
                 n_ctx: int, n_seq_max: int = 1, type_k=gg.F16, n_rs_seq: int = 0,
                 n_ubatch: int = 512):
        self.ratios = tuple(int(r) for r in ratios[:n_layer])
        bad = [r for r in self.ratios if r not in (0, CSA_RATIO, HCA_RATIO)]
        if bad:
            raise ValueError(f"dsv4 memory: compress ratios must be 0, 4 or 128, got {bad}")
        self.n_seq_max, self.n_rs_seq = n_seq_max, n_rs_seq
        # the window cache's size (as an iSWA cache's): cells whose keys left every window
        # are reused, so attention reads a window's worth of raw keys, not the whole context
        size = min(pad_to(n_ctx, N_PAD), pad_to(n_swa * n_seq_max + n_ubatch, N_PAD))
        self.raw = KVCache(n_layer=n_layer, n_embd_k_gqa=head_dim, n_embd_v_gqa=head_dim,
                           head_dim_k=head_dim, head_dim_v=head_dim, n_head_kv=1, size=size,
                           type_k=type_k, n_seq_max=n_seq_max, n_swa=n_swa, swa_type=SWA_STANDARD,
                           k_only=True)
        l4 = [il for il, r in enumerate(self.ratios) if r == CSA_RATIO]
        l128 = [il for il, r in enumerate(self.ratios) if r == HCA_RATIO]
        kw = dict(n_ctx=n_ctx, n_seq_max=n_seq_max, type_k=type_k, n_rs=n_rs_seq)
        self.rs_idx = [0] * n_seq_max   # pending rollback depth per sequence
        self.valid = [0] * n_seq_max    # snapshot planes that describe earlier positions
        self.csa = CompCache(name="csa", layers=l4, ratio=CSA_RATIO, width=head_dim,
                             state_width=2 * head_dim, **kw) if l4 else None
        self.lid = CompCache(name="lid", layers=l4, ratio=CSA_RATIO, width=indexer_head_dim,
                             state_width=2 * indexer_head_dim, **kw) if l4 else None
        self.hca = CompCache(name="hca", layers=l128, ratio=HCA_RATIO, width=head_dim,
                             state_width=head_dim, **kw) if l128 else None

    def comp_caches(self):
        return [c for c in (self.csa, self.lid, self.hca) if c is not None]

    def init_batch(self, ubatches):
        raw = self.raw.init_batch(ubatches)
        if raw is None:
            return None
        pending = list(self.rs_idx)     # the first ubatch of a sequence consumes its rollback
        plans = []
        for r, ub in zip(raw, ubatches):
            s = int(ub.seq_id[0])
            plans.append(DSV4Context(self, r, ub, pending[s]))
            pending[s] = 0
        return plans

    def clear(self):
        self.raw.clear()
        for c in self.comp_caches():
            c.clear()
        self.rs_idx = [0] * self.n_seq_max
        self.valid = [0] * self.n_seq_max

    def _rm_check(self, s, p0, p1):
        """None: nothing to do; "clear": drop the sequence; an int: roll back that many
        positions; False: not possible."""
        pmax = self.raw.seq_pos_max(s)
        p0 = 0 if p0 is None or p0 < 0 else p0
        if pmax < 0 or p0 > pmax:
            return None
        if p1 is not None and 0 <= p1 <= pmax:
            return False               # a hole would leave blocks mixing removed and kept rows
        if p0 == 0:
            return "clear"
        r = self.rs_idx[s] + pmax - p0 + 1
        return r if r <= self.valid[s] else False

    def seq_rm(self, seq, p0=-1, p1=-1):
        """Tail removal within the snapshot planes (at most n_rs_seq positions since the
        sequence's last ubatches), or the whole sequence. False (nothing changed) otherwise:
        the compressor rings could not be restored."""
        seqs = list(range(self.n_seq_max)) if seq < 0 else [seq]
        acts = [self._rm_check(s, p0, p1) for s in seqs]
        if any(a is False for a in acts):
            return False
        for s, a in zip(seqs, acts):
            if a is None:
                continue
            if a == "clear":
                self.raw.seq_rm(s, -1, -1)
                self.rs_idx[s] = self.valid[s] = 0
            else:
                self.raw.seq_rm(s, p0, -1)
                self.rs_idx[s] = a
        return True

    def seq_cp(self, src, dst, p0=-1, p1=-1):
        """Whole-sequence copy only, under llama.cpp's condition (p0 <= 0 and p1 < 0): the
        compressed rows and the compressor rings of a prefix cannot be cut out of the state.
        dst is replaced by src, snapshot planes and a pending rollback included (llama.cpp
        copies the live ring only and clears dst's rollback; copying both keeps a copy made
        right after a seq_rm equal to src)."""
        p0 = -1 if p0 is None else int(p0)
        p1 = -1 if p1 is None else int(p1)
        if p0 > 0 or p1 >= 0:
            raise ValueError(f"dsv4 memory: seq_cp copies whole sequences only (p0 <= 0 and p1 < 0), "
                             f"got p0={p0}, p1={p1}: compressed rows and compressor rings cannot be "
                             f"split at a position")
        if src == dst:
            return
        self.raw.seq_rm(dst, -1, -1)
        self.raw.seq_cp(src, dst, -1, -1)
        for c in self.comp_caches():
            c.copy_seq(src, dst)
        self.rs_idx[dst], self.valid[dst] = self.rs_idx[src], self.valid[src]

    def seq_add(self, seq, p0, p1, delta):
        """Shifting positions is refused (llama.cpp's dsv4 memory reports can_shift = false):
        compressed rows hold blocks of fixed positions and the raw keys carry a tail RoPE. A
        zero shift or an empty range changes nothing and is accepted."""
        p0 = 0 if p0 is None or p0 < 0 else int(p0)
        p1 = np.iinfo(np.int64).max if p1 is None or p1 < 0 else int(p1)
        if delta == 0 or p0 >= p1:
            return
        seqs = range(self.n_seq_max) if seq is None or seq < 0 else [seq]
        if all(self.raw.seq_pos_max(s) < p0 or self.raw.seq_pos_min(s) >= p1 for s in seqs):
            return
        raise ValueError(f"dsv4 memory: seq_add cannot shift positions [{p0}, {p1}) of sequence {seq} "
                         f"by {delta}: the compressed rows and rings are tied to block positions "
                         f"(K-shift is not supported for deepseek4)")

    def seq_keep(self, seq):
        self.raw.seq_keep(seq)
        for s in range(self.n_seq_max):
            if s != seq:
                self.rs_idx[s] = self.valid[s] = 0

    def seq_pos_min(self, seq):
        return self.raw.seq_pos_min(seq)

    def seq_pos_max(self, seq):
        return self.raw.seq_pos_max(seq)


class DSV4Context(MemoryContext):
    """The raw cache's slot plus one CompPlan per ratio for one ubatch."""

    def __init__(self, mem: DSV4Memory, raw: KVCacheContext, ub, rs: int):
        self.mem, self.raw, self.ub, self.rs = mem, raw, ub, rs
        self.plan4 = build_comp_plan(mem.csa, ub, overlap=True, rs=rs) if mem.csa else None
        self.plan128 = build_comp_plan(mem.hca, ub, overlap=False, rs=rs) if mem.hca else None

    def apply(self):
        self.raw.apply()
        m, s = self.mem, int(self.ub.seq_id[0])
        m.valid[s] = min(m.n_rs_seq, self.ub.n_tokens + m.valid[s] - self.rs)
        m.rs_idx[s] = 0

    def parts(self):
        return [self.raw]

    def shape_key(self):
        return (self.raw.n_kv,) + tuple(p.key() for p in (self.plan4, self.plan128) if p is not None)

    def plan(self, ratio: int) -> CompPlan:
        return self.plan4 if ratio == CSA_RATIO else self.plan128

    def get_comp_k(self, ctx, cache: CompCache, il: int, n_kv: int, stream: int):
        """View [width, 1, n_kv, 1] of sequence `stream`'s compressed rows."""
        k = cache.k[il]
        return gg.view_4d(ctx, k, cache.width, 1, n_kv, 1, k.nb[1], k.nb[1], k.nb[1] * n_kv,
                          k.nb[1] * cache.size * stream)
