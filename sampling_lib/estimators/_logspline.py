"""Empirical Bayes with a smooth log-spline prior on log R (g-modeling).

The published estimators of the rank distribution P(R) either leave its shape
to early-stopped EM (MLE, AAAI21 eqs 20-21), to an entropy term (MES, AAAI21
eqs 24-27 / TORS24 eq 36) or to a uniform prior (BV, KR20; TORS24 eq 28).
On real recommenders P(R) is smooth in log R over several decades, and the
sampled ranks say little about its shape inside the first sampled bin
(global ranks R below about w = (N - 1)/(n - 1) almost always give sampled
rank 1). This module models

    log P(R) = s(log R) - log Z,     s = sum_j beta_j B_j(log R)

with a cubic B-spline basis whose knots are equally spaced in log R (spacing
``knot_spacing``) and a second-difference penalty ``penalty * ||D2 beta||^2``
on the coefficients (a P-spline, Eilers and Marx 1996; the log-spline
g-modeling of Efron 2016). The penalty pulls s towards a straight line in
log R, i.e. P(R) towards a power law, wherever the data do not say otherwise:
inside the first sampled bin that is the extrapolation of the resolved part
of the curve.

The fitted prior g is then used in the *posterior-mean* form of the estimate
(the per-user form of the oracle that knows P(R)):

    T_hat = (1/M) sum_u E_g[F(R) | r_u] = sum_r (c_r / M) sum_R g(R) P(r|R) F(R) / q_g(r),

which returns a length-N weight vector ``w`` (a probability vector) with
``T_hat = w @ F``. For the unpenalized NPMLE the two forms coincide (the EM
fixed point, AAAI21 eq 21); for a smooth prior the posterior mean follows the
observed sampled ranks where the prior is misspecified.

Computation on a compressed rank grid (:func:`sampling_lib.kernels.rank_grid`,
the grid every estimator shares): exact ranks 1..``head`` and, beyond,
bins whose width is at most ``bin_log_width`` in log R and ``bin_angle`` /
sqrt(n - 1) in the variance-stabilising coordinate arcsin(sqrt(p)),
p = (R - 1)/(N - 1), of the binomial kernel (kernel rows within TV 0.05 of
the bin's row). A bin is represented by its
integer midpoint (kernel row) and its width (prior mass ~ width * g(mid)), so
the cost is O(G n) with G = O(head + log N / bin_log_width + sqrt(n) /
bin_angle) grid points, independent of N. Within a bin the returned weights
are spread log-linearly with the local slope of s.

References
----------
.. [Efron16] Efron, B. Empirical Bayes deconvolution estimates. Biometrika
   103(1), 2016 (g-modeling with a log-spline exponential family).
.. [EM96] Eilers, P. H. C. and Marx, B. D. Flexible smoothing with B-splines
   and penalties. Statistical Science 11(2), 1996 (P-splines).
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021 (eq 18: mixture-of-binomials model).
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024 (eqs 31-34).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.interpolate import BSpline

from .._validation import check_float, check_int, check_n_items, check_N_n, check_ranks, check_scheme
from ..counts import cells, ranked_in_full
from ..exceptions import ConvergenceWarning
from ..kernels import log_kernel_rows, rank_grid
from ._logspline_weights import SPLINE_DEGREE, GridWeights, LogsplineResult
from ._logspline_newton import (Q_UNREPRODUCED, _unreproduced, hessian_cells, limit_beta, limit_ends, newton,
                                objective, penalty_matrix, prior_masses, quasi_newton)

__all__ = [
    "LogsplineResult",
    "GridWeights",
    "logspline_fit",
    "logspline",
    "DEFAULT_PENALTY",
    "DEFAULT_KNOT_SPACING",
    "logspline_sensitivity",
    "SENSITIVITY_FACTOR",
    "logspline_cells_fit",
]

#: Default second-difference penalty (see :func:`logspline_fit`, "Choice of the defaults").
DEFAULT_PENALTY = 70.0
#: Default knot spacing in log R.
DEFAULT_KNOT_SPACING = 0.4
#: The prior-sensitivity band of :func:`logspline_sensitivity` refits with the
#: penalty divided and multiplied by this factor.
SENSITIVITY_FACTOR = 10.0
#: Global ranks 1..EXACT_RANKS are grid cells of their own (the default of ``exact_ranks``).
EXACT_RANKS = 256
_BIN_LOG_WIDTH = 0.05  # max bin width in log R beyond the head
_BIN_ANGLE = 0.05      # max bin width in arcsin(sqrt(p)) units times sqrt(n - 1)
_DEGREE = SPLINE_DEGREE


@dataclass(frozen=True)
class SplineGrid:
    lo: np.ndarray      # first rank of each grid cell (1-based, int64)
    hi: np.ndarray      # last rank of each grid cell
    mid: np.ndarray     # representative rank (int64)
    logw: np.ndarray    # log of the cell width
    B: np.ndarray       # spline basis at log(mid), (G, df)
    spline_t: np.ndarray
    N: int


@lru_cache(maxsize=16)
def spline_grid(N, n, knot_spacing, head=None, scheme="binomial", angle=None):
    """Compressed grid of global ranks (:func:`sampling_lib.kernels.rank_grid` with TV
    tolerance ``angle``, default ``_BIN_ANGLE``, and log-width ``_BIN_LOG_WIDTH``) and the spline
    basis on it."""
    head = min(N, EXACT_RANKS if head is None else head)
    angle = _BIN_ANGLE if angle is None else angle
    rg = rank_grid(N, n, scheme=scheme, tol=angle, exact_ranks=head, log_width=_BIN_LOG_WIDTH)
    lo, hi = rg.lo, rg.hi
    mid = (lo + hi) // 2
    width = (hi - lo + 1).astype(float)
    logN = np.log(N)
    n_int = max(1, int(np.ceil(logN / knot_spacing)))
    inner = np.linspace(0.0, logN, n_int + 1)
    t = np.r_[[0.0] * _DEGREE, inner, [logN] * _DEGREE]
    x = np.log(0.5 * (lo + hi))
    B = BSpline.design_matrix(np.clip(x, 0.0, logN), t, _DEGREE).toarray()
    return SplineGrid(lo=lo, hi=hi, mid=mid.astype(np.int64), logw=np.log(width), B=B, spline_t=t, N=N)


@lru_cache(maxsize=16)
def grid_and_kernel(N, n, knot_spacing, exact_ranks, scheme):
    """(grid, kernel on the grid) for one (N, n), built once: the bootstrap calls it per chunk of
    replicates and per alternative penalty. The kernel is returned read-only."""
    grid = spline_grid(N, n, knot_spacing, exact_ranks, scheme)
    K = kernel_on_grid(grid, N, n, scheme)
    K.setflags(write=False)
    return grid, K


def kernel_on_grid(grid, N, n, scheme):
    """P(r | R = mid) for every grid cell, shape (G, n)."""
    return np.exp(log_kernel_rows(N, n, grid.mid, scheme))


def posterior_cells(c, K, g, q):
    """Posterior-mean cell weights (1/M) sum_r c_r g P(r|.) / q_r; batched over rows of c."""
    M = c.sum(axis=-1, keepdims=True)
    ratio = np.divide(c, q * M, out=np.zeros_like(c), where=c > 0)
    return g * (ratio @ K.T)


def _setup(sampled_ranks, N, n, scheme, penalty, knot_spacing, exact_ranks):
    N, n = check_N_n(N, n)
    exact_ranks = check_int(exact_ranks, "exact_ranks", low=1)
    scheme = check_scheme(scheme)
    penalty = check_float(penalty, "penalty", low=0.0)
    knot_spacing = check_float(knot_spacing, "knot_spacing", low=0.0, low_open=True)
    r = check_ranks(sampled_ranks, n, name="sampled_ranks", upper_name="n")
    c = np.bincount(r - 1, minlength=n).astype(float)
    return _setup_counts(c, N, n, scheme, penalty, knot_spacing, exact_ranks)


def _setup_counts(c, N, n, scheme, penalty, knot_spacing, exact_ranks):
    """:func:`_setup` from the counts c (length n) of the sampled ranks."""
    grid, K = grid_and_kernel(int(N), int(n), float(knot_spacing), int(exact_ranks), scheme)
    P = penalty_matrix(grid.B.shape[1], penalty)
    return N, n, c, grid, K, P, penalty, knot_spacing


def logspline_fit(sampled_ranks, N, n, *, scheme="binomial", penalty=DEFAULT_PENALTY,
                  knot_spacing=DEFAULT_KNOT_SPACING, exact_ranks=EXACT_RANKS):
    """Empirical-Bayes fit of a smooth log-spline prior and posterior-mean weights.

    Parameters
    ----------
    sampled_ranks : array_like of int, shape (M,)
        Sampled ranks in 1..n.
    N, n : int, or array_like of int, shape (M,)
        Number of items and sample-set size (held-out item included); either
        may be per-user: N_u candidates and n_u sampled items (see Notes;
        equal per-user values give exactly the result of the ints).
    scheme : {"binomial", "hypergeometric"}, keyword-only
        Negatives drawn with or without replacement.
    penalty : float >= 0, keyword-only
        Weight of the second-difference penalty on the spline coefficients.
    knot_spacing : float > 0, keyword-only
        Distance between knots in log R.
    exact_ranks : int, default 256, keyword-only
        Global ranks 1..exact_ranks are grid cells of their own; beyond, ranks
        are binned (module docstring). ``exact_ranks=N`` computes on every
        rank (cost O(N n)); the compressed default agrees with it to about
        1e-5 absolute on Recall/NDCG@1..50 (tested; notebook 10).

    Returns
    -------
    LogsplineResult

    Notes
    -----
    The penalized log-likelihood sum_r c_r log q_g(r) - penalty ||D2 beta||^2,
    q_g(r) = sum_R g(R) P(r | R) (AAAI21 eq 18), is maximised by Fisher
    scoring with a backtracking line search (the objective is smooth and the
    penalty makes the Hessian positive definite).

    *Per-user item counts and sample sizes* (sampling-lab; model of
    :func:`sampling_lib.estimators.mle_fit`): the prior g lives on 1..max N_u
    and the likelihood has one column per cell (N_u, n_u, r):
    q_c = sum_R g(R) P(r_c | R; N_c, n_c) 1[R <= N_c], computed at the grid
    points (the rank grid is that of max N_u and the sampled users' max n_u;
    a grid cell straddling N_c counts when its representative rank is <= N_c,
    exact with ``exact_ranks`` >= max N_u). See :func:`logspline_cells_fit`.

    *Users ranked in full* (n_u = N_u, whatever the scheme: every candidate
    was scored): the sampled rank is the global rank, and the cell's
    likelihood is the point mass P(R = r_u) = g(r_u)
    (:func:`full_ranking_columns`).

    *Nested (multi-stage) designs* -- adaptive sampling (TORS24 Algorithm 1),
    a second stage for the users whose first-stage rank is <= t, any ladder:
    items are *added* to the user's sample set and whether to add is decided
    from the ranks observed so far. With replacement, the stage counts x_j of
    sampled items above the held-out item are independent Binomial(b_j, p),
    p = (R - 1)/(N - 1), so the probability of a user's whole path is
    prod_j C(b_j, x_j) p^x (1 - p)^(n - 1 - x) with x = r - 1 the final count
    and n the final size: C(n - 1, x) p^x (1 - p)^(n - 1 - x) times
    prod_j C(b_j, x_j) / C(n - 1, x), a factor free of R. Without
    replacement the stages are successive draws without replacement from the
    N - 1 other items and the same factorisation holds with the
    hypergeometric kernel (the multivariate hypergeometric law of (x_j) given
    x is free of R). The stopping rule only looks at the x_j, so it adds a
    factor free of R too. Hence the likelihood of P(R) is the per-user kernel
    at the *final* (n_u, r_u) -- the design is ignorable and the estimator
    needs only each user's final sample size and rank.

    **Choice of the defaults** (penalty 70, knot spacing 0.4 in log R): chosen
    on the real-data accuracy panel (:func:`sampling_lib.studies.accuracy_panel`,
    notebook 10) over MovieLens 100K and Last.fm 2K rank distributions of
    seven recommender settings, n in {20, 50, 100, 500} and M in {300, 1000,
    all}; the mean relative error of Recall@1..50 varied smoothly with the
    penalty (a factor 10 either way costs a few points), see notebook 10.

    References
    ----------
    Efron (2016), Biometrika 103(1) (g-modeling); Eilers and Marx (1996)
    (P-splines); AAAI21 eq 18; TORS24 eqs 31-34.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models, draw_global_ranks
    >>> from sampling_lib.sampling import sample_ranks
    >>> pmf = synthetic_models(2000)["beta_a0.35"]
    >>> r = sample_ranks(draw_global_ranks(pmf, 1000, rng=0), 2000, 100, rng=1)
    >>> fit = logspline_fit(r, 2000, 100)
    >>> bool(fit.converged), round(float(fit.weights.sum()), 12)
    (True, 1.0)
    """
    if np.ndim(N) != 0 or np.ndim(n) != 0 or (scheme == "hypergeometric" and N == n):
        cells = _user_cells(sampled_ranks, N, n, scheme)
        if cells is not None:
            return logspline_cells_fit(*cells, scheme=scheme, penalty=penalty,
                                       knot_spacing=knot_spacing, exact_ranks=exact_ranks)
        N, n = int(np.max(N)), int(np.max(n))
    N, n, c, grid, K, P, penalty, knot_spacing = _setup(sampled_ranks, N, n, scheme, penalty,
                                                        knot_spacing, exact_ranks)
    return _fit_from(c, K, grid, P, penalty, knot_spacing)


#: The prior is fitted with the users weighted as at most this many: beyond, the penalty
#: is below 1e-5 of the likelihood, and sampled ranks that no smooth prior reproduces (e.g. users at
#: two ranks only) drive the coefficients to diverge (recall@10 of 1e-299 at 2 x 10^10 users).
#: Up to it, nothing changes; the posterior means use every user whatever the weight.
FIT_USERS_MAX = 10**7


def fit_counts_weight(c):
    """The counts the prior is fitted to: ``c`` scaled (row by row) to at most :data:`FIT_USERS_MAX` users."""
    c = np.asarray(c, dtype=float)
    tot = c.sum(axis=-1, keepdims=True)
    return c if np.all(tot <= FIT_USERS_MAX) else c * np.minimum(1.0, FIT_USERS_MAX / tot)


def _warn_unreproduced(c, q):
    """Warn when the fitted prior makes observed users an event rarer than :data:`Q_UNREPRODUCED`.

    1,999 users at the last sampled rank and one at rank 1: every smooth prior that serves the 1,999 gives
    the one a probability near :data:`Q_MIN`, and recall@10 came out 0 with an interval up to 1e-236,
    where the naive value is 5e-4 and ``method="mle"`` gives 5e-4 in [0, 0.0015]."""
    rare = _unreproduced(c, q)
    if rare.size:
        users = float(c[rare].sum())
        warnings.warn(f"log-spline fit: no smooth prior reproduces these sampled ranks: the fit gives "
                      f"{users:g} user(s) a probability below {Q_UNREPRODUCED:g} (as when the users sit at both "
                      "ends of the ranks only); its estimates and intervals are unreliable here: compare "
                      "method='mle'", ConvergenceWarning, stacklevel=4)


def _fit_from(c, K, grid, P, penalty, knot_spacing, info=None, beta0=None):
    """Newton fit, posterior-mean weights and the result, from counts c and kernel K (G, len(c)); at a limit
    (:func:`limit_ends`) the limit itself (Newton would run into its iteration limit, or stop where the gain
    per step fell below its tolerance with part of the mass elsewhere)."""
    end = limit_ends(c, K)[0]
    if end >= 0:
        beta = limit_beta(grid, end)
        g = prior_masses(beta, grid)
        return fit_result(c, K, grid, beta, g, g @ K, 0, True, penalty, knot_spacing)
    beta0 = np.zeros(grid.B.shape[1]) if beta0 is None else beta0
    beta, f, g, q, it, conv = newton(fit_counts_weight(c), K, grid, P, beta0, info=info)
    if not conv:
        warnings.warn(f"log-spline fit: Newton did not converge in {it} iterations; the estimate is kept "
                      "(LogsplineResult.converged is False)", ConvergenceWarning, stacklevel=3)
    _warn_unreproduced(c, q)
    return fit_result(c, K, grid, beta, g, q, it, conv, penalty, knot_spacing)


def fit_result(c, K, grid, beta, g, q, n_iter, converged, penalty, knot_spacing):
    """The :class:`LogsplineResult` of coefficients ``beta`` (prior masses g, cell probabilities q = g K) on
    counts c: log-likelihood and posterior-mean weights; weights and prior stay on the grid (expanded to
    length N only when asked for)."""
    cell_w = posterior_cells(c, K, g, q)
    ll = float(np.sum(c[c > 0] * np.log(q[c > 0])))
    return LogsplineResult(beta=beta, loglik=ll, n_iter=int(n_iter), converged=bool(converged),
                           penalty=penalty, knot_spacing=knot_spacing, grid_size=int(grid.lo.size),
                           weights_grid=GridWeights(cell_w, beta, grid),
                           prior_grid=GridWeights(g, beta, grid))


def logspline(sampled_ranks, N, n, *, scheme="binomial", penalty=DEFAULT_PENALTY,
              knot_spacing=DEFAULT_KNOT_SPACING, exact_ranks=EXACT_RANKS):
    """Posterior-mean weights under a fitted log-spline prior (see :func:`logspline_fit`).

    Returns
    -------
    ndarray, shape (N,)
        A probability vector ``w``; the estimate of a metric F is ``w @ F``.

    Examples
    --------
    >>> import numpy as np
    >>> w = logspline(np.r_[np.ones(30, int), np.arange(1, 71)], 1000, 100)
    >>> w.shape, bool(np.all(w >= 0))
    ((1000,), True)
    """
    return logspline_fit(sampled_ranks, N, n, scheme=scheme, penalty=penalty,
                         knot_spacing=knot_spacing, exact_ranks=exact_ranks).weights


def logspline_sensitivity(sampled_ranks, N, n, *, scheme="binomial", penalty=DEFAULT_PENALTY,
                          knot_spacing=DEFAULT_KNOT_SPACING, exact_ranks=EXACT_RANKS):
    """Weights under the penalty divided and multiplied by :data:`SENSITIVITY_FACTOR`.

    The data cannot tell these priors apart where a metric is below
    resolution (K < (N - 1)/(n - 1)): the spread of their estimates is the
    part of the answer that rests on the smoothness assumption.
    :func:`sampling_lib.correct.estimate` widens its interval to cover it.

    Returns
    -------
    list of ndarray, shape (N,)
    """
    return [logspline(sampled_ranks, N, n, scheme=scheme, penalty=p,
                      knot_spacing=knot_spacing, exact_ranks=exact_ranks)
            for p in sensitivity_penalties(penalty)]


def sensitivity_penalties(penalty):
    """The two alternative penalties of the sensitivity band: ``penalty`` divided and multiplied by
    :data:`SENSITIVITY_FACTOR` (:func:`logspline_sensitivity` and the registry's interval)."""
    return (penalty / SENSITIVITY_FACTOR, penalty * SENSITIVITY_FACTOR)


# ----------------------------------------------------------------------------
# cells (N_u, n_u, r): per-user item counts and sample sizes
# ----------------------------------------------------------------------------
def _user_cells(sampled_ranks, N, n, scheme="binomial"):
    """Cells (N_u, n_u, r, count) of per-user arrays, or None when N and n are common."""
    r = check_ranks(sampled_ranks, np.iinfo(np.int64).max, name="sampled_ranks")
    sizes = (np.full(r.size, check_int(n, "n", low=2), dtype=np.int64) if np.ndim(n) == 0
             else check_ranks(n, np.iinfo(np.int64).max, name="n", upper_name="max"))
    items = check_n_items(N, r.size)
    if sizes.shape != r.shape:
        raise ValueError(f"n must be an int or one sample size per user ({r.size}); got shape "
                         f"{sizes.shape}")
    if isinstance(items, int) and np.unique(sizes).size == 1 and not ranked_in_full(sizes[:1], [items],
                                                                                       scheme)[0]:
        return None
    items = np.full(r.size, items, dtype=np.int64) if isinstance(items, int) else items
    st = cells(r, sizes, items)
    return st.n_items, st.sizes, st.ranks, st.counts


#: The cells path's exact solve starts with quasi-Newton (BFGS) steps from the surrogate's optimum and
#: Hessian (:func:`quasi_newton`), at most QUASI_NEWTON_FIT_STEPS of them, until the Newton decrement is
#: below QUASI_NEWTON_FIT_TOL; exact Newton steps (each with a 26 ms exact Hessian at 10^5 users) follow
#: only if the solver's own gradient test still fails. The result is decided by that test alone; these
#: two set only the time: on 10^5 users (15 fits, penalties 0.7 to 70) 1e-10 left no exact Newton step
#: and took 0.64 s against 0.98 s for the earlier chord steps (the surrogate's Hessian kept fixed), which
#: needed exact steps after 10 chord steps at the weakest penalty; 1e-8 left 3 of 15 fits one exact
#: step (benchmarks/bench_peruser.py, case 3).
QUASI_NEWTON_FIT_TOL = 1e-10
QUASI_NEWTON_FIT_STEPS = 30


def _counts_fit(n_items, sizes, ranks, counts, *, scheme="binomial", penalty=DEFAULT_PENALTY,
                knot_spacing=DEFAULT_KNOT_SPACING, exact_ranks=EXACT_RANKS):
    """:func:`logspline_fit` of the users counted in cells (N_u, n_u, r): the same result as
    the fit on the per-user arrays the cells count, without forming them (memory O(cells),
    not O(users)). One N and one n take the one-(N, n) path, else
    :func:`logspline_cells_fit` (as :func:`logspline_fit` does)."""
    Nc = np.asarray(n_items, dtype=np.int64)
    nc = np.asarray(sizes, dtype=np.int64)
    if not uses_cells(Nc, nc, scheme):
        N, n = check_N_n(int(Nc[0]), int(nc[0]))
        exact_ranks = check_int(exact_ranks, "exact_ranks", low=1)
        scheme = check_scheme(scheme)
        penalty = check_float(penalty, "penalty", low=0.0)
        knot_spacing = check_float(knot_spacing, "knot_spacing", low=0.0, low_open=True)
        rc = check_ranks(ranks, n, name="ranks", upper_name="n")
        c = np.bincount(rc - 1, weights=np.asarray(counts, dtype=float), minlength=n)
        N, n, c, grid, K, P, penalty, knot_spacing = _setup_counts(c, N, n, scheme, penalty,
                                                                   knot_spacing, exact_ranks)
        return _fit_from(c, K, grid, P, penalty, knot_spacing)
    return logspline_cells_fit(Nc, nc, ranks, counts, scheme=scheme, penalty=penalty,
                               knot_spacing=knot_spacing, exact_ranks=exact_ranks)


def counts_fit_state(n_items, sizes, ranks, counts, *, scheme="binomial", penalty=DEFAULT_PENALTY,
                      knot_spacing=DEFAULT_KNOT_SPACING, exact_ranks=EXACT_RANKS):
    """(weights as lazy :class:`GridWeights`, state) on cells (the registry's ``fit_cells``).

    The state is the spline coefficients, with the cells' grid and likelihood columns when the
    fit took the cells path (the bootstrap reuses them: :func:`uses_cells`).
    """
    if uses_cells(n_items, sizes, scheme):
        c, grid, K, P, penalty, knot_spacing, sur = cells_setup_surrogate(n_items, sizes, ranks, counts, scheme,
                                                                          penalty, knot_spacing, exact_ranks)
        fit, beta_s = _cells_fit_from(c, grid, K, P, penalty, knot_spacing, n_items, sizes, ranks, scheme, sur)
        return fit.weights_grid, (fit.beta, grid, K, sur, beta_s)
    fit = _counts_fit(n_items, sizes, ranks, counts, scheme=scheme, penalty=penalty,
                      knot_spacing=knot_spacing, exact_ranks=exact_ranks)
    return fit.weights_grid, fit.beta


def uses_cells(n_items, sizes, scheme="binomial"):
    """Whether cells (N_u, n_u, r) take the cells path: several N_u or n_u, or users ranked in full."""
    Nc = np.asarray(n_items, dtype=np.int64)
    nc = np.asarray(sizes, dtype=np.int64)
    return bool(np.unique(Nc).size > 1 or np.unique(nc).size > 1 or ranked_in_full(nc, Nc, scheme).any())


def logspline_cells_fit(n_items, sizes, ranks, counts, *, scheme="binomial",
                        penalty=DEFAULT_PENALTY, knot_spacing=DEFAULT_KNOT_SPACING,
                        exact_ranks=EXACT_RANKS):
    """:func:`logspline_fit` on cells (N_u, n_u, r) with user counts (the blocks-style entry).

    Every cell c is a column of the likelihood with kernel
    P(r_c | R; N_c, n_c) for R <= N_c and 0 beyond (the per-user model of
    :func:`sampling_lib.estimators.mle_fit`); the prior lives on 1..max N_c.
    Kernels are computed once per distinct (N_c, n_c) at the grid points
    (O(G n) each), so many distinct N_u cost little.

    Parameters
    ----------
    n_items, sizes, ranks, counts : array_like of int, shape (C,)
        The cells (e.g. the arrays of a :class:`sampling_lib.correct.RankCounts`).
    scheme, penalty, knot_spacing, exact_ranks
        As :func:`logspline_fit`.

    Returns
    -------
    LogsplineResult
        ``weights`` and ``prior`` of length max N_c.

    Examples
    --------
    >>> fit = logspline_cells_fit([900, 1000, 1000], [100, 100, 100], [1, 1, 50], [40, 50, 10])
    >>> fit.weights.shape, round(float(fit.weights.sum()), 12)
    ((1000,), 1.0)
    """
    c, grid, K, P, penalty, knot_spacing, sur = cells_setup_surrogate(n_items, sizes, ranks, counts, scheme,
                                                                      penalty, knot_spacing, exact_ranks)
    return _cells_fit_from(c, grid, K, P, penalty, knot_spacing, n_items, sizes, ranks, scheme, sur)[0]


def _cells_fit_from(c, grid, K, P, penalty, knot_spacing, n_items, sizes, ranks, scheme, sur=None):
    """The Newton fit of the cells path on a prepared grid and likelihood columns: (result, the
    surrogate's coefficients or None). With a :class:`CellsSurrogate` the exact Newton iteration
    starts at the surrogate's optimum (same convergence test, fewer exact steps)."""
    beta0 = None
    nc = np.asarray(sizes, dtype=np.int64)
    if np.unique(nc).size == 1 and not ranked_in_full(nc, n_items, scheme).any():
        # warm start: the fit with one N (= max N_u, same grid and basis) on the pooled ranks;
        # the item counts move the optimum little, so a few Newton steps remain
        rc = np.asarray(ranks, dtype=np.int64)
        c1 = np.bincount(rc - 1, weights=c, minlength=int(nc[0]))
        K1 = kernel_on_grid(grid, grid.N, int(nc[0]), scheme)
        beta0 = newton(fit_counts_weight(c1), K1, grid, P, np.zeros(grid.B.shape[1]))[0]
    beta_s = None
    if sur is not None:
        beta0 = np.zeros(grid.B.shape[1]) if beta0 is None else beta0
        ws = fit_counts_weight(sur.counts(c))
        beta_s = newton(ws, sur.K, sur.grid, P, beta0, info=hessian_cells)[0]
        # from the surrogate's optimum, quasi-Newton (BFGS) steps that start from the surrogate's Hessian
        # there (each exact Hessian costs a G x cells x df product), to a Newton decrement of
        # QUASI_NEWTON_FIT_TOL or QUASI_NEWTON_FIT_STEPS steps; the exact Newton solve below then stops at
        # once under its own test (else it goes on with exact Hessians)
        Hs = hessian_cells(beta_s, ws, sur.K, sur.grid, P)
        w = fit_counts_weight(c)[None]
        b = beta_s[None].copy()
        f, g, q = objective(b, w, K, grid, P)
        quasi_newton(np.arange(1), Hs, b, f, g, q, w, K, grid, P, QUASI_NEWTON_FIT_TOL, QUASI_NEWTON_FIT_STEPS)
        beta0 = b[0]
    return _fit_from(c, K, grid, P, penalty, knot_spacing, info=hessian_cells, beta0=beta0), beta_s


# ----------------------------------------------------------------------------
# the registry's entry points (sampling_lib.estimators._registry)
# ----------------------------------------------------------------------------
def fit_weights(r, N, n, *, scheme, **o):
    """The registry's ``fit``: the length-N weight vector."""
    return logspline_fit(r, N, n, scheme=scheme, **o).weights


def fit_state(r, N, n, *, scheme, **o):
    """The registry's ``fit_state``: lazy weights (only ranks 1..H are expanded) and the coefficients."""
    fit = logspline_fit(r, N, n, scheme=scheme, **o)
    return fit.weights_grid, fit.beta


def alternatives(options):
    """The registry's ``alternatives``: the penalty divided and multiplied by :data:`SENSITIVITY_FACTOR`."""
    return [{"penalty": p} for p in sensitivity_penalties(options.get("penalty", DEFAULT_PENALTY))]


# the cells' columns live in _logspline_cells (imported last: it uses the grid and solver defined above)
from ._logspline_cells import (GRID_N_MAX, CellsSurrogate, _CELLS_CACHE, cells_setup,  # noqa: E402
                               cells_setup_surrogate, full_ranking_columns, grid_size_n)
