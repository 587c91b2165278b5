"""llama.cpp's C API driven through llama_cpp (llama-cpp-python's ctypes layer), for the
oracle tests that need more than the high-level Llama class exposes.

* `LlamaCppModel`: one loaded model (optionally with its MTP blocks), its sizes and metadata.
* `LlamaCppContext`: one context on a model (context type, `ctx_other`, `n_rs_seq`, F32 or
  default caches, flash attention, the graph eval callback), fed through the extended batch
  API (`llama_batch_ext_*`, `llama_process`), with logits and the side channels (target
  layer-input taps, h_nextn) read back as numpy arrays and the memory calls the drafts need.
* `llama_cpp_tensors`: named intermediate tensors of one decode, via the eval callback.
* `llama_cpp_greedy`: prompt logits then greedy steps through the high-level Llama class.

Only libllama is shipped (no libcommon): the speculative drivers built on these contexts
live in llama_cpp_spec.py (EAGLE3, DFlash) and llama_cpp_mtp.py (NextN heads)."""
from __future__ import annotations

import ctypes
import os

import numpy as np

ENCODE, DECODE = 0, 1            # llama_process kinds
GGML_F32 = 0
CTX_TYPE_MTP = 1

_LOG_CB = None


def _quiet(lc):
    """Silence llama.cpp's loader and context logs (once per process)."""
    global _LOG_CB
    if _LOG_CB is None:
        _LOG_CB = lc.llama_log_callback(lambda level, text, user: None)
        lc.llama_log_set(_LOG_CB, ctypes.c_void_p())


def _floats(ptr, n: int) -> np.ndarray:
    """A float32 copy of n floats at a C pointer."""
    return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(n,)).copy()


def _ext_fn(lib, plain, mangled, argtypes, restype):
    """A libllama symbol exported under its C name or, in this build, its C++-mangled one."""
    f = getattr(lib, plain, None) or getattr(lib, mangled)
    f.argtypes, f.restype = argtypes, restype
    return f


class LlamaCppModel:
    def __init__(self, path, *, load_mtp: bool = False):
        import llama_cpp as lc
        self.lc = lc
        _quiet(lc)
        lc.llama_backend_init()
        mp = lc.llama_model_default_params()
        if load_mtp:
            mp.load_mtp = True
        self.ptr = lc.llama_model_load_from_file(os.fspath(path).encode(), mp)
        if not self.ptr:
            raise RuntimeError(f"llama.cpp could not load {path}")
        self.n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self.ptr))
        self.n_embd = lc.llama_model_n_embd(self.ptr)
        self.n_layer = lc.llama_model_n_layer(self.ptr)

    @property
    def n_embd_out(self) -> int:
        """Width of the hidden rows the model hands to its drafts."""
        f = getattr(self.lc, "llama_model_n_embd_out", None)
        return f(self.ptr) if f is not None else self.n_embd

    @property
    def n_nextn(self) -> int:
        return int(self.lc.llama_model_n_layer_nextn(self.ptr))

    def meta(self, key) -> str | None:
        buf = ctypes.create_string_buffer(256)
        n = self.lc.llama_model_meta_val_str(self.ptr, key.encode(), buf, 256)
        return None if n < 0 else buf.value.decode()

    def close(self):
        self.lc.llama_model_free(self.ptr)


class LlamaCppContext:
    """One context, single sequence (seq 0). `kv_f32` gives F32 caches (exact), else
    llama.cpp's default types; `flash_attn` None keeps llama.cpp's automatic choice. Other
    context parameters (n_rs_seq, ctx_type, n_outputs_max, cb_eval) pass by name."""

    def __init__(self, model: LlamaCppModel, *, n_ctx=256, n_ubatch=64, n_threads=2, kv_f32=True,
                 flash_attn=False, other: "LlamaCppContext | None" = None, causal=True,
                 owns_model=False, **params):
        lc = self.lc = model.lc
        import llama_cpp.llama_cpp_ext as ext
        self.ext, self.model, self.owns_model = ext, model, owns_model
        cp = lc.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx, n_ubatch, n_ubatch, 1
        cp.n_threads = cp.n_threads_batch = n_threads
        if kv_f32:
            cp.type_k = cp.type_v = GGML_F32
        if flash_attn is not None:
            cp.flash_attn_type = 1 if flash_attn else 0
        if other is not None:
            cp.ctx_other = other.ptr
        for k, v in params.items():
            if not hasattr(cp, k):
                raise RuntimeError(f"this llama_cpp has no {k} context parameter")
            setattr(cp, k, v)
        self.ptr = lc.llama_init_from_model(model.ptr, cp)
        if not self.ptr:
            raise RuntimeError("llama.cpp could not create a context")
        if not causal:
            lc.llama_set_causal_attn(self.ptr, False)
        self.n_vocab, self.n_embd = model.n_vocab, model.n_embd
        self.last_n = 0

    @classmethod
    def open(cls, path, *, load_mtp=False, **kw) -> "LlamaCppContext":
        """A context on its own model (closed with it)."""
        return cls(LlamaCppModel(path, load_mtp=load_mtp), owns_model=True, **kw)

    # ---- batches ----------------------------------------------------------------------------
    def run(self, entries, kind=DECODE):
        """entries: (token | None, hidden row | None, pos, output) tuples, one per batch entry
        (a token with a row: an MTP / EAGLE3 entry; a row alone: an embedding entry)."""
        lc = self.lc
        b = lc.llama_batch_ext_init(self.ptr)
        keep = []
        try:
            for tok, row, pos, out in entries:
                e = None
                if row is not None:
                    row = np.ascontiguousarray(row, np.float32)
                    keep.append(row)
                    e = lc.llama_embd(row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 1, row.size)
                if tok is not None:
                    idx = lc.llama_batch_ext_add_token(b, 0, int(tok))
                    if e is not None:
                        assert lc.llama_batch_ext_set_embd_token(b, idx, e)
                else:
                    idx = lc.llama_batch_ext_add_embd(b, 0, e)
                assert idx >= 0, f"llama_batch_ext_add failed: {idx}"
                # M-RoPE embedding entries read 4 positions, every other entry 1
                parr = (ctypes.c_int32 * 4)(int(pos), int(pos), int(pos), 0)
                assert lc.llama_batch_ext_set_pos(b, idx, parr)
                lc.llama_batch_ext_set_output_logits(b, idx, bool(out))
            rc = lc.llama_process(self.ptr, kind, b)
            if rc != 0:
                raise RuntimeError(f"llama_process returned {rc}")
        finally:
            lc.llama_batch_ext_free(b)
        self.last_n = len(entries)

    def decode_tokens(self, tokens, pos0, outputs=True):
        self.run([(t, None, pos0 + i, outputs) for i, t in enumerate(tokens)])

    def decode(self, tokens, logits_all=False) -> np.ndarray:
        """Append tokens after the sequence's last position; the logits rows asked for."""
        n = len(tokens)
        self.run([(t, None, self.pos_max() + 1 + i, logits_all or i == n - 1)
                  for i, t in enumerate(tokens)])
        return np.stack([self.logits(i) for i in (range(n) if logits_all else [n - 1])])

    # ---- reads ------------------------------------------------------------------------------
    def logits(self, i) -> np.ndarray:
        return _floats(self.lc.llama_get_logits_ith(self.ptr, int(i)), self.n_vocab)

    def tap_layer_inputs(self, ids):
        f = _ext_fn(self.lc.llama_cpp._lib, "llama_set_embeddings_layer_inp",
                    "_Z30llama_set_embeddings_layer_inpP13llama_contextjb",
                    [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_bool], None)
        for i in ids:
            f(self.ptr, int(i), True)

    def layer_input(self, il) -> np.ndarray:
        """The tapped input of layer il for every entry of the last batch [n, n_embd]."""
        f = _ext_fn(self.lc.llama_cpp._lib, "llama_get_embeddings_layer_inp",
                    "_Z30llama_get_embeddings_layer_inpP13llama_contextj",
                    [ctypes.c_void_p, ctypes.c_uint32], ctypes.POINTER(ctypes.c_float))
        return _floats(f(self.ptr, int(il)), self.last_n * self.n_embd).reshape(self.last_n, -1)

    def enable_nextn(self, masked=True):
        self.ext.llama_set_embeddings_nextn(self.ptr, True, masked)

    def nextn(self, n_rows, width=None) -> np.ndarray:
        """The first n_rows rows of h_nextn [n_rows, width]."""
        width = width or self.n_embd
        return _floats(self.ext.llama_get_embeddings_nextn(self.ptr), n_rows * width).reshape(n_rows, width)

    def nextn_ith(self, i, width) -> np.ndarray:
        """The h_nextn row of batch entry i."""
        return _floats(self.ext.llama_get_embeddings_nextn_ith(self.ptr, int(i)), width)

    def set_nextn_layer_offset(self, k):
        self.ext.llama_set_nextn_layer_offset(self.ptr, int(k))

    # ---- memory -----------------------------------------------------------------------------
    def pos_max(self) -> int:
        return int(self.lc.llama_memory_seq_pos_max(self.lc.llama_get_memory(self.ptr), 0))

    def seq_rm(self, p0, p1=-1) -> bool:
        return bool(self.lc.llama_memory_seq_rm(self.lc.llama_get_memory(self.ptr), 0, p0, p1))

    def close(self):
        self.lc.llama_free(self.ptr)
        if self.owns_model:
            self.model.close()


# ---- the graph eval callback -------------------------------------------------------------
# struct ggml_tensor starts with its type (int32) and, at byte 16, ne[4] (int64)
_TYPE_OFFSET, _NE_OFFSET = 0, 16


def _ggml_base():
    import llama_cpp as lc
    lib = ctypes.CDLL(os.path.join(os.path.dirname(lc.__file__), "lib", "libggml-base.so"))
    for name, res in (("ggml_get_name", ctypes.c_char_p), ("ggml_nbytes", ctypes.c_size_t),
                      ("ggml_get_data", ctypes.c_void_p), ("ggml_is_contiguous", ctypes.c_bool)):
        f = getattr(lib, name)
        f.restype, f.argtypes = res, [ctypes.c_void_p]
    return lib


def llama_cpp_tensors(path, tokens, names, *, n_ctx=256, n_ubatch=256, flash_attn=True,
                      n_threads=2) -> dict:
    """{name: float32 array shaped as numpy sees ggml's ne} for every wanted node of one decode
    of `tokens` (positions 0.., every token an output; llama.cpp's default cache types).

    The eval callback is called for every graph node: once to ask whether the caller wants
    it, once more after it was computed; names are llama.cpp's callback names ("l_out-3")."""
    import llama_cpp as lc
    base = _ggml_base()
    names, got = set(names), {}

    def callback(t, ask, _user):
        name = base.ggml_get_name(t).decode()
        if ask:
            return name in names
        if ctypes.c_int32.from_address(t + _TYPE_OFFSET).value == GGML_F32 and base.ggml_is_contiguous(t):
            ne = list((ctypes.c_int64 * 4).from_address(t + _NE_OFFSET))
            raw = (ctypes.c_char * base.ggml_nbytes(t)).from_address(base.ggml_get_data(t))
            got[name] = np.frombuffer(bytes(raw), np.float32).reshape(ne[::-1]).copy()
        return True

    cb = lc.ggml_backend_sched_eval_callback(callback)
    ctx = LlamaCppContext.open(path, n_ctx=n_ctx, n_ubatch=n_ubatch, n_threads=n_threads,
                               kv_f32=False, flash_attn=flash_attn, cb_eval=cb)
    try:
        ctx.decode_tokens(tokens, 0, outputs=True)
    finally:
        ctx.close()
    return got


# ---- the high-level class ----------------------------------------------------------------
def llama_cpp_greedy(path, prompt, n_steps, *, n_ctx=256, n_ubatch=64, flash_attn=True, **kw):
    """Logits float64 [len(prompt) + n_steps, V] (every prompt row, then one row per greedy
    step) and the n_steps greedy tokens, through llama_cpp.Llama (2 threads)."""
    import llama_cpp
    llm = llama_cpp.Llama(model_path=os.fspath(path), n_ctx=n_ctx, n_batch=n_ubatch,
                          n_ubatch=n_ubatch, n_threads=2, logits_all=True, flash_attn=flash_attn,
                          verbose=False, seed=0, **kw)
    try:
        llm.eval(list(prompt))
        rows = [np.array(llm.scores[:len(prompt)], np.float64)]
        toks = []
        for _ in range(n_steps):
            toks.append(int(np.argmax(rows[-1][-1])))
            llm.eval([toks[-1]])
            rows.append(np.array(llm.scores[llm.n_tokens - 1:llm.n_tokens], np.float64))
    finally:
        llm.close()
    return np.concatenate(rows), toks


def pyggml_greedy(ctx, prompt, n_steps):
    """The same run as llama_cpp_greedy on a pyggml Context."""
    rows = [ctx.decode(list(prompt), logits_all=True).astype(np.float64)]
    toks = []
    for _ in range(n_steps):
        toks.append(int(np.argmax(rows[-1][-1])))
        rows.append(ctx.decode([toks[-1]]).astype(np.float64))
    return np.concatenate(rows), toks
