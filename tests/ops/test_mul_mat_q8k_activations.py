"""The activations of a K-quant mul_mat are quantized to q8_K by each kernel set's own quantizer
(AVX2 has a vector one); every set must produce the reference quantizer's bytes.

The weights are q6_K blocks with d = 1/4 and scales 1..3, and every activation super-block has
|max| = 127, so q8_K's d is +-1 and every product, partial sum and total is exactly a float32:
the output then equals, bit for bit, the float64 product of the dequantized weights and the
reference-quantized activations, whatever the summation order. A quantizer that rounds a tie
another way, misplaces a byte or gets a sum of 16 wrong changes an output."""
import numpy as np
import pytest

import pyggml as gg
from util import SIMD_LEVELS, compute, values

K, M, N = 1024, 19, 5  # 4 super-blocks per row


def q6_k_weights(rng):
    blocks = np.zeros((M * K // 256, 210), np.uint8)
    blocks[:, :192] = rng.integers(0, 256, (blocks.shape[0], 192))        # ql, qh: levels 0..63
    blocks[:, 192:208] = rng.integers(1, 4, (blocks.shape[0], 16))        # scales
    blocks[:, 208:210] = np.array([0.25], np.float16).view(np.uint8)      # d
    return blocks.ravel()


def activations(rng):
    """Per 256-value block: random values in (-127, 127), half-integers (ties), integers, and
    one +-127 at a random place; one block is all zero, one holds several equal maxima of
    both signs."""
    x = rng.uniform(-126.9, 126.9, size=(N, K // 256, 256)).astype(np.float32)
    x[:, :, :64] = np.round(x[:, :, :64]) + 0.5 * rng.choice([-1, 1], size=(N, K // 256, 64))
    x[:, :, 64:96] = np.round(x[:, :, 64:96])
    x = np.clip(x, -126.5, 126.5)
    for n in range(N):
        for b in range(K // 256):
            x[n, b, rng.integers(0, 256)] = 127.0 * rng.choice([-1, 1])
    x[1, 2] = 0.0
    x[3, 1, [7, 100, 200]] = [-127.0, 127.0, -127.0]
    return x.reshape(N, K)


@pytest.mark.parametrize("simd", SIMD_LEVELS, indirect=True)
def test_q8_k_activations_are_the_reference_bytes(simd):
    rng = np.random.default_rng(17)
    raw, x = q6_k_weights(rng), activations(rng)
    w = gg.dequantize(gg.Q6_K, raw).astype(np.float64).reshape(M, K)
    act = np.stack([gg.dequantize(gg.Q8_K, gg.quantize(gg.Q8_K, r)) for r in x]).astype(np.float64)
    assert np.any(act != x), "the activations must actually be rounded (ties)"
    expected = (act @ w.T).astype(np.float32)
    assert np.array_equal(expected.astype(np.float64), act @ w.T), "the test's products must be exact"
    ctx = gg.Context(mem_size=16 << 20)
    a = ctx.new_tensor(gg.Q6_K, [K, M])
    a.set(raw)
    b = ctx.new_tensor(gg.F32, [K, N])
    b.set(x)
    for n_threads in (1, 2):
        out = gg.mul_mat(ctx, a, b)
        compute(ctx, out, n_threads=n_threads)
        got = values(out).reshape(N, M)
        bad = np.argwhere(got != expected)
        assert bad.size == 0, f"{simd}, {n_threads} threads: outputs (column, row) {bad[:5].tolist()} differ"
