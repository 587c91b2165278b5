"""SpeculativeDecoder.generate_batch: several sequences drafted and verified together.

Greedy: every sequence's stream equals plain greedy decoding of its prompt, whether the
target verifies all sequences in one ubatch (KV cache) or one after the other (recurrent).
Temperature > 0: the committed tokens are distributed as the target's own samples; the
test compares the empirical joint distribution of the first three generated tokens with
the exact one (computed from the target's logits) by a chi-square bound that the biased
rule (rejection sampling that divides by the softmax of an argmax draft) fails."""
import math

import numpy as np
import pytest

from pyggml.llm import Context, Model, Sampler, write_tiny_llama
from pyggml.llm.speculative import Draft, Drafter, SpeculativeDecoder
from pyggml.llm.tiny import write_tiny_dflash, write_tiny_eagle3, write_tiny_mamba2

PROMPTS = [[5, 9, 14, 27, 9, 14, 33, 60, 5, 9, 14],
           [71, 88, 3, 40, 41, 42, 71, 88, 3],
           [2, 4, 8, 16, 2, 4, 8, 16, 2, 4, 8, 16, 32, 64]]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return Model.load(write_tiny_llama(tmp_path_factory.mktemp("b") / "llama.gguf", seed=3))


class Oracle(Drafter):
    """Proposes the target's greedy continuation of whichever prompt it was given, wrong at
    every third position (partial acceptance)."""
    kind = "oracle"

    def __init__(self, streams):
        self.streams, self.history = streams, []

    def process(self, tokens, pos0, taps):
        del self.history[pos0:]
        self.history.extend(int(t) for t in tokens)

    def draft(self, id_last, pos0, n_max):
        seq = tuple(self.history[:pos0] + [int(id_last)])
        full = next((f for f in self.streams if tuple(f[:len(seq)]) == seq), None)
        if full is None:
            return Draft([])
        ids = list(full[pos0 + 1:pos0 + 1 + n_max])
        return Draft([(t + 1) % 256 if (pos0 + 1 + i) % 3 == 0 else t for i, t in enumerate(ids)])

    def accept(self, n_accepted):
        pass


def _greedy(model, prompts, n, **kw):
    return [list(Context(model, n_ctx=96, **kw).generate(p, n)) for p in prompts]


@pytest.mark.parametrize("kind", ["ngram", "oracle"])
def test_batch_greedy_equals_plain_greedy(llama, kind):
    want = _greedy(llama, PROMPTS, 30)
    ctx = Context(llama, n_ctx=96, n_seq_max=3)
    drafter = Oracle([p + w for p, w in zip(PROMPTS, want)]) if kind == "oracle" else kind
    dec = SpeculativeDecoder(ctx, drafter, n_max=4)
    got = dec.generate_batch(PROMPTS, 30)
    assert [list(g) for g in got] == want
    s = dec.stats
    assert s["n_seqs"] == 3 and s["n_tokens"] == 90
    assert s["n_accepted"] > 0
    drafted = {st["seq"] for st in s["steps"]}
    assert drafted <= {0, 1, 2} and len(drafted) >= 2     # steps name their sequence
    # the sequences were verified together: fewer target decodes than sequence steps
    assert s["n_target_decodes"] < s["n_verify_steps"] + s["n_plain_steps"]
    for i, p in enumerate(PROMPTS):
        assert ctx.n_past(i) == len(p) + 29          # rejected positions trimmed per sequence
    # a second call continues each lane's state from scratch after a reset
    dec.reset()
    assert [list(g) for g in dec.generate_batch(PROMPTS[:2], 12)] == [w[:12] for w in want[:2]]


def test_batch_on_a_recurrent_target(tmp_path):
    m = Model.load(write_tiny_mamba2(tmp_path / "m.gguf", seed=4))
    want = _greedy(m, PROMPTS, 20, n_rs_seq=3)
    dec = SpeculativeDecoder(Context(m, n_ctx=96, n_seq_max=3, n_rs_seq=3), "ngram", n_max=3)
    assert [list(g) for g in dec.generate_batch(PROMPTS, 20)] == want
    # recurrent memory takes one sequence per ubatch: one target decode per sequence step
    s = dec.stats
    assert s["n_target_decodes"] == s["n_verify_steps"] + s["n_plain_steps"]
    assert s["n_seqs"] == 3


@pytest.mark.parametrize("kind", ["dflash", "eagle3"])
def test_batch_with_draft_models(tmp_path, kind):
    target = Model.load(write_tiny_llama(tmp_path / "t.gguf", arch="qwen3", qk_norm=True,
                                         n_layer=4, n_embd=64, head_dim=16))
    path = (write_tiny_dflash(tmp_path / "d.gguf", kind="dflash", target_layers=(1, 3))
            if kind == "dflash" else write_tiny_eagle3(tmp_path / "e.gguf", target_layers=(0, 1, 3)))
    prompts = [[1, 5, 17, 42, 9, 77, 130], [3, 3, 60, 61, 62]]
    want = [list(Context(target, n_ctx=128).generate(p, 20)) for p in prompts]
    dec = SpeculativeDecoder(Context(target, n_ctx=128, n_seq_max=2), kind, draft=Model.load(path),
                             n_max=3)
    assert [list(g) for g in dec.generate_batch(prompts, 20)] == want
    assert dec.stats["n_drafted"] > 0


def test_batch_bad_input(llama):
    dec = SpeculativeDecoder(Context(llama, n_ctx=64, n_seq_max=2), "ngram", n_max=2)
    with pytest.raises(ValueError, match="distinct seq_ids"):
        dec.generate_batch(PROMPTS[:2], 4, seq_ids=[1, 1])
    with pytest.raises(ValueError, match="out of range"):
        dec.generate_batch(PROMPTS, 4)                # 3 sequences, n_seq_max 2
    with pytest.raises(ValueError, match="no prompts"):
        dec.generate_batch([], 4)


# ---- temperature > 0: the target's distribution -------------------------------------------
PROMPT = [5, 9, 14, 27, 9]
TOP_K = 3           # small support: the joint of three tokens has at most 27 cells


def _sampler(seed):
    return Sampler(temperature=1.0, top_k=TOP_K, top_p=1.0, min_p=0.0, seed=seed)


@pytest.fixture(scope="module")
def exact(llama):
    """P(t1, t2, t3) after PROMPT under the sampler's filters, from the target's logits."""
    probe = _sampler(0)
    ctx = Context(llama, n_ctx=32)

    def dist(prefix):
        ctx.reset()
        ids, p = probe.candidates(ctx.decode(PROMPT + list(prefix))[-1])
        return dict(zip(ids.tolist(), p.tolist()))
    joint, cond = {}, {}
    for a, pa in dist(()).items():
        cond[(a,)] = d2 = dist((a,))
        for b, pb in d2.items():
            cond[(a, b)] = d3 = dist((a, b))
            for c, pc in d3.items():
                joint[(a, b, c)] = pa * pb * pc
    return joint, cond


class TableDrafter(Drafter):
    """After the first token t1 drafts [the runner-up t2, the favourite t3 after it] (taken
    from the exact conditionals, so position 1 is often rejected, position 2 often accepted).
    `claim_softmax` reports a draft distribution that puts half its mass on each drafted
    token, as a softmax of an argmax draft would: the biased rule under test."""
    kind = "table"

    def __init__(self, cond, claim_softmax=False, n_vocab=256):
        self.cond, self.claim, self.n_vocab = cond, claim_softmax, n_vocab

    def draft(self, id_last, pos0, n_max):
        if pos0 != len(PROMPT):
            return Draft([])
        d2 = sorted(self.cond[(id_last,)].items(), key=lambda kv: -kv[1])
        b = d2[1][0] if len(d2) > 1 else d2[0][0]
        c = max(self.cond[(id_last, b)].items(), key=lambda kv: kv[1])[0]
        ids = [b, c][:n_max]
        if not self.claim:
            return Draft(ids)
        q = np.full((len(ids), self.n_vocab), 0.5 / (self.n_vocab - 1))
        for i, t in enumerate(ids):
            q[i, t] = 0.5
        return Draft(ids, probs=q)


def _chi2_pvalue(counts: dict, joint: dict, n: int) -> float:
    """Chi-square of the counts against n * joint (cells with expectation < 5 pooled), the
    p-value by the Wilson-Hilferty normal approximation."""
    cells = sorted(joint, key=lambda k: -joint[k])
    obs, exp = [], []
    pool_o = pool_e = 0.0
    for k in cells:
        e = n * joint[k]
        if e >= 5:
            obs.append(counts.get(k, 0))
            exp.append(e)
        else:
            pool_o, pool_e = pool_o + counts.get(k, 0), pool_e + e
    outside = n - sum(counts.get(k, 0) for k in cells)
    assert outside == 0, f"{outside} samples outside the target's support"
    if pool_e > 0:
        obs.append(pool_o)
        exp.append(pool_e)
    obs, exp = np.array(obs, float), np.array(exp, float)
    stat = float(((obs - exp) ** 2 / exp).sum())
    dof = len(obs) - 1
    z = ((stat / dof) ** (1 / 3) - (1 - 2 / (9 * dof))) / math.sqrt(2 / (9 * dof))
    return 0.5 * math.erfc(z / math.sqrt(2))


def _sample_joint(llama, cond, claim, rounds, n_seqs=32):
    ctx = Context(llama, n_ctx=32, n_seq_max=n_seqs)
    dec = SpeculativeDecoder(ctx, TableDrafter(cond, claim), n_max=2, sampler=_sampler(11),
                             seed=7)
    counts, accepted = {}, 0
    for _ in range(rounds):
        dec.reset()
        for g in dec.generate_batch([PROMPT] * n_seqs, 4):
            k = tuple(int(t) for t in g[:3])
            counts[k] = counts.get(k, 0) + 1
        accepted += dec.stats["n_accepted"]
    return counts, rounds * n_seqs, accepted


def test_batch_sampling_keeps_the_target_distribution(llama, exact):
    joint, cond = exact
    counts, n, accepted = _sample_joint(llama, cond, False, rounds=50)
    assert accepted > n // 10           # the draft tokens were often kept (the rule was used)
    assert _chi2_pvalue(counts, joint, n) > 1e-3


def test_softmax_of_an_argmax_draft_fails_the_same_test(llama, exact):
    joint, cond = exact
    counts, n, _ = _sample_joint(llama, cond, True, rounds=50)
    assert _chi2_pvalue(counts, joint, n) < 1e-6


@pytest.mark.parametrize("sampler", ["greedy", "T=0.7"])
def test_batch_mtp_on_a_kv_target(tmp_path, sampler):
    """Step3.5 MTP heads (an iSWA KV target, so the sequences share each verify ubatch): the
    h_nextn rows of the shared ubatch go to each sequence's own MTP drafter. Greedy: every
    stream is plain greedy; T > 0: rejection sampling of the point-mass MTP drafts runs and
    accepts some drafts (its distribution is checked above, independent of the drafter)."""
    from pyggml.llm.tiny import write_tiny_step35
    m = Model.load(write_tiny_step35(tmp_path / "s35.gguf", bigram=0.5, seed=1))
    prompts = [[5, 9, 14, 27, 9, 14, 33], [71, 88, 3, 40, 41], [2, 4, 8, 16, 2, 4]]
    smp = None if sampler == "greedy" else Sampler(temperature=0.7, top_k=8, top_p=1.0,
                                                     min_p=0.0, seed=3)
    dec = SpeculativeDecoder(Context(m, n_ctx=128, n_seq_max=3), "mtp", n_max=3, sampler=smp)
    got = dec.generate_batch(prompts, 20)
    assert dec.stats["n_target_decodes"] < dec.stats["n_verify_steps"] + dec.stats["n_plain_steps"]
    assert dec.stats["n_accepted"] > 0
    if smp is None:
        assert [list(g) for g in got] == [list(Context(m, n_ctx=128).generate(p, 20))
                                          for p in prompts]
    else:
        assert all(len(g) == 20 and all(0 <= t < 256 for t in g) for g in got)
