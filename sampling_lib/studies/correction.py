"""Simulations of :func:`sampling_lib.correct.estimate` / :func:`~sampling_lib.correct.compare`: coverage, accuracy, calibration (notebook 09)."""
from __future__ import annotations


import numpy as np
import pandas as pd

from .._validation import (check_confidence_level, check_float, check_int)
from ..correct import compare, estimate
from ..metrics import metric_matrix, parse_metrics
from ..rankdist import draw_global_ranks
from ..sampling import sample_ranks

__all__ = [
    "simulate_coverage",
    "simulate_accuracy",
    "simulate_paired_difference",
    "coverage_summary",
    "relative_rmse",
    "coverage_study",
]


def simulate_coverage(pmf, n, M, repeats, metrics=("recall@10", "ndcg@10"), *, method=None,
                      confidence_level=0.95, n_boot=200, scheme="binomial", options=None, refit_prior=True,
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
        r = sample_ranks(R, N, n, scheme=scheme, rng=rng)
        t = estimate(r, N, n, [p[0] for p in parsed], method=method,
                     confidence_level=confidence_level, n_boot=n_boot,
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
        r = sample_ranks(draw_global_ranks(pmf, M, rng=rng), N, n, scheme=scheme, rng=rng)
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
        d = {"A": sample_ranks(Ra, N, n, scheme=scheme, rng=rng),
             "B": sample_ranks(Rb, N, n, scheme=scheme, rng=rng)}
        t = compare(d, N, n, [p[0] for p in parsed], method=method, n_boot=n_boot, rng=rng,
                    scheme=scheme)
        t.insert(0, "repeat", rep)
        t["truth_difference"] = truth
        out.append(t)
    return pd.concat(out, ignore_index=True)


def coverage_summary(sim, confidence_level=0.95, *, estimate_col="estimate", truth_col="truth",
                     low_col="ci_low", high_col="ci_high", se_col="se", by="metric"):
    """Coverage of simulated intervals and the coverage their bias predicts.

    For each group (default: metric) of a simulation table (from
    :func:`simulate_coverage` or :func:`simulate_paired_difference`):

    * ``coverage`` = fraction of repeats whose interval holds the truth, with
      its Monte Carlo standard error ``coverage_se`` = sqrt(p (1 - p) / R);
    * ``bias`` = mean(estimate - truth), ``sd`` = sd of the estimates over the
      repeats, ``mean_se`` = mean bootstrap standard error (should match sd);
    * ``predicted`` = Phi(z - bias/sd) - Phi(-z - bias/sd), z = Phi^-1((1 + confidence_level)/2):
      the coverage of a normal interval of the right width centred on an
      estimator with that bias; ``predicted_se`` its standard error from the
      uncertainty of the bias (sd / sqrt(R)), by the delta method.

    A measured coverage close to ``predicted`` and below ``confidence_level`` means the
    interval has the right width and the gap is the estimator's bias.

    Examples
    --------
    >>> d = pd.DataFrame({"metric": "m", "estimate": [0.0, 1.0], "truth": 0.5, "se": 0.5,
    ...                   "ci_low": [-1.0, 0.0], "ci_high": [1.0, 2.0]})
    >>> coverage_summary(d)[["coverage", "bias", "repeats"]].to_dict("records")
    [{'coverage': 1.0, 'bias': 0.0, 'repeats': 2}]
    """
    from scipy.stats import norm

    level = check_confidence_level(confidence_level)
    z = float(norm.ppf(0.5 + level / 2.0))
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




def relative_rmse(sim, by=("metric",)):
    """Relative root-mean-square error (%) of each method's estimate and of the naive sampled metric.

    ``sim`` is :func:`simulate_accuracy`'s table (columns ``method, estimate,
    naive, truth`` and ``by``). The naive value does not depend on the method
    (same sampled ranks), so it is taken from the first method's rows.

    Returns
    -------
    pandas.DataFrame
        Index ``by``; one column per method, then ``naive``.

    Examples
    --------
    >>> d = pd.DataFrame({"metric": "m", "method": ["a", "a"], "estimate": [1.1, 0.9],
    ...                   "naive": [2.0, 2.0], "truth": [1.0, 1.0]})
    >>> relative_rmse(d).round(1).to_dict("records")
    [{'a': 10.0, 'naive': 100.0}]
    """
    by = [by] if isinstance(by, str) else list(by)
    d = sim.assign(_se=((sim["estimate"] - sim["truth"]) / sim["truth"]) ** 2,
                   _sn=((sim["naive"] - sim["truth"]) / sim["truth"]) ** 2)
    out = 100 * np.sqrt(d.groupby([*by, "method"], sort=False)["_se"].mean().unstack("method"))
    first = d[d["method"] == d["method"].iloc[0]]
    out["naive"] = 100 * np.sqrt(first.groupby(by, sort=False)["_sn"].mean())
    return out


def coverage_study(pmf, n, M_values, repeats, metrics=("recall@10", "ndcg@10"), *, confidence_level=0.95,
                   n_boot=200, rng=None, **options):
    """Coverage of :func:`~sampling_lib.correct.estimate`'s intervals for several numbers of users.

    For every M: :func:`simulate_coverage` then :func:`coverage_summary`, with
    the coverage of the naive sampled metric's interval and the coverage of the
    finite-sample value (mean F(R_u) of the drawn users) added.

    Returns
    -------
    pandas.DataFrame
        :func:`coverage_summary` columns plus ``M, naive_coverage, coverage_users``.
    """
    rng = np.random.default_rng(rng)
    tables = []
    for M in M_values:
        sim = simulate_coverage(pmf, n, M, repeats, metrics, confidence_level=confidence_level, n_boot=n_boot,
                                rng=rng, **options)
        s = coverage_summary(sim, confidence_level).assign(M=M)
        g = sim.groupby("metric", sort=False)
        s["naive_coverage"] = g.naive_covered.mean().to_numpy()
        s["coverage_users"] = g.covered_users.mean().to_numpy()
        tables.append(s)
    return pd.concat(tables, ignore_index=True)
