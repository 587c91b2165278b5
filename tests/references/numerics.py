"""Rounding helpers shared by the references."""
import numpy as np


def round_f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def round_bf16(x):
    """float32 -> bf16 (round to nearest even, NaN quieted) -> float32."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    nan = np.isnan(x)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)
    r = np.where(nan, (u >> 16).astype(np.uint32) | 64, r)
    return (r.astype(np.uint32) << 16).view(np.float32)


def round_to(x, type_name: str):
    if type_name == "f16":
        return round_f16(x)
    if type_name == "bf16":
        return round_bf16(x)
    return np.asarray(x, dtype=np.float32)
