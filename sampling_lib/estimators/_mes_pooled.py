"""MES with per-user item counts N_u: the pooled kernel, its first-order changes and the bootstrap replicates.

With per-user N_u the MES (AAAI21 eqs 24-27, TORS24 eqs 35-36; :func:`sampling_lib.estimators.mes_fit`)
fits the pooled sampled-rank law: its kernel is the users' average kernel
(:func:`sampling_lib.estimators._mes_kernel.pooled_block`) and its
target their rank histogram. A bootstrap replicate moves both. :func:`pooled_replicates` solves a
replicate exactly in its histogram on the fixed pooled kernel (a coarse rank grid recentred on the exact
fit, checked) and adds the kernel's first-order change (:func:`mes_first_order`,
:func:`mes_cell_influence`), so the kernel is never rebuilt. The one-N solvers are in
:mod:`sampling_lib.estimators._mes`; :func:`mes_replicates`, the registry's MES bootstrap, is here.

References
----------
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation Metrics under Sampling.
   AAAI 2021, eqs 24-27.
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System. ACM TORS
   2024, eqs 35-36.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse
from scipy import linalg

from ..kernels import DEFAULT_GRID_TOL, DEFAULT_N_ITEMS_TOL, em_grid, n_items_bins, rank_grid
from ._linalg import OUTER_MAX, grid_outer
from ._mes import _batch_rows, _mes_dual_newton, mes_batch, mes_lambda, mes_replicate_atoms
from ._mes_kernel import bin_kernels, pooled_block

__all__ = ["mes_first_order", "mes_cell_influence", "pooled_replicates", "mes_replicates"]


def mes_first_order(a, p, pi, lam, F):
    """The first-order change of the MES metrics F^T pi in the data (p, a): ``(beta, z, s, u)``.

    The MES solution of E(pi) - lam H(pi), E = sum_r p_r (q_r - p_r)^2 with q = a^T pi (``a`` the
    (pooled) kernel columns of the observed ranks, N x k), satisfies pi = softmax(-a u / lam) with
    u = 2 p * (q - p) (TORS24 eq 36, AAAI21 eq 26). Differentiating this fixed point in u (implicit
    functions; J = I + (2/lam) D_p a^T Sigma a, Sigma = diag(pi) - pi pi^T) gives, for metric j
    with v = Sigma F_j, J^T w = a^T v, z = w * p and h = Sigma a z,

        d(F_j^T pi) = beta_j . dp - (1/lam) [2 pi^T da z_j + s_j^T da u],
        beta_j = -(2/lam) w * (q - 2 p),   s_j = v - (2/lam) h.

    ``tests/test_peruser.py`` compares it with finite differences of the solver.

    Parameters
    ----------
    a : ndarray, shape (N, k)
    p : ndarray, shape (k,)
        The observed sampled-rank distribution on the k columns.
    pi : ndarray, shape (N,)
        The MES solution for (a, p).
    lam : float
    F : ndarray, shape (N, m)

    Returns
    -------
    beta : ndarray (k, m); z : ndarray (k, m); s : ndarray (N, m); u : ndarray (k,)

    References
    ----------
    AAAI21 eqs 24-27; TORS24 eqs 35-36.
    """
    q = pi @ a
    u = 2.0 * p * (q - p)
    sa = a * np.sqrt(pi)[:, None]
    C = sa.T @ sa - np.outer(q, q)                       # a^T Sigma a
    J = np.eye(p.size) + (2.0 / lam) * p[:, None] * C
    V = pi[:, None] * (F - pi @ F)                       # Sigma F
    W = linalg.solve(J.T, a.T @ V)                       # (k, m)
    Z = W * p[:, None]
    AZ = a @ Z
    Hs = pi[:, None] * (AZ - pi @ AZ)                    # Sigma a z
    return -(2.0 / lam) * W * (q - 2.0 * p)[:, None], Z, V - (2.0 / lam) * Hs, u


def mes_cell_influence(st, pi, F, n, lam, scheme, tol=DEFAULT_N_ITEMS_TOL):
    """The per-user-N MES fit's pooled problem and each cell's first-order weight through the pooled kernel.

    With per-user item counts the MES fits the pooled sampled-rank law: its kernel is the users'
    average kernel (:func:`~sampling_lib.estimators._mes_kernel.pooled_block`) and its target the users' rank histogram, both averages
    over the users, so a change of the cells' user shares (c / M -> c* / M*) moves them linearly.
    By :func:`mes_first_order` the metrics then move by sum over cells (c* / M* - c / M) times
    ``beta[r] + A_N[cell]``: the weight through the histogram and through the pooled kernel,
    A_N = -(1/lam) sum_{R <= N_u} [2 pi_R (K_b z)_R + s_R (K_b u)_R] for the cell's item count N_u
    and bin kernel K_b (one pass over the bins' kernels). Only A_N is returned:
    :func:`pooled_replicates` solves the histogram's term exactly.

    Returns
    -------
    a : ndarray (N, k)
        The pooled kernel's columns (the observed ranks ``cols``).
    p : ndarray (k,)
        The pooled target.
    cols : ndarray (k,)
    A_N : ndarray (cells, m)
        0 on cells of no users (never drawn).
    """
    A_N = np.zeros((st.ranks.size, F.shape[1]))
    live = st.counts > 0                # a cell of no users is never drawn: weight 0
    ranks, counts, items = st.ranks[live], st.counts[live], st.n_items[live]
    Nu = np.repeat(items, counts)
    a, cb = pooled_block(np.repeat(ranks, counts), Nu, n, scheme, tol)
    cols = np.unique(ranks)             # the pooled block's columns: the observed ranks
    p = cb / cb.sum()
    _, Z, S, u = mes_first_order(a, p, pi, lam, F)
    # A_N = -(1/lam) [V z + Q s]: V's row of a cell is sum_{R <= N_u} 2 pi_R k_R (its bin's kernel rows),
    # Q's row is (K_b u)_R on R <= N_u; both are built bin by bin, and Q @ s is one product per block of
    # cells (the cost does not grow with the k x N_b x m products of every bin)
    reps = n_items_bins(items, n, tol, scheme)          # as pooled_block bins the users' N_u
    V = np.zeros((ranks.size, cols.size))
    Q = np.zeros((min(ranks.size, _Q_ROWS), S.shape[0]))
    An = np.empty((ranks.size, F.shape[1]))
    rows = []
    for b, Kb in bin_kernels(np.unique(reps), n, cols, scheme):
        sel = np.flatnonzero(reps == b)
        below = np.arange(b)[None, :] < items[sel, None]          # R <= N_u, (cells, N_b)
        V[sel] = (below * (2.0 * pi[:b])) @ Kb
        y = Kb @ u
        for i, mask in zip(sel, below):
            if len(rows) == Q.shape[0]:
                An[rows] = Q[:len(rows)] @ S
                Q[:] = 0.0
                rows = []
            Q[len(rows), :b] = np.where(mask, y, 0.0)
            rows.append(i)
    if rows:
        An[rows] = Q[:len(rows)] @ S
    An = -(An + V @ Z) / lam
    A_N[live] = An
    return a, p, cols, A_N



#: Cells per block of :func:`mes_cell_influence`'s product with s (a block of N-long rows).
_Q_ROWS = 512

#: Rank-grid tolerance of the per-user-N MES replicates' surrogate (:func:`pooled_replicates`), as the
#: EM family's (:data:`sampling_lib.estimators._bootstrap.EM_SURROGATE_GRID_TOL`).
MES_SURROGATE_GRID_TOL = 0.3
#: Replicates (the farthest from the estimate) whose surrogate term is checked, and the tolerance in
#: bootstrap standard deviations (the EM family's and the default's).
MES_SURROGATE_CHECKS, MES_SURROGATE_TOL = 4, 0.084


@dataclass
class _PooledState:
    """What the per-user-N MES replicates share across bootstrap chunks (:func:`pooled_replicates`)."""

    a: np.ndarray           # (N, k) the pooled kernel's columns
    p: np.ndarray           # (k,) its target
    cell_col: object        # (cells, k) sparse: each cell's column
    A_N: np.ndarray         # (cells, m) the cells' weights through the pooled kernel
    lam: float
    grid: object            # the RankGrid of the surrogate
    Kg: np.ndarray          # (G, k) the pooled kernel averaged over the grid's bins
    Fg: np.ndarray          # (G, m) the metrics averaged over the bins
    pig: np.ndarray         # (G,) the surrogate's fit to p
    outer: np.ndarray | None
    verdict: bool | None = None
    error: np.ndarray | None = None


def pooled_replicates(fitted, Cb, n, opts, spread=None):
    """Per-user-N MES replicates without refitting the pooled kernel.

    A replicate refit changes the cells' user shares, which move both the pooled target (the rank
    histogram) and the pooled kernel (the users' average kernel, :func:`~sampling_lib.estimators._mes_kernel.pooled_block`). The metrics
    are far from linear in the histogram (the entropy's weight is small) and nearly linear in the
    kernel (on the NCF ml-1m stand-in the first-order kernel term was within 0.006 bootstrap SD of
    refits; ``benchmarks/bench_peruser.py`` case 7). So a replicate is

        T + [Tg(p*) - Tg(p)] + (c* / M* - c / M) @ A_N,

    with Tg(p) the MES metrics on the pooled kernel fixed at the full sample's and averaged over the
    bins of a coarse rank grid (the batched dual Newton of :func:`mes_batch`, warm-started), and A_N
    the kernel's first-order term (:func:`mes_cell_influence`). The grid's error cancels in the
    difference; it is checked once per fit as the EM family's surrogate is: the
    :data:`MES_SURROGATE_CHECKS` replicates farthest from the estimate are solved on the exact pooled
    kernel, and if any differs by more than :data:`MES_SURROGATE_TOL` bootstrap standard deviations,
    every replicate is. ``spread(out)`` gives the standard deviations the check's errors are divided
    by (default: those of the replicates ``out`` themselves), as for the EM family's surrogate.
    """
    st = fitted.counts
    ps = fitted._mes_cells
    if ps is None:          # built once per fit, kept across bootstrap chunks
        _, lam = mes_lambda(opts.get("eta"), opts.get("form", "tors"), n)
        pi = np.asarray(fitted.weights, dtype=float)
        a, p, cols, A_N = mes_cell_influence(st, pi, fitted.F_full, n, lam, fitted.estimator.scheme,
                                                opts.get("n_items_tol", DEFAULT_N_ITEMS_TOL))
        grid = em_grid(a.shape[0], n, fitted.estimator.scheme, MES_SURROGATE_GRID_TOL)
        # no grid where it would hold every rank (a small N): one bin per rank
        g = grid[0] if grid is not None else rank_grid(a.shape[0], n, scheme=fitted.estimator.scheme, tol=0.0)
        Kg = g.bin_average(a)
        pig = _mes_dual_newton(Kg, p, lam, opts.get("tol", 1e-13), opts.get("max_iter", 200), g.size.astype(float))[0]
        idx = np.searchsorted(cols, np.clip(st.ranks, cols[0], cols[-1]))
        cell_col = scipy.sparse.csr_matrix((np.where(st.counts > 0, 1.0, 0.0), (np.arange(st.ranks.size), idx)),
                                           shape=(st.ranks.size, cols.size))
        outer = grid_outer(Kg) if Kg.shape[0] * Kg.shape[1] * (Kg.shape[1] + 1) // 2 <= OUTER_MAX else None
        ps = fitted._mes_cells = _PooledState(a, p, cell_col, A_N, lam, g, Kg, g.bin_average(fitted.F_full), pig,
                                              outer)
    tol, max_iter = opts.get("tol", 1e-13), opts.get("max_iter", 200)
    size = ps.grid.size.astype(float)
    P = np.asarray((ps.cell_col.T @ Cb.T).T)
    P /= P.sum(axis=1, keepdims=True)
    out = np.empty((Cb.shape[0], ps.Fg.shape[1]))
    step = _batch_rows(ps.Kg)
    for s0 in range(0, Cb.shape[0], step):
        pib, done = mes_batch(ps.Kg, P[s0:s0 + step], ps.lam, size, ps.pig @ ps.Kg, ps.p, tol=tol,
                              max_iter=max_iter, outer=ps.outer)
        for i in np.flatnonzero(~done):
            pib[i] = _mes_dual_newton(ps.Kg, P[s0 + i], ps.lam, tol, max_iter, size)[0]
        out[s0:s0 + step] = pib @ ps.Fg
    out -= ps.pig @ ps.Fg
    lin = (Cb / Cb.sum(axis=1, keepdims=True)) @ ps.A_N - (st.counts / st.counts.sum()) @ ps.A_N
    out += fitted.estimate + lin

    def exact(rows):        # the histogram term on the exact pooled kernel
        return np.stack([_mes_dual_newton(ps.a, P[i], ps.lam, tol, max_iter)[0] for i in rows]) @ fitted.F_full \
            + lin[rows]
    if ps.verdict is False:
        return exact(np.arange(Cb.shape[0]))
    if ps.verdict is None and Cb.shape[0] > MES_SURROGATE_CHECKS:
        sd = np.maximum(out.std(axis=0, ddof=1) if spread is None else spread(out), 1e-300)
        pick = np.argsort(np.max(np.abs(out - fitted.estimate) / sd, axis=1))[-MES_SURROGATE_CHECKS:]
        ref = exact(pick)
        ps.error = np.max(np.abs(ref - out[pick]) / sd, axis=0)
        ps.verdict = bool(np.all(ps.error <= MES_SURROGATE_TOL))
        if not ps.verdict:
            return exact(np.arange(Cb.shape[0]))
        out[pick] = ref
    return out


def mes_replicates(fitted, Cb, spread=None):
    """MES bootstrap replicates (B, m): batched warm-started dual Newton (:func:`mes_replicate_atoms`).

    With per-user N (one sample size, the fast solver) the pooled replicates
    of :func:`pooled_replicates` (``spread``: the standard
    deviations its check is judged against, as a function of the replicates). None when neither applies (the cvxpy
    solver, varying sample sizes): the registry then refits every replicate.
    """
    est, st = fitted.estimator, fitted.counts
    opts = dict(est.options)
    opts.setdefault("grid_tol", DEFAULT_GRID_TOL)
    n = int(st.size_values[0]) if st.size_values.size == 1 else None
    if (n is not None and st.n_items is not None and np.unique(st.n_items).size > 1
            and opts.get("solver", "auto") in ("auto", "fast")):
        return pooled_replicates(fitted, np.asarray(Cb, dtype=float), n, opts, spread)
    grid = em_grid(fitted.N, n, est.scheme, opts["grid_tol"]) if n is not None else None
    Cb = np.asarray(Cb, dtype=float)
    atoms = mes_replicate_atoms(grid, fitted.N, n, est.scheme, st, Cb, fitted.weights, opts, fitted)
    if atoms is None:
        return None
    Fc = grid[0].bin_average(fitted.F_full) if grid is not None else fitted.F_full
    return atoms @ Fc
