"""Batched drafting in SpeculativeDecoder.generate_batch: one drafter (one draft memory with a
sequence per prompt) drafts for every sequence in one draft graph per draft position (MTP,
EAGLE3) or per block (DFlash family).

Checked per kind on the tiny writers, over 3 prompts of different lengths:
* every committed stream equals plain greedy decoding of its prompt alone;
* each sequence's draft tokens, step by step, equal those of a one-sequence decoder run on
  that prompt alone (the batched draft computes the same thing);
* the draft graph runs once per draft position / block for all sequences, counted from the
  draft contexts' ubatches (`stats["draft_calls"]`); drafting one sequence after another
  (`batch_draft=False`) counts one run per sequence and fails the same equality.

Random tiny drafts are rarely right, so the drafters are steered: after the real draft is
computed (and recorded), a prefix of it is replaced by the target's own greedy continuation,
full, partial or empty by position. The draft memories then see full, partial and zero
acceptance (their per-sequence rollback), while the recorded drafts stay the draft model's."""
from collections import defaultdict

import pytest


from pyggml.llm import Context, Model
from pyggml.llm.speculative import SpeculativeDecoder
from pyggml.llm.speculative.dflash import DFlashDrafter
from pyggml.llm.speculative.eagle3 import Eagle3Drafter
from pyggml.llm.speculative.mtp import MtpDrafter
from pyggml.llm.tiny import (write_tiny_dflash, write_tiny_dspark_dsv4, write_tiny_eagle3,
                             write_tiny_qwen35, write_tiny_step35)
from util import tiny_eagle3_draft, tiny_qwen3_target

PROMPTS = [[1, 5, 17, 42, 9, 77, 130, 4, 8],
           [3, 3, 60, 61, 62],
           [2, 4, 8, 16, 2, 4, 8, 16, 2, 4, 8, 16, 32]]
N_GEN, N_MAX, N_CTX = 24, 3, 128
# draft tokens replaced by the target's own, per prompt, by draft position modulo the pattern
KEEP = [(N_MAX, 1, 0), (0, 0, 1, 0), (N_MAX, N_MAX, 2, 0)]


def _steered(base):
    class Steered(base):
        """`base` drafter whose drafts are recorded (by the prompt they continue), then partly
        replaced by the target's greedy continuation: how many of their tokens by KEEP of the
        prompt and the draft's position (every sequence its own pattern, so they finish
        apart). It finds a sequence's stream from the tokens it was shown, so it needs no
        seq id (clones of batch_draft=False have none)."""

        def setup(self, streams, labels=None):
            self.streams, self.raw = streams, defaultdict(list)
            self.labels = list(range(len(streams))) if labels is None else labels
            self.hist = defaultdict(list)
            return self

        def reset(self):
            super().reset()
            if hasattr(self, "hist"):
                self.hist.clear()

        def clone(self):
            return super().clone().setup(self.streams, self.labels)

        def process_seqs(self, items):
            for seq, tokens, pos0, _ in items:
                h = self.hist[seq]
                del h[pos0:]
                h.extend(int(t) for t in tokens)
            super().process_seqs(items)

        def draft_seqs(self, items):
            drafts = super().draft_seqs(items)
            for (seq, id_last, pos0, _), d in zip(items, drafts):
                if not d.ids:
                    continue
                seen = self.hist[seq][:pos0] + [int(id_last)]
                k = next(i for i, s in enumerate(self.streams) if s[:pos0 + 1] == seen)
                label = self.labels[k]
                self.raw[label].append((pos0, list(d.ids)))
                want = self.streams[k][pos0 + 1:pos0 + 1 + len(d.ids)]
                pattern = KEEP[label]
                keep = min(len(d.ids), pattern[pos0 % len(pattern)])
                d.ids = list(want[:keep]) + [int(t) for t in d.ids[keep:]]
            return drafts
    return Steered


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("bd")
    qwen3 = Model.load(tiny_qwen3_target(d))
    return {
        "eagle3": (qwen3, Model.load(tiny_eagle3_draft(d))),
        "dflash": (qwen3, Model.load(write_tiny_dflash(d / "f.gguf", kind="dflash",
                                                       target_layers=(1, 3)))),
        "dspark": (qwen3, Model.load(write_tiny_dflash(d / "s.gguf", kind="dspark",
                                                       target_layers=(1, 2, 3)))),
        "dflash2": (qwen3, Model.load(write_tiny_dflash(d / "f2.gguf", kind="dflash2",
                                                        block_size=5))),
        "dspark_dsv4": (qwen3, Model.load(write_tiny_dspark_dsv4(d / "s4.gguf",
                                                                 target_layers=(0, 2)))),
        # a near-bigram target: its MTP heads are accepted by themselves too
        "mtp": (Model.load(write_tiny_step35(d / "s35.gguf", bigram=0.5, seed=1, n_nextn=1)),
                None),
        "mtp3": (Model.load(write_tiny_step35(d / "s35c.gguf", bigram=0.5, seed=1)), None),
    }


DRAFTER = {"eagle3": Eagle3Drafter, "dflash": DFlashDrafter, "dspark": DFlashDrafter,
           "dflash2": DFlashDrafter, "dspark_dsv4": DFlashDrafter, "mtp": MtpDrafter,
           "mtp3": MtpDrafter}
AUTOREGRESSIVE = ("eagle3", "mtp", "mtp3")     # one draft graph per draft position
PROCESS_GRAPHS = {"eagle3": 2, "dflash": 1, "dspark": 1, "dflash2": 1, "dspark_dsv4": 1,
                  "mtp": 1, "mtp3": 3}


def _ctx(model, **kw):
    """The default (F16) K/V caches: a sequence's target logits are bit-identical alone and
    in a verify ubatch with the others (each sequence has its own aligned cache region)."""
    return Context(model, **kw)


def _greedy(target):
    return [list(_ctx(target, n_ctx=N_CTX).generate(p, N_GEN)) for p in PROMPTS]


def _drafter(kind, target_ctx, draft, streams, labels=None, **kw):
    if not kind.startswith("mtp"):
        kw["kind"] = kind.split("_")[0]
    return _steered(DRAFTER[kind])(target_ctx, draft, **kw).setup(streams, labels)


def _run(kind, models, batch_draft=True):
    target, draft = models[kind]
    want = _greedy(target)
    streams = [p + w for p, w in zip(PROMPTS, want)]
    ctx = _ctx(target, n_ctx=N_CTX, n_seq_max=len(PROMPTS))
    drafter = _drafter(kind, ctx, draft, streams)
    dec = SpeculativeDecoder(ctx, drafter, n_max=N_MAX, adaptive=False, batch_draft=batch_draft)
    got = [list(g) for g in dec.generate_batch(PROMPTS, N_GEN)]
    return want, got, dec, drafter


def _expected_draft_calls(kind, steps):
    """Draft graph runs of a batched draft: per round, the longest draft (one run per draft
    position) or one block run."""
    per_round = defaultdict(list)
    for s in steps:
        per_round[s["round"]].append(len(s["draft"]))
    if kind in AUTOREGRESSIVE:
        return sum(max(v) for v in per_round.values())
    return len(per_round)


@pytest.mark.parametrize("kind", list(DRAFTER))
def test_batched_drafts_equal_one_sequence_drafts(models, kind):
    want, got, dec, drafter = _run(kind, models)
    assert got == want                               # lossless, every sequence
    s = dec.stats
    accepted = [st["n_accepted"] for st in s["steps"]]
    assert 0 in accepted and max(accepted) == N_MAX  # zero and full acceptance
    assert any(0 < a < N_MAX for a in accepted)      # and partial
    # the sequences advance at their own pace: they finish in different rounds
    last = {q: max(st["round"] for st in s["steps"] if st["seq"] == q) for q in range(3)}
    assert len(set(last.values())) > 1
    # the target verifies every sequence's drafts in one ubatch (a KV cache target)
    assert s["n_target_decodes"] == s["n_rounds"]
    # one draft graph per draft position (or block) for all drafting sequences
    assert s["draft_calls"] == _expected_draft_calls(kind, s["steps"])
    assert s["draft_process_calls"] == PROCESS_GRAPHS[kind] * (s["n_rounds"] + 1)
    # each sequence's drafts are what a one-sequence decoder drafts for its prompt alone
    target, draft = models[kind]
    for i, p in enumerate(PROMPTS):
        ctx1 = _ctx(target, n_ctx=N_CTX)
        one = _drafter(kind, ctx1, draft, [p + want[i]], [i])
        dec1 = SpeculativeDecoder(ctx1, one, n_max=N_MAX, adaptive=False)
        assert list(dec1.generate(p, N_GEN)) == want[i]
        assert drafter.raw[i] == one.raw[i], f"sequence {i}"
        assert [st["draft"] for st in s["steps"] if st["seq"] == i] == \
            [st["draft"] for st in dec1.stats["steps"]]


@pytest.mark.parametrize("kind", ["eagle3", "dflash", "mtp3"])
def test_drafting_one_sequence_after_another_is_counted(models, kind):
    """batch_draft=False: one drafter per sequence; same streams and drafts, but the draft
    graphs run once per sequence, which the batched count above would reject."""
    want, got, dec, _ = _run(kind, models, batch_draft=False)
    assert got == want
    s = dec.stats
    per_round = defaultdict(list)
    for st in s["steps"]:
        per_round[st["round"]].append(len(st["draft"]))
    if kind in AUTOREGRESSIVE:
        sequential = sum(sum(v) for v in per_round.values())
    else:
        sequential = sum(len(v) for v in per_round.values())
    assert s["draft_calls"] == sequential
    assert s["draft_calls"] > _expected_draft_calls(kind, s["steps"])
    _, _, batched, _ = _run(kind, models)
    assert [st["draft"] for st in batched.stats["steps"]] == [st["draft"] for st in s["steps"]]
    assert batched.stats["draft_calls"] < s["draft_calls"]


def test_real_mtp_drafts_batched_are_lossless(models):
    """Unsteered MTP drafts on the near-bigram target (accepted by themselves), adaptive
    lengths: the batched decoder equals plain greedy and drafts as the sequential one."""
    target, _ = models["mtp3"]
    want = _greedy(target)
    out = {}
    for bd in (True, False):
        dec = SpeculativeDecoder(_ctx(target, n_ctx=N_CTX, n_seq_max=3), "mtp", n_max=N_MAX,
                                 batch_draft=bd)
        assert [list(g) for g in dec.generate_batch(PROMPTS, N_GEN)] == want
        assert dec.batch_draft is bd
        out[bd] = dec.stats
    assert out[True]["n_accepted"] > 0
    assert [s["draft"] for s in out[True]["steps"]] == [s["draft"] for s in out[False]["steps"]]
    assert out[True]["draft_calls"] < out[False]["draft_calls"]


def test_a_drafter_without_multi_seq_keeps_one_per_sequence(models):
    """n-gram drafts have nothing to batch: batch_draft is off and each sequence drafts alone."""
    target, _ = models["eagle3"]
    dec = SpeculativeDecoder(_ctx(target, n_ctx=N_CTX, n_seq_max=3), "ngram", n_max=N_MAX)
    assert dec.batch_draft is False
    assert [list(g) for g in dec.generate_batch(PROMPTS, 12)] == \
        [w[:12] for w in _greedy(target)]


@pytest.mark.parametrize("kind", ["eagle3", "mtp"])
def test_batched_drafts_on_a_recurrent_target(tmp_path, kind):
    """A hybrid (recurrent) target verifies one sequence per ubatch; the drafts of all its
    sequences are still one draft memory, and every stream is plain greedy."""
    target = Model.load(write_tiny_qwen35(tmp_path / "q35.gguf", n_layer=4,
                                          full_attention_interval=2,
                                          n_nextn=1 if kind == "mtp" else 0))
    draft = (Model.load(write_tiny_eagle3(tmp_path / "e.gguf", target_layers=(1, 2, 4)))
             if kind == "eagle3" else None)
    prompts, n = PROMPTS[:2], 16
    want = [list(_ctx(target, n_ctx=N_CTX, n_rs_seq=N_MAX).generate(p, n)) for p in prompts]
    out = {}
    for bd in (True, False):
        dec = SpeculativeDecoder(_ctx(target, n_ctx=N_CTX, n_seq_max=2, n_rs_seq=N_MAX), kind,
                                 draft=draft, n_max=N_MAX, adaptive=False, batch_draft=bd)
        assert [list(g) for g in dec.generate_batch(prompts, n)] == want
        out[bd] = dec.stats
    assert [s["draft"] for s in out[True]["steps"]] == [s["draft"] for s in out[False]["steps"]]
    assert out[True]["n_drafted"] > 0
    # the draft memory (a KV cache) takes both sequences per ubatch though the target does not
    assert out[True]["draft_calls"] < out[False]["draft_calls"]
    assert out[True]["n_target_decodes"] == out[False]["n_target_decodes"]


def test_dflash_blocks_fit_when_the_target_memory_is_nearly_full(models):
    """Every sequence's block is full length while the last verify steps check fewer drafts:
    the shared draft memory keeps room for one block per sequence beyond the target's
    cells (with exactly the target's room, the last blocks do not fit)."""
    target, draft = models["dflash"]
    n = 76                      # the 3 streams end 3 cells short of the 256 the target has
    want = [list(_ctx(target, n_ctx=256).generate(p, n)) for p in PROMPTS]
    dec = SpeculativeDecoder(_ctx(target, n_ctx=256, n_seq_max=3), "dflash", draft=draft,
                             n_max=N_MAX, adaptive=False)
    assert [list(g) for g in dec.generate_batch(PROMPTS, n)] == want
    tight = SpeculativeDecoder(_ctx(target, n_ctx=256, n_seq_max=3), "dflash", draft=draft,
                               n_max=N_MAX, adaptive=False, n_ctx=256)
    with pytest.raises(ValueError, match="no room"):
        tight.generate_batch(PROMPTS, n)


def test_batched_mtp_drafts_on_deepseek4(tmp_path):
    """DeepSeek V4's MTP head (K-only window cache, hc streams) on a compressor-memory target
    that verifies one sequence per ubatch: the drafts of all sequences share each draft
    graph, and every stream is plain greedy (near-bigram model: drafts get accepted)."""
    from pyggml.llm.tiny import write_tiny_deepseek4
    m = Model.load(write_tiny_deepseek4(tmp_path / "ds4.gguf", seed=1, n_nextn=1, bigram=1.5))
    prompts, n = PROMPTS, 16
    want = [list(_ctx(m, n_ctx=N_CTX, n_rs_seq=N_MAX).generate(p, n)) for p in prompts]
    out = {}
    for bd in (True, False):
        dec = SpeculativeDecoder(_ctx(m, n_ctx=N_CTX, n_seq_max=3, n_rs_seq=N_MAX), "mtp",
                                 n_max=N_MAX, batch_draft=bd)
        assert [list(g) for g in dec.generate_batch(prompts, n)] == want
        out[bd] = dec.stats
    assert out[True]["n_accepted"] > 0
    assert [s["draft"] for s in out[True]["steps"]] == [s["draft"] for s in out[False]["steps"]]
    assert out[True]["draft_calls"] < out[False]["draft_calls"]


@pytest.mark.parametrize("kind,p_min", [("eagle3", 0.3), ("dspark", 0.5), ("mtp", 0.999)])
def test_batched_drafts_with_a_confidence_cut(models, kind, p_min):
    """p_min > 0: the draft logits (or DSpark's confidences) are read on the host and each
    sequence's draft stops at its own length; still the one-sequence drafts, lossless."""
    target, draft = models[kind]
    want = _greedy(target)
    streams = [p + w for p, w in zip(PROMPTS, want)]
    ctx = _ctx(target, n_ctx=N_CTX, n_seq_max=3)
    drafter = _drafter(kind, ctx, draft, streams, p_min=p_min)
    dec = SpeculativeDecoder(ctx, drafter, n_max=N_MAX, adaptive=False)
    assert [list(g) for g in dec.generate_batch(PROMPTS, N_GEN)] == want
    # the cut shortened some drafts below what the step asked for (k_max by position)
    cut = [(i, pos0) for i, q in drafter.raw.items() for pos0, d in q
           if len(d) < min(N_MAX, N_GEN - (pos0 - len(PROMPTS[i]) + 1) - 1)]
    assert cut
    for i, p in enumerate(PROMPTS):
        ctx1 = _ctx(target, n_ctx=N_CTX)
        one = _drafter(kind, ctx1, draft, [p + want[i]], [i], p_min=p_min)
        assert list(SpeculativeDecoder(ctx1, one, n_max=N_MAX, adaptive=False)
                    .generate(p, N_GEN)) == want[i]
        assert drafter.raw[i] == one.raw[i], f"sequence {i}"
