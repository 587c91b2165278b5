"""The DeepSeek V4 graph input (llama.cpp's llm_graph_input_dsv4).

The raw part is an ordinary attention input over the memory's raw K-only cache (K row
indices and the SWA mask). For each compression ratio the model uses, the comp part holds
the plan's index tensors and the visibility masks of the compressed rows: `kq_mask`
(F16 with flash attention, else F32) for attention, and for ratio 4 `lid_mask` (F16, what
the fused lightning indexer reads).
"""
from __future__ import annotations

import functools

import numpy as np

import pyggml as gg
from pyggml import _core

from .inputs import GraphInput, InpAttn, _allocated, _input, mask_type
from .kv_cache_dsv4 import CSA_RATIO


class CompInput:
    FIELDS = (("state_pos", gg.I32), ("read_idxs", gg.I32), ("write_idxs", gg.I64),
              ("write_pos", gg.I32), ("persist_src", gg.I32), ("persist_dst", gg.I64),
              ("restore_src", gg.I32), ("restore_dst", gg.I64), ("snap_src", gg.I32),
              ("snap_dst", gg.I64))

    def __init__(self, ctx, plan, n_tokens: int, flash_attn: bool, name: str, with_lid: bool):
        self.name = name
        for f, type in self.FIELDS:   # restore/snapshot lists are empty without n_rs_seq
            n = len(getattr(plan, f))
            setattr(self, f, _input(ctx, type, [n], f"dsv4_{name}_state_{f}") if n else None)
        self.kq_mask = _input(ctx, mask_type(flash_attn), [plan.n_kv, n_tokens, 1, 1], f"dsv4_{name}_kq_mask")
        self.lid_mask = (_input(ctx, gg.F16, [plan.n_kv, n_tokens, 1, 1], "dsv4_lid_kq_mask")
                         if with_lid else None)
        self.n_kv, self.stream, self.n_blocks = plan.n_kv, plan.stream, len(plan.write_idxs)
        self.key = self._key(plan)
        self._lists = [(f, getattr(self, f)) for f, _ in self.FIELDS if getattr(self, f) is not None]

    @staticmethod
    def _key(plan):
        """Every list's length follows from the plan's key and the token count."""
        return plan.key() + (len(plan.pos),)

    def set_input(self, plan):
        for f, t in self._lists:
            if _allocated(t):
                t.numpy()[...] = getattr(plan, f)
        for t in (self.kq_mask, self.lid_mask):
            if _allocated(t):
                _core.dsv4_fill_comp_mask(t, plan.pos, plan.ratio)

    def matches(self, plan) -> bool:
        return self._key(plan) == self.key


@functools.lru_cache(maxsize=8)
def _hadamard(n: int) -> np.ndarray:
    r = np.ones((1, 1))
    while r.shape[0] < n:
        r = np.block([[r, r], [r, -r]])
    r = (r / np.sqrt(n)).astype(np.float32)
    r.flags.writeable = False
    return r


def hadamard(n: int) -> np.ndarray:
    """Orthonormal Walsh-Hadamard matrix in Sylvester order: R[i, j] = (-1)^popcount(i & j) / sqrt(n)
    (built once per size: every ubatch's input copies it)."""
    return _hadamard(n)


def hadamard_size(head_dim: int) -> int:
    """The rotation block of a head: the largest power of two >= 64 that divides it."""
    n = 64
    while head_dim % (2 * n) == 0:
        n *= 2
    if head_dim % n:
        raise ValueError(f"dsv4: head size {head_dim} has no Hadamard block (a multiple of 64 is needed)")
    return n


class InpDSV4(GraphInput):
    """`k_rot` maps a cache name ("lid", and "raw"/"csa"/"hca" when the model's key head
    equals the indexer head) to its Hadamard input [n, n]: those caches store rotated keys."""

    def __init__(self, ctx, mctx, n_tokens: int, flash_attn: bool, rotations: dict):
        self.mctx = mctx
        self.k_rot = {}
        for name, n in rotations.items():
            self.k_rot[name] = _input(ctx, gg.F32, [n, n], f"dsv4_{name}_k_rot")
        self.raw = InpAttn(ctx, mctx, n_tokens, flash_attn, causal=True)
        self.comp = {}
        for ratio, name in ((4, "csa"), (128, "hca")):
            plan = mctx.plan(ratio)
            if plan is not None:
                self.comp[ratio] = CompInput(ctx, plan, n_tokens, flash_attn, name,
                                             with_lid=ratio == CSA_RATIO)

    def set_input(self, ub):
        for t in self.k_rot.values():
            if _allocated(t):
                t.numpy()[...] = hadamard(t.ne[0])
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
