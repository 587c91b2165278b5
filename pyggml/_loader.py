"""Locate the compiled extension.

Installed packages import ``pyggml._core`` next to this file. Developers can point
``PYGGML_BUILD_DIR`` at a CMake build folder holding ``_core*.so`` to test a local build
without reinstalling.

From the root of a source checkout, ``import pyggml`` finds the source folder ``pyggml/``
first (it shadows the installed package) and that folder has no ``_core``. The Python files
are the same as the installed ones, so the loader then takes the compiled core of the
installed copy of pyggml; only when none is installed does it fail, with one line saying
what to do. Where a local build (``build/`` or ``build/<wheel tag>/`` of the checkout) holds a
core compiled after the installed copy was installed, the import warns: benchmarks run from the
checkout would otherwise measure the older installed code without a word.
"""
import glob
import importlib.machinery
import importlib.util
import os
import sys
import warnings

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


def _local_build_cores():
    """Compiled cores of the checkout's own build folders (a CMake build in build/, or pip's
    persistent build/<wheel tag>/)."""
    build = os.path.join(os.path.dirname(_HERE), "build")
    found = glob.glob(os.path.join(build, "_core*")) + glob.glob(os.path.join(build, "*", "_core*"))
    return sorted(p for p in found if p.endswith(_SUFFIXES))


def warn_if_local_build_is_newer(installed):
    """Warn when a local build's core was compiled after `installed` was installed (its inode
    change time: a wheel may carry old file times, but copying it in sets the change time)."""
    try:
        installed_at = os.stat(installed).st_ctime
        newer = [p for p in _local_build_cores() if os.stat(p).st_mtime > installed_at]
    except OSError:
        return
    if newer:
        warnings.warn(
            f"pyggml: imported from the source folder with the installed core {installed}, older than the "
            f"local build {newer[0]}; set PYGGML_BUILD_DIR={os.path.dirname(newer[0])} to use that build, or run "
            "`pip install .` again", RuntimeWarning, stacklevel=3)


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
        warn_if_local_build_is_newer(installed)
        return _load_from(installed)
    raise ImportError(
        f"pyggml: {_HERE} is a source folder without the compiled core; run `pip install .` "
        "from the repository root (then this works from there too), or set PYGGML_BUILD_DIR "
        "to a CMake build folder")
