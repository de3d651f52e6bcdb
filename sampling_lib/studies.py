"""Simulation studies the notebooks report, as tested library functions.

Each function repeats a known-truth experiment and returns a tidy table (or
a small dict), so a notebook only calls it, checks it and plots it:

* sampled-metric correction (:mod:`sampling_lib.correct`):
  :func:`simulate_coverage` (bootstrap interval coverage of
  :func:`~sampling_lib.correct.estimate`), :func:`simulate_accuracy` (point
  errors of several estimators), :func:`simulate_paired_difference`
  (calibration of :func:`~sampling_lib.correct.compare`), :func:`coverage_summary`;
* user sampling (:mod:`sampling_lib.user_sampling`, TORS24 Sec 7):
  :func:`simulate_proportion_coverage`, :func:`simulate_difference_coverage`,
  :func:`simulate_ztest_rejections`, :func:`simulate_familywise_error`.

Randomness only through ``rng`` (a seed or a numpy Generator).

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, Secs 7-8 (eqs 46-52).
.. [Efron93] Efron, Tibshirani. An Introduction to the Bootstrap (1993), ch. 13.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import user_sampling as us
from ._validation import check_confidence_level, check_float, check_int, check_probability
from .correct import compare, estimate
from .metrics import metric_matrix, parse_metrics
from .rankdist import draw_global_ranks
from .sampling import sample_ranks

__all__ = [
    "simulate_coverage",
    "simulate_accuracy",
    "simulate_paired_difference",
    "coverage_summary",
    "simulate_proportion_coverage",
    "simulate_difference_coverage",
    "simulate_ztest_rejections",
    "simulate_familywise_error",
]


def simulate_coverage(pmf, n, M, repeats, metrics=("recall@10", "ndcg@10"), *, method=None,
                      ci=0.95, n_boot=200, scheme="binomial", options=None, refit_prior=True,
                      rng=None):
    """Coverage of the bootstrap intervals of :func:`estimate` by simulation.

    Each repeat draws M users' global ranks from ``pmf`` (a known population),
    their sampled ranks (:func:`sampling_lib.sampling.sample_ranks`), and runs
    :func:`estimate`. The population value T = sum_R pmf(R) F(R) is the
    target; the finite-sample value (mean F(R_u) of the M drawn users) is
    recorded too.

    Returns
    -------
    pandas.DataFrame
        One row per (repeat, metric): the :func:`estimate` columns plus
        ``repeat, truth, truth_users, covered, naive_covered, covered_users``.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> d = simulate_coverage(synthetic_models(300)["beta_a0.35"], 30, 200, 2,
    ...                       metrics="recall@10", n_boot=50, rng=0)
    >>> d.shape[0], {"covered", "naive_covered"} <= set(d.columns)
    (2, True)
    """

    pmf = np.asarray(pmf, dtype=float)
    N = pmf.size
    repeats = check_int(repeats, "repeats", low=1)
    M = check_int(M, "M", low=1)
    parsed = parse_metrics(metrics)
    F = metric_matrix(parsed, N)
    truth = pmf @ F
    rng = np.random.default_rng(rng)
    out = []
    for rep in range(repeats):
        R = draw_global_ranks(pmf, M, rng=rng)
        r = sample_ranks(R, N, n, scheme, rng=rng)
        t = estimate(r, N, n, [p[0] for p in parsed], method=method, confidence_level=ci, n_boot=n_boot,
                     rng=rng, scheme=scheme, options=options, refit_prior=refit_prior)
        t.insert(0, "repeat", rep)
        t["truth"] = truth
        t["truth_users"] = F[R - 1].mean(axis=0)
        out.append(t)
    d = pd.concat(out, ignore_index=True)
    d["covered"] = (d.ci_low <= d.truth) & (d.truth <= d.ci_high)
    d["covered_users"] = (d.ci_low <= d.truth_users) & (d.truth_users <= d.ci_high)
    d["naive_covered"] = (d.naive_ci_low <= d.truth) & (d.truth <= d.naive_ci_high)
    return d


def simulate_accuracy(pmf, n, M, repeats, metrics=("recall@10", "ndcg@10"), *,
                      methods=("mle", "mes", "bv", "bv_mle", "mn_mle"), scheme="binomial", rng=None):
    """Errors of the point estimates of several methods over simulated evaluations.

    Each repeat draws M users from ``pmf`` and their sampled ranks, and runs
    :func:`estimate` (no bootstrap) for every method on the same ranks.

    Returns
    -------
    pandas.DataFrame
        One row per (repeat, method, metric): ``estimate, naive, truth, error``
        (estimate - truth, truth = sum_R pmf(R) F(R)).

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> d = simulate_accuracy(synthetic_models(200)["mixture"], 20, 100, 2, "recall@5",
    ...                       methods=("mle", "bv"), rng=0)
    >>> d.shape
    (4, 7)
    """

    pmf = np.asarray(pmf, dtype=float)
    N = pmf.size
    parsed = parse_metrics(metrics)
    truth = pmf @ metric_matrix(parsed, N)
    rng = np.random.default_rng(rng)
    rows = []
    for rep in range(check_int(repeats, "repeats", low=1)):
        r = sample_ranks(draw_global_ranks(pmf, M, rng=rng), N, n, scheme, rng=rng)
        for m in methods:
            t = estimate(r, N, n, [p[0] for p in parsed], method=m, n_boot=0, scheme=scheme)
            for j, (full, _, _) in enumerate(parsed):
                rows.append(dict(repeat=rep, method=m, metric=full, estimate=t.estimate[j],
                                 naive=t.naive[j], truth=truth[j],
                                 error=t.estimate[j] - truth[j]))
    return pd.DataFrame(rows)


def simulate_paired_difference(pmf_a, pmf_b, n, M, repeats, metrics=("recall@10", "ndcg@10"), *,
                               share=0.7, method=None, n_boot=200, scheme="binomial", rng=None):
    """Repeated paired comparisons of two known models on the same simulated users.

    User u gets a uniform U_u; model A's global rank is the U_u-quantile of
    ``pmf_a``, model B's the quantile of U_u (with probability ``share``) or of
    a fresh uniform (so the two models' ranks are positively dependent, as
    for real models on the same users). Each repeat runs :func:`compare`.

    Returns
    -------
    pandas.DataFrame
        :func:`compare` rows plus ``repeat`` and ``truth_difference``.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> m = synthetic_models(200)
    >>> d = simulate_paired_difference(m["beta_a0.25"], m["beta_a0.50"], 20, 100, 2,
    ...                                "recall@5", n_boot=30, rng=0)
    >>> len(d), "truth_difference" in d
    (2, True)
    """

    pa, pb = np.asarray(pmf_a, dtype=float), np.asarray(pmf_b, dtype=float)
    if pa.shape != pb.shape:
        raise ValueError(f"pmf_a and pmf_b must have the same length; got {pa.size} and {pb.size}")
    N = pa.size
    share = check_float(share, "share", 0.0, 1.0)
    parsed = parse_metrics(metrics)
    F = metric_matrix(parsed, N)
    truth = pa @ F - pb @ F
    ca, cb = np.cumsum(pa), np.cumsum(pb)
    rng = np.random.default_rng(rng)
    out = []
    for rep in range(check_int(repeats, "repeats", low=1)):
        U = rng.random(M)
        Ub = np.where(rng.random(M) < share, U, rng.random(M))
        Ra = np.minimum(np.searchsorted(ca, U, side="right") + 1, N)
        Rb = np.minimum(np.searchsorted(cb, Ub, side="right") + 1, N)
        d = {"A": sample_ranks(Ra, N, n, scheme, rng=rng), "B": sample_ranks(Rb, N, n, scheme, rng=rng)}
        t = compare(d, N, n, [p[0] for p in parsed], method=method, n_boot=n_boot, rng=rng,
                    scheme=scheme)
        t.insert(0, "repeat", rep)
        t["truth_difference"] = truth
        out.append(t)
    return pd.concat(out, ignore_index=True)


def coverage_summary(sim, ci=0.95, *, estimate_col="estimate", truth_col="truth",
                     low_col="ci_low", high_col="ci_high", se_col="se", by="metric"):
    """Coverage of simulated intervals and the coverage their bias predicts.

    For each group (default: metric) of a simulation table (from
    :func:`simulate_coverage` or :func:`simulate_paired_difference`):

    * ``coverage`` = fraction of repeats whose interval holds the truth, with
      its Monte Carlo standard error ``coverage_se`` = sqrt(p (1 - p) / R);
    * ``bias`` = mean(estimate - truth), ``sd`` = sd of the estimates over the
      repeats, ``mean_se`` = mean bootstrap standard error (should match sd);
    * ``predicted`` = Phi(z - bias/sd) - Phi(-z - bias/sd), z = Phi^-1((1 + ci)/2):
      the coverage of a normal interval of the right width centred on an
      estimator with that bias; ``predicted_se`` its standard error from the
      uncertainty of the bias (sd / sqrt(R)), by the delta method.

    A measured coverage close to ``predicted`` and below ``ci`` means the
    interval has the right width and the gap is the estimator's bias.

    Examples
    --------
    >>> d = pd.DataFrame({"metric": "m", "estimate": [0.0, 1.0], "truth": 0.5, "se": 0.5,
    ...                   "ci_low": [-1.0, 0.0], "ci_high": [1.0, 2.0]})
    >>> coverage_summary(d)[["coverage", "bias", "repeats"]].to_dict("records")
    [{'coverage': 1.0, 'bias': 0.0, 'repeats': 2}]
    """
    from scipy.stats import norm

    ci = check_confidence_level(ci, "ci")
    z = float(norm.ppf(0.5 + ci / 2.0))
    rows = []
    for key, g in sim.groupby(by, sort=False):
        R = len(g)
        err = (g[estimate_col] - g[truth_col]).to_numpy(float)
        cov = float(((g[low_col] <= g[truth_col]) & (g[truth_col] <= g[high_col])).mean())
        b, sd = float(err.mean()), float(err.std(ddof=1)) if R > 1 else float("nan")
        u = b / sd if sd > 0 else 0.0
        pred = float(norm.cdf(z - u) - norm.cdf(-z - u))
        dpred = float(-norm.pdf(z - u) + norm.pdf(-z - u)) / sd if sd > 0 else 0.0
        rows.append({by if isinstance(by, str) else "group": key, "repeats": R, "coverage": cov,
                     "coverage_se": float(np.sqrt(max(pred * (1 - pred), 1e-12) / R)),
                     "bias": b, "sd": sd, "mean_se": float(g[se_col].mean()),
                     "mean_se_se": float(g[se_col].std(ddof=1) / np.sqrt(R)) if R > 1 else float("nan"),
                     "predicted": pred, "predicted_se": abs(dpred) * sd / np.sqrt(R)})
    return pd.DataFrame(rows)


def simulate_proportion_coverage(M, successes, m, repeats, confidence=0.95, *,
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
    conf = check_confidence_level(confidence, "confidence")
    rng = np.random.default_rng(rng)
    q = rng.hypergeometric(s, M - s, m, size=repeats)
    lo, hi = us.proportion_confint(q, np.full(repeats, m), conf,
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


def simulate_difference_coverage(M, successes1, successes2, m, repeats, confidence=0.95,
                                 *, margin=None, fpc=True, rng=None):
    """Monte Carlo coverage of the eq-51 interval of ``p1 - p2`` for two models each
    evaluated on its own random sample of m of the M users (drawn without
    replacement, independently for the two models, as eq 51 assumes). With
    ``fpc`` the interval uses the finite-population correction (see
    :func:`diff_confint`).

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
    conf = check_confidence_level(confidence, "confidence")
    rng = np.random.default_rng(rng)
    q1 = rng.hypergeometric(s1, M - s1, m, size=repeats)
    q2 = rng.hypergeometric(s2, M - s2, m, size=repeats)
    nob = np.full(repeats, m)
    lo, hi = us.diff_confint(q1, nob, q2, nob, conf, population=M if fpc else None)
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
    a = check_confidence_level(alpha, "alpha") / check_int(n_tests, "n_tests", low=1)
    alternative = us.check_alternative(alternative)
    rng = np.random.default_rng(rng)
    c1 = rng.binomial(m, p1, size=repeats).astype(float)
    c2 = rng.binomial(m, p2, size=repeats).astype(float)
    _, pv = us.ztest_arrays(c1, float(m), c2, float(m), alternative)
    return float(np.mean(pv <= a))


def simulate_familywise_error(proportions, m, repeats, alpha=0.05, *, family="all-pairs",
                              reference=None, methods=("none", "bonferroni", "holm"),
                              rng=None):
    """Monte Carlo family-wise error of pairwise z-tests (eq 49) among models.

    Each model's hits on its m users are Binomial(m, p_j) (independent samples,
    the model of eq 49). For every repeat all comparisons of the ``family`` are
    tested two-sided and adjusted with each method; a family-wise error is any
    rejection of a comparison whose two true proportions are equal. For
    ``'vs-best'`` the reference is model index ``reference`` (fixed in advance)
    or, when ``reference`` is None, the model with the highest observed
    proportion, adjusted naively over its n-1 comparisons: this shows that the
    naive adjustment fails to control the family-wise error (see the module
    notes); :func:`compare_models` adjusts that case over all pairs instead.

    Returns
    -------
    pandas.DataFrame
        Columns ``method, fwer, se, repeats, n_comparisons``; ``se`` is the
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
    alpha = check_confidence_level(alpha, "alpha")
    family = us.check_family(family)
    for mth in methods:
        if mth not in us.ADJUST_METHODS:
            raise ValueError(f"method must be one of {us.ADJUST_METHODS}; got {mth!r}")
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
    _, pv = us.ztest_arrays(ca, float(m), cb, float(m), "two-sided")
    null = p[ia] == p[ib]
    n_cmp = pv.shape[1]
    rows = []
    for mth in methods:
        if mth == "none":
            rej = pv <= alpha
        elif mth == "bonferroni":
            rej = pv * n_cmp <= alpha
        else:  # Holm step-down, vectorized over repeats
            order = np.argsort(pv, axis=1)
            ps = np.take_along_axis(pv, order, axis=1)
            thresh = alpha / (n_cmp - np.arange(n_cmp))
            ok = np.cumprod(ps <= thresh, axis=1).astype(bool)
            rej = np.zeros_like(ok)
            np.put_along_axis(rej, order, ok, axis=1)
        err = np.any(rej & null, axis=1)
        rate = float(err.mean())
        rows.append(dict(method=mth, fwer=rate,
                         se=math.sqrt(max(rate * (1 - rate), 1e-300) / repeats),
                         repeats=repeats, n_comparisons=n_cmp))
    return pd.DataFrame(rows)
