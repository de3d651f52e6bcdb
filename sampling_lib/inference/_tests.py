"""Two-sample tests on a sample of users: the two-proportion z-test and the t-tests.

``two_proportion_ztest`` (TORS24 eqs 49-50, pooled standard error) with its
vectorized core ``ztest_arrays``, and the paired and Welch / Student t-tests
of per-user AP or NDCG values (``ttest_paired``, ``ttest_unpaired``), each
returning a frozen result with its confidence interval.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._validation import check_confidence_level
from ._proportions import check_alternative, check_counts, diff_confint, interval_from_se, pvalue_from_z

__all__ = [
    "ZTestResult",
    "ztest_arrays",
    "two_proportion_ztest",
    "TTestResult",
    "check_values",
    "ttest_paired",
    "ttest_unpaired",
]


# ----------------------------------------------------------------------------
# z-test
# ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ZTestResult:
    """Result of :func:`two_proportion_ztest`.

    Attributes
    ----------
    statistic : float
        z of eq 49 (pooled standard error).
    pvalue : float
    alternative : str
        Alternative hypothesis about ``p1 - p2`` (``'less'`` is eq 50's H_a).
    count1, nobs1, count2, nobs2 : int
    """

    statistic: float
    pvalue: float
    alternative: str
    count1: int
    nobs1: int
    count2: int
    nobs2: int

    @property
    def proportion1(self) -> float:
        return self.count1 / self.nobs1

    @property
    def proportion2(self) -> float:
        return self.count2 / self.nobs2

    @property
    def estimate(self) -> float:
        """p1_hat - p2_hat."""
        return self.proportion1 - self.proportion2

    def confidence_interval(self, confidence_level=0.95):
        """Wald interval of p1 - p2 (eq 51), one-sided for one-sided alternatives."""
        return diff_confint(self.count1, self.nobs1, self.count2, self.nobs2,
                            confidence_level, alternative=self.alternative)


def ztest_arrays(c1, n1, c2, n2, alternative):
    """Vectorized eq 49: pooled z and its p-value; 0/1 pooled proportions give
    z = 0, p = 1 (no variation, identical samples)."""
    p1, p2 = c1 / n1, c2 / n2
    pbar = (c1 + c2) / (n1 + n2)
    se = np.sqrt(pbar * (1 - pbar) * (1.0 / n1 + 1.0 / n2))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, (p1 - p2) / np.where(se > 0, se, 1.0), 0.0)
    pv = pvalue_from_z(z, alternative)
    return z, pv


def two_proportion_ztest(count1, nobs1, count2, nobs2, *, alternative="two-sided"):
    """Two-sample z-test for proportions (Recall@K of two models), eq 49-50.

    ``z = (p1_hat - p2_hat) / sqrt(pbar qbar (1/m1 + 1/m2))``, pbar the pooled
    proportion; for m1 = m2 = m this is eq 49, ``sqrt(2 pbar qbar / m)``.
    Equals statsmodels ``proportions_ztest(prop_var=False)``.

    Parameters
    ----------
    count1, nobs1 : int
        Hits (users with R_u <= K) and users of model 1.
    count2, nobs2 : int
        Same for model 2.
    alternative : {'two-sided', 'less', 'greater'}, keyword-only
        H_a about p1 - p2; eq 50 uses ``'less'`` (p1 - p2 < 0).

    Returns
    -------
    ZTestResult
        When the pooled proportion is 0 or 1 (all users miss, or all hit, in both
        samples) the difference is exactly 0 and we return z = 0, p = 1.

    Notes
    -----
    Eq 49 assumes two independent samples of users. When both models are
    evaluated on the *same* users, :func:`ttest_paired` on the 0/1 hits (or
    McNemar's test) uses the pairing and is usually more powerful.

    References
    ----------
    TORS24 eqs 49-50.

    Examples
    --------
    >>> res = two_proportion_ztest(300, 1000, 350, 1000, alternative="less")
    >>> round(res.statistic, 4), round(res.pvalue, 5)
    (-2.387, 0.00849)
    """
    c1, n1 = check_counts(count1, nobs1, "count1", "nobs1")
    c2, n2 = check_counts(count2, nobs2, "count2", "nobs2")
    if np.ndim(c1) or np.ndim(c2):
        raise ValueError("two_proportion_ztest takes scalar counts; "
                         "use simulate_ztest_rejections for arrays")
    alternative = check_alternative(alternative)
    z, pv = ztest_arrays(c1, n1, c2, n2, alternative)
    return ZTestResult(float(z), float(pv), alternative, int(c1), int(n1), int(c2), int(n2))


# ----------------------------------------------------------------------------
# t-tests
# ----------------------------------------------------------------------------
@dataclass(frozen=True)
class TTestResult:
    """Result of :func:`ttest_paired` / :func:`ttest_unpaired`.

    Attributes
    ----------
    statistic, pvalue, df : float
    estimate : float
        mean(x) - mean(y).
    standard_error : float
    alternative : str
    """

    statistic: float
    pvalue: float
    df: float
    estimate: float
    standard_error: float
    alternative: str

    def confidence_interval(self, confidence_level=0.95):
        """t interval of mean(x) - mean(y); one-sided for one-sided alternatives."""
        conf = check_confidence_level(confidence_level)
        t2 = stats.t.isf((1 - conf) / 2, self.df)
        t1 = stats.t.isf(1 - conf, self.df)
        lo, hi = interval_from_se(np.float64(self.estimate), self.standard_error, t2, t1,
                                  self.alternative)
        return float(lo), float(hi)


def check_values(x, name, min_size=2):
    a = np.asarray(x, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {a.shape}")
    if a.size < min_size:
        raise ValueError(f"{name} must hold at least {min_size} values; got {a.size}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite; got {int(np.sum(~np.isfinite(a)))} NaN/inf")
    return a


def ttest_paired(x, y, *, alternative="two-sided"):
    """Paired t-test of per-user metric values (AP@K, NDCG@K) of two models on the
    same users (wraps ``scipy.stats.ttest_rel``).

    References
    ----------
    TORS24 Sec 7.2 ("two-sample t-test" for AP and NDCG).

    Examples
    --------
    >>> res = ttest_paired([0.5, 1.0, 0.0, 0.25], [0.25, 0.5, 0.0, 0.0])
    >>> round(res.statistic, 4), round(res.pvalue, 4), res.df
    (2.4495, 0.0917, 3.0)
    """
    x = check_values(x, "x")
    y = check_values(y, "y")
    if x.size != y.size:
        raise ValueError(f"x and y must have the same length for a paired test; "
                         f"got {x.size} and {y.size}")
    alternative = check_alternative(alternative)
    res = stats.ttest_rel(x, y, alternative=alternative)
    d = x - y
    se = float(np.std(d, ddof=1) / np.sqrt(d.size))
    return TTestResult(float(res.statistic), float(res.pvalue), float(res.df),
                       float(d.mean()), se, alternative)


def ttest_unpaired(x, y, *, equal_var=False, alternative="two-sided"):
    """Two-sample t-test of per-user metric values on two independent user samples
    (wraps ``scipy.stats.ttest_ind``; Welch by default).

    References
    ----------
    TORS24 Sec 7.2.

    Examples
    --------
    >>> res = ttest_unpaired([0.5, 1.0, 0.0, 0.25], [0.25, 0.5, 0.0, 0.0])
    >>> round(res.statistic, 4), round(res.df, 3)
    (1.0215, 4.716)
    """
    x = check_values(x, "x")
    y = check_values(y, "y")
    alternative = check_alternative(alternative)
    res = stats.ttest_ind(x, y, equal_var=bool(equal_var), alternative=alternative)
    n1, n2 = x.size, y.size
    v1, v2 = np.var(x, ddof=1), np.var(y, ddof=1)
    if equal_var:
        sp2 = ((n1 - 1) * v1 + (n2 - 1) * v2) / (n1 + n2 - 2)
        se = np.sqrt(sp2 * (1 / n1 + 1 / n2))
    else:
        se = np.sqrt(v1 / n1 + v2 / n2)
    return TTestResult(float(res.statistic), float(res.pvalue), float(res.df),
                       float(x.mean() - y.mean()), float(se), alternative)
