"""The speculative drivers of common/speculative.cpp (EAGLE3, DFlash, DSpark, DFlash2),
re-implemented over llama.cpp contexts (llama_cpp_driver.LlamaCppContext: target layer-input
taps, the draft's `ctx_other` and h_nextn side channel), and the server's speculative loop
that drives them or pyggml's drafters the same way (spec_drive.py)."""
from __future__ import annotations

import numpy as np

from llama_cpp_driver import ENCODE, LlamaCppContext


# ---- the speculative driver, once for llama.cpp's contexts ----------------------------------
class LlamaTarget:
    """A llama.cpp target context with layer-input taps, as the loop below drives it."""

    def __init__(self, path, tap_ids, **kw):
        self.m = LlamaCppContext.open(path, **kw)
        self.tap_ids = list(tap_ids)
        self.n_layer = self.m.model.n_layer
        # an id one past the last layer reads the target's unmasked h_nextn (EAGLE3)
        self.m.tap_layer_inputs([i for i in self.tap_ids if i < self.n_layer])
        if self.n_layer in self.tap_ids:
            self.m.enable_nextn(masked=False)

    def decode(self, tokens, pos0):
        self.m.decode_tokens(tokens, pos0, outputs=True)
        logits = np.stack([self.m.logits(i) for i in range(len(tokens))])
        taps = {il: (self.m.nextn(len(tokens)) if il == self.n_layer else self.m.layer_input(il))
                for il in self.tap_ids}
        return logits, taps

    def seq_rm(self, p0):
        assert self.m.seq_rm(p0, -1), "llama.cpp's target could not roll back"


class LlamaDFlashDraft:
    """draft-dflash / draft-dspark / draft-dflash2 of common/speculative.cpp, single sequence,
    greedy top-1, p_min = 0."""

    def __init__(self, path, target: LlamaTarget, n_max):
        self.d = LlamaCppContext.open(path, other=target.m, causal=False)
        self.block_size = int(self.d.model.meta("dflash.block_size") or 16)
        anchor = self.d.model.meta("dflash.sample_from_anchor")
        self.sample_from_anchor = anchor is None or anchor == "true"
        self.dspark = self.d.model.meta("dflash.has_confidence_head") is not None
        top_k = self.d.model.meta("dflash.selector_top_k")
        self.top_k = int(top_k) if top_k else 0
        self.d.enable_nextn(masked=not self.top_k)
        self.mask = int(self.d.model.meta("tokenizer.ggml.mask_token_id"))
        self.layers = [int(x) for x in target.tap_ids]
        cap = self.block_size if (self.dspark and self.sample_from_anchor) else self.block_size - 1
        self.n_max = min(n_max, cap)
        self.pos0 = -1

    def process(self, tokens, pos0, taps):
        feats = np.concatenate([taps[il] for il in self.layers], 1)
        self.d.run([(None, feats[i], pos0 + i, False) for i in range(len(tokens))])

    def draft(self, id_last, pos0):
        self.pos0 = pos0
        anchor_first = self.dspark and self.sample_from_anchor
        n_block = self.n_max + (0 if anchor_first else 1)
        self.d.run([(id_last if i == 0 else self.mask, None, pos0 + i, not self.top_k)
                    for i in range(n_block)])
        logits = np.stack([self.d.logits(i) for i in range(n_block)]) if not self.top_k else None
        ids = []
        if self.top_k:
            lat = self.d.nextn(n_block)
            pred, k = 0, self.top_k
            for i in range(1, n_block):
                scores = lat[i, k + pred * k: k + pred * k + k]
                pred = int(np.argmax(scores))
                ids.append(int(lat[i, pred]))
            self.lattice = lat
        else:
            first = (0 if self.sample_from_anchor else 1) if self.dspark else 1
            ids = [int(np.argmax(logits[i])) for i in range(first, n_block)]
        self.block_logits = logits
        self.d.seq_rm(pos0)
        return ids

    def accept(self, n_acc):
        self.d.seq_rm(self.pos0 + n_acc + 1)


class LlamaEagle3Draft:
    """draft-eagle3 of common/speculative.cpp, single sequence, greedy top-1, p_min = 0."""

    def __init__(self, path, target: LlamaTarget, n_max):
        self.d = LlamaCppContext.open(path, other=target.m)
        self.d.enable_nextn(masked=True)
        self.layers = [int(x) for x in target.tap_ids]
        self.n_max = n_max
        self.pending_pos, self.pending_g, self.verify_g, self.verify_pos = -1, None, None, -1

    def process(self, tokens, pos0, taps):
        feats = np.concatenate([taps[il] for il in self.layers], 1)
        n = len(tokens)
        p = self.d.pos_max() + 1   # the encoder ignores positions; the batch check does not
        self.d.run([(None, feats[i], p + i, True) for i in range(n)], kind=ENCODE)
        g = self.d.nextn(n)
        entries = []
        if self.pending_pos >= 0 and self.pending_pos + 1 == pos0 and self.pending_pos > self.d.pos_max():
            entries.append((tokens[0], self.pending_g, self.pending_pos, False))
        entries += [(tokens[k + 1], g[k], pos0 + k, False) for k in range(n - 1)]
        if entries:
            self.d.run(entries)
        self.verify_pos, self.verify_g = pos0, g
        self.pending_pos, self.pending_g = pos0 + n - 1, g[-1].copy()

    def draft(self, id_last, pos0):
        self.pos0 = pos0
        p = self.pending_pos
        self.d.seq_rm(p)
        self.d.run([(id_last, self.pending_g, p, True)])
        ids, rows = [], []
        while True:
            lg = self.d.logits(0)
            ids.append(int(np.argmax(lg)))
            rows.append(lg)
            if len(ids) >= self.n_max:
                break
            h = self.d.nextn(1)[0]
            self.d.run([(ids[-1], h, p + len(ids), True)])
        self.block_logits = np.stack(rows)
        self.d.seq_rm(pos0)
        return ids

    def accept(self, n_acc):
        i = min(n_acc, len(self.verify_g) - 1)
        self.pending_pos, self.pending_g = self.verify_pos + i, self.verify_g[i].copy()
        self.d.seq_rm(self.pos0 + n_acc + 1)


def speculative_loop(target, drafter, prompt, n_gen, truth=None, pattern=None):
    """The server's step order: draft, (draft region dropped by the drafter), target decodes
    [id_last, drafts], process, greedy verify, accept, trim the target. Returns the committed
    ids (n_gen of them) and per step (draft ids, n_accepted, draft logits).

    With `truth` (the target's greedy continuation of prompt) and `pattern`, the proposal sent
    to verification is forced: at step s its first pattern[s % len] tokens are the true ones,
    then one wrong token (full, partial and zero acceptance on random drafts). The draft
    itself still runs, so its tokens and logits stay comparable."""
    logits, taps = target.decode(prompt, 0)
    drafter.process(prompt, 0, taps)
    id_last = int(np.argmax(logits[-1]))
    out, steps, pos0 = [id_last], [], len(prompt)
    while len(out) < n_gen:
        ids = drafter.draft(id_last, pos0)
        drafted = list(ids)
        if truth is not None:
            m = min(pattern[len(steps) % len(pattern)], len(ids))
            k = len(out)
            ids = list(truth[k:k + m])
            if len(ids) < len(drafted):
                ids.append(3 if truth[k + m] != 3 else 4)   # a token the target does not pick
        batch = [id_last] + list(ids)
        logits, taps = target.decode(batch, pos0)
        drafter.process(batch, pos0, taps)
        new, acc = [], 0
        for i in range(len(ids) + 1):
            t = int(np.argmax(logits[i]))
            new.append(t)
            if i == len(ids) or t != ids[i]:
                break
            acc += 1
        drafter.accept(acc)
        target.seq_rm(pos0 + acc + 1)
        steps.append({"draft": drafted, "n_accepted": acc,
                      "logits": getattr(drafter, "block_logits", None),
                      "lattice": getattr(drafter, "lattice", None)})
        out += new
        id_last, pos0 = new[-1], pos0 + acc + 1
    return out[:n_gen], steps
