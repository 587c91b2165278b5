"""How many tokens to draft next (SpeculativeDecoder's adaptive modes).

adaptive=True applies the back-off rule; adaptive="cost" both, the shorter wins:

* back-off: after a rejection the next draft is n_accepted + 1 long, doubling back after a
  fully accepted one; when even one-token drafts fail, drafting pauses for 1, 2, 4 .. 16
  steps (a draft that never matches then costs a one-token verify every 16 steps);
* cost: a verify step of w tokens costs c(w) (measured on the target as it runs, per width)
  and commits 1 + R_1 + .. + R_k tokens on average for k drafts, R_i being the recent rate
  at which position i was accepted; the draft length maximises commits per second. On a
  CPU c(w) grows with w (c(9) is about 3.3 c(1) for a Q4_1 model of 135M parameters), so
  drafting 8 tokens accepted at 0.5 each is slower than drafting 4.

On the n-gram benchmark streams the back-off rule alone does as well as both (the cost rule
uses one acceptance estimate for all contexts, while n-gram drafts are good or useless by
context), so it is the default; the cost rule suits drafts of steady quality on targets
whose wide verifies are expensive.

Unmeasured widths are interpolated between measured ones (above the widest measured one,
extrapolated by the last slope; with one measurement, assumed as cheap: the policy then
tries longer drafts and learns their cost).
"""
from __future__ import annotations

import numpy as np

__all__ = ["DraftLength"]


class DraftLength:
    MAX_BACKOFF = 16      # longest pause of drafting after one-token drafts keep failing
    DECAY = 0.9           # weight of the past in the acceptance and cost estimates
    PRIOR = 2.0           # pseudo-steps of the prior rate 0.5 per position

    def __init__(self, n_max: int):
        self.n_max = int(n_max)
        self.cost: dict = {}                        # verify width -> seconds (moving average)
        self.seen = np.full(self.n_max, self.PRIOR)           # decayed: steps drafting >= i
        self.hit = np.full(self.n_max, self.PRIOR * 0.5)      # ... of which accepted >= i

    # ---- observations ---------------------------------------------------------------------
    def observe_cost(self, width: int, seconds: float) -> None:
        old = self.cost.get(width)
        self.cost[width] = seconds if old is None else self.DECAY * old + (1 - self.DECAY) * seconds

    def observe_accept(self, n_drafted: int, n_acc: int) -> None:
        if n_drafted <= 0:
            return
        k = min(n_drafted, self.n_max)
        self.seen[:k] = self.DECAY * self.seen[:k] + 1.0
        self.hit[:k] = self.DECAY * self.hit[:k] + (np.arange(1, k + 1) <= n_acc)

    # ---- the cost rule ----------------------------------------------------------------------
    def width_cost(self, w: int) -> float | None:
        if w in self.cost:
            return self.cost[w]
        if not self.cost:
            return None
        ws = np.array(sorted(self.cost), float)
        cs = np.array([self.cost[int(x)] for x in ws])
        if len(ws) == 1 or w < ws[0]:
            return float(cs[0] if w < ws[0] else cs[-1])
        if w > ws[-1]:
            slope = (cs[-1] - cs[-2]) / (ws[-1] - ws[-2])
            return float(cs[-1] + max(slope, 0.0) * (w - ws[-1]))
        return float(np.interp(w, ws, cs))

    def best_length(self, k_cap: int) -> int:
        """The draft length in 1..k_cap with the most expected commits per second."""
        if k_cap <= 1:
            return k_cap
        rates = self.hit / self.seen
        best_k, best = 1, -1.0
        gain = 1.0
        for k in range(1, k_cap + 1):
            gain += rates[k - 1]
            c = self.width_cost(k + 1)
            if c is None:
                return k_cap
            value = gain / max(c, 1e-12)
            if value > best * (1 + 1e-9):
                best_k, best = k, value
        return best_k
