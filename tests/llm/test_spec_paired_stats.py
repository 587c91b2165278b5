"""The paired-ratio statistics of the benches (bench/paired_stats.py: compare_speculative,
compare_llama_cpp, compare_threads, compare_prompt_ops), against direct binomial sums and
hand-computed order statistics; the other-processes load figure against scripted ticks."""
import math
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from paired_stats import Paired, binomial_cdf_half, median_interval  # noqa: E402


def test_binomial_cdf_half():
    assert binomial_cdf_half(-1, 5) == 0.0
    assert binomial_cdf_half(5, 5) == pytest.approx(1.0)
    assert binomial_cdf_half(1, 5) == pytest.approx((1 + 5) / 32)
    assert binomial_cdf_half(10, 21) == pytest.approx(0.5)     # symmetric, odd n


def test_median_interval_ranks():
    xs = list(range(100, 0, -1))                  # 1..100, unsorted
    med, lo, hi, cover = median_interval(xs, 0.95)
    assert med == 50.5
    # the widest-coverage-first rank j with 1 - 2 P(B <= j-1) >= 0.95 is j = 41 for n = 100
    # (the textbook 95% interval of a median of 100: x_(40)..x_(61), 1-based)
    j = lo
    assert hi == 101 - j
    assert 1 - 2 * binomial_cdf_half(int(j) - 1, 100) == pytest.approx(cover)
    assert cover >= 0.95 and 1 - 2 * binomial_cdf_half(int(j), 100) < 0.95
    assert (lo, hi) == (40, 61)


def test_small_samples_take_the_range():
    med, lo, hi, cover = median_interval([3.0, 1.0, 2.0], 0.95)
    assert (med, lo, hi) == (2.0, 1.0, 3.0)
    assert cover == pytest.approx(1 - 2 / 8)
    with pytest.raises(ValueError, match="no values"):
        median_interval([])
    with pytest.raises(ValueError, match="confidence"):
        median_interval([1.0], 1.5)


def test_paired_ratios_and_differences():
    p = Paired()
    for a, b in ((1.0, 1.1), (2.0, 2.4), (4.0, 4.0), (1.0, 1.05), (0.5, 0.6)):
        p.add(a, b)
    assert p.ratios == pytest.approx([1.1, 1.2, 1.0, 1.05, 1.2])
    assert p.ratio()[0] == pytest.approx(1.1)
    assert p.difference()[0] == pytest.approx(0.1)
    text = p.summary()
    assert "+10.0%" in text and "5 pairs" in text
    with pytest.raises(ValueError):
        p.add(0.0, 1.0)
    with pytest.raises(ValueError):
        p.add(float("nan"), 1.0)
    assert not math.isnan(p.ratio()[1])


def test_others_load_subtracts_this_process_and_clamps(monkeypatch):
    import paired_stats
    # /proc/stat ticks (busy, total) and this process's CPU seconds at start() and stop()
    ticks = iter([(1000, 5000), (1000 + 150, 5000 + 200)])
    own = iter([10.0, 10.5])
    monkeypatch.setattr(paired_stats, "_cpu_jiffies", lambda: next(ticks))
    monkeypatch.setattr(paired_stats, "_own_cpu_s", lambda: next(own))
    # 150 busy ticks of 200 = 1.5 s of 2.0 CPU-seconds; 0.5 s of them ours: others 1.0 / 2.0
    assert paired_stats.OthersLoad().start().stop() == pytest.approx(0.5)
    ticks = iter([(0, 0), (10, 100)])
    own = iter([0.0, 1.0])                      # ours exceeds the busy ticks (10 ms rounding)
    assert paired_stats.OthersLoad().start().stop() == 0.0
    monkeypatch.setattr(paired_stats, "_cpu_jiffies", lambda: None)   # no /proc/stat
    own = iter([0.0, 0.0])
    assert paired_stats.OthersLoad().start().stop() is None


def test_others_load_reads_this_machine():
    import time

    import paired_stats
    if paired_stats._cpu_jiffies() is None:
        pytest.skip("no /proc/stat")
    share = paired_stats.OthersLoad().start()
    time.sleep(0.05)
    assert 0.0 <= share.stop() <= 1.0


def test_repeats_for_sets_a_sample_to_the_minimum_length():
    from paired_stats import repeats_for
    calls = []

    def sample(reps):
        calls.append(reps)
        return [0.010, 0.004, 0.003, 0.005][len(calls) - 1] * reps   # warm-up slow, then noisy
    # the least of the three single runs after the warm-up (3 ms) sets it: 30 ms / 3 ms
    assert repeats_for(sample, 0.030) == 10 and calls == [1, 1, 1, 1]
    assert repeats_for(lambda r: 1.0, 0.030) == 1                    # never below one
    assert repeats_for(lambda r: 0.0, 0.030, cap=64) == 64           # too fast to time: the cap


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity calls")
def test_compare_threads_per_core_ratio_is_two_threads_over_the_cores_mean(monkeypatch):
    # Scripted sample times by the calling thread's CPUs: core A runs the 1-thread work in 2 s,
    # core B (slower) in 3 s, and 2 threads take 1.2 s. The cores' mean speed is
    # (1/2 + 1/3) / 2 = 5/12 per s, the 2-thread speed 1/1.2, so the ratio is 2.0 whatever the
    # order of the round; the unpinned ratio would read 2/1.2 or 3/1.2.
    import compare_threads
    cpus = compare_threads.two_cpus()
    if cpus is None:
        pytest.skip("fewer than two CPUs allowed")
    allowed = os.sched_getaffinity(0)
    script = {frozenset({cpus[0]}): 2.0, frozenset({cpus[1]}): 3.0, frozenset(cpus): 1.2}
    ran = []

    def fake_timed(run):
        run()
        t = script[frozenset(os.sched_getaffinity(0))]
        return t, t, t
    monkeypatch.setattr(compare_threads, "timed", fake_timed)
    monkeypatch.setattr(compare_threads.time, "sleep", lambda s: None)
    samples = {t: (lambda: None, lambda t=t: ran.append(t)) for t in (1, 2)}
    fair, on_a, on_b = compare_threads.per_core_rounds(samples, 5, cpus)
    assert fair.ratios == pytest.approx([2.0] * 5)
    assert on_a == [2.0] * 5 and on_b == [3.0] * 5
    assert sorted(ran) == [1] * 10 + [2] * 5
    assert os.sched_getaffinity(0) == allowed            # the calling thread's CPUs restored
