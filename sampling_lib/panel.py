"""The real-data accuracy panel: how close does each estimator get to the truth?

The published estimators were compared on synthetic rank distributions. This
module measures them, and the oracle floor, on the rank distributions of real
recommenders (issue 13):

* :func:`rank_populations` -- load a ratings file (or the synthetic
  generator), split leave-one-out, fit several recommenders at a weak and a
  strong setting (:data:`PANEL_MODELS`) and return each one's global ranks;
* :func:`oracle_weights` -- the floor: the posterior mean of each user's rank
  under the *true* P(R), averaged over users;
* :func:`accuracy_panel` -- for every population, sample size n and number
  of users M, ``draws`` independent evaluations (users subsampled without
  replacement, sampled ranks drawn from the binomial law), every estimator's
  Recall@K and NDCG@K for K = 1..max_K against the truth on those users;
* :func:`panel_summary` -- mean relative error per estimator, overall and
  split by resolution (K below or above w = (N - 1)/(n - 1)).

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation.
   KDD 2020 (Sec 2.1: leave-one-out, global rank R_u).
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024 (Sec 8: estimator comparison protocol).
"""
from __future__ import annotations

import time
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from ._validation import check_int, check_N_n, check_pmf, check_ranks, check_scheme
from .kernels import log_kernel_rows
from .metrics import metric_values

__all__ = [
    "PANEL_MODELS",
    "PANEL_METHODS",
    "rank_populations",
    "oracle_weights",
    "accuracy_panel",
    "panel_summary",
    "interval_coverage",
]

#: Recommender settings of the panel: label -> (model, parameters). Each model at a
#: weak and a strong setting (popularity has none).
PANEL_MODELS = {
    "popularity": ("popularity", {}),
    "itemknn-10": ("itemknn", {"neighbors": 10}),
    "itemknn": ("itemknn", {"neighbors": None}),
    "ease-5000": ("ease", {"lam": 5000.0}),
    "ease-200": ("ease", {"lam": 200.0}),
    "als-8": ("als", {"factors": 8, "iterations": 3}),
    "als-64": ("als", {"factors": 64, "iterations": 15}),
}
#: Estimators measured by default: the published ones and the log-spline EB.
PANEL_METHODS = ("mle", "mes", "bv", "bv_mle", "mn_mes", "logspline")


def rank_populations(data=None, models=None, *, min_item_users=1, seed=0, max_dense_items=6000,
                     progress=False):
    """Global ranks of several recommender settings on one data set.

    Parameters
    ----------
    data : str, Path, Ratings or None
        A ratings file (:func:`sampling_lib.data.load_ratings`), a loaded
        :class:`~sampling_lib.data.Ratings`, or None for the synthetic
        generator (:func:`sampling_lib.data.synthetic_ratings` with the
        defaults of :data:`sampling_lib.experiments.DEFAULT_SYNTHETIC`).
    models : mapping label -> (model, params), optional
        Default :data:`PANEL_MODELS`.
    min_item_users : int, default 1
        Keep only items with at least this many users before the split
        (:func:`sampling_lib.data.filter_items`).
    seed : int
        Seeds the synthetic data, the random hold-out of untimed files and ALS.
    max_dense_items : int, default 6000
        EASE inverts an items x items matrix: settings of EASE are skipped (and
        listed in ``info["skipped"]``) when the catalogue is larger.
    progress : bool
        Print one line per fitted model.

    Returns
    -------
    ranks : dict label -> ndarray of int64
        Global rank R_u in 1..N of each test user's held-out item (training
        items ranked last, pessimistic ties).
    N : int
    info : dict
        ``split`` summary, ``n_items_history`` (per-user training items),
        ``seconds`` per model and ``skipped`` settings.

    Examples
    --------
    >>> ranks, N, info = rank_populations(None, {"popularity": ("popularity", {})})
    >>> N, sorted(ranks)
    (1000, ['popularity'])
    """
    from .data import Ratings, filter_items, leave_one_out, load_ratings, synthetic_ratings
    from .experiments import DEFAULT_SYNTHETIC
    from .recommenders import global_ranks, make_recommender

    seed = check_int(seed, "seed", low=0)
    models = dict(PANEL_MODELS if models is None else models)
    if data is None:
        ratings = synthetic_ratings(**DEFAULT_SYNTHETIC, rng=np.random.SeedSequence([seed, 0]))
    elif isinstance(data, Ratings):
        ratings = data
    else:
        ratings = load_ratings(data)
    min_item_users = check_int(min_item_users, "min_item_users", low=1)
    if min_item_users > 1:
        ratings = filter_items(ratings, min_item_users)
    split = leave_one_out(ratings, rng=np.random.default_rng(np.random.SeedSequence([seed, 3])))
    N = int(split.n_items)
    ranks, seconds, skipped = {}, {}, []
    for label, (name, params) in models.items():
        if str(name).lower() == "ease" and N > max_dense_items:
            skipped.append(label)
            continue
        params = dict(params)
        if str(name).lower() == "als":
            params.setdefault("rng", np.random.default_rng(np.random.SeedSequence([seed, 1])))
        t0 = time.perf_counter()
        model = make_recommender(name, **params).fit(split.train)
        ranks[label] = global_ranks(model, split.train, split.test_items, train_last=True,
                                    ties="pessimistic",
                                    rng=np.random.default_rng(np.random.SeedSequence([seed, 2])))
        seconds[label] = time.perf_counter() - t0
        if progress:
            print(f"  {label}: {seconds[label]:.1f} s", flush=True)
    hist = np.asarray(split.train.sum(axis=1)).ravel().astype(np.int64)
    info = {"summary": dict(split.summary), "n_items_history": hist, "seconds": seconds,
            "skipped": skipped, "M": int(split.n_users)}
    return ranks, N, info


def _posterior_matrix(pmf, N, n, scheme):
    """P(R | r) under ``pmf`` for r = 1..n: shape (n, N); columns of ranks with q(r)=0 are 0."""
    Kp = np.empty((N, n))
    step = max(1, (1 << 21) // n)
    for a in range(0, N, step):
        R = np.arange(a + 1, min(N, a + step) + 1)
        Kp[a:a + R.size] = np.exp(log_kernel_rows(N, n, R, scheme)) * pmf[a:a + R.size, None]
    q = Kp.sum(axis=0)
    return np.divide(Kp, q, out=np.zeros_like(Kp), where=q > 0).T


def oracle_weights(pmf, sampled_ranks, N, n, *, scheme="binomial"):
    """The oracle floor: (1/M) sum_u P(R | r_u) under the true rank distribution.

    With the true P(R) the best an estimator of the users' metric can do from
    sampled ranks alone is the posterior mean E[F(R_u) | r_u] of each user
    (Bayes rule with the kernel P(r | R), AAAI21 eq 18); averaged over users
    it is ``w @ F`` with the returned weights.

    Parameters
    ----------
    pmf : array_like, shape (N,)
        The true P(R), R = 1..N.
    sampled_ranks : array_like of int
        r_u in 1..n.
    N, n : int
    scheme : {"binomial", "hypergeometric"}, keyword-only

    Returns
    -------
    ndarray, shape (N,)
        A probability vector.

    Examples
    --------
    >>> w = oracle_weights(np.full(10, 0.1), [1, 2], 10, 3)
    >>> round(float(w.sum()), 12)
    1.0
    """
    N, n = check_N_n(N, n)
    scheme = check_scheme(scheme)
    pmf = check_pmf(pmf, N)
    r = check_ranks(sampled_ranks, n, name="sampled_ranks", upper_name="n")
    c = np.bincount(r - 1, minlength=n) / r.size
    return c @ _posterior_matrix(pmf, N, n, scheme)


def _resolve(methods):
    out = {}
    for m in methods:
        if isinstance(m, str):
            from .estimators import get_estimator

            out[m] = get_estimator(m)
        elif isinstance(m, tuple) and len(m) == 2 and callable(m[1]):
            out[str(m[0])] = m[1]
        else:
            raise TypeError("methods must hold registered estimator names or (label, callable) "
                            f"pairs; got {m!r}")
    return out


def accuracy_panel(populations, methods=PANEL_METHODS, *, sample_sizes=(20, 50, 100, 500),
                   user_counts=(300, 1000, None), draws=10, max_K=50, scheme="binomial", rng=0,
                   progress=False):
    """Every estimator's Recall/NDCG@1..max_K against the truth on real rank distributions.

    Parameters
    ----------
    populations : mapping (dataset, model) -> (global ranks, N)
        E.g. built from :func:`rank_populations`.
    methods : sequence
        Registered estimator names (:func:`sampling_lib.estimators.get_estimator`)
        or ``(label, callable)`` pairs with ``callable(sampled_ranks, N, n) -> w``.
        The oracle (:func:`oracle_weights` with the population's P(R)) is always added.
    sample_sizes : sequence of int
        Values of n (held-out item included); values >= N are skipped.
    user_counts : sequence of int or None
        Users per evaluation (subsampled without replacement); None = all users.
        Values >= the population size are skipped.
    draws : int
        Independent evaluations per (population, n, M) cell.
    max_K : int
        Cut-offs K = 1..max_K.
    scheme : {"binomial", "hypergeometric"}
    rng : int or Generator
        One seed for the whole panel (each cell gets its own child stream, so
        adding a method does not change the draws).
    progress : bool
        Print one line per population.

    Returns
    -------
    pandas.DataFrame
        Tidy: ``dataset, model, N, n, M, draw, estimator, metric, K, estimate,
        truth, rel_error, below_resolution`` with ``metric`` in {"recall",
        "ndcg"}, ``rel_error = |estimate - truth| / truth`` (NaN when the truth
        is 0) and ``below_resolution = K < (N - 1)/(n - 1)``.
    """
    scheme = check_scheme(scheme)
    draws = check_int(draws, "draws", low=1)
    max_K = check_int(max_K, "max_K", low=1)
    fns = _resolve(methods)
    root = np.random.SeedSequence(rng if isinstance(rng, (int, np.integer)) else
                                  np.random.default_rng(rng).integers(2**63))
    frames = []
    Ks = np.arange(1, max_K + 1)
    for p_idx, ((dataset, model), (R, N)) in enumerate(populations.items()):
        t0 = time.perf_counter()
        N = check_int(N, "N", low=2)
        R = check_ranks(R, N, name=f"ranks of {dataset}/{model}")
        F = np.concatenate([np.stack([metric_values(f"recall@{k}", N) for k in Ks], axis=1),
                            np.stack([metric_values(f"ndcg@{k}", N) for k in Ks], axis=1)], axis=1)
        pmf = np.bincount(R - 1, minlength=N) / R.size
        for n in sample_sizes:
            n = int(n)
            if n >= N:
                continue
            post = _posterior_matrix(pmf, N, n, scheme)
            w_res = (N - 1) / (n - 1)
            for M in user_counts:
                if M is not None and int(M) >= R.size:
                    continue
                Mv = R.size if M is None else int(M)
                cell_ss = np.random.SeedSequence([root.entropy, p_idx, n, Mv])
                for d, ss in enumerate(cell_ss.spawn(draws)):
                    g = np.random.default_rng(ss)
                    Ru = R if M is None else g.choice(R, Mv, replace=False)
                    if scheme == "binomial":
                        r = 1 + g.binomial(n - 1, (Ru - 1) / (N - 1))
                    else:
                        r = 1 + g.hypergeometric(Ru - 1, N - Ru, n - 1)
                    truth = (np.bincount(Ru - 1, minlength=N) / Mv) @ F
                    ests = {"oracle": (np.bincount(r - 1, minlength=n) / Mv) @ post @ F}
                    for name, fn in fns.items():
                        ests[name] = fn(r, N, n) @ F
                    for name, e in ests.items():
                        with np.errstate(divide="ignore", invalid="ignore"):
                            rel = np.where(truth > 0, np.abs(e - truth) / truth, np.nan)
                        frames.append(pd.DataFrame({
                            "dataset": dataset, "model": model, "N": N, "n": n, "M": Mv,
                            "draw": d, "estimator": name,
                            "metric": np.repeat(["recall", "ndcg"], max_K),
                            "K": np.tile(Ks, 2), "estimate": e, "truth": truth, "rel_error": rel,
                            "below_resolution": np.tile(Ks < w_res, 2)}))
        if progress:
            print(f"  {dataset}/{model}: {time.perf_counter() - t0:.1f} s", flush=True)
    return pd.concat(frames, ignore_index=True)


def panel_summary(panel, by=("estimator",), metric="recall"):
    """Mean relative error (%) of ``metric`` @1..max_K: overall, below and above resolution.

    Each (population, n, M, draw) evaluation is first averaged over K, then
    the mean and the standard deviation over evaluations are reported, with
    the number of evaluations.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``by``: ``mean_rel_error, sd, resolved, below_resolution, evaluations``.
    """
    df = panel[panel.metric == metric]
    keys = ["dataset", "model", "n", "M", "draw", *by]
    keys = list(dict.fromkeys(keys))
    per = df.groupby(keys)["rel_error"].mean().rename("all")
    res = df[~df.below_resolution].groupby(keys)["rel_error"].mean().rename("resolved")
    bel = df[df.below_resolution].groupby(keys)["rel_error"].mean().rename("below")
    t = pd.concat([per, res, bel], axis=1).reset_index()
    out = t.groupby(list(by)).agg(mean_rel_error=("all", "mean"), sd=("all", "std"),
                                  resolved=("resolved", "mean"), below_resolution=("below", "mean"),
                                  evaluations=("all", "size"))
    out[["mean_rel_error", "sd", "resolved", "below_resolution"]] *= 100.0
    return out.sort_values("mean_rel_error")


def interval_coverage(populations, methods=("logspline",), metrics=("recall@10", "ndcg@10"), *,
                      sample_sizes=(20, 100, 500), user_counts=(300, None), draws=3, n_boot=200,
                      confidence_level=0.95, scheme="binomial", rng=0, progress=False):
    """Coverage of :func:`sampling_lib.correct.estimate`'s intervals on real rank distributions.

    For every population, n, M and draw (drawn as in :func:`accuracy_panel`)
    the practitioner entry point is called with each method and its default
    interval; the row records whether the interval holds the users' true
    metric.

    Returns
    -------
    pandas.DataFrame
        ``dataset, model, N, n, M, draw, method, metric, K, truth, estimate,
        ci_low, ci_high, covered, rel_width, below_resolution``.
    """
    from .correct import estimate

    draws = check_int(draws, "draws", low=1)
    root = np.random.SeedSequence(rng if isinstance(rng, (int, np.integer)) else
                                  np.random.default_rng(rng).integers(2**63))
    rows = []
    for p_idx, ((dataset, model), (R, N)) in enumerate(populations.items()):
        t0 = time.perf_counter()
        R = check_ranks(R, N, name=f"ranks of {dataset}/{model}")
        for n in sample_sizes:
            n = int(n)
            if n >= N:
                continue
            for M in user_counts:
                if M is not None and int(M) >= R.size:
                    continue
                Mv = R.size if M is None else int(M)
                cell_ss = np.random.SeedSequence([root.entropy, p_idx, n, Mv, 1])
                for d, ss in enumerate(cell_ss.spawn(draws)):
                    g = np.random.default_rng(ss)
                    Ru = R if M is None else g.choice(R, Mv, replace=False)
                    if scheme == "binomial":
                        r = 1 + g.binomial(n - 1, (Ru - 1) / (N - 1))
                    else:
                        r = 1 + g.hypergeometric(Ru - 1, N - Ru, n - 1)
                    for meth in methods:
                        t = estimate(r, N, n, metrics, method=meth, n_boot=n_boot, rng=g,
                                     scheme=scheme, **_level_kw(confidence_level))
                        for _, row in t.iterrows():
                            truth = float(np.mean(metric_values(row["metric"], N)[Ru - 1]))
                            rows.append({
                                "dataset": dataset, "model": model, "N": N, "n": n, "M": Mv,
                                "draw": d, "method": meth, "metric": row["metric"], "K": row["K"],
                                "truth": truth, "estimate": row["estimate"],
                                "ci_low": row["ci_low"], "ci_high": row["ci_high"],
                                "covered": bool(row["ci_low"] <= truth <= row["ci_high"]),
                                "rel_width": (row["ci_high"] - row["ci_low"]) / truth if truth > 0
                                else np.nan,
                                "below_resolution": bool(row["K"] < (N - 1) / (n - 1))})
        if progress:
            print(f"  {dataset}/{model}: {time.perf_counter() - t0:.1f} s", flush=True)
    return pd.DataFrame(rows)


def _level_kw(confidence_level):
    """The interval-level keyword of :func:`sampling_lib.correct.estimate`."""
    import inspect

    from .correct import estimate

    name = "confidence_level" if "confidence_level" in inspect.signature(estimate).parameters else "ci"
    return {name: confidence_level}
