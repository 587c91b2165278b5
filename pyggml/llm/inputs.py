"""Graph inputs (llama.cpp's llm_graph_input_*).

Each input creates its tensors at build time (named, flagged as inputs, in the no_alloc
compute context) and fills them in `set_input(ub)` from the host. The memory planner gives
storage only to tensors that the graph reaches, so every fill skips unallocated tensors.
`can_reuse(params)` says whether the tensors it would create now have the stored shapes, and
re-points the input at the new memory state.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import pyggml as gg

from .memory import NoCacheContext


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
        n = self.__dict__.get("_n_outputs")
        if n is None:
            n = self.__dict__["_n_outputs"] = int(np.count_nonzero(self.output))
        return n

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


def split_sizes(n_tokens: int, n_ubatch: int, keep_tail: int = 0) -> list[int]:
    """Ubatch lengths for n_tokens of one sequence: n_ubatch each, except that the last
    `keep_tail` tokens never straddle two ubatches (a ubatch is shortened instead)."""
    if keep_tail and n_ubatch <= keep_tail:
        raise ValueError(f"split: n_ubatch={n_ubatch} must exceed the {keep_tail} trailing tokens "
                         f"that share one ubatch (n_rs_seq + 1)")
    sizes, i = [], 0
    while i < n_tokens:
        take = min(n_ubatch, n_tokens - i)
        rest = n_tokens - i - take
        if keep_tail and 0 < rest < keep_tail:
            take = n_tokens - i - keep_tail
        sizes.append(take)
        i += take
    return sizes


def _input(ctx, type, ne, name):
    t = ctx.new_tensor(type, ne)
    t.name = name
    t.set_input()
    return t


def _allocated(t) -> bool:
    return t is not None and t.has_data


def _host_view(t):
    """The numpy view of an input tensor's storage, or None when the planner left it
    unallocated. Taken once per built graph: the storage does not move after alloc."""
    return t.numpy() if _allocated(t) else None


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
        self.n_tokens = n_tokens   # shapes kept here: reading them back from a tensor costs more
        self._views = None

    def set_input(self, ub):
        if self._views is None:
            self._views = (_host_view(self.tokens), _host_view(self.embd))
        tokens, embd = self._views
        if ub.token is not None and tokens is not None:
            tokens[...] = ub.token
        if ub.embd is not None and embd is not None:
            embd[...] = np.asarray(ub.embd, np.float32).reshape(-1, self.n_embd)

    def can_reuse(self, params):
        ub = params.ubatch
        if self.tokens is not None:
            return ub.token is not None and self.n_tokens == ub.n_tokens
        return ub.embd is not None and self.n_tokens == ub.n_tokens


class InpPos(GraphInput):
    """Positions I32 [T] (one row per token; M-RoPE's 4 rows are not needed here)."""

    def __init__(self, ctx, n_tokens: int):
        self.pos = _input(ctx, gg.I32, [n_tokens], "inp_pos")
        self.n_tokens = n_tokens
        self._view = False

    def set_input(self, ub):
        if self._view is False:
            self._view = _host_view(self.pos)
        if self._view is not None:
            self._view[...] = ub.pos

    def can_reuse(self, params):
        return self.n_tokens == params.ubatch.n_tokens


class InpOutIds(GraphInput):
    """Rows that produce outputs, I32 [O]; always present so topology does not depend on
    which tokens are outputs."""

    def __init__(self, ctx, n_outputs: int):
        self.out_ids = _input(ctx, gg.I32, [n_outputs], "out_ids")
        self.n_outputs = n_outputs
        self._view = False

    def set_input(self, ub):
        if self._view is False:
            self._view = _host_view(self.out_ids)
        if self._view is not None:
            if len(self._view) == ub.n_tokens:
                self._view[...] = np.arange(ub.n_tokens, dtype=np.int32) if ub.n_tokens > 1 else 0
            else:
                self._view[...] = ub.out_ids

    def can_reuse(self, params):
        return self.n_outputs == params.n_outputs


def mask_type(flash_attn: bool):
    """F16 masks for flash attention (its kernels read F16), F32 otherwise."""
    return gg.F16 if flash_attn else gg.F32


@dataclass
class LayerAttn:
    """What build_attn needs for one layer: the cache part and its input tensors."""
    part: object
    k_idxs: object
    v_idxs: object
    kq_mask: object


class InpAttn(GraphInput):
    """Attention input over a memory context: for each cache part it exposes (one for a
    unified cache, base + `_swa` for iSWA, the ubatch itself without a cache) the K/V row
    indices (I64) and the KQ mask [n_kv, T, 1, 1] (F16 for flash attention). The fills are
    the part's own `set_input_*` calls."""

    def __init__(self, ctx, mctx, n_tokens: int, flash_attn: bool, causal: bool = True):
        self.mctx, self.causal, self.n_tokens = mctx, causal, n_tokens
        self.tensors, self._shapes = [], []
        for part in mctx.parts():
            nk, nv = part.k_idxs_len(n_tokens), part.v_idxs_len(n_tokens)
            sfx = part.suffix
            k_idxs = _input(ctx, gg.I64, [nk], f"attn_inp_k_idxs{sfx}") if nk else None
            v_idxs = _input(ctx, gg.I64, [nv], f"attn_inp_v_idxs{sfx}") if nv else None
            name = f"attn_inp_kq_mask{sfx}" if nk else f"self_kq_mask{sfx}"
            mask = _input(ctx, mask_type(flash_attn), [part.n_kv, n_tokens, 1, 1], name)
            self.tensors.append((k_idxs, v_idxs, mask))
            self._shapes.append((nk, part.n_kv))   # checked by can_reuse without tensor reads

    @property
    def kq_mask(self):
        """The mask of the first part (the only one for a unified cache)."""
        return self.tensors[0][2]

    @property
    def k_idxs(self):
        return self.tensors[0][0]

    @property
    def v_idxs(self):
        return self.tensors[0][1]

    @property
    def n_kv(self) -> int:
        return self.kq_mask.ne[0]

    def layer(self, il: int) -> LayerAttn:
        for part, (k, v, m) in zip(self.mctx.parts(), self.tensors):
            if part.is_layer(il):
                return LayerAttn(part, k, v, m)
        raise ValueError(f"attention input: no cache part holds layer {il}")

    def set_input(self, ub):
        for part, (k, v, m) in zip(self.mctx.parts(), self.tensors):
            if _allocated(k):
                part.set_input_k_idxs(k, ub)
            if _allocated(v):
                part.set_input_v_idxs(v, ub)
            if _allocated(m):
                part.set_input_kq_mask(m, ub, self.causal)

    def can_reuse(self, params):
        mctx = params.mctx if params.mctx is not None else NoCacheContext(params.ubatch.n_tokens)
        parts = mctx.parts()
        T = params.ubatch.n_tokens
        ok = T == self.n_tokens and len(parts) == len(self.tensors)
        if ok:
            for part, (nk, n_kv) in zip(parts, self._shapes):
                ok = ok and nk == part.k_idxs_len(T) and n_kv == part.n_kv
        self.mctx = mctx  # re-bind to this step's memory state
        return ok
