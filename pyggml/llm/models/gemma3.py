"""Gemma 3 (src/models/gemma3.cpp): the Gemma 2 layer (models/gemma2.py) with per-head RMS
norms on Q and K before RoPE and no attention soft cap.

The window is optional: with `attention.sliding_window` > 0 five of every six layers (or
`attention.sliding_window_pattern`) use it and their own RoPE base `rope.freq_base_swa`
(default 10000) without the RoPE scaling, which only the full-attention layers get; without
the key every layer is full attention with the global base. The final soft cap applies only
when `final_logit_softcapping` is present. Raw embedding batches are not scaled by
sqrt(n_embd) (only token ids are).
"""
from __future__ import annotations

from ..gguf_keys import KeyReader
from . import register
from .gemma2 import TENSORS, GemmaGraph, GemmaHParams, swa_pattern

__all__ = ["Gemma3Graph", "Gemma3HParams", "TENSORS"]


class Gemma3HParams(GemmaHParams):
    @classmethod
    def from_gguf(cls, kv: dict, arch: str) -> "Gemma3HParams":
        c = cls.common(kv, arch)
        r = KeyReader(kv, arch)
        n_swa = r.get("attention.sliding_window", 0)
        if n_swa > 0:
            swa_layers = swa_pattern(r, c["n_layer"], 6)
            base_swa = r.get("rope.freq_base_swa", 10000.0, float)
        else:
            n_swa, swa_layers, base_swa = 0, (False,) * c["n_layer"], 10000.0
        return cls(**c, n_swa=n_swa, swa_layers=swa_layers, rope_freq_base_swa=base_swa,
                   rope_freq_scale_swa=1.0, attn_soft_cap=0.0,
                   final_soft_cap=r.get("final_logit_softcapping", 0.0, float))


@register("gemma3")
class Gemma3Graph(GemmaGraph):
    HParams = Gemma3HParams
    SCALE_EMBEDDINGS_ALWAYS = False
    OUTPUT_ALWAYS_TIED = False
