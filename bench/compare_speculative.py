"""Speculative decoding against plain decoding, same process, sides alternated.

    python bench/compare_speculative.py [--part a,b,c,d,e,w,m,o,g] [--repeats 3] [-t 2]

(a) SmolLM2-135M-Instruct Q4_1 (fetched once into the cache folder like the demo) with the
    n-gram (prompt lookup) draft on copy-heavy prompts: acceptance, decode tokens/s with and
    without speculation, and whether the streams are identical.
(b) synthetic acceptance (r_i = 0.8^i) on a tiny random model: measured speedup against the
    model speedup tau * T_ar / (T_draft + T_verify), tau the mean acceptance length.
(c) nothing accepted: drafts that are always rejected (n_max 1 and 4) and the n-gram draft on
    a prompt it cannot copy from; slowdown per generated token against no speculation.
(d) greedy verification with the argmax taken in the graph (ids copied) against the same
    step copying logits rows and taking the argmax on the host.
(e) the n-gram lookup rules (recent, longest without and with the substitution fallback)
    on the prompts of (a), each against plain decoding.
(w) the cost of a target decode of w = 1..9 tokens against one token (a verify step of
    w - 1 drafts): what a draft must earn.
(m) generate_batch over 1, 2 and 4 sequences with the MTP, EAGLE3 and DFlash drafts of the
    tiny writers (real drafts, n_max 3 every step): one draft graph for all sequences per
    draft position / block (batch_draft=True) against each sequence drafting alone
    (batch_draft=False); tokens/s of both, their ratio, draft graph runs per round.
(o) the overhead of (c) on the tiny model taken apart in CPU seconds of one compute thread:
    host work per token (outside the graph computes) and extra decoded tokens; then the host
    work alone (computes skipped) projected onto an idle token (--idle-token-us).
(g) with --eagle3-draft PATH (a draft written by tools/train_eagle3.py): that EAGLE3 draft of
    SmolLM2 on the prompts of (a) and the fresh prompt, against plain decoding.

Speedups and slowdowns are medians of per-pair ratios: each pair runs the plain side and the
speculative side back to back, which goes first alternating, and the bracket after a figure
is the distribution-free ~95% interval of that median (order statistics; bench/paired_stats.py):
on a shared machine trust the interval, not the point. Part (c) runs --pairs pairs (the tiny
model 4x --gen tokens); the other parts --repeats. Absolute tokens/s are medians over the
runs of each side (--stat min: minima); the machine's load (os.getloadavg) is printed with them.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import checkout  # noqa: E402,F401  (this checkout's pyggml, not an installed copy)
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spec_overhead import part_d, part_o  # noqa: E402
from spec_timing import (COPY_PROMPTS, FRESH_PROMPT, CLOCK, alternate, drafter_asks,  # noqa: E402,F401
                         load, rejected_drafter, speedup_text, tiny_target)


def part_a(args):
    from pyggml import demo
    from pyggml.llm import Context, Model
    from pyggml.llm.speculative import SpeculativeDecoder
    path, why = demo.fetch_smollm2()
    if path is None:
        print(f"(a) skipped: {why}")
        return
    model = Model.load(path, progress=False)
    print(f"(a) SmolLM2-135M-Instruct Q4_1, n-gram draft, {args.gen} tokens, {args.threads} threads, "
          f"flash_attn={args.flash_attn}")
    for name, text in COPY_PROMPTS.items():
        prompt = model.tokenize(text)
        ctx = Context(model, n_ctx=len(prompt) + args.gen + 16, n_threads=args.threads,
                      flash_attn=args.flash_attn)
        ctx.generate(prompt[:8], 4)                   # warm-up: one-token graphs
        for n_max, adaptive in ((4, False), (4, True), (8, False), (8, True), (8, "cost")):
            dec = SpeculativeDecoder(ctx, "ngram", n_max=n_max, adaptive=adaptive)
            dec.generate(prompt[:8], 8)               # warm-up: verify graphs
            tb, ts, s, same, pairs = alternate(ctx, dec, prompt, args.gen, args.repeats)
            mode = {False: "fixed", True: "default", "cost": "cost"}[adaptive]
            print(f"  {name:20s} n_max {n_max} {mode:7s}: base {1 / tb:6.2f} tok/s  spec {1 / ts:6.2f} tok/s  "
                  f"{speedup_text(pairs)}  accept len {s['mean_acceptance_length']:.2f}  "
                  f"rate {s['acceptance_rate']:.2f}  verify steps {s['n_verify_steps']}  "
                  f"plain steps {s['n_plain_steps']}  identical {same}  load {load():.1f}")


def part_e(args):
    """The n-gram lookup rules side by side (default adaptive length), each against plain
    decoding in the same alternation."""
    from pyggml import demo
    from pyggml.llm import Context, Model
    from pyggml.llm.speculative import SpeculativeDecoder
    path, why = demo.fetch_smollm2()
    if path is None:
        print(f"(e) skipped: {why}")
        return
    model = Model.load(path, progress=False)
    print(f"(e) SmolLM2 Q4_1, n-gram lookup rules, default adaptive length, {args.gen} tokens")
    rules = (("recent", dict(lookup="recent")), ("longest, no subst", dict(substitute=False)),
             ("longest (default)", {}))
    for name, text in COPY_PROMPTS.items():
        prompt = model.tokenize(text)
        ctx = Context(model, n_ctx=len(prompt) + args.gen + 16, n_threads=args.threads,
                      flash_attn=args.flash_attn)
        ctx.generate(prompt[:8], 4)
        for n_max in (4, 8):
            for label, opt in rules:
                dec = SpeculativeDecoder(ctx, "ngram", n_max=n_max, **opt)
                dec.generate(prompt[:8], 8)
                tb, ts, s, same, pairs = alternate(ctx, dec, prompt, args.gen, args.repeats)
                print(f"  {name:20s} n_max {n_max} {label:18s}: {speedup_text(pairs)}  "
                      f"accept len {s['mean_acceptance_length']:.2f}  drafted {s['n_drafted']}  "
                      f"accepted {s['n_accepted']}  verify steps {s['n_verify_steps']}  "
                      f"plain steps {s['n_plain_steps']}  identical {same}  load {load():.1f}")


def part_w(args):
    """What a target decode of w tokens costs against one of 1 token (all rows outputs,
    greedy ids), the price of a verify step drafting w - 1 tokens."""
    from pyggml import demo
    from pyggml.llm import Context, Model
    from pyggml.llm.speculative.target import decode_steps
    path, why = demo.fetch_smollm2()
    if path is None:
        print(f"(w) skipped: {why}")
        return
    model = Model.load(path, progress=False)
    prompt = model.tokenize(COPY_PROMPTS["copy-function"])
    ctx = Context(model, n_ctx=len(prompt) + 16, n_threads=args.threads,
                  flash_attn=args.flash_attn)
    ctx.MAX_GRAPHS = max(ctx.MAX_GRAPHS, 12)
    ctx.decode_greedy(prompt)
    n0 = ctx.n_past(0)
    cost = {w: [] for w in range(1, 10)}
    for rep in range(args.repeats * 3 + 1):
        for w in range(1, 10):
            tok = np.array(prompt[10:10 + w], np.int32)
            t0 = time.process_time() if args.clock == "cpu" else time.perf_counter()
            decode_steps(ctx, [(0, tok)], True)
            t1 = time.process_time() if args.clock == "cpu" else time.perf_counter()
            ctx.seq_rm(0, n0, -1)
            if rep:                     # the first round builds the graphs
                cost[w].append(t1 - t0)
    c1 = statistics.median(cost[1])
    print(f"(w) SmolLM2 Q4_1 target decode of w tokens ({args.clock} clock), median of "
          f"{len(cost[1])}: w=1 {c1 * 1e3:.1f} ms; c(w)/c(1): " +
          " ".join(f"{w}:{statistics.median(cost[w]) / c1:.2f}" for w in range(2, 10)) +
          f"  load {load():.1f}")


def part_g(args):
    """A trained EAGLE3 draft of SmolLM2 against plain decoding."""
    from pyggml import demo
    from pyggml.llm import Context, Model
    from pyggml.llm.speculative import SpeculativeDecoder
    path, why = demo.fetch_smollm2()
    if path is None or not args.eagle3_draft:
        print(f"(g) skipped: {why or 'no --eagle3-draft'}")
        return
    model, draft = Model.load(path, progress=False), Model.load(args.eagle3_draft, progress=False)
    print(f"(g) SmolLM2 Q4_1, EAGLE3 draft {os.path.basename(args.eagle3_draft)}, {args.gen} tokens")
    for name, text in list(COPY_PROMPTS.items()) + [("fresh", FRESH_PROMPT)]:
        prompt = model.tokenize(text)
        ctx = Context(model, n_ctx=len(prompt) + args.gen + 16, n_threads=args.threads,
                      flash_attn=args.flash_attn)
        ctx.generate(prompt[:8], 4)
        for n_max, adaptive in ((4, False), (4, True)):
            dec = SpeculativeDecoder(ctx, "eagle3", draft=draft, n_max=n_max, adaptive=adaptive)
            dec.generate(prompt[:8], 8)
            tb, ts, s, same, pairs = alternate(ctx, dec, prompt, args.gen, args.repeats)
            mode = "default" if adaptive else "fixed"
            print(f"  {name:20s} n_max {n_max} {mode:7s}: base {1 / tb:6.2f} tok/s  spec {1 / ts:6.2f} tok/s  "
                  f"{speedup_text(pairs)}  accept len {s['mean_acceptance_length']:.2f}  "
                  f"verify steps {s['n_verify_steps']}  draft {s['draft_s'] * 1e3:.0f} ms  "
                  f"verify {s['verify_s'] * 1e3:.0f} ms  identical {same}  load {load():.1f}")


def part_b(args, model):
    from pyggml.llm import Context
    from pyggml.llm.speculative import SpeculativeDecoder
    n_max, n = 4, args.gen * 4
    rates = [0.8 ** i for i in range(1, n_max + 1)]
    prompt = list(range(10, 42))
    ctx = Context(model, n_ctx=len(prompt) + n + 16, n_threads=args.threads)
    ctx.generate(prompt[:4], 4)
    dec = SpeculativeDecoder(ctx, "synthetic", n_max=n_max, synth_rates=rates, seed=0)
    dec.generate(prompt[:4], 8)
    tb, ts, s, _, pairs = alternate(ctx, dec, prompt, n, args.repeats)
    steps = s["n_verify_steps"]
    t_draft, t_verify = s["draft_s"] / steps, s["verify_s"] / steps
    tau = s["mean_acceptance_length"]
    model_speedup = tau * tb / (t_draft + t_verify)
    print(f"(b) tiny llama (D=256, 4 layers, V=4096), synthetic r_i=0.8^i, n_max {n_max}, "
          f"{n} tokens")
    print(f"  T_ar {tb * 1e3:.2f} ms  T_draft {t_draft * 1e3:.3f} ms  T_verify {t_verify * 1e3:.2f} ms"
          f"  tau {tau:.2f} (expected {1 + sum(rates):.2f})")
    print(f"  measured speedup {tb / ts:.2f}x  model speedup {model_speedup:.2f}x  "
          f"gap {(model_speedup - tb / ts) / model_speedup * 100:+.1f}%  valid {s['valid']}  "
          f"load {load():.1f}")


def part_c(args, tiny):
    from pyggml import demo
    from pyggml.llm import Context, Model
    from pyggml.llm.speculative import SpeculativeDecoder
    targets = [("tiny llama", tiny, list(range(10, 42)))]
    path, _ = demo.fetch_smollm2() if "smollm2" in args.c_models else (None, None)
    if path is not None:
        m = Model.load(path, progress=False)
        targets.append(("SmolLM2 Q4_1", m, m.tokenize(FRESH_PROMPT)))
    targets = [t for t in targets if t[0] != "tiny llama" or "tiny" in args.c_models]
    print(f"(c) nothing accepted: time per generated token ({CLOCK['kind']} clock) with "
          f"speculation against without, median of the per-pair ratios over {args.pairs} "
          f"alternating pairs, [distribution-free interval of that median]; goal <= +10%: "
          f"'goal met' when the interval's upper end is <= +10% (the default modes: the "
          f"fixed ones verify every step by design)")
    for name, model, prompt in targets:
        # a tiny-model run of --gen tokens lasts a few ms: a longer one averages the scheduler
        n = args.gen * 4 if model is tiny else args.gen
        ctx = Context(model, n_ctx=len(prompt) + n + 16, n_threads=args.threads,
                      flash_attn=args.flash_attn)
        ctx.generate(prompt[:4], 4)
        rej = rejected_drafter(model.hparams.n_vocab)
        cases = [("rejected n_max 1 fixed", dict(kind=rej, n_max=1, adaptive=False)),
                 ("rejected n_max 4 fixed", dict(kind=rej, n_max=4, adaptive=False)),
                 ("rejected n_max 4 default", dict(kind=rej, n_max=4)),
                 ("n-gram fresh, fixed", dict(kind="ngram", n_max=4, adaptive=False)),
                 ("n-gram fresh, default", dict(kind="ngram", n_max=4))]
        for label, kw in cases:
            dec = SpeculativeDecoder(ctx, **kw)
            dec.generate(prompt[:4], 6)
            tb, ts, s, same, pairs = alternate(ctx, dec, prompt, n, args.pairs)
            hi = pairs.ratio()[2]
            verdict = "goal met" if hi <= 1.10 else "goal not shown"
            hd, hlo, hhi, _ = pairs.host.difference()
            print(f"  {name:13s} {label:24s}: {pairs.summary()} per token, spec/plain  "
                  f"[{verdict}{' (fixed: no goal)' if 'fixed' in label else ''}]  "
                  f"host {hd * 1e6:+.1f} us/token [{hlo * 1e6:+.1f}, {hhi * 1e6:+.1f}] over "
                  f"plain's {statistics.median(pairs.host.a) * 1e6:.1f}, plain token "
                  f"{tb * 1e6:.0f} us  "
                  f"(accepted {s['n_accepted']}/{s['n_drafted']}, verify steps "
                  f"{s['n_verify_steps']}, plain {s['n_plain_steps']}, quiet "
                  f"{s['n_quiet_rounds']}, asks {drafter_asks(s)}, identical {same})  "
                  f"load {load():.1f}")


def part_m(args):
    from pyggml.llm import Context, Model, write_tiny_llama
    from pyggml.llm.speculative import SpeculativeDecoder
    from pyggml.llm.tiny import write_tiny_dflash, write_tiny_eagle3, write_tiny_step35
    n_gen, n_max = max(8, args.gen // 2), 3
    D, V = args.m_embd, args.m_vocab
    # the writers' default shapes at D=64; wider models scale heads and FFN with D
    size = {} if D == 64 else dict(n_embd=D, n_vocab=V, n_ff=3 * D)
    heads = {} if D == 64 else dict(n_head=D // 32, n_head_kv=D // 64, head_dim=32)
    rng = np.random.default_rng(5)
    prompts = [[int(t) for t in rng.integers(1, min(V, 256) - 1, k)] for k in (23, 9, 31, 16)]
    with tempfile.TemporaryDirectory() as d:
        qwen3 = Model.load(write_tiny_llama(os.path.join(d, "t.gguf"), arch="qwen3",
                                            qk_norm=True, n_layer=4, **size,
                                            **(heads or dict(n_embd=64, head_dim=16))),
                           progress=False)
        kinds = [("mtp", Model.load(write_tiny_step35(os.path.join(d, "s.gguf"), bigram=0.5,
                                                      seed=1, n_nextn=1, **size), progress=False),
                  None),
                 ("eagle3", qwen3, Model.load(write_tiny_eagle3(os.path.join(d, "e.gguf"),
                                                                **size, **heads),
                                              progress=False)),
                 ("dflash", qwen3, Model.load(write_tiny_dflash(os.path.join(d, "f.gguf"),
                                                                target_layers=(1, 3), **size,
                                                                **heads),
                                              progress=False))]
        print(f"(m) generate_batch, tiny targets (D={D}, V={V}), real drafts, n_max {n_max} every "
              f"step, {n_gen} tokens per sequence; tokens/s batched vs one draft per sequence")
        for kind, target, draft in kinds:
            want = [list(Context(target, n_ctx=128).generate(p, n_gen)) for p in prompts]
            for n_seq in (1, 2, 4):
                decs = {bd: SpeculativeDecoder(Context(target, n_ctx=384, n_seq_max=n_seq,
                                                       n_threads=args.threads), kind,
                                               draft=draft, n_max=n_max, adaptive=False,
                                               batch_draft=bd) for bd in (True, False)}
                tps, cps = {True: [], False: []}, {True: [], False: []}
                calls, same, acc = {}, True, 0.0
                for r in range(args.repeats + 1):      # round 0 builds every graph
                    for bd in ((True, False) if r % 2 else (False, True)):
                        dec = decs[bd]
                        dec.reset()
                        c0 = time.process_time()
                        out = dec.generate_batch(prompts[:n_seq], n_gen)
                        cpu = time.process_time() - c0
                        same &= [list(g) for g in out] == want[:n_seq]
                        st = dec.stats
                        if r:
                            tps[bd].append(st["tokens_per_s"])
                            cps[bd].append(st["n_tokens"] / cpu)
                        calls[bd] = st["draft_calls"] / max(st["n_rounds"], 1)
                        acc = st["mean_acceptance_length"]
                tb, ts = statistics.median(tps[True]), statistics.median(tps[False])
                cb, cs = statistics.median(cps[True]), statistics.median(cps[False])
                print(f"  {kind:6s} {n_seq} seq: wall tok/s batched {tb:6.1f} sequential {ts:6.1f} "
                      f"ratio {tb / ts:.2f}x | per CPU s (with prompts) {cb:6.1f} vs {cs:6.1f} "
                      f"ratio {cb / cs:.2f}x | draft graphs/round {calls[True]:.1f} vs "
                      f"{calls[False]:.1f}  tau {acc:.2f}  greedy-equal {same}  load {load():.1f}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="a,b,c,d")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gen", type=int, default=96)
    ap.add_argument("--c-models", default="tiny,smollm2",
                    help="part c: the targets (tiny, smollm2)")
    ap.add_argument("--pairs", type=int, default=31,
                    help="parts c, o: alternating plain/speculative pairs per case")
    ap.add_argument("--idle-token-us", type=float, default=72.0,
                    help="part o: a tiny-model token on an idle machine (2 threads), which "
                         "the host work alone is projected onto")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--eagle3-draft", default="",
                    help="part g: an EAGLE3 draft GGUF of SmolLM2 (tools/train_eagle3.py)")
    ap.add_argument("--flash-attn", action="store_true",
                    help="flash attention for the SmolLM2 runs")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time per token: wall time of the generation (default) or the process's "
                         "CPU time less the prompt's (steadier on a loaded machine; parts a-c)")
    ap.add_argument("--m-embd", type=int, default=64, help="part m: model width (64: the "
                    "tiny writers' defaults; wider: heads of 32, FFN 3x)")
    ap.add_argument("--m-vocab", type=int, default=256, help="part m: vocabulary (wider models)")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="per-token time over the repeats of each side (parts a, c, e, g): the "
                         "median (default) or the minimum (on a loaded machine the least "
                         "disturbed run, closest to the cost itself)")
    args = ap.parse_args()
    CLOCK["kind"] = args.clock
    CLOCK["stat"] = min if args.stat == "min" else statistics.median
    parts = set(args.part.split(","))
    print(f"load average {os.getloadavg()}, clock {args.clock}")
    with tempfile.TemporaryDirectory() as folder:
        tiny = tiny_target(folder) if parts & {"b", "c", "d", "o"} else None
        if "a" in parts:
            part_a(args)
        if "b" in parts:
            part_b(args, tiny)
        if "c" in parts:
            part_c(args, tiny)
        if "d" in parts:
            part_d(args, tiny)
        if "o" in parts:
            part_o(args, tiny)
        if "e" in parts:
            part_e(args)
        if "w" in parts:
            part_w(args)
        if "m" in parts:
            part_m(args)
        if "g" in parts:
            part_g(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
