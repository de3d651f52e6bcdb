"""The log-spline prior's likelihood columns on cells (N_u, n_u, r): the kernel on the fit's rank grid,
its cache, and the surrogate likelihood that starts the exact solver.

Part of :mod:`sampling_lib.estimators._logspline` (which re-exports :func:`cells_setup`,
:func:`cells_setup_surrogate`, :class:`CellsSurrogate`, :func:`full_ranking_columns`,
:data:`GRID_N_MAX` and :func:`grid_size_n`): a user's data is its cell, the likelihood column of a cell
is the kernel P(r | R; N_u, n_u) on the grid of global ranks (KDD20 Sec 2.2 eq 5, hypergeometric for
draws without replacement), and thousands of distinct cells are first solved on a coarser surrogate
(binned N_u and sampled ranks; :class:`CellsSurrogate`).

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation. KDD 2020, Sec 2.2.
.. [Efron16] Efron. Empirical Bayes deconvolution estimates. Biometrika 103(1), 2016.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import sparse

from .._validation import check_float, check_int, check_scheme
from ..counts import ranked_in_full
from ..kernels import cell_kernel, kernel_bin_masses, n_items_log_bins
from ._logspline import _BIN_ANGLE, _BIN_LOG_WIDTH, SplineGrid, spline_grid
from ._logspline_newton import gradient, penalty_matrix, quasi_newton


def cells_setup(n_items, sizes, ranks, counts, scheme, penalty, knot_spacing, exact_ranks):
    """(counts, grid, likelihood columns, penalty matrix, penalty, knot spacing) of validated cells."""
    return cells_setup_surrogate(n_items, sizes, ranks, counts, scheme, penalty, knot_spacing, exact_ranks)[:6]


def cells_setup_surrogate(n_items, sizes, ranks, counts, scheme, penalty, knot_spacing, exact_ranks):
    """:func:`cells_setup` and the cells' :class:`CellsSurrogate` (or None) from one kernel build."""
    scheme = check_scheme(scheme)
    exact_ranks = check_int(exact_ranks, "exact_ranks", low=1)
    penalty = check_float(penalty, "penalty", low=0.0)
    knot_spacing = check_float(knot_spacing, "knot_spacing", low=0.0, low_open=True)
    Nc = np.asarray(n_items, dtype=np.int64)
    nc = np.asarray(sizes, dtype=np.int64)
    rc = np.asarray(ranks, dtype=np.int64)
    c = np.asarray(counts, dtype=float)
    if not (Nc.shape == nc.shape == rc.shape == c.shape) or Nc.ndim != 1 or Nc.size == 0:
        raise ValueError(f"n_items, sizes, ranks and counts must be 1-D of equal length; got shapes "
                         f"{Nc.shape}, {nc.shape}, {rc.shape}, {c.shape}")
    if nc.min() < 2 or np.any(nc > Nc) or rc.min() < 1 or np.any(rc > nc) or np.any(c < 0):
        raise ValueError("cells must satisfy N_u >= n_u >= 2, 1 <= r <= n_u and count >= 0")
    grid, K, sur = cells_kernel(Nc, nc, rc, scheme, knot_spacing, exact_ranks)
    P = penalty_matrix(grid.B.shape[1], penalty)
    return c, grid, K, P, penalty, knot_spacing, sur


#: The cells path solves first on a surrogate likelihood when there are at least this many cells
#: and the surrogate's likelihood has at most :data:`SURROGATE_MAX_SHARE` of their number of columns
#: (see :class:`CellsSurrogate`): hundreds of distinct N_u, or one N with the many (n_u, r) of a nested
#: design, whose sampled ranks the surrogate bins (3 x 20,000 users of a ladder 100 -> 19,200 at N = 10^5:
#: 3,600-7,400 cells, 632 columns; benchmarks/bench_peruser.py, case 6). Until 2026-11-29 the bounds were
#: 2,048 cells and a quarter: an ml-1m-like file of 700-2,000 users (700-2,000 cells, about 440 surrogate
#: columns) then refitted every bootstrap replicate on the exact cells, 2.5-5 s a model against 0.7-0.8 s
#: (benchmarks/README.md, "Every method on a per-user file like NCF ml-1m"); over 8 seeds the intervals'
#: ends and half-widths of the two routes agreed within their Monte Carlo error (half-widths within 2%).
SURROGATE_MIN_CELLS = 256
#: The largest share of the exact cells' columns the surrogate's likelihood may keep (see above).
SURROGATE_MAX_SHARE = 0.5
#: Width in log N_u of the surrogate's bins of item counts.
SURROGATE_LOG_WIDTH = 0.1
#: The surrogate's own grid of global ranks: ranks 1..SURROGATE_EXACT_RANKS exact (256 in the fit's
#: grid), and bins SURROGATE_ANGLE_FACTOR times wider in the kernel's angle (TV) than the fit's. The
#: surrogate only starts the exact solver and corrects one-step replicates by a difference of two of
#: its own estimates; on 10^5 users (benchmarks/bench_peruser.py) this grid (200 points against 560)
#: left those corrections' errors against exact refits unchanged to 0.002 standard deviations (factors
#: 2 to 16 alike) and halved the refits' time.
SURROGATE_EXACT_RANKS = 32
SURROGATE_ANGLE_FACTOR = 4.0
#: The surrogate's likelihood keeps sampled ranks 1..SURROGATE_EXACT_SAMPLED_RANKS as they are and
#: groups larger ones in bins of width SURROGATE_RANK_LOG_WIDTH in log r (a coarsened observation; on
#: 10^5 users at n = 100: 483 columns against 1,044, corrected replicates' errors unchanged to 0.001
#: standard deviations, refits twice as fast; benchmarks/bench_peruser.py).
SURROGATE_EXACT_SAMPLED_RANKS = 32
SURROGATE_RANK_LOG_WIDTH = 0.1
_CELLS_CACHE = {}
_CELLS_CACHE_BYTES = 2**30


@dataclass(frozen=True)
class CellsSurrogate:
    """A coarser likelihood that helps the cells path's solvers (per-user N_u, or many (n_u, r)).

    The item counts N_u of the sampled cells are binned in log N
    (:func:`sampling_lib.kernels.n_items_log_bins`, width
    :data:`SURROGATE_LOG_WIDTH` = 0.1: every N_u within about 5% of its bin's N_b) and cells
    with equal (N_b, n_u, r) merged: the *coarse cells*, on which the bootstrap may draw
    (:func:`sampling_lib.estimators._logspline_boot.coarse_draw_cells`). The surrogate's
    likelihood merges them further: sampled ranks beyond :data:`SURROGATE_EXACT_SAMPLED_RANKS`
    are grouped in bins of width :data:`SURROGATE_RANK_LOG_WIDTH` in log r, each column the
    likelihood of the coarsened observation "r in the bin" (the kernel summed over the bin's
    ranks). So the likelihood has a few bins x (a few dozen) columns instead of one per distinct
    (N_u, r), on its own coarser grid of global ranks; with one N and the many set sizes of a
    nested design the coarse cells are the exact ones and only the sampled ranks are binned. It
    is never the answer. The point fit
    continues on the exact cells from the surrogate's optimum (same convergence test: the
    estimate is the exact solver's). The bootstrap uses the surrogate's refits to correct
    one-step replicates on the exact cells, checked against exact refits
    (:func:`sampling_lib.estimators._logspline_boot.logspline_cells_replicates`), and to start
    exact refits where those are needed.

    Attributes
    ----------
    index : ndarray of int, shape (C,)
        The coarse cell (N_b, n_u, r) of every exact cell.
    fold : ndarray of int, shape (C_c,)
        The likelihood column of every coarse cell.
    K : ndarray, shape (G_s, C_s)
        The surrogate's likelihood columns on its grid.
    grid : SplineGrid
        The surrogate's grid of global ranks (coarser than the fit's, same spline basis and
        coefficients: :data:`SURROGATE_EXACT_RANKS`, :data:`SURROGATE_ANGLE_FACTOR`).
    """

    index: np.ndarray
    fold: np.ndarray
    K: np.ndarray
    grid: SplineGrid

    @property
    def n_coarse(self):
        """The number of coarse cells."""
        return self.fold.size

    @cached_property
    def _coarse_sum(self):
        """The (C_c, C) 0/1 matrix that sums exact cells into coarse cells (built once)."""
        return sparse.csr_matrix((np.ones(self.index.size), (self.index, np.arange(self.index.size))),
                                 shape=(self.n_coarse, self.index.size))

    @cached_property
    def _fold_sum(self):
        """The (C_s, C_c) 0/1 matrix that sums coarse cells into the likelihood's columns."""
        return sparse.csr_matrix((np.ones(self.fold.size), (self.fold, np.arange(self.fold.size))),
                                 shape=(self.K.shape[1], self.fold.size))

    @cached_property
    def _sum(self):
        """The (C_s, C) 0/1 matrix that sums exact cells into the likelihood's columns."""
        return (self._fold_sum @ self._coarse_sum).tocsr()

    @staticmethod
    def _apply(S, c):
        c = np.asarray(c, dtype=float)
        return np.asarray((S @ c.T).T)

    def counts(self, c):
        """Counts (..., C) of the exact cells summed into the surrogate's columns (..., C_s)."""
        return self._apply(self._sum, c)

    def coarse_counts(self, c):
        """Counts (..., C) of the exact cells summed into the coarse cells (..., C_c)."""
        return self._apply(self._coarse_sum, c)

    def fold_counts(self, cc):
        """Counts (..., C_c) of the coarse cells summed into the surrogate's columns (..., C_s)."""
        return self._apply(self._fold_sum, cc)


def cells_kernel(n_items, sizes, ranks, scheme, knot_spacing, exact_ranks):
    """(grid, likelihood columns K (G, C), :class:`CellsSurrogate` or None) of validated cells.

    Built once per cells: the fits with the alternative penalties and the bootstrap reuse them
    (a one-entry cache, for kernels up to 1 GiB: 10^5 users of a nested design have 20,000 cells, a
    390 MB kernel; K is returned read-only)."""
    Nc, nc, rc = (np.ascontiguousarray(a, dtype=np.int64) for a in (n_items, sizes, ranks))
    digest = hashlib.sha1(b"".join(a.tobytes() for a in (Nc, nc, rc))).hexdigest()
    key = (digest, Nc.size, scheme, float(knot_spacing), int(exact_ranks))
    if key in _CELLS_CACHE:
        return _CELLS_CACHE[key]
    full = ranked_in_full(nc, Nc, scheme)
    grid = spline_grid(int(Nc.max()), grid_size_n(nc[~full]), knot_spacing, exact_ranks, scheme)
    K = _columns(grid, Nc, nc, rc, full, scheme)
    out = grid, K, _surrogate(grid, Nc, nc, rc, full, scheme, knot_spacing, exact_ranks)
    _CELLS_CACHE.clear()
    if K.nbytes <= _CELLS_CACHE_BYTES:
        _CELLS_CACHE[key] = out
    return out


def _surrogate(grid, Nc, nc, rc, full, scheme, knot_spacing, exact_ranks):
    """The :class:`CellsSurrogate` of the cells, or None when it would not save much."""
    if Nc.size < SURROGATE_MIN_CELLS:
        return None
    rep = Nc.copy()
    rep[~full] = n_items_log_bins(Nc[~full], nc[~full], SURROGATE_LOG_WIDTH)
    keys, index = np.unique(np.stack([rep, nc, rc]), axis=1, return_inverse=True)
    Ns, ns, rs = keys
    fs = ranked_in_full(ns, Ns, scheme)
    # the likelihood's columns: sampled ranks beyond SURROGATE_EXACT_SAMPLED_RANKS in log-bins (users
    # ranked in full keep their rank: it is their global rank)
    rb = np.where(fs, rs, _sampled_rank_bins(rs))
    cols, fold = np.unique(np.stack([Ns, ns, rb, fs]), axis=1, return_inverse=True)
    if SURROGATE_MAX_SHARE * Nc.size < cols.shape[1]:
        return None
    gs = spline_grid(grid.N, grid_size_n(ns[~fs]), knot_spacing, min(exact_ranks, SURROGATE_EXACT_RANKS), scheme,
                     _BIN_ANGLE * SURROGATE_ANGLE_FACTOR)
    Nf, nf, bf, ff = cols[0], cols[1], cols[2], cols[3].astype(bool)
    K = np.zeros((gs.lo.size, cols.shape[1]))
    one = ff | (bf <= SURROGATE_EXACT_SAMPLED_RANKS)
    if one.any():
        K[:, one] = _columns(gs, Nf[one], nf[one], bf[one], ff[one], scheme)
    if (~one).any():
        j = np.flatnonzero(~one)
        K[:, j] = _binned_columns(gs.mid, Nf[j], nf[j], bf[j], scheme)
    K.setflags(write=False)
    return CellsSurrogate(index=index.ravel().astype(np.int64), fold=fold.ravel().astype(np.int64), K=K, grid=gs)


def _binned_columns(R, N, n, b, scheme):
    """P(r in bin b | R; N, n) for global ranks R (rows) and cells (N, n, b) (columns): the kernel
    summed over the bin's sampled ranks (:func:`sampling_lib.kernels.kernel_bin_masses`: for the
    hypergeometric kernel only the terms within a Bernstein bound of the mean, O(len(R) sqrt(n))
    per distinct (N, n) whatever the bins' widths); 0 where R > N."""
    R = np.asarray(R, dtype=np.int64)
    out = np.zeros((R.size, b.size))
    pairs, inv = np.unique(np.stack([N, n]), axis=1, return_inverse=True)
    inv = inv.ravel()
    digest = hashlib.sha1(R.tobytes()).hexdigest()
    for k in range(pairs.shape[1]):
        Nk, nk = int(pairs[0, k]), int(pairs[1, k])
        sel = np.flatnonzero(inv == k)
        out[:, sel] = _all_bin_columns(digest, Nk, nk, scheme, R)[:, b[sel] - SURROGATE_EXACT_SAMPLED_RANKS - 1]
    return out


_BIN_COLUMNS = {}


def _all_bin_columns(digest, N, n, scheme, R):
    """:func:`_binned_columns` of every rank bin of one (N, n) on the grid ranks R (digest: of R), read-only
    and kept for the 64 most recent (N, n): the models of an evaluation share N and their set sizes, so
    their surrogates share these columns."""
    key = (digest, N, n, scheme)
    if key in _BIN_COLUMNS:
        return _BIN_COLUMNS[key]
    last = int(_sampled_rank_bins(n))
    b = np.arange(SURROGATE_EXACT_SAMPLED_RANKS + 1, last + 1)
    lo, hi = _sampled_rank_bin_edges(b, n)
    out = np.zeros((R.size, b.size))
    rows = np.flatnonzero(R <= N)
    ok = lo <= hi                              # (an empty bin of the log-bins' rounding gets 0)
    out[np.ix_(rows, np.flatnonzero(ok))] = kernel_bin_masses(N, n, R[rows], lo[ok], hi[ok], scheme)
    out.setflags(write=False)
    if len(_BIN_COLUMNS) >= 64:
        _BIN_COLUMNS.pop(next(iter(_BIN_COLUMNS)))
    _BIN_COLUMNS[key] = out
    return out


def _sampled_rank_bin_edges(b, n):
    """(first, last) sampled rank of the surrogate's bins b > SURROGATE_EXACT_SAMPLED_RANKS, last <= n."""
    b = np.asarray(b, dtype=np.int64)
    E = SURROGATE_EXACT_SAMPLED_RANKS
    lo = np.ceil(E * np.exp((b - E - 1) * SURROGATE_RANK_LOG_WIDTH)).astype(np.int64)
    for _ in range(2):      # the formula's rounding, corrected against the bins themselves
        lo = np.where(_sampled_rank_bins(lo) < b, lo + 1, lo)
        lo = np.where(_sampled_rank_bins(lo - 1) == b, lo - 1, lo)
    hi = np.ceil(E * np.exp((b - E) * SURROGATE_RANK_LOG_WIDTH)).astype(np.int64)
    for _ in range(2):
        hi = np.where(_sampled_rank_bins(hi) <= b, hi + 1, hi)
        hi = np.where(_sampled_rank_bins(hi - 1) > b, hi - 1, hi)
    return lo, np.minimum(hi - 1, np.asarray(n, dtype=np.int64))


def _sampled_rank_bins(r):
    """The surrogate's bin of sampled rank r: r itself up to SURROGATE_EXACT_SAMPLED_RANKS, then
    E + 1 + floor(log(r / E) / SURROGATE_RANK_LOG_WIDTH) (E = SURROGATE_EXACT_SAMPLED_RANKS)."""
    r = np.asarray(r, dtype=np.int64)
    E = SURROGATE_EXACT_SAMPLED_RANKS
    with np.errstate(divide="ignore"):
        far = E + 1 + np.floor(np.log(np.maximum(r, 1) / E) / SURROGATE_RANK_LOG_WIDTH).astype(np.int64)
    return np.where(r <= E, r, far)


def _columns(grid, Nc, nc, rc, full, scheme):
    """Read-only likelihood columns (G, C) of cells: the kernel at the grid points, and the point
    masses of the cells ranked in full (``full``)."""
    K = cell_kernel(grid.mid, Nc, nc, rc, scheme)
    if full.any():
        K[:, full] = full_ranking_columns(grid, rc[full])
    K.setflags(write=False)
    return K


#: Largest n the grid's bins are cut for in the cells path (see :func:`grid_size_n`).
GRID_N_MAX = 4096


def grid_size_n(sampled_sizes):
    """The set size the grid's bins are cut for, from the sampled (not ranked-in-full) users' sizes.

    The largest n, but at most :data:`GRID_N_MAX` (unless every sampled user has more): in a
    nested design the users given larger sets are those whose earlier ranks were small, i.e.
    near the top, where the grid is exact (ranks 1..``exact_ranks``) or its bins at most 5% wide
    in R (``_BIN_LOG_WIDTH``); cutting the bins for n = 10^6 would need ~10^5 of them (and their
    TV bound, rows of length n). A ranked-in-full user's kernel is a point mass, which needs no
    narrower bin than the prior's own resolution.
    """
    s = np.asarray(sampled_sizes, dtype=np.int64)
    if s.size == 0:
        return 2
    return int(min(s.max(), max(s.min(), GRID_N_MAX)))


def full_ranking_columns(grid, ranks):
    """Likelihood columns (G, k) of users ranked in full: their global rank R = r is observed.

    P(R = r | g) = g(bin of r) / width(bin) on the grid (the prior's mass
    spread evenly over the bin's ranks; exact for r <= ``exact_ranks``).
    """
    col = np.searchsorted(grid.hi, np.asarray(ranks, dtype=np.int64))
    out = np.zeros((grid.lo.size, col.size))
    out[col, np.arange(col.size)] = np.exp(-grid.logw[col])
    return out
