"""Tiny random-weight Gemma 2 / Gemma 3 / Phi-3 GGUF writers (llama.cpp loads them): the
fixtures of the gemma and phi3 architecture tests."""
from __future__ import annotations

import numpy as np

from .tiny import _finish, _tiny_writer


def _random(seed: int):
    """normal(shape, std) and uniform(shape, lo, hi) float32 draws from one seeded stream."""
    rng = np.random.default_rng(seed)

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def uniform(shape, lo, hi):
        return rng.uniform(lo, hi, size=shape).astype(np.float32)
    return normal, uniform


def _write_gemma(path, arch: str, *, n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff,
                 n_ctx_train, n_swa, swa_pattern, rope_freq_base, rope_freq_base_swa,
                 rope_scaling_factor, attn_soft_cap, final_soft_cap, rms_eps, qk_norm,
                 tied_embeddings, seed):
    import gguf
    if n_head % n_head_kv or head_dim % 2:
        raise ValueError(f"write_tiny_{arch}: n_head must be a multiple of n_head_kv and head_dim even")
    D, V, H, Hkv, d, F = n_embd, n_vocab, n_head, n_head_kv, head_dim, n_ff
    u32 = {"vocab_size": V, "context_length": n_ctx_train, "embedding_length": D,
           "block_count": n_layer, "feed_forward_length": F, "attention.head_count": H,
           "attention.head_count_kv": Hkv, "attention.key_length": d, "attention.value_length": d,
           "rope.dimension_count": d}
    f32 = {"rope.freq_base": rope_freq_base, "attention.layer_norm_rms_epsilon": rms_eps}
    if n_swa is not None:
        u32["attention.sliding_window"] = n_swa
    if isinstance(swa_pattern, int):
        u32["attention.sliding_window_pattern"] = swa_pattern
    for key, val in (("rope.freq_base_swa", rope_freq_base_swa), ("attn_logit_softcapping", attn_soft_cap),
                     ("final_logit_softcapping", final_soft_cap)):
        if val is not None:
            f32[key] = val
    w = _tiny_writer(path, arch, f"pyggml-tiny-{arch}", u32, f32, V)
    if swa_pattern is not None and not isinstance(swa_pattern, int):
        w.add_key_value(f"{arch}.attention.sliding_window_pattern", [bool(x) for x in swa_pattern],
                        gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.BOOL)
    if rope_scaling_factor is not None:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(float(rope_scaling_factor))
    normal, uniform = _random(seed)

    def matrix(name, n_out, n_in, std=None):
        w.add_tensor(name, normal((n_out, n_in), 1.0 / np.sqrt(n_in) if std is None else std))

    w.add_tensor("token_embd.weight", normal((V, D), 2.0 / np.sqrt(D)))
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", uniform(D, 0.8, 1.2))
        matrix(p + "attn_q.weight", H * d, D)
        matrix(p + "attn_k.weight", Hkv * d, D)
        matrix(p + "attn_v.weight", Hkv * d, D)
        if qk_norm:
            w.add_tensor(p + "attn_q_norm.weight", uniform(d, 0.8, 1.2))
            w.add_tensor(p + "attn_k_norm.weight", uniform(d, 0.8, 1.2))
        matrix(p + "attn_output.weight", D, H * d)
        w.add_tensor(p + "post_attention_norm.weight", uniform(D, 0.8, 1.2))
        w.add_tensor(p + "ffn_norm.weight", uniform(D, 0.8, 1.2))
        matrix(p + "ffn_gate.weight", F, D)
        matrix(p + "ffn_up.weight", F, D)
        matrix(p + "ffn_down.weight", D, F)
        w.add_tensor(p + "post_ffw_norm.weight", uniform(D, 0.8, 1.2))
    w.add_tensor("output_norm.weight", uniform(D, 0.8, 1.2))
    if not tied_embeddings:
        matrix("output.weight", V, D, 2.0 / np.sqrt(D))
    return _finish(w, path)


def write_tiny_gemma2(path, *, n_vocab: int = 256, n_embd: int = 64, n_layer: int = 4,
                      n_head: int = 4, n_head_kv: int = 2, head_dim: int = 32, n_ff: int = 128,
                      n_ctx_train: int = 1024, n_swa: int = 8, swa_pattern=None,
                      rope_freq_base: float = 10000.0, rope_freq_base_swa: float | None = None,
                      attn_soft_cap: float = 4.0, final_soft_cap: float = 3.0,
                      rms_eps: float = 1e-6, seed: int = 0) -> str:
    """Write a random-weight Gemma 2 model (llama.cpp's `gemma2` keys and tensors, F32) to
    `path`; returns the path. Per layer: ``attn_q [D, H*d]``, ``attn_k/attn_v [D, Hkv*d]``,
    ``attn_output [H*d, D]``, ``post_attention_norm``, ``ffn_norm``, ``ffn_gate/ffn_up [D, F]``,
    ``ffn_down [F, D]``, ``post_ffw_norm`` (norms ``[D]``); the output matrix is always the
    token embedding (llama.cpp's gemma2 loader has no output tensor). `swa_pattern`: None
    (llama.cpp's default: even layers use the window), a period, or per-layer booleans.
    The small default caps (4 and 3) make both soft caps bend random-weight scores."""
    return _write_gemma(path, "gemma2", n_vocab=n_vocab, n_embd=n_embd, n_layer=n_layer,
                        n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim, n_ff=n_ff,
                        n_ctx_train=n_ctx_train, n_swa=n_swa, swa_pattern=swa_pattern,
                        rope_freq_base=rope_freq_base, rope_freq_base_swa=rope_freq_base_swa,
                        rope_scaling_factor=None, attn_soft_cap=attn_soft_cap,
                        final_soft_cap=final_soft_cap, rms_eps=rms_eps, qk_norm=False,
                        tied_embeddings=True, seed=seed)


def write_tiny_gemma3(path, *, n_vocab: int = 256, n_embd: int = 64, n_layer: int = 4,
                      n_head: int = 4, n_head_kv: int = 2, head_dim: int = 32, n_ff: int = 128,
                      n_ctx_train: int = 1024, n_swa: int | None = 8, swa_pattern=3,
                      rope_freq_base: float = 1000000.0, rope_freq_base_swa: float | None = 10000.0,
                      rope_scaling_factor: float | None = 8.0, final_soft_cap: float | None = None,
                      rms_eps: float = 1e-6, tied_embeddings: bool = True, seed: int = 0) -> str:
    """Write a random-weight Gemma 3 model (llama.cpp's `gemma3` keys and tensors, F32) to
    `path`; returns the path. The Gemma 2 tensors plus ``attn_q_norm/attn_k_norm [d]``.
    Defaults: a window of 8 on two of every three layers (`swa_pattern` 3) with RoPE base
    10000, the full layers with base 1e6 and linear RoPE scaling 8, no final soft cap;
    `n_swa=None` writes no window (every layer full attention)."""
    return _write_gemma(path, "gemma3", n_vocab=n_vocab, n_embd=n_embd, n_layer=n_layer,
                        n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim, n_ff=n_ff,
                        n_ctx_train=n_ctx_train, n_swa=n_swa, swa_pattern=swa_pattern if n_swa else None,
                        rope_freq_base=rope_freq_base, rope_freq_base_swa=rope_freq_base_swa,
                        rope_scaling_factor=rope_scaling_factor, attn_soft_cap=None,
                        final_soft_cap=final_soft_cap, rms_eps=rms_eps, qk_norm=True,
                        tied_embeddings=tied_embeddings, seed=seed)


def write_tiny_phi3(path, *, n_vocab: int = 256, n_embd: int = 64, n_layer: int = 2,
                    n_head: int = 4, n_head_kv: int = 2, n_ff: int = 128, n_ctx_train: int = 4096,
                    n_ctx_orig: int | None = 256, rope_attn_factor: float | None = 1.2,
                    long_rope: bool = True, n_swa: int | None = None, fused_qkv: bool = True,
                    rope_freq_base: float = 10000.0, rms_eps: float = 1e-5,
                    tied_embeddings: bool = False, seed: int = 0) -> str:
    """Write a random-weight Phi-3 model (llama.cpp's `phi3` keys and tensors, F32) to `path`;
    returns the path. Per layer: ``attn_qkv [D, H*d + 2*Hkv*d]`` (separate attn_q/k/v when
    not `fused_qkv`), ``attn_output [D, D]``, ``ffn_up [D, 2*F]`` (gate | up), ``ffn_down
    [F, D]``. `long_rope` adds ``rope_factors_short/long [d/2]`` (short in [1, 2], long in
    [2, 8]) with ``rope.scaling.original_context_length = n_ctx_orig`` and
    ``rope.scaling.attn_factor``; `n_swa` writes ``attention.sliding_window``."""
    if n_embd % n_head or n_head % n_head_kv or (n_embd // n_head) % 2:
        raise ValueError("write_tiny_phi3: n_embd must be a multiple of n_head (even head size) "
                         "and n_head of n_head_kv")
    D, V, H, Hkv, F = n_embd, n_vocab, n_head, n_head_kv, n_ff
    d = D // H
    u32 = {"vocab_size": V, "context_length": n_ctx_train, "embedding_length": D,
           "block_count": n_layer, "feed_forward_length": F, "attention.head_count": H,
           "attention.head_count_kv": Hkv, "rope.dimension_count": d}
    f32 = {"rope.freq_base": rope_freq_base, "attention.layer_norm_rms_epsilon": rms_eps}
    if n_swa is not None:
        u32["attention.sliding_window"] = n_swa
    if long_rope:
        if n_ctx_orig is not None:
            u32["rope.scaling.original_context_length"] = n_ctx_orig
        if rope_attn_factor is not None:
            f32["rope.scaling.attn_factor"] = rope_attn_factor
    # a general.name containing "phi3" makes llama.cpp look up Phi-3's own special tokens,
    # which the minimal vocabulary lacks
    w = _tiny_writer(path, "phi3", "pyggml-tiny-ph3", u32, f32, V)
    normal, uniform = _random(seed)

    def matrix(name, n_out, n_in, std=None):
        w.add_tensor(name, normal((n_out, n_in), 1.0 / np.sqrt(n_in) if std is None else std))

    matrix("token_embd.weight", V, D, 2.0 / np.sqrt(D))
    if long_rope:
        w.add_tensor("rope_factors_short.weight", uniform(d // 2, 1.0, 2.0))
        w.add_tensor("rope_factors_long.weight", uniform(d // 2, 2.0, 8.0))
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", uniform(D, 0.8, 1.2))
        if fused_qkv:
            matrix(p + "attn_qkv.weight", D + 2 * Hkv * d, D)
        else:
            matrix(p + "attn_q.weight", D, D)
            matrix(p + "attn_k.weight", Hkv * d, D)
            matrix(p + "attn_v.weight", Hkv * d, D)
        matrix(p + "attn_output.weight", D, D)
        w.add_tensor(p + "ffn_norm.weight", uniform(D, 0.8, 1.2))
        matrix(p + "ffn_up.weight", 2 * F, D)
        matrix(p + "ffn_down.weight", D, F)
    w.add_tensor("output_norm.weight", uniform(D, 0.8, 1.2))
    if not tied_embeddings:
        matrix("output.weight", V, D, 2.0 / np.sqrt(D))
    return _finish(w, path)
