"""The contract between SpeculativeDecoder and a draft source.

A drafter proposes tokens that follow the target's last committed token; the decoder verifies
them with one target decode and tells the drafter how many it kept. Drafters that read the
target's hidden states (MTP, EAGLE3, DFlash) name the target tensors they need in
`target_outputs`; the decoder keeps those rows for every token the target decodes and hands
them to `process`.

Kinds are looked up lazily in KINDS so that each draft family lives in its own module.
"""
from __future__ import annotations

import copy
import importlib
from dataclasses import dataclass

import numpy as np


@dataclass
class Draft:
    """Tokens proposed after id_last. `probs` [len(ids), n_vocab] is the distribution each
    proposed token was DRAWN from (rejection sampling divides by it); None for drafts that
    pick their tokens deterministically (n-gram lookup, the argmax of a draft model), which
    are point masses: giving the softmax of an argmax draft would bias the output. `logits` keeps the
    raw draft logits rows when the drafter has them (tests compare them with llama.cpp)."""
    ids: list
    probs: np.ndarray | None = None
    logits: np.ndarray | None = None


class Drafter:
    """Base class of draft sources. Subclasses override what they need."""

    kind: str = ""
    # cb names of target tensors to keep for every decoded token, e.g. ("l_inp-2",);
    # process() receives them as {name: float32 [n_tokens, width]}
    target_outputs: tuple = ()
    # False when the committed stream is not the target's (synthetic acceptance)
    valid: bool = True
    # synthetic acceptance: per-position conditional acceptance probabilities that replace
    # the comparison with the target (None: verify for real)
    acceptance_probs = None
    # the decoder refuses a draft model whose vocabulary differs from the target's before
    # the drafter is built; a drafter that maps its own vocabulary (EAGLE3's d2t) sets False
    # and checks what it needs itself
    check_vocab: bool = True
    # set by SpeculativeDecoder, which reads no draft logits: a drafter that picks argmax
    # tokens may then take them in the graph and copy ids instead of logits rows
    sample_in_graph: bool = False
    # a drafter that knows how far its draft can be trusted (n-gram: the match length) sets
    # True: the adaptive decoder then asks it for up to n_max tokens and leaves the back-off
    # length in `length_hint`, which the drafter may exceed where it is confident
    own_length: bool = False
    length_hint: int = 0
    # what kind of draft the last draft() made, for the decoder's cost gate, which keeps an
    # acceptance estimate per class (n-gram: substitution, short, medium, long match)
    draft_class = 0

    # None, or a cheap per-token hook absorb(token, pos) -> bool for the one-sequence loop's
    # plain rounds: the drafter takes each token as it is decoded (instead of in one process
    # call at the next ask) and returns True when the stream has just become worth an ask
    # (the n-gram drafter: its end repeats an earlier place), which ends a quiet stretch early.
    # Such a drafter keeps id_last from draft(): after an ask that verifies nothing (an empty
    # or declined draft) the decoder calls neither process nor accept for that round
    absorb = None
    # the draft classes (draft_class) an absorb wake's ask can lead to: the decoder ignores a
    # wake where its cost gate would decline a draft of each of them at any length
    wake_classes = ()

    def class_prior(self, cls):
        """The cost gate's prior (q1, q2) for draft class cls: the chances that a draft's
        first token is accepted, and a later one after accepted ones; None: the gate's."""
        return None

    def bind(self, target_ctx, n_max: int) -> int:
        """Attach to the target context before the first decode; return the effective n_max
        (a drafter trained on fixed blocks clamps it)."""
        self.target = target_ctx
        return n_max

    def process(self, tokens: np.ndarray, pos0: int, taps: dict) -> None:
        """The target has decoded tokens at positions pos0.. (the prompt, or a verify batch
        [id_last, d1..dn]); taps holds the requested target rows for those tokens."""

    def draft(self, id_last: int, pos0: int, n_max: int) -> Draft:
        """Propose up to n_max tokens to follow id_last, which sits at position pos0 (it is not
        in the target's memory yet). An empty draft means: decode id_last alone."""
        raise NotImplementedError

    def accept(self, n_accepted: int) -> None:
        """The last verify step kept n_accepted of the proposed tokens; positions after
        pos0 + n_accepted are gone from the target (roll the draft's own state back too)."""

    def reset(self) -> None:
        """Forget every sequence (the decoder reset its target)."""

    # ---- several sequences in one drafter -------------------------------------------------
    # A drafter with `multi_seq` keeps the state of every target sequence itself (its draft
    # memory holds them under the target's seq ids), so generate_batch runs one draft graph
    # over all sequences per draft position (or per block) instead of one per sequence. The
    # one-sequence methods above then act on sequence `seq` (default 0).
    multi_seq: bool = False

    def process_seqs(self, items) -> None:
        """process() for several sequences: items [(seq, tokens, pos0, taps)]."""
        raise NotImplementedError

    def draft_seqs(self, items) -> list:
        """draft() for several sequences: items [(seq, id_last, pos0, n_max)]; one Draft each."""
        raise NotImplementedError

    def accept_seqs(self, items) -> None:
        """accept() for several sequences: items [(seq, n_accepted)]."""
        raise NotImplementedError

    def draft_contexts(self) -> tuple:
        """The contexts whose graph computes are the draft's (the decoder counts them)."""
        ctx = getattr(self, "ctx", None)
        return () if ctx is None else (ctx,)

    def clone(self) -> "Drafter":
        """A fresh drafter configured like this one, for another sequence of
        SpeculativeDecoder.generate_batch (the target context is shared, the rest copied).
        Drafters that own a draft context override it."""
        target = getattr(self, "target", None)
        try:
            return copy.deepcopy(self, {} if target is None else {id(target): target})
        except TypeError as e:
            raise TypeError(f"{type(self).__name__}: cannot copy this drafter for another "
                            f"sequence ({e}); override Drafter.clone()") from None


# kind -> "module:factory"; the factory is called as factory(target_ctx, draft_model, **options)
KINDS = {
    "ngram": "pyggml.llm.speculative.ngram:NgramDrafter",
    "synthetic": "pyggml.llm.speculative.synthetic:SyntheticDrafter",
    "mtp": "pyggml.llm.speculative.mtp:MtpDrafter",
    "eagle3": "pyggml.llm.speculative.eagle3:Eagle3Drafter",
    "dflash": "pyggml.llm.speculative.dflash:DFlashDrafter",
    "dflash2": "pyggml.llm.speculative.dflash:DFlashDrafter",
    "dspark": "pyggml.llm.speculative.dflash:DFlashDrafter",
}


def drafter_factory(kind: str):
    """The factory registered for kind, imported on first use."""
    if kind not in KINDS:
        raise ValueError(f"SpeculativeDecoder: unknown kind {kind!r}; expected one of "
                         f"{sorted(KINDS)}")
    module, name = KINDS[kind].split(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise NotImplementedError(f"SpeculativeDecoder: kind {kind!r} is not built ({e})") from None
