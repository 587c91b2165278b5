"""MUL_MAT's CPU paths meet at a column count per weight kind: block weights take the int8
dot path (activations quantized once to the vec_dot type, one or two weight rows dotted with 4
columns, columns in blocks of 64) below 8 columns and the quantized GEMM (8-column packed
tiles, bit-identical to the dot path) from there where the kernel set has one; float weights
switch to the packed float GEMM at 64. Every weight type of the type table is checked on both
sides of its switch, across the dot path's 4-column tiles,
64-column blocks and two-row pairs (odd row counts), on 1 and 2 threads, with broadcast batches and a non-contiguous b, against the
dequantized-weights float64 product (peer NMSE 5e-4) and against the product with b converted
as ggml's CPU converts it (what both paths must compute)."""
import numpy as np
import pytest

import pyggml as gg
from references.mul_mat import quantize_q8_0_cpu
from util import assert_close, compute, new, values

PEER = 5e-4
TABLE = {row["name"]: row for row in gg.type_traits()}
WEIGHT_TYPES = [n for n, r in TABLE.items() if r["is_weight"]]


def switch_columns(name):
    """Columns where the GEMM path starts: the quantized GEMM for block weights at 8, the
    packed float GEMM at 64."""
    if TABLE[name]["is_quantized"]:
        return 8
    return 64


def as_vec_dot(name, b):
    """b's rows as the dot products of `name` weights consume them, as f32."""
    vt = TABLE[name]["vec_dot_type"]
    flat = b.reshape(-1, b.shape[-1]).astype(np.float32)
    if not TABLE[name]["is_quantized"]:
        if name == "f16":
            return flat.astype(np.float16).astype(np.float32).reshape(b.shape)
        if name == "bf16":
            u = flat.view(np.uint32)
            u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000  # round to nearest even
            return u.view(np.float32).reshape(b.shape)
        return b
    if gg.type_name(vt) == "q8_0":   # activations round exact ties as the active SIMD level
        return quantize_q8_0_cpu(flat, ties_even=gg.isa() != "scalar").reshape(b.shape)
    rows = [gg.dequantize(vt, gg.quantize(vt, r, reference=False)) for r in flat]
    return np.stack(rows).reshape(b.shape)


def reference(a, b):
    """float64 product of a (x, y, M, K) broadcast over b (X, Y, N, K) -> (X, Y, N, M)."""
    a = np.repeat(a, b.shape[1] // a.shape[1], axis=1)
    a = np.repeat(a, b.shape[0] // a.shape[0], axis=0)
    return np.einsum("xymk,xynk->xynm", a.astype(np.float64), b.astype(np.float64))


def columns_around(name):
    s = switch_columns(name)
    return sorted({1, 4, 5, s - 1, s, s + 1, 63, 64, 65})


@pytest.mark.parametrize("simd", ["native", "scalar"], indirect=True)
@pytest.mark.parametrize("name", WEIGHT_TYPES)
def test_both_paths_around_the_switch(simd, name):
    rng = np.random.default_rng(21)
    K = 256
    ctx = gg.Context(mem_size=64 << 20)
    a, av = new(ctx, TABLE[name]["type"], [K, 19], rng=rng)
    for N in columns_around(name):
        for n_threads in (1, 2):
            b, bv = new(ctx, gg.F32, [K, N], rng=rng)
            out = gg.mul_mat(ctx, a, b)
            compute(ctx, out, n_threads=n_threads)
            what = f"{name} N={N} threads={n_threads} {simd}"
            assert_close(values(out), reference(av, bv), PEER, what=what + " exact")
            emul = 1e-6 if gg.type_name(TABLE[name]["vec_dot_type"]) in ("q8_1", "bf16") else 1e-9
            assert_close(values(out), reference(av, as_vec_dot(name, bv)), emul, what=what + " emulation")


@pytest.mark.parametrize("name", WEIGHT_TYPES)
def test_broadcast_noncontiguous_each_side(name):
    """Weights broadcast over b's batches (2 -> 4, 1 -> 2); b is a permuted view; N on both
    sides of the switch."""
    rng = np.random.default_rng(22)
    K = 256
    ctx = gg.Context(mem_size=96 << 20)
    a, av = new(ctx, TABLE[name]["type"], [K, 11, 2, 1], rng=rng)
    s = switch_columns(name)
    for N in (s - 1, s + 3):
        braw, bvals = new(ctx, gg.F32, [K, 4, N, 2], rng=rng)
        b = gg.permute(ctx, braw, 0, 2, 1, 3)  # [K, N, 4, 2], rows not contiguous across n
        out = gg.mul_mat(ctx, a, b)
        compute(ctx, out, n_threads=2)
        bv = np.transpose(bvals, (0, 2, 1, 3))
        assert_close(values(out), reference(av, bv), PEER, what=f"{name} N={N}")
        assert_close(values(out), reference(av, as_vec_dot(name, bv)),
                     1e-6 if gg.type_name(TABLE[name]["vec_dot_type"]) in ("q8_1", "bf16") else 1e-9,
                     what=f"{name} N={N} emulation")


@pytest.mark.parametrize("simd", ["native", "scalar"], indirect=True)
@pytest.mark.parametrize("name", WEIGHT_TYPES)
def test_mul_mat_id_many_tokens_per_expert(simd, name):
    """MUL_MAT_ID with ~100 tokens per expert (several 64-slot column blocks per expert), one
    expert unused, an odd row count (two-row pairs plus a single row), 2 threads."""
    rng = np.random.default_rng(23)
    K, M, E, U, Tn = 256, 9, 4, 2, 150
    ctx = gg.Context(mem_size=64 << 20)
    a, av = new(ctx, TABLE[name]["type"], [K, M, E], rng=rng)
    b, bv = new(ctx, gg.F32, [K, U, Tn], rng=rng)
    idx = rng.integers(0, E - 1, size=(Tn, U)).astype(np.int32)  # expert E-1 gets no token
    ids, _ = new(ctx, gg.I32, [U, Tn], data=idx)
    out = gg.mul_mat_id(ctx, a, b, ids)
    compute(ctx, out, n_threads=2)
    expect = np.einsum("tumk,tuk->tum", av[0][idx].astype(np.float64), bv[0].astype(np.float64))
    assert_close(values(out)[0], expect, PEER, what=f"{name} {simd}")
    emul = np.einsum("tumk,tuk->tum", av[0][idx].astype(np.float64), as_vec_dot(name, bv[0]).astype(np.float64))
    assert_close(values(out)[0], emul, 1e-6 if gg.type_name(TABLE[name]["vec_dot_type"]) in ("q8_1", "bf16") else 1e-9,
                 what=f"{name} {simd} emulation")
