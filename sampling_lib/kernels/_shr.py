"""The sampled-rank distribution and the sampled hit ratio that follow from P(r | R).

P(r) = sum_R P(R) P(r | R) and the sampled hit ratio SHR@k = P(r <= k) (KDD20 Sec 2.2, eqs 3-6), its
law for one user and its mean and variance over M users, on the kernels of
:mod:`sampling_lib.kernels._laws`.

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation. KDD 2020, Sec 2.2, eqs 3-6.
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation Metrics under Sampling.
   AAAI 2021, eq 18.
.. [TORS24] Li et al. On Item-Sampling Evaluation for Recommender System. ACM TORS 2024, eq 18.
"""
from __future__ import annotations

import numpy as np

from .._validation import check_float, check_int, check_N_n, check_pmf, check_ranks, check_scheme
from ._laws import BLOCK_ELEMS, _CACHE_ELEMS, _cached, log_kernel_rows

__all__ = ["sampled_rank_pmf", "expected_shr_curve", "shr_cdf", "shr_mean_var", "shr_hoeffding_bound"]


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
    step = max(1, BLOCK_ELEMS // n)
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
    step = max(1, BLOCK_ELEMS // max(1, k.size))
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
