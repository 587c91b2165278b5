"""Tokenizer speed: pyggml's tokenizers against llama.cpp's (llama_cpp, when importable) on the
same ~1 MB text (the Python standard library's own sources, concatenated), same vocabularies.

    python bench/compare_tokenizer.py [--vocab llama-bpe,llama-spm,qwen2] [--mb 1.0] [--repeat 3]

Vocabularies are llama.cpp's test GGUFs (fetched into the cache as the tests do) or paths.
Reports tokens/s (best of --repeat), the ratio pyggml/llama.cpp measured in the same run, and
whether both produced the same ids. Note: pyggml caches BPE words, so repeats after the first
are warm; the first (cold) run is reported too.
"""
from __future__ import annotations

import argparse
import os
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "llm"))


def stdlib_text(n_bytes: int) -> str:
    """Concatenated .py files of the standard library, in a fixed order, cut to n_bytes."""
    parts, size = [], 0
    lib = Path(sysconfig.get_paths()["stdlib"])
    for p in sorted(lib.glob("*.py")):
        try:
            t = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        parts.append(t)
        size += len(t.encode("utf-8"))
        if size >= n_bytes:
            break
    text = "".join(parts).encode("utf-8")[:n_bytes]
    return text.decode("utf-8", errors="ignore")


def resolve(name: str) -> Path:
    if os.path.exists(name):
        return Path(name)
    import pytest  # noqa: F401  (vocab_files skips through pytest when nothing can be fetched)
    from vocab_files import vocab_path
    try:
        return vocab_path(name)
    except BaseException as e:           # pytest's Skipped derives from BaseException
        raise SystemExit(f"{name}: {e}")


def best_of(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, times


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", default="llama-bpe,llama-spm,qwen2")
    ap.add_argument("--mb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    from pyggml.llm.vocab import Vocab
    text = stdlib_text(int(a.mb * 1e6))
    n_bytes = len(text.encode("utf-8"))
    try:
        import llama_cpp
    except ImportError:
        llama_cpp = None
    print(f"text: {n_bytes / 1e6:.2f} MB of Python stdlib sources; llama_cpp: "
          f"{'yes' if llama_cpp else 'not importable (pyggml only)'}")
    print(f"{'vocab':<14}{'tokens':>10}{'pyggml cold tok/s':>19}{'pyggml warm tok/s':>19}"
          f"{'llama.cpp tok/s':>17}{'ratio':>8}  same ids")
    for name in a.vocab.split(","):
        path = resolve(name)
        vocab = Vocab.load(path)
        ids, times = best_of(lambda: vocab.tokenize(text, add_special=False), a.repeat)
        cold, warm = len(ids) / times[0], len(ids) / min(times)
        ref_rate, same = None, "-"
        if llama_cpp is not None:
            llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
            raw = text.encode("utf-8")
            ref, rtimes = best_of(lambda: llm.tokenize(raw, add_bos=False, special=False), a.repeat)
            ref_rate = len(ref) / min(rtimes)
            same = "yes" if list(ref) == ids else "NO"
        ratio = f"{warm / ref_rate:.2f}" if ref_rate else "-"
        ref_s = f"{ref_rate:,.0f}" if ref_rate else "-"
        print(f"{name:<14}{len(ids):>10}{cold:>19,.0f}{warm:>19,.0f}{ref_s:>17}{ratio:>8}  {same}")


if __name__ == "__main__":
    main()
