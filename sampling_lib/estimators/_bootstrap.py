"""Bootstrap replicates of a fitted estimator: the replicate strategies of the registry.

:meth:`sampling_lib.estimators.Estimator.fit_counts` fits an estimator on
the sufficient statistic (:class:`sampling_lib.counts.RankCounts`) and returns
a :class:`FittedEstimator`, whose :meth:`~FittedEstimator.replicates` maps
bootstrap count vectors (B, cells) (:func:`sampling_lib.counts.bootstrap_loop`)
to estimates (B, m) by the estimator's strategy (``EstimatorSpec.bootstrap``):

* ``"em"`` -- the estimator "max_iter EM steps from init" rerun on all
  replicates at once (batched EM, on the compressed grid when it applies; with
  many per-user N_u, the exact estimate plus a checked surrogate's change,
  :class:`EMSurrogate`); with a tolerance, each replicate is refitted
  warm-started from the full-sample solution;
* ``"linear"`` -- BV / MN with a fixed prior are linear in the sampled-rank
  distribution: one matrix product; with a fitted prior refitted per replicate,
  the priors of all replicates are one batched EM (or batched MES) on the grid
  and the B linear systems are solved together (TORS24 eqs 8-10, 42);
* ``"refit"`` -- every replicate refitted;
* ``"batched"`` -- the estimator's own batched replicates (``spec.replicates``:
  the log-spline prior by batched quasi-Newton, MES by batched dual Newton,
  CLS by one matrix product), which may decline (None) to fall back on refits.

References
----------
.. [Efron93] Efron, Tibshirani. An Introduction to the Bootstrap (1993).
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, eqs 8-10, 31-34, 42.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse

from .._validation import check_array_size
from ..kernels import DEFAULT_GRID_TOL, DEFAULT_N_ITEMS_TOL, em_grid, kernel_entries
from ._em import TINY32, em_fixed_iterations, em_fixed_iterations_single, em_operators, op_array
from ._linalg import OUTER_MAX, grid_outer
from ._linear import linear_on_grid_batch
from ._linear_nodes import NODE_TOL, PriorNodes
from ._mes import mes_replicate_atoms

__all__ = ["EMSurrogate", "FittedEstimator", "weights_head", "EM_SURROGATE_WIDTH", "EM_SURROGATE_TOL"]


def weights_head(w, H):
    """The first H entries of a weight vector: ``w[:H]`` of an array, ``w.head(H)`` of a lazy one.

    Examples
    --------
    >>> weights_head(np.array([0.5, 0.3, 0.2]), 2).tolist()
    [0.5, 0.3]
    """
    if hasattr(w, "head"):
        return np.asarray(w.head(H), dtype=float)
    return np.asarray(w, dtype=float)[:H]


@dataclass
class FittedEstimator:
    """An :class:`Estimator` fitted on cell counts; computes bootstrap replicates."""

    estimator: object          # the fitted sampling_lib.estimators.Estimator
    counts: object
    N: int
    #: metric values on ranks 1..H (H <= N; 0 beyond H)
    F: np.ndarray
    #: weights on ranks 1..N: an array, or a lazy vector with ``head(H)``
    weights: object
    prior: np.ndarray | None
    X: np.ndarray | None
    refit_prior: bool
    state: object = None
    #: (low, high) point estimates of the metrics under the estimator's ``alternatives``
    #: (the prior-sensitivity band), or None
    band: tuple | None = None
    #: the fitted alternatives (:class:`FittedEstimator` each; empty when none)
    alternatives: list = field(default_factory=list)
    #: (lower, upper) weight vectors of the estimator's assumption-free bounds, or None
    bounds: tuple | None = None
    _ops: list | None = field(default=None, repr=False)
    _outer: np.ndarray | None = field(default=None, repr=False)
    _mes_outer: np.ndarray | None = field(default=None, repr=False)
    #: per-user-N MES: what its replicates share across chunks (:func:`sampling_lib.estimators._mes_pooled.pooled_replicates`)
    _mes_cells: object = field(default=None, repr=False)
    _F_full: np.ndarray | None = field(default=None, repr=False)
    #: the EM family's per-user-N surrogate (:class:`EMSurrogate`), False when it does not apply
    _em_sur: object = field(default=None, repr=False)
    #: the prior estimator fitted with the gradient as its metrics (the one-step bootstrap in the prior)
    _prior_fit: object = field(default=None, repr=False)
    #: BV with a fitted prior and per-user N: the nodes in log N (:class:`PriorNodes`)
    _nodes: object = field(default=None, repr=False)

    @property
    def F_full(self):
        """F padded with zeros to all N ranks (N, m): for the replicate computations that work
        on every rank or on the rank grid (the metrics are 0 beyond the rows of F). Built once
        (the bootstrap asks for it on every chunk of replicates)."""
        if self.F.shape[0] == self.N:
            return self.F
        if self._F_full is None:
            self._F_full = np.zeros((self.N, self.F.shape[1]))
            self._F_full[:self.F.shape[0]] = self.F
        return self._F_full

    @property
    def estimate(self):
        """Point estimates ``weights[:H] @ F`` (length m; H = rows of F)."""
        return weights_head(self.weights, self.F.shape[0]) @ self.F

    @property
    def bound_estimates(self):
        """(low, high) metric values of :attr:`bounds` (length m each)."""
        H = self.F.shape[0]
        return tuple(weights_head(b, H) @ self.F for b in self.bounds)

    def coarse_draws(self):
        """(index, number of coarse cells, shares) for bootstrap draws on coarse cells, or None.

        The estimator's ``draw_cells`` (:class:`EstimatorSpec`) for this fit and every fitted
        alternative (they are replicated on the same draws): None unless all of them accept the
        same coarse cells; ``shares`` is the largest share over the fits, per metric.
        """
        outs = []
        for f in [self] + list(self.alternatives):
            hook = f.estimator.spec.draw_cells
            o = None if hook is None else hook(f)
            if o is None or (outs and not np.array_equal(o[0], outs[0][0])):
                return None
            outs.append(o)
        return outs[0][0], outs[0][1], np.max([o[2] for o in outs], axis=0)

    def influence(self):
        """First-order influence values (cells, m) of the exact cells on the estimates (the
        estimator's ``cell_influence``, :class:`EstimatorSpec`), or None."""
        hook = self.estimator.spec.cell_influence
        return None if hook is None else hook(self)

    def replicates(self, Cb, coarse=False, *, spread=None):
        """Estimates (B, m) for bootstrap count vectors ``Cb`` (B, number of cells); ``coarse``:
        ``Cb`` counts the coarse cells of :meth:`coarse_draws` (B, number of coarse cells).

        ``spread``: for the EM family's per-user-N surrogate, a function of its replicates (B, m)
        giving the standard deviations its check is judged against (:meth:`EMSurrogate.replicates`;
        default: the replicates' own). The one-step bootstrap in a fitted prior passes the spread
        of the replicates the prior's term enters."""
        est, st, N, F = self.estimator, self.counts, self.N, self.F
        spec, opts = est.spec, est.options
        Cb = np.asarray(Cb)
        if coarse:
            if spec.draw_cells is None:
                raise ValueError(f"estimator {est.name!r} draws on its exact cells (no draw_cells)")
            return np.asarray(spec.replicates(self, Cb, coarse=True), dtype=float)
        if spec.bootstrap == "batched":
            # a surrogate's check spread is passed to the estimators whose replicates take one (MES)
            out = spec.replicates(self, Cb) if spread is None else spec.replicates(self, Cb, spread=spread)
            if out is not None:
                return np.asarray(out, dtype=float)
            return refit_replicates(self, Cb)
        if spec.bootstrap == "linear" and not (self.refit_prior and spec.prior is not None):
            # linear in the sampled-rank distribution with a fixed prior (and a
            # fixed M for MN): a replicate is one matrix product (Cb / M) @ X
            return (Cb / st.M) @ self.X
        if spec.bootstrap == "em" and opts.get("tol") is None:
            # the estimator is "max_iter EM steps from init": rerun exactly
            # that protocol on all replicates at once (a warm start would
            # define a different estimator)
            init = opts.get("init")
            pi0 = np.full(N, 1.0 / N) if init is None else np.asarray(init, dtype=float)
            wt = np.ones(st.ranks.size)
            if spec.em_weights is not None:
                for ns in st.size_values:
                    sel = st.sizes == ns
                    wt[sel] = spec.em_weights(int(ns), **opts)[st.ranks[sel] - 1]
            n_iter = opts.get("max_iter", 100)
            grid = self._grid(opts)
            if grid is not None:
                return _grid_em_replicates(grid, st, Cb, wt, init, n_iter, self.F_full)
            exact = lambda C, single=False: self._em_exact_replicates(C, wt, pi0, n_iter, single)  # noqa: E731
            if self._em_sur is None:
                self._em_sur = EMSurrogate.build(self, wt, init, n_iter) or False
            if self._em_sur:
                return self._em_sur.replicates(Cb, self.estimate, exact, spread)
            return exact(Cb)
        if spec.bootstrap == "linear" and spec.prior is not None:
            out = self._batched_prior_replicates(Cb)
            if out is not None:
                return out
            if self.state is not None:
                return self._one_step_prior_replicates(Cb)
            if self.X is not None and st.n_items is not None and st.size_values.size == 1:
                return self._node_prior_replicates(Cb)
        return refit_replicates(self, Cb)

    def _one_step_prior_replicates(self, Cb):
        """MN with a fitted prior and per-user N: the one-step bootstrap in the prior
        (:data:`sampling_lib.estimators._registry.ONE_STEP_PRIOR_KINDS`; BV: :meth:`_node_prior_replicates`).

        A replicate refits the prior (pi*) and then every group of N_u with it. To first order in
        pi* - pi (the fitted prior), its estimate is the estimate with the fitted prior on the
        replicate's counts, (Cb / M*) @ X (each group's linear form), plus gradient . (pi* - pi),
        where ``state`` holds the gradient of the estimates in the prior
        (:func:`sampling_lib.estimators._linear_groups.linear_groups_prior_fit`). The second term is the
        prior estimator's own bootstrap with the gradient as its "metrics" (its batched
        replicates: for MLE the EM protocol rerun on all replicates at once), so no group is
        refitted. The terms left out are of order 1/M, against the replicates' spread of order
        1/sqrt(M); ``tests/test_peruser.py`` compares the replicates with exact refits.
        """
        if self._prior_fit is None:     # the prior estimator's fit (this fit's prior), with the gradient as metrics
            self._prior_fit = FittedEstimator(self.estimator._prior, self.counts, self.N, self.state, self.prior,
                                              None, None, True)
        pf = self._prior_fit
        Cb = np.asarray(Cb, dtype=float)
        lin = (Cb / Cb.sum(axis=1, keepdims=True)) @ self.X
        # the prior's term is judged (EM surrogate's check) against the spread of the replicates it enters
        return lin + (pf.replicates(Cb, spread=lambda out: (lin + out).std(axis=0, ddof=1)) - pf.estimate)

    def _node_prior_replicates(self, Cb):
        """BV with a fitted prior and per-user N: the prior refitted per replicate (its estimator's
        bootstrap, read as masses of rank cells), every group solved at nodes in log N
        (:class:`sampling_lib.estimators._linear_nodes.PriorNodes`). Checked once per fit (its first
        chunk of replicates): if the interpolation in N_u is off by more than ``NODE_TOL``
        replicate standard deviations, every replicate is refitted."""
        est, st = self.estimator, self.counts
        n = int(st.size_values[0])
        if self._nodes is None:
            nodes = PriorNodes.build(st.n_items, n, est.scheme, self.prior)
            # the prior estimator's fit with the common cells' indicators as its "metrics"
            check_array_size((self.N, nodes.edges.size - 1 + self.F.shape[1]),
                             f"the prior's rank-cell indicators of BV's node bootstrap (N={self.N})")
            A = np.column_stack([nodes.indicator(self.N), self.F_full])
            self._nodes = (nodes, FittedEstimator(est._prior, st, self.N, A, self.prior, None, None, True))
        nodes, pf = self._nodes
        if nodes.verdict is False:
            return refit_replicates(self, Cb)
        Cb = np.asarray(Cb, dtype=float)
        C = nodes.edges.size - 1
        # the prior's bootstrap checks itself on its own metric estimates (the columns after the C
        # cells' masses), as when it is fitted alone; a cell's mass is not a metric it is judged on
        common = pf.replicates(Cb, spread=lambda out: np.r_[np.full(C, np.inf), out[:, C:].std(axis=0, ddof=1)])
        out = nodes.replicates(est.spec.linear_kind, Cb, st.ranks, st.n_items, n, self.F, np.asarray(self.prior),
                               common[:, :C], self.X, gamma=est.options.get("gamma", 0.01), M=est.options.get("M"))
        if nodes.verdict is None and Cb.shape[0] > 1:
            nodes.verdict = bool(np.all(nodes.error <= NODE_TOL))
            if not nodes.verdict:
                return refit_replicates(self, Cb)
        return out

    def _grid(self, opts):
        """(RankGrid, kernel rows) when ``opts`` asks for the compressed grid and it applies
        (one N, one sample size), else None."""
        st = self.counts
        if "grid_tol" not in opts and "grid_tol" not in self.estimator.spec.options:
            return None
        if (st.n_items is not None and np.unique(st.n_items).size > 1) or st.size_values.size != 1:
            return None
        tol = opts.get("grid_tol", DEFAULT_GRID_TOL)
        return em_grid(self.N, int(st.size_values[0]), self.estimator.scheme, tol)

    def _batched_prior_replicates(self, Cb):
        """BV / MN with an EM prior refitted per replicate, all replicates at once on the grid.

        The prior (``max_iter`` EM steps from ``init``, the prior's protocol) is
        run as one batched EM on the grid atoms for every replicate
        (:func:`em_fixed_iterations`), then the linear estimate of every
        replicate on the same grid (:func:`linear_on_grid_batch`): the
        replicate of the point estimate's computation, not an approximation of
        it. None when it does not apply (no grid, a tolerance-stopped or
        non-EM prior).
        """
        est, st = self.estimator, self.counts
        pspec, popts = est._prior.spec, est._prior.options
        is_mes = pspec.name == "mes"
        if not is_mes and (pspec.bootstrap != "em" or popts.get("tol") is not None
                           or pspec.em_weights is not None):
            return None
        grid = self._grid(est.options)
        pgrid = self._grid(popts) if "grid_tol" in pspec.options else None
        if grid is None or pgrid is None or pgrid[0] is not grid[0]:
            return None
        g, Kg = grid
        n = int(st.size_values[0])
        Cb = np.asarray(Cb, dtype=float)
        init = None
        if is_mes:
            priors = mes_replicate_atoms(grid, self.N, n, est.scheme, st, Cb, self.prior,
                                          {"grid_tol": DEFAULT_GRID_TOL, **popts}, self)
            if priors is None:
                return None
        else:
            init = popts.get("init")
            priors = _grid_em_priors(g, Kg, st, Cb, np.ones(st.ranks.size), init,
                                     popts.get("max_iter", 100))
        Pt = np.zeros((Cb.shape[0], n))
        Pt[:, st.ranks - 1] = Cb
        Mb = Pt.sum(axis=1)
        Pt /= Mb[:, None]
        within = None if init is None else np.asarray(init, dtype=float)
        Fcell = g.bin_average(self.F_full, within=within)
        if self._outer is None and Kg.shape[0] * Kg.shape[1] * (Kg.shape[1] + 1) // 2 <= OUTER_MAX:
            self._outer = grid_outer(Kg)
        if est.spec.linear_kind == "bv":
            return linear_on_grid_batch("bv", Pt, priors, Kg, g.size, Fcell,
                                        gamma=est.options.get("gamma", 0.01), outer=self._outer)
        M = est.options.get("M")
        return linear_on_grid_batch("mn", Pt, priors, Kg, g.size, Fcell, M=Mb if M is None else M,
                                    outer=self._outer)

    def _em_exact_replicates(self, Cb, wt, pi0, n_iter, single=False):
        """The estimator ``max_iter`` EM steps from ``init`` on the exact cells, every replicate (batched EM);
        ``single``: in single precision where the operators allow it (:func:`em_fixed_iterations_single`)."""
        F = self.F
        out = np.empty((Cb.shape[0], F.shape[1]))
        ops = self._em_operators()
        step = max(1, _EM_BLOCK_ELEMS // self.N)
        for a in range(0, Cb.shape[0], step):
            Wb = Cb[a:a + step] * wt
            blocks = [(op, Wb[:, idx]) for op, idx in ops]
            pmf = em_fixed_iterations_single(blocks, pi0, n_iter) if single else None
            if pmf is None:
                pmf = em_fixed_iterations(blocks, pi0, n_iter)
            out[a:a + step] = pmf[:, :F.shape[0]] @ F
        return out

    def _em_operators(self):
        """EM operators of the cells (kernels built once for all bootstrap chunks)."""
        if self._ops is None:
            st = self.counts
            items = st.n_items if st.n_items is not None else np.full(st.ranks.size, self.N)
            tol = self.estimator.options.get("n_items_tol", DEFAULT_N_ITEMS_TOL)
            if np.unique(items).size == 1:
                tol = 0.0          # one N: the blocks of the int path, one per sample size
            self._ops = em_operators(items, st.sizes, st.ranks, self.estimator.scheme, tol=tol)
        return self._ops


_EM_BLOCK_ELEMS = 1 << 21        # B x N elements per batched-EM block

#: Spacing in log N of the item counts at which :class:`EMSurrogate` builds kernels (its nodes).
EM_SURROGATE_WIDTH = 0.2
#: Total-variation tolerance of the rank grid of :class:`EMSurrogate` (the estimators' grid uses
#: DEFAULT_GRID_TOL = 0.02; on the ml-1m stand-in 0.02, 0.05, 0.1 and 0.3 gave the same replicates to
#: 0.001 standard deviations, and 0.3 has 301 grid points against 889 at 0.02).
EM_SURROGATE_GRID_TOL = 0.3
#: Largest distance, in bootstrap standard deviations, between an :class:`EMSurrogate` replicate and
#: its exact refit in the check: the Monte Carlo standard error of a 95% percentile endpoint from
#: 1,000 replicates, as for the log-spline's one-step replicates (0.084).
EM_SURROGATE_TOL = 0.084
#: Replicates refitted exactly to check the surrogate (the farthest from the estimate).
EM_SURROGATE_CHECKS = 4
#: The surrogate is used when an exact replicate costs at least this many times a surrogate one.
EM_SURROGATE_GAIN = 8


@dataclass
class EMSurrogate:
    """Bootstrap replicates of the EM family (MLE, WMLE, adaptive MLE) on per-user N_u, by a surrogate.

    The estimator "``max_iter`` EM steps from ``init``" (AAAI21 eq 21, TORS24 eq 34) on per-user
    item counts runs every replicate over one kernel column per cell (N_u, n_u, r): on a stand-in of
    NCF's MovieLens-1M file (2,295 distinct N_u, 4,677 cells at N = 3,706) 0.24 s a replicate, four
    minutes per model for 1,000. The surrogate runs the same protocol on a cheaper likelihood:

    * kernels only at nodes N_j spaced :data:`EM_SURROGATE_WIDTH` apart in log N, each cell's
      column interpolated linearly in N between the two nodes around its N_u (weights 1 - t, t),
      so a cell's probability is (1 - t) q_j(r) + t q_{j+1}(r);
    * global ranks on the compressed grid of the largest N (:func:`sampling_lib.kernels.em_grid` at
      :data:`EM_SURROGATE_GRID_TOL`, representative rows), the EM of the grid's atoms from the bin
      masses of ``init``;
    * single precision.

    A replicate is then T_b = T + (Ts_b - Ts): the exact estimate plus the surrogate's change on
    the same counts. The point estimate stays exact; only the spread of the replicates comes from
    the surrogate. It is checked once per fit, in the first chunk (a first chunk of at most
    :data:`EM_SURROGATE_CHECKS` replicates is refitted exactly): the
    :data:`EM_SURROGATE_CHECKS` replicates farthest from the estimate are refitted on the exact cells
    (in single precision, :func:`em_fixed_iterations_single`: about 1e-6 of a fit's masses, half the
    bytes read) and replace their values; if any differs by more than :data:`EM_SURROGATE_TOL`
    bootstrap standard deviations, every replicate is refitted exactly (double precision). On the
    ml-1m stand-in the replicates were within 0.02-0.07 standard deviations of exact refits and
    their spread within 1%
    (``benchmarks/bench_peruser.py`` case 5); piecewise-constant bins of N_u needed a width of
    0.03 (over 1,300 cells) for the same accuracy.
    """

    Kn: np.ndarray                 # (G, L) node kernel columns on the grid's representative ranks
    KnT: np.ndarray                # its transpose, C-ordered
    S: object                      # (cells, L) sparse interpolation weights
    ST: object
    Fc: np.ndarray                 # (G, m) metrics averaged over the grid's bins
    p0: np.ndarray                 # (G,) the start on the grid
    wt: np.ndarray
    n_iter: int
    counts0: np.ndarray            # (1, cells) the full sample's counts
    base: np.ndarray | None = None
    verdict: bool | None = None
    error: np.ndarray | None = None

    @classmethod
    def build(cls, fitted, wt, init, n_iter):
        """The surrogate of a fitted EM estimator, or None where it does not pay (few cells, one N)."""
        st = fitted.counts
        if st.n_items is None or np.unique(st.n_items).size < 3:
            return None
        scheme = fitted.estimator.scheme
        Nmax, Nmin = int(st.n_items.max()), int(st.n_items.min())
        g = em_grid(Nmax, int(st.sizes.max()), scheme, EM_SURROGATE_GRID_TOL)
        if g is None:
            return None
        g = g[0]
        k = max(1, int(np.ceil(np.log(Nmax / Nmin) / EM_SURROGATE_WIDTH)))
        nodes = np.unique(np.rint(np.exp(np.linspace(np.log(Nmin), np.log(Nmax), k + 1))).astype(np.int64))
        nodes = np.unique(np.r_[Nmin, nodes, Nmax])
        J = nodes.size
        lo = np.clip(np.searchsorted(nodes, st.n_items, side="right") - 1, 0, J - 2)
        t = (st.n_items - nodes[lo]) / (nodes[lo + 1] - nodes[lo])
        sizes = np.unique(st.sizes)
        si = np.searchsorted(sizes, st.sizes)
        nmax = int(sizes[-1])
        col = lambda j: (j * sizes.size + si) * nmax + st.ranks - 1  # noqa: E731  (node, size, rank)
        c = st.ranks.size
        exact_work = sum(op_array(op).size for op, _ in fitted._em_operators())
        used = np.unique(np.r_[col(lo), col(lo + 1)])
        if exact_work < EM_SURROGATE_GAIN * (g.lo.size * used.size + 8 * c):
            return None
        S = scipy.sparse.csr_matrix((np.r_[1.0 - t, t], (np.r_[np.arange(c), np.arange(c)],
                                                         np.searchsorted(used, np.r_[col(lo), col(lo + 1)]))),
                                    shape=(c, used.size))
        Kn = np.zeros((g.lo.size, used.size))
        jj, rest = np.divmod(used, sizes.size * nmax)
        ss, rr = np.divmod(rest, nmax)
        for j in np.unique(jj):
            Nj = int(nodes[j])
            ok = g.lo <= Nj
            for s_ in np.unique(ss[jj == j]):
                sel = np.flatnonzero((jj == j) & (ss == s_))
                Kn[np.ix_(ok, sel)] = kernel_entries(Nj, int(sizes[s_]), np.minimum(g.rep[ok], Nj), rr[sel] + 1,
                                                     scheme)
        within = None if init is None else np.asarray(init, dtype=float)
        p0 = g.size / g.N if within is None else g.bin_sums(within)
        S = S.astype(np.float32)
        Kn = Kn.astype(np.float32)
        return cls(Kn, np.ascontiguousarray(Kn.T), S, S.T.tocsr(), g.bin_average(fitted.F_full, within=within), p0,
                   np.asarray(wt, dtype=float), int(n_iter), st.counts.astype(float)[None])

    def estimates(self, C):
        """The surrogate's estimates (B, m) for count vectors C (B, cells).

        In single precision (the kernels, the iterates and the sparse interpolation): the
        replicates are differences of two runs of the same surrogate, checked against exact
        refits, and half the memory traffic is about half the time."""
        WT = np.ascontiguousarray((np.asarray(C, dtype=float) * self.wt).T, dtype=np.float32)   # (cells, B)
        M = WT.sum(axis=0, dtype=np.float64).astype(np.float32)
        PT = np.repeat(self.p0.astype(np.float32)[:, None], WT.shape[1], axis=1)           # (G, B)
        vT = np.empty_like(WT)
        for _ in range(self.n_iter):
            q = self.S @ (self.KnT @ PT)
            # a replicate's cells it does not observe have WT = 0, hence v = 0 (q floored at the smallest
            # normal float only where it is below it): a masked divide (where=) took 60% of the E-step
            np.maximum(q, TINY32, out=q)
            np.divide(WT, q, out=vT)
            PT *= self.Kn @ (self.ST @ vT)
            PT /= M
        return PT.T.astype(np.float64) @ self.Fc

    def replicates(self, Cb, estimate, exact, spread=None):
        """T + (Ts_b - Ts) for the count vectors Cb, checked against ``exact`` refits once
        (``exact(C, single=False)``; the check's refits in single precision). ``spread(out)``
        gives the standard deviations the check's errors are divided by (default: those of the
        replicates ``out`` themselves)."""
        if self.verdict is False or (self.verdict is None and Cb.shape[0] <= EM_SURROGATE_CHECKS):
            return exact(Cb)          # failed, or too few replicates to check: exact refits
        if self.base is None:
            self.base = self.estimates(self.counts0)[0]
        out = estimate + (self.estimates(Cb) - self.base)
        if self.verdict is None and Cb.shape[0] > EM_SURROGATE_CHECKS:
            sd = np.maximum(out.std(axis=0, ddof=1) if spread is None else spread(out), 1e-300)
            far = np.max(np.abs(out - estimate) / sd, axis=1)
            pick = np.argsort(far)[-EM_SURROGATE_CHECKS:]
            ref = exact(Cb[pick], single=True)       # in single precision: 1e-6 of a fit against a 0.084 SD test
            self.error = np.max(np.abs(ref - out[pick]) / sd, axis=0)
            self.verdict = bool(np.all(self.error <= EM_SURROGATE_TOL))
            if not self.verdict:
                return exact(Cb)
            out[pick] = ref
        return out


def _grid_em_priors(g, Kg, st, Cb, wt, init, n_iter):
    """``n_iter`` EM steps from ``init`` for every replicate, on the grid atoms: (B, G)."""
    p0 = g.size / g.N if init is None else g.bin_sums(np.asarray(init, dtype=float))
    K = np.ascontiguousarray(Kg[:, st.ranks - 1])
    out = np.empty((Cb.shape[0], g.lo.size))
    step = max(1, _EM_BLOCK_ELEMS // g.lo.size)
    for a in range(0, Cb.shape[0], step):
        out[a:a + step] = em_fixed_iterations([(K, Cb[a:a + step] * wt)], p0, n_iter)
    return out




def _grid_em_replicates(grid, st, Cb, wt, init, n_iter, F):
    """Batched EM replicates on the grid (the ``"em"`` bootstrap with ``grid_tol``): (B, m)."""
    g, Kg = grid
    priors = _grid_em_priors(g, Kg, st, np.asarray(Cb, dtype=float), wt, init, n_iter)
    within = None if init is None else np.asarray(init, dtype=float)
    return priors @ g.bin_average(F, within=within)


def refit_replicates(fitted, Cb):
    """Every replicate refitted on its own (warm-started from the full-sample weights where the
    estimator takes a warm start): the fallback of every strategy (per-user N, cvxpy, ...)."""
    est, st = fitted.estimator, fitted.counts
    if est.spec.warm_start_option is not None:
        est = est.with_options(**{est.spec.warm_start_option: fitted.weights})
    H = fitted.F.shape[0]
    out = np.empty((Cb.shape[0], fitted.F.shape[1]))
    for b in range(Cb.shape[0]):
        r_b, s_b, N_b = st.expand_cells(Cb[b])
        n_b = int(st.size_values[0]) if st.size_values.size == 1 else s_b
        out[b] = est(r_b, fitted.N if N_b is None else N_b, n_b)[:H] @ fitted.F
    return out
