"""The rounds of SpeculativeDecoder.generate_batch: its lanes (one per sequence), the drafter
calls of a round (one for all sequences, or one per sequence), the general draft + verify
round (`_step`) and the verification of a draft against the target's rows. The decoder's
setup, its adaptive draft length and consultation back-off are in decoder.py; the rounds of
one sequence without draft graphs in one_lane.py."""
from __future__ import annotations

import copy
import time

import numpy as np

from ..context import Generation
from ..sampling import Sampler
from .drafter import Draft
from .target import StepRows, decode_steps, shares_ubatch
from .verify import verify_forced, verify_greedy, verify_rejection


class _SamplerRows:
    """Target distributions of a stochastic Sampler, computed row by row: before row i the
    sampler records the tokens committed ahead of it (its penalties see the stream)."""

    def __init__(self, sampler: Sampler, logits: np.ndarray, draft):
        self.sampler, self.logits, self.draft = sampler, logits, draft
        self.n_seen = 0

    def __getitem__(self, i):
        while self.n_seen < i:
            self.sampler.accept(int(self.draft[self.n_seen]))
            self.n_seen += 1
        ids, probs = self.sampler.candidates(self.logits[i])
        p = np.zeros(self.logits.shape[1], np.float64)
        p[ids] = probs
        return p

    def finish(self, result) -> None:
        for tok in result[self.n_seen:]:
            self.sampler.accept(int(tok))


class DecoderRounds:
    """SpeculativeDecoder's rounds over its lanes (a mixin: the decoder holds the state)."""

    def _take_draft(self, d, k_max: int):
        if d is None:
            return [], None
        if not isinstance(d, Draft):
            d = Draft(ids=list(d))
        ids = [int(t) for t in list(d.ids)[:k_max]]
        if len(ids) < self.n_min:
            return [], None
        n_vocab = self.ctx.hparams.n_vocab
        for i, t in enumerate(ids):
            if not 0 <= t < n_vocab:
                raise ValueError(f"SpeculativeDecoder: the {self.kind!r} drafter proposed token id "
                                 f"{t} at position {i}, outside the vocabulary [0, {n_vocab})")
        probs = None if d.probs is None else np.asarray(d.probs)[:len(ids)]
        return ids, probs

    def _verify(self, lane, rows: StepRows, ids, probs):
        forced = getattr(lane.drafter, "acceptance_probs", None)
        if rows.ids is not None:          # greedy ids from the graph: "sampling" is reading one
            if forced is not None:
                return verify_forced(rows.ids, ids, forced, int, lane.rng, self._is_eog)
            return verify_greedy(rows.ids, ids, int, self._is_eog)
        logits = rows.logits
        if forced is not None:
            return verify_forced(logits, ids, forced, lane.sampler, lane.rng, self._is_eog)
        if self.stochastic:
            target_rows = _SamplerRows(lane.sampler, logits, ids)
            result = verify_rejection(target_rows, ids, probs, lane.rng, self._is_eog)
            target_rows.finish(result)
            return result
        return verify_greedy(logits, ids, lane.sampler, self._is_eog)

    def _lanes(self, seq_ids) -> list:
        """Lane i of a call: sequence 0 uses the decoder's drafter and streams; lanes 1.. get
        their own, made once and kept, so each lane's random streams continue across calls
        as the first one's do."""
        while len(self._extra) < len(seq_ids) - 1:
            i = len(self._extra) + 1
            drafter = None if self.batch_draft else self._new_drafter()
            sampler = self.sampler
            if isinstance(sampler, Sampler):   # its own history and random stream
                sampler = copy.deepcopy(sampler)
                sampler.reset()
                sampler.rng = np.random.default_rng(None if sampler.seed is None
                                                    else [int(sampler.seed), i])
            rng = np.random.default_rng(None if self.seed is None else [int(self.seed), i])
            self._extra.append((drafter, sampler, rng))
        lanes = [_Lane(seq_ids[0], self.drafter, self.sampler, self.rng, self.n_max)]
        for s, (drafter, sampler, rng) in zip(seq_ids[1:], self._extra):
            lanes.append(_Lane(s, drafter or self.drafter, sampler, rng, self.n_max))
        return lanes

    # ---- the drafter calls of a step: one for all sequences, or one per sequence ---------------
    def _graph_count(self, lanes) -> int:
        drafters = {id(ln.drafter): ln.drafter for ln in lanes}.values()
        return sum(getattr(c, "timings", {}).get("n_ubatch", 0) for d in drafters
                   for c in getattr(d, "draft_contexts", lambda: ())())

    def _process(self, lanes, items) -> None:
        """items [(seq, tokens, pos0, taps)], one per lane."""
        g0 = self._graph_count(lanes)
        if self.batch_draft:
            self.drafter.process_seqs(items)
        else:
            for lane, (_, tokens, pos0, taps) in zip(lanes, items):
                lane.drafter.process(tokens, pos0, taps)
        self.stats["draft_process_calls"] += self._graph_count(lanes) - g0

    def _flush(self, lanes, gate=None) -> int:
        """Hand each lane's drafter the target batches of its plain rounds that it has not
        seen (`pending`), in chunks of at most n_max + 1 tokens (the widths verify batches
        already built draft graphs for), several sequences per call with batch_draft;
        returns how many tokens went over. Plain rounds leave their tokens pending so that a
        stretch of them costs the draft a few processings, not one a token; every consult
        flushes first, so a drafter always drafts from the whole committed stream. gate: the
        one lane's gate, told what each chunk that built no draft graph cost a token (the
        draft side of a plain round)."""
        lanes = [ln for ln in lanes if ln.pending]
        if not lanes:
            return 0
        width = self.n_max + 1
        chunked, n_tokens = [], 0
        for ln in lanes:
            parts = ln.pending
            ln.pending = []
            tokens = np.concatenate([np.asarray(t, np.int32) for t, _, _ in parts])
            taps = {name: np.concatenate([tp[name] for _, _, tp in parts])
                    for name in parts[0][2]}
            pos0 = parts[0][1]
            chunked.append([(ln, (ln.seq, tokens[i:i + width], pos0 + i,
                                  {k: v[i:i + width] for k, v in taps.items()}))
                            for i in range(0, len(tokens), width)])
            n_tokens += len(tokens)
        for r in range(max(len(c) for c in chunked)):
            now = [c[r] for c in chunked if r < len(c)]
            if gate is not None:
                builds, c0 = self._draft_graph_builds(lanes), time.process_time()
            self._process([ln for ln, _ in now], [it for _, it in now])
            if gate is not None and self._draft_graph_builds(lanes) == builds:
                gate.observe_draft_cost(0, (time.process_time() - c0) / len(now[0][1][1]))
        return n_tokens

    def _drafts(self, lanes, items) -> list:
        """items [(id_last, pos0, k_max)] of the drafting lanes; one draft each."""
        if not lanes:
            return []
        g0 = self._graph_count(lanes)
        if self.batch_draft:
            out = self.drafter.draft_seqs([(ln.seq, i, p, k)
                                           for ln, (i, p, k) in zip(lanes, items)])
        else:
            out = [ln.drafter.draft(i, p, k) for ln, (i, p, k) in zip(lanes, items)]
        self.stats["draft_calls"] += self._graph_count(lanes) - g0
        return out

    def _step(self, lanes, n: int, stop) -> None:
        """One draft + verify round over the unfinished sequences. A lane whose round asks
        the drafter (a consult) first hands it its pending plain rounds; a plain round that
        drafted nothing leaves its batch pending and calls no accept (nothing was proposed)."""
        ctx, st = self.ctx, self.stats
        ta = time.perf_counter()
        round_no = st["n_rounds"]
        # the cost gate weighs one sequence's round (several share a verify ubatch)
        gate = self._gate if len(lanes) == 1 else None
        # with a draft model the gate decides before drafting
        gate_before = gate is not None and not self._gate_after_draft(self.drafter)
        plan = []
        for lane in lanes:
            pos0 = ctx.n_past(lane.seq)
            if pos0 >= ctx.n_ctx:
                lane.out.stop_reason = "n_ctx"
                continue
            # a drafter that takes plain rounds' tokens one at a time (Drafter.absorb) sees
            # id_last now, and may end a pause or a back-off before this round (as run_one)
            absorb = lane.drafter.absorb if self.adaptive else None
            absorbed = absorb is not None and (lane.skip > 0 or lane.quiet > 0)
            if (absorbed and absorb(lane.id_last, pos0)
                    and not (gate is not None and self._wake_declined(lane.drafter, round_no))):
                lane.skip = lane.quiet = 0
            # a pause or a back-off: the round's batch may wait for the next consult
            resting = bool(self.adaptive and (lane.skip > 0 or lane.quiet > 0))
            # at most what is still wanted (k drafts commit up to k + 1 ids) and what fits
            k_max = min(self._budget_for(lane), n - len(lane.out) - 1, ctx.n_ctx - pos0 - 1)
            if absorb is not None and k_max <= 0 and not absorbed:
                absorb(lane.id_last, pos0)
                absorbed = True
            plan.append([lane, pos0, k_max, k_max > 0, resting, absorbed and k_max <= 0])
        if not plan:
            return
        self._flush([p[0] for p in plan if p[3]], gate if gate_before else None)
        ca = time.process_time()
        draft_builds = self._draft_graph_builds(lanes) if gate_before else 0
        if gate_before:
            for p in plan:
                if p[2] > 0:      # a draft model's graphs cost time: decide before drafting
                    p[2] = gate.choose(p[2], p[0].drafter.draft_class, round_no)
                    p[4] = p[2] == 0
        drafting = [(lane, (lane.id_last, pos0, k)) for lane, pos0, k, *_ in plan if k > 0]
        drafts = dict(zip((id(ln) for ln, _ in drafting),
                          self._drafts([ln for ln, _ in drafting], [it for _, it in drafting])))
        batches, work = [], []
        for lane, pos0, k_max, consulted, may_wait, absorbed in plan:
            ids, probs = [], None
            if k_max > 0:
                ids, probs = self._take_draft(drafts[id(lane)], k_max)
                if gate is not None and ids and not gate_before:
                    j = gate.choose(len(ids), lane.drafter.draft_class, round_no)
                    if j < len(ids):
                        ids, probs = ids[:j], None if probs is None else probs[:j]
            batch = [lane.id_last] + ids        # a short list: decode's quick id check
            batches.append((lane.seq, batch))
            work.append((lane, pos0, ids, probs, batch, consulted, k_max > 0,
                         k_max == 0 and (may_wait or bool(lane.pending)), absorbed))
        st["n_rounds"] += 1
        builds = ctx.timings["n_graph_build"]
        tb = time.perf_counter()
        cb = time.process_time()
        all_rows = decode_steps(ctx, batches, self.greedy_in_graph, self.tap_names)
        cc = time.process_time()
        tc = time.perf_counter()
        st["n_target_decodes"] += 1 if shares_ubatch(ctx, batches) else len(batches)
        # a decode that built a graph says nothing of the width's steady cost
        timed = ctx.timings["n_graph_build"] == builds
        if len(batches) == 1 and timed:   # what a verify of this width costs
            if self.adaptive == "cost":
                self._length.observe_cost(len(batches[0][1]), tc - tb)
            if gate is not None:
                gate.observe_cost(len(batches[0][1]), cc - cb)
        # the drafter sees the round now (after a draft: accept refers to it), but for a
        # plain round of a pause, a back-off or a declined draft, which waits for the next
        # consult (as does every round after one that waits)
        seen = []
        for w, rows in zip(work, all_rows):
            lane, pos0, batch, waits = w[0], w[1], w[4], w[7]
            if w[8] or (w[6] and not w[2] and lane.drafter.absorb is not None):
                continue            # the drafter took the round's token (absorb, draft)
            if waits:
                lane.pending.append((batch, pos0, rows.taps))
            else:
                seen.append((lane, (lane.seq, np.asarray(batch, np.int32), pos0, rows.taps)))
        if seen:
            self._process([ln for ln, _ in seen], [it for _, it in seen])
        t_draft = time.perf_counter() - tc
        accepted = []
        for (lane, pos0, ids, probs, batch, consulted, _, _, _), rows in zip(work, all_rows):
            result = self._verify(lane, rows, ids, probs)
            if stop is not None:
                hit = next((j for j, t in enumerate(result) if stop(t)), None)
                if hit is not None:
                    result = result[:hit + 1]
                    lane.out.stop_reason = "stop"
            n_acc = len(result) - 1
            self._control(lane, len(ids), n_acc)
            if consulted:
                self._after_consult(lane, len(ids), n_acc,
                                    round_no if gate is not None else None)
            if gate is not None and ids:
                gate.observe_accept(lane.drafter.draft_class, len(ids), n_acc)
            accepted.append(n_acc)
            if n_acc < len(ids) and not ctx.seq_rm(lane.seq, pos0 + n_acc + 1, -1):
                raise RuntimeError(f"SpeculativeDecoder: the target memory could not remove the "
                                   f"{len(ids) - n_acc} rejected positions after {pos0 + n_acc}")
            if ids:
                st["n_verify_steps"] += 1
                st["n_drafted"] += len(ids)
                st["n_accepted"] += n_acc
                self._acc_per_pos[:n_acc] += 1
                step = {"draft": ids, "n_accepted": n_acc}
                if len(self._extra):
                    step["seq"], step["round"] = lane.seq, round_no
                st["steps"].append(step)
            else:
                st["n_plain_steps"] += 1
            lane.out.extend(result)
            lane.id_last = result[-1]
        t5 = time.perf_counter()
        drew = [(w[0], k) for w, k in zip(work, accepted)
                if w[6] and (w[2] or w[0].drafter.absorb is None)]
        if self.batch_draft:
            if drew:
                self.drafter.accept_seqs([(lane.seq, k) for lane, k in drew])
        else:
            for lane, k in drew:
                lane.drafter.accept(k)
        t_draft += time.perf_counter() - t5
        te = time.perf_counter()
        if gate_before and plan[0][2] > 0 and self._draft_graph_builds(lanes) == draft_builds:
            # the draft side of a drafting round (CPU seconds, as the target's): drafting
            # plan[0]'s budget, processing the batch (and the host work of verifying it)
            gate.observe_draft_cost(plan[0][2], (cb - ca) + (time.process_time() - cc))
        st["draft_s"] += (tb - ta) + t_draft
        st["verify_s"] += (tc - tb) + (te - tc - t_draft)

    @staticmethod
    def _draft_graph_builds(lanes) -> int:
        """Graphs built so far by the lanes' draft contexts."""
        drafters = {id(ln.drafter): ln.drafter for ln in lanes}.values()
        return sum(getattr(c, "timings", {}).get("n_graph_build", 0) for d in drafters
                   for c in getattr(d, "draft_contexts", lambda: ())())


class _Lane:
    """One sequence of a generate_batch call: its drafter, sampler and verifier streams, the
    committed ids, the adaptive draft-length state, the consultation back-off (`quiet` plain
    rounds left before the drafter is asked again, `span` the next such stretch) and the
    target batches the drafter has not seen yet (`pending`: [(tokens, pos0, taps)])."""

    def __init__(self, seq: int, drafter, sampler, rng, n_max: int):
        self.seq, self.drafter, self.sampler, self.rng = seq, drafter, sampler, rng
        self.out = Generation()
        self.id_last = None
        self.n_cur, self.skip, self.backoff = n_max, 0, 1
        self.quiet, self.span = 0, 0
        self.pending = []
