"""User sampling: interval coverage, tests and family-wise errors by simulation (TORS24 Sec 7, eqs 46-52; notebook 06)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import inference
from .._validation import (check_confidence_level, check_float, check_int, check_probability)
from ..metrics import metric_values

__all__ = [
    "simulate_proportion_coverage",
    "simulate_difference_coverage",
    "simulate_ztest_rejections",
    "simulate_familywise_error",
    "proportion_coverage_table",
    "user_sampling_tails",
    "user_sampling_errors",
]


def simulate_proportion_coverage(M, successes, m, repeats, confidence_level=0.95, *,
                                 margin=None, fpc=True, rng=None):
    """Monte Carlo coverage of the Wald interval of a user-sampled proportion.

    The sample count is drawn exactly, Q ~ Hypergeometric(M, successes, m) (m of
    M users without replacement, Recall@K hits as successes).

    Returns
    -------
    dict
        ``coverage`` (fraction of intervals holding the population value),
        ``coverage_se`` (binomial standard error at the nominal level),
        ``margin_met`` (fraction with ``|p_hat - p| <= margin``, if given),
        ``mean_halfwidth``, ``repeats``.

    References
    ----------
    TORS24 eqs 45-47.
    """
    M = check_int(M, "M", low=1)
    s = check_int(successes, "successes", low=0, high=M)
    m = check_int(m, "m", low=1)
    if m > M:
        raise ValueError(f"m must lie in 1..M={M}; got m={m}")
    repeats = check_int(repeats, "repeats", low=1)
    conf = check_confidence_level(confidence_level)
    rng = np.random.default_rng(rng)
    q = rng.hypergeometric(s, M - s, m, size=repeats)
    lo, hi = inference.proportion_confint(q, np.full(repeats, m), conf,
                                population=M if fpc else None)
    p = s / M
    cover = (lo <= p) & (p <= hi)
    out = dict(coverage=float(cover.mean()),
               coverage_se=math.sqrt(conf * (1 - conf) / repeats),
               mean_halfwidth=float(np.mean(hi - lo) / 2), repeats=repeats)
    if margin is not None:
        e = check_float(margin, "margin", 0.0, low_open=True)
        out["margin_met"] = float(np.mean(np.abs(q / m - p) <= e + 1e-12))
    return out


def simulate_difference_coverage(M, successes1, successes2, m, repeats, confidence_level=0.95,
                                 *, margin=None, fpc=True, rng=None):
    """Monte Carlo coverage of the eq-51 interval of ``p1 - p2`` for two models each
    evaluated on its own random sample of m of the M users (drawn without
    replacement, independently for the two models, as eq 51 assumes). With
    ``fpc`` the interval uses the finite-population correction (see
    :func:`sampling_lib.inference.diff_confint`).

    Returns
    -------
    dict
        ``coverage``, ``coverage_se`` (binomial standard error at the nominal
        level), ``margin_met`` (fraction with ``|(p1_hat - p2_hat) - (p1 - p2)| <=
        margin``, if given), ``mean_halfwidth``, ``repeats``.

    References
    ----------
    TORS24 eqs 51-52.
    """
    M = check_int(M, "M", low=1)
    s1 = check_int(successes1, "successes1", low=0, high=M)
    s2 = check_int(successes2, "successes2", low=0, high=M)
    m = check_int(m, "m", low=1)
    if m > M:
        raise ValueError(f"m must lie in 1..M={M}; got m={m}")
    repeats = check_int(repeats, "repeats", low=1)
    conf = check_confidence_level(confidence_level)
    rng = np.random.default_rng(rng)
    q1 = rng.hypergeometric(s1, M - s1, m, size=repeats)
    q2 = rng.hypergeometric(s2, M - s2, m, size=repeats)
    nob = np.full(repeats, m)
    lo, hi = inference.diff_confint(q1, nob, q2, nob, conf, population=M if fpc else None)
    d = (s1 - s2) / M
    cover = (lo <= d) & (d <= hi)
    out = dict(coverage=float(cover.mean()),
               coverage_se=math.sqrt(conf * (1 - conf) / repeats),
               mean_halfwidth=float(np.mean(hi - lo) / 2), repeats=repeats)
    if margin is not None:
        e = check_float(margin, "margin", 0.0, low_open=True)
        out["margin_met"] = float(np.mean(np.abs((q1 - q2) / m - d) <= e + 1e-12))
    return out


def simulate_ztest_rejections(p1, p2, m, repeats, alpha=0.05, *, alternative="two-sided",
                              n_tests=1, rng=None):
    """Monte Carlo rejection rate of the eq-49 z-test at level ``alpha/n_tests`` for
    two independent samples of m users with true Recall p1, p2 (the power when
    p1 != p2, the size when p1 == p2). Hits are Binomial(m, p).

    Returns
    -------
    float

    References
    ----------
    TORS24 eqs 49-50.
    """
    p1 = check_probability(p1, "p1")
    p2 = check_probability(p2, "p2")
    m = check_int(m, "m", low=1)
    repeats = check_int(repeats, "repeats", low=1)
    a = check_float(alpha, "alpha", 0.0, 1.0, low_open=True, high_open=True)
    a /= check_int(n_tests, "n_tests", low=1)
    alternative = inference.check_alternative(alternative)
    rng = np.random.default_rng(rng)
    c1 = rng.binomial(m, p1, size=repeats).astype(float)
    c2 = rng.binomial(m, p2, size=repeats).astype(float)
    _, pv = inference.ztest_arrays(c1, float(m), c2, float(m), alternative)
    return float(np.mean(pv <= a))


def simulate_familywise_error(proportions, m, repeats, alpha=0.05, *, family="all-pairs",
                              reference=None, adjust=("none", "bonferroni", "holm"),
                              rng=None):
    """Monte Carlo family-wise error of pairwise z-tests (eq 49) among models.

    Each model's hits on its m users are Binomial(m, p_j) (independent samples,
    the model of eq 49). For every repeat all comparisons of the ``family`` are
    tested two-sided and adjusted with each ``adjust`` method
    (:func:`sampling_lib.inference.adjust_pvalues`, one family per repeat);
    a family-wise error is any rejection of a comparison whose two true
    proportions are equal. For ``'vs-best'`` the reference is model index
    ``reference`` (fixed in advance) or, when ``reference`` is None, the model
    with the highest observed proportion, adjusted naively over its n-1
    comparisons: this shows that the naive adjustment fails to control the
    family-wise error (see the module notes of :mod:`sampling_lib.inference`);
    :func:`~sampling_lib.inference.compare_models` adjusts that case over all
    pairs instead.

    Returns
    -------
    pandas.DataFrame
        Columns ``adjust, fwer, se, repeats, n_comparisons``; ``se`` is the
        binomial standard error of the estimated rate.

    References
    ----------
    TORS24 Sec 7.2 (Bonferroni).
    """
    p = np.asarray(proportions, dtype=float)
    if p.ndim != 1 or p.size < 2 or np.any(~(p >= 0)) or np.any(p > 1):
        raise ValueError(f"proportions must be >= 2 values in [0, 1]; got {proportions!r}")
    m = check_int(m, "m", low=1)
    repeats = check_int(repeats, "repeats", low=1)
    alpha = check_float(alpha, "alpha", 0.0, 1.0, low_open=True, high_open=True)
    family = inference.check_family(family)
    adjustments = (adjust,) if isinstance(adjust, str) else tuple(adjust)
    for adj in adjustments:
        if adj not in inference.ADJUSTMENTS:
            raise ValueError(f"adjust must be one of {inference.ADJUSTMENTS}; got {adj!r}")
    rng = np.random.default_rng(rng)
    k = p.size
    counts = rng.binomial(m, p, size=(repeats, k)).astype(float)
    if family == "all-pairs":
        ia, ib = np.triu_indices(k, 1)
        ia = np.broadcast_to(ia, (repeats, ia.size))
        ib = np.broadcast_to(ib, (repeats, ib.size))
    else:
        if reference is None:
            best = np.argmax(counts, axis=1)
        else:
            best = np.full(repeats, check_int(reference, "reference", low=0, high=k - 1))
        others = np.array([[j for j in range(k) if j != b] for b in best])
        ia = np.broadcast_to(best[:, None], others.shape)
        ib = others
    ca = np.take_along_axis(counts, ia, axis=1)
    cb = np.take_along_axis(counts, ib, axis=1)
    _, pv = inference.ztest_arrays(ca, float(m), cb, float(m), "two-sided")
    null = p[ia] == p[ib]
    rows = []
    for adj in adjustments:
        rej, _ = inference.adjust_pvalues(pv, adj, alpha)
        rate = float(np.any(rej & null, axis=1).mean())
        rows.append(dict(adjust=adj, fwer=rate,
                         se=math.sqrt(max(rate * (1 - rate), 1e-300) / repeats),
                         repeats=repeats, n_comparisons=pv.shape[1]))
    return pd.DataFrame(rows)




def proportion_coverage_table(M, successes, m_values, repeats, confidence_level=0.95, *, margin, rng=None):
    """Coverage of the Wald interval and chance of meeting a margin, exact and Monte Carlo, per m.

    For each user sample size m: :func:`sampling_lib.user_sampling.exact_proportion_coverage`
    (hypergeometric sum) next to :func:`simulate_proportion_coverage`.

    Returns
    -------
    pandas.DataFrame
        Columns ``m, mc_coverage, exact_coverage, mc_se, mean_halfwidth,
        mc_margin_prob, exact_margin_prob``.

    References
    ----------
    TORS24 eqs 45-47.

    Examples
    --------
    >>> d = proportion_coverage_table(10_000, 3_000, [500], 2000, margin=0.03, rng=0)
    >>> bool(abs(d.mc_coverage[0] - d.exact_coverage[0]) < 4 * d.mc_se[0])
    True
    """
    from ..user_sampling import exact_proportion_coverage

    rows = []
    for m in m_values:
        mc = simulate_proportion_coverage(M, successes, m, repeats, confidence_level, margin=margin, rng=rng)
        ex = exact_proportion_coverage(M, successes, m, confidence_level, margin=margin)
        rows.append(dict(m=m, mc_coverage=mc["coverage"], exact_coverage=ex["coverage"], mc_se=mc["coverage_se"],
                         mean_halfwidth=mc["mean_halfwidth"], mc_margin_prob=mc["margin_met"],
                         exact_margin_prob=ex["margin_prob"]))
    return pd.DataFrame(rows, columns=["m", "mc_coverage", "exact_coverage", "mc_se", "mean_halfwidth",
                                       "mc_margin_prob", "exact_margin_prob"])   # the columns even for no m


def user_sampling_tails(global_ranks, N, m, metric, repeats, ts, *, rng=None):
    """Tails of a user-sampled metric against Hoeffding and the normal approximation.

    ``repeats`` samples of m of the M users (without replacement,
    :func:`sampling_lib.user_sampling.user_sampled_metric`) estimate ``metric``
    (e.g. ``"ap@10"``); for every t the observed ``Pr(|T_hat - T| >= t)`` is
    set beside Hoeffding's ``2 exp(-2 m t^2)`` (eq 48) and the normal tail
    ``2 Phi(-t / sigma)`` with sigma the population sd times
    ``sqrt((M - m) / ((M - 1) m))``.

    Returns
    -------
    pandas.DataFrame
        Columns ``metric, t, observed, mc_se, clt, hoeffding``.

    References
    ----------
    TORS24 eq 48; Hoeffding (1963), Thm 4 (sampling without replacement).
    """
    from scipy import stats

    from ..metrics import parse_metric
    from ..user_sampling import hoeffding_bound, user_sampled_metric

    R = np.asarray(global_ranks)
    name, K = parse_metric(metric)
    M = R.size
    est = user_sampled_metric(R, m, name, [K], repeats=repeats, rng=rng)[:, 0]
    F = metric_values(name, N, K)[R - 1]
    sd = F.std() * math.sqrt((M - m) / ((M - 1) * m))
    rows = []
    for t in ts:
        obs = float(np.mean(np.abs(est - F.mean()) >= t))
        rows.append(dict(metric=f"{name}@{K}", t=t, observed=obs,
                         mc_se=math.sqrt(max(obs * (1 - obs), 1e-300) / repeats),
                         clt=2 * stats.norm.sf(t / sd), hoeffding=float(hoeffding_bound(m, t))))
    return pd.DataFrame(rows)


def user_sampling_errors(ranks, m_values, metrics=("recall", "ndcg"), K_max=50, repeats=100, *, rng=None):
    """TORS24 Tables 8-9: relative error of user-sampled metrics, simulated and predicted.

    For every model, metric and user sample size m: ``repeats`` samples of m of
    the M users; the relative error |T_hat_K - T_K| / T_K averaged over the
    cutoffs K = 1..K_max with T_K > 0, its mean, sd and standard error over
    the repeats, and the prediction of
    :func:`sampling_lib.user_sampling.predicted_relative_error` (exact for
    0/1 metrics, normal approximation otherwise), all in percent.

    Returns
    -------
    pandas.DataFrame
        Columns ``model, metric, method, m, mean, sd, se, predicted``.

    References
    ----------
    TORS24 Tables 8-9.
    """
    from ..metrics import metric_from_ranks
    from ..user_sampling import predicted_relative_error, user_sampled_metric

    Ks = np.arange(1, K_max + 1)
    rng = np.random.default_rng(rng)
    rows = []
    for name, R in ranks.items():
        for met in metrics:
            truth = np.array([metric_from_ranks(R, met, int(K)) for K in Ks])
            ok = truth > 0
            for m in m_values:
                est = user_sampled_metric(R, m, met, Ks, repeats=repeats, rng=rng)
                rel = (np.abs(est[:, ok] - truth[ok]) / truth[ok]).mean(axis=1)
                pred = float(np.mean(predicted_relative_error(R, m, met, Ks)[ok]))
                rows.append({"model": name, "metric": met, "method": f"user {m:,}", "m": m,
                             "mean": 100 * rel.mean(), "sd": 100 * rel.std(ddof=1),
                             "se": 100 * rel.std(ddof=1) / math.sqrt(repeats), "predicted": 100 * pred})
    return pd.DataFrame(rows)
