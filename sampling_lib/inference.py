"""Confidence intervals, tests and model comparisons on a sample of users.

The inference half of TORS24 Section 7 (the planning half, sample sizes and
Hoeffding, is :mod:`sampling_lib.user_sampling`), in the papers' notation and
scipy's vocabulary (``confidence_level``, ``alternative``; ``alpha`` is the
significance level, i.e. the family-wise error rate, of a test):

==============================  ===============================================
critical value                  :func:`z_critical`
CI of one proportion            :func:`proportion_confint`       (Wald, eq 46)
CI of a difference              :func:`diff_confint`             (TORS24 eq 51)
two-sample z-test               :func:`two_proportion_ztest`     (TORS24 eq 49-50)
t-tests for AP / NDCG values    :func:`ttest_paired`, :func:`ttest_unpaired`
p-values and decisions          :func:`pvalue_from_z`, :func:`adjust_pvalues`,
                                :func:`decide` (the one helper behind
                                :func:`compare_models` and
                                :func:`sampling_lib.correct.compare`)
many models                     :func:`n_comparisons`, :func:`compare_models`
==============================  ===============================================

Decisions where the paper is loose (each is tested):

* ``z_{alpha/2}`` is the exact normal quantile (1.959964 for 95%), not 1.96.
* Bonferroni over the comparisons of a ``family``: ``"all-pairs"`` ->
  n(n-1)/2, ``"vs-best"`` -> n-1 (each model against one reference model).
  The n-1 count is valid only when that reference is fixed before looking at
  the sample. When the "best" model is picked from the same sample,
  Bonferroni over n-1 comparisons does **not** control the family-wise error
  (notebook 06 measures about 0.09 at alpha = 0.05 for 5 equal models): the
  comparisons against a data-selected best are a subset of all pairs, so
  :func:`compare_models` adjusts them over all n(n-1)/2 pairs.
* The z statistic of eq 49 uses the pooled proportion (the null hypothesis
  p1 = p2); the CI of eq 51 uses the unpooled (Wald) standard error, as printed.
  For unequal sample sizes eq 49 generalizes to
  ``sqrt(pbar qbar (1/m1 + 1/m2))`` (equal to ``sqrt(2 pbar qbar / m)`` when
  m1 = m2 = m).
* Optional finite-population correction ``population=M`` (m of M users drawn
  without replacement): the variance is multiplied by (M - m)/(M - 1)
  (:func:`finite_population_factor`). The paper ignores it (M >> m).

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, Section 7, eqs 45-52, Tables 8-9.
.. [Holm79] S. Holm. A simple sequentially rejective multiple test procedure.
   Scand. J. Statist. 6 (1979), 65-70.
.. [Cochran77] W. G. Cochran. Sampling Techniques, 3rd ed., 1977, Sec 4.4.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ._validation import check_confidence_level, check_float, check_int

__all__ = [
    "ALTERNATIVES",
    "percentile_interval",
    "percentile_pvalue",
    "bootstrap_pairwise_rows",
    "FAMILIES",
    "ADJUSTMENTS",
    "check_alternative",
    "check_family",
    "finite_population_factor",
    "pvalue_from_z",
    "z_critical",
    "n_comparisons",
    "proportion_confint",
    "diff_confint",
    "ZTestResult",
    "two_proportion_ztest",
    "ztest_arrays",
    "TTestResult",
    "ttest_paired",
    "ttest_unpaired",
    "adjust_pvalues",
    "decide",
    "compare_models",
]

ALTERNATIVES = ("two-sided", "less", "greater")
FAMILIES = ("all-pairs", "vs-best")
ADJUSTMENTS = ("none", "bonferroni", "holm")


# ----------------------------------------------------------------------------
# small checks
# ----------------------------------------------------------------------------
def check_alternative(alternative):
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}; got {alternative!r}")
    return alternative


def check_family(family):
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}; got {family!r}")
    return family


def _check_alpha(alpha):
    """Significance level (family-wise error rate) of a test, in (0, 1)."""
    return check_float(alpha, "alpha", 0.0, 1.0, low_open=True, high_open=True)




def finite_population_factor(m, population=None, *, name="m"):
    """Finite-population variance factor ``(M - m) / (M - 1)`` of a sample of m
    of M users drawn without replacement (1 when ``population`` is None).

    Checks ``population`` (an int M >= 1) and ``m <= M``. Vectorized over m.

    References
    ----------
    Cochran (1977), Sampling Techniques, Sec 2.6.

    Examples
    --------
    >>> finite_population_factor(100, 1000), finite_population_factor(100)
    (0.9009009009009009, 1.0)
    """
    if population is None:
        return 1.0
    M = check_int(population, "population", low=1)
    if np.any(np.asarray(m) > M):
        raise ValueError(f"{name} must be <= population M={M}; got {name}={m}")
    if M == 1:
        return 0.0
    out = (M - np.asarray(m, dtype=float)) / (M - 1.0)
    return float(out) if out.ndim == 0 else out


def pvalue_from_z(z, alternative="two-sided"):
    """P-value of a standard-normal statistic z (vectorized).

    ``'two-sided'``: ``2 (1 - Phi(|z|))``; ``'less'``: ``Phi(z)``;
    ``'greater'``: ``1 - Phi(z)``. The one p-value of every z statistic in the
    library (eq 49 z-tests, the bootstrap z of :func:`sampling_lib.correct.compare`,
    the MAP@k z-test of :mod:`sampling_lib.random_baseline`).

    References
    ----------
    TORS24 eq 50.

    Examples
    --------
    >>> round(float(pvalue_from_z(1.959964)), 4), round(float(pvalue_from_z(-2.0, "less")), 4)
    (0.05, 0.0228)
    """
    alternative = check_alternative(alternative)
    z = np.asarray(z, dtype=float)
    if alternative == "two-sided":
        return 2.0 * stats.norm.sf(np.abs(z))
    if alternative == "less":
        return stats.norm.cdf(z)
    return stats.norm.sf(z)


def _interval(estimate, se, crit_two, crit_one, alternative):
    """Two-sided or one-sided interval estimate +- crit * se."""
    if alternative == "two-sided":
        return estimate - crit_two * se, estimate + crit_two * se
    if alternative == "less":
        return -np.inf * np.ones_like(estimate), estimate + crit_one * se
    return estimate - crit_one * se, np.inf * np.ones_like(estimate)



# ----------------------------------------------------------------------------
# critical values, Bonferroni
# ----------------------------------------------------------------------------
def z_critical(confidence_level=0.95, alternative="two-sided"):
    """Critical value of the standard normal for a confidence level.

    Two-sided: ``z_{alpha/2} = Phi^{-1}(1 - (1 - C)/2)``; one-sided:
    ``Phi^{-1}(C)``.

    Parameters
    ----------
    confidence_level : float in (0, 1)
        Confidence level C.
    alternative : {'two-sided', 'less', 'greater'}

    Returns
    -------
    float

    References
    ----------
    TORS24 eq 46 (``z_{alpha/2}``).

    Examples
    --------
    >>> round(z_critical(0.95), 6)
    1.959964
    >>> round(z_critical(0.95, "greater"), 6)
    1.644854
    """
    c = check_confidence_level(confidence_level)
    alternative = check_alternative(alternative)
    if alternative == "two-sided":
        return float(stats.norm.isf((1.0 - c) / 2.0))
    return float(stats.norm.isf(1.0 - c))


def n_comparisons(n_models, family="all-pairs"):
    """Number of pairwise comparisons among ``n_models`` models.

    Parameters
    ----------
    n_models : int >= 2
    family : {'all-pairs', 'vs-best'}
        ``'all-pairs'``: every pair, n(n-1)/2 comparisons; ``'vs-best'``: each
        other model against one reference (best) model, n-1 comparisons --
        valid for Bonferroni only when the reference is fixed in advance (see
        the module notes).

    Returns
    -------
    int

    References
    ----------
    TORS24 Sec 7.2 (Bonferroni over the comparisons of several models).

    Examples
    --------
    >>> n_comparisons(5), n_comparisons(5, "vs-best")
    (10, 4)
    """
    n = check_int(n_models, "n_models", low=2)
    family = check_family(family)
    return n * (n - 1) // 2 if family == "all-pairs" else n - 1



# ----------------------------------------------------------------------------
# confidence intervals
# ----------------------------------------------------------------------------
def _counts(count, nobs, cname, nname):
    c = np.asarray(count)
    n = np.asarray(nobs)
    for arr, nm in ((c, cname), (n, nname)):
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
            raise TypeError(f"{nm} must be numeric; got dtype {arr.dtype}")
        if np.any(~np.isfinite(arr)):
            raise ValueError(f"{nm} must be finite; got {arr}")
        if np.any(arr != np.round(arr)):
            raise ValueError(f"{nm} must hold whole numbers (counts of users); got {arr}")
    if np.any(n < 1):
        raise ValueError(f"{nname} must be >= 1; got {nobs}")
    if np.any(c < 0) or np.any(c > n):
        raise ValueError(f"{cname} must lie in 0..{nname}; got {cname}={count}, {nname}={nobs}")
    return c.astype(float), n.astype(float)


def proportion_confint(count, nobs, confidence_level=0.95, *, alternative="two-sided",
                       population=None):
    """Wald (normal) confidence interval of a user-sampled proportion.

    ``p_hat +- z_{alpha/2} sqrt(p_hat (1 - p_hat) / m)`` (the interval behind
    eq 46), times ``sqrt((M - m)/(M - 1))`` with ``population=M``. Clipped to
    [0, 1] as statsmodels ``proportion_confint(method='normal')``; one-sided
    alternatives give ``(0, upper)`` ('less') or ``(lower, 1)`` ('greater').
    Vectorized over ``count`` (and ``nobs``).

    Returns
    -------
    (low, high) : floats or arrays

    References
    ----------
    TORS24 eq 46.

    Examples
    --------
    >>> lo, hi = proportion_confint(300, 1000)
    >>> round(float(lo), 4), round(float(hi), 4)
    (0.2716, 0.3284)
    """
    c, n = _counts(count, nobs, "count", "nobs")
    conf = check_confidence_level(confidence_level)
    alternative = check_alternative(alternative)
    ph = c / n
    se = np.sqrt(ph * (1 - ph) / n * finite_population_factor(n, population, name="nobs"))
    lo, hi = _interval(ph, se, z_critical(conf), z_critical(conf, "greater"), alternative)
    lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
    if np.ndim(lo) == 0:
        return float(lo), float(hi)
    return lo, hi


def diff_confint(count1, nobs1, count2, nobs2, confidence_level=0.95, *,
                 alternative="two-sided", population=None):
    """Wald confidence interval of ``p1 - p2`` for two independent samples (eq 51).

    ``(p1_hat - p2_hat) +- z_{alpha/2} sqrt(p1_hat q1_hat / m1 + p2_hat q2_hat / m2)``.
    Equals statsmodels ``confint_proportions_2indep(method='wald', compare='diff')``.
    One-sided alternatives give a one-sided bound (``'less'``: upper bound,
    ``'greater'``: lower bound). With ``population=M`` each variance term gets the
    finite-population factor (M - m_i)/(M - 1) (each model's users are a
    without-replacement sample of the same M users). Vectorized.

    References
    ----------
    TORS24 eq 51.

    Examples
    --------
    >>> lo, hi = diff_confint(350, 1000, 300, 1000)
    >>> round(lo, 4), round(hi, 4)
    (0.009, 0.091)
    """
    c1, n1 = _counts(count1, nobs1, "count1", "nobs1")
    c2, n2 = _counts(count2, nobs2, "count2", "nobs2")
    conf = check_confidence_level(confidence_level)
    alternative = check_alternative(alternative)
    p1, p2 = c1 / n1, c2 / n2
    se = np.sqrt(p1 * (1 - p1) / n1 * finite_population_factor(n1, population, name="nobs1")
                 + p2 * (1 - p2) / n2 * finite_population_factor(n2, population, name="nobs2"))
    lo, hi = _interval(p1 - p2, se, z_critical(conf), z_critical(conf, "greater"), alternative)
    if np.ndim(lo) == 0:
        return float(lo), float(hi)
    return lo, hi


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
    c1, n1 = _counts(count1, nobs1, "count1", "nobs1")
    c2, n2 = _counts(count2, nobs2, "count2", "nobs2")
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
        lo, hi = _interval(np.float64(self.estimate), self.standard_error, t2, t1,
                           self.alternative)
        return float(lo), float(hi)


def _values(x, name, min_size=2):
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
    x = _values(x, "x")
    y = _values(y, "y")
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
    x = _values(x, "x")
    y = _values(y, "y")
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


# ----------------------------------------------------------------------------
# multiple comparisons
# ----------------------------------------------------------------------------
def adjust_pvalues(pvalues, adjust="bonferroni", alpha=0.05):
    """Family-wise adjusted p-values and rejections (Bonferroni or Holm).

    Vectorized: a 2-D array holds one family per row (the adjustment runs
    along the last axis). Rejections are made as statsmodels ``multipletests``
    makes them (``p <= alpha / k`` for Bonferroni; the Holm step-down
    ``p_(i) <= alpha / (k - i + 1)`` until the first failure); adjusted
    p-values are ``min(1, k p)`` and, for Holm, the running maximum of
    ``(k - i + 1) p_(i)`` over the sorted p-values.

    Parameters
    ----------
    pvalues : array_like, shape (k,) or (families, k)
    adjust : {'none', 'bonferroni', 'holm'}
    alpha : float in (0, 1)
        Family-wise error rate.

    Returns
    -------
    reject : ndarray of bool
    pvalues_adjusted : ndarray

    References
    ----------
    TORS24 Sec 7.2 (Bonferroni); Holm (1979), Scand. J. Statist. 6:65-70.

    Examples
    --------
    >>> reject, padj = adjust_pvalues([0.01, 0.02, 0.04], "holm")
    >>> reject.tolist(), padj.round(2).tolist()
    ([True, True, True], [0.03, 0.04, 0.04])
    """
    pv = np.asarray(pvalues, dtype=float)
    if pv.ndim not in (1, 2) or pv.size == 0 or np.any(~(pv >= 0)) or np.any(pv > 1):
        raise ValueError(f"pvalues must be a non-empty 1-D or 2-D array in [0, 1]; got {pvalues!r}")
    alpha = _check_alpha(alpha)
    if adjust not in ADJUSTMENTS:
        raise ValueError(f"adjust must be one of {ADJUSTMENTS}; got {adjust!r}")
    k = pv.shape[-1]
    if adjust == "none":
        return pv <= alpha, pv.copy()
    if adjust == "bonferroni":
        return pv <= alpha / k, np.minimum(pv * k, 1.0)
    order = np.argsort(pv, axis=-1, kind="stable")
    ps = np.take_along_axis(pv, order, axis=-1)
    steps = np.arange(k, 0, -1)                                 # k - i + 1 for i = 1..k
    ok = np.cumprod(ps <= alpha / steps, axis=-1).astype(bool)  # step-down: stop at the first failure
    adj = np.minimum(np.maximum.accumulate(ps * steps, axis=-1), 1.0)
    reject, padj = np.empty_like(ok), np.empty_like(adj)
    np.put_along_axis(reject, order, ok, axis=-1)
    np.put_along_axis(padj, order, adj, axis=-1)
    return reject, padj


def decide(pvalues, differences, model_a, model_b, *, adjust="holm", alpha=0.05):
    """Adjusted p-values, rejections and decisions for one family of comparisons.

    The one helper behind :func:`compare_models` and
    :func:`sampling_lib.correct.compare`: the p-values of the family are
    adjusted (:func:`adjust_pvalues`; a NaN p-value, from a comparison without
    any variation, counts as 1) and every comparison gets a decision,
    ``"A > B"`` or ``"A < B"`` (by the sign of ``differences``) when it is
    rejected, else ``"no significant difference"``.

    Parameters
    ----------
    pvalues, differences : array_like, shape (k,)
    model_a, model_b : sequence of str, length k
    adjust : {'none', 'bonferroni', 'holm'}, keyword-only
    alpha : float in (0, 1), keyword-only
        Family-wise error rate.

    Returns
    -------
    dict
        ``pvalue_adjusted`` (ndarray), ``reject`` (ndarray of bool) and
        ``decision`` (list of str).

    References
    ----------
    TORS24 Sec 7.2.

    Examples
    --------
    >>> d = decide([0.001, 0.3], [0.2, -0.1], ["A", "A"], ["B", "C"], adjust="bonferroni")
    >>> d["decision"]
    ['A > B', 'no significant difference']
    """
    pv = np.asarray(pvalues, dtype=float)
    diff = np.asarray(differences, dtype=float)
    if pv.ndim != 1 or diff.shape != pv.shape or len(model_a) != pv.size or len(model_b) != pv.size:
        raise ValueError(f"pvalues, differences, model_a and model_b must have the same length; got "
                         f"{pv.size}, {diff.size}, {len(model_a)}, {len(model_b)}")
    reject, padj = adjust_pvalues(np.where(np.isnan(pv), 1.0, pv), adjust, alpha)
    decision = [("no significant difference" if not rj else f"{a} > {b}" if d > 0 else f"{a} < {b}")
                for rj, d, a, b in zip(reject, diff, model_a, model_b)]
    return dict(pvalue_adjusted=padj, reject=reject, decision=decision)


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


def _as_value_dict(per_user_values):
    if isinstance(per_user_values, pd.DataFrame):
        d = {str(c): per_user_values[c].to_numpy(dtype=float) for c in per_user_values.columns}
    elif isinstance(per_user_values, dict):
        d = {str(k): np.asarray(v, dtype=float) for k, v in per_user_values.items()}
    else:
        raise TypeError("per_user_values must be a dict {model: values} or a DataFrame "
                        f"with one column per model; got {type(per_user_values).__name__}")
    if len(d) < 2:
        raise ValueError(f"per_user_values must hold at least 2 models; got {len(d)}")
    for k, v in d.items():
        _values(v, f"per_user_values[{k!r}]")
    return d


def compare_models(per_user_values, alpha=0.05, adjust=("bonferroni", "holm"),
                   paired=True, *, family="all-pairs", reference=None,
                   alternative="two-sided", test="t"):
    """Which models differ, at family-wise level alpha, on a sample of users.

    Runs one test per comparison of the ``family`` and adjusts the p-values with
    each ``adjust`` method (TORS24 Sec 7.2: "if we consider multiple comparisons at the
    same time, Bonferroni inequality again has to be used").

    Parameters
    ----------
    per_user_values : dict {model: 1-D array} or DataFrame (one column per model)
        Per-user metric values (AP@K, NDCG@K, or 0/1 Recall@K hits). Columns of a
        DataFrame (or equal-length arrays) are the same users when ``paired``.
    alpha : float in (0, 1)
        Family-wise error rate.
    adjust : str or sequence of {'none', 'bonferroni', 'holm'}
        Multiple-comparison adjustment(s) (:func:`adjust_pvalues`).
    paired : bool
        True: :func:`ttest_paired` (same users for all models); False:
        :func:`ttest_unpaired` (Welch) or, with ``test='z'``, eq 49.
    family : {'all-pairs', 'vs-best'}, keyword-only
        All n(n-1)/2 pairs (model_a before model_b in input order), or every model
        against one model (model_a): the ``reference`` if given, else the model
        with the highest mean. A reference fixed in advance gives a family of
        n-1 comparisons. A best model picked from the same data does not: its
        comparisons are then tested and adjusted as part of all n(n-1)/2 pairs
        (Bonferroni or Holm over all pairs, rows of the best kept), which keeps
        the family-wise error <= alpha; ``n_comparisons`` reports the size of
        the family adjusted over.
    reference : str, optional, keyword-only
        Model fixed in advance for ``family='vs-best'``.
    alternative : {'two-sided', 'less', 'greater'}, keyword-only
        About mean_a - mean_b.
    test : {'t', 'z'}, keyword-only
        't' for t-tests; 'z' for the two-proportion z-test of eq 49 (0/1 values,
        unpaired only).

    Returns
    -------
    pandas.DataFrame
        One row per (adjustment, comparison), columns ``adjust, family, model_a,
        model_b, n_a, n_b, mean_a, mean_b, difference, statistic, pvalue,
        pvalue_adjusted, reject, ci_low, ci_high, ci_level, n_comparisons, alpha,
        test, decision``. ``ci_*`` is the interval of mean_a - mean_b at the
        Bonferroni level ``1 - alpha/k`` (simultaneous over the family; also
        given on Holm rows) or ``1 - alpha`` for ``'none'``.

    References
    ----------
    TORS24 Sec 7.2, eqs 49-51.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> vals = {"A": rng.random(500), "B": rng.random(500) * 0.8, "C": rng.random(500)}
    >>> out = compare_models(vals, adjust="bonferroni")
    >>> print(out[["model_a", "model_b", "reject", "decision"]].to_string(index=False))
    model_a model_b  reject                  decision
          A       B    True                     A > B
          A       C   False no significant difference
          B       C    True                     B < C
    """
    values = _as_value_dict(per_user_values)
    alpha = _check_alpha(alpha)
    adjustments = (adjust,) if isinstance(adjust, str) else tuple(adjust)
    if not adjustments:
        raise ValueError(f"adjust must name at least one of {ADJUSTMENTS}")
    for adj in adjustments:
        if adj not in ADJUSTMENTS:
            raise ValueError(f"adjust must be one of {ADJUSTMENTS}; got {adj!r}")
    family = check_family(family)
    alternative = check_alternative(alternative)
    if test not in ("t", "z"):
        raise ValueError(f"test must be 't' or 'z'; got {test!r}")
    names = list(values)
    if paired:
        sizes = {k: v.size for k, v in values.items()}
        if len(set(sizes.values())) != 1:
            raise ValueError(f"paired=True needs the same users for every model; got sizes {sizes}")
        if test == "z":
            raise ValueError("test='z' (eq 49) assumes independent samples; use paired=False "
                             "or test='t' for paired 0/1 values")
    if test == "z":
        for k, v in values.items():
            if not np.all((v == 0) | (v == 1)):
                raise ValueError(f"test='z' needs 0/1 values (Recall@K hits); "
                                 f"per_user_values[{k!r}] has other values")
    means = {k: float(v.mean()) for k, v in values.items()}
    if reference is not None:
        if family != "vs-best":
            raise ValueError("reference is only used with family='vs-best'")
        if str(reference) not in values:
            raise ValueError(f"reference must be one of {names}; got {reference!r}")
        reference = str(reference)
    keep = None
    if family == "vs-best" and reference is not None:
        pairs = [(reference, k) for k in names if k != reference]
    elif family == "vs-best":
        # data-selected best: adjust over all pairs, report the best's rows
        best = max(names, key=lambda k: means[k])
        pairs = [(best, k) for k in names if k != best]
        pairs += [(a, b) for a, b in itertools.combinations(names, 2) if best not in (a, b)]
        keep = len(names) - 1
    else:
        pairs = list(itertools.combinations(names, 2))
    k_cmp = len(pairs)

    rows = []
    for a, b in pairs:
        x, y = values[a], values[b]
        if test == "z":
            res = two_proportion_ztest(int(x.sum()), x.size, int(y.sum()), y.size,
                                       alternative=alternative)
            est = res.estimate
            se = math.sqrt(res.proportion1 * (1 - res.proportion1) / x.size
                           + res.proportion2 * (1 - res.proportion2) / y.size)
            crit = lambda conf, alt: z_critical(conf, alt)  # noqa: E731
        else:
            res = ttest_paired(x, y, alternative=alternative) if paired else \
                ttest_unpaired(x, y, alternative=alternative)
            est, se, df = res.estimate, res.standard_error, res.df
            crit = lambda conf, alt, df=df: float(  # noqa: E731
                stats.t.isf((1 - conf) / 2 if alt == "two-sided" else 1 - conf, df))
        rows.append(dict(model_a=a, model_b=b, n_a=x.size, n_b=y.size, mean_a=means[a],
                         mean_b=means[b], difference=est, statistic=res.statistic,
                         pvalue=res.pvalue, _se=se, _crit=crit))
    pv = np.array([r["pvalue"] for r in rows])
    out = []
    for adj in adjustments:
        # identical values (zero variance of the differences) give NaN in scipy: no evidence
        dec = decide(pv, [r["difference"] for r in rows], [r["model_a"] for r in rows],
                     [r["model_b"] for r in rows], adjust=adj, alpha=alpha)
        level = 1 - alpha if adj == "none" else 1 - alpha / k_cmp
        for i, r in enumerate(rows[:keep]):
            c = r["_crit"](level, alternative)
            lo, hi = _interval(np.float64(r["difference"]), r["_se"], c, c, alternative)
            out.append(dict(adjust=adj, family=family,
                            **{k: v for k, v in r.items() if not k.startswith("_")},
                            pvalue_adjusted=float(dec["pvalue_adjusted"][i]),
                            reject=bool(dec["reject"][i]), ci_low=float(lo), ci_high=float(hi),
                            ci_level=level, n_comparisons=k_cmp, alpha=alpha, test=test,
                            decision=dec["decision"][i]))
    return pd.DataFrame(out)
