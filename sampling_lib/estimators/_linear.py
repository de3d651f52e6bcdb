"""Linear metric estimators: BV and the multinomial estimator MN (CLS: :mod:`._cls`).

BV, MN and CLS all follow Krichene and Rendle's idea (TORS24 eq 6, AAAI21 eq 8): find a
*sampled metric* x = (F^(1), ..., F^(n)) on sampled ranks so that

    T^ = (1/M) sum_u x[r_u] = sum_r P~(r) x_r  ~  T = sum_R P(R) F(R),

where P~(r) is the empirical distribution of the sampled ranks. Every
estimator here is returned as a **weight vector** ``w`` of length N with

    T^ = w @ F(1..N)          (estimate of any metric F).

For BV and MN the sampled metric is linear in F, x = G^{-1} K^T D F, with
K = P(r | R) the (N, n) kernel, D = diag(prior) and an n x n symmetric
matrix G, so that

    w = D K G^{-1} P~            (w_R = prior(R) * (K G^{-1} P~)_R).

``w`` is **not** a probability vector: entries can be negative (and larger
than 1); it always sums to 1 for BV and MN because G 1 = K^T prior (see
:func:`bv`). Only ``n x n`` systems are solved (``scipy.linalg.solve`` with
symmetric Jacobi scaling); no ``N x N`` matrix and no explicit inverse is
formed. The Gram matrix K^T D K is accumulated over row blocks on the band of
P(r | R) (entries below 1e-17 of their row maximum are skipped), so BV and MN
at N = 20720, n = 500 take a few hundredths of a second on one core
(``benchmarks/bench_linear.py``).

Two identities (sampling-lab, tested and shown in notebook 04):

* if the prior reproduces P~ (K^T prior = P~), BV (any gamma) and MN (any M)
  return ``w = prior``, the plug-in estimate;
* BV with gamma = 1 is exactly one EM step (TORS24 eq 34) from the prior.

References
----------
.. [KR20] Krichene, Rendle. On Sampled Metrics for Item Recommendation.
   KDD 2020 (the BV and CLS estimators).
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021, eqs 8-12, 15.
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, eqs 6-10, 28, 37-42, Appendices E-G.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import scipy.linalg

from .._validation import check_float, check_int, check_N_n, check_pmf, check_ranks, check_scheme
from ..kernels import kernel
from ._linalg import batched_gram

__all__ = [
    "bv",
    "bv_from_pmf",
    "bv_rank_pmf",
    "bv_sampled_metric",
    "mn",
    "mn_from_pmf",
    "mn_sampled_metric",
    "mn_sampled_metric_lstsq",
    "MSEBound",
    "mse_bound",
    "exact_mse",
    "multinomial_linear_var",
    "sampled_pmf",
    "linear_on_grid",
    "linear_on_grid_batch",
]


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------
def sampled_pmf(sampled_ranks, n):
    """Empirical sampled-rank distribution P~(r), r = 1..n (TORS24 eq 6).

    Examples
    --------
    >>> sampled_pmf([1, 1, 2, 4], 4)
    array([0.5 , 0.25, 0.  , 0.25])
    """
    n = check_int(n, "n", low=2)
    r = check_ranks(sampled_ranks, n, name="sampled_ranks", upper_name="n")
    return np.bincount(r - 1, minlength=n) / r.size


def _prior(prior, N):
    if prior is None:
        return np.full(N, 1.0 / N)
    return check_pmf(prior, N, name="prior")


def _check_sampled_pmf(p_tilde, n):
    p = np.asarray(p_tilde, dtype=float)
    if p.ndim != 1 or p.size != n:
        raise ValueError(f"sampled_pmf must be a 1-D array of length n={n}; got shape {p.shape}")
    return check_pmf(p, n, name="sampled_pmf")


def _check_F(F, N):
    F = np.asarray(F, dtype=float)
    if F.ndim != 1 or F.size != N:
        raise ValueError(f"F must be a 1-D array of length N={N}; got shape {F.shape}")
    if not np.all(np.isfinite(F)):
        raise ValueError("F must be finite; got NaN/inf entries")
    return F


_BAND_TOL = 1e-17   # kernel entries below this fraction of their row maximum are skipped
_ROW_BLOCK = 256


@lru_cache(maxsize=8)
def _row_support(N, n, scheme):
    """Per-row column window [lo, hi) of the kernel holding every entry >= _BAND_TOL * row max.

    P(r | R) is unimodal in r with a width of a few binomial standard deviations,
    so K^T diag(v) K is accumulated block-wise on these windows (a banded
    product): the skipped entries change G by less than 1e-17 relative.
    """
    K = kernel(N, n, scheme)
    lo = np.empty(N, dtype=np.int64)
    hi = np.empty(N, dtype=np.int64)
    step = max(1, (1 << 22) // n)            # bounded temporaries for large N
    for a in range(0, N, step):
        blk = K[a : a + step]
        big = blk >= _BAND_TOL * blk.max(axis=1, keepdims=True)
        lo[a : a + step] = np.argmax(big, axis=1)
        hi[a : a + step] = n - np.argmax(big[:, ::-1], axis=1)
    return lo, hi


def _weighted_gram(K, v, support):
    """K^T diag(v) K for v >= 0, accumulated over row blocks on their column windows."""
    lo, hi = support
    N, n = K.shape
    G = np.zeros((n, n))
    sv = np.sqrt(np.clip(v, 0.0, None))
    for a in range(0, N, _ROW_BLOCK):
        b = min(N, a + _ROW_BLOCK)
        w = sv[a:b]
        if not np.any(w > 0):
            continue
        c0, c1 = int(lo[a:b].min()), int(hi[a:b].max())
        A = K[a:b, c0:c1] * w[:, None]
        G[c0:c1, c0:c1] += A.T @ A
    return G


@lru_cache(maxsize=8)
def _plain_gram(N, n, scheme):
    """(K^T K, K^T 1) for the cached kernel; prior-independent, cached."""
    K = kernel(N, n, scheme)
    G = _weighted_gram(K, np.ones(N), _row_support(N, n, scheme))
    s = K.sum(axis=0)
    G.setflags(write=False)
    s.setflags(write=False)
    return G, s


def _solve_sym(G, B, what):
    """Solve G X = B for symmetric G with Jacobi scaling; clear error if singular.

    Raises ``numpy.linalg.LinAlgError`` (a ``ValueError``) naming the estimator
    and giving the 2-norm condition number of the scaled matrix when LAPACK
    reports a singular or numerically singular system (rcond < machine eps).
    """
    d = np.sqrt(np.abs(np.diag(G)))
    if not np.all(np.isfinite(G)) or np.any(d == 0):
        zero = np.flatnonzero(d == 0) + 1
        raise np.linalg.LinAlgError(
            f"{what}: the n x n system is singular: sampled ranks r={zero[:5].tolist()} "
            "have zero weight under the prior (condition number inf); use a prior with "
            "wider support or a larger gamma"
        )
    s = 1.0 / d
    Gs = G * s[:, None] * s[None, :]
    Bs = B * (s[:, None] if B.ndim == 2 else s)
    # LAPACK's symmetric solver and its reciprocal condition number, as scipy.linalg.solve(assume_a="sym")
    # does, but without its warning: no warnings filter is touched, so groups may be solved on threads
    udut, ipiv, X, info = scipy.linalg.lapack.dsysv(Gs, Bs if B.ndim == 2 else Bs[:, None])
    rcond = scipy.linalg.lapack.dsycon(udut, ipiv, np.abs(Gs).sum(axis=0).max())[0] if info == 0 else 0.0
    if info != 0 or not rcond >= np.finfo(float).eps:
        cond = np.linalg.cond(Gs)
        raise np.linalg.LinAlgError(
            f"{what}: the n x n system is singular or numerically singular "
            f"(condition number {cond:.3e} after diagonal scaling); use a prior with "
            "wider support, a larger gamma, a smaller n, or a different M"
        )
    return X * s[:, None] if B.ndim == 2 else X[:, 0] * s


_LAST_GRAM = {}      # the last Gram matrix: a group's fit and its sampled metrics share it


def _remembered_gram(kind, N, n, scheme, p, extra, build):
    """``build()``, or the last Gram matrix when (kind, N, n, scheme, prior, extra) are the same.

    Per-user N_u fits BV / MN once per group and then asks for the group's
    sampled metrics (one solve per metric) with the same kernel and prior:
    without this each built the same n x n matrix again (2,295 groups
    of N_u). The prior is compared by value (its bytes), so a changed prior
    never reuses a stale matrix. Read-only.
    """
    key = (kind, N, n, scheme, float(extra), hashlib.blake2b(p.tobytes(), digest_size=16).digest())
    G = _LAST_GRAM.get(key)
    if G is None:
        G = build()
        G.setflags(write=False)
        _LAST_GRAM.clear()
        _LAST_GRAM[key] = G
    return G


def _linear_gram(kind, K, KDK, extra, KtK=None):
    """The n x n matrix G of BV (TORS24 eqs 9-10) or MN (eq 42) from K^T D K (and MN's K^T K).

    BV: G = (1 - gamma) K^T D K + gamma diag(K^T D 1), with K^T D 1 the prior's column sums
    ``K.T @ p`` (passed as ``extra=(gamma, c)``); MN: G = K^T D K - K^T K / M + diag(K^T 1) / M.
    """
    if kind == "bv":
        gamma, c = extra
        G = (1.0 - gamma) * KDK
        G[np.diag_indices_from(G)] += gamma * c
        return G
    G = KDK - KtK / extra
    G[np.diag_indices_from(G)] += K.sum(axis=0) / extra
    return G


def _bv_gram(N, n, scheme, K, p, gamma):
    def build():
        return _linear_gram("bv", K, _weighted_gram(K, p, _row_support(N, n, scheme)), (gamma, K.T @ p))
    return _remembered_gram("bv", N, n, scheme, p, gamma, build)


def _mn_gram(N, n, scheme, K, p, M):
    def build():
        return _linear_gram("mn", K, _weighted_gram(K, p, _row_support(N, n, scheme)), M,
                            KtK=_plain_gram(N, n, scheme)[0])
    return _remembered_gram("mn", N, n, scheme, p, M, build)


def _setup(N, n, prior, scheme):
    N, n = check_N_n(N, n)
    scheme = check_scheme(scheme)
    K = kernel(N, n, scheme)        # refuses an impossible N x n kernel before anything of length N
    return N, n, scheme, _prior(prior, N), K


# ----------------------------------------------------------------------------
# BV
# ----------------------------------------------------------------------------
def bv_from_pmf(sampled_pmf, N, n, gamma=0.01, prior=None, *, scheme="binomial"):
    """BV weight vector from a sampled-rank distribution P~(r) (see :func:`bv`)."""
    N, n, scheme, p, K = _setup(N, n, prior, scheme)
    gamma = check_float(gamma, "gamma", 0.0, 1.0)
    pt = _check_sampled_pmf(sampled_pmf, n)
    y = _solve_sym(_bv_gram(N, n, scheme, K, p, gamma), pt, "bv")
    return p * (K @ y)


def bv(sampled_ranks, N, n, gamma=0.01, prior=None, *, scheme="binomial"):
    """Krichene-Rendle bias-variance estimator as a weight vector (TORS24 eqs 8-10).

    The sampled metric x minimizes

        sum_R P(R) [ (E[x_r | R] - F(R))^2 + gamma Var[x_r | R] ]

    whose solution is x = ((1-gamma) A^T A + gamma diag(c))^{-1} A^T b with
    A_{R,r} = sqrt(P(R)) P(r|R), b_R = sqrt(P(R)) F(R), c = K^T P (TORS24 eqs
    9-10, AAAI21 eqs 11-12). The estimate sum_r P~(r) x_r is linear in F, so

        w = D K G^{-1} P~,   G = (1-gamma) K^T D K + gamma diag(c),  D = diag(P).

    Parameters
    ----------
    sampled_ranks : array_like of int in 1..n
        Sampled ranks r_u of the M test users.
    N, n : int
        Number of items; sample-set size (held-out item plus n-1 sampled items).
    gamma : float in [0, 1], default 0.01
        Weight of the variance term (TORS24 Sec 8.3 uses 0.01).
    prior : array_like of length N, optional
        The rank distribution P(R) used in the objective. Default: uniform
        (Krichene and Rendle); pass ``mle(...)`` or ``mes(...)`` for
        BV_MLE / BV_MES (TORS24 Sec 8.1.5).
    scheme : {"binomial", "hypergeometric"}, keyword-only
        Sampling with (TORS24 eq 29) or without replacement.

    Returns
    -------
    w : ndarray, shape (N,)
        Estimate of any metric F is ``w @ F(1..N)``. ``w`` may have negative
        entries; it sums to 1 (constants are estimated exactly), because
        G 1 = (1-gamma) K^T D 1 + gamma c = c and so 1^T w = P~^T G^{-1} c = 1.
        By linearity in F, ``w`` is also the P(R) form of BV, TORS24 eq 28
        (:func:`bv_rank_pmf` computes eq 28 literally).

    Raises
    ------
    numpy.linalg.LinAlgError
        If the n x n system is (numerically) singular, with its condition
        number, e.g. gamma = 0 with a uniform prior and n ~ 100.

    Notes
    -----
    Decision (the papers assume one scheme): under ``"hypergeometric"`` the same
    formulas are used with the without-replacement kernel.

    With gamma = 1, G = diag(c) and w_R = P(R) sum_r P(r|R) P~(r) / c_r: exactly
    one EM update (TORS24 eq 34, AAAI21 eq 21) from the prior. With a prior that
    reproduces P~ (K^T P = P~), w = P for every gamma (see :func:`mn`).

    References
    ----------
    TORS24 eqs 8-10 and 28; AAAI21 eqs 10-12 and 15; Krichene and Rendle
    (KDD 2020).

    Examples
    --------
    >>> from sampling_lib.metrics import metric_values
    >>> w = bv([1, 1, 2, 5, 9], N=200, n=10, gamma=0.01)
    >>> w.shape, round(float(w.sum()), 10)
    ((200,), 1.0)
    >>> bool(w.min() < 0)                    # a weight vector, not a distribution
    True
    >>> est = float(w @ metric_values("recall@20", 200))   # estimate of Recall@20
    """
    n_chk = check_int(n, "n", low=2)
    pt = sampled_pmf(sampled_ranks, n_chk)
    return bv_from_pmf(pt, N, n, gamma, prior, scheme=scheme)


def bv_rank_pmf(sampled_ranks, N, n, gamma=0.01, prior=None, *, scheme="binomial"):
    """BV as an estimate of the rank distribution P(R), TORS24 eq 28 (AAAI21 eq 15).

    P^(R) = Recall^_BV@R - Recall^_BV@(R-1)
          = P~^T ((1-gamma) A^T A + gamma diag(c))^{-1} A^T b_R,

    with b_R = sqrt(P(R)) e_R. This function evaluates eq 28 literally for all
    R at once (one n x n solve with N right-hand sides, O(n^2 N)); by linearity
    it equals :func:`bv`'s weight vector, which is cheaper (one right-hand
    side). It is not a pmf: entries may be negative.

    References
    ----------
    TORS24 eq 28; AAAI21 eq 15.

    Examples
    --------
    >>> r = [1, 2, 2, 3, 7]
    >>> bool(np.allclose(bv_rank_pmf(r, 50, 8), bv(r, 50, 8)))
    True
    """
    N, n, scheme, p, K = _setup(N, n, prior, scheme)
    gamma = check_float(gamma, "gamma", 0.0, 1.0)
    pt = sampled_pmf(sampled_ranks, n)
    At = K.T * np.sqrt(p)[None, :]                     # A^T, (n, N)
    Y = _solve_sym(_bv_gram(N, n, scheme, K, p, gamma), At, "bv_rank_pmf")  # G^{-1} A^T
    return (pt @ Y) * np.sqrt(p)                       # column R times b_R = sqrt(P(R))


def bv_sampled_metric(F, N, n, gamma=0.01, prior=None, *, scheme="binomial"):
    """The BV sampled metric x (length n) for metric values F(1..N) (TORS24 eq 9).

    Examples
    --------
    >>> from sampling_lib.metrics import metric_values
    >>> x = bv_sampled_metric(metric_values("recall@5", 100), 100, 10)
    >>> x.shape
    (10,)
    """
    N, n, scheme, p, K = _setup(N, n, prior, scheme)
    gamma = check_float(gamma, "gamma", 0.0, 1.0)
    F = _check_F(F, N)
    return _solve_sym(_bv_gram(N, n, scheme, K, p, gamma), K.T @ (p * F), "bv_sampled_metric")


# ----------------------------------------------------------------------------
# MN
# ----------------------------------------------------------------------------
def _check_M(M, default):
    return default if M is None else check_int(M, "M", low=1)


def mn_from_pmf(sampled_pmf, N, n, prior, M, *, scheme="binomial"):
    """MN weight vector from a sampled-rank distribution P~(r) (see :func:`mn`)."""
    N, n, scheme, p, K = _setup(N, n, prior, scheme)
    M = check_int(M, "M", low=1)
    pt = _check_sampled_pmf(sampled_pmf, n)
    y = _solve_sym(_mn_gram(N, n, scheme, K, p, M), pt, "mn")
    return p * (K @ y)


def mn(sampled_ranks, N, n, prior, M=None, *, scheme="binomial"):
    """Multinomial (MN) estimator as a weight vector, TORS24 eq 42.

    The sampled metric x minimizes the MSE bound L = L1 + L2 (TORS24 eqs
    38-41),

        L1 = sum_R P(R) (E[x_r | R] - F(R))^2,
        L2 = (1/M) sum_R Var[x_r | R],

    with the closed form x = (K^T D K - K^T K / M + Lambda_1 / M)^{-1} K^T D F,
    Lambda_1 = diag(sum_R P(r|R)) (TORS24 eq 42). Hence

        w = D K G^{-1} P~,   G = K^T (D - I/M) K + Lambda_1 / M.

    Parameters
    ----------
    sampled_ranks : array_like of int in 1..n
    N, n : int
    prior : array_like of length N or None
        P(R) in the objective: ``mle(...)`` gives MN_MLE, ``mes(...)`` MN_MES
        (TORS24 Sec 8.1.5); ``None`` means uniform.
    M : int, optional
        Number of users in the variance term; default ``len(sampled_ranks)``.
    scheme : {"binomial", "hypergeometric"}, keyword-only

    Returns
    -------
    w : ndarray, shape (N,)
        Weights (may be negative) with estimate ``w @ F(1..N)``; sums to 1
        because G 1 = K^T D 1 + (Lambda_1 1 - K^T K 1)/M = K^T P.

    Raises
    ------
    numpy.linalg.LinAlgError
        If the n x n system is (numerically) singular; the message gives its
        condition number.

    Notes
    -----
    L2 sums Var[x|R] over *all* R = 1..N (TORS24 Appendix F cancels P(R)),
    including ranks the prior gives zero mass; we follow the paper.

    Identity (not stated in TORS24): if the prior reproduces the observed
    sampled-rank distribution, K^T prior = P~, then G 1 = K^T prior = P~ gives
    G^{-1} P~ = 1 and w = D K 1 = prior: MN (and BV for every gamma) returns
    the plug-in estimate sum_R prior(R) F(R).

    References
    ----------
    TORS24 eqs 37-42 and Appendices E-G.

    Examples
    --------
    >>> w = mn([1, 1, 2, 5, 9], N=200, n=10, prior=None)
    >>> w.shape, round(float(w.sum()), 10)
    ((200,), 1.0)
    """
    n_chk = check_int(n, "n", low=2)
    pt = sampled_pmf(sampled_ranks, n_chk)
    M = _check_M(M, int(np.asarray(sampled_ranks).size))
    return mn_from_pmf(pt, N, n, prior, M, scheme=scheme)


def mn_sampled_metric(F, N, n, prior, M, *, scheme="binomial"):
    """The MN sampled metric x (length n) for metric values F(1..N), TORS24 eq 42.

    Examples
    --------
    >>> from sampling_lib.metrics import metric_values
    >>> mn_sampled_metric(metric_values("recall@5", 100), 100, 10, None, M=1000).shape
    (10,)
    """
    N, n, scheme, p, K = _setup(N, n, prior, scheme)
    M = check_int(M, "M", low=1)
    F = _check_F(F, N)
    return _solve_sym(_mn_gram(N, n, scheme, K, p, M), K.T @ (p * F), "mn_sampled_metric")


def mn_sampled_metric_lstsq(F, N, n, prior, M, *, scheme="binomial"):
    """Reference solution of TORS24 eq 41 as a generic stacked least-squares problem.

    L = ||sqrt(D)(Kx - F)||^2 + (1/M) sum_R sum_r P(r|R) (x_r - (Kx)_R)^2, i.e.
    rows sqrt(P(R)) K_R and sqrt(P(r|R)/M) (e_r - K_R) stacked into an
    (N + N n) x n matrix and solved by ``numpy.linalg.lstsq``. Memory
    O(N n^2): for checking :func:`mn_sampled_metric` on small N only.

    Examples
    --------
    >>> from sampling_lib.metrics import metric_values
    >>> F = metric_values("ndcg@3", 12)
    >>> bool(np.allclose(mn_sampled_metric_lstsq(F, 12, 4, None, 50),
    ...                  mn_sampled_metric(F, 12, 4, None, 50)))
    True
    """
    N, n, scheme, p, K = _setup(N, n, prior, scheme)
    M = check_int(M, "M", low=1)
    F = _check_F(F, N)
    if N * n * n > 5e7:
        raise ValueError(f"N*n^2 must be <= 5e7 for the reference solver; got {N * n * n}")
    top = np.sqrt(p)[:, None] * K
    eye = np.eye(n)
    rows = (eye[None, :, :] - K[:, None, :]) * np.sqrt(K / M)[:, :, None]  # (N, n, n)
    A = np.vstack([top, rows.reshape(N * n, n)])
    b = np.concatenate([np.sqrt(p) * F, np.zeros(N * n)])
    return np.linalg.lstsq(A, b, rcond=None)[0]


@dataclass(frozen=True)
class MSEBound:
    """The terms of TORS24 eq 39 for a sampled metric x.

    Attributes
    ----------
    L1, L2, L : float
        Bias term sum_R P(R) bias_R^2, variance term (1/M) sum_R var_R, and
        L = L1 + L2 (upper bound on the MSE, TORS24 eq 38).
    bias : ndarray, shape (N,)
        E[x_r | R] - F(R).
    var : ndarray, shape (N,)
        Var[x_r | R].
    """

    L1: float
    L2: float
    L: float
    bias: np.ndarray
    var: np.ndarray


def _moments_given_R(K, x, n):
    """E[x_r | R] and Var[x_r | R] for every R, r ~ P(r | R) (rows of K)."""
    x = np.asarray(x, dtype=float)
    if x.shape != (n,):
        raise ValueError(f"x must have length n={n}; got shape {x.shape}")
    mean = K @ x
    return mean, np.clip(K @ (x * x) - mean**2, 0.0, None)


def mse_bound(x, F, N, n, prior, M, *, scheme="binomial"):
    """L1, L2 and L = L1 + L2 of TORS24 eqs 38-39 for a sampled metric x.

    Examples
    --------
    >>> from sampling_lib.metrics import metric_values
    >>> F = metric_values("recall@3", 30)
    >>> b = mse_bound(mn_sampled_metric(F, 30, 5, None, 100), F, 30, 5, None, 100)
    >>> bool(b.L == b.L1 + b.L2 and b.L2 > 0)
    True
    """
    N, n, scheme, p, K = _setup(N, n, prior, scheme)
    M = check_int(M, "M", low=1)
    F = _check_F(F, N)
    mean, var = _moments_given_R(K, x, n)
    bias = mean - F
    L1 = float(p @ bias**2)
    L2 = float(var.sum() / M)
    return MSEBound(L1, L2, L1 + L2, bias, var)


def exact_mse(x, F, pmf, n, M, *, scheme="binomial"):
    """Exact MSE of T^ = (1/M) sum_u x[r_u] for M users with global-rank pmf W_R.

    For a fixed population (M W_R users at rank R) and independent sampling,
    MSE = (sum_R W_R (E[x|R] - F(R)))^2 + (1/M) sum_R W_R Var[x|R]
    (first line of TORS24 eq 38 before Jensen's inequality).

    Examples
    --------
    >>> from sampling_lib.metrics import metric_values
    >>> F = metric_values("recall@3", 30); W = np.full(30, 1 / 30)
    >>> x = mn_sampled_metric(F, 30, 5, W, 300)
    >>> bool(exact_mse(x, F, W, 5, 300) <= mse_bound(x, F, 30, 5, W, 300).L)
    True
    """
    pmf = check_pmf(pmf, name="pmf")
    N, n, scheme, _, K = _setup(pmf.size, n, None, scheme)
    M = check_int(M, "M", low=1)
    F = _check_F(F, N)
    mean, var = _moments_given_R(K, x, n)
    return float((pmf @ (mean - F)) ** 2 + (pmf @ var) / M)


def multinomial_linear_var(w, theta, M):
    """Var[sum_i w_i X_i] for X ~ Multinomial(M, theta), TORS24 Appendix E.

    Var = M (sum_i w_i^2 theta_i - (sum_i w_i theta_i)^2).

    Examples
    --------
    >>> multinomial_linear_var([1.0, 0.0], [0.3, 0.7], 10)    # binomial: M p (1-p)
    2.1
    """
    theta = check_pmf(theta, name="theta")
    w = np.asarray(w, dtype=float)
    if w.shape != theta.shape:
        raise ValueError(f"w must have the shape of theta {theta.shape}; got {w.shape}")
    M = check_int(M, "M", low=1)
    return float(M * (w**2 @ theta - (w @ theta) ** 2))


# ----------------------------------------------------------------------------
# BV and MN on the compressed rank grid
# ----------------------------------------------------------------------------
def _grid_gram(kind, Kg, size, p, gamma, M):
    """G of BV or MN on grid atoms: rows Kg (G, n), multiplicities ``size``, atom prior p (G,)."""
    if kind == "bv":
        G = (1.0 - gamma) * ((Kg.T * p) @ Kg)
        G[np.diag_indices_from(G)] += gamma * (p @ Kg)
        return G
    G = (Kg.T * (p - size / M)) @ Kg
    G[np.diag_indices_from(G)] += (size @ Kg) / M
    return G


def linear_on_grid(kind, p_tilde, prior, grid, Kg, *, gamma=0.01, M=None):
    """BV or MN weight vector (length N) on the compressed kernel K' of ``grid``.

    K' repeats a bin's representative row for every rank of the bin
    (:func:`sampling_lib.kernels.rank_grid`). Every term of G sums over
    ranks R, and on K' the ranks of bin j contribute their prior mass
    p_j = sum_{R in j} prior(R) (K^T D K, K^T prior) or their number s_j
    (K^T K and K^T 1 of MN, which sum over all R, TORS24 Appendix F):

        BV: G = (1 - gamma) Kg^T diag(p) Kg + gamma diag(Kg^T p)          (TORS24 eqs 9-10)
        MN: G = Kg^T diag(p - s / M) Kg + diag(Kg^T s) / M                (TORS24 eq 42)

    and w_R = prior(R) (K' y)_R, y = G^{-1} P~: the estimator on K' exactly,
    with an n x n system and O(G n^2) work. ``kind`` is "bv" or "mn".
    """
    prior = np.asarray(prior, dtype=float)
    p = grid.bin_sums(prior)
    G = _grid_gram(kind, Kg, grid.size.astype(float), p, gamma, M)
    y = _solve_sym(G, np.asarray(p_tilde, dtype=float), kind)
    return grid.expand(p * (Kg @ y), within=prior)


_GRAM_CHUNK = 1 << 23      # elements of the (batch, n(n+1)/2) temporaries (the (batch, n, n) ones are 2x)


def linear_on_grid_batch(kind, P_tilde, priors, Kg, size, Fcell, *, gamma=0.01, M=None, outer=None):
    """Estimates (B, m) of BV or MN on the grid for B replicates at once.

    ``P_tilde`` (B, n) sampled-rank distributions, or (B, k, n): k distributions per replicate
    sharing its prior (estimates (B, k, m)); ``priors`` (B, G) atom
    priors (bin masses), ``Fcell`` (G, m) the metrics averaged over each bin
    with the within-bin shape of the priors. The B Gram matrices
    sum_j p_bj k_j k_j^T are one matrix product with the (G, n(n+1)/2) table
    of the rows' outer products; the B systems are solved at once
    (Jacobi-scaled), each as :func:`linear_on_grid`. ``M`` may be an array
    (B,) (MN); ``outer`` is :func:`sampling_lib.estimators._linalg.grid_outer` (``Kg``) when already computed.
    Returns the estimates (B, m) or (B, k, m).
    """
    P_tilde = np.asarray(P_tilde, dtype=float)
    single = P_tilde.ndim == 2
    if single:
        P_tilde = P_tilde[:, None, :]
    priors = np.asarray(priors, dtype=float)
    B, k, n = P_tilde.shape
    size = np.asarray(size, dtype=float)
    Mv = None if M is None else np.broadcast_to(np.asarray(M, dtype=float), (B,))
    out = np.empty((B, k, Fcell.shape[1]))
    step = max(1, _GRAM_CHUNK // max(1, n * (n + 1) // 2))
    for a in range(0, B, step):
        b = min(B, a + step)
        p = priors[a:b]
        if kind == "bv":
            G = (1.0 - gamma) * batched_gram(p, Kg, outer)
            G[:, np.arange(n), np.arange(n)] += gamma * (p @ Kg)
        else:
            m = Mv[a:b, None]
            G = batched_gram(p - size[None, :] / m, Kg, outer)
            G[:, np.arange(n), np.arange(n)] += (size @ Kg)[None, :] / m
        d = np.sqrt(np.abs(np.einsum("bii->bi", G)))
        d[d == 0] = 1.0
        Gs = G / d[:, :, None] / d[:, None, :]
        rhs = np.swapaxes(P_tilde[a:b], 1, 2)          # (b - a, n, k)
        try:
            y = np.linalg.solve(Gs, rhs / d[:, :, None]) / d[:, :, None]
        except np.linalg.LinAlgError:
            y = np.stack([_solve_sym(G[i], rhs[i], kind) for i in range(b - a)])
        out[a:b] = (p[:, None, :] * (np.swapaxes(y, 1, 2) @ Kg.T)) @ Fcell
    return out[:, 0] if single else out
