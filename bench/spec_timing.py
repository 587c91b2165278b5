"""Shared pieces of the speculative-decoding benches: the copy-heavy prompts, the clocks
(wall or process CPU per generated token, and the host share outside graph computes), the
alternating plain/speculative pairs, the tiny target and a drafter whose drafts are rejected.
bench/compare_speculative.py and bench/spec_overhead.py use them."""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired_stats import Paired  # noqa: E402

CODE = '''def merge_sorted(a, b):
    """Merge two sorted lists into one sorted list."""
    i, j = 0, 0
    out = []
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    out.extend(a[i:])
    out.extend(b[j:])
    return out
'''

CLASS = '''class Stack:
    """A last-in first-out stack."""

    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)

    def pop(self):
        if not self.items:
            raise IndexError("pop from an empty stack")
        return self.items.pop()

    def peek(self):
        if not self.items:
            raise IndexError("peek at an empty stack")
        return self.items[-1]
'''

POINT = '''# point3d.py
class Point3D:
    """A point in space with validated float coordinates."""

    def __init__(self, x, y, z):
        self._x = float(x)
        self._y = float(y)
        self._z = float(z)

    @property
    def x(self):
        """The x coordinate."""
        return self._x

    @x.setter
    def x(self, value):
        if not isinstance(value, (int, float)):
            raise TypeError("x must be a number")
        self._x = float(value)

    @property
    def y(self):'''

QUEUE_HEAD = ("# stack.py\n" + CLASS + "\n\n# queue.py: the same structure as stack.py\n"
              "class Queue:\n    \"\"\"A first-in first-out queue.\"\"\"\n\n    def __init__(self):")
# continue-class ends with a newline after the colon: the model must then produce the body's
# indentation without the newline it is normally merged with, and SmolLM2 closes a markdown
# block and writes prose instead. continue-class-colon is the same task ending at the colon.
# continue-mirror: the y property and setter mirror x's (then z's).
COPY_PROMPTS = {
    "copy-function": "# merge.py, version 1\n" + CODE + "\n\n# merge.py, version 2: identical to version 1\n",
    "continue-class": QUEUE_HEAD + "\n",
    "continue-class-colon": QUEUE_HEAD,
    "continue-mirror": POINT,
}
FRESH_PROMPT = "Write a short paragraph about the history of the printing press."


def load():
    return os.getloadavg()[0]


# "wall": the generation's wall time per token (as the decoders time it); "cpu": the
# process's CPU time per token (both threads), less the prompt's: on a machine shared with
# other work, wall time mostly measures the others, CPU time mostly this process
CLOCK = {"kind": "wall", "prompt_cpu": {}, "stat": statistics.median}


def _prompt_cpu(ctx, prompt) -> float:
    key = (id(ctx), len(prompt))
    if key not in CLOCK["prompt_cpu"]:
        best = float("inf")
        for _ in range(3):
            ctx.reset()
            t0 = time.process_time()
            ctx.decode_greedy(prompt)
            best = min(best, time.process_time() - t0)
        CLOCK["prompt_cpu"][key] = best
    return CLOCK["prompt_cpu"][key]


def _host_seconds(ctx, wall: float, t0: dict) -> float:
    """Wall seconds of a call spent outside the graphs' compute and builds (the Python and
    host work of the loop): on a loaded machine the compute of a small model swings with the
    cache the other processes leave it, the host part much less."""
    tm = ctx.timings
    return wall - (tm["t_compute_s"] - t0["t_compute_s"]) - (tm["t_build_s"] - t0["t_build_s"])


def timed_generate(ctx, prompt, n, host=None):
    """(ids, seconds per generated token); host: a list that gets the host seconds per token."""
    p_cpu = _prompt_cpu(ctx, prompt) if CLOCK["kind"] == "cpu" else 0.0
    ctx.reset()
    tm0, w0 = dict(ctx.timings), time.perf_counter()
    t0 = time.process_time()
    out = ctx.generate(prompt, n)
    cpu = time.process_time() - t0
    per = max(len(out) - 1, 1)
    if host is not None:
        host.append(_host_seconds(ctx, time.perf_counter() - w0, tm0) / per)
    if CLOCK["kind"] == "cpu":
        return out, max(cpu - p_cpu, 0.0) / per
    return out, ctx.last_timings["gen_s"] / per


def timed_spec(dec, prompt, n, host=None):
    p_cpu = _prompt_cpu(dec.ctx, prompt) if CLOCK["kind"] == "cpu" else 0.0
    dec.reset()
    tm0, w0 = dict(dec.ctx.timings), time.perf_counter()
    t0 = time.process_time()
    out = dec.generate(prompt, n)
    cpu = time.process_time() - t0
    per = max(len(out) - 1, 1)
    if host is not None:
        host.append(_host_seconds(dec.ctx, time.perf_counter() - w0, tm0) / per)
    s = dec.stats
    if CLOCK["kind"] == "cpu":
        return out, max(cpu - p_cpu, 0.0) / per, s
    return out, s["gen_s"] / per, s


def alternate(ctx, dec, prompt, n, repeats):
    """(base s/token, spec s/token, last stats, identical streams, Paired spec/base ratios):
    `repeats` pairs, each a plain run and a speculative run back to back, which one goes
    first alternating from pair to pair (a drift of the load moves both runs of a pair). pairs.host: the
    same pairs' host seconds per token (outside compute and graph builds)."""
    base, spec, same, stats = [], [], True, None
    pairs, hosts = Paired(), Paired()
    hb, hs = [], []
    timed_generate(ctx, prompt, n)      # untimed round: every graph of both sides is built
    timed_spec(dec, prompt, n)
    for r in range(repeats):
        if r % 2:
            out, ts, stats = timed_spec(dec, prompt, n, hs)
            ref, tb = timed_generate(ctx, prompt, n, hb)
        else:
            ref, tb = timed_generate(ctx, prompt, n, hb)
            out, ts, stats = timed_spec(dec, prompt, n, hs)
        base.append(tb)
        spec.append(ts)
        pairs.add(tb, ts)
        hosts.add(hb[-1], hs[-1])
        same &= list(out) == list(ref)
    pairs.host = hosts
    return CLOCK["stat"](base), CLOCK["stat"](spec), stats, same, pairs


def speedup_text(pairs) -> str:
    """The median paired speedup base/spec with its interval (the inverse of the spec/base
    ratio's: inverting keeps the order statistics)."""
    med, lo, hi, cover = pairs.ratio()
    return f"speedup {1 / med:5.2f}x [{1 / hi:.2f}, {1 / lo:.2f}]"


def tiny_target(folder):
    from pyggml.llm import Model, write_tiny_llama
    path = write_tiny_llama(os.path.join(folder, "bench-tiny.gguf"), n_vocab=4096, n_embd=256,
                            n_layer=4, n_head=8, n_head_kv=4, n_ff=768, seed=1)
    return Model.load(path, progress=False)


def rejected_drafter(n_vocab):
    """Drafts that (almost surely) are never the target's tokens."""
    from pyggml.llm.speculative import Draft, Drafter

    class Rejected(Drafter):
        kind = "rejected"

        def draft(self, id_last, pos0, n_max):
            return Draft(ids=[(int(id_last) * 7 + 3 + i) % n_vocab for i in range(n_max)])
    return Rejected()


def drafter_asks(stats) -> int:
    """Rounds that asked the drafter: every round that was not quiet (a plain step after an
    empty or declined draft, or a verify step); the gate's count misses the empty asks."""
    return stats["n_plain_steps"] - stats["n_quiet_rounds"] + stats["n_verify_steps"]
