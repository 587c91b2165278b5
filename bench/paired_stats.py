"""Paired A/B ratios for benches on a shared machine.

A pair is one run of each side, back to back, the order alternating from pair to pair; its
ratio b/a cancels the load both runs saw (a drift of the machine's load moves both), and the
median of many pairs with a distribution-free interval says how far the figure can be
trusted. The interval for the median comes from order statistics: with n pairs, the ranks j
and n + 1 - j bound the median with probability 1 - 2 * P(Binomial(n, 1/2) < j), which holds
whatever the ratios' distribution (only assumed: pairs independent, and the median
of their distribution the quantity measured)."""
from __future__ import annotations

import math


def binomial_cdf_half(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2.0 ** n


def median_interval(values, confidence: float = 0.95):
    """(median, low, high, achieved confidence): the sample median and the widest-ranked
    order-statistic pair (x_(j), x_(n+1-j)) with coverage >= confidence. With too few
    values for that coverage the interval is the whole range and the coverage the range's
    (1 - 2 / 2^n)."""
    xs = sorted(float(v) for v in values)
    n = len(xs)
    if n == 0:
        raise ValueError("median_interval: no values")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"median_interval: confidence={confidence!r} must be in (0, 1)")
    mid = n // 2
    median = xs[mid] if n % 2 else 0.5 * (xs[mid - 1] + xs[mid])
    # largest j (1-based rank) whose interval [x_(j), x_(n+1-j)] still covers `confidence`
    j, cover = 1, 1.0 - 2.0 * binomial_cdf_half(0, n)
    while j + 1 <= (n + 1) // 2:
        c = 1.0 - 2.0 * binomial_cdf_half(j, n)
        if c < confidence:
            break
        j, cover = j + 1, c
    return median, xs[j - 1], xs[n - j], cover


class Paired:
    """Per-pair ratios side_b / side_a collected by `add(a, b)`; `summary()` formats the
    median ratio as a percentage change with its interval."""

    def __init__(self):
        self.a, self.b = [], []

    def add(self, a: float, b: float) -> None:
        if not a > 0 or not b >= 0:
            raise ValueError(f"Paired.add: times must be positive, got a={a!r}, b={b!r}")
        self.a.append(float(a))
        self.b.append(float(b))

    @property
    def ratios(self) -> list:
        return [b / a for a, b in zip(self.a, self.b)]

    def ratio(self, confidence: float = 0.95):
        return median_interval(self.ratios, confidence)

    @property
    def differences(self) -> list:
        return [b - a for a, b in zip(self.a, self.b)]

    def difference(self, confidence: float = 0.95):
        """median_interval of the per-pair differences b - a."""
        return median_interval(self.differences, confidence)

    def summary(self, confidence: float = 0.95) -> str:
        med, lo, hi, cover = self.ratio(confidence)
        return (f"{(med - 1) * 100:+6.1f}% [{(lo - 1) * 100:+.1f}, {(hi - 1) * 100:+.1f}] "
                f"({cover * 100:.0f}% interval, {len(self.a)} pairs)")


def repeats_for(sample, min_s: float, cap: int = 256) -> int:
    """Repeats per sample so that one sample lasts about min_s: a sample of a few milliseconds
    is mostly the noise of the clock and the scheduler. sample(reps) runs and returns seconds;
    it runs once to warm up (graphs built, pages touched), then the least of three single runs
    (the least a busy machine added) sets the count."""
    sample(1)
    once = max(min(sample(1) for _ in range(3)), 1e-6)
    return max(1, min(cap, int(math.ceil(min_s / once))))


def _cpu_jiffies():
    """(busy, total) clock ticks of every CPU since boot, from /proc/stat's first line; steal
    (a hypervisor running other guests) counts as busy. None off Linux."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    total = sum(v[:8])
    idle = v[3] + v[4]                  # idle, iowait
    return total - idle, total


def _own_cpu_s():
    """CPU seconds of this process, every thread, user and system."""
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class OthersLoad:
    """The share of the machine's CPUs that other processes kept busy between start() and
    stop(): every CPU's busy ticks minus this process's own CPU time, over the elapsed ticks
    of all CPUs. Ticks are 10 ms: over a stretch of a few hundred ms the figure is good to
    about 0.1; over less it is not worth much. None where /proc/stat cannot be read."""

    TICK_S = 0.01

    def start(self):
        self._j = _cpu_jiffies()
        self._own = _own_cpu_s()
        return self

    def stop(self):
        j = _cpu_jiffies()
        if self._j is None or j is None:
            return None
        own = _own_cpu_s() - self._own
        busy, total = j[0] - self._j[0], j[1] - self._j[1]
        if total <= 0:
            return 0.0
        return min(1.0, max(0.0, (busy * self.TICK_S - own) / (total * self.TICK_S)))
