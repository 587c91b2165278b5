"""SpeculativeDecoder: a drafter proposes tokens, one target decode verifies them.

Each step (the order llama.cpp's server uses):

1. the drafter proposes d_1..d_k after the last committed id `id_last` (at position pos0);
2. the target decodes [id_last, d_1..d_k] with every row an output;
3. the drafter's `process` sees that batch and the target rows it asked for (`target_outputs`);
4. verification commits the accepted drafts plus one token of the target's own;
5. the drafter's `accept(n_accepted)`;
6. the target forgets the rejected positions: `seq_rm(seq, pos0 + n_accepted + 1, -1)`.

With greedy sampling (the default) the target's argmax of every verify row is taken in the
graph, so a step copies k + 1 ids, not k + 1 logits rows (target.py); drafters that pick
their own argmax do the same in their graphs. `generate_batch` runs several sequences verified
in one target ubatch when the memory allows; a drafter that serves several sequences
(`multi_seq`: MTP, EAGLE3, DFlash) drafts for all of them in one draft graph per draft
position or block, from one draft memory holding every sequence (`batch_draft=False` gives
each sequence its own drafter, run one after the other).

With a deterministic sampler every committed token is the target's own
choice, so the stream is `ctx.generate(prompt, n)` exactly as long as the target computes a
row the same way in a batch of k + 1 tokens as alone (kernels that switch paths with the
batch width break ties differently: on quantized models a late token can then differ, as
with llama.cpp). With a `Sampler` at temperature > 0 rejection sampling keeps the target's
distribution. A recurrent target can undo only its `n_rs_seq` trailing positions,
so n_max is clamped to n_rs_seq (a recurrent target with n_rs_seq = 0 is refused).
"""
from __future__ import annotations

import inspect
import time

import numpy as np

from ..context import Generation
from ..sampling import Sampler, greedy
from .cost_gate import DraftGate
from .draft_length import DraftLength
from .drafter import Drafter, drafter_factory
from .one_lane import run_one
from .rounds import DecoderRounds
from .target import decode_steps

__all__ = ["SpeculativeDecoder", "check_same_vocab"]


def _n_vocab(model) -> int:
    from ..models import load_hparams
    hp = getattr(model, "hparams", None)
    n = getattr(hp, "n_vocab", None)
    return int(n) if n is not None else int(load_hparams(model).n_vocab)


def check_same_vocab(target_model, draft_model, kind: str) -> None:
    """Refuse a draft model whose vocabulary differs from the target's (size, then token
    texts where both files carry them): draft ids would mean different tokens."""
    nt, nd = _n_vocab(target_model), _n_vocab(draft_model)
    vt, vd = getattr(target_model, "vocab", None), getattr(draft_model, "vocab", None)
    if nd == 0 and not vd:
        return   # the draft file declares no vocabulary: it uses the target's
    if nt != nd:
        raise ValueError(f"SpeculativeDecoder({kind!r}): the draft model's vocabulary has {nd} "
                         f"tokens but the target's has {nt}; a draft must share the target's "
                         f"vocabulary")
    if vt is not None and vd is not None and list(vt) != list(vd):
        i = next(i for i, (a, b) in enumerate(zip(vt, vd)) if a != b)
        raise ValueError(f"SpeculativeDecoder({kind!r}): the draft model's token {i} is "
                         f"{vd[i]!r} but the target's is {vt[i]!r}; a draft must share the "
                         f"target's vocabulary")


def _eog_ids(model) -> frozenset:
    try:
        return frozenset(int(i) for i in model.tokenizer.eog_ids)
    except (ValueError, AttributeError, KeyError):
        return frozenset()


def _positive_int(name, v, minimum=1):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
        raise ValueError(f"SpeculativeDecoder: {name}={v!r} must be an integer >= {minimum}")
    return int(v)


class SpeculativeDecoder(DecoderRounds):
    """Generate with drafts of `kind` ("ngram", "synthetic", "mtp", "eagle3", "dflash",
    "dflash2", "dspark", or a Drafter instance) verified by the target context `ctx`.

    draft: the draft model (None for kinds that need none). n_max: most tokens proposed per
    step (a drafter or the target's rollback depth may lower it: see `n_max` after init).
    n_min: shorter drafts are dropped (the step then decodes id_last alone). sampler: None
    or `greedy` for greedy decoding, any deterministic callable logits -> id, or a `Sampler`
    (temperature > 0: rejection sampling). seed: the verifier's random stream (rejection
    sampling, synthetic acceptance). adaptive (default True, False for synthetic
    acceptance): shorten drafts after rejections (to n_accepted + 1, doubling back after a
    fully accepted one) and skip drafting for 1, 2, 4 .. 16 steps when even one-token drafts
    fail, so a draft that never matches costs about plain decoding; after a round that asked
    the drafter (or the gate) and verified nothing, the next 0, 1, 2, 4 .. MAX_QUIET rounds
    (up to MAX_QUIET_LONG where an ask costs more than ASK_SHARE of the stretch's plain
    steps, or until the gate's next probe where it declines every draft class it has seen)
    decode plainly
    without asking (stats "n_quiet_rounds"; an accepted draft asks every
    round again), their tokens handed to the drafter at the next round that asks; "cost" also caps the
    draft at the length with the most expected tokens per second by the verify cost per
    width measured as it runs and the recent acceptance per position (draft_length.py;
    timing-dependent lengths); False drafts n_max every step. With an adaptive mode the
    cost gate (cost_gate, default True; cost_gate.py) also verifies only the longest prefix
    of each draft, possibly none, whose expected tokens per second beat a plain step's, by
    the cost of a plain step and of a verify per width, plus a draft model's own cost per
    drafted length (cost_model: None measures them in CPU seconds as it runs; a callable
    width -> seconds, FixedCost(fn, draft=fn_j) or an object with cost(width) and optionally
    draft_cost(j) fixes them) and the acceptance seen per
    draft class, re-probing dropped classes now and then; it is bypassed with several
    sequences per round. batch_draft (default True):
    generate_batch drafts for all sequences together when the drafter can (`multi_seq`);
    False makes one drafter per sequence, each drafting alone. Other keyword options go to
    the drafter."""

    MAX_BACKOFF = DraftLength.MAX_BACKOFF
    # longest stretch of plain rounds between two asks of the drafter: an ask costs a few
    # tens of us (a tenth to a third of a small target's step), and a copy that starts in
    # the meantime is found this many tokens late (but by a drafter with a per-token hook,
    # Drafter.absorb: the n-gram drafter ends the stretch when the stream starts repeating,
    # so its stretches grow to MAX_QUIET_LONG). Where an ask costs
    # more than ASK_SHARE of MAX_QUIET plain steps (measured, or the cost model's ask), the
    # stretch grows until it does not, up to MAX_QUIET_LONG.
    MAX_QUIET = 8
    MAX_QUIET_LONG = 32
    ASK_SHARE = 0.03
    PLAIN_SAMPLE = 4      # the one-sequence loop times every 4th plain step for the gate

    def __init__(self, ctx, kind: str, draft=None, n_max: int = 4, n_min: int = 0,
                 sampler=None, seed: int | None = 0, seq_id: int = 0,
                 adaptive: bool | None = None, batch_draft: bool = True,
                 cost_model=None, cost_gate: bool = True, **options):
        if isinstance(kind, Drafter):        # a ready drafter instance (custom draft sources)
            factory, drafter, kind = None, kind, kind.kind or type(kind).__name__
        else:
            factory = drafter_factory(kind)  # unknown kind: ValueError before anything else
        n_max = _positive_int("n_max", n_max)
        n_min = _positive_int("n_min", n_min, 0)
        if n_min > n_max:
            raise ValueError(f"SpeculativeDecoder: n_min={n_min} is larger than n_max={n_max}")
        self.ctx, self.kind, self.seq_id = ctx, kind, ctx._check_seq(seq_id, "SpeculativeDecoder")
        self.sampler = sampler or greedy
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        # a recurrent target undoes at most n_rs_seq trailing positions: draft no more
        self.rollback_limit = getattr(ctx.memory, "n_rs_seq", None)
        if self.rollback_limit is not None:
            if self.rollback_limit == 0:
                raise ValueError(
                    f"SpeculativeDecoder: the target's memory ({type(ctx.memory).__name__}) keeps "
                    f"recurrent state that cannot roll back rejected drafts with n_rs_seq=0; create "
                    f"the Context with n_rs_seq={n_max} (the rollback depth) to speculate")
        self.n_max_requested = n_max
        n_max = min(n_max, self.rollback_limit or n_max)
        if factory is None:
            if draft is not None or options:
                raise ValueError("SpeculativeDecoder: a drafter instance takes no draft model or "
                                 "options (configure it before passing it)")
            self.drafter = drafter
        else:
            if draft is not None and getattr(factory, "check_vocab", True):
                check_same_vocab(ctx.model, draft, kind)
            if "kind" in inspect.signature(factory).parameters:
                # one class serves several kinds (dflash/dflash2/dspark): it checks the file
                options.setdefault("kind", kind)
            self.drafter = factory(ctx, draft, **options)
        self._factory, self._draft_model, self._options = factory, draft, options
        # one drafter for every sequence of generate_batch (its memory holds them all)
        self.batch_draft = bool(batch_draft) and bool(getattr(self.drafter, "multi_seq", False))
        self._n_bind, self._extra = n_max, []     # drafters of sequences 2.. (generate_batch)
        n_eff = int(self.drafter.bind(ctx, n_max))
        if not 0 < n_eff <= n_max:
            raise ValueError(f"SpeculativeDecoder: the {kind!r} drafter made n_max {n_max} -> "
                             f"{n_eff}; expected 1..{n_max}")
        self.n_max, self.n_min = n_eff, min(n_min, n_eff)
        names = tuple(getattr(self.drafter, "target_outputs", ()) or ())
        if names:
            ctx.outputs = tuple(dict.fromkeys(tuple(ctx.outputs) + names))
        self.tap_names = names
        if adaptive is None:    # on, except where the draft length is what is measured
            adaptive = getattr(self.drafter, "acceptance_probs", None) is None
        if adaptive not in (True, False, "cost"):
            raise ValueError(f"SpeculativeDecoder: adaptive={adaptive!r}; expected True, False "
                             f"or 'cost'")
        self.adaptive = adaptive
        self._length = DraftLength(self.n_max)
        if not isinstance(cost_gate, bool):
            raise ValueError(f"SpeculativeDecoder: cost_gate={cost_gate!r} must be True or False")
        self._gate = (DraftGate(self.n_max, cost_model, self.drafter.class_prior,
                                count_draft=not self._gate_after_draft(self.drafter),
                                n_min=self.n_min)
                      if cost_gate and adaptive else None)
        self.cost_model = None if self._gate is None else self._gate.model
        self._set_draft_mode(self.drafter)
        # verify batches take every width 1..n_max+1: keep one graph per width (and the
        # prompt's) instead of rebuilding graphs as the draft length changes
        ctx.MAX_GRAPHS = max(ctx.MAX_GRAPHS, self.n_max + 3)
        self.eog = _eog_ids(ctx.model)
        self.stats: dict = {}
        self._reset_stats()

    # ---- helpers --------------------------------------------------------------------------
    def _is_eog(self, tok) -> bool:
        return int(tok) in self.eog

    @property
    def stochastic(self) -> bool:
        return isinstance(self.sampler, Sampler) and self.sampler.temperature > 0

    @property
    def greedy_in_graph(self) -> bool:
        """Greedy verification reads the target's argmax ids taken in the graph (one id per
        row) instead of copying logits rows out; any other sampler needs the rows."""
        return self.sampler is greedy

    def _new_drafter(self):
        """A drafter for one more sequence, set up like the first."""
        if self._factory is None:
            d = self.drafter.clone()
        else:
            d = self._factory(self.ctx, self._draft_model, **self._options)
        if int(d.bind(self.ctx, self._n_bind)) != self.n_max:
            raise RuntimeError(f"SpeculativeDecoder: a second {self.kind!r} drafter clamped n_max "
                               f"differently from the first")
        self._set_draft_mode(d)
        return d

    def _set_draft_mode(self, d) -> None:
        # the decoder never reads draft logits: drafts that pick their argmax can take it in
        # the graph (a drafter still copies rows when p_min needs their probabilities)
        if hasattr(d, "sample_in_graph"):
            d.sample_in_graph = True

    def _reset_stats(self) -> None:
        self.stats = {"kind": self.kind, "n_max": self.n_max, "n_drafted": 0, "n_accepted": 0,
                      "n_verify_steps": 0, "n_plain_steps": 0, "mean_acceptance_length": 0.0,
                      "acceptance_rate": 0.0, "acceptance_rate_per_pos": [0.0] * self.n_max,
                      "steps": [], "draft_s": 0.0, "verify_s": 0.0, "prompt_s": 0.0,
                      "gen_s": 0.0, "n_tokens": 0, "tokens_per_s": 0.0, "n_seqs": 0,
                      "n_target_decodes": 0, "n_rounds": 0, "draft_calls": 0,
                      "draft_process_calls": 0, "n_gated": 0, "n_probes": 0,
                      "n_quiet_rounds": 0,
                      "valid": bool(getattr(self.drafter, "valid", True))}
        self._acc_per_pos = np.zeros(self.n_max, np.int64)

    def _finish_stats(self) -> None:
        s = self.stats
        steps = s["n_verify_steps"]
        s["mean_acceptance_length"] = 1.0 + s["n_accepted"] / steps if steps else 0.0
        s["acceptance_rate"] = s["n_accepted"] / s["n_drafted"] if s["n_drafted"] else 0.0
        s["acceptance_rate_per_pos"] = [float(x) / steps if steps else 0.0
                                        for x in self._acc_per_pos]
        s["tokens_per_s"] = max(s["n_tokens"] - s["n_seqs"], 0) / max(s["gen_s"], 1e-9)
        if self._gate is not None:
            s["n_gated"], s["n_probes"] = self._gate.n_gated, self._gate.n_probes

    # ---- adaptive draft length (see draft_length.py) -----------------------------------------
    def _draft_budget(self, lane) -> int:
        if not self.adaptive:
            return self.n_max
        if lane.skip > 0:
            lane.skip -= 1
            return 0
        if lane.quiet > 0:
            lane.quiet -= 1
            self.stats["n_quiet_rounds"] += 1
            return 0
        if self.adaptive == "cost":
            return self._length.best_length(lane.n_cur)
        return lane.n_cur

    def _budget_for(self, lane) -> int:
        """_draft_budget, or for a drafter with its own length rule (`own_length`) n_max
        with the back-off length left in its length_hint (0 while drafting pauses)."""
        k = self._draft_budget(lane)
        d = lane.drafter
        if d.own_length:
            d.length_hint = k if self.adaptive else 0
            if self.adaptive and k > 0:
                return self.n_max
        return k

    def _control(self, lane, n_drafted: int, n_acc: int) -> None:
        if not self.adaptive or n_drafted == 0:
            return
        if self.adaptive == "cost":      # only the cost rule reads the per-position rates
            self._length.observe_accept(n_drafted, n_acc)
        if n_acc == n_drafted:
            lane.n_cur, lane.backoff = min(self.n_max, 2 * lane.n_cur), 1
        elif n_acc == 0 and lane.n_cur == 1:
            lane.skip, lane.backoff = lane.backoff, min(2 * lane.backoff, self.MAX_BACKOFF)
        else:
            lane.n_cur = max(1, n_acc + 1)
            if n_acc:
                lane.backoff = 1

    def _after_consult(self, lane, n_drafted: int, n_acc: int, round_no=None) -> None:
        """The consultation back-off, after a round that asked the drafter (or the gate):
        one that verified nothing leaves the next `span` rounds plain without asking (0, 1,
        2, 4 .. MAX_QUIET after consecutive ones, .. MAX_QUIET_LONG for a drafter with an
        absorb hook, which wakes the decoder itself: a drafter that keeps proposing nothing
        worth verifying costs a lookup every MAX_QUIET + 1 (or MAX_QUIET_LONG + 1) tokens,
        not every token, and one miss between accepted drafts costs nothing); an accepted
        draft asks every round
        again. The gate's re-probes still come, at the next round that asks; where the gate
        declines every draft class it has seen, a round that verified nothing (a declined
        draft, or with round_no, the round's number, one sequence, an empty one) leaves a
        stretch that lasts until the earliest of those classes' next probes (up to
        MAX_QUIET_LONG): asks before it could only be declined."""
        if not self.adaptive:
            return
        gate = self._gate
        if n_drafted == 0:
            # a drafter that sees every plain round's token (absorb) wakes the decoder when
            # the stream starts repeating: asks in between only find what it cannot see
            # (short matches, substitutions), so after many misses in a row (fresh text)
            # they are spaced as far as the longest stretch. The first stretches after a
            # miss stay short: in copy-heavy text they find where the copy resumes (starting
            # them at MAX_QUIET cut SmolLM2's acceptance on a mirrored continuation by 10%)
            absorbs = lane.drafter.absorb is not None
            shortest = self.MAX_QUIET_LONG if absorbs else self.MAX_QUIET
            if gate is None:
                lane.quiet, lane.span = lane.span, min(max(2 * lane.span, 1), shortest)
                return
            # the stretch cap and, where no class seen can probe before then (asks could
            # only be declined), the rounds to stay quiet
            read = gate.after_miss(shortest, self.MAX_QUIET_LONG, self.ASK_SHARE, round_no,
                                   self.MAX_QUIET)
            if read is None:
                return   # the gate declines while it learns a plain round's cost: no verdict
            cap, hint = read
            lane.quiet, lane.span = lane.span, min(max(2 * lane.span, 1), cap)
            lane.quiet = max(lane.quiet, min(hint, self.MAX_QUIET_LONG))
        elif n_acc > 0:
            lane.span = 0

    def _wake_declined(self, drafter, round_no: int) -> bool:
        """Whether the one-sequence gate would decline whatever an absorbing drafter's wake
        at round round_no leads to (a draft of one of its `wake_classes`): the wake is then
        not worth an ask."""
        gate, classes = self._gate, drafter.wake_classes
        return gate is not None and bool(classes) and gate.declines_every(classes, round_no)

    # ---- generation -----------------------------------------------------------------------
    def generate(self, prompt_ids, n: int, stop=None) -> Generation:
        """Decode prompt_ids, then commit up to n new ids. Like Context.generate: every id but
        the last is decoded, and it stops early (stop_reason "n_ctx") when the sequence
        reaches n_ctx. `stop(id)` true ends the generation after that id (stop_reason
        "stop", as TokenStream does). Statistics of this call are in `stats`."""
        return self.generate_batch([prompt_ids], n, stop=stop, seq_ids=[self.seq_id])[0]

    def generate_batch(self, prompts, n: int, stop=None, seq_ids=None) -> list:
        """Generate up to n ids after each prompt, one sequence per prompt (seq_ids, default
        0, 1, ..; the target Context needs n_seq_max >= len(prompts)), all advancing together:
        each step drafts for every unfinished sequence and verifies all the drafts in one
        target decode when the memory takes several sequences per ubatch (a KV cache).
        Each sequence has its own draft state (in the one drafter, or its own drafter with
        batch_draft=False or a drafter without `multi_seq`), sampler stream and verifier
        stream (sequence 0 keeps the decoder's), so with greedy sampling result i is exactly
        ctx.generate(prompts[i], n). Returns one Generation per prompt; `stats` sums them
        (steps carry "seq" and "round", the draft + verify round they belong to; n_rounds
        counts rounds; draft_calls and draft_process_calls count the draft graphs run while
        drafting and while feeding the draft the target's batches: with batch_draft one per
        draft position or block per round, whatever the number of sequences)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"generate: n must be an integer >= 0, got {n!r}")
        ctx = self.ctx
        prompts = list(prompts)
        if not prompts:
            raise ValueError("generate_batch: no prompts")
        if seq_ids is None:
            seq_ids = list(range(len(prompts))) if len(prompts) > 1 else [self.seq_id]
        seq_ids = [ctx._check_seq(s, "SpeculativeDecoder.generate_batch") for s in seq_ids]
        if len(seq_ids) != len(prompts) or len(set(seq_ids)) != len(seq_ids):
            raise ValueError(f"generate_batch: {len(prompts)} prompts need as many distinct "
                             f"seq_ids, got {seq_ids}")
        tokens = [ctx._check_tokens(p) for p in prompts]
        lanes = self._lanes(seq_ids)
        self._reset_stats()
        if self._gate is not None:
            self._gate.reset_acceptance()
        st = self.stats
        st["n_seqs"] = len(lanes)
        greedy_ids = self.greedy_in_graph
        t_prompt_draft = 0.0
        # the prompts: one ubatch for all when they fit (a KV cache), else one by one
        ta = time.perf_counter()
        pos_prompt = [ctx.n_past(lane.seq) for lane in lanes]
        all_rows = decode_steps(ctx, [(lane.seq, tok) for lane, tok in zip(lanes, tokens)],
                                greedy_ids, self.tap_names, logits_all=False)
        st["prompt_s"] = time.perf_counter() - ta
        tb = time.perf_counter()
        self._process(lanes, [(lane.seq, tok, p0, rows.taps) for lane, tok, p0, rows
                              in zip(lanes, tokens, pos_prompt, all_rows)])
        t_prompt_draft += time.perf_counter() - tb
        for lane, rows in zip(lanes, all_rows):
            if n > 0:
                lane.id_last = int(rows.ids[-1]) if rows.ids is not None \
                    else int(lane.sampler(rows.logits[-1]))
                lane.out.append(lane.id_last)
                if stop is not None and stop(lane.id_last):
                    lane.out.stop_reason = "stop"
        t1 = time.perf_counter()
        st["draft_s"] = t_prompt_draft
        active = [ln for ln in lanes if len(ln.out) < n and ln.out.stop_reason == "n"]
        if len(active) == 1 and len(lanes) == 1 and not self._extra and self._plain_ok:
            self._run_one(active[0], n, stop)
            active = []
        while active:
            self._step(active, n, stop)
            active = [ln for ln in active if len(ln.out) < n and ln.out.stop_reason == "n"]
        # the drafters see the last plain rounds too (a later call continues the sequences)
        tf = time.perf_counter()
        if self._flush(lanes):
            st["draft_s"] += time.perf_counter() - tf
        # generation time counts the drafters' processing of the prompts (as before the
        # first step of a single sequence)
        st["gen_s"] = time.perf_counter() - t1 + t_prompt_draft
        st["n_tokens"] = sum(len(ln.out) for ln in lanes)
        self._finish_stats()
        return [ln.out for ln in lanes]

    def _run_one(self, lane, n: int, stop) -> None:
        run_one(self, lane, n, stop)

    @staticmethod
    def _gate_after_draft(d) -> bool:
        """Whether the cost gate weighs this drafter's draft once drafted (its length rule is
        its own, or drafting costs no draft graph) rather than its budget before drafting."""
        return bool(d.own_length) or not tuple(getattr(d, "draft_contexts", lambda: ())())

    @property
    def _plain_ok(self) -> bool:
        """Whether _run_one serves this decoder: greedy ids, no target taps, no synthetic
        acceptance, no draft graphs to count."""
        d, cached = self.drafter, self.__dict__.get("_plain_ok_cached")
        if cached is not None and cached[0] is self.sampler and cached[1] is d:
            return cached[2]
        ok = (self.greedy_in_graph and not self.tap_names
              and getattr(d, "acceptance_probs", None) is None
              and not tuple(getattr(d, "draft_contexts", lambda: ())()))
        self.__dict__["_plain_ok_cached"] = (self.sampler, d, ok)
        return ok

    def reset(self) -> None:
        """Forget the target's sequences and the drafters' state."""
        self.ctx.reset()
        self.drafter.reset()
        for d, _, _ in self._extra:
            if d is not None:
                d.reset()
