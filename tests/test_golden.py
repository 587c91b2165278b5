"""Every case recorded from real ggml 0.25.3 must pass (format: ../shared/golden/README.md)."""
import numpy as np
import pytest

import golden
import pyggml as gg
from backend_skips import skip_reason
from util import assert_close

CASES = golden.case_files()
BACKENDS = ["cpu", "cuda:0"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_golden_case(path, backend):
    if backend not in gg.backends():
        pytest.skip(f"{backend}: not present in this build/machine (backends: {gg.backends()})")
    case = np.load(path)
    op = str(case["op"])
    pending = golden.pending_reason(case)
    if pending:
        pytest.skip(pending)
    missing = [f for f in golden.functions_used(case) if not hasattr(gg, f)]
    assert not missing, f"{op}: constructors missing from pyggml: {missing}"
    if backend != "cpu":   # ask the backend about the case's graph (built on the host, not run)
        reason = skip_reason(backend, golden.run_case(case, compute=False)[0])
        if reason:
            pytest.skip(f"{backend}: {reason}")
    result, _ctx = golden.run_case(case, backend=backend)
    got = golden.result_values(result)
    expected = case["expected"]
    assert list(result.ne) == [int(v) for v in case["expected_ne"]]
    assert gg.type_name(result.type) == str(case["expected_type"])
    if op == "argsort":
        src = case[f"in_{str(case['input_names'][0])}"].astype(np.float64)
        for row_got, row_exp, row_src in zip(got.reshape(-1, got.shape[-1]), expected.reshape(-1, expected.shape[-1]),
                                             src.reshape(-1, src.shape[-1])):
            assert sorted(row_got.tolist()) == list(range(len(row_got)))
            np.testing.assert_array_equal(row_src[row_got], row_src[row_exp])
    elif op == "top_k":
        src = case[f"in_{str(case['input_names'][0])}"].astype(np.float64)
        for row_got, row_exp, row_src in zip(got.reshape(-1, got.shape[-1]), expected.reshape(-1, expected.shape[-1]),
                                             src.reshape(-1, src.shape[-1])):
            assert len(set(row_got.tolist())) == len(row_got)
            np.testing.assert_array_equal(np.sort(row_src[row_got]), np.sort(row_src[row_exp]))
    elif expected.dtype == np.uint8:
        assert got.shape == expected.shape, f"{path.stem}: block bytes {got.shape} != {expected.shape}"
        bad = np.argwhere(got != expected)
        assert bad.size == 0, f"{path.stem}: {len(bad)} bytes differ, first at {bad[0].tolist()}"
    elif op in ("argmax", "count_equal"):
        np.testing.assert_array_equal(got, expected)
    else:
        assert_close(got, expected.astype(np.float64), float(case["max_nmse"]), what=path.stem)


def test_golden_cases_present():
    assert len(CASES) >= 315, f"golden cases not found under {golden.GOLDEN_DIR}"


def test_golden_pending_is_still_pending():
    """The pending list names only what is missing: once an op or type is built, drop it."""
    built_ops = sorted(op for op in golden.PENDING_OPS if hasattr(gg, op))
    built_types = sorted(t for t in golden.PENDING_TYPES if t in golden.TYPES)
    assert not built_ops and not built_types, (
        f"remove from the golden pending list (now built): ops {built_ops}, types {built_types}")
    recorded_ops = {str(np.load(p)["op"]) for p in CASES}
    assert golden.PENDING_OPS <= recorded_ops, f"pending ops with no case: {golden.PENDING_OPS - recorded_ops}"


def test_vendored_golden_copy_matches_shared():
    """tests/golden_data must stay a verbatim copy of ../shared/golden (checked when present)."""
    if not golden._SHARED.exists():
        pytest.skip("../shared/golden is not next to this checkout")
    import hashlib
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
    shared = {p.name: digest(p) for p in golden._SHARED.glob("*.npz")}
    vendored = {p.name: digest(p) for p in golden._VENDORED.glob("*.npz")}
    assert shared == vendored, "refresh tests/golden_data from ../shared/golden"
