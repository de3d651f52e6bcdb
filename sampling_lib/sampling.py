"""Sampled ranks from global ranks: fixed-size and adaptive item sampling.

Given a user's held-out item at global rank R among N items, sampling n-1 other
items and ranking the held-out item among the n gives the sampled rank
r = 1 + X, with X ~ Binomial(n-1, (R-1)/(N-1)) when the n-1 items are drawn
with replacement and X ~ Hypergeometric(N-1, R-1, n-1) without replacement
(KDD20 Sec 2.2). Both are simulated exactly and vectorized over users.

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation.
   KDD 2020, Sec 2.2.
.. [TORS24] Li et al. On Item-Sampling Evaluation for Recommender System.
   ACM TORS 2024, Sec 6.1, Algorithm 1 (adaptive sampling).
"""
from __future__ import annotations

import numpy as np

from ._validation import check_int, check_N_n, check_ranks, check_scheme

__all__ = ["sample_ranks", "adaptive_sample_ranks"]


def sample_ranks(global_ranks, N, n, scheme="binomial", *, rng=None):
    """Simulate sampled ranks r_u in 1..n from global ranks R_u in 1..N.

    Parameters
    ----------
    global_ranks : array_like of int
        Global ranks R_u of the held-out items, in 1..N.
    N : int
        Number of items.
    n : int
        Sample-set size: the held-out item plus n-1 sampled items, 2 <= n <= N.
    scheme : {"binomial", "hypergeometric"}
        With replacement (KDD20 eq 6) or without replacement.
    rng : None, int or numpy.random.Generator, keyword-only

    Returns
    -------
    ndarray of int64
        Sampled ranks in 1..n.

    Examples
    --------
    >>> sample_ranks([1, 1000], N=1000, n=100, rng=0)
    array([  1, 100])
    """
    N, n = check_N_n(N, n)
    R = check_ranks(global_ranks, N, name="global_ranks")
    check_scheme(scheme)
    rng = np.random.default_rng(rng)
    if scheme == "binomial":
        X = rng.binomial(n - 1, (R - 1) / (N - 1))
    else:
        X = rng.hypergeometric(R - 1, N - R, n - 1)
    return X.astype(np.int64) + 1


def adaptive_sample_ranks(global_ranks, N, n0, n_max, scheme="binomial", *, rng=None):
    """Adaptive item sampling, TORS24 Algorithm 1.

    Every user starts with a sample set of size n_0 (n_0 - 1 sampled items).
    While the held-out item is ranked first (r_u = 1) and the set is smaller
    than n_max, the set size doubles: n_{j+1} = 2 n_j, i.e. n_j further items
    are sampled and added to the set (TORS24 Sec 6.1: "we sample another set of
    n_0 items"). The user's final rank r_u and size n_u are returned.

    Decision (TORS24 leaves it implicit): doubling stops at n_max, which need
    not be n_0 times a power of 2; the last step is truncated to n_max. Under
    ``"hypergeometric"`` the added items are drawn without replacement from
    the items not yet in the set, so the set is always a uniform sample of
    size n_u - 1 from the other N-1 items.

    Because r_u = 1 means all previously sampled items rank below the held-out
    item, the rank after adding items is 1 + (number of added items ranked
    above it), which is simulated directly.

    Returns
    -------
    sampled_ranks : ndarray of int64, in 1..n_u
    sample_sizes : ndarray of int64, in n_0..n_max

    Examples
    --------
    >>> r, nu = adaptive_sample_ranks([1, 500, 1000], N=1000, n0=10, n_max=80, rng=1)
    >>> nu.tolist()[0], r.tolist()[0]            # the top item doubles up to n_max
    (80, 1)
    """
    N, n0 = check_N_n(N, n0)
    n_max = check_int(n_max, "n_max", low=n0, high=N)
    R = check_ranks(global_ranks, N, name="global_ranks")
    check_scheme(scheme)
    rng = np.random.default_rng(rng)
    size = np.full(R.size, n0, dtype=np.int64)
    r = sample_ranks(R, N, n0, scheme, rng=rng)
    active = (r == 1) & (size < n_max)
    while np.any(active):
        idx = np.flatnonzero(active)
        new_size = np.minimum(2 * size[idx], n_max)
        extra = new_size - size[idx]
        Ri = R[idx]
        if scheme == "binomial":
            above = rng.binomial(extra, (Ri - 1) / (N - 1))
        else:
            # the size[idx]-1 items already drawn all rank below the held-out item
            bad_left = (N - Ri) - (size[idx] - 1)
            above = rng.hypergeometric(Ri - 1, bad_left, extra)
        r[idx] = 1 + above
        size[idx] = new_size
        active = (r == 1) & (size < n_max)
    return r, size
