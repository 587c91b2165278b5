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


def test_op_status_table_from_a_ggml_header(tmp_path, capsys, monkeypatch):
    """tools/op_status.py reads ggml's op list from a header and pyggml's status from the op
    table and cuda/*.cu: a tiny header with one op pyggml has, one it lacks and one backward op."""
    import importlib.util
    import sys
    spec = importlib.util.spec_from_file_location("op_status", TESTS.parent / "tools" / "op_status.py")
    op_status = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(op_status)
    header = tmp_path / "ggml.h"
    header.write_text("enum ggml_op {\n GGML_OP_NONE = 0,\n GGML_OP_ADD,\n GGML_OP_NOT_AN_OP,\n GGML_OP_SUM,\n"
                      " GGML_OP_SOFT_MAX_BACK,\n GGML_OP_FLASH_ATTN_BACK,\n GGML_OP_COUNT,\n};\n"
                      "enum ggml_unary_op {\n GGML_UNARY_OP_ABS,\n GGML_UNARY_OP_XIELU,\n GGML_UNARY_OP_COUNT,\n};\n")
    monkeypatch.setattr(sys, "argv", ["op_status.py", str(header)])
    op_status.main()
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in out.splitlines() if line.startswith("| ") and not line.startswith("| ggml")}
    assert out.startswith("pyggml implements 2 of ggml's 3 forward ops")
    assert rows["ADD"] == ["`add`, `add_inplace`", "binary", "yes", "yes"]
    assert rows["SUM"][2] == "yes" and rows["SUM"][3] in ("yes", "partial", "no")
    assert rows["NOT_AN_OP"][2:] == ["—", "—"]
    assert "SOFT_MAX_BACK (backward)" in rows and "FLASH_ATTN_BACK (backward)" not in rows
    assert rows["ABS"] == ["`abs`", "yes", "yes"] and rows["XIELU"][:2] == ["`xielu`", "yes"]
