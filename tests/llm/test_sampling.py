"""Host sampling: greedy, filters, temperature, seeding."""
import numpy as np
import pytest

from pyggml.llm.sampling import Sampler, greedy, make_sampler, min_p_filter, top_k_filter, top_p_filter


def test_greedy_is_argmax_with_lowest_id_on_ties():
    assert greedy(np.array([0.1, 3.0, -1.0, 3.0])) == 1
    assert make_sampler(0.0) is greedy


def test_top_k_keeps_the_k_largest_sorted():
    ids, lg = top_k_filter(np.arange(5), np.array([1.0, 5.0, 3.0, 4.0, 2.0]), 3)
    assert list(ids) == [1, 3, 2] and list(lg) == [5.0, 4.0, 3.0]
    ids, _ = top_k_filter(np.arange(5), np.arange(5.0), 0)
    assert len(ids) == 5


def test_top_p_keeps_the_smallest_prefix_reaching_p():
    p = np.array([0.5, 0.3, 0.15, 0.05])
    ids, _ = top_p_filter(np.arange(4), np.log(p), 0.79)
    assert list(ids) == [0, 1]
    ids, _ = top_p_filter(np.arange(4), np.log(p), 0.81)
    assert list(ids) == [0, 1, 2]
    ids, _ = top_p_filter(np.arange(4), np.log(p), 0.1)
    assert list(ids) == [0]


def test_min_p_relative_to_the_top_probability():
    p = np.array([0.5, 0.3, 0.15, 0.05])
    ids, _ = min_p_filter(np.arange(4), np.log(p), 0.25)   # keep p >= 0.125
    assert list(ids) == [0, 1, 2]


def test_seeded_sampling_is_reproducible_and_follows_the_distribution():
    logits = np.log(np.array([0.6, 0.3, 0.1]))
    s1 = Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=42)
    s2 = Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=42)
    a = [s1(logits) for _ in range(2000)]
    b = [s2(logits) for _ in range(2000)]
    assert a == b
    freq = np.bincount(a, minlength=3) / len(a)
    np.testing.assert_allclose(freq, [0.6, 0.3, 0.1], atol=0.04)


def test_temperature_sharpens_and_filters_restrict():
    logits = np.array([2.0, 1.0, 0.0, -1.0])
    ids, probs = Sampler(temperature=0.5, top_k=0, top_p=1.0, min_p=0.0).candidates(logits)
    e = np.exp(logits / 0.5)
    np.testing.assert_allclose(probs, e / e.sum())
    s = Sampler(temperature=1.0, top_k=2, top_p=1.0, min_p=0.0, seed=0)
    assert set(s(logits) for _ in range(200)) <= {0, 1}
    assert Sampler(temperature=0.0)(logits) == 0


def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="top_p"):
        Sampler(top_p=0.0)
    with pytest.raises(ValueError, match="min_p"):
        Sampler(min_p=2.0)
