"""Whether a draft is worth verifying (SpeculativeDecoder's cost gate, on with the adaptive
length).

A round that verifies j drafted tokens decodes j + 1 tokens at cost c(j + 1) and commits
1 + R_1 + .. + R_j tokens on average, R_i being the chance that the first i drafts are all
accepted; a plain round decodes one token at cost c(1) and commits one. The gate keeps the
longest prefix of the draft whose expected tokens per second beat a plain round's, and none
(a plain round) when no prefix does. It cuts only what loses against plain decoding: the
drafter's and the back-off rule's lengths stand otherwise (a copy's acceptance rises along
the draft, which the one-rate estimate below undervalues, so choosing the length with the
most tokens per second cuts long copies short).

Where c(w) grows slowly with w (a target whose weights stream from memory: one verify of 2
tokens costs ~1.2 plain steps) a draft accepted one time in five pays; where the weights sit
in cache and a decode is compute-bound, c(2) is ~2 c(1) and almost no draft pays. The costs
come from a cost model: by default measured as the decoder runs (the process's CPU seconds
of the target calls it makes anyway, each width's lowest, slowly aged: on a shared machine
wall time mostly measures the other work, and preemption only adds time); tests inject
fixed ones. Until they are known the gate pays little to learn them: the first round
is a plain step and the first verify a one-token probe, wider verifies being extrapolated
from those two until one is measured. With a draft model the gate decides before drafting,
and a round's cost also counts the draft's own (its draft graphs for j tokens and its
processing of the target's batch, measured the same way), against a plain round's
processing of one token. A verify round also has host work a plain step has not (the
drafter's processing of the batch, the comparison, the rollback of rejected cells: tens of
us, which on a small target is a third of a token): the one-sequence loop measures it, and
it counts in every verifying round's cost.

The acceptance estimate is kept per draft class (`Drafter.draft_class`: the n-gram drafter
tells a substitution, a short, a medium and a long exact match apart; other drafters use one
class) as two rates, decayed, from a prior: q1, the chance that the first draft token is
accepted, and q2, that a later one is once the ones before it were, so R_i = q1 q2^(i-1)
(q2 taken with Q2_OPTIMISM pseudo-accepts where it decides).
A copy is often rejected at its first token and then accepted along (q2 > q1); a rate per
position would never learn the positions the gate stops verifying, the two pooled ones
learn from every verify. A class whose drafts the gate drops
learns nothing more, so it is re-probed: the first dropped draft of a class after
`interval` rounds is verified anyway; a probe accepted in full brings the interval back to
PROBE_FIRST, any other doubles it up to PROBE_MAX. A class seen for the first time (a long
match appearing in fresh text) probes at once. A probe verifies the prefix that loses least,
but n_min tokens (one) where the class's first token is accepted less than PROBE_WIDE_Q1 of
the time: such a probe most likely ends at its first token, and the tokens after it would
be decoded for nothing (a probe is there to learn q1; an accepted one lets the next asks
verify wider). Probes also back off across classes: after a probe whose first token was
rejected, no class probes for `probe_gap` rounds (PROBE_FIRST, doubling while probes keep
failing, up to PROBE_MAX; an accepted probe clears it), so a drafter whose drafts fall into
several classes (the n-gram's substitutions, short and medium matches) pays one schedule of
failing probes, not one per class. Between a class's probes its decision cannot change but
through the costs: where the gate declines every class it has seen, a declined draft
leaves in `quiet_hint` (and `quiet_rounds` tells after an empty draft) the rounds until the
earliest of them may probe again, which the decoder spends without asking (up to its
longest quiet stretch), and `declines` tells whether a class's draft would be declined
(the decoder then ignores a drafter's wake that can only lead to one): asks that could
only be declined cost host time.

Verification never depends on which prefix is verified: every committed token is the
target's own, so the stream is the same with any gate.
"""
from __future__ import annotations

import math

__all__ = ["MeasuredCost", "FixedCost", "DraftGate", "as_cost_model"]


class _WidthTable:
    """Seconds per width w >= 1. On a shared machine a step is only ever slowed (preempted,
    cache-thrashed), never sped up, so the least disturbed step is the cost itself: each width
    keeps the lowest time seen, which creeps up by DRIFT per observation of any width (so all
    widths age alike, however rarely one is measured), for at most MAX_AGE observations,
    until a new observation is lower; a
    mean would follow the other load, and widths measured at different times would disagree.
    Unmeasured widths >= 2 are interpolated between measured ones (below the narrowest, from
    w = 1; above the widest, by the last slope); None while nothing tells (no w = 1 and no
    w >= 2)."""

    DRIFT = 0.005      # 1.38x in 64 steps: a context that grows is followed, noise is not
    AGE_EVERY = 8      # the estimates are re-aged every this many observations (or lowered)
    # a lowest time ages for at most this many observations: a width the gate stopped
    # verifying is not measured again, and aged without bound (1.005^3000 ~ 3e6 after a few
    # thousand plain steps) it would look too dear ever to be verified again
    MAX_AGE = 64

    def __init__(self, drift: float | None = None):
        self.drift = self.DRIFT if drift is None else float(drift)
        self.seconds: dict = {}
        self._seen: dict = {}       # width -> (lowest, tick of it)
        self._memo: dict = {}       # width -> cost(width) while the estimates stand
        self.tick = 0
        self.version = 0

    def observe(self, width: int, seconds: float) -> None:
        self.tick += 1
        seen = self._seen.get(width)
        s = float(seconds)
        grow, cap = 1.0 + self.drift, self.MAX_AGE
        lower = seen is None or s < seen[0] * grow ** min(self.tick - seen[1], cap)
        if lower:
            self._seen[width] = (s, self.tick)
        if lower or self.tick % self.AGE_EVERY == 0:
            self.seconds.clear()
            self.seconds.update({w: v * grow ** min(self.tick - t, cap)
                                 for w, (v, t) in self._seen.items()})
            self._memo.clear()
            self.version += 1

    def cost(self, width: int) -> float | None:
        """The estimate at width, never below a narrower measured width's (a wider decode
        does not cost less; measured at different moments they can disagree)."""
        memo = self._memo
        if width in memo:      # a plain step's and an ask's are read every ask round
            return memo[width]
        v = self._cost(width)
        if v is not None:
            v = max([v] + [c for w, c in self.seconds.items() if w < width])
        memo[width] = v
        return v

    def table(self, n: int) -> list:
        """[cost(1), .., cost(n)] in one pass (the gate reads every width at once whenever
        an observation moved the estimates: once an ask round)."""
        c = self.seconds
        wide = sorted(w for w in c if w >= 2)
        out, below = [], None          # below: the dearest measured width under w
        for w in range(1, n + 1):
            v = self._cost(w, wide)
            out.append(v if v is None or below is None or v >= below else below)
            if w in c and (below is None or c[w] > below):
                below = c[w]
        return out

    def _cost(self, width: int, wide: list | None = None) -> float | None:
        c = self.seconds
        if width in c:
            return c[width]
        if width <= 1:
            return None
        if wide is None:
            wide = sorted(w for w in c if w >= 2)
        if not wide:
            return None
        c1 = c.get(1)
        if width < wide[0]:
            if c1 is None:
                return c[wide[0]]
            w0 = wide[0]
            return c1 + (c[w0] - c1) * (width - 1) / (w0 - 1)
        if width > wide[-1]:
            if len(wide) >= 2:
                a, b = wide[-2], wide[-1]
            elif c1 is not None:
                a, b = 1, wide[-1]
            else:
                return c[wide[-1]]
            slope = max((c[b] - c[a]) / (b - a), 0.0)
            return c[b] + slope * (width - b)
        lo = max(w for w in wide if w < width)
        hi = min(w for w in wide if w > width)
        return c[lo] + (c[hi] - c[lo]) * (width - lo) / (hi - lo)


class MeasuredCost:
    """Costs measured as the decoder runs. cost(w): a target decode of w tokens (w = 1: a
    plain step, w = j + 1: a verify of j drafts). draft_cost(j): the draft side of a round
    that drafts j tokens with a draft model (its draft graphs and its processing of the
    target's batch; j = 0: the processing of a plain step). ask_cost(): one ask of the
    drafter and the gate (a draft and the decision on it). round_cost(): a verify round's
    host work after its decode (the drafter's processing of the batch, the comparison and
    rollback, the bookkeeping). Each is a _WidthTable (aged
    minimum, interpolated); None while unknown. drift: how fast a lowest time ages
    (default _WidthTable.DRIFT; 0: never)."""

    def __init__(self, drift: float | None = None):
        self._target, self._draft = _WidthTable(drift), _WidthTable(drift)
        self._ask, self._round = _WidthTable(drift), _WidthTable(drift)
        self.seconds = self._target.seconds
        self.draft_seconds = self._draft.seconds    # keyed by j + 1

    @property
    def version(self) -> int:
        return self._target.version + self._draft.version + self._round.version

    def observe(self, width: int, seconds: float) -> None:
        self._target.observe(width, seconds)

    def observe_draft(self, n_draft: int, seconds: float) -> None:
        self._draft.observe(n_draft + 1, seconds)

    def cost(self, width: int) -> float | None:
        return self._target.cost(width)

    def costs(self, n: int) -> list:
        """[cost(1), .., cost(n)]."""
        return self._target.table(n)

    def draft_cost(self, n_draft: int) -> float | None:
        return self._draft.cost(n_draft + 1)

    def observe_ask(self, seconds: float) -> None:
        self._ask.observe(1, seconds)

    def ask_cost(self) -> float | None:
        return self._ask.cost(1)

    def observe_round(self, seconds: float) -> None:
        self._round.observe(1, seconds)

    def round_cost(self) -> float | None:
        return self._round.cost(1)


class FixedCost:
    """c(w) = fn(w) (w = 1: a plain step) and, for draft models, draft_cost(j) = draft(j)
    (default 0: drafting is free), ask_cost() = ask (seconds; None: unknown, so asks stay
    MAX_QUIET rounds apart at the most) and round_cost() = round (a verify round's host
    work, seconds; default 0), ignoring what is measured: deterministic drafting for tests
    and for callers who know their costs."""

    version = 0

    def __init__(self, fn, draft=None, ask=None, round=0.0):
        for name, f in (("fn", fn), ("draft", draft)):
            if f is not None and not callable(f):
                raise ValueError(f"FixedCost: {name} must be a callable width -> seconds, "
                                 f"got {f!r}")
        if fn is None:
            raise ValueError("FixedCost: expected a callable width -> seconds, got None")
        if ask is not None and (isinstance(ask, bool) or not isinstance(ask, (int, float)) or ask < 0):
            raise ValueError(f"FixedCost: ask must be seconds >= 0 or None, got {ask!r}")
        if isinstance(round, bool) or not isinstance(round, (int, float)) or round < 0:
            raise ValueError(f"FixedCost: round must be seconds >= 0, got {round!r}")
        self.fn, self.draft, self.ask, self.round = fn, draft, ask, float(round)

    def observe(self, width: int, seconds: float) -> None:
        pass

    def observe_draft(self, n_draft: int, seconds: float) -> None:
        pass

    def cost(self, width: int) -> float | None:
        v = self.fn(width)
        return None if v is None else float(v)

    def draft_cost(self, n_draft: int) -> float | None:
        if self.draft is None:
            return 0.0
        v = self.draft(n_draft)
        return None if v is None else float(v)

    def observe_ask(self, seconds: float) -> None:
        pass

    def ask_cost(self) -> float | None:
        return None if self.ask is None else float(self.ask)

    def observe_round(self, seconds: float) -> None:
        pass

    def round_cost(self) -> float | None:
        return self.round


def as_cost_model(model):
    """None: measured; a callable width -> seconds: FixedCost; an object with cost(w)
    (draft_cost(j), observe(w, s), observe_draft(j, s) and version optional): itself."""
    if model is None:
        return MeasuredCost()
    if hasattr(model, "cost"):
        return model
    if callable(model):
        return FixedCost(model)
    raise ValueError(f"SpeculativeDecoder: cost_model={model!r}; expected None, a callable "
                     f"width -> seconds, or an object with cost(width)")


class _ClassState:
    __slots__ = ("trials1", "accepted1", "trials2", "accepted2", "interval", "last_probe",
                 "probing", "memo")

    def __init__(self, prior: float, rates: tuple, first: int):
        # decayed counts: first draft tokens compared with the target, and accepted; the
        # same for the later tokens compared (those after an accepted one)
        self.trials1 = self.trials2 = prior
        self.accepted1, self.accepted2 = prior * float(rates[0]), prior * float(rates[1])
        self.interval, self.last_probe, self.probing = first, None, False
        # DraftGate._prefixes' last answer: (costs table, k, the four counts), the answer
        self.memo = (None, None, None)

    @property
    def rates(self) -> tuple:
        return self.accepted1 / self.trials1, self.accepted2 / self.trials2

    def decision_rates(self, optimism: float) -> tuple:
        """q1, and q2 with `optimism` pseudo-accepts more (see DraftGate.Q2_OPTIMISM)."""
        return (self.accepted1 / self.trials1,
                (self.accepted2 + optimism) / (self.trials2 + optimism))


class DraftGate:
    DECAY = 0.9           # weight of the past in the acceptance estimate
    PRIOR = 2.0           # pseudo-tokens of the prior rates
    PRIOR_RATES = (0.5, 0.8)   # q1, q2 of a class the drafter gives no prior for
    # pseudo-accepts added to q2 where it decides: q2 only shortens a draft whose first
    # token the gate already trusts, it is learnt from fewer tokens than q1, and a copy's
    # acceptance rises along the draft (a constant q2 undervalues its tail: copies that
    # break at renamed tokens taught a medium match q2 ~ 0.5, and the gate cut a mirrored
    # block of 6 to 4). q1, which decides whether to verify at all, stays as measured
    Q2_OPTIMISM = 2.0
    PROBE_FIRST = 16      # rounds between probes of a class whose last probe was accepted
    PROBE_MAX = 128
    # a class whose first draft token is accepted less often than this probes with n_min
    # tokens (the prefix that loses least otherwise)
    PROBE_WIDE_Q1 = 0.5

    def __init__(self, n_max: int, cost_model=None, class_prior=None, count_draft=False,
                 n_min: int = 0):
        """class_prior: None, or cls -> (q1, q2) or None, the drafter's prior rates of a
        class (`Drafter.class_prior`). count_draft: the gate decides before a draft model
        drafts, so a round's cost counts the draft's own (cost model's draft_cost(j)).
        n_min: the decoder drops shorter drafts, so the gate never verifies fewer."""
        self.n_max = int(n_max)
        self.n_min = max(1, int(n_min))
        self.class_prior = class_prior
        self.count_draft = bool(count_draft)
        self.model = as_cost_model(cost_model)
        self._observe = getattr(self.model, "observe", None)
        self._observe_draft = getattr(self.model, "observe_draft", None)
        self._draft_cost = getattr(self.model, "draft_cost", None) if self.count_draft else None
        self._table, self._table_version = None, None
        self.reset_acceptance()

    def reset_acceptance(self) -> None:
        """Forget the acceptance estimates and probe state (a new text); costs stay."""
        self._classes: dict = {}
        self.n_gated = self.n_probes = 0
        # the back-off across classes: no probe before round probe_from + probe_gap
        self.probe_gap, self.probe_from, self._probe_round = 0, 0, 0
        self.quiet_hint = 0

    # ---- observations ---------------------------------------------------------------------
    def observe_cost(self, width: int, seconds: float) -> None:
        if self._observe is not None:
            self._observe(width, seconds)

    def observe_draft_cost(self, n_draft: int, seconds: float) -> None:
        if self._observe_draft is not None and self.count_draft:
            self._observe_draft(n_draft, seconds)

    def observe_ask_cost(self, seconds: float) -> None:
        observe = getattr(self.model, "observe_ask", None)
        if observe is not None:
            observe(seconds)

    def quiet_cap(self, shortest: int, longest: int, share: float) -> int:
        """The longest stretch of plain rounds between two asks: long enough that one ask
        costs at most `share` of the stretch's plain steps (a small target's step is not
        much dearer than an ask), within [shortest, longest]; shortest while a cost is
        unknown."""
        return self._quiet_cap(self._costs()[0], shortest, longest, share)

    def _quiet_cap(self, plain, shortest: int, longest: int, share: float) -> int:
        ask_cost = getattr(self.model, "ask_cost", None)
        ask = ask_cost() if ask_cost is not None else None
        if ask is None or plain is None or plain <= 0:
            return shortest
        return max(shortest, min(longest, math.ceil(ask / (share * plain))))

    def after_miss(self, shortest: int, longest: int, share: float, round_no, overdue: int):
        """What the decoder reads after a round that asked and verified nothing, in one call
        (it runs once an ask on fresh text): None while a plain round's cost is unknown (not
        `ready`), else (quiet_cap's stretch, the quiet hint: take_quiet_hint's, or without
        one and with round_no, quiet_rounds(round_no, overdue=overdue))."""
        costs = self._costs()
        if costs[0] is None:
            return None
        cap = self._quiet_cap(costs[0], shortest, longest, share)
        hint, self.quiet_hint = self.quiet_hint, 0
        if not hint and round_no is not None:
            hint = self._quiet_rounds(costs, round_no, None, overdue)
        return cap, hint

    def observe_round_cost(self, seconds: float) -> None:
        observe = getattr(self.model, "observe_round", None)
        if observe is not None:
            observe(seconds)

    def observe_accept(self, cls, n_drafted: int, n_acc: int) -> None:
        if n_drafted <= 0:
            return
        st = self._state(cls)
        n_acc, d = min(n_acc, n_drafted), self.DECAY
        st.trials1 = d * st.trials1 + 1.0
        st.accepted1 = d * st.accepted1 + (1.0 if n_acc else 0.0)
        if n_acc and n_drafted > 1:
            # the later tokens up to the first rejection were compared; those after it not
            st.trials2 = d * st.trials2 + (n_acc - 1) + (1 if n_acc < n_drafted else 0)
            st.accepted2 = d * st.accepted2 + (n_acc - 1)
        if st.probing:
            st.probing = False
            st.interval = (self.PROBE_FIRST if n_acc >= n_drafted
                           else min(2 * st.interval, self.PROBE_MAX))
            if n_acc:
                self.probe_gap = 0
            else:
                self.probe_gap = min(max(2 * self.probe_gap, self.PROBE_FIRST), self.PROBE_MAX)
                self.probe_from = self._probe_round

    # ---- the decision -----------------------------------------------------------------------
    def _state(self, cls) -> _ClassState:
        st = self._classes.get(cls)
        if st is None:
            rates = self.class_prior(cls) if self.class_prior is not None else None
            st = self._classes[cls] = _ClassState(self.PRIOR, rates or self.PRIOR_RATES,
                                                  self.PROBE_FIRST)
        return st

    def _costs(self) -> list:
        """[T(0), .., T(n_max)]: the seconds of a round verifying j drafts (j = 0: a plain
        step), c(j + 1) plus, for j >= 1, a verify round's host work (round_cost, 0 while
        unknown) and, with count_draft, the draft's draft_cost(j); None where a part is
        unknown. Recomputed when the model's version moves."""
        version = getattr(self.model, "version", None)
        if self._table is None or version is None or version != self._table_version:
            costs = getattr(self.model, "costs", None)
            table = (costs(self.n_max + 1) if costs is not None else
                     [self.model.cost(w) for w in range(1, self.n_max + 2)])
            round_cost = getattr(self.model, "round_cost", None)
            host = (round_cost() if round_cost is not None else None) or 0.0
            table = table[:1] + [None if c is None else c + host for c in table[1:]]
            if self._draft_cost is not None:
                table = [None if c is None or d is None else c + d
                         for c, d in zip(table, (self._draft_cost(j)
                                                 for j in range(self.n_max + 1)))]
            self._table, self._table_version = table, version
        return self._table

    @property
    def ready(self) -> bool:
        """Whether a plain round's cost is known (until then every draft is declined)."""
        return self._costs()[0] is not None

    def expected_rate(self, cls, j: int) -> float:
        """Expected tokens per second of a round verifying j drafts of class cls (j = 0: a
        plain step); None while a cost is unknown."""
        costs = self._costs()
        c = costs[j] if j <= self.n_max else None
        if c is None:
            return None
        q1, q2 = self._state(cls).decision_rates(self.Q2_OPTIMISM)
        return (1.0 + sum(q1 * q2 ** i for i in range(j))) / max(c, 1e-12)

    def _prefixes(self, st: _ClassState, k: int, costs: list) -> tuple:
        """(the longest prefix of k drafts that beats a plain step, 0 when none does; the
        prefix that loses least). Asks the gate declines change neither the class's counts
        nor the costs table: the last answer is kept for them (a declined ask then costs a
        comparison, not the sum over the prefixes)."""
        key = (k, st.trials1, st.accepted1, st.trials2, st.accepted2)
        memo = st.memo
        if memo[0] is costs and memo[1] == key:
            return memo[2]
        q1, q2 = st.decision_rates(self.Q2_OPTIMISM)
        c_plain = costs[0]
        e, r, top_j, top_v, longest = 1.0, q1, self.n_min, -1.0, 0
        for j in range(1, k + 1):
            if j > 1:
                r *= q2
            e += r
            c = costs[j]
            if c is None or j < self.n_min:
                continue
            v = e / max(c, 1e-12)
            if v > top_v:
                top_j, top_v = j, v
            if v * c_plain > 1.0:
                longest = j
        st.memo = (costs, key, (longest, top_j))
        return longest, top_j

    def choose(self, k: int, cls, round_no: int) -> int:
        """How many of k drafted tokens (class cls) to verify at round round_no: the longest
        prefix that beats a plain step, 0 (a plain step) when none does but for a probe (the
        prefix that loses least), never fewer than n_min. While costs are unknown it measures
        them cheaply: a plain step first, then a one-token probe (n_min tokens) (the widths above are extrapolated from those two
        until verified)."""
        self.quiet_hint = 0
        k = min(k, self.n_max)
        if k < self.n_min:
            return 0
        costs = self._costs()
        c_plain = costs[0]
        if c_plain is None:
            return 0
        st = self._state(cls)
        if costs[k] is None:
            known = [j for j in range(self.n_min, k + 1) if costs[j] is not None]
            if not known:
                st.last_probe, st.probing = round_no, True
                self.n_probes += 1
                return self.n_min
            k = known[-1]
        longest, top_j = self._prefixes(st, k, costs)
        if longest:
            return longest
        due = self._probe_due(st, round_no)
        if round_no >= due:
            st.last_probe, st.probing = round_no, True
            self._probe_round = round_no
            self.n_probes += 1
            if st.accepted1 < self.PROBE_WIDE_Q1 * st.trials1:
                return self.n_min
            return top_j
        self.n_gated += 1
        self.quiet_hint = self._quiet_rounds(costs, round_no, st, 0)
        return 0

    def _probe_due(self, st: _ClassState, round_no: int) -> int:
        """The first round at which a declined draft of class st is probed."""
        return max(self.probe_from + self.probe_gap,
                   round_no if st.last_probe is None else st.last_probe + st.interval)

    def declines(self, cls, round_no: int) -> bool:
        """Whether a draft of class cls at round round_no would be declined whatever its
        length: the class was seen, no prefix up to n_max beats a plain step and its probe is
        not due (False while a cost is unknown)."""
        return self.declines_every((cls,), round_no)

    def declines_every(self, classes, round_no: int) -> bool:
        """declines(cls, round_no) for every class of a non-empty `classes` (one call for
        the decoder's check of an absorb wake)."""
        costs = None
        for cls in classes:
            st = self._classes.get(cls)
            if st is None:
                return False
            if costs is None:
                costs = self._costs()
                if any(c is None for c in costs):
                    return False
            if (self._prefixes(st, self.n_max, costs)[0]
                    or round_no >= self._probe_due(st, round_no)):
                return False
        return costs is not None

    def quiet_rounds(self, round_no: int, declined: _ClassState | None = None,
                     overdue: int = 0) -> int:
        """The rounds after round_no in which no draft of a class seen could be verified:
        where every class seen is declined at any length (`declined`: one known to be), the
        rounds before the earliest of their probes, or `overdue` where one is due already (it
        waits for a draft of its class, which those rounds' asks might not find either); 0
        where a class would be verified, none was seen or a cost is unknown. A class not
        seen yet is not counted: its first draft probes, found at the next ask."""
        return self._quiet_rounds(self._costs(), round_no, declined, overdue)

    def _quiet_rounds(self, costs: list, round_no: int, declined, overdue: int) -> int:
        known, rounds = None, None
        for st in self._classes.values():
            if st is not declined:
                if known is None:
                    known = all(c is not None for c in costs)
                if not known or self._prefixes(st, self.n_max, costs)[0]:
                    return 0
            r = self._probe_due(st, round_no) - round_no - 1
            rounds = r if rounds is None else min(rounds, r)
        if rounds is None:
            return 0
        return overdue if rounds < 0 else rounds

    def take_quiet_hint(self) -> int:
        """The rounds the last declined draft's class cannot probe in (0: none known; see
        the module's note); read once."""
        hint, self.quiet_hint = self.quiet_hint, 0
        return hint
