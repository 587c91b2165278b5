"""Typed reads of `<arch>.*` GGUF metadata keys for the per-architecture hparams loaders."""
from __future__ import annotations

from .gguf_check import GGUFError


class KeyReader:
    def __init__(self, kv: dict, arch: str):
        self.kv, self.arch = kv, arch

    def has(self, name: str) -> bool:
        return f"{self.arch}.{name}" in self.kv

    def _check(self, key, v, kind):
        if kind is bool:
            if not isinstance(v, bool):
                raise GGUFError(f"key '{key}' must be a bool, got {type(v).__name__} {v!r}")
            return v
        if kind is int:
            if isinstance(v, bool) or not isinstance(v, int):
                raise GGUFError(f"key '{key}' must be an integer, got {type(v).__name__} {v!r}")
            return int(v)
        if kind is float:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise GGUFError(f"key '{key}' must be a number, got {type(v).__name__} {v!r}")
            return float(v)
        if not isinstance(v, kind):
            raise GGUFError(f"key '{key}' must be {kind.__name__}, got {type(v).__name__}")
        return v

    def get(self, name: str, default=None, kind=int, required: bool = False):
        """A scalar key (an array key must be uniform)."""
        key = f"{self.arch}.{name}"
        if key not in self.kv:
            if required:
                raise GGUFError(f"missing required key '{key}'")
            return default
        v = self.kv[key]
        if isinstance(v, list):
            if not v or any(x != v[0] for x in v):
                raise GGUFError(f"key '{key}' must be a scalar (or a uniform array), got {v!r}")
            v = v[0]
        return self._check(key, v, kind)

    def get_arr(self, name: str, n: int, default=None, kind=int, required: bool = False) -> tuple:
        """A per-layer key: a scalar broadcast to n values, or an array of at least n."""
        key = f"{self.arch}.{name}"
        if key not in self.kv:
            if required:
                raise GGUFError(f"missing required key '{key}'")
            return tuple([default] * n)
        v = self.kv[key]
        if not isinstance(v, list):
            return tuple([self._check(key, v, kind)] * n)
        if len(v) < n:
            raise GGUFError(f"key '{key}' has {len(v)} values, expected at least {n}")
        return tuple(self._check(key, x, kind) for x in v[:n])

    def token_id(self, key: str):
        v = self.kv.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None
