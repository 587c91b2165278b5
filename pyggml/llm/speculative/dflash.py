"""DFlash, DSpark and DFlash2 drafters: the target's tapped layer inputs are injected into the
draft's KV cache after every target decode; a draft is one non-causal decode of a block
`[id_last, MASK...]` whose rows are read per variant:
* DFlash: slots 1..n (in-place denoising), greedy;
* DSpark (anchor first): slots 0..n-1 of the Markov-biased logits, cut at a confidence below
  p_min when the draft has a confidence head;
* DFlash2: a walk over the selector lattice (candidate ids and transition scores).
The block length is fixed at bind time (n_max clamped to the trained block size), so a
shorter request is served by truncating the block's tokens, not by a shorter block.

One drafter serves every sequence of a generate_batch call (`multi_seq`): the draft memory
holds them under the target's seq ids, a verify step injects every sequence's features in
one pass and a draft is one decode of all the sequences' blocks side by side (equal lengths:
the graph splits the batch into one block per sequence)."""
from __future__ import annotations

import numpy as np

from ..context_draft import DraftContext
from ..models import load_hparams
from .drafter import Draft, Drafter
from .seq_batch import group_by_size
from .taps import check_d2t, check_vocab, features, layer_input_names, top_prob

VARIANTS = ("dflash", "dspark", "dflash2")


def variant_of(draft_model) -> str:
    if draft_model.get("markov_w1.weight", required=False) is not None:
        return "dspark"
    if draft_model.get("selector_hidden.weight", required=False) is not None:
        return "dflash2"
    return "dflash"


class DFlashDrafter(Drafter):
    multi_seq = True

    def __init__(self, target_ctx, draft_model, kind: str | None = None, p_min: float = 0.0,
                 n_min: int = 0, n_ctx: int | None = None, **_ignored):
        if draft_model is None:
            raise ValueError("SpeculativeDecoder: kind 'dflash' needs a draft model (draft=...)")
        if draft_model.arch != "dflash":
            raise ValueError(f"DFlash drafter: the draft's architecture is {draft_model.arch!r}, "
                             "expected 'dflash'")
        self.variant = variant_of(draft_model)
        if kind is not None and kind != self.variant:
            raise ValueError(f"SpeculativeDecoder: kind {kind!r} but the draft model is a "
                             f"{self.variant} draft")
        self.kind = self.variant
        hp = self.hp = load_hparams(draft_model)
        t_hp = target_ctx.hparams
        check_vocab(self.kind, target_ctx.model, draft_model, t_hp.n_vocab, hp.n_vocab)
        check_d2t(self.kind, draft_model, t_hp.n_vocab)
        if hp.n_embd != t_hp.n_embd:
            raise ValueError(f"{self.kind} draft: its width {hp.n_embd} differs from the target's "
                             f"{t_hp.n_embd}")
        if hp.mask_id is None:
            raise ValueError(f"{self.kind} draft: the file has no tokenizer.ggml.mask_token_id "
                             "(the token that fills a draft block)")
        if (self.variant == "dspark" and p_min > 0
                and draft_model.get("conf_proj.weight", required=False) is None):
            raise ValueError("dspark draft: p_min > 0 needs a confidence head (conf_proj), which "
                             "this draft has not; use p_min=0")
        self._args = (target_ctx, draft_model, dict(kind=kind, p_min=p_min, n_min=n_min,
                                                     n_ctx=n_ctx))
        self.mask_id = hp.mask_id
        self.target_outputs = layer_input_names(target_ctx.model, hp.target_layers)
        self.p_min, self.n_min = float(p_min), int(n_min)
        cp = target_ctx.cparams
        if not n_ctx:
            # every sequence's block is full length even when the target verifies fewer
            # drafts: with several sequences in one memory, room for one more block each
            n_ctx = target_ctx.n_ctx + (hp.block_size * cp.n_seq_max if cp.n_seq_max > 1 else 0)
        self.ctx = DraftContext(draft_model, other=target_ctx.model, causal_attn=hp.causal,
                                n_ctx=n_ctx, n_threads=cp.n_threads,
                                flash_attn=cp.flash_attn, type_k=cp.type_k, type_v=cp.type_v,
                                n_batch=cp.n_ubatch, n_ubatch=cp.n_ubatch,
                                n_seq_max=cp.n_seq_max)
        self.seq = 0          # the sequence the one-sequence methods act on
        self._pos0: dict = {}  # seq -> where its last draft started
        self.anchor_first = self.variant == "dspark" and hp.sample_from_anchor
        self.n_max = 0

    def bind(self, target_ctx, n_max: int) -> int:
        self.target = target_ctx
        n_draft_max = self.hp.block_size if self.anchor_first else self.hp.block_size - 1
        self.n_max = max(0, min(int(n_max), n_draft_max))
        self.n_min = min(self.n_min, n_draft_max)
        return self.n_max

    # ---- one sequence --------------------------------------------------------------------------
    def process(self, tokens, pos0, taps):
        self.process_seqs([(self.seq, tokens, pos0, taps)])

    def draft(self, id_last, pos0, n_max):
        return self.draft_seqs([(self.seq, id_last, pos0, n_max)])[0]

    def accept(self, n_accepted):
        self.accept_seqs([(self.seq, n_accepted)])

    @property
    def pos0(self):
        return self._pos0.get(self.seq, -1)

    # ---- several sequences ---------------------------------------------------------------------
    def process_seqs(self, items):
        """Inject every sequence's target features, several sequences per ubatch."""
        pos, seqs, feats = [], [], []
        for seq, tokens, pos0, taps in items:
            n = len(tokens)
            feats.append(features(taps, self.target_outputs, n))
            pos.append(np.arange(pos0, pos0 + n, dtype=np.int32))
            seqs.append(np.full(n, seq, np.int32))
        pos, seqs, feats = np.concatenate(pos), np.concatenate(seqs), np.concatenate(feats)
        step = self.ctx.n_ubatch
        for i in range(0, len(pos), step):      # each sequence's rows stay contiguous
            j = min(len(pos), i + step)
            self.ctx.process(pos[i:j], embd=feats[i:j], seq_id=seqs[i:j])

    def draft_seqs(self, items):
        out = [Draft([]) for _ in items]
        lanes = []
        for k, (seq, id_last, pos0, n_max) in enumerate(items):
            self._pos0[seq] = int(pos0)
            if self.n_max > 0 and n_max > 0:
                lanes.append((k, seq, int(id_last), int(pos0), int(n_max)))
        if not lanes:
            return out
        n_block = self.n_max + (0 if self.anchor_first else 1)
        # greedy slots without a probability cut need only the argmax ids (taken in the
        # graph); DFlash2's walk reads its lattice and DSpark's cut its confidences instead
        in_graph = self.sample_in_graph and (self.p_min == 0 or self.variant != "dflash")
        for g in group_by_size([n_block] * len(lanes), self.ctx.n_ubatch):
            grp = [lanes[i] for i in g]
            pos = np.concatenate([np.arange(p0, p0 + n_block, dtype=np.int32)
                                  for _, _, _, p0, _ in grp])
            block = np.concatenate([[t] + [self.mask_id] * (n_block - 1)
                                    for _, _, t, _, _ in grp]).astype(np.int32)
            seqs = np.repeat(np.array([s for _, s, _, _, _ in grp], np.int32), n_block)
            logits = self.ctx.process(pos, token=block, output=np.ones(len(pos), bool),
                                      seq_id=seqs, sample=in_graph)
            sampled, side = self.ctx.sampled, self.ctx.h_nextn
            for j, (k, seq, _, p0, n_max) in enumerate(grp):
                rs = slice(j * n_block, (j + 1) * n_block)
                side_j = None if side is None else side[rs]
                if in_graph:
                    ids, rows = self.read_block_ids(sampled[rs], side_j), None
                else:
                    ids, rows = self.read_block(logits[rs], side_j)
                # the block's own K/V must not outlive the draft (the target's features
                # replace them)
                self.ctx.seq_rm(seq, p0, -1)
                ids = ids[:n_max]
                rows = None if rows is None else rows[:n_max]
                if len(ids) < self.n_min:
                    ids, rows = [], None
                self.last_block_logits = None if logits is None else logits[rs]
                # the ids are the argmax of each slot, not samples of its softmax: for
                # rejection sampling the draft is a point mass (probs None)
                out[k] = Draft(ids, None, rows if len(ids) else None)
        return out

    def read_block_ids(self, sampled, side):
        """read_block from the in-graph argmax of every block row (no logits copied)."""
        n_block = len(sampled)
        if self.variant == "dflash2":
            return self._walk_lattice(side, None)[0]
        first = 1
        if self.variant == "dspark":
            first = 0 if self.hp.sample_from_anchor else 1
        ids = []
        for i in range(first, n_block):
            if self.variant == "dspark" and self.p_min > 0 and side is not None \
                    and side[i, 0] < self.p_min:
                break
            ids.append(int(sampled[i]))
        return ids

    def read_block(self, logits, side):
        n_block = logits.shape[0]
        if self.variant == "dflash2":
            return self._walk_lattice(side, logits)
        if self.variant == "dspark":
            first = 0 if self.hp.sample_from_anchor else 1
            ids, keep = [], []
            for i in range(first, n_block):
                if self.p_min > 0 and side is not None and side[i, 0] < self.p_min:
                    break
                ids.append(int(np.argmax(logits[i])))
                keep.append(i)
            return ids, logits[keep]
        ids, keep = [], []
        for i in range(1, n_block):
            if top_prob(logits[i]) < self.p_min:
                break
            ids.append(int(np.argmax(logits[i])))
            keep.append(i)
        return ids, logits[keep]

    def _walk_lattice(self, lattice, logits):
        k = self.hp.selector_top_k
        ids, keep, pred = [], [], 0
        n = lattice.shape[0] if logits is None else min(lattice.shape[0], logits.shape[0])
        for i in range(1, n):
            row = lattice[i]
            scores = row[k + pred * k: k + pred * k + k].astype(np.float64)
            pred = int(np.argmax(scores))
            if self.p_min > 0 and 1.0 / np.sum(np.exp(scores - scores[pred])) < self.p_min:
                break
            ids.append(int(row[pred]))
            keep.append(i)
        return ids, None if logits is None else logits[keep]

    def clone(self):
        target, draft_model, kw = self._args
        return type(self)(target, draft_model, **kw)

    def accept_seqs(self, items):
        # rejected positions keep no injected features
        for seq, n_accepted in items:
            p0 = self._pos0.get(seq, -1)
            if p0 >= 0:
                self.ctx.seq_rm(seq, p0 + int(n_accepted) + 1, -1)

    def reset(self):
        self.ctx.reset()
        self._pos0 = {}
