"""The tiny-model writer against real llama.cpp (llama-cpp-python).

Each variant must load in llama.cpp, and llama.cpp's logits must match an independent numpy
forward pass over the weights as pyggml's loader exposes them. That pins down both halves:
the file means to llama.cpp what the writer intends, and Model.load reads it back the same
way (shapes, orientation, types)."""
import numpy as np
import pytest

import gguf

import pyggml as gg
from pyggml.llm import Model, write_tiny_llama
from util import assert_close

llama_cpp = pytest.importorskip("llama_cpp")
pytestmark = pytest.mark.oracle

VARIANTS = {
    "llama_gqa": dict(),
    "llama_headdim": dict(head_dim=32, n_head=4, n_head_kv=1),
    "qwen3_qknorm": dict(arch="qwen3", qk_norm=True, head_dim=32, n_head=4, n_head_kv=2),
    "qwen2_bias": dict(arch="qwen2", bias=True),
    "llama_tied": dict(tied_embeddings=True),
    "f16": dict(dtype="f16"),
    "q8_0": dict(dtype="q8_0", arch="qwen2", bias=True),
    "rope_linear": dict(rope_scaling_factor=4.0, rope_freq_base=500000.0, rms_eps=1e-6),
}
# f32 weights: llama.cpp computes in f32. f16 / q8_0 weights: llama.cpp rounds activations
# to f16 / q8_0 inside the matmuls, the reference does not.
MAX_NMSE = {"f16": 1e-5, "q8_0": 1e-3}
TOKENS = [1, 5, 17, 42, 100, 200, 7, 255, 3]


def weights(m: Model, name):
    """float32 numpy array, numpy shape = ggml ne reversed: (n_out, n_in) for matrices."""
    t = m.get(name, required=False)
    if t is None:
        return None
    a = np.asarray(t.numpy())
    if t.type == gg.Type.Q8_0:
        return gguf.quants.dequantize(a, gguf.GGMLQuantizationType.Q8_0).astype(np.float32)
    return a.astype(np.float32)


def rms_norm(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, n_rot, base, neox):
    """x: (T, heads, d). NORM rotates (x[2i], x[2i+1]); NEOX rotates (x[i], x[i + n_rot/2])."""
    half = n_rot // 2
    theta = pos[:, None] * base ** (-2.0 * np.arange(half) / n_rot)        # (T, half)
    c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    out = x.copy()
    if neox:
        a, b = x[..., :half], x[..., half:n_rot]
        out[..., :half], out[..., half:n_rot] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        out[..., 0:n_rot:2], out[..., 1:n_rot:2] = a * c - b * s, a * s + b * c
    return out


def reference_logits(m: Model, tokens):
    hp = m.hparams
    T, H, Hkv, d = len(tokens), hp.n_head, hp.n_head_kv, hp.head_dim_k
    pos = np.arange(T, dtype=np.float64) * hp.rope_freq_scale
    neox = hp.rope_type == 2
    x = weights(m, "token_embd.weight")[tokens].astype(np.float64)
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(hp.n_layer):
        W = lambda n: weights(m, f"blk.{i}.{n}")  # noqa: E731
        h = rms_norm(x, W("attn_norm.weight"), hp.rms_eps)
        q, k, v = h @ W("attn_q.weight").T, h @ W("attn_k.weight").T, h @ W("attn_v.weight").T
        bq, bk, bv = W("attn_q.bias"), W("attn_k.bias"), W("attn_v.bias")
        q, k, v = (t if b is None else t + b for t, b in ((q, bq), (k, bk), (v, bv)))
        q, k, v = q.reshape(T, H, d), k.reshape(T, Hkv, d), v.reshape(T, Hkv, hp.head_dim_v)
        if W("attn_q_norm.weight") is not None:
            q = rms_norm(q, W("attn_q_norm.weight"), hp.rms_eps)
            k = rms_norm(k, W("attn_k_norm.weight"), hp.rms_eps)
        q = rope(q, pos, hp.n_rot, hp.rope_freq_base, neox)
        k = rope(k, pos, hp.n_rot, hp.rope_freq_base, neox)
        att = np.empty((T, H, hp.head_dim_v))
        for hh in range(H):
            g = hh // (H // Hkv)
            sc = q[:, hh] @ k[:, g].T / np.sqrt(d) + mask
            p = np.exp(sc - sc.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            att[:, hh] = p @ v[:, g]
        x = x + att.reshape(T, -1) @ W("attn_output.weight").T
        h = rms_norm(x, W("ffn_norm.weight"), hp.rms_eps)
        g_, u = h @ W("ffn_gate.weight").T, h @ W("ffn_up.weight").T
        x = x + (g_ / (1 + np.exp(-g_)) * u) @ W("ffn_down.weight").T
    h = rms_norm(x, weights(m, "output_norm.weight"), hp.rms_eps)
    out = weights(m, "output.weight")
    if out is None:
        out = weights(m, "token_embd.weight")
    return h @ out.T


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("oracle")
    return {k: write_tiny_llama(str(d / f"{k}.gguf"), **kw) for k, kw in VARIANTS.items()}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_llama_cpp_loads_and_matches_reference(files, variant):
    path = files[variant]
    llm = llama_cpp.Llama(model_path=path, logits_all=True, verbose=False, n_ctx=128, n_threads=2,
                          n_batch=64, seed=0)
    try:
        assert llm.n_vocab() == 256
        llm.eval(TOKENS)
        got = np.array(llm.scores[:len(TOKENS)], dtype=np.float64)
    finally:
        llm.close()
    assert np.all(np.isfinite(got))
    m = Model.load(path)
    ref = reference_logits(m, TOKENS)
    assert got.shape == ref.shape
    assert 0.5 < ref.std() < 10, "logits should be O(1), not near-ties"
    assert_close(got, ref, MAX_NMSE.get(VARIANTS[variant].get("dtype", "f32"), 1e-6), what=variant)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_llama_cpp_hparams_agree(files, variant):
    """llama.cpp's own view of the model agrees with HParams (incl. the RoPE mode table)."""
    path = files[variant]
    llm = llama_cpp.Llama(model_path=path, verbose=False, n_ctx=64, n_threads=1)
    try:
        mp = llm.model
        theirs = dict(n_ctx_train=llama_cpp.llama_model_n_ctx_train(mp), n_embd=llama_cpp.llama_model_n_embd(mp),
                      n_layer=llama_cpp.llama_model_n_layer(mp), n_head=llama_cpp.llama_model_n_head(mp),
                      n_head_kv=llama_cpp.llama_model_n_head_kv(mp), n_swa=llama_cpp.llama_model_n_swa(mp),
                      rope_type=llama_cpp.llama_model_rope_type(mp),
                      rope_freq_scale=llama_cpp.llama_model_rope_freq_scale_train(mp),
                      n_vocab=llm.n_vocab(), bos_id=llm.token_bos(), eos_id=llm.token_eos())
        md = llm.metadata
    finally:
        llm.close()
    h = Model.load(path).hparams
    ours = {k: getattr(h, k) for k in theirs}
    assert ours == pytest.approx(theirs)
    assert md["general.architecture"] == h.arch
    assert int(md[f"{h.arch}.attention.key_length"]) == h.head_dim_k
