"""Cost of one MTP draft step next to one target decode step, on the tiny near-bigram
models (qwen35, step35 with 3 chained heads, deepseek4), the two sides alternated in one run.
Usage: PYGGML_BUILD_DIR=build python bench/mtp_draft_cost.py [reps]
Prints arch, target ms/token, draft ms/step (head 0 on one entry; for step35 also head 2
over a 3-entry prefix, the last chained step), their ratio, then the machine load."""
import argparse
import os
import tempfile
import time

import checkout  # noqa: E402,F401  (this checkout's pyggml, not an installed copy)
import numpy as np

import pyggml as gg
from pyggml.llm import Context, Model
from pyggml.llm.tiny import write_tiny_deepseek4, write_tiny_qwen35, write_tiny_step35


def step_times(model, reps, chained):
    kw = dict(n_ctx=512, n_threads=2)
    t = Context(model, embeddings_nextn=True, n_rs_seq=4, **kw)
    d = Context(model, ctx_type="mtp", n_outputs_max=1, **kw)
    prompt = [int(x) for x in np.random.default_rng(0).integers(3, 256, 64)]
    t.decode(prompt, logits_all=True)
    hs = np.concatenate([np.zeros((1, d.n_embd_nextn), np.float32), t.embd_nextn[:-1]])
    d.decode(prompt, embd=hs)
    h = t.embd_nextn[-1:]
    pos = len(prompt)
    tt, td, tc = [], [], []
    for _ in range(reps):                      # alternate target / draft / chained draft
        t0 = time.perf_counter()
        t.decode([5])
        tt.append(time.perf_counter() - t0)
        t.seq_rm(0, pos, -1)
        t0 = time.perf_counter()
        d.decode([5], embd=h)
        td.append(time.perf_counter() - t0)
        d.seq_rm(0, pos, -1)
        if chained:
            d.set_nextn_layer_offset(2)
            t0 = time.perf_counter()
            d.decode([5, 6, 7], embd=np.repeat(h, 3, 0))
            tc.append(time.perf_counter() - t0)
            d.seq_rm(0, pos, -1)
            d.set_nextn_layer_offset(0)
    med = lambda x: 1e3 * float(np.median(x)) if x else float("nan")  # noqa: E731
    return med(tt), med(td), med(tc)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reps", type=int, nargs="?", default=20, help="steps of each side (default 20)")
    reps = ap.parse_args().reps
    tmp = tempfile.mkdtemp()
    cases = [("qwen35", write_tiny_qwen35(os.path.join(tmp, "q.gguf"), n_layer=4, bigram=0.5), False),
             ("step35", write_tiny_step35(os.path.join(tmp, "s.gguf"), bigram=0.5), True),
             ("deepseek4", write_tiny_deepseek4(os.path.join(tmp, "d.gguf"), n_nextn=1, bigram=1.5), False)]
    print(f"{'arch':10} {'target ms':>10} {'draft ms':>9} {'ratio':>6} {'chained ms':>11}")
    for arch, path, chained in cases:
        a, b, c = step_times(Model.load(path), reps, chained)
        print(f"{arch:10} {a:10.3f} {b:9.3f} {b / a:6.2f} {c:11.3f}")
    print("load:", os.getloadavg(), "pyggml", gg.__file__)


if __name__ == "__main__":
    main()
