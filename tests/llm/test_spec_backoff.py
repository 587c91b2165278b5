"""The consultation back-off of SpeculativeDecoder: after a round that asked the drafter (or
the cost gate) and verified nothing, the next 0, 1, 2, 4 .. MAX_QUIET rounds decode plainly
without asking, their tokens reaching the drafter at the next consult.

Costs are injected (FixedCost), so every decision is deterministic. Checked:
* the drafter is asked far less often than once a round while its drafts keep losing, and
  the stretches without asking never exceed MAX_QUIET (an empty draft's successor is found)
  but where the gate knows its one draft class cannot be verified before its next probe
  (MAX_QUIET_LONG at the most), or for a drafter whose absorb hook wakes the decoder when
  the stream starts repeating (the n-gram's): theirs are 0, MAX_QUIET, 2 MAX_QUIET ..
  MAX_QUIET_LONG rounds apart;
* after a long stretch of declined rounds a draft that has become right is verified and
  accepted again (the gate's re-probes still come);
* for every draft kind the stream stays ctx.generate's, the statistics add up, and the
  draft's own state holds every committed token when drafting resumes: the draft memory's
  positions, the n-gram history, and each resumed draft equal to the draft of a decoder that
  asked every round (a skipped or misplaced batch would change them)."""
import numpy as np
import pytest

from pyggml.llm import Context, Model, write_tiny_llama
from pyggml.llm.speculative import Draft, Drafter, FixedCost, SpeculativeDecoder
from pyggml.llm.speculative.dflash import DFlashDrafter
from pyggml.llm.speculative.eagle3 import Eagle3Drafter
from pyggml.llm.speculative.mtp import MtpDrafter
from pyggml.llm.speculative.ngram import NgramDrafter
from pyggml.llm.speculative.synthetic import SyntheticDrafter
from pyggml.llm.tiny import write_tiny_dflash, write_tiny_step35
from util import check_spec_stat_sums, tiny_eagle3_draft, tiny_qwen3_target

PROMPT = [5, 9, 14, 27, 9, 14, 33, 60, 5, 9, 14, 71, 88, 3, 40, 41, 42, 5, 9]
N = 100
QUIET = SpeculativeDecoder.MAX_QUIET
EXPENSIVE = FixedCost(lambda w: float(w))                # no draft pays: the gate declines
MIDDLE = FixedCost(lambda w: 1.0 + 0.5 * (w - 1))       # pays when accepted more than half
CHEAP = FixedCost(lambda w: 1.0)                         # every draft pays


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    m = Model.load(write_tiny_llama(tmp_path_factory.mktemp("backoff") / "t.gguf", seed=3))
    ctx = Context(m, n_ctx=160)
    return m, ctx, PROMPT + list(ctx.generate(PROMPT, N))


class Scripted(Drafter):
    """Drafts by stream position: nothing, or wrong tokens (the target's + 1), before
    `switch`, the target's own continuation from it; records the position of every call."""
    kind = "scripted"

    def __init__(self, full, switch, before="wrong"):
        self.full, self.switch, self.before = full, switch, before
        self.asked = []

    def draft(self, id_last, pos0, n_max):
        self.asked.append(pos0)
        true = [int(t) for t in self.full[pos0 + 1:pos0 + 1 + n_max]]
        if pos0 >= self.switch:
            return Draft(true)
        return Draft([] if self.before == "empty" else [(t + 1) % 256 for t in true])


def _generate(ctx, drafter, n=N, **kw):
    dec = SpeculativeDecoder(ctx, drafter, **kw)
    ctx.reset()
    out = dec.generate(PROMPT, n)
    check_spec_stat_sums(dec.stats, out)
    return list(out), dec


# ---- how often the drafter is asked -----------------------------------------------------------
@pytest.mark.parametrize("general", [False, True])
def test_losing_drafts_are_not_asked_for_every_round(tiny, general):
    _, ctx, full = tiny
    d = Scripted(full, switch=10 ** 6)
    dec = SpeculativeDecoder(ctx, d, n_max=4, cost_model=EXPENSIVE)
    if general:          # the general round instead of the one-sequence loop
        dec.__dict__["_plain_ok_cached"] = (dec.sampler, dec.drafter, False)
    ctx.reset()
    out = list(dec.generate(PROMPT, N))
    s = dec.stats
    assert out == full[len(PROMPT):]
    check_spec_stat_sums(s, out)
    # every round either asked the drafter or was one of the back-off's quiet rounds (or of
    # the draft length's pauses after rejected verifies)
    assert len(d.asked) + s["n_quiet_rounds"] <= s["n_rounds"]
    assert s["n_quiet_rounds"] > s["n_rounds"] / 2
    assert len(d.asked) < s["n_rounds"] / 12
    # the drafter has one class, which the gate declines but for its probes (rounds 0, 32,
    # 96: no draft is accepted, so a round's position is its number): the asks in between
    # could only be declined, so the decoder waits for each probe's round, asking at most
    # MAX_QUIET_LONG + 1 rounds apart
    asked = [p - len(PROMPT) for p in d.asked]
    assert s["n_probes"] == s["n_verify_steps"] == 3
    assert {0, 32, 96} <= set(asked) and len(asked) <= 6
    assert np.diff(asked).max() <= SpeculativeDecoder.MAX_QUIET_LONG + 1


@pytest.mark.parametrize("ask, cap", [(None, QUIET), (0.001, QUIET), (0.6, 20),
                                      (100.0, SpeculativeDecoder.MAX_QUIET_LONG)])
def test_asks_dear_against_a_plain_step_are_spaced_further(tiny, ask, cap):
    """The stretch between asks grows until one ask costs at most ASK_SHARE of the stretch's
    plain steps (plain step 1 s here: an ask of 0.6 s allows 20 quiet rounds), never under
    MAX_QUIET nor over MAX_QUIET_LONG; with the ask's cost unknown it stays MAX_QUIET. The
    drafts are empty: a declined draft's stretch is the gate's (quiet_hint)."""
    _, ctx, full = tiny
    d = Scripted(full, switch=10 ** 6, before="empty")
    out, dec = _generate(ctx, d, n_max=4, cost_model=FixedCost(lambda w: float(w), ask=ask))
    assert out == full[len(PROMPT):]
    gaps = np.diff(d.asked)
    assert gaps.max() == cap + 1


def test_fixed_cost_refuses_a_bad_ask():
    with pytest.raises(ValueError, match="ask must be seconds"):
        FixedCost(lambda w: 1.0, ask=-1.0)


def test_without_the_adaptive_length_every_round_asks(tiny):
    _, ctx, full = tiny
    d = Scripted(full, switch=10 ** 6, before="empty")
    out, dec = _generate(ctx, d, n_max=4, adaptive=False)
    assert out == full[len(PROMPT):]
    assert dec.stats["n_quiet_rounds"] == 0 and len(d.asked) == dec.stats["n_rounds"] - 1


def test_a_draft_after_empty_ones_is_found_within_the_longest_back_off(tiny):
    _, ctx, full = tiny
    switch = len(PROMPT) + 60          # after 60 empty drafts: the back-off is at its longest
    d = Scripted(full, switch, before="empty")
    out, dec = _generate(ctx, d, n_max=4, cost_model=CHEAP)
    assert out == full[len(PROMPT):]
    s = dec.stats
    assert s["n_quiet_rounds"] > 30
    first = next(p for p in d.asked if p >= switch)
    assert first <= switch + QUIET
    # the draft asked there is verified and accepted, and asks come every round again
    assert s["steps"][0]["n_accepted"] == 4
    assert np.diff([p for p in d.asked if p >= switch]).max() <= 5


@pytest.mark.parametrize("cost", [MIDDLE, EXPENSIVE], ids=["middle", "expensive"])
def test_declined_drafts_that_become_right_are_accepted_again(tiny, cost):
    # the gate drops a class whose drafts fail, then re-probes it; the back-off must leave
    # those probes their rounds (it asks on a lone class's probe round). Drafts before the
    # switch are all wrong, so an accepted token is a verify after it.
    _, ctx, full = tiny
    switch = len(PROMPT) + 30
    d = Scripted(full, switch)
    out, dec = _generate(ctx, d, n_max=4, cost_model=cost)
    assert out == full[len(PROMPT):]
    s = dec.stats
    assert s["n_gated"] > 0 and s["n_quiet_rounds"] > 10
    assert s["n_accepted"] > 0 and s["steps"][-1]["n_accepted"] == len(s["steps"][-1]["draft"])
    if cost is MIDDLE:            # a right draft pays: once re-learnt, every round drafts
        assert s["n_accepted"] >= 20


# ---- every draft kind: lossless, and the draft's state in sync --------------------------------
def _steered(base):
    class Steered(base):
        """`base` whose drafts are recorded by position (`raw`) and then replaced: wrong tokens
        before `switch`, the target's own continuation from it, so the decoder sees a long
        stretch of declined rounds and then accepted drafts."""

        def setup(self, full, switch, empty=False):
            self.full, self.switch, self.empty, self.raw, self.rows = full, switch, empty, {}, {}
            return self

        def draft(self, id_last, pos0, n_max):
            if self.multi_seq:            # drafts through draft_seqs
                return super().draft(id_last, pos0, n_max)
            d = super().draft(id_last, pos0, n_max)
            self._steer(pos0, n_max, d)
            return d

        def draft_seqs(self, items):
            drafts = super().draft_seqs(items)
            for (_, _, pos0, n_max), d in zip(items, drafts):
                self._steer(pos0, n_max, d)
            return drafts

        def _steer(self, pos0, n_max, d):
            self.raw[pos0] = list(d.ids)
            rows = getattr(d, "logits", None)
            self.rows[pos0] = None if rows is None or not len(rows) else np.array(rows[0])
            true = [int(t) for t in self.full[pos0 + 1:pos0 + 1 + n_max]]
            k = 0 if self.empty else max(len(d.ids), 1)
            d.ids = true[:k] if pos0 >= self.switch else [(t + 1) % 256 for t in true[:k]]
    return Steered


N_CTX = 192


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    d = tmp_path_factory.mktemp("backoff_kinds")
    qwen3 = Model.load(tiny_qwen3_target(d, "q.gguf"))
    return {
        "ngram": (Model.load(write_tiny_llama(d / "t.gguf", seed=3)), None, NgramDrafter, {}),
        "mtp": (Model.load(write_tiny_step35(d / "s35.gguf", bigram=0.5, seed=1, n_nextn=1)),
                None, MtpDrafter, {}),
        "eagle3": (qwen3, Model.load(tiny_eagle3_draft(d)),
                   Eagle3Drafter, {"kind": "eagle3"}),
        "dflash": (qwen3, Model.load(write_tiny_dflash(d / "f.gguf", kind="dflash",
                                                       target_layers=(1, 3))),
                   DFlashDrafter, {"kind": "dflash"}),
        "dspark": (qwen3, Model.load(write_tiny_dflash(d / "s.gguf", kind="dspark",
                                                       target_layers=(1, 2, 3))),
                   DFlashDrafter, {"kind": "dspark"}),
    }


def _draft_positions(drafter) -> list:
    """The positions sequence 0 holds in the draft model's memory."""
    mem = drafter.ctx.memory
    cells = getattr(mem, "base", mem).cells
    return sorted(int(p) for p in cells.pos[cells.seq[:, 0]])


# how far a resumed draft's first logits row may be from the every-round one: every draft
# computes a batch of tokens bit-like one at a time, so none (EAGLE3's rows were ~0.07-0.2
# apart while its accept kept the pair of the first rejected draft token in the draft memory,
# which plain rounds then built on; a draft memory missing tokens puts rows 0.5 to 3 apart)
ROW_TOL = {}


@pytest.mark.parametrize("kind", ["ngram", "mtp", "eagle3", "dflash", "dspark"])
def test_every_kind_resumes_drafting_in_sync(kinds, kind):
    target, draft, cls, kw = kinds[kind]
    want = list(Context(target, n_ctx=N_CTX).generate(PROMPT, N))
    full = PROMPT + want
    switch = len(PROMPT) + 20
    runs = {}
    # the reference asks at every position and verifies nothing (its drafts are emptied after
    # they are recorded), so its drafter sees every token one round at a time
    for label, empty, opt in (("back-off", False, dict(cost_model=MIDDLE)),
                              ("every round", True, dict(adaptive=False, cost_gate=False))):
        ctx = Context(target, n_ctx=N_CTX)
        # p_min: the draft logits rows are copied out (a cut this low drops no token)
        extra = {} if kind == "ngram" else {"p_min": 1e-9}
        drafter = _steered(cls)(ctx, draft, **kw, **extra).setup(full, switch, empty)
        dec = SpeculativeDecoder(ctx, drafter, n_max=3, **opt)
        out = dec.generate(PROMPT, N)
        assert list(out) == want, label
        check_spec_stat_sums(dec.stats, out)
        runs[label] = ctx, drafter, dec
    ctx, drafter, dec = runs["back-off"]
    s = dec.stats
    assert s["n_quiet_rounds"] > 10 and s["n_accepted"] > 0
    # the draft's own state holds every committed token, without holes
    n_past = ctx.n_past(0)
    if kind == "ngram":
        assert drafter.history[:n_past] == full[:n_past]
    else:
        pos = _draft_positions(drafter)
        assert pos == list(range(len(pos))) and len(pos) >= n_past - 1
    # a draft asked after quiet rounds is the draft of a decoder that asked every round: the
    # same tokens where only ids come out, else the same first draft logits row (ROW_TOL)
    ref = runs["every round"][1]
    resumed = [p for p in sorted(drafter.raw) if p in ref.raw and p - 1 not in drafter.raw]
    assert len(resumed) >= 3
    for p in resumed:
        if drafter.rows[p] is None:          # ids out of the graph (n-gram, DSpark)
            assert drafter.raw[p] == ref.raw[p][:len(drafter.raw[p])], p
        else:
            diff = np.abs(drafter.rows[p] - ref.rows[p]).max()
            assert diff <= ROW_TOL.get(kind, 0.0), (p, diff)


class SwitchedSynthetic(SyntheticDrafter):
    """Synthetic acceptance of nothing before stream position `switch`, of every draft token
    from it."""

    def setup(self, switch):
        self.switch, self.pos0 = switch, 0
        return self

    def draft(self, id_last, pos0, n_max):
        self.pos0 = pos0
        return super().draft(id_last, pos0, n_max)

    @property
    def acceptance_probs(self):
        if self.rates is None:
            return None
        return [1.0 if self.pos0 >= self.switch else 0.0] * len(self.rates)

    @acceptance_probs.setter
    def acceptance_probs(self, _value):
        pass          # the switch decides


def test_synthetic_acceptance_backs_off_and_resumes(tiny):
    _, ctx, full = tiny
    switch = len(PROMPT) + 30
    d = SwitchedSynthetic(ctx, synth_rates=[0.5, 0.25, 0.125]).setup(switch)
    out, dec = _generate(ctx, d, n_max=3, adaptive=True, cost_model=MIDDLE)
    s = dec.stats
    assert not s["valid"] and s["n_quiet_rounds"] > 10 and s["n_accepted"] > 0
    # nothing is accepted before the switch: up to it the stream is the target's
    assert out[:switch - len(PROMPT)] == full[len(PROMPT):switch]


# ---- the n-gram drafter ends a quiet stretch when the stream starts repeating -------------------
class RecordingNgram(NgramDrafter):
    """The n-gram drafter, recording the position of every ask."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.asked = []

    def draft(self, id_last, pos0, n_max):
        self.asked.append(pos0)
        return super().draft(id_last, pos0, n_max)


def _first_repeat(full, start, w=4):
    """The first position p >= start whose window full[p-w+1:p+1] occurred earlier, wholly
    before p (with a token after it)."""
    seen = set()
    for p in range(w - 1, len(full)):
        if p - w >= 0:
            seen.add(tuple(full[p - w:p]))
        if p >= start and tuple(full[p - w + 1:p + 1]) in seen:
            return p
    return None


def test_absorb_wakes_once_at_the_start_of_a_repeat():
    ctx = type("Ctx", (), {})()
    d = NgramDrafter(ctx)
    stream = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 9, 10, 11, 12, 13]
    woke = [p for p, t in enumerate(stream) if d.absorb(t, p)]
    # [1, 2, 3, 4] repeats at position 11; it stays a repeat through 12, then 9 ends it
    assert woke == [_first_repeat(stream, 0)] == [11]
    assert d.history == stream
    # a rollback (a verify's rejected tokens) and new tokens: the index follows the history
    d.process([12, 13, 1], 16, {})
    d.accept(0)
    assert d.history == stream[:17]
    tail = [2, 3, 4, 5, 6]
    assert [p for p, t in zip(range(17, 22), tail) if d.absorb(t, p)] == [20]
    assert _first_repeat(stream[:17] + tail, 17) == 20


def test_a_repeat_inside_a_quiet_stretch_is_asked_about_at_once(tmp_path):
    # seed 6's greedy stream runs ~110 tokens before its first 4-token window repeats: the
    # declined asks have spread out to MAX_QUIET by then
    m = Model.load(write_tiny_llama(tmp_path / "t6.gguf", seed=6))
    want = list(Context(m, n_ctx=200).generate(PROMPT, 150))
    full = PROMPT + want
    first = _first_repeat(full, len(PROMPT) + 1)
    assert first is not None and first > len(PROMPT) + 40
    asked = {}
    for label in ("absorb", "none"):
        ctx = Context(m, n_ctx=200)
        d = RecordingNgram(ctx)
        if label == "none":
            d.absorb = None                  # the decoder then hands tokens over at asks only
        dec = SpeculativeDecoder(ctx, d, n_max=3, cost_model=EXPENSIVE)
        out = dec.generate(PROMPT, 150)
        assert list(out) == want, label
        check_spec_stat_sums(dec.stats, out)
        assert dec.stats["n_quiet_rounds"] > 50, label
        assert d.history[:ctx.n_past(0)] == full[:ctx.n_past(0)], label
        asked[label] = d.asked
    # without the hook the repeat falls inside a quiet stretch and is asked about later
    assert first not in asked["none"]
    assert min(a for a in asked["absorb"] if a >= first) == first
    # and the asks stay spread out elsewhere: waking does not mean asking every round
    assert len(asked["absorb"]) <= len(asked["none"]) + 8


def test_a_drafter_that_absorbs_is_asked_at_most_every_long_stretch(tmp_path):
    # with the absorb hook a repeat wakes the decoder, so the asks between (which can only find
    # short matches and substitutions) come after 0, 1, 2, 4 .. MAX_QUIET_LONG quiet rounds;
    # without the hook after 0, 1, 2, 4 .. MAX_QUIET (a copy starting meanwhile is found by
    # asking)
    m = Model.load(write_tiny_llama(tmp_path / "t6.gguf", seed=6))
    want = list(Context(m, n_ctx=200).generate(PROMPT, 150))
    first = _first_repeat(PROMPT + want, len(PROMPT) + 1)
    gaps = {}
    for label in ("absorb", "none"):
        ctx = Context(m, n_ctx=200)
        d = RecordingNgram(ctx)
        if label == "none":
            d.absorb = None
        dec = SpeculativeDecoder(ctx, d, n_max=3, cost_model=EXPENSIVE)
        assert list(dec.generate(PROMPT, 150)) == want, label
        before = [a for a in d.asked if a < first]      # the fresh stretch of the stream
        gaps[label] = [int(g) - 1 for g in np.diff(before)]    # quiet rounds between asks
    long = SpeculativeDecoder.MAX_QUIET_LONG
    assert gaps["absorb"][:7] == [0, 1, 2, 4, QUIET, 2 * QUIET, long], gaps["absorb"]
    assert max(gaps["absorb"]) == long
    assert gaps["none"][:5] == [0, 1, 2, 4, QUIET] and max(gaps["none"]) == QUIET


def _repeat_starts(full, start, w=4):
    """The positions p >= start where full's window of w tokens ending at p occurred earlier
    (with a token after it) and the one ending at p - 1 did not: where absorb wakes."""
    seen, before, out = set(), False, []
    for p in range(w - 1, len(full)):
        if p - w >= 0:
            seen.add(tuple(full[p - w:p]))
        hit = tuple(full[p - w + 1:p + 1]) in seen
        if p >= start and hit and not before:
            out.append(p)
        before = hit
    return out


def _asks_with_and_without_wake_classes(m, n, cost_model):
    """For the n-gram drafter with its wake classes and without (every wake asks): the
    positions asked and the verify steps; the stream is checked against greedy's."""
    want = list(Context(m, n_ctx=n + 30).generate(PROMPT, n))
    asked, steps = {}, {}
    for label in ("wake classes", "none"):
        ctx = Context(m, n_ctx=n + 30)
        d = RecordingNgram(ctx)
        if label == "none":
            d.wake_classes = ()
        dec = SpeculativeDecoder(ctx, d, n_max=3, cost_model=cost_model)
        out = dec.generate(PROMPT, n)
        assert list(out) == want, label
        check_spec_stat_sums(dec.stats, out)
        asked[label], steps[label] = d.asked, dec.stats["steps"]
    return want, asked, steps


def test_wakes_the_gate_would_decline_are_not_asked_about(tmp_path):
    # seed 5's greedy stream is fresh text whose 4-token windows repeat by accident at a
    # dozen places. With compute-bound verifies the gate declines short and medium matches
    # but for probes: a wake between probes leads to no verify, so the decoder lets it pass
    # (an ask costs host time) and keeps its quiet stretch
    m = Model.load(write_tiny_llama(tmp_path / "t5.gguf", seed=5))
    want, asked, _ = _asks_with_and_without_wake_classes(m, 230, EXPENSIVE)
    starts = _repeat_starts(PROMPT + want, len(PROMPT) + 1)
    assert len(starts) >= 10
    woken = {k: [p for p in starts if p in v] for k, v in asked.items()}
    assert len(woken["none"]) >= len(starts) - 1      # without wake classes a wake asks
    assert len(woken["wake classes"]) <= len(woken["none"]) // 2
    assert len(asked["wake classes"]) < len(asked["none"])


def test_wakes_of_a_class_the_gate_verifies_are_all_asked_about(tmp_path):
    # where verifies are cheap the gate verifies medium matches: every wake still asks, and
    # the drafts and acceptance are the same as without a wake class
    m = Model.load(write_tiny_llama(tmp_path / "t7.gguf", seed=7))
    want, asked, steps = _asks_with_and_without_wake_classes(m, 230, CHEAP)
    assert sum(s["n_accepted"] for s in steps["none"]) > 40
    assert steps["wake classes"] == steps["none"]
    assert asked["wake classes"] == asked["none"]
