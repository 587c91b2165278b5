"""expf_libm8, the eight-lane expf of the flash-attention row kernel, gives the C library's
expf bits (what ggml's kernel calls once per column), on a strided sweep of all float bit
patterns plus edge values (-inf, NaN, the under/overflow thresholds). Builds a small C++
check against this machine's libm; skips without g++ or an AVX2/FMA x86-64 CPU."""
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _has_avx2_fma() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx2" in flags and " fma" in flags


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 only")
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.skipif(not _has_avx2_fma(), reason="the CPU lacks AVX2/FMA")
def test_expf_libm8_matches_libm_expf(tmp_path):
    exe = tmp_path / "expf_libm_check"
    build = subprocess.run(["g++", "-O2", "-std=c++17", "-mavx2", "-mfma", f"-I{ROOT / 'csrc'}",
                            str(ROOT / "tests" / "cpp" / "expf_libm_check.cpp"), "-o", str(exe), "-lm"],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    # every 509th bit pattern: ~8.4M values over every exponent and sign
    run = subprocess.run([str(exe), "509"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:]
    assert " 0 differ" in run.stdout
