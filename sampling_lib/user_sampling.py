"""User sampling: how many of the M test users to evaluate, and how far off a
sample of m users is.

TORS24 Section 7 proposes to estimate a global top-K metric from a random subset
of m users instead of all M users. This module holds the planning half of that
toolbox (the tests and intervals are :mod:`sampling_lib.inference`):

==============================  ===============================================
sample size, one proportion     :func:`sample_size_proportion`   (TORS24 eq 46-47)
sample size, a difference       :func:`sample_size_difference`   (TORS24 eq 51-52)
margin for a given m            :func:`margin_of_error`          (eq 46/52 inverted)
Bonferroni                      ``n_models`` / ``family`` arguments,
                                :func:`sampling_lib.inference.n_comparisons`,
                                :func:`bonferroni_confidence`
Hoeffding                       :func:`hoeffding_bound`, :func:`hoeffding_sample_size`
                                (TORS24 eq 48)
power of the eq-49 z-test       :func:`ztest_power`, :func:`sample_size_power`
errors of a user sample         :func:`sample_users`, :func:`user_sampled_metric`,
                                :func:`expected_abs_error_proportion`,
                                :func:`predicted_relative_error`,
                                :func:`exact_proportion_coverage`
==============================  ===============================================

Simulations of these quantities are in :mod:`sampling_lib.studies`
(``simulate_proportion_coverage``, ``simulate_difference_coverage``,
``simulate_ztest_rejections``, ``simulate_familywise_error``).

Decisions where the paper is loose (each is tested):

* Sample sizes are rounded **up** (the smallest m meeting the margin). TORS24
  eq 47 prints "approx 1067" for a 3% margin; the unrounded value is 1067.07
  (1067.11 with z = 1.96), so the rounded-up sample size is 1068. Pass
  ``round_up=False`` for the raw value of the formula.
* ``z_{alpha/2}`` is the exact normal quantile (1.959964 for 95%), not 1.96.
* Bonferroni: a family of k simultaneous statements each made at confidence
  level ``1 - (1 - confidence_level) / k``. For sample sizes of a single metric
  per model k = ``n_models`` (one CI per model); for differences k is the
  number of comparisons of the ``family``: ``"all-pairs"`` -> n(n-1)/2,
  ``"vs-best"`` -> n-1 (each model against one reference model, fixed before
  looking at the sample; if the best model will be picked from the same
  sample, plan with ``"all-pairs"``, see :mod:`sampling_lib.inference`).
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

import math

import numpy as np
from scipy import stats

from ._validation import check_confidence_level, check_float, check_int, check_probability, check_scheme
from .inference import (check_alternative, finite_population_factor, n_comparisons, proportion_confint,
                        z_critical)
from .kernels._laws import log_hypergeom_pmf
from .metrics import metric_values, parse_metric

__all__ = [
    "bonferroni_confidence",
    "sample_size_table",
    "sample_size_proportion",
    "sample_size_difference",
    "margin_of_error",
    "hoeffding_bound",
    "hoeffding_sample_size",
    "ztest_power",
    "sample_size_power",
    "sample_users",
    "user_sampled_metric",
    "expected_abs_error_proportion",
    "predicted_relative_error",
    "exact_proportion_coverage",
]


def _check_alpha(alpha):
    """Significance level of a test, in (0, 1)."""
    return check_float(alpha, "alpha", 0.0, 1.0, low_open=True, high_open=True)


# ----------------------------------------------------------------------------
# Bonferroni
# ----------------------------------------------------------------------------
def bonferroni_confidence(confidence_level, n_tests):
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
    c = check_confidence_level(confidence_level)
    k = check_int(n_tests, "n_tests", low=1)
    return 1.0 - (1.0 - c) / k



# ----------------------------------------------------------------------------
# sample sizes
# ----------------------------------------------------------------------------
def _finish_sample_size(m0, population, round_up):
    if population is not None:
        M = check_int(population, "population", low=1)
        m0 = m0 / (1.0 + (m0 - 1.0) / M) if m0 > 1 else m0
    if not round_up:
        return float(m0)
    # guard against 1067.0000000002 from floating point
    return int(math.ceil(m0 - 1e-9))


def sample_size_proportion(margin, confidence_level=0.95, p=0.5, *, n_models=1,
                           population=None, round_up=True):
    """Users needed to estimate a proportion (Recall@K) within a margin (eq 46).

    ``m = p (1 - p) (z_{alpha/2} / e)^2`` with ``e`` the margin of error; with
    ``n_models`` models estimated simultaneously the confidence of each interval is
    Bonferroni-adjusted to ``1 - (1 - C)/n_models``.

    Parameters
    ----------
    margin : float in (0, 1]
        Margin of error e (absolute, e.g. 0.03).
    confidence_level : float in (0, 1)
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
    c = bonferroni_confidence(confidence_level, n_models)
    p = check_probability(p, "p")
    m0 = p * (1.0 - p) * (z_critical(c) / e) ** 2
    return _finish_sample_size(m0, population, round_up)


def sample_size_difference(margin, confidence_level=0.95, p=0.5, *, n_models=2,
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
    confidence_level : float in (0, 1)
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
    c = bonferroni_confidence(confidence_level, k)
    p = check_probability(p, "p")
    m0 = 2.0 * p * (1.0 - p) * (z_critical(c) / e) ** 2
    return _finish_sample_size(m0, population, round_up)


def margin_of_error(m, confidence_level=0.95, p=0.5, *, difference=False, n_tests=1,
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
    c = bonferroni_confidence(confidence_level, n_tests)
    p = check_probability(p, "p")
    factor = 2.0 if difference else 1.0
    return z_critical(c) * np.sqrt(factor * p * (1 - p) / m_arr
                                  * finite_population_factor(m_arr, population))


def sample_size_table(margins, confidence_levels=(0.95,), n_models=(1,), p=0.5):
    """Users needed per model, for every margin, confidence level and number of models.

    One row per (margin, confidence level, number of models k): one interval
    per model (eq 46, Bonferroni over k), Hoeffding for any metric in [0, 1]
    (eq 48, Bonferroni over k) and, for k >= 2, a difference of two models
    (eq 52) with Bonferroni over all pairs and over the k - 1 comparisons with
    a reference fixed in advance.

    Returns
    -------
    pandas.DataFrame
        Columns ``margin, confidence_level, models, one CI per model (eq 46),
        Hoeffding, AP/NDCG (eq 48), difference, all pairs (eq 52), difference,
        vs reference (eq 52)`` (the last two NaN for one model).

    References
    ----------
    TORS24 eqs 46-48, 52, Sec 7.2.

    Examples
    --------
    >>> sample_size_table([0.03], n_models=[1, 5]).iloc[:, 3:].values.tolist()
    [[1068.0, 2050.0, nan, nan], [1844.0, 2944.0, 4378.0, 3466.0]]
    """
    import pandas as pd

    rows = []
    for e in margins:
        for c in confidence_levels:
            for k in n_models:
                row = {"margin": e, "confidence_level": c, "models": k,
                       "one CI per model (eq 46)": sample_size_proportion(e, c, p, n_models=k),
                       "Hoeffding, AP/NDCG (eq 48)": hoeffding_sample_size(e, 1 - c, n_tests=k),
                       "difference, all pairs (eq 52)": np.nan, "difference, vs reference (eq 52)": np.nan}
                if k >= 2:
                    row["difference, all pairs (eq 52)"] = sample_size_difference(e, c, p, n_models=k)
                    row["difference, vs reference (eq 52)"] = sample_size_difference(e, c, p, n_models=k,
                                                                                    family="vs-best")
                rows.append(row)
    return pd.DataFrame(rows)


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


def user_sampled_metric(global_ranks, m, metric, Ks, *, repeats=1, scheme="hypergeometric", rng=None):
    """User-sampled estimates of a metric at several cutoffs.

    For each repeat, m of the M users are drawn (without replacement by default;
    ``scheme="binomial"`` draws i.i.d. users, a bootstrap-style sample) and the metric
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
    scheme : {"hypergeometric", "binomial"}, keyword-only
        Draw users without (default) or with replacement (then m may exceed M).
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
    replace = check_scheme(scheme) == "binomial"
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


def expected_abs_error_proportion(M, successes, m, *, scheme="hypergeometric"):
    """Exact ``E|Q/m - Q_pop/M|`` for a proportion estimated from m of M users
    drawn without replacement (``scheme="hypergeometric"``: Q ~ Hypergeometric(M,
    successes, m)), or with replacement (``"binomial"``: Q ~ Binomial(m, successes/M)).

    Vectorized over ``successes``. Used to predict the relative errors of
    user-sampled Recall@K (TORS24 Table 8) exactly.

    Examples
    --------
    >>> round(float(expected_abs_error_proportion(4, 2, 2)), 4)
    0.1667
    """
    M = check_int(M, "M", low=1)
    m = check_int(m, "m", low=1)
    replace = check_scheme(scheme) == "binomial"
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
    return q, np.exp(log_hypergeom_pmf(q, s, M - s, m))


def predicted_relative_error(global_ranks, m, metric, Ks, *, scheme="hypergeometric"):
    """Expected relative error ``E|T_hat_K - T_K| / T_K`` of a user-sampled metric.

    m of the M users are drawn without replacement (as :func:`user_sampled_metric`;
    ``scheme="binomial"``: with replacement, no finite-population factor).
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
    replace = check_scheme(scheme) == "binomial"
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
            err = expected_abs_error_proportion(M, hits, m, scheme=scheme)
        else:
            var = np.maximum(counts @ F ** 2 / M - mean ** 2, 0.0)
            fpc = 1.0 if replace else finite_population_factor(m, M)
            err = math.sqrt(2 / math.pi) * np.sqrt(var * fpc / m)
        return np.where(mean > 0, err / mean, np.nan)


def exact_proportion_coverage(M, successes, m, confidence_level=0.95, *, margin=None, fpc=True):
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
    conf = check_confidence_level(confidence_level)
    q, pmf = _hypergeom_pmf(M, s, m)
    lo, hi = proportion_confint(q, np.full(q.size, m), conf, population=M if fpc else None)
    p = s / M
    out = dict(coverage=float(pmf[(lo <= p) & (p <= hi)].sum()))
    if margin is not None:
        e = check_float(margin, "margin", 0.0, low_open=True)
        out["margin_prob"] = float(pmf[np.abs(q / m - p) <= e + 1e-12].sum())
    return out
