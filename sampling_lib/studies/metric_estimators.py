"""Estimators compared over repeated samplings (TORS24 Secs 5-6, 8; notebooks 03-05).

Re-exported by :mod:`sampling_lib.studies`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import check_int
from ..metrics import metric_matrix, metric_values
from ..sampling import sample_ranks

__all__ = [
    "winner_counts",
    "metric_curves",
    "average_relative_error",
    "metric_estimator_study",
    "simulate_mse_bound",
    "mn_bv_growth",
    "mean_sd",
]


# ----------------------------------------------------------------------------
# estimator comparisons over repeated samplings (notebooks 03-05)
# ----------------------------------------------------------------------------
def winner_counts(results, by=("K", "metric", "estimator"), *, estimate="estimate", truth="truth",
                  repeat="repeat", model="model"):
    """How often the estimates pick the truly best model (AAAI21 Table 4, TORS24 Table 6).

    ``results`` holds one row per (repeat, model, ``by``...) with an estimate
    and the true value. For every repeat and group of ``by`` the model with the
    largest estimate is compared with the model with the largest truth (first
    one in row order on ties); the hits are counted over the repeats.

    Returns
    -------
    pandas.DataFrame
        Columns ``by`` + ``correct`` (number of repeats whose pick was right)
        and ``repeats``.

    References
    ----------
    AAAI21 Table 4; TORS24 Tables 6-7.

    Examples
    --------
    >>> d = pd.DataFrame({"repeat": [0, 0, 1, 1], "model": ["A", "B"] * 2, "estimator": "x",
    ...                   "estimate": [0.2, 0.1, 0.1, 0.2], "truth": [0.3, 0.2, 0.3, 0.2]})
    >>> winner_counts(d, by=["estimator"]).to_dict("records")
    [{'estimator': 'x', 'correct': 1, 'repeats': 2}]
    """
    by = [by] if isinstance(by, str) else list(by)
    g = results.groupby([repeat, *by], sort=True)
    picked = results.loc[g[estimate].idxmax().to_numpy(), model].to_numpy()
    best = results.loc[g[truth].idxmax().to_numpy(), model].to_numpy()
    keys = g.size().reset_index()[[repeat, *by]]
    keys["correct"] = (picked == best).astype(int)
    out = keys.groupby(by, sort=True).agg(correct=("correct", "sum"), repeats=(repeat, "nunique"))
    return out.reset_index()

# ----------------------------------------------------------------------------
# metric estimators over repeated samplings (TORS24 Secs 5-6, notebooks 04-05)
# ----------------------------------------------------------------------------
def metric_curves(weights, global_ranks, metrics=("recall", "ndcg", "ap"), K_max=50):
    """Estimated and true metric@K, K = 1..K_max, for several weight vectors.

    ``weights`` maps an estimator to its weight vector w (estimate = w @ F);
    the truth is the mean of F_K over the users' global ranks. Only the first
    K_max entries of w matter (F_K(R) = 0 for R > K).

    Returns
    -------
    pandas.DataFrame
        Columns ``estimator, metric, K, estimate, truth``.

    Examples
    --------
    >>> d = metric_curves({"exact": np.array([0.5, 0.5, 0.0])}, np.array([1, 2]), ["recall"], K_max=2)
    >>> d[["K", "estimate", "truth"]].values.tolist()
    [[1.0, 0.5, 0.5], [2.0, 1.0, 1.0]]
    """
    R = np.asarray(global_ranks)
    Ks = np.arange(1, K_max + 1)
    counts = np.bincount(np.minimum(R, K_max + 1), minlength=K_max + 2)[1:K_max + 1] / R.size
    names, metrics = list(weights), list(metrics)
    Wm = np.stack([np.asarray(w, dtype=float)[:K_max] for w in weights.values()])   # (E, K_max)
    est, truth = [], []
    for mt in metrics:
        Fm = metric_matrix([f"{mt}@{k}" for k in Ks], K_max)                         # (K_max, K_max)
        est.append(np.stack([w @ Fm for w in Wm]))   # row by row: the same rounding as one vector product
        truth.append(np.broadcast_to(counts @ Fm, Wm.shape))
    E, T = len(names), len(metrics)   # rows: metric, then estimator, then K (one frame, not E x T frames)
    return pd.DataFrame({"estimator": np.tile(np.repeat(np.array(names, dtype=object), K_max), T),
                         "metric": np.repeat(np.array(metrics, dtype=object), E * K_max),
                         "K": np.tile(Ks, E * T), "estimate": np.concatenate(est).ravel(),
                         "truth": np.concatenate(truth).ravel()})


def average_relative_error(curves, by=("repeat", "model", "design", "estimator", "metric"), small_K=5):
    """TORS24's accuracy measure: the relative error |estimate - truth| / truth (in %),
    averaged over the cutoffs K with truth > 0, and over the first ``small_K`` of them.

    Returns
    -------
    pandas.DataFrame
        Columns ``by`` + ``rel_err, rel_err_small_K``.

    References
    ----------
    TORS24 Tables 4-5 ("average relative error over K = 1..50").

    Examples
    --------
    >>> d = pd.DataFrame({"estimator": "x", "K": [1, 2, 3], "estimate": [0.1, 0.3, 0.5], "truth": [0.0, 0.2, 0.5]})
    >>> average_relative_error(d, by=["estimator"], small_K=1).round(1).to_dict("records")
    [{'estimator': 'x', 'rel_err': 25.0, 'rel_err_small_K': 50.0}]
    """
    by = [c for c in by if c in curves.columns]
    d = curves[curves["truth"] > 0].sort_values([*by, "K"])
    d = d.assign(rel=100 * np.abs(d["estimate"] - d["truth"]) / d["truth"])
    g = d.groupby(by, sort=False)["rel"]
    return pd.DataFrame({"rel_err": g.mean(), "rel_err_small_K": g.apply(lambda x: x.iloc[:small_K].mean())}
                        ).reset_index()


def metric_estimator_study(ranks, N, repeats, methods, *, sample_sizes=(100,), adaptive=None,
                           metrics=("recall", "ndcg", "ap"), K_max=50, rng=None, **options):
    """TORS24's estimator comparison (Tables 4-7): repeated samplings x models x estimators.

    For every repeat and model (``ranks``: model -> users' global ranks in
    1..N), in this order: with ``adaptive=(n0, n_max)``, one adaptive sample
    (TORS24 Algorithm 1, :func:`sampling_lib.sampling.adaptive_sample_ranks`)
    estimated by the adaptive MLE (design ``"adaptive"``); then for every
    fixed n in ``sample_sizes`` one sample of the users' sampled ranks and the
    registry's ``methods`` fitted on it
    (:func:`sampling_lib.estimators.fit_estimators` with ``options``; design
    ``"n=<n>"``). MES falls back to cvxpy where its fast solver stops short;
    the fallbacks (ConvergenceWarning) are counted.

    Returns
    -------
    dict
        ``curves``: :func:`metric_curves` rows plus ``repeat, model, design,
        size`` (the average sample-set size), estimators upper-cased
        (``"ADAPTIVE_MLE"`` for the adaptive design);
        ``fits``: per (repeat, model, design) with ``"mle"`` in ``methods``, the
        l1 residual ``resid_l1`` = ||P~ - K^T pi_MLE||_1 of the MLE fit;
        ``first_weights``: {(model, design): {method: w}} of repeat 0;
        ``mes_fallbacks``: the ConvergenceWarning messages.

    References
    ----------
    TORS24 Secs 5-6, 8.3-8.4, Tables 4-7.

    Examples
    --------
    >>> from sampling_lib.rankdist import draw_global_ranks, synthetic_models
    >>> R = {"a": draw_global_ranks(synthetic_models(300)["beta_a0.35"], 500, rng=0)}
    >>> out = metric_estimator_study(R, 300, 1, ["mle", "bv"], sample_sizes=[30], K_max=5, rng=1)
    >>> sorted(out["curves"].estimator.unique()), len(out["curves"])
    (['BV', 'MLE'], 30)
    """
    import warnings

    from ..estimators import fit_estimators, get_estimator, sampled_pmf
    from ..exceptions import ConvergenceWarning
    from ..kernels import sampled_rank_pmf
    from ..sampling import adaptive_sample_ranks

    rng = np.random.default_rng(rng)
    frames, fits, first = [], [], {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        for rep in range(check_int(repeats, "repeats", low=1)):
            for model, R in ranks.items():
                samples = []
                if adaptive is not None:
                    r, nu = adaptive_sample_ranks(R, N, *adaptive, rng=rng)
                    samples.append(("adaptive", float(nu.mean()), {"adaptive_mle": get_estimator("adaptive_mle")(r, N, nu)}))
                for n in sample_sizes:
                    r = sample_ranks(R, N, n, rng=rng)
                    W = fit_estimators(list(methods), r, N, n, **options)
                    samples.append((f"n={n}", float(n), W))
                    if "mle" in W:
                        fits.append(dict(repeat=rep, model=model, design=f"n={n}", resid_l1=float(
                            np.abs(sampled_pmf(r, n) - sampled_rank_pmf(W["mle"], n)).sum())))
                for design, size, W in samples:
                    if rep == 0:
                        first[(model, design)] = W
                    c = metric_curves({e.upper(): w for e, w in W.items()}, R, metrics, K_max)
                    frames.append(c.assign(repeat=rep, model=model, design=design, size=size))
    curves = pd.concat(frames, ignore_index=True)
    cols = ["repeat", "model", "design", "size", "estimator", "metric", "K", "estimate", "truth"]
    return dict(curves=curves[cols], fits=pd.DataFrame(fits), first_weights=first,
                mes_fallbacks=[str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)])


def simulate_mse_bound(xs, F, global_ranks, n, repeats, batches=20, *, rng=None):
    """The MSE of sampled-metric estimators x on a fixed population, simulated and exact.

    ``repeats`` item samplings of the fixed users (``global_ranks``, every rank
    1..N held by at least one user) give the estimate ``T_hat = mean_u x[r_u]``
    of ``T = sum_R P(R) F(R)`` for each ``x`` in ``xs``. Recorded: the simulated
    MSE and the exact one (:func:`sampling_lib.estimators.exact_mse`); the
    bound ``L = L1 + L2`` of TORS24 eqs 38-39
    (:func:`sampling_lib.estimators.mse_bound`); the simulated Jensen quantity
    ``S = sum_R P(R) (xbar_R - F(R))^2`` (mean L; xbar_R the mean of x over the
    users at rank R); and L1 (bias term) and L2 (variance term) estimated from
    ``batches`` batch means of xbar. Each simulated value has its standard error.

    Returns
    -------
    pandas.DataFrame
        Index ``estimator``; columns ``mse_sim, mse_sim_se, mse_exact, L1_sim,
        L1_se, L1, L2_sim, L2_se, L2, S_sim, S_se, L``.

    References
    ----------
    TORS24 eqs 38-39, App F.
    """
    from ..estimators import exact_mse, mse_bound

    R = np.asarray(global_ranks)
    F = np.asarray(F, dtype=float)
    N, M = F.size, R.size
    counts = np.bincount(R - 1, minlength=N)
    if np.any(counts == 0):
        raise ValueError("global_ranks must hold every rank 1..N at least once")
    W = counts / M
    onehot = np.zeros((M, N))
    onehot[np.arange(M), R - 1] = 1.0
    r_mc = sample_ranks(np.tile(R, repeats), N, n, rng=rng).reshape(repeats, M)

    def se(a):
        return np.std(a, ddof=1) / np.sqrt(len(a))

    rows = []
    for name, x in xs.items():
        xr = x[r_mc - 1]                                   # (repeats, M) values x_{r_u}
        xbar = (xr @ onehot) / counts                      # (repeats, N) group means
        sq = (xr.mean(axis=1) - W @ F) ** 2
        S = ((xbar - F) ** 2) @ W
        L1_b, L2_b = [], []
        for chunk in np.array_split(xbar, batches):
            var_R = chunk.var(axis=0, ddof=1)
            L1_b.append(W @ ((chunk.mean(axis=0) - F) ** 2 - var_R / len(chunk)))
            L2_b.append(W @ var_R)
        b = mse_bound(x, F, N, n, W, M)
        rows.append(dict(estimator=name, mse_sim=sq.mean(), mse_sim_se=se(sq), mse_exact=exact_mse(x, F, W, n, M),
                         L1_sim=np.mean(L1_b), L1_se=se(L1_b), L1=b.L1, L2_sim=np.mean(L2_b), L2_se=se(L2_b),
                         L2=b.L2, S_sim=S.mean(), S_se=se(S), L=b.L))
    return pd.DataFrame(rows).set_index("estimator")


def mn_bv_growth(truth, n, priors, metrics, M_values, *, gamma=0.01):
    """Exact MSE of the MN and BV sampled metrics as the number of users M grows (TORS24 Sec 5.2).

    For every prior (``priors``: name -> P(R) or None for uniform) and metric:
    BV's x (independent of M) and MN's x(M) (eq 42), their exact MSE under the
    population ``truth`` (:func:`sampling_lib.estimators.exact_mse`), MN's
    bound terms L1, L2, L (eqs 38-39) and BV's variance term
    ``gamma * sum_R P(R) Var(x | R)``.

    Returns
    -------
    pandas.DataFrame
        Columns ``prior, metric, M, MN_mse, BV_mse, MN_L1, MN_L2, MN_L, BV_var_term``.

    References
    ----------
    TORS24 eqs 9, 38-42, Sec 5.2.
    """
    from ..estimators import bv_sampled_metric, exact_mse, mn_sampled_metric, mse_bound

    truth = np.asarray(truth, dtype=float)
    N = truth.size
    rows = []
    for pname, prior in priors.items():
        p_vec = np.full(N, 1 / N) if prior is None else prior
        for met in metrics:
            F = metric_values(met, N)
            x_bv = bv_sampled_metric(F, N, n, gamma, prior)
            bv_var_term = gamma * (p_vec @ mse_bound(x_bv, F, N, n, prior, 1).var)
            for M in M_values:
                x_mn = mn_sampled_metric(F, N, n, prior, M)
                b = mse_bound(x_mn, F, N, n, prior, M)
                rows.append(dict(prior=pname, metric=met, M=M, MN_mse=exact_mse(x_mn, F, truth, n, M),
                                 BV_mse=exact_mse(x_bv, F, truth, n, M), MN_L1=b.L1, MN_L2=b.L2, MN_L=b.L,
                                 BV_var_term=bv_var_term))
    return pd.DataFrame(rows)


def mean_sd(grouped, decimals=2, sep="±"):
    """Table cells ``"mean±sd"`` of a grouped column, as the papers print them.

    Parameters
    ----------
    grouped : pandas SeriesGroupBy
    decimals : int
    sep : str

    Returns
    -------
    pandas.Series of str

    Examples
    --------
    >>> d = pd.DataFrame({"g": ["a", "a", "b", "b"], "v": [1.0, 3.0, 2.0, 2.0]})
    >>> mean_sd(d.groupby("g").v).to_dict()
    {'a': '2.00±1.41', 'b': '2.00±0.00'}
    """
    fmt = f"{{:.{decimals}f}}".format
    return grouped.mean().map(fmt) + sep + grouped.std().map(fmt)
