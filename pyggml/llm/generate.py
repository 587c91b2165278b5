"""Streaming generation: sample ids one by one from a Context, and turn them into text as
they come (a token may end in the middle of a UTF-8 character, so text is released only
when whole characters are available).

    stream = TokenStream(ctx, prompt_ids, n=64, sampler=sampler, stop=model.is_eog)
    text = TextStream(model)
    for tok in stream:
        print(text.push(tok), end="", flush=True)
    print(text.flush())
    stream.timings   # prompt/decode tokens and seconds, as Context.generate's last_timings
"""
from __future__ import annotations

import codecs
import time

import numpy as np

from .sampling import greedy

__all__ = ["TokenStream", "TextStream"]


class TokenStream:
    """Iterate over the ids sampled after decoding `prompt` into sequence `seq_id`.

    Every yielded id but the last is decoded into the context (so a later call can continue
    from it); `pending` is that last, not yet decoded id. Stops after `n` ids, when
    `stop(id)` is true (the stop id is yielded), or when the sequence reaches n_ctx.
    `stop_reason` is then "n", "stop" or "n_ctx"."""

    def __init__(self, ctx, prompt, n: int, sampler=None, stop=None, seq_id: int = 0):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"TokenStream: n must be an integer >= 0, got {n!r}")
        self.ctx, self.prompt, self.n, self.seq_id = ctx, list(prompt), int(n), seq_id
        self.sampler = sampler or greedy
        self.stop = stop
        self.ids: list[int] = []
        self.pending: int | None = None
        self.stop_reason = "n"
        self.timings: dict = {}

    def __iter__(self):
        ctx, seq = self.ctx, self.seq_id
        accept = getattr(self.sampler, "accept", None)
        if accept is not None:
            accept(self.prompt)             # penalties see the prompt, as llama.cpp's sampler does
        # greedy: the argmax is taken in the graph (the same id as np.argmax of the row)
        in_graph = self.sampler is greedy and hasattr(ctx, "decode_greedy")
        t0 = time.perf_counter()
        if in_graph:
            tok = ctx.decode_greedy(self.prompt, seq_id=seq)
        else:
            logits = ctx.decode(self.prompt, seq_id=seq)
        t1 = time.perf_counter()
        self._set_timings(t0, t1, t1)
        for i in range(self.n):
            if not in_graph:
                tok = int(self.sampler(logits[-1]))
            self.ids.append(tok)
            self.pending = tok
            last = i + 1 >= self.n
            if self.stop is not None and self.stop(tok):
                self.stop_reason, last = "stop", True
            elif not last and ctx.n_past(seq) >= ctx.n_ctx:
                self.stop_reason, last = "n_ctx", True
            self._set_timings(t0, t1, time.perf_counter())
            yield tok
            if last:
                break
            if in_graph:
                tok = ctx.decode_greedy([tok], seq_id=seq)
            else:
                logits = ctx.decode([tok], seq_id=seq)
            self.pending = None
        self._set_timings(t0, t1, time.perf_counter())
        ctx.last_timings = self.timings

    def _set_timings(self, t0, t1, t2):
        n_gen = len(self.ids)
        self.timings = {
            "prompt_tokens": len(self.prompt), "prompt_s": t1 - t0,
            "prompt_tokens_per_s": len(self.prompt) / max(t1 - t0, 1e-9),
            "gen_tokens": n_gen, "gen_s": t2 - t1,
            # the first id comes from the prompt's logits: decode speed counts the others
            "gen_tokens_per_s": max(n_gen - 1, 0) / max(t2 - t1, 1e-9),
            "stop_reason": self.stop_reason,
        }


class TextStream:
    """Incremental detokenizer: `push(id)` returns the text that became complete. The text is
    the tokens' pieces joined (a continuation keeps its leading space, unlike
    ``detokenize``, which drops it at the start of a text); control tokens render as ""
    unless `special`."""

    def __init__(self, model_or_vocab, special: bool = False):
        self.vocab = getattr(model_or_vocab, "tokenizer", model_or_vocab)
        self.special = special
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""

    def push(self, token_id: int) -> str:
        piece = self.vocab.token_to_piece(int(token_id), special=self.special)
        out = self._dec.decode(piece)
        self.text += out
        return out

    def flush(self) -> str:
        out = self._dec.decode(b"", final=True)
        self.text += out
        return out
