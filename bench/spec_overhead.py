"""Parts (o) and (d) of bench/compare_speculative.py: the overhead of speculating when
nothing is accepted taken apart into host work and extra decoded tokens (o), and greedy
verification with the argmax in the graph against logits copied to the host (d)."""
from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired_stats import Paired  # noqa: E402
from spec_timing import FRESH_PROMPT, drafter_asks, load, rejected_drafter, timed_spec  # noqa: E402


class ComputeClock:
    """Thread CPU seconds spent inside the target's graph computes (the graph class's compute
    wrapped while `with`): with one compute thread, the calling thread's CPU time less this is
    the host work of a decode loop, measured in CPU seconds whatever the load."""

    def __init__(self, ctx):
        ctx.decode_greedy([0])                  # a graph to find the class through
        self.cls, self.seconds = type(ctx._last.gf), 0.0
        ctx.reset()

    def __enter__(self):
        real, clock = self.cls.compute, self

        def compute(gf, n_threads):
            t0 = time.thread_time()
            try:
                return real(gf, n_threads)
            finally:
                clock.seconds += time.thread_time() - t0
        self.real, self.cls.compute = real, compute
        return self

    def __exit__(self, *exc):
        self.cls.compute = self.real


def part_o(args, tiny):
    """The overhead of speculating when nothing is accepted, taken apart in CPU seconds of
    one compute thread: the host work per generated token (the thread's CPU time outside the
    graph computes) and the extra target tokens the verifies decode, each side measured in
    alternating pairs. A tiny model's token costs ~72 us at 2 threads on an idle machine, on
    a loaded one many times that (its weights no longer stay in cache); this splits the
    ratio of whole runs into the host difference and the
    extra decoded tokens' share. Under load both parts run cold (the host work after a
    compute that streamed the weights, the weights out of cache) and swell many times: the
    split says where the overhead lies, the idle ratio is (c)'s at idle."""
    from pyggml.llm import Context
    from pyggml.llm.speculative import SpeculativeDecoder
    prompt, n = list(range(10, 42)), args.gen * 4
    ctx = Context(tiny, n_ctx=len(prompt) + n + 16, n_threads=1)
    clock = ComputeClock(ctx)
    ctx.generate(prompt[:4], 4)
    rej = rejected_drafter(tiny.hparams.n_vocab)
    cases = [("rejected n_max 4 default", dict(kind=rej, n_max=4)),
             ("n-gram fresh, default", dict(kind="ngram", n_max=4))]
    print(f"(o) tiny llama, nothing accepted, {n} tokens, 1 compute thread, {args.pairs} "
          f"alternating pairs: host CPU us per generated token (outside the graph computes), "
          f"and the extra target tokens the verifies decode")
    with clock:
        for label, kw in cases:
            dec = SpeculativeDecoder(ctx, **kw)
            dec.generate(prompt[:4], 6)
            host, comp, decoded, same = Paired(), Paired(), [], True
            for r in range(args.pairs + 1):
                side = {}
                for which in (("plain", "spec") if r % 2 else ("spec", "plain")):
                    obj = ctx if which == "plain" else dec
                    obj.reset()
                    c0, k0, t0 = clock.seconds, ctx.timings["n_tokens"], time.thread_time()
                    out = ctx.generate(prompt, n) if which == "plain" else dec.generate(prompt, n)
                    cpu, k = time.thread_time() - t0, ctx.timings["n_tokens"] - k0
                    per = len(out) - 1
                    side[which] = ((cpu - (clock.seconds - c0)) / per,
                                   (clock.seconds - c0) / per, (k - len(prompt)) / per, list(out))
                if r:                            # pair 0 builds every graph
                    host.add(side["plain"][0], side["spec"][0])
                    comp.add(side["plain"][1], side["spec"][1])
                    decoded.append(side["spec"][2] / side["plain"][2])
                    same &= side["plain"][3] == side["spec"][3]
            hd, hlo, hhi, cover = host.difference()
            extra = statistics.median(decoded) - 1.0
            total = Paired()
            for ha, hb, ca, cb in zip(host.a, host.b, comp.a, comp.b):
                total.add(ha + ca, hb + cb)
            s = dec.stats
            print(f"  {label:24s}: thread CPU per token {total.summary()} spec/plain; host "
                  f"{statistics.median(host.a) * 1e6:5.2f} -> {statistics.median(host.b) * 1e6:5.2f}"
                  f" us/token, difference {hd * 1e6:+.2f} [{hlo * 1e6:+.2f}, {hhi * 1e6:+.2f}]; "
                  f"compute {statistics.median(comp.a) * 1e6:.0f} -> "
                  f"{statistics.median(comp.b) * 1e6:.0f} us/token; decoded {extra * 100:+.2f}% "
                  f"tokens  (verify steps {s['n_verify_steps']}, asks "
                  f"{drafter_asks(s)}, quiet {s['n_quiet_rounds']}, identical "
                  f"{same})  load {load():.1f}")
    host_alone(args, tiny)


def host_alone(args, tiny):
    """The host work of (o)'s rejected-drafts case with the graph computes skipped (both
    sides run the same Python and host code, on stale argmax ids): thread CPU per token in
    cache, which load barely moves, projected onto an idle token of --idle-token-us with
    each extra decoded token counted as a whole token (an upper bound: a verify row costs
    less than a plain step)."""
    from pyggml.llm import Context
    from pyggml.llm.speculative import FixedCost, SpeculativeDecoder
    prompt, n = list(range(10, 42)), args.gen * 4
    # room for the warm-up below as well as the timed runs (a short --gen)
    ctx = Context(tiny, n_ctx=len(prompt) + max(n, 64) + 16, n_threads=1)
    clock = ComputeClock(ctx)
    ctx.generate(prompt[:4], 4)
    # the decisions of a real run need its costs: the idle tiny target's, injected
    idle = args.idle_token_us * 1e-6
    cost = FixedCost(lambda w: idle * (1 + 0.5 * (w - 1)), ask=15e-6)
    dec = SpeculativeDecoder(ctx, rejected_drafter(tiny.hparams.n_vocab), n_max=4,
                             cost_model=cost)
    dec.generate(prompt[:4], 6)
    # every graph either side may run is computed once for real (here, or at its first use
    # below): a skipped compute leaves the previous ids in a graph's output, and a graph
    # never computed has none
    from pyggml.llm.speculative.target import decode_steps
    ctx.MAX_GRAPHS = max(ctx.MAX_GRAPHS, 12)
    ctx.generate(prompt, 8)
    dec.generate(prompt, 8)
    for w in range(1, dec.n_max + 2):
        ctx.reset()
        ctx.decode_greedy(prompt)
        decode_steps(ctx, [(0, prompt[:w])], True)
    host, decoded = Paired(), []
    real, ran = clock.cls.compute, {}

    def first_only(gf, n_threads):
        # a graph built meanwhile (a KV size, an evicted width) runs once for real; kept in
        # `ran` so that its id is not reused by another
        if id(gf) not in ran:
            ran[id(gf)] = gf
            return real(gf, n_threads)
        return None
    clock.cls.compute = first_only
    try:
        for r in range(args.pairs + 1):
            side = {}
            for which in (("plain", "spec") if r % 2 else ("spec", "plain")):
                obj = ctx if which == "plain" else dec
                obj.reset()
                k0, t0 = ctx.timings["n_tokens"], time.thread_time()
                out = ctx.generate(prompt, n) if which == "plain" else dec.generate(prompt, n)
                per = len(out) - 1
                side[which] = ((time.thread_time() - t0) / per,
                               (ctx.timings["n_tokens"] - k0 - len(prompt)) / per)
            if r:
                host.add(side["plain"][0], side["spec"][0])
                decoded.append(side["spec"][1] / side["plain"][1] - 1.0)
    finally:
        clock.cls.compute = real
    hd, hlo, hhi, cover = host.difference()
    extra = statistics.median(decoded)
    s = dec.stats
    print(f"  host alone, rejected n_max 4 default (computes skipped, idle costs injected): "
          f"{statistics.median(host.a) * 1e6:.2f} -> {statistics.median(host.b) * 1e6:.2f} "
          f"us/token, difference {hd * 1e6:+.2f} [{hlo * 1e6:+.2f}, {hhi * 1e6:+.2f}] "
          f"({cover * 100:.0f}% interval); decoded {extra * 100:+.2f}% tokens; projected on an "
          f"idle {args.idle_token_us:.0f} us token: {(hd / idle + extra) * 100:+.1f}% "
          f"(upper {(hhi / idle + extra) * 100:+.1f}%), goal <= +10%  (verify steps "
          f"{s['n_verify_steps']}, quiet {s['n_quiet_rounds']})  load {load():.1f}")


def host_argmax(row):
    """Greedy on the host: the same ids as the in-graph argmax, but the verify step copies
    every logits row out of the graph to take it."""
    return int(np.argmax(row))


def part_d(args, tiny):
    """Greedy verification reading in-graph argmax ids against copying logits rows."""
    from pyggml import demo
    from pyggml.llm import Context, Model
    from pyggml.llm.speculative import SpeculativeDecoder
    targets = [("tiny llama", tiny, list(range(10, 42)))]
    path, _ = demo.fetch_smollm2()
    if path is not None:
        m = Model.load(path, progress=False)
        targets.append(("SmolLM2 Q4_1", m, m.tokenize(FRESH_PROMPT)))
    print("(d) greedy verify: argmax ids out of the graph vs logits rows copied (host argmax), "
          "rejected drafts n_max 4 (every verify 5 rows)")
    for name, model, prompt in targets:
        n = args.gen
        ctx = Context(model, n_ctx=len(prompt) + n + 16, n_threads=args.threads,
                      flash_attn=args.flash_attn)
        decs = {label: SpeculativeDecoder(ctx, rejected_drafter(model.hparams.n_vocab), n_max=4,
                                          adaptive=False, sampler=smp)
                for label, smp in (("ids", None), ("rows", host_argmax))}
        for dec in decs.values():
            dec.generate(prompt[:4], 6)
        per = {k: [] for k in decs}
        outs = {}
        for _ in range(args.repeats):
            for label, dec in decs.items():
                out, _, s = timed_spec(dec, prompt, n)
                per[label].append(s["verify_s"] / max(s["n_verify_steps"], 1))
                outs[label] = list(out)
        vi, vr = statistics.median(per["ids"]), statistics.median(per["rows"])
        host_ids, host_rows = _host_read_cost(ctx, prompt)
        print(f"  {name:13s} verify step {vi * 1e3:.3f} ms (ids) vs {vr * 1e3:.3f} ms (rows): "
              f"{(1 - vi / vr) * 100:+.1f}% saved, V={model.hparams.n_vocab}, identical "
              f"{outs['ids'] == outs['rows']}  load {load():.1f}")
        print(f"  {'':13s} reading one 5-row verify result: ids {host_ids * 1e6:.1f} us, logits rows "
              f"+ host argmax {host_rows * 1e6:.1f} us (saved {(host_rows - host_ids) * 1e3:.3f} ms "
              f"per step = {(host_rows - host_ids) / vr * 100:.2f}% of the measured step)")


def _host_read_cost(ctx, prompt, reps: int = 200):
    """Host time to get the 5 verify ids out of a computed graph: the in-graph argmax's ids
    against copying the logits rows and taking the argmax (no compute in either)."""
    ctx.reset()
    toks = [int(t) for t in list(prompt) * 4]
    ctx.decode(toks[:8])
    res = ctx._decode(toks[8:13], True, 0, ("greedy",))
    t0 = time.perf_counter()
    for _ in range(reps):
        res._sampled = None
        ids = np.array(res.sampled_view(), np.int32)
    t1 = time.perf_counter()
    for _ in range(reps):
        rows = np.array(res.t_logits.numpy(), np.float32).reshape(5, -1)
        ids2 = rows.argmax(axis=1)
    t2 = time.perf_counter()
    assert list(ids) == list(ids2)
    return (t1 - t0) / reps, (t2 - t1) / reps
