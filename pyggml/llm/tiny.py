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
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["write_tiny_llama", "write_small_llama", "write_tiny_deepseek4", "write_tiny_mamba2",
           "write_tiny_qwen35", "write_tiny_gemma2", "write_tiny_gemma3", "write_tiny_phi3"]

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

    tokens, scores, types = _vocab(V)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
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


def write_tiny_deepseek4(path, *, n_vocab: int = 256, n_embd: int = 64, n_head: int = 4,
                         head_dim: int = 128, n_rot: int = 32, q_lora_rank: int = 32,
                         o_groups: int = 2, o_lora_rank: int = 16, indexer_n_head: int = 16,
                         indexer_head_dim: int = 64, indexer_top_k: int = 8, n_swa: int = 16,
                         n_expert: int = 4, n_expert_used: int = 2, n_ff_exp: int = 32,
                         n_expert_shared: int = 1, expert_weights_scale: float = 1.5,
                         swiglu_clamp: float = 2.0, hc: int = 4, sinkhorn_iters: int = 3,
                         hc_eps: float = 1e-6, hash_layer_count: int = 1,
                         compress_ratios=(0, 4, 128, 4), compress_rope_base: float = 160000.0,
                         rope_freq_base: float = 10000.0, n_ctx_train: int = 1024,
                         yarn_factor: float | None = None, rms_eps: float = 1e-6,
                         n_nextn: int = 0, bigram: float = 0.0, seed: int = 0) -> str:
    """Write a random-weight DeepSeek V4 model (llama.cpp's `deepseek4` keys and tensors;
    F32 weights) to `path`; returns the path. `n_nextn` (0 or 1) appends a NextN (MTP) block:
    a raw-window dsv4 layer (ratio 0, routed) with ``nextn.eh_proj [2D, D]`` and
    ``nextn.enorm/hnorm [D]``; `bigram` > 0 makes the model close to a bigram model. The defaults exercise every
    path: raw (0), CSA (4) and HCA (128) layers, a hash-routed first layer, 16 indexer heads
    (so indexer scores rarely tie) and a SWIGLU clamp of 2 (so a few percent of the values
    are clamped). `yarn_factor` adds YaRN scaling (compressed layers only use it)."""
    import gguf

    path = os.fspath(path)
    ratios = [int(r) for r in compress_ratios]
    if any(r not in (0, 4, 128) for r in ratios):
        raise ValueError(f"write_tiny_deepseek4: compress ratios must be 0, 4 or 128, got {ratios}")
    if hc != 4 or n_head % o_groups or indexer_head_dim % 64 or n_rot > min(head_dim, indexer_head_dim):
        raise ValueError("write_tiny_deepseek4: needs hc == 4, n_head % o_groups == 0, the indexer "
                         "head a multiple of 64 and n_rot <= both head sizes")
    if n_nextn not in (0, 1) or hash_layer_count > len(ratios):
        raise ValueError("write_tiny_deepseek4: n_nextn must be 0 or 1 and the hash layers "
                         "within the trunk")
    ratios = ratios + [0] * n_nextn
    L, D, V, H, d, E, F = len(ratios), n_embd, n_vocab, n_head, head_dim, n_expert, n_ff_exp
    di, Hi, mix = indexer_head_dim, indexer_n_head, (2 + hc) * hc
    rng = np.random.default_rng(seed)
    a = "deepseek4"
    w = gguf.GGUFWriter(path, a)
    w.add_name("pyggml-tiny-dsv4")
    if bigram:
        _near_bigram(w, bigram, seed)
    for key, val in (("vocab_size", V), ("context_length", n_ctx_train), ("embedding_length", D),
                     ("block_count", L), ("feed_forward_length", F), ("attention.head_count", H),
                     ("attention.head_count_kv", 1), ("attention.key_length", d),
                     ("attention.value_length", d), ("rope.dimension_count", n_rot),
                     ("attention.q_lora_rank", q_lora_rank), ("attention.sliding_window", n_swa),
                     ("expert_feed_forward_length", F), ("expert_shared_count", n_expert_shared),
                     ("expert_count", E), ("expert_used_count", n_expert_used),
                     ("expert_gating_func", 4), ("attention.indexer.head_count", Hi),
                     ("attention.indexer.key_length", di), ("attention.indexer.top_k", indexer_top_k),
                     ("attention.output_group_count", o_groups),
                     ("attention.output_lora_rank", o_lora_rank), ("hyper_connection.count", hc),
                     ("hyper_connection.sinkhorn_iterations", sinkhorn_iters),
                     ("hash_layer_count", hash_layer_count), ("nextn_predict_layers", n_nextn)):
        w.add_uint32(f"{a}.{key}", int(val))
    for key, val in (("rope.freq_base", rope_freq_base), ("attention.layer_norm_rms_epsilon", rms_eps),
                     ("expert_weights_scale", expert_weights_scale), ("swiglu_clamp_exp", swiglu_clamp),
                     ("attention.compress_rope_freq_base", compress_rope_base),
                     ("hyper_connection.epsilon", hc_eps)):
        w.add_float32(f"{a}.{key}", float(val))
    w.add_bool(f"{a}.expert_weights_norm", True)
    w.add_key_value(f"{a}.attention.compress_ratios", ratios, gguf.GGUFValueType.ARRAY,
                    sub_type=gguf.GGUFValueType.UINT32)
    if yarn_factor is not None:
        w.add_string(f"{a}.rope.scaling.type", "yarn")
        w.add_float32(f"{a}.rope.scaling.factor", float(yarn_factor))
        w.add_uint32(f"{a}.rope.scaling.original_context_length", n_ctx_train)
    w.add_file_type(0)
    tokens, scores, types = _vocab(V)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def t(name, *shape, std=None, kind="normal"):
        # numpy shape (..., n_out, n_in) == ggml [n_in, n_out, ...]
        if kind == "norm":
            arr = rng.uniform(0.8, 1.2, size=shape)
        elif kind == "uniform":
            arr = rng.uniform(0.5, 1.5, size=shape)
        else:
            arr = rng.standard_normal(shape) * (std if std is not None else 1.0 / np.sqrt(shape[-1]))
        w.add_tensor(name, arr.astype(np.float32))

    t("token_embd.weight", V, D, std=1.0)
    t("output_norm.weight", D, kind="norm")
    t("output.weight", V, D, std=2.0 / np.sqrt(D))
    t("output_hc_fn.weight", hc, hc * D)
    t("output_hc_base.weight", hc, std=0.5)
    t("output_hc_scale.weight", 1, kind="uniform")
    for il, r in enumerate(ratios):
        p = f"blk.{il}."
        t(p + "attn_norm.weight", D, kind="norm")
        t(p + "attn_sinks.weight", H, std=1.0)
        t(p + "attn_q_a.weight", q_lora_rank, D)
        t(p + "attn_q_a_norm.weight", q_lora_rank, kind="norm")
        t(p + "attn_q_b.weight", H * d, q_lora_rank)
        t(p + "attn_kv.weight", d, D)
        t(p + "attn_kv_a_norm.weight", d, kind="norm")
        t(p + "attn_output_a.weight", o_lora_rank * o_groups, H * d // o_groups)
        t(p + "attn_output_b.weight", D, o_groups * o_lora_rank)
        for s in ("attn", "ffn"):
            t(p + f"hc_{s}_fn.weight", mix, hc * D)
            t(p + f"hc_{s}_base.weight", mix, std=0.5)
            t(p + f"hc_{s}_scale.weight", 3, kind="uniform")
        if r:
            coff = 2 if r == 4 else 1
            t(p + "attn_compressor_kv.weight", coff * d, D)
            t(p + "attn_compressor_gate.weight", coff * d, D)
            t(p + "attn_compressor_ape.weight", r, coff * d, std=0.5)
            t(p + "attn_compressor_norm.weight", d, kind="norm")
        if r == 4:
            t(p + "indexer.proj.weight", Hi, D)
            t(p + "indexer.attn_q_b.weight", Hi * di, q_lora_rank)
            t(p + "indexer_compressor_kv.weight", 2 * di, D)
            t(p + "indexer_compressor_gate.weight", 2 * di, D)
            t(p + "indexer_compressor_ape.weight", r, 2 * di, std=0.5)
            t(p + "indexer_compressor_norm.weight", di, kind="norm")
        t(p + "ffn_gate_inp.weight", E, D)
        if il < hash_layer_count:
            ids = np.stack([rng.permutation(E)[:n_expert_used] for _ in range(V)]).astype(np.int32)
            w.add_tensor(p + "ffn_gate_tid2eid.weight", ids)
        else:
            t(p + "exp_probs_b.bias", E, std=0.1)
        t(p + "ffn_norm.weight", D, kind="norm")
        t(p + "ffn_gate_exps.weight", E, F, D)
        t(p + "ffn_up_exps.weight", E, F, D)
        t(p + "ffn_down_exps.weight", E, D, F)
        t(p + "ffn_gate_shexp.weight", F * n_expert_shared, D)
        t(p + "ffn_up_shexp.weight", F * n_expert_shared, D)
        t(p + "ffn_down_shexp.weight", D, F * n_expert_shared)
        if il >= L - n_nextn:
            t(p + "nextn.eh_proj.weight", D, 2 * D)
            t(p + "nextn.enorm.weight", D, kind="norm")
            t(p + "nextn.hnorm.weight", D, kind="norm")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


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
    tokens, scores, types = _vocab(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
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


def write_tiny_mamba2(path, *, n_vocab: int = 256, n_embd: int = 64, n_layer: int = 2,
                      d_inner: int = 128, d_state: int = 16, n_ssm_head: int = 8, n_group: int = 2,
                      d_conv: int = 4, n_ctx_train: int = 1024, rms_eps: float = 1e-5,
                      seed: int = 0) -> str:
    """Write a random-weight Mamba-2 model (llama.cpp's `mamba2` keys and tensors, F32) to
    `path`; returns the path. Per layer: ``ssm_in [D, 2*d_inner + 2*G*N + H]`` (z | xBC |
    dt), ``ssm_conv1d [d_conv, d_inner + 2*G*N]`` (+ bias), ``ssm_dt.bias [H]``, ``ssm_a [1, H]``
    (negative), ``ssm_d [1, H]``, ``ssm_norm [d_inner/G, G]``, ``ssm_out [d_inner, D]``.
    dt biases are drawn so that softplus(dt) starts in [0.01, 0.1], as trained models do."""
    if d_inner % n_ssm_head or n_ssm_head % n_group or d_conv < 2:
        raise ValueError("write_tiny_mamba2: d_inner must be a multiple of n_ssm_head, n_ssm_head "
                         "of n_group, and d_conv >= 2")
    D, V, H, G, N = n_embd, n_vocab, n_ssm_head, n_group, d_state
    conv_dim = d_inner + 2 * G * N
    rng = np.random.default_rng(seed)
    w = _tiny_writer(path, "mamba2", "pyggml-tiny-mamba2",
                     {"vocab_size": V, "context_length": n_ctx_train, "embedding_length": D,
                      "block_count": n_layer, "ssm.conv_kernel": d_conv, "ssm.inner_size": d_inner,
                      "ssm.state_size": N, "ssm.time_step_rank": H, "ssm.group_count": G},
                     {"attention.layer_norm_rms_epsilon": rms_eps}, V)

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def uniform(shape, lo, hi):
        return rng.uniform(lo, hi, size=shape).astype(np.float32)

    w.add_tensor("token_embd.weight", normal((V, D), 2.0 / np.sqrt(D)))
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", uniform(D, 0.8, 1.2))
        w.add_tensor(p + "ssm_in.weight", normal((d_inner + conv_dim + H, D), 1.0 / np.sqrt(D)))
        w.add_tensor(p + "ssm_conv1d.weight", normal((conv_dim, d_conv), 1.0 / np.sqrt(d_conv)))
        w.add_tensor(p + "ssm_conv1d.bias", normal((conv_dim,), 0.1))
        dt0 = uniform(H, 0.01, 0.1)
        w.add_tensor(p + "ssm_dt.bias", np.log(np.expm1(dt0)).astype(np.float32))
        w.add_tensor(p + "ssm_a", -uniform((H, 1), 0.5, 4.0))
        w.add_tensor(p + "ssm_d", uniform((H, 1), 0.5, 1.5))
        w.add_tensor(p + "ssm_norm.weight", uniform((G, d_inner // G), 0.8, 1.2))
        w.add_tensor(p + "ssm_out.weight", normal((D, d_inner), 1.0 / np.sqrt(d_inner)))
    w.add_tensor("output_norm.weight", uniform(D, 0.8, 1.2))
    w.add_tensor("output.weight", normal((V, D), 2.0 / np.sqrt(D)))
    return _finish(w, path)


def write_tiny_qwen35(path, *, n_vocab: int = 256, n_embd: int = 64, n_layer: int = 4,
                      full_attention_interval: int = 4, n_nextn: int = 1, n_head: int = 4,
                      n_head_kv: int = 2, head_dim: int = 32, n_rot: int = 16,
                      rope_sections=(3, 3, 2, 0), n_ff: int = 128, d_state: int = 16,
                      n_k_head: int = 2, n_v_head: int = 4, d_conv: int = 4,
                      n_ctx_train: int = 1024, rope_freq_base: float = 10000.0,
                      rms_eps: float = 1e-6, bigram: float = 0.0, seed: int = 0) -> str:
    """Write a random-weight Qwen3.5 model (llama.cpp's `qwen35` keys and tensors, F32) to
    `path`; returns the path. `n_layer` trunk layers (every `full_attention_interval`-th is
    gated full attention, the others gated delta-net) plus `n_nextn` NextN blocks
    (block_count counts both). Delta-net layers: ``attn_qkv [D, 2*Hk*S + Hv*S]``,
    ``attn_gate [D, Hv*S]``, ``ssm_conv1d [d_conv, 2*Hk*S + Hv*S]``, ``ssm_dt.bias [Hv]``,
    ``ssm_a [Hv]`` (negative), ``ssm_beta/ssm_alpha [D, Hv]``, ``ssm_norm [S]``,
    ``ssm_out [Hv*S, D]``; attention layers: ``attn_q [D, 2*H*d]`` (q | gate per head),
    ``attn_k/attn_v [D, Hkv*d]``, ``attn_output [H*d, D]``, ``attn_q_norm/attn_k_norm [d]``.
    `bigram` > 0 makes the model close to a bigram model with that residual-branch scale
    (MTP drafts then get accepted naturally)."""
    import gguf
    if n_v_head % n_k_head or n_head % n_head_kv or n_rot > head_dim or n_rot % 2:
        raise ValueError("write_tiny_qwen35: n_v_head % n_k_head, n_head % n_head_kv must be 0 and "
                         "n_rot even, at most head_dim")
    D, V, S, F = n_embd, n_vocab, d_state, n_ff
    d_inner = S * n_v_head
    conv_dim = d_inner + 2 * n_k_head * S
    rng = np.random.default_rng(seed)
    w = _tiny_writer(path, "qwen35", "pyggml-tiny-qwen35",
                     {"vocab_size": V, "context_length": n_ctx_train, "embedding_length": D,
                      "block_count": n_layer + n_nextn, "nextn_predict_layers": n_nextn,
                      "feed_forward_length": F, "attention.head_count": n_head,
                      "attention.head_count_kv": n_head_kv, "attention.key_length": head_dim,
                      "attention.value_length": head_dim, "rope.dimension_count": n_rot,
                      "ssm.conv_kernel": d_conv, "ssm.inner_size": d_inner, "ssm.state_size": S,
                      "ssm.time_step_rank": n_v_head, "ssm.group_count": n_k_head,
                      "full_attention_interval": full_attention_interval},
                     {"rope.freq_base": rope_freq_base, "attention.layer_norm_rms_epsilon": rms_eps}, V)
    w.add_key_value("qwen35.rope.dimension_sections", [int(s) for s in rope_sections],
                    gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    if bigram:
        _near_bigram(w, bigram, seed)

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def uniform(shape, lo, hi):
        return rng.uniform(lo, hi, size=shape).astype(np.float32)

    def matrix(name, n_out, n_in):
        w.add_tensor(name, normal((n_out, n_in), 1.0 / np.sqrt(n_in)))

    def attention(p):
        matrix(p + "attn_q.weight", 2 * n_head * head_dim, D)
        matrix(p + "attn_k.weight", n_head_kv * head_dim, D)
        matrix(p + "attn_v.weight", n_head_kv * head_dim, D)
        matrix(p + "attn_output.weight", D, n_head * head_dim)
        w.add_tensor(p + "attn_q_norm.weight", uniform(head_dim, 0.8, 1.2))
        w.add_tensor(p + "attn_k_norm.weight", uniform(head_dim, 0.8, 1.2))

    def common(p):
        w.add_tensor(p + "attn_norm.weight", uniform(D, 0.8, 1.2))
        w.add_tensor(p + "post_attention_norm.weight", uniform(D, 0.8, 1.2))
        matrix(p + "ffn_gate.weight", F, D)
        matrix(p + "ffn_up.weight", F, D)
        matrix(p + "ffn_down.weight", D, F)

    w.add_tensor("token_embd.weight", normal((V, D), 2.0 / np.sqrt(D)))
    for i in range(n_layer):
        p = f"blk.{i}."
        common(p)
        if (i + 1) % full_attention_interval == 0:
            attention(p)
            continue
        matrix(p + "attn_qkv.weight", conv_dim, D)
        matrix(p + "attn_gate.weight", d_inner, D)
        w.add_tensor(p + "ssm_conv1d.weight", normal((conv_dim, d_conv), 1.0 / np.sqrt(d_conv)))
        w.add_tensor(p + "ssm_dt.bias", normal((n_v_head,), 0.5))
        w.add_tensor(p + "ssm_a", -np.exp(uniform(n_v_head, -1.0, 1.0)))
        matrix(p + "ssm_beta.weight", n_v_head, D)
        matrix(p + "ssm_alpha.weight", n_v_head, D)
        w.add_tensor(p + "ssm_norm.weight", uniform(S, 0.8, 1.2))
        matrix(p + "ssm_out.weight", D, d_inner)
    for j in range(n_nextn):
        p = f"blk.{n_layer + j}."
        common(p)
        attention(p)
        matrix(p + "nextn.eh_proj.weight", D, 2 * D)
        w.add_tensor(p + "nextn.enorm.weight", uniform(D, 0.8, 1.2))
        w.add_tensor(p + "nextn.hnorm.weight", uniform(D, 0.8, 1.2))
    w.add_tensor("output_norm.weight", uniform(D, 0.8, 1.2))
    w.add_tensor("output.weight", normal((V, D), 2.0 / np.sqrt(D)))
    return _finish(w, path)


def write_tiny_step35(path, *, n_vocab: int = 256, n_embd: int = 64, n_layer: int = 3,
                      n_nextn: int = 3, swa_pattern=None, n_swa: int = 8, n_head: int = 4,
                      n_head_kv: int = 2, head_dim: int = 32, n_rot: int = 16, n_ff: int = 128,
                      moe_layers=(1,), n_expert: int = 4, n_expert_used: int = 2,
                      n_ff_exp: int = 32, gate_layers=None, n_ctx_train: int = 1024,
                      rope_freq_base: float = 10000.0, rope_freq_base_swa: float = 5000.0,
                      rms_eps: float = 1e-6, bigram: float = 0.0, swiglu_clamp_exp=None,
                      swiglu_clamp_shexp=None, seed: int = 0) -> str:
    """Write a random-weight Step3.5 model (llama.cpp's `step35` keys and tensors, F32) to
    `path`; returns the path. `n_layer` trunk layers plus `n_nextn` NextN blocks (full
    layers with ``nextn.eh_proj [2D, D]``, ``nextn.enorm/hnorm [D]``; head 1 also has
    ``nextn.shared_head_norm``, head 2 ``nextn.shared_head_head`` and ``nextn.embed_tokens``).
    `swa_pattern` (one bool per block, default alternating window/full) marks the window
    layers (window `n_swa`); full-attention layers rotate n_rot/2 dims, window layers n_rot.
    `moe_layers` use sigmoid-routed experts with a bias and a shared expert; `gate_layers`
    (default every other block) carry the per-head ``attn_gate [D, H]``. `bigram` > 0 makes
    the model close to a bigram model with that residual-branch scale (MTP drafts then get
    accepted naturally). `swiglu_clamp_exp` / `swiglu_clamp_shexp` (one limit per block, 0
    for none) write the SwiGLU limits of the routed experts / the dense and shared FFNs."""
    import gguf
    n_all = n_layer + n_nextn
    if swa_pattern is None:
        swa_pattern = [il % 2 == 0 for il in range(n_all)]
    if gate_layers is None:
        gate_layers = [il for il in range(n_all) if il % 2 == 1]
    if len(swa_pattern) != n_all or n_head % n_head_kv or n_rot > head_dim or n_rot % 4:
        raise ValueError("write_tiny_step35: one swa flag per block, n_head % n_head_kv == 0, "
                         "n_rot a multiple of 4 and at most head_dim")
    D, V, F = n_embd, n_vocab, n_ff
    rng = np.random.default_rng(seed)
    w = _tiny_writer(path, "step35", "pyggml-tiny-step35",
                     {"vocab_size": V, "context_length": n_ctx_train, "embedding_length": D,
                      "block_count": n_all, "nextn_predict_layers": n_nextn,
                      "feed_forward_length": F, "attention.head_count": n_head,
                      "attention.head_count_kv": n_head_kv, "attention.key_length": head_dim,
                      "attention.value_length": head_dim, "rope.dimension_count": n_rot,
                      "attention.sliding_window": n_swa, "expert_feed_forward_length": n_ff_exp,
                      "expert_shared_feed_forward_length": n_ff_exp,
                      "expert_count": n_expert if moe_layers else 0,
                      "expert_used_count": n_expert_used if moe_layers else 0,
                      "expert_gating_func": 2},
                     {"rope.freq_base": rope_freq_base, "rope.freq_base_swa": rope_freq_base_swa,
                      "attention.layer_norm_rms_epsilon": rms_eps}, V)
    w.add_key_value("step35.attention.sliding_window_pattern", [bool(s) for s in swa_pattern],
                    gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.BOOL)
    for key, limits in (("swiglu_clamp_exp", swiglu_clamp_exp), ("swiglu_clamp_shexp", swiglu_clamp_shexp)):
        if limits is not None:
            if len(limits) != n_all:
                raise ValueError(f"write_tiny_step35: {key} needs one limit per block ({n_all})")
            w.add_key_value(f"step35.{key}", [float(x) for x in limits], gguf.GGUFValueType.ARRAY,
                            sub_type=gguf.GGUFValueType.FLOAT32)
    if bigram:
        _near_bigram(w, bigram, seed)

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm_w(name, n):
        w.add_tensor(name, rng.uniform(0.8, 1.2, size=n).astype(np.float32))

    def matrix(name, n_out, n_in, *lead):
        w.add_tensor(name, normal((*lead, n_out, n_in), 1.0 / np.sqrt(n_in)))

    def block(il):
        p = f"blk.{il}."
        norm_w(p + "attn_norm.weight", D)
        matrix(p + "attn_q.weight", n_head * head_dim, D)
        matrix(p + "attn_k.weight", n_head_kv * head_dim, D)
        matrix(p + "attn_v.weight", n_head_kv * head_dim, D)
        matrix(p + "attn_output.weight", D, n_head * head_dim)
        norm_w(p + "attn_q_norm.weight", head_dim)
        norm_w(p + "attn_k_norm.weight", head_dim)
        if il in gate_layers:
            matrix(p + "attn_gate.weight", n_head, D)
        norm_w(p + "ffn_norm.weight", D)
        if il in moe_layers:
            matrix(p + "ffn_gate_inp.weight", n_expert, D)
            w.add_tensor(p + "exp_probs_b.bias", normal((n_expert,), 0.1))
            matrix(p + "ffn_gate_exps.weight", n_ff_exp, D, n_expert)
            matrix(p + "ffn_up_exps.weight", n_ff_exp, D, n_expert)
            matrix(p + "ffn_down_exps.weight", D, n_ff_exp, n_expert)
            matrix(p + "ffn_gate_shexp.weight", n_ff_exp, D)
            matrix(p + "ffn_up_shexp.weight", n_ff_exp, D)
            matrix(p + "ffn_down_shexp.weight", D, n_ff_exp)
        else:
            matrix(p + "ffn_gate.weight", F, D)
            matrix(p + "ffn_up.weight", F, D)
            matrix(p + "ffn_down.weight", D, F)

    w.add_tensor("token_embd.weight", normal((V, D), 2.0 / np.sqrt(D)))
    for il in range(n_layer):
        block(il)
    for j in range(n_nextn):
        il = n_layer + j
        block(il)
        p = f"blk.{il}.nextn."
        matrix(p + "eh_proj.weight", D, 2 * D)
        norm_w(p + "enorm.weight", D)
        norm_w(p + "hnorm.weight", D)
        if j == 1:
            norm_w(p + "shared_head_norm.weight", D)
        if j == 2:
            w.add_tensor(p + "shared_head_head.weight", normal((V, D), 2.0 / np.sqrt(D)))
            w.add_tensor(p + "embed_tokens.weight", normal((V, D), 2.0 / np.sqrt(D)))
    norm_w("output_norm.weight", D)
    w.add_tensor("output.weight", normal((V, D), 2.0 / np.sqrt(D)))
    return _finish(w, path)


from .tiny_drafts import write_tiny_dflash, write_tiny_dspark_dsv4, write_tiny_eagle3  # noqa: E402,F401
from .tiny_gemma import write_tiny_gemma2, write_tiny_gemma3, write_tiny_phi3  # noqa: E402,F401
