import os
import sys

import pytest

# tests/ holds shared helpers (reference.py, util.py) imported by tests in subfolders.
sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def simd(request, monkeypatch):
    """Cap the kernels' SIMD level (parametrise indirectly with util.SIMD_LEVELS)."""
    level = getattr(request, "param", "native")
    if level != "native":
        monkeypatch.setenv("PYGGML_ISA", level)
    return level
