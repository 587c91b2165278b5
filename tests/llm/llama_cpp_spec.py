"""Driving llama.cpp's draft graphs (EAGLE3, DFlash, DSpark, DFlash2) through llama_cpp's
ctypes layer: the extended batch API (`llama_batch_ext_*`, `llama_process`), context types
and `ctx_other`, target layer-input taps and the draft's hidden-state side channel.

Only libllama is shipped (no libcommon), so the speculative driver itself is re-implemented
by the tests; this module is the thin C-API layer under it."""
from __future__ import annotations

import ctypes

import numpy as np

ENCODE, DECODE = 0, 1
GGML_F32 = 0


def _ext_fn(lib, plain, mangled, argtypes, restype):
    f = getattr(lib, plain, None) or getattr(lib, mangled)
    f.argtypes, f.restype = argtypes, restype
    return f


_LOG_CB = None


def _quiet(lc):
    """Silence llama.cpp's loader and context logs (once per process)."""
    global _LOG_CB
    if _LOG_CB is None:
        _LOG_CB = lc.llama_log_callback(lambda level, text, user: None)
        lc.llama_log_set(_LOG_CB, ctypes.c_void_p())


class Llama:
    """One llama.cpp model and one context on it."""

    def __init__(self, path, *, n_ctx=256, n_ubatch=64, other: "Llama | None" = None,
                 flash_attn=False, causal=True):
        import llama_cpp as lc
        import llama_cpp.llama_cpp_ext as ext
        self.lc, self.ext = lc, ext
        lib = lc.llama_cpp._lib
        self._set_layer_inp = _ext_fn(lib, "llama_set_embeddings_layer_inp",
                                      "_Z30llama_set_embeddings_layer_inpP13llama_contextjb",
                                      [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_bool], None)
        self._get_layer_inp = _ext_fn(lib, "llama_get_embeddings_layer_inp",
                                      "_Z30llama_get_embeddings_layer_inpP13llama_contextj",
                                      [ctypes.c_void_p, ctypes.c_uint32],
                                      ctypes.POINTER(ctypes.c_float))
        _quiet(lc)
        lc.llama_backend_init()
        mp = lc.llama_model_default_params()
        self.model = lc.llama_model_load_from_file(str(path).encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        cp = lc.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx, n_ubatch, n_ubatch, 1
        cp.n_threads = cp.n_threads_batch = 2
        cp.type_k = cp.type_v = GGML_F32
        cp.flash_attn_type = 1 if flash_attn else 0
        if other is not None:
            cp.ctx_other = other.ctx
        self.ctx = lc.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create a context")
        vocab = lc.llama_model_get_vocab(self.model)
        self.n_vocab = lc.llama_vocab_n_tokens(vocab)
        self.n_embd = lc.llama_model_n_embd(self.model)
        if not causal:
            lc.llama_set_causal_attn(self.ctx, False)
        self.last_n = 0

    # ---- side channels ----
    def tap_layer_inputs(self, ids):
        for i in ids:
            self._set_layer_inp(self.ctx, int(i), True)

    def layer_input(self, il) -> np.ndarray:
        p = self._get_layer_inp(self.ctx, int(il))
        return np.ctypeslib.as_array(p, shape=(self.last_n, self.n_embd)).copy()

    def enable_nextn(self, masked=True):
        self.ext.llama_set_embeddings_nextn(self.ctx, True, masked)

    def nextn(self, n_rows, width=None) -> np.ndarray:
        p = self.ext.llama_get_embeddings_nextn(self.ctx)
        p = ctypes.cast(p, ctypes.POINTER(ctypes.c_float))
        return np.ctypeslib.as_array(p, shape=(n_rows, width or self.n_embd)).copy()

    def meta(self, key) -> str | None:
        buf = ctypes.create_string_buffer(256)
        n = self.lc.llama_model_meta_val_str(self.model, key.encode(), buf, 256)
        return None if n < 0 else buf.value.decode()

    # ---- batches ----
    def run(self, entries, kind=DECODE):
        """entries: (token | None, embd row | None, pos, output) tuples."""
        lc = self.lc
        b = lc.llama_batch_ext_init(self.ctx)
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
                parr = (ctypes.c_int32 * 4)(int(pos), int(pos), int(pos), 0)
                assert lc.llama_batch_ext_set_pos(b, idx, parr)
                lc.llama_batch_ext_set_output_logits(b, idx, bool(out))
            rc = lc.llama_process(self.ctx, kind, b)
            if rc != 0:
                raise RuntimeError(f"llama_process returned {rc}")
        finally:
            lc.llama_batch_ext_free(b)
        self.last_n = len(entries)

    def logits(self, i) -> np.ndarray:
        p = self.lc.llama_get_logits_ith(self.ctx, int(i))
        return np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)),
                                     shape=(self.n_vocab,)).copy()

    def decode_tokens(self, tokens, pos0, outputs=True):
        self.run([(t, None, pos0 + i, outputs) for i, t in enumerate(tokens)])

    def seq_rm(self, p0, p1=-1) -> bool:
        return bool(self.lc.llama_memory_seq_rm(self.lc.llama_get_memory(self.ctx), 0, p0, p1))

    def close(self):
        self.lc.llama_free(self.ctx)
        self.lc.llama_model_free(self.model)
