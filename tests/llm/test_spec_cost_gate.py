"""The cost gate of SpeculativeDecoder (cost_gate.py): with injected costs, a draft is
verified only where its expected tokens per second beat a plain step's; an expensive verify
drafts rarely (probes only), a cheap one drafts as without the gate, dropped draft classes are
re-probed and recover, and the stream is greedy's whatever the gate does."""
import copy
import math

import pytest

from pyggml.llm import Context, Model, write_tiny_llama
from pyggml.llm.speculative import (Draft, Drafter, DraftGate, FixedCost, MeasuredCost,
                                    SpeculativeDecoder)
from util import check_spec_stat_sums

PROMPT = [5, 9, 14, 27, 9, 14, 33, 60, 5, 9, 14, 71, 88, 3, 40, 41, 42, 5, 9]
N = 90
EXPENSIVE = (lambda w: float(w))               # compute-bound: c(w) = w c(1)
CHEAP = (lambda w: 1.0)                        # verifying any width costs a plain step
MIDDLE = (lambda w: 1.0 + 0.5 * (w - 1))       # a draft pays when accepted more than half


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    m = Model.load(write_tiny_llama(tmp_path_factory.mktemp("gate") / "t.gguf", seed=3))
    ctx = Context(m, n_ctx=160)
    ref = list(ctx.generate(PROMPT, N))
    return m, ctx, PROMPT + ref


class Rejected(Drafter):
    """Drafts n_max tokens the target never picks (the target's token + 1)."""
    kind = "rejected"

    def __init__(self, full):
        self.full = full

    def draft(self, id_last, pos0, n_max):
        return Draft(ids=[(int(t) + 1) % 256 for t in self.full[pos0 + 1:pos0 + 1 + n_max]])


class WrongThenRight(Drafter):
    """Wrong drafts before stream position `switch`, the target's own continuation after."""
    kind = "wrong-then-right"

    def __init__(self, full, switch):
        self.full, self.switch = full, switch

    def draft(self, id_last, pos0, n_max):
        true = [int(t) for t in self.full[pos0 + 1:pos0 + 1 + n_max]]
        return Draft(ids=true if pos0 >= self.switch else [(t + 1) % 256 for t in true])


def generate(ctx, drafter, n=N, general=False, **kw):
    dec = SpeculativeDecoder(ctx, drafter, **kw)
    if general:          # the general round instead of the one-sequence loop
        dec.__dict__["_plain_ok_cached"] = (dec.sampler, dec.drafter, False)
    ctx.reset()
    out = list(dec.generate(PROMPT, n))
    return out, dec.stats




# ---- the rule itself, against hand arithmetic --------------------------------------------------
@pytest.mark.parametrize("rate", [0.9, 0.5, 0.3])
def test_choose_keeps_the_longest_prefix_faster_than_a_plain_step(rate):
    cost = lambda w: 1.0 + 0.25 * (w - 1)  # noqa: E731
    gate = DraftGate(4, cost)
    st = gate._state(7)
    st.accepted1 = st.accepted2 = rate * 10
    st.trials1 = st.trials2 = 10.0
    # the first token accepted at `rate`, the later ones at q2 with Q2_OPTIMISM pseudo-accepts
    q2 = (10 * rate + DraftGate.Q2_OPTIMISM) / (10 + DraftGate.Q2_OPTIMISM)
    values = [(1 + sum(rate * q2 ** i for i in range(j))) / cost(j + 1) for j in range(5)]
    best = max(j for j in range(1, 5) if values[j] > values[0])
    # hand-checked at Q2_OPTIMISM = 2: for 0.5, q2 = 7/12 and j = 4 gives 2.06 / 2.0 > 1; for
    # 0.3, q2 = 5/12 and j = 2 gives 1.425 / 1.5 < 1
    assert best == {0.9: 4, 0.5: 4, 0.3: 1}[rate]
    assert gate.choose(4, 7, 0) == best
    assert gate.choose(2, 7, 0) == min(best, 2)
    for j in range(5):
        assert gate.expected_rate(7, j) == pytest.approx(values[j])
    assert gate.n_gated == gate.n_probes == 0
    # a rate below the break-even of one token (0.25) is dropped, after one probe
    st.accepted1 = 2.0
    assert gate.choose(4, 7, 0) == 1 and gate.n_probes == 1
    assert gate.choose(4, 7, 1) == 0 and gate.n_gated == 1


def test_a_dropped_class_probes_at_once_then_after_its_interval():
    gate = DraftGate(4, EXPENSIVE)
    assert gate.choose(3, 0, 0) == 1          # first look at the class: a probe (best j=1)
    assert gate.n_probes == 1
    gate.observe_accept(0, 1, 0)              # rejected: the interval doubles
    assert gate._state(0).interval == 2 * DraftGate.PROBE_FIRST
    for r in range(1, 2 * DraftGate.PROBE_FIRST):
        assert gate.choose(3, 0, r) == 0
    assert gate.n_gated == 2 * DraftGate.PROBE_FIRST - 1
    assert gate.choose(3, 0, 2 * DraftGate.PROBE_FIRST) == 1
    gate.observe_accept(0, 1, 1)              # accepted in full: back to the first interval
    assert gate._state(0).interval == DraftGate.PROBE_FIRST
    # another class has its own schedule: it probes at once
    assert gate.choose(3, 4, 2 * DraftGate.PROBE_FIRST + 1) == 1


def test_a_probe_of_a_class_rarely_accepted_verifies_n_min_tokens():
    # a jump at the first draft then flat: the prefix that loses least is the whole draft
    cost = lambda w: 1.0 if w == 1 else 3.0 + 0.1 * (w - 2)  # noqa: E731
    for q1, want in ((0.2, 1), (0.45, 1), (0.6, 4)):
        for n_min in (1, 2):
            gate = DraftGate(4, cost, n_min=n_min)
            st = gate._state(0)
            st.accepted1, st.trials1 = 10 * q1, 10.0
            st.accepted2, st.trials2 = 8.0, 10.0
            assert gate._prefixes(st, 4, gate._costs()) == (0, 4)    # it loses: a probe
            assert gate.choose(4, 0, 0) == (max(want, n_min) if q1 < DraftGate.PROBE_WIDE_Q1
                                            else 4)
            assert gate.n_probes == 1


def test_failing_probes_back_off_across_classes():
    gate = DraftGate(4, EXPENSIVE)
    first = DraftGate.PROBE_FIRST
    assert gate.choose(3, 0, 0) == 1          # class 0 at first sight: a probe
    gate.observe_accept(0, 1, 0)              # rejected: no class probes for PROBE_FIRST
    assert gate.choose(3, 1, first - 1) == 0  # class 1, never seen, waits
    assert gate.choose(3, 1, first) == 1
    gate.observe_accept(1, 1, 0)              # rejected again: the gap doubles
    assert gate.probe_gap == 2 * first
    assert gate.choose(3, 2, 3 * first - 1) == 0
    assert gate.choose(3, 2, 3 * first) == 1 and gate.n_probes == 3
    gate.observe_accept(2, 1, 1)              # accepted: the gap is cleared
    assert gate.probe_gap == 0
    assert gate.choose(3, 3, 3 * first + 1) == 1
    gate.observe_accept(3, 1, 0)
    assert gate.probe_gap == first            # failing again: from PROBE_FIRST


def test_a_lone_class_declined_hints_the_rounds_until_its_probe():
    gate = DraftGate(4, EXPENSIVE)
    assert gate.choose(3, 0, 0) == 1
    gate.observe_accept(0, 1, 0)              # the class probes next at round 2 * PROBE_FIRST
    due = 2 * DraftGate.PROBE_FIRST
    assert gate.choose(3, 0, 5) == 0
    assert gate.take_quiet_hint() == due - 5 - 1      # the rounds before the due one
    assert gate.take_quiet_hint() == 0                # read once
    assert gate.choose(3, 0, 6) == 0 and gate.choose(3, 0, 7) == 0
    assert gate.take_quiet_hint() == due - 7 - 1      # the last decision's
    assert gate.choose(3, 0, due) == 1 and gate.take_quiet_hint() == 0


def test_every_class_declined_hints_the_rounds_until_the_earliest_probe():
    gate = DraftGate(4, MIDDLE)                # a draft pays when accepted over half the time
    first = DraftGate.PROBE_FIRST
    for cls, round_no in ((0, 0), (1, first)):
        assert gate.choose(3, cls, round_no) >= 1
        gate.observe_accept(cls, 1, 0)         # both probes rejected
    # both probe next at round 3 * first: the gap after round `first` and class 1's interval
    due = 3 * first
    assert gate.choose(3, 1, 20) == 0 and gate.take_quiet_hint() == due - 20 - 1
    assert gate.quiet_rounds(20) == due - 20 - 1          # an empty ask's view: the same
    assert gate.declines(0, 20) and gate.declines(1, 20) and not gate.declines(2, 20)
    assert not gate.declines(0, due)                      # its probe is due
    # past a due probe (no draft of its class came), the caller's `overdue`
    assert gate.quiet_rounds(due + 3, overdue=7) == 7
    # a class accepted often enough to verify: another draft could be verified, no hint
    for _ in range(6):
        gate.observe_accept(2, 3, 3)
    assert gate.choose(3, 2, 21) > 0
    assert gate.choose(3, 1, 22) == 0 and gate.take_quiet_hint() == 0
    assert gate.quiet_rounds(22) == 0 and not gate.declines(2, 22)


def test_a_verify_rounds_host_work_counts_in_its_cost():
    # c(w) = 1 + 0.15 (w - 1): a first token accepted 30% of the time pays on the decode
    # alone (1.3 / 1.15 tokens per plain step), not once the round's host work, 0.3 of a
    # plain step, is added (1.3 / 1.45); a plain step's cost has no such term
    decode = lambda w: 1.0 + 0.15 * (w - 1)  # noqa: E731
    for host, want in ((0.0, 1), (0.3, 0)):
        gate = DraftGate(4, FixedCost(decode, round=host))
        assert gate._costs() == pytest.approx([1.0] + [decode(w) + host for w in range(2, 6)])
        st = gate._state(0)
        st.accepted1, st.trials1, st.accepted2, st.trials2 = 3.0, 10.0, 0.0, 10.0
        st.last_probe = 0                     # not due for a probe
        assert gate.choose(1, 0, 1) == want
    # measured: the lowest round seen, aged as the other tables; its version moves the gate's
    m = MeasuredCost(drift=0.0)
    gate = DraftGate(4, m)
    m.observe(1, 1.0)
    m.observe(2, 1.2)
    assert m.round_cost() is None and gate._costs()[1] == pytest.approx(1.2)
    gate.observe_round_cost(0.5)
    gate.observe_round_cost(0.4)
    gate.observe_round_cost(0.9)
    assert m.round_cost() == pytest.approx(0.4)
    assert gate._costs()[:2] == pytest.approx([1.0, 1.6])


def test_the_one_sequence_loop_measures_a_verify_rounds_host_work(tiny):
    # measured costs (the default): one verify in PLAIN_SAMPLE times the host work after
    # its decode; the general round leaves it unknown (0 in the costs)
    _, ctx, full = tiny
    for general in (False, True):
        dec = SpeculativeDecoder(ctx, WrongThenRight(full, len(PROMPT) + 20), n_max=4)
        if general:
            dec.__dict__["_plain_ok_cached"] = (dec.sampler, dec.drafter, False)
        ctx.reset()
        assert list(dec.generate(PROMPT, N)) == full[len(PROMPT):]
        assert dec.stats["n_verify_steps"] >= 2
        host = dec.cost_model.round_cost()
        assert (host is None) if general else (0.0 < host < 0.1)


def test_only_the_cost_rule_keeps_the_draft_lengths_estimates(tiny):
    # the per-position rates and per-width times of draft_length.py serve the "cost" rule
    # alone: the default mode skips them (numpy updates of a few us in every verify round)
    _, ctx, full = tiny
    for adaptive, general in ((True, False), (True, True), ("cost", False), ("cost", True)):
        dec = SpeculativeDecoder(ctx, WrongThenRight(full, len(PROMPT) + 20), n_max=4,
                                 adaptive=adaptive, cost_model=MIDDLE)
        if general:
            dec.__dict__["_plain_ok_cached"] = (dec.sampler, dec.drafter, False)
        ctx.reset()
        assert list(dec.generate(PROMPT, N)) == full[len(PROMPT):]
        length = dec._length
        rule = adaptive == "cost"
        assert bool(length.cost) == rule, (adaptive, general)
        assert bool((length.seen > length.PRIOR).any()) == rule, (adaptive, general)


def test_unknown_costs_are_learnt_by_a_plain_step_then_a_one_token_probe():
    gate = DraftGate(4)                       # measured: nothing yet
    assert gate.choose(4, 0, 0) == 0          # a plain step first: it times c(1)
    assert gate.n_probes == gate.n_gated == 0
    gate.observe_cost(1, 1.0)
    assert gate.choose(4, 0, 1) == 1          # no verify timed: a one-token probe
    assert gate.n_probes == 1 and gate._state(0).probing
    gate.observe_accept(0, 1, 0)              # rejected: the probe schedule doubles
    assert gate._state(0).interval == 2 * DraftGate.PROBE_FIRST
    gate.observe_cost(2, 1.2)                 # c(2) = 1.2: wider ones by that slope
    drift = 1.0 + gate.model._target.drift    # c(1) aged by one observation
    assert gate.model.cost(5) == pytest.approx(1.2 + 3 * (1.2 - drift))
    # a verify measured before any plain step: still a plain step first
    other = DraftGate(4)
    other.observe_cost(5, 4.0)
    assert other.choose(4, 0, 0) == 0
    other.observe_cost(1, 1.0)
    assert other.choose(2, 0, 1) == 1         # c(3) interpolated to 2.5: a probe of 1


def test_measured_cost_keeps_the_least_disturbed_step():
    m = MeasuredCost(drift=0.0)
    assert m.cost(1) is None and m.cost(3) is None
    m.observe(1, 1.0)
    assert m.cost(1) == 1.0 and m.cost(3) is None
    m.observe(3, 2.0)
    assert m.cost(2) == pytest.approx(1.5)               # between the plain step and c(3)
    assert m.cost(5) == pytest.approx(3.0)               # slope from the plain step
    m.observe(5, 2.5)
    assert m.cost(4) == pytest.approx(2.25)
    assert m.cost(7) == pytest.approx(3.0)               # the last slope, 0.25 per token
    # preempted steps (only ever slower) leave the estimate at the lowest seen; a lower
    # one replaces it at once
    m.observe(1, 100.0)
    m.observe(1, 50.0)
    assert m.cost(1) == pytest.approx(1.0)
    m.observe(1, 0.9)
    assert m.cost(1) == pytest.approx(0.9)
    # a wider width never costs less than a narrower one measured at another moment
    m.observe(2, 0.5)
    assert m.cost(2) == pytest.approx(0.9)
    # the draft side has its own table (keyed by the number drafted, 0: a plain round)
    assert m.draft_cost(0) is None
    m.observe_draft(0, 0.1)
    m.observe_draft(2, 0.5)
    assert m.draft_cost(1) == pytest.approx(0.3) and m.draft_cost(4) == pytest.approx(0.9)
    # the lowest time ages by the drift per observation of any width (a cost that grows
    # with the context is followed), re-aged every AGE_EVERY observations
    a = MeasuredCost(drift=0.01)
    a.observe(1, 1.0)
    for _ in range(a._target.AGE_EVERY - 1):
        a.observe(1, 5.0)
    assert a.cost(1) == pytest.approx(1.01 ** (a._target.AGE_EVERY - 1))
    a.observe(1, 1.05)                        # above 1.0 but below the aged lowest
    assert a.cost(1) == pytest.approx(1.05)


def test_bad_cost_options(tiny):
    _, ctx, _ = tiny
    with pytest.raises(ValueError, match="cost_model"):
        SpeculativeDecoder(ctx, "ngram", cost_model=3)
    with pytest.raises(ValueError, match="cost_gate"):
        SpeculativeDecoder(ctx, "ngram", cost_gate="yes")
    with pytest.raises(ValueError, match="FixedCost"):
        FixedCost(2.0)
    for bad in (-1.0, None, True):
        with pytest.raises(ValueError, match="round must be seconds"):
            FixedCost(lambda w: 1.0, round=bad)
    # fixed drafting has no gate
    assert SpeculativeDecoder(ctx, "ngram", adaptive=False).cost_model is None


# ---- the decoder with injected costs -----------------------------------------------------------
def test_first_and_later_tokens_are_estimated_apart():
    # a copy rejected at its first token half the time but accepted along once started
    gate = DraftGate(8, lambda w: 1.0 + 0.3 * (w - 1))
    for _ in range(40):
        gate.observe_accept(3, 8, 8)
        gate.observe_accept(3, 8, 0)
    q1, q2 = gate._state(3).rates
    assert q1 == pytest.approx(0.5, abs=0.06) and q2 == pytest.approx(1.0, abs=0.02)
    st = gate._state(3)
    q2 = (st.accepted2 + DraftGate.Q2_OPTIMISM) / (st.trials2 + DraftGate.Q2_OPTIMISM)
    values = [(1 + sum(q1 * q2 ** i for i in range(j))) / (1 + 0.3 * j) for j in range(9)]
    assert values[8] > values[0] and gate.choose(8, 3, 0) == 8
    for j in range(9):
        assert gate.expected_rate(3, j) == pytest.approx(values[j])
    # a first token that is rejected leaves the later-token rate alone
    before = gate._state(3).rates[1]
    gate.observe_accept(3, 8, 0)
    assert gate._state(3).rates[1] == before


@pytest.mark.parametrize("general", [False, True])
def test_expensive_verify_drafts_rarely_and_stays_greedy(tiny, general):
    _, ctx, full = tiny
    ref = full[len(PROMPT):]
    out0, s0 = generate(ctx, Rejected(full), n_max=4, cost_gate=False, general=general)
    out, s = generate(ctx, Rejected(full), n_max=4, cost_model=EXPENSIVE, general=general)
    assert out == out0 == ref
    check_spec_stat_sums(s, out)
    # every verify is a probe (no draft pays at c(w) = w), one token each, spaced by the
    # doubling interval: rounds 0, 32, 96 .. within the N rounds
    assert s["n_verify_steps"] == s["n_probes"] >= 1
    assert all(len(x["draft"]) == 1 for x in s["steps"])
    probes = 1 + sum(1 for k in range(1, 8)
                     if sum(DraftGate.PROBE_FIRST * 2 ** i for i in range(1, k + 1)) < s["n_rounds"])
    assert s["n_probes"] == probes
    assert s["n_gated"] > 0 and s["n_drafted"] < s0["n_drafted"] / 3


def test_expensive_verify_ngram_on_its_own_stream(tiny):
    _, ctx, full = tiny
    out0, s0 = generate(ctx, "ngram", n_max=4, cost_gate=False)
    out, s = generate(ctx, "ngram", n_max=4, cost_model=EXPENSIVE)
    assert out == out0 == full[len(PROMPT):]
    check_spec_stat_sums(s, out)
    assert s0["n_drafted"] > 0
    # at c(w) = w only a draft of class probed is verified; each class probes on its schedule
    assert s["n_verify_steps"] == s["n_probes"] <= s0["n_verify_steps"]
    assert s["n_drafted"] <= s0["n_drafted"]


@pytest.mark.parametrize("kind", ["ngram", "rejected", "oracle-ish"])
def test_cheap_verify_drafts_as_without_the_gate(tiny, kind):
    _, ctx, full = tiny
    make = {"ngram": lambda: "ngram", "rejected": lambda: Rejected(full),
            "oracle-ish": lambda: WrongThenRight(full, 40)}[kind]
    out0, s0 = generate(ctx, make(), n_max=4, cost_gate=False)
    out, s = generate(ctx, make(), n_max=4, cost_model=CHEAP)
    assert out == out0 == full[len(PROMPT):]
    for key in ("n_drafted", "n_accepted", "n_verify_steps", "n_plain_steps", "steps"):
        assert s[key] == s0[key], key
    assert s["n_gated"] == 0 and s["n_probes"] == 0


@pytest.mark.parametrize("general", [False, True])
def test_reprobing_recovers_when_drafts_become_good(tiny, general):
    _, ctx, full = tiny
    switch = len(PROMPT) + 30
    out, s = generate(ctx, WrongThenRight(full, switch), n_max=4, cost_model=MIDDLE,
                      adaptive=True, general=general)
    assert out == full[len(PROMPT):]
    check_spec_stat_sums(s, out)
    assert s["n_gated"] > 0 and s["n_probes"] >= 2
    # before the switch nothing is accepted; after it a probe is accepted and the gate opens:
    # the drafts after it are long and accepted
    acc = [x["n_accepted"] for x in s["steps"]]
    first_good = next(i for i, a in enumerate(acc) if a > 0)
    after = s["steps"][first_good:]
    assert sum(x["n_accepted"] for x in after) >= 0.5 * (N - 30)
    assert max(len(x["draft"]) for x in after) == 4


def test_lean_loop_and_general_round_agree_under_the_gate(tiny):
    _, ctx, full = tiny
    for model in (EXPENSIVE, MIDDLE, CHEAP):
        for make in (lambda: Rejected(full), lambda: WrongThenRight(full, 45), lambda: "ngram"):
            a = generate(ctx, make(), n_max=4, cost_model=model)
            b = generate(ctx, make(), n_max=4, cost_model=model, general=True)
            assert a[0] == b[0] == full[len(PROMPT):]
            for key in ("steps", "n_plain_steps", "n_rounds", "n_gated", "n_probes"):
                assert a[1][key] == b[1][key], key


def test_measured_costs_stay_lossless(tiny):
    # the default (measured) gate: timing-dependent decisions, the same stream
    _, ctx, full = tiny
    for make in (lambda: Rejected(full), lambda: "ngram", lambda: WrongThenRight(full, 40)):
        out, s = generate(ctx, make(), n_max=4)
        assert out == full[len(PROMPT):]
        check_spec_stat_sums(s, out)
        assert isinstance(SpeculativeDecoder(ctx, make()).cost_model, MeasuredCost)
    assert not math.isnan(s["mean_acceptance_length"])


def test_the_drafters_class_prior_starts_the_estimate(tiny):
    from pyggml.llm.speculative.ngram import CLASS_LONG, CLASS_SHORT, CLASS_PRIOR
    _, ctx, _ = tiny
    dec = SpeculativeDecoder(ctx, "ngram", n_max=8, cost_model=MIDDLE)
    gate = dec._gate
    assert gate._state(CLASS_LONG).rates == pytest.approx(CLASS_PRIOR[CLASS_LONG])
    assert gate._state(CLASS_SHORT).rates == pytest.approx(DraftGate.PRIOR_RATES)
    # at c(w) = 1 + 0.5 (w - 1) the long class's prior verifies all 8; the default's (0.5
    # first) verifies none (probes one)
    assert gate.choose(8, CLASS_LONG, 0) == 8
    assert gate.choose(8, CLASS_SHORT, 0) == 1 and gate.n_probes == 1


# ---- a draft model's own cost ------------------------------------------------------------------
def test_a_draft_models_cost_counts_in_the_rule():
    target = lambda w: 1.0 + 0.1 * (w - 1)    # noqa: E731  a cheap verify
    slow_draft = lambda j: 0.1 + 0.8 * j      # noqa: E731  j draft graphs; 0.1: processing

    def gate_with(draft, count):
        g = DraftGate(4, FixedCost(target, draft=draft), count_draft=count)
        st = g._state(0)
        st.accepted1 = st.accepted2 = 6.0
        st.trials1 = st.trials2 = 10.0
        return g

    q2 = (6.0 + DraftGate.Q2_OPTIMISM) / (10.0 + DraftGate.Q2_OPTIMISM)
    e = [1 + sum(0.6 * q2 ** i for i in range(j)) for j in range(5)]
    # free drafting: all 4 pay (e_4 / c(5) = 2.4 / 1.4 > 1)
    assert e[4] / target(5) > 1 / target(1)
    assert gate_with(None, True).choose(4, 0, 0) == 4
    # at 0.8 per draft token no prefix pays (hand-checked: e_1 / 2.0 = 0.8 < 1 / 1.1) and
    # the gate probes the least losing prefix, j = 1
    rounds = [target(j + 1) + slow_draft(j) for j in range(5)]
    assert all(e[j] / rounds[j] < 1 / rounds[0] for j in range(1, 5))
    g = gate_with(slow_draft, True)
    assert g.choose(4, 0, 0) == 1 and g.n_probes == 1
    assert g.choose(4, 0, 1) == 0 and g.n_gated == 1
    for j in range(5):
        assert g.expected_rate(0, j) == pytest.approx(e[j] / rounds[j])
    # a gate that weighs drafts already drafted (n-gram: sunk cost) ignores the draft's cost
    assert gate_with(slow_draft, False).choose(4, 0, 0) == 4
    # unknown draft cost for j >= 1 while the rest is known: a one-token probe measures it
    m = MeasuredCost()
    m.observe(1, 1.0)
    m.observe(5, 1.4)
    m.observe_draft(0, 0.1)
    g = DraftGate(4, m, count_draft=True)
    assert g.choose(4, 0, 0) == 1 and g.n_probes == 1
    m.observe_draft(1, 0.2)       # a cheap draft: the whole draft pays by the prior
    g2 = DraftGate(4, m, count_draft=True)
    assert g2.choose(4, 0, 0) == 4


@pytest.fixture(scope="module")
def mtp_target(tmp_path_factory):
    from pyggml.llm.tiny import write_tiny_step35
    d = tmp_path_factory.mktemp("gate_mtp")
    # a near-bigram target: its MTP head is accepted often
    return Model.load(write_tiny_step35(d / "s35.gguf", bigram=0.5, seed=1, n_nextn=1))


def _mtp_run(model, **kw):
    ctx = Context(model, n_ctx=160)
    ref = list(ctx.generate(PROMPT, 48))
    ctx.reset()
    dec = SpeculativeDecoder(ctx, "mtp", n_max=4, **kw)
    out = list(dec.generate(PROMPT, 48))
    return ref, out, dec


def test_the_gate_counts_the_mtp_drafts_cost(mtp_target):
    ref, out0, d0 = _mtp_run(mtp_target, cost_gate=False)
    assert out0 == ref and d0.stats["n_accepted"] > 0
    # drafting is free and verifying costs a plain step: drafts as without the gate
    ref, out, d = _mtp_run(mtp_target, cost_model=FixedCost(CHEAP, draft=lambda j: 0.0))
    assert out == ref
    for key in ("steps", "n_plain_steps", "draft_calls"):
        assert d.stats[key] == d0.stats[key], key
    assert d.stats["n_probes"] == d.stats["n_gated"] == 0
    # each draft token costs two plain steps: nothing pays, every verify is a probe and the
    # draft graphs run only for them
    ref, out, d = _mtp_run(mtp_target, cost_model=FixedCost(CHEAP, draft=lambda j: 2.0 * j))
    s = d.stats
    assert out == ref
    check_spec_stat_sums(s, out)
    assert s["n_verify_steps"] == s["n_probes"] >= 1 and s["n_gated"] > 0
    assert s["draft_calls"] == sum(len(x["draft"]) for x in s["steps"])
    assert s["draft_calls"] < d0.stats["draft_calls"] / 4
    # measured: the draft side is timed on plain rounds (j = 0) and on drafting ones
    ref, out, d = _mtp_run(mtp_target)
    assert out == ref
    check_spec_stat_sums(d.stats, out)
    seen = d.cost_model.draft_seconds
    assert 1 in seen and any(w >= 2 for w in seen) and all(v > 0 for v in seen.values())


def test_the_gate_never_verifies_fewer_than_n_min(tiny):
    gate = DraftGate(4, n_min=2)
    assert gate.choose(4, 0, 0) == 0
    gate.observe_cost(1, 1.0)
    assert gate.choose(1, 0, 1) == 0          # shorter than n_min: dropped, no probe
    assert gate.choose(4, 0, 2) == 2 and gate.n_probes == 1     # the probe is n_min long
    g = DraftGate(4, EXPENSIVE, n_min=3)
    assert g.choose(4, 0, 0) == 3             # the least losing prefix of 3 or more
    _, ctx, full = tiny
    for model in (None, EXPENSIVE, MIDDLE):
        out, s = generate(ctx, WrongThenRight(full, 45), n_max=4, n_min=2, cost_model=model)
        assert out == full[len(PROMPT):]
        assert s["steps"] and all(len(x["draft"]) >= 2 for x in s["steps"])


def test_an_unmeasured_width_ages_a_bounded_amount():
    # a width the gate stopped verifying is never measured again: thousands of plain steps
    # later its estimate is its lowest aged by at most MAX_AGE observations, so a verify of
    # it can still beat a plain step (unbounded, 1.005^5000 ~ 7e10 would gate it off forever)
    m = MeasuredCost()
    t = m._target
    m.observe(1, 1.0)
    m.observe(3, 1.5)
    for _ in range(5000):
        m.observe(1, 1.0)
    assert m.cost(1) == pytest.approx(1.0, rel=0.05)
    assert m.cost(3) == pytest.approx(1.5 * (1 + t.drift) ** t.MAX_AGE)
    gate = DraftGate(4, m)
    st = gate._state(0)
    st.accepted1 = st.trials1 = st.accepted2 = st.trials2 = 10.0   # drafts always accepted
    assert gate.choose(2, 0, 100) == 2


@pytest.mark.parametrize("seed", range(6))
def test_a_kept_decision_equals_a_fresh_one(seed):
    # the gate keeps its last prefix decision per class while neither the class's counts
    # nor the costs moved: through random costs, acceptances, classes and lengths, every
    # choice equals a twin gate's that decides afresh each time
    import numpy as np
    rng = np.random.default_rng(seed)
    gates = [DraftGate(4, MeasuredCost(), None), DraftGate(4, MeasuredCost(), None)]
    for rnd in range(600):
        op = rng.random()
        if op < 0.25:
            # a verify of w costs (1 + slope (w - 1)) plain steps, the slope changing every
            # 100 rounds (lowest times age and give way): drafts lose, then pay, then lose
            w, slope = int(rng.integers(1, 6)), (0.9, 0.05, 1.2, 0.2, 0.7, 0.1)[rnd // 100]
            sec = float(rng.uniform(1.0, 1.1)) * 1e-4 * (1 + slope * (w - 1))
            for g in gates:
                g.observe_cost(w, sec)
        elif op < 0.4:
            cls, k = int(rng.integers(0, 3)), int(rng.integers(1, 5))
            n_acc = int(rng.integers(0, k + 1)) if rng.random() < 0.3 else 0
            for g in gates:
                g.observe_accept(cls, k, n_acc)
        else:
            cls, k = int(rng.integers(0, 3)), int(rng.integers(1, 6))
            for st in gates[1]._classes.values():
                st.memo = (None, None, None)
            a, b = (g.choose(k, cls, rnd) for g in gates)
            assert a == b, f"round {rnd}"
    assert gates[0].n_gated == gates[1].n_gated > 30
    assert gates[0].n_probes == gates[1].n_probes


@pytest.mark.parametrize("seed", range(4))
def test_the_one_pass_cost_table_equals_each_widths_cost(seed):
    # the gate reads every width's cost at once (MeasuredCost.costs): through random
    # observations of random widths (measured, interpolated, extrapolated, a narrower width
    # measured dearer than a wider one), each entry equals cost(w) asked alone
    import numpy as np
    rng = np.random.default_rng(seed)
    m = MeasuredCost(drift=float(rng.choice([0.0, 0.005, 0.05])))
    assert m.costs(6) == [None] * 6
    for _ in range(300):
        m.observe(int(rng.integers(1, 8)), float(rng.uniform(0.5, 3.0)))
        n = int(rng.integers(1, 10))
        assert m.costs(n) == [m.cost(w) for w in range(1, n + 1)]
    # an interpolated width below a dearer narrower one: the narrower one's cost
    t = MeasuredCost(drift=0.0)
    t.observe(2, 3.0)
    t.observe(3, 1.0)
    t.observe(5, 2.0)
    assert t.costs(5) == [None, 3.0, 3.0, 3.0, 3.0] == [t.cost(w) for w in range(1, 6)]


def test_fused_readings_equal_the_separate_calls():
    # after_miss and declines_every (one call an empty ask or a wake) against the calls they
    # fuse, on gates driven through random decisions, acceptances and costs (the ask cost too)
    import random
    n_declined = {True: 0, False: 0}
    for seed in range(6):
        _drive_and_compare(random.Random(seed), n_declined)
    assert n_declined[True] > 20 and n_declined[False] > 20


def _drive_and_compare(rnd, n_declined):
    model = MeasuredCost()
    gate = DraftGate(4, model)
    for round_no in range(200):
        r = rnd.random()
        if r < 0.3:
            model.observe(rnd.randint(1, 5), rnd.uniform(1.0, 3.0) * 1e-4)
        elif r < 0.4:
            model.observe_ask(rnd.uniform(0.1, 1.0) * 1e-4)
        elif r < 0.7:
            cls = rnd.randint(0, 2)
            j = gate.choose(rnd.randint(1, 4), cls, round_no)
            if j:
                gate.observe_accept(cls, j, rnd.choice([0, 0, rnd.randint(0, j)]))
        shortest, overdue = rnd.choice([(8, 8), (32, 8)])
        for round_arg in (round_no, None):
            ref = copy.deepcopy(gate)
            want = None
            if ref.ready:
                cap = ref.quiet_cap(shortest, 32, 0.03)
                hint = ref.take_quiet_hint()
                if not hint and round_arg is not None:
                    hint = ref.quiet_rounds(round_arg, overdue=overdue)
                want = (cap, hint)
            got = copy.deepcopy(gate)
            assert got.after_miss(shortest, 32, 0.03, round_arg, overdue) == want
            assert got.quiet_hint == ref.quiet_hint
        for classes in ((0,), (1, 2), (0, 1, 2), (2, 5)):
            want = all(_declines_spelled_out(gate, c, round_no) for c in classes)
            assert gate.declines_every(classes, round_no) == want
            assert all(gate.declines(c, round_no) for c in classes) == want
            n_declined[want] += 1


def _declines_spelled_out(gate, cls, round_no):
    """DraftGate.declines by its definition: a class seen, every cost known, no prefix that
    beats a plain step, its probe not due."""
    st = gate._classes.get(cls)
    if st is None or any(c is None for c in gate._costs()):
        return False
    return (not gate._prefixes(st, gate.n_max, gate._costs())[0]
            and round_no < gate._probe_due(st, round_no))
