"""Print a markdown table of ggml's ops and their status in pyggml (CPU, CUDA).

Usage: PYGGML_BUILD_DIR=build python tools/op_status.py [path/to/ggml/include/ggml.h]

ggml's op list is read from its ggml.h (the GGML_OP_* and GGML_UNARY_OP_* enums); what pyggml
has comes from its op table (gg.op_table(): every op there has a CPU kernel) and, for CUDA,
from cuda/op_list.cu, the explicit list of ops the device runs: a listed op is "yes" (its
entry's check may still refuse some types or modes, which `Backend.supports_op` reports), an
op that is not listed is "no".
"""
import re
import sys
from pathlib import Path

import pyggml as gg

ROOT = Path(__file__).resolve().parents[1]
# where this project's reference tree keeps ggml 0.25.3 (override with the first argument)
DEFAULT_GGML_H = Path("/work/ref/llama_cpp_python-0.3.36/vendor/llama.cpp/ggml/include/ggml.h")


def enum_members(header: str, enum: str, prefix: str) -> list:
    body = re.search(r"enum\s+" + enum + r"\s*\{(.*?)\}", header, re.S).group(1)
    names = re.findall(r"\b" + prefix + r"([A-Z0-9_]+)", body)
    return [n for n in names if n != "COUNT"]


def kind_of(op: str) -> str:
    """ggml's op groups, by its naming: backward, training, user callbacks, forward."""
    if op.endswith("_BACK"):
        return "backward"
    if op.startswith("OPT_STEP_") or op == "CROSS_ENTROPY_LOSS":
        return "training"
    if op.startswith("MAP_CUSTOM") or op == "CUSTOM":
        return "custom callback"
    return "forward"


def function_bodies(src: str, prefix: str) -> dict:
    """name -> body text of every `void <prefix><name>(...) { ... }` (brace matched)."""
    out = {}
    for m in re.finditer(r"void\s+" + prefix + r"(\w+)\s*\([^)]*\)\s*\{", src):
        depth, i = 1, m.end()
        while depth and i < len(src):
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        out[m.group(1)] = src[m.end():i - 1]
    return out


def cuda_status() -> dict:
    src = (ROOT / "cuda" / "op_list.cu").read_text()
    listed = set(re.findall(r"\{Op::(\w+),\s*\{cuda_forward_", src))
    status = {name: ("yes" if name in listed else "no") for name, _f, _c in gg.op_table()}
    return status, src


def main():
    ggml_h = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_GGML_H
    header = ggml_h.read_text()
    ggml_ops = [o for o in enum_members(header, "ggml_op", "GGML_OP_") if o != "NONE"]
    unary_ops = enum_members(header, "ggml_unary_op", "GGML_UNARY_OP_")
    table = {name: (family, ctors) for name, family, ctors in gg.op_table()}
    cuda, unary_src = cuda_status()

    groups = {}
    for op in ggml_ops:
        groups.setdefault(kind_of(op), []).append(op)
    forward = groups.get("forward", [])
    have = [o for o in forward if o in table]
    on_cuda = [o for o in have if cuda.get(o) == "yes"]
    lines = [f"pyggml implements {len(have)} of ggml's {len(forward)} forward ops on the CPU "
             f"({len(on_cuda)} of them on CUDA); ggml also has {len(groups.get('backward', []))} backward, "
             f"{len(groups.get('training', []))} training and {len(groups.get('custom callback', []))} "
             "custom-callback ops. CPU: the op is in pyggml's op table (every row has a CPU kernel). "
             "CUDA: yes = listed in cuda/op_list.cu (some types or modes may still be refused), no = not on "
             "the device (Graph.compute refuses it before running; compute such graphs on the CPU).", "",
             "| ggml op | pyggml constructors | family | CPU | CUDA |", "|---|---|---|---|---|"]
    for op in ggml_ops:
        if kind_of(op) != "forward" and op not in table:
            continue
        fam, ctors = table.get(op, ("", ""))
        shown = ", ".join(f"`{c}`" for c in ctors.split()) if ctors else ""
        if op == "UNARY":
            shown = "`unary` + the named sub-ops below"
        cpu = "yes" if op in table else "—"
        cu = cuda.get(op, "—") if op in table else "—"
        label = op if kind_of(op) == "forward" else f"{op} ({kind_of(op)})"
        lines.append(f"| {label} | {shown} | {fam} | {cpu} | {cu} |")
    extra = [n for n in table if n not in ggml_ops and n != "NONE"]
    if extra:
        lines += ["", "Ops pyggml has beyond ggml 0.25.3's list: " + ", ".join(f"`{n}`" for n in extra) + "."]

    lines += ["", "| ggml unary op (`GGML_OP_UNARY`) | constructor | CPU | CUDA |", "|---|---|---|---|"]
    for u in unary_ops:
        name = u.lower()
        bound = hasattr(gg, name) and hasattr(gg.UnaryOp, u)
        on_device = f"case UnaryOp::{u}:" in unary_src
        cu = ("yes" if on_device else "no") if cuda.get("UNARY") in ("yes", "partial") else "no"
        lines.append(f"| {u} | {'`' + name + '`' if bound else '—'} | {'yes' if bound else '—'} | "
                     f"{cu if bound else '—'} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
