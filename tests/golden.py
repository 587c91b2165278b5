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

# ggml type names as the cases spell them -> pyggml types (whatever this build implements).
TYPES = {gg.type_name(t): t for t in (getattr(gg, n) for n in dir(gg)) if isinstance(t, gg.Type)}

# Ops and block types of still-open issues: their cases are skipped (by name) until built.
# Each entry must still be missing from pyggml; test_golden_pending_is_still_pending fails
# once it exists, so the list only shrinks.
PENDING_TYPES: set = set()
PENDING_OPS: set = set()  # issues 12 and 14 built them all


def case_types(case) -> set:
    names = [str(n) for n in case["input_names"]]
    return {str(case[f"in_{n}_type"]) for n in names} | {str(case["expected_type"])}


def pending_reason(case):
    """Why a case waits (an open issue's op or type), or None when it must pass."""
    op = str(case["op"])
    if op in PENDING_OPS:
        return f"pending: op {op} is not built yet"
    types = sorted(case_types(case) & PENDING_TYPES)
    if types:
        return f"pending: type {', '.join(types)} is not built yet"
    return None


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


def run_case(case, n_threads=2, backend="cpu", compute=True):
    """Builds and (unless compute=False) computes the case's graph on `backend`; returns
    (result tensor, context)."""
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
    if compute:
        g = gg.Graph(ctx)
        g.build_forward_expand(result)
        g.compute(n_threads=n_threads)
    return result, ctx


def result_values(result) -> np.ndarray:
    if gg.is_quantized(result.type):  # block-type results are compared byte for byte
        rows = np.array(result.numpy()).view(np.uint8)
        return rows.reshape(tuple(reversed(result.ne[1:])) + (-1,))
    if result.type in (gg.I32, gg.I64):
        v = np.array(result.numpy()).astype(np.int64)
    else:
        v = result.to_f32()
    return v.reshape(tuple(reversed(result.ne)))
