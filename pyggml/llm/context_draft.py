"""A decoding context for draft models (EAGLE3, DFlash): batches of float rows, optional
non-causal attention and tensors borrowed from the target.

`DraftContext.process(pos, token=, embd=)` runs one ubatch of token ids, float rows or both (the
architecture's graph picks its mode from which are present). `memory=False` runs it without
touching the memory (EAGLE3's encoder). After each call `logits` holds the output rows,
`h_nextn` the graph's hidden-state side channel (EAGLE3's g / pre-norm state, DSpark's
confidences, DFlash2's selector lattice) and `embd_out` its `t_embd`.

A draft that has no token embedding or output matrix of its own takes the target's: the
builder asks `shared_tensor`, which looks in the draft first and then in `other` (the
target model), like llama.cpp's ctx_other.
"""
from __future__ import annotations

import time

import numpy as np

from .context import Context
from .graph import GraphParams
from .inputs import UBatch
from .inputs_draft import shared_tensor  # noqa: F401  (re-exported)


class DraftContext(Context):
    """Context over a draft model. `other` is the target Model (shared tensors);
    `causal_attn=False` gives every token of a batch the whole sequence (DFlash's block)."""

    # injection / pair batches come in every length from 1 to n_max + 1, next to the block
    # and encoder graphs: keep them all built
    MAX_GRAPHS = 24

    def __init__(self, model, other=None, causal_attn: bool = True, **kw):
        super().__init__(model, **kw)
        self.other = other
        self.causal_attn = bool(causal_attn)
        self.h_nextn = self.embd_out = self.sampled = None

    def process(self, pos, token=None, embd=None, output=None, seq_id: int = 0,
                memory: bool = True, sample: bool = False):
        """One ubatch at positions `pos` of sequence seq_id (an int, or one id per token for a
        batch of several sequences, each contiguous). Returns the logits of the rows flagged
        in `output` (None when the graph has no logits). With `sample` the graph takes the
        argmax of every output row (`sampled`, int32 [n_outputs]) and the logits stay in it
        (returned None, `logits` None): a greedy draft copies ids, not rows."""
        pos = np.asarray(pos, np.int32).ravel()
        n = len(pos)
        if n == 0:
            raise ValueError("DraftContext.process: empty batch")
        if n > self.n_ubatch:
            raise ValueError(f"DraftContext.process: {n} tokens exceed n_ubatch={self.n_ubatch}")
        if token is None and embd is None:
            raise ValueError("DraftContext.process: pass token ids, float rows or both")
        tok = None if token is None else self._check_tokens(token)
        if tok is not None and len(tok) != n:
            raise ValueError(f"DraftContext.process: {len(tok)} token ids for {n} positions")
        rows = None
        if embd is not None:
            rows = np.ascontiguousarray(embd, np.float32).reshape(n, -1)
        out = np.zeros(n, bool) if output is None else np.asarray(output, bool).ravel().copy()
        if len(out) != n:
            raise ValueError(f"DraftContext.process: {len(out)} output flags for {n} positions")
        want = out.any()
        if not want:
            out[-1] = True  # no 0-row tensors; the row is computed and dropped
        if np.ndim(seq_id):
            seqs = np.asarray(seq_id, np.int32).ravel()
            if len(seqs) != n:
                raise ValueError(f"DraftContext.process: {len(seqs)} sequence ids for {n} positions")
            for s in np.unique(seqs):
                self._check_seq(int(s), "process")
        else:
            seqs = np.full(n, self._check_seq(seq_id, "process"), np.int32)
        ub = UBatch(pos=pos, seq_id=seqs, output=out, token=tok, embd=rows)
        mctx = None
        if memory:
            self.memory.update(self.n_threads)
            plans = self.memory.init_batch([ub])
            if plans is None:
                raise ValueError(f"DraftContext.process: the draft memory has no room for {n} "
                                 f"more tokens")
            mctx = plans[0]
            mctx.apply()
        try:
            params = GraphParams(arch=self.hparams.arch, hparams=self.hparams, ubatch=ub,
                                 n_outputs=ub.n_outputs, flash_attn=self.flash_attn, mctx=mctx,
                                 causal_attn=self.causal_attn, outputs=self.outputs,
                                 samplers=("greedy",) if sample else ())
            params.other_model = self.other
            t0 = time.perf_counter()
            res = self._get_graph(params)
            res.set_inputs(ub)
            res.gf.compute(self.n_threads)
            self.timings["t_compute_s"] += time.perf_counter() - t0
            self.timings["n_ubatch"] += 1
            self.timings["n_tokens"] += n
        except BaseException:
            if memory:
                for s in np.unique(seqs):
                    p0 = int(pos[seqs == s].min())
                    if not self.memory.seq_rm(int(s), p0, -1):
                        self.memory.seq_rm(int(s), -1, -1)
            raise
        self._last = res
        self.logits = self.h_nextn = self.embd_out = self.sampled = None
        if sample and res.t_sampled is not None:
            ids = np.array(res.sampled_view(), np.int32)
            if len(ids) == n and n != ub.n_outputs:     # a graph that keeps every row
                ids = ids[ub.output]
            self.sampled = ids if want else None
        elif res.t_logits is not None:
            lg = np.array(res.t_logits.numpy(), np.float32)
            lg = lg.reshape(-1, lg.shape[-1])
            if lg.shape[0] == n and n != ub.n_outputs:  # a graph that keeps every row
                lg = lg[ub.output]
            self.logits = lg if want else None
        if res.t_h_nextn is not None:
            self.h_nextn = np.array(res.t_h_nextn.numpy(), np.float32).reshape(-1, res.t_h_nextn.ne[0])
        if res.t_embd is not None:
            self.embd_out = np.array(res.t_embd.numpy(), np.float32).reshape(-1, res.t_embd.ne[0])
        return self.logits
