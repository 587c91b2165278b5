"""Decoding (llama.cpp's llama_context).

`decode(ids)` splits the ids into ubatches, asks the memory to plan all of them, and for each
commits the plan, gets a graph for the ubatch's shape key (built once, then reused: only the
inputs are refilled), computes it and copies out the logits rows. Later calls continue the
sequence; `seq_rm`, `seq_cp`, `seq_keep` edit the memory as llama_memory_seq_* do.
"""
from __future__ import annotations

import os
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

import pyggml as gg

from .decode_step import DecodeShortcuts, _DecodeStep
from .graph import GraphParams, GraphResult, GraphType, graph_max_nodes
from .inputs import UBatch, split_sizes
from .models import build_graph, builder_for, load_hparams
from .sampling import greedy


# The output flags of a one-token ubatch, shared by every decode step (read-only).
_ONE_OUTPUT = np.ones(1, bool)
_ONE_OUTPUT.flags.writeable = False


@dataclass(frozen=True)
class ContextParams:
    """llama_context_params that shape the memory and the graphs."""
    n_ctx: int
    n_threads: int
    flash_attn: bool
    type_k: object
    type_v: object
    n_batch: int
    n_ubatch: int
    n_seq_max: int
    n_rs_seq: int
    ctx_type: str = "default"      # "mtp": the NextN draft context of the same model
    n_outputs_max: int = 0         # output rows a ubatch may have (0: n_batch)


class Generation(list):
    """The ids `generate` sampled, with why it stopped: "n" (as many as asked) or "n_ctx"
    (the sequence reached the context size; `truncated` is then True)."""

    def __init__(self, ids=(), stop_reason: str = "n"):
        super().__init__(ids)
        self.stop_reason = stop_reason

    @property
    def truncated(self) -> bool:
        return self.stop_reason == "n_ctx"


class Context(DecodeShortcuts):
    """A decoding context over a loaded model (pyggml.llm.model.Model).

    n_ctx is the longest sequence (positions 0..n_ctx-1); caches hold n_ctx padded to 256
    cells as upstream, shared by the sequences (n_seq_max > 1: each sequence's share n_ctx /
    n_seq_max padded up to 512 cells, its own aligned region, so that its logits do not depend
    on the others while it stays within it). flash_attn selects the flash-attention path (F16 KQ masks, V cache not
    transposed) or mul_mat + soft_max_ext (F32 masks, V cache transposed). Caches are F16 by
    default; type_k=type_v=gg.F32 gives llama.cpp's exact settings. n_seq_max sequences
    share the memory; n_rs_seq is the rollback depth of recurrent/compressor states (how
    many trailing positions seq_rm may remove from them). `outputs` names extra tensors
    (cb names such as "l_out-1") to keep after each ubatch: read them with `output(name)`.

    ctx_type="mtp" makes the NextN (MTP) draft context of a model that has NextN blocks:
    its memory holds only the NextN layers, its graphs are the architecture's draft graph
    (block `n_layer + nextn_layer_offset`, see set_nextn_layer_offset), and each decoded
    entry pairs a token id with a hidden row: `decode(ids, embd=rows)`. n_outputs_max
    bounds the output rows of one ubatch (default n_batch; 1 suits a draft context).
    embeddings_nextn keeps the `h_nextn` rows of each decode in `embd_nextn`: unmasked
    (the target: one row per decoded token) or masked (one row per output; the default of
    an MTP context); it stays None for architectures that export no h_nextn.
    """

    MAX_GRAPHS = 4  # built graphs kept (one per shape key); clear_graphs() drops them
    # ... and more while their compute buffers total at most this (small models: a long
    # prompt's ubatches each have their own n_kv, and evicting the decode graphs for them
    # makes every later shape rebuild)
    GRAPH_CACHE_BYTES = 128 << 20
    GRAPH_CACHE_MAX = 32

    def __init__(self, model, n_ctx: int = 512, n_threads: int = 2, flash_attn: bool = True,
                 n_batch: int = 2048, n_ubatch: int = 512, n_seq_max: int = 1, n_rs_seq: int = 0,
                 type_k=gg.F16, type_v=gg.F16, graph_reuse: bool | None = None,
                 backend_sampling: bool = False, outputs: tuple = (), ctx_type: str = "default",
                 n_outputs_max: int | None = None, embeddings_nextn: bool | None = None,
                 nextn_masked: bool | None = None):
        cls = builder_for(model.arch)  # fail early on an unknown architecture
        if ctx_type not in ("default", "mtp"):
            raise ValueError(f"Context: ctx_type={ctx_type!r}; expected 'default' or 'mtp'")
        if ctx_type == "mtp" and getattr(cls, "MtpGraph", None) is None:
            raise NotImplementedError(f"Context: architecture {model.arch!r} has no NextN (MTP) "
                                      f"draft graph")
        if n_outputs_max is None:
            n_outputs_max = n_batch
        if not isinstance(n_outputs_max, (int, np.integer)) or n_outputs_max <= 0:
            raise ValueError(f"Context: n_outputs_max={n_outputs_max!r} must be a positive integer")
        for name, v in (("n_ctx", n_ctx), ("n_batch", n_batch), ("n_ubatch", n_ubatch),
                        ("n_threads", n_threads), ("n_seq_max", n_seq_max)):
            if not isinstance(v, (int, np.integer)) or v <= 0:
                raise ValueError(f"Context: {name}={v!r} must be a positive integer")
        if not isinstance(n_rs_seq, (int, np.integer)) or n_rs_seq < 0:
            raise ValueError(f"Context: n_rs_seq={n_rs_seq!r} must be a non-negative integer")
        self.model = model
        self.hparams = hp = load_hparams(model)
        self.cparams = cp = ContextParams(
            n_ctx=int(n_ctx), n_threads=int(n_threads), flash_attn=bool(flash_attn),
            type_k=type_k, type_v=type_v, n_batch=int(n_batch),
            n_ubatch=int(min(n_ubatch, n_batch)), n_seq_max=int(n_seq_max), n_rs_seq=int(n_rs_seq),
            ctx_type=ctx_type, n_outputs_max=int(n_outputs_max))
        is_mtp = ctx_type == "mtp"
        self.gtype = GraphType.DECODER_MTP if is_mtp else GraphType.DEFAULT
        self.nextn_layer_offset = 0
        self.embeddings_nextn = is_mtp if embeddings_nextn is None else bool(embeddings_nextn)
        self.nextn_masked = is_mtp if nextn_masked is None else bool(nextn_masked)
        self.embd_nextn: np.ndarray | None = None
        self.n_ctx, self.n_threads, self.flash_attn = cp.n_ctx, cp.n_threads, cp.flash_attn
        self.n_batch, self.n_ubatch, self.n_seq_max = cp.n_batch, cp.n_ubatch, cp.n_seq_max
        if graph_reuse is None:
            graph_reuse = not os.environ.get("PYGGML_GRAPH_REUSE_DISABLE")
        self.graph_reuse = graph_reuse
        self.samplers = ("greedy",) if backend_sampling else ()
        self.outputs = tuple(outputs)
        self.memory = cls.create_memory(model, hp, cp)
        split_sizes(0, self.n_ubatch, getattr(self.memory, "keep_tail", 0))  # n_ubatch large enough
        self._graphs: OrderedDict = OrderedDict()
        self._max_nodes = graph_max_nodes(len(model.tensors), self.n_ubatch,
                                          hybrid=cls.HYBRID_NODE_BUDGET)
        self._last: GraphResult | None = None
        self._logits: np.ndarray | None = None
        self._logits_src = None      # (graph, n_outputs) whose logits rows are not copied yet
        # when a dict, every ubatch appends its `outputs` rows here (name -> list of arrays):
        # speculative decoding reads them for every token of a decode split over ubatches
        self.collected: dict | None = None
        # decode_greedy of one token after another takes a shortcut through the last one-token
        # graph (_DecodeStep); False keeps every step on the general path (tests compare both)
        self.fast_decode = True
        self._step: _DecodeStep | None = None
        # decode_greedy_rows' shortcuts per width (a speculative verify of k drafts: k + 1),
        # one per graph of that width (the attended width n_kv grows with the context)
        self._row_steps: dict = {}
        self.reset_timings()

    @property
    def logits(self) -> np.ndarray | None:
        """The last decode's logits float32 [n_outputs, n_vocab] (copied out of the graph on
        first access: a greedy loop that samples in the graph never copies them)."""
        if self._logits is None and self._logits_src is not None:
            res, n_out = self._logits_src
            self._logits = np.array(res.t_logits.numpy(), np.float32).reshape(n_out, -1)
            self._logits_src = None
        return self._logits

    @logits.setter
    def logits(self, value) -> None:
        self._logits, self._logits_src = value, None

    @property
    def kv(self):
        """The memory (a KVCache for the llama family)."""
        return self.memory

    # ---- NextN / MTP switches (llama_set_embeddings_nextn, llama_set_nextn_layer_offset) ----
    def set_embeddings_nextn(self, enabled: bool, masked: bool = False) -> None:
        """Keep h_nextn rows after each decode (`embd_nextn`): one per decoded token when
        not masked, one per output row when masked."""
        self.embeddings_nextn, self.nextn_masked = bool(enabled), bool(masked)

    def set_nextn_layer_offset(self, offset: int) -> None:
        """Which NextN block an MTP context's graph runs (0 = the first)."""
        n = getattr(self.hparams, "n_nextn", 0)
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) \
                or not 0 <= offset < max(n, 1):
            raise ValueError(f"set_nextn_layer_offset: offset {offset!r} out of range [0, {n})")
        self.nextn_layer_offset = int(offset)

    @property
    def n_embd_nextn(self) -> int:
        """Width of an h_nextn row (and of the hidden row an MTP entry carries)."""
        return int(getattr(self.hparams, "n_embd_nextn", self.hparams.n_embd))

    # ---- bookkeeping ----------------------------------------------------------------------
    def reset_timings(self) -> None:
        """timings: t_decode_s is the wall time inside decode/decode_greedy; of it
        t_compute_s ran the graphs, t_build_s built new ones, t_set_input_s filled inputs and
        t_host_s is the rest of _process_ubatch (memory plan commit, graph lookup). Host
        overhead per token = (t_decode_s - t_compute_s - t_build_s) / n_tokens."""
        self.timings = {"n_graph_build": 0, "n_graph_reuse": 0, "t_build_s": 0.0,
                        "t_set_input_s": 0.0, "t_compute_s": 0.0, "t_host_s": 0.0,
                        "t_decode_s": 0.0, "n_ubatch": 0, "n_tokens": 0}

    def clear_graphs(self) -> None:
        self._graphs.clear()
        self._last = None
        self._step = None
        self._row_steps.clear()

    def reset(self) -> None:
        """Forget every sequence (the memory) and the last logits."""
        self.memory.clear()
        self.logits = None

    def n_past(self, seq_id: int = 0) -> int:
        return self.memory.seq_pos_max(self._check_seq(seq_id, "n_past")) + 1

    # ---- sequence operations (llama_memory_seq_*) ----------------------------------------
    def _check_seq(self, seq_id, what: str, allow_all: bool = False) -> int:
        if isinstance(seq_id, bool) or not isinstance(seq_id, (int, np.integer)):
            raise TypeError(f"{what}: seq_id must be an int, got {type(seq_id).__name__}")
        if allow_all and seq_id < 0:
            return -1
        if not 0 <= seq_id < self.n_seq_max:
            raise ValueError(f"{what}: seq_id {seq_id} out of range [0, {self.n_seq_max})")
        return int(seq_id)

    def seq_rm(self, seq_id: int, p0: int = -1, p1: int = -1) -> bool:
        """Remove positions [p0, p1) of seq_id (p0 < 0: from 0, p1 < 0: to the end; seq_id < 0:
        every sequence). False when the memory cannot remove that range (it is unchanged)."""
        return bool(self.memory.seq_rm(self._check_seq(seq_id, "seq_rm", True), p0, p1))

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        """Let dst see positions [p0, p1) of src."""
        self.memory.seq_cp(self._check_seq(src, "seq_cp"), self._check_seq(dst, "seq_cp"), p0, p1)

    def seq_keep(self, seq_id: int) -> None:
        """Drop every sequence but seq_id."""
        self.memory.seq_keep(self._check_seq(seq_id, "seq_keep"))

    def seq_add(self, seq_id: int, p0: int, p1: int, delta: int) -> None:
        """Shift positions [p0, p1) of seq_id by delta (cached keys are re-roped)."""
        self.memory.seq_add(self._check_seq(seq_id, "seq_add"), p0, p1, delta)

    # ---- decode ---------------------------------------------------------------------------
    def _check_tokens(self, tokens) -> np.ndarray:
        if type(tokens) is list and 0 < len(tokens) <= 16:   # the decode loop's [id]
            n_vocab = self.hparams.n_vocab
            for t in tokens:
                if type(t) is not int or not 0 <= t < n_vocab:
                    break
            else:
                return np.array(tokens, np.int32)
        if isinstance(tokens, (str, bytes)):
            raise TypeError(f"decode: expected token ids (a sequence of ints), got "
                            f"{type(tokens).__name__} {tokens[:20]!r}; tokenize the text first")
        try:
            arr = np.asarray(tokens)
        except (TypeError, ValueError) as e:
            raise TypeError(f"decode: expected token ids (a sequence of ints): {e}") from None
        if arr.ndim != 1:
            arr = arr.ravel()
        if arr.size == 0:
            raise ValueError("decode: empty batch (pass at least one token id)")
        if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer)
                                     or np.issubdtype(arr.dtype, np.floating)):
            raise TypeError(f"decode: expected token ids (ints), got an array of {arr.dtype}")
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

    def _check_embd(self, embd, n: int) -> np.ndarray | None:
        is_mtp = self.cparams.ctx_type == "mtp"
        if embd is None:
            if is_mtp:
                raise ValueError("decode: an MTP context needs a hidden row per entry (embd=)")
            return None
        if not is_mtp:
            raise ValueError("decode: embd= (hidden rows next to the ids) is only for an MTP "
                             "context (ctx_type='mtp')")
        rows = np.asarray(embd, np.float32)
        width = self.n_embd_nextn
        if rows.ndim == 1:
            rows = rows.reshape(1, -1)
        if rows.shape != (n, width):
            raise ValueError(f"decode: embd has shape {rows.shape}; expected ({n}, {width}) "
                             f"(one hidden row per id)")
        return np.ascontiguousarray(rows)

    def decode(self, ids, logits_all: bool = False, seq_id: int = 0, embd=None) -> np.ndarray:
        """Append ids to sequence seq_id. Returns logits float32 [n_outputs, n_vocab]: every
        token's row when logits_all, else only the last token's. An MTP context takes the
        hidden row of every entry in embd float32 [len(ids), n_embd_nextn]."""
        t0 = time.perf_counter()
        self._decode(ids, logits_all, seq_id, (), embd)
        logits = self.logits
        self.timings["t_decode_s"] += time.perf_counter() - t0
        return logits

    def decode_greedy(self, ids, seq_id: int = 0, embd=None) -> int:
        """Append ids to sequence seq_id and return the argmax id of the last token's logits
        (the lowest id on ties, as np.argmax), taken in the graph: only that id leaves it.
        `logits` still gives the row, copied on first access."""
        t0 = time.perf_counter()
        st = self._step
        if st is not None and embd is None and type(ids) is list and len(ids) == 1:
            tok = self._decode_step(st, ids[0], seq_id, t0)
            if tok >= 0:
                return tok
        res = self._decode(ids, False, seq_id, ("greedy",), embd)
        tok = int(res.sampled_view()[-1])
        self.timings["t_decode_s"] += time.perf_counter() - t0
        if embd is None and res.params.ubatch.n_tokens == 1 and self.fast_decode:
            self._step = _DecodeStep.arm(self, res)
        return tok

    def decode_greedy_rows(self, ids, seq_id: int = 0) -> np.ndarray:
        """Append ids to sequence seq_id and return the argmax id of every token's logits row
        (int32 [len(ids)], the lowest id on ties), taken in the graph: a speculative verify.
        A list of ids of a width whose graph decoded before takes decode_greedy's shortcut
        (one C++ fill of the reused graph's inputs)."""
        t0 = time.perf_counter()
        n = len(ids)
        steps = self._row_steps.get(n) if type(ids) is list else None
        if steps:
            out = self._decode_rows_step(steps, ids, seq_id, t0)
            if out is not None:
                return out
        res = self._decode(ids, True, seq_id, ("greedy",))
        out = np.array(res.sampled_view(), np.int32)
        if len(out) < n:       # split over ubatches: only the last one's ids are in the graph
            out = np.array([int(np.argmax(r)) for r in self.logits], np.int32)
        elif n > 1 and self.fast_decode and res.params.ubatch.n_tokens == n:
            st = _DecodeStep.arm(self, res)
            if st is not None:      # first; the steps of graphs no longer cached go
                self._row_steps[n] = [st] + [o for o in steps or ()
                                             if self._graphs.get(o.key) is o.res
                                             and o.key != st.key]
        self.timings["t_decode_s"] += time.perf_counter() - t0
        return out[-n:]

    def _decode(self, ids, logits_all: bool, seq_id: int, samplers: tuple,
                embd=None) -> GraphResult:
        """decode's work; returns the last ubatch's graph. The logits stay in the graph until
        `logits` is read (one ubatch) or are gathered at once (several)."""
        tok = self._check_tokens(ids)
        seq_id = self._check_seq(seq_id, "decode")
        rows_h = self._check_embd(embd, len(tok))
        self.memory.update(self.n_threads)
        pos0 = self.n_past(seq_id)
        n = len(tok)
        if pos0 + n > self.n_ctx:
            raise ValueError(f"decode: sequence {seq_id} would reach {pos0 + n} tokens "
                             f"({pos0} cached + {n} new) but n_ctx is {self.n_ctx}")
        samplers = tuple(samplers) or self.samplers
        sizes = (1,) if n == 1 else split_sizes(n, self.n_ubatch, getattr(self.memory, "keep_tail", 0))
        ubs, wanted = [], []
        n_out_max = self.cparams.n_outputs_max
        if n == 1:    # a decoded token (small arrays from lists: cheaper than arange/full)
            ubs.append(UBatch(pos=np.array([pos0], np.int32), seq_id=np.array([seq_id], np.int32),
                              output=_ONE_OUTPUT, token=tok, embd=rows_h))
            wanted.append(True)
        elif len(sizes) == 1:
            out = np.ones(n, bool) if logits_all else np.zeros(n, bool)
            out[-1] = True
            if logits_all and n > n_out_max:
                raise ValueError(f"decode: a ubatch would have {n} output rows but "
                                 f"n_outputs_max is {n_out_max}")
            ubs.append(UBatch(pos=np.arange(pos0, pos0 + n, dtype=np.int32),
                              seq_id=np.full(n, seq_id, np.int32), output=out, token=tok,
                              embd=rows_h))
            wanted.append(True)
        else:
            out = np.zeros(n, bool)
            out[:] = logits_all
            out[-1] = True
            b1 = 0
            for size in sizes:
                b0, b1 = b1, b1 + size
                flags = out[b0:b1].copy()
                wanted.append(flags.any())
                flags[-1] = True  # a ubatch always has an output row: its shape then matches
                #                   the final ubatch's (graph reuse) and no graph has 0-row tensors
                if flags.sum() > n_out_max:
                    raise ValueError(f"decode: a ubatch would have {int(flags.sum())} output "
                                     f"rows but n_outputs_max is {n_out_max}")
                ubs.append(UBatch(pos=np.arange(pos0 + b0, pos0 + b1, dtype=np.int32),
                                  seq_id=np.full(b1 - b0, seq_id, np.int32), output=flags,
                                  token=tok[b0:b1],
                                  embd=None if rows_h is None else rows_h[b0:b1]))
        plans = self.memory.init_batch(ubs)
        if plans is None:
            raise ValueError(f"decode: the memory has no room for {n} more tokens of "
                             f"sequence {seq_id}")
        rows, nextn = [], []
        res = None
        for k, (ub, mctx, want) in enumerate(zip(ubs, plans, wanted)):
            res = self._process_ubatch(ub, mctx, samplers)
            if want and k + 1 < len(ubs):
                rows.append(self._copy_logits(res, ub.n_outputs))
            if self.embeddings_nextn:
                nextn.append(self._nextn_rows(ub, want))
        if rows:
            rows.append(self._copy_logits(res, ubs[-1].n_outputs))
            self.logits = np.concatenate(rows)
        else:
            self._logits, self._logits_src = None, (res, ubs[-1].n_outputs)
        if self.embeddings_nextn:       # None when the architecture exports no h_nextn
            self.embd_nextn = None if any(h is None for h in nextn) else np.concatenate(nextn)
        return res

    @staticmethod
    def _copy_logits(res: GraphResult, n_outputs: int) -> np.ndarray:
        return np.array(res.t_logits.numpy(), np.float32).reshape(n_outputs, -1)

    def _nextn_rows(self, ub: UBatch, want: bool) -> np.ndarray:
        """The h_nextn rows of the last ubatch: every token's (unmasked) or the output rows
        the caller asked for (masked)."""
        t = self._last.t_h_nextn
        if t is None:
            return None
        h = np.array(t.numpy(), np.float32).reshape(-1, self.n_embd_nextn)
        if not self.nextn_masked:
            if len(h) != ub.n_tokens:
                raise RuntimeError("h_nextn: the graph cropped its rows but the context is unmasked")
            return h
        if len(h) == ub.n_tokens and ub.n_outputs != ub.n_tokens:
            h = h[ub.out_ids]
        return h if want else h[:0]

    def _process_ubatch(self, ub: UBatch, mctx, samplers: tuple = ()):
        t0 = time.perf_counter()
        t_build0 = self.timings["t_build_s"]
        mctx.apply()
        try:
            params = GraphParams(arch=self.hparams.arch, hparams=self.hparams, ubatch=ub,
                                 n_outputs=ub.n_outputs, flash_attn=self.flash_attn, mctx=mctx,
                                 samplers=samplers or self.samplers, outputs=self.outputs,
                                 gtype=self.gtype, nextn_layer_offset=self.nextn_layer_offset,
                                 nextn_masked=self.nextn_masked,
                                 embeddings_nextn=self.embeddings_nextn, n_ctx=self.n_ctx)
            res = self._get_graph(params)
            t1 = time.perf_counter()
            res.set_inputs(ub)
            t2 = time.perf_counter()
            res.gf.compute(self.n_threads)
            t3 = time.perf_counter()
        except BaseException:
            # this ubatch's cells hold no valid state: forget them (a recurrent state cannot
            # drop just this ubatch: then the whole sequence goes)
            seq = int(ub.seq_id[0])
            if not self.memory.seq_rm(seq, int(ub.pos[0]), -1):
                self.memory.seq_rm(seq, -1, -1)
            raise
        self._last = res
        if self.collected is not None:
            for name in self.outputs:
                self.collected.setdefault(name, []).append(np.array(res.get(name).to_f32()))
        tm = self.timings
        tm["t_set_input_s"] += t2 - t1
        tm["t_compute_s"] += t3 - t2
        tm["t_host_s"] += (t1 - t0) - (tm["t_build_s"] - t_build0)
        tm["n_ubatch"] += 1
        tm["n_tokens"] += ub.n_tokens
        return res

    def output(self, name: str) -> np.ndarray:
        """A copy of the tensor named `name` from the last ubatch's graph (the name must be
        in the Context's `outputs`)."""
        if name not in self.outputs:
            raise KeyError(f"output: {name!r} is not kept; pass outputs=({name!r},) to Context")
        if self._last is None:
            raise RuntimeError("output: nothing decoded yet")
        return np.array(self._last.get(name).to_f32())

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
            st = res.gf.plan_stats()
            res.nbytes = st["peak_bytes"] + st["leaf_bytes"]
            self._graphs[key] = res
            graphs = self._graphs
            total = sum(getattr(g, "nbytes", 0) for g in graphs.values())
            while len(graphs) > self.MAX_GRAPHS and (total > self.GRAPH_CACHE_BYTES
                                                     or len(graphs) > self.GRAPH_CACHE_MAX):
                total -= getattr(graphs.popitem(last=False)[1], "nbytes", 0)
        return res

    # ---- generation -----------------------------------------------------------------------
    def generate(self, tokens, n: int, sampler=None, seq_id: int = 0) -> Generation:
        """Decode tokens, then sample up to n new ids (greedy by default: then the argmax is
        taken in the graph and no logits are copied, see decode_greedy). Every sampled id
        but the last is decoded; pass the last one as the next call's tokens to continue.
        Stops early, keeping what it sampled, when the sequence reaches n_ctx (the result's
        stop_reason is then "n_ctx")."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"generate: n must be an integer >= 0, got {n!r}")
        t0 = time.perf_counter()
        out = Generation()
        if sampler is None or sampler is greedy:
            # greedy: the argmax is taken in the graph, only the id comes back
            tok = self.decode_greedy(tokens, seq_id=seq_id)
            t1 = time.perf_counter()
            for i in range(n):
                out.append(tok)
                if i + 1 < n:
                    if self.n_past(seq_id) >= self.n_ctx:
                        out.stop_reason = "n_ctx"
                        break
                    tok = self.decode_greedy([tok], seq_id=seq_id)
        else:
            logits = self.decode(tokens, seq_id=seq_id)
            t1 = time.perf_counter()
            for i in range(n):
                tok = int(sampler(logits[-1]))
                out.append(tok)
                if i + 1 < n:
                    if self.n_past(seq_id) >= self.n_ctx:
                        out.stop_reason = "n_ctx"
                        break
                    logits = self.decode([tok], seq_id=seq_id)
        t2 = time.perf_counter()
        n_tok = len(np.asarray(tokens).ravel())
        self.last_timings = {
            "prompt_tokens": n_tok, "prompt_s": t1 - t0,
            "prompt_tokens_per_s": n_tok / max(t1 - t0, 1e-9),
            "gen_tokens": len(out), "gen_s": t2 - t1,
            "gen_tokens_per_s": max(len(out) - 1, 0) / max(t2 - t1, 1e-9),
            "stop_reason": out.stop_reason,
        }
        return out

    # llama-cpp-python's spelling
    run = generate
