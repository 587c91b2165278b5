"""The pyggml command line: demo | run | chat | info | graph.

Every user error is one line on stderr, ``pyggml <command>: <what is wrong and what to do>``,
with exit status 2 for a bad command line and 1 for a failure while running; never a traceback
(set PYGGML_TRACEBACK=1 to see one for an unexpected error)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

EXIT_RUNTIME, EXIT_USAGE = 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the command and pointing at --help."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _int_at_least(lo: int):
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {s!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be >= {lo}, got {v}")
        return v
    parse.__name__ = f"integer >= {lo}"
    return parse


class UsageError(Exception):
    """A bad combination of command-line arguments (exit status 2)."""


def _tokens(s: str) -> list[int]:
    try:
        ids = [int(x) for x in s.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes comma-separated integer ids, got {s!r}") from None
    if not ids:
        raise argparse.ArgumentTypeError("needs at least one token id, e.g. --tokens 1,2,3")
    return ids


def _load(path):
    from .llm import Model
    # the loading bar (large files) only where a person watches; pipes get no bar lines
    return Model.load(path, progress=None if sys.stderr.isatty() else False)


def cmd_demo(a) -> int:
    from . import demo
    if a.layer:
        demo.run_layer_demo(n_threads=a.threads, flash_attn=not a.no_flash_attn)
    elif a.tiny:
        demo.run_generate_demo(n=a.n, n_threads=a.threads, flash_attn=not a.no_flash_attn)
    else:
        demo.run_demo(n=a.n, n_threads=a.threads, flash_attn=not a.no_flash_attn)
    return 0


def _sampler(a):
    from .llm.sampling import make_sampler
    try:
        return make_sampler(a.temp, top_k=a.top_k, top_p=a.top_p, min_p=a.min_p, seed=a.seed,
                            repeat_penalty=a.repeat_penalty, penalty_last_n=a.repeat_last_n)
    except ValueError as e:
        raise SystemExit(f"pyggml {a.cmd}: {e}")


def _text_model(a):
    """The model, with its tokenizer checked up front (a one-line error when it has none)."""
    model = _load(a.model)
    try:
        model.tokenizer
    except (ValueError, NotImplementedError) as e:
        raise SystemExit(f"pyggml {a.cmd}: {e}")
    return model


def _context(a, model, n_tokens: int):
    from .llm import Context
    n_train = model.hparams.n_ctx_train or 4096
    n_ctx = a.ctx_size or min(max(256, n_tokens), n_train)
    try:
        return Context(model, n_ctx=n_ctx, n_threads=a.threads, flash_attn=not a.no_flash_attn)
    except (ValueError, NotImplementedError) as e:
        raise SystemExit(f"pyggml {a.cmd}: {e}")


def _speculate(a, ctx, prompt, sampler, stop=None):
    """--draft: generate with speculative decoding; (ids, stats without the per-step list)."""
    from .llm.speculative import SpeculativeDecoder
    try:
        dec = SpeculativeDecoder(ctx, a.draft, n_max=a.draft_max, n_min=a.draft_min,
                                 sampler=sampler, seed=a.seed if a.seed is not None else 0)
        out = dec.generate(prompt, a.n, stop=stop)
    except (ValueError, NotImplementedError) as e:
        raise SystemExit(f"pyggml run: {e}")
    stats = {k: v for k, v in dec.stats.items() if k != "steps"}
    return out, stats


def _run_text(a) -> int:
    """`run -p TEXT`: stream the continuation of the prompt as it is generated."""
    from .llm.generate import TextStream, TokenStream
    model = _text_model(a)
    prompt = model.tokenize(a.prompt, add_special=True, parse_special=True)
    if not prompt:
        raise SystemExit("pyggml run: the prompt is empty (and the model adds no BOS token)")
    ctx = _context(a, model, len(prompt) + a.n)
    if a.draft:
        return _run_text_speculative(a, model, ctx, prompt)
    stream = TokenStream(ctx, prompt, a.n, sampler=_sampler(a),
                         stop=None if a.ignore_eos else model.is_eog)
    text = TextStream(model)
    t0 = time.perf_counter()
    try:
        if a.json:
            for tok in stream:
                text.push(tok)
        else:
            sys.stdout.write(a.prompt)
            for tok in stream:
                sys.stdout.write(text.push(tok))
                sys.stdout.flush()
    except ValueError as e:
        raise SystemExit(f"pyggml run: {e}")
    tail = text.flush()
    timings = dict(stream.timings, total_s=time.perf_counter() - t0, n_threads=a.threads,
                   flash_attn=not a.no_flash_attn)
    if a.json:
        print(json.dumps({"text": text.text, "tokens": stream.ids, "prompt_tokens": prompt,
                          "timings": timings}))
        return 0
    print(tail)
    print(f"prompt {timings['prompt_tokens']} tokens, {timings['prompt_tokens_per_s']:.1f} t/s; "
          f"generated {timings['gen_tokens']} tokens, {timings['gen_tokens_per_s']:.1f} t/s "
          f"(stop: {timings['stop_reason']})", file=sys.stderr)
    return 0


def _run_text_speculative(a, model, ctx, prompt) -> int:
    t0 = time.perf_counter()
    out, stats = _speculate(a, ctx, prompt, _sampler(a), None if a.ignore_eos else model.is_eog)
    text = model.detokenize(out)
    timings = {"prompt_tokens": len(prompt), "prompt_s": stats["prompt_s"],
               "prompt_tokens_per_s": len(prompt) / max(stats["prompt_s"], 1e-9),
               "gen_tokens": len(out), "gen_s": stats["gen_s"],
               "gen_tokens_per_s": stats["tokens_per_s"], "stop_reason": out.stop_reason,
               "total_s": time.perf_counter() - t0, "n_threads": a.threads,
               "flash_attn": not a.no_flash_attn}
    if a.json:
        print(json.dumps({"text": text, "tokens": list(out), "prompt_tokens": prompt,
                          "timings": timings, "speculative": stats}))
        return 0
    print(a.prompt + text)
    print(f"prompt {len(prompt)} tokens; generated {len(out)} tokens, "
          f"{stats['tokens_per_s']:.1f} t/s (stop: {out.stop_reason}); draft {a.draft}: "
          f"acceptance length {stats['mean_acceptance_length']:.2f}, rate "
          f"{stats['acceptance_rate']:.2f} over {stats['n_verify_steps']} verify steps",
          file=sys.stderr)
    return 0


def cmd_run(a) -> int:
    from .demo import piece
    if a.prompt is not None:
        if a.tokens is not None:
            raise UsageError("give either -p/--prompt or --tokens, not both")
        return _run_text(a)
    if a.tokens is None:
        raise UsageError("give a prompt: -p TEXT, or --tokens IDS")
    model = _load(a.model)
    ctx = _context(a, model, len(a.tokens) + a.n)
    sampler = _sampler(a)
    t0 = time.perf_counter()
    spec = None
    if a.draft:
        out, spec = _speculate(a, ctx, a.tokens, sampler)
        timings = {"prompt_tokens": len(a.tokens), "prompt_s": spec["prompt_s"],
                   "prompt_tokens_per_s": len(a.tokens) / max(spec["prompt_s"], 1e-9),
                   "gen_tokens": len(out), "gen_s": spec["gen_s"],
                   "gen_tokens_per_s": spec["tokens_per_s"], "stop_reason": out.stop_reason}
    else:
        try:
            out = ctx.generate(a.tokens, a.n, sampler=sampler)
        except ValueError as e:
            raise SystemExit(f"pyggml run: {e}")
        timings = dict(ctx.last_timings)
    timings.update(total_s=time.perf_counter() - t0, n_threads=a.threads,
                   flash_attn=not a.no_flash_attn)
    if a.json:
        d = {"tokens": list(out), "timings": timings}
        if spec is not None:
            d["speculative"] = spec
        print(json.dumps(d))
        return 0
    print(" ".join(str(t) for t in out))
    if model.vocab:
        print(repr("".join(piece(model.vocab, t) for t in out)))
    print(f"prompt {timings['prompt_tokens']} tokens, {timings['prompt_tokens_per_s']:.1f} t/s; "
          f"generated {len(out)} tokens, {timings['gen_tokens_per_s']:.1f} t/s", file=sys.stderr)
    return 0


def cmd_chat(a) -> int:
    """An interactive chat on stdin/stdout, rendered with the model's chat template. Each turn
    re-renders the whole conversation and decodes only what the cache does not hold yet."""
    model = _text_model(a)
    try:
        template = model.chat_template
    except ValueError as e:
        raise SystemExit(f"pyggml chat: {e}")
    if template is None:
        raise SystemExit(f"pyggml chat: {os.path.basename(a.model)} has no chat template "
                         "(tokenizer.chat_template); use `pyggml run -p` instead")
    ctx = _context(a, model, 4096)     # a conversation grows: up to 4096 or n_ctx_train
    sampler = _sampler(a)
    system = [{"role": "system", "content": a.system}] if a.system else []
    interactive = sys.stdin.isatty()
    if interactive:
        print(f"chatting with {os.path.basename(a.model)}; /reset forgets, /exit or Ctrl-D quits",
              file=sys.stderr)
    try:
        _chat_loop(a, model, ctx, sampler, system, interactive)
    except KeyboardInterrupt:          # Ctrl-C: leave the chat without a traceback
        print(file=sys.stderr)
        return 130
    return 0


def _chat_loop(a, model, ctx, sampler, system, interactive) -> None:
    from .llm.generate import TextStream, TokenStream
    messages = list(system)
    cached: list[int] = []          # the ids the context holds for sequence 0
    while True:
        if interactive:
            sys.stdout.write("> ")
            sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            break
        line = line.rstrip("\n")
        if not line.strip():
            continue
        if line.strip() == "/exit":
            break
        if line.strip() == "/reset":
            messages, cached = list(system), []
            ctx.reset()
            continue
        messages.append({"role": "user", "content": line})
        try:
            prompt = model.tokenize(model.apply_chat_template(messages), add_special=True,
                                    parse_special=True)
        except ValueError as e:
            raise SystemExit(f"pyggml chat: {e}")
        if len(prompt) + 1 > ctx.n_ctx:
            print(f"pyggml chat: the conversation ({len(prompt)} tokens) no longer fits the context "
                  f"({ctx.n_ctx}); starting over", file=sys.stderr)
            messages, cached = list(system) + [messages[-1]], []
            ctx.reset()
            prompt = model.tokenize(model.apply_chat_template(messages), add_special=True,
                                    parse_special=True)
            if len(prompt) + 1 > ctx.n_ctx:
                print("pyggml chat: that message alone does not fit the context; raise -c",
                      file=sys.stderr)
                messages = list(system)
                continue
        keep = 0
        while keep < min(len(cached), len(prompt) - 1) and cached[keep] == prompt[keep]:
            keep += 1
        ctx.seq_rm(0, keep, -1)
        n = min(a.n, ctx.n_ctx - len(prompt))
        stream = TokenStream(ctx, prompt[keep:], n, sampler=sampler, stop=model.is_eog)
        text = TextStream(model)
        for tok in stream:
            sys.stdout.write(text.push(tok))
            sys.stdout.flush()
        sys.stdout.write(text.flush() + "\n")
        sys.stdout.flush()
        decoded = stream.ids if stream.pending is None else stream.ids[:-1]
        cached = prompt + decoded
        messages.append({"role": "assistant", "content": text.text})
        t = stream.timings
        print(f"[prompt {t['prompt_tokens']} tokens, {t['prompt_tokens_per_s']:.1f} t/s; "
              f"reply {t['gen_tokens']} tokens, {t['gen_tokens_per_s']:.1f} t/s]", file=sys.stderr)


def cmd_info(a) -> int:
    import collections
    import pyggml as gg
    model = _load(a.model)
    hp = model.hparams
    tensors = [{"name": name, "type": gg.type_name(t.type), "ne": t.ne[:max(1, t.n_dims)]}
               for name, t in model.tensors.items()]
    n_params = sum(t.nelements for t in model.tensors.values())
    n_vocab = len(model.vocab) if model.vocab else 0
    if a.json:
        print(json.dumps({"file": a.model, "size_bytes": os.path.getsize(a.model),
                          "hparams": vars(hp), "n_parameters": n_params, "vocab_size": n_vocab,
                          "tensors": tensors}, default=str))
        return 0
    print(f"file        {a.model} ({os.path.getsize(a.model) / 2**20:.1f} MiB)")
    for k, v in vars(hp).items():
        print(f"{k:<20s}{v}")
    types = collections.Counter(t["type"] for t in tensors)
    print(f"{'tensors':<20s}{len(tensors)} ({', '.join(f'{k}: {v}' for k, v in sorted(types.items()))})")
    print(f"{'parameters':<20s}{n_params:,}")
    print(f"{'vocab':<20s}{n_vocab or 'none'}")
    width = max((len(t["name"]) for t in tensors), default=4)
    print(f"\n  {'name':<{width}s}  {'type':<6s}  ne")
    for t in tensors:
        print(f"  {t['name']:<{width}s}  {t['type']:<6s}  {t['ne']}")
    return 0


def cmd_graph(a) -> int:
    import pyggml as gg
    from .llm.graph import GraphParams, GraphResult, graph_max_nodes
    from .llm.inputs import UBatch
    from .llm.kv_cache import KVCache
    from .llm.models import build_graph
    model = _load(a.model)
    hp = model.hparams
    fa = not a.no_flash_attn
    kv = KVCache.for_model(hp, max(256, -(-a.n_tokens // 256) * 256), v_trans=not fa)
    ub = UBatch.from_tokens([0] * a.n_tokens)
    slot = kv.find_slot(ub)
    kv.apply_ubatch(slot, ub)
    p = GraphParams(arch=hp.arch, hparams=hp, ubatch=ub, n_outputs=1, flash_attn=fa, kv=kv,
                    slot=slot, n_kv=kv.get_n_kv())
    res = build_graph(model, p, GraphResult(graph_max_nodes(len(model.tensors))))
    gf = res.gf
    if a.dot:
        gf.to_dot(a.dot)
        print(f"wrote {a.dot}: {gf.n_nodes} nodes, {len(gf.leafs)} leafs")
    elif a.json:
        def row(t):
            return {"name": t.name, "op": t.op, "type": gg.type_name(t.type), "ne": t.ne}
        print(json.dumps({"n_nodes": gf.n_nodes, "n_leafs": len(gf.leafs),
                          "nodes": [row(n) for n in gf.nodes], "leafs": [row(t) for t in gf.leafs]}))
    else:
        print(gf)
    return 0


def _parser() -> argparse.ArgumentParser:
    from . import __version__
    fmt = argparse.ArgumentDefaultsHelpFormatter
    p = _Parser(prog="pyggml", formatter_class=fmt,
                description="pyggml: ggml's tensor model in C++, and a llama.cpp-style LLM runtime in Python")
    p.add_argument("--version", action="version", version=f"pyggml {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{demo,run,chat,info,graph}",
                           parser_class=_Parser)

    def common(sp):
        sp.add_argument("-t", "--threads", type=_int_at_least(1), default=min(4, os.cpu_count() or 1),
                        help="CPU threads")
        sp.add_argument("--no-flash-attn", action="store_true", help="use mul_mat + soft_max attention")

    def sampling(sp):
        sp.add_argument("-c", "--ctx-size", type=_int_at_least(0), default=0,
                        help="context length; 0 = fit the prompt (at least 256, at most n_ctx_train)")
        sp.add_argument("--temp", type=float, default=0.0, help="temperature; 0 = greedy")
        sp.add_argument("--top-k", type=int, default=40, help="top-k sampling (with --temp > 0)")
        sp.add_argument("--top-p", type=float, default=0.95, help="top-p sampling (with --temp > 0)")
        sp.add_argument("--min-p", type=float, default=0.05, help="min-p sampling (with --temp > 0)")
        sp.add_argument("--repeat-penalty", type=float, default=1.0, help="1 = off")
        sp.add_argument("--repeat-last-n", type=_int_at_least(0), default=64, help="ids the penalty looks at")
        sp.add_argument("--seed", type=int, default=None, help="sampling seed; none = random")

    d = sub.add_parser("demo", formatter_class=fmt,
                       help="answer a question with SmolLM2-135M (fetched on first use; a tiny random model when offline)",
                       description="Answer a fixed question with SmolLM2-135M-Instruct, fetched once into "
                                   "$PYGGML_CACHE (default ~/.cache/pyggml); offline, a tiny random LLaMA.")
    d.add_argument("--layer", action="store_true", help="build and profile one LLaMA-style layer instead")
    d.add_argument("--tiny", action="store_true", help="use the tiny random-weight model")
    d.add_argument("-n", type=_int_at_least(1), default=64, help="tokens to generate")
    common(d)

    r = sub.add_parser("run", formatter_class=fmt,
                       help="continue a text prompt (-p) or token ids (--tokens) with a GGUF model",
                       description="Continue a text prompt (-p) or token ids (--tokens) with a GGUF model.")
    r.add_argument("model", help="path of a .gguf file")
    r.add_argument("-p", "--prompt", default=None, help="prompt text (special tokens are parsed)")
    r.add_argument("--tokens", type=_tokens, default=None, help="prompt ids, e.g. 1,2,3")
    r.add_argument("-n", type=_int_at_least(1), default=32, help="tokens to generate")
    r.add_argument("--json", action="store_true",
                   help='print {"text", "tokens", "timings"} (-p) or {"tokens", "timings"} (--tokens)')
    r.add_argument("--ignore-eos", action="store_true", help="do not stop at end-of-generation tokens")
    r.add_argument("--draft", choices=["ngram"], default=None,
                   help="speculative decoding with this draft (ngram: prompt lookup, no draft "
                        "model); --json adds the acceptance statistics")
    r.add_argument("--draft-max", type=_int_at_least(1), default=8, help="most drafted tokens per step")
    r.add_argument("--draft-min", type=_int_at_least(0), default=0,
                   help="shorter drafts are not verified")
    sampling(r)
    common(r)

    ch = sub.add_parser("chat", formatter_class=fmt, help="chat with a GGUF model on stdin, using its chat template",
                        description="Chat with a GGUF model on stdin, using its chat template.")
    ch.add_argument("model", help="path of a .gguf file")
    ch.add_argument("--system", default=None, help="system message")
    ch.add_argument("-n", type=_int_at_least(1), default=256, help="most tokens per reply")
    sampling(ch)
    common(ch)

    i = sub.add_parser("info", formatter_class=fmt, help="hyperparameters and tensors of a GGUF model",
                       description="Hyperparameters and tensors (name, type, ne) of a GGUF model.")
    i.add_argument("model", help="path of a .gguf file")
    i.add_argument("--json", action="store_true", help="print one JSON object")

    g = sub.add_parser("graph", formatter_class=fmt, help="print a model's graph or write it as Graphviz dot",
                       description="Build a model's forward graph for a batch of tokens and print it.")
    g.add_argument("model", help="path of a .gguf file")
    g.add_argument("--dot", help="write Graphviz dot to this path instead of printing")
    g.add_argument("--json", action="store_true", help="print the nodes and leafs as JSON")
    g.add_argument("--n-tokens", type=_int_at_least(1), default=8, help="tokens in the batch")
    common(g)
    return p


def _describe(e: BaseException) -> str:
    """One line saying what went wrong (and, where known, what to do)."""
    if isinstance(e, FileNotFoundError):
        return f"no such file: {e.filename}" if e.filename else str(e)
    if isinstance(e, OSError) and e.strerror:
        return f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    text = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, MemoryError):
        return f"out of memory: {text} (try a smaller model, --ctx-size or --n-tokens)"
    return text


def main(argv=None) -> int:
    p = _parser()
    a = p.parse_args(argv)
    prog = f"pyggml {a.cmd}"
    try:
        return {"demo": cmd_demo, "run": cmd_run, "chat": cmd_chat, "info": cmd_info,
                "graph": cmd_graph}[a.cmd](a)
    except UsageError as e:
        print(f"{prog}: {e} (see {prog} --help)", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as e:  # a command's own one-line message: print it, return the status
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            return EXIT_RUNTIME
        raise
    except BrokenPipeError:  # e.g. `pyggml info model.gguf | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, NotImplementedError, OSError, MemoryError, RuntimeError) as e:
        if os.environ.get("PYGGML_TRACEBACK"):
            raise
        print(f"{prog}: {_describe(e)}", file=sys.stderr)
        return EXIT_RUNTIME
    except Exception as e:  # a bug: still one line, with how to get the details
        if os.environ.get("PYGGML_TRACEBACK"):
            raise
        print(f"{prog}: internal error ({type(e).__name__}: {_describe(e)}); rerun with "
              f"PYGGML_TRACEBACK=1 for the traceback and please report it", file=sys.stderr)
        return EXIT_RUNTIME
