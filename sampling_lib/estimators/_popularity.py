"""Popularity-sampled negatives: Horvitz-Thompson, the rank-mass curve and the corrected P(R).

The model (sampler, the law X_u ~ Binomial(n_u - 1, Q_u), the logs of a
popularity-sampled evaluation, the sharp no-log bounds) is
:mod:`sampling_lib.popularity`; this module estimates from it. The equation
numbers (1)-(5) are those of :mod:`sampling_lib.popularity`'s docstring
(sampling-lab's own derivation; none of the seed papers covers popularity
sampling):

* :func:`horvitz_thompson` -- the unbiased HT estimate of R_u - 1 (eq 4);
* :func:`rank_mass_curve` -- the pooled rank-mass curve rho(Q) from the
  logged negatives (eq 5);
* :func:`popularity_fit` -- the rank distribution P(R): ``"pop_mle"`` (EM of
  the AAAI21 eq 18 mixture with the kernel Binomial(x; n - 1, G(rho)), each
  user's rank averaged over its posterior), ``"uniform"`` (pretend the
  negatives were uniform) and ``"ht"`` (the rounded HT ranks);
* :func:`popularity_bounds` -- bounds on P(R) from the sampled ranks and the
  item weights alone (no logs).

The three methods are registered estimators (``input="popularity"``):
:func:`sampling_lib.correct.estimate` / :func:`~sampling_lib.correct.compare`
take popularity input like any other and return the same table.

References
----------
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021, eqs 14, 18-21 (mixture model and EM).
.. [HT52] Horvitz, Thompson. A generalization of sampling without replacement
   from a finite universe. JASA 47 (1952) (the estimator (4)).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse, special

from .._validation import check_int
from ..counts import cells
from ..popularity import PopularityLog, RankMassCurve, check_draws, mass_grid, mass_rank_bounds
from ._em import mixture_em
from ._results import EMResult

__all__ = [
    "horvitz_thompson",
    "rank_mass_curve",
    "PopularityFit",
    "popularity_fit",
    "popularity_bounds",
]

_METHODS = ("pop_mle", "ht", "uniform")     # registered in sampling_lib.estimators (_METHODS)


def horvitz_thompson(log):
    """A_hat_u = 1/(n_u - 1) sum_k 1[j_k above] / q_{j_k} (eq 4): unbiased for R_u - 1.

    Examples
    --------
    >>> from sampling_lib import popularity as P
    >>> log = P.popularity_log([0.5], [[0.7, 0.1, 0.6, 0.2]], [[0.1, 0.5, 0.4, 0.5]], [9])
    >>> float(horvitz_thompson(log)[0])            # (1/0.1 + 1/0.4) / 4
    3.125
    """
    check_draws(log, "the Horvitz-Thompson estimate")
    contrib = np.where(log.draw_above, 1.0 / log.draw_q, 0.0)
    tot = np.bincount(log.draw_user, weights=contrib, minlength=log.M)
    return tot / (log.sizes - 1)


class _CurveTerms:
    """What eq 5 needs from a log, computed once: the (size, position) group of every
    draw, its psi (user-normalised) and the posterior CDFs of the groups on the Q grid.
    A user-weighted curve (bootstrap) is then one bincount and one matrix product."""

    def __init__(self, log, grid_size):
        u = log.draw_user
        nu = log.sizes[u]
        self.user = u
        self.psi = 1.0 / (log.n_candidates[u] * log.draw_q) / (nu - 1)   # each user's draws sum to ~1
        base = int(nu.max()) + 1
        key = nu.astype(np.int64) * base + log.draw_position
        uk, self.group = np.unique(key, return_inverse=True)
        sizes, xpos = uk // base, uk % base
        self.mass = mass_grid(grid_size)
        self.cdf = special.betainc((xpos + 1.0)[:, None], (sizes - 1.0 - xpos)[:, None], self.mass[None, :])
        self.draws = int(u.size)

    def curve(self, user_weight=None):
        psi = self.psi if user_weight is None else self.psi * user_weight[self.user]
        rho = np.bincount(self.group, weights=psi, minlength=self.cdf.shape[0]) @ self.cdf
        if not rho[-1] > 0:
            raise ValueError("the logged negatives carry no weight (every user has weight 0)")
        rho = np.maximum.accumulate(np.clip(rho / rho[-1], 0.0, 1.0))
        return RankMassCurve(self.mass, rho, self.draws)


def rank_mass_curve(log, *, grid_size=1025, user_weight=None):
    """Estimate the pooled rank-mass curve rho(Q) from logged negatives (module docstring, eq 5).

    Each logged negative k of user u contributes psi_k = 1/((N_u - 1) q_k)
    (scaled by 1/(n_u - 1) so every user weighs the same) spread over the
    posterior of its mass position, Beta(x_k + 1, n_u - 1 - x_k), where x_k
    is the number of the user's other negatives ranked above it. The curve is
    normalised to rho(1) = 1 (a ratio of HT estimates). It is the average of
    the users' curves at the resolution of the sample (mass positions are
    known to about sqrt(Q / n)).

    Parameters
    ----------
    log : PopularityLog
        With logged negatives.
    grid_size : int, keyword-only
        Points of the uniform and of the geometric part of the Q grid.
    user_weight : array_like, shape (M,), optional, keyword-only
        Weights of the users (bootstrap multiplicities).

    Returns
    -------
    RankMassCurve

    Examples
    --------
    >>> from sampling_lib import popularity as P
    >>> rng = np.random.default_rng(0)
    >>> S = rng.random((50, 40))
    >>> log = P.simulate_popularity_log(S, None, np.zeros(50, int), np.ones(40), 10, rng=1)
    >>> c = rank_mass_curve(log)                    # uniform weights: the identity
    >>> float(np.max(np.abs(c.rho - c.mass))) < 1e-12
    True
    """
    check_draws(log, "the rank-mass curve")
    grid_size = check_int(grid_size, "grid_size", low=3)
    uw = None if user_weight is None else np.asarray(user_weight, float)
    if uw is not None and (uw.shape != (log.M,) or np.any(~(uw >= 0))):
        raise ValueError(f"user_weight must be {log.M} nonnegative numbers; got shape {uw.shape}")
    return _CurveTerms(log, grid_size).curve(uw)


@dataclass(frozen=True)
class PopularityFit:
    """A fitted rank distribution under popularity sampling.

    Attributes
    ----------
    pmf : ndarray, shape (N,)
        Estimated P(R), R = 1..N (N = max_u N_u): the metric estimate is
        ``pmf @ F(1..N)``.
    method : str
        ``"pop_mle"``, ``"uniform"`` or ``"ht"``.
    grid_pmf : ndarray or None
        EM mixing weights over rho = a/(N - 1), a = 0..N-1 (None for "ht").
    curve : RankMassCurve or None
    em : EMResult or None
        EM diagnostics (log-likelihood trace, iterations, gap).
    """

    pmf: np.ndarray
    method: str
    grid_pmf: np.ndarray | None
    curve: RankMassCurve | None
    em: EMResult | None


def _binom_log_pmf(x, m, p):
    """log Binomial(x; m, p) for x (k,) against p (G,): shape (G, k)."""
    x = np.asarray(x, float)[None, :]
    m = np.asarray(m, float)[None, :]
    p = np.asarray(p, float)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        lc = -np.log1p(m) - special.betaln(x + 1.0, m - x + 1.0)
        return lc + special.xlogy(x, p) + special.xlog1py(m - x, -p)


def _cells(log):
    """Unique (n_u, x_u) cells: their sizes and x, and the cell of every user (:func:`sampling_lib.counts.cells`)."""
    st, inv = cells(log.x + 1, log.sizes, return_inverse=True)
    return st.sizes, st.ranks - 1, inv


def _em_on_grid(cell_sizes, cell_x, counts, G_of_grid, tol, max_iter, accelerate):
    L = np.exp(_binom_log_pmf(cell_x, cell_sizes - 1, G_of_grid))
    res = mixture_em(L, counts, tol=tol, max_iter=max_iter, accelerate=accelerate)
    return res, L


class _Estimator:
    """One log prepared for repeated fits (the full sample and bootstrap replicates).

    ``pmf(weight)`` returns the :class:`PopularityFit` for user weights
    ``weight`` (None = every user once); the data-only parts (cells, the
    curve's posterior CDFs, the rank maps) are computed once.
    """

    def __init__(self, log, method, curve=None, tol=None, max_iter=100, accelerate=None, grid_size=1025):
        if not isinstance(log, PopularityLog):
            raise TypeError(f"log must be a PopularityLog; got {type(log).__name__}")
        if method not in _METHODS:
            raise ValueError(f"method must be one of {list(_METHODS)}; got {method!r}")
        self.opts = (tol, max_iter, accelerate)      # checked by mixture_em (sampling_lib.estimators)
        self.log, self.method, self.N = log, method, log.N
        if method == "ht":
            check_draws(log, "method='ht'")
            self.R_ht = np.clip(np.rint(1.0 + horvitz_thompson(log)), 1, log.N_u).astype(np.int64)
            return
        if self.N < 2:
            raise ValueError(f"every user has a single candidate position (max N_u = {self.N}); "
                             "nothing to estimate")
        self.terms = None
        self.curve = None
        if method == "uniform":
            self.curve = RankMassCurve.uniform()
        elif curve is not None:
            if not isinstance(curve, RankMassCurve):
                raise TypeError(f"curve must be a RankMassCurve; got {type(curve).__name__}")
            self.curve = curve
        else:
            check_draws(log, "method='pop_mle' (the rank-mass curve)")
            self.terms = _CurveTerms(log, check_int(grid_size, "grid_size", low=3))
        self.rho = np.arange(self.N) / (self.N - 1)
        self.sizes, self.xs, self.user_cell = _cells(log)
        self.nc_vals, self.nc_inv = np.unique(log.n_candidates, return_inverse=True)
        self.rank_of = [1 + np.rint(self.rho * nc).astype(np.int64) for nc in self.nc_vals]
        self.L_fixed = None if self.curve is None else \
            np.exp(_binom_log_pmf(self.xs, self.sizes - 1, self.curve.mass_of(self.rho)))

    def fit(self, weight=None):
        log = self.log
        w = np.ones(log.M) if weight is None else np.asarray(weight, float)
        if self.method == "ht":
            return PopularityFit(np.bincount(self.R_ht - 1, weights=w, minlength=self.N) / w.sum(),
                                 "ht", None, None, None)
        curve, L = self.curve, self.L_fixed
        if curve is None:
            curve = self.terms.curve(None if weight is None else w)
            L = np.exp(_binom_log_pmf(self.xs, self.sizes - 1, curve.mass_of(self.rho)))
        counts = np.bincount(self.user_cell, weights=w, minlength=self.sizes.size)
        tol, max_iter, accelerate = self.opts
        res = mixture_em(L, counts, tol=tol, max_iter=max_iter, accelerate=accelerate)
        # posterior of rho for every (cell, N_u) group of users, mapped to R = 1 + round(rho (N_u - 1))
        post = res.pmf[:, None] * L
        post /= post.sum(axis=0, keepdims=True)
        C = sparse.csr_matrix((w, (self.user_cell, self.nc_inv)), shape=(L.shape[1], self.nc_vals.size))
        V = np.asarray((C.T @ post.T).T)
        pmf = np.zeros(self.N)
        for j, R in enumerate(self.rank_of):
            pmf += np.bincount(R - 1, weights=V[:, j], minlength=self.N)
        return PopularityFit(pmf / w.sum(), self.method, res.pmf, curve, res)


def popularity_fit(log, method="pop_mle", *, curve=None, tol=None, max_iter=100, accelerate=None,
                   grid_size=1025):
    """Estimate the rank distribution P(R) from a popularity-sampled evaluation.

    Parameters
    ----------
    log : PopularityLog
    method : {"pop_mle", "uniform", "ht"}
        ``"pop_mle"``: EM with the rank-mass curve estimated from the logged
        negatives (or ``curve``), each user's rank averaged over its
        posterior (module docstring); ``"uniform"``: the same pretending the
        negatives were uniform (identity curve; needs no logs); ``"ht"``: the
        distribution of the rounded Horvitz-Thompson ranks 1 + A_hat_u
        (eq 4), clipped to 1..N_u.
    curve : RankMassCurve, optional, keyword-only
        A known curve for ``"pop_mle"`` (default: :func:`rank_mass_curve` of the log).
    tol, max_iter, accelerate : keyword-only
        EM stopping rule as :func:`sampling_lib.estimators.mle_fit`: by
        default exactly 100 EM steps from the uniform distribution on the
        grid (the papers' MLE protocol, AAAI21 eq 21).
    grid_size : int, keyword-only
        For :func:`rank_mass_curve`.

    Returns
    -------
    PopularityFit

    References
    ----------
    AAAI21 eqs 18-21 (the mixture and its EM, here with the kernel
    Binomial(x; n - 1, G(rho))); module docstring eqs 3-5.

    Examples
    --------
    >>> from sampling_lib import popularity as P
    >>> rng = np.random.default_rng(0)
    >>> S = rng.random((200, 60))
    >>> log = P.simulate_popularity_log(S, None, np.zeros(200, int), np.arange(1.0, 61), 10, rng=1)
    >>> fit = popularity_fit(log)
    >>> fit.pmf.shape, round(float(fit.pmf.sum()), 12), fit.em.n_iter
    ((60,), 1.0, 100)
    """
    return _Estimator(log, method, curve, tol, max_iter, accelerate, grid_size).fit()


def popularity_bounds(log, *, tol=None, max_iter=100):
    """Bounds on P(R) from the sampled ranks and the item weights alone (no logs).

    The distribution of Q_u is fitted by EM (identity curve on the grid of
    Q), each user's posterior over Q is mapped to the extreme ranks
    1 + k_min(Q) (most popular candidates first) and 1 + k_max(Q) (least
    popular first) of :func:`mass_rank_bounds` for the user's own candidates.
    For a metric F nonincreasing in R, ``upper @ F`` and ``lower @ F`` bound
    the metric of every ranking compatible with the fitted Q-distribution.
    They are point bounds: the fitted Q-distribution is taken as known, so
    they carry no sampling uncertainty and, on a finite sample, the true
    metric can fall outside them (it did in 13 of 54 intervals on unseen
    data). An interval for the metric is the estimator's bootstrap
    interval.

    Returns
    -------
    lower, upper : ndarray, shape (N,)
        Rank distributions giving the lower (largest ranks) and upper
        (smallest ranks) metric bounds.

    Examples
    --------
    >>> from sampling_lib import popularity as P
    >>> from sampling_lib.metrics import metric_values
    >>> rng = np.random.default_rng(0)
    >>> S = rng.random((100, 30))
    >>> log = P.simulate_popularity_log(S, None, np.zeros(100, int), np.arange(1.0, 31), 8, rng=1)
    >>> lo, hi = popularity_bounds(log)
    >>> F = metric_values("recall@5", 30)
    >>> bool(lo @ F <= hi @ F)
    True
    """
    if not isinstance(log, PopularityLog):
        raise TypeError(f"log must be a PopularityLog; got {type(log).__name__}")
    if log.item_weights is None or log.excluded is None:
        raise ValueError("popularity_bounds needs the item weights and each user's excluded items "
                         "(give item_weights when reading the scores table)")
    N = log.N
    grid = np.arange(N) / (N - 1)
    sizes, xs, user_cell = _cells(log)
    counts = np.bincount(user_cell, minlength=sizes.size).astype(float)
    res, L = _em_on_grid(sizes, xs, counts, grid, tol, max_iter, None)
    post = res.pmf[:, None] * L
    post /= post.sum(axis=0, keepdims=True)
    w = log.item_weights
    order = np.argsort(-w, kind="stable")
    ws = w[order]
    E = sparse.csr_matrix(log.excluded)[:, order]
    lower = np.zeros(N)
    upper = np.zeros(N)
    for u in range(log.M):
        keep = ws > 0
        keep[E.indices[E.indptr[u]:E.indptr[u + 1]]] = False
        cq = ws[keep]
        cq = cq / cq.sum()
        kmin, kmax = mass_rank_bounds(cq, grid)
        p = post[:, user_cell[u]]
        upper += np.bincount(kmin, weights=p, minlength=N)
        lower += np.bincount(kmax, weights=p, minlength=N)
    return lower / log.M, upper / log.M



# ----------------------------------------------------------------------------
# the registry's entry points (sampling_lib.estimators._registry)
# ----------------------------------------------------------------------------
def registry_fit(method):
    """``fit_state`` of the registered estimator ``method``: (P(R) of the full sample, the prepared model)."""
    def fit_state(log, *, tol=None, max_iter=100, grid_size=1025):
        model = _Estimator(log, method, None, tol, max_iter, grid_size=grid_size)
        return model.fit().pmf, model
    return fit_state


def registry_replicates(fitted, Wb):
    """Bootstrap replicates (B, m): the model refitted with every row of user weights ``Wb`` (B, M)."""
    H = fitted.F.shape[0]
    return np.stack([fitted.state.fit(wb).pmf[:H] @ fitted.F for wb in np.asarray(Wb, dtype=float)])


def registry_bounds(log, *, tol=None, max_iter=100, **_):
    """The no-log bounds (lower, upper) of :func:`popularity_bounds`, or None without item weights."""
    if log.item_weights is None or log.excluded is None:
        return None
    return popularity_bounds(log, tol=tol, max_iter=max_iter)
