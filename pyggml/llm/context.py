"""Decoding (llama.cpp's llama_context), spec graph.md 1.4 and 1.6.

`decode(tokens)` splits the tokens into ubatches; for each it plans cache cells, gets a graph
for the ubatch's shape key (built once, then reused: only the inputs are refilled), computes
it and copies out the logits rows. Later calls continue the sequence.
"""
from __future__ import annotations

import os
import time
from collections import OrderedDict

import numpy as np

import pyggml as gg

from .graph import GraphParams, GraphResult, graph_max_nodes
from .inputs import UBatch
from .kv_cache import KVCache, pad_to
from .models import build_graph, builder_for
from .models.llama import get_tensor
from .sampling import greedy


class Context:
    """A decoding context over a loaded model (pyggml.llm.model.Model).

    n_ctx is the longest sequence (positions 0..n_ctx-1); the KV cache holds n_ctx padded to
    256 cells as upstream. flash_attn selects the flash-attention path (F16 KQ mask, V cache
    not transposed) or mul_mat + soft_max_ext (F32 mask, V cache transposed).
    """

    MAX_GRAPHS = 4  # built graphs kept (one per shape key); clear_graphs() drops them

    def __init__(self, model, n_ctx: int = 512, n_threads: int = 2, flash_attn: bool = True,
                 n_batch: int = 2048, n_ubatch: int = 512, n_seq_max: int = 1,
                 type_k=gg.F16, type_v=gg.F16, graph_reuse: bool | None = None,
                 backend_sampling: bool = False):
        hp = model.hparams
        builder_for(hp.arch)  # fail early on an unknown architecture
        if n_ctx <= 0 or n_batch <= 0 or n_ubatch <= 0 or n_threads <= 0:
            raise ValueError(f"Context: n_ctx={n_ctx}, n_batch={n_batch}, n_ubatch={n_ubatch}, "
                             f"n_threads={n_threads} must all be positive")
        self.model, self.hparams = model, hp
        self.n_ctx, self.n_threads, self.flash_attn = int(n_ctx), int(n_threads), bool(flash_attn)
        self.n_batch, self.n_ubatch = int(n_batch), int(min(n_ubatch, n_batch))
        self.n_seq_max = n_seq_max
        if graph_reuse is None:
            graph_reuse = not os.environ.get("PYGGML_GRAPH_REUSE_DISABLE")
        self.graph_reuse = graph_reuse
        self.samplers = ("greedy",) if backend_sampling else ()
        self.kv = KVCache.for_model(hp, pad_to(self.n_ctx, 256), type_k=type_k, type_v=type_v,
                                    v_trans=not self.flash_attn, n_seq_max=n_seq_max,
                                    n_swa=getattr(hp, "n_swa", 0) or 0,
                                    swa_type=getattr(hp, "swa_type", 0) or 0)
        self._graphs: OrderedDict = OrderedDict()
        self._max_nodes = graph_max_nodes(len(getattr(model, "tensors", ()) or ()))
        self.logits: np.ndarray | None = None
        self.reset_timings()

    # ---- bookkeeping ----------------------------------------------------------------------
    def reset_timings(self) -> None:
        self.timings = {"n_graph_build": 0, "n_graph_reuse": 0, "t_build_s": 0.0,
                        "t_set_input_s": 0.0, "t_compute_s": 0.0, "t_host_s": 0.0,
                        "n_ubatch": 0, "n_tokens": 0}

    def clear_graphs(self) -> None:
        self._graphs.clear()

    def reset(self) -> None:
        """Forget every sequence (the cache) and the last logits."""
        self.kv.clear()
        self.logits = None

    def n_past(self, seq_id: int = 0) -> int:
        return self.kv.seq_pos_max(seq_id) + 1

    # ---- decode ---------------------------------------------------------------------------
    def _check_tokens(self, tokens) -> np.ndarray:
        arr = np.asarray(tokens)
        if arr.ndim != 1:
            arr = arr.ravel()
        if arr.size == 0:
            raise ValueError("decode: empty batch (pass at least one token id)")
        if not np.issubdtype(arr.dtype, np.integer):
            if not np.all(np.equal(np.mod(arr, 1), 0)):
                raise ValueError(f"decode: token ids must be integers, got dtype {arr.dtype}")
            arr = arr.astype(np.int64)
        n_vocab = self.hparams.n_vocab
        bad = (arr < 0) | (arr >= n_vocab)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"decode: token id {int(arr[i])} at index {i} is out of range "
                             f"[0, {n_vocab}) for this model's vocabulary")
        return arr.astype(np.int32)

    def decode(self, tokens, logits_all: bool = False, seq_id: int = 0) -> np.ndarray:
        """Append tokens to sequence seq_id. Returns logits float32 [n_outputs, n_vocab]:
        every token's row when logits_all, else only the last token's."""
        tok = self._check_tokens(tokens)
        if not 0 <= seq_id < self.n_seq_max:
            raise ValueError(f"decode: seq_id {seq_id} out of range [0, {self.n_seq_max})")
        self._apply_shift()
        pos0 = self.n_past(seq_id)
        if pos0 + len(tok) > self.n_ctx:
            raise ValueError(f"decode: sequence {seq_id} would reach {pos0 + len(tok)} tokens "
                             f"({pos0} cached + {len(tok)} new) but n_ctx is {self.n_ctx}")
        out = np.zeros(len(tok), bool)
        out[:] = logits_all
        out[-1] = True
        rows = []
        for b0 in range(0, len(tok), self.n_ubatch):
            b1 = min(b0 + self.n_ubatch, len(tok))
            flags = out[b0:b1].copy()
            wanted = flags.any()
            flags[-1] = True  # a ubatch always has an output row: its shape then matches the
            #                   final ubatch's (graph reuse) and no graph has 0-row tensors
            ub = UBatch(pos=np.arange(pos0 + b0, pos0 + b1, dtype=np.int32),
                        seq_id=np.full(b1 - b0, seq_id, np.int32), output=flags,
                        token=tok[b0:b1])
            r = self._process_ubatch(ub)
            if wanted:
                rows.append(r)
        self.logits = np.concatenate(rows) if len(rows) > 1 else rows[0]
        return self.logits

    def _process_ubatch(self, ub: UBatch):
        t0 = time.perf_counter()
        t_build0 = self.timings["t_build_s"]
        slot = self.kv.find_slot(ub)
        if slot is None:
            raise ValueError(f"decode: the KV cache ({self.kv.size} cells) has no room for "
                             f"{ub.n_tokens} more tokens")
        self.kv.apply_ubatch(slot, ub)
        try:
            params = GraphParams(arch=self.hparams.arch, hparams=self.hparams, ubatch=ub,
                                 n_outputs=ub.n_outputs, flash_attn=self.flash_attn, kv=self.kv,
                                 slot=slot, n_kv=self.kv.get_n_kv(), samplers=self.samplers)
            res = self._get_graph(params)
            t1 = time.perf_counter()
            res.set_inputs(ub)
            t2 = time.perf_counter()
            res.gf.compute(self.n_threads)
            t3 = time.perf_counter()
        except BaseException:
            # the cells of this ubatch hold no valid K/V: forget them
            self.kv.seq_rm(int(ub.seq_id[0]), int(ub.pos[0]), int(ub.pos[-1]) + 1)
            raise
        logits = None
        if ub.n_outputs:
            logits = np.array(res.t_logits.numpy(), np.float32).reshape(ub.n_outputs, -1)
        tm = self.timings
        tm["t_set_input_s"] += t2 - t1
        tm["t_compute_s"] += t3 - t2
        tm["t_host_s"] += (t1 - t0) - (tm["t_build_s"] - t_build0) + (time.perf_counter() - t3)
        tm["n_ubatch"] += 1
        tm["n_tokens"] += ub.n_tokens
        return logits

    def _get_graph(self, params: GraphParams) -> GraphResult:
        key = params.key()
        res = self._graphs.get(key) if self.graph_reuse else None
        if res is not None and res.can_reuse(params):
            self._graphs.move_to_end(key)
            self.timings["n_graph_reuse"] += 1
            return res
        t0 = time.perf_counter()
        res = build_graph(self.model, params, GraphResult(self._max_nodes))
        res.gf.alloc()
        self.timings["t_build_s"] += time.perf_counter() - t0
        self.timings["n_graph_build"] += 1
        if self.graph_reuse:
            self._graphs[key] = res
            while len(self._graphs) > self.MAX_GRAPHS:
                self._graphs.popitem(last=False)
        return res

    def _apply_shift(self) -> None:
        if self.kv.cells.has_shift:
            self.kv.apply_k_shift(self.hparams, self.n_threads,
                                  get_tensor(self.model, "rope_freqs.weight"))

    # ---- generation -----------------------------------------------------------------------
    def generate(self, tokens, n: int, sampler=None, seq_id: int = 0) -> list[int]:
        """Decode tokens, then sample n new ids (greedy by default). Every sampled id but the
        last is decoded; pass the last one as the next call's tokens to continue."""
        if n < 0:
            raise ValueError(f"generate: n must be >= 0, got {n}")
        sampler = sampler or greedy
        t0 = time.perf_counter()
        logits = self.decode(tokens, seq_id=seq_id)
        t1 = time.perf_counter()
        out: list[int] = []
        for i in range(n):
            tok = int(sampler(logits[-1]))
            out.append(tok)
            if i + 1 < n:
                logits = self.decode([tok], seq_id=seq_id)
        t2 = time.perf_counter()
        n_tok = len(np.asarray(tokens).ravel())
        self.last_timings = {
            "prompt_tokens": n_tok, "prompt_s": t1 - t0,
            "prompt_tokens_per_s": n_tok / max(t1 - t0, 1e-9),
            "gen_tokens": n, "gen_s": t2 - t1,
            "gen_tokens_per_s": max(n - 1, 0) / max(t2 - t1, 1e-9),
        }
        return out
