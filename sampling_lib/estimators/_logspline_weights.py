"""The log-spline fit's result and its lazily expanded weights (:mod:`sampling_lib.estimators._logspline`).

A fit lives on the compressed rank grid; :class:`GridWeights` spreads the grid cells' masses
over ranks 1..N on demand (only the head a top-K metric needs), :class:`LogsplineResult`
holds the fit.

References
----------
.. [Efron16] Efron, B. Empirical Bayes deconvolution estimates. Biometrika 103(1), 2016.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.interpolate import BSpline

from .._validation import check_int

__all__ = ["GridWeights", "LogsplineResult", "expand_cells", "SPLINE_DEGREE"]

#: Degree of the B-spline basis of the log-prior (cubic).
SPLINE_DEGREE = 3


class GridWeights:
    """A length-N weight vector held on the compressed rank grid, expanded on demand.

    The fit works on grid cells (module docstring); the length-N vector is
    the cell masses spread log-linearly over each cell's ranks
    (:func:`expand_cells`). ``head(H)`` gives its first H entries (ranks 1..H)
    in O(H + G) memory and time, which is all a top-K metric with K <= H
    needs (F(R) = 0 for R > K): :func:`sampling_lib.correct.estimate` never
    forms the length-N vector, so its memory does not grow with N.
    ``full()`` (or ``np.asarray``) gives the length-N vector; ``head(H)``
    equals ``full()[:H]`` exactly.

    Attributes
    ----------
    cells : ndarray, shape (G,)
        Mass of every grid cell.
    N : int
        Length of the expanded vector.

    References
    ----------
    Efron (2016), Biometrika 103(1) (g-modeling on a grid); AAAI21 eq 14
    (a metric is sum_R P(R) F(R)).

    Examples
    --------
    >>> from sampling_lib.estimators import logspline_fit
    >>> fit = logspline_fit(np.r_[np.ones(30, int), np.arange(1, 71)], 10**6, 100)
    >>> w = fit.weights_grid
    >>> w.shape, w.head(10).shape
    ((1000000,), (10,))
    >>> bool(np.array_equal(w.head(300), w.full()[:300]))
    True
    """

    __slots__ = ("cells", "_beta", "_grid")

    def __init__(self, cells, beta, grid):
        self.cells = np.asarray(cells, dtype=float)
        self._beta = beta
        self._grid = grid

    @property
    def N(self):
        return self._grid.N

    @property
    def shape(self):
        return (self._grid.N,)

    @property
    def size(self):
        return self._grid.N

    def head(self, H):
        """The weights of ranks 1..H (H <= N), equal to ``full()[:H]``."""
        H = check_int(H, "H", low=1)
        if H > self._grid.N:
            raise ValueError(f"H must lie in 1..N={self._grid.N}; got H={H}")
        return expand_cells(self.cells, self._beta, self._grid, upto=H)

    def full(self):
        """The length-N weight vector."""
        return expand_cells(self.cells, self._beta, self._grid)

    def __array__(self, dtype=None, copy=None):
        a = self.full()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __repr__(self):
        return f"GridWeights(N={self._grid.N}, cells={self.cells.size})"


@dataclass(frozen=True)
class LogsplineResult:
    """Fit of the log-spline prior (see :func:`logspline_fit`).

    Attributes
    ----------
    weights : ndarray, shape (N,)
        Posterior-mean weights: the estimate of a metric F is ``weights @ F``
        (expanded from ``weights_grid`` on first access).
    prior : ndarray, shape (N,)
        The fitted prior g(R), R = 1..N (a probability vector; expanded from
        ``prior_grid`` on first access).
    beta : ndarray
        Spline coefficients.
    loglik : float
        Log-likelihood of the sampled ranks at the fitted prior.
    n_iter : int
        Newton (Fisher scoring) iterations.
    converged : bool
        Whether the gradient norm fell below the tolerance.
    penalty, knot_spacing : float
        The tuning used.
    grid_size : int
        Number of cells of the compressed rank grid.
    weights_grid, prior_grid : GridWeights
        ``weights`` and ``prior`` on the grid cells; ``weights_grid.head(H)``
        is ``weights[:H]`` without forming the length-N vector.
    """

    beta: np.ndarray
    loglik: float
    n_iter: int
    converged: bool
    penalty: float
    knot_spacing: float
    grid_size: int
    weights_grid: GridWeights
    prior_grid: GridWeights

    @cached_property
    def weights(self):
        return self.weights_grid.full()

    @cached_property
    def prior(self):
        return self.prior_grid.full()


def expand_cells(cell_w, beta, grid, upto=None):
    """Spread cell weights (G,) over ranks 1..N log-linearly with the local slope of s.

    With ``upto = H`` only ranks 1..H are returned (length H; equal to the
    first H entries of the full expansion): only the cells starting at or
    before H are expanded, so memory and time are O(H + G), not O(N).
    """
    N = grid.N
    H = N if upto is None else min(int(upto), N)
    width = grid.hi - grid.lo + 1
    if np.all(width == 1):
        out = np.zeros(H)
        sel = grid.lo <= H
        out[grid.lo[sel] - 1] = cell_w[sel]
        return out
    spl = BSpline(grid.spline_t, beta, SPLINE_DEGREE, extrapolate=True)
    xm = np.log(0.5 * (grid.lo + grid.hi))
    slope = spl.derivative()(np.clip(xm, 0.0, np.log(N)))
    nc = int(np.searchsorted(grid.lo, H, side="right"))   # cells with lo <= H (lo ascending)
    width = width[:nc]
    cell = np.repeat(np.arange(nc), width)
    R = np.arange(1, int(grid.hi[nc - 1]) + 1, dtype=float)
    logv = slope[cell] * (np.log(R) - xm[cell])
    starts = np.r_[0, np.cumsum(width)[:-1]]
    logv -= np.maximum.reduceat(logv, starts)[cell]
    v = np.exp(logv)
    s = np.add.reduceat(v, starts)
    out = cell_w[cell] * v / s[cell]
    return out if out.size == H else out[:H]
