"""The row-wise F16 flash-attention kernel (csrc/cpu/flash_attn_rowwise_impl.h) at both of its
SIMD levels, 8-lane AVX2 and 16-lane AVX-512 (skipped where the CPU lacks AVX-512), against the
float64 reference of tests/references/flash_attn.py: odd head sizes (the dots' D % 32 and
D % 64 tails, masked V lanes), odd KV lengths and short last blocks, -inf holes and fully
masked rows, GQA ratios up to 32 vectors per K head, non-contiguous K/V (views into a padded
cache, permuted), the n_kv_max hint, sinks / soft cap / ALiBi, and 1, 2 and 3 threads, which
must give the same bits. Bit-exactness with ggml itself is tests/ops/test_flash_attn_rowwise_ggml.py."""
import numpy as np
import pytest

import pyggml as gg
from test_flash_attn import TOL, _mask, fa_case
from util import assert_close

LEVELS = ["avx2", "avx512"]


@pytest.fixture(params=LEVELS)
def level(request):
    if request.param == "avx512" and gg.isa(detected=True) != "avx512":
        pytest.skip("the CPU has no AVX-512")
    previous = gg.set_isa(request.param)
    yield request.param
    gg.set_isa(previous)


def check(**kw):
    r, got, want, extra = fa_case(**kw)
    assert_close(got, want, TOL)
    return got


@pytest.mark.parametrize("D,Dv", [(64, 64), (40, 40), (80, 72), (96, 130), (130, 17), (256, 256)])
@pytest.mark.parametrize("KV,N", [(1, 1), (33, 3), (517, 1), (1025, 9)])
def test_head_sizes_and_lengths(level, D, Dv, KV, N):
    check(D=D, Dv=Dv, KV=KV, N=N, H=6, Hkv=2, mask="causal", seed=D + KV)


@pytest.mark.parametrize("H,Hkv", [(4, 4), (9, 3), (8, 2), (16, 1), (32, 1), (12, 6)])
def test_gqa(level, H, Hkv):
    # 32/1: two work items of 16 vectors on one K head
    check(H=H, Hkv=Hkv, D=64, N=2, KV=700, seed=H)


@pytest.mark.parametrize("kind", ["random", "causal", "zeros"])
def test_masks(level, kind):
    check(N=5, KV=600, H=4, Hkv=2, D=96, mask=kind, seed=7)


def test_fully_masked_rows_and_holes(level):
    rng = np.random.default_rng(5)
    m = _mask(rng, 300, 6, kind="causal")
    m[0, 0, 2, :] = -np.inf                   # a fully masked row: zeros
    m[0, 0, 4, ::3] = -np.inf                 # holes: compacted blocks
    m[0, 0, 5, :250] = -np.inf                # only the last blocks seen
    got = check(mask_data=m, N=6, KV=300, H=4, Hkv=2, D=80, seed=5)
    out = got.reshape(6, 4, 80)
    assert not out[2].any() and np.abs(out[[0, 1, 3, 4, 5]]).min(axis=-1).max() > 0


@pytest.mark.parametrize("layout", ["cache_view", "permuted"])
def test_non_contiguous_kv(level, layout):
    check(kv_layout=layout, N=1, KV=1100, H=9, Hkv=3, D=64, mask="causal", seed=11)
    check(kv_layout=layout, N=4, KV=77, H=4, Hkv=2, D=48, seed=12)


def test_sinks_softcap_alibi(level):
    check(softcap=20.0, sinks=np.linspace(-3, 3, 8), max_bias=8.0, N=3, KV=600, H=8, Hkv=4, D=64, seed=2)


def test_n_kv_max_hint(level):
    rng = np.random.default_rng(9)
    m = np.full((1, 1, 4, 900), -np.inf, dtype=np.float16)
    for t in range(4):
        m[0, 0, t, rng.choice(900, 40, replace=False)] = 0.0
    check(mask_data=m, n_kv_max=40, N=4, KV=900, H=6, Hkv=2, D=64, seed=9)


@pytest.mark.parametrize("KV", [4096, 5000])
def test_thread_counts_give_the_same_bits(level, KV):
    # decode: (head group, KV chunk) pieces folded after the split; the fold order is fixed
    kw = dict(N=1, KV=KV, H=9, Hkv=3, D=64, mask="causal", kv_layout="cache_view", seed=KV)
    base = check(threads=1, **kw)
    for threads in (2, 3):
        np.testing.assert_array_equal(check(threads=threads, **kw), base)


def at_both_levels(**kw):
    """The same case's output at each level (skipped without AVX-512)."""
    if gg.isa(detected=True) != "avx512":
        pytest.skip("the CPU has no AVX-512")
    got = {}
    for lv in LEVELS:
        previous = gg.set_isa(lv)
        try:
            got[lv] = fa_case(**kw)[1]
        finally:
            gg.set_isa(previous)
    return got


def test_levels_differ_only_in_the_dot_order():
    got = at_both_levels(N=2, KV=2000, H=8, Hkv=2, D=128, mask="causal", seed=1)
    err = float(np.sum((got["avx2"] - got["avx512"]) ** 2) / np.sum(got["avx2"] ** 2))
    assert 0 < err < 1e-6  # last-bit differences from the dots' sum order, nothing more


@pytest.mark.parametrize("D,differ", [(32, False), (40, False), (96, False), (80, True), (64, True)])
def test_avx512_level_keeps_8_lanes_where_the_64_step_leaves_32_dims(D, differ):
    """The 16-lane dots step 64 dims and sum the rest one by one in f64 (ggml's AVX-512 order);
    where that rest is 32 dims or more the avx512 level runs the 8-lane kernel (up to 4x faster
    there), so its bits are the avx2 level's; elsewhere the 16-lane kernel's order shows."""
    got = at_both_levels(N=1, KV=1500, H=8, Hkv=2, D=D, mask="causal", seed=D)
    assert bool(np.any(got["avx2"] != got["avx512"])) == differ


@pytest.mark.parametrize("layout", ["plain", "cache_view", "permuted"])
def test_rows_asked_for_ahead_change_no_bit(level, monkeypatch, layout):
    # K and V of about 4 MB each: beyond twice any core's L2, so the kernel asks for K/V rows
    # ahead of their use (PYGGML_FA_PREFETCH=0: it does not); within the tolerance and the
    # same bits either way, at 1 and 2 threads
    kw = dict(N=2, KV=8200, H=8, Hkv=4, D=64, mask="causal", kv_layout=layout, seed=3)
    ahead = {t: check(threads=t, **kw) for t in (1, 2)}
    monkeypatch.setenv("PYGGML_FA_PREFETCH", "0")
    for t in (1, 2):
        np.testing.assert_array_equal(check(threads=t, **kw), ahead[t])
