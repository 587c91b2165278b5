"""The pyggml command line: demo | run | info | graph.

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
    out = ctx.generate(a.tokens, a.n, sampler=sampler)
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
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{demo,run,info,graph}", parser_class=_Parser)

    def common(sp):
        sp.add_argument("-t", "--threads", type=_int_at_least(1), default=min(4, os.cpu_count() or 1),
                        help="CPU threads")
        sp.add_argument("--no-flash-attn", action="store_true", help="use mul_mat + soft_max attention")

    d = sub.add_parser("demo", formatter_class=fmt, help="generate with a tiny random LLaMA (written on first use)",
                       description="Generate with a tiny random LLaMA, written once into $PYGGML_CACHE "
                                   "(default ~/.cache/pyggml).")
    d.add_argument("--layer", action="store_true", help="build and profile one LLaMA-style layer instead")
    d.add_argument("-n", type=_int_at_least(1), default=32, help="tokens to generate")
    common(d)

    r = sub.add_parser("run", formatter_class=fmt, help="generate token ids with a GGUF model",
                       description="Generate token ids with a GGUF model.")
    r.add_argument("model", help="path of a .gguf file")
    r.add_argument("--tokens", type=_tokens, required=True, help="prompt ids, e.g. 1,2,3")
    r.add_argument("-n", type=_int_at_least(1), default=32, help="tokens to generate")
    r.add_argument("--json", action="store_true", help='print {"tokens": [...], "timings": {...}}')
    r.add_argument("-c", "--ctx-size", type=_int_at_least(0), default=0,
                   help="context length; 0 = prompt + n (at least 256, at most the model's n_ctx_train)")
    r.add_argument("--temp", type=float, default=0.0, help="sampling temperature; 0 = greedy")
    r.add_argument("--top-k", type=int, default=40, help="top-k sampling (with --temp > 0)")
    r.add_argument("--top-p", type=float, default=0.95, help="top-p sampling (with --temp > 0)")
    r.add_argument("--min-p", type=float, default=0.05, help="min-p sampling (with --temp > 0)")
    r.add_argument("--seed", type=int, default=None, help="sampling seed; none = random")
    common(r)

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
        return {"demo": cmd_demo, "run": cmd_run, "info": cmd_info, "graph": cmd_graph}[a.cmd](a)
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
