"""Speculative decoding: draft sources proposing tokens that the target verifies losslessly."""
from .cost_gate import DraftGate, FixedCost, MeasuredCost
from .decoder import SpeculativeDecoder, check_same_vocab
from .drafter import KINDS, Draft, Drafter, drafter_factory

__all__ = ["KINDS", "Draft", "Drafter", "DraftGate", "FixedCost", "MeasuredCost", "drafter_factory",
           "SpeculativeDecoder", "check_same_vocab"]
