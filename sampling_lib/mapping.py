"""Mapping functions f(k): the sampled hit ratio SHR@k approximates HR@f(k).

For a sample-set size n (the held-out item plus n-1 sampled items) and N items,
KDD20 Sec 2.4 looks for locations f(1) < f(2) < ... < f(n) on the global rank
axis 1..N such that SHR@k ~ HR@f(k) for every recommender on a dataset. Every
function here returns f(k) for k = 1..n as a float array of length n
(index 0 is k = 1):

* :func:`linear` - the baseline, KDD20 eq 9 (TORS24 eq 18);
* :func:`bound` - the boundary-condition approximation, KDD20 eq 13 (floored);
* :func:`beta` - the Beta(a, 1) recurrence, KDD20 eqs 16-17, in log space;
* :func:`uniform` - the closed form for a = 1, KDD20 eq 18;
* :func:`fit_beta_a` - the algorithm-specific exponent a ("Beta@P"), KDD20 eq 19;
* :func:`oracle` - the best integer f(k) for a known rank distribution, KDD20 Sec 3.

and the two views of KDD20 Fig 7: :func:`sampled_on_global_axis` (the sampled
curve placed at the global locations f(k)) and :func:`global_on_sampled_axis`
(HR@f(k) read off the global curve and placed at k), with
:func:`alignment_errors` for the error summary of KDD20 Table 7.

Decisions where the papers are silent or ambiguous
--------------------------------------------------
* HR at a real location x is the empirical CDF at x: ``HR@x = HR@floor(x)``
  (HR@0 = 0, HR@x = HR@N for x >= N). The Beta maps are real-valued; HR@K is
  a right-continuous step function of K, so this is its exact value there.
* :func:`bound` clips eq 13 to N: unclipped, eq 13 gives f(n) > N whenever
  N > n (for example f(100) = 3724 for N = 3706), which is not a rank. HR@K = 1
  for every K >= N, so clipping never changes HR@f(k).
* :func:`beta` uses the identity (derived below) that the Beta recurrence is
  the CDF of a Beta-binomial law raised to 1/a; the literal recurrence of
  KDD20 eq 16 is kept as ``method="recurrence"`` for verification.
* TORS24 eq 24 / eq 54 prints the recurrence without the ``+`` between the two
  bracketed terms; KDD20 eq 16 has the correct form (the telescoping sum of
  eq 15 and Lemma 3.1 require it). We implement KDD20 eq 16.

The log-space Beta map
----------------------
Write y_k = [f(k;a) - 1]^a - [f(k-1;a) - 1]^a with f(0;a) := 1. Eq 17 gives
y_1 = a (N-1)^a B(a, n) and eq 15 gives y_{k+1} = a (N-1)^a C(n-1, k) B(a+k, n-k),
so y_{k+1} / (a (N-1)^a) = a C(n-1, k) B(a+k, n-k) / a = p_k / a where

    p_j = a C(n-1, j) B(a + j, n - j),   j = 0..n-1,

is the pmf of a Beta-binomial(n-1, alpha=a, beta=1) law (it sums to 1, which
is Lemma 3.1). Hence

    f(k; a) = 1 + (N - 1) * F(k - 1)^(1/a),   F(k-1) = p_0 + ... + p_{k-1}.

Successive terms satisfy p_j / p_{j-1} = 1 + (a - 1)/j (the ratio KDD20 Sec 3.3
derives for y), so log p_j is a cumulative sum of ``log1p((a-1)/j)``,
normalised by its log-sum-exp; log F is a log-cumulative-sum-exp, taken from
the upper tail (``log1p(-tail)``) once F > 1/2. The relative error of f - 1
stays near 1e-14 for n = 3000, N = 10^7 (checked against exact rational
arithmetic in the tests), and f is finite and increasing for n = 10^4,
N = 10^7 and any a in (0, 2].

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation.
   KDD 2020, Sec 2.4 (problem), Sec 3 (eqs 9, 13, 15-18, Lemma 3.1), Sec 4
   (eq 19, Remedies 1-3), Sec 5 (Fig 7, Table 7).
.. [TORS24] Li et al. On Item-Sampling Evaluation for Recommender System.
   ACM TORS 2024, Sec 3.4-3.5, Appendix B-C (eqs 53-56), Table 3.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from ._validation import check_float, check_int, check_N_n, check_pmf, check_ranks, check_scheme

__all__ = [
    "linear",
    "bound",
    "beta",
    "uniform",
    "fit_beta_a",
    "BetaFitResult",
    "oracle",
    "hr_at",
    "sampled_on_global_axis",
    "global_on_sampled_axis",
    "alignment_errors",
    "alignment_table",
    "monotonicity_violation",
    "standard_maps",
]


def linear(N, n):
    """Baseline map f(k) = (k - 1)(N - 1)/(n - 1) + 1 (KDD20 eq 9).

    It replaces Pr(r_u <= k) by the indicator of E[r_u] <= k, where
    E[r_u] = 1 + (n - 1)(R_u - 1)/(N - 1).

    Parameters
    ----------
    N : int
        Number of items, N >= 2.
    n : int
        Sample-set size (held-out item plus n - 1 sampled items), 2 <= n <= N.

    Returns
    -------
    ndarray of float, shape (n,)
        f(k) for k = 1..n; f(1) = 1 and f(n) = N.

    References
    ----------
    KDD20 eq 9; TORS24 eq 18.

    Examples
    --------
    >>> linear(11, 3)
    array([ 1.,  6., 11.])
    """
    N, n = check_N_n(N, n)
    k = np.arange(1, n + 1, dtype=float)
    return (k - 1.0) * ((N - 1.0) / (n - 1.0)) + 1.0


def bound(N, n, *, clip=True):
    """Boundary-condition map f(k) = floor((k - 1/2)(N - 1)/(n - 1) + 1/2) (KDD20 eq 13).

    The midpoint of the Hoeffding lower and upper bounds of KDD20 eq 12,
    floored as the paper's boxed formula does. Computed in exact integer
    arithmetic: floor(((2k - 1)(N - 1) + (n - 1)) / (2(n - 1))).

    Parameters
    ----------
    N, n : int
        Number of items and sample-set size, 2 <= n <= N.
    clip : bool, keyword-only
        Clip to N (default). Unclipped, eq 13 exceeds N at k = n whenever
        N > n; HR@K = 1 for K >= N, so clipping never changes HR@f(k).

    Returns
    -------
    ndarray of float, shape (n,)
        Integer-valued f(k) for k = 1..n, f(1) >= 1.

    References
    ----------
    KDD20 eqs 10-13; TORS24 Sec 3.5.

    Examples
    --------
    >>> bound(3706, 100)[:3]
    array([19., 56., 94.])
    >>> bound(3706, 100)[-1], bound(3706, 100, clip=False)[-1]
    (np.float64(3706.0), np.float64(3724.0))
    """
    N, n = check_N_n(N, n)
    k = np.arange(1, n + 1, dtype=np.int64)
    f = ((2 * k - 1) * (N - 1) + (n - 1)) // (2 * (n - 1))
    if clip:
        f = np.minimum(f, N)
    return f.astype(float)


def uniform(N, n):
    """Closed-form map for a = 1: f(k; 1) = k (N - 1)/n + 1 (KDD20 eq 18).

    Equals ``beta(N, n, 1.0)`` (the Beta(1, 1) law is uniform).

    Parameters
    ----------
    N, n : int
        Number of items and sample-set size, 2 <= n <= N.

    Returns
    -------
    ndarray of float, shape (n,)

    References
    ----------
    KDD20 eq 18; TORS24 eq 56.

    Examples
    --------
    >>> uniform(3706, 100)[:2]
    array([38.05, 75.1 ])
    """
    N, n = check_N_n(N, n)
    k = np.arange(1, n + 1, dtype=float)
    return k * ((N - 1.0) / n) + 1.0


def _log_betabinom_cdf(n, a):
    """log F(j), j = 0..n-1, of the Beta-binomial(n - 1, a, 1) law (see module notes)."""
    if n > 1:
        steps = np.log1p((a - 1.0) / np.arange(1, n, dtype=float))
        logp = np.concatenate(([0.0], np.cumsum(steps)))
    else:  # pragma: no cover - n >= 2 is enforced
        logp = np.zeros(1)
    logp -= special.logsumexp(logp)
    head = np.logaddexp.accumulate(logp)                     # log P(X <= j)
    tail = np.logaddexp.accumulate(logp[::-1])[::-1]         # log P(X >= j)
    tail_next = np.append(tail[1:], -np.inf)                 # log P(X > j)
    with np.errstate(divide="ignore"):
        from_tail = np.log1p(-np.exp(tail_next))
    return np.where(tail_next < np.log(0.5), from_tail, head)


def _log_g(N, n, a):
    """log[(f(k; a) - 1)/(N - 1)] = log F(k - 1) / a for k = 1..n."""
    return _log_betabinom_cdf(n, a) / a


def beta(N, n, a, *, method="logcdf"):
    """Beta(a, 1) map f(k; a) from the recurrence of KDD20 eqs 16-17.

    f(1; a) = (N - 1)[a B(a, n)]^(1/a) + 1 and
    f(k + 1; a) = [a (N - 1)^a C(n - 1, k) B(a + k, n - k) + (f(k; a) - 1)^a]^(1/a) + 1.

    Parameters
    ----------
    N, n : int
        Number of items and sample-set size, 2 <= n <= N.
    a : float
        Beta(a, 1) exponent, a > 0 (accuracy is tested for a in (0, 2]).
    method : {"logcdf", "recurrence", "exact"}, keyword-only
        ``"logcdf"`` (default): the closed form
        f(k; a) = 1 + (N - 1) F(k - 1)^(1/a), F the Beta-binomial(n - 1, a, 1)
        CDF, in log space (module notes); finite and accurate to ~1e-13 for
        n up to 10^4 and N up to 10^7. ``"recurrence"``: the literal eq 16
        evaluated step by step in floating point with log-beta terms, kept as
        an independent check (Lemma 3.1 is a property of this recurrence);
        it loses accuracy for small a (relative error ~1e-9 at a = 0.01,
        n = 10^4). ``"exact"``: a high-precision reference for n <= 10^4 -
        the Beta-binomial CDF and the power 1/a in 60-digit ``decimal``
        arithmetic for the exact binary value of ``a``, rounded once to
        float (about 0.1 s for n = 1000).

    Returns
    -------
    ndarray of float, shape (n,)
        Increasing, f(n; a) = N (KDD20 Lemma 3.1).

    References
    ----------
    KDD20 eqs 14-17, Lemma 3.1; TORS24 eqs 53-55 (eq 54 drops the '+').

    Examples
    --------
    >>> beta(3706, 100, 1.0)[:2]            # equals KDD20 eq 18 for a = 1
    array([38.05, 75.1 ])
    >>> f = beta(9916, 1000, 0.5); f[:2].round(2)   # TORS24 Table 3 prints 9 and 19
    array([ 8.79, 18.53])
    >>> float(beta(10**7, 10**4, 0.3)[-1])
    10000000.0
    """
    N, n = check_N_n(N, n)
    a = check_float(a, "a", low=0.0, low_open=True)
    if method == "logcdf":
        return 1.0 + (N - 1.0) * np.exp(_log_g(N, n, a))
    if method == "recurrence":
        return _beta_recurrence(N, n, a)
    if method == "exact":
        if n > 10**4:
            raise ValueError(f"method='exact' is limited to n <= 10000 (it is slow); got n={n}")
        return _beta_exact(N, n, a)
    raise ValueError(f"method must be 'logcdf', 'recurrence' or 'exact'; got {method!r}")


def _beta_recurrence(N, n, a):
    """Literal KDD20 eqs 16-17 (each term from log-gamma / log-beta)."""
    k = np.arange(1, n, dtype=float)
    # log of a (N-1)^a C(n-1, k) B(a+k, n-k), k = 1..n-1
    log_term = (
        np.log(a)
        + a * np.log(N - 1.0)
        + special.gammaln(n) - special.gammaln(k + 1.0) - special.gammaln(n - k)
        + special.betaln(a + k, n - k)
    )
    terms = np.exp(log_term)
    f = np.empty(n)
    f[0] = (N - 1.0) * np.exp((np.log(a) + special.betaln(a, n)) / a) + 1.0
    for i in range(1, n):
        f[i] = (terms[i - 1] + (f[i - 1] - 1.0) ** a) ** (1.0 / a) + 1.0
    return f


def _beta_exact(N, n, a, digits=50):
    """f(k; a) = 1 + (N - 1) F(k - 1)^(1/a) in ``digits``-digit decimal arithmetic.

    ``a`` is taken at its exact binary value. The Beta-binomial(n - 1, a, 1)
    weights follow w_0 = 1, w_j = w_{j-1} (a + j - 1)/j (unnormalised; the ratio
    of KDD20 Sec 3.3); every operation is on positive numbers, so the rounding
    error stays near n * 10^-digits.
    """
    import decimal

    out = np.empty(n)
    with decimal.localcontext() as ctx:
        ctx.prec = digits + 10
        D = decimal.Decimal
        da = D(float(a))                      # exact binary value of a
        w = D(1)
        cums = []
        cum = D(0)
        for j in range(n):
            if j > 0:
                w = w * (da + (j - 1)) / j
            cum += w
            cums.append(cum)
        total = cums[-1]
        inv_a = D(1) / da
        for j in range(n):
            out[j] = float(1 + (N - 1) * (cums[j] / total) ** inv_a)
    return out


@dataclass(frozen=True)
class BetaFitResult:
    """Result of :func:`fit_beta_a` (the Beta@P map of KDD20 eq 19).

    Attributes
    ----------
    a : float
        The fitted exponent (the last iterate).
    iterates : ndarray
        a^(0) = a0, a^(1), ..., a^(n_iter).
    loglik : ndarray
        Beta(a, 1) log-likelihood of the mapped points
        x_u = (f(r_u; a^(i)) - 1)/(N - 1) at each iterate a^(i) (before
        the update), sum_u log a + (a - 1) log x_u.
    f : ndarray, shape (n,)
        f(k; a) at the fitted a.
    n_iter : int
        Number of updates performed.
    tol : float
        The stopping tolerance on |a^(i+1) - a^(i)|.
    """

    a: float
    iterates: np.ndarray
    loglik: np.ndarray
    f: np.ndarray
    n_iter: int
    tol: float


def fit_beta_a(sampled_ranks, N, n, a0=1.0, *, tol=1e-10, max_iter=200):
    """Algorithm-specific Beta exponent a by the fixed point of KDD20 eq 19 (Beta@P).

    a^(i+1) = -M / sum_u log[(f(r_u; a^(i)) - 1)/(N - 1)],

    the Beta(a, 1) maximum-likelihood exponent of the points f(r_u; a^(i))
    (KDD20 Sec 4.1 calls it a simplified EM). With the log-space map,
    log[(f(r; a) - 1)/(N - 1)] = log F(r - 1)/a, so each update costs O(n + M).

    Parameters
    ----------
    sampled_ranks : array_like of int
        Sampled ranks r_u in 1..n, one per test user.
    N, n : int
        Number of items and sample-set size, 2 <= n <= N.
    a0 : float
        Starting exponent, a0 > 0 (KDD20 suggests 1 or 0.5).
    tol : float, keyword-only
        Stop when |a^(i+1) - a^(i)| <= tol * max(1, a^(i+1)).
    max_iter : int, keyword-only
        Maximal number of updates.

    Returns
    -------
    BetaFitResult

    Raises
    ------
    ValueError
        If every r_u = n (then every log term is 0 and a = infinity).
    RuntimeError
        If the iteration does not meet ``tol`` within ``max_iter`` updates or
        leaves (0, 1e6); the message lists the last iterates. A fitted a that
        did not converge is meaningless, so no value is returned.

    References
    ----------
    KDD20 eq 19 and Sec 4.1; KDD20 Table 2 (fitted a of real models, n = 100).

    Examples
    --------
    >>> from sampling_lib.rankdist import beta_rank_pmf, draw_global_ranks
    >>> from sampling_lib.sampling import sample_ranks
    >>> R = draw_global_ranks(beta_rank_pmf(3706, 0.35), 5000, rng=1)
    >>> r = sample_ranks(R, 3706, 100, rng=2)
    >>> res = fit_beta_a(r, 3706, 100, a0=1.0)
    >>> round(res.a, 2), res.n_iter < 50     # doctest: +SKIP
    (0.35, True)  # may vary
    """
    N, n = check_N_n(N, n)
    r = check_ranks(sampled_ranks, n, name="sampled_ranks", upper_name="n")
    a = check_float(a0, "a0", low=0.0, low_open=True)
    tol = check_float(tol, "tol", low=0.0, low_open=True)
    max_iter = check_int(max_iter, "max_iter", low=1)
    M = r.size
    counts = np.bincount(r - 1, minlength=n).astype(float)
    used = counts > 0
    if not np.any(used[:-1]):
        raise ValueError(
            f"sampled_ranks must not all equal n={n}: then log[(f(n)-1)/(N-1)] = 0 "
            "for every user and eq 19 gives a = infinity"
        )
    iterates = [a]
    loglik = []
    for _ in range(max_iter):
        logF = _log_betabinom_cdf(n, a)[used]           # log F(r - 1), one per distinct r
        s = float(counts[used] @ logF)                   # sum_u log F(r_u - 1) < 0
        slog = s / a                                     # sum_u log x_u
        loglik.append(M * np.log(a) + (a - 1.0) * slog)
        a_new = -M / slog
        iterates.append(a_new)
        if not (np.isfinite(a_new) and 0.0 < a_new < 1e6):
            raise RuntimeError(
                f"fit_beta_a left the range (0, 1e6): iterates {iterates[-5:]}"
            )
        if abs(a_new - a) <= tol * max(1.0, a_new):
            a = a_new
            return BetaFitResult(
                a=a,
                iterates=np.asarray(iterates),
                loglik=np.asarray(loglik),
                f=beta(N, n, a),
                n_iter=len(iterates) - 1,
                tol=tol,
            )
        a = a_new
    raise RuntimeError(
        f"fit_beta_a did not converge to tol={tol:g} in max_iter={max_iter} updates; "
        f"last iterates {iterates[-4:]}, last change {abs(iterates[-1] - iterates[-2]):.3g}"
    )


def oracle(rank_pmf, n, scheme="binomial"):
    """Best integer f(k) = argmin_K |HR@K - E[SHR@k]| for a known rank law (KDD20 Sec 3).

    HR@K = P(R <= K) for K = 0..N (HR@0 = 0) and
    E[SHR@k] = sum_R P(R) Pr(r <= k | R) (KDD20 eq 4). Ties are broken towards
    the smallest K.

    Parameters
    ----------
    rank_pmf : array_like, shape (N,)
        P(R) for R = 1..N (or an empirical W_R).
    n : int
        Sample-set size, 2 <= n <= N.
    scheme : {"binomial", "hypergeometric"}
        Sampling with or without replacement.

    Returns
    -------
    ndarray of float, shape (n,)
        Integer-valued K in 0..N for k = 1..n.

    References
    ----------
    KDD20 Sec 3 ("Approximation Requirements"), eqs 4, 7, 14; TORS24 Sec 3.4.

    Examples
    --------
    >>> oracle(np.full(100, 0.01), 10)       # uniform ranks: f(k) = 10 k
    array([ 10.,  20.,  30.,  40.,  50.,  60.,  70.,  80.,  90., 100.])
    """
    from .kernels import sampled_rank_pmf

    p = check_pmf(rank_pmf, name="rank_pmf")
    N, n = check_N_n(p.size, n)
    check_scheme(scheme)
    # normalise by the totals (not by overwriting the last entry) so that a plateau of
    # zero-mass ranks at the end keeps one value and the smallest K of it is chosen
    hr = np.cumsum(p)
    hr = np.concatenate(([0.0], hr / hr[-1]))
    eshr = np.cumsum(sampled_rank_pmf(p, n, scheme))
    eshr /= eshr[-1]
    hi = np.clip(np.searchsorted(hr, eshr, side="left"), 0, N)   # first K with HR@K >= t
    lo_val = hr[np.maximum(hi - 1, 0)]
    lo = np.searchsorted(hr, lo_val, side="left")               # smallest K with that value
    lo = np.where(hi > 0, lo, hi)
    pick_lo = np.abs(hr[lo] - eshr) <= np.abs(hr[hi] - eshr)
    return np.where(pick_lo, lo, hi).astype(float)


def hr_at(hr_curve, positions):
    """HR at real locations x: HR@floor(x), with HR@0 = 0 and HR@x = HR@N for x >= N.

    Parameters
    ----------
    hr_curve : array_like, shape (N,)
        HR@K for K = 1..N (a CDF of global ranks, e.g. ``rankdist.recall_curve``).
    positions : array_like of float
        Locations x >= 0 (e.g. f(k) for k = 1..n).

    Returns
    -------
    ndarray of float, same shape as ``positions``

    References
    ----------
    KDD20 eq 7 (HR@K is the empirical CDF of the global ranks).

    Examples
    --------
    >>> hr_at([0.5, 0.75, 1.0], [0.5, 1.0, 2.9, 7.0])
    array([0.  , 0.5 , 0.75, 1.  ])
    """
    hr = np.asarray(hr_curve, dtype=float)
    if hr.ndim != 1 or hr.size == 0 or not np.all(np.isfinite(hr)):
        raise ValueError(f"hr_curve must be a finite non-empty 1-D array; got shape {hr.shape}")
    x = np.asarray(positions, dtype=float)
    if not np.all(np.isfinite(x)) or np.any(x < 0):
        raise ValueError(f"positions must be finite and >= 0; got min {np.min(x):g}")
    K = np.minimum(np.floor(x).astype(np.int64), hr.size)
    ext = np.concatenate(([0.0], hr))
    return ext[K]


def sampled_on_global_axis(shr_curve, f):
    """KDD20 Fig 7(a): the sampled curve placed on the global axis, points (f(k), SHR@k).

    Parameters
    ----------
    shr_curve : array_like, shape (n,)
        SHR@k for k = 1..n.
    f : array_like, shape (n,)
        A mapping f(k), k = 1..n.

    Returns
    -------
    (x, y) : tuple of ndarray of float, shape (n,)
        x = f(k) (global rank K), y = SHR@k; compare with HR@K at K = x.

    References
    ----------
    KDD20 Sec 5, Fig 7(a); TORS24 Figs 10-11.

    Examples
    --------
    >>> sampled_on_global_axis([0.2, 1.0], [3.0, 10.0])
    (array([ 3., 10.]), array([0.2, 1. ]))
    """
    y = np.asarray(shr_curve, dtype=float)
    x = np.asarray(f, dtype=float)
    if y.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"shr_curve and f must be 1-D of equal length; got {y.shape} and {x.shape}")
    return x.copy(), y.copy()


def global_on_sampled_axis(hr_curve, f):
    """KDD20 Fig 7(b): the global curve read at K = f(k) and placed at k, i.e. HR@f(k).

    Parameters
    ----------
    hr_curve : array_like, shape (N,)
        HR@K for K = 1..N.
    f : array_like, shape (n,)
        A mapping f(k), k = 1..n.

    Returns
    -------
    ndarray of float, shape (n,)
        HR@f(k) (see :func:`hr_at`); compare with SHR@k.

    References
    ----------
    KDD20 Sec 5, Fig 7(b).

    Examples
    --------
    >>> global_on_sampled_axis([0.5, 0.75, 1.0], [1.0, 3.0])
    array([0.5, 1. ])
    """
    return hr_at(hr_curve, f)


def alignment_errors(shr_curve, hr_at_f):
    """The error summary of KDD20 Table 7 between SHR@k and HR@f(k).

    abs = mean_k |HR@f(k) - SHR@k| over k = 1..n; rel = mean_k of the same
    divided by SHR@k; abs@1, rel@1 at k = 1; abs@2-10, rel@2-10 = means over
    k = 2..min(10, n). Terms with SHR@k = 0 are left out of the relative
    means (the ratio is undefined); NaN if none remain.

    Parameters
    ----------
    shr_curve, hr_at_f : array_like, shape (n,)
        SHR@k and HR@f(k) for k = 1..n, n >= 2.

    Returns
    -------
    dict
        Keys "abs", "rel", "abs@1", "rel@1", "abs@2-10", "rel@2-10".

    References
    ----------
    KDD20 Sec 5 "Dataset-independent vs algorithm-specific mapping", Table 7.

    Examples
    --------
    >>> e = alignment_errors([0.5, 1.0], [0.4, 1.0])
    >>> {k: round(v, 3) for k, v in e.items()}
    {'abs': 0.05, 'rel': 0.1, 'abs@1': 0.1, 'rel@1': 0.2, 'abs@2-10': 0.0, 'rel@2-10': 0.0}
    """
    s = np.asarray(shr_curve, dtype=float)
    h = np.asarray(hr_at_f, dtype=float)
    if s.ndim != 1 or s.shape != h.shape or s.size < 2:
        raise ValueError(
            f"shr_curve and hr_at_f must be 1-D of equal length >= 2; got {s.shape} and {h.shape}"
        )
    err = np.abs(h - s)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(s > 0, err / s, np.nan)

    def _mean(v):
        v = v[~np.isnan(v)]
        return float(v.mean()) if v.size else float("nan")

    top = slice(1, min(10, s.size))
    return {
        "abs": float(err.mean()),
        "rel": _mean(rel),
        "abs@1": float(err[0]),
        "rel@1": float(rel[0]),
        "abs@2-10": float(err[top].mean()),
        "rel@2-10": _mean(rel[top]),
    }


def alignment_table(shr_curve, hr_curve, maps):
    """KDD20 Table 7 for several maps: one row per mapping function.

    Parameters
    ----------
    shr_curve : array_like, shape (n,)
        SHR@k for k = 1..n.
    hr_curve : array_like, shape (N,)
        HR@K for K = 1..N.
    maps : dict
        name -> f(k) (length n), e.g. ``{"Linear": linear(N, n), ...}``.

    Returns
    -------
    pandas.DataFrame
        Columns "function", "abs", "rel", "abs@1", "rel@1", "abs@2-10",
        "rel@2-10" (see :func:`alignment_errors`), in the order of ``maps``.

    References
    ----------
    KDD20 Table 7.

    Examples
    --------
    >>> t = alignment_table([0.5, 1.0], [0.25, 0.5, 0.75, 1.0], {"A": [2.0, 4.0], "B": [1.0, 4.0]})
    >>> t["abs"].round(3).tolist()
    [0.0, 0.125]
    """
    import pandas as pd

    rows = []
    for name, f in maps.items():
        f = np.asarray(f, dtype=float)
        rows.append({"function": name, **alignment_errors(shr_curve, global_on_sampled_axis(hr_curve, f))})
    return pd.DataFrame(rows)


def standard_maps(N, n, a_values=(1.0, 0.5)):
    """The mapping functions the papers tabulate: Linear, Bound and Beta@a.

    Returns ``{"Linear": linear(N, n), "Bound": bound(N, n), "Beta@1": ...}``
    with one ``"Beta@{a:g}"`` entry per a in ``a_values`` (a = 1 is the closed
    form :func:`uniform`, KDD20 eq 18), in that order (the rows of KDD20
    Table 7 and the columns of TORS24 Table 3).

    References
    ----------
    KDD20 eqs 9, 13, 15-18, Table 7; TORS24 Table 3.

    Examples
    --------
    >>> {k: round(float(f[0]), 2) for k, f in standard_maps(3706, 100).items()}
    {'Linear': 1.0, 'Bound': 19.0, 'Beta@1': 38.05, 'Beta@0.5': 30.17}
    """
    maps = {"Linear": linear(N, n), "Bound": bound(N, n)}
    for a in a_values:
        a = check_float(a, "a", 0.0, low_open=True)
        maps[f"Beta@{a:g}"] = uniform(N, n) if a == 1.0 else beta(N, n, a)
    return maps


def monotonicity_violation(N, n, a_values, direction="increasing"):
    """Largest violation of monotonicity of f(k; a) in a, over a grid (KDD20 Remedy 3).

    KDD20 Remedy 3 is titled "When a is smaller, so is f(k; a)" and concludes
    that "f(k; a) is a monotone increasing function with respect to a", but
    its displayed inequality reads "a > b implies f(k; a) <= f(k; b)", the
    opposite direction. Fig 4 (f(k; a) < f(k; 1) for a < 1), Table 5
    (HR@f(1; 1) > HR@f(1; 0.5)) and the winner argument that follows all need
    f increasing in a, and so does our computation; we take the inequality as
    a typo. ``direction="increasing"`` checks a > b implies f(k; a) >= f(k; b);
    ``"decreasing"`` checks the inequality as printed.

    Parameters
    ----------
    N, n : int
        Number of items and sample-set size.
    a_values : array_like of float
        At least two distinct exponents > 0.
    direction : {"increasing", "decreasing"}

    Returns
    -------
    dict
        "max_violation": the largest amount (in rank units) by which a pair
        a > b breaks the direction, over all pairs and k = 1..n (<= 0 means
        no violation; float noise near k = n is ~1e-12 N); "rel_violation":
        that amount divided by f(k; b); "a", "b", "k" of the worst pair;
        "n_pairs".

    References
    ----------
    KDD20 Sec 4.2, Remedy 3 and Figs 4-5 (stated there as an open problem;
    this is numerical evidence on a grid, not a proof).

    Examples
    --------
    >>> v = monotonicity_violation(3706, 100, [0.2, 0.5, 1.0, 2.0])
    >>> v["max_violation"] <= 1e-9
    True
    >>> monotonicity_violation(3706, 100, [0.2, 1.0], "decreasing")["max_violation"] > 1
    True
    """
    N, n = check_N_n(N, n)
    if direction not in ("increasing", "decreasing"):
        raise ValueError(f"direction must be 'increasing' or 'decreasing'; got {direction!r}")
    a = np.unique(np.asarray(a_values, dtype=float))
    if a.size < 2 or not np.all(np.isfinite(a)) or a[0] <= 0:
        raise ValueError(f"a_values must hold at least two distinct finite values > 0; got {a_values!r}")
    F = np.stack([beta(N, n, ai) for ai in a])               # rows: increasing a
    sign = 1.0 if direction == "increasing" else -1.0
    G = -sign * F          # a violation for rows j < i is G[i] - G[j] > 0 ... with G[j] minimal
    cols = np.arange(n)
    best = np.zeros(n, dtype=np.int64)                        # argmin of G over rows < i
    worst = (-np.inf, 0, 0, 0)
    for i in range(1, a.size):
        best = np.where(G[i - 1] < G[best, cols], i - 1, best)
        v = G[i] - G[best, cols]
        k = int(np.argmax(v))
        if v[k] > worst[0]:
            worst = (float(v[k]), i, int(best[k]), k)
    viol, i, j, k = worst
    margin = (sign * np.diff(F, axis=0))[:, : n - 1]          # adjacent pairs, k < n
    return {
        "max_violation": viol,
        "rel_violation": float(viol / F[j, k]),
        "min_margin": float(margin.min()) if n > 1 else float("nan"),
        "a": float(a[i]),
        "b": float(a[j]),
        "k": k + 1,
        "n_pairs": int(a.size * (a.size - 1) // 2),
    }
