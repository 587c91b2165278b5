"""EAGLE3 drafter: after every target decode the tapped inputs of 3 target layers go through
the draft's encoder (g rows), and the decoder layer is fed the pairs (token[P+1], g[P]) at
position P. The last position of a target batch waits until its next token is known: the
next target batch bridges it, or draft() writes (id_last, pending g) there first and then
chains (draft token, pre-norm state) one position at a time."""
from __future__ import annotations

import numpy as np

from ..context_draft import DraftContext
from ..models import load_hparams
from .drafter import Draft, Drafter
from .taps import check_d2t, check_vocab, features, layer_input_names, top_prob


class Eagle3Drafter(Drafter):
    kind = "eagle3"

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
                                n_ubatch=cp.n_ubatch)
        self.reset()

    def reset(self):
        self.ctx.reset()
        self.pending_pos, self.pending_g = -1, None
        self.verify_pos, self.verify_g = -1, None
        self.pos0 = -1

    def encode(self, feats: np.ndarray) -> np.ndarray:
        """g rows [n, D] of the fused target features (the encoder, chunked by n_ubatch)."""
        out, n, step = [], len(feats), self.ctx.n_ubatch
        for i in range(0, n, step):
            j = min(n, i + step)
            self.ctx.process(np.arange(j - i), embd=feats[i:j], output=np.ones(j - i, bool),
                             memory=False)
            out.append(self.ctx.h_nextn)
        return np.concatenate(out)

    def _decode_pairs(self, toks, rows, pos):
        step = self.ctx.n_ubatch
        for i in range(0, len(toks), step):
            j = min(len(toks), i + step)
            self.ctx.process(pos[i:j], token=toks[i:j], embd=rows[i:j])

    def process(self, tokens, pos0, taps):
        tokens = np.asarray(tokens, np.int32).ravel()
        n = len(tokens)
        g = self.encode(features(taps, self.target_outputs, n))
        toks, rows, pos = [], [], []
        if (self.pending_pos >= 0 and self.pending_pos + 1 == pos0
                and self.pending_pos > self.ctx.memory.seq_pos_max(0)):
            toks.append(int(tokens[0]))
            rows.append(self.pending_g)
            pos.append(self.pending_pos)
        toks += [int(t) for t in tokens[1:]]
        rows += list(g[:-1])
        pos += list(range(pos0, pos0 + n - 1))
        if toks:
            self._decode_pairs(np.asarray(toks, np.int32), np.stack(rows), np.asarray(pos, np.int32))
        self.verify_pos, self.verify_g = int(pos0), g
        self.pending_pos, self.pending_g = int(pos0 + n - 1), g[-1].copy()

    def draft(self, id_last, pos0, n_max):
        self.pos0 = int(pos0)
        if self.pending_pos < 0 or n_max <= 0:
            return Draft([])
        p = self.pending_pos
        self.ctx.seq_rm(0, p, -1)
        # greedy without a probability cut: the argmax is taken in the graph (no logits copy)
        in_graph = self.sample_in_graph and self.p_min == 0
        tok_in, h = int(id_last), self.pending_g
        ids, rows = [], []
        while True:
            logits = self.ctx.process([p + len(ids)], token=[tok_in], embd=h[None],
                                      output=[True], sample=in_graph)
            if in_graph:
                tok = int(self.ctx.sampled[0])
            else:
                tok = int(np.argmax(logits[0]))
                if top_prob(logits[0]) < self.p_min:
                    break
                rows.append(logits[0])
            ids.append(tok)
            if len(ids) >= n_max:
                break
            tok_in, h = tok, self.ctx.h_nextn[0].copy()
        # the chained draft positions are speculative: only the target's features stay
        self.ctx.seq_rm(0, self.pos0, -1)
        if len(ids) < self.n_min:
            ids, rows = [], []
        if not ids:
            return Draft([])
        # argmax picks: a point mass for rejection sampling (probs None)
        return Draft(ids, None, np.stack(rows) if rows else None)

    def clone(self):
        target, draft_model, kw = self._args
        return type(self)(target, draft_model, **kw)

    def accept(self, n_accepted):
        if self.verify_g is None:
            return
        i = min(int(n_accepted), len(self.verify_g) - 1)
        self.pending_pos = self.verify_pos + i
        self.pending_g = self.verify_g[i].copy()
        if self.pos0 >= 0:
            self.ctx.seq_rm(0, self.pos0 + int(n_accepted) + 1, -1)
