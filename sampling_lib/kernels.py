"""Sampled-rank laws P(r | R): from a global rank R in 1..N to a sampled rank r in 1..n.

A test user's held-out item has global rank R among all N items. Sampling n-1
other items and ranking the held-out item among those n items gives the
sampled rank r = X + 1, where X counts sampled items ranked above it
(KDD20 Sec 2.2):

* with replacement: X ~ Binomial(n-1, (R-1)/(N-1))      (KDD20 eq 6);
* without replacement: X ~ Hypergeometric(N-1, R-1, n-1)  (KDD20 Sec 2.2),
  i.e. n-1 draws from N-1 other items of which R-1 rank above the held-out item.

Kernels are returned as dense float arrays of shape (N, n): row R-1, column
r-1. They are computed in log space from log-beta functions
(log-beta functions for the binomial, accumulated log ratios of successive
probabilities for the hypergeometric, then normalised per row) and filled in row blocks so that temporaries stay small. Functions that only
need a few columns or a pmf-weighted sum (:func:`shr_cdf`,
:func:`sampled_rank_pmf`, :func:`shr_mean_var`) never build the dense matrix,
so they work for N up to 10^6 and beyond.

Compressed kernels (issue 18): :func:`rank_grid` groups the global ranks
beyond the first ``exact_ranks`` into bins whose kernel rows lie within a
stated total variation ``tol`` of the bin's representative row (the bound is
measured exactly by :func:`rank_grid_tv`); the number of bins does not grow
with N, so estimators that run on the grid cost O(G n), G = O(exact_ranks +
sqrt(n) / tol), instead of O(N n).

Per-user candidate counts N_u (users who rank the held-out item among their own
N_u candidates, e.g. the items outside their history): :func:`kernel_groups`
groups cells (N_u, n_u, r) so that kernels are shared, optionally binning N_u
(:func:`n_items_bins`) under the sharp total-variation bound
:func:`n_items_tv_bound`; :func:`kernel_entries` gives P(r | R) for chosen rows
and columns only.

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation.
   KDD 2020, Sec 2.2, eqs 3-6.
.. [TORS24] Li et al. On Item-Sampling Evaluation for Recommender System.
   ACM TORS 2024, eqs 16-18.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import special

from ._validation import (check_array_size, check_float, check_int, check_N_n, check_pmf, check_ranks,
                          check_scheme)

__all__ = [
    "binomial",
    "hypergeometric",
    "kernel",
    "kernel_columns",
    "kernel_entries",
    "DEFAULT_GRID_TOL",
    "GRID_EXACT_RANKS",
    "RankGrid",
    "rank_grid",
    "rank_grid_tv",
    "DEFAULT_N_ITEMS_TOL",
    "n_items_tv_bound",
    "n_items_bins",
    "KernelGroup",
    "kernel_groups",
    "log_kernel_rows",
    "sampled_rank_pmf",
    "expected_shr_curve",
    "shr_cdf",
    "shr_mean_var",
    "shr_hoeffding_bound",
]

_BLOCK_ELEMS = 1 << 21  # ~16 MB of float64 per temporary
_CACHE_ELEMS = 1 << 22  # dense kernels up to 32 MB are cached and reused
# Above this many entries the (N, n) kernel is not requested from the cache by
# kernel_columns: the requested columns are built block-wise instead.
_DENSE_KERNEL_MAX = 1 << 24  # 16M entries = 128 MB of float64


def _log_comb(a, b):
    """log C(a, b) for arrays with 0 <= b <= a; -inf where b < 0 or b > a."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a, b = np.broadcast_arrays(a, b)
    out = np.full(a.shape, -np.inf)
    ok = (b >= 0) & (b <= a)
    # C(a, b) = 1 / ((a + 1) B(b + 1, a - b + 1))
    out[ok] = -np.log1p(a[ok]) - special.betaln(b[ok] + 1.0, a[ok] - b[ok] + 1.0)
    return out


def log_kernel_rows(N, n, R, scheme="binomial"):
    """log P(r | R) for the given global ranks R (rows) and r = 1..n (columns).

    Parameters
    ----------
    N, n : int
        Number of items and sample-set size (held-out item plus n-1 sampled).
    R : array_like of int
        Global ranks in 1..N.
    scheme : {"binomial", "hypergeometric"}
        Sampling with or without replacement.

    Returns
    -------
    ndarray, shape (len(R), n)
        Log-probabilities; ``-inf`` where the probability is exactly 0.
    """
    N, n = check_N_n(N, n)
    check_scheme(scheme)
    R = check_ranks(R, N, name="R", upper_name="N").astype(float)[:, None]
    x = np.arange(n, dtype=float)[None, :]  # x = r - 1 items ranked above
    if scheme == "binomial":
        p = (R - 1.0) / (N - 1.0)
        with np.errstate(divide="ignore"):
            return (
                _log_comb(n - 1.0, x)
                + special.xlogy(x, p)
                + special.xlog1py(n - 1.0 - x, -p)
            )
    # hypergeometric: X ~ Hypergeom(N-1 items, G = R-1 ranked above, d = n-1 draws).
    # Products of ratios P(x)/P(x-1) = (G-x+1)(d-x+1) / (x (B-d+x)), B = N-R, are
    # accumulated in log space from the lower end of the support and each row is
    # normalised by its log-sum-exp. This keeps the relative error at O(n eps)
    # for N up to 10^7, where differences of log-gamma values near N log N
    # would lose about 9 digits.
    G = R - 1.0
    B = N - R
    d = n - 1.0
    lo = np.maximum(0.0, d - B)
    hi = np.minimum(d, G)
    inside = (x >= lo) & (x <= hi)
    step = (x > lo) & inside
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(G - x + 1.0) + np.log(d - x + 1.0) - np.log(x) - np.log(B - d + x)
    logw = np.cumsum(np.where(step, ratio, 0.0), axis=1)
    logw = np.where(inside, logw, -np.inf)
    return logw - special.logsumexp(logw, axis=1, keepdims=True)


def _dense(N, n, scheme):
    check_array_size((N, n), f"the N x n sampling kernel P(r | R) (N={N}, n={n})")
    out = np.empty((N, n))
    step = max(1, _BLOCK_ELEMS // n)
    for start in range(0, N, step):
        R = np.arange(start + 1, min(N, start + step) + 1)
        out[start : start + R.size] = np.exp(log_kernel_rows(N, n, R, scheme))
    return out


def binomial(N, n):
    """P(r | R) under sampling with replacement, shape (N, n) (KDD20 eq 6).

    Row R-1 is the law of r = 1 + Binomial(n-1, (R-1)/(N-1)).

    Examples
    --------
    >>> P = binomial(5, 3)
    >>> P.shape, bool(np.allclose(P.sum(axis=1), 1))
    ((5, 3), True)
    >>> P[0]          # the top item is always ranked first
    array([1., 0., 0.])
    """
    N, n = check_N_n(N, n)
    return _dense(N, n, "binomial")


def hypergeometric(N, n):
    """P(r | R) under sampling without replacement, shape (N, n) (KDD20 Sec 2.2).

    Row R-1 is the law of r = 1 + Hypergeometric(N-1, R-1, n-1).

    Examples
    --------
    >>> P = hypergeometric(4, 4)     # n = N: every item is in the sample
    >>> bool(np.allclose(P, np.eye(4)))
    True
    """
    N, n = check_N_n(N, n)
    return _dense(N, n, "hypergeometric")


@lru_cache(maxsize=8)
def _cached(N, n, scheme):
    K = _dense(N, n, scheme)
    K.setflags(write=False)
    return K


def kernel(N, n, scheme="binomial"):
    """Cached, read-only P(r | R) of shape (N, n) for ``scheme``.

    The cache keeps the 8 most recent (N, n, scheme) kernels; copy before
    modifying (the array is marked read-only).
    """
    N, n = check_N_n(N, n)
    return _cached(N, n, check_scheme(scheme))


def kernel_columns(N, n, ranks, scheme="binomial", *, cache=True):
    """P(r | R) for R = 1..N and the given sampled ranks r: shape (N, len(ranks)).

    The one builder of kernel columns used by the estimators and the
    bootstrap: it slices the cached dense kernel when N n is small enough
    (<= 2**24 entries), else it builds only the requested columns block-wise
    from :func:`log_kernel_rows`, so no (N, n) matrix is kept.

    Parameters
    ----------
    N, n : int
    ranks : array_like of int in 1..n
        Sampled ranks (1-based column indices; repeats allowed).
    scheme : {"binomial", "hypergeometric"}
    cache : bool, default True, keyword-only
        ``False`` never builds (nor caches) the dense kernel: the binomial
        columns are computed directly, the hypergeometric ones from full rows
        in blocks. Use it for many different N (per-user item counts), where
        the small cache would only churn. Both ways give the same numbers (the
        same element-wise formula).

    Examples
    --------
    >>> bool(np.allclose(kernel_columns(30, 5, [1, 5]), binomial(30, 5)[:, [0, 4]]))
    True
    >>> bool(np.array_equal(kernel_columns(30, 5, [2, 4], cache=False), kernel_columns(30, 5, [2, 4])))
    True
    """
    N, n = check_N_n(N, n)
    scheme = check_scheme(scheme)
    cols = check_ranks(ranks, n, name="ranks", upper_name="n") - 1
    if cache and N * n <= _DENSE_KERNEL_MAX:
        return np.ascontiguousarray(_cached(N, n, scheme)[:, cols])
    check_array_size((N, cols.size), f"the kernel columns P(r | R) (N={N}, {cols.size} columns)")
    out = np.empty((N, cols.size))
    if scheme == "binomial":
        # the element-wise formula of log_kernel_rows on the requested columns only
        x = cols.astype(float)[None, :]
        lc = _log_comb(n - 1.0, x)
        step = max(1, _BLOCK_ELEMS // max(1, cols.size))
        for start in range(0, N, step):
            R = np.arange(start + 1, min(N, start + step) + 1, dtype=float)[:, None]
            p = (R - 1.0) / (N - 1.0)
            with np.errstate(divide="ignore"):
                out[start : start + R.size] = np.exp(
                    lc + special.xlogy(x, p) + special.xlog1py(n - 1.0 - x, -p))
        return out
    step = max(1, _BLOCK_ELEMS // n)
    for start in range(0, N, step):
        R = np.arange(start + 1, min(N, start + step) + 1)
        out[start : start + R.size] = np.exp(log_kernel_rows(N, n, R, scheme)[:, cols])
    return out


def kernel_entries(N, n, R, ranks, scheme="binomial"):
    """P(r | R) for the given global ranks R (rows) and sampled ranks r (columns).

    Binomial entries are computed directly (O(len(R) len(ranks)), the
    element-wise formula of :func:`log_kernel_rows`); hypergeometric ones
    from full rows (the accumulated ratios need every column below r).

    Examples
    --------
    >>> bool(np.allclose(kernel_entries(30, 5, [1, 7, 30], [2, 5]), binomial(30, 5)[[0, 6, 29]][:, [1, 4]]))
    True
    """
    N, n = check_N_n(N, n)
    scheme = check_scheme(scheme)
    R = check_ranks(R, N, name="R", upper_name="N").astype(float)[:, None]
    cols = check_ranks(ranks, n, name="ranks", upper_name="n") - 1
    if scheme == "binomial":
        x = cols.astype(float)[None, :]
        p = (R - 1.0) / (N - 1.0)
        with np.errstate(divide="ignore"):
            return np.exp(_log_comb(n - 1.0, x) + special.xlogy(x, p) + special.xlog1py(n - 1.0 - x, -p))
    return np.exp(log_kernel_rows(N, n, R[:, 0].astype(np.int64), scheme)[:, cols])


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
    """TV(P(. | A_i), P(. | B_i)) for paired rank arrays, in blocks."""
    out = np.empty(A.size)
    step = max(1, _BLOCK_ELEMS // n)
    for s in range(0, A.size, step):
        ka = np.exp(log_kernel_rows(N, n, A[s:s + step], scheme))
        kb = np.exp(log_kernel_rows(N, n, B[s:s + step], scheme))
        out[s:s + step] = 0.5 * np.abs(ka - kb).sum(axis=1)
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


# ----------------------------------------------------------------------------
# per-user item counts N_u: groups of cells that share a kernel
# ----------------------------------------------------------------------------
#: Default tolerance of :func:`n_items_bins`: the largest total-variation change of a
#: kernel row allowed when a user's item count N_u is replaced by its bin's N_b.
DEFAULT_N_ITEMS_TOL = 1e-4


def n_items_tv_bound(n_items, representative, n, scheme="binomial"):
    """Sharp bound on the kernel change when N_u items are replaced by N_b >= N_u.

    For every global rank R <= N_u,

        TV( P(. | R; N_u, n), P(. | R; N_b, n) ) <= 1 - a,

        binomial:        a = (1 - eta)^(n-1),  eta = (N_b - N_u) / (N_b - 1),
        hypergeometric:  a = prod_{i=0}^{n-2} (N_u - 1 - i) / (N_b - 1 - i),

    with equality at R = N_u, so the bound cannot be improved uniformly in R.

    Proof (coupling). Add N_b - N_u items below the held-out item: its rank R
    is unchanged, and its sampled rank among n - 1 items drawn from the
    N_b - 1 others follows P(. | R; N_b, n) (KDD20 Sec 2.2). With probability
    ``a`` no draw falls on an added item (``a`` is the chance that n - 1
    uniform draws, with or without replacement, all miss N_b - N_u of the
    N_b - 1 items); given that event, the draws are distributed exactly as
    n - 1 draws from the user's own N_u - 1 items. Hence P(. | R; N_b) =
    a P(. | R; N_u) + (1 - a) Q for some law Q, and the total variation is
    (1 - a) TV(Q, P(. | R; N_u)) <= 1 - a. At R = N_u every one of the user's
    own items ranks above the held-out item, so P(. | N_u; N_u) is the point
    mass at r = n, and P(r = n | N_u; N_b) = a: the bound is attained.

    Consequence used by the estimators: for any rank distribution pi, the law
    of user u's sampled rank, sum_{R <= N_u} pi_R P(r | R), moves by at most
    1 - a in total variation; and for a fixed prior pi, the posterior mean
    E[F(R) | r] of a metric with 0 <= F <= 1 moves by at most 4 (1 - a) in
    expectation over r (tests/test_peruser.py checks both by enumeration).

    Parameters
    ----------
    n_items, representative : array_like of int
        N_u and N_b (N_b >= N_u >= n), broadcast together.
    n : int or array_like of int
        Sample-set size (held-out item included).
    scheme : {"binomial", "hypergeometric"}

    Returns
    -------
    ndarray of float
        The bound 1 - a (0 where N_b = N_u).

    Examples
    --------
    >>> float(n_items_tv_bound(1000, 1000, 100))
    0.0
    >>> round(float(n_items_tv_bound(999_990, 1_000_000, 100)), 8)    # about (n - 1) eta
    0.00098952
    """
    check_scheme(scheme)
    Nu, Nb, nn = np.broadcast_arrays(np.asarray(n_items, dtype=np.int64),
                                     np.asarray(representative, dtype=np.int64),
                                     np.asarray(n, dtype=np.int64))
    if np.any(Nb < Nu):
        raise ValueError("representative must be >= n_items (N_b >= N_u)")
    if np.any(nn < 2) or np.any(nn > Nu):
        raise ValueError(f"n must lie in 2..n_items; got n in {int(nn.min())}..{int(nn.max())}, "
                         f"min n_items {int(Nu.min())}")
    m = (nn - 1).astype(float)
    d = (Nb - Nu).astype(float)
    if scheme == "binomial":
        loga = m * np.log1p(-d / (Nb - 1.0))
    else:
        loga = np.zeros(Nu.shape)
        flat_d, flat_b, flat_m = d.ravel(), Nb.ravel().astype(float), m.ravel()
        out = loga.ravel()
        for j in np.flatnonzero(flat_d > 0):
            i = np.arange(int(flat_m[j]), dtype=float)
            out[j] = np.sum(np.log1p(-flat_d[j] / (flat_b[j] - 1.0 - i)))
        loga = out.reshape(Nu.shape)
    return -np.expm1(loga)


def n_items_bins(n_items, n, tol=DEFAULT_N_ITEMS_TOL, scheme="binomial"):
    """Bin representative N_b of every per-user item count N_u (kernel sharing).

    Within each sample size, the distinct item counts are taken from the
    largest down; a bin starts at its largest count N_b (the representative)
    and takes every smaller count N_u with :func:`n_items_tv_bound`
    (N_u, N_b, n) <= ``tol``. Every kernel row of every user in a bin is then
    within ``tol`` in total variation of the user's exact row (rows R <= N_u;
    the estimators keep each user's own support 1..N_u exactly).

    Parameters
    ----------
    n_items : array_like of int
        N_u (one per user or per cell).
    n : int or array_like of int
        Sample sizes (same length as ``n_items``, or one int).
    tol : float in [0, 1), default :data:`DEFAULT_N_ITEMS_TOL`
        0 keeps every distinct N_u in a bin of its own (exact).
    scheme : {"binomial", "hypergeometric"}

    Returns
    -------
    ndarray of int64
        N_b for every entry of ``n_items``.

    Examples
    --------
    >>> n_items_bins([1_000_000, 999_995, 999_000, 1000], 100, tol=1e-3).tolist()
    [1000000, 1000000, 999000, 1000]
    >>> n_items_bins([1000, 999], 100, tol=0).tolist()
    [1000, 999]
    """
    tol = check_float(tol, "n_items_tol", 0.0, 1.0, high_open=True)
    check_scheme(scheme)
    Nu = np.asarray(n_items, dtype=np.int64)
    nn = np.broadcast_to(np.asarray(n, dtype=np.int64), Nu.shape)
    if tol == 0.0:
        return Nu.copy()
    rep = np.empty_like(Nu)
    for s in np.unique(nn):
        sel = nn == s
        vals = np.unique(Nu[sel])[::-1]          # descending
        rv = np.empty_like(vals)
        i = 0
        while i < vals.size:
            b = vals[i]
            lo, hi = i, vals.size - 1           # largest j with bound(vals[j], b) <= tol
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if n_items_tv_bound(vals[mid], b, s, scheme) <= tol:
                    lo = mid
                else:
                    hi = mid - 1
            rv[i : lo + 1] = b
            i = lo + 1
        rep[sel] = rv[vals.size - 1 - np.searchsorted(vals[::-1], Nu[sel])]
    return rep


@dataclass(frozen=True)
class KernelGroup:
    """Cells (N_u, n, r) that share one kernel P(r | R; N_b, n) (see :func:`kernel_groups`).

    Attributes
    ----------
    n_items : int
        N_b, the item count of the shared kernel (the bin representative).
    size : int
        Sample size n of every cell of the group.
    ranks : ndarray of int
        The distinct sampled ranks of the group (columns of ``K``).
    K : ndarray, shape (N_b, len(ranks))
        Kernel columns P(r | R; N_b, n), R = 1..N_b.
    cells : ndarray of int
        Indices of the group's cells in the input arrays.
    col : ndarray of int
        Column of ``K`` of every cell.
    end : ndarray of int
        Every cell's own item count N_u <= N_b: the cell's kernel is
        ``K[:N_u, col]`` (rows beyond N_u are 0).
    bound : float
        Largest :func:`n_items_tv_bound` of the group's cells (0 when exact).
    """

    n_items: int
    size: int
    ranks: np.ndarray
    K: np.ndarray
    cells: np.ndarray
    col: np.ndarray
    end: np.ndarray
    bound: float

    @property
    def exact(self) -> bool:
        """Every cell has N_u = N_b (the kernel is the cells' own)."""
        return bool(np.all(self.end == self.n_items))


def kernel_groups(n_items, sizes, ranks, scheme="binomial", *, tol=0.0):
    """Group cells (N_u, n_u, r) by (bin of N_u, n_u) so that kernels are shared.

    The per-user model (sampling-lab; KDD20 Sec 2.2 applied per user): user u
    ranks the held-out item among its own N_u candidates (global rank R_u in
    1..N_u) and r_u - 1 ~ Binomial(n_u - 1, (R_u - 1)/(N_u - 1)), or the
    hypergeometric analogue. The estimand pools users: P(R) on
    1..max N_u, and user u's kernel is P(r | R; N_u, n_u) for R <= N_u and 0
    beyond. Cells with the same (N_u, n_u) share their kernel exactly; with
    ``tol > 0`` the item counts are binned (:func:`n_items_bins`): the cells
    of a bin use the kernel values of N_b (within ``tol`` in total variation
    row by row, :func:`n_items_tv_bound`) and keep their own support R <= N_u.

    Parameters
    ----------
    n_items, sizes, ranks : array_like of int, same length (the cells)
        N_u >= n_u >= 2 and 1 <= r <= n_u.
    scheme : {"binomial", "hypergeometric"}
    tol : float in [0, 1), keyword-only
        Bin tolerance; 0 (default) groups equal N_u only (exact).

    Returns
    -------
    list of KernelGroup
        Sorted by (n, N_b); every cell is in exactly one group.

    Examples
    --------
    >>> g = kernel_groups([50, 50, 40], [5, 5, 5], [1, 3, 3])
    >>> [(x.n_items, x.ranks.tolist(), x.cells.tolist()) for x in g]
    [(40, [3], [2]), (50, [1, 3], [0, 1])]
    """
    check_scheme(scheme)
    Nu = np.asarray(n_items, dtype=np.int64)
    nn = np.asarray(sizes, dtype=np.int64)
    r = np.asarray(ranks, dtype=np.int64)
    if not (Nu.shape == nn.shape == r.shape) or Nu.ndim != 1:
        raise ValueError(f"n_items, sizes and ranks must be 1-D of equal length; got shapes "
                         f"{Nu.shape}, {nn.shape}, {r.shape}")
    if Nu.size and (nn.min() < 2 or np.any(nn > Nu) or r.min() < 1 or np.any(r > nn)):
        raise ValueError("cells must satisfy N_u >= n_u >= 2 and 1 <= r <= n_u")
    rep = n_items_bins(Nu, nn, tol, scheme)
    order = np.lexsort((rep, nn))
    keys = np.stack([nn[order], rep[order]])
    starts = np.flatnonzero(np.r_[True, np.any(keys[:, 1:] != keys[:, :-1], axis=0)])
    few = starts.size <= 2
    out = []
    for a, b in zip(starts, np.r_[starts[1:], order.size]):
        cells = np.sort(order[a:b])
        s, Nb = int(nn[cells[0]]), int(rep[cells[0]])
        ur, col = np.unique(r[cells], return_inverse=True)
        K = kernel_columns(Nb, s, ur, scheme, cache=few)
        end = Nu[cells]
        bound = float(n_items_tv_bound(end, Nb, s, scheme).max()) if np.any(end != Nb) else 0.0
        out.append(KernelGroup(n_items=Nb, size=s, ranks=ur, K=K, cells=cells,
                               col=col.astype(np.int64), end=end, bound=bound))
    return out


def _support_rows(pmf):
    R = np.flatnonzero(pmf > 0) + 1
    return R, pmf[R - 1]


def sampled_rank_pmf(pmf, n, scheme="binomial"):
    """P(r) = sum_R P(R) P(r | R) for r = 1..n (AAAI21 eq 18, TORS24 eq 18).

    Small problems (N n <= 2^22) reuse the cached dense kernel; larger ones are
    computed block-wise over the support of ``pmf`` without forming the (N, n)
    matrix.

    Examples
    --------
    Uniform global ranks give exactly uniform sampled ranks without replacement
    (the held-out item is a uniformly placed member of a uniform n-subset):

    >>> sampled_rank_pmf(np.full(10, 0.1), 4, "hypergeometric").round(12)
    array([0.25, 0.25, 0.25, 0.25])
    """
    pmf = check_pmf(pmf)
    N = pmf.size
    N, n = check_N_n(N, n)
    check_scheme(scheme)
    if N * n <= _CACHE_ELEMS:  # small enough: reuse the cached dense kernel
        return pmf @ _cached(N, n, scheme)
    R, w = _support_rows(pmf)
    out = np.zeros(n)
    step = max(1, _BLOCK_ELEMS // n)
    for s in range(0, R.size, step):
        out += w[s : s + step] @ np.exp(log_kernel_rows(N, n, R[s : s + step], scheme))
    return out


def expected_shr_curve(pmf, n, scheme="binomial"):
    """E[SHR@k] for k = 1..n: the CDF of the sampled rank (KDD20 eq 4).

    E[SHR@k] = sum_R W_R Pr(r <= k | R) = sum_{r <= k} P(r).

    Examples
    --------
    >>> expected_shr_curve([0.5, 0.5], 2).tolist()   # N = n = 2: sampled = global
    [0.5, 1.0]
    """
    return np.minimum(np.cumsum(sampled_rank_pmf(pmf, n, scheme)), 1.0)


def shr_cdf(N, n, k, scheme="binomial", R=None):
    """Pr(r <= k | R): the chance that rank R is a sampled top-k hit (KDD20 eqs 4-6).

    Parameters
    ----------
    N, n : int
    k : int or array_like of int in 1..n
    scheme : {"binomial", "hypergeometric"}
    R : array_like of int in 1..N, optional
        Global ranks (default 1..N).

    Returns
    -------
    ndarray, shape (len(R), len(k)) (squeezed to 1-D if k is a scalar)

    Examples
    --------
    >>> shr_cdf(101, 11, 1, R=[1, 51, 101]).tolist()   # (1/2)^10 for the median item
    [1.0, 0.0009765625, 0.0]
    """
    N, n = check_N_n(N, n)
    check_scheme(scheme)
    scalar = np.ndim(k) == 0
    k = check_ranks(np.atleast_1d(k), n, name="k", upper_name="n")
    R = np.arange(1, N + 1) if R is None else check_ranks(R, N, name="R", upper_name="N")
    Rc = R[:, None]
    from scipy import stats   # lazy: scipy.stats costs ~0.7 s of every process's import of sampling_lib

    if scheme == "binomial":
        out = stats.binom.cdf(k[None, :] - 1, n - 1, (Rc - 1) / (N - 1))
    else:
        out = stats.hypergeom.cdf(k[None, :] - 1, N - 1, Rc - 1, n - 1)
    out = np.clip(out, 0.0, 1.0)
    return out[:, 0] if scalar else out


def shr_mean_var(pmf, n, k, M, scheme="binomial"):
    """Mean and variance of the sampled hit ratio SHR@k (KDD20 eqs 4-5).

    For a fixed set of M users whose global ranks have empirical distribution
    W_R = ``pmf``, each user's sampled rank is drawn independently and

    E[SHR@k] = sum_R W_R p^R(k),   Var[SHR@k] = (1/M) sum_R W_R p^R(k) (1 - p^R(k)),

    with p^R(k) = Pr(r <= k | R).

    Returns
    -------
    mean, var : ndarray of shape (len(k),)

    Examples
    --------
    >>> m, v = shr_mean_var(np.full(10, 0.1), 4, [1, 4], M=100, scheme="hypergeometric")
    >>> m.round(12).tolist(), v.round(8).tolist()
    ([0.25, 1.0], [0.00080867, 0.0])
    """
    pmf = check_pmf(pmf)
    N, n = check_N_n(pmf.size, n)
    M = check_int(M, "M", low=1)
    k = check_ranks(np.atleast_1d(k), n, name="k", upper_name="n")
    R, w = _support_rows(pmf)
    mean = np.zeros(k.size)
    second = np.zeros(k.size)
    step = max(1, _BLOCK_ELEMS // max(1, k.size))
    for s in range(0, R.size, step):
        p = shr_cdf(N, n, k, scheme, R=R[s : s + step])
        mean += w[s : s + step] @ p
        second += w[s : s + step] @ (p * (1.0 - p))
    return mean, second / M


def shr_hoeffding_bound(M, t):
    """Hoeffding bound Pr(|SHR@k - E[SHR@k]| >= t) <= 2 exp(-2 M t^2) (KDD20 Sec 2.4).

    Examples
    --------
    >>> round(shr_hoeffding_bound(30_000, 0.01), 5)   # KDD20's example: about 0.005
    0.00496
    """
    M = check_int(M, "M", low=1)
    t = check_float(t, "t", low=0.0, low_open=True)
    return float(min(1.0, 2.0 * np.exp(-2.0 * M * t * t)))
