"""The one-sequence loop of SpeculativeDecoder (`_run_one`, drafters without draft graphs,
greedy) against the general round (`_step`) it stands in for: the same stream, the same
drafts and the same statistics, through full, partial and zero acceptance, empty drafts,
back-off pauses, stop callbacks and a full context; and the statistics' own sums."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyggml.llm import Context, Model, write_tiny_llama
from pyggml.llm.speculative import Draft, Drafter, SpeculativeDecoder
from util import check_spec_stat_sums

PROMPT = [5, 9, 14, 27, 9, 14, 33, 60, 5, 9, 14, 71, 88, 3, 40, 41, 42, 5, 9]
FAST = settings(max_examples=10, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
# the cost gate's costs, fixed so that both loops take the same decisions (measured ones
# differ from run to run): a one-token draft pays when accepted more than 30% of the time
GATE_COST = (lambda w: 1.0 + 0.3 * (w - 1))
COUNTS = ("n_drafted", "n_accepted", "n_verify_steps", "n_plain_steps", "n_rounds",
          "n_target_decodes", "n_tokens", "n_seqs", "mean_acceptance_length",
          "acceptance_rate", "acceptance_rate_per_pos", "steps", "n_gated", "n_probes")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    m = Model.load(write_tiny_llama(tmp_path_factory.mktemp("lean") / "t.gguf", seed=3))
    ctx = Context(m, n_ctx=96)
    ref = list(ctx.generate(PROMPT, 60))
    return m, ctx, PROMPT + ref


class Scripted(Drafter):
    """Drafts from a fixed random script: at each call either nothing, the target's true
    continuation with a mismatch injected at a random place, or random tokens (as a list
    or a Draft), so every acceptance count occurs."""
    kind = "scripted"

    def __init__(self, full, seed):
        self.full, self.seed = full, seed
        self.reset()

    def reset(self):
        self.rng = np.random.default_rng(self.seed)

    def draft(self, id_last, pos0, n_max):
        r = self.rng.random()
        k = int(self.rng.integers(1, n_max + 1))
        if r < 0.25:
            return Draft(ids=[])
        true = [int(t) for t in self.full[pos0 + 1:pos0 + 1 + k]]
        if r < 0.8:
            cut = int(self.rng.integers(0, k + 1))
            ids = true[:cut] + [(t + 1) % 256 for t in true[cut:cut + 1]] + true[cut + 1:]
            return Draft(ids=ids[:k])
        return [int(t) for t in self.rng.integers(0, 256, k)]


def run(ctx, make, n, general, stop=None):
    dec = make()
    if general:          # the general round serves every lane
        dec.__dict__["_plain_ok_cached"] = (dec.sampler, dec.drafter, False)
    assert dec._plain_ok is (not general)
    ctx.reset()
    out = dec.generate(PROMPT, n, stop=stop)
    return list(out), out.stop_reason, dec.stats




@FAST
@given(st.integers(0, 10 ** 6), st.integers(1, 6), st.sampled_from([True, False, "cost"]),
       st.integers(1, 50))
def test_lean_loop_equals_the_general_round(tiny, seed, n_max, adaptive, n):
    m, ctx, full = tiny
    make = lambda: SpeculativeDecoder(ctx, Scripted(full, seed), n_max=n_max,  # noqa: E731
                                      adaptive=adaptive, cost_model=GATE_COST)
    a = run(ctx, make, n, general=False)
    b = run(ctx, make, n, general=True)
    assert a[0] == b[0] == full[len(PROMPT):len(PROMPT) + n]
    assert a[1] == b[1]
    if adaptive != "cost":        # the cost rule's lengths depend on measured times
        for key in COUNTS:
            assert a[2][key] == b[2][key], key
    check_spec_stat_sums(a[2], a[0])
    check_spec_stat_sums(b[2], b[0])


@FAST
@given(st.integers(1, 8), st.sampled_from([True, False]), st.integers(0, 30))
def test_ngram_lean_loop_equals_the_general_round(tiny, n_max, adaptive, stop_at):
    # the n-gram drafter with its own length rule (length_hint) on a self-repeating prompt,
    # with a stop callback on one token of the stream
    m, ctx, full = tiny
    prompt_rep = PROMPT + full[len(PROMPT):len(PROMPT) + 20] + [99] + PROMPT
    ctx.reset()
    ref = list(ctx.generate(prompt_rep, 40))
    stop_tok = ref[stop_at]
    stop = lambda t: t == stop_tok  # noqa: E731
    outs = []
    for general in (False, True):
        dec = SpeculativeDecoder(ctx, "ngram", n_max=n_max, adaptive=adaptive,
                                 cost_model=GATE_COST)
        if general:
            dec.__dict__["_plain_ok_cached"] = (dec.sampler, dec.drafter, False)
        ctx.reset()
        out = dec.generate(prompt_rep, 40, stop=stop)
        outs.append((list(out), out.stop_reason, {k: dec.stats[k] for k in COUNTS}))
        check_spec_stat_sums(dec.stats, out)
    assert outs[0] == outs[1]
    want = ref[:ref.index(stop_tok) + 1]
    assert outs[0][0] == want and outs[0][1] == "stop"


def test_lean_loop_stops_at_n_ctx(tiny):
    m, _, full = tiny
    ctx = Context(m, n_ctx=len(PROMPT) + 9)
    outs = []
    for general in (False, True):
        dec = SpeculativeDecoder(ctx, Scripted(full, 1), n_max=4, adaptive=False)
        if general:
            dec.__dict__["_plain_ok_cached"] = (dec.sampler, dec.drafter, False)
        ctx.reset()
        out = dec.generate(PROMPT, 30)
        outs.append((list(out), out.stop_reason, dec.stats["n_rounds"]))
    assert outs[0] == outs[1]
    assert outs[0][1] == "n_ctx" and outs[0][0] == full[len(PROMPT):len(PROMPT) + 10]


def test_the_lean_loop_is_taken_only_where_it_applies(tiny):
    m, ctx, full = tiny
    assert SpeculativeDecoder(ctx, "ngram")._plain_ok
    assert not SpeculativeDecoder(ctx, "ngram", sampler=lambda row: int(np.argmax(row)))._plain_ok
    assert not SpeculativeDecoder(ctx, "synthetic", synth_rates=[0.5, 0.2], n_max=2)._plain_ok
    dec = SpeculativeDecoder(ctx, "ngram")
    dec.sampler = lambda row: int(np.argmax(row))     # changed after construction
    assert not dec._plain_ok


class Rejected(Drafter):
    """Drafts that are never the target's tokens (the gate declines them, re-probing)."""
    kind = "rejected"

    def draft(self, id_last, pos0, n_max):
        return Draft(ids=[(int(id_last) * 7 + 3 + i) % 256 for i in range(n_max)])


def test_the_gate_clock_is_read_for_a_sample_of_asks(tiny, monkeypatch):
    # the gate's CPU clock is a system call: read for every verify and stretch of plain
    # rounds, but for one ask (and its declined plain step) in PLAIN_SAMPLE; the gate still
    # learns a plain step's and an ask's cost, and the stream stays ctx.generate's
    m, _, _ = tiny
    ctx = Context(m, n_ctx=400)
    want = list(ctx.generate(PROMPT, 300))
    ctx.reset()
    dec = SpeculativeDecoder(ctx, Rejected(), n_max=4)
    import pyggml.llm.speculative.one_lane as one_lane
    real, reads = one_lane.time.process_time, [0]

    def counted():
        reads[0] += 1
        return real()
    monkeypatch.setattr(one_lane.time, "process_time", counted)
    out = dec.generate(PROMPT, 300)
    assert list(out) == want
    st = dec.stats
    asks = st["n_verify_steps"] + st["n_gated"]
    quiet = st["n_plain_steps"] - asks      # plain rounds that asked nobody, in stretches
    assert asks > 8 and quiet > 250
    # timed: every verify and each stretch's first plain step (at most one per ask, and
    # the first); one in PLAIN_SAMPLE asks and of the plain steps of declined asks
    every = SpeculativeDecoder.PLAIN_SAMPLE
    timed = st["n_verify_steps"] + (asks + 1) + 2 * (asks // every + 1)
    assert reads[0] <= 2 * timed
    assert dec._gate.model.ask_cost() is not None and dec._gate.ready
