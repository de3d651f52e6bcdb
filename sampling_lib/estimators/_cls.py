"""Krichene and Rendle's constrained least squares (CLS), TORS24 eq 7, in P(R) form.

The third sampled-metric estimator beside BV and MN (:mod:`sampling_lib.estimators._linear`): its sampled
metric is not linear in F (a monotone least-squares fit), so it is returned as the CLS estimate of the rank
distribution (TORS24 eq 28's device for BV), exact for every Recall@K.

References
----------
.. [KR20] Krichene, Rendle. On Sampled Metrics for Item Recommendation. KDD 2020.
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System. ACM TORS
   2024, eqs 7, 28.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import nnls

from .._threads import map_parts
from .._validation import check_int, check_N_n, check_scheme
from ..kernels import em_grid, kernel
from ._linear import _prior, sampled_pmf
from ._linear_groups import GROUP_THREADS_MIN, group_prior, keep_last

__all__ = ["cls", "cls_fit", "cls_solution", "cls_group_solutions", "cls_groups_fit", "CLSFit",
           "cls_replicates"]


def cls(sampled_ranks, N, n, prior=None, *, max_rank=None, scheme="binomial", grid_tol=None):
    """Krichene-Rendle constrained least squares (CLS), TORS24 eq 7, in P(R) form.

    For a metric F, CLS picks the sampled metric x that minimizes the bias

        sum_R P(R) (E[x_r | R] - F(R))^2     subject to x_1 >= x_2 >= ... >= x_n

    (the monotonicity constraint; x_n itself is unconstrained). Unlike BV and
    MN this x is not linear in F, so no single weight vector reproduces CLS
    for every metric. **Decision**: like TORS24 eq 28 does for BV, we return
    the CLS estimate of the rank distribution,

        w_R = Recall^_CLS@R - Recall^_CLS@(R-1),

    where Recall^_CLS@R solves the constrained problem for F = 1{. <= R}
    (a monotone metric, so the constraint is natural). Then ``w @ F`` is a
    metric-independent CLS estimate, and it reproduces the per-metric CLS
    exactly for Recall@K. Entries of ``w`` may be negative.

    Each problem is a non-negative least-squares problem in the increments
    z_j = x_j - x_{j+1} solved by ``scipy.optimize.nnls`` after one QR
    factorization of sqrt(D) times the (N, n) matrix of P(r <= j | R)
    (Householder QR for accuracy: the CDF columns are nearly collinear). Cost:
    O(N n^2) for the QR plus max_rank small NNLS; memory: a few (N, n) arrays
    (N = 10^6, n = 100: ~13 s and ~5 GB peak including the kernel).

    Parameters
    ----------
    sampled_ranks : array_like of int in 1..n
    N, n : int
    prior : array_like of length N, optional
        P(R) in the objective; default uniform (Krichene and Rendle).
    max_rank : int, optional, keyword-only
        Solve only for R <= max_rank (default N). The remaining estimated mass
        1 - Recall^_CLS@max_rank is spread over R > max_rank in proportion to
        the prior (uniformly if the prior has no mass there), so ``w @ F`` is
        exact CLS for every metric with F(R) = 0 for R > max_rank (top-K
        metrics with K <= max_rank) at the cost of max_rank small problems.
    scheme : {"binomial", "hypergeometric"}, keyword-only
    grid_tol : float or None, keyword-only
        Solve on the compressed kernel (see :func:`cls_fit`); None is exact.

    Returns
    -------
    w : ndarray, shape (N,), sums to 1.

    References
    ----------
    TORS24 eq 7; AAAI21 Sec "The Sampled Metric Approach"; Krichene and Rendle
    (KDD 2020).

    Examples
    --------
    >>> w = cls([1, 1, 2, 5, 9], N=200, n=10, max_rank=20)
    >>> w.shape, round(float(w.sum()), 10)
    ((200,), 1.0)
    """
    return cls_fit(sampled_ranks, N, n, prior, max_rank=max_rank, scheme=scheme,
                   grid_tol=grid_tol).weights


@dataclass(frozen=True)
class CLSFit:
    """CLS in P(R) form with what its bootstrap needs (:func:`cls_fit`).

    Attributes
    ----------
    weights : ndarray, shape (N,)
    Z : ndarray, shape (max_rank, n + 1)
        NNLS solutions z_R: Recall^_CLS@R = coef(P~) @ z_R with
        coef(P~) = (cumsum(P~), -sum(P~)) -- the constraints and the objective
        do not involve P~, so z_R does not: CLS with a fixed prior is linear
        in the sampled-rank distribution.
    tail : ndarray, shape (N - max_rank,)
        Shares of the mass beyond max_rank (the prior's, normalized).
    grid_size : int
        Rows of the least-squares problem (N, or the compressed grid's bins).
    """

    weights: np.ndarray
    Z: np.ndarray
    tail: np.ndarray
    grid_size: int

    def recall(self, P_tilde):
        """Recall^_CLS@R, R = 1..max_rank, for sampled-rank distributions (..., n)."""
        c = np.cumsum(np.asarray(P_tilde, dtype=float), axis=-1)
        coef = np.concatenate([c, -c[..., -1:]], axis=-1)
        return coef @ self.Z.T

    def estimates(self, P_tilde, F):
        """``w(P~) @ F`` for a batch of sampled-rank distributions (B, n): shape (B, m)."""
        rec = self.recall(P_tilde)
        Rmax = self.Z.shape[0]
        est = np.diff(rec, axis=-1, prepend=0.0) @ F[:Rmax]
        if self.tail.size:
            est += (1.0 - rec[..., -1:]) * (self.tail @ F[Rmax:])[None, :]
        return est


def cls_fit(sampled_ranks, N, n, prior=None, *, max_rank=None, scheme="binomial", grid_tol=None):
    """:func:`cls` with its NNLS solutions (:class:`CLSFit`): batched bootstrap replicates.

    Every z_R solves a problem that does not involve the data (the data
    enter only through coef(P~) @ z_R; :func:`cls_solution`), so a bootstrap
    replicate is one matrix product (:meth:`CLSFit.estimates`), the exact CLS
    of the replicate.
    """
    N, n = check_N_n(N, n)
    pt = sampled_pmf(sampled_ranks, n)
    fit = cls_solution(N, n, prior, max_rank=max_rank, scheme=scheme, grid_tol=grid_tol)
    return replace(fit, weights=_weights(fit, N, fit.recall(pt)))


def _weights(fit, N, recall):
    """The P(R)-form weights (length N) of a solution at its Recall^_CLS@R curve (TORS24 eq 28's device)."""
    Rmax = fit.Z.shape[0]
    w = np.zeros(N)
    w[:Rmax] = np.diff(recall, prepend=0.0)
    if Rmax < N:
        w[Rmax:] = (1.0 - recall[-1]) * fit.tail
    return w


def cls_solution(N, n, prior=None, *, max_rank=None, scheme="binomial", grid_tol=None):
    """The data-free part of CLS: the NNLS solutions z_R and the tail shares (:class:`CLSFit`, no weights).

    With ``grid_tol`` (and max_rank <= the grid's exact head, 256), the
    least-squares rows are the grid's bins: the objective
    sum_R P(R) (E[x_r | R] - F(R))^2 on the compressed kernel K'
    (:func:`sampling_lib.kernels.rank_grid`) has equal rows, equal F (0
    beyond max_rank) and summed weights P(bin) inside a bin, so it is
    exactly the (G, n) problem with weights p_j: O(G n^2) instead of O(N n^2).

    References
    ----------
    TORS24 eq 7; Krichene and Rendle (KDD 2020).

    Examples
    --------
    >>> s = cls_solution(200, 10, max_rank=20)
    >>> s.Z.shape, s.tail.shape, s.weights.size
    ((20, 11), (180,), 0)
    """
    N, n = check_N_n(N, n)
    scheme = check_scheme(scheme)
    p = _prior(prior, N)
    Rmax = N if max_rank is None else check_int(max_rank, "max_rank", low=1, high=N)
    grid = em_grid(N, n, scheme, grid_tol) if Rmax < N else None
    if grid is not None and np.all(grid[0].size[:Rmax] == 1):
        g, Kg = grid
        rows_p, Krows = g.bin_sums(p), Kg
    else:
        rows_p, Krows = p, kernel(N, n, scheme)
    sp = np.sqrt(rows_p)
    cdf = np.cumsum(Krows, axis=1)                   # P(r <= j | R), x = L z
    Q, Rq = np.linalg.qr(sp[:, None] * cdf)          # (rows, n), (n, n)
    # Q^T f_R for f_R = sqrt(p) 1{. <= R}: cumulative sums of rows of sqrt(p) Q
    # (the first Rmax rows are single ranks on the grid too)
    d = np.cumsum(Q[:Rmax] * sp[:Rmax, None], axis=0)  # row R-1 -> Q^T f_R
    # last increment z_n = x_n is free: split it into two nonnegative columns
    A = np.hstack([Rq, -Rq[:, -1:]])
    Z = np.zeros((Rmax, n + 1))
    for R in range(Rmax):
        if R == N - 1:
            Z[R, -2] = 1.0                            # F = 1: x = 1 exactly (coef[-2] = 1)
            continue
        Z[R], _ = nnls(A, d[R], maxiter=50 * (n + 1))
    tail = np.zeros(0)
    if Rmax < N:
        tail = p[Rmax:]
        tail = tail / tail.sum() if tail.sum() > 0 else np.full(N - Rmax, 1.0 / (N - Rmax))
    return CLSFit(weights=np.zeros(0), Z=Z, tail=tail, grid_size=int(Krows.shape[0]))


#: The group solutions of the last per-user-N fit with the uniform prior (:func:`cls_group_solutions`): the
#: next model of the same evaluation has the same users' N_u, so the same groups and solutions
#: (:func:`sampling_lib.estimators._linear_groups.keep_last`).
_GROUP_CACHE = {}


def cls_group_solutions(n_items, n, *, max_rank=None, scheme="binomial", grid_tol=None, prior=None):
    """The data-free CLS solution (:func:`cls_solution`) of every distinct item count N_b in ``n_items``.

    A dict N_b -> :class:`CLSFit`. ``prior`` (over ranks 1..max N_b) is restricted to each group's ranks
    and renormalised; with the uniform prior (None) the solutions of the last call are reused when the
    next asks for the same groups and settings (the next model of an evaluation).

    Examples
    --------
    >>> sols = cls_group_solutions([150, 120, 150], 10, max_rank=5)
    >>> sorted(sols), sols[120].tail.size
    ([120, 150], 115)
    """
    Ns = np.unique(np.asarray(n_items, dtype=np.int64))
    key = None
    if prior is None:
        key = (Ns.tobytes(), int(n), max_rank, scheme, grid_tol)
        if key in _GROUP_CACHE:
            return _GROUP_CACHE[key]

    def solve(part):
        return {int(Nb): cls_solution(int(Nb), n, None if prior is None else group_prior(prior, int(Nb)),
                                      max_rank=max_rank, scheme=scheme, grid_tol=grid_tol) for Nb in part}
    if Ns.size < GROUP_THREADS_MIN:
        out = solve(Ns)
    else:       # two threads, every other group each (the QR and the least squares release the GIL)
        halves = map_parts(solve, [Ns[0::2], Ns[1::2]], "sampling-lib-groups")
        out = {Nb: halves[i % 2][Nb] for i, Nb in enumerate(Ns.tolist())}
    return keep_last(_GROUP_CACHE, key, out, sum(f.Z.nbytes + f.tail.nbytes for f in out.values()))


def cls_groups_fit(groups, ranks, counts, n, F, *, scheme="binomial", prior=None, max_rank=None, grid_tol=None):
    """CLS with per-user item counts N_u, fitted per group of N_u, as a linear estimate.

    A group's CLS is linear in its sampled-rank distribution P~_b (:class:`CLSFit`), and the groups are
    averaged with their user shares M_b / M (:meth:`Estimator._per_group
    <sampling_lib.estimators.Estimator>`), so the estimate is (1/M) sum over the cells (N_b, r) of the
    cell's users times X[cell], with X[cell] the estimate of its group's solution at P~ = e_r. A
    bootstrap replicate of the counts is then one matrix product, and equals refitting every group on
    the replicate (to rounding; ``tests/test_peruser.py``). The solutions do not involve the data, so an
    evaluation's models share them (:func:`cls_group_solutions`).

    Parameters
    ----------
    groups : list of (N_b, boolean selection over the cells)
        The cells' groups of N_u (:meth:`Estimator._groups <sampling_lib.estimators.Estimator>`).
    ranks, counts : ndarray of int
        Each cell's sampled rank (1..n) and number of users.
    n : int
    F : ndarray, shape (H, m)
        Metric values on ranks 1..H (0 beyond H).
    scheme, prior, max_rank, grid_tol
        As for :func:`cls`.

    Returns
    -------
    w : ndarray, shape (max N_b,)
        The P(R)-form weights: sum over groups of M_b / M times the group's weights.
    X : ndarray, shape (cells, m)

    References
    ----------
    TORS24 eqs 7, 28; Krichene and Rendle (KDD 2020).
    """
    sols = cls_group_solutions([Nb for Nb, _ in groups], n, max_rank=max_rank, scheme=scheme,
                               grid_tol=grid_tol, prior=prior)
    H, m = F.shape
    M = counts.sum()
    w = np.zeros(max(Nb for Nb, _ in groups))
    X = np.zeros((ranks.size, m))
    for Nb, sel in groups:
        s = sols[Nb]
        Rmax = s.Z.shape[0]
        r, c = ranks[sel], counts[sel]
        E = np.zeros((r.size, n))
        E[np.arange(r.size), r - 1] = 1.0
        rec = s.recall(E)                           # (cells, Rmax): each cell's Recall^_CLS@R curve
        Fb = np.zeros((Nb, m))
        Fb[:min(H, Nb)] = F[:Nb]
        X[sel] = np.diff(rec, axis=1, prepend=0.0) @ Fb[:Rmax]
        if Rmax < Nb:
            X[sel] += (1.0 - rec[:, -1:]) * (s.tail @ Fb[Rmax:])[None, :]
        if c.sum():
            w[:Nb] += c.sum() / M * _weights(s, Nb, c @ rec / c.sum())
    return w, X


def cls_groups_state(groups, ranks, counts, n, F, **options):
    """``(w, state)`` of :func:`cls_groups_fit` for the registry: the state is the cells' X."""
    w, X = cls_groups_fit(groups, ranks, counts, n, F, **options)
    return w, _CellsLinear(X)


@dataclass(frozen=True)
class _CellsLinear:
    """A per-group fit's cell contributions X (cells, m): a replicate is (Cb / M*) @ X, M* its users."""

    X: np.ndarray


def cls_replicates(fitted, Cb):
    """CLS bootstrap replicates (B, m): linear in the sampled-rank distribution (:class:`CLSFit`).

    With per-user N (fitted per group of N_u, :func:`cls_groups_fit`) a
    replicate is the cells' linear contributions averaged under the
    replicate's counts, the exact refit of every group.
    """
    if fitted.state is None:
        return None
    if isinstance(fitted.state, _CellsLinear):
        Cb = np.asarray(Cb, dtype=float)
        return (Cb / Cb.sum(axis=1, keepdims=True)) @ fitted.state.X
    st = fitted.counts
    n = int(st.size_values[0])
    Pt = np.zeros((Cb.shape[0], n))
    Pt[:, st.ranks - 1] = Cb
    Pt /= Pt.sum(axis=1, keepdims=True)
    return fitted.state.estimates(Pt, fitted.F_full)
