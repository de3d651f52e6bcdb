"""Simulation studies the notebooks report, as tested library functions.

Each function repeats a known-truth experiment and returns a tidy table (or
a small dict), so a notebook only calls it, checks it and plots it:

* sampled-metric correction (:mod:`sampling_lib.correct`):
  :func:`simulate_coverage` (bootstrap interval coverage of
  :func:`~sampling_lib.correct.estimate`), :func:`simulate_accuracy` (point
  errors of several estimators), :func:`simulate_paired_difference`
  (calibration of :func:`~sampling_lib.correct.compare`), :func:`coverage_summary`;
* accuracy on real rank distributions (issue 13, notebook 10):
  :func:`rank_populations` (global ranks of :data:`PANEL_MODELS` on a data
  set), :func:`oracle_weights` (the floor: posterior mean under the true
  P(R)), :func:`accuracy_panel` (every estimator's Recall/NDCG@1..K_max
  against the users' true metric over n, M and draws), :func:`panel_summary`
  (mean relative error, resolved / below resolution), :func:`interval_coverage`
  (coverage of :func:`~sampling_lib.correct.estimate`'s intervals);
* user sampling (:mod:`sampling_lib.user_sampling`, :mod:`sampling_lib.inference`,
  TORS24 Sec 7):
  :func:`simulate_proportion_coverage`, :func:`simulate_difference_coverage`,
  :func:`simulate_ztest_rejections`, :func:`simulate_familywise_error`.

Randomness only through ``rng`` (a seed or a numpy Generator).

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, Secs 7-8 (eqs 46-52).
.. [Efron93] Efron, Tibshirani. An Introduction to the Bootstrap (1993), ch. 13.
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation.
   KDD 2020 (Sec 2.1: leave-one-out, global rank R_u).
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021 (eq 18: the mixture model behind the oracle).
"""
from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from . import inference
from ._validation import (check_confidence_level, check_float, check_int, check_N_n, check_pmf,
                          check_probability, check_ranks, check_scheme)
from .kernels import log_kernel_rows
from .correct import compare, estimate
from .metrics import metric_matrix, metric_values, parse_metrics
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
    "PANEL_MODELS",
    "PANEL_METHODS",
    "rank_populations",
    "oracle_weights",
    "accuracy_panel",
    "panel_summary",
    "interval_coverage",
    "simulate_shr",
    "shr_moments",
    "shr_tail_frequencies",
    "expected_shr_gaps",
    "beta_map_accuracy",
    "beta_map_steps",
    "beta_map_differences",
    "beta_map_monotonicity",
    "max_position_difference",
    "winner_counts",
    "mle_mse_identifiable",
    "mle_consistency",
    "RANK_DISTRIBUTION_ESTIMATORS",
    "rank_distribution_study",
    "mes_solver_check",
    "metric_curves",
    "average_relative_error",
    "metric_estimator_study",
    "simulate_mse_bound",
    "mn_bv_growth",
    "mean_sd",
    "proportion_coverage_table",
    "user_sampling_tails",
    "user_sampling_errors",
    "ap_enumeration_check",
    "ap_monte_carlo",
    "ap_scenarios",
    "sampled_rank_as_global",
    "expected_shr",
    "score_sampling_summary",
    "relative_rmse",
    "coverage_study",
    "n_items_comparison",
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


# ----------------------------------------------------------------------------
# accuracy on real rank distributions (issue 13)
# ----------------------------------------------------------------------------
#: Recommender settings of the panel: label -> (model, parameters). Each model at a
#: weak and a strong setting (popularity has none).
PANEL_MODELS = {
    "popularity": ("popularity", {}),
    "itemknn-10": ("itemknn", {"neighbors": 10}),
    "itemknn": ("itemknn", {"neighbors": None}),
    "ease-5000": ("ease", {"lam": 5000.0}),
    "ease-200": ("ease", {"lam": 200.0}),
    "als-8": ("als", {"factors": 8, "iterations": 3}),
    "als-64": ("als", {"factors": 64, "iterations": 15}),
}
#: Estimators measured by default: the published ones and the log-spline EB.
PANEL_METHODS = ("mle", "mes", "bv", "bv_mle", "mn_mes", "logspline")


def rank_populations(data=None, models=None, *, min_item_users=1, seed=0, max_dense_items=6000,
                     progress=False):
    """Global ranks of several recommender settings on one data set.

    Parameters
    ----------
    data : str, Path, Ratings or None
        A ratings file (:func:`sampling_lib.data.load_ratings`), a loaded
        :class:`~sampling_lib.data.Ratings`, or None for the synthetic
        generator (:func:`sampling_lib.data.synthetic_ratings` with the
        defaults of :data:`sampling_lib.experiments.DEFAULT_SYNTHETIC`).
    models : mapping label -> (model, params), optional
        Default :data:`PANEL_MODELS`.
    min_item_users : int, default 1
        Keep only items with at least this many users before the split
        (:func:`sampling_lib.data.filter_items`).
    seed : int
        Seeds the synthetic data, the random hold-out of untimed files and ALS.
    max_dense_items : int, default 6000
        EASE inverts an items x items matrix: settings of EASE are skipped (and
        listed in ``info["skipped"]``) when the catalogue is larger.
    progress : bool
        Print one line per fitted model.

    Returns
    -------
    ranks : dict label -> ndarray of int64
        Global rank R_u in 1..N of each test user's held-out item (training
        items ranked last, pessimistic ties).
    N : int
    info : dict
        ``split`` summary, ``n_items_history`` (per-user training items),
        ``n_candidates`` (N_u = N - history: R_u <= N_u, the per-user item
        counts of this convention), ``seconds`` per model and ``skipped`` settings.

    Examples
    --------
    >>> ranks, N, info = rank_populations(None, {"popularity": ("popularity", {})})
    >>> N, sorted(ranks)
    (1000, ['popularity'])
    """
    from .data import Ratings, filter_items, leave_one_out, load_ratings, synthetic_ratings
    from .experiments import DEFAULT_SYNTHETIC
    from .recommenders import global_ranks, make_recommender

    seed = check_int(seed, "seed", low=0)
    models = dict(PANEL_MODELS if models is None else models)
    if data is None:
        ratings = synthetic_ratings(**DEFAULT_SYNTHETIC, rng=np.random.SeedSequence([seed, 0]))
    elif isinstance(data, Ratings):
        ratings = data
    else:
        ratings = load_ratings(data)
    min_item_users = check_int(min_item_users, "min_item_users", low=1)
    if min_item_users > 1:
        ratings = filter_items(ratings, min_item_users)
    split = leave_one_out(ratings, rng=np.random.default_rng(np.random.SeedSequence([seed, 3])))
    N = int(split.n_items)
    ranks, seconds, skipped = {}, {}, []
    for label, (name, params) in models.items():
        if str(name).lower() == "ease" and N > max_dense_items:
            skipped.append(label)
            continue
        params = dict(params)
        if str(name).lower() == "als":
            params.setdefault("rng", np.random.default_rng(np.random.SeedSequence([seed, 1])))
        t0 = time.perf_counter()
        model = make_recommender(name, **params).fit(split.train)
        ranks[label] = global_ranks(model, split.train, split.test_items, train_last=True,
                                    ties="pessimistic",
                                    rng=np.random.default_rng(np.random.SeedSequence([seed, 2])))
        seconds[label] = time.perf_counter() - t0
        if progress:
            print(f"  {label}: {seconds[label]:.1f} s", flush=True)
    hist = np.asarray(split.train.sum(axis=1)).ravel().astype(np.int64)
    info = {"summary": dict(split.summary), "n_items_history": hist, "seconds": seconds,
            "skipped": skipped, "M": int(split.n_users), "n_candidates": N - hist}
    return ranks, N, info


def _posterior_matrix(pmf, N, n, scheme):
    """P(R | r) under ``pmf`` for r = 1..n: shape (n, N); columns of ranks with q(r)=0 are 0."""
    Kp = np.empty((N, n))
    step = max(1, (1 << 21) // n)
    for a in range(0, N, step):
        R = np.arange(a + 1, min(N, a + step) + 1)
        Kp[a:a + R.size] = np.exp(log_kernel_rows(N, n, R, scheme)) * pmf[a:a + R.size, None]
    q = Kp.sum(axis=0)
    return np.divide(Kp, q, out=np.zeros_like(Kp), where=q > 0).T


def oracle_weights(pmf, sampled_ranks, N, n, *, scheme="binomial"):
    """The oracle floor: (1/M) sum_u P(R | r_u) under the true rank distribution.

    With the true P(R) the best an estimator of the users' metric can do from
    sampled ranks alone is the posterior mean E[F(R_u) | r_u] of each user
    (Bayes rule with the kernel P(r | R), AAAI21 eq 18); averaged over users
    it is ``w @ F`` with the returned weights.

    Parameters
    ----------
    pmf : array_like, shape (N,)
        The true P(R), R = 1..N.
    sampled_ranks : array_like of int
        r_u in 1..n.
    N, n : int
    scheme : {"binomial", "hypergeometric"}, keyword-only

    Returns
    -------
    ndarray, shape (N,)
        A probability vector.

    Examples
    --------
    >>> w = oracle_weights(np.full(10, 0.1), [1, 2], 10, 3)
    >>> round(float(w.sum()), 12)
    1.0
    """
    N, n = check_N_n(N, n)
    scheme = check_scheme(scheme)
    pmf = check_pmf(pmf, N)
    r = check_ranks(sampled_ranks, n, name="sampled_ranks", upper_name="n")
    c = np.bincount(r - 1, minlength=n) / r.size
    return c @ _posterior_matrix(pmf, N, n, scheme)


def _resolve(methods):
    out = {}
    for m in methods:
        if isinstance(m, str):
            from .estimators import get_estimator

            out[m] = get_estimator(m)
        elif isinstance(m, tuple) and len(m) == 2 and callable(m[1]):
            out[str(m[0])] = m[1]
        else:
            raise TypeError("methods must hold registered estimator names or (label, callable) "
                            f"pairs; got {m!r}")
    return out


def accuracy_panel(populations, methods=PANEL_METHODS, *, sample_sizes=(20, 50, 100, 500),
                   user_counts=(300, 1000, None), draws=10, max_K=50, scheme="binomial", rng=0,
                   progress=False):
    """Every estimator's Recall/NDCG@1..max_K against the truth on real rank distributions.

    Parameters
    ----------
    populations : mapping (dataset, model) -> (global ranks, N)
        E.g. built from :func:`rank_populations`.
    methods : sequence
        Registered estimator names (:func:`sampling_lib.estimators.get_estimator`)
        or ``(label, callable)`` pairs with ``callable(sampled_ranks, N, n) -> w``.
        The oracle (:func:`oracle_weights` with the population's P(R)) is always added.
    sample_sizes : sequence of int
        Values of n (held-out item included); values >= N are skipped.
    user_counts : sequence of int or None
        Users per evaluation (subsampled without replacement); None = all users.
        Values >= the population size are skipped.
    draws : int
        Independent evaluations per (population, n, M) cell.
    max_K : int
        Cut-offs K = 1..max_K.
    scheme : {"binomial", "hypergeometric"}
    rng : int or Generator
        One seed for the whole panel (each cell gets its own child stream, so
        adding a method does not change the draws).
    progress : bool
        Print one line per population.

    Returns
    -------
    pandas.DataFrame
        Tidy: ``dataset, model, N, n, M, draw, estimator, metric, K, estimate,
        truth, rel_error, below_resolution`` with ``metric`` in {"recall",
        "ndcg"}, ``rel_error = |estimate - truth| / truth`` (NaN when the truth
        is 0) and ``below_resolution = K < (N - 1)/(n - 1)``.
    """
    scheme = check_scheme(scheme)
    draws = check_int(draws, "draws", low=1)
    max_K = check_int(max_K, "max_K", low=1)
    fns = _resolve(methods)
    root = np.random.SeedSequence(rng if isinstance(rng, (int, np.integer)) else
                                  np.random.default_rng(rng).integers(2**63))
    frames = []
    Ks = np.arange(1, max_K + 1)
    for p_idx, ((dataset, model), (R, N)) in enumerate(populations.items()):
        t0 = time.perf_counter()
        N = check_int(N, "N", low=2)
        R = check_ranks(R, N, name=f"ranks of {dataset}/{model}")
        F = np.concatenate([np.stack([metric_values(f"recall@{k}", N) for k in Ks], axis=1),
                            np.stack([metric_values(f"ndcg@{k}", N) for k in Ks], axis=1)], axis=1)
        pmf = np.bincount(R - 1, minlength=N) / R.size
        for n in sample_sizes:
            n = int(n)
            if n >= N:
                continue
            post = _posterior_matrix(pmf, N, n, scheme)
            w_res = (N - 1) / (n - 1)
            for M in user_counts:
                if M is not None and int(M) >= R.size:
                    continue
                Mv = R.size if M is None else int(M)
                cell_ss = np.random.SeedSequence([root.entropy, p_idx, n, Mv])
                for d, ss in enumerate(cell_ss.spawn(draws)):
                    g = np.random.default_rng(ss)
                    Ru = R if M is None else g.choice(R, Mv, replace=False)
                    if scheme == "binomial":
                        r = 1 + g.binomial(n - 1, (Ru - 1) / (N - 1))
                    else:
                        r = 1 + g.hypergeometric(Ru - 1, N - Ru, n - 1)
                    truth = (np.bincount(Ru - 1, minlength=N) / Mv) @ F
                    ests = {"oracle": (np.bincount(r - 1, minlength=n) / Mv) @ post @ F}
                    for name, fn in fns.items():
                        ests[name] = fn(r, N, n) @ F
                    for name, e in ests.items():
                        with np.errstate(divide="ignore", invalid="ignore"):
                            rel = np.where(truth > 0, np.abs(e - truth) / truth, np.nan)
                        frames.append(pd.DataFrame({
                            "dataset": dataset, "model": model, "N": N, "n": n, "M": Mv,
                            "draw": d, "estimator": name,
                            "metric": np.repeat(["recall", "ndcg"], max_K),
                            "K": np.tile(Ks, 2), "estimate": e, "truth": truth, "rel_error": rel,
                            "below_resolution": np.tile(Ks < w_res, 2)}))
        if progress:
            print(f"  {dataset}/{model}: {time.perf_counter() - t0:.1f} s", flush=True)
    return pd.concat(frames, ignore_index=True)


def panel_summary(panel, by=("estimator",), metric="recall"):
    """Mean relative error (%) of ``metric`` @1..max_K: overall, below and above resolution.

    Each (population, n, M, draw) evaluation is first averaged over K, then
    the mean and the standard deviation over evaluations are reported, with
    the number of evaluations.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``by``: ``mean_rel_error, sd, resolved, below_resolution, evaluations``.
    """
    df = panel[panel.metric == metric]
    keys = ["dataset", "model", "n", "M", "draw", *by]
    keys = list(dict.fromkeys(keys))
    per = df.groupby(keys)["rel_error"].mean().rename("all")
    res = df[~df.below_resolution].groupby(keys)["rel_error"].mean().rename("resolved")
    bel = df[df.below_resolution].groupby(keys)["rel_error"].mean().rename("below")
    t = pd.concat([per, res, bel], axis=1).reset_index()
    out = t.groupby(list(by)).agg(mean_rel_error=("all", "mean"), sd=("all", "std"),
                                  resolved=("resolved", "mean"), below_resolution=("below", "mean"),
                                  evaluations=("all", "size"))
    out[["mean_rel_error", "sd", "resolved", "below_resolution"]] *= 100.0
    return out.sort_values("mean_rel_error")


def interval_coverage(populations, methods=("logspline",), metrics=("recall@10", "ndcg@10"), *,
                      sample_sizes=(20, 100, 500), user_counts=(300, None), draws=3, n_boot=200,
                      confidence_level=0.95, scheme="binomial", rng=0, progress=False):
    """Coverage of :func:`sampling_lib.correct.estimate`'s intervals on real rank distributions.

    For every population, n, M and draw (drawn as in :func:`accuracy_panel`)
    the practitioner entry point is called with each method and its default
    interval; the row records whether the interval holds the users' true
    metric.

    Returns
    -------
    pandas.DataFrame
        ``dataset, model, N, n, M, draw, method, metric, K, truth, estimate,
        ci_low, ci_high, covered, rel_width, below_resolution``.
    """
    draws = check_int(draws, "draws", low=1)
    root = np.random.SeedSequence(rng if isinstance(rng, (int, np.integer)) else
                                  np.random.default_rng(rng).integers(2**63))
    rows = []
    for p_idx, ((dataset, model), (R, N)) in enumerate(populations.items()):
        t0 = time.perf_counter()
        R = check_ranks(R, N, name=f"ranks of {dataset}/{model}")
        for n in sample_sizes:
            n = int(n)
            if n >= N:
                continue
            for M in user_counts:
                if M is not None and int(M) >= R.size:
                    continue
                Mv = R.size if M is None else int(M)
                cell_ss = np.random.SeedSequence([root.entropy, p_idx, n, Mv, 1])
                for d, ss in enumerate(cell_ss.spawn(draws)):
                    g = np.random.default_rng(ss)
                    Ru = R if M is None else g.choice(R, Mv, replace=False)
                    if scheme == "binomial":
                        r = 1 + g.binomial(n - 1, (Ru - 1) / (N - 1))
                    else:
                        r = 1 + g.hypergeometric(Ru - 1, N - Ru, n - 1)
                    for meth in methods:
                        t = estimate(r, N, n, metrics, method=meth, n_boot=n_boot, rng=g,
                                     scheme=scheme, confidence_level=confidence_level)
                        for _, row in t.iterrows():
                            truth = float(np.mean(metric_values(row["metric"], N)[Ru - 1]))
                            rows.append({
                                "dataset": dataset, "model": model, "N": N, "n": n, "M": Mv,
                                "draw": d, "method": meth, "metric": row["metric"], "K": row["K"],
                                "truth": truth, "estimate": row["estimate"],
                                "ci_low": row["ci_low"], "ci_high": row["ci_high"],
                                "covered": bool(row["ci_low"] <= truth <= row["ci_high"]),
                                "rel_width": (row["ci_high"] - row["ci_low"]) / truth if truth > 0
                                else np.nan,
                                "below_resolution": bool(row["K"] < (N - 1) / (n - 1))})
        if progress:
            print(f"  {dataset}/{model}: {time.perf_counter() - t0:.1f} s", flush=True)
    return pd.DataFrame(rows)




# ----------------------------------------------------------------------------
# the sampled hit ratio and the Sampling Theorem (KDD20 Sec 2, notebook 01)
# ----------------------------------------------------------------------------
def simulate_shr(global_ranks, N, n, ks, repeats, *, scheme="binomial", rng=None):
    """Sampled hit ratios of repeated item samplings of the same users (KDD20 eq 3).

    Each repeat draws every user's sampled rank from its fixed global rank
    (:func:`sampling_lib.sampling.sample_ranks`) and records
    ``SHR@k = mean_u 1{r_u <= k}`` for every k in ``ks``.

    Returns
    -------
    ndarray, shape (repeats, len(ks))

    References
    ----------
    KDD20 eq 3, Sec 2.2.

    Examples
    --------
    >>> simulate_shr([1, 1, 50], 50, 10, [1, 10], 2, rng=0).tolist()
    [[0.6666666666666666, 1.0], [0.6666666666666666, 1.0]]
    """
    ks = np.atleast_1d(np.asarray(ks))
    repeats = check_int(repeats, "repeats", low=1)
    rng = np.random.default_rng(rng)
    out = np.empty((repeats, ks.size))
    for i in range(repeats):
        r = sample_ranks(global_ranks, N, n, scheme=scheme, rng=rng)
        out[i] = (r[:, None] <= ks[None, :]).mean(axis=0)
    return out


def shr_moments(global_ranks, N, n, ks, repeats, *, schemes=("binomial", "hypergeometric"), rng=None):
    """Exact mean and variance of SHR@k (KDD20 eqs 4-5) next to Monte Carlo.

    For every model (``global_ranks`` maps a model to its users' global
    ranks), scheme and k: the formulas of :func:`sampling_lib.kernels.shr_mean_var`
    on the users' empirical rank distribution, and the mean and sample
    variance of ``repeats`` simulated SHR@k (:func:`simulate_shr`), with the
    z-scores of their differences (SE of the mean ``sqrt(Var/repeats)``, SE of
    the sample variance ``Var sqrt(2/(repeats-1))``, normal approximation).

    Returns
    -------
    pandas.DataFrame
        Columns ``model, scheme, k, E_formula, E_mc, Var_formula, Var_mc,
        z_mean, z_var``.

    References
    ----------
    KDD20 eqs 4-5.

    Examples
    --------
    >>> d = shr_moments({"a": np.array([1, 5, 20])}, 20, 5, [1, 2], 50, rng=0)
    >>> d.shape, list(d.columns[:4])
    ((4, 9), ['model', 'scheme', 'k', 'E_formula'])
    """
    from .kernels import shr_mean_var
    from .rankdist import empirical_pmf

    ks = np.atleast_1d(np.asarray(ks))
    rows = []
    for name, R in global_ranks.items():
        W = empirical_pmf(R, N)
        for scheme in schemes:
            mean, var = shr_mean_var(W, n, ks, len(R), scheme)
            shr = simulate_shr(R, N, n, ks, repeats, scheme=scheme, rng=rng)
            rows.append(pd.DataFrame({"model": name, "scheme": scheme, "k": ks.astype(int),
                                      "E_formula": mean, "E_mc": shr.mean(axis=0),
                                      "Var_formula": var, "Var_mc": shr.var(axis=0, ddof=1)}))
    d = pd.concat(rows, ignore_index=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        d["z_mean"] = (d.E_mc - d.E_formula) / np.sqrt(d.Var_formula / repeats)
        d["z_var"] = (d.Var_mc - d.Var_formula) / (d.Var_formula * np.sqrt(2 / (repeats - 1)))
    return d


def shr_tail_frequencies(global_ranks, N, n, ks, repeats, t, *, t_in_sd=(1.0, 2.0),
                         scheme="binomial", rng=None):
    """Simulated ``Pr(|SHR@k - E[SHR@k]| >= t)`` against Hoeffding and the normal tail.

    The deviations of ``repeats`` simulated SHR@k (:func:`simulate_shr`) from
    the exact mean are compared at the absolute deviation ``t`` and at
    ``t_in_sd`` multiples of the exact sd (KDD20 eq 5) with the Hoeffding bound
    ``2 exp(-2 M t^2)`` (:func:`sampling_lib.kernels.shr_hoeffding_bound`), the
    normal approximation ``2 Phi(-t / sd)``, and the exact Clopper-Pearson
    99.9% lower limit of the observed frequency.

    Returns
    -------
    pandas.DataFrame
        Columns ``k, t, t_in_sd, observed, cp_lower999, hoeffding, normal``.

    References
    ----------
    KDD20 Sec 2.4 (Hoeffding), eq 5.

    Examples
    --------
    >>> d = shr_tail_frequencies(np.arange(1, 101), 100, 10, [1], 200, 0.05, rng=0)
    >>> d[["k", "t_in_sd"]].round(2).values.tolist()[0][0], len(d)
    (1.0, 3)
    """
    from scipy import stats

    from .kernels import shr_hoeffding_bound, shr_mean_var
    from .rankdist import empirical_pmf

    R = np.asarray(global_ranks)
    ks = np.atleast_1d(np.asarray(ks))
    mean, var = shr_mean_var(empirical_pmf(R, N), n, ks, R.size, scheme)
    dev = np.abs(simulate_shr(R, N, n, ks, repeats, scheme=scheme, rng=rng) - mean)
    rows = []
    for j, k in enumerate(ks):
        sd = math.sqrt(var[j])
        for tt in (t, *(c * sd for c in t_in_sd)):
            hits = int((dev[:, j] >= tt).sum())
            rows.append(dict(k=int(k), t=tt, t_in_sd=tt / sd, observed=hits / repeats,
                             cp_lower999=stats.beta.ppf(0.001, hits, repeats - hits + 1) if hits else 0.0,
                             hoeffding=shr_hoeffding_bound(R.size, tt), normal=2 * stats.norm.sf(tt / sd)))
    return pd.DataFrame(rows)


def expected_shr_gaps(pairs, n_values, schemes=("binomial", "hypergeometric")):
    """Differences of the expected sampled curves of pairs of models (KDD20 Thm 2.1).

    For every pair ``(pmf1, pmf2)`` of global rank distributions, sample-set
    size n and scheme: ``d_k = E[SHR1@k] - E[SHR2@k]`` for k = 1..n
    (:func:`sampling_lib.kernels.expected_shr_curve`, exact). The Sampling
    Theorem says ``d_k >= 0`` for all k when pmf1 dominates pmf2.

    Returns
    -------
    pandas.DataFrame
        One row per (pair, n, scheme): ``min_gap, max_gap, k_at_min, k_at_max``,
        ``min_gap_k_lt_n`` (k = n left out: E[SHR@n] = 1 for every model),
        ``share_k_strict`` (fraction of k < n with d_k > 1e-12) and ``flips``
        (d changes sign over k beyond rounding: some d_k > 1e-12 and some < -1e-12).

    References
    ----------
    KDD20 Thm 2.1.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> m = synthetic_models(300)
    >>> g = expected_shr_gaps([(m["beta_a0.25"], m["beta_a0.50"])], [10, 50])
    >>> bool((g.min_gap >= -1e-12).all()), bool(g.flips.any())
    (True, False)
    """
    from .kernels import expected_shr_curve

    rows = []
    for i, (p1, p2) in enumerate(pairs):
        for n in n_values:
            for scheme in schemes:
                d = expected_shr_curve(p1, n, scheme) - expected_shr_curve(p2, n, scheme)
                rows.append(dict(pair=i, n=int(n), scheme=scheme, min_gap=d.min(), max_gap=d.max(),
                                 k_at_min=int(d.argmin()) + 1, k_at_max=int(d.argmax()) + 1,
                                 min_gap_k_lt_n=d[:-1].min(), share_k_strict=float(np.mean(d[:-1] > 1e-12)),
                                 flips=bool(d.max() > 1e-12 and d.min() < -1e-12)))
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------
# mapping functions f(k) (KDD20 Secs 3-4, notebook 02)
# ----------------------------------------------------------------------------
def beta_map_accuracy(N, n, a_values):
    """The Beta map f(k; a) three ways, per a: log space, literal recurrence, exact.

    For each a: ``f(1;a), f(2;a)``, ``f(n;a)`` by the literal recurrence (KDD20
    eq 16) and in log space (both should equal N, KDD20 Lemma 3.1), and the
    largest relative error over k of the log-space map and of the recurrence
    against the 50-digit reference (:func:`sampling_lib.mapping.beta` with
    ``method="exact"``).

    Returns
    -------
    pandas.DataFrame
        Columns ``a, f(1;a), f(2;a), f(n;a) recurrence, f(n;a) log-space,
        max rel err log-space vs exact, max rel err recurrence vs exact``.

    References
    ----------
    KDD20 eqs 15-16, Lemma 3.1.

    Examples
    --------
    >>> d = beta_map_accuracy(500, 20, [0.5, 1.0])
    >>> bool((d["max rel err log-space vs exact"] < 1e-12).all())
    True
    """
    from .mapping import beta

    rows = []
    for a in np.asarray(a_values, dtype=float):
        f_log, f_rec, f_ex = (beta(N, n, a, method=m) for m in ("logcdf", "recurrence", "exact"))
        rows.append({"a": a, "f(1;a)": f_log[0], "f(2;a)": f_log[1],
                     "f(n;a) recurrence": f_rec[-1], "f(n;a) log-space": f_log[-1],
                     "max rel err log-space vs exact": np.max(np.abs(f_log / f_ex - 1)),
                     "max rel err recurrence vs exact": np.max(np.abs(f_rec / f_ex - 1))})
    return pd.DataFrame(rows)


def beta_map_steps(N, n, a_values):
    """The approximate linearity of the Beta map (KDD20 Sec 3.3), per a and k = 2..n.

    ``step`` = (f(k;a) - f(k-1;a)) / ((N-1)/n), and ``ratio_error`` =
    |y_k / y_{k-1} - (1 + (a-1)/(k-1))| with y_k = (f(k;a)-1)^a - (f(k-1;a)-1)^a
    (y_1 = (f(1;a)-1)^a), the identity of KDD20 Sec 3.3.

    Returns
    -------
    pandas.DataFrame
        Columns ``a, k, step, ratio_error``.

    References
    ----------
    KDD20 Sec 3.3.

    Examples
    --------
    >>> d = beta_map_steps(3706, 100, [0.5])
    >>> bool(d.ratio_error.max() < 1e-10), bool(abs(d.step[d.k >= 5] - 1).max() < 0.01)
    (True, True)
    """
    from .mapping import beta

    k = np.arange(2, n + 1)
    rows = []
    for a in np.asarray(a_values, dtype=float):
        f = beta(N, n, a)
        y = np.diff(np.concatenate(([0.0], (f - 1.0) ** a)))
        rows.append(pd.DataFrame({"a": a, "k": k, "step": np.diff(f) / ((N - 1) / n),
                                  "ratio_error": np.abs(y[1:] / y[:-1] - (1 + (a - 1) / (k - 1)))}))
    return pd.concat(rows, ignore_index=True)


def beta_map_differences(N, n, a_values, a_ref):
    """``f(k;a) - f(k;a_ref)`` for each a (KDD20 Fig 5, Remedy 2), log space and exact.

    Returns
    -------
    summary : pandas.DataFrame
        Per a: ``max_abs`` (max over k of |f(k;a) - f(k;a_ref)|, log-space map),
        ``max_abs_exact`` (the same with the exact reference), ``at_k``.
    curves : pandas.DataFrame
        Columns ``a, k, difference`` (log-space map).

    References
    ----------
    KDD20 Fig 5, Remedy 2.

    Examples
    --------
    >>> s, c = beta_map_differences(3706, 100, [0.3, 0.34], 0.3)
    >>> s.max_abs.tolist()[0], len(c)
    (0.0, 200)
    """
    from .mapping import beta

    f0, f0x = beta(N, n, a_ref), beta(N, n, a_ref, method="exact")
    rows, curves = [], []
    for a in np.asarray(a_values, dtype=float):
        d = beta(N, n, a) - f0
        dx = beta(N, n, a, method="exact") - f0x
        rows.append({"a": a, "max_abs": np.abs(d).max(), "max_abs_exact": np.abs(dx).max(),
                     "at_k": int(np.argmax(np.abs(d)) + 1)})
        curves.append(pd.DataFrame({"a": a, "k": np.arange(1, n + 1), "difference": d}))
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True)


def beta_map_monotonicity(N_values, n_values, a_values):
    """Monotonicity of f(k; a) in a over a grid of (N, n) (KDD20 Remedy 3).

    For every N and n <= N: :func:`sampling_lib.mapping.monotonicity_violation`
    in the increasing direction and in the direction printed in the paper.

    Returns
    -------
    pandas.DataFrame
        Columns ``N, n, pairs, violation (increasing), violation / N,
        smallest margin k<n (increasing), violation (printed inequality),
        at (a, b, k)``.

    References
    ----------
    KDD20 Remedy 3.

    Examples
    --------
    >>> d = beta_map_monotonicity([100], [2, 10], [0.5, 1.0, 2.0])
    >>> bool((d["violation / N"] <= 1e-12).all()), bool((d["violation (printed inequality)"] > 0).all())
    (True, True)
    """
    from .mapping import monotonicity_violation

    rows = []
    for N in N_values:
        for n in n_values:
            if n > N:
                continue
            v = monotonicity_violation(N, n, a_values, "increasing")
            w = monotonicity_violation(N, n, a_values, "decreasing")
            rows.append({"N": N, "n": n, "pairs": v["n_pairs"], "violation (increasing)": v["max_violation"],
                         "violation / N": v["max_violation"] / N,
                         "smallest margin k<n (increasing)": v["min_margin"],
                         "violation (printed inequality)": w["max_violation"],
                         "at (a, b, k)": (round(w["a"], 3), round(w["b"], 3), w["k"])})
    return pd.DataFrame(rows)


def max_position_difference(maps):
    """Largest difference between mapping functions, over k and pairs (KDD20 Remedy 2).

    Parameters
    ----------
    maps : mapping name -> f (length n) or sequence of f

    Returns
    -------
    pandas.DataFrame
        One row per pair: ``map_1, map_2, max_difference`` (max over k of
        |f_1(k) - f_2(k)|, in global rank positions), ``at_k``.

    Examples
    --------
    >>> max_position_difference({"a": [1.0, 5.0], "b": [1.0, 7.5]}).max_difference.tolist()
    [2.5]
    """
    import itertools

    items = list(maps.items()) if isinstance(maps, dict) else list(enumerate(maps))
    rows = []
    for (n1, f1), (n2, f2) in itertools.combinations(items, 2):
        d = np.abs(np.asarray(f1, dtype=float) - np.asarray(f2, dtype=float))
        rows.append({"map_1": n1, "map_2": n2, "max_difference": d.max(), "at_k": int(d.argmax() + 1)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------
# estimator comparisons over repeated samplings (notebooks 03-05)
# ----------------------------------------------------------------------------
def winner_counts(results, by=("K", "metric", "estimator"), *, estimate="estimate", truth="truth",
                  repeat="repeat", model="model"):
    """How often the estimates pick the truly best model (AAAI21 Table 4, TORS24 Table 6).

    ``results`` holds one row per (repeat, model, ``by``...) with an estimate
    and the true value. For every repeat and group of ``by`` the model with the
    largest estimate is compared with the model with the largest truth (first
    one in row order on ties); the hits are counted over the repeats.

    Returns
    -------
    pandas.DataFrame
        Columns ``by`` + ``correct`` (number of repeats whose pick was right)
        and ``repeats``.

    References
    ----------
    AAAI21 Table 4; TORS24 Tables 6-7.

    Examples
    --------
    >>> d = pd.DataFrame({"repeat": [0, 0, 1, 1], "model": ["A", "B"] * 2, "estimator": "x",
    ...                   "estimate": [0.2, 0.1, 0.1, 0.2], "truth": [0.3, 0.2, 0.3, 0.2]})
    >>> winner_counts(d, by=["estimator"]).to_dict("records")
    [{'estimator': 'x', 'correct': 1, 'repeats': 2}]
    """
    by = [by] if isinstance(by, str) else list(by)
    g = results.groupby([repeat, *by], sort=True)
    picked = results.loc[g[estimate].idxmax().to_numpy(), model].to_numpy()
    best = results.loc[g[truth].idxmax().to_numpy(), model].to_numpy()
    keys = g.size().reset_index()[[repeat, *by]]
    keys["correct"] = (picked == best).astype(int)
    out = keys.groupby(by, sort=True).agg(correct=("correct", "sum"), repeats=(repeat, "nunique"))
    return out.reset_index()


# ----------------------------------------------------------------------------
# the global rank distribution: MLE, WMLE, MES (AAAI21, TORS24 Sec 4, notebook 03)
# ----------------------------------------------------------------------------
def mle_mse_identifiable(pmf, M_values, repeats, *, rng=None):
    """Mean squared error of the MLE when n = N (identifiable), simulated and by formula.

    With n = N the kernel K is invertible and the MLE is asymptotically normal:
    ``E||pi_hat - P||^2 ~ tr(K^-T Cov(P~) K^-1) / M`` with ``Cov = diag(q) - q q^T``,
    ``q = K^T P``. Each repeat draws the sampled-rank counts of M users from
    Multinomial(M, q) and runs the converged MLE (SQUAREM, tol 1e-10).

    Returns
    -------
    pandas.DataFrame
        Columns ``M, mse_sim, se, mse_formula``.

    References
    ----------
    TORS24 eq 34; AAAI21 eq 18.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> d = mle_mse_identifiable(synthetic_models(4)["beta_a0.50"], [100_000], 20, rng=0)
    >>> bool(abs(d.mse_sim[0] - d.mse_formula[0]) < 4 * d.se[0])
    True
    """
    from .estimators import mle
    from .kernels import kernel

    P = np.asarray(pmf, dtype=float)
    N = P.size
    K = kernel(N, N)
    q = P @ K
    cov = np.diag(q) - np.outer(q, q)
    trace_term = np.trace(np.linalg.solve(K.T, np.linalg.solve(K.T, cov).T))   # tr(K^-T cov K^-1)
    rng = np.random.default_rng(rng)
    rows = []
    for M in M_values:
        sq = np.empty(repeats)
        for i in range(repeats):
            r = np.repeat(np.arange(1, N + 1), rng.multinomial(M, q))
            sq[i] = np.sum((mle(r, N, N, tol=1e-10, max_iter=100_000, accelerate="squarem") - P) ** 2)
        rows.append(dict(M=M, mse_sim=sq.mean(), se=sq.std(ddof=1) / np.sqrt(repeats),
                         mse_formula=trace_term / M))
    return pd.DataFrame(rows)


def mle_consistency(pmf, n, M_values, repeats, *, conv_tol=1e-4, metric="recall@10", rng=None):
    """The MLE as the number of users grows, N > n: fitted sampled-rank law and metric error.

    For every M and repeat, M users are drawn from ``pmf`` with their sampled
    ranks, and two MLEs are fitted: the papers' 100 EM iterations and the
    converged one (SQUAREM to certified gap ``conv_tol``, warnings silenced).
    Recorded: ``q_error`` = ||K^T pi_hat - K^T P||_1 (the sampled-rank law,
    which is identifiable) and the relative error of ``metric``.

    Returns
    -------
    pandas.DataFrame
        Columns ``M, estimator, q_error, rel_error``.

    References
    ----------
    AAAI21 eq 18; TORS24 eq 34.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> d = mle_consistency(synthetic_models(300)["beta_a0.35"], 30, [500], 1, rng=0)
    >>> d.estimator.tolist()
    ['MLE (EM, 100 it.)', 'MLE* (gap <= conv_tol)']
    """
    import warnings

    from .estimators import mle
    from .exceptions import ConvergenceWarning
    from .kernels import kernel

    P = np.asarray(pmf, dtype=float)
    N = P.size
    K = kernel(N, n)
    q = P @ K
    F = metric_values(metric, N)
    rng = np.random.default_rng(rng)
    rows = []
    for M in M_values:
        for _ in range(check_int(repeats, "repeats", low=1)):
            r = sample_ranks(draw_global_ranks(P, M, rng=rng), N, n, rng=rng)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                fits = {"MLE (EM, 100 it.)": mle(r, N, n),
                        "MLE* (gap <= conv_tol)": mle(r, N, n, tol=conv_tol, max_iter=20_000, accelerate="squarem")}
            for lab, p_hat in fits.items():
                rows.append(dict(M=M, estimator=lab, q_error=np.abs(p_hat @ K - q).sum(),
                                 rel_error=abs(p_hat @ F - P @ F) / (P @ F)))
    return pd.DataFrame(rows)


#: The estimators of AAAI21 Tables 2-4 (and the converged MLE*), in table order.
RANK_DISTRIBUTION_ESTIMATORS = ("CLS", "BV 0.1", "BV 0.01", "MLE", "WMLE", "MES", "MLE*")


def rank_distribution_study(ranks, truth, n, repeats, *, metrics=("recall", "ndcg", "ap"), K_values=(10,),
                            eta=0.01, C=10, conv_tol=1e-4, K_curve=50, rng=None):
    """AAAI21's main experiment: P(R) estimators over repeated item samplings.

    For every model (``ranks``: its users' global ranks; ``truth``: the P(R)
    the metrics are computed from) and repeat, the users' sampled ranks are
    drawn and :data:`RANK_DISTRIBUTION_ESTIMATORS` are fitted: CLS, BV with
    gamma 0.1 and 0.01, MLE (100 EM iterations), WMLE (NDCG weight, constant C),
    MES (TORS24 form, entropy weight ``eta``) and MLE* (SQUAREM to gap
    ``conv_tol``). Each estimate of ``metric@K`` is ``w @ F``; for MLE, WMLE and
    MES also the mean relative errors of P(R) and of its CDF over R <= K_curve.

    Returns
    -------
    dict
        ``results``: DataFrame ``model, repeat, estimator, metric, K, estimate,
        truth`` (metrics ``_pmf_err`` / ``_cdf_err`` hold those relative errors);
        ``mean_pmf``: {(model, estimator): P(R) averaged over the repeats};
        ``min_em_step``: smallest relative step of every (weighted) EM
        log-likelihood trace (MLE, WMLE, MLE*; >= 0 when EM ascends);
        ``first_ranks``: {model: sampled ranks of repeat 0}.

    References
    ----------
    AAAI21 eqs 19-27, Tables 2-4, Fig 2; TORS24 Sec 4.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> P = synthetic_models(200)["beta_a0.35"]
    >>> out = rank_distribution_study({"a": draw_global_ranks(P, 300, rng=0)}, {"a": P}, 20, 1, rng=1)
    >>> sorted(out["results"].estimator.unique()) == sorted(RANK_DISTRIBUTION_ESTIMATORS)
    True
    """
    import warnings

    from .estimators import bv, cls, mes, mle_fit, wmle_fit
    from .exceptions import ConvergenceWarning

    rng = np.random.default_rng(rng)
    F = {(m, K): metric_values(f"{m}@{K}", len(next(iter(truth.values())))) for m in metrics for K in K_values}
    rows, mean_pmf, min_step, first = [], {}, np.inf, {}
    for mod, R in ranks.items():
        N, P = truth[mod].size, truth[mod]
        cdf = np.cumsum(P)[:K_curve]
        ok = P[:K_curve] > 0
        for rep in range(check_int(repeats, "repeats", low=1)):
            r = sample_ranks(R, N, n, rng=rng)
            first.setdefault(mod, r)
            f_mle, f_wmle = mle_fit(r, N, n), wmle_fit(r, N, n, weight="ndcg", C=C)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                f_star = mle_fit(r, N, n, tol=conv_tol, max_iter=20_000, accelerate="squarem")
            for t in (f_mle.loglik_trace, f_wmle.loglik_trace, f_star.loglik_trace):
                if t.size > 1:
                    min_step = min(min_step, float(np.min(np.diff(t) / np.abs(t[1:]))))
            W = dict(zip(RANK_DISTRIBUTION_ESTIMATORS,
                         (cls(r, N, n), bv(r, N, n, 0.1), bv(r, N, n, 0.01), f_mle.pmf, f_wmle.pmf,
                          mes(r, N, n, eta), f_star.pmf)))
            for e, w in W.items():
                mean_pmf[(mod, e)] = mean_pmf.get((mod, e), 0) + w / repeats
                rows += [(mod, rep, e, m, K, w @ Fm, P @ Fm) for (m, K), Fm in F.items()]
                if e in ("MLE", "WMLE", "MES"):
                    rows.append((mod, rep, e, "_pmf_err", K_curve,
                                 np.mean(np.abs(w[:K_curve][ok] - P[:K_curve][ok]) / P[:K_curve][ok]), 0.0))
                    rows.append((mod, rep, e, "_cdf_err", K_curve,
                                 np.mean(np.abs(np.cumsum(w)[:K_curve] - cdf) / cdf), 0.0))
    results = pd.DataFrame(rows, columns=["model", "repeat", "estimator", "metric", "K", "estimate", "truth"])
    return dict(results=results, mean_pmf=mean_pmf, min_em_step=min_step, first_ranks=first)


def mes_solver_check(sampled_ranks, N, n, eta, *, form="tors"):
    """The fast MES solver against cvxpy, and its optimality (KKT) condition.

    Solves MES (:func:`sampling_lib.estimators.mes_fit`) with the dual-Newton
    solver and with cvxpy, and evaluates the stationarity condition of the
    fast solution, ``log pi_R + (dE/dpi_R) / lam = const`` with
    ``E = ||K^T pi - P~||^2`` (TORS24 eq 36).

    Returns
    -------
    dict
        ``form, eta, lam, fast_objective, cvxpy_objective, rel_diff, max_abs_dpi,
        newton_steps, fast_s, cvxpy_s, cvxpy_solver, kkt_deviation``.

    References
    ----------
    AAAI21 eqs 24-27; TORS24 eqs 35-36.
    """
    from .estimators import mes_fit
    from .kernels import kernel

    r = np.asarray(sampled_ranks)
    t0 = time.perf_counter()
    fast = mes_fit(r, N, n, eta, form=form)
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = mes_fit(r, N, n, eta, form=form, solver="cvxpy")
    t_ref = time.perf_counter() - t0
    K = kernel(N, n)
    p_tilde = np.bincount(r - 1, minlength=n) / r.size
    stat = np.log(fast.pmf) + K @ (2 * p_tilde * (fast.pmf @ K - p_tilde)) / fast.lam
    return dict(form=form, eta=eta, lam=fast.lam, fast_objective=fast.objective, cvxpy_objective=ref.objective,
                rel_diff=abs(fast.objective - ref.objective) / abs(ref.objective),
                max_abs_dpi=float(np.abs(fast.pmf - ref.pmf).max()), newton_steps=fast.n_iter,
                fast_s=t_fast, cvxpy_s=t_ref, cvxpy_solver=ref.solver,
                kkt_deviation=float(np.abs(stat - np.average(stat, weights=fast.pmf)).max()))


# ----------------------------------------------------------------------------
# metric estimators over repeated samplings (TORS24 Secs 5-6, notebooks 04-05)
# ----------------------------------------------------------------------------
def metric_curves(weights, global_ranks, metrics=("recall", "ndcg", "ap"), K_max=50):
    """Estimated and true metric@K, K = 1..K_max, for several weight vectors.

    ``weights`` maps an estimator to its weight vector w (estimate = w @ F);
    the truth is the mean of F_K over the users' global ranks. Only the first
    K_max entries of w matter (F_K(R) = 0 for R > K).

    Returns
    -------
    pandas.DataFrame
        Columns ``estimator, metric, K, estimate, truth``.

    Examples
    --------
    >>> d = metric_curves({"exact": np.array([0.5, 0.5, 0.0])}, np.array([1, 2]), ["recall"], K_max=2)
    >>> d[["K", "estimate", "truth"]].values.tolist()
    [[1.0, 0.5, 0.5], [2.0, 1.0, 1.0]]
    """
    R = np.asarray(global_ranks)
    Ks = np.arange(1, K_max + 1)
    counts = np.bincount(np.minimum(R, K_max + 1), minlength=K_max + 2)[1:K_max + 1] / R.size
    frames = []
    for mt in metrics:
        Fm = np.stack([metric_values(f"{mt}@{k}", K_max) for k in Ks], axis=1)        # (K_max, K_max)
        truth = counts @ Fm
        for e, w in weights.items():
            frames.append(pd.DataFrame({"estimator": e, "metric": mt, "K": Ks,
                                        "estimate": np.asarray(w)[:K_max] @ Fm, "truth": truth}))
    return pd.concat(frames, ignore_index=True)


def average_relative_error(curves, by=("repeat", "model", "design", "estimator", "metric"), small_K=5):
    """TORS24's accuracy measure: the relative error |estimate - truth| / truth (in %),
    averaged over the cutoffs K with truth > 0, and over the first ``small_K`` of them.

    Returns
    -------
    pandas.DataFrame
        Columns ``by`` + ``rel_err, rel_err_small_K``.

    References
    ----------
    TORS24 Tables 4-5 ("average relative error over K = 1..50").

    Examples
    --------
    >>> d = pd.DataFrame({"estimator": "x", "K": [1, 2, 3], "estimate": [0.1, 0.3, 0.5], "truth": [0.0, 0.2, 0.5]})
    >>> average_relative_error(d, by=["estimator"], small_K=1).round(1).to_dict("records")
    [{'estimator': 'x', 'rel_err': 25.0, 'rel_err_small_K': 50.0}]
    """
    by = [c for c in by if c in curves.columns]
    d = curves[curves["truth"] > 0].sort_values([*by, "K"])
    d = d.assign(rel=100 * np.abs(d["estimate"] - d["truth"]) / d["truth"])
    g = d.groupby(by, sort=False)["rel"]
    return pd.DataFrame({"rel_err": g.mean(), "rel_err_small_K": g.apply(lambda x: x.iloc[:small_K].mean())}
                        ).reset_index()


def metric_estimator_study(ranks, N, repeats, methods, *, sample_sizes=(100,), adaptive=None,
                           metrics=("recall", "ndcg", "ap"), K_max=50, rng=None, **options):
    """TORS24's estimator comparison (Tables 4-7): repeated samplings x models x estimators.

    For every repeat and model (``ranks``: model -> users' global ranks in
    1..N), in this order: with ``adaptive=(n0, n_max)``, one adaptive sample
    (TORS24 Algorithm 1, :func:`sampling_lib.sampling.adaptive_sample_ranks`)
    estimated by the adaptive MLE (design ``"adaptive"``); then for every
    fixed n in ``sample_sizes`` one sample of the users' sampled ranks and the
    registry's ``methods`` fitted on it
    (:func:`sampling_lib.estimators.fit_estimators` with ``options``; design
    ``"n=<n>"``). MES falls back to cvxpy where its fast solver stops short;
    the fallbacks (ConvergenceWarning) are counted.

    Returns
    -------
    dict
        ``curves``: :func:`metric_curves` rows plus ``repeat, model, design,
        size`` (the average sample-set size), estimators upper-cased
        (``"ADAPTIVE_MLE"`` for the adaptive design);
        ``fits``: per (repeat, model, design) with ``"mle"`` in ``methods``, the
        l1 residual ``resid_l1`` = ||P~ - K^T pi_MLE||_1 of the MLE fit;
        ``first_weights``: {(model, design): {method: w}} of repeat 0;
        ``mes_fallbacks``: the ConvergenceWarning messages.

    References
    ----------
    TORS24 Secs 5-6, 8.3-8.4, Tables 4-7.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> R = {"a": draw_global_ranks(synthetic_models(300)["beta_a0.35"], 500, rng=0)}
    >>> out = metric_estimator_study(R, 300, 1, ["mle", "bv"], sample_sizes=[30], K_max=5, rng=1)
    >>> sorted(out["curves"].estimator.unique()), len(out["curves"])
    (['BV', 'MLE'], 30)
    """
    import warnings

    from .estimators import fit_estimators, get_estimator, sampled_pmf
    from .exceptions import ConvergenceWarning
    from .kernels import sampled_rank_pmf
    from .sampling import adaptive_sample_ranks

    rng = np.random.default_rng(rng)
    frames, fits, first = [], [], {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        for rep in range(check_int(repeats, "repeats", low=1)):
            for model, R in ranks.items():
                samples = []
                if adaptive is not None:
                    r, nu = adaptive_sample_ranks(R, N, *adaptive, rng=rng)
                    samples.append(("adaptive", float(nu.mean()), {"adaptive_mle": get_estimator("adaptive_mle")(r, N, nu)}))
                for n in sample_sizes:
                    r = sample_ranks(R, N, n, rng=rng)
                    W = fit_estimators(list(methods), r, N, n, **options)
                    samples.append((f"n={n}", float(n), W))
                    if "mle" in W:
                        fits.append(dict(repeat=rep, model=model, design=f"n={n}", resid_l1=float(
                            np.abs(sampled_pmf(r, n) - sampled_rank_pmf(W["mle"], n)).sum())))
                for design, size, W in samples:
                    if rep == 0:
                        first[(model, design)] = W
                    c = metric_curves({e.upper(): w for e, w in W.items()}, R, metrics, K_max)
                    frames.append(c.assign(repeat=rep, model=model, design=design, size=size))
    curves = pd.concat(frames, ignore_index=True)
    cols = ["repeat", "model", "design", "size", "estimator", "metric", "K", "estimate", "truth"]
    return dict(curves=curves[cols], fits=pd.DataFrame(fits), first_weights=first,
                mes_fallbacks=[str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)])


def simulate_mse_bound(xs, F, global_ranks, n, repeats, batches=20, *, rng=None):
    """The MSE of sampled-metric estimators x on a fixed population, simulated and exact.

    ``repeats`` item samplings of the fixed users (``global_ranks``, every rank
    1..N held by at least one user) give the estimate ``T_hat = mean_u x[r_u]``
    of ``T = sum_R P(R) F(R)`` for each ``x`` in ``xs``. Recorded: the simulated
    MSE and the exact one (:func:`sampling_lib.estimators.exact_mse`); the
    bound ``L = L1 + L2`` of TORS24 eqs 38-39
    (:func:`sampling_lib.estimators.mse_bound`); the simulated Jensen quantity
    ``S = sum_R P(R) (xbar_R - F(R))^2`` (mean L; xbar_R the mean of x over the
    users at rank R); and L1 (bias term) and L2 (variance term) estimated from
    ``batches`` batch means of xbar. Each simulated value has its standard error.

    Returns
    -------
    pandas.DataFrame
        Index ``estimator``; columns ``mse_sim, mse_sim_se, mse_exact, L1_sim,
        L1_se, L1, L2_sim, L2_se, L2, S_sim, S_se, L``.

    References
    ----------
    TORS24 eqs 38-39, App F.
    """
    from .estimators import exact_mse, mse_bound

    R = np.asarray(global_ranks)
    F = np.asarray(F, dtype=float)
    N, M = F.size, R.size
    counts = np.bincount(R - 1, minlength=N)
    if np.any(counts == 0):
        raise ValueError("global_ranks must hold every rank 1..N at least once")
    W = counts / M
    onehot = np.zeros((M, N))
    onehot[np.arange(M), R - 1] = 1.0
    r_mc = sample_ranks(np.tile(R, repeats), N, n, rng=rng).reshape(repeats, M)

    def se(a):
        return np.std(a, ddof=1) / np.sqrt(len(a))

    rows = []
    for name, x in xs.items():
        xr = x[r_mc - 1]                                   # (repeats, M) values x_{r_u}
        xbar = (xr @ onehot) / counts                      # (repeats, N) group means
        sq = (xr.mean(axis=1) - W @ F) ** 2
        S = ((xbar - F) ** 2) @ W
        L1_b, L2_b = [], []
        for chunk in np.array_split(xbar, batches):
            var_R = chunk.var(axis=0, ddof=1)
            L1_b.append(W @ ((chunk.mean(axis=0) - F) ** 2 - var_R / len(chunk)))
            L2_b.append(W @ var_R)
        b = mse_bound(x, F, N, n, W, M)
        rows.append(dict(estimator=name, mse_sim=sq.mean(), mse_sim_se=se(sq), mse_exact=exact_mse(x, F, W, n, M),
                         L1_sim=np.mean(L1_b), L1_se=se(L1_b), L1=b.L1, L2_sim=np.mean(L2_b), L2_se=se(L2_b),
                         L2=b.L2, S_sim=S.mean(), S_se=se(S), L=b.L))
    return pd.DataFrame(rows).set_index("estimator")


def mn_bv_growth(truth, n, priors, metrics, M_values, *, gamma=0.01):
    """Exact MSE of the MN and BV sampled metrics as the number of users M grows (TORS24 Sec 5.2).

    For every prior (``priors``: name -> P(R) or None for uniform) and metric:
    BV's x (independent of M) and MN's x(M) (eq 42), their exact MSE under the
    population ``truth`` (:func:`sampling_lib.estimators.exact_mse`), MN's
    bound terms L1, L2, L (eqs 38-39) and BV's variance term
    ``gamma * sum_R P(R) Var(x | R)``.

    Returns
    -------
    pandas.DataFrame
        Columns ``prior, metric, M, MN_mse, BV_mse, MN_L1, MN_L2, MN_L, BV_var_term``.

    References
    ----------
    TORS24 eqs 9, 38-42, Sec 5.2.
    """
    from .estimators import bv_sampled_metric, exact_mse, mn_sampled_metric, mse_bound

    truth = np.asarray(truth, dtype=float)
    N = truth.size
    rows = []
    for pname, prior in priors.items():
        p_vec = np.full(N, 1 / N) if prior is None else prior
        for met in metrics:
            F = metric_values(met, N)
            x_bv = bv_sampled_metric(F, N, n, gamma, prior)
            bv_var_term = gamma * (p_vec @ mse_bound(x_bv, F, N, n, prior, 1).var)
            for M in M_values:
                x_mn = mn_sampled_metric(F, N, n, prior, M)
                b = mse_bound(x_mn, F, N, n, prior, M)
                rows.append(dict(prior=pname, metric=met, M=M, MN_mse=exact_mse(x_mn, F, truth, n, M),
                                 BV_mse=exact_mse(x_bv, F, truth, n, M), MN_L1=b.L1, MN_L2=b.L2, MN_L=b.L,
                                 BV_var_term=bv_var_term))
    return pd.DataFrame(rows)


def mean_sd(grouped, decimals=2, sep="±"):
    """Table cells ``"mean±sd"`` of a grouped column, as the papers print them.

    Parameters
    ----------
    grouped : pandas SeriesGroupBy
    decimals : int
    sep : str

    Returns
    -------
    pandas.Series of str

    Examples
    --------
    >>> d = pd.DataFrame({"g": ["a", "a", "b", "b"], "v": [1.0, 3.0, 2.0, 2.0]})
    >>> mean_sd(d.groupby("g").v).to_dict()
    {'a': '2.00±1.41', 'b': '2.00±0.00'}
    """
    fmt = f"{{:.{decimals}f}}".format
    return grouped.mean().map(fmt) + sep + grouped.std().map(fmt)


# ----------------------------------------------------------------------------
# user sampling (TORS24 Sec 7, notebook 06)
# ----------------------------------------------------------------------------
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
    from .user_sampling import exact_proportion_coverage

    rows = []
    for m in m_values:
        mc = simulate_proportion_coverage(M, successes, m, repeats, confidence_level, margin=margin, rng=rng)
        ex = exact_proportion_coverage(M, successes, m, confidence_level, margin=margin)
        rows.append(dict(m=m, mc_coverage=mc["coverage"], exact_coverage=ex["coverage"], mc_se=mc["coverage_se"],
                         mean_halfwidth=mc["mean_halfwidth"], mc_margin_prob=mc["margin_met"],
                         exact_margin_prob=ex["margin_prob"]))
    return pd.DataFrame(rows)


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

    from .metrics import parse_metric
    from .user_sampling import hoeffding_bound, user_sampled_metric

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
    from .metrics import metric_from_ranks
    from .user_sampling import predicted_relative_error, user_sampled_metric

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


# ----------------------------------------------------------------------------
# AP@k under random rankings (AP25, notebook 07)
# ----------------------------------------------------------------------------
def ap_enumeration_check(N_max, k_max_wr, p_values):
    """The AP25 formulas next to exhaustive enumeration, on every small case.

    WOR (offline): every N <= ``N_max``, m in 0..N, k in 1..N: E and Var of
    AP@k from :mod:`sampling_lib.random_baseline` and from
    :func:`sampling_lib.testing.enumerate_ap_wor`, plus the literal printed Thm
    4.4 (N >= 4). WR (online): every p in ``p_values`` and k <= ``k_max_wr``
    against :func:`sampling_lib.testing.enumerate_ap_wr` (all 2^k patterns).

    Returns
    -------
    wor, wr : pandas.DataFrame
        Columns ``N, m, k, E formula, E enum, Var formula, Var enum, Var printed
        Thm 4.4`` and ``p, k, E formula, E enum, Var formula, Var enum``.

    References
    ----------
    AP25 Thms 4.2, 4.4, 5.1, 5.2.

    Examples
    --------
    >>> wor, wr = ap_enumeration_check(4, 3, [0.5])
    >>> bool(np.allclose(wor["Var formula"], wor["Var enum"])), len(wr)
    (True, 3)
    """
    from . import random_baseline as rb
    from . import testing

    rows = []
    for N in range(1, N_max + 1):
        ks = np.arange(1, N + 1)
        for m in range(N + 1):
            ex = testing.enumerate_ap_wor(N, m, ks)
            rows.append(pd.DataFrame({"N": N, "m": m, "k": ks, "E formula": rb.expected_ap_wor(N, m, ks),
                                      "E enum": ex.mean, "Var formula": rb.var_ap_wor(N, m, ks), "Var enum": ex.var,
                                      "Var printed Thm 4.4": testing.var_ap_wor_paper(N, m, ks) if N >= 4
                                      else np.full(ks.size, np.nan)}))
    ks = np.arange(1, k_max_wr + 1)
    wr = [pd.DataFrame({"p": p, "k": ks, "E formula": rb.expected_ap_wr(p, ks), "E enum": ex.mean,
                        "Var formula": rb.var_ap_wr(p, ks), "Var enum": ex.var})
          for p in p_values for ex in [testing.enumerate_ap_wr(p, ks)]]
    return pd.concat(rows, ignore_index=True), pd.concat(wr, ignore_index=True)


def ap_monte_carlo(grid_wor, grid_wr, n_sims, *, rng=None):
    """E and Var of AP@k by Monte Carlo next to the AP25 formulas, with z-scores.

    ``grid_wor``: (N, m, cutoffs) cells of the offline model; ``grid_wr``:
    (p, cutoffs) cells of the online one; ``n_sims`` draws per cell
    (:func:`sampling_lib.random_baseline.simulate_ap_summary`).

    Returns
    -------
    pandas.DataFrame
        Columns ``model, N, m, p, k, E formula, E MC, SE(E), Var formula, Var MC,
        SE(Var), z(E), z(Var)``.

    References
    ----------
    AP25 Thms 4.2, 4.4, 5.1, 5.2.
    """
    from . import random_baseline as rb

    rows = []
    for N, m, ks in grid_wor:
        s = rb.simulate_ap_summary("wor", ks, n_sims, N=N, m=m, rng=rng)
        rows.append(pd.DataFrame({"model": "WOR", "N": N, "m": m, "p": m / N, "k": ks,
                                  "E formula": rb.expected_ap_wor(N, m, ks), "E MC": s.mean, "SE(E)": s.se_mean,
                                  "Var formula": rb.var_ap_wor(N, m, ks), "Var MC": s.var, "SE(Var)": s.se_var}))
    for p, ks in grid_wr:
        s = rb.simulate_ap_summary("wr", ks, n_sims, p=p, rng=rng)
        rows.append(pd.DataFrame({"model": "WR", "N": np.nan, "m": np.nan, "p": p, "k": ks,
                                  "E formula": rb.expected_ap_wr(p, ks), "E MC": s.mean, "SE(E)": s.se_mean,
                                  "Var formula": rb.var_ap_wr(p, ks), "Var MC": s.var, "SE(Var)": s.se_var}))
    mc = pd.concat(rows, ignore_index=True)
    mc["z(E)"] = (mc["E MC"] - mc["E formula"]) / mc["SE(E)"]
    mc["z(Var)"] = (mc["Var MC"] - mc["Var formula"]) / mc["SE(Var)"]
    return mc


def ap_scenarios(scenarios, n_sims, *, rng=None):
    """E and Var of AP@k in AP25's scenarios: closed form, exact recursion, Monte Carlo.

    ``scenarios`` has columns ``scenario, N, m, p, k`` (AP25 Table 1, e.g.
    ``sampling_lib.testing.paper_table("ap25_table2")``). For every scenario
    and quantity (E_WOR, E_WR, Var_WOR, Var_WR): the formula, the recursion of
    :mod:`sampling_lib.testing` and ``n_sims`` Monte Carlo draws with their
    standard error (WOR then WR draws per scenario).

    Returns
    -------
    pandas.DataFrame
        Columns ``scenario, N, m, p, k, quantity, formula, recursion, MC, MC se``.

    References
    ----------
    AP25 Tables 1-2.
    """
    from . import random_baseline as rb
    from . import testing

    rows = []
    for sc in scenarios.itertuples(index=False):
        N, m, p, k = int(sc.N), int(sc.m), float(sc.p), int(sc.k)
        rec_o, rec_n = testing.recursive_ap_moments_wor(N, m, k), testing.recursive_ap_moments_wr(p, k)
        so = rb.simulate_ap_summary("wor", k, n_sims, N=N, m=m, rng=rng)
        sn = rb.simulate_ap_summary("wr", k, n_sims, p=p, rng=rng)
        vals = {"E_WOR": (rb.expected_ap_wor(N, m, k), rec_o.mean, so.mean, so.se_mean),
                "E_WR": (rb.expected_ap_wr(p, k), rec_n.mean, sn.mean, sn.se_mean),
                "Var_WOR": (rb.var_ap_wor(N, m, k), rec_o.var, so.var, so.se_var),
                "Var_WR": (rb.var_ap_wr(p, k), rec_n.var, sn.var, sn.se_var)}
        rows += [dict(scenario=sc.scenario, N=N, m=m, p=p, k=k, quantity=q, formula=f, recursion=r, MC=s,
                      **{"MC se": se}) for q, (f, r, s, se) in vals.items()]
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------
# real data end to end (KDD20 Appendix A, TORS24 Sec 8.3, notebook 08)
# ----------------------------------------------------------------------------
def sampled_rank_as_global(sampled_ranks, N, n):
    """The naive 'estimator' behind a sampled metric: the sampled rank taken as the global rank.

    Returns the empirical distribution of r_u placed on 1..n of the N global
    ranks, so ``w @ F`` is the metric computed on the sampled ranks (the
    sampled hit ratio SHR@k for Recall, KDD20 eq 3). Same call as the
    registry's estimators (:func:`sampling_lib.experiments.run_experiment`).

    Examples
    --------
    >>> sampled_rank_as_global(np.array([1, 1, 3]), 5, 3).round(3).tolist()
    [0.667, 0.0, 0.333, 0.0, 0.0]
    """
    r = np.asarray(sampled_ranks)
    return np.bincount(r - 1, minlength=N)[:N] / r.size


def expected_shr(global_ranks, N, n, ks, scheme, *, n_candidates=None):
    """Exact mean and variance of SHR@k for fixed users (KDD20 eqs 4-5).

    ``"binomial"`` / ``"hypergeometric"``: the users' empirical rank
    distribution in :func:`sampling_lib.kernels.shr_mean_var` (pass ranks
    computed with the training items kept in place); ``"actual"``: each user's
    negatives drawn from its own ``n_candidates`` never-interacted items
    (:func:`sampling_lib.recommenders.actual_shr_mean_var`, ranks with the
    training items last).

    Returns
    -------
    mean, var : ndarray, shape (len(ks),)
    """
    from .kernels import shr_mean_var
    from .rankdist import empirical_pmf
    from .recommenders import actual_shr_mean_var

    R = np.asarray(global_ranks)
    if scheme == "actual":
        return actual_shr_mean_var(R, n_candidates, n, ks)
    return shr_mean_var(empirical_pmf(R, N), n, ks, R.size, scheme)


def score_sampling_summary(shr_runs, ranks, ranks_all, N, n_candidates):
    """Simulated SHR@k from real scores next to its exact mean and variance (KDD20 App A).

    ``shr_runs`` is :func:`sampling_lib.experiments.score_sampling_experiment`'s
    table; ``ranks`` (training items last) and ``ranks_all`` (kept in place)
    are the global ranks per model; ``n_candidates`` the never-interacted items
    per user. For every (model, n, scheme, k): the mean and sd of the simulated
    SHR@k over the repeats, :func:`expected_shr` and the standard error of the
    mean ``sqrt(Var / repeats)``.

    Returns
    -------
    pandas.DataFrame
        Columns ``model, n, scheme, k, SHR (MC mean), MC sd, E[SHR] exact,
        Var exact, se``.

    References
    ----------
    KDD20 eqs 3-6, Appendix A Tables 5-6.
    """
    rows = []
    groups = shr_runs.groupby(["model", "n", "scheme"], sort=False)
    for m, n, scheme in sorted(groups.groups, key=lambda key: (list(ranks).index(key[0]), key[1])):
        g = groups.get_group((m, n, scheme))
        mc = g.groupby("k")["shr"]
        ks = np.array(sorted(g["k"].unique()))
        R = ranks[m] if scheme == "actual" else ranks_all[m]
        E, V = expected_shr(R, N, n, ks, scheme, n_candidates=n_candidates)
        rows.append(pd.DataFrame({"model": m, "n": n, "scheme": scheme, "k": ks,
                                  "SHR (MC mean)": mc.mean().loc[ks].to_numpy(),
                                  "MC sd": mc.std(ddof=1).loc[ks].to_numpy(), "E[SHR] exact": E, "Var exact": V,
                                  "se": np.sqrt(V / g["repeat"].nunique())}))
    return pd.concat(rows, ignore_index=True)


# ----------------------------------------------------------------------------
# estimating from your sampled ranks (notebook 09)
# ----------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------
# per-user item counts against one N (issue 14)
# ----------------------------------------------------------------------------
def n_items_comparison(global_ranks, n_candidates, n, *, single=None, methods=("logspline", "mle"),
                       scale=100, k_max=200, scheme="binomial"):
    """How close per-user N_u and single values of N get to the truth, without sampling noise.

    The sampled ranks are the *expected* counts of the per-user model (every
    user u with rank R_u among its N_u candidates contributes ``scale``
    P(r | R_u; N_u, n) users to cell (N_u, r), rounded: deterministic, about
    ``scale`` x M users), so what remains is the error of the model of N and
    the estimator's own bias, not item-sampling noise. Each estimator is fitted
    with the per-user N_u and with every single N of ``single``; the error is
    that of the estimated CDF of the rank, i.e. Recall@K, for K from the
    resolution ceil((max N_u - 1)/(n - 1)) to ``k_max``.

    Parameters
    ----------
    global_ranks : dict {model: array of int}
        R_u in 1..N_u (e.g. :func:`sampling_lib.experiments.global_ranks_from_data`
        with ``train_last=True``).
    n_candidates : array_like of int
        N_u of the same users (``info["n_candidates"]``).
    n : int
        Sample size.
    single : dict {label: int}, optional
        Single values of N; default min, median, mean and max of N_u.
    methods : sequence of str
        Registered estimators that accept per-user N.
    scale : int
        Users per user of the expected counts.
    k_max : int
    scheme : {"binomial", "hypergeometric"}

    Returns
    -------
    pandas.DataFrame
        One row per (model, method, N): ``model, method, N_label, N`` (-1 for
        per-user), ``sup_error`` (max over K of |estimated - true Recall@K|),
        ``mean_error`` (mean over K), ``K_min, K_max``.

    Examples
    --------
    >>> R = {"m": np.array([1, 3, 40, 7, 90, 2])}
    >>> t = n_items_comparison(R, [100, 120, 100, 90, 110, 120], 10, methods=("mle",), scale=20,
    ...                        k_max=60)
    >>> t.N_label.tolist()
    ['per-user', 'min', 'median', 'mean', 'max']
    """
    from .estimators import get_estimator
    from .kernels import kernel_entries

    Nu = np.asarray(n_candidates, dtype=np.int64)
    n = check_int(n, "n", low=2)
    scale = check_int(scale, "scale", low=1)
    if single is None:
        single = {"min": int(Nu.min()), "median": int(np.median(Nu)), "mean": int(round(Nu.mean())),
                  "max": int(Nu.max())}
    w = (int(Nu.max()) - 1) / (n - 1)
    Ks = np.arange(int(np.ceil(w)), check_int(k_max, "k_max", low=int(np.ceil(w))) + 1)
    rows = []
    for model, R in global_ranks.items():
        R = np.asarray(R, dtype=np.int64)
        if R.shape != Nu.shape or np.any(R < 1) or np.any(R > Nu):
            raise ValueError(f"global_ranks[{model!r}] must hold one rank per user in 1..N_u")
        cells = []
        for Nv in np.unique(Nu):
            sel = Nu == Nv
            c = np.round(scale * kernel_entries(int(Nv), n, R[sel], np.arange(1, n + 1),
                                                scheme).sum(axis=0)).astype(np.int64)
            cells += [(int(Nv), j + 1, int(c[j])) for j in np.flatnonzero(c)]
        cells = np.array(cells)
        rr, NN = np.repeat(cells[:, 1], cells[:, 2]), np.repeat(cells[:, 0], cells[:, 2])
        truth = np.array([np.mean(R <= k) for k in Ks])
        for meth in methods:
            est = get_estimator(meth, scheme=scheme)
            for label, Nv in [("per-user", None)] + list(single.items()):
                wv = est(rr, NN if Nv is None else int(Nv), n)
                cdf = np.cumsum(wv)
                err = np.abs(cdf[np.minimum(Ks, cdf.size) - 1] - truth)
                rows.append({"model": model, "method": meth, "N_label": label,
                             "N": -1 if Nv is None else int(Nv), "sup_error": float(err.max()),
                             "mean_error": float(err.mean()), "K_min": int(Ks[0]),
                             "K_max": int(Ks[-1])})
    return pd.DataFrame(rows)
