"""numpy references for every op, written for the tests from the ops' definitions (independent of the C++ kernels).

One module per op family lives in tests/references/; this module re-exports them all, so
tests do `import reference as ref; ref.rms_norm(x, eps)`. Arrays use numpy order
(ne reversed): shape (ne3, ne2, ne1, ne0).
"""
import importlib
import pkgutil

import references as _refs

for _m in pkgutil.iter_modules(_refs.__path__):
    _mod = importlib.import_module(f"references.{_m.name}")
    for _k, _v in vars(_mod).items():
        if not _k.startswith("_"):
            globals()[_k] = _v
