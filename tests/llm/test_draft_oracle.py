"""EAGLE3, DFlash, DSpark and DFlash2 drafts against llama.cpp (llama-cpp-python 0.3.36).

Both sides run the same small speculative loop (the server's step order): pyggml's drafters on
a pyggml target, and a Python re-implementation of common/speculative.cpp's drivers on
llama.cpp's contexts. Per step the draft tokens must be equal and the draft logits (the whole
DFlash block, the EAGLE3 chain) within NMSE 1e-4; the DFlash2 selector lattice must hold the
same candidates and scores. Both committed streams must equal plain greedy decoding. Random
drafts are never accepted, so a second run forces the proposal (true continuation with an
injected mismatch) to go through full, partial and zero acceptance and the rollbacks."""
import numpy as np
import pytest

from pyggml.llm import Model, write_tiny_llama
from pyggml.llm.tiny import write_tiny_dflash, write_tiny_dspark_dsv4, write_tiny_eagle3
from pyggml.llm.context import Context
from pyggml.llm.speculative.dflash import DFlashDrafter
from pyggml.llm.speculative.eagle3 import Eagle3Drafter
from util import tiny_qwen3_target

llama_cpp = pytest.importorskip("llama_cpp")
pytestmark = pytest.mark.oracle

from llama_cpp_spec import (LlamaDFlashDraft, LlamaEagle3Draft, LlamaTarget,  # noqa: E402
                            speculative_loop)
from spec_drive import PyDraft, PyTarget  # noqa: E402

PROMPT = [1, 5, 17, 42, 9, 77, 130]
N_GEN = 24
N_MAX = 3
KINDS = {
    "dflash": (DFlashDrafter, dict(kind="dflash", target_layers=(1, 3))),
    "dflash_swa": (DFlashDrafter, dict(kind="dflash", n_layer=2, target_layers=(0, 2),
                                       swa=(5, (True, False)))),
    "dspark": (DFlashDrafter, dict(kind="dspark", target_layers=(1, 2, 3))),
    "dspark_bonus": (DFlashDrafter, dict(kind="dspark", sample_from_anchor=False)),
    "dspark_d2t": (DFlashDrafter, dict(kind="dspark", n_draft_vocab=150)),
    "dflash2": (DFlashDrafter, dict(kind="dflash2", block_size=5)),
    "dflash_extras": (DFlashDrafter, dict(kind="dflash", n_layer=2, extras=True)),
    "dflash2_extras": (DFlashDrafter, dict(kind="dflash2", block_size=5, extras=True)),
    "dflash_tied": (DFlashDrafter, dict(kind="dflash", target_layers=(2,))),
    "dspark_dsv4": (DFlashDrafter, dict(dsv4=True, target_layers=(1, 3))),
    "dspark_dsv4_bonus": (DFlashDrafter, dict(dsv4=True, sample_from_anchor=False, n_layer=1,
                                              n_swa=6)),
    "eagle3": (Eagle3Drafter, dict(target_layers=(0, 1, 3))),
    "eagle3_tied": (Eagle3Drafter, dict(target_layers=(0, 2, 3), own_output=False)),
    "eagle3_d2t": (Eagle3Drafter, dict(target_layers=(1, 2, 3), n_draft_vocab=120,
                                       norm_before_fc=True, norm_before_residual=True)),
}
TIED = {"dflash_tied", "eagle3_tied"}   # drafts of a target with tied embeddings (no output)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("drafts")
    out = {"target": tiny_qwen3_target(d, "target.gguf", n_head=4, n_head_kv=2),
           "target_tied": write_tiny_llama(d / "target_tied.gguf", arch="qwen3", qk_norm=True,
                                           n_layer=4, n_embd=64, head_dim=16, tied_embeddings=True,
                                           seed=4)}
    for name, (cls, kw) in KINDS.items():
        writer = write_tiny_eagle3 if cls is Eagle3Drafter else write_tiny_dflash
        kw = dict(kw)
        if kw.pop("dsv4", False):       # the DeepSeek V4 backbone (hyper-connections, MoE)
            writer = write_tiny_dspark_dsv4
        out[name] = writer(d / f"{name}.gguf", **kw)
    return out


def nmse(ours, ref):
    ok = np.isfinite(ref)
    assert np.array_equal(ok, np.isfinite(ours)), "the -inf rows (d2t) differ"
    return float(np.mean((ours[ok] - ref[ok]) ** 2) / np.mean(ref[ok] ** 2))


def lattice_entries(lat, k, n_rows):
    """{(slot, predecessor id or -1, successor id): score} of a DFlash2 lattice, independent of
    the order the top-k candidates come in."""
    d = {}
    for p in range(1, n_rows):
        cand = lat[p, :k].astype(int)
        prev = [-1] if p == 1 else lat[p - 1, :k].astype(int)
        for j in range(k):
            for s in range(k):
                d[(p, int(prev[j % len(prev)]) if p > 1 else -1, int(cand[s]))] = lat[p, k + j * k + s]
    return d


def run_both(files, name, forced):
    cls, _ = KINDS[name]
    target = files["target_tied" if name in TIED else "target"]
    tgt, dm = Model.load(target), Model.load(files[name])
    greedy = list(Context(tgt, n_ctx=256).generate(PROMPT, N_GEN + N_MAX + 2))
    kw = dict(truth=greedy, pattern=[N_MAX, 1, 0, 2]) if forced else {}
    pt = PyTarget(tgt, cls, dm, n_max=N_MAX)
    ours, s_ours = speculative_loop(pt, PyDraft(pt), PROMPT, N_GEN, **kw)
    lt = LlamaTarget(target, pt.drafter.hp.target_layers)
    drv = LlamaEagle3Draft if cls is Eagle3Drafter else LlamaDFlashDraft
    ref, s_ref = speculative_loop(lt, drv(files[name], lt, N_MAX), PROMPT, N_GEN, **kw)
    return greedy[:N_GEN], ours, s_ours, ref, s_ref, pt


@pytest.mark.parametrize("forced", [False, True], ids=["natural", "forced"])
@pytest.mark.parametrize("name", list(KINDS))
def test_draft_steps_match_llama_cpp(files, name, forced):
    greedy, ours, s_ours, ref, s_ref, pt = run_both(files, name, forced)
    assert ref == greedy, "the llama.cpp driver itself is not lossless"
    assert ours == greedy
    assert len(s_ours) == len(s_ref)
    worst = 0.0
    for i, (a, b) in enumerate(zip(s_ours, s_ref)):
        assert a["draft"] == b["draft"], f"step {i}: drafts differ"
        assert a["n_accepted"] == b["n_accepted"]
        assert len(a["draft"]) == pt.n_max
        if b["logits"] is not None:
            worst = max(worst, nmse(a["logits"], b["logits"]))
        if b["lattice"] is not None:
            k = pt.drafter.hp.selector_top_k
            la = lattice_entries(a["lattice"], k, len(b["lattice"]))
            lb = lattice_entries(b["lattice"], k, len(b["lattice"]))
            assert la.keys() == lb.keys(), f"step {i}: lattice candidates differ"
            got, want = np.array([la[x] for x in lb]), np.array(list(lb.values()))
            assert nmse(got, want) <= 1e-4
    assert worst <= 1e-4, f"draft logits NMSE {worst:.3g}"
    if forced:
        acc = {s["n_accepted"] for s in s_ours}
        assert {0, N_MAX} <= acc and acc - {0, N_MAX}, f"acceptance pattern {acc} misses a case"


def test_n_max_clamped_like_llama_cpp(files):
    tgt = Model.load(files["target"])
    ctx = Context(tgt, n_ctx=256)
    for name, want in (("dflash", 3), ("dspark", 4), ("dspark_bonus", 3), ("dflash2", 4)):
        d = DFlashDrafter(ctx, Model.load(files[name]))
        assert d.bind(ctx, 10) == want, name
        lt = LlamaTarget(files["target"], d.hp.target_layers)
        assert LlamaDFlashDraft(files[name], lt, 10).n_max == want, name


@pytest.mark.parametrize("forced", [False, True], ids=["natural", "forced"])
@pytest.mark.parametrize("kind", ["dflash_mrope", "eagle3_h_nextn"])
def test_drafts_of_a_qwen35_target(tmp_path, kind, forced):
    """A hybrid (gated delta-net + attention) Qwen3.5 target, rolled back through n_rs_seq:
    a DFlash draft with the degenerate M-RoPE sections such drafts carry, and an EAGLE3 head
    whose third tap is the target's post-norm h_nextn (the id one past the last layer)."""
    from pyggml.llm.tiny import write_tiny_qwen35
    target = write_tiny_qwen35(tmp_path / "q35.gguf", n_layer=4, full_attention_interval=2,
                               n_nextn=0)
    if kind == "dflash_mrope":
        cls, drv = DFlashDrafter, LlamaDFlashDraft
        path = write_tiny_dflash(tmp_path / "d.gguf", target_layers=(1, 3), rope_sections=(8, 0, 0, 0))
    else:
        cls, drv = Eagle3Drafter, LlamaEagle3Draft
        path = write_tiny_eagle3(tmp_path / "e.gguf", target_layers=(1, 2, 4))
    tgt, dm = Model.load(target), Model.load(path)
    greedy = list(Context(tgt, n_ctx=256).generate(PROMPT, N_GEN + N_MAX + 2))
    kw = dict(truth=greedy, pattern=[N_MAX, 1, 0, 2]) if forced else {}
    pt = PyTarget(tgt, cls, dm, n_max=N_MAX, n_rs_seq=N_MAX)
    ours, s_ours = speculative_loop(pt, PyDraft(pt), PROMPT, N_GEN, **kw)
    lt = LlamaTarget(target, pt.drafter.hp.target_layers, n_rs_seq=N_MAX)
    ref, s_ref = speculative_loop(lt, drv(path, lt, N_MAX), PROMPT, N_GEN, **kw)
    assert ref == greedy[:N_GEN] and ours == greedy[:N_GEN]
    assert [s["draft"] for s in s_ours] == [s["draft"] for s in s_ref]
    assert [s["n_accepted"] for s in s_ours] == [s["n_accepted"] for s in s_ref]
    assert max(nmse(a["logits"], b["logits"]) for a, b in zip(s_ours, s_ref)) <= 1e-4


@pytest.mark.parametrize("name", ["dspark", "dspark_dsv4"])
def test_dspark_confidences_match_llama_cpp(files, name):
    """The confidence head (sigmoid of conf_proj over the slot's t_embd and its Markov row) of
    every draft block, read from h_nextn on both sides (plain and DSV4 backbones)."""

    class PyConf(PyDraft):
        def draft(self, id_last, pos0):
            ids = super().draft(id_last, pos0)
            self.confs.append(self.d.ctx.h_nextn[:, 0].copy())
            return ids

    class LlamaConf(LlamaDFlashDraft):
        def draft(self, id_last, pos0):
            ids = super().draft(id_last, pos0)
            n_block = self.n_max + (0 if self.sample_from_anchor else 1)
            self.confs.append(self.d.nextn(n_block)[:, 0].copy())
            return ids

    tgt, dm = Model.load(files["target"]), Model.load(files[name])
    pt = PyTarget(tgt, DFlashDrafter, dm, n_max=N_MAX)
    ours = PyConf(pt)
    ours.confs = []
    speculative_loop(pt, ours, PROMPT, 12)
    lt = LlamaTarget(files["target"], pt.drafter.hp.target_layers)
    ref = LlamaConf(files[name], lt, N_MAX)
    ref.confs = []
    speculative_loop(lt, ref, PROMPT, 12)
    assert len(ours.confs) == len(ref.confs) > 0
    got, want = np.concatenate(ours.confs), np.concatenate(ref.confs)
    assert np.all((want > 0) & (want < 1)) and np.std(want) > 1e-3
    assert nmse(got, want) <= 1e-6
