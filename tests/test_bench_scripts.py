"""Every benchmark script under bench/ answers --help with its usage: it still imports (a helper
renamed under it breaks it at once; compare_recurrent.py once failed that way unnoticed) and it
parses its arguments before it measures anything; and run as `python bench/X.py` (with bench/
first on sys.path) it imports this checkout's pyggml, not an installed copy's possibly older
Python files (bench/checkout.py; 8 scripts took the installed copy). The C++ bench binaries,
where built, answer --help too and refuse an argument they do not understand (exit 2, one error
line and the usage) instead of measuring something else: float_gemm_phases took any unknown
weight type for bf16."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py") if 'if __name__ == "__main__":' in p.read_text())


def test_the_benchmark_scripts_are_found():
    assert {"compare_ggml.py", "compare_llama_cpp.py", "compare_recurrent.py"} <= {p.name for p in SCRIPTS}


# `python -v` names the file each module's code came from: the folder holding the pyggml imported
PYGGML_FROM = re.compile(r"^# code object from '?(.*?)[/\\]pyggml[/\\](?:__pycache__[/\\])?__init__\.", re.M)


def _help(script):
    """(stdout, folders pyggml was imported from) of `python -v script --help`, which must exit 0;
    run with no PYTHONPATH: the script has to find the checkout itself."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-v", str(script), "--help"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, set(PYGGML_FROM.findall(proc.stderr))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_script_answers_help_with_the_checkouts_pyggml(script):
    out, folders = _help(script)
    assert out.startswith("usage:"), out[:500]
    # empty where the script imports pyggml only past its arguments
    assert folders <= {str(ROOT)}, f"{script.name} imported pyggml from {folders}, not from this checkout"


def test_a_script_that_imports_pyggml_at_once_takes_the_checkouts():
    assert _help(ROOT / "bench" / "mtp_draft_cost.py")[1] == {str(ROOT)}


# The C++ bench binaries come with a CMake build (`ninja -C build`), not with pip.
def _binary(name):
    build = os.environ.get("PYGGML_BUILD_DIR")
    path = Path(build) / name if build else None
    if path is None or not path.is_file():
        pytest.skip(f"{name} is not built here (PYGGML_BUILD_DIR names no build holding it)")
    return path


@pytest.mark.parametrize("name", ["bench_ops", "float_gemm_phases", "float_micro_cycles"])
def test_a_bench_binary_answers_help(name):
    proc = subprocess.run([str(_binary(name)), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {name} ")


@pytest.mark.parametrize("name,args", [
    ("bench_ops", ["-t", "0"]), ("bench_ops", ["-t"]), ("bench_ops", ["--bogus"]), ("bench_ops", ["mul", "gemm"]),
    ("float_gemm_phases", ["f64"]), ("float_gemm_phases", ["f32", "10x"]), ("float_gemm_phases", ["f32", "8"]),
    ("float_gemm_phases", ["f32", "64", "64", "64", "64"]),
    ("float_micro_cycles", ["f8"]), ("float_micro_cycles", ["f32", "0"]),
])
def test_a_bench_binary_refuses_a_bad_argument_before_measuring(name, args):
    proc = subprocess.run([str(_binary(name)), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stdout[:300])
    assert proc.stderr.startswith("error: ") and f"usage: {name} " in proc.stderr, proc.stderr
    assert proc.stdout == ""  # nothing was measured
