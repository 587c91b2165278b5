import os
import sys

import pytest

# tests/ holds shared helpers (reference.py, util.py) imported by tests in subfolders.
sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def simd(request):
    """Cap the kernels' SIMD level for one test (parametrise indirectly with util.SIMD_LEVELS);
    the previous cap comes back afterwards."""
    import pyggml as gg
    level = getattr(request, "param", "native")
    previous = gg.set_isa(level)
    yield level
    gg.set_isa(previous)
