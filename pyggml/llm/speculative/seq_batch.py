"""Helpers for drafters that serve several sequences from one draft context: grouping the
sequences' entries into ubatches and decoding a multi-sequence ubatch on a Context."""
from __future__ import annotations

import numpy as np

from ..inputs import UBatch


def group_by_size(sizes, limit: int) -> list:
    """Consecutive index groups whose sizes sum to at most `limit` (an item larger than the
    limit stands alone: the caller splits it)."""
    groups, cur, total = [], [], 0
    for i, k in enumerate(sizes):
        if cur and total + k > limit:
            groups.append(cur)
            cur, total = [], 0
        cur.append(i)
        total += k
    if cur:
        groups.append(cur)
    return groups


def seq_ubatch(parts, outputs, token=True, embd=True) -> UBatch:
    """One ubatch of several sequences, each contiguous: parts [(seq, pos0, tokens, rows)],
    outputs [bool array per part]."""
    pos = np.concatenate([np.arange(p0, p0 + len(t), dtype=np.int32) for _, p0, t, _ in parts])
    seq = np.concatenate([np.full(len(t), s, np.int32) for s, _, t, _ in parts])
    tok = np.concatenate([np.asarray(t, np.int32) for _, _, t, _ in parts]) if token else None
    rows = (np.ascontiguousarray(np.concatenate([np.asarray(r, np.float32).reshape(len(t), -1)
                                                 for _, _, t, r in parts]))
            if embd else None)
    return UBatch(pos=pos, seq_id=seq, output=np.concatenate(outputs), token=tok, embd=rows)


def decode_ubatch(ctx, ub: UBatch, samplers: tuple = ()):
    """Decode one prepared ubatch on a Context (every sequence continuing its own); returns
    the graph result. The h_nextn rows of the output entries are in ctx.embd_nextn."""
    ctx.memory.update(ctx.n_threads)
    plans = ctx.memory.init_batch([ub])
    if plans is None:
        raise ValueError(f"draft: the draft memory has no room for {ub.n_tokens} more tokens")
    res = ctx._process_ubatch(ub, plans[0], samplers)
    ctx.logits = None
    if ctx.embeddings_nextn:
        ctx.embd_nextn = ctx._nextn_rows(ub, True)
    return res
