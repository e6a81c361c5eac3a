"""Statistics of the timed rounds: summary figures, the speedup's bootstrap confidence interval and
the verdict. Stdlib (numpy for the bootstrap, imported when first used)."""

from __future__ import annotations

import math
from typing import Any


def percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    k = (len(sorted_vals) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    if lo == hi:
        return sorted_vals[lo]
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


def timing_stats(samples_us: list[float]) -> dict[str, Any]:
    s = sorted(samples_us)
    n = len(s)
    mean = sum(s) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in s) / (n - 1)) if n > 1 else 0.0
    return {
        "runs": n, "median_us": percentile(s, 0.5), "mean_us": mean, "min_us": s[0], "max_us": s[-1],
        "p10_us": percentile(s, 0.1), "p90_us": percentile(s, 0.9),
        "iqr_us": percentile(s, 0.75) - percentile(s, 0.25), "cv_pct": 100.0 * sd / mean if mean else 0.0,
    }


def bootstrap_ratio_ci(num: list[float], den: list[float], *, resamples: int = 300, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float, float]:
    """median(num)/median(den) and its bootstrap confidence interval (percentile method).

    Exact and cheap: the median of a resample of sorted data is the sorted data at the median of
    the resampled *indices* (the map index -> value is monotone), so each resample costs a partial
    sort of small integers instead of a gather and a float median."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a, b = np.sort(np.asarray(num, dtype=np.float64)), np.sort(np.asarray(den, dtype=np.float64))
    point = float(np.median(a) / np.median(b))

    def medians(s: Any) -> Any:
        n = len(s)
        idx = rng.integers(0, n, size=(resamples, n), dtype=np.int32)
        lo, hi = (n - 1) // 2, n // 2
        part = np.partition(idx, [lo, hi] if hi != lo else [lo], axis=1)
        return (s[part[:, lo]] + s[part[:, hi]]) / 2.0

    ratios = medians(a) / medians(b)
    lo, hi = np.quantile(ratios, [(1 - level) / 2, 1 - (1 - level) / 2])
    return point, float(lo), float(hi)


def verdict_for(ci_low: float, ci_high: float, margin: float) -> str:
    if ci_low > 1.0 + margin:
        return "faster"
    if ci_high < 1.0 - margin:
        return "slower"
    return "inconclusive"


def speedups(samples: dict[str, list[float]], seed: int, margin: float) -> dict[str, dict[str, Any]]:
    """Each baseline's speedup over the candidate (``reference`` -> ``eager``, ``reference_compile`` ->
    ``compile``), with its confidence interval and verdict."""
    speed: dict[str, dict[str, Any]] = {}
    for n in samples:
        if n == "candidate":
            continue
        point, lo, hi = bootstrap_ratio_ci(samples[n], samples["candidate"], seed=seed)
        speed[n.replace("reference_", "").replace("reference", "eager")] = {
            "speedup": point, "ci_low": lo, "ci_high": hi, "verdict": verdict_for(lo, hi, margin)}
    return speed
