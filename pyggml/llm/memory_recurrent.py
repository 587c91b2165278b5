"""Recurrent state memory (llama.cpp's llama_memory_recurrent), and its per-ubatch plan.

Each recurrent layer keeps two F32 state tables: the conv state `r_l [n_embd_r, rows]`
(the last d_conv-1 inputs of its causal convolution) and the scan state `s_l [n_embd_s,
rows]`. A sequence owns one cell (cell = sequence id), and the tables hold 1 + n_rs_seq
planes of `size` cells: row `plane*size + cell`. Plane 0 is the live state; plane k is the
state k tokens before the end of the sequence's last ubatch (written for k < that
ubatch's length), which is what lets `seq_rm` undo up to n_rs_seq trailing tokens
without re-running the prefix.

Rollback: `seq_rm(seq, p0, -1)` removing r = pos_max - p0 + 1 positions, 1 <= r <=
n_rs_seq, with no rollback pending and plane r written, records `rs_idx[seq] = r`; the
next ubatch of that sequence reads its starting state from plane r (`s_copy` = r*size +
cell) and consumes the index. Anything else that is not a whole-sequence removal returns
False and changes nothing (the caller re-decodes from scratch).

A fresh cell's state is cleared inside the graph (`rs_zero`: the row is scaled by 0
before it is read), so a new sequence starts from zeros without a host write.
"""
from __future__ import annotations

import numpy as np

import pyggml as gg

from .inputs import GraphInput, _host_view, _input
from .memory import Memory, MemoryContext


class RecurrentMemory(Memory):
    """Conv and scan states of `layers` for `n_seq_max` sequences with `n_rs_seq` snapshots."""

    def __init__(self, *, layers, n_embd_r: int, n_embd_s: int, n_seq_max: int = 1,
                 n_rs_seq: int = 0):
        if n_embd_r <= 0 or n_embd_s <= 0:
            raise ValueError(f"recurrent memory: state sizes must be positive, got "
                             f"n_embd_r={n_embd_r}, n_embd_s={n_embd_s}")
        self.layers = [int(i) for i in layers]
        self.n_embd_r, self.n_embd_s = int(n_embd_r), int(n_embd_s)
        self.n_seq_max, self.n_rs_seq = int(n_seq_max), int(n_rs_seq)
        self.size = max(1, self.n_seq_max)
        self.n_rows = self.size * (1 + self.n_rs_seq)
        nbytes = len(self.layers) * 4 * (self.n_embd_r + self.n_embd_s) * self.n_rows
        self.ctx = gg.Context(mem_size=nbytes + 1024 * (2 * len(self.layers) + 4))
        self.r_l, self.s_l = {}, {}
        for il in self.layers:
            r = self.ctx.new_tensor(gg.F32, [self.n_embd_r, self.n_rows])
            s = self.ctx.new_tensor(gg.F32, [self.n_embd_s, self.n_rows])
            r.name, s.name = f"cache_r_l{il}", f"cache_s_l{il}"
            r.numpy()[...] = 0
            s.numpy()[...] = 0
            self.r_l[il], self.s_l[il] = r, s
        # trailing tokens of a batch that must share one ubatch (its snapshots name them)
        self.keep_tail = self.n_rs_seq + 1 if self.n_rs_seq else 0
        self.clear()

    def has_layer(self, il: int) -> bool:
        return il in self.r_l

    def row(self, plane: int, cell: int) -> int:
        return plane * self.size + cell

    # ---- host-side sequence state -----------------------------------------------------
    def clear(self) -> None:
        self.pos = [-1] * self.size         # last position of each cell's sequence (-1: empty)
        self.fresh = [True] * self.size     # state must start from zeros
        self.rs_idx = [0] * self.size       # pending rollback depth
        self.valid = [0] * self.size        # snapshot planes describing earlier positions

    def _drop(self, s: int) -> None:
        self.pos[s], self.fresh[s], self.rs_idx[s], self.valid[s] = -1, True, 0, 0

    def _cell_of(self, ub) -> int:
        seqs = ub.seq_id
        s = int(seqs[0])
        if len(seqs) > 1 and np.any(seqs != s):
            raise ValueError("recurrent memory: a ubatch must hold tokens of one sequence")
        if not 0 <= s < self.size:
            raise ValueError(f"recurrent memory: seq_id {s} out of range [0, {self.size})")
        return s

    def init_batch(self, ubatches):
        if len(ubatches) == 1:          # a decode step: nothing to carry between ubatches
            ub = ubatches[0]
            s = self._cell_of(ub)
            return [RecurrentContext(self, ub, s, self.rs_idx[s], self.fresh[s])]
        pending = list(self.rs_idx)     # the first ubatch of a sequence consumes its rollback
        fresh = list(self.fresh)        # ... and clears a fresh cell
        plans = []
        for ub in ubatches:
            s = self._cell_of(ub)
            plans.append(RecurrentContext(self, ub, s, pending[s], fresh[s]))
            pending[s], fresh[s] = 0, False
        return plans

    def seq_rm(self, seq, p0=-1, p1=-1):
        p0 = 0 if p0 is None or p0 < 0 else int(p0)
        p1 = np.iinfo(np.int64).max if p1 is None or p1 < 0 else int(p1)
        if seq < 0:
            if p0 >= p1:
                return True
            if p0 != 0 or p1 != np.iinfo(np.int64).max:
                return False                 # every sequence: all or nothing
            self.clear()
            return True
        if not 0 <= seq < self.size:
            return False
        pos = self.pos[seq]
        if pos < 0 or p0 >= p1 or p0 > pos:
            return True                      # nothing of the sequence is in the range
        if p1 <= pos:
            return False                     # a hole: the state cannot forget the middle
        if p0 == 0:
            self._drop(seq)
            return True
        r = pos - p0 + 1
        if self.rs_idx[seq] or r > min(self.n_rs_seq, self.valid[seq]):
            return False                     # beyond the snapshot window (or already pending)
        self.rs_idx[seq] = r
        self.pos[seq] = p0 - 1
        return True

    def _copy_cell(self, src: int, dst: int) -> None:
        for il in self.layers:
            for t in (self.r_l[il], self.s_l[il]):
                a = t.numpy()
                for plane in range(1 + self.n_rs_seq):
                    a[self.row(plane, dst)] = a[self.row(plane, src)]
        for name in ("pos", "fresh", "rs_idx", "valid"):
            getattr(self, name)[dst] = getattr(self, name)[src]

    def seq_cp(self, src, dst, p0=-1, p1=-1):
        if src == dst:
            return
        pos = self.pos[src]
        if (p0 is not None and p0 > 0) or (p1 is not None and 0 <= p1 <= pos):
            raise ValueError("recurrent memory: seq_cp copies whole sequences only "
                             "(p0 = p1 = -1): a state cannot be cut at a position")
        self._copy_cell(src, dst)

    def seq_keep(self, seq):
        for s in range(self.size):
            if s != seq:
                self._drop(s)

    def seq_pos_min(self, seq):
        return self.pos[seq]

    def seq_pos_max(self, seq):
        return self.pos[seq]


class RecurrentContext(MemoryContext):
    """One ubatch of one sequence: its cell (`head`), the plane its starting state is read
    from (`rs`), whether the cell is cleared first (`rs_zero`), and K = n_rs_seq + 1."""

    def __init__(self, mem: RecurrentMemory, ub, cell: int, rs: int, fresh: bool):
        self.mem, self.ub, self.head, self.rs = mem, ub, cell, rs
        n = len(ub.pos)
        self.n_seqs, self.n_seq_tokens = 1, n
        self.size = size = mem.size
        self.rs_zero = cell if fresh else -1          # row of plane 0
        self.K = K = mem.n_rs_seq + 1
        self.n_written = n if n < K else K
        self.src_row = rs * size + cell               # the row the starting state is read from
        self.key = (cell, self.rs_zero, self.n_written, K)

    def apply(self):
        m, s = self.mem, self.head
        m.pos[s] = int(self.ub.pos[-1])
        m.fresh[s] = False
        m.rs_idx[s] = 0
        m.valid[s] = self.n_written - 1

    def recr(self) -> "RecurrentContext":
        return self

    def shape_key(self):
        return self.key

    def get_r_l(self, il: int):
        return self.mem.r_l[il]

    def get_s_l(self, il: int):
        return self.mem.s_l[il]

    def s_copy(self) -> np.ndarray:
        """The source row of each sequence's starting state (plane rs of its cell)."""
        return np.array([self.src_row], np.int32)


class InpRS(GraphInput):
    """The recurrent input: `s_copy` I32 [n_seqs], the state row each sequence starts from.
    Every ubatch holds one sequence whose cell is written in place, so no other cell needs
    the copy upstream does for untouched cells."""

    def __init__(self, ctx, rctx: RecurrentContext):
        self.rctx = rctx
        self.s_copy = _input(ctx, gg.I32, [rctx.n_seqs], "inp_s_copy")
        self._view = False

    def set_input(self, ub):
        if self._view is False:
            self._view = _host_view(self.s_copy)
        if self._view is not None:
            self._view[0] = self.rctx.src_row    # one sequence per ubatch

    def can_reuse(self, params):
        r = params.mctx.recr()
        ok = r.key == self.rctx.key
        self.rctx = r
        return ok


def build_rs(g, inp: InpRS, states_all, state_size: int, get_state_rows=None):
    """The starting states [state_size, n_seqs] of this ubatch's sequences from the table
    `states_all` (rows of state_size): clear the fresh row, then gather `s_copy`'s rows
    (or let `get_state_rows(ctx, states_2d, s_copy)` do the gather, e.g. a scan op that
    reads its start state by index)."""
    c, r = g.ctx0, inp.rctx
    states = gg.reshape_2d(c, states_all, state_size, states_all.ne[1])
    if r.rs_zero >= 0:
        row = gg.view_1d(c, states, state_size, r.rs_zero * states.nb[1])
        g.expand(gg.scale_inplace(c, row, 0.0))
    if get_state_rows is None:
        out = gg.get_rows(c, states, inp.s_copy)
    else:
        out = get_state_rows(c, states, inp.s_copy)
    return g.expand(out)
