"""Verification rules of speculative decoding on toy distributions (no model)."""
import math

import numpy as np
import pytest

from pyggml.llm.speculative.verify import (conditional_rates, residual, synthetic_rates,
                                           verify_forced, verify_greedy, verify_rejection)

V = 6  # toy vocabulary


def _chain(seed, concentration):
    """A Markov chain over the toy vocabulary: row a is the next-token distribution after a."""
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(V, concentration), size=V)


TARGET = _chain(1, 1.0)
# the draft resembles the target (acceptance well above 0) but differs from it
DRAFT = 0.6 * TARGET + 0.4 * _chain(2, 0.5)


DRAFT_CDF = np.cumsum(DRAFT, axis=1)


def _draw(rng, cdf):
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), V - 1))


def _stream(verify_step, n_tokens, seed, k=3):
    """Generate a token stream of the TARGET chain by repeated draft/verify steps."""
    rng = np.random.default_rng(seed)
    out = [0]
    while len(out) < n_tokens:
        prev, ids = out[-1], []
        for _ in range(k):
            prev = _draw(rng, DRAFT_CDF[prev])
            ids.append(prev)
        chain = [out[-1]] + ids
        out.extend(verify_step(TARGET[chain], ids, DRAFT[chain[:-1]], rng))
    return np.array(out[:n_tokens])


def _chi2_pvalue(stream):
    """Chi-square of the stream's transition counts against TARGET (all rows together);
    the p-value by the Wilson-Hilferty normal approximation."""
    counts = np.zeros((V, V))
    np.add.at(counts, (stream[:-1], stream[1:]), 1)
    expected = counts.sum(1, keepdims=True) * TARGET
    stat = float(((counts - expected) ** 2 / expected).sum())
    dof = V * (V - 1)
    z = ((stat / dof) ** (1 / 3) - (1 - 2 / (9 * dof))) / math.sqrt(2 / (9 * dof))
    return 0.5 * math.erfc(z / math.sqrt(2))


def _rejection(rows, ids, qrows, rng):
    return verify_rejection(rows, ids, qrows, rng)


def _wrong_exact_match(rows, ids, qrows, rng):
    """The bug the chi-square must catch: greedy-style verification at T > 0 (keep a draft
    token when it is the target's most likely one, else sample the target)."""
    out = []
    for i, d in enumerate(ids):
        if d == int(np.argmax(rows[i])):
            out.append(d)
            continue
        out.append(_draw(rng, np.cumsum(rows[i])))
        return out
    out.append(_draw(rng, np.cumsum(rows[len(ids)])))
    return out


N_ROUNDS = 100_000


def test_rejection_sampling_keeps_target_distribution():
    assert _chi2_pvalue(_stream(_rejection, N_ROUNDS, seed=3)) > 1e-3


def test_rejection_sampling_point_mass_draft_keeps_target_distribution():
    assert _chi2_pvalue(_stream(lambda r, i, q, g: verify_rejection(r, i, None, g),
                                N_ROUNDS // 3, seed=4)) > 1e-3


def test_wrong_exact_match_mode_fails_the_same_test():
    assert _chi2_pvalue(_stream(_wrong_exact_match, N_ROUNDS, seed=5)) < 1e-6


def test_rejection_sampling_accepts_more_than_exact_match():
    """Sanity of the harness: with a similar draft most positions are accepted."""
    rng = np.random.default_rng(6)
    acc = []
    for _ in range(2000):
        d = int(rng.choice(V, p=DRAFT[0]))
        acc.append(len(verify_rejection([TARGET[0], TARGET[d]], [d], DRAFT[0:1], rng)) - 1)
    expected = np.minimum(TARGET[0], DRAFT[0]).sum()   # P(accept) = sum min(p, q)
    assert abs(np.mean(acc) - expected) < 0.04


def test_rejection_refuses_token_outside_its_draft_distribution():
    q = np.zeros((1, V))
    q[0, 1] = 1.0
    with pytest.raises(ValueError, match="probability 0"):
        verify_rejection([TARGET[0], TARGET[0]], [3], q, np.random.default_rng(0))


def test_residual():
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.5, 0.3])
    np.testing.assert_allclose(residual(p, q), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(residual(p, p), p)


def _rows(*argmaxes, n_vocab=10):
    rows = np.zeros((len(argmaxes), n_vocab))
    for i, a in enumerate(argmaxes):
        rows[i, a] = 1.0
    return rows


def test_greedy_full_partial_zero_acceptance():
    g = lambda r: int(np.argmax(r))
    assert verify_greedy(_rows(4, 5, 6, 7), [4, 5, 6], g) == [4, 5, 6, 7]   # all + bonus
    assert verify_greedy(_rows(4, 5, 6, 7), [4, 9, 6], g) == [4, 5]         # 1 accepted
    assert verify_greedy(_rows(4, 5, 6, 7), [3, 5, 6], g) == [4]            # 0 accepted
    assert verify_greedy(_rows(4), [], g) == [4]                             # no draft


def test_greedy_eog_stops_unless_last():
    g = lambda r: int(np.argmax(r))
    eog = lambda t: t == 2
    assert verify_greedy(_rows(4, 2, 6, 7), [4, 2, 6], g, eog) == [4, 2]     # stop after EOG
    assert verify_greedy(_rows(4, 5, 2, 7), [4, 5, 2], g, eog) == [4, 5, 2, 7]  # last: bonus


def test_rejection_eog_stops():
    rows = _rows(2, 5, 6)
    assert verify_rejection(rows, [2, 5], None, np.random.default_rng(0),
                            lambda t: t == 2) == [2]


def test_forced_acceptance_mean_length():
    rates = [0.9, 0.7, 0.4, 0.1]
    c = conditional_rates(rates)
    rng = np.random.default_rng(7)
    rows = np.zeros((5, 4))
    lengths = [len(verify_forced(rows, [1, 1, 1, 1], c, lambda r: 0, rng)) for _ in range(20000)]
    assert abs(np.mean(lengths) - (1 + sum(rates))) < 4 * np.std(lengths) / np.sqrt(len(lengths))
    # the per-position unconditional rates
    acc = np.array(lengths) - 1
    for i, r in enumerate(rates):
        assert abs(np.mean(acc > i) - r) < 0.02


def test_forced_emits_target_token_on_rejection():
    rows = _rows(7, 8, 9)
    assert verify_forced(rows, [1, 1], [0.0, 0.0], lambda r: int(np.argmax(r)),
                         np.random.default_rng(0)) == [7]
    assert verify_forced(rows, [1, 1], [1.0, 1.0], lambda r: int(np.argmax(r)),
                         np.random.default_rng(0)) == [1, 1, 9]


@pytest.mark.parametrize("n,L", [(4, 1.0), (4, 5.0), (4, 2.5), (3, 1.8), (8, 4.2)])
def test_synthetic_rates_from_mean_length(n, L):
    r = synthetic_rates(n, mean_length=L)
    assert len(r) == n and np.all(np.diff(r) <= 0)
    assert abs(1 + r.sum() - L) < 1e-6
    np.testing.assert_allclose(r, r[0] ** np.arange(1, n + 1), rtol=1e-9, atol=1e-12)


def test_synthetic_rates_validation():
    np.testing.assert_allclose(synthetic_rates(2, rates=[0.8, 0.5]), [0.8, 0.5])
    with pytest.raises(ValueError, match="one per draft position"):
        synthetic_rates(3, rates=[0.8, 0.5])
    with pytest.raises(ValueError, match="non-increasing"):
        synthetic_rates(2, rates=[0.5, 0.8])
    with pytest.raises(ValueError, match="must be in"):
        synthetic_rates(2, mean_length=3.5)
    with pytest.raises(ValueError, match="exactly one"):
        synthetic_rates(2)
    np.testing.assert_allclose(conditional_rates([0.8, 0.4, 0.0, 0.0]), [0.8, 0.5, 0.0, 0.0])


def test_ngram_lookup_most_recent_longest_key():
    from pyggml.llm.speculative.ngram import find_continuation
    seq = np.array([1, 2, 5, 1, 2, 6, 7, 1, 2])
    assert find_continuation(seq, 3, 3, 1) == [6, 7, 1]           # most recent [1, 2]
    seq = np.array([4, 1, 2, 8, 9, 3, 1, 2, 5, 4, 1, 2])
    assert find_continuation(seq, 2, 3, 1) == [8, 9]              # [4, 1, 2] beats [1, 2]
    assert find_continuation(np.array([7, 1, 9, 1]), 3, 3, 2) == []   # only a 1-token key
    assert find_continuation(np.array([7, 1, 9, 1]), 3, 3, 1) == [9, 1]
    assert find_continuation(np.array([3]), 4, 3, 1) == []
