"""Bootstrap replicates of BV with a fitted prior and per-user N_u, at nodes in log N.

A replicate of BV_MLE or BV_MES (TORS24 eqs 8-10 with the prior of Sec 8.1.5) on per-user item
counts refits the prior and then every group of users sharing an N_u (:func:`sampling_lib.estimators.
_linear_groups.linear_groups_prior_fit`): on a stand-in of NCF's MovieLens-1M file (2,295 distinct N_u)
about 4.5 s a replicate, over an hour per model for 1,000. Its first-order (one-step) expansion in the
prior was too far off for BV (the estimate's curvature in the prior is large at gamma = 0.01), so the
replicates here keep the prior's full (non-linear) effect and approximate only its dependence on N_u:

    T*_b = (C*_b / M*_b) . X  +  sum_j [ P~*_bj . x_j(pi*_b)  -  P~*_bj . x_j(pi) ],

where X holds each cell's exact sampled metrics at the fitted prior pi (the fit's own), x_j(p) is a
group's sampled metric at node N_j on that node's rank grid (:func:`sampling_lib.kernels.em_grid`) with
the prior restricted to 1..N_j, and P~*_bj is the replicate's sampled-rank distribution with each cell's
share spread over the two nodes around its N_u (linear weights in log N). The prior's replicates pi*_b
are its estimator's own bootstrap (for MLE the EM protocol rerun on all replicates, for MES its pooled
replicates), read as masses of common rank cells (:class:`PriorNodes`). All replicates of a node share
one Gram table (:func:`sampling_lib.estimators._linear.linear_on_grid_batch`). The same computation
serves MN (``kind="mn"``), whose bootstrap keeps its cheaper one-step instead
(:data:`sampling_lib.estimators._registry.ONE_STEP_PRIOR_KINDS`; ``benchmarks/README.md``, "BV with a
fitted prior: replicates at nodes in log N", compares the two).

Besides the grid (whose error enters through the difference of two grid solutions with nearby priors),
the prior's own bootstrap surrogate (checked by that estimator) and the fitted prior's shape within a
common cell, the approximation is the interpolation in N_u. It is checked in every fit: the nodes are
spaced :data:`NODE_WIDTH` apart and the same sum over every other node (twice the spacing) is computed
alongside. Linear interpolation errors shrink as the square of the spacing where the replicates
depend smoothly on N_u, so the finer sum's error is then about a third of the two sums' difference;
the replicates are used when that difference is at most :data:`NODE_TOL` replicate standard
deviations for every metric (:attr:`PriorNodes.error` holds it). Where they do not (a prior with steps
at the users' N_u), the difference can understate the error, so every N_u is a node wherever that
is affordable (:data:`NODE_EVERY_MAX`): interpolation is left to many large N_u, as in per-user files
where N_u = N - |history_u| spans thousands of values.
``tests/test_peruser.py`` and ``benchmarks/bench_peruser.py`` (case 7) compare with exact refits.

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System. ACM TORS
   2024, eqs 8-10, 42 and Sec 8.1.5.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse

from .._threads import map_parts
from ..kernels import em_grid, log_kernel_rows
from ._linalg import OUTER_MAX, grid_outer
from ._linear import linear_on_grid_batch

__all__ = ["PriorNodes", "NODE_WIDTH", "NODE_GRID_TOL", "NODE_TOL", "NODE_EVERY_MAX"]

#: Spacing in log N of the nodes (the check's coarser sum uses every other node).
NODE_WIDTH = 0.2
#: Total-variation tolerance of the nodes' rank grids (as :data:`~sampling_lib.estimators._bootstrap.
#: EM_SURROGATE_GRID_TOL`: the grid enters only through the difference of two grid solutions).
NODE_GRID_TOL = 0.3
#: Every distinct N_u is a node (no interpolation) while the sum over them of N_u n(n+1)/2, a bound on
#: the elements of their Gram tables, is at most this: about twice the 7 interpolating nodes' tables of
#: NCF's MovieLens-1M stand-in (307 cells of n(n+1)/2 = 5,050 each). Small N_u are where interpolation
#: is least reliable: with N_u of 30-90 and n = 10, a prior piled at each user's N_u (ranks censored
#: there) made the replicates step with N_u, and the interpolated ones were 0.18 SD off the refits while
#: the check read 0.076.
NODE_EVERY_MAX = 20_000_000
#: Largest difference, in replicate standard deviations, between the sums over every node and over
#: every other node (where the replicates are smooth in N_u, the finer sum's error is about a third of
#: it): the Monte Carlo standard error
#: of a 95% percentile endpoint from 1,000 replicates, as for the other surrogates.
NODE_TOL = 0.084


@dataclass
class PriorNodes:
    """The nodes N_j of a per-user-N evaluation, their rank cells and the common cells of the prior.

    The prior's replicates are read as masses of common cells (the rank grid of the largest N_u,
    split at every node), each spread over a node's cells with the fitted prior's shape within the
    cell: the resolution at which the prior's own bootstraps represent a replicate (the EM
    family's and MES's per-user-N surrogates solve on such a grid).

    Attributes
    ----------
    nodes : ndarray of int64, shape (J,)
        Item counts of the nodes (J odd, first and last the smallest and largest N_u), or every
        distinct N_u when there are at most J of them (then interpolation is exact).
    cells : list of (starts, size, K, T)
        Each node's rank cells (first ranks 0-based, sizes), their kernel rows (G_j, n) and the
        map T (C_j, G_j) from the masses of the common cells below N_j to the node's cells.
    edges : ndarray of int64
        Boundaries of the common cells (0 .. max N).
    every : bool
        Every distinct N_u is a node (nothing interpolated).
    error : ndarray or None
        After :meth:`replicates`: max |every node - every other node| / SD per metric (0 when
        every N_u is a node).
    verdict : bool or None
        Set by the caller once per fit: ``error <= NODE_TOL`` on the first chunk of replicates.
    """

    nodes: np.ndarray
    cells: list
    edges: np.ndarray
    every: bool
    error: np.ndarray | None = field(default=None)
    verdict: bool | None = field(default=None)
    _parts: list | None = field(default=None, repr=False)

    @classmethod
    def build(cls, Ns, n, scheme, prior, *, width=NODE_WIDTH, tol=NODE_GRID_TOL):
        """Nodes spaced about ``width`` in log N over the item counts ``Ns``, cells from the rank
        grids at total-variation tolerance ``tol`` and ``prior`` (the fitted prior, length max Ns)."""
        Ns = np.unique(np.asarray(Ns, dtype=np.int64))
        prior = np.asarray(prior, dtype=float)
        lo, hi = int(Ns[0]), int(Ns[-1])
        half = max(1, int(np.ceil(np.log(hi / lo) / (2.0 * width))))
        nodes = np.unique(np.rint(np.exp(np.linspace(np.log(lo), np.log(hi), 2 * half + 1))).astype(np.int64))
        # every N_u a node where that is cheap (few distinct N_u, or small ones), so no interpolation
        every = bool(nodes.size != 2 * half + 1 or Ns.size <= nodes.size
                     or Ns.sum() * (n * (n + 1) // 2) <= NODE_EVERY_MAX)
        if every:
            nodes = Ns
        grids = [cls._grid(N, n, scheme, tol) for N in nodes.tolist()]
        edges = np.unique(np.r_[0, grids[-1][0], nodes])
        common = np.searchsorted(edges, np.arange(hi), side="right") - 1      # each rank's common cell
        mass = np.bincount(common, weights=prior[:hi], minlength=edges.size - 1)
        sizes = np.diff(edges).astype(float)
        share = np.where(mass[common] > 0, prior[:hi] / np.where(mass[common] > 0, mass[common], 1.0),
                         1.0 / sizes[common])                                 # each rank's share of its cell
        cells = []
        for N, (starts, size, K) in zip(nodes.tolist(), grids):
            own = np.repeat(np.arange(starts.size), size)                       # each rank's node cell
            Cj = int(np.searchsorted(edges, N))
            T = np.zeros((Cj, starts.size))
            np.add.at(T, (common[:N], own), share[:N])
            cells.append((starts, size, K, T))
        return cls(nodes, cells, edges, every)

    @staticmethod
    def _grid(N, n, scheme, tol):
        """(first ranks 0-based, sizes, kernel rows) of the rank grid of (N, n); one rank per cell
        where the grid would hold every rank."""
        grid = em_grid(N, n, scheme, tol)
        if grid is None:
            return np.arange(N), np.ones(N, dtype=np.int64), np.exp(log_kernel_rows(N, n, np.arange(1, N + 1),
                                                                                    scheme))
        return grid[0].starts, grid[0].size, np.asarray(grid[1])

    def indicator(self, Nmax):
        """(Nmax, C) 0/1 matrix: rank R (row R - 1) in common cell c."""
        A = np.zeros((Nmax, self.edges.size - 1))
        A[np.arange(Nmax), np.searchsorted(self.edges, np.arange(Nmax), side="right") - 1] = 1.0
        return A

    def masses(self, prior):
        """A prior (length max N) as masses of the common cells (C,): :meth:`indicator`'s transpose times it."""
        return np.add.reduceat(np.asarray(prior, dtype=float), self.edges[:-1])

    def node_masses(self, common, j):
        """The prior restricted to node j's ranks 1..N_j, renormalised, as masses of its cells:
        ``common`` (B, C) masses of the common cells -> (B, G_j)."""
        T = self.cells[j][3]
        q = common[:, :T.shape[0]] @ T
        return q / np.maximum(q.sum(axis=1, keepdims=True), 1e-300)

    def weights(self, cell_N, stride=1):
        """(cells, J) linear interpolation weights in log N of each cell's N_u over the nodes
        ``nodes[::stride]`` (zero columns for the others)."""
        idx = np.arange(0, self.nodes.size, stride)
        if idx[-1] != self.nodes.size - 1:
            idx = np.r_[idx, self.nodes.size - 1]
        x = np.log(self.nodes[idx].astype(float))
        v = np.log(np.asarray(cell_N, dtype=float))
        k = np.clip(np.searchsorted(x, v, side="right") - 1, 0, max(idx.size - 2, 0))
        W = np.zeros((v.size, self.nodes.size))
        if idx.size == 1:
            W[:, idx[0]] = 1.0
            return W
        t = np.clip((v - x[k]) / (x[k + 1] - x[k]), 0.0, 1.0)
        rows = np.arange(v.size)
        W[rows, idx[k]] = 1.0 - t
        W[rows, idx[k + 1]] += t
        return W

    def replicates(self, kind, Cb, ranks, cell_N, n, F, prior, common, X, *, gamma=0.01, M=None):
        """Replicates (B, m) of BV or MN (module docstring); the check's error in :attr:`error`.

        ``Cb`` (B, cells) replicate counts, ``ranks`` / ``cell_N`` each cell's sampled rank and N_u,
        ``F`` (H, m) metric values, ``prior`` the fitted prior (length max N_u), ``common`` (B, C)
        the replicates' priors as masses of the common cells (:meth:`indicator`), ``X`` (cells, m) the
        cells' exact sampled metrics at the fitted prior, ``M`` MN's variance users (None: each
        replicate's own). The nodes' data-free parts (Gram tables, cell metrics, the solutions at
        the fitted prior) are kept for the next chunk of replicates of the same fit."""
        Cb = np.asarray(Cb, dtype=float)
        B, m = Cb.shape[0], F.shape[1]
        Mb = Cb.sum(axis=1)
        Mvar = Mb if M is None else np.full(B, float(M))
        kw = dict(gamma=gamma) if kind == "bv" else {}
        if self._parts is None:
            self._parts = self._node_parts(ranks, cell_N, n, F, prior)
        shares = Cb / Mb[:, None]

        def node_sums(js):
            sums = np.zeros((B, 2, m))
            for j in js:
                S, K, size, Fcell, outer, qhat, xhat = self._parts[j]
                if S is None:
                    continue
                Pt = np.stack([np.asarray(s_.T @ shares.T).T for s_ in S], axis=1)          # (B, 2, n)
                q = self.node_masses(common, j)
                sums += linear_on_grid_batch(kind, Pt, q, K, size, Fcell, M=None if kind == "bv" else Mvar,
                                             outer=outer, **kw)
                for Mv in np.unique(Mvar):      # at the fitted prior: x_j rows, one solve per distinct M
                    if Mv not in xhat:
                        xhat[Mv] = linear_on_grid_batch(kind, np.eye(n)[None], qhat, K, size, Fcell,
                                                        M=None if kind == "bv" else Mv, outer=outer, **kw)[0]
                    sel = Mvar == Mv
                    sums[sel] -= Pt[sel] @ xhat[Mv]
            return sums

        # the nodes in two halves on two threads (their products and solves release the GIL), as the
        # groups' passes; each node is one thread's, its cached solutions too
        J = len(self._parts)
        sums = sum(map_parts(node_sums, [range(0, J, 2), range(1, J, 2)] if J >= 2 else [range(J)],
                             "sampling-lib-nodes"))
        out = shares @ X + sums[:, 0]
        sd = np.maximum(out.std(axis=0, ddof=1), 1e-300) if B > 1 else np.full(m, np.inf)
        self.error = np.zeros(m) if self.every else np.max(np.abs(sums[:, 0] - sums[:, 1]), axis=0) / sd
        return out

    def _node_parts(self, ranks, cell_N, n, F, prior):
        """Per node: the cells' shares of its two sums (sparse (cells, n), every node and every other
        node), its kernel rows, cell sizes and metrics (the fitted prior's shape within a cell), the
        Gram table, its masses at the fitted prior and a dict for the solutions there (by M)."""
        W = [self.weights(cell_N, 1), self.weights(cell_N, 2)]
        base = self.masses(prior)
        parts = []
        for j, N in enumerate(self.nodes.tolist()):
            starts, size, K, _ = self.cells[j]
            if not (W[0][:, j].any() or W[1][:, j].any()):
                parts.append((None,) * 7)
                continue
            S = [scipy.sparse.csr_matrix((w[:, j], (np.arange(ranks.size), ranks - 1)), shape=(ranks.size, n))
                 for w in W]
            within = prior[:N] / prior[:N].sum()
            Fj = np.zeros((N, F.shape[1]))
            Fj[:min(N, F.shape[0])] = F[:N]
            Fcell = np.add.reduceat(Fj * within[:, None], starts, axis=0) / np.maximum(
                np.add.reduceat(within, starts)[:, None], 1e-300)
            outer = grid_outer(K) if K.shape[0] * n * (n + 1) // 2 <= OUTER_MAX else None
            parts.append((S, K, size, Fcell, outer, self.node_masses(base[None, :], j), {}))
        return parts
