"""pyggml's side of the speculative loop in llama_cpp_spec.speculative_loop: a target Context
that keeps the drafter's taps, and a drafter adapter with the loop's calling convention."""
from __future__ import annotations

import numpy as np

import pyggml as gg
from pyggml.llm.context import Context


class PyTarget:
    def __init__(self, model, drafter_cls, draft_model, n_max, n_ctx=256, n_rs_seq=0, **kw):
        probe = drafter_cls(Context(model, n_ctx=n_ctx, n_rs_seq=n_rs_seq), draft_model)
        self.names = probe.target_outputs
        self.ctx = Context(model, n_ctx=n_ctx, type_k=gg.F32, type_v=gg.F32, flash_attn=False,
                           outputs=self.names, n_rs_seq=n_rs_seq)
        self.drafter = drafter_cls(self.ctx, draft_model, **kw)
        self.n_max = self.drafter.bind(self.ctx, n_max)

    def decode(self, tokens, pos0):
        assert self.ctx.n_past() == pos0
        logits = self.ctx.decode(tokens, logits_all=True)
        return logits, {n: self.ctx.output(n) for n in self.names}

    def seq_rm(self, p0):
        assert self.ctx.seq_rm(0, p0, -1), "the target could not roll back"


class PyDraft:
    """Wraps a pyggml Drafter: draft(id_last, pos0) -> ids, with the step's draft logits."""

    def __init__(self, target: PyTarget):
        self.t, self.d = target, target.drafter

    def process(self, tokens, pos0, taps):
        self.d.process(np.asarray(tokens), pos0, taps)

    def draft(self, id_last, pos0):
        dr = self.d.draft(id_last, pos0, self.t.n_max)
        self.block_logits = getattr(self.d, "last_block_logits", dr.logits)
        self.lattice = self.d.ctx.h_nextn if self.d.kind == "dflash2" else None
        return dr.ids

    def accept(self, n):
        self.d.accept(n)
