"""Synthetic acceptance (benchmarks only): drafts whose acceptance is forced.

The target verifies every step as usual (same decode cost as real speculation), but draft
position i is accepted with a fixed conditional probability c_i = r_i / r_{i-1}, so the
unconditional rate of position i is r_i and the mean acceptance length is 1 + sum r_i. The
committed stream mixes draft tokens with the target's, so it is not the target's output:
the decoder's stats say valid=False.

Options (keywords of SpeculativeDecoder), exactly one of:
  synth_rates  r_1 >= ... >= r_n in [0, 1], one per draft position (n = effective n_max)
  mean_length  L in [1, n_max + 1]: r_i = p^i with sum p^i = L - 1
and synth_seed (default 0) for the drafted token ids, which are random.
"""
from __future__ import annotations

import numpy as np

from .drafter import Draft, Drafter
from .verify import conditional_rates, synthetic_rates


class SyntheticDrafter(Drafter):
    kind = "synthetic"
    valid = False

    def __init__(self, target_ctx, draft_model=None, synth_rates=None, mean_length=None,
                 synth_seed: int = 0):
        if draft_model is not None:
            raise ValueError("SpeculativeDecoder('synthetic'): synthetic acceptance uses no draft "
                             "model (pass draft=None)")
        if (synth_rates is None) == (mean_length is None):
            raise ValueError("SpeculativeDecoder('synthetic'): give exactly one of synth_rates= "
                             "(per-position rates) or mean_length=")
        self.target = target_ctx
        self.synth_rates, self.mean_length = synth_rates, mean_length
        self.rng = np.random.default_rng(synth_seed)
        self.n_vocab = int(target_ctx.hparams.n_vocab)
        self.rates = self.acceptance_probs = None

    def bind(self, target_ctx, n_max):
        self.rates = synthetic_rates(n_max, mean_length=self.mean_length, rates=self.synth_rates)
        self.acceptance_probs = conditional_rates(self.rates)
        return n_max

    def draft(self, id_last, pos0, n_max):
        return Draft(ids=self.rng.integers(0, self.n_vocab, size=n_max).tolist())
