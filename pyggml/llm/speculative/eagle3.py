"""EAGLE3 drafter: after every target decode the tapped inputs of 3 target layers go through
the draft's encoder (g rows), and the decoder layer is fed the pairs (token[P+1], g[P]) at
position P. The last position of a target batch waits until its next token is known: the
next target batch bridges it, or draft() writes (id_last, pending g) there first and then
chains (draft token, pre-norm state) one position at a time.

One drafter serves every sequence of a generate_batch call (`multi_seq`): the draft memory
holds them under the target's seq ids, the encoder and the pair decodes of a verify step run
over all sequences' rows at once, and each chained draft position is one ubatch with an
entry per drafting sequence."""
from __future__ import annotations

import numpy as np

from ..context_draft import DraftContext
from ..models import load_hparams
from .drafter import Draft, Drafter
from .seq_batch import group_by_size
from .taps import check_d2t, check_vocab, features, layer_input_names, top_prob


class _SeqState:
    """One sequence's EAGLE3 state: the g row waiting for its next token (and its position),
    the g rows of the last target batch and where the last draft started."""
    __slots__ = ("pending_pos", "pending_g", "verify_pos", "verify_g", "pos0")

    def __init__(self):
        self.pending_pos, self.pending_g = -1, None
        self.verify_pos, self.verify_g = -1, None
        self.pos0 = -1


class Eagle3Drafter(Drafter):
    kind = "eagle3"
    multi_seq = True

    def __init__(self, target_ctx, draft_model, kind: str | None = None, p_min: float = 0.0,
                 n_min: int = 0, n_ctx: int | None = None, **_ignored):
        if draft_model is None:
            raise ValueError("SpeculativeDecoder: kind 'eagle3' needs a draft model (draft=...)")
        if draft_model.arch != "eagle3":
            raise ValueError(f"EAGLE3 drafter: the draft's architecture is {draft_model.arch!r}, "
                             "expected 'eagle3'")
        if kind not in (None, "eagle3"):
            raise ValueError(f"SpeculativeDecoder: kind {kind!r} but the draft model is EAGLE3")
        hp = self.hp = load_hparams(draft_model)
        t_hp = target_ctx.hparams
        check_vocab("eagle3", target_ctx.model, draft_model, t_hp.n_vocab, hp.n_vocab)
        if hp.n_embd_target != t_hp.n_embd:
            raise ValueError(f"eagle3 draft: target_hidden_size={hp.n_embd_target} but the target "
                             f"is {t_hp.n_embd} wide")
        check_d2t("eagle3", draft_model, t_hp.n_vocab)
        self.target_outputs = layer_input_names(target_ctx.model, hp.target_layers,
                                                 allow_output=True)
        self.p_min, self.n_min = float(p_min), int(n_min)
        self._args = (target_ctx, draft_model, dict(kind=kind, p_min=p_min, n_min=n_min,
                                                     n_ctx=n_ctx))
        cp = target_ctx.cparams
        self.ctx = DraftContext(draft_model, other=target_ctx.model, n_ctx=n_ctx or target_ctx.n_ctx,
                                n_threads=cp.n_threads, flash_attn=cp.flash_attn,
                                type_k=cp.type_k, type_v=cp.type_v, n_batch=cp.n_ubatch,
                                n_ubatch=cp.n_ubatch, n_seq_max=cp.n_seq_max)
        self.seq = 0          # the sequence the one-sequence methods act on
        self.reset()

    def reset(self):
        self.ctx.reset()
        self._seqs: dict = {}

    def _state(self, seq: int) -> _SeqState:
        st = self._seqs.get(seq)
        if st is None:
            st = self._seqs[seq] = _SeqState()
        return st

    def encode(self, feats: np.ndarray) -> np.ndarray:
        """g rows [n, D] of the fused target features (the encoder, chunked by n_ubatch)."""
        out, n, step = [], len(feats), self.ctx.n_ubatch
        for i in range(0, n, step):
            j = min(n, i + step)
            self.ctx.process(np.arange(j - i), embd=feats[i:j], output=np.ones(j - i, bool),
                             memory=False)
            out.append(self.ctx.h_nextn)
        return np.concatenate(out)

    def _decode_pairs(self, toks, rows, pos, seqs):
        # entries of one sequence are contiguous, so any cut keeps each part contiguous
        step = self.ctx.n_ubatch
        for i in range(0, len(toks), step):
            j = min(len(toks), i + step)
            self.ctx.process(pos[i:j], token=toks[i:j], embd=rows[i:j], seq_id=seqs[i:j])

    # ---- one sequence --------------------------------------------------------------------------
    def process(self, tokens, pos0, taps):
        self.process_seqs([(self.seq, tokens, pos0, taps)])

    def draft(self, id_last, pos0, n_max):
        return self.draft_seqs([(self.seq, id_last, pos0, n_max)])[0]

    def accept(self, n_accepted):
        self.accept_seqs([(self.seq, n_accepted)])

    # ---- several sequences ---------------------------------------------------------------------
    def process_seqs(self, items):
        items = [(s, np.asarray(t, np.int32).ravel(), int(p0), taps) for s, t, p0, taps in items]
        # the encoder has no memory: every sequence's features in one pass
        feats = [features(taps, self.target_outputs, len(t)) for _, t, _, taps in items]
        g_all = self.encode(np.concatenate(feats) if len(feats) > 1 else feats[0])
        toks, rows, pos, seqs = [], [], [], []
        b = 0
        for seq, tokens, pos0, _ in items:
            n = len(tokens)
            g = g_all[b:b + n]
            b += n
            st = self._state(seq)
            if (st.pending_pos >= 0 and st.pending_pos + 1 == pos0
                    and st.pending_pos > self.ctx.memory.seq_pos_max(seq)):
                toks.append(int(tokens[0]))
                rows.append(st.pending_g)
                pos.append(st.pending_pos)
                seqs.append(seq)
            toks += [int(t) for t in tokens[1:]]
            rows += list(g[:-1])
            pos += list(range(pos0, pos0 + n - 1))
            seqs += [seq] * (n - 1)
            st.verify_pos, st.verify_g = pos0, g
            st.pending_pos, st.pending_g = pos0 + n - 1, g[-1].copy()
        if toks:
            self._decode_pairs(np.asarray(toks, np.int32), np.stack(rows),
                               np.asarray(pos, np.int32), np.asarray(seqs, np.int32))

    def draft_seqs(self, items):
        # greedy without a probability cut: the argmax is taken in the graph (no logits copy)
        in_graph = self.sample_in_graph and self.p_min == 0
        lanes = []
        for seq, id_last, pos0, n_max in items:
            st = self._state(seq)
            st.pos0 = int(pos0)
            started = st.pending_pos >= 0 and n_max > 0
            ln = dict(seq=seq, st=st, ids=[], rows=[], done=not started, started=started,
                      n_max=int(n_max), tok=int(id_last), h=st.pending_g)
            if started:
                self.ctx.seq_rm(seq, st.pending_pos, -1)
            lanes.append(ln)
        while True:
            active = [ln for ln in lanes if not ln["done"]]
            if not active:
                break
            # one entry per drafting sequence; a batch never exceeds n_ubatch entries
            for g in group_by_size([1] * len(active), self.ctx.n_ubatch):
                grp = [active[i] for i in g]
                logits = self.ctx.process(
                    [ln["st"].pending_pos + len(ln["ids"]) for ln in grp],
                    token=[ln["tok"] for ln in grp], embd=np.stack([ln["h"] for ln in grp]),
                    output=np.ones(len(grp), bool), seq_id=[ln["seq"] for ln in grp],
                    sample=in_graph)
                h_rows = self.ctx.h_nextn
                for j, ln in enumerate(grp):
                    if in_graph:
                        tok = int(self.ctx.sampled[j])
                    else:
                        tok = int(np.argmax(logits[j]))
                        if top_prob(logits[j]) < self.p_min:
                            ln["done"] = True
                            continue
                        ln["rows"].append(logits[j])
                    ln["ids"].append(tok)
                    if len(ln["ids"]) >= ln["n_max"]:
                        ln["done"] = True
                        continue
                    ln["tok"], ln["h"] = tok, h_rows[j].copy()
        out = []
        for ln in lanes:
            if not ln["started"]:
                out.append(Draft([]))
                continue
            # the chained draft positions are speculative: only the target's features stay
            self.ctx.seq_rm(ln["seq"], ln["st"].pos0, -1)
            ids, rows = ln["ids"], ln["rows"]
            if len(ids) < self.n_min:
                ids, rows = [], []
            # argmax picks: a point mass for rejection sampling (probs None)
            out.append(Draft(ids, None, np.stack(rows) if rows else None) if ids else Draft([]))
        return out

    def clone(self):
        target, draft_model, kw = self._args
        return type(self)(target, draft_model, **kw)

    def accept_seqs(self, items):
        for seq, n_accepted in items:
            st = self._state(seq)
            if st.verify_g is None:
                continue
            i = min(int(n_accepted), len(st.verify_g) - 1)
            st.pending_pos = st.verify_pos + i
            st.pending_g = st.verify_g[i].copy()
            # the pair at the new pending position holds the first rejected draft token,
            # not the token the target put there: it goes with everything after it (a
            # draft() would rewrite it, but plain rounds may come first and build on it)
            self.ctx.seq_rm(seq, st.pending_pos, -1)
