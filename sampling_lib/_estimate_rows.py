"""One model's corrected estimate: the fit on its sufficient statistic, the bootstrap, the interval and its row.

The machinery behind :func:`sampling_lib.estimate` and :func:`sampling_lib.compare` (their docstrings
state what every column means and why): the checked estimator for a statistic (no method switched
without saying so), the metric matrix on ranks 1..min(N, max K) only, the fit, how the bootstrap draws
the users (cells, coarse cells, or the tuples of paired models), the percentile interval, the union of
the alternatives' intervals below resolution, the clipping into the metric's range, and the half-width
full ranking of the same users would give (the precision ratio's reference).

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System. ACM TORS 2024
   (estimators Secs 2.5, 4-6).
.. [Efron93] Efron, Tibshirani. An Introduction to the Bootstrap (1993), ch. 13 (percentile interval).
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ._progress import stage
from ._validation import check_confidence_level
from .counts import RankCounts, bootstrap_loop, ranked_in_full
from .estimators import DEFAULT_METHOD, METHODS, POPULARITY_METHODS, estimator_spec, get_estimator
from .metrics import metric_matrix, metric_values

__all__ = ["ESTIMATE_COLUMNS", "POPULARITY_DEFAULT"]

#: The columns of :func:`sampling_lib.estimate`'s table, for every input (ranks, counts, scores, popularity).
#: Not applicable: ``sensitivity_low/high`` NaN for estimators without alternative tunings,
#: ``bound_low/high`` NaN unless the input is popularity-sampled with item weights, ``N`` / ``n``
#: <NA> when they vary per user, the ``*_ci_*`` and ``se`` columns NaN when ``n_boot=0``.
ESTIMATE_COLUMNS = (
    "model", "metric", "K", "naive", "naive_ci_low", "naive_ci_high", "estimate", "se", "ci_low",
    "ci_high", "method", "scheme", "users", "N", "n", "confidence_level", "n_boot", "sensitivity_low",
    "sensitivity_high", "bound_low", "bound_high", "below_resolution", "clipped", "full_halfwidth",
    "precision_ratio",
)
#: The metric matrix on ranks 1..min(N, max K) only (True), or on every rank 1..N (False:
#: the reference path of the tests and benchmarks/bench_scale.py; memory grows with N).
_METRIC_HEAD = True
#: The estimator of popularity-sampled input when ``method`` is None.
POPULARITY_DEFAULT = "pop_mle"


# ----------------------------------------------------------------------------
# metrics
# ----------------------------------------------------------------------------


def _naive_matrix(parsed, sizes, ranks):
    """Per-cell sampled-metric values F(r) on the cell's own sample size: (C, m)."""
    out = np.empty((ranks.size, len(parsed)))
    for ns in np.unique(sizes):
        sel = sizes == ns
        out[sel] = np.stack([metric_values(full, int(ns))[ranks[sel] - 1]
                             for full, _, _ in parsed], axis=1)
    return out


def _cells_of(stat):
    """(sample sizes, sampled ranks, user counts) per cell; a popularity log has one cell per user."""
    if isinstance(stat, RankCounts):
        return stat.sizes, stat.ranks, stat.counts
    return stat.sizes, stat.x + 1, np.ones(stat.M, dtype=np.int64)


def _cell_draws(fit, counts):
    """(``draw(k, rng)``, coarse, rows): how the bootstrap draws the users counted in ``counts``.

    ``draw`` returns k count vectors: Multinomial(M, counts / M) over the cells, or, where the
    fit offers coarse cells (:meth:`~sampling_lib.estimators.FittedEstimator.coarse_draws`:
    many cells with per-user N_u), a multinomial over the coarse cells, whose counts stand for
    their spread over the exact cells in proportion to ``counts`` (the conditional expectation
    of the exact draw given the coarse one; ``fit.replicates(Cb, coarse=True)``). ``rows``: one
    exact cell of every drawn cell (the naive metric of a drawn cell is that cell's: the coarse
    cells merge N_u only, at equal (n_u, r)).
    """
    counts = np.asarray(counts)
    M = int(counts.sum())
    coarse = fit.coarse_draws()
    if coarse is None:
        p = counts / M
        return (lambda k, g: g.multinomial(M, p, size=k)), False, np.arange(counts.size)
    index, n_coarse, _ = coarse
    ps = np.bincount(index, weights=counts, minlength=n_coarse) / M
    rows = np.zeros(n_coarse, dtype=np.int64)
    rows[index] = np.arange(index.size)
    return (lambda k, g: g.multinomial(M, ps, size=k)), True, rows


def _tuple_draws(fits, stats_, cell_of_user):
    """(tuples (T, models), their user counts, cells per model, coarse, {model: column}) of the paired bootstrap.

    A paired design's joint sufficient statistic is the count of users per tuple of the models'
    cells (columns in sorted-name order, so that the draws do not depend on the order the models
    were given). Where every model's fit draws on coarse cells (:func:`_cell_draws`: per-user N_u,
    many cells), the tuples of *coarse* cells are drawn instead, each model's coarse counts
    spread over its exact cells as in :func:`estimate`, when that moves the first-order bootstrap
    variance of every metric's difference of every pair of models by at most
    ``COARSE_DRAW_MAX_SHARE`` (:func:`sampling_lib.counts.coarse_share` of psi_a - psi_b, the
    models' influence values per user, against the difference of their coarse means; a paired
    difference of similar models has a small variance, so the bound is checked on it, not only on
    each model's own). Else the exact tuples (at 10^5 users with per-user N_u nearly one per user).
    """
    from .counts import coarse_means, coarse_share
    from .estimators import COARSE_DRAW_MAX_SHARE

    order = sorted(fits)
    col = {m: k for k, m in enumerate(order)}
    U = np.stack([cell_of_user[m] for m in order], axis=1)
    tuples, tcount = np.unique(U, axis=0, return_counts=True)
    exact = tuples, tcount, [_cells_of(stats_[m])[2].size for m in order], False, col
    draws = [fits[m].coarse_draws() for m in order]
    psi = [None if d is None else fits[m].influence() for m, d in zip(order, draws)]
    if any(x is None for x in psi):
        return exact
    p = tcount / tcount.sum()
    bars = [coarse_means(x, _cells_of(stats_[m])[2], d[0], d[1])[d[0]] for m, x, d in zip(order, psi, draws)]
    for a in range(len(order)):
        for b in range(a + 1, len(order)):
            D = psi[a][tuples[:, a]] - psi[b][tuples[:, b]]
            Db = bars[a][tuples[:, a]] - bars[b][tuples[:, b]]
            if np.any(coarse_share(D, Db, p) > COARSE_DRAW_MAX_SHARE):
                return exact
    Uc = np.stack([d[0][U[:, k]] for k, d in enumerate(draws)], axis=1)
    ct, ccount = np.unique(Uc, axis=0, return_counts=True)
    return ct, ccount, [d[1] for d in draws], True, col


def _n_items_of(stat):
    """Item counts N_u of the cells (RankCounts) or users (PopularityLog)."""
    return stat.n_items if isinstance(stat, RankCounts) else stat.N_u


# ----------------------------------------------------------------------------
# estimators on the sufficient statistic
# ----------------------------------------------------------------------------
def _check_method(method, stat, refit_prior=True, scheme="binomial"):
    """The registered estimator for ``stat`` (the default of its input kind when None)."""
    if not isinstance(stat, RankCounts):
        spec = estimator_spec(POPULARITY_DEFAULT if method is None else method)
        if spec.input != "popularity":
            raise ValueError(f"method must be one of {list(POPULARITY_METHODS)} for popularity-sampled input; "
                             f"got {spec.name!r} (an estimator of sampled ranks among uniform negatives)")
        if refit_prior is False:
            raise ValueError("refit_prior=False keeps a fitted prior fixed; the popularity estimators have none")
        return spec.name
    varying = stat.size_values.size > 1
    full = ranked_in_full(stat.sizes, stat.n_items, scheme)
    spec = estimator_spec(DEFAULT_METHOD if method is None else method)
    if spec.input != "ranks":
        raise ValueError(f"method must be one of {list(METHODS)} for sampled ranks; got {spec.name!r} (an "
                         "estimator of popularity-sampled negatives: a scores table with item weights or q)")
    if varying and not spec.varying_sizes:
        able = [m for m in METHODS if estimator_spec(m).varying_sizes]
        per = np.bincount(np.searchsorted(stat.size_values, stat.sizes), weights=stat.counts,
                          minlength=stat.size_values.size)
        common = int(stat.size_values[int(np.argmax(per))])
        others = int(round(stat.counts.sum() - per.max()))
        if (stat.size_values < common).any() and not (stat.size_values > common).any():
            # a few short sets (NCF lines that list the held-out item among their negatives)
            choice = (f"{others:,} of {int(stat.counts.sum()):,} users have fewer than {common}: score their missing "
                      f"negatives, or use the users with n = {common} (--common-size-only), or a method taking "
                      f"per-user sizes: {', '.join(able)}")
        else:
            choice = (f"sets up to {int(stat.size_values.max()):,} (a nested design: leaving users out would bias); "
                      f"use a method taking per-user sizes: {', '.join(able)}")
        raise ValueError(f"method={spec.name!r} needs one common sample size: {choice}")
    if full.any() and scheme == "binomial" and not spec.full_ranking:
        # without replacement the kernel at n = N is the point mass: every estimator is exact there
        able = [m for m in METHODS if estimator_spec(m).full_ranking]
        raise ValueError(f"method={spec.name!r} cannot take users ranked in full (sample_size = n_items: "
                         f"{int(stat.counts[full].sum())} users) under scheme='binomial'; use one of {able}")
    if refit_prior is False and spec.prior is None:
        raise ValueError(f"refit_prior=False keeps a fitted prior fixed; method={spec.name!r} has none "
                         f"(the estimators with one: {[m for m in METHODS if estimator_spec(m).prior]})")
    return spec.name


def _metric_head(parsed, N):
    """(F, H): the metric matrix on ranks 1..H, H = min(N, max K), and H.

    Every metric of :data:`sampling_lib.metrics.METRICS` is a top-K metric,
    F(R) = 0 for R > K (metrics module docstring), so ranks beyond the
    largest cutoff contribute nothing to ``w @ F`` and the estimate needs only
    ``w[:H] @ F[:H]``: nothing of length N is formed here. With
    ``_METRIC_HEAD = False`` the matrix covers every rank 1..N (reference path).
    """
    H = N if not _METRIC_HEAD else min(N, max(K for _, _, K in parsed))
    return metric_matrix(parsed, H), H


def _metric_range(F, N):
    """(low, high) of every metric over ranks 1..N from its values ``F`` on ranks 1..H.

    Ranks H+1..N (if any) have value 0 (top-K metrics, :func:`_metric_head`).
    """
    lo, hi = F.min(axis=0), F.max(axis=0)
    if F.shape[0] < N:
        lo, hi = np.minimum(lo, 0.0), np.maximum(hi, 0.0)
    return lo, hi


def _fit(method, stat, N, parsed, scheme, options, refit_prior, F):
    """The registry's estimator fitted on the sufficient statistic (bootstrap-ready).

    ``stat`` carries the per-cell item counts; ``N`` is their maximum; ``F``
    the metric matrix on ranks 1..H (:func:`_metric_head`, of this or a larger
    N: rows beyond N are dropped).
    """
    opts = dict(options or {})
    spec = estimator_spec(method)
    if spec.horizon_option is not None and spec.horizon_option in spec.options:
        opts.setdefault(spec.horizon_option, min(N, max(K for _, _, K in parsed)))
    est = get_estimator(method, scheme=scheme, **opts)
    return est.fit_counts(stat, N, F[:N], refit_prior=refit_prior)


def _resolution(stat, scheme="binomial"):
    """The rank w below which a top-K metric is inside the first sampled bin (K < w: below resolution).

    Sampled ranks: w = (N - 1)/(n - 1) with the largest N_u and the smallest
    n_u of the users at sampled rank 1 (KDD20 Sec 2.2: global ranks R < w
    almost always give sampled rank 1; in a nested design these users got the
    largest sets). With users ranked in full (n_u = N_u) the top of P(R) is
    observed, not extrapolated: w = 1.
    Popularity-sampled negatives: the first bin holds the candidates with
    q-mass above below about 1/(n - 1), i.e. w = (N - 1) rho(1/(n - 1)) with the
    rank-mass curve rho (:func:`sampling_lib.estimators.rank_mass_curve`; the
    identity, hence the uniform w, without logged negatives).
    """
    sizes = stat.sizes
    N = int(_n_items_of(stat).max())
    if isinstance(stat, RankCounts):
        if ranked_in_full(stat.sizes, stat.n_items, scheme).any():
            return 1.0          # users ranked in full show the shape of P(R) at the top
        top = stat.ranks == 1   # users whose R the sampled ranks cannot place within the first bin
        return (N - 1) / (int(sizes[top].min() if top.any() else sizes.min()) - 1)
    n_min = int(sizes.min())
    from .estimators import rank_mass_curve

    rho = rank_mass_curve(stat).rho_of(1.0 / (n_min - 1)) if stat.has_draws else 1.0 / (n_min - 1)
    return (N - 1) * float(rho)


def _check_ci(ci, name="confidence_level"):
    return check_confidence_level(ci, name)


def _percentile(samples, ci):
    from .inference import percentile_interval

    return percentile_interval(samples, ci)


def _common_or_na(values, rows):
    """A nullable-integer column of ``rows`` rows: the value when every user shares it, else <NA>."""
    u = np.unique(values)
    return pd.array([int(u[0]) if u.size == 1 else pd.NA] * rows, dtype="Int64")


def _estimate_one(model, stat, method, parsed, scheme, options, refit_prior, ci, n_boot, rng, progress):
    """The rows of one model's statistic (see :func:`estimate`)."""
    items = _n_items_of(stat)
    N = int(items.max())
    F, _ = _metric_head(parsed, N)       # ranks 1..min(N, max K): memory independent of N
    F_range = _metric_range(F, N)
    sizes, ranks, counts = _cells_of(stat)
    Fn = _naive_matrix(parsed, sizes, ranks)
    M = int(counts.sum())
    naive = (counts @ Fn) / M
    with stage(progress, f"fit {method} ({M:,} users)"):
        fit = _fit(method, stat, N, parsed, scheme, options, refit_prior, F)
    est, clipped = _clip_to_range(fit.estimate, F_range)
    m = len(parsed)
    Ks = np.array([p[2] for p in parsed])
    below = Ks < _resolution(stat, scheme)
    lo = hi = np.full(m, np.nan)
    nlo = nhi = se = np.full(m, np.nan)
    constant = F_range[0] == F_range[1]
    if constant.any():
        j = int(np.flatnonzero(constant)[0])
        warnings.warn(f"model {model!r}: {parsed[j][0]} is {F_range[0][j]:g} for every ranking of N <= "
                      f"{N} items (K >= N); its estimate carries no information about the model",
                      RuntimeWarning, stacklevel=3)
    if n_boot > 0 and M < 2:
        # one user: every bootstrap resample is that user, and the interval would be a point
        warnings.warn(f"model {model!r}: one user; a bootstrap interval needs at least 2 (ci_low/high, "
                      "naive_ci_low/high and se are NaN)", RuntimeWarning, stacklevel=3)
    elif n_boot > 0:
        draw, coarse, rows = _cell_draws(fit, counts)
        Fd = Fn[rows]
        # the alternatives' replicates widen only the intervals of metrics below resolution (below)
        alts = fit.alternatives if below.any() else []

        def work(Cb):
            return ((Cb / M) @ Fd, fit.replicates(Cb, coarse=coarse),
                    [a.replicates(Cb, coarse=coarse) for a in alts])

        desc = f"bootstrap {method}" + (f" (draws on {Fd.shape[0]:,} coarse cells)" if coarse else "")
        outs = bootstrap_loop(n_boot, rng, draw, work, cells=Fd.shape[0], progress=progress, desc=desc)
        nb = np.concatenate([o[0] for o in outs])
        eb = _clip_to_range(np.concatenate([o[1] for o in outs]), F_range)[0]
        lo, hi = _percentile(eb, ci)
        nlo, nhi = _percentile(nb, ci)
        se = eb.std(axis=0, ddof=1) if n_boot > 1 else np.full(m, np.nan)
        for k in range(len(alts)):
            # below resolution, the alternative tunings on the same bootstrap draws: the interval is
            # the union of their percentile intervals (see Notes, "What the interval covers")
            a_lo, a_hi = _percentile(_clip_to_range(np.concatenate([o[2][k] for o in outs]), F_range)[0], ci)
            lo, hi = np.where(below, np.minimum(lo, a_lo), lo), np.where(below, np.maximum(hi, a_hi), hi)
    band_lo = band_hi = np.full(m, np.nan)
    if fit.band is not None:
        # prior-sensitivity band: the range of the alternatives' point estimates (reported for every
        # metric; part of the interval below resolution)
        band_lo, band_hi = fit.band
        if n_boot > 0 and M >= 2:
            lo = np.where(below, np.minimum(lo, np.minimum(band_lo, est)), lo)
            hi = np.where(below, np.maximum(hi, np.maximum(band_hi, est)), hi)
    b_lo = b_hi = np.full(m, np.nan)
    if fit.bounds is not None:
        b_lo, b_hi = fit.bound_estimates
    full_hw = _full_halfwidth_of_fit(fit, M, ci)
    ratio = (hi - lo) / (2.0 * full_hw)
    return pd.DataFrame({
        "model": model,
        "metric": [p[0] for p in parsed],
        "K": Ks,
        "naive": naive,
        "naive_ci_low": nlo,
        "naive_ci_high": nhi,
        "estimate": est,
        "se": se,
        "ci_low": lo,
        "ci_high": hi,
        "method": method,
        "scheme": scheme,
        "users": M,
        "N": _common_or_na(items, m),
        "n": _common_or_na(sizes, m),
        "confidence_level": ci,
        "n_boot": n_boot,
        "sensitivity_low": band_lo,
        "sensitivity_high": band_hi,
        "bound_low": b_lo,
        "bound_high": b_hi,
        "below_resolution": below,
        "clipped": clipped,
        "full_halfwidth": full_hw,
        "precision_ratio": ratio,
    }, columns=list(ESTIMATE_COLUMNS))


def _full_halfwidth_of_fit(fit, M, confidence_level=0.95):
    """The estimated half-width of the interval full ranking of the same M users would give.

    Full ranking observes every user's F(R): its interval for the metric's
    mean has half-width z sqrt(Var F(R) / M) (the normal interval; the
    user bootstrap of the true ranks gives the same to first order). The
    variance is estimated with the fitted estimator's own weights on the
    ranks, Var F = E[F^2] - E[F]^2, both read off the weights (w @ F^2 and
    w @ F): for Recall@K (F^2 = F) that is p (1 - p) at the estimate p. The
    interval's width over twice this is the *precision ratio* that
    :func:`sampling_lib.design.plan` targets (``precision_ratio``): how much
    wider the sampled evaluation's interval is than full ranking's would be.
    NaN where the weights give no positive variance (linear estimators'
    negative weights can).

    Parameters
    ----------
    fit : FittedEstimator
        The estimator fitted on the users' cells (weights on ranks 1..H and
        the metric matrix F).
    M : int
        Users.
    confidence_level : float

    Returns
    -------
    ndarray (m,)

    References
    ----------
    TORS24 eq 46 (the users a margin e needs: e = z sqrt(p (1 - p) / M), full ranking's half-width for Recall);
    README, "Resolving a metric below resolution" (the precision ratio).
    """
    from .estimators import weights_head
    from .inference import z_critical

    w = weights_head(fit.weights, fit.F.shape[0])
    mean, second = w @ fit.F, w @ (fit.F * fit.F)
    var = second - mean * mean
    z = z_critical(confidence_level)
    with np.errstate(invalid="ignore"):
        return np.where(var > 0, z * np.sqrt(np.where(var > 0, var, 0.0) / M), np.nan)


def _clip_to_range(values, F_range):
    """Clip estimates (last axis = metrics) into [min F, max F]; flag values out beyond rounding.

    ``F_range`` is (min F, max F) per metric over ranks 1..N (:func:`_metric_range`).
    """
    lo_F, hi_F = F_range
    # rounding allowance: relative to the range, or to the value of a constant metric (K >= N)
    tol = 1e-12 * np.where(hi_F > lo_F, hi_F - lo_F, np.maximum(np.abs(hi_F), 1.0))
    out = (values < lo_F - tol) | (values > hi_F + tol)
    flag = out if out.ndim == 1 else out.any(axis=0)
    return np.clip(values, lo_F, hi_F), flag
