"""Per-user item counts N_u: binning with a sharp TV bound, and groups of cells sharing a kernel.

See :func:`kernel_groups` and :mod:`sampling_lib.kernels`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scipy import special

from .._validation import check_float, check_scheme
from ._laws import LOG_FACTORIAL_MAX, hypergeom_entries, kernel_columns, kernel_entries

__all__ = [
    "DEFAULT_N_ITEMS_TOL",
    "n_items_tv_bound",
    "n_items_bins",
    "n_items_log_bins",
    "KernelGroup",
    "kernel_groups",
    "cell_kernel",
]


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
        # sum_{i < m} log1p(-d / (N_b - 1 - i)) per entry, entries of equal m together (rows of a block)
        for mj in np.unique(flat_m[flat_d > 0]):
            js = np.flatnonzero((flat_d > 0) & (flat_m == mj))
            i = np.arange(int(mj), dtype=float)
            step = max(1, (1 << 20) // max(1, i.size))
            for a in range(0, js.size, step):
                j = js[a:a + step]
                out[j] = np.sum(np.log1p(-flat_d[j, None] / (flat_b[j, None] - 1.0 - i[None, :])), axis=1)
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
        # a count whose next smaller one is beyond tol from it starts and ends its own bin (the bound
        # grows with N_b - N_u): these are found at once (per-user N of ml-1m's range at tol 1e-4: all)
        alone = np.r_[n_items_tv_bound(vals[1:], vals[:-1], s, scheme) > tol, True]
        i = 0
        while i < vals.size:
            b = vals[i]
            if alone[i]:
                rv[i] = b
                i += 1
                continue
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


def n_items_log_bins(n_items, n, width):
    """Representative N_b of bins of log N_u of width ``width``, within each sample size.

    Item counts with equal ``floor(log(N_u) / width)`` and equal n share a bin;
    its representative is the rounded geometric mean of the bin's smallest and
    largest N_u (so min <= N_b <= max, and |log(N_b / N_u)| <= ``width``).
    Unlike :func:`n_items_bins` this states no bound on the kernels: it is for
    a *surrogate* likelihood that only starts a solver whose convergence test
    uses the exact kernels (the log-spline cells path).

    Parameters
    ----------
    n_items : array_like of int
        N_u.
    n : int or array_like of int
        Sample sizes (same length as ``n_items``, or one int).
    width : float > 0
        Bin width in log N.

    Returns
    -------
    ndarray of int64
        N_b for every entry of ``n_items``.

    Examples
    --------
    >>> n_items_log_bins([1000, 1010, 1100, 5000], 100, 0.05).tolist()
    [1005, 1005, 1100, 5000]
    """
    width = check_float(width, "width", 0.0, low_open=True)
    Nu = np.asarray(n_items, dtype=np.int64)
    nn = np.broadcast_to(np.asarray(n, dtype=np.int64), Nu.shape)
    key = np.floor(np.log(Nu) / width).astype(np.int64)
    _, inv = np.unique(np.stack([nn.ravel(), key.ravel()]), axis=1, return_inverse=True)
    inv = inv.ravel()
    lo = np.full(inv.max(initial=-1) + 1, np.iinfo(np.int64).max)
    hi = np.zeros_like(lo)
    np.minimum.at(lo, inv, Nu.ravel())
    np.maximum.at(hi, inv, Nu.ravel())
    rep = np.clip(np.rint(np.sqrt(lo.astype(float) * hi)).astype(np.int64), lo, hi)
    return rep[inv].reshape(Nu.shape)


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


#: Entries per block of :func:`cell_kernel`'s binomial formula (its temporaries stay in cache).
_KERNEL_BLOCK = 2**16


def cell_kernel(R, n_items, sizes, ranks, scheme="binomial"):
    """P(r_c | R; N_c, n_c) for global ranks R (rows) and cells c = (N_c, n_c, r_c) (columns).

    The per-user model of :func:`kernel_groups`: the entry is 0 where R > N_c
    (the rank lies beyond the cell's candidates). Binomial entries come from
    one vectorized formula over all cells (the element-wise formula of
    :func:`sampling_lib.kernels.log_kernel_rows`); hypergeometric ones per
    distinct (N_c, n_c), from a table of log k! (:func:`sampling_lib.kernels.hypergeom_entries`;
    :func:`sampling_lib.kernels.kernel_entries` for N_c > 10^6). Cost
    O(len(R) x cells), whatever the number of distinct N_c.

    Parameters
    ----------
    R : array_like of int
        Global ranks (e.g. the representative ranks of a compressed grid).
    n_items, sizes, ranks : array_like of int, shape (C,)
        The cells, N_c >= n_c >= 2 and 1 <= r_c <= n_c.
    scheme : {"binomial", "hypergeometric"}

    Returns
    -------
    ndarray, shape (len(R), C)

    Examples
    --------
    >>> from sampling_lib.kernels import kernel
    >>> K = cell_kernel([1, 20, 45], [50, 40], [5, 5], [1, 3])
    >>> bool(np.allclose(K[:2, 0], kernel(50, 5)[[0, 19], 0])), float(K[2, 1])
    (True, 0.0)
    """
    scheme = check_scheme(scheme)
    R = np.asarray(R, dtype=np.int64)
    n_items = np.asarray(n_items, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    ranks = np.asarray(ranks, dtype=np.int64)
    if scheme == "binomial":
        # log p and log(1 - p) once per distinct N_c (p = (R - 1)/(N_c - 1)), gathered per cell;
        # log 0 is stored as -1e300 so that 0 * log 0 = 0 (xlogy) and a positive power of 0 is 0
        uN, inv = np.unique(n_items, return_inverse=True)
        inv = inv.ravel()
        p = (R.astype(float)[:, None] - 1.0) / (uN - 1.0)[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            logp = np.maximum(np.log(p), -1e300)
            log1mp = np.where(p < 1.0, np.maximum(np.log1p(-np.minimum(p, 1.0)), -1e300), -1e300)
        x = ranks - 1.0
        m = sizes - 1.0
        const = -np.log1p(m) - special.betaln(x + 1.0, m - x + 1.0)
        # rows of the transposed tables are gathered (contiguous) and updated in place, in blocks of
        # cells whose temporaries stay in cache; the result is returned as the transpose of a
        # (C, len(R)) array (Fortran order, no copy)
        lpT, l1T = np.ascontiguousarray(logp.T), np.ascontiguousarray(log1mp.T)
        L = np.empty((ranks.size, R.size))
        step = max(1, _KERNEL_BLOCK // max(R.size, 1))
        tmp = np.empty((min(step, ranks.size), R.size))
        for a in range(0, ranks.size, step):
            b = min(a + step, ranks.size)
            blk, t = L[a:b], tmp[: b - a]
            np.take(lpT, inv[a:b], axis=0, out=blk)
            blk *= x[a:b, None]
            np.take(l1T, inv[a:b], axis=0, out=t)
            t *= (m[a:b] - x[a:b])[:, None]
            blk += t
            blk += const[a:b, None]
            np.exp(blk, out=blk)
        # R > N_c: p > 1 and log(1 - p) is -1e300, so the entry is already 0 unless r = n (no
        # (1 - p) factor): only those cells are masked
        last = np.flatnonzero(x == m)
        if last.size:
            L[last] *= R[None, :] <= n_items[last, None]
        return L.T
    # columns of one (N_c, n_c) are built together, as rows of a (C, len(R)) array whose transpose is
    # returned (cells sorted by (N_c, n_c), as RankCounts keeps them, are written in place)
    K = np.zeros((ranks.size, R.size))
    pairs, inv = np.unique(np.stack([n_items, sizes]), axis=1, return_inverse=True)
    inv = inv.ravel()
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(pairs.shape[1] + 1))
    for j in range(pairs.shape[1]):
        Nc, nc = int(pairs[0, j]), int(pairs[1, j])
        sel = order[bounds[j]:bounds[j + 1]]
        keep = np.flatnonzero(R <= Nc)
        if keep.size == R.size and sel[-1] - sel[0] == sel.size - 1 and Nc <= LOG_FACTORIAL_MAX:
            hypergeom_entries(Nc, nc, R, ranks[sel] - 1, out=K[sel[0]:sel[-1] + 1])
        elif Nc <= LOG_FACTORIAL_MAX:
            K[np.ix_(sel, keep)] = hypergeom_entries(Nc, nc, R[keep], ranks[sel] - 1).T
        else:
            K[np.ix_(sel, keep)] = kernel_entries(Nc, nc, R[keep], ranks[sel], scheme).T
    return K.T


