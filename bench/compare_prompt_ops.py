"""The ops of a tiny LLaMA's prompt graph (bench/compare_llama_cpp.py's tiny models at pp128 or
pp512) against ggml's CPU backend (llama-cpp-python's libggml, via bench/ggml_ref.py), one op
shape per row, the two sides alternating on identical inputs.

    python bench/compare_prompt_ops.py [-t THREADS] [-n TOKENS] [--kv N_KV] [--reps R] [--copies C]
                                       [--cpu-time]
                                       [FILTER ...]

Each side computes one graph of C independent copies of the op (same inputs), so a row is the
per-node cost a prompt graph pays for that op: kernel plus the schedule's hand-over between
nodes. Rows give microseconds per node (medians of R pairs, the two sides back to back, which
goes first alternating; --cpu-time: CPU seconds) and the median per-pair ratio ggml / pyggml
(> 1: pyggml is faster) with its distribution-free ~95% interval (bench/paired_stats.py). The tiny model: n_embd 128, 4 heads of 32 (2 KV heads), n_ff 384, F16 KV cache of 768
cells, n_kv 256 visible through a causal mask. FILTER words select rows by substring.
Prints `uptime` first: on a shared machine read the ratios only.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402

from compare_ggml import _weights  # noqa: E402
from paired_stats import Paired  # noqa: E402

EMBD, HEAD, N_HEAD, N_HEAD_KV, FF, CELLS = 128, 32, 4, 2, 384, 768

# llama-cpp-python's libggml-cpu runs its threads on OpenMP: after a compute the libgomp workers
# spin for several milliseconds and hold a core. Each timed call waits this long first, so both
# sides start from sleeping workers.
SETTLE_S = 0.02


CLOCK = {"now": time.perf_counter}


def _alternate(fa, fb, reps):
    """Per-pair seconds of fa and fb after a warm-up: `reps` pairs, each after SETTLE_S, which
    side goes first alternating. Returns (median a, median b, Paired)."""
    fa(), fb()
    pairs = Paired()
    now = CLOCK["now"]
    for r in range(reps):
        got = {}
        for f in ((fa, fb) if r % 2 == 0 else (fb, fa)):
            time.sleep(SETTLE_S)
            t0 = now()
            f()
            got[f] = now() - t0
        pairs.add(got[fa], got[fb])
    return statistics.median(pairs.a), statistics.median(pairs.b), pairs


class OursSide:
    def __init__(self, gg):
        self.gg = gg
        self.ctx = gg.Context(mem_size=256 << 20)
        self.T = {"f32": gg.F32, "f16": gg.F16, "i32": gg.I32, "i64": gg.I64}

    def tensor(self, type_name, ne, data):
        gg = self.gg
        t = self.T.get(type_name) or getattr(gg, type_name.upper())
        x = self.ctx.new_tensor(t, list(ne))
        x.set(data)
        return x

    def op(self, name, *args):
        return getattr(self.gg, name)(self.ctx, *args)

    def graph(self, outs, n_threads):
        g = self.gg.Graph(self.ctx, 4096)
        for o in outs:
            g.build_forward_expand(o)
        return lambda: g.compute(n_threads=n_threads)


class GgmlSide:
    def __init__(self, ref):
        self.ref = ref
        self.ctx = ref.context(256 << 20)
        base = ctypes.CDLL(os.path.join(ref.lib_dir, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
        P, I64, I, F = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float
        sz = ctypes.c_size_t
        sig = {
            "mul_mat": [P, P], "add": [P, P], "mul": [P, P], "get_rows": [P, P],
            "rms_norm": [P, F], "swiglu_split": [P, P], "set_rows": [P, P, P],
            "rope_ext": [P, P, P, I, I, I, F, F, F, F, F, F],
            "flash_attn_ext": [P, P, P, P, F, F, F],
            "view_3d": [P, I64, I64, I64, sz, sz, sz], "permute": [P, I, I, I, I],
        }
        self.fn = {}
        for name, args in sig.items():
            f = getattr(base, "ggml_" + name)
            f.restype, f.argtypes = P, [P] + args
            self.fn[name] = f
        self._build_expand = base.ggml_build_forward_expand
        self._build_expand.argtypes = [P, P]
        self._new_graph = base.ggml_new_graph_custom
        self._new_graph.restype, self._new_graph.argtypes = P, [P, sz, ctypes.c_bool]

    def tensor(self, type_name, ne, data):
        type_id = 27 if type_name == "i64" else self.ref.TYPE[type_name]  # GGML_TYPE_I64
        return self.ctx.tensor(type_id, list(ne), data)

    def op(self, name, *args):
        return self.fn[name](self.ctx.ptr, *args)

    def graph(self, outs, n_threads):
        g = self.ref
        gf = self._new_graph(self.ctx.ptr, 4096, False)
        for o in outs:
            self._build_expand(gf, o)
        pool = g.threadpool(n_threads)
        plan = g.ggml_graph_plan(gf, n_threads, pool)
        work = ctypes.create_string_buffer(max(1, plan.work_size) + 64)
        plan.work_data = ctypes.addressof(work)
        self.ctx._keep.append(work)

        def run():
            if g.ggml_graph_compute(gf, ctypes.byref(plan)) != 0:
                raise RuntimeError("ggml_graph_compute failed")
            g.ggml_threadpool_pause(pool)
        return run


def causal_mask(n_kv, n_tokens, past=0):
    """Token i (at position past + i) sees cells 0..past + i."""
    m = np.full((n_tokens, n_kv), -np.inf, np.float32)
    for i in range(n_tokens):
        m[i, : past + i + 1] = 0.0
    return m.astype(np.float16)


def cases(gg, n_tok, n_kv=0):
    """name -> builder(side, copies) returning the list of outputs."""
    rng = np.random.default_rng(0)
    f32 = lambda *shape: rng.uniform(-1, 1, size=shape).astype(np.float32)  # noqa: E731
    x = f32(n_tok, EMBD)
    # with --kv the tokens are the last ones of a filled context (decode at a long context)
    past = max(0, n_kv - n_tok) if n_kv else 0
    n_kv = n_kv or max(256, -(-n_tok // 256) * 256)
    cells = max(CELLS, n_kv)
    out = {}

    def unary(opname, ne, extra=()):
        data = f32(*ne[::-1])

        def build(s, c):
            t = s.tensor("f32", ne, data)
            return [s.op(opname, t, *extra) for _ in range(c)]
        return build

    out[f"rms_norm {EMBD}x{n_tok}"] = unary("rms_norm", (EMBD, n_tok), (1e-5,))
    w = f32(EMBD)

    def mul_bcast(s, c):
        a, b = s.tensor("f32", (EMBD, n_tok), x), s.tensor("f32", (EMBD,), w)
        return [s.op("mul", a, b) for _ in range(c)]
    out[f"mul {EMBD}x{n_tok} * {EMBD}"] = mul_bcast
    y = f32(n_tok, EMBD)

    def add(s, c):
        a, b = s.tensor("f32", (EMBD, n_tok), x), s.tensor("f32", (EMBD, n_tok), y)
        return [s.op("add", a, b) for _ in range(c)]
    out[f"add {EMBD}x{n_tok}"] = add
    g_, u_ = f32(n_tok, FF), f32(n_tok, FF)

    def swiglu(s, c):
        a, b = s.tensor("f32", (FF, n_tok), g_), s.tensor("f32", (FF, n_tok), u_)
        return [s.op("swiglu_split", a, b) for _ in range(c)]
    out[f"swiglu {FF}x{n_tok}"] = swiglu
    pos = np.arange(n_tok, dtype=np.int32)
    for nh in (N_HEAD, N_HEAD_KV):
        q = f32(n_tok, nh, HEAD)

        def rope(s, c, q=q, nh=nh):
            a, p = s.tensor("f32", (HEAD, nh, n_tok), q), s.tensor("i32", (n_tok,), pos)
            return [s.op("rope_ext", a, p, None, HEAD, 0, 8192, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0)
                    for _ in range(c)]
        out[f"rope {HEAD}x{nh}x{n_tok}"] = rope
    table = f32(256, EMBD)
    ids = rng.integers(0, 256, size=n_tok).astype(np.int32)

    def get_rows(s, c):
        a, b = s.tensor("f32", (EMBD, 256), table), s.tensor("i32", (n_tok,), ids)
        return [s.op("get_rows", a, b) for _ in range(c)]
    out[f"get_rows {EMBD}x{n_tok} of 256"] = get_rows
    kv = f32(n_tok, N_HEAD_KV * HEAD)
    idx = np.arange(n_tok, dtype=np.int64)
    cache0 = np.zeros((cells, N_HEAD_KV * HEAD), np.float16)

    def set_rows(s, c):
        src, ix = s.tensor("f32", (N_HEAD_KV * HEAD, n_tok), kv), s.tensor("i64", (n_tok,), idx)
        outs = []
        for _ in range(c):  # one cache per copy: the copies stay independent
            dst = s.tensor("f16", (N_HEAD_KV * HEAD, cells), cache0)
            outs.append(s.op("set_rows", dst, src, ix))
        return outs
    out[f"set_rows f16 {N_HEAD_KV * HEAD}x{n_tok} into {cells}"] = set_rows
    qd = f32(n_tok, N_HEAD, HEAD)
    kc = rng.uniform(-1, 1, size=(cells, N_HEAD_KV * HEAD)).astype(np.float16)
    vc = rng.uniform(-1, 1, size=(cells, N_HEAD_KV * HEAD)).astype(np.float16)
    mask = causal_mask(n_kv, n_tok, past)

    def fattn(s, c):
        q = s.op("permute", s.tensor("f32", (HEAD, N_HEAD, n_tok), qd), 0, 2, 1, 3)
        views = []
        for data in (kc, vc):
            cache = s.tensor("f16", (N_HEAD_KV * HEAD, cells), data)
            v = s.op("view_3d", cache, HEAD, N_HEAD_KV, n_kv, 2 * HEAD, 2 * HEAD * N_HEAD_KV, 0)
            views.append(s.op("permute", v, 0, 2, 1, 3))
        m = s.tensor("f16", (n_kv, n_tok), mask)
        return [s.op("flash_attn_ext", q, views[0], views[1], m, 1 / np.sqrt(HEAD), 0.0, 0.0)
                for _ in range(c)]
    out[f"flash_attn f16 D{HEAD} h{N_HEAD}/{N_HEAD_KV} kv{n_kv} n{n_tok} causal"] = fattn
    for tname in ("f32", "f16", "q8_0", "q4_0"):
        for K, M in ((EMBD, EMBD), (EMBD, N_HEAD_KV * HEAD), (EMBD, FF), (FF, EMBD)):
            b = f32(n_tok, K)

            def mm(s, c, tname=tname, K=K, M=M, b=b):
                _, raw = _weights(gg, np, tname, K, M)
                data = {"f32": raw.view(np.float32), "f16": raw.view(np.float16)}.get(tname, raw)
                if isinstance(s, GgmlSide):
                    wt = s.ctx.tensor(s.ref.TYPE[tname], [K, M], raw)
                else:
                    wt = s.tensor(tname, (K, M), data)
                bt = s.tensor("f32", (K, n_tok), b)
                return [s.op("mul_mat", wt, bt) for _ in range(c)]
            out[f"mul_mat {tname} K{K} M{M} N{n_tok}"] = mm
    return out



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", "--tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--kv", type=int, default=0,
                    help="flash_attn's visible cache cells, the tokens the last of them (decode at a long "
                         "context); default: n rounded up to 256, at least 256, the tokens the first")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time the process's CPU seconds (every thread's, spin-waits included): "
                         "with -t 1 the work itself, which other processes hardly move")
    ap.add_argument("filters", nargs="*")
    a = ap.parse_args()
    if a.cpu_time:
        CLOCK["now"] = time.process_time
    import pyggml as gg
    import ggml_ref
    ref = ggml_ref.load()
    if ref is None:
        sys.exit("llama_cpp's libggml does not load: nothing to compare against")
    print("# " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"# threads={a.threads} tokens={a.tokens} copies={a.copies}, medians of {a.reps} alternating pairs"
          + (", CPU time" if a.cpu_time else "") + "; ratio: median per-pair ggml / pyggml [~95% interval]")
    print(f"{'case':<52s} {'pyggml us':>10s} {'ggml us':>10s} {'ratio':>6s} {'interval':>14s}")
    for name, build in cases(gg, a.tokens, a.kv).items():
        if a.filters and not any(f in name for f in a.filters):
            continue
        ours, theirs = OursSide(gg), GgmlSide(ref)
        fo = ours.graph(build(ours, a.copies), a.threads)
        ft = theirs.graph(build(theirs, a.copies), a.threads)
        to, tt, pairs = _alternate(fo, ft, a.reps)
        to, tt = to / a.copies * 1e6, tt / a.copies * 1e6
        med, lo, hi, _ = pairs.ratio()
        print(f"{name:<52s} {to:10.1f} {tt:10.1f} {med:6.2f} {f'[{lo:.2f}, {hi:.2f}]':>14s}", flush=True)
        theirs.ctx.free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
