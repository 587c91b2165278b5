"""The cost rule of the adaptive draft length (pure arithmetic, no model)."""
import pytest

from pyggml.llm.speculative.draft_length import DraftLength


def _best_by_hand(costs, rates, k_cap):
    best, arg = -1, 0
    for k in range(1, k_cap + 1):
        v = (1 + sum(rates[:k])) / costs[k + 1]
        if v > best:
            best, arg = v, k
    return arg


def test_expensive_wide_verify_shortens_drafts():
    # verify cost of a 135M Q4_1 model on 2 cores, by width (relative to one token)
    costs = {1: 1.0, 2: 1.28, 3: 1.67, 4: 1.85, 5: 2.01, 6: 2.35, 7: 2.65, 8: 2.95, 9: 3.3}
    p = DraftLength(8)
    for w, c in costs.items():
        p.observe_cost(w, c)
    for _ in range(80):                     # every draft keeps its first 3 tokens exactly
        p.observe_accept(8, 3)
    rates = list(p.hit / p.seen)
    assert rates[2] > 0.9 and rates[3] < 0.1
    assert p.best_length(8) == _best_by_hand(costs, rates, 8) == 3


def test_cheap_verify_keeps_long_drafts():
    costs = {w: 1.0 + 0.01 * w for w in range(1, 10)}
    p = DraftLength(8)
    for w, c in costs.items():
        p.observe_cost(w, c)
    for _ in range(40):
        p.observe_accept(8, 8)
    assert p.best_length(8) == 8
    assert p.best_length(3) == 3            # never above the back-off cap


def test_costs_between_and_beyond_measured_widths():
    p = DraftLength(8)
    assert p.width_cost(3) is None and p.best_length(5) == 5     # nothing measured: no cap
    p.observe_cost(2, 2.0)
    assert p.width_cost(6) == 2.0                                # one point: assumed flat
    p.observe_cost(4, 3.0)
    assert p.width_cost(3) == pytest.approx(2.5)
    assert p.width_cost(6) == pytest.approx(4.0)                 # last slope
    assert p.width_cost(1) == 2.0
    p.observe_cost(4, 5.0)                                       # moving average
    assert p.width_cost(4) == pytest.approx(0.9 * 3.0 + 0.1 * 5.0)
