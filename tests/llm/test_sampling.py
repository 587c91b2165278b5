"""Host sampling: greedy, filters, temperature, seeding."""
import numpy as np
import pytest

from pyggml.llm.sampling import (Sampler, apply_penalties, greedy, make_sampler, min_p_filter,
                                 top_k_filter, top_p_filter)


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
    with pytest.raises(ValueError, match="typical_p"):
        Sampler(typical_p=0.0)
    with pytest.raises(ValueError, match="repeat_penalty"):
        Sampler(repeat_penalty=0.0)


# ---------------------------------------------------------------- the full chain vs numpy
def _ref_softmax(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


def _ref_penalties(logits, history, repeat, freq, present):
    out = np.array(logits, np.float64)
    seen = {}
    for t in history:
        seen[t] = seen.get(t, 0) + 1
    for t, c in seen.items():
        out[t] = out[t] * repeat if out[t] <= 0 else out[t] / repeat
        out[t] -= c * freq + present
    return out


def _ref_chain(logits, history, *, top_k, typical, top_p, min_p, temp, repeat=1.0, freq=0.0, present=0.0):
    """Each stage written as a plain loop over (id, logit) pairs."""
    x = _ref_penalties(logits, history, repeat, freq, present)
    cand = sorted(enumerate(x), key=lambda t: (-t[1], t[0]))
    if top_k > 0:
        cand = cand[:top_k]
    if typical < 1.0:
        p = _ref_softmax([l for _, l in cand])
        h = -sum(pi * np.log(pi) for pi in p if pi > 0)
        order = sorted(range(len(cand)), key=lambda i: (abs(-np.log(p[i]) - h), i))
        acc, keep = 0.0, []
        for i in order:
            keep.append(cand[i])
            acc += p[i]
            if acc > typical:
                break
        cand = keep
    if top_p < 1.0:
        cand = sorted(cand, key=lambda t: (-t[1], t[0]))
        p = _ref_softmax([l for _, l in cand])
        acc, keep = 0.0, []
        for c, pi in zip(cand, p):
            keep.append(c)
            acc += pi
            if acc >= top_p:
                break
        cand = keep
    if min_p > 0:
        top = max(l for _, l in cand)
        cand = [c for c in cand if np.exp(c[1] - top) >= min_p]
    ids = np.array([i for i, _ in cand])
    probs = _ref_softmax(np.array([l for _, l in cand]) / temp)
    return ids, probs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chain_matches_reference_after_every_stage(seed):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 2, 257).astype(np.float32)
    history = list(rng.integers(0, 257, 40))
    stages = [dict(top_k=0, typical=1.0, top_p=1.0, min_p=0.0, temp=1.0),
              dict(top_k=50, typical=1.0, top_p=1.0, min_p=0.0, temp=1.0),
              dict(top_k=50, typical=0.9, top_p=1.0, min_p=0.0, temp=1.0),
              dict(top_k=50, typical=0.9, top_p=0.8, min_p=0.0, temp=1.0),
              dict(top_k=50, typical=0.9, top_p=0.8, min_p=0.1, temp=1.0),
              dict(top_k=50, typical=0.9, top_p=0.8, min_p=0.1, temp=0.7),
              dict(top_k=50, typical=0.9, top_p=0.8, min_p=0.1, temp=0.7, repeat=1.3, freq=0.2, present=0.5)]
    for st in stages:
        s = Sampler(temperature=st["temp"], top_k=st["top_k"], typical_p=st["typical"], top_p=st["top_p"],
                    min_p=st["min_p"], repeat_penalty=st.get("repeat", 1.0),
                    frequency_penalty=st.get("freq", 0.0), presence_penalty=st.get("present", 0.0),
                    penalty_last_n=64)
        s.accept(history)
        ids, probs = s.candidates(logits)
        rid, rprobs = _ref_chain(logits, history, **st)
        order, rorder = np.argsort(ids), np.argsort(rid)
        assert list(ids[order]) == list(rid[rorder]), st
        np.testing.assert_allclose(probs[order], rprobs[rorder], rtol=1e-9, atol=1e-12)


def test_penalties_follow_the_sign_rule_and_counts():
    logits = np.array([2.0, -2.0, 0.0, 1.0])
    out = apply_penalties(logits, [0, 0, 1, 2], repeat=2.0, frequency=0.5, presence=0.25)
    np.testing.assert_allclose(out, [2.0 / 2 - 2 * 0.5 - 0.25, -2.0 * 2 - 0.5 - 0.25, 0.0 - 0.5 - 0.25, 1.0])
    s = Sampler(temperature=0.0, repeat_penalty=100.0, penalty_last_n=2)
    row = np.array([5.0, 4.9, 0.0])
    assert s(row) == 0 and s(row) == 1          # 0 is penalized once drawn
    s.accept([5, 6])                            # only the last 2 ids count
    assert s(row) == 0


def test_greedy_is_bit_identical_to_argmax():
    rng = np.random.default_rng(3)
    for n in (1, 7, 32000, 151936):
        row = rng.normal(size=n).astype(np.float32)
        row[rng.integers(0, n)] = np.float32(np.inf) if n > 7 else row[0]
        if n > 1:
            row[rng.integers(0, n)] = -np.inf
        assert greedy(row) == int(np.argmax(row))
        assert Sampler(temperature=0.0)(row) == int(np.argmax(row))
        assert make_sampler(0.0)(row) == int(np.argmax(row))


def test_seeded_chain_is_reproducible_and_seeds_differ():
    logits = np.random.default_rng(5).normal(0, 1.5, 1000)
    kw = dict(temperature=0.9, top_k=100, top_p=0.95, min_p=0.01, typical_p=0.95, repeat_penalty=1.1)
    a = Sampler(seed=123, **kw)
    b = Sampler(seed=123, **kw)
    ra = [a(logits) for _ in range(300)]
    rb = [b(logits) for _ in range(300)]
    assert ra == rb
    c = Sampler(seed=124, **kw)
    assert [c(logits) for _ in range(300)] != ra
    a.reset()
    assert [a(logits) for _ in range(300)] == ra


def test_draws_follow_the_filtered_distribution():
    logits = np.log(np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04]))
    s = Sampler(temperature=1.0, top_k=4, top_p=1.0, min_p=0.0, seed=7)
    draws = np.array([s(logits) for _ in range(4000)])
    assert draws.max() <= 3
    expect = np.array([0.4, 0.25, 0.15, 0.1]) / 0.9
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / len(draws), expect, atol=0.03)
