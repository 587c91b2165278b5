"""llama.cpp's tokenizer test vocabularies (``ggml-vocab-*.gguf`` with ``.inp``/``.out`` cases),
fetched the way CI can: from a cache folder, else from the llama-cpp-python 0.3.36 sdist on the
package registry (only the vocabulary files are extracted). Tests skip, with the reason, when
neither is available. Nothing here is committed to the repository."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

SDIST = "llama-cpp-python==0.3.36"
_MARKER = ".complete-llama-cpp-python-0.3.36"
_SEP = "\n__ggml_vocab_test__\n"


def cache_dir() -> Path:
    base = os.environ.get("PYGGML_CACHE")
    return Path(base) / "vocab" if base else Path.home() / ".cache" / "pyggml" / "vocab"


def _extract(sdist: Path, dest: Path) -> int:
    n = 0
    with tarfile.open(sdist, "r:gz") as tar:
        for m in tar:
            name = m.name.rsplit("/", 1)[-1]
            if (m.isfile() and name.startswith("ggml-vocab-") and "/vendor/llama.cpp/models/" in m.name
                    and "/" not in name):
                src = tar.extractfile(m)
                with open(dest / (name + ".part"), "wb") as f:
                    shutil.copyfileobj(src, f)
                os.replace(dest / (name + ".part"), dest / name)
                n += 1
    return n


def vocab_dir() -> Path:
    """The folder holding the vocabularies; downloads them on first use or skips the test."""
    dest = cache_dir()
    if (dest / _MARKER).exists():
        return dest
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        pytest.skip(f"cannot create the vocabulary cache {dest} (set PYGGML_CACHE): {e}")
    with tempfile.TemporaryDirectory() as tmp:
        base = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", SDIST, "-d", tmp]
        sdists, r = [], None
        # pip prepares the sdist's metadata: with the build backend already installed that is
        # quick (--no-build-isolation); otherwise pip installs it in isolation first.
        for extra in (["--no-build-isolation"], []):
            try:
                r = subprocess.run(base + extra, capture_output=True, text=True, timeout=900)
            except (OSError, subprocess.TimeoutExpired) as e:
                pytest.skip(f"cannot fetch llama.cpp's test vocabularies ({SDIST}): {e}")
            sdists = list(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
            if sdists:
                break
        if not sdists:
            tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
            pytest.skip(f"cannot fetch llama.cpp's test vocabularies ({SDIST} from the package "
                        f"registry): {' | '.join(tail)}")
        if _extract(sdists[0], dest) == 0:
            pytest.skip(f"{sdists[0].name} holds no models/ggml-vocab-* files")
    (dest / _MARKER).write_text("ok\n")
    return dest


def vocab_path(name: str) -> Path:
    p = vocab_dir() / f"ggml-vocab-{name}.gguf"
    if not p.exists():
        pytest.skip(f"{p.name} is not in {p.parent}")
    return p


def read_cases(path: Path) -> dict[str, list[int]]:
    """Texts and expected ids, as llama.cpp's test reads them (a map: duplicates collapse)."""
    inp = Path(str(path) + ".inp").read_bytes().decode("utf-8")
    out = Path(str(path) + ".out").read_text(encoding="utf-8").split("\n")
    texts = inp.split(_SEP)
    if inp.endswith(_SEP):
        texts.pop()                     # the separator ends the last case; no empty case follows
    if out and out[-1] == "":
        out = out[:-1]
    assert len(texts) == len(out), f"{path.name}: {len(texts)} inputs but {len(out)} outputs"
    return {t: [int(x) for x in o.split()] for t, o in zip(texts, out)}


# Vocabularies with .inp/.out cases in llama.cpp 0.3.36's models/ folder.
CASE_VOCABS = ["bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4",
               "gpt-2", "llama-bpe", "llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact",
               "starcoder"]
ALL_VOCABS = CASE_VOCABS + ["aquila", "baichuan", "gpt-neox", "nomic-bert-moe"]
