"""Demos behind `python -m pyggml demo`: generate with a tiny random LLaMA (written once into
a cache folder), or build and profile one LLaMA-style layer (`--layer`)."""
from __future__ import annotations

import math
import os
import time
from types import SimpleNamespace

import numpy as np

DEMO_MODEL = dict(n_vocab=256, n_embd=128, n_layer=4, n_head=4, n_head_kv=2, n_ff=384,
                  n_ctx_train=1024, arch="llama", dtype="f16", seed=0)
DEMO_FILE = "tiny-llama-demo-v1.gguf"


def cache_dir() -> str:
    return os.environ.get("PYGGML_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "pyggml")


class DemoCacheError(OSError):
    """The demo model cannot be written into the cache folder."""


def demo_model_path(rewrite: bool = False) -> str:
    """The demo GGUF, written on first use (no network needed), or again with `rewrite`."""
    from .llm.tiny import write_tiny_llama
    path = os.path.join(cache_dir(), DEMO_FILE)
    if rewrite or not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_tiny_llama(tmp, **DEMO_MODEL)
            os.replace(tmp, path)  # atomic: an interrupted write leaves no broken cache entry
        except OSError as e:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise DemoCacheError(f"cannot write the demo model into {os.path.dirname(path)} "
                                 f"({e.strerror or e}); set PYGGML_CACHE to a writable folder") from None
        print(f"wrote demo model {path}")
    return path


def load_demo_model():
    """(path, Model) of the demo GGUF; a damaged cached copy is written again."""
    from .llm import Model
    from .llm.gguf_check import GGUFError
    path = demo_model_path()
    try:
        return path, Model.load(path)
    except GGUFError as e:
        print(f"the cached demo model is damaged ({str(e).replace(path + ': ', '')}); writing it again")
    path = demo_model_path(rewrite=True)
    return path, Model.load(path)


def piece(vocab, tok: int) -> str:
    if not vocab or not 0 <= tok < len(vocab):
        return ""
    s = vocab[tok]
    if s.startswith("<0x") and s.endswith(">") and len(s) == 6:
        b = int(s[3:5], 16)
        return chr(b) if 32 <= b < 127 else s
    return s.replace("\u2581", " ")


def run_generate_demo(n: int = 32, n_threads: int = 2, flash_attn: bool = True) -> dict:
    from .llm import Context
    path, model = load_demo_model()
    prompt_text = "Hello, pyggml!"
    prompt = [1] + [3 + b for b in prompt_text.encode()]    # BOS + byte tokens of the tiny vocab
    ctx = Context(model, n_ctx=256, n_threads=n_threads, flash_attn=flash_attn)
    ctx.generate(prompt[:2], 1)                              # warm-up (builds both graphs)
    ctx.reset()
    out = ctx.generate(prompt, n)
    t = ctx.last_timings
    print(f"model   {path}\n        {model.hparams.n_layer} layers, n_embd {model.hparams.n_embd}, "
          f"vocab {model.hparams.n_vocab} (random weights: the text is noise)")
    print(f"prompt  {prompt_text!r} -> {len(prompt)} tokens")
    print(f"tokens  {out}")
    print(f"text    {''.join(piece(model.vocab, x) for x in out)!r}")
    print(f"prompt  {t['prompt_tokens_per_s']:9.1f} tokens/s   decode {t['gen_tokens_per_s']:9.1f} tokens/s"
          f"   ({n_threads} threads, flash_attn={flash_attn})")
    return t


# ---- one layer ------------------------------------------------------------------------------
def run_layer_demo(n_tokens: int = 32, n_embd: int = 256, n_head: int = 8, n_head_kv: int = 4,
                   n_ff: int = 688, n_threads: int = 2, flash_attn: bool = True):
    """Build one LLaMA-style layer with random weights via GraphContext, compute it with
    profiling on, print the graph summary (per-op times) and the memory planner's figures."""
    import pyggml as gg
    from .llm.graph import FFN_PAR, FFN_SILU, LLM_NORM_RMS, GraphContext, GraphParams, GraphResult
    from .llm.inputs import UBatch

    d = n_embd // n_head
    hp = SimpleNamespace(arch="llama", n_vocab=0, n_ctx_train=4096, n_embd=n_embd, n_layer=1,
                         n_ff=n_ff, n_head=n_head, n_head_kv=n_head_kv, head_dim_k=d, head_dim_v=d,
                         n_rot=d, rope_freq_base=10000.0, rope_freq_scale=1.0, rope_type=0,
                         rms_eps=1e-5, n_swa=0)
    rng = np.random.default_rng(0)
    wctx = gg.Context(mem_size=64 << 20)

    def w(n_out, n_in):
        a = rng.normal(0, 1 / math.sqrt(n_in), size=(n_out, n_in)).astype(np.float32)
        return wctx.from_numpy(a.astype(np.float16))

    L = SimpleNamespace(attn_norm=wctx.from_numpy(np.ones(n_embd, np.float32)),
                        wq=w(n_head * d, n_embd), wk=w(n_head_kv * d, n_embd), wv=w(n_head_kv * d, n_embd),
                        wo=w(n_embd, n_head * d), ffn_norm=wctx.from_numpy(np.ones(n_embd, np.float32)),
                        ffn_gate=w(n_ff, n_embd), ffn_up=w(n_ff, n_embd), ffn_down=w(n_embd, n_ff))
    ub = UBatch.from_tokens(np.zeros(n_tokens, np.int32), output=np.ones(n_tokens, bool))
    res = GraphResult()
    g = GraphContext(None, GraphParams(arch="llama", hparams=hp, ubatch=ub, n_outputs=n_tokens,
                                       flash_attn=flash_attn), res)
    x = g.ctx0.new_tensor(gg.F32, [n_embd, n_tokens])
    x.name = "inp_embd"
    x.set_input()
    pos = g.build_inp_pos()
    inp_attn = g.build_attn_inp_no_cache()
    cur = g.cb(g.build_norm(x, L.attn_norm, None, LLM_NORM_RMS, 0), "attn_norm", 0)
    q, k, v = g.build_qkv(L, cur, d, n_head, d, n_head_kv, il=0)
    q = g.cb(g.build_rope(q, pos), "Qcur", 0)
    k = g.cb(g.build_rope(k, pos), "Kcur", 0)
    cur = g.cb(g.build_attn(inp_attn, L.wo, None, q, k, v, kq_scale=1 / math.sqrt(d), il=0), "attn_out", 0)
    ffn_inp = g.cb(gg.add(g.ctx0, cur, x), "ffn_inp", 0)
    cur = g.cb(g.build_norm(ffn_inp, L.ffn_norm, None, LLM_NORM_RMS, 0), "ffn_norm", 0)
    cur = g.cb(g.build_ffn(cur, L.ffn_up, None, None, L.ffn_gate, None, None, L.ffn_down,
                           type_op=FFN_SILU, type_gate=FFN_PAR, il=0), "ffn_out", 0)
    out = g.cb(gg.add(g.ctx0, cur, ffn_inp), "l_out", 0)
    g.expand(out)
    gf = res.gf
    gf.alloc()
    x.set(rng.normal(0, 1, size=(n_tokens, n_embd)).astype(np.float32))
    res.set_inputs(ub)
    gf.set_profiling(True)
    t0 = time.perf_counter()
    gf.compute(n_threads)
    dt = time.perf_counter() - t0
    print(gf)
    st = gf.plan_stats()
    print(f"\ncompute {dt * 1e3:.2f} ms on {n_threads} threads; out {out.name} ne={out.ne}, "
          f"mean |x| {float(np.abs(out.numpy()).mean()):.4f}")
    print(f"memory planner: peak {st['peak_bytes'] / 1024:.1f} KiB for intermediates vs "
          f"{st['sum_intermediate_bytes'] / 1024:.1f} KiB without reuse "
          f"({st['n_planned']} tensors placed; inputs {st['leaf_bytes'] / 1024:.1f} KiB)")
    return gf
