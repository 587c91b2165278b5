"""SpeculativeDecoder on tiny random models: the committed stream is the target's greedy
stream for any draft (oracle with injected mismatches, random, adversarial), through full,
partial and zero acceptance, KV trimming and recurrent rollback."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyggml.llm import Context, Model, Sampler, write_tiny_llama
from pyggml.llm.speculative import Draft, Drafter, SpeculativeDecoder, check_same_vocab
from pyggml.llm.tiny import write_tiny_mamba2, write_tiny_qwen35
from util import nmse

PROMPT = [5, 9, 14, 27, 9, 14, 33, 60, 5, 9, 14, 71, 88, 3, 40, 41, 42, 5, 9]
N_REF = 36
FAST = settings(max_examples=6, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


class Target:
    """A model, a reusable context, and its greedy reference stream after PROMPT."""

    def __init__(self, path, **ctx_kw):
        self.model = Model.load(path)
        self.ctx_kw = dict(n_ctx=96, **ctx_kw)
        self.ctx = Context(self.model, **self.ctx_kw)
        self.ref = list(Context(self.model, **self.ctx_kw).generate(PROMPT, N_REF))
        self.full = PROMPT + self.ref   # position p holds full[p]

    def fresh(self):
        self.ctx.reset()
        return self.ctx


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return Target(write_tiny_llama(tmp_path_factory.mktemp("spec") / "llama.gguf", seed=3))


@pytest.fixture(scope="module")
def mamba2(tmp_path_factory):
    return Target(write_tiny_mamba2(tmp_path_factory.mktemp("spec") / "mamba2.gguf", seed=4),
                  n_rs_seq=3)


@pytest.fixture(scope="module")
def qwen35(tmp_path_factory):
    return Target(write_tiny_qwen35(tmp_path_factory.mktemp("spec") / "qwen35.gguf", seed=5),
                  n_rs_seq=2, n_ubatch=8)


class OracleDrafter(Drafter):
    """Proposes the target's true greedy continuation, except at the stream positions in
    `wrong`, where it proposes another token."""
    kind = "oracle"

    def __init__(self, full, wrong=(), n_vocab=256, extra=0, check=True):
        self.full, self.wrong, self.n_vocab, self.extra = full, set(wrong), n_vocab, extra
        self.check, self.calls = check, []

    def draft(self, id_last, pos0, n_max):
        assert id_last == self.full[pos0] or not self.check   # the decoder hands the committed id
        ids = []
        for p in range(pos0 + 1, min(pos0 + 1 + n_max + self.extra, len(self.full))):
            t = self.full[p]
            ids.append((t + 1) % self.n_vocab if p in self.wrong else t)
        self.calls.append((pos0, n_max))
        return Draft(ids=ids)


class RandomDrafter(Drafter):
    kind = "random"

    def __init__(self, seed, n_vocab=256):
        self.rng, self.n_vocab = np.random.default_rng(seed), n_vocab

    def draft(self, id_last, pos0, n_max):
        return Draft(ids=self.rng.integers(0, self.n_vocab, size=self.rng.integers(0, n_max + 1)).tolist())


class AdversarialDrafter(Drafter):
    """Near misses that a sloppy verifier would accept: a wrong token followed by correct
    ones, the runner-up of the target at each position, vocabulary edge ids, the committed
    id repeated, too many tokens."""
    kind = "adversarial"

    def __init__(self, full, runner_up, seed):
        self.full, self.runner_up = full, runner_up
        self.rng = np.random.default_rng(seed)

    def draft(self, id_last, pos0, n_max):
        truth = self.full[pos0 + 1:pos0 + 1 + n_max + 3]
        mode = int(self.rng.integers(0, 5))
        if mode == 0 and truth:                           # wrong first, then the truth
            return Draft(ids=[(truth[0] + 7) % 256] + truth[1:n_max])
        if mode == 1:                                     # target's second choice
            return Draft(ids=[int(self.runner_up[p]) for p in
                              range(pos0, min(pos0 + n_max, len(self.runner_up)))])
        if mode == 2:
            return Draft(ids=[0, 255, 0, 255, 0, 255][:n_max])
        if mode == 3:
            return Draft(ids=[int(id_last)] * n_max)
        return Draft(ids=truth)                           # longer than n_max: truncated


def _check_trimmed(t, dec, out):
    """The target holds exactly prompt + out[:-1]; continuing from it matches a fresh
    decode of the same tokens."""
    ctx = dec.ctx
    assert ctx.n_past() == len(PROMPT) + max(len(out) - 1, 0)
    if out:
        got = ctx.decode([out[-1]])[-1]
        want = Context(t.model, **t.ctx_kw).decode(PROMPT + list(out))[-1]
        # one token after a trim vs one batch: flash attention rounds through F16 as ggml
        # does, so the two differ in the last bits; stale KV would be far off
        assert nmse(want, got) < 1e-6


@FAST
@given(n=st.integers(0, N_REF), n_max=st.integers(1, 5),
       wrong=st.sets(st.integers(len(PROMPT), len(PROMPT) + N_REF), max_size=12),
       adaptive=st.sampled_from([False, True, "cost"]))
def test_oracle_with_mismatches_commits_greedy_stream(llama, n, n_max, wrong, adaptive):
    dec = SpeculativeDecoder(llama.fresh(), OracleDrafter(llama.full, wrong), n_max=n_max,
                             adaptive=adaptive)
    out = dec.generate(PROMPT, n)
    assert list(out) == llama.ref[:n] and out.stop_reason == "n"
    s = dec.stats
    assert s["n_accepted"] == sum(step["n_accepted"] for step in s["steps"])
    assert s["n_drafted"] == sum(len(step["draft"]) for step in s["steps"])
    assert len(out) == max(0, s["n_accepted"] + s["n_verify_steps"] + s["n_plain_steps"]
                           + (1 if n else 0))
    for step in s["steps"]:   # an oracle step accepts exactly up to its first injected mismatch
        assert all(0 <= step["n_accepted"] <= len(step["draft"]) for step in s["steps"])
    _check_trimmed(llama, dec, out)


def test_oracle_full_and_zero_acceptance(llama):
    n_ref = len(llama.full)
    dec = SpeculativeDecoder(llama.fresh(), OracleDrafter(llama.full), n_max=4, adaptive=False)
    assert list(dec.generate(PROMPT, N_REF)) == llama.ref
    s = dec.stats
    assert s["acceptance_rate"] == 1.0 and s["n_plain_steps"] == 0
    assert s["mean_acceptance_length"] == pytest.approx(1 + s["n_accepted"] / s["n_verify_steps"])
    assert s["mean_acceptance_length"] > 4.0                   # mostly full blocks of 4 + bonus
    assert s["acceptance_rate_per_pos"][0] == 1.0
    dec = SpeculativeDecoder(llama.fresh(), OracleDrafter(llama.full, range(n_ref)), n_max=4,
                             adaptive=False)
    assert list(dec.generate(PROMPT, N_REF)) == llama.ref
    assert dec.stats["n_accepted"] == 0 and dec.stats["mean_acceptance_length"] == 1.0
    _check_trimmed(llama, dec, llama.ref)


def test_adaptive_draft_length(llama):
    """Always-rejected drafts shrink to one token, then drafting backs off; full acceptance
    keeps drafting n_max."""
    n_ref = len(llama.full)
    # (the back-off rule alone: the cost gate, tested apart, would drop most of these drafts)
    dec = SpeculativeDecoder(llama.fresh(), OracleDrafter(llama.full, range(n_ref)), n_max=4,
                             adaptive=True, cost_gate=False)
    assert list(dec.generate(PROMPT, N_REF)) == llama.ref
    s = dec.stats
    assert s["steps"][0]["draft"].__len__() == 4 and s["steps"][1]["draft"].__len__() == 1
    assert s["n_plain_steps"] > s["n_verify_steps"] and s["n_drafted"] < 20
    dec = SpeculativeDecoder(llama.fresh(), OracleDrafter(llama.full), n_max=4, adaptive=True,
                             cost_gate=False)
    assert list(dec.generate(PROMPT, N_REF)) == llama.ref
    assert all(len(st["draft"]) == 4 for st in dec.stats["steps"][:-1])


def test_partial_acceptance_counts(llama):
    p = len(PROMPT)
    # first step drafts positions p+1..p+4 with p+3 wrong: 1 accepted
    dec = SpeculativeDecoder(llama.fresh(), OracleDrafter(llama.full, {p + 2}), n_max=4,
                             adaptive=False)
    dec.generate(PROMPT, 12)
    first = dec.stats["steps"][0]
    assert first["n_accepted"] == 1 and first["draft"][0] == llama.full[p + 1]


@FAST
@given(seed=st.integers(0, 10_000), n_max=st.integers(1, 6), n_min=st.integers(0, 3))
def test_random_drafts_commit_greedy_stream(llama, seed, n_max, n_min):
    dec = SpeculativeDecoder(llama.fresh(), RandomDrafter(seed), n_max=n_max,
                             n_min=min(n_min, n_max))
    out = dec.generate(PROMPT, 24)
    assert list(out) == llama.ref[:24]
    assert all(len(s["draft"]) >= min(n_min, n_max) for s in dec.stats["steps"])
    _check_trimmed(llama, dec, out)


@pytest.fixture(scope="module")
def runner_up(llama):
    logits = Context(llama.model, **llama.ctx_kw).decode(llama.full, logits_all=True)
    return np.argsort(-logits, axis=1)[:, 1]


@FAST
@given(seed=st.integers(0, 10_000), n_max=st.integers(1, 5))
def test_adversarial_drafts_commit_greedy_stream(llama, runner_up, seed, n_max):
    dec = SpeculativeDecoder(llama.fresh(), AdversarialDrafter(llama.full, runner_up, seed),
                             n_max=n_max)
    out = dec.generate(PROMPT, 30)
    assert list(out) == llama.ref[:30]
    assert all(len(s["draft"]) <= n_max for s in dec.stats["steps"])
    _check_trimmed(llama, dec, out)


def test_eog_in_draft_stops_the_step(llama):
    """With a committed token declared EOG, a step never accepts drafts past it."""
    i = 6
    dec = SpeculativeDecoder(llama.fresh(), OracleDrafter(llama.full), n_max=4)
    dec.eog = frozenset({llama.ref[i]})
    assert list(dec.generate(PROMPT, N_REF)) == llama.ref
    eog_pos = len(PROMPT) + i
    for step in dec.stats["steps"]:
        d = step["draft"]
        if llama.ref[i] in d[:-1]:
            assert step["n_accepted"] <= d.index(llama.ref[i])


def test_draft_length_never_exceeds_remaining_or_context(llama):
    t = llama
    ctx = Context(t.model, n_ctx=len(PROMPT) + 9)
    want = Context(t.model, n_ctx=len(PROMPT) + 9).generate(PROMPT, 40)
    dr = OracleDrafter(t.full, extra=3)
    dec = SpeculativeDecoder(ctx, dr, n_max=4)
    out = dec.generate(PROMPT, 40)
    assert list(out) == list(want) and out.stop_reason == want.stop_reason == "n_ctx"
    assert out.truncated and len(out) == 10
    for pos0, k in dr.calls:
        assert k <= ctx.n_ctx - pos0 - 1


@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_draft_length_bounded_by_n(llama, n):
    dr = OracleDrafter(llama.full, extra=2)
    dec = SpeculativeDecoder(llama.fresh(), dr, n_max=4)
    assert list(dec.generate(PROMPT, n)) == llama.ref[:n]
    assert dec.ctx.n_past() == len(PROMPT) + n - 1


@pytest.mark.parametrize("fixture", ["mamba2", "qwen35"])
def test_recurrent_rollback(request, fixture):
    t = request.getfixturevalue(fixture)
    n_rs = t.ctx_kw["n_rs_seq"]
    rng = np.random.default_rng(1)
    for trial in range(2):
        wrong = set(rng.choice(np.arange(len(PROMPT), len(t.full)), 8, replace=False).tolist())
        # (no cost gate: its timing-dependent drops would leave fewer rollbacks to check)
        dec = SpeculativeDecoder(t.fresh(), OracleDrafter(t.full, wrong), n_max=6,
                                 cost_gate=False)
        assert dec.n_max == n_rs and dec.n_max_requested == 6     # clamped to the rollback depth
        out = dec.generate(PROMPT, 28)
        assert list(out) == t.ref[:28]
        assert any(0 < s["n_accepted"] < len(s["draft"]) for s in dec.stats["steps"]) \
            or any(s["n_accepted"] == 0 for s in dec.stats["steps"])
        _check_trimmed(t, dec, out)


def test_recurrent_without_rollback_is_refused(tmp_path):
    m = Model.load(write_tiny_mamba2(tmp_path / "m.gguf"))
    with pytest.raises(ValueError, match="n_rs_seq"):
        SpeculativeDecoder(Context(m, n_ctx=64), "ngram", n_max=4)


def test_deterministic_sampler_with_history(llama):
    """A stateful deterministic sampler (greedy with repeat penalty) sees the same stream."""
    def sampler():
        return Sampler(temperature=0.0, repeat_penalty=1.5, penalty_last_n=16)
    want = Context(llama.model, **llama.ctx_kw).generate(PROMPT, 30, sampler=sampler())
    dec = SpeculativeDecoder(llama.fresh(), "ngram", n_max=4, sampler=sampler())
    assert list(dec.generate(PROMPT, 30)) == list(want)
    dec = SpeculativeDecoder(llama.fresh(), OracleDrafter(PROMPT + list(want)), n_max=3,
                             sampler=sampler())
    assert list(dec.generate(PROMPT, 30)) == list(want)
    assert dec.stats["acceptance_rate"] == 1.0


def test_stochastic_sampler_runs_rejection(llama):
    # (no cost gate: on this tiny target a verify costs ~3 plain steps and the gate, tested
    # apart, would drop almost every draft)
    dec = SpeculativeDecoder(llama.fresh(), OracleDrafter(llama.full, check=False), n_max=4,
                             sampler=Sampler(temperature=0.1, top_k=0, top_p=1.0, min_p=0.0,
                                             seed=1), seed=2, cost_gate=False)
    out = dec.generate(PROMPT, 30)
    assert len(out) == 30 and all(0 <= t < 256 for t in out)
    assert dec.stats["n_accepted"] > 0        # greedy drafts are likely under T = 0.1
    _check_trimmed(llama, dec, out)


class TapRecorder(Drafter):
    kind = "taps"
    target_outputs = ("l_out-0",)

    def __init__(self, full):
        self.full, self.rows = full, {}

    def process(self, tokens, pos0, taps):
        rows = taps["l_out-0"]
        assert rows.shape == (len(tokens), 64)
        for i in range(len(tokens)):
            self.rows[pos0 + i] = rows[i]

    def draft(self, id_last, pos0, n_max):
        return Draft(ids=self.full[pos0 + 1:pos0 + 1 + n_max])


def test_taps_for_every_token_over_ubatches(llama):
    ctx = Context(llama.model, n_ctx=96, n_ubatch=8)       # the prompt takes 3 ubatches
    rec = TapRecorder(llama.full)
    dec = SpeculativeDecoder(ctx, rec, n_max=3)
    out = dec.generate(PROMPT, 20)
    assert list(out) == llama.ref[:20]
    n_tok = len(PROMPT) + len(out) - 1
    assert sorted(rec.rows) == list(range(n_tok + 1)) or sorted(rec.rows) == list(range(n_tok))
    ref_ctx = Context(llama.model, n_ctx=96, outputs=("l_out-0",))
    ref_ctx.decode(llama.full[:n_tok])
    want = ref_ctx.output("l_out-0")
    got = np.stack([rec.rows[p] for p in range(n_tok)])
    assert got.shape == want.shape and nmse(want, got) < 1e-6   # F16 flash attention: last bits


def test_ngram_decoder_is_lossless(llama):
    dec = SpeculativeDecoder(llama.fresh(), "ngram", n_max=4, ngram_max=3, ngram_min=1)
    out = dec.generate(PROMPT, N_REF)
    assert list(out) == llama.ref and dec.stats["valid"]
    assert dec.stats["n_verify_steps"] > 0     # PROMPT repeats itself: lookups find keys


def test_synthetic_mean_length(llama):
    rates = [0.9, 0.6, 0.4, 0.2]
    ctx = Context(llama.model, n_ctx=512)
    dec = SpeculativeDecoder(ctx, "synthetic", n_max=4, synth_rates=rates, seed=11)
    dec.generate(PROMPT, 400)
    s = dec.stats
    assert s["valid"] is False
    lengths = np.array([1 + step["n_accepted"] for step in s["steps"]])
    se = lengths.std() / np.sqrt(len(lengths))
    assert abs(s["mean_acceptance_length"] - (1 + sum(rates))) < 4 * se + 0.02
    dec = SpeculativeDecoder(ctx, "synthetic", n_max=3, mean_length=2.0)
    assert 1 + dec.drafter.rates.sum() == pytest.approx(2.0)


def test_bad_input(llama, tmp_path):
    ctx = llama.fresh()
    with pytest.raises(ValueError, match="unknown kind 'nope'"):
        SpeculativeDecoder(ctx, "nope")
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="n_max"):
            SpeculativeDecoder(ctx, "ngram", n_max=bad)
    with pytest.raises(ValueError, match="n_min"):
        SpeculativeDecoder(ctx, "ngram", n_max=2, n_min=3)
    with pytest.raises(ValueError, match="no draft model"):
        SpeculativeDecoder(ctx, "ngram", draft=llama.model)
    with pytest.raises(ValueError, match="exactly one"):
        SpeculativeDecoder(ctx, "synthetic", synth_rates=[0.5] * 4, mean_length=2.0)
    with pytest.raises(ValueError, match="one per draft position"):
        SpeculativeDecoder(ctx, "synthetic", n_max=4, synth_rates=[0.5, 0.4])
    with pytest.raises(TypeError, match="unexpected keyword"):
        SpeculativeDecoder(ctx, "ngram", ngram_size=3)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        SpeculativeDecoder(ctx, OracleDrafter([999] * 200, check=False), n_max=2).generate(PROMPT, 4)
    with pytest.raises(ValueError, match="n must be"):
        SpeculativeDecoder(ctx, "ngram").generate(PROMPT, -1)
    other = Model.load(write_tiny_llama(tmp_path / "v300.gguf", n_vocab=300))
    with pytest.raises(ValueError, match="300 tokens but the target's has 256"):
        check_same_vocab(llama.model, other, "dflash")
    same_size = Model.load(write_tiny_llama(tmp_path / "v256.gguf", seed=9))
    check_same_vocab(llama.model, same_size, "dflash")          # same vocabulary: accepted
    same_size.vocab = list(same_size.vocab)
    same_size.vocab[40] = "changed"
    with pytest.raises(ValueError, match="token 40"):
        check_same_vocab(llama.model, same_size, "dflash")
    # the decoder checks before the drafter is built (even for a kind that takes no model)
    with pytest.raises(ValueError, match="300 tokens but the target's has 256"):
        SpeculativeDecoder(ctx, "ngram", draft=other)


@pytest.mark.parametrize("i", [0, 5, 13])
def test_stop_callback_ends_after_the_stop_id(llama, i):
    tok = llama.ref[i]
    j = llama.ref.index(tok)                    # its first occurrence
    dec = SpeculativeDecoder(llama.fresh(), OracleDrafter(llama.full, {len(PROMPT) + 9}), n_max=4)
    out = dec.generate(PROMPT, N_REF, stop=lambda t: t == tok)
    assert list(out) == llama.ref[:j + 1] and out.stop_reason == "stop"
    _check_trimmed(llama, dec, out)
