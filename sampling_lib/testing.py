"""Reference oracles: enumerations and literal paper formulas, for tests and notebooks.

These are deliberately simple, independent computations that the fast
library functions are checked against; they are exact but slow (or, for the
literal transcriptions, kept to show the printed formula agrees):

* :func:`enumerate_ap_wor`, :func:`enumerate_ap_wr` -- E and Var of AP@k under
  random rankings by enumerating every outcome (AP25);
* :func:`recursive_ap_moments_wor`, :func:`recursive_ap_moments_wr` -- the same
  moments by a dynamic program over positions;
* :func:`var_ap_wor_paper` -- AP25 Thm 4.4 with the printed constants A..G;
* :func:`per_user_em` -- the EM of AAAI21 eq 20 with one posterior per user;
* :func:`cls_sampled_metric_cvxpy` -- the CLS sampled metric (TORS24 eq 7) as a
  generic monotone least-squares problem solved by cvxpy;
* :func:`global_ranks_bruteforce` -- global ranks of held-out items by
  ``scipy.stats.rankdata`` on the full score vector of each user;
* :func:`paper_table` -- values printed in the papers' tables (the data files
  in ``sampling_lib/paper_tables/``, listed in :data:`PAPER_TABLES`), which the
  notebooks compare with their own computations.

The fast formulas live in :mod:`sampling_lib.random_baseline`.

References
----------
.. [AP25] Manzhos, Ianevych, Melnyk. Average Precision at Cutoff k under
   Random Rankings: Expectation and Variance. 2025.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ._validation import check_cutoffs, check_int, check_N_m, check_probability, scalar_or_array
from .random_baseline import APMoments, ap_from_patterns, harmonic_number

__all__ = [
    "PAPER_TABLES",
    "paper_table",
    "per_user_em",
    "cls_sampled_metric_cvxpy",
    "global_ranks_bruteforce",
    "enumerate_ap_wor",
    "enumerate_ap_wr",
    "recursive_ap_moments_wor",
    "recursive_ap_moments_wr",
    "var_ap_wor_paper",
]


#: The printed tables shipped as data files: name -> what they hold (paper key, table).
PAPER_TABLES = {
    "kdd20_table2": "KDD20 Table 2: fitted Beta(a, 1) exponent a per dataset and model (n = 100); "
                    "N = items from KDD20 Table 4",
    "tors24_table3": "TORS24 Table 3: mapped positions f(1), f(2) at n = 1000, rounded as printed",
    "aaai21_table2": "AAAI21 Table 2: Recall@10 (%) estimated by MLE and WMLE on ml-1m",
    "tors24_tables8_9": "TORS24 Tables 8-9: relative error (%) of user sampling with 1K and 10K users "
                        "(Table 9 all rows, Table 8 the unambiguous rows); M = users from TORS24 Table 2",
    "ap25_table2": "AP25 Tables 1-2: scenarios (N, m, p, k) and the printed E and Var of AP@k, "
                   "without (WOR) and with (WR) replacement",
}


def paper_table(name):
    """A table of values printed in a paper, as a tidy DataFrame.

    The values are transcribed once into ``sampling_lib/paper_tables/<name>.csv``
    (shipped with the package) so that notebooks compare with data, not with
    numbers typed into code.

    Parameters
    ----------
    name : str
        One of :data:`PAPER_TABLES`.

    Returns
    -------
    pandas.DataFrame

    Examples
    --------
    >>> t = paper_table("kdd20_table2")
    >>> t[(t.dataset == "ml-1m") & (t.model == "itemKNN")].a.item()
    0.4079
    """
    import pandas as pd
    from importlib.resources import files

    if name not in PAPER_TABLES:
        raise ValueError(f"name must be one of {sorted(PAPER_TABLES)}; got {name!r}")
    with files("sampling_lib").joinpath("paper_tables", f"{name}.csv").open() as f:
        return pd.read_csv(f)


def per_user_em(sampled_ranks, N, n, iters, weights=None, *, scheme="binomial"):
    """The EM for the global rank distribution with one posterior per user.

    The literal form of AAAI21 eq 20 (TORS24 App D eq 57; with per-user
    ``weights``, the weighted EM of TORS24 eq 58): from the uniform start,
    ``iters`` times, every user's posterior over R is formed and the weighted
    average of the posteriors is the new pi. O(N M) per iteration: the oracle
    for :func:`sampling_lib.estimators.mle` / ``wmle``, which run the same
    update on the sufficient statistic (AAAI21 eq 21).

    Returns
    -------
    ndarray, shape (N,)

    References
    ----------
    AAAI21 eqs 20-21; TORS24 App D eqs 57-58.

    Examples
    --------
    >>> from sampling_lib.estimators import mle
    >>> r = np.array([1, 1, 2, 5, 9])
    >>> bool(np.allclose(per_user_em(r, 30, 10, 5), mle(r, 30, 10, max_iter=5), rtol=1e-10))
    True
    """
    from .kernels import kernel

    r = np.asarray(sampled_ranks)
    cols = kernel(N, n, scheme)[:, r - 1]
    w = np.ones(r.size) if weights is None else np.asarray(weights, dtype=float)
    pi = np.full(N, 1.0 / N)
    for _ in range(check_int(iters, "iters", low=0)):
        post = pi[:, None] * cols
        post /= post.sum(axis=0, keepdims=True)
        pi = post @ w / w.sum()
    return pi


def cls_sampled_metric_cvxpy(F, N, n, prior=None, *, scheme="binomial"):
    """The CLS sampled metric x (TORS24 eq 7) by a generic solver.

    Minimizes ``sum_R P(R) (sum_r P(r | R) x_r - F(R))^2`` over non-increasing
    x (``x_1 >= ... >= x_n``) with cvxpy/Clarabel; ``prior`` P(R) defaults to
    uniform. The oracle for :func:`sampling_lib.estimators.cls`.

    Returns
    -------
    ndarray, shape (n,)

    References
    ----------
    TORS24 eq 7; Krichene and Rendle (KR20).
    """
    from ._extras import require
    from .kernels import kernel

    cp = require("cvxpy", "cls_sampled_metric_cvxpy")

    p = np.full(N, 1.0 / N) if prior is None else np.asarray(prior, dtype=float)
    x = cp.Variable(n)
    cp.Problem(cp.Minimize(cp.sum_squares(cp.multiply(np.sqrt(p), kernel(N, n, scheme) @ x - F))),
               [x[:-1] >= x[1:]]).solve(solver=cp.CLARABEL)
    return np.asarray(x.value)


def global_ranks_bruteforce(model, train, test_items, users, *, train_last=True):
    """Global rank R_u of each user's held-out item, one full score vector at a time.

    ``scipy.stats.rankdata(-scores, method="max")`` (ties count against the
    held-out item), with the user's training items moved to the end when
    ``train_last``. The oracle for :func:`sampling_lib.recommenders.global_ranks`.

    Parameters
    ----------
    model : fitted recommender (with ``score(users)``)
    train : scipy.sparse CSR matrix, users x items
    test_items : array of int, the held-out item of each user
    users : array of int

    Returns
    -------
    ndarray of int

    References
    ----------
    KDD20 eq 1 (R_u).
    """
    from scipy import stats

    users = np.asarray(users)
    S = np.asarray(model.score(users), dtype=float)
    out = np.empty(users.size, dtype=np.int64)
    for row, u in enumerate(users):
        s = S[row].copy()
        if train_last:
            s[train[u].indices] = -np.inf
        out[row] = int(stats.rankdata(-s, method="max")[test_items[u]])
    return out


def var_ap_wor_paper(N, m, k):
    """Literal transcription of AP25 Thm 4.4 with the printed constants A..G.

    Kept to show that the printed theorem agrees with :func:`var_ap_wor`; the
    constants divide by ``N - 2`` and ``N - 3``, so this needs ``N >= 4``
    (use :func:`var_ap_wor` for every ``N``). ``m = 0`` returns 0 (the printed
    expression is 0/0 there). Plain floating point, no exact arithmetic.

    References
    ----------
    AP25 Thm 4.4, Lemma 4.5.

    Examples
    --------
    >>> from sampling_lib.random_baseline import var_ap_wor
    >>> bool(np.isclose(var_ap_wor_paper(50, 10, 20), var_ap_wor(50, 10, 20), rtol=1e-12))
    True
    """
    N, m = check_N_m(N, m)
    if N < 4:
        raise ValueError(f"var_ap_wor_paper needs N >= 4 (its constants divide by N-2 and N-3); "
                         f"got N={N}; use var_ap_wor")
    ks, scalar = check_cutoffs(k, N)
    if m == 0:
        return scalar_or_array(np.zeros(ks.size), scalar)
    N = float(N)
    a1 = (m - 1) / (N - 1)
    a2 = (m - 2) / (N - 2)
    a3 = (m - 3) / (N - 3)
    r = m / N
    A = 1 - r - a1 * (3 - 2 * a2 - r * (2 - a1))
    B = a1 * (3 * (1 - a2) - 2 * r * (1 - a1))
    C = a1 * (a2 - r * a1)
    D = a1 * (2 - 5 * a2 + 3 * a2 * a3) - r * (1 - a1) ** 2
    E = a1 * (3 * a2 * (1 - a3) - r * (1 - a1))
    F = a1 * (a2 * (1 - a3) - r * (1 - a1))
    G = a1 * (a2 * a3 - r * a1)
    kf = ks.astype(float)
    h = harmonic_number(ks)
    h2 = harmonic_number(ks, order=2)
    M = np.minimum(m, ks).astype(float)
    var = r / M**2 * (kf * (C + 2 * (E - F) + (kf - 1) * G) + h * (B - 2 * (E - kf * F))
                      + h**2 * D + h2 * (A - D))
    return scalar_or_array(var, scalar)


def enumerate_ap_wor(N, m, k, *, max_outcomes=2_000_000):
    """Exact mean and variance of offline AP@k by enumerating all C(N, m) placements.

    Every ``m``-subset of positions ``1..N`` is one equally likely outcome; AP@k
    is computed for each from its definition (AP25 eq 3.2) and averaged. This is
    the brute-force reference for :func:`expected_ap_wor` / :func:`var_ap_wor`
    (exact up to float rounding), usable for tiny ``N``.

    Parameters
    ----------
    N, m, k : as in :func:`expected_ap_wor`.
    max_outcomes : int
        Refuse (ValueError) when ``C(N, m)`` exceeds this.

    Returns
    -------
    APMoments
        ``(mean, var)``, each shaped like ``k``.

    Examples
    --------
    >>> enumerate_ap_wor(4, 2, [1, 2, 4])
    APMoments(mean=array([0.5       , 0.41666667, 0.68055556]), var=array([0.25      , 0.09722222, 0.04031636]))
    """
    N, m = check_N_m(N, m)
    ks, scalar = check_cutoffs(k, N)
    max_outcomes = check_int(max_outcomes, "max_outcomes", low=1)
    n_out = math.comb(N, m)
    if n_out > max_outcomes:
        raise ValueError(f"C(N, m) = C({N}, {m}) = {n_out} placements exceed max_outcomes={max_outcomes}")
    I = np.zeros((n_out, N), dtype=np.int8)
    for row, combo in enumerate(itertools.combinations(range(N), m)):
        I[row, list(combo)] = 1
    ap = ap_from_patterns(I, ks, np.minimum(m, ks).astype(float))
    mean = ap.mean(axis=0)
    var = ((ap - mean) ** 2).mean(axis=0)
    return APMoments(scalar_or_array(mean, scalar), scalar_or_array(var, scalar))


def enumerate_ap_wr(p, k, *, max_k=20):
    """Exact mean and variance of online AP@k by enumerating all 2^k relevance patterns.

    Pattern ``x`` in ``{0,1}^K`` (``K = max(k)``) has probability
    ``p^|x| (1-p)^(K-|x|)``; AP@k = ``S_k / k`` (AP25 eq 3.1). Reference for
    :func:`expected_ap_wr` / :func:`var_ap_wr`.

    Parameters
    ----------
    p : float
        Relevance probability in [0, 1] (scalar).
    k : int or array_like of int
        Cutoffs, ``1 <= k <= max_k``.
    max_k : int
        Largest cutoff accepted (memory is ``2^max(k) * max(k)`` bytes).

    Returns
    -------
    APMoments

    Examples
    --------
    >>> enumerate_ap_wr(0.5, 2)
    APMoments(mean=0.4375, var=0.13671875)
    """
    p = check_probability(p, "p")
    max_k = check_int(max_k, "max_k", low=1, high=26)
    ks, scalar = check_cutoffs(k, max_k, upper_name="max_k")
    K = int(ks.max())
    codes = np.arange(2**K, dtype=np.int64)
    I = ((codes[:, None] >> np.arange(K)) & 1).astype(np.int8)
    s = I.sum(axis=1)
    w = np.power(p, s) * np.power(1.0 - p, K - s)
    ap = ap_from_patterns(I, ks, ks.astype(float))
    mean = w @ ap
    var = w @ (ap - mean) ** 2
    return APMoments(scalar_or_array(mean, scalar), scalar_or_array(var, scalar))


def _recursive_moments(ks, probs_fn, n_states, norm):
    """Moment recursion over positions: states = number of relevant items seen.

    Carries P(c), E[S 1{C=c}], E[S^2 1{C=c}] through positions 1..max(k).
    probs_fn(i, c) -> probability that position i (1-based) is relevant given c
    relevant among positions 1..i-1.
    """
    K = int(ks.max())
    P = np.zeros(n_states + 1)
    P[0] = 1.0
    A1 = np.zeros(n_states + 1)
    A2 = np.zeros(n_states + 1)
    c = np.arange(n_states + 1, dtype=float)
    m1 = np.empty(K)
    m2 = np.empty(K)
    for i in range(1, K + 1):
        q = probs_fn(i, c)
        x = (c + 1.0) / i                      # increment of S when position i is relevant
        hitP = P * q
        hitA1 = (A1 + P * x) * q
        hitA2 = (A2 + 2.0 * A1 * x + P * x * x) * q
        P = P * (1.0 - q)
        A1 = A1 * (1.0 - q)
        A2 = A2 * (1.0 - q)
        P[1:] += hitP[:-1]
        A1[1:] += hitA1[:-1]
        A2[1:] += hitA2[:-1]
        m1[i - 1] = A1.sum()
        m2[i - 1] = A2.sum()
    e1 = m1[ks - 1]
    e2 = m2[ks - 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        safe = np.where(norm > 0, norm, 1.0)
        mean = np.where(norm > 0, e1 / safe, 0.0)
        var = np.where(norm > 0, np.maximum(e2 - e1 * e1, 0.0) / safe**2, 0.0)
    return mean, var


def recursive_ap_moments_wor(N, m, k):
    """Exact mean and variance of offline AP@k by a recursion over positions.

    An independent check of AP25 Thm 4.2/4.4 that does not use indicator
    covariances: walking down the ranking, position ``i`` is relevant with
    probability ``(m - c)/(N - i + 1)`` given ``c`` relevant items above it, and
    ``S`` grows by ``(c + 1)/i``; the recursion carries the joint law of ``c``
    with the first two moments of ``S``. Cost ``O(max(k) * m)``, so it also
    covers the paper's ``N = 50`` scenarios (unlike enumeration).

    The variance is ``E[S^2] - E[S]^2``, so its relative accuracy degrades when
    the variance is tiny compared with ``E[S]^2`` (e.g. ``m`` close to ``N`` and
    large ``k``: about 1e-7 relative at ``N = 20000, m = 19990, k = N``); the
    closed form :func:`var_ap_wor` (exact coefficients) does not have this issue.

    Returns
    -------
    APMoments

    References
    ----------
    sampling-lab (our own reference for AP25 Thms 4.2 and 4.4).

    Examples
    --------
    >>> mean, var = recursive_ap_moments_wor(50, 25, 40)
    >>> round(mean, 5), round(var, 5)
    (0.4355, 0.00699)
    """
    N, m = check_N_m(N, m)
    ks, scalar = check_cutoffs(k, N)

    def probs(i, c):
        return np.clip((m - c) / (N - i + 1), 0.0, 1.0)

    mean, var = _recursive_moments(ks, probs, m, np.minimum(m, ks).astype(float))
    return APMoments(scalar_or_array(mean, scalar), scalar_or_array(var, scalar))


def recursive_ap_moments_wr(p, k):
    """Exact mean and variance of online AP@k by the same recursion (independent positions).

    Returns
    -------
    APMoments

    References
    ----------
    sampling-lab (our own reference for AP25 Thms 5.1 and 5.2).

    Examples
    --------
    >>> mean, var = recursive_ap_moments_wr(0.5, 40)
    >>> round(mean, 5), round(var, 5)
    (0.27674, 0.00775)
    """
    p = check_probability(p, "p")
    ks, scalar = check_cutoffs(k)
    K = int(ks.max())
    mean, var = _recursive_moments(ks, lambda i, c: np.full_like(c, p), K, ks.astype(float))
    return APMoments(scalar_or_array(mean, scalar), scalar_or_array(var, scalar))
