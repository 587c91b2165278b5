"""llama.cpp's MTP draft path driven through llama_cpp (ctypes): a target context exporting
h_nextn unmasked and a second context (ctx_type MTP, ctx_other = target) over the same
model loaded with load_mtp, decoding entries that carry a token id and a hidden row.

`run_mtp_loop` is the single-sequence greedy speculative loop in the server's step order
(draft, drop the draft region, target verify, MTP catch-up, accept, seq_rm both); it runs
over either side through the small `MtpSide` interface so pyggml and llama.cpp take the
very same steps. `drafter_loop` takes the same steps through pyggml's MtpDrafter, and
`forced` makes drafts that are right up to a chosen index (full, partial, zero acceptance)."""
from __future__ import annotations

import ctypes

import numpy as np

CTX_TYPE_MTP = 1
PROCESS_DECODE = 1


class LlamaMtpSide:
    """Target + MTP contexts in llama.cpp."""

    def __init__(self, path, n_ctx=256, n_rs_seq=4, n_ubatch=64, flash_attn=False):
        import llama_cpp as lc
        import llama_cpp.llama_cpp_ext as ext
        self.lc, self.ext = lc, ext
        lc.llama_backend_init()
        mp = lc.llama_model_default_params()
        mp.load_mtp = True
        self.model = lc.llama_model_load_from_file(str(path).encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        self.n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self.model))
        self.n_embd = lc.llama_model_n_embd_out(self.model) if hasattr(lc, "llama_model_n_embd_out") \
            else lc.llama_model_n_embd(self.model)
        self.n_heads = int(lc.llama_model_n_layer_nextn(self.model))

        def params(**kw):
            cp = lc.llama_context_default_params()
            cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx, n_ubatch, n_ubatch, 1
            cp.n_threads = cp.n_threads_batch = 2
            cp.type_k = cp.type_v = 0                      # F32 caches: exact
            cp.flash_attn_type = 1 if flash_attn else 0
            for k, v in kw.items():
                setattr(cp, k, v)
            return cp

        self.tgt = lc.llama_init_from_model(self.model, params(n_rs_seq=n_rs_seq))
        if not self.tgt:
            raise RuntimeError("llama.cpp could not create the target context")
        self.dft = lc.llama_init_from_model(self.model, params(ctx_type=CTX_TYPE_MTP,
                                                               ctx_other=self.tgt, n_rs_seq=0,
                                                               n_outputs_max=1))
        if not self.dft:
            raise RuntimeError("llama.cpp could not create the MTP context")
        ext.llama_set_embeddings_nextn(self.tgt, True, False)
        ext.llama_set_embeddings_nextn(self.dft, True, True)
        self._keep = []

    def _process(self, ctx, tokens, pos0, hs=None, outputs=None):
        lc = self.lc
        b = lc.llama_batch_ext_init(ctx)
        self._keep = []
        try:
            for i, t in enumerate(tokens):
                idx = lc.llama_batch_ext_add_token(b, 0, int(t))
                assert idx == i, f"llama_batch_ext_add_token returned {idx}"
                pos = (lc.llama_pos * 1)(pos0 + i)
                self._keep.append(pos)
                lc.llama_batch_ext_set_pos(b, idx, pos)
                if hs is not None:
                    row = np.ascontiguousarray(hs[i], np.float32)
                    self._keep.append(row)
                    e = lc.llama_embd(row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 1, len(row))
                    assert lc.llama_batch_ext_set_embd_token(b, idx, e)
                if outputs is None or outputs[i]:
                    lc.llama_batch_ext_set_output_logits(b, idx, True)
            rc = lc.llama_process(ctx, PROCESS_DECODE, b)
            if rc != 0:
                raise RuntimeError(f"llama_process returned {rc}")
        finally:
            lc.llama_batch_ext_free(b)

    def _floats(self, ptr, n):
        return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)),
                                     shape=(n,)).astype(np.float32)

    # ---- the MtpSide interface ---------------------------------------------------------------
    def target_decode(self, tokens, pos0):
        """All rows: logits [n, V] and h_nextn [n, D]."""
        self._process(self.tgt, tokens, pos0)
        lg = np.stack([self._floats(self.lc.llama_get_logits_ith(self.tgt, i), self.n_vocab)
                       for i in range(len(tokens))])
        h = np.stack([self._floats(self.ext.llama_get_embeddings_nextn_ith(self.tgt, i), self.n_embd)
                      for i in range(len(tokens))])
        return lg, h

    def draft_decode(self, tokens, hs, pos0, want_output):
        """Last entry's logits and h_nextn (None, None without output)."""
        n = len(tokens)
        outs = [want_output and i == n - 1 for i in range(n)]
        self._process(self.dft, tokens, pos0, hs, outs)
        if not want_output:
            return None, None
        lg = self._floats(self.lc.llama_get_logits_ith(self.dft, n - 1), self.n_vocab)
        h = self._floats(self.ext.llama_get_embeddings_nextn_ith(self.dft, n - 1), self.n_embd)
        return lg, h

    def set_offset(self, k):
        self.ext.llama_set_nextn_layer_offset(self.dft, int(k))

    def seq_rm_target(self, p0):
        return bool(self.lc.llama_memory_seq_rm(self.lc.llama_get_memory(self.tgt), 0, p0, -1))

    def seq_rm_draft(self, p0):
        return bool(self.lc.llama_memory_seq_rm(self.lc.llama_get_memory(self.dft), 0, p0, -1))

    def close(self):
        self.lc.llama_free(self.dft)
        self.lc.llama_free(self.tgt)
        self.lc.llama_model_free(self.model)


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
