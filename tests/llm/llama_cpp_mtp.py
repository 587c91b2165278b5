"""llama.cpp's MTP draft path driven through llama_cpp (ctypes): a target context exporting
h_nextn unmasked and a second context (ctx_type MTP, ctx_other = target) over the same
model loaded with load_mtp, decoding entries that carry a token id and a hidden row.

`run_mtp_loop` is the single-sequence greedy speculative loop in the server's step order
(draft, drop the draft region, target verify, MTP catch-up, accept, seq_rm both); it runs
over either side through the small `MtpSide` interface so pyggml and llama.cpp take the
very same steps. `drafter_loop` takes the same steps through pyggml's MtpDrafter, and
`forced` makes drafts that are right up to a chosen index (full, partial, zero acceptance)."""
from __future__ import annotations

import numpy as np

from llama_cpp_driver import CTX_TYPE_MTP, LlamaCppContext, LlamaCppModel


def llama_mtp_side(path, **kw) -> "LlamaMtpSide":
    """LlamaMtpSide(path, **kw), or the test skipped where llama_cpp or its MTP path is absent."""
    import pytest
    pytest.importorskip("llama_cpp")
    try:
        return LlamaMtpSide(path, **kw)
    except (RuntimeError, AttributeError) as e:
        pytest.skip(f"llama.cpp MTP path unavailable: {e}")


class LlamaMtpSide:
    """Target + MTP contexts in llama.cpp (F32 caches: exact)."""

    def __init__(self, path, n_ctx=256, n_rs_seq=4, n_ubatch=64, flash_attn=False):
        self.model = LlamaCppModel(path, load_mtp=True)
        self.n_vocab, self.n_embd, self.n_heads = self.model.n_vocab, self.model.n_embd_out, self.model.n_nextn
        kw = dict(n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=flash_attn)
        self.tgt = LlamaCppContext(self.model, n_rs_seq=n_rs_seq, **kw)
        self.dft = LlamaCppContext(self.model, other=self.tgt, ctx_type=CTX_TYPE_MTP, n_rs_seq=0,
                                   n_outputs_max=1, **kw)
        self.tgt.enable_nextn(masked=False)
        self.dft.enable_nextn(masked=True)

    # ---- the MtpSide interface ---------------------------------------------------------------
    def target_decode(self, tokens, pos0):
        """All rows: logits [n, V] and h_nextn [n, D]."""
        n = len(tokens)
        self.tgt.decode_tokens(tokens, pos0, outputs=True)
        return (np.stack([self.tgt.logits(i) for i in range(n)]),
                np.stack([self.tgt.nextn_ith(i, self.n_embd) for i in range(n)]))

    def draft_decode(self, tokens, hs, pos0, want_output):
        """Last entry's logits and h_nextn (None, None without output)."""
        n = len(tokens)
        self.dft.run([(t, hs[i], pos0 + i, want_output and i == n - 1) for i, t in enumerate(tokens)])
        if not want_output:
            return None, None
        return self.dft.logits(n - 1), self.dft.nextn_ith(n - 1, self.n_embd)

    def set_offset(self, k):
        self.dft.set_nextn_layer_offset(k)

    def seq_rm_target(self, p0):
        return self.tgt.seq_rm(p0, -1)

    def seq_rm_draft(self, p0):
        return self.dft.seq_rm(p0, -1)

    def close(self):
        self.dft.close()
        self.tgt.close()
        self.model.close()


class PyggmlMtpSide:
    """The same interface over a pyggml target Context and an MtpDrafter's draft Context."""

    def __init__(self, target, draft_ctx):
        self.t, self.d = target, draft_ctx
        self.n_heads = draft_ctx.hparams.n_nextn
        self.n_embd = draft_ctx.n_embd_nextn

    def target_decode(self, tokens, pos0):
        assert self.t.n_past() == pos0
        lg = self.t.decode(tokens, logits_all=True)
        return lg, self.t.embd_nextn

    def draft_decode(self, tokens, hs, pos0, want_output):
        assert self.d.n_past() == pos0, (self.d.n_past(), pos0)
        lg = self.d.decode(tokens, embd=np.asarray(hs, np.float32))
        if not want_output:
            return None, None
        return lg[-1], self.d.embd_nextn[-1]

    def set_offset(self, k):
        self.d.set_nextn_layer_offset(k)

    def seq_rm_target(self, p0):
        return self.t.seq_rm(0, p0, -1)

    def seq_rm_draft(self, p0):
        return self.d.seq_rm(0, p0, -1)


class MixedMtpSide:
    """pyggml's target with llama.cpp's MTP context: checks the draft graph alone, on the
    same target hidden rows (llama.cpp 0.3.36's unmasked deepseek4 trunk h_nextn is wrong
    for the leading rows of multi-token ubatches: they do not reproduce its own logits)."""

    def __init__(self, target, llama_side):
        self.t, self.l = target, llama_side
        self.n_heads, self.n_embd = llama_side.n_heads, llama_side.n_embd

    def target_decode(self, tokens, pos0):
        assert self.t.n_past() == pos0
        return self.t.decode(tokens, logits_all=True), self.t.embd_nextn

    def seq_rm_target(self, p0):
        return self.t.seq_rm(0, p0, -1)

    def draft_decode(self, tokens, hs, pos0, want_output):
        return self.l.draft_decode(tokens, hs, pos0, want_output)

    def set_offset(self, k):
        self.l.set_offset(k)

    def seq_rm_draft(self, p0):
        return self.l.seq_rm_draft(p0)


def run_mtp_loop(side, prompt, n_gen, n_max, mismatch=None):
    """Greedy speculative decoding with the model's NextN head(s), in the server's order.
    `mismatch(step, drafts)` may replace drafts (to force rejections). Returns the committed
    ids and per step {"draft", "logits", "n_accepted"}."""
    chain = side.n_heads > 1
    if chain:
        n_max = min(n_max, side.n_heads)
    heads = range(side.n_heads) if chain else [None]
    zero = np.zeros(side.n_embd, np.float32)
    pending = zero

    def catch_up(tokens, pos0, H):
        nonlocal pending
        hs = np.concatenate([pending[None], H[:-1]])
        for head in heads:
            if head is not None:
                side.seq_rm_draft(pos0)
                side.set_offset(head)
            side.draft_decode(tokens, hs, pos0, False)
        if chain:
            side.set_offset(0)
        pending = H[-1].copy()

    lg, H = side.target_decode(prompt, 0)
    catch_up(prompt, 0, H)
    out, steps = [int(np.argmax(lg[-1]))], []
    pos0 = len(prompt)
    while len(out) < n_gen:
        id_last = out[-1]
        # (1) draft
        toks, hs, drafts, rows = [id_last], [pending], [], []
        for i in range(n_max):
            if chain:
                side.seq_rm_draft(pos0)
                side.set_offset(i)
                dl, dh = side.draft_decode(toks, np.stack(hs), pos0, True)
            else:
                dl, dh = side.draft_decode(toks[-1:], hs[-1][None], pos0 + i, True)
            rows.append(dl)
            tok = int(np.argmax(dl))
            drafts.append(tok)
            toks.append(tok)
            hs.append(dh)
        if chain:
            side.set_offset(0)
        # (2) drop the draft region
        side.seq_rm_draft(pos0)
        used = list(drafts) if mismatch is None else list(mismatch(len(steps), drafts))
        # (3) target verify, (4) catch-up
        batch = [id_last] + used
        lg, H = side.target_decode(batch, pos0)
        catch_up(batch, pos0, H)
        # (5) verify greedily
        n_acc = 0
        new = []
        for i in range(len(used) + 1):
            t = int(np.argmax(lg[i]))
            new.append(t)
            if i == len(used) or t != used[i]:
                break
            n_acc += 1
        # (6) accept, (7) roll both back
        pending = H[min(n_acc, len(H) - 1)].copy()
        side.seq_rm_target(pos0 + n_acc + 1)
        side.seq_rm_draft(pos0 + n_acc + 1)
        steps.append({"draft": drafts, "logits": np.stack(rows), "n_accepted": n_acc})
        out.extend(new)
        pos0 += n_acc + 1
    return out[:n_gen], steps


def drafter_loop(t, dr, prompt, n_gen, n_max, mismatch=None):
    """The server's order over MtpDrafter: draft, verify on the target, process, accept,
    roll the target back (its recurrent state through seq_rm within n_rs_seq)."""
    n_max = dr.bind(t, n_max)
    lg = t.decode(prompt, logits_all=True)
    dr.process(prompt, 0, {"h_nextn": t.embd_nextn})
    out, steps, pos0 = [int(np.argmax(lg[-1]))], [], len(prompt)
    while len(out) < n_gen:
        d = dr.draft(out[-1], pos0, n_max)
        used = list(d.ids) if mismatch is None else list(mismatch(len(steps), d.ids))
        batch = [out[-1]] + used
        lg = t.decode(batch, logits_all=True)
        dr.process(batch, pos0, {"h_nextn": t.embd_nextn})
        new = []
        for i in range(len(used) + 1):
            new.append(int(np.argmax(lg[i])))
            if i == len(used) or new[-1] != used[i]:
                break
        n_acc = len(new) - 1
        dr.accept(n_acc)
        if n_acc < len(used):
            assert t.seq_rm(0, pos0 + n_acc + 1, -1), "target rollback refused"
        steps.append({"draft": list(d.ids), "logits": dr.last_logits, "n_accepted": n_acc})
        out.extend(new)
        pos0 += n_acc + 1
    return out[:n_gen], steps


def forced(greedy, steps_at):
    """A mismatch policy: propose the true greedy continuation, wrong from index k on, with
    k cycling through steps_at (k >= n: the whole draft is right)."""
    state = {"pos": 0}

    def policy(step, drafts):
        k = steps_at[step % len(steps_at)]
        i = state["pos"]
        truth = greedy[i + 1:i + 1 + len(drafts)]
        prop = [truth[j] if j < k and j < len(truth) else (truth[j] + 1) % 256 if j < len(truth)
                else 3 for j in range(len(drafts))]
        n_acc = 0
        while n_acc < len(prop) and n_acc < len(truth) and prop[n_acc] == truth[n_acc]:
            n_acc += 1
        state["pos"] = i + n_acc + 1
        return prop
    return policy
