"""Can the data reject one pooled prior of the tail rank against one prior per group of head counts?

A parametric bootstrap of the stratified estimator's grouping (:func:`strata_pooling_check`): the users' tail
ranks redrawn under the pooled fit, both fits refitted, the likelihood-ratio statistic compared with its
null distribution. Split out of :mod:`sampling_lib.estimators._logspline_strata`, whose fits it uses.

References
----------
.. [Efron93] Efron, Tibshirani. An Introduction to the Bootstrap (1993), ch. 6 (parametric bootstrap).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import check_int
from ..kernels import check_strata
from ._logspline import DEFAULT_KNOT_SPACING, DEFAULT_PENALTY, EXACT_RANKS
from ._logspline_strata import DEFAULT_MIN_GROUP_USERS, _cells, _check_options, _fit_cells

__all__ = ["PoolingCheck", "strata_pooling_check"]


@dataclass(frozen=True)
class PoolingCheck:
    """A parametric-bootstrap check of one pooled prior against one prior per group (:func:`strata_pooling_check`).

    Attributes
    ----------
    statistic : float
        2 (l_groups - l_pooled), l the conditional log-likelihood of the users' sampled tail ranks
        given their designs (:attr:`StrataFit.conditional_loglik`).
    pvalue : float
        (1 + #{null statistics >= statistic}) / (1 + n_sim); NaN with one group.
    loglik_grouped, loglik_pooled : float
    null_statistics : ndarray, shape (n_sim,)
    groups : int
    n_sim : int
    """

    statistic: float
    pvalue: float
    loglik_grouped: float
    loglik_pooled: float
    null_statistics: np.ndarray
    groups: int
    n_sim: int


def _simulate_pooled(pooled, rng):
    """Tail ranks of the pooled fit's users redrawn under its prior: the coordinate from the prior restricted
    to each user's support (grid points, by the inverse CDF), r - 1 ~ Hypergeometric(T, R - 1 - x, s)."""
    inside = pooled.group >= 0
    idx = np.flatnonzero(inside)
    n = np.rint(pooled.counts[idx]).astype(np.int64)
    u = np.repeat(idx, n)
    N, m, x, s = pooled.n_items[u], pooled.heads[u], pooled.above[u], pooled.tail_sizes[u]
    T = N - 1 - m
    g = pooled.groups[0].fit.prior_grid.cells
    mid = pooled.grid.mid
    C = np.r_[0.0, np.cumsum(g)]
    kx = x if pooled.coordinate == "rank" else np.zeros_like(x)
    a = np.searchsorted(mid, kx + 1, side="left")          # first grid point in the support
    b = np.searchsorted(mid, kx + T + 1, side="right")     # one past the last
    U = C[a] + rng.random(u.size) * (C[b] - C[a])
    row = np.clip(np.searchsorted(C, U, side="right") - 1, a, np.maximum(a, b - 1))
    v = np.clip(mid[np.minimum(row, mid.size - 1)], kx + 1, kx + T + 1)     # a support without a grid point: its end
    Gd = v - 1 - kx
    r = 1 + rng.hypergeometric(Gd, T - Gd, s)
    zero = np.flatnonzero(~inside)
    ones = np.ones(u.size)
    return (np.r_[N, pooled.n_items[zero]], np.r_[m, pooled.heads[zero]], np.r_[x, pooled.above[zero]],
            np.r_[s, pooled.tail_sizes[zero]], np.r_[r, pooled.ranks[zero]], np.r_[ones, pooled.counts[zero]])


def strata_pooling_check(n_items, heads, above, tail_sizes, ranks, counts=None, *, k_max,
                         min_group_users=DEFAULT_MIN_GROUP_USERS, n_sim=99, rng=None, coordinate="tail",
                         penalty=DEFAULT_PENALTY,
                         knot_spacing=DEFAULT_KNOT_SPACING, exact_ranks=EXACT_RANKS):
    """Can the data reject one prior for every head count x? A parametric bootstrap of the likelihood ratio.

    The statistic is 2 (l_groups - l_pooled): l the conditional log-likelihood of the users' tail ranks
    given their designs, sum_u log(q_u / G_u) (q_u = sum_R g(R) P(r_u | R), G_u the prior's mass on
    the user's support), under one prior per group (:func:`strata_groups`) and under one pooled prior
    for every user with x < k_max. Its null distribution is simulated (Efron and Tibshirani 1993,
    ch. 6): every user keeps its design (N, m, x, s), R is redrawn from the pooled prior restricted
    to the user's support and r from the tail's hypergeometric law, both fits are refitted and the
    statistic recomputed. A small p-value says the tails of users with different head counts are
    distributed differently than one prior allows -- an observation about the data, not a claim.

    Parameters
    ----------
    n_items, heads, above, tail_sizes, ranks, counts, k_max, min_group_users, coordinate, penalty, knot_spacing,
    exact_ranks
        As :func:`logspline_strata_fit` (``counts`` must be whole numbers: users are redrawn).
    n_sim : int >= 1, default 99, keyword-only
        Simulated data sets.
    rng : None, int or numpy.random.Generator, keyword-only

    Returns
    -------
    PoolingCheck

    References
    ----------
    Efron and Tibshirani (1993), An Introduction to the Bootstrap, ch. 6 (parametric bootstrap).

    Examples
    --------
    >>> x = np.repeat([0, 1], [40, 40])
    >>> r = np.r_[np.ones(30, int), np.full(10, 5), np.full(10, 1), np.full(30, 8)]
    >>> chk = strata_pooling_check(400, 40, x, 30, r, k_max=10, min_group_users=30, n_sim=9, rng=0)
    >>> chk.groups, chk.n_sim, bool(chk.statistic > 0)
    (2, 9, True)
    """
    k_max, min_group_users, penalty, knot_spacing, exact_ranks, coordinate = _check_options(
        k_max, min_group_users, penalty, knot_spacing, exact_ranks, coordinate)
    n_sim = check_int(n_sim, "n_sim", low=1)
    rng = np.random.default_rng(rng)
    N, m, x, s, r, c = check_strata(n_items, heads, above, tail_sizes, ranks,
                                    counts=np.ones(np.size(n_items)) if counts is None else counts)
    if np.any(c != np.round(c)):
        raise ValueError("counts must be whole numbers (users are redrawn)")
    cells = _cells(N, m, x, s, r, c)
    opts = (k_max, min_group_users, penalty, knot_spacing, exact_ranks, coordinate)
    grouped = _fit_cells(*cells, *opts)
    J = len(grouped.groups)
    if J == 0:
        raise ValueError(f"above: every user has x >= k_max={k_max}; there is no prior to check")
    one = np.array([[0, k_max - 1]])
    pooled = _fit_cells(*cells, *opts, ranges=one, grid=grouped.grid)
    l_g, l_p = grouped.conditional_loglik, pooled.conditional_loglik
    stat = 2.0 * (l_g - l_p)
    if J == 1:
        warnings.warn("strata_pooling_check: one group of head counts (too few users for two); nothing to compare",
                      RuntimeWarning, stacklevel=2)
        return PoolingCheck(statistic=stat, pvalue=float("nan"), loglik_grouped=l_g, loglik_pooled=l_p,
                            null_statistics=np.zeros(0), groups=1, n_sim=0)
    ranges = [(g.above_low, g.above_high) for g in grouped.groups]
    b_g, b_p = [g.fit.beta for g in grouped.groups], [pooled.groups[0].fit.beta]
    null = np.empty(n_sim)
    for i in range(n_sim):
        sim = _cells(*_simulate_pooled(pooled, rng))
        fg = _fit_cells(*sim, *opts, ranges=ranges, beta0=b_g, grid=grouped.grid)
        fp = _fit_cells(*sim, *opts, ranges=one, beta0=b_p, grid=grouped.grid)
        null[i] = 2.0 * (fg.conditional_loglik - fp.conditional_loglik)
    pvalue = (1.0 + np.sum(null >= stat)) / (1.0 + n_sim)
    return PoolingCheck(statistic=stat, pvalue=float(pvalue), loglik_grouped=l_g, loglik_pooled=l_p,
                        null_statistics=null, groups=J, n_sim=n_sim)
