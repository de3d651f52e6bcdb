"""Correct your own sampled evaluation: global metrics with bootstrap CIs.

The practitioner entry point. You ran a sampled evaluation (every test user's
held-out item ranked among itself and n - 1 sampled negatives, e.g. n = 100
as in NCF or RecBole's ``uni100``) and kept each user's *sampled rank* r_u in
1..n. This module turns those ranks into estimates of the *global* top-K
metrics (rank among all N items) with confidence intervals, and compares
models on the same users:

* :func:`estimate` -- one tidy table: naive sampled metric, corrected
  estimate, bootstrap CI, for every requested metric;
* :func:`compare` -- pairwise differences of corrected metrics between
  models with paired bootstrap CIs and Holm-adjusted decisions;
* input adapters :func:`ranks_from_table` (a table of per-user ranks),
  :func:`ranks_from_scores` / :func:`ranks_from_score_table` (scores of the
  held-out item and its negatives, with a documented tie rule);
* :func:`sample_negatives` -- a fixed negatives file, so every model is
  evaluated on the same sampled items.

Everything works on the *sufficient statistic* of the sampled ranks: the
number of users per (sample size, sampled rank) cell (:class:`RankCounts`).
A bootstrap resample of the M users is then one multinomial draw of the count
vector, Multinomial(M, counts / M), so a replicate costs O(number of cells),
not O(M).

References
----------
.. [KDD20] Krichene, Rendle. On Sampled Metrics for Item Recommendation. KDD 2020.
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021.
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024 (estimators Secs 2.5, 4-6; Sec 7.2 for
   multiple comparisons).
.. [Efron93] Efron, Tibshirani. An Introduction to the Bootstrap (1993), ch. 13
   (percentile interval).
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse

from . import estimators as _est
from ._validation import check_float, check_int, check_N_n, check_ranks, check_scheme
from .kernels import kernel, log_kernel_rows
from .metrics import metric_values, parse_metric
from .recommenders import TIE_RULES as _TIES
from .recommenders import _apply_ties

__all__ = [
    "METHODS",
    "DEFAULT_METHOD",
    "RankCounts",
    "rank_counts",
    "bootstrap_counts",
    "estimate",
    "compare",
    "SampledRanks",
    "ranks_from_table",
    "ranks_from_scores",
    "ranks_from_score_table",
    "sample_negatives",
    "simulate_coverage",
    "simulate_accuracy",
    "simulate_paired_difference",
    "coverage_summary",
]

#: Every estimator name :func:`estimate` accepts.
METHODS = ("mle", "wmle", "mes", "bv", "bv_mle", "bv_mes", "mn", "mn_mle", "mn_mes", "cls",
           "adaptive_mle")
#: Default estimator (see :func:`estimate`, "Choice of the default").
DEFAULT_METHOD = "mle"

_LINEAR = {"bv", "bv_mle", "bv_mes", "mn", "mn_mle", "mn_mes"}
_EM = {"mle", "wmle", "adaptive_mle"}
_BOOT_CHUNK = 64                 # replicates drawn / processed per block (fixed: determinism)
_EM_BLOCK_ELEMS = 1 << 21        # B x N elements per batched-EM block
_DENSE_KERNEL_MAX = 1 << 24


# ----------------------------------------------------------------------------
# sufficient statistic
# ----------------------------------------------------------------------------
@dataclass(frozen=True)
class RankCounts:
    """Users per (sample size, sampled rank) cell: the sufficient statistic.

    Attributes
    ----------
    sizes : ndarray of int, shape (C,)
        Sample size n of each non-empty cell.
    ranks : ndarray of int, shape (C,)
        Sampled rank r (1..n) of each cell.
    counts : ndarray of int, shape (C,)
        Number of users in the cell (all > 0). Cells are sorted by (size, rank).
    """

    sizes: np.ndarray
    ranks: np.ndarray
    counts: np.ndarray

    @property
    def M(self) -> int:
        """Number of users."""
        return int(self.counts.sum())

    @property
    def size_values(self) -> np.ndarray:
        """The distinct sample sizes."""
        return np.unique(self.sizes)

    def expand(self, counts=None):
        """Per-user arrays (sampled_ranks, sample_sizes) for ``counts`` (default: own)."""
        c = self.counts if counts is None else np.asarray(counts, dtype=np.int64)
        return np.repeat(self.ranks, c), np.repeat(self.sizes, c)


def rank_counts(sampled_ranks, n=None, *, sample_sizes=None):
    """The sufficient statistic :class:`RankCounts` of per-user sampled ranks.

    Parameters
    ----------
    sampled_ranks : array_like of int
        r_u in 1..n (or 1..n_u).
    n : int, optional
        Common sample size; required unless ``sample_sizes`` is given.
    sample_sizes : array_like of int, optional
        Per-user sample sizes n_u (adaptive sampling, TORS24 Sec 6.2).

    Examples
    --------
    >>> c = rank_counts([1, 3, 1, 2], n=5)
    >>> c.ranks.tolist(), c.counts.tolist(), c.M
    ([1, 2, 3], [2, 1, 1], 4)
    """
    if sample_sizes is None:
        if n is None:
            raise ValueError("n (the sample size) is required unless sample_sizes is given")
        n = check_int(n, "n", low=2)
        r = check_ranks(sampled_ranks, n, name="sampled_ranks", upper_name="n")
        sizes = np.full(r.size, n, dtype=np.int64)
    else:
        sizes = check_ranks(sample_sizes, np.iinfo(np.int64).max, name="sample_sizes")
        if sizes.min() < 2:
            raise ValueError(f"sample_sizes must be >= 2; got min {sizes.min()}")
        if n is not None and np.any(sizes != check_int(n, "n", low=2)):
            raise ValueError(f"n={n} disagrees with sample_sizes (values {np.unique(sizes)[:5].tolist()})")
        r = check_ranks(sampled_ranks, int(sizes.max()), name="sampled_ranks",
                        upper_name="max(sample_sizes)")
        if r.shape != sizes.shape:
            raise ValueError(f"sampled_ranks and sample_sizes must have the same length; "
                             f"got {r.size} and {sizes.size}")
        bad = np.flatnonzero(r > sizes)
        if bad.size:
            i = bad[0]
            raise ValueError(f"sampled_ranks must lie in 1..sample_size; got rank {r[i]} > "
                             f"sample_size {sizes[i]} (user index {i})")
    key = sizes.astype(np.int64) * (int(r.max()) + 1) + r
    uk, cnt = np.unique(key, return_counts=True)
    base = int(r.max()) + 1
    return RankCounts(sizes=(uk // base).astype(np.int64), ranks=(uk % base).astype(np.int64),
                      counts=cnt.astype(np.int64))


def bootstrap_counts(counts, n_boot, *, rng=None):
    """Bootstrap replicates of a count vector: rows of Multinomial(M, counts / M).

    Resampling M users with replacement and re-counting them per cell is
    exactly one multinomial draw with the observed cell frequencies.

    Examples
    --------
    >>> b = bootstrap_counts([5, 3, 2], 4, rng=0)
    >>> b.shape, b.sum(axis=1).tolist()
    ((4, 3), [10, 10, 10, 10])
    """
    c = np.asarray(counts, dtype=np.int64)
    if c.ndim != 1 or c.size == 0 or np.any(c < 0) or c.sum() == 0:
        raise ValueError(f"counts must be a non-empty 1-D array of non-negative ints with a "
                         f"positive sum; got {counts!r}")
    n_boot = check_int(n_boot, "n_boot", low=1)
    rng = np.random.default_rng(rng)
    M = int(c.sum())
    return rng.multinomial(M, c / M, size=n_boot)


# ----------------------------------------------------------------------------
# metrics
# ----------------------------------------------------------------------------
def _parse_metrics(metrics):
    if isinstance(metrics, str):
        metrics = (metrics,)
    metrics = list(metrics)
    if not metrics:
        raise ValueError("metrics must name at least one metric like 'recall@10'")
    out = []
    for m in metrics:
        name, K = parse_metric(m)
        out.append((f"{name}@{K}", name, K))
    return out


def _metric_matrix(parsed, N):
    """F(R) for R = 1..N, one column per metric: (N, m)."""
    return np.stack([metric_values(full, N) for full, _, _ in parsed], axis=1)


def _naive_matrix(parsed, stat):
    """Per-cell sampled-metric values F(r) on the cell's own sample size: (C, m)."""
    out = np.empty((stat.ranks.size, len(parsed)))
    for ns in stat.size_values:
        sel = stat.sizes == ns
        out[sel] = np.stack([metric_values(full, int(ns))[stat.ranks[sel] - 1]
                             for full, _, _ in parsed], axis=1)
    return out


# ----------------------------------------------------------------------------
# estimators on the sufficient statistic
# ----------------------------------------------------------------------------
def _kernel_cols(N, stat, scheme):
    """P(r | R; n) for every cell: shape (N, C)."""
    out = np.empty((N, stat.ranks.size))
    for ns in stat.size_values:
        ns = int(ns)
        sel = np.flatnonzero(stat.sizes == ns)
        cols = stat.ranks[sel] - 1
        if N * ns <= _DENSE_KERNEL_MAX:
            out[:, sel] = kernel(N, ns, scheme)[:, cols]
        else:
            step = max(1, (1 << 21) // ns)
            for a in range(0, N, step):
                R = np.arange(a + 1, min(N, a + step) + 1)
                out[a:a + R.size, sel] = np.exp(log_kernel_rows(N, ns, R, scheme)[:, cols])
    return out


def _check_method(method, stat):
    varying = stat.size_values.size > 1
    if method is None:
        method = "adaptive_mle" if varying else DEFAULT_METHOD
    if not isinstance(method, str) or method.lower() not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}; got {method!r}")
    method = method.lower()
    if varying and method != "adaptive_mle":
        raise ValueError(f"method={method!r} needs one common sample size; the sample sizes vary "
                         f"({stat.size_values[:5].tolist()}...): use method='adaptive_mle'")
    return method


@dataclass
class _Fitted:
    method: str
    weights: np.ndarray          # length-N weight vector: estimate = weights @ F
    prior: np.ndarray | None     # fixed prior of the linear estimators
    X: np.ndarray | None         # (C, m) sampled metric of linear estimators per cell
    em_weight: np.ndarray | None # per-cell weight of the EM (wmle), else ones
    options: dict
    refit_prior: bool = False


def _fit(method, stat, N, parsed, scheme, options):
    """Point estimate through the library's public estimators (per-user ranks)."""
    opts = dict(options or {})
    ranks, sizes = stat.expand()
    n = int(stat.size_values[0])
    M = stat.M
    if method == "adaptive_mle":
        w = _est.adaptive_mle(ranks, sizes, N, scheme, **opts)
        return _Fitted(method, w, None, None, np.ones(stat.ranks.size), opts)
    if method == "mle":
        w = _est.mle(ranks, N, n, scheme, **opts)
        return _Fitted(method, w, None, None, np.ones(stat.ranks.size), opts)
    if method == "wmle":
        w = _est.wmle(ranks, N, n, scheme, **opts)
        wt = _est.wmle_weights(n, opts.get("weight", "ndcg"), opts.get("C", 10))
        return _Fitted(method, w, None, None, wt[stat.ranks - 1], opts)
    if method == "mes":
        return _Fitted(method, _est.mes(ranks, N, n, scheme=scheme, **opts), None, None, None, opts)
    if method == "cls":
        Kmax = max(K for _, _, K in parsed)
        opts.setdefault("max_rank", min(N, Kmax))
        return _Fitted(method, _est.cls(ranks, N, n, scheme=scheme, **opts), None, None, None, opts)
    # linear estimators with a prior fixed at the full-sample fit
    base, _, pname = method.partition("_")
    prior = None
    if pname == "mle":
        prior = _est.mle(ranks, N, n, scheme)
    elif pname == "mes":
        prior = _est.mes(ranks, N, n, scheme=scheme)
    F = _metric_matrix(parsed, N)
    if base == "bv":
        gamma = opts.get("gamma", 0.01)
        w = _est.bv(ranks, N, n, gamma, prior, scheme=scheme)
        X = np.stack([_est.bv_sampled_metric(F[:, j], N, n, gamma, prior, scheme=scheme)
                      for j in range(F.shape[1])], axis=1)
    else:
        Mv = opts.get("M", M)
        w = _est.mn(ranks, N, n, prior, Mv, scheme=scheme)
        X = np.stack([_est.mn_sampled_metric(F[:, j], N, n, prior, Mv, scheme=scheme)
                      for j in range(F.shape[1])], axis=1)
    return _Fitted(method, w, prior, X[stat.ranks - 1], None, opts)


def _em_batch(Kc, Wc, pi0, n_iter):
    """Fixed-iteration EM for a batch of weighted cell counts Wc (B, C).

    The same update as the library's EM (AAAI21 eq 21 / 23, TORS24 eqs 34, 62)
    pi <- pi * (Kc (Wc / (pi Kc))) / W, run on all replicates at once.
    """
    B = Wc.shape[0]
    W = Wc.sum(axis=1, keepdims=True)
    pi = np.broadcast_to(pi0, (B, pi0.size)).copy()
    for _ in range(n_iter):
        q = pi @ Kc
        ratio = np.divide(Wc, q, out=np.zeros_like(Wc), where=Wc > 0)
        pi *= (ratio @ Kc.T) / W
        pi /= pi.sum(axis=1, keepdims=True)
    return pi


def _replicates(fit, stat, N, parsed, scheme, Cb, F, Kc):
    """Corrected estimates (B, m) for bootstrap counts Cb (B, C)."""
    method, opts = fit.method, fit.options
    M = stat.M
    if method in _LINEAR and fit.refit_prior and fit.prior is not None:
        # re-fit the prior on every replicate (slower; propagates its variability)
        n = int(stat.size_values[0])
        base = method.split("_")[0]
        out = np.empty((Cb.shape[0], F.shape[1]))
        for b in range(Cb.shape[0]):
            r_b, _ = stat.expand(Cb[b])
            pr = _est.mle(r_b, N, n, scheme) if method.endswith("mle") else \
                _est.mes(r_b, N, n, scheme=scheme)
            if base == "bv":
                w = _est.bv(r_b, N, n, opts.get("gamma", 0.01), pr, scheme=scheme)
            else:
                w = _est.mn(r_b, N, n, pr, opts.get("M", M), scheme=scheme)
            out[b] = w @ F
        return out
    if method in _LINEAR:
        # linear in the sampled-rank distribution with a fixed prior (and fixed M
        # for MN): a replicate is one matrix product, (Cb / M) @ X
        return (Cb / M) @ fit.X
    if method in _EM and opts.get("tol") is None:
        # the estimator is "max_iter EM steps from init": rerun exactly that
        # protocol (a warm start would define a different estimator)
        init = opts.get("init")
        pi0 = np.full(N, 1.0 / N) if init is None else np.asarray(init, dtype=float)
        n_iter = opts.get("max_iter", 100)
        out = np.empty((Cb.shape[0], F.shape[1]))
        step = max(1, _EM_BLOCK_ELEMS // N)
        for a in range(0, Cb.shape[0], step):
            Wc = Cb[a:a + step] * fit.em_weight
            out[a:a + step] = _em_batch(Kc, Wc, pi0, n_iter) @ F
        return out
    # iterative estimators solved to a tolerance (unique optimum): warm start
    # from the full-sample solution where the estimator accepts one
    out = np.empty((Cb.shape[0], F.shape[1]))
    n = int(stat.size_values[0])
    for b in range(Cb.shape[0]):
        r_b, s_b = stat.expand(Cb[b])
        if method == "adaptive_mle":
            w = _est.adaptive_mle(r_b, s_b, N, scheme, **{**opts, "init": fit.weights})
        elif method == "mle":
            w = _est.mle(r_b, N, n, scheme, **{**opts, "init": fit.weights})
        elif method == "wmle":
            w = _est.wmle(r_b, N, n, scheme, **{**opts, "init": fit.weights})
        elif method == "mes":
            w = _est.mes(r_b, N, n, scheme=scheme, **opts)
        else:  # cls
            w = _est.cls(r_b, N, n, scheme=scheme, **opts)
        out[b] = w @ F
    return out


def _progress(total, enabled, desc):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a declared dependency
        return None
    return tqdm(total=total, desc=desc, file=sys.stderr, leave=False)


def _boot_loop(n_boot, rng, draw, work, progress, desc):
    """Draw and process replicates in fixed-size chunks (deterministic in rng)."""
    bar = _progress(n_boot, progress, desc)
    outs = []
    try:
        for a in range(0, n_boot, _BOOT_CHUNK):
            k = min(_BOOT_CHUNK, n_boot - a)
            outs.append(work(draw(k, rng)))
            if bar is not None:
                bar.update(k)
    finally:
        if bar is not None:
            bar.close()
    return outs


def _check_ci(ci):
    return check_float(ci, "ci", 0.0, 1.0, low_open=True, high_open=True)


def _percentile(samples, ci):
    a = (1.0 - ci) / 2.0
    return np.quantile(samples, a, axis=0), np.quantile(samples, 1.0 - a, axis=0)


# ----------------------------------------------------------------------------
# estimate
# ----------------------------------------------------------------------------
def estimate(sampled_ranks, N, n=None, metrics=("recall@10", "ndcg@10"), *, method=None, ci=0.95,
             n_boot=1000, rng=None, sample_sizes=None, scheme="binomial", options=None,
             refit_prior=True, progress=False, item_weights=None, exclude=None):
    """Corrected global top-K metrics with bootstrap confidence intervals.

    From the sampled ranks r_u (rank of user u's held-out item among itself and
    n - 1 sampled negatives) estimate the global metric T = mean_u F(R_u) of
    the rank R_u among all N items (TORS24 eq 3), for every requested metric.

    Parameters
    ----------
    sampled_ranks : array_like of int, shape (M,)
        Sampled ranks in 1..n (1 = the held-out item scored highest).
    N : int
        Number of items (candidates) in the global ranking.
    n : int, optional
        Sample-set size (held-out item + n - 1 negatives; 100 for "99
        negatives"). Required unless ``sample_sizes`` is given.
    metrics : str or sequence of str, default ("recall@10", "ndcg@10")
        Names like "recall@10", "ndcg@20", "ap@10", "precision@5", "mrr@10"
        (recall@K is the hit ratio HR@K).
    method : str, optional, keyword-only
        Estimator: "mle", "wmle", "mes" (rank-distribution estimators, AAAI21
        eqs 18-27, TORS24 eqs 31-36), "bv", "bv_mle", "bv_mes" (Krichene-Rendle
        BV with uniform / MLE / MES prior, TORS24 eqs 8-10), "mn", "mn_mle",
        "mn_mes" (multinomial estimator, TORS24 eq 42), "cls" (TORS24 eq 7),
        "adaptive_mle" (users with different sample sizes, TORS24 eq 43).
        Default: "adaptive_mle" when the sample sizes vary, else
        :data:`DEFAULT_METHOD` ("mle"), see below.
    ci : float in (0, 1), default 0.95, keyword-only
        Level of the two-sided percentile bootstrap interval.
    n_boot : int, default 1000, keyword-only
        Bootstrap replicates; 0 skips the bootstrap (NaN intervals).
    rng : None, int or numpy.random.Generator, keyword-only
        Randomness of the bootstrap; an int seed makes the table reproducible.
    sample_sizes : array_like of int, shape (M,), optional, keyword-only
        Per-user sample sizes (adaptive sampling, TORS24 Algorithm 1).
    scheme : {"binomial", "hypergeometric"}, keyword-only
        Negatives drawn with replacement (the papers' model, binomial kernel)
        or without (distinct negatives, e.g. :func:`sample_negatives`). For
        n << N the two agree closely.
    options : dict, optional, keyword-only
        Extra keyword arguments of the estimator (e.g. ``{"gamma": 0.1}`` for
        BV, ``{"eta": 0.01}`` for MES, ``{"weight": "ap"}`` for WMLE,
        ``{"tol": 1e-8, "max_iter": 10000, "accelerate": "squarem"}`` for a
        converged MLE).
    refit_prior : bool, default True, keyword-only
        For bv_mle, bv_mes, mn_mle, mn_mes: re-fit the prior on every bootstrap
        replicate (one EM or MES fit and one n x n solve per replicate).
        ``False`` keeps the prior fixed at the full-sample fit, which makes a
        replicate one matrix product but ignores the prior's own sampling
        variability: MN and BV are shrunk towards their prior, so their
        fixed-prior bootstrap standard errors are too small (measured: about
        half the refitted ones for NDCG@10 with MN_MLE, N = 1000, n = 50,
        M = 800). Plain "bv" and "mn" (uniform prior) are always matrix
        products.
    progress : bool, keyword-only
        Show a tqdm progress bar on stderr during the bootstrap.
    item_weights, exclude : optional, keyword-only
        **Popularity-sampled negatives** (RecBole ``popN``): with item weights
        (or a :class:`sampling_lib.popularity.PopularityLog`, or a scores table
        with a ``q`` column as first argument) the call is
        :func:`sampling_lib.popularity.estimate_popularity` on the scores
        table ``user, item, score, label[, model]`` given as first argument
        (``exclude``: the users' history, ``method`` in "pop_mle" (default),
        "ht", "uniform"; ``N`` and ``n`` are not used, ``scheme`` must be
        "binomial").

    Returns
    -------
    pandas.DataFrame
        One row per metric: ``metric, K, naive, naive_ci_low, naive_ci_high,
        estimate, se, ci_low, ci_high, method, users, N, n, ci, n_boot``.
        ``naive`` is the metric computed on the sampled ranks as if they were
        global ranks (what most papers report); ``estimate`` the corrected
        global metric; ``se`` the bootstrap standard deviation.

    Notes
    -----
    **What the interval covers.** Users are resampled with replacement and the
    whole estimator is re-run on every replicate, so the interval reflects
    both sources of randomness in the data: which users are in the test set
    (user sampling) and which negatives each user drew (item sampling; the
    sampled rank of a resampled user carries its own item-sampling noise).
    The target is the expected metric of the population the test users are
    drawn from. It does **not** cover the estimator's bias: every estimator
    here is biased for finite M (MLE is early-stopped EM, which smooths the
    rank distribution; BV/MN trade bias for variance; MES adds an entropy
    term), and a percentile bootstrap centred on a biased estimator is
    shifted by that bias. The bootstrap cannot see this bias: for the
    default early-stopped MLE the mean of the replicates minus the estimate
    is about 0 while the true bias is not (measured in notebook 09), so a
    bootstrap bias correction does not help. Coverage is therefore close to
    nominal while the bias is small against the standard error, and drops as
    M grows (the standard error shrinks like 1/sqrt(M), the bias does not);
    notebook 09 measures coverage and the bias that explains the gap.
    Item sampling is all the data can tell apart at the top: with n = 100
    and N = 10^4, all ranks R <= 100 usually map to sampled rank 1, so
    metrics at K much smaller than N/n are extrapolations of the estimator's
    model and the bias dominates.

    **Bootstrap computation.** A replicate is a Multinomial(M, counts / M)
    draw of the per-(sample size, rank) counts (:func:`bootstrap_counts`).
    Linear estimators with a fixed prior (BV, MN with the uniform prior, and
    BV/MN with an MLE/MES prior when ``refit_prior=False``) keep the prior
    (and, for MN, M) fixed at the full-sample fit, so all replicates are one
    matrix product of the resampled count matrix with the fixed (n x m)
    sampled-metric matrix.
    MLE / WMLE / adaptive MLE are by default "100 EM steps from the uniform
    distribution" (the papers' code): this protocol is rerun on all
    replicates at once as batched matrix products (a warm start would change
    the estimator). With ``options={"tol": ...}`` they are solved to
    convergence and each replicate is warm-started from the full-sample
    solution. MES (fast dual Newton, about 5 steps) and CLS are refitted per
    replicate.

    **Choice of the default** ("mle"). Measured by simulation (issue 9):
    synthetic models of :func:`sampling_lib.rankdist.synthetic_models`,
    N = 3000, n = 100, 4 models x 6 repeats, relative RMSE (%) against the
    population value, averaged over recall@10, recall@50, ndcg@10, ap@10:

    ========  =====  ======  ======  =====  =====  =====  ======
    M         mle    bv_mle  mn_mle  mes    bv     cls    wmle
    ========  =====  ======  ======  =====  =====  =====  ======
    1000      20.4   19.5    20.3    22.2   32.2   44.8   296.9
    10000     16.6   15.4    16.2    19.9   30.9   44.7   298.8
    ========  =====  ======  ======  =====  =====  =====  ======

    MLE, BV_MLE and MN_MLE are within a few percent of each other (BV/MN
    with an MLE prior move away from the MLE only through its residual,
    notebook 04); MES is best for Recall but worse for NDCG/AP; plain BV
    and CLS are far behind (TORS24 Sec 8.3 reports the same grouping).
    Notebook 09 (section 3) re-measures this and checks that MLE is within
    1.5x of the best method for every metric. MLE is chosen among the
    leading group because it is a proper distribution (estimates lie in
    the metric's range and Recall@K is monotone in K), needs no tuning
    parameter, and its bootstrap is cheap (batched EM, no prior to re-fit).

    References
    ----------
    TORS24 eqs 3, 7-10, 31-36, 42-43; AAAI21 eqs 14, 18-27; Efron and
    Tibshirani (1993) ch. 13 (percentile interval).

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models, draw_global_ranks
    >>> from sampling_lib.sampling import sample_ranks
    >>> pmf = synthetic_models(1000)["beta_a0.35"]
    >>> R = draw_global_ranks(pmf, 500, rng=0)
    >>> r = sample_ranks(R, 1000, 100, rng=1)
    >>> t = estimate(r, N=1000, n=100, metrics=["recall@10"], n_boot=200, rng=0)
    >>> print(t[["metric", "K", "method", "users"]].to_string(index=False))
       metric  K method  users
    recall@10 10    mle    500
    >>> bool(t.ci_low[0] <= t.estimate[0] <= t.ci_high[0])
    True
    """
    from . import popularity as _pop

    if item_weights is not None or _pop._is_popularity_input(sampled_ranks):
        return _pop.estimate_popularity(sampled_ranks, metrics, method=method or "pop_mle", ci=ci,
                                        n_boot=n_boot, rng=rng, item_weights=item_weights, exclude=exclude,
                                        replace=check_scheme(scheme) == "binomial", progress=progress)
    N = check_int(N, "N", low=2)
    stat = rank_counts(sampled_ranks, n, sample_sizes=sample_sizes)
    for ns in stat.size_values:
        check_N_n(N, int(ns))
    scheme = check_scheme(scheme)
    method = _check_method(method, stat)
    ci = _check_ci(ci)
    n_boot = check_int(n_boot, "n_boot", low=0)
    parsed = _parse_metrics(metrics)
    rng = np.random.default_rng(rng)

    F = _metric_matrix(parsed, N)
    Fn = _naive_matrix(parsed, stat)
    M = stat.M
    naive = (stat.counts @ Fn) / M
    fit = _fit(method, stat, N, parsed, scheme, options)
    fit.refit_prior = bool(refit_prior)
    est = fit.weights @ F
    lo = hi = np.full(len(parsed), np.nan)
    nlo = nhi = se = np.full(len(parsed), np.nan)
    if n_boot > 0:
        Kc = _kernel_cols(N, stat, scheme) if (method in _EM) else None
        p = stat.counts / M

        def draw(k, g):
            return g.multinomial(M, p, size=k)

        def work(Cb):
            return (Cb / M) @ Fn, _replicates(fit, stat, N, parsed, scheme, Cb, F, Kc)

        outs = _boot_loop(n_boot, rng, draw, work, progress, f"bootstrap {method}")
        nb = np.concatenate([o[0] for o in outs])
        eb = np.concatenate([o[1] for o in outs])
        lo, hi = _percentile(eb, ci)
        nlo, nhi = _percentile(nb, ci)
        se = eb.std(axis=0, ddof=1) if n_boot > 1 else np.full(len(parsed), np.nan)
    sizes = stat.size_values
    return pd.DataFrame({
        "metric": [p[0] for p in parsed],
        "K": [p[2] for p in parsed],
        "naive": naive,
        "naive_ci_low": nlo,
        "naive_ci_high": nhi,
        "estimate": est,
        "se": se,
        "ci_low": lo,
        "ci_high": hi,
        "method": method,
        "users": M,
        "N": N,
        "n": int(sizes[0]) if sizes.size == 1 else -1,
        "ci": ci,
        "n_boot": n_boot,
    })


# ----------------------------------------------------------------------------
# compare
# ----------------------------------------------------------------------------
def _as_model_dict(ranks, sample_sizes):
    """{model: (ranks, sizes or None)} with equal lengths (same users, same order)."""
    if isinstance(ranks, SampledRanks):
        if ranks.ranks.isna().any().any():
            counts = ranks.ranks.isna().sum()
            bad = {k: int(v) for k, v in counts.items() if v}
            raise ValueError(f"compare needs every model on the same users; missing users per "
                             f"model: {bad}")
        d = {m: ranks.for_model(m) for m in ranks.models}
    else:
        if isinstance(ranks, pd.DataFrame):
            d0 = {str(c): ranks[c].to_numpy() for c in ranks.columns}
        elif isinstance(ranks, dict):
            d0 = {str(k): np.asarray(v) for k, v in ranks.items()}
        else:
            raise TypeError("ranks must be a dict {model: sampled ranks}, a DataFrame with one "
                            f"column per model, or SampledRanks; got {type(ranks).__name__}")
        ss = sample_sizes
        d = {}
        for k, v in d0.items():
            s = ss.get(k) if isinstance(ss, dict) else ss
            d[k] = (v, None if s is None else np.asarray(s))
    if len(d) < 2:
        raise ValueError(f"compare needs at least 2 models; got {len(d)}")
    sizes = {k: np.asarray(v[0]).size for k, v in d.items()}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"compare needs the same users (same length and order) for every model; "
                         f"got sizes {sizes}")
    return d


def compare(ranks, N, n=None, metrics=("recall@10", "ndcg@10"), *, method=None, ci=0.95,
            n_boot=1000, rng=None, sample_sizes=None, alpha=0.05, adjust="holm",
            scheme="binomial", options=None, refit_prior=True, progress=False, item_weights=None,
            exclude=None):
    """Pairwise differences of corrected metrics with paired bootstrap CIs and Holm.

    Several models evaluated on the **same users** (row u of every model is
    the same user): the users are resampled jointly (a paired bootstrap: one
    multinomial draw over the distinct tuples of per-model cells), every
    model is re-estimated on the replicate, and each pairwise difference of
    corrected metrics gets a bootstrap standard error.

    Parameters
    ----------
    ranks : dict {model: sampled ranks}, DataFrame (one column per model) or SampledRanks
    N, n, metrics, method, ci, n_boot, rng, sample_sizes, scheme, options, refit_prior, progress
        As :func:`estimate` (``sample_sizes`` may be a dict per model).
    item_weights, exclude : optional, keyword-only
        Popularity-sampled negatives: as :func:`estimate`, the call is
        :func:`sampling_lib.popularity.compare_popularity`.
    alpha : float in (0, 1), keyword-only
        Family-wise error rate of the decisions (family = all model pairs, per metric).
    adjust : {"holm", "bonferroni", "none"}, keyword-only
        Multiple-comparison adjustment (:func:`sampling_lib.user_sampling.adjust_pvalues`).

    Returns
    -------
    pandas.DataFrame
        One row per (metric, pair): ``metric, K, model_a, model_b, estimate_a,
        estimate_b, difference, se, statistic, pvalue, pvalue_adjusted, reject,
        decision, ci_low, ci_high, ci_level, n_comparisons, adjust, alpha,
        method, users, n_boot``.

    Notes
    -----
    The test statistic is z = difference / se with the bootstrap standard
    error and p = 2 (1 - Phi(|z|)) (normal approximation of the bootstrap
    distribution of the difference); p-values are Holm-adjusted over the
    n_models (n_models - 1) / 2 pairs of each metric (TORS24 Sec 7.2 uses
    Bonferroni; Holm is uniformly more powerful at the same family-wise
    level). ``ci_low, ci_high`` is the percentile interval of the difference
    at the Bonferroni level 1 - (1 - ci) / k, simultaneous over the k pairs.
    The intervals cover user and item sampling, not the estimators' bias
    (which largely cancels in differences of models with similar rank
    distributions, but not in general).

    References
    ----------
    TORS24 Sec 7.2; Holm (1979), Scand. J. Statist. 6:65-70.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> r = {"A": rng.integers(1, 30, 400), "B": rng.integers(1, 101, 400)}
    >>> t = compare(r, N=2000, n=100, metrics="recall@50", n_boot=200, rng=0)
    >>> print(t[["model_a", "model_b", "decision"]].to_string(index=False))
    model_a model_b decision
          A       B    A > B
    """
    from . import popularity as _pop
    from .user_sampling import adjust_pvalues  # lazy: statsmodels is slow to import

    if item_weights is not None or _pop._is_popularity_input(ranks):
        return _pop.compare_popularity(ranks, metrics, method=method or "pop_mle", ci=ci, n_boot=n_boot,
                                       rng=rng, alpha=alpha, adjust=adjust, item_weights=item_weights,
                                       exclude=exclude, replace=check_scheme(scheme) == "binomial",
                                       progress=progress)
    N = check_int(N, "N", low=2)
    d = _as_model_dict(ranks, sample_sizes)
    ci = _check_ci(ci)
    n_boot = check_int(n_boot, "n_boot", low=2)
    alpha = check_float(alpha, "alpha", 0.0, 1.0, low_open=True, high_open=True)
    if adjust not in ("holm", "bonferroni", "none"):
        raise ValueError(f"adjust must be 'holm', 'bonferroni' or 'none'; got {adjust!r}")
    scheme = check_scheme(scheme)
    parsed = _parse_metrics(metrics)
    rng = np.random.default_rng(rng)
    F = _metric_matrix(parsed, N)
    names = list(d)
    stats_, fits, kcs, cell_of_user = {}, {}, {}, {}
    meth = None
    for m in names:
        r, s = d[m]
        st = rank_counts(r, n, sample_sizes=s)
        for ns in st.size_values:
            check_N_n(N, int(ns))
        mm = _check_method(method, st)
        if meth is not None and mm != meth:
            raise ValueError(f"models need the same method; got {meth!r} and {mm!r} "
                             "(pass method='adaptive_mle' when sample sizes vary)")
        meth = mm
        stats_[m] = st
        fits[m] = _fit(meth, st, N, parsed, scheme, options)
        fits[m].refit_prior = bool(refit_prior)
        kcs[m] = _kernel_cols(N, st, scheme) if meth in _EM else None
        # cell index of every user
        rr = check_ranks(r, np.iinfo(np.int64).max, name=f"ranks[{m!r}]")
        ss = np.full(rr.size, int(st.size_values[0])) if s is None else np.asarray(s, dtype=np.int64)
        key = ss * (int(rr.max()) + 1) + rr
        ckey = st.sizes * (int(rr.max()) + 1) + st.ranks
        cell_of_user[m] = np.searchsorted(ckey, key)
    # distinct tuples of per-model cells = joint sufficient statistic of the paired design
    U = np.stack([cell_of_user[m] for m in names], axis=1)
    tuples, tcount = np.unique(U, axis=0, return_counts=True)
    M = int(tcount.sum())
    T = tuples.shape[0]
    maps = {m: sparse.csr_matrix((np.ones(T), (np.arange(T), tuples[:, i])),
                                 shape=(T, stats_[m].ranks.size))
            for i, m in enumerate(names)}
    point = {m: fits[m].weights @ F for m in names}
    p = tcount / M

    def draw(k, g):
        return g.multinomial(M, p, size=k)

    def work(Ct):
        out = {}
        for m in names:
            Cb = np.asarray((maps[m].T @ Ct.T).T)
            out[m] = _replicates(fits[m], stats_[m], N, parsed, scheme, Cb, F, kcs[m])
        return out

    outs = _boot_loop(n_boot, rng, draw, work, progress, f"paired bootstrap {meth}")
    boot = {m: np.concatenate([o[m] for o in outs]) for m in names}
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    k = len(pairs)
    level = ci if adjust == "none" else 1.0 - (1.0 - ci) / k
    rows = []
    for j, (full, _, K) in enumerate(parsed):
        block = []
        for a, b in pairs:
            diff = point[a][j] - point[b][j]
            db = boot[a][:, j] - boot[b][:, j]
            se = float(db.std(ddof=1))
            z = diff / se if se > 0 else (0.0 if diff == 0 else np.inf * np.sign(diff))
            pv = float(math.erfc(abs(z) / math.sqrt(2.0)))       # 2 (1 - Phi(|z|))
            lo, hi = _percentile(db, level)
            block.append(dict(metric=full, K=K, model_a=a, model_b=b, estimate_a=point[a][j],
                              estimate_b=point[b][j], difference=diff, se=se, statistic=z,
                              pvalue=pv, ci_low=float(lo), ci_high=float(hi)))
        rej, padj = adjust_pvalues([r["pvalue"] for r in block], adjust, alpha)
        for r, rj, pa in zip(block, rej, padj):
            if not rj:
                dec = "no significant difference"
            else:
                dec = f"{r['model_a']} > {r['model_b']}" if r["difference"] > 0 else \
                    f"{r['model_a']} < {r['model_b']}"
            rows.append({**r, "pvalue_adjusted": float(pa), "reject": bool(rj), "decision": dec,
                         "ci_level": level, "n_comparisons": k, "adjust": adjust, "alpha": alpha,
                         "method": meth, "users": M, "n_boot": n_boot})
    cols = ["metric", "K", "model_a", "model_b", "estimate_a", "estimate_b", "difference", "se",
            "statistic", "pvalue", "pvalue_adjusted", "reject", "decision", "ci_low", "ci_high",
            "ci_level", "n_comparisons", "adjust", "alpha", "method", "users", "n_boot"]
    return pd.DataFrame(rows)[cols]


# ----------------------------------------------------------------------------
# input adapters
# ----------------------------------------------------------------------------
@dataclass(frozen=True)
class SampledRanks:
    """Per-user sampled ranks of one or more models (output of the adapters).

    Attributes
    ----------
    ranks : pandas.DataFrame
        Index: user; one column per model; sampled ranks (nullable Int64: a
        user missing for a model is <NA>).
    sample_sizes : pandas.DataFrame or None
        Same shape: per-user sample sizes n_u (None when not given).
    """

    ranks: pd.DataFrame
    sample_sizes: pd.DataFrame | None

    @property
    def models(self) -> list:
        return [str(c) for c in self.ranks.columns]

    def for_model(self, model):
        """(sampled_ranks, sample_sizes or None) of one model, users with a rank only."""
        if model not in self.ranks.columns:
            raise ValueError(f"model must be one of {self.models}; got {model!r}")
        col = self.ranks[model]
        keep = col.notna().to_numpy()
        r = col.to_numpy()[keep].astype(np.int64)
        if self.sample_sizes is None:
            return r, None
        return r, self.sample_sizes[model].to_numpy()[keep].astype(np.int64)


def _read_table(table, what):
    if isinstance(table, pd.DataFrame):
        return table
    path = os.fspath(table)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} file not found: {path}")
    try:
        sep = "\t" if path.endswith((".tsv", ".tab")) else ","
        return pd.read_csv(path, sep=sep)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{what} file is empty: {path}") from None
    except pd.errors.ParserError as exc:
        msg = str(exc).strip().splitlines()[0]
        raise ValueError(f"{what} file {path} is not a valid CSV: {msg}") from None


def _need_cols(df, cols, what):
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} must have column(s) {missing}; found columns {list(df.columns)}")


def _int_column(s, name):
    v = pd.to_numeric(s, errors="coerce")
    bad = v.isna() | ~np.isfinite(v.astype(float)) | (v != np.round(v))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"column {name!r} must hold integers; got {s.iloc[i]!r} in row {i + 1}")
    return v.astype(np.int64)


def ranks_from_table(table, *, user_col="user", rank_col="rank", size_col="sample_size",
                     model_col="model", n=None):
    """Per-user sampled ranks from a table (DataFrame or CSV/TSV path).

    Columns: ``user``, ``rank`` (sampled rank, 1 = best), optional
    ``sample_size`` (per-user n_u) and optional ``model`` (one row per user
    and model). Without a model column all rows are one model named "model".

    Parameters
    ----------
    table : DataFrame or path
    user_col, rank_col, size_col, model_col : str, keyword-only
        Column names.
    n : int, optional, keyword-only
        Common sample size: ranks must lie in 1..n (checked here).

    Returns
    -------
    SampledRanks

    Examples
    --------
    >>> df = pd.DataFrame({"user": [1, 2, 1, 2], "model": ["A", "A", "B", "B"],
    ...                    "rank": [1, 5, 3, 2]})
    >>> s = ranks_from_table(df, n=10)
    >>> s.models, s.for_model("B")[0].tolist()
    (['A', 'B'], [3, 2])
    """
    df = _read_table(table, "ranks")
    _need_cols(df, [user_col, rank_col], "the ranks table")
    if len(df) == 0:
        raise ValueError("the ranks table has no rows")
    work = pd.DataFrame({"user": df[user_col].to_numpy(),
                         "rank": _int_column(df[rank_col], rank_col).to_numpy()})
    work["model"] = df[model_col].astype(str).to_numpy() if model_col in df.columns else "model"
    has_size = size_col in df.columns
    if has_size:
        work["size"] = _int_column(df[size_col], size_col).to_numpy()
        if (work["size"] < 2).any():
            raise ValueError(f"column {size_col!r} must be >= 2; got min {work['size'].min()}")
    if (work["rank"] < 1).any():
        raise ValueError(f"column {rank_col!r} must hold ranks >= 1; got min {work['rank'].min()}")
    if n is not None:
        n = check_int(n, "n", low=2)
        if has_size and (work["size"] != n).any():
            raise ValueError(f"--sample-size n={n} disagrees with column {size_col!r}")
        if (work["rank"] > n).any():
            raise ValueError(f"sampled ranks must lie in 1..n={n}; got max {work['rank'].max()}")
    if has_size and (work["rank"] > work["size"]).any():
        i = int(np.flatnonzero((work["rank"] > work["size"]).to_numpy())[0])
        raise ValueError(f"sampled ranks must lie in 1..sample_size; row {i + 1} has rank "
                         f"{work['rank'].iloc[i]} > sample_size {work['size'].iloc[i]}")
    dup = work.duplicated(["user", "model"])
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise ValueError(f"each (user, model) must appear once; user {work['user'].iloc[i]!r} "
                         f"of model {work['model'].iloc[i]!r} repeats (row {i + 1})")
    order = list(dict.fromkeys(work["model"]))
    users = list(dict.fromkeys(work["user"]))
    R = work.pivot(index="user", columns="model", values="rank").reindex(index=users, columns=order)
    S = None
    if has_size:
        S = work.pivot(index="user", columns="model", values="size").reindex(index=users, columns=order)
        S = S.astype("Int64")
    return SampledRanks(R.astype("Int64"), S)


def ranks_from_scores(pos_scores, neg_scores, *, ties="pessimistic", rng=None):
    """Sampled ranks from the scores of the held-out item and its sampled negatives.

    r_u = 1 + #{negatives scored above the held-out item} + (tie term).

    Tie rule (``ties``):

    * ``"pessimistic"`` (default): every negative with an **equal** score
      counts as ranked above (r = 1 + #{s_neg >= s_pos}). Deterministic, and
      a model that scores everything equally gets the worst rank instead of
      rank 1.
    * ``"optimistic"``: ties count as below (r = 1 + #{s_neg > s_pos});
      inflates the metrics of models with many ties.
    * ``"random"``: the held-out item takes a uniformly random position among
      its ties (needs ``rng`` for reproducibility).

    Whatever the rule, the corrected estimate targets the global metric with
    the *same* rule for global ties: a fixed rule makes each sampled
    negative independently "above" with probability (R - 1)/(N - 1), so
    the sampled-rank law P(r | R) of the estimators holds with R defined by
    that rule (for "random", with global ties broken at random).

    Parameters
    ----------
    pos_scores : array_like, shape (M,)
        Score of each user's held-out item.
    neg_scores : array_like, shape (M, n - 1)
        Scores of the user's sampled negatives (NaN entries are ignored, so
        users may have different numbers of negatives; their sample size is
        then 1 + the number of non-NaN negatives).
    ties : {"pessimistic", "optimistic", "random"}, keyword-only
    rng : None, int or Generator, keyword-only

    Returns
    -------
    ranks : ndarray of int64, shape (M,)
        Sampled ranks in 1..n_u.
    sample_sizes : ndarray of int64, shape (M,)
        n_u = 1 + number of negatives of the user.

    Examples
    --------
    >>> r, n = ranks_from_scores([0.5, 0.9, 0.2], [[0.1, 0.5, 0.7], [0.1, 0.2, 0.3],
    ...                                           [0.2, 0.2, 0.2]])
    >>> r.tolist(), n.tolist()
    ([3, 1, 4], [4, 4, 4])
    >>> ranks_from_scores([0.5], [[0.1, 0.5, 0.7]], ties="optimistic")[0].tolist()
    [2]
    """
    if ties not in _TIES:
        raise ValueError(f"ties must be one of {_TIES}; got {ties!r}")
    pos = np.asarray(pos_scores, dtype=float)
    neg = np.asarray(neg_scores, dtype=float)
    if pos.ndim != 1 or pos.size == 0:
        raise ValueError(f"pos_scores must be a non-empty 1-D array; got shape {pos.shape}")
    if neg.ndim != 2 or neg.shape[0] != pos.size or neg.shape[1] < 1:
        raise ValueError(f"neg_scores must have shape (M, n-1) = ({pos.size}, >=1); got {neg.shape}")
    if not np.all(np.isfinite(pos)):
        raise ValueError("pos_scores must be finite (no NaN/inf): every user needs a held-out score")
    if np.any(np.isinf(neg)):
        raise ValueError("neg_scores must not contain inf (NaN marks a missing negative)")
    valid = ~np.isnan(neg)
    sizes = 1 + valid.sum(axis=1)
    if np.any(sizes < 2):
        raise ValueError("every user needs at least one negative score")
    with np.errstate(invalid="ignore"):
        gt = ((neg > pos[:, None]) & valid).sum(axis=1)
        eq = ((neg == pos[:, None]) & valid).sum(axis=1)
    r = _apply_ties(gt, eq, ties, np.random.default_rng(rng))
    return r.astype(np.int64), sizes.astype(np.int64)


def ranks_from_score_table(table, *, user_col="user", score_col="score", label_col="label",
                           model_col="model", ties="pessimistic", rng=None):
    """Sampled ranks from a long table of scores (the layout of a ``uni100`` evaluation).

    One row per (user, item[, model]) of the sample set: ``user``, ``score``,
    ``label`` (1 for the held-out item, 0 for a sampled negative), optional
    ``model``. Each (user, model) group must hold exactly one label-1 row; its
    sample size n_u is the group's size. Ties as :func:`ranks_from_scores`.

    Returns
    -------
    SampledRanks
        With ``sample_sizes`` filled in.

    Examples
    --------
    >>> df = pd.DataFrame({"user": [7, 7, 7, 8, 8, 8], "label": [1, 0, 0, 1, 0, 0],
    ...                    "score": [0.3, 0.9, 0.1, 0.5, 0.5, 0.2]})
    >>> s = ranks_from_score_table(df)
    >>> s.for_model("model")[0].tolist(), s.for_model("model")[1].tolist()
    ([2, 2], [3, 3])
    """
    if ties not in _TIES:
        raise ValueError(f"ties must be one of {_TIES}; got {ties!r}")
    df = _read_table(table, "scores")
    _need_cols(df, [user_col, score_col, label_col], "the scores table")
    if len(df) == 0:
        raise ValueError("the scores table has no rows")
    score = pd.to_numeric(df[score_col], errors="coerce")
    if score.isna().any() or not np.all(np.isfinite(score)):
        i = int(np.flatnonzero((score.isna() | ~np.isfinite(score)).to_numpy())[0])
        raise ValueError(f"column {score_col!r} must hold finite numbers; got "
                         f"{df[score_col].iloc[i]!r} in row {i + 1}")
    label = _int_column(df[label_col], label_col)
    if not label.isin([0, 1]).all():
        raise ValueError(f"column {label_col!r} must be 0 (negative) or 1 (held-out item)")
    w = pd.DataFrame({"user": df[user_col].to_numpy(), "score": score.to_numpy(float),
                      "label": label.to_numpy(),
                      "model": df[model_col].astype(str).to_numpy() if model_col in df.columns
                      else "model"})
    g = w.groupby(["model", "user"], sort=False)
    npos = g["label"].sum()
    if (npos != 1).any():
        (m, u), v = next((k, v) for k, v in npos.items() if v != 1)
        raise ValueError(f"each (user, model) needs exactly one held-out row ({label_col}=1); "
                         f"user {u!r} of model {m!r} has {v}")
    size = g.size()
    if (size < 2).any():
        (m, u) = next(k for k, v in size.items() if v < 2)
        raise ValueError(f"user {u!r} of model {m!r} has no negatives")
    pos = w[w.label == 1].set_index(["model", "user"])["score"]
    neg = w[w.label == 0].join(pos.rename("pos"), on=["model", "user"])
    neg = neg.assign(gt=(neg.score > neg.pos).astype(np.int64),
                     eq=(neg.score == neg.pos).astype(np.int64))
    g2 = neg.groupby(["model", "user"], sort=False)[["gt", "eq"]].sum()
    gt = g2["gt"].reindex(size.index).fillna(0).astype(np.int64).to_numpy()
    eq = g2["eq"].reindex(size.index).fillna(0).astype(np.int64).to_numpy()
    r = _apply_ties(gt, eq, ties, np.random.default_rng(rng))
    out = pd.DataFrame({"model": size.index.get_level_values(0),
                        "user": size.index.get_level_values(1),
                        "rank": np.asarray(r), "sample_size": size.to_numpy()})
    return ranks_from_table(out)


# ----------------------------------------------------------------------------
# fixed negatives
# ----------------------------------------------------------------------------
def sample_negatives(users, N, n, *, exclude=None, held_out=None, replace=False, rng=None):
    """A fixed set of n - 1 sampled negatives per user (same items for every model).

    Items are integer ids 0..N-1. For each user (in the given order) n - 1
    negatives are drawn uniformly from the items that are neither the user's
    held-out item nor in the user's ``exclude`` set (e.g. training items),
    without replacement by default (then evaluate with
    ``scheme="hypergeometric"``; with ``replace=True`` the papers' binomial
    kernel is exact). Deterministic for a given ``rng`` seed.

    Parameters
    ----------
    users : array_like
        User ids (duplicates are an error).
    N : int
        Number of items; ids 0..N-1.
    n : int
        Sample-set size; n - 1 negatives per user.
    exclude : DataFrame with columns user, item, or dict {user: items}, optional
    held_out : array_like, optional
        Held-out item of each user (aligned with ``users``), never a negative.
    replace : bool
        Sample with replacement (duplicates possible).
    rng : None, int or Generator, keyword-only

    Returns
    -------
    pandas.DataFrame
        Columns ``user, item``, n - 1 rows per user, users in input order.

    Notes
    -----
    With exclusions the candidate set differs per user (N_u = N - |excluded|
    - 1 items can be sampled), whereas the estimators assume one N. Pass
    ``N`` = the typical number of candidates to :func:`estimate` (for
    MovieLens-size data the difference is a few percent of N).

    Examples
    --------
    >>> neg = sample_negatives(["a", "b"], N=50, n=4, held_out=[3, 7], rng=0)
    >>> neg.shape, neg.groupby("user").size().tolist()
    ((6, 2), [3, 3])
    """
    N, n = check_N_n(N, n)
    users = pd.Index(pd.Series(users).to_numpy())
    if users.size == 0:
        raise ValueError("users must be non-empty")
    if users.has_duplicates:
        raise ValueError(f"users must be unique; {users[users.duplicated()][0]!r} repeats")
    rng = np.random.default_rng(rng)
    excl = {}
    if exclude is not None:
        if isinstance(exclude, pd.DataFrame):
            _need_cols(exclude, ["user", "item"], "the exclude table")
            items = _int_column(exclude["item"], "item").to_numpy()
            if items.size and (items.min() < 0 or items.max() >= N):
                raise ValueError(f"excluded items must be ids in 0..N-1={N - 1}; got "
                                 f"{items.min()}..{items.max()}")
            for u, it in pd.Series(items).groupby(exclude["user"].to_numpy()):
                excl[u] = it.to_numpy()
        else:
            excl = {u: np.asarray(list(v), dtype=np.int64) for u, v in dict(exclude).items()}
    ho = None
    if held_out is not None:
        ho = np.asarray(held_out)
        if ho.shape != (users.size,):
            raise ValueError(f"held_out must have one item per user ({users.size}); got shape {ho.shape}")
        ho = _int_column(pd.Series(ho), "held_out").to_numpy()
        if ho.min() < 0 or ho.max() >= N:
            raise ValueError(f"held_out items must be ids in 0..N-1={N - 1}; got {ho.min()}..{ho.max()}")
    k = n - 1
    out_i = []
    for j, u in enumerate(users):
        bad = np.unique(np.concatenate([excl.get(u, np.empty(0, np.int64)),
                                        [] if ho is None else [ho[j]]]).astype(np.int64))
        avail = N - bad.size
        if avail < (1 if replace else k):
            raise ValueError(f"user {u!r} has only {avail} candidate negatives; n-1={k} needed "
                             "(lower --sample-size or use replacement)")
        if replace:
            pos = rng.integers(0, avail, size=k)
        else:
            pos = rng.choice(avail, size=k, replace=False) if avail < 4 * k else None
            if pos is None:
                got = np.empty(0, np.int64)
                while got.size < k:
                    cand = rng.integers(0, avail, size=2 * k)
                    _, idx = np.unique(np.concatenate([got, cand]), return_index=True)
                    got = np.concatenate([got, cand])[np.sort(idx)]
                pos = got[:k]
        # map positions in the allowed set to item ids (skip the excluded ids)
        items = pos + np.searchsorted(bad - np.arange(bad.size), pos, side="right")
        out_i.append(items)
    return pd.DataFrame({"user": np.repeat(users.to_numpy(), k), "item": np.concatenate(out_i)})



# ----------------------------------------------------------------------------
# coverage simulation (notebook 09, tests)
# ----------------------------------------------------------------------------
def simulate_coverage(pmf, n, M, repeats, metrics=("recall@10", "ndcg@10"), *, method=None,
                      ci=0.95, n_boot=200, scheme="binomial", options=None, refit_prior=True,
                      rng=None):
    """Coverage of the bootstrap intervals of :func:`estimate` by simulation.

    Each repeat draws M users' global ranks from ``pmf`` (a known population),
    their sampled ranks (:func:`sampling_lib.sampling.sample_ranks`), and runs
    :func:`estimate`. The population value T = sum_R pmf(R) F(R) is the
    target; the finite-sample value (mean F(R_u) of the M drawn users) is
    recorded too.

    Returns
    -------
    pandas.DataFrame
        One row per (repeat, metric): the :func:`estimate` columns plus
        ``repeat, truth, truth_users, covered, naive_covered, covered_users``.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> d = simulate_coverage(synthetic_models(300)["beta_a0.35"], 30, 200, 2,
    ...                       metrics="recall@10", n_boot=50, rng=0)
    >>> d.shape[0], {"covered", "naive_covered"} <= set(d.columns)
    (2, True)
    """
    from .rankdist import draw_global_ranks
    from .sampling import sample_ranks

    pmf = np.asarray(pmf, dtype=float)
    N = pmf.size
    repeats = check_int(repeats, "repeats", low=1)
    M = check_int(M, "M", low=1)
    parsed = _parse_metrics(metrics)
    F = _metric_matrix(parsed, N)
    truth = pmf @ F
    rng = np.random.default_rng(rng)
    out = []
    for rep in range(repeats):
        R = draw_global_ranks(pmf, M, rng=rng)
        r = sample_ranks(R, N, n, scheme, rng=rng)
        t = estimate(r, N, n, [p[0] for p in parsed], method=method, ci=ci, n_boot=n_boot,
                     rng=rng, scheme=scheme, options=options, refit_prior=refit_prior)
        t.insert(0, "repeat", rep)
        t["truth"] = truth
        t["truth_users"] = F[R - 1].mean(axis=0)
        out.append(t)
    d = pd.concat(out, ignore_index=True)
    d["covered"] = (d.ci_low <= d.truth) & (d.truth <= d.ci_high)
    d["covered_users"] = (d.ci_low <= d.truth_users) & (d.truth_users <= d.ci_high)
    d["naive_covered"] = (d.naive_ci_low <= d.truth) & (d.truth <= d.naive_ci_high)
    return d


def simulate_accuracy(pmf, n, M, repeats, metrics=("recall@10", "ndcg@10"), *,
                      methods=("mle", "mes", "bv", "bv_mle", "mn_mle"), scheme="binomial", rng=None):
    """Errors of the point estimates of several methods over simulated evaluations.

    Each repeat draws M users from ``pmf`` and their sampled ranks, and runs
    :func:`estimate` (no bootstrap) for every method on the same ranks.

    Returns
    -------
    pandas.DataFrame
        One row per (repeat, method, metric): ``estimate, naive, truth, error``
        (estimate - truth, truth = sum_R pmf(R) F(R)).

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> d = simulate_accuracy(synthetic_models(200)["mixture"], 20, 100, 2, "recall@5",
    ...                       methods=("mle", "bv"), rng=0)
    >>> d.shape
    (4, 7)
    """
    from .rankdist import draw_global_ranks
    from .sampling import sample_ranks

    pmf = np.asarray(pmf, dtype=float)
    N = pmf.size
    parsed = _parse_metrics(metrics)
    truth = pmf @ _metric_matrix(parsed, N)
    rng = np.random.default_rng(rng)
    rows = []
    for rep in range(check_int(repeats, "repeats", low=1)):
        r = sample_ranks(draw_global_ranks(pmf, M, rng=rng), N, n, scheme, rng=rng)
        for m in methods:
            t = estimate(r, N, n, [p[0] for p in parsed], method=m, n_boot=0, scheme=scheme)
            for j, (full, _, _) in enumerate(parsed):
                rows.append(dict(repeat=rep, method=m, metric=full, estimate=t.estimate[j],
                                 naive=t.naive[j], truth=truth[j],
                                 error=t.estimate[j] - truth[j]))
    return pd.DataFrame(rows)


def simulate_paired_difference(pmf_a, pmf_b, n, M, repeats, metrics=("recall@10", "ndcg@10"), *,
                               share=0.7, method=None, n_boot=200, scheme="binomial", rng=None):
    """Repeated paired comparisons of two known models on the same simulated users.

    User u gets a uniform U_u; model A's global rank is the U_u-quantile of
    ``pmf_a``, model B's the quantile of U_u (with probability ``share``) or of
    a fresh uniform (so the two models' ranks are positively dependent, as
    for real models on the same users). Each repeat runs :func:`compare`.

    Returns
    -------
    pandas.DataFrame
        :func:`compare` rows plus ``repeat`` and ``truth_difference``.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> m = synthetic_models(200)
    >>> d = simulate_paired_difference(m["beta_a0.25"], m["beta_a0.50"], 20, 100, 2,
    ...                                "recall@5", n_boot=30, rng=0)
    >>> len(d), "truth_difference" in d
    (2, True)
    """
    from .sampling import sample_ranks

    pa, pb = np.asarray(pmf_a, dtype=float), np.asarray(pmf_b, dtype=float)
    if pa.shape != pb.shape:
        raise ValueError(f"pmf_a and pmf_b must have the same length; got {pa.size} and {pb.size}")
    N = pa.size
    share = check_float(share, "share", 0.0, 1.0)
    parsed = _parse_metrics(metrics)
    F = _metric_matrix(parsed, N)
    truth = pa @ F - pb @ F
    ca, cb = np.cumsum(pa), np.cumsum(pb)
    rng = np.random.default_rng(rng)
    out = []
    for rep in range(check_int(repeats, "repeats", low=1)):
        U = rng.random(M)
        Ub = np.where(rng.random(M) < share, U, rng.random(M))
        Ra = np.minimum(np.searchsorted(ca, U, side="right") + 1, N)
        Rb = np.minimum(np.searchsorted(cb, Ub, side="right") + 1, N)
        d = {"A": sample_ranks(Ra, N, n, scheme, rng=rng), "B": sample_ranks(Rb, N, n, scheme, rng=rng)}
        t = compare(d, N, n, [p[0] for p in parsed], method=method, n_boot=n_boot, rng=rng,
                    scheme=scheme)
        t.insert(0, "repeat", rep)
        t["truth_difference"] = truth
        out.append(t)
    return pd.concat(out, ignore_index=True)


def coverage_summary(sim, ci=0.95, *, estimate_col="estimate", truth_col="truth",
                     low_col="ci_low", high_col="ci_high", se_col="se", by="metric"):
    """Coverage of simulated intervals and the coverage their bias predicts.

    For each group (default: metric) of a simulation table (from
    :func:`simulate_coverage` or :func:`simulate_paired_difference`):

    * ``coverage`` = fraction of repeats whose interval holds the truth, with
      its Monte Carlo standard error ``coverage_se`` = sqrt(p (1 - p) / R);
    * ``bias`` = mean(estimate - truth), ``sd`` = sd of the estimates over the
      repeats, ``mean_se`` = mean bootstrap standard error (should match sd);
    * ``predicted`` = Phi(z - bias/sd) - Phi(-z - bias/sd), z = Phi^-1((1 + ci)/2):
      the coverage of a normal interval of the right width centred on an
      estimator with that bias; ``predicted_se`` its standard error from the
      uncertainty of the bias (sd / sqrt(R)), by the delta method.

    A measured coverage close to ``predicted`` and below ``ci`` means the
    interval has the right width and the gap is the estimator's bias.

    Examples
    --------
    >>> d = pd.DataFrame({"metric": "m", "estimate": [0.0, 1.0], "truth": 0.5, "se": 0.5,
    ...                   "ci_low": [-1.0, 0.0], "ci_high": [1.0, 2.0]})
    >>> coverage_summary(d)[["coverage", "bias", "repeats"]].to_dict("records")
    [{'coverage': 1.0, 'bias': 0.0, 'repeats': 2}]
    """
    from scipy.stats import norm

    ci = _check_ci(ci)
    z = float(norm.ppf(0.5 + ci / 2.0))
    rows = []
    for key, g in sim.groupby(by, sort=False):
        R = len(g)
        err = (g[estimate_col] - g[truth_col]).to_numpy(float)
        cov = float(((g[low_col] <= g[truth_col]) & (g[truth_col] <= g[high_col])).mean())
        b, sd = float(err.mean()), float(err.std(ddof=1)) if R > 1 else float("nan")
        u = b / sd if sd > 0 else 0.0
        pred = float(norm.cdf(z - u) - norm.cdf(-z - u))
        dpred = float(-norm.pdf(z - u) + norm.pdf(-z - u)) / sd if sd > 0 else 0.0
        rows.append({by if isinstance(by, str) else "group": key, "repeats": R, "coverage": cov,
                     "coverage_se": float(np.sqrt(max(pred * (1 - pred), 1e-12) / R)),
                     "bias": b, "sd": sd, "mean_se": float(g[se_col].mean()),
                     "mean_se_se": float(g[se_col].std(ddof=1) / np.sqrt(R)) if R > 1 else float("nan"),
                     "predicted": pred, "predicted_se": abs(dpred) * sd / np.sqrt(R)})
    return pd.DataFrame(rows)
