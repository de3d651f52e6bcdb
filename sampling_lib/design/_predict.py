"""The predicted cost and interval half-width of the default estimator under a design (:func:`predict`).

Part of :mod:`sampling_lib.design`.

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, Sec 6 (Algorithm 1, eq 44: cost).
.. [vdV98] van der Vaart. Asymptotic Statistics (1998), ch. 5 and 20 (M-estimators,
   the delta method and influence functions).
.. [Efron16] Efron. Empirical Bayes deconvolution estimates. Biometrika 103(1), 2016.

The package's docstring (:mod:`sampling_lib.design`) lists every reference of the planner.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from .._validation import check_float, check_int, check_scheme
from ..estimators import GRID_N_MAX, SENSITIVITY_FACTOR, cell_metric, penalty_matrix, prior_masses, spline_grid
from ..metrics import metric_matrix, parse_metrics
from ._law import _cost, design_law, resolution_width

__all__ = ["predict", "assurance_margin", "RATIO_PREDICTION_SD"]


def _metric_cells(parsed, grid):
    """Averages of F and F^2 over the grid cells (G, m) each (F = 0 beyond the largest K), read-only.

    Kept per (grid, metrics): a plan predicts hundreds of designs on the same grid (the grids come from
    ``spline_grid``'s cache, and each entry holds its grid, so an id is never reused while kept)."""
    key = (id(grid), tuple(parsed))
    hit = _METRIC_CELLS.get(key)
    if hit is not None and hit[0] is grid:
        return hit[1]
    H = min(grid.N, max(K for _, _, K in parsed))
    F = metric_matrix(parsed, H)
    out = (cell_metric(F, grid), cell_metric(F * F, grid))
    for a in out:
        a.setflags(write=False)
    if len(_METRIC_CELLS) >= 64:
        _METRIC_CELLS.clear()
    _METRIC_CELLS[key] = (grid, out)
    return out


_METRIC_CELLS = {}


def predict(design, prior, metrics=("recall@10", "ndcg@10"), *, M, confidence_level=0.95, scheme="binomial",
            alternatives=(), grid_n=None):
    """Expected cost and interval half-width of the default estimator under a design.

    Parameters
    ----------
    design : Design
    prior : LogsplineResult
        A fitted log-spline prior (e.g. of a pilot's sampled ranks,
        :func:`sampling_lib.estimators.logspline_fit`) on 1..N, N its length.
    metrics : str or sequence of str
    M : int, keyword-only
        Number of users of the evaluation.
    confidence_level : float, keyword-only
    scheme : {"binomial", "hypergeometric"}, keyword-only
    alternatives : sequence of LogsplineResult, keyword-only
        Other priors the pilot cannot tell apart from ``prior`` (e.g. its fits
        with the penalty divided and multiplied by
        :data:`sampling_lib.estimators.SENSITIVITY_FACTOR`): their predictions
        give the range ``halfwidth_low/high``.
    grid_n : int, optional, keyword-only
        The set size the prediction's rank grid is cut for (default the
        design's first-stage n, at most ``GRID_N_MAX`` = 4096, as the
        estimator's grid). :func:`plan` passes the pilot's n, so that every
        candidate shares one grid: its cells are exact or at most ~2% wide in
        R near the top, where a top-K metric's variance lives.

    Returns
    -------
    pandas.DataFrame
        One row per metric: ``design``, ``metric``, ``value`` (the metric under
        the prior), ``cost`` (expected items scored per user, held-out item
        included), ``cost_share`` (cost / N), ``halfwidth`` (predicted half-width
        of the interval), ``halfwidth_low/high`` (its range over ``prior`` and
        ``alternatives``), ``full_halfwidth`` (full ranking's: z sqrt(Var_P(F)/M)),
        ``ratio`` (halfwidth / full_halfwidth: the precision ratio) and
        ``ratio_high`` (halfwidth_high / full_halfwidth).

    Notes
    -----
    Let d be a user's final cell with P(d | R) from :func:`design_law`,
    q_d(beta) = sum_R g_beta(R) P(d | R), phi(d) = E[F(R) | d] the posterior
    mean, s(d) = E[B(R) | d] - E_g[B] the score of the spline coefficients,
    I = E[s s'] the information per user and Pen the penalty matrix. The
    estimate T_hat = (1/M) sum_u phi(d_u; beta_hat) with the penalized MLE
    beta_hat has the influence function
    phi(d) + A (I + Pen/M)^{-1} s(d), A = E[Cov(F(R), B(R) | d)] = sum_R g F B' -
    E[phi(d) E[B | d]'] (the derivative of E[phi] in beta), so
    Var(T_hat) ~ Var_d(phi + A (I + Pen/M)^{-1} s) / M (delta method,
    [vdV98] ch. 20). With full ranking phi = F and A = 0, so the ratio is 1.
    Below resolution under the design (K < :func:`resolution_width`) the
    default's interval is the union of its intervals at the penalty divided
    and multiplied by SENSITIVITY_FACTOR (:func:`sampling_lib.correct.estimate`,
    Notes); each is centred on its fit's shift -A (M I + Pen_k)^{-1} Pen_k beta
    and the union's half-width is predicted. A resolved metric gets the
    default's own interval.

    References
    ----------
    [vdV98] ch. 5, 20; [Efron16]; TORS24 eq 44 (cost of the ladder).

    Examples
    --------
    >>> from sampling_lib.estimators import logspline_fit
    >>> from sampling_lib.rankdist import synthetic_models, draw_global_ranks
    >>> from sampling_lib.sampling import sample_ranks
    >>> R = draw_global_ranks(synthetic_models(5000)["beta_a0.35"], 2000, rng=0)
    >>> fit = logspline_fit(sample_ranks(R, 5000, 50, rng=1), 5000, 50)
    >>> from sampling_lib.sampling import Design
    >>> t = predict(Design("ladder", 50, n_max=1600), fit, "recall@10", M=2000)
    >>> bool(t.ratio[0] < predict(Design("single", 50), fit, "recall@10", M=2000).ratio[0])
    True
    """
    M = check_int(M, "M", low=1)
    scheme = check_scheme(scheme)
    parsed = parse_metrics(metrics)
    z = stats.norm.ppf(0.5 + 0.5 * check_float(confidence_level, "confidence_level", 0.0, 1.0,
                                                low_open=True, high_open=True))
    N = int(prior.weights_grid.N)
    grid_n = min(design.n, GRID_N_MAX) if grid_n is None else check_int(grid_n, "grid_n", low=2, high=N)
    grid = spline_grid(N, grid_n, prior.knot_spacing, None, scheme)
    D = design_law(design, N, grid.mid, scheme)[3]          # P(final cell | R) on the grid: once
    return _predict_table(design, D, grid, prior, alternatives, parsed, M, z, scheme)


def _predict_table(design, D, grid, prior, alternatives, parsed, M, z, scheme):
    """:func:`predict`'s table from the design's law ``D`` on ``grid``."""
    return pd.DataFrame(_predict_columns(design, D, grid, prior, alternatives, parsed, M, z, scheme))


def _predict_columns(design, D, grid, prior, alternatives, parsed, M, z, scheme):
    """:func:`predict`'s columns as a dict of arrays (the planner stacks many without a DataFrame each)."""
    N = int(prior.weights_grid.N)
    value, cost, hw, fhw = _predict_one(design, D, grid, prior, parsed, M, z, scheme, prior.penalty)
    # the estimator keeps its own penalty whatever prior the truth is closer to
    if alternatives is None:            # no range asked for (plan(..., ranges=False))
        lo = hi = np.full(hw.shape, np.nan)
    else:
        others = [_predict_one(design, D, grid, a, parsed, M, z, scheme, prior.penalty)[2] for a in alternatives]
        lo, hi = np.minimum.reduce([hw, *others]), np.maximum.reduce([hw, *others])
    with np.errstate(divide="ignore", invalid="ignore"):        # a metric constant under the prior: no ratio
        ratio, ratio_high = hw / fhw, hi / fhw
    m = len(parsed)
    return {"design": [design.describe()] * m, "metric": [p[0] for p in parsed], "value": value,
            "cost": np.full(m, cost), "cost_share": np.full(m, cost / N), "halfwidth": hw, "halfwidth_low": lo,
            "halfwidth_high": hi, "full_halfwidth": fhw, "ratio": ratio, "ratio_high": ratio_high}


def influence_cells(g, B, D, Fc):
    """Per final cell of a design: (q, s, phi, EB), the cells' probabilities q (C',; cells of probability
    <= 1e-300 dropped), the score s = E[B | d] - E_g[B] (df, C'), the posterior means phi = E[F | d]
    (m, C') and E[B | d] (df, C'), from ``g`` (G,) prior masses of the grid cells, ``B`` (G, df) the spline
    basis there, ``D`` (G, C) the design's law P(final cell | R) at the cells' representative ranks and
    ``Fc`` (G, m) the metrics' cell averages (:func:`predict`, Notes). Cells add up: a caller may pass the
    law's columns in blocks and sum over them."""
    q = g @ D
    keep = q > 1e-300
    D, q = D[:, keep], q[keep]
    df = B.shape[1]
    # E[B | d] and phi(d) = E[F | d] in one product: (B g; F g)' D / q (no (G, C) posterior is formed)
    both = (np.concatenate([B, Fc], axis=1) * g[:, None]).T @ D / q[None, :]
    EB, phi = both[:df], both[df:]                     # (df, C), (m, C)
    s = EB - (B.T @ g)[:, None]
    return q, s, phi, EB


def influence_parts(g, B, D, Fc):
    """:func:`influence_cells` and the sums over the cells: (q, s, phi, info, A), the information per user
    I = E[s s'] (df, df) and A = E[Cov(F, B | d)] = sum_R g F B' - E[phi E[B | d]'] (m, df)."""
    q, s, phi, EB = influence_cells(g, B, D, Fc)
    info = (s * q) @ s.T                               # per-user information
    A = (g[:, None] * Fc).T @ B - (phi * q) @ EB.T     # (m, df)
    return q, s, phi, info, A


def sensitivity_factors(below):
    """The penalty factors whose intervals a prediction unions: 1/SENSITIVITY_FACTOR, 1 and
    SENSITIVITY_FACTOR when some metric is below resolution, else the fitted penalty alone."""
    return (1.0 / SENSITIVITY_FACTOR, 1.0, SENSITIVITY_FACTOR) if np.any(below) else (1.0,)


def union_interval(per, below, z):
    """(lo, hi) of the predicted interval about the estimate: from ``per`` {factor: (shift, sd)}, the union
    over the factors of shift -/+ z sd for the metrics ``below`` resolution, the fitted penalty's own
    (factor 1) for the others (:func:`predict`, Notes)."""
    lo = np.min([shift - z * sd for shift, sd in per.values()], axis=0)
    hi = np.max([shift + z * sd for shift, sd in per.values()], axis=0)
    shift, sd = per[1.0]
    return np.where(below, lo, shift - z * sd), np.where(below, hi, shift + z * sd)


def _predict_one(design, D, grid, prior, parsed, M, z, scheme, penalty):
    """(metric values, cost, predicted half-widths, full ranking's half-widths) under one prior,
    for the estimator with the log-spline ``penalty``; ``D`` is the design's law on ``grid``."""
    N = int(prior.weights_grid.N)
    g, B = prior_masses(prior.beta, grid), grid.B
    P = penalty_matrix(B.shape[1], penalty)
    Fc, F2c = _metric_cells(parsed, grid)              # (G, m)
    q, s, phi, info, A = influence_parts(g, B, D, Fc)
    # below resolution the default's interval is the union of the intervals at its penalty and at
    # the alternatives (penalty divided and multiplied by SENSITIVITY_FACTOR), each centred on its
    # own estimate: T_k ~ T + A (beta_k - beta) with the penalized fit's shift beta_k - beta =
    # -(M I + k Pen)^{-1} k Pen beta, and Var_k as above; the union's width is predicted. A design that
    # resolves every metric gets the default's own interval (the fitted penalty alone)
    below = np.array([K for _, _, K in parsed]) < resolution_width(design, N)
    per = {}
    for factor in sensitivity_factors(below):
        Pk = factor * P
        L = np.linalg.solve((info + Pk / M).T, A.T).T    # A (I + Pen/M)^{-1}
        IF = phi + L @ s
        sd = np.sqrt(np.maximum(((IF * IF) @ q - (IF @ q) ** 2) / M, 0.0))
        per[factor] = (-A @ np.linalg.solve(M * info + Pk, Pk @ prior.beta), sd)
    lo, hi = union_interval(per, below, z)
    value = g @ Fc
    full_var = (g @ F2c - value ** 2) / M
    cost = _cost(design, N, g, grid.mid, scheme)
    return value, cost, 0.5 * (hi - lo), z * np.sqrt(np.maximum(full_var, 0.0))


# ----------------------------------------------------------------------------
# the planner
# ----------------------------------------------------------------------------
#: The planner's measured error in the precision ratio, per metric: the SD of log(realized / predicted
#: ratio) of the design :func:`plan` chose, over the 29 cells of each metric of
#: ``benchmarks/bench_design.py`` (2026-11-28: MovieLens 100K, Last.fm 2K, Gowalla and Yelp2018, and
#: catalogues stretched to 10^5-10^6 items; N/n from 95 to 10^4; the realized ratios against a
#: 100,000-resample reference). Its mean was within 0.013 of 0. Leave one dataset out, the other datasets'
#: SD was 0.036-0.049 (NDCG@10) and 0.022-0.029 (Recall@10), and a margin from it at assurance 0.9 held
#: for 138 of 145 held-out cells of each metric over five runs (three choosing at assurance 0.5, two at
#: 0.9; ``bench_design.py --calibrate``; benchmarks/README.md). Precision is recall over K (the same ratio);
#: MRR@K is AP@K with one relevant item. Other metrics (``bench_design.py --metrics``, 2026-11-28, one run
#: each, the planner targeting all three): AP@10 0.048, AP@5 0.049 (the value here; leave one dataset out,
#: 0.043-0.053), Recall@5 0.034, Recall@20 0.023, NDCG@5 0.040, NDCG@20 0.032. With the values here the
#: margin held for 27 or 28 of the 29 cells of each (Recall@5's log error has a mean of -0.018: its
#: prediction errs high).
RATIO_PREDICTION_SD = {"recall": 0.026, "precision": 0.026, "ndcg": 0.045, "ap": 0.049, "mrr": 0.049}


def assurance_margin(metrics, assurance=0.9):
    """The factor by which :func:`plan` inflates a design's predicted ratio (or half-width) before comparing
    it with the target: exp(z sd), with z the standard normal quantile of ``assurance`` and sd the planner's
    measured prediction error in the precision ratio of each metric (:data:`RATIO_PREDICTION_SD`).

    The prediction error is about symmetric in log (benchmarks/README.md), so the design chosen with
    ``assurance`` a realizes a ratio at most its target with probability about a; ``assurance=0.5`` judges
    by the prediction itself (factor 1). "Realizes" is the benchmark's: the mean ratio over 10 simulated
    evaluations of the design; one evaluation's interval also varies around that mean with its data. With
    a half-width target the factor covers the design's part of the half-width (its ratio to full
    ranking's), not the pilot's error in the metric itself, which no choice of design changes (re-plan on
    a design run in part for that).

    Parameters
    ----------
    metrics : str or sequence of str
    assurance : float in [0.5, 1), default 0.9

    Returns
    -------
    numpy.ndarray
        One factor per metric, in order.

    Examples
    --------
    >>> assurance_margin(["recall@10", "ndcg@10"]).round(3).tolist()
    [1.034, 1.059]
    >>> assurance_margin("ndcg@10", 0.5).tolist()
    [1.0]
    """
    from ..metrics import METRICS

    assurance = check_float(assurance, "assurance", 0.5, 1.0, high_open=True)
    z = stats.norm.ppf(assurance)
    names = {f: name for name, f in METRICS.items() if name in RATIO_PREDICTION_SD}
    return np.array([np.exp(z * RATIO_PREDICTION_SD[names[METRICS[name]]])
                     for _, name, _ in parse_metrics(metrics)])


def _judged(table, col):
    """The value :func:`plan` compares with the target: the judged column times the assurance margin."""
    return table[col] * table.margin
