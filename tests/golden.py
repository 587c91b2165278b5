"""Loading and running the recorded ggml 0.25.3 cases of ../shared/golden/."""
import json
import os
from pathlib import Path

import numpy as np

import pyggml as gg

# The recorded cases live in ../shared/golden next to the checkout; tests/golden_data is a
# verbatim copy so that a checkout without ../shared (e.g. a CI clone) still runs every case.
_SHARED = Path(__file__).resolve().parents[2] / "shared" / "golden"
_VENDORED = Path(__file__).resolve().parent / "golden_data"
GOLDEN_DIR = Path(os.environ["PYGGML_GOLDEN_DIR"]) if "PYGGML_GOLDEN_DIR" in os.environ else (
    _SHARED if _SHARED.exists() else _VENDORED)

TYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16, "i32": gg.I32, "i64": gg.I64,
         "q8_0": gg.Q8_0, "q4_0": gg.Q4_0, "nvfp4": gg.NVFP4}


def case_files():
    return sorted(GOLDEN_DIR.glob("*.npz")) if GOLDEN_DIR.exists() else []


def functions_used(case) -> set:
    return {step["fn"] for step in json.loads(str(case["graph"]))}


def _arg(a, env):
    if isinstance(a, str) and a.startswith("$"):
        return env[a[1:]]
    if a is None:
        return None
    if isinstance(a, dict):
        if "type" in a:
            return TYPES[a["type"]]
        if "enum" in a:
            return int(a["value"])
        if "float" in a:
            return float(a["float"])
    return a


def run_case(case, n_threads=2, backend="cpu"):
    """Builds and computes the case's graph on `backend`; returns (result tensor, context)."""
    names = [str(n) for n in case["input_names"]]
    total = sum(case[f"in_{n}"].nbytes for n in names)
    ctx = gg.Context(mem_size=4 * total + (64 << 20), backend=backend)
    env = {"ctx": ctx}
    for n in names:
        t = ctx.new_tensor(TYPES[str(case[f"in_{n}_type"])], [int(v) for v in case[f"in_{n}_ne"]])
        t.name = n
        t.set(case[f"in_{n}"])
        env[n] = t
    for step in json.loads(str(case["graph"])):
        fn = getattr(gg, step["fn"])
        out = fn(*[_arg(a, env) for a in step["args"]])
        if "out" in step:
            env[step["out"]] = out
    result = env["result"]
    g = gg.Graph(ctx)
    g.build_forward_expand(result)
    g.compute(n_threads=n_threads)
    return result, ctx


def result_values(result) -> np.ndarray:
    if result.type in (gg.I32, gg.I64):
        v = np.array(result.numpy()).astype(np.int64)
    else:
        v = result.to_f32()
    return v.reshape(tuple(reversed(result.ne)))
