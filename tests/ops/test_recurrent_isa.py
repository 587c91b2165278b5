"""The recurrent-state kernels (gated_delta_net, gated_linear_attn, rwkv_wkv6, rwkv_wkv7) give
the same results with the scalar and the AVX2 table (cpu/recurrent_simd.h), on blocked head
sizes (multiples of 8, the four-row and eight-column paths) and odd ones (row helpers only)."""
import numpy as np
import pytest

import pyggml as gg
from util import assert_close, compute, new, values


def _run(level, build):
    prev = gg.set_isa(level)
    try:
        ctx = gg.Context(64 << 20)
        r = build(ctx, np.random.default_rng(5))
        compute(ctx, r, n_threads=2)
        return values(r).copy()
    finally:
        gg.set_isa(prev)


def _delta(S, kda):
    def build(ctx, rng):
        H, T = 3, 7
        q = new(ctx, gg.F32, [S, H, T, 1], rng=rng, lo=-0.2, hi=0.2)[0]
        k = new(ctx, gg.F32, [S, H, T, 1], rng=rng, lo=-0.2, hi=0.2)[0]
        v = new(ctx, gg.F32, [S, H, T, 1], rng=rng)[0]
        g = new(ctx, gg.F32, [S if kda else 1, H, T, 1], rng=rng, lo=-0.7, hi=-0.01)[0]
        beta = new(ctx, gg.F32, [1, H, T, 1], rng=rng, lo=0.1, hi=1.0)[0]
        st = new(ctx, gg.F32, [S, S, H, 1], rng=rng, lo=-0.5, hi=0.5)[0]
        return gg.gated_delta_net(ctx, q, k, v, g, beta, st, 3)
    return build


def _linear(op, S):
    def build(ctx, rng):
        H, T, n_seqs = 2, 6, 2
        x = [new(ctx, gg.F32, [S, H, T], rng=rng, lo=-0.5, hi=0.5)[0] for _ in range(6)]
        st = new(ctx, gg.F32, [S * S * H, n_seqs], rng=rng)[0]
        decay = new(ctx, gg.F32, [S, H, T], rng=rng, lo=0.5, hi=1.0)[0]
        if op == "gla":
            return gg.gated_linear_attn(ctx, x[0], x[1], x[2], decay, st, 0.25)
        if op == "wkv6":
            tf = new(ctx, gg.F32, [S, H], rng=rng)[0]
            return gg.rwkv_wkv6(ctx, x[0], x[1], x[2], tf, decay, st)
        return gg.rwkv_wkv7(ctx, x[0], decay, x[1], x[2], x[3], x[4], st)
    return build


CASES = ([(f"delta S{S} kda={kda}", _delta(S, kda)) for S in (128, 19) for kda in (False, True)]
         + [(f"{op} S{S}", _linear(op, S)) for op in ("gla", "wkv6", "wkv7") for S in (64, 13)])


@pytest.mark.parametrize("name,build", CASES, ids=[c[0] for c in CASES])
def test_scalar_and_avx2_tables_agree(name, build):
    if gg.isa(detected=True) == "scalar":
        pytest.skip("no AVX2 on this CPU")
    a, b = _run("scalar", build), _run("avx2", build)
    assert np.all(np.isfinite(a))
    assert_close(b, a, 1e-12, what=name)
