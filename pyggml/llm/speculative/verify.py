"""Verification rules of speculative decoding (pure numpy, no model needed).

A verify step has the target's rows for [id_last, d_1..d_n]: row i is the target's
distribution of the token that follows d_i (row 0: the one after id_last). Each rule returns
the committed tokens `result`: the accepted drafts d_1..d_k followed by one token of the
target's own, so len(result) = k + 1 and k = len(result) - 1 drafts were accepted.

* `verify_greedy`: sample the target at row i and stop at the first mismatch with d_{i+1}
  (lossless for any deterministic sampler: every committed token is the target's choice
  over the same prefix).
* `verify_rejection`: speculative sampling for a stochastic target; the committed tokens are
  distributed exactly as the target's samples would be.
* `verify_forced`: benchmark-only synthetic acceptance with fixed conditional probabilities.

In every rule a draft that accepts an end-of-generation token stops the step there (tokens
after an EOG would enter the context without being output); an EOG as the last draft token
still takes its bonus token, as non-speculative decoding would continue after it too.
"""
from __future__ import annotations

import numpy as np

__all__ = ["verify_greedy", "verify_rejection", "verify_forced", "residual", "synthetic_rates",
           "conditional_rates"]


def _never(_tok) -> bool:
    return False


def verify_greedy(rows, draft, sample, is_eog=_never) -> list:
    """rows[i] (i = 0..n) is the target's logits row i; sample(row) picks a token (greedy or
    any deterministic sampler, called in stream order so a stateful one sees every committed
    token)."""
    n = len(draft)
    result = []
    for i in range(n):
        tok = int(sample(rows[i]))
        result.append(tok)
        if tok != int(draft[i]) or (is_eog(tok) and i + 1 < n):
            return result
    result.append(int(sample(rows[n])))
    return result


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """norm(max(0, p - q)): what a rejected draft position samples from. When p <= q
    everywhere (then p == q and a rejection had probability 0) it falls back to p."""
    r = np.maximum(np.asarray(p, np.float64) - np.asarray(q, np.float64), 0.0)
    s = r.sum()
    return r / s if s > 0 else np.asarray(p, np.float64) / np.sum(p)


def _draw(rng, p: np.ndarray) -> int:
    # inverse CDF on one uniform: cheaper than rng.choice for one draw from a long row
    c = np.cumsum(p)
    return int(min(np.searchsorted(c, rng.random() * c[-1], side="right"), len(p) - 1))


def verify_rejection(target_probs, draft, draft_probs, rng, is_eog=_never) -> list:
    """Accept d_i with probability min(1, p_t(d_i) / p_d(d_i)); on rejection emit a sample of
    norm(max(0, p_t - p_d)) and stop; when all n are accepted emit a bonus sample of row n.

    target_probs[i] is the target's distribution at row i (an array [n+1, V], or any object
    indexed lazily in increasing i, so a stateful sampler can see the tokens before row i).
    draft_probs[i] is the distribution d_i was drawn from; None means every d_i is a point
    mass (a deterministic draft), so d_i is accepted with probability p_t(d_i)."""
    n = len(draft)
    result = []
    for i in range(n):
        p = np.asarray(target_probs[i], np.float64)
        d = int(draft[i])
        qd = 1.0 if draft_probs is None else float(draft_probs[i][d])
        if qd <= 0:
            raise ValueError(f"verify_rejection: draft token {d} at position {i} has probability "
                             f"{qd} in its own draft distribution (the draft must be drawn from "
                             f"draft_probs, or leave draft_probs None for a deterministic draft)")
        if rng.random() < p[d] / qd:
            result.append(d)
            if is_eog(d) and i + 1 < n:
                return result
            continue
        if draft_probs is None:          # point mass: the residual is p without d
            r = p.copy()
            r[d] = 0.0
            r = r / r.sum() if r.sum() > 0 else p
        else:
            r = residual(p, draft_probs[i])
        result.append(_draw(rng, r))
        return result
    result.append(_draw(rng, np.asarray(target_probs[n], np.float64)))
    return result


def verify_forced(rows, draft, cond_probs, sample, rng, is_eog=_never) -> list:
    """Synthetic acceptance: the target is sampled at every row anyway (same cost as real
    verification); draft token i is accepted iff U(0,1) < cond_probs[i] and it is not EOG; on
    rejection the target's token is emitted and the step stops; all accepted: bonus token.
    The committed stream is not the target's (it is invalid output, for benchmarks only)."""
    n = len(draft)
    result = []
    for i in range(n):
        tok = int(sample(rows[i]))
        d = int(draft[i])
        if rng.random() < cond_probs[i] and not is_eog(d):
            result.append(d)
            continue
        result.append(tok)
        return result
    result.append(int(sample(rows[n])))
    return result


def synthetic_rates(n: int, mean_length: float | None = None, rates=None) -> np.ndarray:
    """Unconditional per-position acceptance rates r_1 >= ... >= r_n: given as `rates`
    (exactly n values in [0, 1], non-increasing), or from a mean acceptance length
    L in [1, n+1] as r_i = p^i with sum_i p^i = L - 1 (p by 32 bisection steps)."""
    if (mean_length is None) == (rates is None):
        raise ValueError("synthetic acceptance: give exactly one of mean_length or rates")
    if rates is not None:
        r = np.asarray(rates, np.float64).ravel()
        if len(r) != n:
            raise ValueError(f"synthetic acceptance: {len(r)} rates given for n_max={n} positions "
                             f"(one per draft position expected)")
        if np.any(r < 0) or np.any(r > 1) or np.any(np.diff(r) > 0):
            raise ValueError(f"synthetic acceptance: rates must be in [0, 1] and non-increasing, "
                             f"got {r.tolist()}")
        return r
    L = float(mean_length)
    if not 1.0 <= L <= n + 1:
        raise ValueError(f"synthetic acceptance: mean_length={L} must be in [1, {n + 1}] for "
                         f"n_max={n}")
    if L == n + 1:
        p = 1.0
    elif L == 1.0:
        p = 0.0
    else:
        lo, hi = 0.0, 1.0
        for _ in range(32):
            p = 0.5 * (lo + hi)
            if sum(p ** i for i in range(1, n + 1)) < L - 1:
                lo = p
            else:
                hi = p
        p = 0.5 * (lo + hi)
    return np.array([p ** i for i in range(1, n + 1)], np.float64)


def conditional_rates(rates) -> np.ndarray:
    """c_i = r_i / r_{i-1} (r_0 = 1): the probability of accepting position i given that
    every earlier position was accepted (0 after a rate of 0)."""
    r = np.concatenate([[1.0], np.asarray(rates, np.float64)])
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(r[:-1] > 0, r[1:] / np.where(r[:-1] > 0, r[:-1], 1.0), 0.0)
    return np.minimum(c, 1.0)
