"""Locate the compiled extension.

Installed packages import ``pyggml._core`` next to this file. Developers can point
``PYGGML_BUILD_DIR`` at a CMake build folder holding ``_core*.so`` to test a local build
without reinstalling.

From the root of a source checkout, ``import pyggml`` finds the source folder ``pyggml/``
first (it shadows the installed package) and that folder has no ``_core``. The Python files
are the same as the installed ones, so the loader then takes the compiled core of the
installed copy of pyggml; only when none is installed does it fail, with one line saying
what to do.
"""
import glob
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def _load_from(path):
    loader = importlib.machinery.ExtensionFileLoader("pyggml._core", path)
    spec = importlib.util.spec_from_file_location("pyggml._core", path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    sys.modules["pyggml._core"] = mod
    return mod


def _core_in(folder):
    for suffix in _SUFFIXES:
        hit = os.path.join(folder, "_core" + suffix)
        if os.path.isfile(hit):
            return hit
    return None


def _installed_core():
    """The _core of an installed pyggml other than this source folder, or None."""
    source_parent = os.path.dirname(_HERE)
    for entry in sys.path:
        folder = os.path.abspath(entry or os.getcwd())
        if folder == source_parent:
            continue
        hit = _core_in(os.path.join(folder, "pyggml"))
        if hit:
            return hit
    return None


def load_core():
    build = os.environ.get("PYGGML_BUILD_DIR")
    if build:
        hits = sorted(glob.glob(os.path.join(build, "_core*.so")) + glob.glob(os.path.join(build, "_core*.pyd")))
        if not hits:
            raise ImportError(f"PYGGML_BUILD_DIR={build!r} holds no _core extension")
        return _load_from(hits[0])
    if _core_in(_HERE):
        from . import _core  # noqa: F401  (the installed extension, next to this file)
        return _core
    installed = _installed_core()
    if installed:
        return _load_from(installed)
    raise ImportError(
        f"pyggml: {_HERE} is a source folder without the compiled core; run `pip install .` "
        "from the repository root (then this works from there too), or set PYGGML_BUILD_DIR "
        "to a CMake build folder")
