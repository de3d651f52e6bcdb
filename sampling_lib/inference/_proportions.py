"""The normal approximation for proportions: checks, critical values, p-values and confidence intervals.

The argument checks (``check_alternative``, ``check_family``), the
finite-population factor, ``pvalue_from_z``, ``z_critical``, the Bonferroni
count ``n_comparisons`` and the Wald intervals of one proportion (eq 46) and of
a difference (TORS24 eq 51); ``interval_from_se`` and ``check_counts`` are
shared with the tests of :mod:`sampling_lib.inference._tests`.
"""
from __future__ import annotations

import numpy as np
from scipy import stats

from .._validation import check_confidence_level, check_int

__all__ = [
    "ALTERNATIVES",
    "FAMILIES",
    "check_alternative",
    "check_family",
    "finite_population_factor",
    "pvalue_from_z",
    "interval_from_se",
    "z_critical",
    "n_comparisons",
    "check_counts",
    "proportion_confint",
    "diff_confint",
]

ALTERNATIVES = ("two-sided", "less", "greater")
FAMILIES = ("all-pairs", "vs-best")


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


def interval_from_se(estimate, se, crit_two, crit_one, alternative):
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
def check_counts(count, nobs, cname, nname):
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
    c, n = check_counts(count, nobs, "count", "nobs")
    conf = check_confidence_level(confidence_level)
    alternative = check_alternative(alternative)
    ph = c / n
    se = np.sqrt(ph * (1 - ph) / n * finite_population_factor(n, population, name="nobs"))
    lo, hi = interval_from_se(ph, se, z_critical(conf), z_critical(conf, "greater"), alternative)
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
    c1, n1 = check_counts(count1, nobs1, "count1", "nobs1")
    c2, n2 = check_counts(count2, nobs2, "count2", "nobs2")
    conf = check_confidence_level(confidence_level)
    alternative = check_alternative(alternative)
    p1, p2 = c1 / n1, c2 / n2
    se = np.sqrt(p1 * (1 - p1) / n1 * finite_population_factor(n1, population, name="nobs1")
                 + p2 * (1 - p2) / n2 * finite_population_factor(n2, population, name="nobs2"))
    lo, hi = interval_from_se(p1 - p2, se, z_critical(conf), z_critical(conf, "greater"), alternative)
    if np.ndim(lo) == 0:
        return float(lo), float(hi)
    return lo, hi
