"""Planning a sampled evaluation: designs, their cost, and the precision they buy.

Below resolution (K < w = (N - 1)/(n - 1)) a single sampled set cannot place
the held-out item inside the first sampled bin, and every top-K estimate is an
extrapolation. A *nested design* adds items to the sets of the users who need
them, decided from the ranks seen so far:

* ``single`` -- every user gets a set of n items (held-out item included);
* ``threshold`` -- a first stage of n items, then ``n2`` more items for the
  users whose first-stage rank is <= ``threshold`` (a second stage);
* ``ladder`` -- adaptive sampling (TORS24 Algorithm 1): start at n, double
  the set while the held-out item is ranked first, up to ``n_max`` (or grow
  it by another factor, ``Design.growth``);
* ``full_subset`` -- a random ``fraction`` of the users ranked in full, the
  others at n.

The likelihood of such a design is the per-user kernel at the final (n_u,
r_u) (:func:`sampling_lib.estimators.logspline_fit`, Notes), so the default
estimator takes the merged ranks directly. :func:`predict` gives, for a prior
P(R) (fitted to a pilot), the expected scoring cost and the variance of the
default estimator by the delta method (the influence function of the
posterior-mean estimate with the penalized log-spline prior refitted); the
*precision ratio* is the predicted interval width over full ranking's own
(sqrt of Var(T_hat) / (Var_P(F) / M)). :func:`plan` scores a family of
candidate designs and picks the cheapest that meets a target.

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, Sec 6 (Algorithm 1, eq 44: cost).
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation.
   KDD 2020, Sec 2.2 (the kernels).
.. [vdV98] van der Vaart. Asymptotic Statistics (1998), ch. 5 and 20 (M-estimators,
   the delta method and influence functions).
.. [Efron16] Efron. Empirical Bayes deconvolution estimates. Biometrika 103(1), 2016.
.. [Hoeffding63] Hoeffding. Probability inequalities for sums of bounded random variables.
   JASA 58(301), 1963 (Thm 4: sampling without replacement keeps the with-replacement bounds; Bernstein's
   inequality, eq 2.13 there).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special, stats

from ._progress import progress as progress_bar, stage
from ._threads import one_blas_thread
from ._validation import check_float, check_int, check_n_items, check_scheme
from .metrics import metric_matrix, parse_metrics
from .estimators import SENSITIVITY_FACTOR
from .estimators._logspline import GRID_N_MAX, penalty_matrix, prior_masses, spline_grid
from .kernels._laws import log_hypergeom_pmf
from .sampling import SHORT_FIRST_STAGE, Design, check_growth, size_ladder

__all__ = ["design_law", "predict", "plan", "PlanResult", "candidate_designs", "choose_design", "judged_column",
           "assurance_margin", "RATIO_PREDICTION_SD", "resolution_width", "shared_cost", "later_stages",
           "first_rungs"]

_EXACT_R = 64          # sampled ranks 1.._EXACT_R are cells of their own in the predictions
_R_LOG_WIDTH = 0.05    # beyond, cells of at most this width in log r


# ----------------------------------------------------------------------------
# the law of the final (n_u, r_u) of a design
# ----------------------------------------------------------------------------
def _r_bins(lo, hi):
    """Cells of sampled ranks lo..hi: exact up to _EXACT_R, then of width <= _R_LOG_WIDTH in log r."""
    lo, hi = int(lo), int(hi)
    if hi < lo:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cut = min(hi, max(lo - 1, _EXACT_R))
    a = np.arange(lo, cut + 1, dtype=np.int64)
    if cut >= hi:
        return a, a.copy()
    k = int(np.ceil(np.log(hi / cut) / _R_LOG_WIDTH))
    e = np.unique(np.floor(cut * np.exp(np.linspace(0.0, np.log(hi / cut), k + 1))).astype(np.int64))
    starts = np.unique(np.r_[cut + 1, e[(e > cut + 1) & (e <= hi)]])
    ends = np.r_[starts[1:] - 1, hi]
    return np.r_[a, starts], np.r_[a, ends]


def _count_dist(kind, x, m, R, N, done, scheme):
    """``kind`` ("cdf": P(X <= x), "pmf": P(X = x)) of X = items above the held-out item among m new
    draws, shape (G, k).

    Binomial: X ~ Binomial(m, (R - 1)/(N - 1)). Hypergeometric: ``done`` items
    already drawn, all ranked below (R - 1 above and N - R - done below remain).
    The pmf is exact where a difference of CDFs would round.
    """
    x = np.asarray(x, dtype=float)[None, :]
    R = np.asarray(R, dtype=float)[:, None]
    if scheme == "binomial":
        return getattr(stats.binom, kind)(x, m, (R - 1.0) / (N - 1.0))
    good, bad = np.maximum(R - 1.0, 0.0), np.maximum((N - R) - done, 0.0)
    # impossible states (fewer items left than drawn) have probability 0 upstream: any finite value
    m_eff = np.minimum(m, good + bad)
    if kind == "pmf":          # scipy's exact pmf took 112 of the 159 s of a three-model plan at N = 1,618
        xs = x.ravel()
        if xs.size > 1 and xs[0] >= 0 and np.all(np.diff(xs) == 1):        # a run of counts (the exact cells)
            good, bad, m_eff = np.broadcast_arrays(good, bad, m_eff)
            return np.exp(_log_pmf_cols(xs[0], xs.size, good[:, :1], bad[:, :1], m_eff[:, :1]))
        return np.exp(log_hypergeom_pmf(x, good, bad, m_eff))
    return _hypergeom_cdf(x, good, bad, m_eff)


def _log_pmf_cols(x0, width, good, bad, m):
    """log P(X = x0 + j), j = 0..width-1, per row (good / bad / m (k, 1)): :func:`_log_pmf_run` from each
    row's first point of support at or after x0, shifted into place (-inf before it)."""
    lower = np.maximum(m[:, 0] - bad[:, 0], 0.0)
    start = np.maximum(float(x0), lower)
    shift = (start - x0).astype(np.int64)
    run = _log_pmf_run(start, width, good, bad, m)
    j = np.arange(width)[None, :] - shift[:, None]
    out = np.take_along_axis(run, np.clip(j, 0, width - 1), axis=1)
    return np.where(j >= 0, out, -np.inf)


def _hypergeom_cdf(x, good, bad, m_eff):
    """P(X <= x), X ~ Hypergeometric(good + bad items, good of them, m_eff drawn), broadcast over the rows
    (good, bad, m_eff: (G, 1)) and the columns (x: (1, k)).

    scipy's exact CDF costs O(x) per entry (a single-model plan at N = 10^4: 361 s of 367); only the
    entries near the mean need it. X is a sum of m draws in {0, 1} without replacement, so the binomial's
    Chernoff bounds hold for it ([Hoeffding63] Thm 4), and so does Bernstein's: P(|X - E X| >= t) <=
    2 exp(-t^2 / (2 (v + t/3))), v = m p (1 - p) >= Var X, p = good / (good + bad). At t = 14 + sqrt(196 +
    84 v) that is below 2 exp(-42) = 1.2e-18: beyond, the CDF is 0 or 1 to that (below double precision
    near 1); near the mean it is the running sum of the pmf from mean - t.
    """
    x, good, bad, m_eff = np.broadcast_arrays(x, good, bad, m_eff)
    p = good / np.maximum(good + bad, 1.0)
    mean = m_eff * p
    t = 14.0 + np.sqrt(196.0 + 84.0 * m_eff * p * (1.0 - p))
    out = (x >= mean + t).astype(float)
    near = np.abs(x - mean) < t
    rows = np.flatnonzero(near.any(axis=1))
    if rows.size:
        # the support starts at max(0, m - bad): below it the pmf is 0 and the recursion would divide by 0
        start = np.maximum(np.ceil(mean[rows, 0] - t[rows, 0]), np.maximum(m_eff[rows, 0] - bad[rows, 0], 0.0))
        stop = np.where(near[rows], x[rows], -1.0).max(axis=1)
        width = max(int(np.max(stop - start)) + 1, 1)
        step = max(1, 2_000_000 // max(width, 1))            # rows per block: ~2 x 10^6 terms at a time
        for b in range(0, rows.size, step):
            r = rows[b:b + step]
            run = np.cumsum(np.exp(_log_pmf_run(start[b:b + step], width, good[r, :1], bad[r, :1], m_eff[r, :1])),
                            axis=1)
            i, j = np.nonzero(near[r])
            col = (x[r][i, j] - start[b:b + step][i]).astype(np.int64)
            out[r[i], j] = np.where(col >= 0, run[i, np.clip(col, 0, width - 1)], 0.0)
    return out


def _log_pmf_run(start, width, good, bad, m):
    """log P(X = start + j), j = 0..width-1, X ~ Hypergeometric(good + bad, good, m), per row (start (k,),
    good / bad / m (k, 1)): one log C(., .) per row, then the ratio of successive terms,
    P(X = x + 1) / P(X = x) = (good - x)(m - x) / ((x + 1)(bad - m + x + 1)), summed in log (a logarithm per
    term instead of three log-Beta functions: 30 of the 46 s of a two-model plan went to those). ``start``
    lies at or above the support's lower end; beyond its upper end min(good, m) the terms are -inf."""
    x = start[:, None] + np.arange(width - 1)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.log(np.maximum(good - x, 0.0) * np.maximum(m - x, 0.0) / ((x + 1.0) * (bad - m + x + 1.0)))
    first = log_hypergeom_pmf(start[:, None], good, bad, m)
    out = np.empty((start.size, width))
    out[:, :1] = first
    if width > 1:
        out[:, 1:] = first + np.cumsum(step, axis=1)
    return np.nan_to_num(out, nan=-np.inf)


def _count_cdf(x, m, R, N, done, scheme):
    """P(X <= x), X as :func:`_count_dist`."""
    return _count_dist("cdf", x, m, R, N, done, scheme)


def _count_pmf(x, m, R, N, done, scheme):
    """P(X = x), X as :func:`_count_dist`."""
    return _count_dist("pmf", x, m, R, N, done, scheme)


def _cells_prob(lo, hi, offset, m, R, N, done, scheme):
    """P(offset + 1 + X in [lo_c, hi_c]) for every cell c, X the items above among m draws: (G, C).

    Cells of one rank use the pmf (exact where a difference of CDFs would round), wider cells the
    difference of CDFs; ranks below offset + 1 have probability 0.
    """
    lo, hi = np.asarray(lo), np.asarray(hi)
    one = lo == hi
    P = np.zeros((np.size(R), lo.size))
    P[:, one] = _count_pmf(lo[one] - 1 - offset, m, R, N, done, scheme)
    if (~one).any():
        k = int((~one).sum())               # both ends of the wide cells in one call: one running sum per row
        both = _count_cdf(np.r_[hi[~one] - 1 - offset, lo[~one] - 2 - offset], m, R, N, done, scheme)
        P[:, ~one] = np.clip(both[:, :k] - both[:, k:], 0.0, 1.0)
    return P


#: While :func:`plan` predicts its candidates: {key: (lo, hi, P)} of :func:`_binned_counts`, shared by the
#: designs that run the same stage (the rungs every ladder of a growth has in common); None otherwise.
_STAGE_CACHE = None


def _binned_counts(m, R, N, done, scheme, offset=0):
    """The cells (lo, hi) of the ranks offset + 1 + X, X in 0..m, and their probabilities (G, k)."""
    key = None
    if _STAGE_CACHE is not None:
        key = (int(m), int(N), int(done), scheme, int(offset), np.asarray(R).tobytes())
        hit = _STAGE_CACHE.get(key)
        if hit is not None:
            return hit
    lo, hi = _r_bins(offset + 1, offset + m + 1)
    out = lo, hi, _cells_prob(lo, hi, offset, m, R, N, done, scheme)
    if key is not None:
        _STAGE_CACHE[key] = out
    return out


def _second_stage(lo, hi, offset, m, R, N, done, scheme):
    """:func:`_cells_prob` of a threshold design's second stage, shared through _STAGE_CACHE."""
    key = None
    if _STAGE_CACHE is not None:
        key = ("second", lo.tobytes(), int(offset), int(m), np.asarray(R).tobytes(), int(N), int(done), scheme)
        hit = _STAGE_CACHE.get(key)
        if hit is not None:
            return hit
    out = _cells_prob(lo, hi, offset, m, R, N, done, scheme)
    if key is not None:
        _STAGE_CACHE[key] = out
    return out


def _log_survive(R, N, drawn, scheme):
    """log P(the first ``drawn`` sampled items all rank below the held-out item | R) (G,)."""
    R = np.asarray(R, dtype=float)
    if scheme == "binomial":
        with np.errstate(divide="ignore"):
            return drawn * np.log1p(-(R - 1.0) / (N - 1.0))
    # C(N - R, drawn) / C(N - 1, drawn)
    out = (special.gammaln(N - R + 1.0) - special.gammaln(N - R - drawn + 1.0)
           - special.gammaln(N * 1.0) + special.gammaln(N - drawn * 1.0))
    return np.where(N - R >= drawn, out, -np.inf)


def design_law(design, N, R, scheme="binomial"):
    """P(final cell d | R) of a design: the rows R (global ranks) by the cells of (n_u, r_u).

    Parameters
    ----------
    design : Design
    N : int
        Number of items (N_u of every user).
    R : array_like of int
        Global ranks (e.g. the representative ranks of a grid).
    scheme : {"binomial", "hypergeometric"}

    Returns
    -------
    sizes : ndarray of int, shape (C,)
        Final set size of each cell (N for users ranked in full).
    r_lo, r_hi : ndarray of int, shape (C,)
        The sampled ranks the cell holds (one rank below 65, a range beyond).
    D : ndarray, shape (len(R), C)
        P(the user ends in the cell | R); rows sum to 1.

    Notes
    -----
    The stages are simulated exactly by :func:`sampling_lib.sampling.sample_design`;
    a test checks that the cell frequencies of simulated users match ``D``.

    Examples
    --------
    >>> s, lo, hi, D = design_law(Design("ladder", 10, n_max=40), 1000, [1, 30, 500])
    >>> bool(np.allclose(D.sum(axis=1), 1)), sorted(set(s.tolist()))
    (True, [10, 20, 40])
    """
    N = design.check(N)
    scheme = check_scheme(scheme)
    R = np.asarray(R, dtype=np.int64)
    cells = []

    def add(size, lo, hi, P):
        cells.append((np.full(lo.size, size, dtype=np.int64), lo, hi, P))

    n = design.n
    if design.kind in ("single", "full_subset"):
        lo, hi, P = _binned_counts(n - 1, R, N, 0, scheme)
        share = 1.0 - design.fraction if design.kind == "full_subset" else 1.0
        add(n, lo, hi, share * P)
        if design.kind == "full_subset":
            ur = np.unique(R)
            add(N, ur, ur, design.fraction * (R[:, None] == ur[None, :]).astype(float))
    elif design.kind == "threshold":
        t = design.threshold
        lo, hi, P = _binned_counts(n - 1, R, N, 0, scheme)
        stop = lo > t                                   # exact cells: lo == hi for r <= 64
        add(n, lo[stop], hi[stop], P[:, stop])
        # continued users: final r = r1 + x2 with r1 <= t, x2 among n2 new draws. The cells span 1..n + n2
        # whatever t (those beyond t + n2 have probability 0), so the designs with the same n2 and other
        # thresholds share each r1's law (_STAGE_CACHE while plan predicts)
        lo2, hi2 = _r_bins(1, n + design.n2)
        P2 = np.zeros((R.size, lo2.size))
        for r1 in range(1, t + 1):
            p1 = P[:, np.flatnonzero(lo == r1)[0]]
            # the second stage's count, from the items left (without replacement r1 - 1 items above
            # and n - r1 below were drawn in the first stage)
            Rr, Nr, done = (R - (r1 - 1), N - (r1 - 1), n - r1) if scheme == "hypergeometric" else (R, N, 0)
            P2 += p1[:, None] * _second_stage(lo2, hi2, r1 - 1, design.n2, Rr, Nr, done, scheme)
        add(n + design.n2, lo2, hi2, P2)
    else:   # ladder
        sizes = size_ladder(n, design.n_max, design.growth)
        lo, hi, P = _binned_counts(n - 1, R, N, 0, scheme)
        last = sizes.size == 1
        keep = np.ones(lo.size, bool) if last else lo > 1
        add(n, lo[keep], hi[keep], P[:, keep])
        for j in range(1, sizes.size):
            prev, cur = int(sizes[j - 1]), int(sizes[j])
            reach = np.exp(_log_survive(R, N, prev - 1, scheme))          # r = 1 at size prev
            lo, hi, Pj = _binned_counts(cur - prev, R, N, prev - 1, scheme)
            keep = np.ones(lo.size, bool) if j == sizes.size - 1 else lo > 1
            add(cur, lo[keep], hi[keep], reach[:, None] * Pj[:, keep])
    s, lo, hi, D = (np.concatenate([c[k] for c in cells], axis=-1 if k == 3 else 0) for k in range(4))
    return s, lo, hi, D


def resolution_width(design, N):
    """w = (N - 1)/(n - 1) at the set size of the design's final rank-1 users (1 if some are ranked in full).

    As the ``below_resolution`` column of :func:`sampling_lib.correct.estimate`
    on the design's data: a top-K metric with K < w is below resolution.
    Final rank-1 users hold the largest sets of a threshold design (n + n2)
    and of a ladder (n_max).

    Examples
    --------
    >>> resolution_width(Design("ladder", 10, n_max=100), 991), resolution_width(Design("single", 10), 991)
    (10.0, 110.0)
    """
    if design.kind == "full_subset":
        return 1.0
    top = {"single": design.n, "threshold": design.n + design.n2, "ladder": design.n_max}[design.kind]
    return (N - 1) / (top - 1)


def _cost(design, N, g, R, scheme):
    """Expected items scored per user (held-out included) under the rank masses g on rows R."""
    n = design.n
    if design.kind == "single":
        return float(n)
    if design.kind == "full_subset":
        return float((1.0 - design.fraction) * n + design.fraction * N)
    if design.kind == "threshold":
        p_cont = _count_cdf([design.threshold - 1], n - 1, R, N, 0, scheme)[:, 0]
        return float(n + design.n2 * (g @ p_cont))
    sizes = size_ladder(n, design.n_max, design.growth)
    cost = float(n)
    for j in range(1, sizes.size):
        reach = np.exp(_log_survive(R, N, int(sizes[j - 1]) - 1, scheme))
        cost += (int(sizes[j]) - int(sizes[j - 1])) * float(g @ reach)
    return cost


def shared_cost(design, priors, pilot, *, scheme="binomial", grid_n=None, dependence=None):
    """Expected items scored per user when several models share a design's added items.

    A user goes on when *any* model needs it (the added items are shared, so
    that ``compare`` stays paired): the cost is that of the union of the
    users each model sends on, at least the largest single model's
    (:func:`predict`'s ``cost``) and at most their sum.

    Parameters
    ----------
    design : Design
    priors : sequence of LogsplineResult
        Each model's fitted prior (as :func:`predict`), all on 1..N.
    pilot : array_like of int, shape (M, len(priors)), or None
        The users' first-stage sampled ranks at ``design.n``, one column per
        model, a row per user (the same users for every model). None (e.g. a
        pilot of rank counts, which does not pair the models' ranks): the
        models are taken as independent.
    scheme : {"binomial", "hypergeometric"}, keyword-only
    grid_n : int, optional, keyword-only
        As :func:`predict`.
    dependence : float in [0, 1], optional, keyword-only
        lambda below (default: the pilot's own; 0 without a pilot).

    Returns
    -------
    float
        Expected items scored per user, held-out item included.

    Notes
    -----
    The second stage's decisions are the pilot's own: a threshold design
    extends the share of users with some model at rank <= t, exactly. A
    ladder's later rungs need the models' joint ranks at sizes the pilot has
    not seen. A model at rank 1 at size n stays at rank 1 at size s > n with
    probability c_m(s) = P_m(r_s = 1) / P_m(r_n = 1) under its prior (the
    sets are nested: a rank never falls). With a_m = 1{r_{n,m} = 1} c_m(s)
    the user goes on at s with probability between max_m a_m (the models go
    on together: comonotone) and 1 - prod_m (1 - a_m) (independently). The
    pilot shows where the models lie between the two at the first stage:
    lambda = (I - U) / (I - X), with U the share of users with some model at
    rank 1, I = 1 - prod_m (1 - p_m) and X = max_m p_m for the models'
    shares p_m; the later rungs take (1 - lambda) (1 - prod_m (1 - a_m)) +
    lambda max_m a_m. At the second stage this is the pilot's own union;
    beyond, an assumption (the same dependence at every rung), checked
    against stage-by-stage simulations of two models sharing the added items
    (tests/test_design.py; N = 5,000, n = 50, ladder to 1,600, 20,000 users):
    independent models 358 items per user predicted against 380 simulated
    (each model's own predicted cost was 7% low there), correlated ranks 281
    against 267, comonotone 245 against 245; the largest single model's
    cost was 213-231. On real scores run through the stages
    (:func:`sampling_lib.studies.shared_design_on_scores`, notebook 12; the
    command line on Last.fm 2K, benchmarks/README.md): Last.fm ALS and
    item-KNN 1,238 against 1,174 scored, MovieLens 100K popularity and ALS
    91.1 against 96.5, synthetic ratings 178.1 against 186.9 (the largest
    model alone: 1,064, 72.8, 164.4); where it is low, so are the models'
    own cost predictions, which extrapolate the top of P(R) from the pilot.

    References
    ----------
    TORS24 Algorithm 1 (the ladder) and eq 44 (its cost for one model).

    Examples
    --------
    >>> from sampling_lib.estimators import logspline_fit
    >>> from sampling_lib.rankdist import synthetic_models, draw_global_ranks
    >>> from sampling_lib.sampling import sample_ranks
    >>> R = draw_global_ranks(synthetic_models(5000)["beta_a0.35"], 2000, rng=0)
    >>> r = np.c_[sample_ranks(R, 5000, 50, rng=1), sample_ranks(R, 5000, 50, rng=2)]
    >>> fits = [logspline_fit(r[:, k], 5000, 50) for k in range(2)]
    >>> d = Design("ladder", 50, n_max=800)
    >>> one = max(predict(d, f, "recall@10", M=2000).cost[0] for f in fits)
    >>> bool(one <= shared_cost(d, fits, r) <= 2 * one)
    True
    """
    scheme = check_scheme(scheme)
    priors = list(priors)
    if not priors:
        raise ValueError("priors must hold at least one model's fitted prior")
    Ns = {int(p.weights_grid.N) for p in priors}
    if len(Ns) != 1:
        raise ValueError(f"the priors must share one N; got {sorted(Ns)}")
    N = design.check(Ns.pop())
    n = design.n
    if pilot is not None:
        pilot = np.asarray(pilot)
        if pilot.ndim != 2 or pilot.shape[1] != len(priors) or pilot.shape[0] < 1:
            raise ValueError(f"pilot must be an (M, {len(priors)}) array of first-stage ranks, a column per "
                             f"prior; got shape {pilot.shape}")
        if not np.issubdtype(pilot.dtype, np.integer) or pilot.min() < 1 or pilot.max() > n:
            raise ValueError(f"pilot must hold sampled ranks in 1..n={n}")
    if dependence is not None:
        dependence = check_float(dependence, "dependence", 0.0, 1.0)
    if design.kind in ("single", "full_subset"):
        return float(n if design.kind == "single" else (1.0 - design.fraction) * n + design.fraction * N)
    if design.kind == "threshold" and pilot is not None:      # the pilot's own union
        return float(n + design.n2 * np.mean((pilot <= design.threshold).any(axis=1)))
    grid_n = min(n, GRID_N_MAX) if grid_n is None else check_int(grid_n, "grid_n", low=2, high=N)
    grids = [(spline_grid(N, grid_n, p.knot_spacing, None, scheme), p) for p in priors]
    masses = [(prior_masses(p.beta, grid), grid.mid) for grid, p in grids]
    if design.kind == "threshold":
        p = np.array([g @ _count_cdf([design.threshold - 1], n - 1, R, N, 0, scheme)[:, 0] for g, R in masses])
        return float(n + design.n2 * (1.0 - np.prod(1.0 - p)))
    sizes = size_ladder(n, design.n_max, design.growth)
    # per model: P(r = 1 at each rung's size | prior)
    survive = np.array([[g @ np.exp(_log_survive(R, N, int(s) - 1, scheme)) for s in sizes[:-1]] for g, R in masses])
    if pilot is None:                   # independent models: the priors' own rank-1 shares
        top, lam = np.ones((1, len(priors)), bool), 0.0 if dependence is None else dependence
        first = survive[:, 0]
    else:
        top = pilot == 1
        lam = _rank_one_dependence(top) if dependence is None else dependence
        first = np.ones(len(priors))
    cost = float(n)
    for j in range(1, sizes.size):
        ratio = np.divide(survive[:, j - 1], survive[:, 0], out=np.zeros(len(priors)), where=survive[:, 0] > 0)
        c = top * (first * ratio)[None, :]
        go = (1.0 - lam) * (1.0 - np.prod(1.0 - c, axis=1)) + lam * c.max(axis=1)
        cost += (int(sizes[j]) - int(sizes[j - 1])) * float(go.mean())
    return cost


def first_rungs(n, growth=2.0, max_size=None, *, n_max=None):
    """The sizes of a ladder's first rungs, run before re-planning on their merged ranks: the ladder's own
    sizes from n up to the largest of at most max(4n, n_max / 8), at most ``max_size``.

    The re-plan fits the prior on the merged ranks and predicts the chosen ladder from it, extrapolating the
    top of P(R) from the largest size run to n_max. Rungs to 4n alone leave that factor at n_max / 4n: about
    5 where the planner's ladders end near N / 5 and N / n is about 100 (MovieLens 100K, Last.fm 2K), where
    the re-planned half-widths held, but over 200 at N / n of about 4,000, where they missed by up to 31%
    (``benchmarks/README.md``). Rungs to n_max / 8 bound it at 8 whatever N / n (the last three doublings
    are left to the plan). They cost nothing extra when the re-planned ladder continues them, as a ladder of
    the same growth to at least n_max / 8 does.

    Parameters
    ----------
    n : int
        The first stage's set size.
    growth : float, default 2.0
        The ladder's growth factor (:class:`Design`).
    max_size : int, optional
        The largest set any user can take (the smallest N_u; the ladder's last size is truncated at it).
    n_max : int, optional
        The top of the ladder the plan chose on the first stage (or a guess): the rungs reach n_max / 8
        when that is above 4n. Without it, n -> 4n.

    Examples
    --------
    >>> first_rungs(100).tolist(), first_rungs(100, 1.5).tolist(), first_rungs(100, max_size=300).tolist()
    ([100, 200, 400], [100, 150, 225, 338], [100, 200, 300])
    >>> first_rungs(10, n_max=8960).tolist()         # N / n = 4,096: the ladder 10 -> 8,960 up to 1,120
    [10, 20, 40, 80, 160, 320, 640]
    """
    n = check_int(n, "n", low=2)
    reach = 4 * n
    top = 8 * n
    if n_max is not None:
        n_max = check_int(n_max, "n_max", low=n)
        reach = max(reach, n_max / 8)
        top = min(n_max, max(top, 2 * int(reach)))
    if max_size is not None:
        top = min(top, check_int(max_size, "max_size", low=n))
    sizes = size_ladder(n, top, growth)       # the ladder's own sizes (its last step truncated at the top)
    return sizes[sizes <= reach]


def later_stages(design, n):
    """Rounds of scoring after a first stage of n items that a design's users may go through.

    A ladder takes one per size above n (:func:`size_ladder`, with the
    design's growth); a second stage, a larger single set and full ranking
    of a subset take one; the first stage alone none.

    Examples
    --------
    >>> d2, d15 = Design("ladder", 18, n_max=3456), Design("ladder", 18, n_max=3456, growth=1.5)
    >>> later_stages(d2, 18), later_stages(d15, 18), later_stages(Design("single", 18), 18)
    (8, 13, 0)
    """
    if design.kind == "ladder":
        return int(size_ladder(design.n, design.n_max, design.growth).size - 1)
    return int(not (design.kind == "single" and design.n == n))


def _rank_one_dependence(top):
    """lambda in [0, 1]: where the share of users with some model at rank 1 lies between the models'
    independence (0) and their largest possible overlap (1)."""
    p = top.mean(axis=0)
    any_ = top.any(axis=1).mean()
    indep, most = 1.0 - np.prod(1.0 - p), p.max()
    return float(np.clip((indep - any_) / (indep - most), 0.0, 1.0)) if indep - most > 1e-12 else 0.0


# ----------------------------------------------------------------------------
# prediction: cost and the variance of the default estimator
# ----------------------------------------------------------------------------
def _metric_cells(parsed, grid):
    """Averages of F and F^2 over the grid cells (G, m) each (F = 0 beyond the largest K)."""
    from .estimators._logspline_boot import cell_metric

    H = min(grid.N, max(K for _, _, K in parsed))
    F = metric_matrix(parsed, H)
    return cell_metric(F, grid), cell_metric(F * F, grid)


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
    others = [_predict_one(design, D, grid, a, parsed, M, z, scheme, prior.penalty)[2] for a in alternatives]
    lo, hi = np.minimum.reduce([hw, *others]), np.maximum.reduce([hw, *others])
    with np.errstate(divide="ignore", invalid="ignore"):        # a metric constant under the prior: no ratio
        ratio, ratio_high = hw / fhw, hi / fhw
    m = len(parsed)
    return {"design": [design.describe()] * m, "metric": [p[0] for p in parsed], "value": value,
            "cost": np.full(m, cost), "cost_share": np.full(m, cost / N), "halfwidth": hw, "halfwidth_low": lo,
            "halfwidth_high": hi, "full_halfwidth": fhw, "ratio": ratio, "ratio_high": ratio_high}


def _predict_one(design, D, grid, prior, parsed, M, z, scheme, penalty):
    """(metric values, cost, predicted half-widths, full ranking's half-widths) under one prior,
    for the estimator with the log-spline ``penalty``; ``D`` is the design's law on ``grid``."""
    N = int(prior.weights_grid.N)
    g, B = prior_masses(prior.beta, grid), grid.B
    P = penalty_matrix(B.shape[1], penalty)
    q = g @ D
    keep = q > 1e-300
    D, q = D[:, keep], q[keep]
    post = g[:, None] * D / q[None, :]                 # P(R-cell | d), (G, C)
    EB = B.T @ post                                    # E[B | d], (df, C)
    s = EB - (B.T @ g)[:, None]
    info = (s * q) @ s.T                               # per-user information
    Fc, F2c = _metric_cells(parsed, grid)              # (G, m)
    phi = Fc.T @ post                                  # (m, C)
    A = (g[:, None] * Fc).T @ B - (phi * q) @ EB.T     # (m, df)
    # below resolution the default's interval is the union of the intervals at its penalty and at
    # the alternatives (penalty divided and multiplied by SENSITIVITY_FACTOR), each centred on its
    # own estimate: T_k ~ T + A (beta_k - beta) with the penalized fit's shift beta_k - beta =
    # -(M I + k Pen)^{-1} k Pen beta, and Var_k as above; the union's width is predicted
    below = np.array([K for _, _, K in parsed]) < resolution_width(design, N)
    hi = lo = None
    for factor in (1.0 / SENSITIVITY_FACTOR, 1.0, SENSITIVITY_FACTOR):
        Pk = factor * P
        L = np.linalg.solve((info + Pk / M).T, A.T).T    # A (I + Pen/M)^{-1}
        IF = phi + L @ s
        sd = np.sqrt(np.maximum(((IF * IF) @ q - (IF @ q) ** 2) / M, 0.0))
        shift = -A @ np.linalg.solve(M * info + Pk, Pk @ prior.beta)
        if factor == 1.0:
            own_lo, own_hi = shift - z * sd, shift + z * sd
        hi = shift + z * sd if hi is None else np.maximum(hi, shift + z * sd)
        lo = shift - z * sd if lo is None else np.minimum(lo, shift - z * sd)
    lo, hi = np.where(below, lo, own_lo), np.where(below, hi, own_hi)
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
    from .metrics import METRICS

    assurance = check_float(assurance, "assurance", 0.5, 1.0, high_open=True)
    z = stats.norm.ppf(assurance)
    names = {f: name for name, f in METRICS.items() if name in RATIO_PREDICTION_SD}
    return np.array([np.exp(z * RATIO_PREDICTION_SD[names[METRICS[name]]])
                     for _, name, _ in parse_metrics(metrics)])


def _judged(table, col):
    """The value :func:`plan` compares with the target: the judged column times the assurance margin."""
    return table[col] * table.margin


@dataclass(frozen=True)
class PlanResult:
    """The candidate designs of :func:`plan`, scored, and the one chosen.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per (design, metric) as :func:`predict`, with ``kind``,
        ``stages`` (rounds of scoring after the first stage,
        :func:`later_stages`), ``margin`` (:func:`assurance_margin`), ``meets`` (the design's
        predicted ratio or half-width times its margin meets the target for
        every metric), ``within_budget``
        (its cost share is at most ``max_cost``; True without a budget) and
        ``chosen``. Several models: a row per (model, design, metric), the
        ``model`` first; ``meets`` for every model; ``cost_all_models``, the
        cost of the union of the users the models send on
        (:func:`shared_cost`), by which the design is priced and budgeted.
    best : Design or None
        The cheapest design within the budget that meets the target; with a
        budget that no such design fits, the most precise within it (its
        ``meets`` is False); else None (:func:`choose_design`).
    prior : LogsplineResult or dict
        The prior the predictions use (fitted to the pilot); several models:
        {model: prior}.
    target : str
        The target, in words.
    """

    table: pd.DataFrame
    best: Design | None
    prior: object
    target: str

    def designs(self):
        """One row per design: kind, description, stages, cost, cost_share, the worst ratio, meets,
        within_budget, chosen."""
        t = self.table
        if "cost_all_models" in t.columns:
            t = t.assign(cost=t.cost_all_models, cost_share=t.cost_all_models * t.cost_share / t.cost)
        return (t.groupby(["design", "kind"], sort=False)
                .agg(stages=("stages", "first"), cost=("cost", "first"), cost_share=("cost_share", "first"),
                     ratio=("ratio", "max"),
                     halfwidth=("halfwidth", "max"), meets=("meets", "first"),
                     within_budget=("within_budget", "first"), chosen=("chosen", "first"))
                .reset_index())


def candidate_designs(N, n, *, thresholds=(1, 2, 5), factors=None, fractions=(0.05, 0.1, 0.2, 0.3, 0.5),
                      growths=(2.0,)):
    """The designs :func:`plan` scores, from a first-stage size n (all sets fit in N items: with
    per-user N_u, pass the smallest).

    Larger single n (n x each factor), a second stage of n2 = n x factor items
    for the users at rank <= each threshold, the ladder to n x factor, and full
    ranking of each fraction of the users (the others at n). The default
    factors are 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, ... (four to an
    octave, 2^k x 1, 1.25, 1.5 and 1.75: steps of at most x1.25 from 4 on)
    up to N / n, so that the sets reach the whole catalogue whatever N / n (a
    fixed top factor of 1,024 left Recall@10 below resolution at N / n =
    10^4: w = 10 at the largest set, and no candidate met the target). With
    two to an octave (x1.5, x4/3) the cheapest design meeting the target
    could cost up to 1.5 times the cheapest set size that does: Last.fm 2K's
    ALS at n = 18 took the ladder to 3,456 (5.5% of full ranking) where
    2,880 (4.9%) met it too (``benchmarks/README.md``).

    ``growths`` are the ladders' growth factors (:class:`Design`; default
    TORS24's doubling alone): a ladder of each for every top size. A factor
    below 2 stops the users that leave the ladder closer to the size where
    an item first ranks above the held-out one (less overshoot), for more
    rounds of scoring; the users still at rank 1 at n_max cost the same.

    Examples
    --------
    >>> [d.describe() for d in candidate_designs(1000, 100, factors=(4,), thresholds=(1,), fractions=(0.1,))]
    ['single n = 100', 'single n = 400', 'stage 2: +400 items for the users at rank <= 1 of 100', 'ladder 100 -> 400 (double while at rank 1)', '10% of users ranked in full, the others at n = 100']
    """
    N = check_int(N, "N", low=2)
    n = check_int(n, "n", low=2, high=N)
    growths = [check_growth(g) for g in (growths if np.iterable(growths) and not isinstance(growths, str)
                                         else [growths])]
    if factors is None:
        factors = sorted(f for f in {2, 3} | {m << k for k in range(63) for m in (4, 5, 6, 7)} if n * f <= N)
    out = [Design("single", n)]
    out += [Design("single", n * f) for f in factors if n * f <= N]
    out += [Design("threshold", n, threshold=t, n2=n * f) for f in factors for t in thresholds
            if t < n and n + n * f <= N]
    out += [Design("ladder", n, n_max=n * f, growth=g) for g in growths for f in factors if n * f <= N]
    out += [Design("full_subset", n, fraction=f) for f in fractions]
    return out


@one_blas_thread      # small matrices: one BLAS thread unless the user set one (sampling_lib._threads)
def plan(pilot=None, N=None, n=None, *, M=None, guess=None, metrics=("recall@10", "ndcg@10"),
         target_ratio=1.3, target_halfwidth=None, confidence_level=0.95, scheme=None,
         designs=None, robust=False, max_size=None, rng=0, progress=False, sample_sizes=None,
         max_cost=None, paired=True, first_ranks=None, assurance=0.9):
    """Score candidate designs on a pilot and pick the cheapest that meets a target.

    Parameters
    ----------
    pilot : array_like of int, dict {model: array_like of int}, or SampledRanks, optional
        First-stage sampled ranks (1..n) of the users: the prior is the
        default estimator's log-spline fitted to them. Without a pilot,
        ``guess`` is required. A :class:`~sampling_lib.io.SampledRanks`
        (e.g. ``io.ranks_from_table("merged.csv")``, the table that
        ``sampling-lib ranks`` writes) brings its models, per-user sample
        sizes, ``first_rank`` column and scheme; then N defaults to the
        median of its per-user N_u, ``max_size`` to their smallest, n to
        the smallest sample size, and ``paired`` to whether every model
        ranks every user. Several models (a dict): each is planned on
        its own ranks, a design meets the target when it does for every
        model, and it is priced by the union of the users the models send on
        (they share the added items, so that ``compare`` stays paired;
        :func:`shared_cost`, with the models' dependence from their paired
        ranks, see ``paired``).
    N : int or array_like of int
        Items. One int (the median N_u when users differ, as the command line
        passes), or the pilot users' own N_u (one per user, aligned with the
        pilot; several models: the same users for each): the prior is then
        fitted on the per-user kernels, lives on 1..max N_u (the
        estimator's pooled metric) and the predictions use N = max N_u.
    n : int
        First-stage set size (held-out item included).
    M : int, optional, keyword-only
        Users of the evaluation (default: the pilot's).
    guess : float or array_like, optional, keyword-only
        Without a pilot: a guessed Recall@10 (a power law P(R) ~ R^-a on 1..N
        with that Recall@10), or a pmf on 1..N; a pilot of M users is drawn
        from it at n (``rng``) and fitted.
    metrics : str or sequence of str, keyword-only
    target_ratio : float, default 1.3, keyword-only
        Largest precision ratio (interval width over full ranking's) for
        every metric.
    target_halfwidth : float, optional, keyword-only
        Largest interval half-width for every metric (instead of the ratio).
    assurance : float in [0.5, 1), default 0.9, keyword-only
        A design meets the target when its predicted ratio (or half-width)
        times :func:`assurance_margin` does: the planner's measured
        prediction error, so that the chosen design realizes the target
        with about this probability. The table's ``margin`` column holds
        the factor. 0.5 judges by the prediction itself (on the benchmark's
        58 cells, 48 chosen that way realized a ratio <= 1.3: the cheapest
        design predicted to meet a target sits at it, and its realized
        ratio lands on either side).
    confidence_level : float, keyword-only
    scheme : {"binomial", "hypergeometric"}, optional, keyword-only
        Default: the pilot's record (a SampledRanks' ``scheme``), else
        binomial (:func:`sampling_lib.correct.estimate`).
    designs : sequence of Design, optional, keyword-only
        Candidates (default :func:`candidate_designs` of ``max_size`` and n;
        ``candidate_designs(max_size, n, growths=(2, 1.5))`` adds ladders
        that grow by x1.5, as ``sampling-lib plan --growth 2 1.5``).
    max_size : int, optional, keyword-only
        The largest set a design may give a user (default N; with per-user
        N_u the smallest N_u, so that every user's sets fit).
    max_cost : float in (0, 1], optional, keyword-only
        A budget: the largest expected scoring cost as a share of full
        ranking (items scored per user / N; e.g. 0.05 for a twentieth).
        Designs above it are never chosen. If no design within it meets the
        target, the most precise design within it is chosen (smallest worst
        ratio, or half-width with ``target_halfwidth``, over the metrics) and
        its ``meets`` stays False: what the budget buys. Default: no budget
        (the cheapest design meeting the target, else none).
    sample_sizes : array_like of int, or dict {model: array_like}, optional, keyword-only
        The pilot's per-user set sizes n_u (held-out item included) when the
        pilot is a design already run in part: e.g. the merged ranks after
        the first rungs of a ladder or a second stage. The prior is then the
        default fitted on the per-user sizes (the nested design's likelihood,
        :func:`design_law`), which sees the top of P(R) that a first stage far
        below resolution cannot; the candidates still start from the first
        stage's size ``n``. In ``benchmarks/bench_design.py --workflow
        replan`` (58 cells, the default assurance), re-planning after the
        rungs n -> 4n put the predicted half-width within 20% of the
        realized one in 54 cells, against 45 from the first stage alone; for
        MovieLens 100K's popularity model (n = 17, w = 95; the first stage
        put Recall@10 at 0.044, truth 0.086) NDCG@10's went from 0.63x to
        1.09x.
    progress : bool, default False, keyword-only
        Show progress over the candidates on stderr (a bar on a terminal,
        throttled lines elsewhere; at N = 10^5, n = 100 and 10^4 users the
        176 candidates took 12 s on a 2-core machine).
    robust : bool, default False, keyword-only
        Judge designs by the high end of their predicted range (the pilot's
        prior refitted with the penalty divided and multiplied by
        :data:`sampling_lib.estimators.SENSITIVITY_FACTOR`: the top of P(R),
        inside the pilot's first sampled bin, is an extrapolation) instead of
        the prediction under the default's own fit; times the assurance
        margin, as the prediction is.
    rng : keyword-only
        Draws the pilot of a ``guess``.
    paired : bool, default True, keyword-only
        Several models: whether the arrays pair the models' ranks user by
        user (the same users in the same order; a counts table does not).
        Then their dependence at the first stage prices the union; else (or
        with ``sample_sizes`` and no ``first_ranks``) the models are taken as
        independent.
    first_ranks : dict {model: array_like of int}, optional, keyword-only
        Several models with ``sample_sizes`` (a pilot of merged ranks): each
        user's rank within the first stage's n items, in the pilot's user
        order (the ``first_rank`` column that ``sampling-lib ranks`` writes
        for stage files). They pair the models' first stages, so the union is
        priced with the models' dependence as for a first-stage pilot; at
        most the merged rank (the sets are nested).

    Returns
    -------
    PlanResult

    Examples
    --------
    >>> res = plan(None, 5000, 50, M=2000, guess=0.2, metrics="recall@10",
    ...            designs=candidate_designs(5000, 50, factors=(4, 16, 64), thresholds=(1,), fractions=(0.2,)))
    >>> res.best.kind in ("threshold", "ladder") and bool(res.designs().chosen.sum() == 1)
    True
    """
    from .correct import input_scheme
    from .io import SampledRanks

    scheme = check_scheme(input_scheme(scheme, pilot))
    if isinstance(pilot, SampledRanks):
        pilot, N, n, sample_sizes, first_ranks, max_size, paired = _sampled_ranks_pilot(
            pilot, N, n, sample_sizes, first_ranks, max_size, paired)
    several = isinstance(pilot, Mapping)
    if not several and first_ranks is not None:
        raise ValueError("first_ranks applies to several models' pilots (a dict): they pair the models' first "
                         "stages to price the union of the users the models send on")
    pilots = dict(pilot) if several else {None: pilot}
    if not pilots:
        raise ValueError("pilot must map at least one model to its first-stage ranks")
    if several and isinstance(sample_sizes, Mapping) and set(sample_sizes) != set(pilots):
        raise ValueError(f"sample_sizes must name the models of pilot ({list(pilots)}); got {list(sample_sizes)}")
    # 1. the priors: each model's default estimator fitted to its pilot (and its two alternative penalties)
    with stage(progress, f"plan: fit the pilot's prior ({len(pilots)} model{'s' if len(pilots) > 1 else ''})"):
        fits = {m: _fit_pilot(r, N, n, M=M, guess=guess, scheme=scheme, rng=rng,
                              sample_sizes=sample_sizes[m] if isinstance(sample_sizes, Mapping) else sample_sizes)
                for m, r in pilots.items()}
    N, n, M = next(iter(fits.values()))[2:]
    # 2. the target and the candidates
    target, col, bound = _target(target_ratio, target_halfwidth, robust, assurance)
    max_size = N if max_size is None else check_int(max_size, "max_size", low=n, high=N)
    if max_cost is not None:
        max_cost = check_float(max_cost, "max_cost", 0.0, 1.0, low_open=True)
    cands = list(candidate_designs(max_size, n) if designs is None else designs)
    # 3. every candidate's predictions for every model (the design's law computed once per design)
    table = _predict_designs(cands, fits, n, metrics=metrics, M=M, confidence_level=confidence_level, scheme=scheme,
                             col=col, bound=bound, margin=assurance_margin(metrics, assurance), progress=progress)
    # 4. several models: the cost of the union of the users they send on, and "meets" for every model
    if several:
        pairs = _pairs(pilots, fits, n, sample_sizes, first_ranks, paired)
        priors = [f[0] for f in fits.values()]
        union = ({d.describe(): shared_cost(d, priors, pairs, scheme=scheme) for d in cands} if len(priors) > 1
                 else None)
        table["cost_all_models"] = table.cost if union is None else table.design.map(union)
        table["meets"] = table.groupby("design", sort=False).meets.transform("all")
    else:
        table = table.drop(columns="model")
    # 5. the budget and the choice
    cost = "cost_all_models" if several else "cost"
    share = table.cost_all_models * table.cost_share / table.cost if several else table.cost_share
    table["within_budget"] = True if max_cost is None else share <= max_cost
    name = choose_design(table.assign(worst=_judged(table, col)).groupby("design", sort=False).agg(
        cost=(cost, "first"), meets=("meets", "first"), within_budget=("within_budget", "first"),
        worst=("worst", "max")))
    best = None if name is None else cands[[d.describe() for d in cands].index(name)]
    table["chosen"] = table.design == name
    prior = {m: f[0] for m, f in fits.items()} if several else fits[None][0]
    return PlanResult(table, best, prior, target)


def _fit_pilot(pilot, N, n, *, M, guess, scheme, rng, sample_sizes):
    """(prior, alternative priors, N, n, M) of one model's pilot: the default estimator's log-spline fitted to
    the first-stage ranks (or the merged ranks with their ``sample_sizes``; per-user N_u when N is an array;
    a pilot drawn from ``guess`` when there is none), and its fits with the penalty divided and multiplied
    by SENSITIVITY_FACTOR."""
    from .counts import rank_counts
    from .estimators import logspline_cells_fit, logspline_fit
    from .estimators._logspline import sensitivity_penalties

    per_user = np.ndim(N) > 0
    if per_user:
        if pilot is None:
            raise ValueError("per-user N_u (N as an array) apply to a pilot's users; a guess takes one N")
        N_u = check_n_items(N, np.size(pilot))
        per_user = np.ndim(N_u) > 0
        N = int(np.max(N_u))             # the prior lives on 1..max N_u (the estimator's pooled metric)
    N = check_int(N, "N", low=2)
    n = check_int(n, "n", low=2, high=N)
    if pilot is None:
        if guess is None:
            raise ValueError("plan needs a pilot (first-stage sampled ranks) or a guess (a Recall@10 or a pmf)")
        if M is None:
            raise ValueError("M (the number of users) is required with a guess")
        pilot = _pilot_from_guess(guess, N, n, check_int(M, "M", low=1), scheme, rng)
    pilot = np.asarray(pilot)
    M = pilot.size if M is None else check_int(M, "M", low=1)
    if sample_sizes is None and not per_user:
        prior = logspline_fit(pilot, N, n, scheme=scheme)
        alts = [logspline_fit(pilot, N, n, scheme=scheme, penalty=p) for p in sensitivity_penalties(prior.penalty)]
        return prior, alts, N, n, M
    sizes = np.full(pilot.size, n) if sample_sizes is None else sample_sizes
    st = rank_counts(pilot, sample_sizes=sizes, n_items=N_u if per_user else np.full(pilot.size, N))
    if int(st.sizes.min()) < SHORT_FIRST_STAGE * n:
        raise ValueError(f"sample_sizes must be >= the first stage's n={n} (the candidates start there; a few "
                         f"items short, down to {SHORT_FIRST_STAGE:g} n, e.g. NCF's sets of 99 beside 100); got "
                         f"{int(st.sizes.min())}")
    cells = (st.n_items, st.sizes, st.ranks, st.counts)
    prior = logspline_cells_fit(*cells, scheme=scheme)
    alts = [logspline_cells_fit(*cells, scheme=scheme, penalty=p) for p in sensitivity_penalties(prior.penalty)]
    return prior, alts, N, n, M


def _target(target_ratio, target_halfwidth, robust, assurance):
    """(the target in words, the judged column, its bound)."""
    if target_halfwidth is not None:
        target_halfwidth = check_float(target_halfwidth, "target_halfwidth", low=0.0, low_open=True)
        text = f"interval half-width <= {target_halfwidth:g} (assurance {float(assurance):g})"
        return text, judged_column(target_halfwidth, robust), target_halfwidth
    target_ratio = check_float(target_ratio, "target_ratio", low=1.0)
    text = f"precision ratio <= {target_ratio:g} (assurance {float(assurance):g})"
    return text, judged_column(None, robust), target_ratio


def _predict_designs(cands, fits, n, *, metrics, M, confidence_level, scheme, col, bound, margin, progress):
    """One row per (model, design, metric): :func:`predict`'s, with kind, stages, margin and meets. The
    law of each design on a prior's grid is computed once and shared by the models fitted on that grid."""
    z = stats.norm.ppf(0.5 + 0.5 * check_float(confidence_level, "confidence_level", 0.0, 1.0,
                                                low_open=True, high_open=True))
    parsed = parse_metrics(metrics)
    grid_n = min(n, GRID_N_MAX)
    grids = {}
    for m, (prior, _, N, _, _) in fits.items():
        key = (int(prior.weights_grid.N), prior.knot_spacing)
        if key not in grids:
            grids[key] = spline_grid(key[0], grid_n, key[1], None, scheme)
    cols = {}
    bar = progress_bar(len(cands), progress, "plan: predicting", unit="designs")
    global _STAGE_CACHE
    _STAGE_CACHE = {}
    try:
        for d in cands:
            if bar is not None:
                bar.update(1)
            for name, v in _predict_design(d, grids, fits, parsed, M, z, scheme, n, col, bound, margin).items():
                cols.setdefault(name, []).extend(v)
    finally:
        _STAGE_CACHE = None
        if bar is not None:
            bar.close()
    order = ["model", "design", "kind", "stages", "metric", "value", "cost", "cost_share", "halfwidth",
             "halfwidth_low", "halfwidth_high", "full_halfwidth", "ratio", "ratio_high", "margin", "meets"]
    return pd.DataFrame({c: np.concatenate(cols[c]) for c in order})


def _predict_design(d, grids, fits, parsed, M, z, scheme, n, col, bound, margin):
    """The rows of one candidate for every model (:func:`_predict_designs`), as a dict of columns."""
    laws = {key: design_law(d, key[0], grid.mid, scheme)[3] for key, grid in grids.items()}
    cols = {}
    for m, (prior, alts, _, _, _) in fits.items():
        key = (int(prior.weights_grid.N), prior.knot_spacing)
        t = _predict_columns(d, laws[key], grids[key], prior, alts, parsed, M, z, scheme)
        k = len(parsed)
        judged = np.asarray(t[col]) * margin
        extra = {"model": [m] * k, "kind": [d.kind] * k, "stages": [later_stages(d, n)] * k, "margin": margin,
                 "meets": [bool((judged <= bound).all())] * k}
        for name, v in {**t, **extra}.items():
            cols.setdefault(name, []).append(np.asarray(v))
    return cols


def _pairs(pilots, fits, n, sample_sizes, first_ranks, paired):
    """The models' first-stage ranks side by side (M, models), which pair them for :func:`shared_cost`, or
    None (then the models are priced as independent)."""
    ranks = [None if r is None else np.asarray(r) for r in pilots.values()]
    if sample_sizes is not None and first_ranks is None and max(
            np.max(v) for v in (sample_sizes.values() if isinstance(sample_sizes, Mapping) else [sample_sizes])) <= n:
        sample_sizes = None          # a first stage with short sets (NCF's 99 beside 100): its ranks pair the models
    if first_ranks is not None:
        if sample_sizes is None:
            raise ValueError("first_ranks applies with sample_sizes (a pilot of merged ranks); a pilot without "
                             "them is the first stage itself")
        if not paired:
            raise ValueError("first_ranks pair the models' first stages user by user; paired=False says the "
                             "pilot's arrays do not")
        ranks = _check_first_ranks(first_ranks, pilots, n)
    if (paired and (sample_sizes is None or first_ranks is not None)
            and all(r is not None and r.ndim == 1 for r in ranks) and len({r.size for r in ranks}) == 1):
        return np.stack(ranks, axis=1)
    return None


def _sampled_ranks_pilot(sr, N, n, sample_sizes, first_ranks, max_size, paired):
    """:func:`plan`'s inputs from a SampledRanks pilot: (pilot, N, n, sample_sizes, first_ranks, max_size,
    paired); one model gives arrays, several give dicts."""
    if sample_sizes is not None or first_ranks is not None:
        raise ValueError("a SampledRanks pilot carries its own sample sizes and first ranks: give neither "
                         "sample_sizes nor first_ranks")
    models = sr.models
    ranks = {m: sr.for_model(m)[0] for m in models}
    sizes = {m: sr.for_model(m)[1] for m in models}
    items = [it for it in (sr.items_for_model(m) for m in models) if it is not None]
    if N is None:
        if not items:
            raise ValueError("N is required: the pilot has no n_items (per-user N_u)")
        N = int(np.median(np.concatenate(items)))
    if max_size is None and items:
        max_size = int(min(it.min() for it in items))    # every user's sets must fit in its own N_u
    if any(s is None for s in sizes.values()):
        if n is None:
            raise ValueError("n is required: the pilot has no sample sizes")
        sizes = None
    else:
        if n is None:
            n = int(min(s.min() for s in sizes.values()))
        if all((s == n).all() for s in sizes.values()):
            sizes = None                                 # every user at n: the first stage itself
    firsts = None
    if sizes is not None and sr.first_ranks is not None:
        firsts = {m: sr.first_for_model(m) for m in models}
    if paired:
        paired = not bool(sr.ranks.isna().to_numpy().any())     # every model ranks every user: rows pair them
    if len(models) == 1:
        m = models[0]
        return ranks[m], N, n, None if sizes is None else sizes[m], None, max_size, paired
    return ranks, N, n, sizes, firsts, max_size, paired


def _check_first_ranks(first_ranks, pilots, n):
    """The first-stage ranks of a merged pilot, one array per model in the pilot's order, checked."""
    if not isinstance(first_ranks, Mapping) or set(first_ranks) != set(pilots):
        raise ValueError(f"first_ranks must map the models of pilot ({list(pilots)}) to first-stage ranks; got "
                         f"{list(first_ranks) if isinstance(first_ranks, Mapping) else type(first_ranks).__name__}")
    out = []
    for m, r in pilots.items():
        f = np.asarray(first_ranks[m])
        merged = np.asarray(r)
        if f.shape != merged.shape or not np.issubdtype(f.dtype, np.integer):
            raise ValueError(f"first_ranks of model {m!r} must be integer ranks, one per user of its pilot "
                             f"({merged.shape[0]}); got {f.dtype} of shape {f.shape}")
        if f.size and (f.min() < 1 or f.max() > n or (f > merged).any()):
            raise ValueError(f"first_ranks of model {m!r} must lie in 1..n={n} and at most the merged rank "
                             "(the sets are nested)")
        out.append(f)
    return out


def judged_column(target_halfwidth=None, robust=False):
    """The column of :func:`predict` a plan's target bounds: ``ratio`` (or ``halfwidth`` with a
    half-width target), its high end ``*_high`` with ``robust``.

    Examples
    --------
    >>> judged_column(), judged_column(0.01, robust=True)
    ('ratio', 'halfwidth_high')
    """
    return ("halfwidth" if target_halfwidth is not None else "ratio") + ("_high" if robust else "")


def choose_design(per):
    """The design :func:`plan` chooses from one row per design (index: its description).

    ``per`` has ``cost``, ``meets``, ``within_budget`` and ``worst`` (the worst
    predicted ratio or half-width over the metrics times its
    :func:`assurance_margin`, the quantity the target bounds). The cheapest design within the budget that meets the target; if
    none does, the one within the budget with the smallest ``worst`` when a
    budget excluded some design (what the budget buys), else None.

    Examples
    --------
    >>> per = pd.DataFrame({"cost": [100, 400, 900], "meets": [False, True, True],
    ...                     "within_budget": [True, True, False], "worst": [2.0, 1.2, 1.0]},
    ...                    index=["a", "b", "c"])
    >>> choose_design(per), choose_design(per.assign(within_budget=[True, False, False]))
    ('b', 'a')
    """
    inside = per[per.within_budget]
    ok = inside[inside.meets]
    if len(ok):
        return ok.cost.idxmin()
    if len(inside) and not per.within_budget.all():
        return inside.worst.idxmin()
    return None


def _pilot_from_guess(guess, N, n, M, scheme, rng):
    """First-stage sampled ranks of M users drawn from a guessed P(R)."""
    from .rankdist import draw_global_ranks
    from .sampling import sample_ranks

    if np.ndim(guess) == 0:
        r10 = check_float(guess, "guess", 0.0, 1.0, low_open=True, high_open=True)
        R = np.arange(1, N + 1, dtype=float)

        def recall10(a):
            w = R ** -a
            return w[:10].sum() / w.sum()

        lo, hi = 0.0, 20.0
        if not recall10(lo) <= r10 <= recall10(hi):
            raise ValueError(f"guess={r10} is not the Recall@10 of a power law on 1..N={N}")
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if recall10(mid) < r10 else (lo, mid)
        pmf = R ** -lo
        pmf /= pmf.sum()
    else:
        pmf = np.asarray(guess, dtype=float)
        if pmf.shape != (N,) or np.any(pmf < 0) or not np.isclose(pmf.sum(), 1.0):
            raise ValueError(f"guess must be a Recall@10 in (0, 1) or a pmf of length N={N}")
    g = np.random.default_rng(rng)
    return sample_ranks(draw_global_ranks(pmf, M, rng=g), N, n, scheme=scheme, rng=g)
