"""Sampled-rank laws P(r | R): dense kernels, columns, entries and windows (the sampled hit ratio that
follows from them is in :mod:`sampling_lib.kernels._shr`).

See :mod:`sampling_lib.kernels` for the model (KDD20 Sec 2.2, eq 6).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import special

from .._validation import check_array_size, check_int, check_N_n, check_ranks, check_scheme

__all__ = [
    "log_kernel_rows",
    "log_hypergeom_pmf",
    "binomial",
    "hypergeometric",
    "kernel",
    "kernel_columns",
    "kernel_entries",
    "hypergeom_entries",
    "hypergeom_rows",
    "kernels_ascending",
    "kernel_bin_masses",
    "kernel_windows",
    "window_pmf",
    "log_binom_window",
    "log_hypergeom_window",
    "LOG_FACTORIAL_MAX",
    "WINDOW_MIN_N",
    "log_factorials",
]

#: Elements (float64) per temporary block of the kernel builders (~16 MB); shared with the grid module.
BLOCK_ELEMS = 1 << 21
_CACHE_ELEMS = 1 << 22  # dense kernels up to 32 MB are cached and reused
# Above this many entries the (N, n) kernel is not requested from the cache by
# kernel_columns: the requested columns are built block-wise instead.
_DENSE_KERNEL_MAX = 1 << 24  # 16M entries = 128 MB of float64


def log_comb(a, b):
    """log C(a, b) for arrays with 0 <= b <= a; -inf where b < 0 or b > a."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a, b = np.broadcast_arrays(a, b)
    out = np.full(a.shape, -np.inf)
    ok = (b >= 0) & (b <= a)
    # C(a, b) = 1 / ((a + 1) B(b + 1, a - b + 1))
    out[ok] = -np.log1p(a[ok]) - special.betaln(b[ok] + 1.0, a[ok] - b[ok] + 1.0)
    return out


def log_hypergeom_pmf(x, good, bad, m):
    """log P(X = x), X ~ Hypergeometric(good + bad items, good of them, m drawn): log C(good, x) C(bad, m - x)
    / C(good + bad, m), broadcast; -inf off the support. Far faster than scipy's exact ``hypergeom.pmf``
    (~1 s per 10^5 entries at N = 10^5) and within ~1e-9 relative of it."""
    with np.errstate(invalid="ignore"):
        return log_comb(good, x) + log_comb(bad, m - x) - log_comb(good + bad, m)


def _log_binomial(n, x, p):
    """log Binomial(x; n - 1, p) for rows p (k, 1) and columns x (1, c).

    x log p + (n-1-x) log(1-p) with the two logarithms taken once per row (not
    per entry, as ``xlogy`` / ``xlog1py`` would: 2 k c logarithms); rows with
    p = 0 or 1 take their convention 0 log 0 = 0. The one binomial formula of
    :func:`log_kernel_rows` and :func:`kernel_entries`, so the two agree to the bit.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        out = log_comb(n - 1.0, x) + x * np.log(p) + (n - 1.0 - x) * np.log1p(-p)
        edge = ((p == 0.0) | (p == 1.0)).ravel()
        if edge.any():
            pe = p[edge]
            out[edge] = log_comb(n - 1.0, x) + special.xlogy(x, pe) + special.xlog1py(n - 1.0 - x, -pe)
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
        return _log_binomial(n, x, (R - 1.0) / (N - 1.0))
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
    # one logarithm per entry, of the ratio (three roundings of its exact integer factors below 2^53 up to
    # N = 10^7: the same eps-level error per term as the four logarithms it replaced)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(((G - x + 1.0) * (d - x + 1.0)) / (x * (B - d + x)))
    logw = np.cumsum(np.where(step, ratio, 0.0), axis=1)
    logw[~inside] = -np.inf
    # each row's log-sum-exp: its largest term is finite (0 at the support's lower end, or more)
    top = logw.max(axis=1, keepdims=True)
    logw -= top + np.log(np.exp(logw - top).sum(axis=1, keepdims=True))
    return logw


def _dense(N, n, scheme):
    check_array_size((N, n), f"the N x n sampling kernel P(r | R) (N={N}, n={n})")
    out = np.empty((N, n))
    step = max(1, BLOCK_ELEMS // n)
    for start in range(0, N, step):
        R = np.arange(start + 1, min(N, start + step) + 1)
        if scheme == "hypergeometric":
            out[start : start + R.size] = hypergeom_rows(N, n, R)
        else:
            out[start : start + R.size] = np.exp(log_kernel_rows(N, n, R, scheme))
    return out


def hypergeom_rows(N, n, R):
    """P(r | R) without replacement for r = 1..n, rows R: the products of successive ratios from each
    row's mode, normalised.

    The same recurrence as :func:`log_kernel_rows` (P(x + 1) / P(x) = (G - x)(d - x) / ((x + 1)(B -
    d + x + 1)), G = R - 1, B = N - R, d = n - 1, X = r - 1), in linear space: from the mode
    m = floor((d + 1)(G + 1) / (N + 1)) the ratios are multiplied outwards (cumulative products of
    factors <= 1 on either side, so nothing overflows and terms below the double range are 0), and
    each row is divided by its sum. Relative error O(n eps), as the log form, without its four
    logarithms per entry and log-sum-exp (the dense kernel of N = 3,706, n = 100 in 4 ms instead
    of 50 ms; per-user N_u builds one per distinct N_u).

    Examples
    --------
    >>> bool(np.allclose(hypergeom_rows(40, 6, [1, 17, 40]), np.exp(log_kernel_rows(40, 6, [1, 17, 40], "hypergeometric"))))
    True
    """
    R = np.asarray(R, dtype=np.int64)
    d = n - 1
    out = np.empty((R.size, n))
    x = np.arange(n - 1, dtype=float)[None, :]            # the ratio from x to x + 1
    dx, x1 = d - x, x + 1.0
    step = max(1, (1 << 14) // n)                         # rows per block: temporaries stay in cache
    with np.errstate(divide="ignore", invalid="ignore"):
        for a in range(0, R.size, step):
            G = (R[a:a + step] - 1).astype(float)[:, None]
            B = N - 1.0 - G
            m = np.clip(np.floor((d + 1.0) * (G + 1.0) / (N + 1.0)), np.maximum(0.0, d - B), np.minimum(d, G))
            num = (G - x) * dx
            den = x1 * (B - d + x1)
            above = x >= m
            # x > m: prod_{j = m}^{x - 1} ratio_j; the ratio is 0 at x = min(d, G) (the support's end),
            # so every product beyond vanishes
            o = out[a:a + step]
            np.cumprod(np.where(above, num / den, 1.0), axis=1, out=o[:, 1:])
            o[:, 0] = 1.0
            # x < m: prod_{j = x}^{m - 1} 1 / ratio_j; 1 / ratio is 0 at x = d - B - 1 (below the support)
            rev = np.cumprod(np.where(above, 1.0, den / num)[:, ::-1], axis=1)[:, ::-1]
            np.copyto(o[:, :-1], rev, where=~above)
            o /= o.sum(axis=1, keepdims=True)
    return out


#: Longest run of one-item steps :func:`kernels_ascending` takes from one directly built kernel (the
#: relative error grows by about 2 eps per step) and the largest gap in N it steps over.
KERNEL_CHAIN_MAX = 64
KERNEL_STEP_MAX = 8


def _hypergeom_step(K, N, n, out):
    """P(r | R; N + 1, n) from P(r | R; N, n) without replacement, into ``out`` (shape (N + 1, n)).

    Adding one item below rank R multiplies every entry of row R by a ratio of binomial
    coefficients (G = R - 1 items above, B = N - R below, d = n - 1 draws, x = r - 1):

        P(x; G, B + 1, d) / P(x; G, B, d) = (N - d) / N * (B + 1) / (B + 1 - d + x).

    Rows whose support grows (B < d) and the new row N + 1 are built directly
    (:func:`hypergeom_rows`). One division and two products per entry instead of the rows'
    recurrences.
    """
    d = n - 1
    safe = max(0, N - d)                           # rows R <= N - d: B = N - R >= d
    Bp1 = (N + 1.0 - np.arange(1, safe + 1))[:, None]
    o = out[:safe]
    np.add(Bp1 - d, np.arange(n, dtype=float)[None, :], out=o)
    np.divide(Bp1 * ((N - d) / N), o, out=o)
    np.multiply(o, K[:safe], out=o)
    out[safe:] = hypergeom_rows(N + 1, n, np.arange(safe + 1, N + 2))
    return out


def kernels_ascending(Ns, n, scheme="binomial"):
    """Yield ``(N, P(r | R; N, n))`` for the distinct item counts ``Ns`` in increasing order.

    Per-user candidate counts N_u often fill a range (NCF's MovieLens-1M file: 2,295 distinct
    N_u in 1,393..3,687). Without replacement each kernel comes from the one before by one-item
    steps (:func:`_hypergeom_step`, exact ratios; about 7x faster than the rows) when the gap is
    at most :data:`KERNEL_STEP_MAX`, and is built directly (:func:`hypergeometric`) otherwise and
    after every :data:`KERNEL_CHAIN_MAX` steps, so the relative error stays O(KERNEL_CHAIN_MAX
    eps) (``tests/test_peruser.py`` compares with the direct kernels). Binomial kernels are built
    directly (their element-wise formula costs what a step would). A yielded array is valid until
    the next one is asked for (two buffers take turns). Memory: two (max N, n) arrays.

    Examples
    --------
    >>> [(N, bool(np.allclose(K, hypergeometric(N, 5)))) for N, K in kernels_ascending([9, 7, 8, 20], 5,
    ...                                                                                 "hypergeometric")]
    [(7, True), (8, True), (9, True), (20, True)]
    """
    scheme = check_scheme(scheme)
    n = check_int(n, "n", low=2)
    Ns = np.unique(np.asarray(Ns, dtype=np.int64))
    K, prev, chain = None, None, 0
    bufs = None
    for N in Ns.tolist():
        if (scheme == "hypergeometric" and K is not None and N - prev <= KERNEL_STEP_MAX
                and chain + (N - prev) <= KERNEL_CHAIN_MAX):
            if bufs is None:
                check_array_size((int(Ns[-1]), n), f"the N x n sampling kernel P(r | R) (N={int(Ns[-1])}, n={n})")
                bufs = [np.empty(int(Ns[-1]) * n), np.empty(int(Ns[-1]) * n)]
            for M in range(prev, N):
                bufs.reverse()
                K = _hypergeom_step(K, M, n, bufs[0][:(M + 1) * n].reshape(M + 1, n))
            chain += N - prev
        else:
            N, _ = check_N_n(N, n)
            K = _dense(N, n, scheme)
            chain = 0
        prev = N
        yield N, K


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
        columns are computed directly (the same element-wise formula, the same
        numbers), the hypergeometric ones from the table of log k!
        (:func:`hypergeom_entries`, within 5e-9 relative of the rows for N <=
        :data:`LOG_FACTORIAL_MAX`) or, for larger N, from full rows in blocks.
        Use it for many different N (per-user item counts), where the small
        cache would only churn.

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
        step = max(1, BLOCK_ELEMS // max(1, cols.size))
        for start in range(0, N, step):
            R = np.arange(start + 1, min(N, start + step) + 1, dtype=float)[:, None]
            out[start : start + R.size] = np.exp(_log_binomial(n, x, (R - 1.0) / (N - 1.0)))
        return out
    if N <= LOG_FACTORIAL_MAX:
        # the requested columns only, from the table of log k!: O(N k) instead of the rows' O(N n)
        # (per-user N_u: 2,295 distinct N_u of ml-1m's range at n = 100 built in 0.5 s instead of 85 s)
        return np.ascontiguousarray(hypergeom_entries(N, n, np.arange(1, N + 1), cols))
    step = max(1, BLOCK_ELEMS // n)
    for start in range(0, N, step):
        R = np.arange(start + 1, min(N, start + step) + 1)
        out[start : start + R.size] = np.exp(log_kernel_rows(N, n, R, scheme)[:, cols])
    return out


def kernel_entries(N, n, R, ranks, scheme="binomial"):
    """P(r | R) for the given global ranks R (rows) and sampled ranks r (columns).

    Binomial entries are computed directly (O(len(R) len(ranks)), the
    element-wise formula of :func:`log_kernel_rows`); hypergeometric ones
    from full rows (the accumulated ratios need every column below r), or,
    when at most 40% of the n columns are asked for (a nested design's
    largest sets: a few thousand distinct ranks among n = 19,200) and
    N <= :data:`LOG_FACTORIAL_MAX`, directly from log C(R - 1, r - 1) C(N - R, n - r) /
    C(N - 1, n - 1) by a table of log k! (:func:`hypergeom_entries`): O(len(R) len(ranks))
    instead of O(len(R) n), two table look-ups and one exponential per entry (10^7 entries in
    0.24 s against 1.8 s by log-Beta functions and about 4 s by rows), within 2e-8 relative of
    the row form for entries above 1e-8 (tests/test_peruser.py; the differences of log k! lose
    about log10(N log N) digits, 5e-9 at N = 10^6, so larger N keep the rows).

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
        return np.exp(_log_binomial(n, cols.astype(float)[None, :], (R - 1.0) / (N - 1.0)))
    if 5 * cols.size <= 2 * n and N <= LOG_FACTORIAL_MAX:
        return hypergeom_entries(N, n, R[:, 0].astype(np.int64), cols)
    return np.exp(log_kernel_rows(N, n, R[:, 0].astype(np.int64), scheme)[:, cols])


#: Largest N whose hypergeometric entries are taken from the table of log k! (8 MB at 10^6):
#: :func:`hypergeom_entries`, :func:`kernel_bin_masses`.
LOG_FACTORIAL_MAX = 10**6
_LOG_FACTORIALS = [np.zeros(1)]


def log_factorials(N):
    """The table of log k!, k = 0..(at least) N, read-only.

    The largest table asked for so far is kept: one table serves every N below it (per-user N_u, the
    planner's many count laws). Look-ups in it give log C(a, b) = lf[a] - lf[b] - lf[a - b] without a
    special function per entry (up to :data:`LOG_FACTORIAL_MAX`; beyond, callers use log-Gamma).

    Parameters
    ----------
    N : int >= 0

    Returns
    -------
    numpy.ndarray
        lf with lf[k] = log k! (``scipy.special.gammaln(k + 1)``) for k <= N; it may be longer.

    Examples
    --------
    >>> lf = log_factorials(10)
    >>> bool(abs(lf[10] - lf[3] - lf[7] - np.log(120)) < 1e-12)    # log C(10, 3)
    True
    """
    lf = _LOG_FACTORIALS[0]
    if lf.size <= N:
        lf = special.gammaln(np.arange(max(N, 2 * lf.size) + 1, dtype=float) + 1.0)
        lf.setflags(write=False)
        _LOG_FACTORIALS[0] = lf
    return lf


def hypergeom_entries(N, n, R, x, *, out=None):
    """P(X = x | R), X ~ Hypergeometric(N - 1, R - 1, n - 1), for rows R and columns x (0-based).

    The probability C(G, x) C(B, d - x) / C(N - 1, d), G = R - 1, B = N - R, d = n - 1, from a
    table of log k! (:func:`log_factorials`): the terms of the row (log G! + log B!), of the
    column (-log x! - log (d - x)!) and the constant are summed once, leaving two table
    look-ups, log (G - x)! and log (B - d + x)!, and one exponential per entry, in blocks whose
    temporaries stay in cache; 0 off the support (x > G or d - x > B). The nine terms of log P,
    each of size up to N log N, are within a few ulp: against exact rational arithmetic
    (math.comb) the relative error was at most 4e-10 at N = 10^5 and 5e-9 at N = 10^6, as for
    the log-Beta form :func:`log_hypergeom_pmf` (the row form of :func:`log_kernel_rows`, O(n eps),
    is the test's reference).

    Parameters
    ----------
    N, n : int
        N <= :data:`LOG_FACTORIAL_MAX`.
    R : array_like of int in 1..N
    x : array_like of int in 0..n-1
    out : ndarray, shape (len(x), len(R)), optional, keyword-only
        Written with the *transposed* result (one row per x), which is then returned as its
        transpose (a view): the layout of :func:`sampling_lib.kernels.cell_kernel`'s columns.

    Returns
    -------
    ndarray, shape (len(R), len(x))

    Examples
    --------
    >>> bool(np.allclose(hypergeom_entries(30, 5, [1, 7, 30], [1, 4]), hypergeometric(30, 5)[[0, 6, 29]][:, [1, 4]]))
    True
    """
    N, n = int(N), int(n)
    if N > LOG_FACTORIAL_MAX:
        raise ValueError(f"N must be at most LOG_FACTORIAL_MAX={LOG_FACTORIAL_MAX}; got {N}")
    R = np.asarray(R, dtype=np.int64).ravel()
    x = np.asarray(x, dtype=np.int64).ravel()
    lf = log_factorials(N)
    d = n - 1
    G, Bd = R - 1, N - R - d
    row = lf[G] + lf[N - R] - (lf[N - 1] - lf[d] - lf[N - 1 - d])
    col = -(lf[x] + lf[d - x])
    if out is None:
        out = np.empty((x.size, R.size))
    elif out.shape != (x.size, R.size):
        raise ValueError(f"out must have shape (len(x), len(R)) = {(x.size, R.size)}; got {out.shape}")
    if out.size == 0:
        return out.T
    # look-ups in a table shifted by one whose entry 0 is +inf: an index below 0 (off the support) is
    # clipped to it, so the log-probability is -inf and its exponential 0 (no mask); int32 indices
    lfi = _log_factorials_inf(N)
    G1, Bd1, x32 = (G + 1).astype(np.int32), (Bd + 1).astype(np.int32), x.astype(np.int32)
    step = max(1, _ENTRY_BLOCK // R.size)
    i1 = np.empty((min(step, x.size), R.size), dtype=np.int32)
    i2, t = np.empty_like(i1), np.empty(i1.shape)
    for a in range(0, x.size, step):
        b = min(a + step, x.size)
        k = b - a
        I1, I2, T, O = i1[:k], i2[:k], t[:k], out[a:b]
        np.subtract(G1[None, :], x32[a:b, None], out=I1)        # G - x + 1 >= 1 on the support
        np.maximum(I1, 0, out=I1)
        np.add(Bd1[None, :], x32[a:b, None], out=I2)            # B - d + x + 1 >= 1 on the support
        np.maximum(I2, 0, out=I2)
        np.take(lfi, I1, out=O)
        np.take(lfi, I2, out=T)
        O += T
        np.subtract(row[None, :], O, out=O)
        O += col[a:b, None]
        np.exp(O, out=O)
    return out.T


def _log_factorials_inf(N):
    """[+inf, log 0!, log 1!, ..., log N!] (at least), read-only: :func:`log_factorials` shifted by one
    behind an entry +inf for the counts off the support."""
    lf = log_factorials(N)
    if _LOG_FACTORIALS_INF[0].size != lf.size + 1:
        _LOG_FACTORIALS_INF[0] = np.r_[np.inf, lf]
        _LOG_FACTORIALS_INF[0].setflags(write=False)
    return _LOG_FACTORIALS_INF[0]


_LOG_FACTORIALS_INF = [np.zeros(0)]
#: Entries per block of :func:`hypergeom_entries` (its temporaries stay in cache).
_ENTRY_BLOCK = 1 << 14


def kernel_bin_masses(N, n, R, lo, hi, scheme="binomial"):
    """P(lo_j <= r <= hi_j | R): the kernel summed over bins of sampled ranks, shape (len(R), len(lo)).

    Only the counts X = r - 1 within t = 14 + sqrt(196 + 84 v) of the mean m p (m = n - 1 draws,
    p = (R - 1)/(N - 1), v = m p (1 - p) >= Var X) are summed (:func:`kernel_windows`): X is a
    sum of draws with or without replacement, so Bernstein's inequality holds for it (Hoeffding
    1963, Thm 4) and P(|X - E X| >= t) <= 2 exp(-t^2 / (2 (v + t/3))) <= 2 exp(-42) = 1.2e-18;
    each bin's mass is a difference of running sums from the lower or, above the middle, the
    upper end of that window (no cancellation near 1). O(len(R) sqrt(n)) terms from a table of
    log k! (:func:`window_pmf`) instead of the O(len(R) n) of whole rows, which the
    hypergeometric kernel with N > :data:`LOG_FACTORIAL_MAX` uses.

    Parameters
    ----------
    N, n : int
    R : array_like of int in 1..N
        Global ranks (rows).
    lo, hi : array_like of int, 1 <= lo <= hi <= n
        The bins' first and last sampled ranks (columns).
    scheme : {"binomial", "hypergeometric"}

    Returns
    -------
    ndarray, shape (len(R), len(lo))

    References
    ----------
    Hoeffding, W. Probability inequalities for sums of bounded random variables. JASA 58, 1963
    (Thm 4: sampling without replacement). KDD20 Sec 2.2 (the kernels).

    Examples
    --------
    >>> P = hypergeometric(200, 40)
    >>> got = kernel_bin_masses(200, 40, [1, 50, 200], [1, 3, 20], [2, 19, 40], "hypergeometric")
    >>> bool(np.allclose(got, np.stack([P[[0, 49, 199], a - 1:b].sum(axis=1) for a, b in
    ...                                 [(1, 2), (3, 19), (20, 40)]], axis=1)))
    True
    """
    N, n = check_N_n(N, n)
    scheme = check_scheme(scheme)
    R = check_ranks(R, N, name="R", upper_name="N")
    lo = np.atleast_1d(np.asarray(lo, dtype=np.int64))
    hi = np.atleast_1d(np.asarray(hi, dtype=np.int64))
    if lo.shape != hi.shape or lo.ndim != 1 or np.any(lo < 1) or np.any(hi < lo) or np.any(hi > n):
        raise ValueError(f"lo and hi must be 1-D of equal length with 1 <= lo <= hi <= n={n}")
    out = np.empty((R.size, lo.size))
    if (N if scheme == "hypergeometric" else n) > LOG_FACTORIAL_MAX:
        step = max(1, BLOCK_ELEMS // n)
        for s in range(0, R.size, step):
            P = np.exp(log_kernel_rows(N, n, R[s:s + step], scheme))
            out[s:s + step] = _bin_sums(P, np.zeros(P.shape[0], dtype=np.int64), lo - 1, hi - 1)
        return out
    first, last = kernel_windows(N, n, R, scheme, whole=n < WINDOW_MIN_N)
    step = max(1, BLOCK_ELEMS // max(1, int(np.max(last - first)) + 1))
    for s in range(0, R.size, step):
        e = slice(s, s + step)
        width = int(np.max(last[e] - first[e])) + 1
        P = window_pmf(N, n, R[e], first[e], width, scheme)
        out[e] = _bin_sums(P, first[e], lo - 1, hi - 1)
    return out


#: Smallest n whose rows :func:`kernel_bin_masses` sums on their Bernstein windows only (below,
#: whole rows cost little and keep every tail term).
WINDOW_MIN_N = 1024


def kernel_windows(N, n, R, scheme="binomial", *, whole=False):
    """(first, last): the counts X = r - 1 that carry all but 1.2e-18 of each row's mass.

    X is Binomial(m, p) or Hypergeometric(N - 1, R - 1, m), m = n - 1, p = (R - 1)/(N - 1): a sum
    of m draws with or without replacement, for which Bernstein's inequality holds (Hoeffding
    1963, Thm 4), P(|X - m p| >= t) <= 2 exp(-t^2 / (2 (v + t/3))), v = m p (1 - p) >= Var X. At
    t = 14 + sqrt(196 + 84 v) the bound is 2 exp(-42) = 1.2e-18; the window [m p - t, m p + t] is
    clipped to the support. Its width is O(sqrt(n)), not n. ``whole=True``: the whole support.

    Examples
    --------
    >>> first, last = kernel_windows(10**5, 10**4, [1, 5 * 10**4])     # n = 10^4: 944 of 10^4 counts
    >>> first.tolist(), last.tolist()
    ([0, 4528], [28, 5471])
    """
    R = np.asarray(R, dtype=np.int64)
    d = n - 1
    low = np.zeros(R.size) if scheme == "binomial" else np.maximum(0, d - (N - R))
    high = np.full(R.size, d) if scheme == "binomial" else np.minimum(d, R - 1)
    if whole:
        return low.astype(np.int64), high.astype(np.int64)
    p = (R - 1) / (N - 1.0)
    mean = d * p
    t = 14.0 + np.sqrt(196.0 + 84.0 * d * p * (1.0 - p))
    return (np.maximum(np.ceil(mean - t), low).astype(np.int64),
            np.minimum(np.floor(mean + t), high).astype(np.int64))


def window_pmf(N, n, R, first, width, scheme="binomial"):
    """P(X = first_i + j | R_i), j = 0..width-1 (0 off the support), X = r - 1, shape (len(R), width).

    X ~ Binomial(d, p) or Hypergeometric(N - 1 items, G = R - 1 above the held-out item, d drawn),
    d = n - 1, p = G / (N - 1): the exponentials of :func:`log_binom_window` and
    :func:`log_hypergeom_window` (the same terms the planner's count laws use).
    """
    R = np.asarray(R, dtype=np.int64)
    d = n - 1
    if scheme == "binomial":
        return np.exp(log_binom_window(first, width, d, (R - 1) / (N - 1.0)))
    return np.exp(log_hypergeom_window(first, width, R - 1, N - R, np.full(R.shape, d)))


@lru_cache(maxsize=16)
def _log_binom_coefficients(m):
    """log C(m, x), x = 0..m (read-only; a plan asks for the same few m thousands of times)."""
    if m <= LOG_FACTORIAL_MAX:
        lf = log_factorials(m)
    else:                                     # not kept in the shared table
        lf = special.gammaln(np.arange(m + 1.0) + 1.0)
    out = lf[m] - lf[:m + 1] - lf[m::-1]
    out.flags.writeable = False
    return out


def log_binom_window(start, width, m, p):
    """log P(X = start_i + j), j = 0..width-1, X ~ Binomial(m, p_i), shape (len(p), width); -inf off 0..m.

    log C(m, x) from one table per m (from :func:`log_factorials`), plus x log p + (m - x) log(1 - p): a
    gather and two products per term, no special function per term. p = 0 gives the point mass at 0 and
    p = 1 the point mass at m. Used by :func:`window_pmf` (the kernels' rows on their Bernstein windows)
    and by the planner's count laws (:mod:`sampling_lib.design`).

    Parameters
    ----------
    start : array_like of int, shape (k,)
        Each row's first count (may lie off the support).
    width : int >= 1
    m : int >= 0
        Draws.
    p : array_like of float in [0, 1], shape (k,) or (k, 1)

    Examples
    --------
    >>> from scipy import stats
    >>> got = np.exp(log_binom_window([0, 3], 4, 9, [0.2, 0.7]))
    >>> bool(np.allclose(got, stats.binom.pmf(np.array([[0, 1, 2, 3], [3, 4, 5, 6]]), 9, [[0.2], [0.7]])))
    True
    """
    m, width = check_int(m, "m", low=0), check_int(width, "width", low=1)
    p = np.asarray(p, dtype=float).reshape(-1, 1)
    if not np.all((p >= 0.0) & (p <= 1.0)):
        raise ValueError("p must lie in [0, 1]")
    x = _window_counts(start, width, p.shape[0])
    with np.errstate(divide="ignore"):
        lp = np.where(p > 0.0, np.log(np.where(p > 0.0, p, 1.0)), 0.0)
        lq = np.where(p < 1.0, np.log1p(-np.where(p < 1.0, p, 0.0)), 0.0)
    out = _log_binom_coefficients(m)[np.clip(x, 0, m)]
    out += x * lp
    out += (m - x) * lq
    out[(x < 0) | (x > m)] = -np.inf
    rows = np.flatnonzero((p[:, 0] <= 0.0) | (p[:, 0] >= 1.0))
    if rows.size:                                     # the point masses at 0 (p = 0) and m (p = 1)
        at = np.where(p[rows] <= 0.0, 0, m)
        out[rows] = np.where(x[rows] == at, 0.0, -np.inf)
    return out


def log_hypergeom_window(start, width, good, bad, m):
    """log P(X = start_i + j), j = 0..width-1, X ~ Hypergeometric(good_i + bad_i items, good_i of them, m_i
    drawn), shape (len(good), width); -inf off the support.

    log C(good, x) C(bad, m - x) / C(good + bad, m) from the table of log k! (:func:`log_factorials`)
    shifted by one behind +inf: four look-ups per term and one constant per row, and a count off the
    support makes one index <= 0, its term -inf and its probability 0 (no mask). ``start`` and ``width``
    may reach anywhere beyond the support. Beyond :data:`LOG_FACTORIAL_MAX` items (``start`` then at or
    above the support's lower end): one log-pmf per row (:func:`log_hypergeom_pmf`), then the ratio of
    successive terms, P(X = x + 1) / P(X = x) = (good - x)(m - x) / ((x + 1)(bad - m + x + 1)), summed in
    log. Used by :func:`window_pmf` and by the planner's count laws (:mod:`sampling_lib.design`, whose
    rows have their own totals and draws).

    Parameters
    ----------
    start : array_like of int, shape (k,)
        Each row's first count (may lie off the support).
    width : int >= 1
    good, bad, m : array_like of int >= 0, shape (k,) or (k, 1)
        Per row; m <= good + bad.

    Examples
    --------
    >>> from scipy import stats
    >>> got = np.exp(log_hypergeom_window([0, 2], 3, [5, 20], [30, 10], [4, 6]))
    >>> bool(np.allclose(got, stats.hypergeom.pmf(np.array([[0, 1, 2], [2, 3, 4]]), [[35], [30]], [[5], [20]],
    ...                                           [[4], [6]])))
    True
    """
    width = check_int(width, "width", low=1)
    good, bad, m = (np.asarray(a, dtype=np.int64).reshape(-1, 1) for a in (good, bad, m))
    if not (good.shape == bad.shape == m.shape):
        raise ValueError(f"good, bad and m must have one entry per row; got {good.size}, {bad.size} and {m.size}")
    if np.any(good < 0) or np.any(bad < 0) or np.any(m < 0) or np.any(m > good + bad):
        raise ValueError("good, bad and m must be >= 0 with m <= good + bad")
    start = _window_counts(start, 1, good.shape[0])
    total = good + bad
    top = int(np.max(total, initial=0))
    if top > LOG_FACTORIAL_MAX:
        return _log_hypergeom_window_by_ratios(start, width, good, bad, m)
    lf, lfi = log_factorials(top), _log_factorials_inf(top)
    row = lf[good] + lf[bad] - lf[total] + lf[m] + lf[total - m]
    # indices clipped to the table: one below 0 gives +inf; one past its end (> good + bad) only where
    # another is below 0 (the four counts pair up to m, good and bad), so its term is +inf all the same
    x1 = (start + np.arange(width)[None, :] + 1).astype(np.int32)             # x + 1
    lp = np.take(lfi, x1, mode="clip")                                         # log x!
    lp += np.take(lfi, (m + 2).astype(np.int32) - x1, mode="clip")            # log (m - x)!
    lp += np.take(lfi, (good + 2).astype(np.int32) - x1, mode="clip")         # log (good - x)!
    lp += np.take(lfi, (bad - m).astype(np.int32) + x1, mode="clip")          # log (bad - m + x)!
    return np.subtract(row, lp, out=lp)


def _window_counts(start, width, rows):
    """The counts start_i + j, j = 0..width-1, (rows, width) int64; ``start`` must have one entry per row."""
    start = np.asarray(start)
    if start.size != rows or not np.all(np.isfinite(start)) or np.any(start != np.round(start)):
        raise ValueError(f"start must hold one whole number per row ({rows} rows); got {start.size} entries")
    return start.astype(np.int64).reshape(-1, 1) + np.arange(width)[None, :]


def _log_hypergeom_window_by_ratios(start, width, good, bad, m):
    good, bad, m, start = (a.astype(float) for a in (good, bad, m, start))
    x = start + np.arange(width - 1)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.log(np.maximum(good - x, 0.0) * np.maximum(m - x, 0.0) / ((x + 1.0) * (bad - m + x + 1.0)))
    first = log_hypergeom_pmf(start, good, bad, m)
    out = np.empty((start.shape[0], width))
    out[:, :1] = first
    if width > 1:
        out[:, 1:] = first + np.cumsum(step, axis=1)
    return np.nan_to_num(out, nan=-np.inf)


def _bin_sums(P, first, a, z):
    """Sums of P[i, x - first[i]] over x in a_j..z_j (clipped to the row's window): from the
    lower running sum where it is below 1/2 at a_j, else from the upper one (no cancellation
    near 1); (rows, bins)."""
    W = P.shape[1]
    low = np.concatenate([np.zeros((P.shape[0], 1)), np.cumsum(P, axis=1)], axis=1)    # sum below index
    up = np.concatenate([np.cumsum(P[:, ::-1], axis=1)[:, ::-1], np.zeros((P.shape[0], 1))], axis=1)
    ja = np.clip(a[None, :] - first[:, None], 0, W)
    jz = np.clip(z[None, :] - first[:, None] + 1, 0, W)
    la, lz = np.take_along_axis(low, ja, axis=1), np.take_along_axis(low, jz, axis=1)
    ua, uz = np.take_along_axis(up, ja, axis=1), np.take_along_axis(up, jz, axis=1)
    return np.maximum(np.where(la > 0.5, ua - uz, lz - la), 0.0)
