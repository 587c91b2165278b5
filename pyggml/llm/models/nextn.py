"""The generic NextN (MTP) draft block, shared by the architectures that carry NextN heads.

A model with `nextn_predict_layers = N` stores N extra blocks after its trunk. The draft
graph runs block `n_layer + nextn_layer_offset` on entries that pair a token id with a
hidden row h (the target's, or the draft's own previous one):

    e = get_rows(nextn.embed_tokens or token_embd, tokens)
    x = eh_proj @ concat(rms(e) * enorm, rms(h) * hnorm)        # [2D, T] -> [D, T]
    x = one decoder block of the trunk architecture at that layer (own KV cache)
    h_nextn = rms(x) * head_norm   (post-norm point)   or   x  (pre-norm point)
    logits  = (nextn.shared_head_head or output) @ rms(x) * head_norm   on the output rows

An architecture's MtpGraph subclasses NextNGraph (and its trunk builder, for the block's
helpers) and supplies `nextn_inputs()` (position / attention inputs) and `nextn_block()`.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import pyggml as gg

from ..graph import GraphContext, NormType
from ..inputs import GraphInput, _allocated, _input

NEXTN = {"eh_proj": "nextn.eh_proj.weight", "enorm": "nextn.enorm.weight",
         "hnorm": "nextn.hnorm.weight"}
NEXTN_OPTIONAL = {"embed_tokens": "nextn.embed_tokens.weight",
                  "shared_head_head": "nextn.shared_head_head.weight",
                  "shared_head_norm": "nextn.shared_head_norm.weight"}


class InpEmbdH(GraphInput):
    """Token ids I32 [T] and each entry's hidden row F32 [width, T] (from ubatch.embd)."""

    def __init__(self, ctx, n_tokens: int, width: int):
        self.width = width
        self.tokens = _input(ctx, gg.I32, [n_tokens], "inp_tokens")
        self.h = _input(ctx, gg.F32, [width, n_tokens], "mtp_h_input")

    def set_input(self, ub):
        if _allocated(self.tokens):
            self.tokens.numpy()[...] = ub.token
        if _allocated(self.h):
            self.h.numpy()[...] = np.asarray(ub.embd, np.float32).reshape(-1, self.width)

    def can_reuse(self, params):
        ub = params.ubatch
        return (ub.token is not None and ub.embd is not None
                and self.tokens.ne[0] == ub.n_tokens)


def check_nextn_tensors(model, n_layer: int, n_nextn: int, block_tensors) -> None:
    """Every NextN block must have its decoder-block tensors and eh_proj, enorm, hnorm."""
    for il in range(n_layer, n_layer + n_nextn):
        for n in list(block_tensors) + list(NEXTN.values()):
            model.get(f"blk.{il}.{n}")


class NextNGraph(GraphContext):
    """The draft graph around one NextN block (see the module docstring)."""

    H_NEXTN_POST_NORM = True     # False: h_nextn is the block output before the head norm

    def nextn_width(self) -> int:
        """Width of the hidden rows an entry carries."""
        return self.hparams.n_embd

    def nextn_layer(self) -> int:
        hp, off = self.hparams, self.params.nextn_layer_offset
        if hp.n_nextn <= 0:
            raise ValueError(f"{hp.arch}: the model has no NextN blocks (nextn_predict_layers = 0)")
        if not 0 <= off < hp.n_nextn:
            raise ValueError(f"{hp.arch}: nextn_layer_offset {off} out of range [0, {hp.n_nextn})")
        return hp.n_layer + off

    def nextn_tensors(self, il: int) -> SimpleNamespace:
        m = self.model
        w = {f: m.get(f"blk.{il}.{n}") for f, n in NEXTN.items()}
        w.update({f: m.get(f"blk.{il}.{n}", required=False) for f, n in NEXTN_OPTIONAL.items()})
        return SimpleNamespace(**w)

    # hooks ------------------------------------------------------------------------------
    def nextn_inputs(self):
        """Create the block's position / attention inputs; returned to nextn_block."""
        raise NotImplementedError

    def nextn_block(self, inputs, x, il: int):
        """One trunk decoder block at layer il on x [D, T]."""
        raise NotImplementedError

    # the graph ----------------------------------------------------------------------------
    def build_nextn_embed(self, W, il: int):
        """eh_proj(concat(rms(e)*enorm, rms(h)*hnorm)) for this ubatch's entries."""
        c = self.ctx0
        inp = self.res.add_input(InpEmbdH(c, self.n_tokens, self.nextn_width()))
        self.res.t_inp_tokens = inp.tokens
        emb_w = W.embed_tokens if W.embed_tokens is not None else self.model.get("token_embd.weight")
        e = self.cb(gg.get_rows(c, emb_w, inp.tokens), "mtp_tok_embd", il)
        self.res.t_inp_embd = e
        h = self.cb(self.build_norm(inp.h, W.hnorm, type=NormType.RMS, il=il), "mtp_hnorm", il)
        e = self.cb(self.build_norm(e, W.enorm, type=NormType.RMS, il=il), "mtp_enorm", il)
        x = self.cb(gg.concat(c, e, h, 0), "mtp_concat", il)
        return self.cb(self.build_lora_mm(W.eh_proj, x), "mtp_eh_proj", il)

    def build_nextn_head(self, x, W, out_ids):
        c, m = self.ctx0, self.model
        norm_w = W.shared_head_norm if W.shared_head_norm is not None else m.get("output_norm.weight")
        head = W.shared_head_head
        if head is None:
            head = m.get("output.weight", required=False)
        if head is None:
            head = m.get("token_embd.weight")
        if self.H_NEXTN_POST_NORM:
            x = self.build_norm(x, norm_w, type=NormType.RMS)
            self.res.t_h_nextn = self.cb(x, "h_nextn")
            x = self.cb(gg.get_rows(c, x, out_ids), "mtp_shared_head_norm")
        else:
            x = self.cb(gg.get_rows(c, x, out_ids), "h_nextn")
            self.res.t_h_nextn = x
            x = self.cb(self.build_norm(x, norm_w, type=NormType.RMS), "mtp_shared_head_norm")
        self.res.t_embd = x
        logits = self.cb(self.build_lora_mm(head, x), "result_output")
        self.res.t_logits = logits
        return self.expand(logits)

    def build(self):
        il = self.nextn_layer()
        W = self.nextn_tensors(il)
        x = self.build_nextn_embed(W, il)
        inputs = self.nextn_inputs()
        out_ids = self.build_inp_out_ids()
        x = self.nextn_block(inputs, x, il)
        self.build_nextn_head(x, W, out_ids)
        self.build_sampling()
        return self.res
