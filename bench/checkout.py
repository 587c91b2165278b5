"""Imported first by the bench scripts: puts this checkout's root first on sys.path, so that
`import pyggml` takes the checkout's Python package, not an installed copy's (possibly older)
files. The compiled core then comes from PYGGML_BUILD_DIR, or from the installed copy
(pyggml/_loader.py, which warns when the checkout's build is newer)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
