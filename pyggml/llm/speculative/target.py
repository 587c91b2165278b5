"""Target decodes of a speculative step: one batch [id_last, d_1..d_k] per sequence, every
row an output, in one ubatch when the memory takes several sequences at once.

With greedy verification the argmax of every row is taken in the graph (the "greedy"
backend sampler, one id per output row), so a step copies k + 1 token ids out of the graph
instead of k + 1 logits rows; the logits stay readable through `ctx.logits` (single
sequence) for whoever asks.

A unified or iSWA KV cache masks by sequence, so the batches of several sequences go into one
ubatch (llama.cpp's server does the same with n_parallel slots). Recurrent, hybrid and
compressor memories take one sequence per ubatch: their sequences are decoded one after the
other (same result, no batching gain).
"""
from __future__ import annotations

import numpy as np

from ..inputs import UBatch
from ..kv_cache import KVCache
from ..kv_cache_iswa import KVCacheISWA

__all__ = ["StepRows", "decode_steps", "shares_ubatch", "takes_several_sequences"]

GREEDY = ("greedy",)


class StepRows:
    """What one sequence's target decode gave: `ids` (in-graph argmax per row, int32 [n]) or
    `logits` (float32 [n, n_vocab]); `taps` the drafter's rows (name -> [n, width])."""
    __slots__ = ("ids", "logits", "taps")

    def __init__(self, ids=None, logits=None, taps=None):
        self.ids, self.logits, self.taps = ids, logits, taps or {}

    @property
    def rows(self):
        return self.ids if self.ids is not None else self.logits


def takes_several_sequences(memory) -> bool:
    return type(memory) in (KVCache, KVCacheISWA)


def _split_taps(ctx, names, sizes) -> list:
    """Per-sequence tap rows out of ctx.collected (ubatch order, sequences back to back)."""
    parts = ctx.collected or {}
    n = sum(sizes)
    out = [{} for _ in sizes]
    for name in names:
        rows = np.concatenate([p.reshape(p.shape[0], -1) if p.ndim > 1 else p[None]
                               for p in parts[name]])
        if rows.shape[0] != n:
            raise RuntimeError(f"SpeculativeDecoder: target tensor {name!r} has {rows.shape[0]} "
                               f"rows for {n} decoded tokens; a drafter tap must be computed for "
                               f"every token (not only for output rows)")
        b = 0
        for d, k in zip(out, sizes):
            d[name] = rows[b:b + k]
            b += k
    return out


def _decode_one(ctx, seq, tokens, logits_all, greedy, names):
    if greedy and not names and len(tokens) == 1:
        # a plain step (nothing drafted): decode_greedy's one-token shortcut, the same graph
        # and bits as the general path without its host work
        ctx.collected = None
        return StepRows(ids=np.array([ctx.decode_greedy([int(tokens[0])], seq_id=seq)], np.int32))
    if greedy and not names and logits_all:
        # a verify: decode_greedy_rows' shortcut (one C++ fill of a reused graph's inputs)
        ctx.collected = None
        return StepRows(ids=ctx.decode_greedy_rows(tokens, seq_id=seq))
    ctx.collected = {} if names else None
    try:
        if greedy:
            res = ctx._decode(tokens, logits_all, seq, GREEDY)
            ids = np.array(res.sampled_view(), np.int32)
            n_rows = len(tokens) if logits_all else 1
            if len(ids) < n_rows:      # split over ubatches: only the last one's ids are here
                ids = np.array([int(np.argmax(r)) for r in ctx.logits], np.int32)
            rows = StepRows(ids=ids[-n_rows:])
        else:
            ctx._decode(tokens, logits_all, seq, ())
            rows = StepRows(logits=ctx.logits)
        if names:
            rows.taps = _split_taps(ctx, names, [len(tokens)])[0]
    finally:
        ctx.collected = None
    return rows


def shares_ubatch(ctx, batches, logits_all: bool = True) -> bool:
    """Whether decode_steps puts these batches into one ubatch."""
    total = sum(len(t) for _, t in batches)
    n_out = total if logits_all else len(batches)
    return (len(batches) > 1 and takes_several_sequences(ctx.memory)
            and total <= ctx.n_ubatch and n_out <= ctx.cparams.n_outputs_max)


def decode_steps(ctx, batches, greedy: bool, names=(), logits_all: bool = True) -> list:
    """Decode batches [(seq_id, tokens int32)] (each continuing its sequence); one StepRows
    per batch. Several sequences share a ubatch when the memory allows and they fit."""
    if not shares_ubatch(ctx, batches, logits_all):
        return [_decode_one(ctx, s, t, logits_all, greedy, names) for s, t in batches]
    total = sum(len(t) for _, t in batches)
    pos, seqs = [], []
    for s, t in batches:
        p0 = ctx.n_past(s)
        if p0 + len(t) > ctx.n_ctx:
            raise ValueError(f"decode: sequence {s} would reach {p0 + len(t)} tokens but n_ctx "
                             f"is {ctx.n_ctx}")
        pos.append(np.arange(p0, p0 + len(t), dtype=np.int32))
        seqs.append(np.full(len(t), s, np.int32))
    tok = np.concatenate([np.asarray(t, np.int32) for _, t in batches])
    sizes = [len(t) for _, t in batches]
    if logits_all:
        output = np.ones(total, bool)
    else:                                   # the last row of each sequence (prompts)
        output = np.zeros(total, bool)
        output[np.cumsum(sizes) - 1] = True
    ub = UBatch(pos=np.concatenate(pos), seq_id=np.concatenate(seqs), output=output, token=tok)
    ctx.memory.update(ctx.n_threads)
    plans = ctx.memory.init_batch([ub])
    if plans is None:
        raise ValueError(f"decode: the memory has no room for {total} more tokens")
    ctx.collected = {} if names else None
    try:
        res = ctx._process_ubatch(ub, plans[0], GREEDY if greedy else ())
        if greedy:
            flat_ids, flat_logits = np.array(res.sampled_view(), np.int32), None
        else:
            flat_ids, flat_logits = None, ctx._copy_logits(res, ub.n_outputs)
        ctx.logits = None
        taps = _split_taps(ctx, names, sizes) if names else [{} for _ in sizes]
    except BaseException:
        for (s, _), p in zip(batches, pos):   # the ubatch's cells hold no valid state
            ctx.seq_rm(s, int(p[0]), -1)
        raise
    finally:
        ctx.collected = None
    out, b = [], 0
    for (s, t), tp in zip(batches, taps):
        k = len(t) if logits_all else 1
        out.append(StepRows(ids=None if flat_ids is None else flat_ids[b:b + k],
                            logits=None if flat_logits is None else flat_logits[b:b + k], taps=tp))
        b += k
    return out
