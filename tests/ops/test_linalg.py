"""OUT_PROD and SOLVE_TRI against numpy (float64)."""
import numpy as np
import pytest

import pyggml as gg
from util import SIMD_LEVELS as SIMD  # the `simd` fixture lives in conftest.py
from util import assert_close, compute, new, values


def _ctx():
    return gg.Context(mem_size=64 << 20)


def _out_prod_ref(x, y):
    """x numpy (a3, a2, k, m), y (ne3, ne2, k, n) -> (ne3, ne2, n, m); a repeats consecutively."""
    r3, r2 = y.shape[0] // x.shape[0], y.shape[1] // x.shape[1]
    xr = np.repeat(np.repeat(x, r3, axis=0), r2, axis=1)
    return np.einsum("abki,abkj->abji", xr.astype(np.float64), y.astype(np.float64))


@pytest.mark.parametrize("simd", SIMD, indirect=True)
@pytest.mark.parametrize("a_ne,b_ne", [([25, 13], [5, 13]), ([31, 11, 2], [9, 11, 4, 2]), ([1, 1], [1, 1]),
                                       ([67, 40, 1, 2], [3, 40, 3, 4])])
def test_out_prod(a_ne, b_ne, simd):
    ctx = _ctx()
    rng = np.random.default_rng(a_ne[0])
    a, x = new(ctx, gg.F32, a_ne, rng=rng)
    b, y = new(ctx, gg.F32, b_ne, rng=rng)
    r = gg.out_prod(ctx, a, b)
    compute(ctx, r)
    full_b = list(b.ne)
    assert r.op == "OUT_PROD" and r.type == gg.F32 and list(r.ne) == [a.ne[0], b.ne[0], full_b[2], full_b[3]]
    assert_close(values(r), _out_prod_ref(x, y), 1e-10, "out_prod")


def test_out_prod_empty_k_gives_zeros():
    ctx = _ctx()
    r = gg.out_prod(ctx, ctx.new_tensor(gg.F32, [8, 0]), ctx.new_tensor(gg.F32, [5, 0]))
    compute(ctx, r)
    assert list(r.ne) == [8, 5, 1, 1] and np.all(values(r) == 0)


@pytest.mark.parametrize("tname", ["f16", "bf16", "q8_0"])
def test_out_prod_converted_a(tname):
    ctx = _ctx()
    T = {"f16": gg.F16, "bf16": gg.BF16, "q8_0": gg.Q8_0}[tname]
    rng = np.random.default_rng(4)
    a, x = new(ctx, T, [64, 7, 2], rng=rng)
    b, y = new(ctx, gg.F32, [5, 7, 4], rng=rng)
    r = gg.out_prod(ctx, a, b)
    compute(ctx, r)
    assert_close(values(r), _out_prod_ref(x, y), 1e-10, f"out_prod {tname}")


def test_out_prod_transposed_b_and_errors():
    ctx = _ctx()
    rng = np.random.default_rng(2)
    a, x = new(ctx, gg.F32, [25, 15], rng=rng)
    bt, yt = new(ctx, gg.F32, [15, 5], rng=rng)
    r = gg.out_prod(ctx, a, gg.transpose(ctx, bt))
    compute(ctx, r)
    assert_close(values(r), _out_prod_ref(x, np.swapaxes(yt, -1, -2)), 1e-10, "transposed b")
    with pytest.raises(ValueError, match="out_prod"):
        gg.out_prod(ctx, a, ctx.new_tensor(gg.F32, [5, 14]))
    with pytest.raises(ValueError, match="out_prod"):
        gg.out_prod(ctx, ctx.new_tensor(gg.F32, [4, 3, 2]), ctx.new_tensor(gg.F32, [5, 3, 3]))
    with pytest.raises(ValueError, match="out_prod"):
        gg.out_prod(ctx, gg.transpose(ctx, bt), ctx.new_tensor(gg.F32, [5, 15]))
    with pytest.raises(TypeError, match="out_prod"):
        gg.out_prod(ctx, a, ctx.new_tensor(gg.F16, [5, 15]))


def _tri_input(ctx, n, k, batch, seed, junk=True):
    rng = np.random.default_rng(seed)
    # off-diagonal entries ~1/n keep the triangular system well conditioned for every n
    A = (rng.uniform(-1, 1, size=tuple(reversed(batch)) + (n, n)) / n).astype(np.float32)
    idx = np.arange(n)
    A[..., idx, idx] = rng.uniform(1.0, 2.0, size=A[..., idx, idx].shape) * rng.choice([-1, 1], size=(n,))
    if not junk:
        A = np.tril(A)
    else:
        A += np.triu(np.full((n, n), 1e3, np.float32), 1)   # junk above the diagonal is never read
    B = rng.uniform(-1, 1, size=tuple(reversed(batch)) + (n, k)).astype(np.float32)
    a, _ = new(ctx, gg.F32, [n, n] + batch, data=A)
    b, _ = new(ctx, gg.F32, [k, n] + batch, data=B)
    return a, b, np.tril(A).astype(np.float64), B.astype(np.float64)


@pytest.mark.parametrize("n,k,batch", [(7, 3, [1, 1]), (12, 5, [2, 2]), (1, 1, [1, 1]), (33, 17, [3, 1]),
                                       (5, 40, [1, 1])])
@pytest.mark.parametrize("n_threads", [1, 2, 5])
@pytest.mark.parametrize("simd", ["native", "scalar"], indirect=True)
def test_solve_tri(n, k, batch, n_threads, simd):
    ctx = _ctx()
    a, b, A, B = _tri_input(ctx, n, k, batch, seed=n * k)
    r = gg.solve_tri(ctx, a, b, True, True, False)
    compute(ctx, r, n_threads=n_threads)
    assert r.op == "SOLVE_TRI" and list(r.ne) == list(b.ne) and r.type == gg.F32
    want = np.linalg.solve(A, B)
    assert_close(values(r), want, 1e-9, "solve_tri")
    got = values(r).astype(np.float64)
    assert np.max(np.abs(A @ got - B)) < 1e-4   # the residual is small too


def test_solve_tri_errors():
    ctx = _ctx()
    a = ctx.new_tensor(gg.F32, [4, 4])
    b = ctx.new_tensor(gg.F32, [3, 4])
    for flags in [(False, True, False), (True, False, False), (True, True, True)]:
        with pytest.raises(NotImplementedError, match="solve_tri"):
            gg.solve_tri(ctx, a, b, *flags)
    with pytest.raises(ValueError, match="solve_tri"):
        gg.solve_tri(ctx, ctx.new_tensor(gg.F32, [4, 3]), ctx.new_tensor(gg.F32, [3, 3]), True, True, False)
    with pytest.raises(ValueError, match="solve_tri"):
        gg.solve_tri(ctx, a, ctx.new_tensor(gg.F32, [3, 5]), True, True, False)
    with pytest.raises(ValueError, match="solve_tri"):
        gg.solve_tri(ctx, a, ctx.new_tensor(gg.F32, [3, 4, 2]), True, True, False)
    with pytest.raises(TypeError, match="solve_tri"):
        gg.solve_tri(ctx, a, ctx.new_tensor(gg.F16, [3, 4]), True, True, False)
