"""Every benchmark script under bench/ answers --help with its usage: it still imports (a helper
renamed under it breaks it at once; compare_recurrent.py once failed that way unnoticed) and it
parses its arguments before it measures anything."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py") if 'if __name__ == "__main__":' in p.read_text())


def test_the_benchmark_scripts_are_found():
    assert {"compare_ggml.py", "compare_llama_cpp.py", "compare_recurrent.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_script_answers_help(script):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, str(script), "--help"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage:"), proc.stdout[:500]
