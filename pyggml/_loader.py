"""Locate the compiled extension.

Installed packages import ``pyggml._core`` next to this file. Developers can point
``PYGGML_BUILD_DIR`` at a CMake build folder holding ``_core*.so`` to test a local build
without reinstalling.
"""
import importlib.machinery
import importlib.util
import glob
import os
import sys


def load_core():
    build = os.environ.get("PYGGML_BUILD_DIR")
    if build:
        hits = sorted(glob.glob(os.path.join(build, "_core*.so")) + glob.glob(os.path.join(build, "_core*.pyd")))
        if not hits:
            raise ImportError(f"PYGGML_BUILD_DIR={build!r} holds no _core extension")
        loader = importlib.machinery.ExtensionFileLoader("pyggml._core", hits[0])
        spec = importlib.util.spec_from_file_location("pyggml._core", hits[0], loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        sys.modules["pyggml._core"] = mod
        return mod
    from . import _core  # noqa: F401  (the installed extension)
    return _core
