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

One drafter serves every sequence of a generate_batch call (`multi_seq`): the draft memory
holds them under the target's seq ids, each with its own pending row, and each draft
position (or head) is one ubatch with an entry per drafting sequence.
"""
from __future__ import annotations

import numpy as np

from ..context import Context
from .drafter import Draft, Drafter
from .seq_batch import decode_ubatch, group_by_size, seq_ubatch
from .target import takes_several_sequences

TOP_K = 10          # the draft's candidates (its probability is a softmax over these)


class _SeqState:
    """One sequence's MTP state: the h row paired with its next first token, the target rows
    of its last verify batch (what accept() refers to) and where that batch started."""
    __slots__ = ("pending_h", "verify_h", "verify_pos0", "drafted")

    def __init__(self, width: int):
        self.pending_h = np.zeros(width, np.float32)
        self.verify_h, self.verify_pos0, self.drafted = None, 0, False


class MtpDrafter(Drafter):
    kind = "mtp"
    target_outputs = ("h_nextn",)
    multi_seq = True

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
        # one output row per drafting sequence; the target's seq ids
        self.ctx = Context(model, n_ctx=cp.n_ctx, n_threads=cp.n_threads,
                           flash_attn=cp.flash_attn, n_batch=cp.n_batch, n_ubatch=cp.n_ubatch,
                           type_k=cp.type_k, type_v=cp.type_v, ctx_type="mtp",
                           n_seq_max=cp.n_seq_max, n_outputs_max=max(1, cp.n_seq_max),
                           graph_reuse=target_ctx.graph_reuse)
        self.n_heads = n_heads
        self.chain_heads = n_heads > 1
        # each head has its own graphs (the offset is in the graph key), and each number of
        # drafting sequences its own width: keep them all
        self.ctx.MAX_GRAPHS = max(Context.MAX_GRAPHS, 4 * n_heads * max(1, cp.n_seq_max))
        self.p_min, self.n_min, self.seq = float(p_min), int(n_min), int(seq_id)
        self._args = (target_ctx, dict(p_min=p_min, n_min=n_min, seq_id=seq_id))
        self.width = self.ctx.n_embd_nextn
        self.target = target_ctx
        self.reset()

    def reset(self) -> None:
        self.ctx.reset()
        self._seqs: dict = {}
        self.last_logits = None                              # draft logits rows of the last draft

    def _state(self, seq: int) -> _SeqState:
        st = self._seqs.get(seq)
        if st is None:
            st = self._seqs[seq] = _SeqState(self.width)
        return st

    @property
    def pending_h(self):
        return self._state(self.seq).pending_h

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

    # ---- one sequence ------------------------------------------------------------------------
    def process(self, tokens, pos0: int, taps: dict) -> None:
        self.process_seqs([(self.seq, tokens, pos0, taps)])

    def draft(self, id_last: int, pos0: int, n_max: int) -> Draft:
        return self.draft_seqs([(self.seq, id_last, pos0, n_max)])[0]

    def accept(self, n_accepted: int) -> None:
        self.accept_seqs([(self.seq, n_accepted)])

    # ---- several sequences ---------------------------------------------------------------------
    def _decode_parts(self, parts, last_only: bool, sample: bool):
        """Decode parts [(seq, pos0, tokens, h rows)] in one ubatch (output: the last entry
        of each part, or every entry); returns the graph result."""
        outs = []
        for _, _, t, _ in parts:
            o = np.zeros(len(t), bool)
            if last_only:
                o[-1] = True
            else:
                o[:] = True
            outs.append(o)
        return decode_ubatch(self.ctx, seq_ubatch(parts, outs), ("greedy",) if sample else ())

    def process_seqs(self, items) -> None:
        ctx = self.ctx
        parts = []
        for seq, tokens, pos0, taps in items:
            H = taps.get("h_nextn") if taps else None
            if H is None:                              # the target context keeps them too
                H = self.target.embd_nextn
            H = np.asarray(H, np.float32).reshape(-1, self.width)
            tok = np.asarray(tokens, np.int32).ravel()
            if len(H) != len(tok):
                raise ValueError(f"MtpDrafter.process: {len(tok)} tokens but {len(H)} h_nextn rows")
            st = self._state(seq)
            parts.append((seq, int(pos0), tok, np.concatenate([st.pending_h[None], H[:-1]])))
            # only a verify batch (one that follows a draft) is what accept() refers to
            st.verify_h = H if st.drafted else None
            st.verify_pos0, st.drafted = int(pos0), False
            st.pending_h = H[-1].copy()
        together = len(parts) > 1 and takes_several_sequences(ctx.memory)
        groups = (group_by_size([len(p[2]) for p in parts], ctx.n_ubatch) if together
                  else [[i] for i in range(len(parts))])
        for g in groups:
            grp = [parts[i] for i in g]
            for head in self._heads():
                for seq, pos0, _, _ in grp:           # each head fills its own layer's cache
                    ctx.seq_rm(seq, pos0, -1)
                if head is not None:
                    ctx.set_nextn_layer_offset(head)
                if len(grp) == 1 and len(grp[0][2]) > ctx.n_ubatch:
                    seq, _, tok, hs = grp[0]          # a long prompt: decode splits it
                    ctx.decode(tok, embd=hs, seq_id=seq)
                else:
                    self._decode_parts(grp, last_only=True, sample=False)
            ctx.set_nextn_layer_offset(0)

    def draft_seqs(self, items) -> list:
        ctx = self.ctx
        # greedy without a probability cut: the argmax comes out of the graph, no logits copy
        in_graph = self.sample_in_graph and self.p_min <= 0
        lanes = []
        for seq, id_last, pos0, n_max in items:
            st = self._state(seq)
            st.drafted = True
            ctx.seq_rm(seq, pos0, -1)
            lanes.append(dict(seq=seq, pos0=int(pos0), n_max=int(n_max), toks=[int(id_last)],
                              hs=[st.pending_h], ids=[], rows=[], done=n_max <= 0))
        together = takes_several_sequences(ctx.memory)
        step = 0
        while True:
            active = [ln for ln in lanes if not ln["done"] and len(ln["ids"]) < ln["n_max"]]
            if self.chain_heads and step >= self.n_heads:
                break
            if not active:
                break
            groups = [active] if together else [[ln] for ln in active]
            for grp in groups:
                if self.chain_heads:               # head `step` rebuilds its cache from pos0
                    for ln in grp:
                        ctx.seq_rm(ln["seq"], ln["pos0"], -1)
                    ctx.set_nextn_layer_offset(step)
                    parts = [(ln["seq"], ln["pos0"], ln["toks"], np.stack(ln["hs"])) for ln in grp]
                else:
                    parts = [(ln["seq"], ln["pos0"] + len(ln["ids"]), ln["toks"][-1:],
                              ln["hs"][-1][None]) for ln in grp]
                res = self._decode_parts(parts, last_only=True, sample=in_graph)
                h_rows = ctx.embd_nextn
                if in_graph:
                    picks = [int(t) for t in np.array(res.sampled_view(), np.int32)]
                else:
                    logits = ctx._copy_logits(res, len(grp))
                    picks = []
                    for j, ln in enumerate(grp):
                        ln["rows"].append(logits[j].copy())
                        tok, p = top1(logits[j])
                        picks.append(tok if p >= self.p_min else None)
                for j, (ln, tok) in enumerate(zip(grp, picks)):
                    if tok is None:
                        ln["done"] = True
                        continue
                    ln["ids"].append(tok)
                    ln["toks"].append(tok)
                    ln["hs"].append(h_rows[j].copy())
            step += 1
        ctx.set_nextn_layer_offset(0)
        out = []
        for ln in lanes:
            ctx.seq_rm(ln["seq"], ln["pos0"], -1)  # the draft region is re-fed by process
            ids, rows = ln["ids"], ln["rows"]
            if len(ids) < self.n_min:
                ids = []
            self.last_logits = np.stack(rows) if rows else np.zeros((0, 0), np.float32)
            out.append(Draft(ids=ids, logits=self.last_logits[:len(ids)] if ids and rows else None))
        return out

    def accept_seqs(self, items) -> None:
        for seq, n_accepted in items:
            st = self._state(seq)
            if st.verify_h is None:
                continue
            i = min(int(n_accepted), len(st.verify_h) - 1)
            st.pending_h = st.verify_h[i].copy()
            self.ctx.seq_rm(seq, st.verify_pos0 + i + 1, -1)

    def clone(self):
        target, kw = self._args
        return type(self)(target, None, **kw)


def top1(logits: np.ndarray):
    """The best token and its probability among the TOP_K best (a softmax over those)."""
    x = np.asarray(logits, np.float64)
    k = min(TOP_K, len(x))
    tok = int(np.argmax(x))
    best = np.partition(x, len(x) - k)[len(x) - k:]
    return tok, float(1.0 / np.exp(best - x[tok]).sum())
