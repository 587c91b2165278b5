"""The pyggml command line: demo | run | info | graph."""
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
    return Model.load(path)


def cmd_demo(a) -> int:
    from . import demo
    if a.layer:
        demo.run_layer_demo(n_threads=a.threads, flash_attn=not a.no_flash_attn)
    else:
        demo.run_generate_demo(n=a.n, n_threads=a.threads, flash_attn=not a.no_flash_attn)
    return 0


def cmd_run(a) -> int:
    from .demo import piece
    from .llm import Context
    from .llm.sampling import make_sampler
    model = _load(a.model)
    n_ctx = a.ctx_size or min(max(256, len(a.tokens) + a.n), model.hparams.n_ctx_train or 4096)
    ctx = Context(model, n_ctx=n_ctx, n_threads=a.threads, flash_attn=not a.no_flash_attn)
    sampler = make_sampler(a.temp, top_k=a.top_k, top_p=a.top_p, min_p=a.min_p, seed=a.seed) \
        if a.temp > 0 else None
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

    d = sub.add_parser("demo", help="generate with a tiny random LLaMA (written on first use)")
    d.add_argument("--layer", action="store_true", help="build and profile one LLaMA-style layer")
    d.add_argument("-n", type=int, default=32, help="tokens to generate")
    common(d)

    r = sub.add_parser("run", help="generate token ids with a GGUF model")
    r.add_argument("model")
    r.add_argument("--tokens", type=_tokens, required=True, help="prompt ids, e.g. 1,2,3")
    r.add_argument("-n", type=int, default=32)
    r.add_argument("--json", action="store_true", help='print {"tokens": [...], "timings": {...}}')
    r.add_argument("-c", "--ctx-size", type=int, default=0)
    r.add_argument("--temp", type=float, default=0.0, help="0 = greedy")
    r.add_argument("--top-k", type=int, default=40)
    r.add_argument("--top-p", type=float, default=0.95)
    r.add_argument("--min-p", type=float, default=0.05)
    r.add_argument("--seed", type=int, default=None)
    common(r)

    i = sub.add_parser("info", help="hyperparameters and tensors of a GGUF model")
    i.add_argument("model")

    g = sub.add_parser("graph", help="print a model's graph or write it as Graphviz dot")
    g.add_argument("model")
    g.add_argument("--dot", help="output .dot path")
    g.add_argument("--n-tokens", type=int, default=8)
    common(g)

    a = p.parse_args(argv)
    try:
        return {"demo": cmd_demo, "run": cmd_run, "info": cmd_info, "graph": cmd_graph}[a.cmd](a)
    except BrokenPipeError:  # e.g. `pyggml info model.gguf | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
