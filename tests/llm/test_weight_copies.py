"""Where a loaded model's weights live (Model.load's use_mmap and repack; gg.weight_slab_stats).

Copying the mapped weights and carving small repacked matrices from shared slabs only moves
bytes: every copied tensor must hold the file's bytes, the decode must give the same logits bit
for bit as the mapped model, the right tensors must be copied (not the repacked ones, not an
untied token embedding), the default must follow the memory rule and the environment switch,
and the slabs must be released with the model."""
import gc

import gguf
import numpy as np
import pytest

import pyggml as gg
from pyggml.llm import Context, Model, write_tiny_llama
from pyggml.llm import model as model_module


def _raw(t):
    return np.ascontiguousarray(t.numpy()).view(np.uint8).reshape(-1)


@pytest.fixture(scope="module", params=[("f16", False), ("q4_0", True), ("q8_0", False), ("f32", True)],
                ids=lambda p: f"{p[0]}-{'tied' if p[1] else 'untied'}")
def tiny(request, tmp_path_factory):
    dtype, tied = request.param
    path = write_tiny_llama(tmp_path_factory.mktemp("wc") / f"{dtype}.gguf", n_embd=96, n_ff=160,
                            n_layer=2, tied_embeddings=tied, dtype=dtype, seed=5)
    return dtype, tied, path


def test_copied_tensors_hold_the_file_bytes(tiny):
    dtype, tied, path = tiny
    model = Model.load(path, use_mmap=False)
    reader = gguf.GGUFReader(path)
    assert model._copied, "nothing was copied"
    for rt in reader.tensors:
        t = model.tensors[rt.name]
        assert np.array_equal(_raw(t), np.asarray(rt.data).view(np.uint8).reshape(-1)), rt.name


def test_which_tensors_are_copied(tiny):
    dtype, tied, path = tiny
    model = Model.load(path, use_mmap=False)
    repacked = set(model._repacked)
    assert not (model._copied & repacked), "a repacked matrix was copied as well"
    if tied:
        assert ("token_embd.weight" in model._copied) != ("token_embd.weight" in repacked)
    else:
        assert "token_embd.weight" not in model._copied  # get_rows reads a few rows of it
    expected = set(model.tensors) - repacked - (set() if tied else {"token_embd.weight"})
    assert model._copied == expected
    assert model.mapped_weight_bytes() == 0 and model.copy_mapped_weights() == 0  # nothing left
    mapped = Model.load(path, use_mmap=True)
    assert not mapped._copied and mapped.mapped_weight_bytes() == sum(
        mapped.tensors[n].nbytes for n in expected)


def test_copied_model_decodes_the_same_bits(tiny):
    dtype, tied, path = tiny
    ids = np.random.default_rng(1).integers(3, 256, 11).tolist()
    out = []
    for use_mmap in (True, False):
        for repack in (True, False):
            m = Model.load(path, use_mmap=use_mmap, repack=repack)
            ctx = Context(m, n_ctx=64, n_threads=2)
            out.append((use_mmap, repack, ctx.decode(ids, logits_all=True), ctx.decode([7])))
    for mm_a, rp_a, la, na in out:
        for mm_b, rp_b, lb, nb in out:
            if rp_a == rp_b:
                assert np.array_equal(la, lb) and np.array_equal(na, nb), (dtype, mm_a, mm_b, rp_a)


def test_default_follows_the_memory_rule_and_the_switch(tiny, monkeypatch):
    _, _, path = tiny
    monkeypatch.delenv("PYGGML_USE_MMAP", raising=False)
    monkeypatch.setattr(model_module, "_mem_available", lambda: 1 << 40)
    assert Model.load(path)._copied
    need = Model.load(path, use_mmap=True).mapped_weight_bytes()
    monkeypatch.setattr(model_module, "_mem_available", lambda: 2 * need - 2)
    assert not Model.load(path)._copied, "copied although it takes more than half the memory"
    monkeypatch.setattr(model_module, "_mem_available", lambda: 2 * need)
    assert Model.load(path)._copied
    monkeypatch.setattr(model_module, "_mem_available", lambda: None)
    assert not Model.load(path)._copied, "copied without knowing the memory available"
    monkeypatch.setattr(model_module, "_mem_available", lambda: 1 << 40)
    monkeypatch.setenv("PYGGML_USE_MMAP", "1")
    assert not Model.load(path)._copied
    assert Model.load(path, use_mmap=False)._copied  # the argument wins over the environment
    monkeypatch.setenv("PYGGML_USE_MMAP", "0")
    monkeypatch.setattr(model_module, "_mem_available", lambda: 0)
    assert Model.load(path)._copied


def test_mem_available_reads_meminfo():
    avail = model_module._mem_available()
    assert avail is None or avail > 0


def test_small_repacked_matrices_share_slabs_released_with_the_model(tmp_path):
    gc.collect()
    before = gg.weight_slab_stats()
    path = write_tiny_llama(tmp_path / "q.gguf", n_embd=128, n_ff=384, n_layer=3, dtype="q4_0", seed=2)
    models = [Model.load(path) for _ in range(3)]
    n_repacked = sum(len(m._repacked) for m in models)
    during = gg.weight_slab_stats()
    assert during["pieces"] - before["pieces"] == n_repacked  # every copy is under 4 MiB
    # one slab at most: the pieces may also fill the room left in a slab that earlier tests hold
    assert during["slabs"] - before["slabs"] <= 1, "three tiny models need one slab"
    assert during["own_blocks"] == before["own_blocks"]
    k = len(models[0]._repacked)
    models[0].drop_repack()
    assert gg.weight_slab_stats()["pieces"] == during["pieces"] - k
    del models
    gc.collect()
    after = gg.weight_slab_stats()
    assert after == before, f"slabs not released: {before} -> {after}"


def _product(c, w, x):
    g = gg.Graph(c)
    y = gg.mul_mat(c, w, x)
    g.build_forward_expand(y)
    g.compute(n_threads=1)
    return y.numpy().copy()


def test_freed_room_in_a_slab_is_reused_without_overlap():
    """Copies made and dropped again and again while a few stay alive: the freed room is
    reused (without that, 40 MiB of holes and a second slab here), and
    no live copy is overwritten by a later one (each keeps giving the product it gave when
    made, bit for bit)."""
    gc.collect()
    before = gg.weight_slab_stats()
    rng = np.random.default_rng(7)
    c = gg.Context(mem_size=96 << 20)
    sources = []
    for K, M in [(4096, 64), (1024, 40), (2048, 128), (512, 8)]:
        raw = gg.quantize(gg.Q8_0, rng.uniform(-1, 1, K * M).astype(np.float32))
        w = c.new_tensor(gg.Q8_0, [K, M])
        w.set(raw)
        x = c.new_tensor(gg.F32, [K, 3])
        x.set(rng.uniform(-1, 1, (3, K)).astype(np.float32))
        sources.append((w, x, raw))
    kept = []  # (weights of their own, live copy, the product it gave when made)
    transient = None
    for i in range(1200):
        w, x, raw = sources[int(rng.integers(len(sources)))]
        if i % 40:
            transient = gg.repack_weights(w)  # the one before is dropped after this one is made
            continue
        own = c.new_tensor(gg.Q8_0, list(w.ne[:2]))
        own.set(raw)
        h = gg.repack_weights(own)
        kept.append((own, x, h, _product(c, own, x)))
    during = gg.weight_slab_stats()
    assert during["pieces"] - before["pieces"] == len(kept) + 1
    assert during["slabs"] - before["slabs"] <= 1, during
    # holes left are smaller than the largest copy (without reuse: 40 MiB of them here)
    assert during["hole_bytes"] - before["hole_bytes"] < 300 << 10, during
    for own, x, h, first in kept:
        assert gg.has_repack(own)
        assert np.array_equal(_product(c, own, x), first), "a live copy was overwritten"
    del kept, h, transient
    gc.collect()
    assert gg.weight_slab_stats() == before


def test_a_large_repacked_matrix_gets_its_own_block():
    gc.collect()
    before = gg.weight_slab_stats()
    c = gg.Context(mem_size=8 << 20)
    blocks = (5 << 20) // 18  # q4_0 blocks: 18 bytes for 32 values
    t = c.new_tensor(gg.Q4_0, [32 * 256, blocks // 256])
    h = gg.repack_weights(t)
    st = gg.weight_slab_stats()
    assert st["own_blocks"] == before["own_blocks"] + 1 and st["pieces"] == before["pieces"]
    del h
    gc.collect()
    assert gg.weight_slab_stats() == before
