"""The compressed rank grid: bins of global ranks whose kernel rows lie within a stated TV.

See :func:`rank_grid` and :mod:`sampling_lib.kernels`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .._validation import check_array_size, check_float, check_int, check_N_n, check_scheme
from ._laws import (BLOCK_ELEMS, LOG_FACTORIAL_MAX, WINDOW_MIN_N, kernel_entries, kernel_windows, log_kernel_rows,
                    window_pmf)

__all__ = [
    "DEFAULT_GRID_TOL",
    "GRID_EXACT_RANKS",
    "RankGrid",
    "rank_grid",
    "rank_grid_tv",
    "em_grid",
]


# ----------------------------------------------------------------------------
# compressed rank grid: bins of global ranks with nearly equal kernel rows
# ----------------------------------------------------------------------------
#: Default total-variation tolerance of :func:`rank_grid` used by the estimators of the
#: registry (``grid_tol``): every kernel row of a bin is within this TV of the bin's row.
DEFAULT_GRID_TOL = 0.02
#: Global ranks 1..GRID_EXACT_RANKS are bins of their own by default.
GRID_EXACT_RANKS = 256


@dataclass(frozen=True)
class RankGrid:
    """Bins of global ranks sharing one representative kernel row (:func:`rank_grid`).

    Attributes
    ----------
    N, n : int
        Number of items and sample-set size of the kernel.
    scheme : str
    lo, hi : ndarray of int64, shape (G,)
        First and last global rank of each bin (bins partition 1..N in order).
    rep : ndarray of int64, shape (G,)
        Representative rank of each bin (lo <= rep <= hi); the bin's kernel row
        is P(. | rep).
    size : ndarray of int64, shape (G,)
        Number of ranks in each bin (hi - lo + 1).
    tol : float
        Requested bound (0: every rank is a bin).
    bound : ndarray of float, shape (G,)
        Exact max_{lo <= R <= hi} TV(P(. | R), P(. | rep)) per bin
        (:func:`rank_grid_tv`); ``bound.max() <= tol``.
    """

    N: int
    n: int
    scheme: str
    lo: np.ndarray
    hi: np.ndarray
    rep: np.ndarray
    size: np.ndarray
    tol: float
    bound: np.ndarray

    @property
    def exact(self) -> bool:
        """Every bin holds one rank (the grid is the exact N x n kernel)."""
        return bool(self.lo.size == self.N)

    @property
    def starts(self):
        """Index of each bin's first rank in 0..N-1 (for ``np.add.reduceat``)."""
        return self.lo - 1

    def kernel(self):
        """Representative kernel rows P(r | rep), shape (G, n)."""
        return np.exp(log_kernel_rows(self.N, self.n, self.rep, self.scheme))

    def columns(self, ranks):
        """Representative kernel columns P(r | rep) for sampled ranks ``ranks``, shape (G, k)."""
        return kernel_entries(self.N, self.n, self.rep, ranks, self.scheme)

    def bin_sums(self, v):
        """Sums of ``v`` (..., N) over each bin: shape (..., G)."""
        return np.add.reduceat(np.asarray(v, dtype=float), self.starts, axis=-1)

    def expand(self, atoms, within=None):
        """Spread bin masses (..., G) over ranks 1..N, shape (..., N).

        ``within`` (length N, >= 0) gives the proportions inside each bin (the
        shape an EM started from ``within`` keeps, since the rows of a bin are
        equal on the grid); default uniform. A bin whose ``within`` mass is 0
        is spread uniformly.
        """
        atoms = np.asarray(atoms, dtype=float)
        check_array_size(atoms.shape[:-1] + (int(self.size.sum()),),
                         f"the weights expanded from the rank grid to every rank (N={int(self.size.sum())})")
        if within is None:
            return np.repeat(atoms / self.size, self.size, axis=-1)
        within = np.asarray(within, dtype=float)
        tot = self.bin_sums(within)
        share = np.where(np.repeat(tot, self.size) > 0,
                         within / np.repeat(np.where(tot > 0, tot, 1.0), self.size),
                         np.repeat(1.0 / self.size, self.size))
        return np.repeat(atoms, self.size, axis=-1) * share

    def bin_average(self, F, within=None):
        """Average of F (N, ...) over each bin (weights ``within``, default uniform): (G, ...)."""
        F = np.asarray(F, dtype=float)
        if within is None:
            S = np.add.reduceat(F, self.starts, axis=0)
            return S / self.size.reshape((-1,) + (1,) * (F.ndim - 1))
        share = self.expand(np.ones(self.lo.size), within)
        S = np.add.reduceat(F * share.reshape((-1,) + (1,) * (F.ndim - 1)), self.starts, axis=0)
        return S


def _tv_rows(N, n, A, B, scheme):
    """TV(P(. | A_i), P(. | B_i)) for paired rank arrays, in blocks.

    Where the table of log k! serves (:data:`~sampling_lib.kernels.LOG_FACTORIAL_MAX`), only the
    union of the two rows' Bernstein windows (:func:`~sampling_lib.kernels.kernel_windows`, all
    but 1.2e-18 of each row's mass) is summed: O(sqrt(n)) terms per row instead of n (n = 4,096:
    a grid's bounds in 0.3 s instead of 4 s); the TV is exact to 2.4e-18, the table's terms to
    about 1e-15 N log N relative. Below n = :data:`~sampling_lib.kernels.WINDOW_MIN_N` whole rows
    cost little and keep the row form's precision."""
    if n >= WINDOW_MIN_N and (N if scheme == "hypergeometric" else n) <= LOG_FACTORIAL_MAX:
        return _tv_windows(N, n, A, B, scheme)
    out = np.empty(A.size)
    step = max(1, BLOCK_ELEMS // n)
    for s in range(0, A.size, step):
        ka = np.exp(log_kernel_rows(N, n, A[s:s + step], scheme))
        kb = np.exp(log_kernel_rows(N, n, B[s:s + step], scheme))
        out[s:s + step] = 0.5 * np.abs(ka - kb).sum(axis=1)
    return out


def _tv_windows(N, n, A, B, scheme):
    """:func:`_tv_rows` on the union of the rows' Bernstein windows."""
    fa, la = kernel_windows(N, n, A, scheme)
    fb, lb = kernel_windows(N, n, B, scheme)
    first, last = np.minimum(fa, fb), np.maximum(la, lb)
    out = np.empty(A.size)
    step = max(1, BLOCK_ELEMS // max(1, int(np.max(last - first, initial=0)) + 1))
    for s in range(0, A.size, step):
        e = slice(s, s + step)
        width = int(np.max(last[e] - first[e])) + 1
        out[e] = 0.5 * np.abs(window_pmf(N, n, A[e], first[e], width, scheme)
                              - window_pmf(N, n, B[e], first[e], width, scheme)).sum(axis=1)
    return out


def rank_grid_tv(N, n, lo, hi, rep, scheme="binomial"):
    """Exact per-bin bound max_{lo <= R <= hi} TV(P(. | R), P(. | rep)) from two rows per bin.

    Both kernels are families with a monotone likelihood ratio in R (the
    binomial in p = (R-1)/(N-1); the hypergeometric in the number R-1 of items
    ranked above), hence stochastically ordered. For such a family the
    total variation TV(P_a, P_b) = max_t (F_a(t) - F_b(t)) (a < b; the
    optimal set is an upper set) is nondecreasing in b >= a and nonincreasing
    in a <= b, so the maximum over a bin is attained at one of its ends:
    max(TV(P_lo, P_rep), TV(P_hi, P_rep)). O(G n); tests check it against
    all rows by enumeration.

    Returns
    -------
    ndarray, shape (G,)
    """
    N, n = check_N_n(N, n)
    scheme = check_scheme(scheme)
    lo, hi, rep = (np.asarray(x, dtype=np.int64) for x in (lo, hi, rep))
    out = np.zeros(lo.size)
    wide = np.flatnonzero(hi > lo)
    if wide.size:
        a = _tv_rows(N, n, lo[wide], rep[wide], scheme)
        b = _tv_rows(N, n, hi[wide], rep[wide], scheme)
        out[wide] = np.maximum(a, b)
    return out


def _grid_edges(N, n, head, angle, log_width):
    """Bins (lo, hi) of 1..N: ranks 1..head alone, then edges equally spaced in
    theta = arcsin(sqrt((R-1)/(N-1))) (width ``angle``) and, if ``log_width``, in log R."""
    if N <= head:
        lo = np.arange(1, N + 1, dtype=np.int64)
        return lo, lo.copy()
    a = head + 0.5
    parts = [np.array([a, N + 0.5])]
    if log_width is not None:
        k = int(np.ceil(np.log(N / a) / log_width))
        parts.append(a * np.exp(np.linspace(0.0, np.log((N + 0.5) / a), k + 1)))
    if angle is not None:
        th = lambda R: np.arcsin(np.sqrt(np.clip((R - 1.0) / (N - 1.0), 0.0, 1.0)))  # noqa: E731
        t0, t1 = th(a), th(N + 0.5)
        k2 = int(np.ceil((t1 - t0) / angle))
        parts.append(1.0 + (N - 1.0) * np.sin(np.linspace(t0, t1, k2 + 1)) ** 2)
    e = np.unique(np.floor(np.concatenate(parts) + 0.5).astype(np.int64))
    e = e[(e > head) & (e <= N + 1)]
    starts = np.unique(np.r_[head + 1, e])
    starts = starts[starts <= N]
    ends = np.r_[starts[1:] - 1, N]
    lo = np.r_[np.arange(1, head + 1), starts].astype(np.int64)
    hi = np.r_[np.arange(1, head + 1), ends].astype(np.int64)
    return lo, hi


def rank_grid(N, n, *, scheme="binomial", tol=DEFAULT_GRID_TOL, exact_ranks=GRID_EXACT_RANKS,
              log_width=None):
    """Compressed grid of global ranks: bins whose kernel rows are within ``tol`` in TV.

    Global ranks 1..``exact_ranks`` are bins of their own. Beyond, the ranks
    are cut into bins of equal width ``tol / sqrt(n - 1)`` in the binomial's
    variance-stabilising angle theta(R) = arcsin(sqrt((R-1)/(N-1))) (and, if
    ``log_width`` is given, of width at most ``log_width`` in log R), each
    represented by its integer midpoint ``rep`` = (lo + hi) // 2. Every bin
    then satisfies the **stated bound**

        max_{lo <= R <= hi} TV( P(. | R), P(. | rep) ) <= tol,

    measured exactly by :func:`rank_grid_tv` (returned as ``bound``); a bin
    above ``tol`` (possible for the hypergeometric kernel, or by the rounding
    of the edges to integers) is halved until it is not.

    Why the angle (binomial kernel, AAAI21 eq 16 / TORS24 eq 29: r - 1 ~
    Binomial(m, p), m = n - 1). The Bhattacharyya coefficient of two
    Bernoulli laws is sqrt(p1 p2) + sqrt((1-p1)(1-p2)) = cos(theta1 -
    theta2), that of the product of m of them cos^m; the binomial count is a
    function of the product sample, so by Le Cam's inequality
    TV(Bin(m, p1), Bin(m, p2)) <= sqrt(1 - cos^(2m)(d)) <= sqrt(m) |sin d|
    <= sqrt(m) d, d = |theta1 - theta2| (Bernoulli's inequality). A bin no
    wider than tol / sqrt(m) in theta thus has every row within ``tol`` of
    its representative, and the number of bins is at most
    ``exact_ranks + (pi/2) sqrt(n-1) / tol`` (+ log(N / exact_ranks) /
    ``log_width``): bounded in N.

    What the bound gives the estimators (TORS24 eq 31, AAAI21 eq 18). Let
    K' be the kernel with every row of a bin replaced by its
    representative row. For **every** rank distribution pi, the predicted
    sampled-rank laws q = pi K and q' = pi K' satisfy
    TV(q, q') <= sum_R pi_R TV(K_R, K'_R) <= tol (convexity of TV). Since
    the rows of K' are equal inside a bin, the mixture model with K' only
    sees bin masses: EM, MES, BV and MN on K' are exactly these estimators
    on the (G, n) grid with multiplicities ``size`` (see the estimators).

    Parameters
    ----------
    N, n : int
    scheme : {"binomial", "hypergeometric"}, keyword-only
    tol : float in [0, 1), keyword-only, default :data:`DEFAULT_GRID_TOL`
        TV bound per row; 0 (or None) returns the exact grid (every rank a bin).
    exact_ranks : int >= 1, keyword-only, default :data:`GRID_EXACT_RANKS`
        Ranks 1..exact_ranks are bins of their own (exact rows for the
        ranks top-K metrics weigh).
    log_width : float > 0, optional, keyword-only
        Also cap the bin width in log R (the log-spline prior is smooth in
        log R and uses 0.05).

    Returns
    -------
    RankGrid

    References
    ----------
    KDD20 eq 6 and Sec 2.2 (the kernels); AAAI21 eqs 16-18 and TORS24 eqs
    29-31 (the mixture model on which the bound acts).

    Examples
    --------
    >>> g = rank_grid(10**6, 100, tol=1e-2)
    >>> g.lo.size < 2000, bool(g.bound.max() <= 1e-2), int(g.size.sum())
    (True, True, 1000000)
    >>> [rank_grid(N, 100, tol=1e-2).lo.size for N in (10**6, 10**8)]   # bounded in N
    [1805, 1819]
    >>> rank_grid(300, 10, tol=0).exact
    True
    """
    N, n = check_N_n(N, n)
    scheme = check_scheme(scheme)
    tol = 0.0 if tol is None else check_float(tol, "grid_tol", 0.0, 1.0, high_open=True)
    exact_ranks = check_int(exact_ranks, "exact_ranks", low=1)
    if log_width is not None:
        log_width = check_float(log_width, "log_width", low=0.0, low_open=True)
    if tol == 0.0:
        lo = np.arange(1, N + 1, dtype=np.int64)
        return RankGrid(N, n, scheme, lo, lo.copy(), lo.copy(), np.ones(N, dtype=np.int64), 0.0,
                        np.zeros(N))
    angle = tol / np.sqrt(n - 1.0)
    lo, hi = _grid_edges(N, n, min(N, exact_ranks), angle, log_width)
    rep = (lo + hi) // 2
    bound = rank_grid_tv(N, n, lo, hi, rep, scheme)
    while np.any(bound > tol):
        bad = bound > tol
        cut = (lo[bad] + hi[bad]) // 2          # halve: [lo, cut], [cut + 1, hi]
        lo = np.sort(np.r_[lo, cut + 1])
        hi = np.r_[lo[1:] - 1, N]
        rep = (lo + hi) // 2
        bound = rank_grid_tv(N, n, lo, hi, rep, scheme)
    return RankGrid(N, n, scheme, lo, hi, rep, hi - lo + 1, tol, bound)


@lru_cache(maxsize=16)
def _grid_kernel(N, n, scheme, tol):
    """(RankGrid, its (G, n) representative kernel rows, read-only), cached."""
    g = rank_grid(N, n, scheme=scheme, tol=tol)
    K = g.kernel()
    K.setflags(write=False)
    return g, K


def em_grid(N, n, scheme, grid_tol):
    """The compressed grid of (N, n) for an estimator option ``grid_tol``, or None (exact).

    Returns ``(grid, K)``: the :class:`RankGrid` and its (G, n) representative
    kernel rows (read-only, cached for the 16 most recent (N, n, scheme,
    tol)). None when ``grid_tol`` is 0/None or when the grid would hold every
    rank (N <= its exact head): then the estimators run on the exact N x n
    kernel, bit for bit as without the option. Shared by every estimator with
    a ``grid_tol`` option (MLE, WMLE, MES, CLS, BV/MN with a fitted prior).

    Examples
    --------
    >>> g, K = em_grid(10**6, 100, "binomial", 0.02)
    >>> K.shape == (g.lo.size, 100), em_grid(200, 10, "binomial", 0.02)
    (True, None)
    """
    if grid_tol is None or grid_tol == 0:
        return None
    g, K = _grid_kernel(int(N), int(n), scheme, float(check_float(grid_tol, "grid_tol", 0.0, 1.0,
                                                                    high_open=True)))
    return None if g.exact else (g, K)
