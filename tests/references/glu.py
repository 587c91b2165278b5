"""References of the GLU family: out = act(gate) * up, float64."""
import numpy as np

from references.elementwise import gelu_erf as _gelu_erf
from references.elementwise import gelu_tanh, sigmoid


def glu_act(op, g, u, alpha=0.0, limit=0.0):
    """op: 'reglu', 'geglu', 'swiglu', 'geglu_erf', 'geglu_quick', 'swiglu_oai', 'swiglu_clamp'."""
    g = np.asarray(g, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if op == "reglu":
            return np.where(g > 0, g * u, 0.0)
        if op == "geglu":
            return gelu_tanh(g) * u
        if op == "swiglu":
            return g * sigmoid(g) * u
        if op == "geglu_erf":
            return _gelu_erf(g) * u
        if op == "geglu_quick":
            return g * sigmoid(1.702 * g) * u
        if op == "swiglu_oai":
            x = np.fmin(g, limit)
            y = np.fmax(np.fmin(u, limit), -limit)
            return x * sigmoid(alpha * x) * (y + 1.0)
        if op == "swiglu_clamp":
            x = np.fmin(g, limit)  # gate clamped from above BEFORE SiLU
            y = np.fmax(np.fmin(u, limit), -limit)
            return x * sigmoid(x) * y
    raise ValueError(op)


def glu_fused(op, a, swapped=False, **kw):
    """a: numpy (…, ne0); gate/up are the halves of each row, an odd last element ignored."""
    n = a.shape[-1] // 2
    first, second = a[..., :n], a[..., n:2 * n]
    g, u = (second, first) if swapped else (first, second)
    return glu_act(op, g, u, **kw)
