"""The rounds of SpeculativeDecoder for one sequence whose drafter runs no draft graphs
(n-gram lookup, custom drafts) with greedy ids taken in the target's graph: the calls,
statistics and stream of the general round (`SpeculativeDecoder._step`) without its
per-sequence lists, and plain rounds through decode_greedy's one-token shortcut."""
from __future__ import annotations

import time

import numpy as np

from .drafter import Draft
from .target import decode_steps
from .verify import verify_greedy


def run_one(dec, lane, n: int, stop) -> None:
    """The rounds of one sequence whose drafter runs no draft graphs (n-gram, custom
    drafts) with greedy ids from the graph: the calls, statistics and stream of _step,
    without its per-sequence lists. A plain round decodes id_last through decode_greedy's
    one-token shortcut; rounds that ask nobody (a pause of the draft length, the
    consultation back-off) run back to back as in ctx.generate's loop (`plain_run`),
    their tokens handed to the drafter in one process call at the next consult, or one at
    a time to a drafter with an absorb hook, which may end the stretch early. On a
    small target a token costs ~150 us: a round's bookkeeping, lookup and gate cost a
    few tens of us, which a drafter that keeps proposing nothing pays only every
    MAX_QUIET (where an ask is dear, or for a drafter with an absorb hook, up to
    MAX_QUIET_LONG) tokens."""
    ctx, st, drafter, out = dec.ctx, dec.stats, lane.drafter, lane.out
    seq, n_ctx, perf, cpu = lane.seq, ctx.n_ctx, time.perf_counter, time.process_time
    adaptive, cost_rule = dec.adaptive, dec.adaptive == "cost"
    gate = dec._gate
    # a drafter that takes plain rounds' tokens one at a time may end a quiet stretch early
    absorb = drafter.absorb if adaptive else None
    absorbing = drafter.absorb is not None
    own_length = bool(drafter.own_length)
    if own_length and not adaptive:
        drafter.length_hint = 0
    pos0 = ctx.n_past(seq)
    fed = []           # tokens of plain rounds the drafter has not seen (up to pos0)
    draft_s = verify_s = 0.0
    n_rounds = n_plain = n_quiet = 0
    # the gate's CPU clock is a system call (~1.5 us): asks and a declined ask's plain step
    # are timed one in PLAIN_SAMPLE (the gate keeps the lowest time: a few samples tell
    # it); every verify and each stretch's first plain step are timed (the plain cost is
    # what a verify is weighed against: sampled more thinly, its lowest time would sit
    # higher than the verifies' and let losing drafts through); a verify round's host work
    # after its decode is timed for one verify in PLAIN_SAMPLE
    n_asks = n_plain_timings = n_verifies = 0
    try:
        while len(out) < n and out.stop_reason == "n":
            ta = perf()
            if pos0 >= n_ctx:
                out.stop_reason = "n_ctx"
                break
            if adaptive and (lane.skip or lane.quiet):
                m = min(lane.skip or lane.quiet, n - len(out), n_ctx - pos0)
                k, woke = plain_run(dec, lane, m, stop, fed, absorb, pos0,
                                    st["n_rounds"] + n_rounds)
                if lane.skip:
                    lane.skip -= k
                else:
                    lane.quiet -= k
                    n_quiet += k
                if woke:            # the stream just started repeating: ask next round
                    lane.skip = lane.quiet = 0
                n_rounds += k
                n_plain += k
                pos0 += k
                verify_s += perf() - ta
                continue
            # the budget as _draft_budget gives it
            if not adaptive:
                k_max = dec.n_max
            else:
                k_max = dec._length.best_length(lane.n_cur) if cost_rule else lane.n_cur
                if own_length:
                    drafter.length_hint, k_max = k_max, dec.n_max
            k_max = min(k_max, n - len(out) - 1, n_ctx - pos0 - 1)
            ids = ()
            if k_max > 0:
                if fed:
                    drafter.process(np.asarray(fed, np.int32), pos0 - len(fed), {})
                    fed.clear()
                time_ask = gate is not None and n_asks % dec.PLAIN_SAMPLE == 0
                n_asks += 1
                ask0 = cpu() if time_ask else 0.0
                d = drafter.draft(lane.id_last, pos0, k_max)
                if d is not None and (d.ids if isinstance(d, Draft) else len(d)):
                    ids, _ = dec._take_draft(d, k_max)
                    if gate is not None and ids:
                        cls = drafter.draft_class
                        j = gate.choose(len(ids), cls, st["n_rounds"] + n_rounds)
                        if j < len(ids):
                            ids = ids[:j]
                if time_ask:
                    gate.observe_ask_cost(cpu() - ask0)
            n_rounds += 1
            if not ids:
                timed = gate is not None and n_plain_timings % dec.PLAIN_SAMPLE == 0
                n_plain_timings += 1
                tok, tb, tc = timed_plain_step(dec, lane.id_last, seq, timed)
                if k_max > 0:      # it drafted: the drafter sees the round and its end
                    if not absorbing:  # (an absorbing drafter's draft() took id_last)
                        drafter.process(np.array([lane.id_last], np.int32), pos0, {})
                        drafter.accept(0)
                    dec._after_consult(lane, 0, 0, st["n_rounds"] + n_rounds - 1)
                elif absorb is not None:
                    absorb(lane.id_last, pos0)
                else:
                    fed.append(lane.id_last)
                if stop is not None and stop(tok):
                    out.stop_reason = "stop"
                n_plain += 1
                out.append(tok)
                lane.id_last = tok
                pos0 += 1
                te = perf()
                draft_s += (tb - ta) + (te - tc)
                verify_s += tc - tb
                continue
            builds = ctx.timings["n_graph_build"]
            tb = perf()
            cb = cpu() if gate is not None else 0.0
            batch = [lane.id_last] + ids
            rows = decode_steps(ctx, [(seq, batch)], True, ())[0]
            if gate is not None:
                cc = cpu()
            tc = perf()
            if ctx.timings["n_graph_build"] == builds:
                if cost_rule:
                    dec._length.observe_cost(len(batch), tc - tb)
                if gate is not None:
                    gate.observe_cost(len(batch), cc - cb)
            drafter.process(np.asarray(batch, np.int32), pos0, {})
            t_draft = perf() - tc
            result = verify_greedy(rows.ids, ids, int, dec._is_eog)
            if stop is not None:
                hit = next((j for j, t in enumerate(result) if stop(t)), None)
                if hit is not None:
                    result = result[:hit + 1]
                    out.stop_reason = "stop"
            n_acc = len(result) - 1
            dec._control(lane, len(ids), n_acc)
            dec._after_consult(lane, len(ids), n_acc)
            if gate is not None:
                gate.observe_accept(cls, len(ids), n_acc)
            if n_acc < len(ids) and not ctx.seq_rm(seq, pos0 + n_acc + 1, -1):
                raise RuntimeError(f"SpeculativeDecoder: the target memory could not remove "
                                   f"the {len(ids) - n_acc} rejected positions after "
                                   f"{pos0 + n_acc}")
            st["n_verify_steps"] += 1
            st["n_drafted"] += len(ids)
            st["n_accepted"] += n_acc
            dec._acc_per_pos[:n_acc] += 1
            st["steps"].append({"draft": ids, "n_accepted": n_acc})
            out.extend(result)
            lane.id_last = result[-1]
            pos0 += len(result)
            t5 = perf()
            drafter.accept(n_acc)
            te = perf()
            if gate is not None:
                # the round's host work after its decode, one verify in PLAIN_SAMPLE
                if n_verifies % dec.PLAIN_SAMPLE == 0:
                    gate.observe_round_cost(cpu() - cc)
                n_verifies += 1
            t_draft += te - t5
            draft_s += (tb - ta) + t_draft
            verify_s += (tc - tb) + (te - tc - t_draft)
    finally:
        if fed:            # generate_batch hands them over when the loop ends
            lane.pending.append((fed, pos0 - len(fed), {}))
        st["n_rounds"] += n_rounds
        st["n_target_decodes"] += n_rounds
        st["n_plain_steps"] += n_plain
        st["n_quiet_rounds"] += n_quiet
        st["draft_s"] += draft_s
        st["verify_s"] += verify_s

def plain_run(dec, lane, m: int, stop, fed: list, absorb=None, pos: int = 0,
              round0: int = 0):
    """Up to m plain rounds of lane (one sequence, greedy, no taps) back to back through
    decode_greedy's one-token shortcut, as ctx.generate's loop takes them; the first is
    timed for the cost models. Each decoded token goes to fed, or with `absorb` (the
    drafter's hook, see Drafter.absorb) to the drafter at its position (id_last sits at
    pos), and the run stops before a token on which absorb says to ask, unless the gate
    would decline what that ask leads to (SpeculativeDecoder._wake_declined; round0: the
    number of the run's first round). Returns (the rounds run, whether absorb stopped it)."""
    ctx, out, seq = dec.ctx, lane.out, lane.seq
    decode = ctx.decode_greedy
    tok = lane.id_last
    if absorb is None:
        fed.append(tok)
    elif absorb(tok, pos) and not dec._wake_declined(lane.drafter, round0):
        return 0, True
    tok, _, _ = timed_plain_step(dec, tok, seq, dec._gate is not None)
    out.append(tok)
    k, woke = 1, False
    if stop is not None and stop(tok):
        out.stop_reason = "stop"
        m = 0
    while k < m:
        if absorb is None:
            fed.append(tok)
        elif absorb(tok, pos + k) and not dec._wake_declined(lane.drafter, round0 + k):
            woke = True
            break
        tok = decode([tok], seq_id=seq)
        out.append(tok)
        k += 1
        if stop is not None and stop(tok):
            out.stop_reason = "stop"
            break
    lane.id_last = tok
    return k, woke


def timed_plain_step(dec, token: int, seq: int, time_gate: bool):
    """decode_greedy of one token; its cost goes to the draft length's cost rule and, with
    time_gate, to the gate (in CPU seconds), unless a graph was built meanwhile. Returns the
    id and the step's perf_counter start and end."""
    ctx = dec.ctx
    builds = ctx.timings["n_graph_build"]
    tb = time.perf_counter()
    cb = time.process_time() if time_gate else 0.0
    tok = ctx.decode_greedy([token], seq_id=seq)
    cc = time.process_time() if time_gate else 0.0
    tc = time.perf_counter()
    if ctx.timings["n_graph_build"] == builds:
        if dec.adaptive == "cost":
            dec._length.observe_cost(1, tc - tb)
        if time_gate:
            dec._gate.observe_cost(1, cc - cb)
    return tok, tb, tc
