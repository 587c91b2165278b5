"""MTP / NextN drafting: the target model's own NextN block(s) propose the next tokens.

A second Context over the target's model (ctx_type="mtp") holds the KV of the NextN layers
only. An MTP entry at position p pairs token p with the hidden state h_{p-1} that produced
it (the target's h_nextn, or the draft's own output while drafting).

* process (after every target decode of tokens at pos0..): feed the same tokens to the
  draft, paired with the target's h rows shifted right by one (the first token takes the
  pending row of the previous call); keep the rows for accept.
* draft: decode (id_last @ pos0, pending h), take the top-1 token and the draft's own h,
  decode (token @ pos0+1, h), ... up to n_max tokens (or until the top-1 probability among
  the 10 best falls below p_min). Models with several NextN heads chain them: step i runs
  head i over the whole draft prefix from pos0, so n_max is clamped to the head count.
* accept(n): the pending row becomes the target's h at pos0 + n; the draft forgets every
  position after it.
"""
from __future__ import annotations

import numpy as np

from ..context import Context
from .drafter import Draft, Drafter

TOP_K = 10          # the draft's candidates (its probability is a softmax over these)


class MtpDrafter(Drafter):
    kind = "mtp"
    target_outputs = ("h_nextn",)

    def __init__(self, target_ctx, draft_model=None, p_min: float = 0.0, n_min: int = 0,
                 seq_id: int = 0, **_ignored):
        model = target_ctx.model
        if draft_model is not None and draft_model is not model:
            raise ValueError("MtpDrafter: MTP drafts with the target's own NextN blocks; "
                             "pass draft=None")
        n_heads = int(getattr(target_ctx.hparams, "n_nextn", 0))
        if n_heads <= 0:
            raise ValueError(f"MtpDrafter: {model.arch} model {model.path!r} has no NextN blocks "
                             f"(nextn_predict_layers = 0)")
        cp = target_ctx.cparams
        self.ctx = Context(model, n_ctx=cp.n_ctx, n_threads=cp.n_threads,
                           flash_attn=cp.flash_attn, n_batch=cp.n_batch, n_ubatch=cp.n_ubatch,
                           type_k=cp.type_k, type_v=cp.type_v, ctx_type="mtp",
                           n_outputs_max=1, graph_reuse=target_ctx.graph_reuse)
        self.n_heads = n_heads
        self.chain_heads = n_heads > 1
        # each head has its own graphs (the offset is in the graph key): keep them all
        self.ctx.MAX_GRAPHS = max(Context.MAX_GRAPHS, 4 * n_heads)
        self.p_min, self.n_min, self.seq = float(p_min), int(n_min), int(seq_id)
        self._args = (target_ctx, dict(p_min=p_min, n_min=n_min, seq_id=seq_id))
        self.width = self.ctx.n_embd_nextn
        self.target = target_ctx
        self.reset()

    def reset(self) -> None:
        self.ctx.reset()
        self.pending_h = np.zeros(self.width, np.float32)   # h paired with the next first token
        self.verify_h = None                                 # target rows of the last process
        self.verify_pos0 = 0
        self.drafted = False                                 # a draft preceded the last process
        self.last_logits = None                              # draft logits rows of the last draft

    def bind(self, target_ctx, n_max: int) -> int:
        super().bind(target_ctx, n_max)
        if not target_ctx.embeddings_nextn or target_ctx.nextn_masked:
            target_ctx.set_embeddings_nextn(True, masked=False)   # every row, for process()
        if self.chain_heads:
            n_max = min(n_max, self.n_heads)
        rs = getattr(target_ctx.memory, "n_rs_seq", None)
        if rs is not None and n_max > rs:
            raise ValueError(f"MtpDrafter: the target's recurrent state rolls back at most "
                             f"n_rs_seq={rs} positions but n_max={n_max} drafts may be rejected; "
                             f"create the target Context with n_rs_seq >= {n_max}")
        return n_max

    def _heads(self):
        return range(self.n_heads) if self.chain_heads else (None,)

    def process(self, tokens, pos0: int, taps: dict) -> None:
        H = taps.get("h_nextn") if taps else None
        if H is None:                              # the target context keeps them too
            H = self.target.embd_nextn
        H = np.asarray(H, np.float32).reshape(-1, self.width)
        tok = np.asarray(tokens, np.int32).ravel()
        if len(H) != len(tok):
            raise ValueError(f"MtpDrafter.process: {len(tok)} tokens but {len(H)} h_nextn rows")
        hs = np.concatenate([self.pending_h[None], H[:-1]])
        ctx = self.ctx
        ctx.seq_rm(self.seq, pos0, -1)
        for head in self._heads():
            if head is not None:               # each head fills its own layer's cache
                ctx.seq_rm(self.seq, pos0, -1)
                ctx.set_nextn_layer_offset(head)
            ctx.decode(tok, embd=hs, seq_id=self.seq)
        ctx.set_nextn_layer_offset(0)
        # only a verify batch (one that follows a draft) is what accept() refers to
        self.verify_h = H if self.drafted else None
        self.verify_pos0, self.drafted = int(pos0), False
        self.pending_h = H[-1].copy()

    def draft(self, id_last: int, pos0: int, n_max: int) -> Draft:
        ctx, seq = self.ctx, self.seq
        self.drafted = True
        ctx.seq_rm(seq, pos0, -1)
        toks, hs = [int(id_last)], [self.pending_h]
        ids, rows = [], []
        step = 0
        # greedy without a probability cut: the argmax comes out of the graph, no logits copy
        in_graph = self.sample_in_graph and self.p_min <= 0
        while len(ids) < n_max:
            if self.chain_heads:
                if step >= self.n_heads:
                    break
                ctx.seq_rm(seq, pos0, -1)          # head `step` rebuilds its cache from pos0
                ctx.set_nextn_layer_offset(step)
                b_tok, b_h = toks, np.stack(hs)
            else:
                b_tok, b_h = toks[-1:], hs[-1][None]
            if in_graph:
                tok = ctx.decode_greedy(b_tok, embd=b_h, seq_id=seq)
            else:
                logits = ctx.decode(b_tok, embd=b_h, seq_id=seq)[-1]
                rows.append(logits.copy())
                tok, p = top1(logits)
                if p < self.p_min:
                    break
            ids.append(tok)
            toks.append(tok)
            hs.append(ctx.embd_nextn[-1].copy())
            step += 1
        ctx.set_nextn_layer_offset(0)
        ctx.seq_rm(seq, pos0, -1)                  # the draft region is re-fed by process
        if len(ids) < self.n_min:
            ids = []
        self.last_logits = np.stack(rows) if rows else np.zeros((0, 0), np.float32)
        return Draft(ids=ids, logits=self.last_logits[:len(ids)] if ids and rows else None)

    def clone(self):
        target, kw = self._args
        return type(self)(target, None, **kw)

    def accept(self, n_accepted: int) -> None:
        if self.verify_h is None:
            return
        i = min(int(n_accepted), len(self.verify_h) - 1)
        self.pending_h = self.verify_h[i].copy()
        self.ctx.seq_rm(self.seq, self.verify_pos0 + i + 1, -1)


def top1(logits: np.ndarray):
    """The best token and its probability among the TOP_K best (a softmax over those)."""
    x = np.asarray(logits, np.float64)
    k = min(TOP_K, len(x))
    tok = int(np.argmax(x))
    best = np.partition(x, len(x) - k)[len(x) - k:]
    return tok, float(1.0 / np.exp(best - x[tok]).sum())
