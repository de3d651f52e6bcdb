"""User sampling: evaluate on m of the M test users, with statistical guarantees.

TORS24 Section 7 proposes to estimate a global top-K metric from a random subset
of m users instead of all M users, and to decide with hypothesis tests whether
one model beats another. This module implements that toolbox in the papers'
notation:

==============================  ===============================================
sample size, one proportion     :func:`sample_size_proportion`   (TORS24 eq 46-47)
sample size, a difference       :func:`sample_size_difference`   (TORS24 eq 51-52)
margin for a given m            :func:`margin_of_error`          (eq 46/52 inverted)
Bonferroni                      ``n_models`` / ``family`` arguments,
                                :func:`n_comparisons`, :func:`bonferroni_confidence`
Hoeffding                       :func:`hoeffding_bound`, :func:`hoeffding_sample_size`
                                (TORS24 eq 48)
CI of one proportion            :func:`proportion_confint`       (Wald, eq 46)
two-sample z-test               :func:`two_proportion_ztest`     (TORS24 eq 49-50)
CI of a difference              :func:`diff_confint`             (TORS24 eq 51)
t-tests for AP / NDCG values    :func:`ttest_paired`, :func:`ttest_unpaired`
power                           :func:`ztest_power`, :func:`sample_size_power`
multiple comparisons            :func:`adjust_pvalues`, :func:`compare_models`
simulation helpers              :func:`sample_users`, :func:`user_sampled_metric`,
                                :func:`simulate_proportion_coverage`,
                                :func:`simulate_difference_coverage`,
                                :func:`simulate_ztest_rejections`,
                                :func:`simulate_familywise_error`,
                                :func:`expected_abs_error_proportion`,
                                :func:`predicted_relative_error`,
                                :func:`exact_proportion_coverage`
==============================  ===============================================

Decisions where the paper is loose (each is tested):

* Sample sizes are rounded **up** (the smallest m meeting the margin). TORS24
  eq 47 prints "approx 1067" for a 3% margin; the unrounded value is 1067.07
  (1067.11 with z = 1.96), so the rounded-up sample size is 1068. Pass
  ``round_up=False`` for the raw value of the formula.
* ``z_{alpha/2}`` is the exact normal quantile (1.959964 for 95%), not 1.96.
* Bonferroni: a family of k simultaneous statements each made at confidence
  ``1 - (1 - confidence) / k``. For sample sizes of a single metric per model
  k = ``n_models`` (one CI per model); for differences k is the number of
  comparisons of the ``family``: ``"all-pairs"`` -> n(n-1)/2,
  ``"vs-best"`` -> n-1 (each model against one reference model). The n-1
  count is valid only when that reference is fixed before looking at the
  sample (the production model, or the winner of an earlier evaluation). When
  the "best" model is picked from the same sample, Bonferroni over n-1
  comparisons does **not** control the family-wise error (notebook 06 measures
  about 0.09 at alpha = 0.05 for 5 equal models): the comparisons against a
  data-selected best are a subset of all pairs, so :func:`compare_models`
  adjusts them over all n(n-1)/2 pairs.
* The z statistic of eq 49 uses the pooled proportion (the null hypothesis
  p1 = p2); the CI of eq 51 uses the unpooled (Wald) standard error, as printed.
  For unequal sample sizes eq 49 generalizes to
  ``sqrt(pbar qbar (1/m1 + 1/m2))`` (equal to ``sqrt(2 pbar qbar / m)`` when
  m1 = m2 = m).
* Optional finite-population correction ``population=M`` (sampling m of M users
  without replacement): the variance is multiplied by (M - m)/(M - 1), and the
  sample size becomes m0 / (1 + (m0 - 1)/M) (Cochran). The paper ignores it
  (M >> m); it matters when m/M is not small.

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, Section 7, eqs 45-52, Tables 8-9.
.. [Hoeffding63] W. Hoeffding. Probability inequalities for sums of bounded random
   variables. JASA 58 (1963), Theorems 2 and 4 (sampling without replacement).
.. [Cochran77] W. G. Cochran. Sampling Techniques, 3rd ed., 1977, Sec 4.4.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special, stats

from ._validation import check_float, check_int, check_probability
from .metrics import metric_values, parse_metric

__all__ = [
    "ALTERNATIVES",
    "FAMILIES",
    "z_critical",
    "n_comparisons",
    "bonferroni_confidence",
    "sample_size_proportion",
    "sample_size_difference",
    "margin_of_error",
    "hoeffding_bound",
    "hoeffding_sample_size",
    "proportion_confint",
    "diff_confint",
    "ZTestResult",
    "two_proportion_ztest",
    "TTestResult",
    "ttest_paired",
    "ttest_unpaired",
    "ztest_power",
    "sample_size_power",
    "adjust_pvalues",
    "compare_models",
    "sample_users",
    "user_sampled_metric",
    "expected_abs_error_proportion",
    "predicted_relative_error",
    "exact_proportion_coverage",
    "ADJUST_METHODS",
    "check_alternative",
    "check_family",
    "ztest_arrays",
]

ALTERNATIVES = ("two-sided", "less", "greater")
FAMILIES = ("all-pairs", "vs-best")
ADJUST_METHODS = ("none", "bonferroni", "holm")


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


def _check_confidence(confidence, name="confidence"):
    return check_float(confidence, name, 0.0, 1.0, low_open=True, high_open=True)


def _check_alpha(alpha):
    return check_float(alpha, "alpha", 0.0, 1.0, low_open=True, high_open=True)


def _check_population(population, m=None, m_name="m"):
    if population is None:
        return None
    M = check_int(population, "population", low=1)
    if m is not None and np.any(np.asarray(m) > M):
        raise ValueError(f"{m_name} must be <= population M={M}; got {m_name}={m}")
    return M


def _fpc(m, M):
    """Finite-population variance factor (M - m)/(M - 1) (1 when M is None)."""
    if M is None:
        return 1.0
    if M == 1:
        return 0.0
    return (M - np.asarray(m, dtype=float)) / (M - 1.0)


def _pvalue_from_z(z, alternative):
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
def z_critical(confidence=0.95, alternative="two-sided"):
    """Critical value of the standard normal for a confidence level.

    Two-sided: ``z_{alpha/2} = Phi^{-1}(1 - (1 - C)/2)``; one-sided:
    ``Phi^{-1}(C)``.

    Parameters
    ----------
    confidence : float in (0, 1)
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
    c = _check_confidence(confidence)
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


def bonferroni_confidence(confidence, n_tests):
    """Per-statement confidence ``1 - (1 - C)/k`` making k statements hold jointly
    with probability >= C (Bonferroni inequality).

    References
    ----------
    TORS24 Sec 7.2.

    Examples
    --------
    >>> bonferroni_confidence(0.95, 10)
    0.995
    """
    c = _check_confidence(confidence)
    k = check_int(n_tests, "n_tests", low=1)
    return 1.0 - (1.0 - c) / k


# ----------------------------------------------------------------------------
# sample sizes
# ----------------------------------------------------------------------------
def _finish_sample_size(m0, population, round_up):
    if population is not None:
        M = _check_population(population)
        m0 = m0 / (1.0 + (m0 - 1.0) / M) if m0 > 1 else m0
    if not round_up:
        return float(m0)
    # guard against 1067.0000000002 from floating point
    return int(math.ceil(m0 - 1e-9))


def sample_size_proportion(margin, confidence=0.95, p=0.5, *, n_models=1,
                           population=None, round_up=True):
    """Users needed to estimate a proportion (Recall@K) within a margin (eq 46).

    ``m = p (1 - p) (z_{alpha/2} / e)^2`` with ``e`` the margin of error; with
    ``n_models`` models estimated simultaneously the confidence of each interval is
    Bonferroni-adjusted to ``1 - (1 - C)/n_models``.

    Parameters
    ----------
    margin : float in (0, 1]
        Margin of error e (absolute, e.g. 0.03).
    confidence : float in (0, 1)
        Confidence level C (joint over the ``n_models`` intervals).
    p : float in [0, 1]
        Planning value of the proportion; 0.5 gives the largest (safe) size.
    n_models : int >= 1, keyword-only
        Number of simultaneous intervals (Bonferroni).
    population : int, optional, keyword-only
        Total number of users M; applies the finite-population correction
        ``m0 / (1 + (m0 - 1)/M)``.
    round_up : bool, keyword-only
        Return the smallest integer m (default) or the raw value of the formula.

    Returns
    -------
    int or float

    Notes
    -----
    TORS24 eq 47 prints ``approx 1067`` and ``approx 9604`` for margins 3% and
    1%; the raw values are 1067.07 and 9603.65 (with the exact quantile), so
    the rounded-up sample sizes are 1068 and 9604.

    References
    ----------
    TORS24 eqs 45-47; Bonferroni: TORS24 Sec 7.2; fpc: Cochran (1977) Sec 4.4.

    Examples
    --------
    >>> sample_size_proportion(0.03), sample_size_proportion(0.01)
    (1068, 9604)
    >>> round(sample_size_proportion(0.03, round_up=False), 2)
    1067.07
    >>> sample_size_proportion(0.03, n_models=5)
    1844
    """
    e = check_float(margin, "margin", 0.0, 1.0, low_open=True)
    c = bonferroni_confidence(confidence, n_models)
    p = check_probability(p, "p")
    m0 = p * (1.0 - p) * (z_critical(c) / e) ** 2
    return _finish_sample_size(m0, population, round_up)


def sample_size_difference(margin, confidence=0.95, p=0.5, *, n_models=2,
                           family="all-pairs", population=None, round_up=True):
    """Users per model needed to estimate a difference of two proportions within
    a margin (eq 52).

    ``m = 2 p_m (1 - p_m) (z_{alpha/2} / e)^2``, twice eq 46. With more than two
    models the confidence of each difference is Bonferroni-adjusted over the
    :func:`n_comparisons` of the ``family``.

    Parameters
    ----------
    margin : float in (0, 1]
        Margin of error e of ``p1_hat - p2_hat``.
    confidence : float in (0, 1)
        Joint confidence level over the family of comparisons.
    p : float in [0, 1]
        Planning value p_m of both proportions (0.5 is the safe choice).
    n_models : int >= 2, keyword-only
        Number of models compared (2 -> a single comparison).
    family : {'all-pairs', 'vs-best'}, keyword-only
        Comparisons made: every pair (n(n-1)/2) or every model vs a reference
        model fixed in advance (n-1). If the best model will be chosen from the
        same sample, plan with ``'all-pairs'``.
    population : int, optional, keyword-only
        Total number of users M (finite-population correction).
    round_up : bool, keyword-only
        Smallest integer m (default) or the raw value.

    Returns
    -------
    int or float

    References
    ----------
    TORS24 eqs 51-52; Bonferroni: TORS24 Sec 7.2.

    Examples
    --------
    >>> sample_size_difference(0.03), sample_size_difference(0.01)
    (2135, 19208)
    >>> sample_size_difference(0.03, n_models=5, family="vs-best")
    3466
    """
    e = check_float(margin, "margin", 0.0, 1.0, low_open=True)
    k = n_comparisons(n_models, family)
    c = bonferroni_confidence(confidence, k)
    p = check_probability(p, "p")
    m0 = 2.0 * p * (1.0 - p) * (z_critical(c) / e) ** 2
    return _finish_sample_size(m0, population, round_up)


def margin_of_error(m, confidence=0.95, p=0.5, *, difference=False, n_tests=1,
                    population=None):
    """Margin of error of a user-sampled proportion (eq 46 solved for e), or of a
    difference of two (eq 52) when ``difference=True``.

    ``e = z_{alpha/2} sqrt(c p (1-p) / m)``, c = 1 or 2, times ``sqrt((M-m)/(M-1))``
    when ``population=M`` is given. Vectorized over ``m``.

    References
    ----------
    TORS24 eqs 46, 52.

    Examples
    --------
    >>> round(float(margin_of_error(1068)), 4)
    0.0300
    >>> round(float(margin_of_error(2135, difference=True)), 4)
    0.0300
    """
    m_arr = np.asarray(m)
    if m_arr.size == 0 or np.any(~np.isfinite(m_arr.astype(float))) or np.any(m_arr < 1):
        raise ValueError(f"m must be >= 1; got {m!r}")
    M = _check_population(population, m)
    c = bonferroni_confidence(confidence, n_tests)
    p = check_probability(p, "p")
    factor = 2.0 if difference else 1.0
    return z_critical(c) * np.sqrt(factor * p * (1 - p) / m_arr * _fpc(m_arr, M))


# ----------------------------------------------------------------------------
# Hoeffding
# ----------------------------------------------------------------------------
def hoeffding_bound(m, t, *, value_range=1.0):
    """Two-sided Hoeffding bound on the deviation of a mean of m bounded values.

    ``Pr(|mean - E| >= t) <= min(1, 2 exp(-2 m t^2 / (b - a)^2))`` for values in
    an interval of length ``value_range`` = b - a (1 for AP@K, NDCG@K, Recall@K).
    It also holds for sampling users without replacement (Hoeffding 1963, Thm 4).
    Vectorized over ``m`` and ``t``.

    References
    ----------
    TORS24 eq 48 (and the Hoeffding bound after eq 17).

    Examples
    --------
    >>> float(hoeffding_bound(10_000, 0.02)) < 1e-3    # TORS24 after eq 48
    True
    >>> round(float(hoeffding_bound(30_000, 0.01)), 5)  # TORS24 after eq 17
    0.00496
    """
    m = np.asarray(m, dtype=float)
    t = np.asarray(t, dtype=float)
    if np.any(~np.isfinite(m)) or np.any(m < 1):
        raise ValueError(f"m must be >= 1; got {m}")
    if np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise ValueError(f"t must be > 0; got {t}")
    r = check_float(value_range, "value_range", 0.0, low_open=True)
    return np.minimum(1.0, 2.0 * np.exp(-2.0 * m * t ** 2 / r ** 2))


def hoeffding_sample_size(t, delta, *, value_range=1.0, n_tests=1):
    """Smallest m with Hoeffding bound ``2 exp(-2 m t^2 / range^2) <= delta``.

    ``m = ceil(range^2 log(2 k / delta) / (2 t^2))``; with ``n_tests = k`` the
    failure probability is split over k simultaneous estimates (Bonferroni).

    Parameters
    ----------
    t : float > 0
        Absolute error bound.
    delta : float in (0, 1)
        Allowed failure probability (1 - confidence).
    value_range : float > 0, keyword-only
        Length of the interval holding each user's value (1 for AP/NDCG).
    n_tests : int >= 1, keyword-only
        Number of simultaneous estimates (Bonferroni).

    References
    ----------
    TORS24 eq 48.

    Examples
    --------
    >>> hoeffding_sample_size(0.02, 0.001)
    9502
    >>> hoeffding_sample_size(0.03, 0.05)
    2050
    """
    t = check_float(t, "t", 0.0, low_open=True)
    delta = check_float(delta, "delta", 0.0, 1.0, low_open=True, high_open=True)
    r = check_float(value_range, "value_range", 0.0, low_open=True)
    k = check_int(n_tests, "n_tests", low=1)
    return int(math.ceil(r ** 2 * math.log(2.0 * k / delta) / (2.0 * t ** 2) - 1e-9))


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


def proportion_confint(count, nobs, confidence=0.95, *, alternative="two-sided",
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
    conf = _check_confidence(confidence)
    alternative = check_alternative(alternative)
    M = _check_population(population, n, "nobs")
    ph = c / n
    se = np.sqrt(ph * (1 - ph) / n * _fpc(n, M))
    lo, hi = _interval(ph, se, z_critical(conf), z_critical(conf, "greater"), alternative)
    lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
    if np.ndim(lo) == 0:
        return float(lo), float(hi)
    return lo, hi


def diff_confint(count1, nobs1, count2, nobs2, confidence=0.95, *,
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
    conf = _check_confidence(confidence)
    alternative = check_alternative(alternative)
    M = _check_population(population, np.maximum(n1, n2), "nobs")
    p1, p2 = c1 / n1, c2 / n2
    se = np.sqrt(p1 * (1 - p1) / n1 * _fpc(n1, M) + p2 * (1 - p2) / n2 * _fpc(n2, M))
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
    pv = _pvalue_from_z(z, alternative)
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
        conf = _check_confidence(confidence_level, "confidence_level")
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
# power
# ----------------------------------------------------------------------------
def ztest_power(p1, p2, m, alpha=0.05, *, alternative="two-sided", n_tests=1):
    """Power of the two-proportion z-test (eq 49) with m users per model.

    Normal approximation with the pooled variance under H0 and the unpooled one
    under H1 (both tails for two-sided tests); the test is run at level
    ``alpha / n_tests`` (Bonferroni). Equals statsmodels
    ``power_proportions_2indep(diff=p1-p2, prop2=p2, nobs1=m)``. Vectorized over m.

    References
    ----------
    TORS24 eqs 49-50; Fleiss, Levin, Paik, Statistical Methods for Rates and
    Proportions, 3rd ed., Sec 4.2.

    Examples
    --------
    >>> round(float(ztest_power(0.30, 0.35, 1000)), 4)
    0.6656
    """
    p1 = check_probability(p1, "p1")
    p2 = check_probability(p2, "p2")
    m = np.asarray(m, dtype=float)
    if m.size == 0 or np.any(~np.isfinite(m)) or np.any(m < 1):
        raise ValueError(f"m must be >= 1; got {m}")
    a = _check_alpha(alpha) / check_int(n_tests, "n_tests", low=1)
    alternative = check_alternative(alternative)
    diff = p1 - p2
    pbar = (p1 + p2) / 2.0
    sd0 = np.sqrt(2.0 * pbar * (1 - pbar) / m)
    sd1 = np.sqrt((p1 * (1 - p1) + p2 * (1 - p2)) / m)
    if np.any(sd1 == 0):
        raise ValueError(f"power undefined for p1={p1}, p2={p2} in {{0, 1}}")
    if alternative == "two-sided":
        c = stats.norm.isf(a / 2)
        return stats.norm.sf((c * sd0 - diff) / sd1) + stats.norm.cdf((-c * sd0 - diff) / sd1)
    c = stats.norm.isf(a)
    if alternative == "greater":
        return stats.norm.sf((c * sd0 - diff) / sd1)
    return stats.norm.cdf((-c * sd0 - diff) / sd1)


def sample_size_power(diff, power=0.8, alpha=0.05, p=0.5, *, alternative="two-sided",
                      n_tests=1):
    """Users per model so that the z-test detects a difference ``diff`` with the
    given power, for the conservative design of eq 52 (both proportions' variance
    p(1 - p), p = 0.5 the worst case).

    ``m = 2 p (1 - p) ((z_{a} + z_{beta}) / diff)^2`` with ``z_a`` the critical
    value at level ``alpha / n_tests`` (two-sided: alpha/2 per tail), refined to
    the smallest integer whose exact normal power (both tails) reaches ``power``.
    Equals ``ceil`` of statsmodels ``NormalIndPower().solve_power`` with
    ``effect_size = diff / sqrt(p (1 - p))``.

    References
    ----------
    TORS24 eq 52 (with a power requirement added).

    Examples
    --------
    >>> sample_size_power(0.05)
    1570
    """
    d = check_float(diff, "diff", 0.0, 1.0, low_open=True)
    pw = check_float(power, "power", 0.0, 1.0, low_open=True, high_open=True)
    a = _check_alpha(alpha) / check_int(n_tests, "n_tests", low=1)
    p = check_float(p, "p", 0.0, 1.0, low_open=True, high_open=True)
    alternative = check_alternative(alternative)
    za = stats.norm.isf(a / 2 if alternative == "two-sided" else a)
    zb = stats.norm.isf(1 - pw)
    var = 2.0 * p * (1 - p)

    def _pow(m):
        sd = math.sqrt(var / m)
        out = stats.norm.sf(za - d / sd)
        if alternative == "two-sided":
            out += stats.norm.cdf(-za - d / sd)
        return out

    m = max(1, int(math.ceil(var * ((za + zb) / d) ** 2 - 1e-9)))
    while m > 1 and _pow(m - 1) >= pw:
        m -= 1
    while _pow(m) < pw:
        m += 1
    return m


# ----------------------------------------------------------------------------
# multiple comparisons
# ----------------------------------------------------------------------------
def adjust_pvalues(pvalues, method="bonferroni", alpha=0.05):
    """Family-wise adjusted p-values and rejections (wraps statsmodels
    ``multipletests``).

    Parameters
    ----------
    pvalues : array_like
    method : {'none', 'bonferroni', 'holm'}
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
    if pv.ndim != 1 or pv.size == 0 or np.any(~(pv >= 0)) or np.any(pv > 1):
        raise ValueError(f"pvalues must be a non-empty 1-D array in [0, 1]; got {pvalues!r}")
    alpha = _check_alpha(alpha)
    if method not in ADJUST_METHODS:
        raise ValueError(f"method must be one of {ADJUST_METHODS}; got {method!r}")
    if method == "none":
        return pv <= alpha, pv.copy()
    from statsmodels.stats.multitest import multipletests  # lazy: slow to import

    reject, padj, _, _ = multipletests(pv, alpha=alpha, method=method)
    return reject, padj


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


def compare_models(per_user_values, alpha=0.05, method=("bonferroni", "holm"),
                   paired=True, *, family="all-pairs", reference=None,
                   alternative="two-sided", test="t"):
    """Which models differ, at family-wise level alpha, on a sample of users.

    Runs one test per comparison of the ``family`` and adjusts the p-values with
    each ``method`` (TORS24 Sec 7.2: "if we consider multiple comparisons at the
    same time, Bonferroni inequality again has to be used").

    Parameters
    ----------
    per_user_values : dict {model: 1-D array} or DataFrame (one column per model)
        Per-user metric values (AP@K, NDCG@K, or 0/1 Recall@K hits). Columns of a
        DataFrame (or equal-length arrays) are the same users when ``paired``.
    alpha : float in (0, 1)
        Family-wise error rate.
    method : str or sequence of {'none', 'bonferroni', 'holm'}
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
        One row per (method, comparison), columns ``method, family, model_a,
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
    >>> out = compare_models(vals, method="bonferroni")
    >>> print(out[["model_a", "model_b", "reject", "decision"]].to_string(index=False))
    model_a model_b  reject                  decision
          A       B    True                     A > B
          A       C   False no significant difference
          B       C    True                     B < C
    """
    values = _as_value_dict(per_user_values)
    alpha = _check_alpha(alpha)
    methods = (method,) if isinstance(method, str) else tuple(method)
    if not methods:
        raise ValueError("method must name at least one of ('none', 'bonferroni', 'holm')")
    for mth in methods:
        if mth not in ADJUST_METHODS:
            raise ValueError(f"method must be one of {ADJUST_METHODS}; got {mth!r}")
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
    # identical values (zero variance of the differences) give NaN in scipy: no evidence
    pv_clean = np.where(np.isnan(pv), 1.0, pv)
    out = []
    for mth in methods:
        reject, padj = adjust_pvalues(pv_clean, mth, alpha)
        level = 1 - alpha if mth == "none" else 1 - alpha / k_cmp
        for r, rej, pa in list(zip(rows, reject, padj))[:keep]:
            c = r["_crit"](level, alternative)
            lo, hi = _interval(np.float64(r["difference"]), r["_se"], c, c, alternative)
            if not rej:
                decision = "no significant difference"
            elif r["difference"] > 0:
                decision = f"{r['model_a']} > {r['model_b']}"
            else:
                decision = f"{r['model_a']} < {r['model_b']}"
            out.append(dict(method=mth, family=family,
                            **{k: v for k, v in r.items() if not k.startswith("_")},
                            pvalue_adjusted=float(pa), reject=bool(rej), ci_low=float(lo),
                            ci_high=float(hi), ci_level=level, n_comparisons=k_cmp,
                            alpha=alpha, test=test, decision=decision))
    return pd.DataFrame(out)


# ----------------------------------------------------------------------------
# simulation helpers (used by notebook 06 and the tests)
# ----------------------------------------------------------------------------
def sample_users(M, m, *, rng=None):
    """Indices of m of the M users drawn uniformly without replacement (sorted).

    References
    ----------
    TORS24 Sec 7 (a random subset of m of the M test users).

    Examples
    --------
    >>> sample_users(10, 3, rng=0)  # may vary
    array([5, 6, 9])
    """
    M = check_int(M, "M", low=1)
    m = check_int(m, "m", low=1)
    if m > M:
        raise ValueError(f"m must lie in 1..M={M}; got m={m}")
    rng = np.random.default_rng(rng)
    return np.sort(rng.choice(M, size=m, replace=False))


def user_sampled_metric(global_ranks, m, metric, Ks, *, repeats=1, replace=False, rng=None):
    """User-sampled estimates of a metric at several cutoffs.

    For each repeat, m of the M users are drawn (without replacement by default;
    ``replace=True`` draws i.i.d. users, a bootstrap-style sample) and the metric
    at each K is the mean of F_K(R_u) over them (TORS24 Sec 7, "unbiased average
    estimation" of Tables 8-9).

    Parameters
    ----------
    global_ranks : 1-D int array (M,)
        Global ranks R_u of the whole user population (values >= 1).
    m : int in 1..M
    metric : str
        Metric name without cutoff (``'recall'``, ``'ndcg'``, ``'ap'``, ...).
    Ks : int or sequence of int >= 1
    repeats : int, keyword-only
    replace : bool, keyword-only
        Draw users with replacement (then m may exceed M).
    rng : seed or Generator, keyword-only

    Returns
    -------
    ndarray, shape (repeats, len(Ks))

    Examples
    --------
    >>> est = user_sampled_metric(np.arange(1, 101), 100, "recall", [10, 50])
    >>> est.tolist()
    [[0.1, 0.5]]
    """
    R = np.asarray(global_ranks)
    if R.ndim != 1 or R.size == 0 or not np.issubdtype(R.dtype, np.integer) or R.min() < 1:
        raise ValueError("global_ranks must be a non-empty 1-D integer array of ranks >= 1")
    M = R.size
    m = check_int(m, "m", low=1)
    if m > M and not replace:
        raise ValueError(f"m must lie in 1..M={M}; got m={m}")
    repeats = check_int(repeats, "repeats", low=1)
    Ks = np.atleast_1d(np.asarray(Ks))
    Ks = np.array([check_int(k, "K", low=1) for k in Ks])
    name, _ = parse_metric(metric, int(Ks[0]))
    kmax = int(Ks.max())
    F = np.column_stack([metric_values(name, kmax, int(k)) for k in Ks])  # (kmax, nK)
    rng = np.random.default_rng(rng)
    capped = np.minimum(R, kmax + 1)
    H = np.empty((repeats, kmax))
    for i in range(repeats):
        idx = rng.integers(0, M, size=m) if replace else rng.choice(M, size=m, replace=False)
        H[i] = np.bincount(capped[idx], minlength=kmax + 2)[1:kmax + 1]
    return H @ F / m


def expected_abs_error_proportion(M, successes, m, *, replace=False):
    """Exact ``E|Q/m - Q_pop/M|`` for a proportion estimated from m of M users
    drawn without replacement (Q ~ Hypergeometric(M, successes, m)), or with
    replacement when ``replace=True`` (Q ~ Binomial(m, successes/M)).

    Vectorized over ``successes``. Used to predict the relative errors of
    user-sampled Recall@K (TORS24 Table 8) exactly.

    Examples
    --------
    >>> round(float(expected_abs_error_proportion(4, 2, 2)), 4)
    0.1667
    """
    M = check_int(M, "M", low=1)
    m = check_int(m, "m", low=1)
    if m > M and not replace:
        raise ValueError(f"m must lie in 1..M={M}; got m={m}")
    S = np.atleast_1d(np.asarray(successes))
    if np.any(S < 0) or np.any(S > M):
        raise ValueError(f"successes must lie in 0..M={M}; got {successes}")
    out = np.empty(S.shape, dtype=float)
    for i, s in enumerate(S.astype(int).ravel()):
        if replace:
            q = np.arange(m + 1)
            pmf = stats.binom.pmf(q, m, s / M)
        else:
            q, pmf = _hypergeom_pmf(M, s, m)
        out.flat[i] = float(pmf @ np.abs(q / m - s / M))
    return out if np.ndim(successes) else out[0]


def _hypergeom_pmf(M, s, m):
    """Support and pmf of the number of successes in m draws without replacement
    from M items holding s successes (log space, fast for M ~ 1e6)."""
    q = np.arange(max(0, m - (M - s)), min(m, s) + 1)
    logp = (_lchoose(s, q) + _lchoose(M - s, m - q) - _lchoose(M, m))
    return q, np.exp(logp)


def _lchoose(n, k):
    return special.gammaln(n + 1.0) - special.gammaln(k + 1.0) - special.gammaln(n - k + 1.0)


def predicted_relative_error(global_ranks, m, metric, Ks, *, replace=False):
    """Expected relative error ``E|T_hat_K - T_K| / T_K`` of a user-sampled metric.

    m of the M users are drawn without replacement (as :func:`user_sampled_metric`;
    ``replace=True``: with replacement, no finite-population factor).
    For 0/1 metrics (recall / hit ratio) the expectation is exact
    (:func:`expected_abs_error_proportion`); for other metrics (NDCG, AP) it is the
    normal approximation ``sqrt(2/pi) sd_K sqrt((M - m)/((M - 1) m)) / T_K`` with
    sd_K the population standard deviation of F_K(R_u). Cutoffs with T_K = 0 give
    NaN.

    Returns
    -------
    ndarray, shape (len(Ks),)

    References
    ----------
    TORS24 Tables 8-9 (average relative errors of user sampling); eq 46.

    Examples
    --------
    >>> R = np.repeat([1, 5, 100], [30, 20, 50])
    >>> predicted_relative_error(R, 100, "recall", [1, 10]).tolist()   # census
    [0.0, 0.0]
    """
    R = np.asarray(global_ranks)
    if R.ndim != 1 or R.size == 0 or not np.issubdtype(R.dtype, np.integer) or R.min() < 1:
        raise ValueError("global_ranks must be a non-empty 1-D integer array of ranks >= 1")
    M = R.size
    m = check_int(m, "m", low=1)
    if m > M and not replace:
        raise ValueError(f"m must lie in 1..M={M}; got m={m}")
    Ks = np.array([check_int(k, "K", low=1) for k in np.atleast_1d(np.asarray(Ks))])
    name, _ = parse_metric(metric, int(Ks[0]))
    kmax = int(Ks.max())
    counts = np.bincount(np.minimum(R, kmax + 1), minlength=kmax + 2)[1:kmax + 1].astype(float)
    F = np.column_stack([metric_values(name, kmax, int(k)) for k in Ks])  # (kmax, nK)
    mean = counts @ F / M
    binary = bool(np.all((F == 0) | (F == 1)))
    with np.errstate(divide="ignore", invalid="ignore"):
        if binary:
            hits = np.rint(counts @ F).astype(int)
            err = expected_abs_error_proportion(M, hits, m, replace=replace)
        else:
            var = np.maximum(counts @ F ** 2 / M - mean ** 2, 0.0)
            fpc = 1.0 if replace else _fpc(m, M)
            err = math.sqrt(2 / math.pi) * np.sqrt(var * fpc / m)
        return np.where(mean > 0, err / mean, np.nan)


def exact_proportion_coverage(M, successes, m, confidence=0.95, *, margin=None, fpc=True):
    """Exact coverage of the Wald interval (:func:`proportion_confint`) of a
    proportion estimated from m of M users drawn without replacement, and the
    exact probability that the estimate lies within ``margin`` of the truth.

    Sums the Hypergeometric(M, successes, m) pmf of the sample count over the
    outcomes whose interval holds p = successes / M.

    Returns
    -------
    dict
        ``coverage`` and, when ``margin`` is given, ``margin_prob``.

    References
    ----------
    TORS24 eqs 45-47.

    Examples
    --------
    >>> out = exact_proportion_coverage(100_000, 30_000, 1068, margin=0.03)
    >>> round(out["coverage"], 3), out["margin_prob"] > 0.95
    (0.95, True)
    """
    M = check_int(M, "M", low=1)
    s = check_int(successes, "successes", low=0, high=M)
    m = check_int(m, "m", low=1)
    if m > M:
        raise ValueError(f"m must lie in 1..M={M}; got m={m}")
    conf = _check_confidence(confidence)
    q, pmf = _hypergeom_pmf(M, s, m)
    lo, hi = proportion_confint(q, np.full(q.size, m), conf, population=M if fpc else None)
    p = s / M
    out = dict(coverage=float(pmf[(lo <= p) & (p <= hi)].sum()))
    if margin is not None:
        e = check_float(margin, "margin", 0.0, low_open=True)
        out["margin_prob"] = float(pmf[np.abs(q / m - p) <= e + 1e-12].sum())
    return out


