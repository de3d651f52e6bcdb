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
  :func:`simulate_ztest_rejections`, :func:`simulate_familywise_error`,
  :func:`proportion_coverage_table`, :func:`user_sampling_tails`,
  :func:`user_sampling_errors` (notebook 06);
* estimating from your sampled ranks: :func:`relative_rmse`,
  :func:`coverage_study` (notebook 09);
* the other notebooks' studies, defined by topic in private modules and public
  here: the sampled hit ratio and the Sampling Theorem (:func:`shr_moments`,
  :func:`shr_tail_frequencies`, :func:`expected_shr_gaps`; notebook 01), the
  mapping functions (:func:`beta_map_accuracy`, ...; notebook 02), the rank
  distribution (:func:`rank_distribution_study`, :func:`mle_consistency`, ...;
  notebook 03), estimators over repeated samplings
  (:func:`metric_estimator_study`, :func:`winner_counts`, ...; notebooks 03-05),
  AP@k under random rankings (:func:`ap_scenarios`, ...; notebook 07) and
  sampled hit ratios from real scores (:func:`score_sampling_summary`, ...;
  notebook 08).

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
import warnings

import numpy as np
import pandas as pd

from . import inference
from ._validation import (check_confidence_level, check_float, check_int, check_N_n, check_pmf,
                          check_probability, check_ranks, check_scheme)
from .kernels import log_kernel_rows
from .correct import compare, estimate
from .exceptions import MemoryLimitError
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
    "proportion_coverage_table",
    "user_sampling_tails",
    "user_sampling_errors",
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


def _root_entropy(rng):
    """Entropy of the root ``SeedSequence`` of a study: the seed itself, or drawn from a Generator."""
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError("rng must be a non-negative int seed or a numpy.random.Generator; got a bool")
    if isinstance(rng, (int, np.integer)):
        return check_int(rng, "rng", low=0)
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(2**63))
    raise TypeError(f"rng must be a non-negative int seed or a numpy.random.Generator; "
                    f"got {type(rng).__name__}")


def rank_populations(data=None, models=None, *, min_item_users=1, rng=0, max_dense_items=6000,
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
    rng : int or numpy.random.Generator, default 0
        Seeds the synthetic data, the random hold-out of untimed files, ALS
        and the tie-breaking (each from its own child stream of one
        ``SeedSequence``).
    max_dense_items : int, default 6000
        EASE inverts an items x items matrix: settings of EASE are skipped (and
        listed in ``info["skipped"]``) when the catalogue is larger. A model
        whose item x item matrix is over the per-array memory limit
        (:func:`sampling_lib._validation.max_array_bytes`) is skipped the same
        way, with a ``RuntimeWarning``.
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

    seed = _root_entropy(rng)
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
        try:
            model = make_recommender(name, **params).fit(split.train)
        except MemoryLimitError as exc:   # an item x item model on a large catalogue: skip, say so
            skipped.append(label)
            warnings.warn(f"model {label!r} skipped: {exc}", RuntimeWarning, stacklevel=2)
            continue
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
        Values >= the population size mean all users (each distinct count is
        evaluated once), so a small data set is still evaluated.
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
    from .estimators import Estimator

    scheme = check_scheme(scheme)
    draws = check_int(draws, "draws", low=1)
    max_K = check_int(max_K, "max_K", low=1)
    fns = _resolve(methods)
    root = np.random.SeedSequence(_root_entropy(rng))
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
            for M in _user_counts(user_counts, R.size):
                Mv = R.size if M is None else M
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
                    cache = {}       # fits shared by the estimators on these ranks (e.g. mes, mn_mes's prior)
                    for name, fn in fns.items():
                        w = fn(r, N, n, cache=cache) if isinstance(fn, Estimator) else fn(r, N, n)
                        ests[name] = w @ F
                    for name, e in ests.items():
                        with np.errstate(divide="ignore", invalid="ignore"):
                            rel = np.where(truth > 0, np.abs(e - truth) / truth, np.nan)
                        # one block of 2 max_K rows; the table is built once at the end
                        frames.append(((dataset, model, N, n, Mv, d, name), e, truth, rel,
                                       np.tile(Ks < w_res, 2)))
        if progress:
            print(f"  {dataset}/{model}: {time.perf_counter() - t0:.1f} s", flush=True)
    if not frames:
        raise ValueError(f"sample_sizes must contain a value below a population's N (no evaluation otherwise); "
                         f"got {list(sample_sizes)} and N = {sorted({int(N) for _, N in populations.values()})}")
    rows = 2 * max_K
    keys = list(zip(*(f[0] for f in frames)))
    cols = {c: np.repeat(np.asarray(v, dtype=object if c in ("dataset", "model", "estimator") else None), rows)
            for c, v in zip(("dataset", "model", "N", "n", "M", "draw", "estimator"), keys)}
    cols["metric"] = np.tile(np.repeat(["recall", "ndcg"], max_K).astype(object), len(frames))
    cols["K"] = np.tile(np.tile(Ks, 2), len(frames))
    for c, i in (("estimate", 1), ("truth", 2), ("rel_error", 3), ("below_resolution", 4)):
        cols[c] = np.concatenate([f[i] for f in frames])
    return pd.DataFrame(cols)


def _user_counts(user_counts, size):
    """The users per evaluation of a population of ``size`` users: None (all) for counts >= size, each once."""
    out = []
    for M in user_counts:
        M = None if M is None or int(M) >= size else int(M)
        if M not in out:
            out.append(M)
    return out


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
    root = np.random.SeedSequence(_root_entropy(rng))
    rows = []
    for p_idx, ((dataset, model), (R, N)) in enumerate(populations.items()):
        t0 = time.perf_counter()
        R = check_ranks(R, N, name=f"ranks of {dataset}/{model}")
        for n in sample_sizes:
            n = int(n)
            if n >= N:
                continue
            for M in _user_counts(user_counts, R.size):
                Mv = R.size if M is None else M
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


# the notebook studies by topic (private modules; their names are public here)
from ._studies.sampled_hit_ratio import *  # noqa: E402,F401,F403
from ._studies.sampled_hit_ratio import __all__ as _sampled_hit_ratio_all  # noqa: E402
from ._studies.mapping_functions import *  # noqa: E402,F401,F403
from ._studies.mapping_functions import __all__ as _mapping_functions_all  # noqa: E402
from ._studies.rank_distribution import *  # noqa: E402,F401,F403
from ._studies.rank_distribution import __all__ as _rank_distribution_all  # noqa: E402
from ._studies.metric_estimators import *  # noqa: E402,F401,F403
from ._studies.metric_estimators import __all__ as _metric_estimators_all  # noqa: E402
from ._studies.random_baseline import *  # noqa: E402,F401,F403
from ._studies.random_baseline import __all__ as _random_baseline_all  # noqa: E402
from ._studies.real_data import *  # noqa: E402,F401,F403
from ._studies.real_data import __all__ as _real_data_all  # noqa: E402

__all__ += (_sampled_hit_ratio_all + _mapping_functions_all + _rank_distribution_all + _metric_estimators_all
            + _random_baseline_all + _real_data_all)
