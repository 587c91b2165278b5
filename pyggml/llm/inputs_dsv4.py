"""The DeepSeek V4 graph input (llama.cpp's llm_graph_input_dsv4).

The raw part is an ordinary attention input over the memory's raw K-only cache (K row
indices and the SWA mask). For each compression ratio the model uses, the comp part holds
the plan's index tensors and the visibility masks of the compressed rows: `kq_mask`
(F16 with flash attention, else F32) for attention, and for ratio 4 `lid_mask` (F16, what
the fused lightning indexer reads).
"""
from __future__ import annotations

import numpy as np

import pyggml as gg

from .inputs import GraphInput, InpAttn, _allocated, _input, mask_type
from .kv_cache_dsv4 import CSA_RATIO


class CompInput:
    def __init__(self, ctx, plan, n_tokens: int, flash_attn: bool, name: str, with_lid: bool):
        self.name = name
        self.state_rows = _input(ctx, gg.I64, [n_tokens], f"dsv4_{name}_state_rows")
        self.state_pos = _input(ctx, gg.I32, [n_tokens], f"dsv4_{name}_state_pos")
        self.read_idxs = _input(ctx, gg.I32, [len(plan.read_idxs)], f"dsv4_{name}_state_read_idxs")
        self.write_idxs = _input(ctx, gg.I64, [len(plan.write_idxs)], f"dsv4_{name}_state_write_idxs")
        self.write_pos = _input(ctx, gg.I32, [len(plan.write_pos)], f"dsv4_{name}_state_write_pos")
        self.kq_mask = _input(ctx, mask_type(flash_attn), [plan.n_kv, n_tokens, 1, 1], f"dsv4_{name}_kq_mask")
        self.lid_mask = (_input(ctx, gg.F16, [plan.n_kv, n_tokens, 1, 1], "dsv4_lid_kq_mask")
                         if with_lid else None)
        self.n_kv, self.stream, self.n_blocks = plan.n_kv, plan.stream, len(plan.write_idxs)

    def set_input(self, plan):
        for t, v in ((self.state_rows, plan.state_rows), (self.state_pos, plan.state_pos),
                     (self.read_idxs, plan.read_idxs), (self.write_idxs, plan.write_idxs),
                     (self.write_pos, plan.write_pos)):
            if _allocated(t):
                t.numpy()[...] = v
        m = None
        for t in (self.kq_mask, self.lid_mask):
            if _allocated(t):
                if m is None:
                    j = np.arange(plan.n_kv)[None, :]
                    m = np.where(j < plan.n_visible[:, None], np.float32(0), np.float32(-np.inf))
                t.numpy()[...] = m.reshape(t.numpy().shape)

    def matches(self, plan) -> bool:
        return (plan.n_kv, plan.stream, len(plan.write_idxs), len(plan.read_idxs)) == \
            (self.n_kv, self.stream, self.n_blocks, self.read_idxs.ne[0])


class InpDSV4(GraphInput):
    def __init__(self, ctx, mctx, n_tokens: int, flash_attn: bool):
        self.mctx = mctx
        self.raw = InpAttn(ctx, mctx, n_tokens, flash_attn, causal=True)
        self.comp = {}
        for ratio, name in ((4, "csa"), (128, "hca")):
            plan = mctx.plan(ratio)
            if plan is not None:
                self.comp[ratio] = CompInput(ctx, plan, n_tokens, flash_attn, name,
                                             with_lid=ratio == CSA_RATIO)

    def set_input(self, ub):
        self.raw.set_input(ub)
        for ratio, ci in self.comp.items():
            ci.set_input(self.mctx.plan(ratio))

    def can_reuse(self, params):
        ok = self.raw.can_reuse(params)
        mctx = params.mctx
        for ratio, ci in self.comp.items():
            plan = mctx.plan(ratio) if mctx is not None else None
            ok = ok and plan is not None and ci.matches(plan)
        self.mctx = mctx
        return ok
