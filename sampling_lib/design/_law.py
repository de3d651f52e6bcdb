"""The law of a nested design's final (n_u, r_u) given R, and its expected cost (:func:`design_law`).

Part of :mod:`sampling_lib.design` (its docstring tells the designs).

References
----------
.. [Hoeffding63] Hoeffding. Probability inequalities for sums of bounded random variables.
   JASA 58(301), 1963 (Thm 4: sampling without replacement keeps the with-replacement bounds; Bernstein's
   inequality, eq 2.13 there).

The package's docstring (:mod:`sampling_lib.design`) lists every reference of the planner.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from scipy import special, stats

from .._validation import check_scheme
from ..kernels import log_binom_window, log_hypergeom_pmf, log_hypergeom_window
from ..sampling import size_ladder

__all__ = ["design_law", "resolution_width"]

_EXACT_R = 64          # sampled ranks 1.._EXACT_R are cells of their own in the predictions
_R_LOG_WIDTH = 0.05    # beyond, cells of at most this width in log r


# ----------------------------------------------------------------------------
# the law of the final (n_u, r_u) of a design
# ----------------------------------------------------------------------------
def _r_bins(lo, hi):
    """Cells of sampled ranks lo..hi: exact up to _EXACT_R, then of width <= _R_LOG_WIDTH in log r."""
    lo, hi = int(lo), int(hi)
    if hi < lo:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cut = min(hi, max(lo - 1, _EXACT_R))
    a = np.arange(lo, cut + 1, dtype=np.int64)
    if cut >= hi:
        return a, a.copy()
    k = int(np.ceil(np.log(hi / cut) / _R_LOG_WIDTH))
    e = np.unique(np.floor(cut * np.exp(np.linspace(0.0, np.log(hi / cut), k + 1))).astype(np.int64))
    starts = np.unique(np.r_[cut + 1, e[(e > cut + 1) & (e <= hi)]])
    ends = np.r_[starts[1:] - 1, hi]
    return np.r_[a, starts], np.r_[a, ends]


def _count_dist(kind, x, m, R, N, done, scheme):
    """``kind`` ("cdf": P(X <= x), "pmf": P(X = x)) of X = items above the held-out item among m new
    draws, shape (G, k).

    Binomial: X ~ Binomial(m, (R - 1)/(N - 1)). Hypergeometric: ``done`` items
    already drawn, all ranked below (R - 1 above and N - R - done below remain).
    The pmf is exact where a difference of CDFs would round. Both laws go through the same running sums
    (:func:`_windowed_cdf`): scipy's per-entry ``binom.cdf`` / ``binom.pmf`` took 70% of a binomial plan.
    """
    x = np.asarray(x, dtype=float)[None, :]
    R = np.asarray(R, dtype=float)[:, None]
    if scheme == "binomial":
        p = (R - 1.0) / (N - 1.0)
        mean, var = m * p, m * p * (1.0 - p)
        lower = np.where(p >= 1.0, float(m), 0.0)[:, 0]          # p = 1: all m draws rank above

        def log_run(start, width, rows):
            return log_binom_window(start, width, m, p[rows])

        def log_pmf(xx):                                         # single columns: few entries
            return stats.binom.logpmf(xx, m, p)
    else:
        good, bad = np.maximum(R - 1.0, 0.0), np.maximum((N - R) - done, 0.0)
        # impossible states (fewer items left than drawn) have probability 0 upstream: any finite value
        m_eff = np.minimum(m, good + bad)
        mean, var, lower, log_run = _hypergeom_parts(good, bad, m_eff)

        def log_pmf(xx):
            return log_hypergeom_pmf(xx, good, bad, m_eff)
    if kind == "pmf":
        xs = x.ravel()
        # a leading run of counts (the exact cells; a second stage's may start below 0, where the pmf is 0)
        # by the running sums, the few counts after it (such as the last cell, all m above) directly
        k = 1 + int(np.cumprod(np.diff(xs) == 1).sum()) if xs.size > 1 else 0
        if k < 2:
            return np.exp(log_pmf(x))
        out = np.empty((mean.shape[0], xs.size))
        out[:, :k] = _log_pmf_cols(xs[0], k, lower, log_run)
        out[:, k:] = log_pmf(x[:, k:])
        return np.exp(out)
    return _windowed_cdf(x, mean, var, lower, log_run)


def _log_pmf_cols(x0, width, lower, log_run):
    """log P(X = x0 + j), j = 0..width-1, per row: ``log_run`` from each row's first point of support at or
    after x0 (``lower`` (k,): where the support starts), shifted into place (-inf before it)."""
    start = np.maximum(float(x0), lower)
    shift = (start - x0).astype(np.int64)
    run = log_run(start, width, slice(None))
    j = np.arange(width)[None, :] - shift[:, None]
    out = np.take_along_axis(run, np.clip(j, 0, width - 1), axis=1)
    return np.where(j >= 0, out, -np.inf)


def _windowed_cdf(x, mean, var, lower, log_run):
    """P(X <= x) of a count X broadcast over the rows (mean, var: (G, 1); lower: (G,), where the support
    starts) and the columns (x: (1, k)); ``log_run(start, width, rows)`` gives log P(X = start + j),
    j = 0..width-1, of the given rows.

    scipy's exact CDF costs O(x) per entry (a single-model plan at N = 10^4: 361 s of 367); only the
    entries near the mean need it. X is a sum of m draws in {0, 1}, with or without replacement, so the
    binomial's Chernoff bounds hold for it ([Hoeffding63] Thm 4), and so does Bernstein's: P(|X - E X| >= t)
    <= 2 exp(-t^2 / (2 (v + t/3))), v = m p (1 - p) >= Var X. At t = 14 + sqrt(196 + 84 v) that is below
    2 exp(-42) = 1.2e-18: beyond, the CDF is 0 or 1 to that (below double precision near 1); near the mean
    it is the running sum of the pmf from mean - t.
    """
    x, mean, var = np.broadcast_arrays(x, mean, var)
    t = 14.0 + np.sqrt(196.0 + 84.0 * var)
    out = (x >= mean + t).astype(float)
    near = np.abs(x - mean) < t
    rows = np.flatnonzero(near.any(axis=1))
    if rows.size:
        # the support starts at ``lower``: below it the pmf is 0 and the recursion would divide by 0
        start = np.maximum(np.ceil(mean[rows, 0] - t[rows, 0]), lower[rows])
        stop = np.where(near[rows], x[rows], -1.0).max(axis=1)
        width = max(int(np.max(stop - start)) + 1, 1)
        step = max(1, 2_000_000 // max(width, 1))            # rows per block: ~2 x 10^6 terms at a time
        for b in range(0, rows.size, step):
            r = rows[b:b + step]
            run = np.cumsum(np.exp(log_run(start[b:b + step], width, r)), axis=1)
            i, j = np.nonzero(near[r])
            col = (x[r][i, j] - start[b:b + step][i]).astype(np.int64)
            out[r[i], j] = np.where(col >= 0, run[i, np.clip(col, 0, width - 1)], 0.0)
    return out


def _hypergeom_parts(good, bad, m_eff):
    """(mean, var, lower, log_run) of X ~ Hypergeometric(good + bad items, good of them, m_eff drawn) per row
    (good / bad / m_eff (G, 1)) for :func:`_windowed_cdf`: var is the binomial's (>= the hypergeometric's),
    lower (G,) where the support starts."""
    p = good / np.maximum(good + bad, 1.0)

    def log_run(start, width, rows):
        return log_hypergeom_window(start, width, good[rows], bad[rows], m_eff[rows])

    return m_eff * p, m_eff * p * (1.0 - p), np.maximum(m_eff - bad, 0.0)[:, 0], log_run


def _hypergeom_cdf(x, good, bad, m_eff):
    """P(X <= x), X ~ Hypergeometric(good + bad items, good of them, m_eff drawn), broadcast over the rows
    (good, bad, m_eff: (G, 1)) and the columns (x: (1, k)): :func:`_windowed_cdf`."""
    x, good, bad, m_eff = (np.asarray(a, dtype=float) for a in np.broadcast_arrays(x, good, bad, m_eff))
    return _windowed_cdf(x, *_hypergeom_parts(good[:, :1], bad[:, :1], m_eff[:, :1]))


def _count_cdf(x, m, R, N, done, scheme):
    """P(X <= x), X as :func:`_count_dist`."""
    return _count_dist("cdf", x, m, R, N, done, scheme)


def _count_pmf(x, m, R, N, done, scheme):
    """P(X = x), X as :func:`_count_dist`."""
    return _count_dist("pmf", x, m, R, N, done, scheme)


def _cells_prob(lo, hi, offset, m, R, N, done, scheme):
    """P(offset + 1 + X in [lo_c, hi_c]) for every cell c, X the items above among m draws: (G, C).

    Cells of one rank use the pmf (exact where a difference of CDFs would round), wider cells the
    difference of CDFs; ranks below offset + 1 have probability 0.
    """
    lo, hi = np.asarray(lo), np.asarray(hi)
    one = lo == hi
    P = np.zeros((np.size(R), lo.size))
    P[:, one] = _count_pmf(lo[one] - 1 - offset, m, R, N, done, scheme)
    if (~one).any():
        k = int((~one).sum())               # both ends of the wide cells in one call: one running sum per row
        both = _count_cdf(np.r_[hi[~one] - 1 - offset, lo[~one] - 2 - offset], m, R, N, done, scheme)
        P[:, ~one] = np.clip(both[:, :k] - both[:, k:], 0.0, 1.0)
    return P


#: While :func:`plan` predicts its candidates: {key: (lo, hi, P)} of :func:`_binned_counts`, shared by the
#: designs that run the same stage (the rungs every ladder of a growth has in common); None otherwise.
_STAGE_CACHE = None


@contextmanager
def stage_cache():
    """Share the stages' laws (:data:`_STAGE_CACHE`) within the block, in a new dict; inside another such
    block, the outer one's."""
    global _STAGE_CACHE
    if _STAGE_CACHE is not None:
        yield _STAGE_CACHE
        return
    _STAGE_CACHE = {}
    try:
        yield _STAGE_CACHE
    finally:
        _STAGE_CACHE = None


def _binned_counts(m, R, N, done, scheme, offset=0):
    """The cells (lo, hi) of the ranks offset + 1 + X, X in 0..m, and their probabilities (G, k)."""
    key = None
    if _STAGE_CACHE is not None:
        key = (int(m), int(N), int(done), scheme, int(offset), np.asarray(R).tobytes())
        hit = _STAGE_CACHE.get(key)
        if hit is not None:
            return hit
    lo, hi = _r_bins(offset + 1, offset + m + 1)
    out = lo, hi, _cells_prob(lo, hi, offset, m, R, N, done, scheme)
    if key is not None:
        _STAGE_CACHE[key] = out
    return out


def _second_stage(lo, hi, offset, m, R, N, done, scheme):
    """:func:`_cells_prob` of a threshold design's second stage, shared through _STAGE_CACHE."""
    key = None
    if _STAGE_CACHE is not None:
        key = ("second", lo.tobytes(), int(offset), int(m), np.asarray(R).tobytes(), int(N), int(done), scheme)
        hit = _STAGE_CACHE.get(key)
        if hit is not None:
            return hit
    out = _cells_prob(lo, hi, offset, m, R, N, done, scheme)
    if key is not None:
        _STAGE_CACHE[key] = out
    return out


def _log_survive(R, N, drawn, scheme):
    """log P(the first ``drawn`` sampled items all rank below the held-out item | R) (G,)."""
    R = np.asarray(R, dtype=float)
    if scheme == "binomial":
        with np.errstate(divide="ignore"):
            return drawn * np.log1p(-(R - 1.0) / (N - 1.0))
    # C(N - R, drawn) / C(N - 1, drawn)
    out = (special.gammaln(N - R + 1.0) - special.gammaln(N - R - drawn + 1.0)
           - special.gammaln(N * 1.0) + special.gammaln(N - drawn * 1.0))
    return np.where(N - R >= drawn, out, -np.inf)


def design_law(design, N, R, scheme="binomial"):
    """P(final cell d | R) of a design: the rows R (global ranks) by the cells of (n_u, r_u).

    Parameters
    ----------
    design : Design
    N : int
        Number of items (N_u of every user).
    R : array_like of int
        Global ranks (e.g. the representative ranks of a grid).
    scheme : {"binomial", "hypergeometric"}

    Returns
    -------
    sizes : ndarray of int, shape (C,)
        Final set size of each cell (N for users ranked in full).
    r_lo, r_hi : ndarray of int, shape (C,)
        The sampled ranks the cell holds (one rank below 65, a range beyond).
    D : ndarray, shape (len(R), C)
        P(the user ends in the cell | R); rows sum to 1.

    Notes
    -----
    The stages are simulated exactly by :func:`sampling_lib.sampling.sample_design`;
    a test checks that the cell frequencies of simulated users match ``D``.

    Examples
    --------
    >>> from sampling_lib.sampling import Design
    >>> s, lo, hi, D = design_law(Design("ladder", 10, n_max=40), 1000, [1, 30, 500])
    >>> bool(np.allclose(D.sum(axis=1), 1)), sorted(set(s.tolist()))
    (True, [10, 20, 40])
    """
    N = design.check(N)
    scheme = check_scheme(scheme)
    R = np.asarray(R, dtype=np.int64)
    cells = []

    def add(size, lo, hi, P):
        cells.append((np.full(lo.size, size, dtype=np.int64), lo, hi, P))

    n = design.n
    if design.kind in ("single", "full_subset"):
        lo, hi, P = _binned_counts(n - 1, R, N, 0, scheme)
        share = 1.0 - design.fraction if design.kind == "full_subset" else 1.0
        add(n, lo, hi, share * P)
        if design.kind == "full_subset":
            ur = np.unique(R)
            add(N, ur, ur, design.fraction * (R[:, None] == ur[None, :]).astype(float))
    elif design.kind == "threshold":
        t = design.threshold
        lo, hi, P = _binned_counts(n - 1, R, N, 0, scheme)
        stop = lo > t                                   # exact cells: lo == hi for r <= 64
        add(n, lo[stop], hi[stop], P[:, stop])
        # continued users: final r = r1 + x2 with r1 <= t, x2 among n2 new draws. The cells span 1..n + n2
        # whatever t (those beyond t + n2 have probability 0), so the designs with the same n2 and other
        # thresholds share each r1's law (_STAGE_CACHE while plan predicts)
        lo2, hi2 = _r_bins(1, n + design.n2)
        P2 = np.zeros((R.size, lo2.size))
        for r1 in range(1, t + 1):
            p1 = P[:, np.flatnonzero(lo == r1)[0]]
            # the second stage's count, from the items left (without replacement r1 - 1 items above
            # and n - r1 below were drawn in the first stage)
            Rr, Nr, done = (R - (r1 - 1), N - (r1 - 1), n - r1) if scheme == "hypergeometric" else (R, N, 0)
            P2 += p1[:, None] * _second_stage(lo2, hi2, r1 - 1, design.n2, Rr, Nr, done, scheme)
        add(n + design.n2, lo2, hi2, P2)
    else:   # ladder
        sizes = size_ladder(n, design.n_max, design.growth)
        lo, hi, P = _binned_counts(n - 1, R, N, 0, scheme)
        last = sizes.size == 1
        keep = np.ones(lo.size, bool) if last else lo > 1
        add(n, lo[keep], hi[keep], P[:, keep])
        for j in range(1, sizes.size):
            prev, cur = int(sizes[j - 1]), int(sizes[j])
            reach = np.exp(_log_survive(R, N, prev - 1, scheme))          # r = 1 at size prev
            lo, hi, Pj = _binned_counts(cur - prev, R, N, prev - 1, scheme)
            keep = np.ones(lo.size, bool) if j == sizes.size - 1 else lo > 1
            add(cur, lo[keep], hi[keep], reach[:, None] * Pj[:, keep])
    s, lo, hi, D = (np.concatenate([c[k] for c in cells], axis=-1 if k == 3 else 0) for k in range(4))
    return s, lo, hi, D


def resolution_width(design, N):
    """w = (N - 1)/(n - 1) at the set size of the design's final rank-1 users (1 if some are ranked in full).

    As the ``below_resolution`` column of :func:`sampling_lib.correct.estimate`
    on the design's data: a top-K metric with K < w is below resolution.
    Final rank-1 users hold the largest sets of a threshold design (n + n2)
    and of a ladder (n_max).

    Examples
    --------
    >>> from sampling_lib.sampling import Design
    >>> resolution_width(Design("ladder", 10, n_max=100), 991), resolution_width(Design("single", 10), 991)
    (10.0, 110.0)
    """
    if design.kind == "full_subset":
        return 1.0
    top = {"single": design.n, "threshold": design.n + design.n2, "ladder": design.n_max}[design.kind]
    return (N - 1) / (top - 1)


def _cost(design, N, g, R, scheme):
    """Expected items scored per user (held-out included) under the rank masses g on rows R."""
    n = design.n
    if design.kind == "single":
        return float(n)
    if design.kind == "full_subset":
        return float((1.0 - design.fraction) * n + design.fraction * N)
    if design.kind == "threshold":
        p_cont = _count_cdf([design.threshold - 1], n - 1, R, N, 0, scheme)[:, 0]
        return float(n + design.n2 * (g @ p_cont))
    sizes = size_ladder(n, design.n_max, design.growth)
    cost = float(n)
    for j in range(1, sizes.size):
        reach = np.exp(_log_survive(R, N, int(sizes[j - 1]) - 1, scheme))
        cost += (int(sizes[j]) - int(sizes[j - 1])) * float(g @ reach)
    return cost
