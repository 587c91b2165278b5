"""DeepSeek V4 end to end on tiny random GGUFs: pyggml.llm's logits against the float64 numpy
forward in dsv4_ref.py (raw, CSA and HCA layers, a hash layer, YaRN on and off), and
self-consistency: ubatches of 37 (compressor state carried across ubatches) equal one
ubatch, incremental decoding equals the prompt, several sequences equal independent runs,
decode/seq_rm/decode equals the shorter decode, flash attention on and off agree."""
import os

import numpy as np
import pytest

import pyggml as gg
from dsv4_ref import config, forward, load_weights
from util import assert_close, nmse

from pyggml.llm import Context, Model
from pyggml.llm.kv_cache_dsv4 import DSV4Memory
from pyggml.llm.tiny import write_tiny_deepseek4

VARIANTS = {
    "mixed": dict(seed=0),
    "yarn": dict(seed=1, yarn_factor=4.0, compress_ratios=(4, 128, 0, 4)),
}
N_PROMPT = 270       # > 2*128: HCA blocks complete


@pytest.fixture(scope="module", params=list(VARIANTS))
def tiny(request, tmp_path_factory):
    kw = VARIANTS[request.param]
    path = write_tiny_deepseek4(tmp_path_factory.mktemp("dsv4") / f"{request.param}.gguf", **kw)
    return path, config(**kw), Model.load(path)


def prompt(n=N_PROMPT, seed=3):
    return [int(t) for t in np.random.default_rng(seed).integers(3, 256, size=n)]


def f32_ctx(model, **kw):
    kw.setdefault("n_ctx", 512)
    kw.setdefault("flash_attn", False)
    return Context(model, type_k=gg.F32, type_v=gg.F32, **kw)


def test_hparams_and_memory(tiny):
    path, cfg, model = tiny
    ctx = f32_ctx(model)
    hp = ctx.hparams
    assert hp.compress_ratios == tuple(cfg["compress_ratios"]) and hp.hc == 4
    assert hp.indexer_top_k == 8 and hp.swiglu_clamp_exp == (2.0,) * 4
    assert (hp.ext_factor == 1.0) == (cfg["yarn_factor"] is not None)
    mem = ctx.memory
    assert isinstance(mem, DSV4Memory)
    assert mem.csa.size == 256 and mem.hca.size == 256            # pad256(ceil(512/r))
    assert mem.csa.layers == [i for i, r in enumerate(cfg["compress_ratios"]) if r == 4]


def test_logits_match_the_numpy_reference(tiny):
    path, cfg, model = tiny
    toks = prompt()
    sel = {}
    ref = forward(cfg, load_weights(path), toks, selections=sel)
    # the indexer's top-k must be well defined where it matters: the k-th and (k+1)-th
    # visible scores differ by more than rounding
    k = cfg["indexer_top_k"]
    for il, score in sel.items():
        for t in range(len(toks)):
            s = np.sort(score[t][np.isfinite(score[t])])[::-1]
            if len(s) > k:
                assert s[k - 1] - s[k] > 1e-5 * max(1.0, abs(s[k - 1])), (il, t)
    got = f32_ctx(model).decode(toks, logits_all=True)
    e = nmse(ref, got)
    print(f"\n{os.path.basename(path)}: logits NMSE vs numpy {e:.2e}")
    assert_close(got, ref, 1e-9, "dsv4 prompt")


def test_ubatch_37_and_incremental_equal_one_ubatch(tiny):
    _, _, model = tiny
    toks = prompt()
    one = f32_ctx(model).decode(toks, logits_all=True)
    split = f32_ctx(model, n_ubatch=37)
    got = split.decode(toks, logits_all=True)
    assert_close(got, one, 1e-10, "n_ubatch 37")
    assert split.timings["n_ubatch"] == -(-len(toks) // 37)
    inc = f32_ctx(model)
    rows = [inc.decode(toks[:250], logits_all=True)]
    rows += [inc.decode(toks[i:i + 1]) for i in range(250, len(toks))]
    assert_close(np.concatenate(rows), one, 1e-10, "incremental")
    assert inc.timings["n_graph_reuse"] >= 10


def test_flash_attention_agrees_and_keeps_the_sparse_promise(tiny):
    _, cfg, model = tiny
    toks = prompt(140, seed=4)
    a = f32_ctx(model, flash_attn=False).decode(toks, logits_all=True)
    gg.set_debug(True)       # the kernel checks that no mask row exceeds n_kv_max finite entries
    try:
        fa = f32_ctx(model, flash_attn=True)
        b = fa.decode(toks, logits_all=True)
    finally:
        gg.set_debug(False)
    assert_close(b, a, 1e-10, "flash attention, F32 caches")
    c = Context(model, n_ctx=512, flash_attn=True).decode(toks, logits_all=True)  # F16 caches
    assert nmse(a, c) < 1e-3
    res = fa._last
    for il, r in enumerate(cfg["compress_ratios"]):
        n_kv_max = res.get(f"fattn-{il}").op_params[4]
        assert n_kv_max == (min(256, cfg["n_swa"]) + cfg["indexer_top_k"] if r == 4 else 0), il


def test_several_sequences_equal_independent_runs(tiny):
    _, _, model = tiny
    seqs = [prompt(n, seed=10 + n) for n in (150, 134, 40)]
    shared = f32_ctx(model, n_seq_max=3, n_ubatch=64)
    got = {s: [] for s in range(3)}
    cut = [0, 0, 0]
    for step in ([100, 5, 40], [1, 128, 0], [49, 0, 0], [0, 1, 0]):
        for s, n in enumerate(step):
            if n:
                got[s].append(shared.decode(seqs[s][cut[s]:cut[s] + n], seq_id=s, logits_all=True))
                cut[s] += n
    for s in range(3):
        ref = f32_ctx(model, n_ubatch=64).decode(seqs[s][:cut[s]], logits_all=True)
        assert_close(np.concatenate(got[s]), ref, 1e-10, f"sequence {s}")


@pytest.mark.parametrize("n_prompt,steps,back", [(259, [], 4), (254, [1, 1, 1, 1], 4),
                                                   (250, [3, 1], 3), (126, [1, 1], 3)])
def test_decode_seq_rm_decode_equals_the_shorter_decode(tiny, n_prompt, steps, back):
    # rollbacks across CSA block ends and the HCA block end at 255 (positions 128..255), from
    # one ubatch or from several single-token ones (snapshot planes chained across ubatches)
    _, _, model = tiny
    toks = prompt(n_prompt + sum(steps), seed=5)
    ctx = f32_ctx(model, n_seq_max=2, n_rs_seq=4)
    ctx.decode(toks[:n_prompt])
    ctx.decode(toks[:20], seq_id=1)
    p = n_prompt
    for n in steps:
        ctx.decode(toks[p:p + n])
        p += n
    assert ctx.seq_rm(0, p - back, -1)
    assert ctx.n_past(0) == p - back and ctx.n_past(1) == 20
    tail = prompt(9, seed=6)
    got = ctx.decode(tail, logits_all=True)
    ref = f32_ctx(model).decode(toks[:p - back] + tail, logits_all=True)[-len(tail):]
    assert_close(got, ref, 1e-10, "after seq_rm")
    assert_close(ctx.decode([7], seq_id=1), f32_ctx(model).decode(toks[:20] + [7]), 1e-10, "other seq")


def test_seq_rm_refuses_what_the_rings_cannot_undo(tiny):
    _, _, model = tiny
    toks = prompt(40, seed=8)
    ctx = f32_ctx(model, n_rs_seq=2)
    ctx.decode(toks)
    assert not ctx.seq_rm(0, 37, -1)          # 3 > n_rs_seq positions
    assert not ctx.seq_rm(0, 10, 20)          # a hole in the middle
    assert ctx.n_past(0) == 40
    assert ctx.seq_rm(0, 38, -1) and ctx.n_past(0) == 38
    assert not ctx.seq_rm(0, 37, -1)          # pending rollbacks stack only within the planes
    assert ctx.seq_rm(0, 50, -1)              # beyond the end: nothing to do
    assert ctx.seq_rm(0, 0, -1) and ctx.n_past(0) == 0     # the whole sequence
    ref = f32_ctx(model).decode(toks[:5], logits_all=True)
    assert_close(ctx.decode(toks[:5], logits_all=True), ref, 1e-12, "after clearing")
    no_planes = f32_ctx(model)
    no_planes.decode(toks)
    assert not no_planes.seq_rm(0, 39, -1)


def test_seq_cp_copies_the_whole_state(tiny):
    _, _, model = tiny
    toks = prompt(140, seed=9)
    ctx = f32_ctx(model, n_seq_max=2)
    ctx.decode(toks)
    ctx.seq_cp(0, 1)
    a, b = ctx.decode([7, 8], seq_id=1, logits_all=True), ctx.decode([7, 8], seq_id=0, logits_all=True)
    assert_close(a, b, 1e-12, "seq_cp")
    assert_close(a, f32_ctx(model).decode(toks + [7, 8], logits_all=True)[-2:], 1e-10, "seq_cp vs fresh")
    with pytest.raises(ValueError, match="whole sequences"):
        ctx.seq_cp(0, 1, 10, 20)


def test_greedy_generation_is_stable_across_paths(tiny):
    _, _, model = tiny
    toks = prompt(40, seed=7)
    a = f32_ctx(model).generate(toks, 16)
    b = f32_ctx(model, n_ubatch=7).generate(toks, 16)
    assert list(a) == list(b) and len(a) == 16


def test_rotated_caches_when_the_key_head_equals_the_indexer_head(tmp_path):
    # then the raw, CSA and HCA caches hold Hadamard-rotated keys too (q rotated alike, the
    # output rotated back): the logits must not change
    kw = dict(seed=4, head_dim=64)
    path = write_tiny_deepseek4(tmp_path / "rot.gguf", **kw)
    toks = prompt(140, seed=12)
    ref = forward(config(**kw), load_weights(path), toks)
    ctx = f32_ctx(Model.load(path), n_ubatch=70)   # the last ubatch completes an HCA block
    assert_close(ctx.decode(toks, logits_all=True), ref, 1e-9, "rotated caches")
    names = ctx._last.names()
    for nm in ("dsv4_raw_k_rot", "dsv4_csa_k_rot", "dsv4_hca_k_rot", "dsv4_lid_k_rot",
               "lid_q_rot-1", "lid_state_compress_rot-1", "csa_state_compress_rot-1"):
        assert nm in names, nm
    r = names["dsv4_lid_k_rot"].numpy().astype(np.float64)
    assert r.shape == (64, 64) and np.allclose(r @ r, np.eye(64), atol=1e-6)
    assert np.allclose(np.abs(r), 1 / 8) and r[0, 0] > 0 and r[1, 1] < 0


def test_taps_layer_inputs_and_h_nextn(tiny):
    _, cfg, model = tiny
    toks = prompt(9, seed=13)
    ctx = f32_ctx(model, outputs=("layer_inp-0", "layer_inp-2", "h_nextn"))
    ctx.decode(toks, logits_all=True)
    emb = load_weights(tiny[0])["token_embd.weight"][toks]
    assert_close(ctx.output("layer_inp-0").reshape(9, -1), emb, 1e-12, "layer 0 input = embedding")
    assert ctx.output("layer_inp-2").shape[-1] == cfg["n_embd"]
    assert ctx.output("h_nextn").reshape(9, -1).shape == (9, 4 * cfg["n_embd"])   # all hc streams


def test_top_k_4_two_hash_layers_hca_first(tmp_path):
    kw = dict(seed=2, indexer_top_k=4, compress_ratios=(128, 4, 4, 0), hash_layer_count=2)
    path = write_tiny_deepseek4(tmp_path / "topk4.gguf", **kw)
    toks = prompt()
    ref = forward(config(**kw), load_weights(path), toks)
    for fa in (False, True):
        got = f32_ctx(Model.load(path), flash_attn=fa, n_ubatch=37).decode(toks, logits_all=True)
        assert_close(got, ref, 1e-9, f"topk4 fa={fa}")
