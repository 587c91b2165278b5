"""decode_greedy's and decode_greedy_rows's shortcut (a mixin of Context): a one-token (or
verify-width) step through the graph of an earlier decode of the same width, its inputs filled
by one C++ call (KvDecodeStep) instead of the memory plan and every input's set_input. Any
condition it cannot meet sends the call down Context's general path, which yields the same
cells, inputs and ids."""
from __future__ import annotations

import time

import numpy as np

import pyggml as gg

from .graph import GraphResult
from .inputs import InpAttn, InpEmbd, InpOutIds, InpPos
from .kv_cache import SWA_NONE, KVCache


class DecodeShortcuts:
    """The shortcut's steps; Context supplies the memory, graphs and timings they use."""

    def _step_usable(self, st: "_DecodeStep", seq_id) -> bool:
        """Whether the shortcut's graph and memory are still the ones it was armed with."""
        kv, c = self.memory, st.cells
        return not (not self.fast_decode or type(seq_id) is not int
                    or not 0 <= seq_id < self.n_seq_max or self.collected is not None
                    or self.embeddings_nextn or self.flash_attn is not st.flash_attn
                    or kv is not st.kv or kv.cells is not c
                    or (c.has_shift and kv.k_shift is not None)
                    or self._graphs.get(st.key) is not st.res)

    def _decode_step(self, st: "_DecodeStep", t, seq_id, t0: float) -> int:
        """decode_greedy of one token through the graph of the previous one-token step: the
        same cell, inputs, graph and bookkeeping as _decode, in one C++ fill instead of the
        memory plan and every input's set_input. -1 (nothing changed) when any condition of
        that shortcut fails; decode_greedy then takes the general path."""
        if type(t) is not int or not 0 <= t < st.n_vocab or not self._step_usable(st, seq_id):
            return -1
        kv, c = self.memory, st.cells
        if not c._counted:
            c._count()
        p = int(c._seq_max[seq_id]) + 1
        if p >= self.n_ctx:
            return -1                       # the general path raises the error
        region = kv.seq_region
        if region:                          # find_slot's per-sequence region: cell seq * region + p
            head = seq_id * region + p
            if p >= region or c.pos[head] >= 0:
                return -1
        else:
            head = kv.head
            if head > c._n_used + 2:        # find_slot's refill from 0
                head = 0
        t1 = time.perf_counter()
        cell = st.fill.step(t, p, seq_id, head, c._max_p1)
        if cell < 0:
            return -1
        c._n_used += 1                      # KVCells.add of one cell
        if cell >= c._max_p1:
            c._max_p1 = cell + 1
        c._seq_max[seq_id] = p
        kv.head = cell + 1 if cell + 1 < kv.size else 0
        self._compute_step(st, seq_id, p, 1, t0, t1)
        return int(st.sampled[0])

    def _decode_rows_step(self, steps: list, ids: list, seq_id, t0: float):
        """decode_greedy_rows of n > 1 ids through the graph of an earlier decode of n ids (the
        shortcut of _decode_step for a verify batch), the first of `steps` whose graph takes
        them (its n_kv is the one the tokens give); None (nothing changed) when none can:
        then the general path runs."""
        st = steps[0]
        if not self._step_usable(st, seq_id):     # the memory is still the KV cache it was
            steps = [o for o in steps[1:] if self._step_usable(o, seq_id)]
            if not steps:
                return None
            st = steps[0]
        n_vocab = st.n_vocab
        for t in ids:
            if type(t) is not int or not 0 <= t < n_vocab:
                return None
        kv, c = self.memory, st.cells
        if kv.seq_region:                   # per-sequence regions: the general path places them
            return None
        if not c._counted:
            c._count()
        n = len(ids)
        p = int(c._seq_max[seq_id]) + 1
        if p + n > self.n_ctx:
            return None
        head = kv.head
        if head > c._n_used + 2 * n:        # find_slot's refill from 0
            head = 0
        t1 = time.perf_counter()
        for st in steps:
            if st is steps[0] or self._step_usable(st, seq_id):
                cells = st.fill.step_n(ids, p, seq_id, head, c._max_p1)
                if cells is not None:
                    break
        else:
            return None
        last, top = cells
        c._n_used += n                      # KVCells.add of n empty cells
        if top >= c._max_p1:
            c._max_p1 = top + 1
        c._seq_max[seq_id] = p + n - 1
        kv.head = last + 1 if last + 1 < kv.size else 0
        self._compute_step(st, seq_id, p, n, t0, t1)
        return np.array(st.sampled[:n], np.int32)

    def _compute_step(self, st: "_DecodeStep", seq_id: int, p: int, n: int, t0: float,
                      t1: float) -> None:
        """The shortcut's compute of n tokens from position p and _process_ubatch's
        bookkeeping (a failed compute forgets the tokens' cells)."""
        kv = self.memory
        self._graphs.move_to_end(st.key)
        t2 = time.perf_counter()
        try:
            st.gf.compute(self.n_threads)
        except BaseException:
            if not kv.seq_rm(seq_id, p, -1):
                kv.seq_rm(seq_id, -1, -1)
            raise
        t3 = time.perf_counter()
        self._last = st.res
        self._logits, self._logits_src = None, (st.res, n)
        tm = self.timings
        tm["n_graph_reuse"] += 1
        tm["t_set_input_s"] += t2 - t1
        tm["t_compute_s"] += t3 - t2
        tm["t_host_s"] += t1 - t0
        tm["n_ubatch"] += 1
        tm["n_tokens"] += n
        tm["t_decode_s"] += time.perf_counter() - t0


class _DecodeStep:
    """What decode_greedy's one-token shortcut needs of the last one-token graph: the graph,
    its key, the C++ filler of its inputs and the memory it plans against. `arm` returns None
    unless the graph is exactly the llama-family decode step the filler knows how to feed: a
    unified KVCache without SWA as the context's memory, a reused (cached) graph with the
    in-graph greedy sampler, and only token, position, attention and output-row inputs."""

    __slots__ = ("res", "key", "gf", "fill", "kv", "cells", "sampled", "n_vocab", "flash_attn")

    @classmethod
    def arm(cls, ctx, res: GraphResult) -> "_DecodeStep | None":
        kv = ctx.memory
        params = res.params
        if (type(kv) is not KVCache or (kv.swa_type != SWA_NONE and kv.n_swa > 0)
                or not ctx.graph_reuse or ctx.cparams.ctx_type != "default"
                or ctx.embeddings_nextn or res.t_sampled is None or params is None
                or params.n_outputs != params.ubatch.n_tokens
                or ctx._graphs.get(params.key()) is not res):
            return None
        by_type = {}
        for inp in res.inputs:
            if type(inp) not in (InpEmbd, InpPos, InpAttn, InpOutIds) or type(inp) in by_type:
                return None
            by_type[type(inp)] = inp
        emb, attn = by_type.get(InpEmbd), by_type.get(InpAttn)
        if emb is None or emb.tokens is None or attn is None or len(attn.tensors) != 1:
            return None
        parts = attn.mctx.parts()
        if len(parts) != 1 or getattr(parts[0], "kv", None) is not kv:
            return None
        k_idxs, v_idxs, mask = attn.tensors[0]
        if k_idxs is None or (v_idxs is None) != kv.k_only:
            return None
        pos = by_type.get(InpPos)
        out = by_type.get(InpOutIds)
        st = cls()
        st.res, st.key, st.gf, st.kv, st.cells = res, params.key(), res.gf, kv, kv.cells
        st.fill = gg._core.KvDecodeStep(
            kv.cells.pos, kv.cells.seq, emb.tokens, None if pos is None else pos.pos,
            None if out is None else out.out_ids, k_idxs, v_idxs, mask,
            kv.e_v if (kv.v_trans and v_idxs is not None) else 0, kv.n_pad, attn.causal,
            params.ubatch.n_tokens)
        st.sampled = res.sampled_view()
        st.n_vocab = ctx.hparams.n_vocab
        st.flash_attn = ctx.flash_attn
        return st
