"""Recurrent models: pyggml.llm vs llama.cpp (llama-cpp-python, when importable) on the tiny
random mamba2 and qwen35 models of pyggml.llm.tiny: prompt processing and decode tokens/s,
same threads, one run each. llama.cpp's column reads n/a when llama_cpp does not import.

    python bench/compare_recurrent.py [-t THREADS] [--prompt 64] [--gen 32]

qwen35 runs pyggml's gated_delta_net op when the build has it, else the basic-op fallback
(the table says which).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see compare_llama_cpp.py

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_llama_cpp import bench_llama_cpp, bench_pyggml  # noqa: E402


def main():
    import pyggml as gg
    from pyggml.llm.tiny import write_tiny_mamba2, write_tiny_qwen35
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "pyggml-bench"))
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    try:
        import llama_cpp  # noqa: F401
        have_ref = True
    except ImportError:
        have_ref = False
    gdn = "op" if hasattr(gg, "gated_delta_net") else "fallback"
    cases = {"mamba2": write_tiny_mamba2(os.path.join(a.dir, "mamba2.gguf")),
             f"qwen35 (gdn {gdn})": write_tiny_qwen35(os.path.join(a.dir, "qwen35.gguf"))}
    prompt = [int(x) for x in np.random.default_rng(0).integers(3, 256, size=a.prompt)]
    print(f"{'case':<30s} {'pyggml':>10s} {'llama.cpp':>10s} {'ratio':>7s}   ({a.threads} threads, tokens/s)")
    for name, path in cases.items():
        ours = bench_pyggml(path, prompt, a.gen, a.threads)
        theirs = bench_llama_cpp(path, prompt, a.gen, a.threads) if have_ref else (None, None)
        for i, what in enumerate((f"pp{a.prompt}", f"tg{a.gen}")):
            ref = f"{theirs[i]:10.1f} {ours[i] / theirs[i]:7.2f}" if have_ref else f"{'n/a':>10s} {'':>7s}"
            print(f"{name + ' ' + what:<30s} {ours[i]:10.1f} {ref}")


if __name__ == "__main__":
    main()
