"""Small, dependency-free statistics for pass rates and rewards."""

from __future__ import annotations

import math
from statistics import NormalDist


def z_for(confidence: float) -> float:
    """Two-sided normal quantile: 0.95 -> 1.96."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when there are no trials."""
    if trials <= 0:
        return (0.0, 1.0)
    z = z_for(confidence)
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


class RunningMean:
    """Mean and standard error from running sums: constant memory at any N."""

    __slots__ = ("count", "total", "total_sq")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.total_sq = 0.0

    def add(self, value: float, sign: int = 1) -> None:
        """Add ``value`` (``sign`` -1: take it out again; the sums are exact for it)."""
        self.count += sign
        self.total += sign * value
        self.total_sq += sign * value * value

    def absorb(self, other: RunningMean) -> None:
        """Add another mean's values (sums add: the merged mean is exact)."""
        self.count += other.count
        self.total += other.total
        self.total_sq += other.total_sq

    def __repr__(self) -> str:
        return f"RunningMean(count={self.count}, total={self.total}, total_sq={self.total_sq})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunningMean):
            return NotImplemented
        return (self.count, self.total, self.total_sq) == (other.count, other.total, other.total_sq)

    __hash__ = None  # type: ignore[assignment]

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    @property
    def stderr(self) -> float | None:
        if self.count < 2:
            return None
        mean = self.total / self.count
        var = max(0.0, (self.total_sq - self.count * mean * mean) / (self.count - 1))
        return math.sqrt(var / self.count)
