"""The log-spline estimator for a stratified sampled evaluation: a proxy's head scored exactly, a sampled tail.

User u has N_u candidates (its held-out item and C_u = N_u - 1 negatives). A
cheap proxy orders the negatives; its top m_u (the *head*) are scored by the
costly model, so x_u, the number of head negatives at or above the held-out
item, is known. s_u of the other T_u = C_u - m_u negatives (the *tail*) are
sampled uniformly without replacement and r_u = 1 + (sampled tail items at or
above the held-out item). The global rank is R_u = 1 + x_u + Y_u and r_u
follows the tail's hypergeometric kernel shifted by x_u
(:func:`sampling_lib.kernels.strata_kernel`; :mod:`sampling_lib.proxy`).

The estimate of a top-K metric F (``K <= k_max``) is T_hat = (1/M) sum_u E[F(R_u) | x_u, r_u]:

* users with x_u >= k_max have R_u > k_max, so F(R_u) = 0 exactly (no tail needed);
* the others fall in **groups of consecutive x** (:func:`strata_groups`), each with its own smooth
  log-spline prior (the default's, Efron 2016, :mod:`sampling_lib.estimators._logspline`) fitted
  by the default's penalized Newton iteration with the stratified kernel as likelihood columns;
  each user's posterior mean is taken under its group's prior. One prior per group because a
  user with many head hits (a hard user) has a differently distributed tail: P(R | x) depends on
  x, and :func:`sampling_lib.estimators.strata_pooling_check` (``_strata_pooling``) shows whether the
  data can tell.

The prior lives on the tail rank R - x (``coordinate="tail"``, the default: the kernel unshifted,
the metric F(x + (R - x))) or on the global rank R (``coordinate="rank"``: the kernel shifted by x,
the metric F(R); a group's prior on R >= 1 + its smallest x, the grid points below at mass 0):
:func:`logspline_strata_fit`, Notes. In a group of several x the fit, like the default's with
per-user N_u, maximizes sum_c n_c log q_c without renormalizing q_c to each user's support: the
group's prior is a working model, and a group holds several x only when single values have fewer
than ``min_group_users`` users. Everything else is the default's: the compressed grid (values
1..max(exact_ranks, k_max) exact, so every metric's ranks and every support's first value are exact
grid points), the penalty, the knots, the batched bootstrap refits
(:func:`sampling_lib.estimators._logspline_boot.bootstrap_core`), the sensitivity rule below resolution.

References
----------
.. [Efron16] Efron, B. Empirical Bayes deconvolution estimates. Biometrika 103(1), 2016.
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation. KDD 2020, Sec 2.2.
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System. ACM TORS
   2024 (eqs 31-34: the mixture likelihood; eq 46: full ranking's half-width).
.. [Efron93] Efron, Tibshirani. An Introduction to the Bootstrap (1993), ch. 13 (percentile interval),
   ch. 6 (parametric bootstrap).
.. [YA06] Yilmaz, Aslam. Estimating average precision with incomplete and imperfect judgments. CIKM 2006.
"""
from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validation import check_confidence_level, check_float, check_int
from ..counts import bootstrap_loop
from ..inference import percentile_interval, z_critical
from ..kernels import check_strata, strata_kernel
from ..metrics import METRICS, metric_matrix, parse_metrics
from ._logspline import (DEFAULT_KNOT_SPACING, DEFAULT_PENALTY, EXACT_RANKS, _fit_from, fit_counts_weight,
                         sensitivity_penalties, spline_grid)
from ._logspline_newton import hessian_cells, penalty_matrix, prior_masses
from ._logspline_cells import grid_size_n
from ._logspline_boot import bootstrap_core
from ._logspline_weights import LogsplineResult

__all__ = ["DEFAULT_MIN_GROUP_USERS", "STRATA_METHOD", "COORDINATES", "StrataGroup", "StrataFit", "strata_groups",
           "logspline_strata_fit", "strata_estimate"]

#: Default smallest number of users of a group of head counts x (:func:`strata_groups`).
DEFAULT_MIN_GROUP_USERS = 200
#: The ``method`` column of :func:`strata_estimate`.
STRATA_METHOD = "logspline (stratified)"
#: The table's columns (those of :data:`sampling_lib.correct.ESTIMATE_COLUMNS`; tests check they agree).
_COLUMNS = (
    "model", "metric", "K", "naive", "naive_ci_low", "naive_ci_high", "estimate", "se", "ci_low",
    "ci_high", "method", "scheme", "users", "N", "n", "confidence_level", "n_boot", "sensitivity_low",
    "sensitivity_high", "bound_low", "bound_high", "below_resolution", "clipped", "full_halfwidth",
    "precision_ratio",
)


# ----------------------------------------------------------------------------
# groups of head counts
# ----------------------------------------------------------------------------
def strata_groups(above, k_max, min_group_users=DEFAULT_MIN_GROUP_USERS, counts=None):
    """Groups of consecutive head counts x in 0..k_max-1, each with at least ``min_group_users`` users.

    The rule: go through x = 0, 1, ..., k_max - 1 adding up the users with that x; a group closes at
    the first x where its users reach ``min_group_users`` and the next group starts at x + 1. The
    users left after the last closed group (fewer than ``min_group_users``) join it, which then ends
    at k_max - 1. With fewer than ``min_group_users`` users in all, there is one group 0..k_max-1;
    with none (every user has x >= k_max), none. Users with x >= k_max are in no group (their
    metrics are 0).

    Parameters
    ----------
    above : array_like of int >= 0
        Head counts x (one per user, or per cell with ``counts``).
    k_max : int >= 1
        The largest cutoff K of the metrics.
    min_group_users : int >= 1
    counts : array_like, optional
        Users per entry of ``above`` (default 1 each).

    Returns
    -------
    ndarray of int64, shape (J, 2)
        First and last x of each group; the groups cover 0..k_max-1 in order.

    Examples
    --------
    >>> strata_groups(np.repeat([0, 1, 2, 3, 4, 60], [250, 120, 90, 30, 5, 40]), 50).tolist()
    [[0, 0], [1, 49]]
    >>> strata_groups([0, 0, 1, 3], 10, 2).tolist()
    [[0, 0], [1, 9]]
    >>> strata_groups(np.repeat([0, 1, 2], [300, 250, 260]), 5).tolist()
    [[0, 0], [1, 1], [2, 4]]
    """
    k_max = check_int(k_max, "k_max", low=1)
    min_group_users = check_int(min_group_users, "min_group_users", low=1)
    x = np.asarray(above, dtype=np.int64).ravel()
    c = np.ones(x.size) if counts is None else np.asarray(counts, dtype=float).ravel()
    if c.shape != x.shape:
        raise ValueError(f"counts must have one entry per head count ({x.size}); got {c.size}")
    if x.size and x.min() < 0:
        raise ValueError(f"above must be >= 0; got min {int(x.min())}")
    inside = x < k_max
    per_x = np.bincount(x[inside], weights=c[inside], minlength=k_max)
    if per_x.sum() <= 0:
        return np.zeros((0, 2), dtype=np.int64)
    out, lo, acc = [], 0, 0.0
    for v in range(k_max):
        acc += per_x[v]
        if acc >= min_group_users:
            out.append([lo, v])
            lo, acc = v + 1, 0.0
    if not out:
        out = [[0, k_max - 1]]
    out[-1][1] = k_max - 1
    return np.asarray(out, dtype=np.int64)


# ----------------------------------------------------------------------------
# the fit
# ----------------------------------------------------------------------------
@dataclass(frozen=True)
class StrataGroup:
    """One group of head counts and its fitted prior (see :func:`logspline_strata_fit`).

    Attributes
    ----------
    above_low, above_high : int
        The group's range of head counts x (:func:`strata_groups`).
    support_low : int
        The smallest value of the prior's coordinate: 1 + the smallest x of the group's users for the
        global rank (``coordinate="rank"``), 1 for the tail rank (``coordinate="tail"``).
    users : float
        Users in the group.
    cells : ndarray of int
        The group's cells (indices into the :class:`StrataFit`'s cells).
    fit : LogsplineResult
        The prior (``fit.prior_grid``) and the group's average posterior over the coordinate
        (``fit.weights_grid``), on the fit's grid.
    """

    above_low: int
    above_high: int
    support_low: int
    users: float
    cells: np.ndarray
    fit: LogsplineResult
    grid: object = dataclasses.field(repr=False)


@dataclass(frozen=True)
class StrataFit:
    """The per-group log-spline fit of a stratified evaluation (:func:`logspline_strata_fit`).

    Attributes
    ----------
    n_items, heads, above, tail_sizes, ranks : ndarray of int, shape (C,)
        The cells (N, m, x, s, r), sorted, each with users ``counts`` (C,).
    counts : ndarray of float, shape (C,)
    group : ndarray of int, shape (C,)
        Each cell's group (index into ``groups``); -1 for the cells with x >= k_max.
    groups : tuple of StrataGroup
    k_max : int
        The largest cutoff the fit serves (cells with x >= k_max count as F = 0).
    coordinate : {"tail", "rank"}
        What the priors live on: the tail rank R - x, or the global rank R (:func:`logspline_strata_fit`).
    penalty, knot_spacing : float
    exact_ranks : int
        Values 1..exact_ranks of the coordinate are exact grid points (at least k_max, at most the grid's N).
    known : tuple (k, y) of ndarray of int, shape (C,), or None
        With ``known_tail`` (:func:`logspline_strata_fit`): per cell, the k tail items after the head scored
        exactly and the y of them above the held-out item (the kernel then shifted by y on the rest).
    head_mean : float
        The users' mean head m_u as given (the cells of users with x >= k_max are pooled with m = k_max).
    """

    n_items: np.ndarray
    heads: np.ndarray
    above: np.ndarray
    tail_sizes: np.ndarray
    ranks: np.ndarray
    counts: np.ndarray
    group: np.ndarray
    groups: tuple
    k_max: int
    coordinate: str
    penalty: float
    knot_spacing: float
    exact_ranks: int
    grid: object = dataclasses.field(repr=False)
    K: np.ndarray = dataclasses.field(repr=False)
    known: tuple = dataclasses.field(default=None, repr=False)
    head_mean: float = None

    @property
    def users(self):
        """All users M (the cells with x >= k_max included)."""
        return float(self.counts.sum())

    @property
    def zero_users(self):
        """Users with x >= k_max (F = 0 for every metric with K <= k_max)."""
        return float(self.counts[self.group < 0].sum())

    @property
    def kernel_shift(self):
        """The shift of each cell's kernel in the coordinate: x (global rank), 0 (tail rank), or the known
        tail items above the held-out one (tail rank with ``known_tail``)."""
        if self.known is not None:
            return self.known[1]
        return self.above if self.coordinate == "rank" else np.zeros_like(self.above)

    @property
    def metric_shift(self):
        """The global rank is the coordinate plus this: 0 (global rank) or x (tail rank)."""
        return np.zeros_like(self.above) if self.coordinate == "rank" else self.above

    @property
    def loglik(self):
        """The groups' log-likelihood sum_c n_c log q_c at their fitted priors (the quantity the fit maximizes,
        before the penalty)."""
        return float(sum(gr.fit.loglik for gr in self.groups))

    @property
    def conditional_loglik(self):
        """sum_c n_c log(q_c / G_c): each user's probability of its sampled tail rank given its design (N, m, x,
        s) under its group's prior, G_c the prior's mass on the user's support (x + 1..x + T + 1 in global
        ranks, 1..T + 1 in tail ranks)."""
        total = 0.0
        kx = self.kernel_shift
        T = self.n_items - 1 - self.heads - (0 if self.known is None else self.known[0])
        mid = self.grid.mid[:, None]
        for gr in self.groups:
            g = gr.fit.prior_grid.cells
            c, lo = gr.cells, kx[gr.cells] + 1
            q = g @ self.K[:, c]
            G = g @ ((mid >= lo) & (mid <= lo + T[c]))
            total += float(np.sum(self.counts[c] * (np.log(q) - np.log(G))))
        return total

    def metric_matrix(self, metrics):
        """(parsed metrics, F on global ranks 1..min(max N, max K)); every K must be <= k_max."""
        parsed = parse_metrics(metrics)
        big = [p[0] for p in parsed if p[2] > self.k_max]
        if big:
            raise ValueError(f"metrics must have K <= k_max={self.k_max} (the fit counts users with x >= k_max as "
                             f"F = 0); got {big}")
        H = min(int(self.n_items.max()), max(p[2] for p in parsed))
        return parsed, metric_matrix(parsed, H)

    def _head(self, F):
        """(H, A): the coordinate's exact rows 1..H a metric on global ranks 1..len(F) needs, and
        A[c, h, :] = F(shift_c + h + 1) per cell (shift = :attr:`metric_shift`; 0 beyond len(F))."""
        H = int(min(F.shape[0], self.exact_ranks))
        shift = self.metric_shift
        pad = np.vstack([F, np.zeros((int(shift.max(initial=0)) + H, F.shape[1]))])
        return H, pad[shift[:, None] + np.arange(H)[None, :]]

    def cell_means(self, metrics):
        """Posterior means E[F(R) | cell] under the cell's group prior, (C, m); 0 for cells with x >= k_max."""
        _, F = self.metric_matrix(metrics)
        return self._cell_means(F)

    def _cell_means(self, F):
        H, A = self._head(F)
        out = np.zeros((self.counts.size, F.shape[1]))
        for gr in self.groups:
            g = gr.fit.prior_grid.cells
            K = self.K[:, gr.cells]
            num = np.einsum("h,hc,chm->cm", g[:H], K[:H], A[gr.cells])
            out[gr.cells] = num / (g @ K)[:, None]
        return out

    def estimate(self, metrics):
        """T_hat = (1/M) sum_u E[F(R_u) | x_u, r_u] for every metric, shape (m,).

        Examples
        --------
        >>> fit = logspline_strata_fit([200] * 3, [20] * 3, [0, 0, 3], [30] * 3, [1, 4, 2], [60, 30, 10], k_max=10)
        >>> est = fit.estimate(["recall@10", "ndcg@10"])
        >>> est.shape, bool(np.all((est >= 0) & (est <= 1)))
        ((2,), True)
        """
        return self.counts @ self.cell_means(metrics) / self.users

    def cell_posteriors(self, H=None):
        """P(R = 1..H | cell) over global ranks under the cell's group prior, (C, H) (default H = k_max);
        the coordinate's values it needs must be exact grid points. Rows of the cells with x >= k_max are 0
        (their R lies beyond k_max)."""
        H = self.k_max if H is None else check_int(H, "H", low=1)
        if H > self.exact_ranks and self.exact_ranks < self.grid.N:
            raise ValueError(f"H must lie in 1..{self.exact_ranks} (the grid's exact values); got H={H}")
        Hc = min(H, self.exact_ranks)
        out = np.zeros((self.counts.size, H))
        shift = self.metric_shift
        for gr in self.groups:
            g = gr.fit.prior_grid.cells
            K = self.K[:, gr.cells]
            post = (g[:Hc, None] * K[:Hc]).T / (g @ K)[:, None]          # (cells, coordinate values 1..Hc)
            for j, c in enumerate(gr.cells):
                k = min(Hc, H - shift[c])
                if k > 0:
                    out[c, shift[c]:shift[c] + k] = post[j, :k]
        return out

    def weights_head(self, H):
        """The users' average posterior over global ranks 1..H (the mixture over groups; the x >= k_max
        users' mass lies beyond k_max): w with T_hat = w @ F for a metric F on ranks 1..H."""
        return self.counts @ self.cell_posteriors(H) / self.users

    def refit(self, penalty):
        """The fit of the same cells and groups with another penalty (started from this fit)."""
        penalty = check_float(penalty, "penalty", low=0.0)
        groups = _fit_groups(self.counts, self.K, self.grid, np.where(self.group >= 0, self.above, -1),
                             [(g.above_low, g.above_high) for g in self.groups], penalty, self.knot_spacing,
                             self.coordinate, beta0=[g.fit.beta for g in self.groups])
        return dataclasses.replace(self, groups=groups, penalty=penalty)


def _support_grid(grid, low):
    """The grid with prior mass 0 at values below ``low`` (log width -inf there; those are exact grid points)."""
    if low <= 1:
        return grid
    return dataclasses.replace(grid, logw=np.where(grid.hi < low, -np.inf, grid.logw))


def _cells(N, m, x, s, r, c, *extra):
    """Distinct (N, m, x, s, r, *extra) with their users (cells with no users dropped), sorted: the arrays
    (N, m, x, s, r, counts, *extra)."""
    keys, inv = np.unique(np.stack([N, m, x, s, r, *extra]), axis=1, return_inverse=True)
    cnt = np.bincount(inv.ravel(), weights=c, minlength=keys.shape[1])
    keep = cnt > 0
    return (*keys[:5, keep], cnt[keep], *keys[5:, keep])


def _kernel_columns(grid, N, m, x, s, r):
    """Likelihood columns (G, C) of the cells at the grid points: the kernel at each point's
    representative rank; a column with no representative rank on its support (a narrow support
    inside wide bins) takes the kernel averaged over each bin's ranks instead."""
    K = strata_kernel(grid.mid, N, m, x, s, r)
    empty = np.flatnonzero(~np.any(K > 0, axis=0))
    width = (grid.hi - grid.lo + 1).astype(float)
    for j in empty:
        T = N[j] - 1 - m[j]
        R = np.arange(x[j] + r[j], x[j] + T - s[j] + r[j] + 1)       # the ranks where r_j is possible
        v = strata_kernel(R, N[j], m[j], x[j], s[j], r[j])[:, 0]
        col = np.zeros(grid.lo.size)
        np.add.at(col, np.searchsorted(grid.hi, R), v)
        K[:, j] = col / width
    return K


def _fit_groups(counts, K, grid, above, ranges, penalty, knot_spacing, coordinate, beta0=None):
    """One :class:`StrataGroup` per range (lo, hi) of head counts: the default's Newton fit
    (observed Hessian of the cells path) on the group's cells; a prior on global ranks lives on
    ranks >= 1 + the group's smallest x."""
    P = penalty_matrix(grid.B.shape[1], penalty)
    out = []
    for j, (lo, hi) in enumerate(ranges):
        cells = np.flatnonzero((above >= lo) & (above <= hi))
        low = int(above[cells].min()) + 1 if coordinate == "rank" else 1
        gg = _support_grid(grid, low)
        b0 = None if beta0 is None else beta0[j]
        Kc = np.ascontiguousarray(K[:, cells])
        # a group whose users all sit at tail rank 1 takes the limit: all prior mass at the grid's first point
        fit = _fit_from(counts[cells], Kc, gg, P, penalty, knot_spacing, info=hessian_cells, beta0=b0)
        out.append(StrataGroup(above_low=int(lo), above_high=int(hi), support_low=low,
                               users=float(counts[cells].sum()), cells=cells, fit=fit, grid=gg))
    return tuple(out)


#: What the groups' priors live on (:func:`logspline_strata_fit`; the first is the default).
COORDINATES = ("tail", "rank")


def _check_options(k_max, min_group_users, penalty, knot_spacing, exact_ranks, coordinate):
    if coordinate not in COORDINATES:
        raise ValueError(f"coordinate must be one of {COORDINATES}; got {coordinate!r}")
    return (check_int(k_max, "k_max", low=1), check_int(min_group_users, "min_group_users", low=1),
            check_float(penalty, "penalty", low=0.0),
            check_float(knot_spacing, "knot_spacing", low=0.0, low_open=True),
            check_int(exact_ranks, "exact_ranks", low=1), coordinate)


def logspline_strata_fit(n_items, heads, above, tail_sizes, ranks, counts=None, *, k_max,
                         min_group_users=DEFAULT_MIN_GROUP_USERS, coordinate="tail", penalty=DEFAULT_PENALTY,
                         knot_spacing=DEFAULT_KNOT_SPACING, exact_ranks=EXACT_RANKS, known_tail=None):
    """Per-group log-spline priors of a stratified evaluation and the users' posterior means.

    Parameters
    ----------
    n_items, heads, above, tail_sizes, ranks : array_like of int, shape (M,) or (C,)
        Per user (or per cell, with ``counts``): N_u candidates (held-out item included), the head
        size m_u, the head negatives x_u at or above the held-out item, the tail sample size s_u
        (0..N_u - 1 - m_u) and the sampled tail rank r_u in 1..s_u + 1 (scalars broadcast).
    counts : array_like, optional
        Users per entry (default one each).
    k_max : int, keyword-only
        The largest cutoff K of the metrics to be estimated: users with x_u >= k_max have
        R_u > k_max, F = 0, and need no prior: their cells are pooled, one per N_u, as
        (N_u, k_max, k_max, 0, 1) (``fit.head_mean`` keeps the users' mean head), and the grid is set by
        the other users' tails.
    min_group_users : int, default 200, keyword-only
        The smallest group of head counts (:func:`strata_groups`).
    coordinate : {"tail", "rank"}, default "tail", keyword-only
        What each group's log-spline prior lives on. ``"tail"``: the tail rank R - x = 1 + Y (grid
        of max T_u + 1; the kernel unshifted, the metric F(x + coordinate)): the prior says how the
        tail items beat the held-out item whatever the head did. ``"rank"``: the global rank R (grid
        of N = max N_u; the kernel shifted by x, :func:`sampling_lib.kernels.strata_kernel`; the
        metric F(R)); the prior of a group lives on R >= 1 + its smallest x. See Notes.
    penalty, knot_spacing, exact_ranks : keyword-only
        As :func:`sampling_lib.estimators.logspline_fit`; the grid's exact values are at least k_max.
    known_tail : tuple (k, y) of array_like of int, optional, keyword-only
        Per user: the first k_u tail items (those right after the head, in the proxy's order) were scored
        exactly and y_u of them rank at or above the held-out item; the tail sample s_u is drawn from the
        other T_u - k_u (0 <= y_u <= k_u <= T_u, s_u <= T_u - k_u). The cells of a larger head seen as
        this smaller one's: the tail rank R - x is then y_u + 1 + (the rest's items above), and the
        kernel is the rest's shifted by y_u. Tail coordinate only. Used to price a smaller head from a
        pilot (:func:`sampling_lib.design.plan_strata`).

    Returns
    -------
    StrataFit

    Notes
    -----
    *The grid.* The default's (:func:`sampling_lib.estimators.spline_grid`), hypergeometric, for the
    sampled users' largest tail sample + 1 (:func:`grid_size_n`) and N = max N_u (``"rank"``) or
    max T_u + 1 (``"tail"``). A cell's likelihood column is the kernel at the grid points. Every
    support starts at an exact grid point (x + 1 <= k_max, or 1). With ``"rank"`` the bins beyond the
    exact ranks were cut for the kernel of N = max N_u while the tail's kernel has population
    T_u = N_u - 1 - m_u: with m_u small against N_u the bins' TV bound carries over to first order in
    (R - x) / T_u; with a large head the bins are coarser than the tail's kernel needs near the
    bottom of its support (the ranks that matter least to a top-K metric). With ``"tail"`` the bins
    are cut for the tail's own kernel (exact for one T_u).

    *The two coordinates* agree on a group of one x up to the spline's smoothness: the same
    likelihood, a prior smooth in log R or in log(R - x). They differ in what they can represent:
    a proxy that puts the items the model prefers in its head leaves many users with Y = 0
    (R = x + 1), a spike that a prior smooth in log(R - x) holds at its first point for every x,
    whereas a prior smooth in log R must spread it over the knots near log(x + 1) (and, in a group
    of several x, over several spikes). Each group is fitted by the default's Newton iteration
    (``_fit_from`` with the observed Hessian of the cells path).

    **Choice of the default coordinate** (sampling-lab simulations, 40 populations each, 95%
    intervals of :func:`strata_estimate` with 200 replicates against the superpopulation value;
    N = 1000, m = 30, s = 40, M = 2000, R from a log-spline power law): with a proxy ordering the
    negatives at random both coordinates covered Recall@10, NDCG@10 and Recall@3 at 92-98%; with a
    proxy that puts the items above the held-out item first for half the users (Y = 0 for them),
    ``"rank"`` covered Recall@10 in 18% of the populations (bias -0.048, 5 standard deviations) and
    ``"tail"`` in 95% (bias -0.009). On populations drawn from either coordinate's own family (one
    prior per x, N = 250) each estimator covered the other's family at 88-98%.

    References
    ----------
    Efron (2016), Biometrika 103(1) (g-modeling); TORS24 eqs 31-34 (the mixture likelihood); KDD20 Sec 2.2.

    Examples
    --------
    >>> fit = logspline_strata_fit([500, 500, 500, 500], [50] * 4, [0, 0, 2, 30], [40] * 4, [1, 3, 1, 1],
    ...                            [120, 60, 15, 5], k_max=20)
    >>> [(g.above_low, g.above_high, g.users) for g in fit.groups], fit.zero_users
    ([(0, 19, 195.0)], 5.0)
    """
    k_max, min_group_users, penalty, knot_spacing, exact_ranks, coordinate = _check_options(
        k_max, min_group_users, penalty, knot_spacing, exact_ranks, coordinate)
    N, m, x, s, r, c = check_strata(n_items, heads, above, tail_sizes, ranks,
                                    counts=np.ones(np.size(n_items)) if counts is None else counts)
    if c.sum() <= 0:
        raise ValueError("counts must hold at least one user")
    head_mean = float(np.average(m, weights=c))
    k, y = (None, None) if known_tail is None else _check_known(known_tail, N, m, s, r, coordinate)
    # users with x >= k_max have F = 0 whatever else they hold: one cell per N_u, (N_u, k_max, k_max, 0, 1), so
    # a head scored in rungs (stopped once x >= k_max) and the whole head give the same cells and draws
    done = x >= k_max
    m, x, s, r = (np.where(done, v, a) for a, v in ((m, k_max), (x, k_max), (s, 0), (r, 1)))
    if known_tail is None:
        return _fit_cells(*_cells(N, m, x, s, r, c), k_max, min_group_users, penalty, knot_spacing, exact_ranks,
                          coordinate, head_mean=head_mean)
    k, y = np.where(done, 0, k), np.where(done, 0, y)
    N, m, x, s, r, c, k, y = _cells(N, m, x, s, r, c, k, y)
    return _fit_cells(N, m, x, s, r, c, k_max, min_group_users, penalty, knot_spacing, exact_ranks, coordinate,
                      known=(k, y), head_mean=head_mean)


def _check_known(known_tail, N, m, s, r, coordinate):
    """(k, y) of ``known_tail`` as int64 arrays of the users' length, checked against the cells."""
    if coordinate != "tail":
        raise ValueError(f"known_tail applies with coordinate='tail'; got coordinate={coordinate!r}")
    if not isinstance(known_tail, (tuple, list)) or len(known_tail) != 2:
        raise TypeError("known_tail must be a pair (k, y): per user, the tail items scored exactly and those of "
                        "them above the held-out item")
    out = []
    for name, a in zip(("known_tail[0] (k)", "known_tail[1] (y)"), known_tail):
        a = np.asarray(a)
        whole = a.dtype.kind == "f" and bool(np.all(np.isfinite(a)) and np.all(a == np.round(a)))
        if a.dtype.kind not in "iu" and not whole:
            raise TypeError(f"{name} must hold integers; got dtype {a.dtype}")
        if a.shape not in ((), N.shape):
            raise ValueError(f"{name} must be a scalar or hold one entry per user ({N.size}); got shape {a.shape}")
        out.append(np.ascontiguousarray(np.broadcast_to(a.astype(np.int64), N.shape)))
    k, y = out
    T = N - 1 - m
    bad = np.flatnonzero((k < 0) | (k > T) | (y < 0) | (y > k) | (s > T - k))
    if bad.size:
        j = int(bad[0])
        raise ValueError(f"known_tail must have 0 <= y <= k <= T and tail_sizes <= T - k (T = n_items - 1 - heads); "
                         f"got k={k[j]}, y={y[j]}, T={T[j]}, tail_sizes={s[j]} (entry {j})")
    return k, y


def _grid_of(N, m, s, k_max, knot_spacing, exact_ranks, coordinate, x=None):
    """The grid of cells: N = max N (or max T + 1), the sampled tails' largest s + 1, exact values >= k_max;
    over the cells with x < k_max (those with a prior) when ``x`` is given and any has."""
    if x is not None and (x < k_max).any():
        N, m, s = N[x < k_max], m[x < k_max], s[x < k_max]
    T = N - 1 - m
    sampled = (s >= 1) & (T >= 1)
    n_grid = max(2, grid_size_n(s[sampled] + 1)) if sampled.any() else 2
    Ng = max(2, int(N.max() if coordinate == "rank" else T.max() + 1))
    return spline_grid(Ng, min(n_grid, Ng), float(knot_spacing), int(max(exact_ranks, k_max)), "hypergeometric")


def _fit_cells(N, m, x, s, r, c, k_max, min_group_users, penalty, knot_spacing, exact_ranks, coordinate,
               ranges=None, beta0=None, grid=None, known=None, head_mean=None):
    grid = _grid_of(N, m, s, k_max, knot_spacing, exact_ranks, coordinate, x) if grid is None else grid
    inside = x < k_max
    K = np.zeros((grid.lo.size, N.size))
    if inside.any():
        kx = x[inside] if coordinate == "rank" else np.zeros(int(inside.sum()), dtype=np.int64)
        mk = m[inside]
        if known is not None:        # the known tail items: the rest's kernel, shifted by those above
            kx, mk = known[1][inside], mk + known[0][inside]
        K[:, inside] = _kernel_columns(grid, N[inside], mk, kx, s[inside], r[inside])
    K.setflags(write=False)
    if ranges is None:
        ranges = strata_groups(x, k_max, min_group_users, counts=c)
    xg = np.where(inside, x, -1)          # cells beyond k_max fall in no range
    groups = _fit_groups(c, K, grid, xg, ranges, penalty, knot_spacing, coordinate, beta0=beta0)
    group = np.full(N.size, -1, dtype=np.int64)
    for j, gr in enumerate(groups):
        group[gr.cells] = j
    return StrataFit(n_items=N, heads=m, above=x, tail_sizes=s, ranks=r, counts=c, group=group, groups=groups,
                     k_max=k_max, coordinate=coordinate, penalty=penalty, knot_spacing=knot_spacing,
                     exact_ranks=int(min(max(exact_ranks, k_max), grid.N)), grid=grid, K=K, known=known,
                     head_mean=float(np.average(m, weights=c)) if head_mean is None else head_mean)


# ----------------------------------------------------------------------------
# the estimate with its bootstrap interval
# ----------------------------------------------------------------------------
def _replicates(fit, Cb, F, hessians):
    """Bootstrap replicates (B, m) of the estimate from cell counts Cb (B, C): every group's prior refitted
    on its resampled cells (batched, :func:`bootstrap_core`), T_b = (1/M) sum_groups M_gb T_gb with T_gb
    the group's resampled users' mean posterior mean."""
    M = fit.users
    H, A = fit._head(F)
    P = penalty_matrix(fit.grid.B.shape[1], fit.penalty)
    out = np.zeros((Cb.shape[0], F.shape[1]))
    for gr, Hs in zip(fit.groups, hessians):
        cb = Cb[:, gr.cells].astype(float)
        ok = cb.sum(axis=1) > 0
        if not ok.any():
            continue
        cb = cb[ok]
        K = fit.K[:, gr.cells]
        # a replicate that left out the group's few users with a tail item above takes the limit (bootstrap_core)
        _, beta = bootstrap_core(cb, K, gr.grid, P, gr.fit.beta, None, 50, 1e-6, info=hessian_cells, H=Hs)
        g = prior_masses(beta, gr.grid)                                   # (b, G)
        ratio = np.divide(cb, g @ K, out=np.zeros_like(cb), where=cb > 0)
        Ag = (K[:H].T[:, :, None] * A[gr.cells]).reshape(gr.cells.size, -1)   # (cells, H m)
        out[ok] += np.einsum("bh,bhm->bm", g[:, :H], (ratio @ Ag).reshape(-1, H, F.shape[1])) / M
    return out


def _hessians(fit):
    P = penalty_matrix(fit.grid.B.shape[1], fit.penalty)
    return [hessian_cells(gr.fit.beta, fit_counts_weight(fit.counts[gr.cells]), fit.K[:, gr.cells], gr.grid, P)
            for gr in fit.groups]


def _below_resolution(fit, Ks):
    """Whether each cutoff K is below the tail's resolution.

    A tail of T_u negatives sampled s_u times has one sampled item per T_u / s_u tail items (the
    default's (N - 1)/(n - 1): negatives per sampled negative), so global ranks x_u + 1 .. x_u + T_u/s_u
    almost always give r_u = 1 and the prior's shape there is extrapolated. K is below resolution when
    K < x_u + T_u / s_u for some user with x_u < K and a tail (T_u >= 1; s_u = 0 gives +inf), taken
    among such users at r_u = 1 (those the sample cannot place), or among all such users when none is
    at r_u = 1. Users ranked in full (T_u = 0) and users with x_u >= K never count.
    """
    k, y = _known_of(fit)          # a known tail block: ranks x + y + 1 on are the sampled rest's
    T = (fit.n_items - 1 - fit.heads - k).astype(float)
    x = fit.above + y
    with np.errstate(divide="ignore"):
        w = x + np.where(fit.tail_sizes > 0, T / np.maximum(fit.tail_sizes, 1), np.inf)
    out = []
    for K in Ks:
        rel = (x < K) & (T >= 1)
        top = rel & (fit.ranks == 1)
        use = top if top.any() else rel
        out.append(bool(use.any() and np.max(w[use]) > K))
    return np.asarray(out)


def _naive_values(fit, parsed):
    """F(x + r) per cell: the metric of the held-out item's rank among the items scored (head and tail sample)."""
    R = fit.above + _known_of(fit)[1] + fit.ranks
    return np.stack([METRICS[name](R, K).astype(float) for _, name, K in parsed], axis=1)


def _known_of(fit):
    """(k, y) per cell: the known tail block's items and those above (zeros without ``known_tail``)."""
    if fit.known is None:
        z = np.zeros_like(fit.heads)
        return z, z
    return fit.known


def _common_or_na(values, rows):
    u = np.unique(values)
    return pd.array([int(u[0]) if u.size == 1 else pd.NA] * rows, dtype="Int64")


def strata_estimate(n_items, heads, above, tail_sizes, ranks, *, metrics=("recall@10", "ndcg@10"), n_boot=1000,
                    rng=None, confidence_level=0.95, min_group_users=DEFAULT_MIN_GROUP_USERS, model="model",
                    coordinate="tail", penalty=DEFAULT_PENALTY, knot_spacing=DEFAULT_KNOT_SPACING,
                    exact_ranks=EXACT_RANKS, known_tail=None):
    """Global top-K metrics of a stratified evaluation with user-bootstrap intervals, one row per metric.

    Parameters
    ----------
    n_items, heads, above, tail_sizes, ranks : array_like of int, shape (M,)
        Per user: N_u candidates (held-out item included), head size m_u, head negatives x_u at or
        above the held-out item (pessimistic ties), tail sample size s_u in 0..N_u - 1 - m_u, sampled
        tail rank r_u in 1..s_u + 1 (:func:`sampling_lib.kernels.check_strata`).
    metrics : str or sequence of str, keyword-only
        Top-K metrics (``"recall@10"``, ``"ndcg@20"``, ``"ap@5"``, ...); k_max is their largest K.
    n_boot : int >= 0, default 1000, keyword-only
        Bootstrap replicates (0: no interval).
    rng : None, int or numpy.random.Generator, keyword-only
    confidence_level : float in (0, 1), default 0.95, keyword-only
    min_group_users : int, default 200, keyword-only
        :func:`strata_groups`.
    model : str, default "model", keyword-only
        The ``model`` column.
    coordinate : {"tail", "rank"}, default "tail", keyword-only
        What the groups' priors live on (:func:`logspline_strata_fit`).
    penalty, knot_spacing, exact_ranks : keyword-only
        As :func:`sampling_lib.estimators.logspline_fit`.
    known_tail : tuple (k, y), optional, keyword-only
        Tail items scored exactly after the head, per user (:func:`logspline_strata_fit`): the cells of a
        larger head estimated as those of this smaller one (a pilot's users beside the others').

    Returns
    -------
    pandas.DataFrame
        The columns of :data:`sampling_lib.correct.ESTIMATE_COLUMNS`: ``naive`` is the metric of the
        rank x_u + r_u among the items scored (head and tail sample), ``method`` is
        "logspline (stratified)", ``scheme`` "hypergeometric", ``N`` the common N_u and ``n`` the
        common number of items scored 1 + m_u + s_u (<NA> when they vary), ``bound_low/high`` NaN,
        the interval columns and ``se`` NaN when ``n_boot=0``.

    Notes
    -----
    *The interval.* A user bootstrap: the M users' cells are drawn jointly, one multinomial over all
    cells (the cells of users with x_u >= k_max included: their value is 0), every group's prior is
    refitted on its resampled counts (batched, the default's quasi-Newton refits), and the replicate
    is T_b = (1/M) sum over groups of the group's resampled users' posterior means; the percentile
    interval at ``confidence_level`` (Efron and Tibshirani 1993, ch. 13).

    *Below resolution* (:func:`_below_resolution`): K < x_u + T_u / s_u for a user at r_u = 1 with
    x_u < K. There the interval is the union of the percentile intervals with the penalty divided and
    multiplied by :data:`sampling_lib.estimators.SENSITIVITY_FACTOR` (same draws) and of those fits'
    point estimates (``sensitivity_low/high``, reported for every metric), as the default does.

    *Precision ratio*: ``full_halfwidth`` = z sqrt(Var F(R) / M), the half-width full ranking of the
    same users would give, with Var F = E[F^2] - E[F]^2 under the users' posteriors mixed over groups
    (users with x_u >= k_max at F = 0); ``precision_ratio`` = (ci_high - ci_low) / (2 full_halfwidth).

    References
    ----------
    Efron (2016) (the prior); Efron and Tibshirani (1993), ch. 13; TORS24 eq 46 (full ranking's
    half-width).

    Examples
    --------
    >>> t = strata_estimate([300] * 4, [30] * 4, [0, 0, 1, 12], [50] * 4, [1, 2, 1, 1], metrics="recall@10", n_boot=0)
    >>> t[["metric", "estimate", "method"]].shape, t["method"].iloc[0]
    ((1, 3), 'logspline (stratified)')
    """
    parsed = parse_metrics(metrics)
    k_max = max(p[2] for p in parsed)
    n_boot = check_int(n_boot, "n_boot", low=0)
    ci = check_confidence_level(confidence_level)
    rng = np.random.default_rng(rng)
    fit = logspline_strata_fit(n_items, heads, above, tail_sizes, ranks, k_max=k_max, min_group_users=min_group_users,
                               coordinate=coordinate, penalty=penalty, knot_spacing=knot_spacing,
                               exact_ranks=exact_ranks, known_tail=known_tail)
    _, F = fit.metric_matrix(parsed)
    Ks = np.array([p[2] for p in parsed])
    N = int(fit.n_items.max())
    F_lo = np.minimum(F.min(axis=0), 0.0) if F.shape[0] < N else F.min(axis=0)
    F_hi = F.max(axis=0)
    M = fit.users
    est_raw = fit.counts @ fit._cell_means(F) / M
    est = np.clip(est_raw, F_lo, F_hi)
    clipped = (est_raw < F_lo - 1e-12) | (est_raw > F_hi + 1e-12)
    Fn = _naive_values(fit, parsed)
    naive = fit.counts @ Fn / M
    below = _below_resolution(fit, Ks)
    alts = [fit.refit(p) for p in sensitivity_penalties(penalty)]
    alt_est = np.stack([a.counts @ a._cell_means(F) / M for a in alts])
    band_lo, band_hi = alt_est.min(axis=0), alt_est.max(axis=0)
    m = len(parsed)
    lo = hi = nlo = nhi = se = np.full(m, np.nan)
    if n_boot > 0 and M < 2:
        warnings.warn(f"model {model!r}: one user; a bootstrap interval needs at least 2 (ci_low/high, "
                      "naive_ci_low/high and se are NaN)", RuntimeWarning, stacklevel=2)
    elif n_boot > 0:
        Mi = int(round(M))
        p = fit.counts / fit.counts.sum()
        boot_fits = [fit] + (alts if below.any() else [])
        hess = [_hessians(f) for f in boot_fits]

        def draw(k, g):
            return g.multinomial(Mi, p, size=k)

        def work(Cb):
            return (Cb @ Fn / Mi, [_replicates(f, Cb, F, h) for f, h in zip(boot_fits, hess)])

        outs = bootstrap_loop(n_boot, rng, draw, work, cells=fit.counts.size, desc="bootstrap stratified")
        nb = np.concatenate([o[0] for o in outs])
        reps = [np.clip(np.concatenate([o[1][k] for o in outs]), F_lo, F_hi) for k in range(len(boot_fits))]
        lo, hi = percentile_interval(reps[0], ci)
        nlo, nhi = percentile_interval(nb, ci)
        se = reps[0].std(axis=0, ddof=1) if n_boot > 1 else np.full(m, np.nan)
        for rep in reps[1:]:
            a_lo, a_hi = percentile_interval(rep, ci)
            lo, hi = np.where(below, np.minimum(lo, a_lo), lo), np.where(below, np.maximum(hi, a_hi), hi)
        lo = np.where(below, np.minimum(lo, np.minimum(band_lo, est)), lo)
        hi = np.where(below, np.maximum(hi, np.maximum(band_hi, est)), hi)
    w = fit.weights_head(F.shape[0])
    mean, second = w @ F, w @ (F * F)
    var = second - mean * mean
    with np.errstate(invalid="ignore", divide="ignore"):
        full_hw = np.where(var > 0, z_critical(ci) * np.sqrt(np.where(var > 0, var, 0.0) / M), np.nan)
        ratio = (hi - lo) / (2.0 * full_hw)
    # the items each user scored, as given (the fit pools the cells of users with x >= k_max)
    k_known = 0 if known_tail is None else np.asarray(known_tail[0], dtype=np.int64)
    sizes = 1 + np.asarray(heads, dtype=np.int64) + k_known + np.asarray(tail_sizes, dtype=np.int64)
    return pd.DataFrame({
        "model": model, "metric": [p[0] for p in parsed], "K": Ks, "naive": naive, "naive_ci_low": nlo,
        "naive_ci_high": nhi, "estimate": est, "se": se, "ci_low": lo, "ci_high": hi, "method": STRATA_METHOD,
        "scheme": "hypergeometric", "users": int(round(M)), "N": _common_or_na(fit.n_items, m),
        "n": _common_or_na(sizes, m), "confidence_level": ci, "n_boot": n_boot, "sensitivity_low": band_lo,
        "sensitivity_high": band_hi, "bound_low": np.full(m, np.nan), "bound_high": np.full(m, np.nan),
        "below_resolution": below, "clipped": clipped, "full_halfwidth": full_hw, "precision_ratio": ratio,
    }, columns=list(_COLUMNS))
