import os
import sys

import pytest

# The CPU backend runs nodes with little work on one thread; the op tests use small shapes, so
# they set the threshold to 0 to keep exercising every kernel's multi-thread split (the
# threshold itself is tested in tests/test_threads.py).
os.environ.setdefault("PYGGML_CPU_MIN_WORK", "0")

# tests/ holds shared helpers (reference.py, util.py) imported by tests in subfolders.
sys.path.insert(0, os.path.dirname(__file__))


def _hide_llama_cpp_built_for_another_cpu():
    """A llama-cpp-python built for another CPU kills the process that runs it (SIGILL): probe
    it in a child, and if it dies, make `import llama_cpp` fail here so that every oracle test
    skips instead of ending the whole run. Returns the reason, or None."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
    import ggml_ref
    reason = ggml_ref.cpu_mismatch_reason()
    if reason:
        sys.modules["llama_cpp"] = None  # importorskip("llama_cpp") then skips
    return reason


_LLAMA_CPP_UNUSABLE = _hide_llama_cpp_built_for_another_cpu()


def pytest_report_header(config):
    if _LLAMA_CPP_UNUSABLE:
        return f"oracle tests skip: {_LLAMA_CPP_UNUSABLE}"
    return None


@pytest.fixture
def simd(request):
    """Cap the kernels' SIMD level for one test (parametrise indirectly with util.SIMD_LEVELS);
    the previous cap comes back afterwards. "avx512-nobf16": the avx512 level with its
    AVX512-BF16 pair form of bf16 weights turned off (what an AVX-512 CPU without BF16 runs)."""
    import pyggml as gg
    level = getattr(request, "param", "native")
    if level == "avx512-nobf16":
        if gg.isa(detected=True) != "avx512":
            pytest.skip("the CPU has no AVX-512")
        previous, bf16 = gg.set_isa("avx512"), gg.set_avx512_bf16(False)
        yield level
        gg.set_isa(previous)
        gg.set_avx512_bf16(bf16)
        return
    previous = gg.set_isa(level)
    yield level
    gg.set_isa(previous)


@pytest.fixture
def ggml_avx2_arithmetic():
    """For bit-exact comparisons with llama.cpp on whole models: its ggml must be an AVX2 build
    (skip otherwise), and pyggml runs its AVX2 kernel set, whose arithmetic is that build's
    (the AVX-512 set sums F32 rows 16 lanes wide, so its last bits differ)."""
    import pyggml as gg
    from util import require_ggml_bits_comparable
    require_ggml_bits_comparable()
    previous = gg.set_isa("avx2")
    yield
    gg.set_isa(previous)


@pytest.fixture
def avx512_level():
    """Runs a test at the avx512 kernel level (the K-quant tiles' level); skips on a CPU
    without AVX-512. The previous level comes back afterwards."""
    import pyggml as gg
    if gg.isa(detected=True) != "avx512":
        pytest.skip("no AVX-512 on this CPU")
    previous = gg.set_isa("avx512")
    yield
    gg.set_isa(previous)
