"""The op table is the single source of truth: every op's constructors are bound in Python
and exercised by at least one test file."""
from pathlib import Path

import pyggml as gg

TESTS = Path(__file__).parent


def _test_sources() -> str:
    return "\n".join(p.read_text() for p in TESTS.rglob("test_*.py") if p.name != "test_op_table.py")


def test_every_op_constructor_is_bound():
    missing = []
    for name, family, ctors in gg.op_table():
        for c in ctors.split():
            if not hasattr(gg, c):
                missing.append(f"{name}:{c}")
    assert not missing, f"op table constructors without a Python binding: {missing}"


def test_every_op_constructor_is_tested():
    src = _test_sources()
    untested = []
    for name, family, ctors in gg.op_table():
        for c in ctors.split():
            if f"gg.{c}(" not in src and f'"{c}"' not in src:
                untested.append(f"{name}:{c}")
    assert not untested, f"op table constructors no test calls: {untested}"
