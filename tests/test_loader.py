"""Importing pyggml from the root of a source checkout, where the source folder pyggml/
(without a compiled core) shadows any installed copy."""
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

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


def _checkout_with_a_build(tmp_path, layout):
    """The real loader in a stand-in checkout whose build folder holds a core (`layout`: the
    CMake build's place or pip's build/<wheel tag>/), and a stand-in installed core."""
    src = tmp_path / "checkout" / "pyggml"
    src.mkdir(parents=True)
    shutil.copy(ROOT / "pyggml" / "_loader.py", src / "_loader.py")
    name = "_core" + importlib.machinery.EXTENSION_SUFFIXES[0]
    local = tmp_path / "checkout" / layout / name
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(b"local")
    installed = tmp_path / "site-packages" / "pyggml" / name
    installed.parent.mkdir(parents=True)
    installed.write_bytes(b"installed")
    spec = importlib.util.spec_from_file_location("loader_under_test", src / "_loader.py")
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    return loader, local, installed


@pytest.mark.parametrize("layout", ["build", "build/cp311-cp311-linux_x86_64"])
def test_an_installed_core_older_than_the_local_build_is_named(tmp_path, layout):
    loader, local, installed = _checkout_with_a_build(tmp_path, layout)
    later = os.stat(installed).st_ctime + 60
    os.utime(local, (later, later))  # compiled after the installed copy went in
    with pytest.warns(RuntimeWarning, match="older than the local build") as caught:
        loader.warn_if_local_build_is_newer(str(installed))
    message = str(caught[0].message)
    assert str(installed) in message and f"PYGGML_BUILD_DIR={local.parent}" in message


def test_an_installed_core_newer_than_the_local_build_is_silent(tmp_path):
    loader, local, installed = _checkout_with_a_build(tmp_path, "build/cp311-cp311-linux_x86_64")
    earlier = os.stat(installed).st_ctime - 60
    os.utime(local, (earlier, earlier))  # `pip install .` built it, then installed the copy
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader.warn_if_local_build_is_newer(str(installed))
