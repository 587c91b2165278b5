"""Graph inputs of draft models (EAGLE3, DFlash): float rows instead of (or next to) token ids.

A draft decodes batches whose entries carry a float row of arbitrary width: the concatenated
target features of an EAGLE3 encoder or a DFlash KV injection (rows only), or EAGLE3's
(token id, g row) pairs (both). `InpBlocks` keeps a graph from being reused for a batch with
another number of equal-length blocks (the DSpark and DFlash2 heads depend on it).
"""
from __future__ import annotations

import numpy as np

import pyggml as gg

from .inputs import GraphInput, _allocated, _input


class InpRows(GraphInput):
    """F32 rows [width, T], and I32 token ids [T] when `with_tokens`."""

    def __init__(self, ctx, n_tokens: int, width: int, with_tokens: bool = False):
        self.width, self.n_tokens = width, n_tokens
        self.tokens = _input(ctx, gg.I32, [n_tokens], "inp_tokens") if with_tokens else None
        self.embd = _input(ctx, gg.F32, [width, n_tokens], "inp_embd")

    def set_input(self, ub):
        if ub.embd is None:
            raise ValueError(f"draft graph: this graph reads float rows of width {self.width}; "
                             "the batch has none")
        rows = np.asarray(ub.embd, np.float32)
        if rows.size != self.width * self.n_tokens:
            raise ValueError(f"draft graph: expected {self.n_tokens} rows of width {self.width}, "
                             f"got an array of shape {rows.shape}")
        if _allocated(self.embd):
            self.embd.numpy()[...] = rows.reshape(self.n_tokens, self.width)
        if self.tokens is not None and _allocated(self.tokens):
            self.tokens.numpy()[...] = ub.token

    def can_reuse(self, params):
        ub = params.ubatch
        return (ub.n_tokens == self.n_tokens and ub.embd is not None
                and (ub.token is not None) == (self.tokens is not None))


def n_blocks_of(ub) -> int:
    """Number of sequences in a ubatch (one block per drafting sequence)."""
    return max(1, len(np.unique(ub.seq_id)))


class InpBlocks(GraphInput):
    """No tensor: pins the number of blocks the graph was built for."""

    def __init__(self, n_blocks: int):
        self.n_blocks = n_blocks

    def set_input(self, ub):
        pass

    def can_reuse(self, params):
        return n_blocks_of(params.ubatch) == self.n_blocks


def shared_tensor(model, params, name: str, required: bool = True):
    """The draft's own tensor `name`, else the target's (params.other_model), else None / an
    error naming both models."""
    t = model.get(name, required=False)
    if t is not None:
        return t
    other = getattr(params, "other_model", None)
    if other is not None:
        t = other.get(name, required=False)
    if t is None and required:
        where = "nor the target" if other is not None else "and no target was given"
        raise KeyError(f"{model.arch} draft: has no tensor {name!r} {where}; pass the target "
                       f"model (DraftContext(..., other=target)) to share it")
    return t


def shared_output(model, params):
    """The draft's output matrix, else the target's (its token embedding when tied)."""
    t = shared_tensor(model, params, "output.weight", required=False)
    if t is None:
        other = getattr(params, "other_model", None)
        t = None if other is None else other.get("token_embd.weight", required=False)
    if t is None:
        raise KeyError(f"{model.arch} draft: neither the draft nor the target has an output "
                       "matrix; pass the target model (DraftContext(..., other=target))")
    return t


def draft_attention_hparams(r, kv: dict, arch: str, rope_type: int) -> dict:
    """The attention and size fields every draft architecture reads the same way (a dict of
    HParams fields: arch .. rms_eps), with llama.cpp's defaults."""
    n_embd = r.get("embedding_length", required=True)
    n_head = r.get("attention.head_count", required=True)
    head_k = r.get("attention.key_length", n_embd // n_head)
    factor = r.get("rope.scaling.factor", 0.0, float)
    tokens = kv.get("tokenizer.ggml.tokens")
    return dict(arch=arch, n_vocab=r.get("vocab_size", len(tokens) if isinstance(tokens, list) else 0),
                n_ctx_train=r.get("context_length", 4096), n_embd=n_embd,
                n_layer=r.get("block_count", required=True),
                n_ff=r.get("feed_forward_length", required=True), n_head=n_head,
                n_head_kv=r.get("attention.head_count_kv", n_head), head_dim_k=head_k,
                head_dim_v=r.get("attention.value_length", n_embd // n_head),
                n_rot=r.get("rope.dimension_count", head_k),
                rope_freq_base=r.get("rope.freq_base", 10000.0, float),
                rope_freq_scale=1.0 / factor if factor else 1.0, rope_type=rope_type,
                rms_eps=r.get("attention.layer_norm_rms_epsilon", required=True, kind=float))
