"""A candidate for score-table input: empirical Bayes on the negatives' score tail.

Inside the first sampled bin the sampled rank says only "above every negative";
how far the held-out item's score lies above the negatives' scores says more.
The candidate pools that information across users:

1. *Standardize* each user's scores by the location and scale of the user's own
   negatives (median and inter-quartile range of the finite negative scores;
   the standard deviation, then 1, where that range is 0):
   z_j = (s_j - m_u)/d_u, and z+_u for the held-out item.
2. *Pool the tail*: every user's negatives are draws from that user's score
   distribution over the catalogue; if the standardized distributions share
   one shape, the pooled standardized negatives (M (n - 1) values) estimate
   its survival function S deep into the tail -- far beyond the 1/(n - 1) one
   user's negatives reach. Beyond the ``tail_points`` largest pooled values S is
   extrapolated by an exponential tail (the mean excess of those values).
   The plug-in rank is R^_u = 1 + (N - 1) S(z+_u).
3. *Calibrate by empirical Bayes*: log R_u ~ Normal(log R^_u + b t_u,
   (sigma t_u)^2 + 0.05^2), a prior per user, with t_u = log N - log R^_u the
   depth of the extrapolation (an error in a user's location or scale moves
   log S in proportion to how far into the tail it is read; or t_u = 1, a
   constant calibration); (b, sigma) maximize the marginal likelihood of all users'
   sampled ranks under the binomial kernel (AAAI21 eq 18), on split negatives
   (:func:`tail_eb_estimate`: the covariate from one half, the rank among the
   other, independent given R). The estimate is the users' mean posterior
   mean of F(R) (the form of the default estimator, with a prior that moves
   with each user's tail statistic).

:func:`tail_panel` measures it against the default and the published
estimators on the same sampled ranks (negatives drawn from the models'
scores, uniformly with replacement: the panel's binomial law), per data set;
the candidate has no tuning constant chosen on the data, so every data set is
a held-out one. Notebook 10 reports the result.

References
----------
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021 (eq 18).
.. [Efron16] Efron, B. Empirical Bayes deconvolution estimates. Biometrika 103(1), 2016.
.. [Pickands75] Pickands, J. Statistical inference using extreme order statistics.
   Annals of Statistics 3(1), 1975 (exponential / generalized Pareto tails above a threshold).
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
from scipy import optimize, special

from .._validation import check_int, check_N_n
from ..experiments import seed_sequence
from ..kernels import log_kernel_rows, rank_grid
from .panel import PUBLISHED_METHODS, metric_head, resolve_methods, user_count_values, population_seed

__all__ = [
    "TAIL_POINTS",
    "CALIBRATIONS",
    "standardized_scores",
    "pooled_survival",
    "tail_eb_estimate",
    "score_draws",
    "tail_panel",
]

#: Pooled values above which the survival function is extrapolated (exponential tail).
TAIL_POINTS = 50
#: The calibrations of :func:`tail_eb_estimate`.
CALIBRATIONS = ("depth", "constant")


def standardized_scores(pos, neg):
    """(z+, Z): the held-out and negative scores standardized by each user's negatives.

    Location: the median of the user's finite negative scores; scale: their
    inter-quartile range (the standard deviation where it is 0, then 1).
    Non-finite negatives (a history item ranked last: -inf) stay -inf.

    Parameters
    ----------
    pos : array_like, shape (M,)
    neg : array_like, shape (M, n - 1)

    Returns
    -------
    zpos : ndarray, shape (M,)
    Z : ndarray, shape (M, n - 1)

    Examples
    --------
    >>> z, Z = standardized_scores([3.0], [[0.0, 1.0, 2.0, -np.inf]])
    >>> float(z[0]), Z.tolist()
    (2.0, [[-1.0, 0.0, 1.0, -inf]])
    """
    pos = np.asarray(pos, dtype=float)
    neg = np.asarray(neg, dtype=float)
    if neg.ndim != 2 or neg.shape[0] != pos.size:
        raise ValueError(f"neg must have one row per user ({pos.size}); got shape {neg.shape}")
    # row quantiles of the finite negatives (linear interpolation, numpy's default), vectorized:
    # non-finite values sorted to the end of each row
    fin = np.isfinite(neg)
    srt = np.sort(np.where(fin, neg, np.inf), axis=1)
    k = fin.sum(axis=1)
    ok = k > 0
    rows = np.arange(pos.size)

    def quantile(q):
        x = q * np.maximum(k - 1, 0)
        i = np.floor(x).astype(np.int64)
        j = np.minimum(i + 1, np.maximum(k - 1, 0))
        lo_, hi_ = srt[rows, i], srt[rows, j]
        with np.errstate(invalid="ignore"):                 # rows without a finite value: inf - inf
            return np.where(ok, lo_ + (x - i) * np.where(j > i, hi_ - lo_, 0.0), 0.0)

    m = quantile(0.5)
    iqr = quantile(0.75) - quantile(0.25)
    with np.errstate(invalid="ignore"):
        mean = np.where(ok, np.sum(np.where(fin, neg, 0.0), axis=1) / np.maximum(k, 1), 0.0)
        sd = np.sqrt(np.where(ok, np.sum(np.where(fin, neg - mean[:, None], 0.0) ** 2, axis=1)
                              / np.maximum(k, 1), 0.0))
    d = np.where(iqr > 0, iqr, np.where(sd > 0, sd, 1.0))
    Z = (neg - m[:, None]) / d[:, None]
    Z[~np.isfinite(neg)] = -np.inf
    return (pos - m) / d, Z


def pooled_survival(Z, z, *, tail_points=TAIL_POINTS):
    """S(z) = share of the pooled standardized negatives at or above z, exponential beyond the top.

    Up to the ``tail_points``-th largest pooled value z_(k), the empirical
    share; beyond, (k / T) exp(-(z - z_(k)) / theta) with theta the mean excess
    of the top k values over z_(k) ([Pickands75]).

    Examples
    --------
    >>> Z = np.arange(1000.0)[None, :]
    >>> pooled_survival(Z, np.array([499.5, -np.inf]), tail_points=10).tolist()
    [0.5, 1.0]
    """
    v = np.sort(np.asarray(Z, dtype=float).ravel())
    T = v.size
    k = min(check_int(tail_points, "tail_points", low=2), max(2, T // 2))
    z = np.asarray(z, dtype=float)
    S = (T - np.searchsorted(v, z, side="left")) / T
    zk = v[T - k]
    theta = float(np.mean(v[T - k:] - zk))
    beyond = z > zk
    if theta > 0:
        S = np.where(beyond, (k / T) * np.exp(-(z - zk) / theta), S)
    return np.clip(S, 0.0, 1.0)


def _cells(N, n, H=64):
    """Cells of global ranks: every rank up to max(64, H), then bins of at most 0.1 in log R and kernel rows
    within TV 0.1 (:func:`sampling_lib.kernels.rank_grid`); (lo, hi, mid)."""
    g = rank_grid(N, n, tol=0.1, exact_ranks=min(N, max(64, int(H))), log_width=0.1)
    return g.lo, g.hi, (g.lo + g.hi) // 2


def _lognormal_rank_prior(lo, hi, mu, b, s, logN, depth):
    """Masses over the rank cells [lo, hi] of log R ~ Normal(mu + b t, (s t)^2 + 0.05^2), one row
    per mu; t = log N - mu (the tail depth of the plug-in) with ``depth``, else t = 1."""
    a = np.log(np.maximum(lo - 0.5, 0.5))
    a[lo == 1] = -np.inf
    c = np.log(hi + 0.5)
    t = np.maximum(logN - mu, 0.0)[:, None] if depth else np.ones((mu.size, 1))
    m = mu[:, None] + b * t
    sd = np.sqrt((s * t) ** 2 + 0.05 ** 2)
    P = special.ndtr((c[None, :] - m) / sd) - special.ndtr((a[None, :] - m) / sd)
    P = np.maximum(P, 0.0)
    return P / np.maximum(P.sum(axis=1, keepdims=True), 1e-300)


def _calibrate(r, log_rhat, N, n, lo, hi, mid, depth):
    """(b, s, loglik): the marginal-likelihood fit of the calibration of :func:`_lognormal_rank_prior`."""
    key, cnt = np.unique(np.stack([r, np.round(log_rhat / 0.1).astype(np.int64)]), axis=1,
                         return_counts=True)
    ur, mu = key[0], key[1] * 0.1
    Kr = np.exp(log_kernel_rows(N, n, mid, "binomial"))[:, ur - 1].T      # (U, G)
    logN = np.log(N)

    def nll(x):
        q = np.sum(_lognormal_rank_prior(lo, hi, mu, x[0], float(np.exp(x[1])), logN, depth) * Kr, axis=1)
        return -float(cnt @ np.log(np.maximum(q, 1e-300)))

    best = optimize.minimize(nll, [0.0, np.log(0.1 if depth else 0.5)], method="Nelder-Mead",
                             options={"xatol": 2e-2, "fatol": 1e-3, "maxiter": 150,
                                      "initial_simplex": [[0.0, np.log(0.1 if depth else 0.5)],
                                                          [0.1 if depth else 0.5, np.log(0.1 if depth else 0.5)],
                                                          [0.0, np.log(0.4 if depth else 2.0)]]})
    return float(best.x[0]), float(np.exp(np.clip(best.x[1], np.log(1e-4), np.log(5.0)))), -float(best.fun)


def tail_eb_estimate(sampled_ranks, zpos, Z, N, n, F, *, calibration="depth", tail_points=TAIL_POINTS,
                     return_fit=False):
    """The candidate's estimate of the metrics F from sampled ranks and standardized scores.

    The calibration (b, sigma) of the prior
    log R_u ~ Normal(log R^_u + b t_u, (sigma t_u)^2 + 0.05^2) (``calibration="depth"``:
    t_u = log N - log R^_u; ``"constant"``: t_u = 1) is fitted on split negatives, so that the
    covariate and the ranks it is scored against are independent given R: the
    plug-in rank R^_A from the first half of every user's negatives
    (standardized and pooled on that half alone), and the sampled rank r_B
    among the second half (n_B = 1 + its size), whose kernel given R is exact.
    The estimate then uses every negative: the prior of user u is
    log R ~ Normal(log R^_u + b, sigma^2) with R^_u from all negatives, and the
    posterior is taken with the user's sampled rank among all of them. (sigma is
    fitted for the noisier half-sample covariate: conservative.) The prior's
    shift and spread grow with the depth t_u = log N - log R^_u of the
    extrapolation (module docstring), so that the calibration learnt where the
    ranks are resolved carries over to the users inside the first bin.

    Parameters
    ----------
    sampled_ranks : array_like of int, shape (M,)
        r_u in 1..n: 1 + the negatives scored at or above the held-out item.
    zpos, Z : arrays
        :func:`standardized_scores` of the same users (n - 1 columns).
    N, n : int
    F : ndarray, shape (H, m)
        Metric values on ranks 1..H (0 beyond).
    calibration : {"depth", "constant"}, keyword-only
    tail_points : int, keyword-only
    return_fit : bool, keyword-only
        Also return ``{"b", "sigma", "loglik", "plug_in"}`` (``plug_in``: the
        estimate with the plug-in ranks R^_u alone).

    Returns
    -------
    ndarray, shape (m,) (and a dict with ``return_fit``)
    """
    N, n = check_N_n(N, n)
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}; got {calibration!r}")
    depth = calibration == "depth"
    if n < 5:
        raise ValueError(f"n must be >= 5 to split the negatives; got {n}")
    r = np.asarray(sampled_ranks, dtype=np.int64)
    M = r.size
    Z = np.asarray(Z, dtype=float)
    zpos = np.asarray(zpos, dtype=float)
    F = np.asarray(F, dtype=float)
    H = F.shape[0]
    h = (n - 1) // 2
    zA, ZA = standardized_scores(zpos, Z[:, :h])           # a monotone re-standardization on half A
    rhat_A = 1.0 + (N - 1.0) * pooled_survival(ZA, zA, tail_points=tail_points)
    r_B = 1 + (Z[:, h:] >= zpos[:, None]).sum(axis=1)
    n_B = n - h
    lo, hi, mid = _cells(N, n, H)
    b, s, ll = _calibrate(r_B, np.log(rhat_A), N, n_B, lo, hi, mid, depth)
    rhat = 1.0 + (N - 1.0) * pooled_survival(Z, zpos, tail_points=tail_points)
    key, inv, cnt = np.unique(np.stack([r, np.round(np.log(rhat) / 0.02).astype(np.int64)]), axis=1,
                              return_inverse=True, return_counts=True)
    P = (_lognormal_rank_prior(lo, hi, key[1] * 0.02, b, s, np.log(N), depth)
         * np.exp(log_kernel_rows(N, n, mid, "binomial"))[:, key[0] - 1].T)
    post = P / np.maximum(P.sum(axis=1, keepdims=True), 1e-300)      # (U, G)
    head = lo <= H                                                    # cells of single ranks 1..H
    est = (cnt @ post[:, head]) @ F[lo[head] - 1] / M
    if not return_fit:
        return est
    Fz = np.vstack([F, np.zeros((1, F.shape[1]))])
    plug = Fz[np.minimum(np.rint(rhat).astype(np.int64), H + 1) - 1].mean(axis=0)
    return est, {"b": b, "sigma": s, "loglik": ll, "plug_in": plug}


def score_draws(model, train, test_items, n, *, rng=None, block_size=512):
    """Sampled ranks and standardized scores of every user, negatives drawn from a model's scores.

    n - 1 negatives per user uniformly with replacement from the N - 1 items
    other than the held-out one; training items ranked last (score -inf), as
    the panel's global ranks (``train_last=True``): r - 1 ~ Binomial(n - 1,
    (R - 1)/(N - 1)) given R (KDD20 Sec 2.2). Ties pessimistic.

    Returns
    -------
    r : ndarray of int64, shape (M,)
    zpos : ndarray, shape (M,)
    Z : ndarray of float32, shape (M, n - 1)
    """
    from ..recommenders import mask_train, iter_score_blocks

    g = np.random.default_rng(rng)
    t = np.asarray(test_items, dtype=np.int64)
    M, N = model.n_users_, model.n_items_
    r = np.empty(M, dtype=np.int64)
    zpos = np.empty(M)
    Z = np.empty((M, n - 1), dtype=np.float32)
    for s, e, S in iter_score_blocks(model, M, block_size):
        mask_train(S, train, s, e)
        ar = np.arange(e - s)
        ts = S[ar, t[s:e]]
        idx = g.integers(0, N - 1, size=(e - s, n - 1))
        idx += idx >= t[s:e, None]
        neg = np.take_along_axis(S, idx, axis=1)
        r[s:e] = 1 + (neg >= ts[:, None]).sum(axis=1)
        zp, Zb = standardized_scores(ts, neg)
        zpos[s:e] = zp
        Z[s:e] = Zb
    return r, zpos, Z


def tail_panel(data, methods=PUBLISHED_METHODS + ("logspline",), *, models=None,
               sample_sizes=(20, 100, 500), user_counts=(300, None), draws=3, max_K=50, rng=0,
               progress=False):
    """The candidate against the default and the published estimators, on the same sampled ranks.

    For every data set, model, n and draw the models are fitted (the
    negatives' scores are needed) and the negatives are drawn from the model's
    scores (:func:`score_draws`); for every M (users drawn without
    replacement) the candidate in its three forms (``"tail_eb"``: depth
    calibration, ``"tail_eb (constant)"``, and the plug-in ``"tail plug-in"``)
    and ``methods`` are scored against the users' true Recall/NDCG@1..max_K.

    Parameters
    ----------
    data : mapping label -> Ratings or path
        E.g. ``{d: PANEL_DATASETS[d].ratings(shared_data) for d in PANEL_DATASETS}``.
    methods : sequence of str
    models : mapping label -> (name, params), optional
        Default :data:`~sampling_lib.studies.PANEL_MODELS` (without EASE above
        :data:`~sampling_lib.studies.DENSE_ITEMS_MAX` items).
    sample_sizes, user_counts, draws, max_K, rng, progress
        As :func:`~sampling_lib.studies.accuracy_panel`.

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`sampling_lib.studies.accuracy_panel`, plus
        ``b`` and ``sigma`` of the candidate's calibration (NaN on other rows).
    """
    from ..experiments import global_ranks_from_data
    from .panel_data import DENSE_ITEMS_MAX, LARGE_MODELS, PANEL_MODELS

    root = seed_sequence(rng)
    fns = resolve_methods(methods, max_K)
    Ks = np.arange(1, max_K + 1)
    rows = []
    for label, ratings in data.items():
        if not hasattr(ratings, "n_items"):
            from ..data import load_ratings

            ratings = load_ratings(ratings)
        settings = models if models is not None else (
            PANEL_MODELS if ratings.n_items <= DENSE_ITEMS_MAX else LARGE_MODELS)
        ranks, N, info = global_ranks_from_data(ratings, settings, rng=rng, keep_models=True,
                                                max_dense_items=DENSE_ITEMS_MAX)
        split = info["split"]
        F = metric_head(N, max_K)
        H = F.shape[0]
        for model, fitted in list(info["fitted"].items()):
            t0 = time.perf_counter()
            R = ranks[model]
            for n in sample_sizes:
                if n >= N:
                    continue
                w_res = (N - 1) / (n - 1)
                for d, ss in enumerate(population_seed(root, label, model, n, 7).spawn(draws)):
                    g = np.random.default_rng(ss)
                    r_all, z_all, Z_all = score_draws(fitted, split.train, split.test_items, n, rng=g)
                    for M in user_count_values(user_counts, R.size):
                        sel = np.arange(R.size) if M is None else np.sort(g.choice(R.size, M, replace=False))
                        Ru, r = R[sel], r_all[sel]
                        Mv = sel.size
                        truth = (np.bincount(Ru[Ru <= H] - 1, minlength=H) / Mv) @ F
                        est, fit = tail_eb_estimate(r, z_all[sel], Z_all[sel], N, n, F, return_fit=True)
                        est_c, fit_c = tail_eb_estimate(r, z_all[sel], Z_all[sel], N, n, F,
                                                        calibration="constant", return_fit=True)
                        ests = {"tail_eb": est, "tail_eb (constant)": est_c, "tail plug-in": fit["plug_in"]}
                        fits = {"tail_eb": fit, "tail_eb (constant)": fit_c}
                        cache = {}
                        for name, fn in fns.items():
                            try:
                                w = fn(r, N, n, cache=cache)
                                ests[name] = np.asarray(w.head(H) if hasattr(w, "head") else w)[:H] @ F
                            except np.linalg.LinAlgError:
                                ests[name] = np.full(F.shape[1], np.nan)
                        for name, e in ests.items():
                            with np.errstate(divide="ignore", invalid="ignore"):
                                rel = np.where(truth > 0, np.abs(e - truth) / truth, np.nan)
                            f = fits.get(name, {"b": np.nan, "sigma": np.nan})
                            rows.append(pd.DataFrame({
                                "dataset": label, "model": model, "N": N, "n": n, "M": Mv, "draw": d,
                                "estimator": name, "metric": np.repeat(["recall", "ndcg"], max_K),
                                "K": np.tile(Ks, 2), "estimate": e, "truth": truth, "rel_error": rel,
                                "below_resolution": np.tile(Ks < w_res, 2),
                                "b": f["b"], "sigma": f["sigma"]}))
            if progress:
                print(f"  {label}/{model}: {time.perf_counter() - t0:.0f} s", flush=True)
        del info
    return pd.concat(rows, ignore_index=True)
