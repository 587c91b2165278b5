"""Graph inputs (llama.cpp's llm_graph_input_*), spec graph.md 2.1-2.3.

Each input creates its tensors at build time (named, flagged as inputs, in the no_alloc
compute context) and fills them in `set_input(ub)` from the host. The memory planner gives
storage only to tensors that the graph reaches, so every fill skips unallocated tensors.
`can_reuse(params)` says whether the tensors it would create now have the stored shapes, and
re-points the input at the new memory state.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import pyggml as gg


@dataclass
class UBatch:
    """One micro-batch: token ids (or embeddings), positions, a sequence id per token and
    output flags (token i produces a logits row when output[i])."""
    pos: np.ndarray                       # int32 [T]
    seq_id: np.ndarray                    # int32 [T] (one sequence per token)
    output: np.ndarray                    # bool [T]
    token: np.ndarray | None = None       # int32 [T]
    embd: np.ndarray | None = None        # float32 [T, n_embd]

    @property
    def n_tokens(self) -> int:
        return len(self.pos)

    @property
    def n_outputs(self) -> int:
        return int(np.count_nonzero(self.output))

    @property
    def out_ids(self) -> np.ndarray:
        return np.flatnonzero(self.output).astype(np.int32)

    @classmethod
    def from_tokens(cls, tokens, pos0: int = 0, seq_id: int = 0, output=None) -> "UBatch":
        tok = np.asarray(tokens, np.int32).ravel()
        n = len(tok)
        out = np.zeros(n, bool) if output is None else np.asarray(output, bool)
        if output is None and n:
            out[-1] = True
        return cls(pos=np.arange(pos0, pos0 + n, dtype=np.int32),
                   seq_id=np.full(n, seq_id, np.int32), output=out, token=tok)


def _input(ctx, type, ne, name):
    t = ctx.new_tensor(type, ne)
    t.name = name
    t.set_input()
    return t


def _allocated(t) -> bool:
    return t is not None and t.has_data


class GraphInput:
    def set_input(self, ub: UBatch) -> None:
        raise NotImplementedError

    def can_reuse(self, params) -> bool:
        return False


class InpEmbd(GraphInput):
    """Token ids I32 [T] (or float embeddings F32 [n_embd, T])."""

    def __init__(self, ctx, n_tokens: int, n_embd: int, use_embd: bool = False):
        self.n_embd = n_embd
        self.tokens = None if use_embd else _input(ctx, gg.I32, [n_tokens], "inp_tokens")
        self.embd = _input(ctx, gg.F32, [n_embd, n_tokens], "inp_embd") if use_embd else None

    def set_input(self, ub):
        if ub.token is not None and _allocated(self.tokens):
            self.tokens.numpy()[...] = ub.token
        if ub.embd is not None and _allocated(self.embd):
            self.embd.numpy()[...] = np.asarray(ub.embd, np.float32).reshape(-1, self.n_embd)

    def can_reuse(self, params):
        ub = params.ubatch
        if self.tokens is not None:
            return ub.token is not None and self.tokens.ne[0] == ub.n_tokens
        return ub.embd is not None and self.embd.ne[1] == ub.n_tokens


class InpPos(GraphInput):
    """Positions I32 [T] (one row per token; M-RoPE's 4 rows are not needed here)."""

    def __init__(self, ctx, n_tokens: int):
        self.pos = _input(ctx, gg.I32, [n_tokens], "inp_pos")

    def set_input(self, ub):
        if _allocated(self.pos):
            self.pos.numpy()[...] = ub.pos

    def can_reuse(self, params):
        return self.pos.ne[0] == params.ubatch.n_tokens


class InpOutIds(GraphInput):
    """Rows that produce outputs, I32 [O]; always present so topology does not depend on
    which tokens are outputs."""

    def __init__(self, ctx, n_outputs: int):
        self.out_ids = _input(ctx, gg.I32, [n_outputs], "out_ids")

    def set_input(self, ub):
        if _allocated(self.out_ids):
            self.out_ids.numpy()[...] = ub.out_ids

    def can_reuse(self, params):
        return self.out_ids.ne[0] == params.n_outputs


def mask_type(flash_attn: bool):
    """F16 masks for flash attention (its kernels read F16), F32 otherwise."""
    return gg.F16 if flash_attn else gg.F32


class InpAttnKV(GraphInput):
    """Unified KV cache input: K/V row indices (I64) and the KQ mask [n_kv, T, 1, 1]."""

    def __init__(self, ctx, kv, n_tokens: int, n_kv: int, flash_attn: bool, slot=None):
        self.kv, self.slot, self.flash_attn = kv, slot, flash_attn
        self.k_idxs = _input(ctx, gg.I64, [n_tokens], "attn_inp_k_idxs")
        n_v = n_tokens * kv.e_v if kv.v_trans else n_tokens
        self.v_idxs = _input(ctx, gg.I64, [n_v], "attn_inp_v_idxs")
        self.kq_mask = _input(ctx, mask_type(flash_attn), [n_kv, n_tokens, 1, 1], "attn_inp_kq_mask")

    @property
    def n_kv(self) -> int:
        return self.kq_mask.ne[0]

    def set_input(self, ub):
        if _allocated(self.k_idxs):
            self.kv.set_input_k_idxs(self.k_idxs, self.slot)
        if _allocated(self.v_idxs):
            self.kv.set_input_v_idxs(self.v_idxs, self.slot)
        if _allocated(self.kq_mask):
            self.kv.set_input_kq_mask(self.kq_mask, ub, causal=True)

    def can_reuse(self, params):
        self.kv, self.slot = params.kv, params.slot  # re-bind to this step's memory state
        return (self.k_idxs.ne[0] == params.ubatch.n_tokens
                and self.kq_mask.ne[:2] == [params.n_kv, params.ubatch.n_tokens])


class InpAttnNoCache(GraphInput):
    """Attention over the ubatch itself: mask [T, T, 1, 1] (causal within a sequence)."""

    def __init__(self, ctx, n_tokens: int, flash_attn: bool, causal: bool = True):
        self.causal = causal
        self.kq_mask = _input(ctx, mask_type(flash_attn), [n_tokens, n_tokens, 1, 1],
                              "self_kq_mask")

    @staticmethod
    def mask(ub: UBatch, causal: bool = True) -> np.ndarray:
        pos = np.asarray(ub.pos, np.int64)
        ok = ub.seq_id[:, None] == ub.seq_id[None, :]
        if causal:
            ok &= pos[None, :] <= pos[:, None]
        return np.where(ok, np.float32(0), np.float32(-np.inf))

    def set_input(self, ub):
        if _allocated(self.kq_mask):
            self.kq_mask.numpy()[...] = self.mask(ub, self.causal).reshape(self.kq_mask.numpy().shape)

    def can_reuse(self, params):
        return self.kq_mask.ne[0] == params.ubatch.n_tokens
