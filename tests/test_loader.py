"""Importing pyggml from the root of a source checkout, where the source folder pyggml/
(without a compiled core) shadows any installed copy."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_from_the_source_root_takes_an_installed_core_or_says_what_to_do():
    env = {k: v for k, v in os.environ.items() if k not in ("PYGGML_BUILD_DIR", "PYTHONPATH")}
    code = "import pyggml, sys; print(pyggml.__file__); print(sys.modules['pyggml._core'].__file__)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode == 0:
        pkg, core = proc.stdout.split()
        assert Path(pkg).parent == ROOT / "pyggml"           # the source folder was imported ...
        assert Path(core).parent != ROOT / "pyggml"          # ... with the installed copy's core
        assert Path(core).name.startswith("_core")
    else:
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("ImportError: pyggml:") and "pip install ." in last, proc.stderr
