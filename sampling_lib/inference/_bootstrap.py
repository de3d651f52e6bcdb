"""Percentile bootstrap intervals, their p-values and the pairwise rows of ``compare``.

``percentile_interval`` (Efron and Tibshirani 1993, ch. 13), the p-value of
the test that interval inverts (``percentile_pvalue``) and
``bootstrap_pairwise_rows``, the decision rows of
:func:`sampling_lib.correct.compare` built from bootstrap replicates with
:func:`~sampling_lib.inference.decide`.
"""
from __future__ import annotations

import numpy as np

from ._multiple import decide

__all__ = [
    "percentile_interval",
    "percentile_pvalue",
    "bootstrap_pairwise_rows",
]


def percentile_interval(samples, confidence_level):
    """Two-sided percentile bootstrap interval of ``samples`` along axis 0.

    References
    ----------
    Efron and Tibshirani (1993), An Introduction to the Bootstrap, ch. 13.

    Examples
    --------
    >>> lo, hi = percentile_interval(np.arange(101.0), 0.9)
    >>> float(lo), float(hi)
    (5.0, 95.0)
    """
    a = (1.0 - confidence_level) / 2.0
    return np.quantile(samples, a, axis=0), np.quantile(samples, 1.0 - a, axis=0)


def percentile_pvalue(samples, value=0.0):
    """Two-sided p-value of the percentile bootstrap: the test the interval inverts.

    The smallest ``1 - confidence_level`` at which :func:`percentile_interval`
    of ``samples`` (numpy's linear quantiles) excludes ``value``: with
    ``q(p)`` the interpolated p-quantile, ``p = min(1, 2 min(L, 1 - U))`` where
    ``L = max{p : q(p) <= value}`` and ``U = min{p : q(p) >= value}``. So the
    interval at level ``1 - a`` excludes ``value`` if and only if ``p < a``:
    a decision from this p-value and the interval never disagree (the
    achieved significance level of the percentile interval, Efron and
    Tibshirani 1993, Sec 15.4 and 16.4). ``p = 0`` when every sample lies on
    one side of ``value``: the interval excludes it at every level; p-values
    below about ``1 / len(samples)`` are not resolved by the replicates.

    Parameters
    ----------
    samples : array_like, shape (B,)
        Bootstrap replicates (B >= 2) of a statistic, e.g. a difference of two models' metrics.
    value : float
        The null value.

    Returns
    -------
    float

    References
    ----------
    Efron and Tibshirani (1993), An Introduction to the Bootstrap, Sec 13.3 (percentile interval),
    Sec 15.4 (achieved significance level).

    Examples
    --------
    >>> d = np.arange(1.0, 101.0) - 10.5          # 10 of 100 replicates below 0
    >>> p = percentile_pvalue(d)
    >>> round(p, 4)
    0.1919
    >>> [bool(percentile_interval(d, 1 - p + e)[0] > 0) for e in (1e-9, -1e-9)]
    [False, True]
    """
    s = np.sort(np.asarray(samples, dtype=float).ravel())
    if s.size < 2 or not np.isfinite(s).all():
        return float("nan")
    B = s.size

    def crossing(i):     # position p where the linear interpolation between s[i] and s[i+1] reaches value
        if i < 0:
            return 0.0
        if i >= B - 1:
            return 1.0
        gap = s[i + 1] - s[i]
        return (i + ((value - s[i]) / gap if gap > 0 else 0.0)) / (B - 1)

    low_end = crossing(int(np.searchsorted(s, value, side="right")) - 1)    # L: last p with q(p) <= value
    high_end = crossing(int(np.searchsorted(s, value, side="left")) - 1)    # U: first p with q(p) >= value
    return float(min(1.0, 2.0 * min(low_end, 1.0 - high_end)))


def bootstrap_pairwise_rows(metrics, point, boot, confidence_level, *, adjust, alpha, extra):
    """Rows of an all-pairs comparison of models from bootstrap replicates of their metrics.

    For every metric j and pair (a, b) of models (in the order of ``point``):
    the difference of the point estimates, its bootstrap standard error and
    z statistic, the percentile interval of the replicate differences at the
    level ``confidence_level`` (``1 - (1 - confidence_level) / k`` for k pairs
    under an adjustment) and the two-sided p-value of the test that interval
    inverts (:func:`percentile_pvalue`); then
    :func:`decide` over the k pairs of the metric. The one helper behind
    :func:`sampling_lib.correct.compare` (every input kind).

    Parameters
    ----------
    metrics : sequence of (name, kind, K)
        Parsed metrics (:func:`sampling_lib.metrics.parse_metrics`).
    point : dict model -> ndarray, shape (m,)
    boot : dict model -> ndarray, shape (B, m)
        Replicates on the same bootstrap draws (paired) or independent ones.
    confidence_level : float
    adjust : {'none', 'bonferroni', 'holm'}, keyword-only
    alpha : float, keyword-only
    extra : dict, keyword-only
        Constant columns added to every row (method, n_boot, ...).

    Returns
    -------
    list of dict

    References
    ----------
    TORS24 Sec 7.2; Efron and Tibshirani (1993), ch. 13.
    """
    names = list(point)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    k = len(pairs)
    level = confidence_level if adjust == "none" else 1.0 - (1.0 - confidence_level) / k
    rows = []
    for j, (full, _, K) in enumerate(metrics):
        block = []
        for a, b in pairs:
            diff = point[a][j] - point[b][j]
            db = boot[a][:, j] - boot[b][:, j]
            se = float(db.std(ddof=1))
            z = diff / se if se > 0 else (0.0 if diff == 0 else np.inf * np.sign(diff))
            pv = percentile_pvalue(db)          # the test the percentile interval inverts
            lo, hi = percentile_interval(db, level)
            block.append(dict(metric=full, K=K, model_a=a, model_b=b, estimate_a=point[a][j],
                              estimate_b=point[b][j], difference=diff, se=se, statistic=z,
                              pvalue=pv, ci_low=float(lo), ci_high=float(hi)))
        dec = decide([r["pvalue"] for r in block], [r["difference"] for r in block],
                     [r["model_a"] for r in block], [r["model_b"] for r in block],
                     adjust=adjust, alpha=alpha)
        for r, rj, pa, dc in zip(block, dec["reject"], dec["pvalue_adjusted"], dec["decision"]):
            rows.append({**r, "pvalue_adjusted": float(pa), "reject": bool(rj), "decision": dc,
                         "ci_level": level, "n_comparisons": k, "adjust": adjust, "alpha": alpha,
                         **extra})
    return rows
