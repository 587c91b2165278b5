"""Host-side token sampling from a logits row: greedy, or a seeded chain in the order of
llama.cpp's common sampler:

    penalties -> top-k -> typical -> top-p -> min-p -> temperature -> draw

Every stage works on the surviving candidates (ids with their logits); the probability-based
stages (typical, top-p) take the softmax of the candidates' logits before the temperature, as
llama.cpp does. ``temperature <= 0`` is greedy: the argmax of the (penalized) logits, which
without penalties is exactly ``np.argmax`` of the row.
"""
from __future__ import annotations

from collections import Counter, deque

import numpy as np

__all__ = ["greedy", "Sampler", "make_sampler", "top_k_filter", "top_p_filter", "min_p_filter",
           "typical_filter", "apply_penalties"]


def greedy(logits) -> int:
    """Argmax (the lowest id on ties)."""
    return int(np.argmax(np.asarray(logits)))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - np.max(x))
    return e / e.sum()


def apply_penalties(logits: np.ndarray, history, repeat: float = 1.0, frequency: float = 0.0,
                    presence: float = 0.0) -> np.ndarray:
    """Penalize ids seen in `history`: a repeated id's logit is divided by `repeat` when
    positive and multiplied by it otherwise, then lowered by count * frequency + presence."""
    out = np.array(logits, dtype=np.float64, copy=True)
    if repeat == 1.0 and frequency == 0.0 and presence == 0.0:
        return out
    for tid, count in Counter(int(t) for t in history).items():
        if not 0 <= tid < len(out):
            continue
        v = out[tid]
        v = v * repeat if v <= 0 else v / repeat
        out[tid] = v - count * frequency - presence
    return out


def top_k_filter(ids: np.ndarray, logits: np.ndarray, k: int):
    """Keep the k largest (k <= 0: keep all). Returns candidates sorted by logit, descending."""
    order = np.argsort(-logits, kind="stable")
    if k > 0:
        order = order[:k]
    return ids[order], logits[order]


def typical_filter(ids, logits, p: float, min_keep: int = 1):
    """Locally typical sampling: order candidates by |-log p_i - H| (H the entropy) and keep
    the shortest prefix of that order whose mass exceeds p."""
    if p >= 1.0 or len(ids) == 0:
        return ids, logits
    probs = _softmax(logits)
    with np.errstate(divide="ignore"):
        logp = np.log(probs)
    entropy = -np.sum(np.where(probs > 0, probs * logp, 0.0))
    order = np.argsort(np.abs(-logp - entropy), kind="stable")
    cum = np.cumsum(probs[order])
    over = np.nonzero(cum > p)[0]
    n = len(order)
    for i in over:
        if min_keep == 0 or i >= min_keep - 1:
            n = int(i) + 1
            break
    order = order[:n]
    return ids[order], logits[order]


def top_p_filter(ids, logits, p: float, min_keep: int = 1):
    """Smallest prefix (candidates sorted descending) whose probability mass reaches p."""
    if p >= 1.0:
        return ids, logits
    order = np.argsort(-logits, kind="stable")
    ids, logits = ids[order], logits[order]
    cum = np.cumsum(_softmax(logits))
    n = int(np.searchsorted(cum, p) + 1)
    n = max(min_keep, min(n, len(ids)))
    return ids[:n], logits[:n]


def min_p_filter(ids, logits, p: float, min_keep: int = 1):
    """Keep candidates whose probability is at least p times the top probability."""
    if p <= 0.0:
        return ids, logits
    keep = logits >= logits.max() + np.log(p)
    if keep.sum() < min_keep:
        order = np.argsort(-logits, kind="stable")[:min_keep]
        keep = np.zeros(len(logits), dtype=bool)
        keep[order] = True
    return ids[keep], logits[keep]


class Sampler:
    """Callable logits row -> token id. temperature <= 0 means greedy.

    Penalties look at the last `penalty_last_n` ids the sampler has seen: the ids it drew
    itself and any fed through :meth:`accept` (e.g. the prompt). `seed` makes runs reproducible."""

    def __init__(self, temperature: float = 0.8, top_k: int = 40, top_p: float = 0.95,
                 min_p: float = 0.05, seed: int | None = None, typical_p: float = 1.0,
                 repeat_penalty: float = 1.0, frequency_penalty: float = 0.0,
                 presence_penalty: float = 0.0, penalty_last_n: int = 64, min_keep: int = 1):
        if top_p <= 0 or top_p > 1:
            raise ValueError(f"Sampler: top_p must be in (0, 1], got {top_p}")
        if min_p < 0 or min_p > 1:
            raise ValueError(f"Sampler: min_p must be in [0, 1], got {min_p}")
        if typical_p <= 0 or typical_p > 1:
            raise ValueError(f"Sampler: typical_p must be in (0, 1], got {typical_p}")
        if repeat_penalty <= 0:
            raise ValueError(f"Sampler: repeat_penalty must be > 0, got {repeat_penalty}")
        if penalty_last_n < 0:
            raise ValueError(f"Sampler: penalty_last_n must be >= 0, got {penalty_last_n}")
        if min_keep < 0:
            raise ValueError(f"Sampler: min_keep must be >= 0, got {min_keep}")
        self.temperature, self.top_k, self.top_p, self.min_p = temperature, top_k, top_p, min_p
        self.typical_p = typical_p
        self.repeat_penalty, self.frequency_penalty = repeat_penalty, frequency_penalty
        self.presence_penalty, self.penalty_last_n, self.min_keep = presence_penalty, penalty_last_n, min_keep
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.history: deque = deque(maxlen=max(penalty_last_n, 0))

    @property
    def _penalized(self) -> bool:
        return self.penalty_last_n > 0 and (self.repeat_penalty != 1.0 or self.frequency_penalty != 0.0
                                            or self.presence_penalty != 0.0)

    def accept(self, ids) -> None:
        """Record ids (prompt or generated) for the penalties."""
        if isinstance(ids, (int, np.integer)):
            ids = [ids]
        if self.penalty_last_n > 0:
            self.history.extend(int(i) for i in ids)

    def reset(self) -> None:
        """Forget the history and restart the random stream from the seed."""
        self.history.clear()
        self.rng = np.random.default_rng(self.seed)

    def penalized_logits(self, logits) -> np.ndarray:
        x = np.asarray(logits, np.float64).ravel()
        if not self._penalized:
            return x
        return apply_penalties(x, self.history, self.repeat_penalty, self.frequency_penalty,
                               self.presence_penalty)

    def candidates(self, logits) -> tuple[np.ndarray, np.ndarray]:
        """Surviving ids and their probabilities after the filters and the temperature."""
        x = self.penalized_logits(logits)
        if x.size == 0:
            raise ValueError("Sampler: empty logits row")
        ids, lg = top_k_filter(np.arange(len(x)), x, self.top_k)
        ids, lg = typical_filter(ids, lg, self.typical_p, self.min_keep)
        ids, lg = top_p_filter(ids, lg, self.top_p, self.min_keep)
        ids, lg = min_p_filter(ids, lg, self.min_p, self.min_keep)
        return ids, _softmax(lg / self.temperature)

    def __call__(self, logits) -> int:
        if self.temperature <= 0:
            tok = greedy(self.penalized_logits(logits)) if self._penalized else greedy(logits)
        else:
            ids, probs = self.candidates(logits)
            tok = int(ids[self.rng.choice(len(ids), p=probs)])
        self.accept(tok)
        return tok


def make_sampler(temperature: float = 0.0, **kw):
    """greedy when temperature <= 0 and no penalty is asked for, else a Sampler."""
    penalties = (kw.get("repeat_penalty", 1.0) != 1.0 or kw.get("frequency_penalty", 0.0) != 0.0
                 or kw.get("presence_penalty", 0.0) != 0.0)
    if temperature <= 0 and not penalties:
        return greedy
    return Sampler(temperature=temperature, **kw)
