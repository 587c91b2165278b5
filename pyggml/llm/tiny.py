"""Writers for small random-weight LLaMA-family GGUF models (tests and benchmarks).

The files use llama.cpp's exact metadata keys and tensor names, so they load in llama.cpp
itself (tests/llm/test_tiny_oracle.py checks that) as well as in :class:`pyggml.llm.Model`.

Variants:

* ``arch="llama"``: classic LLaMA (GQA when ``n_head_kv < n_head``), RoPE mode NORM.
* ``arch="qwen2"``: same layer, RoPE NEOX; ``bias=True`` adds the q/k/v biases Qwen2 has
  (llama.cpp also accepts them, optionally, for ``llama``).
* ``arch="qwen3"``: RoPE NEOX, per-head RMS norms on q and k (``qk_norm=True``, required by
  llama.cpp for qwen3), usually with an explicit ``head_dim``.

Weights are drawn from a seeded normal distribution, scaled so that activations stay O(1)
and the logits have a spread of a few units (greedy decoding is not dominated by ties):
projections ``N(0, 1/n_in)``, embeddings and the output matrix ``N(0, 4/n_embd)``, norm
weights ``U(0.8, 1.2)``, biases ``N(0, 0.1)``.

``dtype`` applies to the 2-D weight matrices (token embedding, projections, output); norms
and biases stay F32. For ``q8_0`` and ``q4_0``, a matrix whose row length is not a multiple of 32 falls
back to F16 (as llama.cpp's quantizer does).

The vocabulary is a minimal SentencePiece ("llama") one that llama.cpp accepts:
``<unk>``, ``<s>`` (BOS, id 1), ``</s>`` (EOS, id 2), then byte tokens ``<0x00>``... as many
as fit, then filler tokens. With the default ``n_vocab=256`` the byte tokens cover 0x00-0xFC,
i.e. every byte that can occur in UTF-8 text.

The other architectures' writers live one per file (``tiny_deepseek4``, ``tiny_recurrent``,
``tiny_step35``, ``tiny_gemma``, ``tiny_drafts``) and share this module's vocabulary and
writer helpers; every writer is importable from here.
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["write_tiny_llama", "write_small_llama", "write_tiny_deepseek4", "write_tiny_mamba2",
           "write_tiny_qwen35", "write_tiny_step35", "write_tiny_gemma2", "write_tiny_gemma3",
           "write_tiny_phi3", "write_tiny_eagle3", "write_tiny_dflash", "write_tiny_dspark_dsv4"]

_ARCHS = ("llama", "qwen2", "qwen3")
_DTYPES = ("f32", "f16", "q8_0", "q4_0")

# gguf TokenType values (llama.cpp's llama_token_attr-independent token types)
_TT_NORMAL, _TT_UNKNOWN, _TT_CONTROL, _TT_BYTE = 1, 2, 3, 6


def _vocab(n_vocab: int):
    tokens, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [_TT_UNKNOWN, _TT_CONTROL, _TT_CONTROL]
    for b in range(min(256, n_vocab - 3)):
        tokens.append(f"<0x{b:02X}>")
        scores.append(0.0)
        types.append(_TT_BYTE)
    for i in range(n_vocab - len(tokens)):
        tokens.append(f"\u2581tok{i}")
        scores.append(-float(i + 1))
        types.append(_TT_NORMAL)
    return tokens, scores, types


def _add_vocab(w, n_vocab: int) -> None:
    """Write the minimal vocabulary and its special token ids."""
    tokens, scores, types = _vocab(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


def write_tiny_llama(path, *, n_vocab: int = 256, n_embd: int = 64, n_layer: int = 2, n_head: int = 4,
                     n_head_kv: int = 2, n_ff: int = 128, n_ctx_train: int = 512, head_dim: int | None = None,
                     qk_norm: bool = False, bias: bool = False, tied_embeddings: bool = False,
                     arch: str = "llama", dtype: str = "f32", seed: int = 0, rope_freq_base: float = 10000.0,
                     rms_eps: float = 1e-5, rope_scaling_factor: float | None = None,
                     chat_template: str | None = None) -> str:
    """Write a random-weight LLaMA-family model to `path` (GGUF v3); returns the path.

    Shapes follow llama.cpp (ggml order): ``token_embd [D, V]``, ``attn_q [D, H*d]``,
    ``attn_k/attn_v [D, Hkv*d]``, ``attn_output [H*d, D]``, ``ffn_gate/ffn_up [D, F]``,
    ``ffn_down [F, D]``, ``output [D, V]`` (absent when `tied_embeddings`), norms ``[D]``,
    ``attn_q_norm/attn_k_norm [d]``. `rope_scaling_factor` adds linear RoPE scaling
    (``rope.scaling.type="linear"``, positions are multiplied by ``1/factor``);
    `chat_template` is stored as ``tokenizer.chat_template``."""
    import gguf

    path = os.fspath(path)
    if arch not in _ARCHS:
        raise ValueError(f"write_tiny_llama: arch must be one of {_ARCHS}, got {arch!r}")
    if dtype not in _DTYPES:
        raise ValueError(f"write_tiny_llama: dtype must be one of {_DTYPES}, got {dtype!r}")
    if n_vocab < 4 or n_embd <= 0 or n_layer <= 0 or n_head <= 0 or n_ff <= 0 or n_ctx_train <= 0:
        raise ValueError("write_tiny_llama: sizes must be positive (n_vocab >= 4)")
    if n_head_kv <= 0 or n_head % n_head_kv:
        raise ValueError(f"write_tiny_llama: n_head={n_head} must be a multiple of n_head_kv={n_head_kv}")
    if head_dim is None:
        if n_embd % n_head:
            raise ValueError(f"write_tiny_llama: n_embd={n_embd} is not a multiple of n_head={n_head}; "
                             "pass head_dim")
        head_dim = n_embd // n_head
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(f"write_tiny_llama: head_dim={head_dim} must be positive and even (RoPE pairs)")
    if arch == "qwen3" and not qk_norm:
        raise ValueError("write_tiny_llama: qwen3 models have QK-norm in llama.cpp; pass qk_norm=True")
    if qk_norm and arch != "qwen3":
        raise ValueError("write_tiny_llama: qk_norm=True is the qwen3 layout; pass arch='qwen3'")
    if bias and arch == "qwen3":
        raise ValueError("write_tiny_llama: qwen3 has no attention biases in llama.cpp")

    rng = np.random.default_rng(seed)
    D, V, F, H, Hkv, d = n_embd, n_vocab, n_ff, n_head, n_head_kv, head_dim
    qtype = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
             "q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0}[dtype]

    w = gguf.GGUFWriter(path, arch)
    w.add_name("pyggml-tiny")
    w.add_vocab_size(V)
    w.add_context_length(n_ctx_train)
    w.add_embedding_length(D)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(Hkv)
    w.add_key_length(d)
    w.add_value_length(d)
    w.add_rope_dimension_count(d)
    w.add_rope_freq_base(float(rope_freq_base))
    w.add_layer_norm_rms_eps(float(rms_eps))
    if rope_scaling_factor is not None:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(float(rope_scaling_factor))
    w.add_file_type({"f32": 0, "f16": 1, "q8_0": 7, "q4_0": 2}[dtype])   # llama_ftype ALL_F32 / MOSTLY_F16 / MOSTLY_Q8_0 / MOSTLY_Q4_0

    _add_vocab(w, V)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    if chat_template is not None:
        w.add_chat_template(chat_template)

    def normal(shape, std):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)

    def matrix(name, n_out, n_in, std=None):
        # numpy (n_out, n_in) == ggml [n_in, n_out]
        a = normal((n_out, n_in), (1.0 / np.sqrt(n_in)) if std is None else std)
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, a)
        elif qtype == gguf.GGMLQuantizationType.F16 or n_in % 32:
            w.add_tensor(name, a.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)

    def vector(name, n, kind):
        a = rng.uniform(0.8, 1.2, size=n).astype(np.float32) if kind == "norm" else normal((n,), 0.1)
        w.add_tensor(name, a)

    emb_std = 2.0 / np.sqrt(D)
    matrix("token_embd.weight", V, D, emb_std)
    for i in range(n_layer):
        p = f"blk.{i}."
        vector(p + "attn_norm.weight", D, "norm")
        matrix(p + "attn_q.weight", H * d, D)
        matrix(p + "attn_k.weight", Hkv * d, D)
        matrix(p + "attn_v.weight", Hkv * d, D)
        if bias:
            vector(p + "attn_q.bias", H * d, "bias")
            vector(p + "attn_k.bias", Hkv * d, "bias")
            vector(p + "attn_v.bias", Hkv * d, "bias")
        if qk_norm:
            vector(p + "attn_q_norm.weight", d, "norm")
            vector(p + "attn_k_norm.weight", d, "norm")
        matrix(p + "attn_output.weight", D, H * d)
        vector(p + "ffn_norm.weight", D, "norm")
        matrix(p + "ffn_gate.weight", F, D)
        matrix(p + "ffn_up.weight", F, D)
        matrix(p + "ffn_down.weight", D, F)
    vector("output_norm.weight", D, "norm")
    if not tied_embeddings:
        matrix("output.weight", V, D, emb_std)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_small_llama(path, *, n_vocab: int = 32000, n_embd: int = 768, n_layer: int = 12, n_head: int = 12,
                      n_head_kv: int = 4, n_ff: int = 2048, n_ctx_train: int = 4096, dtype: str = "f16",
                      **kw) -> str:
    """A ~110M-parameter LLaMA for benchmarks (same writer, bigger defaults)."""
    return write_tiny_llama(path, n_vocab=n_vocab, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
                            n_head_kv=n_head_kv, n_ff=n_ff, n_ctx_train=n_ctx_train, dtype=dtype, **kw)


def _tiny_writer(path, arch: str, name: str, keys_u32: dict, keys_f32: dict, n_vocab: int):
    """A GGUFWriter with `<arch>.*` keys written and the minimal vocabulary added."""
    import gguf
    w = gguf.GGUFWriter(os.fspath(path), arch)
    w.add_name(name)
    for key, val in keys_u32.items():
        w.add_uint32(f"{arch}.{key}", int(val))
    for key, val in keys_f32.items():
        w.add_float32(f"{arch}.{key}", float(val))
    w.add_file_type(0)
    _add_vocab(w, n_vocab)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    return w


def _near_bigram(w, mix: float, seed: int) -> None:
    """Make a tiny model close to a bigram model, so that its MTP heads agree with it often
    (drafts get accepted naturally): the head maps token t's embedding to token perm[t]
    (output rows = token_embd rows permuted), residual branches are scaled by `mix`, and
    each NextN eh_proj passes the token embedding through (identity on that half)."""
    add, state = w.add_tensor, {}
    perm = np.random.default_rng(seed + 7919).permutation

    def filtered(name, arr, *a, **k):
        arr = np.asarray(arr)
        if arr.dtype != np.float32:          # index tables (hash routing) stay as they are
            return add(name, arr, *a, **k)
        if name == "token_embd.weight":
            state["emb"] = arr
            state["inv"] = np.argsort(perm(arr.shape[0]))
        elif name in ("output.weight",) or name.endswith("nextn.shared_head_head.weight"):
            arr = state["emb"][state["inv"]]
        elif name.endswith("nextn.embed_tokens.weight"):
            arr = state["emb"]
        elif name.endswith(("attn_output.weight", "attn_output_b.weight", "ffn_down.weight",
                            "ssm_out.weight",
                            "ffn_down_exps.weight", "ffn_down_shexp.weight")):
            arr = arr * np.float32(mix)
        elif name.endswith("nextn.eh_proj.weight"):
            d = arr.shape[0]
            arr = arr * np.float32(mix)
            arr[:, :d] += np.eye(d, dtype=np.float32)
        return add(name, np.ascontiguousarray(arr, np.float32), *a, **k)
    w.add_tensor = filtered


def _finish(w, path) -> str:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return os.fspath(path)


from .tiny_deepseek4 import write_tiny_deepseek4  # noqa: E402,F401
from .tiny_drafts import write_tiny_dflash, write_tiny_dspark_dsv4, write_tiny_eagle3  # noqa: E402,F401
from .tiny_gemma import write_tiny_gemma2, write_tiny_gemma3, write_tiny_phi3  # noqa: E402,F401
from .tiny_recurrent import write_tiny_mamba2, write_tiny_qwen35  # noqa: E402,F401
from .tiny_step35 import write_tiny_step35  # noqa: E402,F401
