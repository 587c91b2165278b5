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
    reason = skip_reason(backend, op)
    if reason:
        pytest.skip(f"{backend}: {reason}")
    missing = [f for f in golden.functions_used(case) if not hasattr(gg, f)]
    assert not missing, f"{op}: constructors missing from pyggml: {missing}"
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
    else:
        assert_close(got, expected.astype(np.float64), float(case["max_nmse"]), what=path.stem)


def test_golden_cases_present():
    assert len(CASES) >= 130, f"golden cases not found under {golden.GOLDEN_DIR}"


def test_vendored_golden_copy_matches_shared():
    """tests/golden_data must stay a verbatim copy of ../shared/golden (checked when present)."""
    if not golden._SHARED.exists():
        pytest.skip("../shared/golden is not next to this checkout")
    import hashlib
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
    shared = {p.name: digest(p) for p in golden._SHARED.glob("*.npz")}
    vendored = {p.name: digest(p) for p in golden._VENDORED.glob("*.npz")}
    assert shared == vendored, "refresh tests/golden_data from ../shared/golden"
