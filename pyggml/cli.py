"""The pyggml command line: demo | run | chat | info | graph."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _tokens(s: str) -> list[int]:
    try:
        return [int(x) for x in s.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--tokens takes comma-separated integer ids, got {s!r}") from None


def _load(path):
    from .llm import Model
    if not os.path.exists(path):
        raise SystemExit(f"pyggml: no such file: {path}")
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


def _run_text(a) -> int:
    """`run -p TEXT`: stream the continuation of the prompt as it is generated."""
    from .llm.generate import TextStream, TokenStream
    model = _text_model(a)
    prompt = model.tokenize(a.prompt, add_special=True, parse_special=True)
    if not prompt:
        raise SystemExit("pyggml run: the prompt is empty (and the model adds no BOS token)")
    ctx = _context(a, model, len(prompt) + a.n)
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


def cmd_run(a) -> int:
    from .demo import piece
    if a.prompt is not None:
        if a.tokens is not None:
            raise SystemExit("pyggml run: give either -p/--prompt or --tokens, not both")
        return _run_text(a)
    if a.tokens is None:
        raise SystemExit("pyggml run: give a prompt: -p TEXT, or --tokens IDS")
    model = _load(a.model)
    ctx = _context(a, model, len(a.tokens) + a.n)
    sampler = _sampler(a)
    t0 = time.perf_counter()
    try:
        out = ctx.generate(a.tokens, a.n, sampler=sampler)
    except ValueError as e:
        raise SystemExit(f"pyggml run: {e}")
    timings = dict(ctx.last_timings, total_s=time.perf_counter() - t0, n_threads=a.threads,
                   flash_attn=not a.no_flash_attn)
    if a.json:
        print(json.dumps({"tokens": out, "timings": timings}))
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
    print(f"file        {a.model} ({os.path.getsize(a.model) / 2**20:.1f} MiB)")
    for k, v in vars(hp).items():
        print(f"{k:<20s}{v}")
    types = collections.Counter(gg.type_name(t.type) for t in model.tensors.values())
    n_params = sum(t.nelements for t in model.tensors.values())
    print(f"{'tensors':<20s}{len(model.tensors)} ({', '.join(f'{k}: {v}' for k, v in sorted(types.items()))})")
    print(f"{'parameters':<20s}{n_params:,}")
    print(f"{'vocab':<20s}{len(model.vocab) if model.vocab else 'none'}")
    return 0


def cmd_graph(a) -> int:
    from .llm.graph import GraphParams, GraphResult, graph_max_nodes
    from .llm.inputs import UBatch
    from .llm.kv_cache import KVCache
    from .llm.models import build_graph
    model = _load(a.model)
    hp = model.hparams
    fa = not a.no_flash_attn
    kv = KVCache.for_model(hp, 256, v_trans=not fa)
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
    else:
        print(gf)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="pyggml", description="pyggml: ggml's tensor model in C++, "
                                "and a llama.cpp-style LLM runtime in Python")
    sub = p.add_subparsers(dest="cmd", required=True)

    def common(sp):
        sp.add_argument("-t", "--threads", type=int, default=min(4, os.cpu_count() or 1))
        sp.add_argument("--no-flash-attn", action="store_true", help="use mul_mat + soft_max attention")

    def sampling(sp):
        sp.add_argument("-c", "--ctx-size", type=int, default=0, help="context size (default: fit)")
        sp.add_argument("--temp", type=float, default=0.0, help="temperature; 0 = greedy")
        sp.add_argument("--top-k", type=int, default=40)
        sp.add_argument("--top-p", type=float, default=0.95)
        sp.add_argument("--min-p", type=float, default=0.05)
        sp.add_argument("--repeat-penalty", type=float, default=1.0, help="1 = off")
        sp.add_argument("--repeat-last-n", type=int, default=64, help="ids the penalty looks at")
        sp.add_argument("--seed", type=int, default=None)

    d = sub.add_parser("demo", help="answer a question with SmolLM2-135M (fetched on first use; "
                       "a tiny random model when offline)")
    d.add_argument("--layer", action="store_true", help="build and profile one LLaMA-style layer")
    d.add_argument("--tiny", action="store_true", help="use the tiny random-weight model")
    d.add_argument("-n", type=int, default=64, help="tokens to generate")
    common(d)

    r = sub.add_parser("run", help="continue a text prompt (-p) or token ids (--tokens) with a GGUF model")
    r.add_argument("model")
    r.add_argument("-p", "--prompt", default=None, help="prompt text (special tokens are parsed)")
    r.add_argument("--tokens", type=_tokens, default=None, help="prompt ids, e.g. 1,2,3")
    r.add_argument("-n", type=int, default=32)
    r.add_argument("--json", action="store_true",
                   help='print {"text", "tokens", "timings"} (-p) or {"tokens", "timings"} (--tokens)')
    r.add_argument("--ignore-eos", action="store_true", help="do not stop at end-of-generation tokens")
    sampling(r)
    common(r)

    ch = sub.add_parser("chat", help="chat with a GGUF model on stdin, using its chat template")
    ch.add_argument("model")
    ch.add_argument("--system", default=None, help="system message")
    ch.add_argument("-n", type=int, default=256, help="most tokens per reply")
    sampling(ch)
    common(ch)

    i = sub.add_parser("info", help="hyperparameters and tensors of a GGUF model")
    i.add_argument("model")

    g = sub.add_parser("graph", help="print a model's graph or write it as Graphviz dot")
    g.add_argument("model")
    g.add_argument("--dot", help="output .dot path")
    g.add_argument("--n-tokens", type=int, default=8)
    common(g)

    a = p.parse_args(argv)
    try:
        return {"demo": cmd_demo, "run": cmd_run, "chat": cmd_chat, "info": cmd_info,
                "graph": cmd_graph}[a.cmd](a)
    except BrokenPipeError:  # e.g. `pyggml info model.gguf | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
