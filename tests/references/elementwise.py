"""References of the binary and unary element-wise ops."""
import numpy as np


def tile_to(b, shape):
    """Tile b (numpy order) into `shape` the way ggml broadcasts src1 into src0."""
    reps = tuple(s // d for s, d in zip(shape, b.shape))
    return np.tile(b, reps)


def binary(op, a, b):
    b = tile_to(b, a.shape)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {"add": a64 + b64, "sub": a64 - b64, "mul": a64 * b64, "div": a64 / b64}[op]


def gelu_tanh(x):
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * x * (1.0 + 0.044715 * x * x)))


def sigmoid(x):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return np.asarray(x, dtype=np.float64) * sigmoid(x)


def softplus(x):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def unary(op, x):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        table = {
            "abs": lambda: np.abs(x), "neg": lambda: -x, "relu": lambda: np.where(x > 0, x, 0.0),
            "tanh": lambda: np.tanh(x), "sigmoid": lambda: sigmoid(x), "silu": lambda: silu(x),
            "gelu": lambda: gelu_tanh(x), "gelu_quick": lambda: x * sigmoid(1.702 * x),
            "exp": lambda: np.exp(x), "softplus": lambda: softplus(x), "sqr": lambda: x * x,
            "sqrt": lambda: np.sqrt(x),
            "sgn": lambda: np.sign(x), "step": lambda: np.where(x > 0, 1.0, 0.0),
            "elu": lambda: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
            "hardswish": lambda: x * np.clip((x + 3.0) / 6.0, 0.0, 1.0),
            "hardsigmoid": lambda: np.clip((x + 3.0) / 6.0, 0.0, 1.0),
            "expm1": lambda: np.expm1(x), "gelu_erf": lambda: gelu_erf(x),
            "floor": lambda: np.floor(x), "ceil": lambda: np.ceil(x),
            "round": lambda: np.sign(x) * np.floor(np.abs(x) + 0.5),  # half away from zero
            "trunc": lambda: np.trunc(x),
            "log": lambda: np.log(x), "sin": lambda: np.sin(x), "cos": lambda: np.cos(x),
        }
        return table[op]()


def gelu_erf(x):
    from math import erf
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + np.vectorize(erf, otypes=[np.float64])(x / np.sqrt(2.0)))


def leaky_relu(x, slope):
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 0, x, slope * x)


def xielu(x, alpha_n, alpha_p, beta, eps):
    """xIELU with the constructor's f32 softplus of alpha_n / alpha_p."""
    x = np.asarray(x, dtype=np.float64)
    sp = lambda v: np.float32(v) if v > 20 else np.float32(np.log1p(np.exp(np.float64(v))))
    an, ap = np.float64(np.float32(beta) + sp(alpha_n)), np.float64(sp(alpha_p))
    with np.errstate(over="ignore"):
        neg = (np.expm1(np.minimum(x, np.float64(np.float32(eps)))) - x) * an + beta * x
    return np.where(x > 0, ap * x * x + beta * x, neg)
