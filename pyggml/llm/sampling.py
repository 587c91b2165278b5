"""Host-side token sampling from a logits row: greedy, or a seeded chain
top-k -> top-p -> min-p -> temperature -> draw (the order of llama.cpp's common sampler)."""
from __future__ import annotations

import numpy as np


def greedy(logits) -> int:
    """Argmax (the lowest id on ties)."""
    return int(np.argmax(np.asarray(logits)))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - np.max(x))
    return e / e.sum()


def top_k_filter(ids: np.ndarray, logits: np.ndarray, k: int):
    """Keep the k largest (k <= 0: keep all). Returns candidates sorted by logit, descending."""
    order = np.argsort(-logits, kind="stable")
    if k > 0:
        order = order[:k]
    return ids[order], logits[order]


def top_p_filter(ids, logits, p: float, min_keep: int = 1):
    """Smallest prefix (candidates sorted descending) whose probability mass reaches p."""
    if p >= 1.0:
        return ids, logits
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
        keep[:min_keep] = True
    return ids[keep], logits[keep]


class Sampler:
    """Callable logits row -> token id. temperature <= 0 means greedy."""

    def __init__(self, temperature: float = 0.8, top_k: int = 40, top_p: float = 0.95,
                 min_p: float = 0.05, seed: int | None = None):
        if top_p <= 0 or top_p > 1:
            raise ValueError(f"Sampler: top_p must be in (0, 1], got {top_p}")
        if min_p < 0 or min_p > 1:
            raise ValueError(f"Sampler: min_p must be in [0, 1], got {min_p}")
        self.temperature, self.top_k, self.top_p, self.min_p = temperature, top_k, top_p, min_p
        self.rng = np.random.default_rng(seed)

    def candidates(self, logits) -> tuple[np.ndarray, np.ndarray]:
        """Surviving ids and their probabilities after the filters and the temperature."""
        x = np.asarray(logits, np.float64).ravel()
        ids, lg = top_k_filter(np.arange(len(x)), x, self.top_k)
        ids, lg = top_p_filter(ids, lg, self.top_p)
        ids, lg = min_p_filter(ids, lg, self.min_p)
        return ids, _softmax(lg / self.temperature)

    def __call__(self, logits) -> int:
        if self.temperature <= 0:
            return greedy(logits)
        ids, probs = self.candidates(logits)
        return int(ids[self.rng.choice(len(ids), p=probs)])


def make_sampler(temperature: float = 0.0, **kw):
    """greedy when temperature <= 0, else a Sampler."""
    return greedy if temperature <= 0 else Sampler(temperature=temperature, **kw)
