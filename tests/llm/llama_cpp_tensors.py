"""Intermediate tensors of llama.cpp's own graph, read through its eval callback.

llama_context_params.cb_eval (a ggml_backend_sched_eval_callback) is called for every graph
node: once to ask whether the caller wants it, once more after it was computed. This driver
asks for the named F32 nodes (names as llama.cpp's graph callback gives them, "l_out-3") and
copies their data out, so an oracle test can compare pyggml's graph node by node."""
from __future__ import annotations

import ctypes
import os

import numpy as np


def _ggml_base():
    import llama_cpp as lc
    lib = ctypes.CDLL(os.path.join(os.path.dirname(lc.__file__), "lib", "libggml-base.so"))
    lib.ggml_get_name.restype = ctypes.c_char_p
    lib.ggml_get_name.argtypes = [ctypes.c_void_p]
    lib.ggml_nbytes.restype = ctypes.c_size_t
    lib.ggml_nbytes.argtypes = [ctypes.c_void_p]
    lib.ggml_get_data.restype = ctypes.c_void_p
    lib.ggml_get_data.argtypes = [ctypes.c_void_p]
    lib.ggml_is_contiguous.restype = ctypes.c_bool
    lib.ggml_is_contiguous.argtypes = [ctypes.c_void_p]
    return lib


# struct ggml_tensor starts with its type (int32) and, at byte 16, ne[4] (int64)
_TYPE_OFFSET, _NE_OFFSET, _GGML_TYPE_F32 = 0, 16, 0


def llama_cpp_tensors(path, tokens, names, *, n_ctx=256, n_ubatch=256, flash_attn=True,
                      n_threads=2) -> dict:
    """{name: float32 array shaped as numpy sees ggml's ne} for every wanted node of one decode
    of `tokens` (positions 0.., every token an output)."""
    import llama_cpp as lc
    base = _ggml_base()
    names, got = set(names), {}

    def callback(t, ask, _user):
        name = base.ggml_get_name(t).decode()
        if ask:
            return name in names
        if ctypes.c_int32.from_address(t + _TYPE_OFFSET).value == _GGML_TYPE_F32 and base.ggml_is_contiguous(t):
            ne = list((ctypes.c_int64 * 4).from_address(t + _NE_OFFSET))
            raw = (ctypes.c_char * base.ggml_nbytes(t)).from_address(base.ggml_get_data(t))
            got[name] = np.frombuffer(bytes(raw), np.float32).reshape(ne[::-1]).copy()
        return True

    cb = lc.ggml_backend_sched_eval_callback(callback)
    lc.llama_backend_init()
    model = lc.llama_model_load_from_file(os.fspath(path).encode(), lc.llama_model_default_params())
    if not model:
        raise RuntimeError(f"llama.cpp could not load {path}")
    cp = lc.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = n_ctx, n_ubatch, n_ubatch
    cp.n_threads = cp.n_threads_batch = n_threads
    cp.flash_attn_type = 1 if flash_attn else 0
    cp.cb_eval = cb
    ctx = lc.llama_init_from_model(model, cp)
    batch = lc.llama_batch_init(len(tokens), 0, 1)
    try:
        batch.n_tokens = len(tokens)
        for i, tok in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = int(tok), i, 1
            batch.seq_id[i][0], batch.logits[i] = 0, 1
        if lc.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")
    finally:
        lc.llama_batch_free(batch)
        lc.llama_free(ctx)
        lc.llama_model_free(model)
    return got
