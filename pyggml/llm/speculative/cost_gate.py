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
come from a cost model: by default measured as the decoder runs (the seconds of the target
calls it makes anyway); tests inject fixed ones.

The acceptance estimate is kept per draft class (`Drafter.draft_class`: the n-gram drafter
tells a substitution, a short, a medium and a long exact match apart; other drafters use one
class) as two rates, decayed, from a prior: q1, the chance that the first draft token is
accepted, and q2, that a later one is once the ones before it were, so R_i = q1 q2^(i-1).
A copy is often rejected at its first token and then accepted along (q2 > q1); a rate per
position would never learn the positions the gate stops verifying, the two pooled ones
learn from every verify. A class whose drafts the gate drops
learns nothing more, so it is re-probed: the first dropped draft of a class after
`interval` rounds is verified anyway (its best non-empty prefix); a probe accepted in full
brings the interval back to PROBE_FIRST, any other doubles it up to PROBE_MAX. A class seen
for the first time (a long match appearing in fresh text) probes at once.

Verification never depends on which prefix is verified: every committed token is the
target's own, so the stream is the same with any gate.
"""
from __future__ import annotations

__all__ = ["MeasuredCost", "FixedCost", "DraftGate", "as_cost_model"]


class MeasuredCost:
    """c(w) in seconds, measured: a decayed average per decoded width w (w = 1: a plain
    step). Unmeasured widths >= 2 are interpolated between measured ones (below the narrowest,
    from the plain step; above the widest, by the last slope); cost() is None while nothing
    tells (no plain step yet, or no verify at all)."""

    DECAY = 0.8
    CLIP = 3.0        # one observation moves the average by at most this factor (preemption)

    def __init__(self):
        self.seconds: dict = {}
        self.version = 0

    def observe(self, width: int, seconds: float) -> None:
        old = self.seconds.get(width)
        if old is None:
            self.seconds[width] = float(seconds)
        else:
            s = min(max(float(seconds), old / self.CLIP), old * self.CLIP)
            self.seconds[width] = self.DECAY * old + (1 - self.DECAY) * s
        self.version += 1

    def cost(self, width: int) -> float | None:
        c = self.seconds
        if width in c:
            return c[width]
        if width <= 1:
            return None
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


class FixedCost:
    """c(w) = fn(w) (w = 1: a plain step), ignoring what is measured: deterministic drafting
    for tests and for callers who know their target's costs."""

    version = 0

    def __init__(self, fn):
        if not callable(fn):
            raise ValueError(f"FixedCost: expected a callable width -> seconds, got {fn!r}")
        self.fn = fn

    def observe(self, width: int, seconds: float) -> None:
        pass

    def cost(self, width: int) -> float | None:
        v = self.fn(width)
        return None if v is None else float(v)


def as_cost_model(model):
    """None: measured; a callable width -> seconds: FixedCost; an object with cost(w)
    (observe(w, s) and version optional): itself."""
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
                 "probing")

    def __init__(self, prior: float, rates: tuple, first: int):
        # decayed counts: first draft tokens compared with the target, and accepted; the
        # same for the later tokens compared (those after an accepted one)
        self.trials1 = self.trials2 = prior
        self.accepted1, self.accepted2 = prior * float(rates[0]), prior * float(rates[1])
        self.interval, self.last_probe, self.probing = first, None, False

    @property
    def rates(self) -> tuple:
        return self.accepted1 / self.trials1, self.accepted2 / self.trials2


class DraftGate:
    DECAY = 0.9           # weight of the past in the acceptance estimate
    PRIOR = 2.0           # pseudo-tokens of the prior rates
    PRIOR_RATES = (0.5, 0.8)   # q1, q2 of a class the drafter gives no prior for
    PROBE_FIRST = 16      # rounds between probes of a class whose last probe was accepted
    PROBE_MAX = 128

    def __init__(self, n_max: int, cost_model=None, class_prior=None):
        """class_prior: None, or cls -> (q1, q2) or None, the drafter's prior rates of a
        class (`Drafter.class_prior`)."""
        self.n_max = int(n_max)
        self.class_prior = class_prior
        self.model = as_cost_model(cost_model)
        self._observe = getattr(self.model, "observe", None)
        self._table, self._table_version = None, None
        self.reset_acceptance()

    def reset_acceptance(self) -> None:
        """Forget the acceptance estimates and probe state (a new text); costs stay."""
        self._classes: dict = {}
        self.n_gated = self.n_probes = 0

    # ---- observations ---------------------------------------------------------------------
    def observe_cost(self, width: int, seconds: float) -> None:
        if self._observe is not None:
            self._observe(width, seconds)

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

    # ---- the decision -----------------------------------------------------------------------
    def _state(self, cls) -> _ClassState:
        st = self._classes.get(cls)
        if st is None:
            rates = self.class_prior(cls) if self.class_prior is not None else None
            st = self._classes[cls] = _ClassState(self.PRIOR, rates or self.PRIOR_RATES,
                                                  self.PROBE_FIRST)
        return st

    def _costs(self) -> list:
        """[c(1), .., c(n_max + 1)], recomputed when the model's version moves."""
        version = getattr(self.model, "version", None)
        if self._table is None or version is None or version != self._table_version:
            self._table = [self.model.cost(w) for w in range(1, self.n_max + 2)]
            self._table_version = version
        return self._table

    def expected_rate(self, cls, j: int) -> float:
        """Expected tokens per second of verifying j drafts of class cls (j = 0: a plain
        step); None while a cost is unknown."""
        costs = self._costs()
        c = costs[j] if j <= self.n_max else None
        if c is None:
            return None
        q1, q2 = self._state(cls).rates
        return (1.0 + sum(q1 * q2 ** i for i in range(j))) / max(c, 1e-12)

    def choose(self, k: int, cls, round_no: int) -> int:
        """How many of k drafted tokens (class cls) to verify at round round_no: the longest
        prefix that beats a plain step, 0 (a plain step) when none does but for a probe (the
        prefix that loses least). k itself while the costs are not known yet (verifying
        measures them)."""
        if k <= 0:
            return 0
        k = min(k, self.n_max)
        costs = self._costs()
        c_plain = costs[0]
        if c_plain is None or costs[k] is None:
            return k
        st = self._state(cls)
        q1, q2 = st.rates
        e, r, top_j, top_v, longest = 1.0, q1, 1, -1.0, 0
        for j in range(1, k + 1):
            if j > 1:
                r *= q2
            e += r
            v = e / max(costs[j], 1e-12)
            if v > top_v:
                top_j, top_v = j, v
            if v * c_plain > 1.0:
                longest = j
        if longest:
            return longest
        if st.last_probe is None or round_no - st.last_probe >= st.interval:
            st.last_probe, st.probing = round_no, True
            self.n_probes += 1
            return top_j
        self.n_gated += 1
        return 0
