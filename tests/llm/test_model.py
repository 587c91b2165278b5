"""Model.load: hparams, tensor table, zero-copy weights, vocab, type mapping and errors.

Expected values come from the writer's arguments and from gguf-py's own reader, never from
pyggml's loader."""
import gc
import os

import gguf
import numpy as np
import pytest

import pyggml as gg
from pyggml.llm import GGUFError, HParams, Model, write_tiny_llama

D, V, F, L, H, HKV = 64, 256, 128, 2, 4, 2

VARIANTS = {
    "llama": dict(),
    "llama_hd": dict(head_dim=32, n_head=4, n_head_kv=1, n_ff=96),     # H*d != n_embd, MQA
    "qwen2": dict(arch="qwen2", bias=True),
    "qwen3": dict(arch="qwen3", qk_norm=True, head_dim=32),
    "tied": dict(tied_embeddings=True),
    "f16": dict(dtype="f16"),
    "q8_0": dict(dtype="q8_0", n_ff=96),     # ffn_down rows of 96: a multiple of 32
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    return {k: write_tiny_llama(str(d / f"{k}.gguf"), **kw) for k, kw in VARIANTS.items()}


def expected_tensors(kw):
    """name -> (ne, ggml type id) from the writer's arguments (llama.cpp layout)."""
    arch = kw.get("arch", "llama")
    n_head, n_kv, n_ff = kw.get("n_head", H), kw.get("n_head_kv", HKV), kw.get("n_ff", F)
    d = kw.get("head_dim") or D // n_head
    wt = {"f32": 0, "f16": 1, "q8_0": 8}[kw.get("dtype", "f32")]
    out = {"token_embd.weight": ([D, V], wt), "output_norm.weight": ([D], 0)}
    if not kw.get("tied_embeddings"):
        out["output.weight"] = ([D, V], wt)
    for i in range(L):
        p = f"blk.{i}."
        out.update({p + "attn_norm.weight": ([D], 0), p + "attn_q.weight": ([D, n_head * d], wt),
                    p + "attn_k.weight": ([D, n_kv * d], wt), p + "attn_v.weight": ([D, n_kv * d], wt),
                    p + "attn_output.weight": ([n_head * d, D], wt), p + "ffn_norm.weight": ([D], 0),
                    p + "ffn_gate.weight": ([D, n_ff], wt), p + "ffn_up.weight": ([D, n_ff], wt),
                    p + "ffn_down.weight": ([n_ff, D], wt)})
        if kw.get("bias"):
            out.update({p + "attn_q.bias": ([n_head * d], 0), p + "attn_k.bias": ([n_kv * d], 0),
                        p + "attn_v.bias": ([n_kv * d], 0)})
        if kw.get("qk_norm"):
            out.update({p + "attn_q_norm.weight": ([d], 0), p + "attn_k_norm.weight": ([d], 0)})
    assert arch in ("llama", "qwen2", "qwen3")
    return out


def pad4(ne):
    return list(ne) + [1] * (4 - len(ne))


GG_TYPE_IDS = {0: gg.Type.F32, 1: gg.Type.F16, 2: gg.Type.Q4_0, 8: gg.Type.Q8_0, 26: gg.Type.I32,
               27: gg.Type.I64, 30: gg.Type.BF16}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_hparams(files, variant):
    kw = VARIANTS[variant]
    m = Model.load(files[variant])
    h = m.hparams
    assert isinstance(h, HParams)
    arch = kw.get("arch", "llama")
    n_head = kw.get("n_head", H)
    d = kw.get("head_dim") or D // n_head
    assert m.arch == h.arch == arch
    assert (h.n_vocab, h.n_ctx_train, h.n_embd, h.n_layer, h.n_ff) == (V, 512, D, L, kw.get("n_ff", F))
    assert (h.n_head, h.n_head_kv, h.head_dim_k, h.head_dim_v, h.n_rot) == (n_head, kw.get("n_head_kv", HKV), d, d, d)
    assert h.rope_freq_base == 10000.0 and h.rope_freq_scale == 1.0
    assert h.rope_type == (0 if arch == "llama" else 2)           # NORM for llama, NEOX for qwen2/3
    assert h.rms_eps == pytest.approx(1e-5, rel=1e-6)             # stored as f32
    assert h.n_swa == 0 and h.bos_id == 1 and h.eos_id == 2
    assert h.n_embd_k_gqa == d * kw.get("n_head_kv", HKV)
    assert m.path == files[variant] and m.get_kv("general.architecture") == arch


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_tensors_match_writer_and_reader(files, variant):
    m = Model.load(files[variant])
    exp = expected_tensors(VARIANTS[variant])
    assert set(m.tensors) == set(exp)
    reader = gguf.GGUFReader(files[variant])
    assert len(reader.tensors) == len(m.tensors)
    for rt in reader.tensors:
        t = m.tensors[rt.name]
        ne, tid = exp[rt.name]
        assert t.name == rt.name
        assert t.ne == pad4(ne) == pad4([int(x) for x in rt.shape]), rt.name
        assert int(rt.tensor_type) == tid and t.type == GG_TYPE_IDS[tid], rt.name
        assert t.nbytes == rt.n_bytes and t.is_contiguous()
        # same bytes as the reader sees (F16 compares bit patterns via tobytes)
        assert np.asarray(t.numpy()).tobytes() == np.asarray(rt.data).tobytes(), rt.name


@pytest.mark.parametrize("variant", ["llama", "qwen3"])
def test_metadata_matches_gguf_reader(files, variant):
    """Our bounded parser decodes every metadata value exactly as gguf-py's reader does."""
    m = Model.load(files[variant])
    reader = gguf.GGUFReader(files[variant])
    keys = [k for k in reader.fields if not k.startswith("GGUF.")]
    assert list(m.kv) == keys
    for k in keys:
        theirs = reader.fields[k].contents()
        ours = m.kv[k]
        if isinstance(theirs, float) or (isinstance(theirs, list) and theirs and isinstance(theirs[0], float)):
            np.testing.assert_array_equal(np.float32(ours), np.float32(theirs), err_msg=k)
        else:
            assert ours == theirs, k


def _file_mappings(path):
    real = os.path.realpath(path)
    spans = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == real:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                spans.append((lo, hi, parts[1], int(parts[2], 16)))
    return spans


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux /proc")
@pytest.mark.parametrize("variant", ["llama", "q8_0"])
def test_zero_copy(files, variant):
    """Tensor data pointers lie inside a read-only mapping of the file itself, at the offset
    the reader reports: nothing was copied (use_mmap=True; the default copies what is not
    repacked, tests/llm/test_weight_copies.py)."""
    m = Model.load(files[variant], use_mmap=True, repack=False)
    reader = gguf.GGUFReader(files[variant])
    spans = _file_mappings(files[variant])
    assert spans, "the model file is not memory-mapped"
    for rt in reader.tensors:
        t = m.tensors[rt.name]
        ptr = t.data_ptr
        hit = [s for s in spans if s[0] <= ptr and ptr + t.nbytes <= s[1]]
        assert hit, f"{rt.name}: data at {ptr:#x} is outside every mapping of the file"
        lo, _, perms, file_off = hit[0]
        assert ptr - lo + file_off == rt.data_offset, rt.name      # the right bytes of the file
        assert perms.startswith("r") and "w" not in perms[:2], perms
    assert m.ctx.no_alloc and m.ctx.n_tensors == len(m.tensors)


def test_tensor_keeps_mapping_alive(files):
    expect = gguf.GGUFReader(files["llama"]).get_tensor(0)
    t = Model.load(files["llama"]).tensors[expect.name]            # the Model is dropped at once
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), expect.data)


def test_get_and_tied(files):
    m = Model.load(files["tied"])
    assert m.get("output.weight", required=False) is None
    with pytest.raises(KeyError, match="output.weight"):
        m.get("output.weight")
    assert m.get("token_embd.weight").ne == [D, V, 1, 1]
    assert "tied.gguf" in repr(m) and "llama" in repr(m)


def test_vocab(files):
    m = Model.load(files["llama"])
    assert isinstance(m.vocab, list) and len(m.vocab) == V
    assert m.vocab[:3] == ["<unk>", "<s>", "</s>"] and m.vocab[3 + 0x0A] == "<0x0A>"
    assert m.get_kv("tokenizer.ggml.model") == "llama"
    assert m.get_kv("tokenizer.ggml.token_type")[:4] == [2, 3, 3, 6]


def test_pathlike_and_progress(files, capsys):
    from pathlib import Path
    m = Model.load(Path(files["f16"]), progress=True)
    assert m.get("token_embd.weight").type == gg.Type.F16


def _write_custom(path, tensors, *, arch="llama", extra=None):
    """Minimal llama-keyed file with arbitrary tensors: name -> (array, raw_dtype or None)."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(64)
    w.add_embedding_length(32)
    w.add_block_count(1)
    w.add_feed_forward_length(64)
    w.add_head_count(4)
    w.add_layer_norm_rms_eps(1e-6)
    if extra:
        extra(w)
    for name, (arr, raw) in tensors.items():
        w.add_tensor(name, arr, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def test_type_mapping(tmp_path):
    rng = np.random.default_rng(0)
    q = gguf.GGMLQuantizationType
    x = rng.standard_normal((3, 64)).astype(np.float32)
    tensors = {
        "f32": (x, None), "f16": (x.astype(np.float16), None),
        "bf16": (gguf.quants.quantize(x, q.BF16), q.BF16),
        "q8_0": (gguf.quants.quantize(x, q.Q8_0), q.Q8_0), "q4_0": (gguf.quants.quantize(x, q.Q4_0), q.Q4_0),
        "i32": (np.arange(5, dtype=np.int32), None), "i64": (np.arange(7, dtype=np.int64), None),
    }
    m = Model.load(_write_custom(tmp_path / "types.gguf", tensors))
    reader = gguf.GGUFReader(str(tmp_path / "types.gguf"))
    for rt in reader.tensors:
        t = m.get(rt.name)
        assert t.type == GG_TYPE_IDS[int(rt.tensor_type)]
        assert t.ne == pad4([int(v) for v in rt.shape])
        assert np.asarray(t.numpy()).tobytes() == np.asarray(rt.data).tobytes()
    np.testing.assert_array_equal(m.get("i64").numpy(), np.arange(7))
    # defaults when optional keys are absent
    h = m.hparams
    assert (h.n_head_kv, h.head_dim_k, h.n_rot, h.n_vocab, h.bos_id) == (4, 8, 8, 0, None)


def test_unsupported_tensor_type(tmp_path):
    q = gguf.GGMLQuantizationType
    blob = np.zeros((2, 66), dtype=np.uint8)                     # two IQ2_XXS blocks of 256
    p = _write_custom(tmp_path / "iq2.gguf", {"token_embd.weight": (np.zeros((4, 32), np.float32), None),
                                              "blk.0.ffn_up.weight": (blob, q.IQ2_XXS)})
    from pyggml.llm import validate_gguf
    validate_gguf(p)                                             # well-formed ...
    with pytest.raises(NotImplementedError, match=r"'blk.0.ffn_up.weight' has type iq2_xxs"):
        Model.load(p)                                            # ... but not implemented


def test_k_quant_tensors_load(tmp_path):
    q = gguf.GGMLQuantizationType
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 512).astype(np.float32)
    blob = gg.quantize(gg.Q4_K, x).reshape(2, 144)
    p = _write_custom(tmp_path / "q4k.gguf", {"token_embd.weight": (np.zeros((4, 32), np.float32), None),
                                              "blk.0.ffn_up.weight": (blob, q.Q4_K)})
    t = Model.load(p).tensors["blk.0.ffn_up.weight"]
    assert t.type == gg.Q4_K
    np.testing.assert_array_equal(t.to_f32().ravel(), gg.dequantize(gg.Q4_K, blob.ravel()))


def test_rope_scaling_and_arrays(tmp_path):
    def extra(w):
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(4.0)
        w.add_head_count_kv([2])                                 # per-layer array, uniform
        w.add_rope_freq_base(5e5)
        w.add_sliding_window(16)
    p = _write_custom(tmp_path / "rope.gguf", {"token_embd.weight": (np.zeros((10, 32), np.float32), None)},
                      extra=extra)
    h = Model.load(p).hparams
    assert h.rope_freq_scale == 0.25 and h.rope_scaling_type == "linear" and h.rope_freq_base == 5e5
    assert h.n_head_kv == 2 and h.n_swa == 16
    assert h.n_vocab == 10                                       # from token_embd when no vocab key
    assert h.rms_eps == pytest.approx(1e-6, rel=1e-6)


def test_bad_hparams(tmp_path):
    def kv_bad(w):
        w.add_head_count_kv(3)                                   # 4 heads not divisible by 3
    p = _write_custom(tmp_path / "bad.gguf", {}, extra=kv_bad)
    with pytest.raises(GGUFError, match="head_count_kv=3"):
        Model.load(p)

    def rot_bad(w):
        w.add_rope_dimension_count(4)                            # llama needs n_rot == head size 8
    p = _write_custom(tmp_path / "rot.gguf", {}, extra=rot_bad)
    with pytest.raises(GGUFError, match="rope.dimension_count=4"):
        Model.load(p)


def test_writer_is_deterministic(tmp_path):
    a = write_tiny_llama(str(tmp_path / "a.gguf"), seed=5, n_layer=1)
    b = write_tiny_llama(str(tmp_path / "b.gguf"), seed=5, n_layer=1)
    c = write_tiny_llama(str(tmp_path / "c.gguf"), seed=6, n_layer=1)
    assert open(a, "rb").read() == open(b, "rb").read() != open(c, "rb").read()


def test_writer_rejects_bad_args(tmp_path):
    p = str(tmp_path / "x.gguf")
    for kw, pat in [(dict(arch="gpt2"), "arch"), (dict(dtype="q4_k"), "dtype"), (dict(n_head_kv=3), "multiple"),
                    (dict(arch="qwen3"), "qk_norm"), (dict(qk_norm=True), "qwen3"),
                    (dict(arch="qwen3", qk_norm=True, bias=True), "biases"), (dict(n_embd=60, n_head=8), "head_dim")]:
        with pytest.raises(ValueError, match=pat):
            write_tiny_llama(p, **kw)


def test_weights_are_well_conditioned(files):
    """Random weights have the documented scales (so logits are O(1), not ties)."""
    m = Model.load(files["llama"])
    emb = m.get("token_embd.weight").numpy()
    assert abs(emb.std() - 2 / np.sqrt(D)) < 0.02
    wq = m.get("blk.0.attn_q.weight").numpy()
    assert abs(wq.std() - 1 / np.sqrt(D)) < 0.02
    nw = m.get("output_norm.weight").numpy()
    assert nw.min() >= 0.8 and nw.max() <= 1.2


@pytest.mark.parametrize("use_mmap", [True, False])
def test_mapped_weights_are_read_only_views(files, use_mmap):
    m = Model.load(files["llama"], use_mmap=use_mmap)
    t = m.get("output_norm.weight")
    assert not t.numpy().flags.writeable
    with pytest.raises(ValueError):
        t.set(np.zeros(t.ne[0], np.float32))
    # an op that would write into the mapping is refused at compute time, not a segfault
    g = gg.Graph(m.ctx)
    g.build_forward_expand(gg.add_inplace(m.ctx, t, t))
    with pytest.raises(ValueError, match="read-only"):
        g.compute(1)
