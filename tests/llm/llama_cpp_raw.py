"""A minimal driver of llama.cpp's C API through llama_cpp (llama-cpp-python's ctypes layer),
for oracle tests that need context parameters or memory calls the high-level Llama class
does not expose (n_rs_seq, llama_memory_seq_rm)."""
from __future__ import annotations

import ctypes

import numpy as np


class RawLlama:
    def __init__(self, path, n_ctx=256, n_ubatch=64, n_rs_seq=0, n_vocab=256):
        import llama_cpp as lc
        self.lc, self.n_vocab = lc, n_vocab
        lc.llama_backend_init()
        mp = lc.llama_model_default_params()
        self.model = lc.llama_model_load_from_file(str(path).encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        cp = lc.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx, n_ubatch, n_ubatch, 1
        cp.n_threads = cp.n_threads_batch = 2
        if n_rs_seq:
            if not hasattr(cp, "n_rs_seq"):
                raise RuntimeError("this llama_cpp has no n_rs_seq context parameter")
            cp.n_rs_seq = n_rs_seq
        self.ctx = lc.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create a context")
        self.n_past = 0

    def decode(self, tokens, logits_all=False) -> np.ndarray:
        lc, n = self.lc, len(tokens)
        batch = lc.llama_batch_init(n, 0, 1)
        try:
            batch.n_tokens = n
            for i, t in enumerate(tokens):
                batch.token[i] = int(t)
                batch.pos[i] = self.n_past + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1 if (logits_all or i == n - 1) else 0
            rc = lc.llama_decode(self.ctx, batch)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc}")
        finally:
            lc.llama_batch_free(batch)
        self.n_past += n
        rows = range(n) if logits_all else [n - 1]
        out = []
        for i in rows:
            ptr = lc.llama_get_logits_ith(self.ctx, i)
            out.append(np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)),
                                             shape=(self.n_vocab,)).astype(np.float64))
        return np.stack(out)

    def seq_rm(self, p0, p1=-1) -> bool:
        ok = bool(self.lc.llama_memory_seq_rm(self.lc.llama_get_memory(self.ctx), 0, p0, p1))
        if ok:
            self.n_past = p0 if p1 < 0 else self.n_past
        return ok

    def close(self):
        self.lc.llama_free(self.ctx)
        self.lc.llama_model_free(self.model)
