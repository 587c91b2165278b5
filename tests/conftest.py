import os
import sys

import pytest

# The CPU backend runs nodes with little work on one thread; the op tests use small shapes, so
# they set the threshold to 0 to keep exercising every kernel's multi-thread split (the
# threshold itself is tested in tests/test_threads.py).
os.environ.setdefault("PYGGML_CPU_MIN_WORK", "0")

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
