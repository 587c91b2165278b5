"""The DeepSeek V4 memory (llama.cpp's llama_kv_cache_dsv4), and its per-ubatch plan.

It composes:
* `raw`: a K-only unified cache with the sliding window `n_swa` (every dsv4 layer attends
  its raw keys through the window; K = V);
* compressed K caches, zero-initialised, one row per completed block of `ratio` positions:
  CSA (ratio 4, head d) and LID (ratio 4, the indexer head di) on ratio-4 layers, HCA
  (ratio 128, head d) on ratio-128 layers. Sequence s owns rows [s*size, (s+1)*size);
* compressor states: per compressed cache a value and a score table F32 [width, rows] with
  one row per (sequence, position) plus one synthetic row (value 0, score -inf) that the
  first overlapping block reads as its "previous window".

Where upstream keeps only a ring of the last 8 (ratio 4) or 128 positions with n_rs_seq
rollback snapshot planes, this memory keeps a row per position: any block can be recomputed
after any tail `seq_rm`, so rollback needs no snapshots (n_rs_seq is accepted and unused).

Per ubatch, `DSV4Plan` holds for each ratio the host-computed indices the graph uses
(state rows of the ubatch's tokens, ape rows, the rows each completed block reads, the
compressed row it writes and its RoPE position) and the visibility of compressed rows
(token at position p sees rows j < (p+1)//ratio). Shapes are stable across steps: every
ubatch writes ceil(T/ratio) blocks per sequence (blocks that do not complete are dummies
that write the last row of the sequence's cache, which no token can see before it becomes
a real row), and compressed masks are at least 256 wide.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import pyggml as gg

from .kv_cache import N_PAD, SWA_STANDARD, KVCache, KVCacheContext, pad_to
from .memory import Memory, MemoryContext

CSA_RATIO, HCA_RATIO = 4, 128


class CompCache:
    """Compressed K rows [width, size*n_seq] and the compressor state of the given layers."""

    def __init__(self, *, name: str, layers, ratio: int, width: int, state_width: int,
                 n_ctx: int, n_seq_max: int, type_k):
        self.name, self.layers, self.ratio = name, list(layers), ratio
        self.width, self.state_width, self.n_seq_max = width, state_width, n_seq_max
        self.size = pad_to(max(1, -(-n_ctx // ratio)), N_PAD)          # rows per sequence
        self.n_pos = pad_to(n_ctx, N_PAD)                              # state rows per sequence
        self.syn_row = self.n_pos * n_seq_max                          # the synthetic row
        n_rows = self.syn_row + 1
        nbytes = len(self.layers) * (gg.row_size(type_k, width) * self.size * n_seq_max
                                     + 2 * 4 * state_width * n_rows + 3072)
        self.ctx = gg.Context(mem_size=nbytes + 4096)
        self.k, self.s_kv, self.s_score = {}, {}, {}
        for il in self.layers:
            k = self.ctx.new_tensor(type_k, [width, self.size * n_seq_max])
            kv = self.ctx.new_tensor(gg.F32, [state_width, n_rows])
            sc = self.ctx.new_tensor(gg.F32, [state_width, n_rows])
            k.name, kv.name, sc.name = (f"cache_{name}_k_l{il}", f"{name}_state_kv_l{il}",
                                        f"{name}_state_score_l{il}")
            self.k[il], self.s_kv[il], self.s_score[il] = k, kv, sc
        self.clear()

    def clear(self) -> None:
        for il in self.layers:
            self.k[il].numpy()[...] = 0
            self.s_kv[il].numpy()[...] = 0
            sc = self.s_score[il].numpy()
            sc[...] = 0
            sc[self.syn_row] = -np.inf

    def copy_seq(self, src: int, dst: int) -> None:
        for il in self.layers:
            k = self.k[il].numpy()
            k[dst * self.size:(dst + 1) * self.size] = k[src * self.size:(src + 1) * self.size]
            for t in (self.s_kv[il], self.s_score[il]):
                a = t.numpy()
                a[dst * self.n_pos:(dst + 1) * self.n_pos] = a[src * self.n_pos:(src + 1) * self.n_pos]

    def state_row(self, seq: int, pos: int) -> int:
        return self.syn_row if pos < 0 else seq * self.n_pos + pos


@dataclass
class CompPlan:
    """One ratio's indices for one ubatch."""
    ratio: int
    state_rows: np.ndarray     # I64 [T]   state row of each token (its kv/score row is written there)
    state_pos: np.ndarray      # I32 [T]   pos % ratio: the ape row
    read_idxs: np.ndarray      # I32 [ratio*nb] (overlap: [2*ratio*nb], all previous halves first)
    write_idxs: np.ndarray     # I64 [nb]  compressed row each block writes
    write_pos: np.ndarray      # I32 [nb]  block start position (RoPE position of its key)
    n_visible: np.ndarray      # [T] compressed rows visible to each token
    n_kv: int                  # mask width
    stream: int                # the sequence whose compressed rows the graph views

    def key(self) -> tuple:
        return (self.ratio, len(self.write_idxs), self.n_kv, self.stream)


def build_comp_plan(cache: CompCache, ub, overlap: bool) -> CompPlan:
    r = cache.ratio
    pos = np.asarray(ub.pos, np.int64)
    seqs = np.asarray(ub.seq_id, np.int64)
    if len(set(seqs.tolist())) != 1:
        raise ValueError("dsv4 memory: a ubatch must hold one sequence")
    s = int(seqs[0])
    rows = np.array([cache.state_row(s, int(p)) for p in pos], np.int64)
    prev, cur, w_idx, w_pos = [], [], [], []
    for p in pos.tolist():
        if (p + 1) % r:
            continue
        b = p + 1 - r
        w_idx.append(s * cache.size + p // r)
        w_pos.append(b)
        if overlap:
            prev += [cache.state_row(s, b - r + j) for j in range(r)]
        cur += [cache.state_row(s, b + j) for j in range(r)]
    n_slots = -(-len(pos) // r)
    first = cache.state_row(s, int(pos[0]))
    while len(w_idx) < n_slots:  # dummies: finite garbage into a row no token sees yet
        w_idx.append(s * cache.size + cache.size - 1)
        w_pos.append(0)
        if overlap:
            prev += [first] * r
        cur += [first] * r
    n_visible = (pos + 1) // r
    n_kv = min(cache.size, max(N_PAD, pad_to(int(n_visible.max()), N_PAD)))
    return CompPlan(ratio=r, state_rows=rows, state_pos=(pos % r).astype(np.int32),
                    read_idxs=np.array(prev + cur, np.int32),
                    write_idxs=np.array(w_idx, np.int64), write_pos=np.array(w_pos, np.int32),
                    n_visible=n_visible, n_kv=n_kv, stream=s)


class DSV4Memory(Memory):
    def __init__(self, *, n_layer: int, ratios, head_dim: int, indexer_head_dim: int, n_swa: int,
                 n_ctx: int, n_seq_max: int = 1, type_k=gg.F16, n_rs_seq: int = 0):
        self.ratios = tuple(int(r) for r in ratios[:n_layer])
        bad = [r for r in self.ratios if r not in (0, CSA_RATIO, HCA_RATIO)]
        if bad:
            raise ValueError(f"dsv4 memory: compress ratios must be 0, 4 or 128, got {bad}")
        self.n_seq_max, self.n_rs_seq = n_seq_max, n_rs_seq
        size = pad_to(n_ctx, N_PAD)
        self.raw = KVCache(n_layer=n_layer, n_embd_k_gqa=head_dim, n_embd_v_gqa=head_dim,
                           head_dim_k=head_dim, head_dim_v=head_dim, n_head_kv=1, size=size,
                           type_k=type_k, n_seq_max=n_seq_max, n_swa=n_swa, swa_type=SWA_STANDARD,
                           k_only=True)
        l4 = [il for il, r in enumerate(self.ratios) if r == CSA_RATIO]
        l128 = [il for il, r in enumerate(self.ratios) if r == HCA_RATIO]
        kw = dict(n_ctx=n_ctx, n_seq_max=n_seq_max, type_k=type_k)
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
        return [DSV4Context(self, r, ub) for r, ub in zip(raw, ubatches)]

    def clear(self):
        self.raw.clear()
        for c in self.comp_caches():
            c.clear()

    def seq_rm(self, seq, p0=-1, p1=-1):
        """Tail removal (p1 < 0 or beyond the last position) or a whole sequence; a range in
        the middle would leave compressed blocks that mix removed and kept positions."""
        seqs = range(self.n_seq_max) if seq < 0 else [seq]
        for s in seqs:
            pmax = self.raw.seq_pos_max(s)
            if not (p1 < 0 or p1 > pmax or p0 > pmax):
                return False
        return self.raw.seq_rm(seq, p0, -1)

    def seq_cp(self, src, dst, p0=-1, p1=-1):
        if src == dst:
            return
        if (p0 is not None and p0 > 0) or (p1 is not None and 0 <= p1 <= self.raw.seq_pos_max(src)):
            raise ValueError("dsv4 memory: seq_cp copies whole sequences only (p0 = p1 = -1)")
        self.raw.seq_rm(dst, -1, -1)
        self.raw.seq_cp(src, dst, -1, -1)
        for c in self.comp_caches():
            c.copy_seq(src, dst)

    def seq_keep(self, seq):
        self.raw.seq_keep(seq)

    def seq_pos_min(self, seq):
        return self.raw.seq_pos_min(seq)

    def seq_pos_max(self, seq):
        return self.raw.seq_pos_max(seq)


class DSV4Context(MemoryContext):
    """The raw cache's slot plus one CompPlan per ratio for one ubatch."""

    def __init__(self, mem: DSV4Memory, raw: KVCacheContext, ub):
        self.mem, self.raw, self.ub = mem, raw, ub
        self.plan4 = build_comp_plan(mem.csa, ub, overlap=True) if mem.csa else None
        self.plan128 = build_comp_plan(mem.hca, ub, overlap=False) if mem.hca else None

    def apply(self):
        self.raw.apply()

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

    @staticmethod
    def comp_mask(plan: CompPlan, n_kv: int) -> np.ndarray:
        j = np.arange(n_kv)[None, :]
        return np.where(j < plan.n_visible[:, None], np.float32(0), np.float32(-np.inf))
