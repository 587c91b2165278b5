"""Recurrent models: pyggml.llm vs llama.cpp (llama-cpp-python) on the tiny random mamba2 and
qwen35 models of pyggml.llm.tiny, with and without rollback snapshots (`n_rs_seq`, the window a
speculative target keeps): prompt processing and greedy decode tokens/s, same threads, the two
engines alternating in one run (compare_llama_cpp.py's harness).

    python bench/compare_recurrent.py [-t THREADS] [--rounds 3] [--n-rs-seq 0 4] [--gen 32]

Each figure is the median over `rounds` alternating runs; ratio = pyggml / llama.cpp. The
machine's load (uptime) is printed before and after: read ratios only on a shared machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see compare_llama_cpp.py

import checkout  # noqa: E402,F401  (this checkout's pyggml, not an installed copy)
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_llama_cpp import Ours, Theirs, model_path, start_decode, time_decode, time_prompt, uptime  # noqa: E402


class OursRs(Ours):
    def __init__(self, path, n_ctx, threads, n_rs_seq):
        from pyggml.llm import Context, Model
        self.model = Model.load(path, progress=False)
        self.ctx = Context(self.model, n_ctx=n_ctx, n_threads=threads, n_batch=512, n_ubatch=512,
                           n_rs_seq=n_rs_seq)
        self.n_vocab = self.ctx.hparams.n_vocab


def run_case(engine, prompts, n_gen):
    """tokens/s of one engine: each prompt from an empty context, then n_gen greedy tokens
    after a 16-token prompt."""
    out = {name: len(toks) / time_prompt(engine, toks, 1) for name, toks in prompts.items()}
    start_decode(engine, prompts["pp128"][:16])
    out[f"tg{n_gen}"] = n_gen / time_decode(engine, n_gen, 1)
    return out


class TheirsRs(Theirs):
    def __init__(self, path, n_ctx, threads, n_rs_seq):
        import llama_cpp as lc
        default = lc.llama_context_default_params

        def with_rs():
            cp = default()
            cp.n_rs_seq = n_rs_seq
            return cp
        lc.llama_context_default_params = with_rs      # Theirs reads the defaults once, here
        try:
            super().__init__(path, n_ctx, threads)
        finally:
            lc.llama_context_default_params = default


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--n-rs-seq", type=int, nargs="+", default=[0, 4])
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "pyggml-bench"))
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        sys.exit("llama_cpp (llama-cpp-python) does not import: nothing to compare against")
    import ggml_ref
    reason = ggml_ref.cpu_mismatch_reason()
    if reason:
        sys.exit(reason)
    print(f"# {uptime()}")
    print(f"# {a.threads} threads, median of {a.rounds} alternating rounds, tokens/s")
    print(f"{'case':<30s} {'pyggml':>10s} {'llama.cpp':>10s} {'ratio':>7s}")
    rng = np.random.default_rng(0)
    for name in ("mamba2", "qwen35"):
        path = model_path(a.dir, name)
        for n_rs in a.n_rs_seq:
            ours, theirs = OursRs(path, 640, a.threads, n_rs), TheirsRs(path, 640, a.threads, n_rs)
            n_vocab = min(ours.n_vocab, theirs.n_vocab)
            prompts = {"pp128": [int(x) for x in rng.integers(3, n_vocab, size=128)]}
            run_case(ours, prompts, 4)                       # warm-up: graphs, pages
            run_case(theirs, prompts, 4)
            res = {"ours": [], "theirs": []}
            for _ in range(a.rounds):
                for side, engine in (("ours", ours), ("theirs", theirs)):
                    res[side].append(run_case(engine, prompts, a.gen))
            theirs.close()
            for col in res["ours"][0]:
                o = statistics.median(r[col] for r in res["ours"])
                t = statistics.median(r[col] for r in res["theirs"])
                label = f"{name} n_rs_seq={n_rs} {col}"
                print(f"{label:<30s} {o:10.1f} {t:10.1f} {o / t:7.2f}", flush=True)
    print(f"# {uptime()}")


if __name__ == "__main__":
    main()
