"""The C++ core library (csrc/core + csrc/cpu, no Python module) compiles for aarch64: every
x86 intrinsic is behind an architecture guard and every SIMD family falls back to its plain
table. Needs the Debian cross compiler (apt-get install g++-aarch64-linux-gnu) and cmake."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CROSS_CXX = "aarch64-linux-gnu-g++"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which(CROSS_CXX) is None, reason=f"{CROSS_CXX} is not installed "
                    "(apt-get install g++-aarch64-linux-gnu)")
@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_core_library_builds_for_aarch64(tmp_path):
    if not (ROOT / "CMakeLists.txt").exists():
        pytest.skip("not a source checkout")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"] if shutil.which("ccache") else []
    configure = ["cmake", "-S", str(ROOT), "-B", str(tmp_path), *gen, "-DCMAKE_SYSTEM_NAME=Linux",
                 "-DCMAKE_SYSTEM_PROCESSOR=aarch64", f"-DCMAKE_CXX_COMPILER={CROSS_CXX}", *launcher,
                 "-DPYGGML_CUDA=OFF", "-DPYGGML_BUILD_PYTHON=OFF", "-DPYGGML_BUILD_BENCH=OFF"]
    run = lambda cmd: subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                                     env=dict(os.environ, CCACHE_BASEDIR=str(ROOT)))
    out = run(configure)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    out = run(["cmake", "--build", str(tmp_path), "--target", "pyggml_core", "-j", "2"])
    assert out.returncode == 0, "aarch64 build failed:\n" + (out.stdout + out.stderr)[-6000:]
    lib = tmp_path / "libpyggml_core.a"
    assert lib.exists()
    # the archive really holds aarch64 code (not a host build picked up by mistake)
    objdump = shutil.which("aarch64-linux-gnu-objdump")
    if objdump:
        head = subprocess.run([objdump, "-f", str(lib)], capture_output=True, text=True).stdout
        assert "aarch64" in head, head[:500]
