"""MUL_MAT and MUL_MAT_ID on the CPU backend against the numpy references.

Every result is checked twice: against the exact float64 product of the stored weights (the peer
bound, NMSE 5e-4) and against the same product with the activations converted as ggml's CPU
converts them (f16/bf16 rounding, q8_0 quantization), with a bound tight enough (1e-9) to show
that conversion is really done. Every kernel set (scalar, AVX2, AVX-512) is run through the
gg.set_isa cap; the GEMM path starts at N >= 64 (float weights), 32 (32-value blocks), never
for the K-quants: test_mul_mat_paths.py checks both sides.
"""
import numpy as np
import pytest

import pyggml as gg
import reference as ref
from util import assert_close, compute, new, values

WTYPES = {"f32": gg.F32, "f16": gg.F16, "bf16": gg.BF16, "q8_0": gg.Q8_0, "q4_0": gg.Q4_0, "nvfp4": gg.NVFP4}
PEER = 5e-4
EMUL = 1e-9


def _ctx(mb=64):
    return gg.Context(mem_size=mb << 20)


def _check(got, a, b, wtype, emul=EMUL):
    assert_close(got, ref.mul_mat(a, b), PEER, what="exact")
    assert_close(got, ref.mul_mat(a, ref.act_like_cpu(b, wtype)), emul, what="cpu-emulation")


def _run(wtype, K, M, N, bt=gg.F32, a_batch=(1, 1), b_batch=(1, 1), seed=0, n_threads=2):
    rng = np.random.default_rng(seed)
    ctx = _ctx()
    a, av = new(ctx, WTYPES[wtype], [K, M, *a_batch], rng=rng)
    b, bv = new(ctx, bt, [K, N, *b_batch], rng=rng)
    out = gg.mul_mat(ctx, a, b)
    assert out.type == gg.F32 and list(out.ne) == [M, N, *b_batch]
    compute(ctx, out, n_threads=n_threads)
    return values(out), av, bv


@pytest.fixture(params=["scalar", "avx2", "avx512"])
def isa(request):
    previous = gg.set_isa(request.param)
    yield request.param
    gg.set_isa(previous)


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("N", [1, 2, 3, 5, 8, 9, 17])
def test_types_every_isa(isa, wtype, N):
    K = 4 if wtype in ("f32", "f16", "bf16") and N == 3 else 256
    got, av, bv = _run(wtype, K, 40, N, seed=N)
    _check(got, av, bv, wtype)


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("K,N", [(256, 4), (256, 6), (256, 7), (256, 127), (4096, 1), (4096, 8)])
def test_shapes(wtype, K, N):
    got, av, bv = _run(wtype, K, 16, N)
    _check(got, av, bv, wtype)


@pytest.mark.parametrize("wtype", ["f32", "f16", "bf16"])
def test_k4(wtype):
    for N in range(1, 10):
        got, av, bv = _run(wtype, 4, 16, N, seed=N)
        _check(got, av, bv, wtype)


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("N", [1, 7, 9, 127])
def test_m1(wtype, N):
    got, av, bv = _run(wtype, 256, 1, N)
    _check(got, av, bv, wtype)


@pytest.mark.parametrize("wtype,K", [("f32", 2051), ("f16", 2051), ("bf16", 2051), ("q8_0", 2048), ("q4_0", 2048),
                                     ("nvfp4", 2048)])
@pytest.mark.parametrize("M,N", [(31, 509), (509, 31), (1, 509)])
def test_odd_sizes(wtype, K, M, N):
    got, av, bv = _run(wtype, K, M, N)
    _check(got, av, bv, wtype)


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("r2,r3", [(1, 1), (2, 1), (3, 2), (1, 2)])
@pytest.mark.parametrize("N", [3, 20])
def test_batch_broadcast_interleaved(wtype, r2, r3, N):
    a_batch, b_batch = (2, 2), (2 * r2, 2 * r3)
    got, av, bv = _run(wtype, 64, 24, N, a_batch=a_batch, b_batch=b_batch, seed=r2 * 10 + r3)
    _check(got, av, bv, wtype)
    if r2 > 1 or r3 > 1:  # the modulo rule would give a different answer
        mod = np.stack([np.stack([bv[i3, i2].astype(np.float64) @ av[i3 % 2, i2 % 2].T.astype(np.float64)
                                  for i2 in range(b_batch[0])]) for i3 in range(b_batch[1])])
        assert not np.allclose(got, mod, atol=1e-2)


@pytest.mark.parametrize("wtype", ["f32", "f16", "q8_0", "q4_0"])
@pytest.mark.parametrize("bt", [gg.F16, gg.BF16])
def test_f16_bf16_activations(wtype, bt):
    for N in (2, 33):
        got, av, bv = _run(wtype, 64, 20, N, bt=bt)
        _check(got, av, bv, wtype)


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("perm", [(0, 2, 1, 3), (0, 1, 3, 2), (0, 3, 2, 1)])
@pytest.mark.parametrize("N", [4, 24])
def test_permuted_operands(wtype, perm, N):
    rng = np.random.default_rng(3)
    ctx = _ctx()
    K, M = 128, 20
    # build a and b so that after permute their shapes are [K, M, 2, 2] and [K, N, 2, 2]
    def inverse_ne(ne):
        src = [0, 0, 0, 0]
        for k in range(4):
            src[k] = ne[perm[k]]
        return src
    a0, a0v = new(ctx, WTYPES[wtype], inverse_ne([K, M, 2, 2]), rng=rng)
    b0, b0v = new(ctx, gg.F32, inverse_ne([K, N, 2, 2]), rng=rng)
    a = gg.permute(ctx, a0, *perm)
    b = gg.permute(ctx, b0, *perm)
    assert list(a.ne) == [K, M, 2, 2] and list(b.ne) == [K, N, 2, 2]
    out = gg.mul_mat(ctx, a, b)
    compute(ctx, out)
    # numpy: the permuted view of the stored values (ggml dim k -> numpy axis 3-k)
    axes = [3 - perm.index(3 - i) for i in range(4)]
    _check(values(out), np.transpose(a0v, axes), np.transpose(b0v, axes), wtype)


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("N", [3, 30])
def test_k_strided_views(wtype, N):
    """a and b are views with padded rows (k_v > k) and padded batches, and share one buffer."""
    rng = np.random.default_rng(5)
    ctx = _ctx()
    K, Kv, M = 128, 256, 12
    a0, a0v = new(ctx, WTYPES[wtype], [Kv, M + 1, 3], rng=rng)
    rs = gg.row_size(WTYPES[wtype], Kv)
    a = gg.view_4d(ctx, a0, K, M, 2, 1, rs, rs * (M + 1), rs * (M + 1) * 2, rs)  # skip the first row
    b0, b0v = new(ctx, gg.F32, [Kv, 2 * N, 2], rng=rng)
    b = gg.view_4d(ctx, b0, K, N, 2, 1, 2 * Kv * 4, Kv * 4 * 2 * N, Kv * 4 * 2 * N * 2, 64 * 4)
    out = gg.mul_mat(ctx, a, b)
    compute(ctx, out)
    av = a0v[:, :2, 1:M + 1, :K]
    bv = b0v[:, :, ::2, 64:64 + K]
    _check(values(out), av, bv, wtype)


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("N", [1, 5, 64])
def test_threads_agree(wtype, N):
    outs = []
    for nt in (1, 2, 3):
        got, _, _ = _run(wtype, 256, 100, N, a_batch=(2, 1), b_batch=(4, 1), n_threads=nt)
        outs.append(got)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


def test_large_gemm_chunks():
    """Large enough for several row blocks, K blocks and column tiles."""
    got, av, bv = _run("f32", 700, 300, 200, b_batch=(2, 1))
    _check(got, av, bv, "f32")


# ---------------------------------------------------------------- mul_mat_id


def _run_id(wtype, K, M, E, U, T, Nb, ids_np, n_threads=2, ids_view=False, seed=0):
    rng = np.random.default_rng(seed)
    ctx = _ctx()
    as_, asv = new(ctx, WTYPES[wtype], [K, M, E], rng=rng)
    b, bv = new(ctx, gg.F32, [K, Nb, T], rng=rng)
    if ids_view:  # ids as a column view of a wider index tensor
        big = ctx.new_tensor(gg.I32, [U + 3, T])
        full = np.zeros((T, U + 3), dtype=np.int32)
        full[:, 1:U + 1] = ids_np
        big.set(full)
        ids = gg.view_2d(ctx, big, U, T, big.nb[1], 4)
    else:
        ids = ctx.new_tensor(gg.I32, [U, T])
        ids.set(ids_np.astype(np.int32))
    out = gg.mul_mat_id(ctx, as_, b, ids)
    assert list(out.ne) == [M, U, T, 1] and out.type == gg.F32
    compute(ctx, out, n_threads=n_threads)
    return values(out)[0], asv[0], bv[0]


@pytest.mark.parametrize("wtype", list(WTYPES))
@pytest.mark.parametrize("E,U,Nb,view", [(4, 4, 4, False), (4, 2, 2, True), (4, 2, 1, False), (8, 3, 1, True)])
def test_mul_mat_id(wtype, E, U, Nb, view):
    T, K, M = 7, 128, 24
    rng = np.random.default_rng(E * 10 + U)
    ids = np.stack([rng.permutation(E)[:U] for _ in range(T)]).astype(np.int32)
    got, asv, bv = _run_id(wtype, K, M, E, U, T, Nb, ids, ids_view=view)
    assert_close(got, ref.mul_mat_id(asv, bv, ids), PEER, what="exact")
    assert_close(got, ref.mul_mat_id(asv, ref.act_like_cpu(bv, wtype), ids), EMUL, what="cpu-emulation")


@pytest.mark.parametrize("wtype", ["f32", "q4_0"])
def test_mul_mat_id_repeated_experts_and_threads(isa, wtype):
    T, K, M, E, U = 9, 64, 33, 5, 3
    ids = np.array([[t % E, t % E, (t * 3) % E] for t in range(T)], dtype=np.int32)  # repeats in a token
    r1, asv, bv = _run_id(wtype, K, M, E, U, T, U, ids, n_threads=1)
    r2, _, _ = _run_id(wtype, K, M, E, U, T, U, ids, n_threads=2)
    np.testing.assert_array_equal(r1, r2)
    assert_close(r1, ref.mul_mat_id(asv, ref.act_like_cpu(bv, wtype), ids), EMUL)


def test_mul_mat_id_ids_out_of_range():
    ctx = _ctx()
    as_, _ = new(ctx, gg.F32, [32, 8, 4])
    b, _ = new(ctx, gg.F32, [32, 2, 3])
    for bad in (4, -1):
        ids = ctx.new_tensor(gg.I32, [2, 3])
        ids.set(np.array([[0, 1], [2, bad], [3, 0]], dtype=np.int32))
        out = gg.mul_mat_id(ctx, as_, b, ids)
        with pytest.raises(ValueError, match="mul_mat_id.*out of range"):
            compute(ctx, out)
    # the context still works
    ids = ctx.new_tensor(gg.I32, [2, 3])
    ids.set(np.array([[0, 1], [2, 3], [3, 0]], dtype=np.int32))
    compute(ctx, gg.mul_mat_id(ctx, as_, b, ids))


# ---------------------------------------------------------------- validation


def test_bad_inputs_raise():
    ctx = _ctx()
    a, _ = new(ctx, gg.F32, [64, 8, 2])
    b, _ = new(ctx, gg.F32, [65, 3, 2])
    with pytest.raises(ValueError, match=r"\[mul_mat\] a.ne\[0\]=64 must equal b.ne\[0\]=65"):
        gg.mul_mat(ctx, a, b)
    b3, _ = new(ctx, gg.F32, [64, 3, 3])
    with pytest.raises(ValueError, match="mul_mat.*multiples"):
        gg.mul_mat(ctx, a, b3)
    ai = ctx.new_tensor(gg.I32, [64, 8])
    with pytest.raises(TypeError, match="mul_mat"):
        gg.mul_mat(ctx, ai, b3)
    bq, _ = new(ctx, gg.Q8_0, [64, 3])
    with pytest.raises(TypeError, match="mul_mat"):
        gg.mul_mat(ctx, a, bq)
    with pytest.raises(ValueError, match="mul_mat.*transposed"):
        gg.mul_mat(ctx, gg.transpose(ctx, new(ctx, gg.F32, [8, 64])[0]), b3)
    bt = gg.transpose(ctx, new(ctx, gg.F32, [3, 64])[0])
    with pytest.raises(ValueError, match="mul_mat.*contiguous"):
        gg.mul_mat(ctx, new(ctx, gg.F32, [64, 8])[0], bt)
    with pytest.raises((TypeError, ValueError), match="mul_mat"):
        gg.mul_mat(ctx, a, None)
    # mul_mat_id
    as_, _ = new(ctx, gg.F32, [64, 8, 4])
    bb, _ = new(ctx, gg.F32, [64, 2, 5])
    ids = ctx.new_tensor(gg.I32, [2, 5])
    with pytest.raises(TypeError, match="mul_mat_id"):
        gg.mul_mat_id(ctx, as_, bb, ctx.new_tensor(gg.F32, [2, 5]))
    with pytest.raises(ValueError, match="mul_mat_id"):
        gg.mul_mat_id(ctx, as_, bb, ctx.new_tensor(gg.I32, [2, 4]))
    with pytest.raises(ValueError, match="mul_mat_id"):
        gg.mul_mat_id(ctx, as_, new(ctx, gg.F32, [64, 3, 5])[0], ctx.new_tensor(gg.I32, [4, 5]))
    with pytest.raises(ValueError, match="mul_mat_id"):
        gg.mul_mat_id(ctx, as_, new(ctx, gg.F32, [63, 2, 5])[0], ids)
    with pytest.raises((TypeError, ValueError), match="mul_mat_id"):
        gg.mul_mat_id(ctx, as_, bb, None)
    # the context still works
    b_ok, bv = new(ctx, gg.F32, [64, 3, 2])
    a_vals = values(a)
    out = gg.mul_mat(ctx, a, b_ok)
    compute(ctx, out)
    assert_close(values(out), ref.mul_mat(a_vals, bv), 1e-10)


@pytest.mark.parametrize("N", [1, 20])
def test_q8_activation_rounding_ties(isa, N):
    """Activations on exact .5 ties after scaling (amax 127 -> id 1): the CPU quantizer rounds
    half away from zero; any other rounding changes the result far beyond the 1e-9 bound."""
    rng = np.random.default_rng(11)
    K, M = 256, 24
    ctx = _ctx()
    a, av = new(ctx, gg.Q8_0, [K, M], rng=rng)
    bvals = rng.integers(-126, 126, size=(N, K)).astype(np.float32) + np.float32(0.5)
    bvals[:, ::32] = 127.0  # every block's amax is 127
    b, bv = new(ctx, gg.F32, [K, N], data=bvals)
    out = gg.mul_mat(ctx, a, b)
    compute(ctx, out)
    _check(values(out), av, bv, "q8_0")
