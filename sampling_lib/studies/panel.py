"""Accuracy on real rank distributions: the panel, the oracle, interval coverage, per-user N (notebook 10)."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .._validation import (check_int, check_N_n, check_pmf,
                           check_ranks, check_scheme)
from ..kernels import log_kernel_rows
from ..correct import estimate
from ..experiments import seed_sequence
from ..metrics import metric_values

__all__ = [
    "oracle_weights",
    "accuracy_panel",
    "panel_summary",
    "interval_coverage",
    "n_items_comparison",
    "PANEL_MODELS",
    "PANEL_METHODS",
]


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
            from ..estimators import get_estimator

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
        E.g. built from :func:`sampling_lib.experiments.global_ranks_from_data` with :data:`PANEL_MODELS`.
    methods : sequence
        Registered estimator names (:func:`sampling_lib.estimators.get_estimator`)
        or ``(label, callable)`` pairs with ``callable(sampled_ranks, N, n) -> w``.
        The oracle (:func:`oracle_weights` with the population's P(R)) is always added.
    sample_sizes : sequence of int
        Values of n (held-out item included); values >= N are skipped.
    user_counts : sequence of int or None
        Users per evaluation (subsampled without replacement); None = all users.
        Values >= the population size mean all users (each distinct count is
        evaluated once), so a small data set is still evaluated.
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
    from ..estimators import Estimator

    scheme = check_scheme(scheme)
    draws = check_int(draws, "draws", low=1)
    max_K = check_int(max_K, "max_K", low=1)
    fns = _resolve(methods)
    root = seed_sequence(rng)
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
            for M in _user_counts(user_counts, R.size):
                Mv = R.size if M is None else M
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
                    cache = {}       # fits shared by the estimators on these ranks (e.g. mes, mn_mes's prior)
                    for name, fn in fns.items():
                        w = fn(r, N, n, cache=cache) if isinstance(fn, Estimator) else fn(r, N, n)
                        ests[name] = w @ F
                    for name, e in ests.items():
                        with np.errstate(divide="ignore", invalid="ignore"):
                            rel = np.where(truth > 0, np.abs(e - truth) / truth, np.nan)
                        # one block of 2 max_K rows; the table is built once at the end
                        frames.append(((dataset, model, N, n, Mv, d, name), e, truth, rel,
                                       np.tile(Ks < w_res, 2)))
        if progress:
            print(f"  {dataset}/{model}: {time.perf_counter() - t0:.1f} s", flush=True)
    if not frames:
        raise ValueError(f"sample_sizes must contain a value below a population's N (no evaluation otherwise); "
                         f"got {list(sample_sizes)} and N = {sorted({int(N) for _, N in populations.values()})}")
    rows = 2 * max_K
    keys = list(zip(*(f[0] for f in frames)))
    cols = {c: np.repeat(np.asarray(v, dtype=object if c in ("dataset", "model", "estimator") else None), rows)
            for c, v in zip(("dataset", "model", "N", "n", "M", "draw", "estimator"), keys)}
    cols["metric"] = np.tile(np.repeat(["recall", "ndcg"], max_K).astype(object), len(frames))
    cols["K"] = np.tile(np.tile(Ks, 2), len(frames))
    for c, i in (("estimate", 1), ("truth", 2), ("rel_error", 3), ("below_resolution", 4)):
        cols[c] = np.concatenate([f[i] for f in frames])
    return pd.DataFrame(cols)


def _user_counts(user_counts, size):
    """The users per evaluation of a population of ``size`` users: None (all) for counts >= size, each once."""
    out = []
    for M in user_counts:
        M = None if M is None or int(M) >= size else int(M)
        if M not in out:
            out.append(M)
    return out


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
    draws = check_int(draws, "draws", low=1)
    root = seed_sequence(rng)
    rows = []
    for p_idx, ((dataset, model), (R, N)) in enumerate(populations.items()):
        t0 = time.perf_counter()
        R = check_ranks(R, N, name=f"ranks of {dataset}/{model}")
        for n in sample_sizes:
            n = int(n)
            if n >= N:
                continue
            for M in _user_counts(user_counts, R.size):
                Mv = R.size if M is None else M
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
                                     scheme=scheme, confidence_level=confidence_level)
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




def n_items_comparison(global_ranks, n_candidates, n, *, single=None, methods=("logspline", "mle"),
                       scale=100, k_max=200, scheme="binomial"):
    """How close per-user N_u and single values of N get to the truth, without sampling noise.

    The sampled ranks are the *expected* counts of the per-user model (every
    user u with rank R_u among its N_u candidates contributes ``scale``
    P(r | R_u; N_u, n) users to cell (N_u, r), rounded: deterministic, about
    ``scale`` x M users), so what remains is the error of the model of N and
    the estimator's own bias, not item-sampling noise. Each estimator is fitted
    with the per-user N_u and with every single N of ``single``; the error is
    that of the estimated CDF of the rank, i.e. Recall@K, for K from the
    resolution ceil((max N_u - 1)/(n - 1)) to ``k_max``.

    Parameters
    ----------
    global_ranks : dict {model: array of int}
        R_u in 1..N_u (e.g. :func:`sampling_lib.experiments.global_ranks_from_data`
        with ``train_last=True``).
    n_candidates : array_like of int
        N_u of the same users (``info["n_candidates"]``).
    n : int
        Sample size.
    single : dict {label: int}, optional
        Single values of N; default min, median, mean and max of N_u.
    methods : sequence of str
        Registered estimators that accept per-user N.
    scale : int
        Users per user of the expected counts.
    k_max : int
    scheme : {"binomial", "hypergeometric"}

    Returns
    -------
    pandas.DataFrame
        One row per (model, method, N): ``model, method, N_label, N`` (-1 for
        per-user), ``sup_error`` (max over K of |estimated - true Recall@K|),
        ``mean_error`` (mean over K), ``K_min, K_max``.

    Examples
    --------
    >>> R = {"m": np.array([1, 3, 40, 7, 90, 2])}
    >>> t = n_items_comparison(R, [100, 120, 100, 90, 110, 120], 10, methods=("mle",), scale=20,
    ...                        k_max=60)
    >>> t.N_label.tolist()
    ['per-user', 'min', 'median', 'mean', 'max']
    """
    from ..estimators import get_estimator
    from ..kernels import kernel_entries

    Nu = np.asarray(n_candidates, dtype=np.int64)
    n = check_int(n, "n", low=2)
    scale = check_int(scale, "scale", low=1)
    if single is None:
        single = {"min": int(Nu.min()), "median": int(np.median(Nu)), "mean": int(round(Nu.mean())),
                  "max": int(Nu.max())}
    w = (int(Nu.max()) - 1) / (n - 1)
    Ks = np.arange(int(np.ceil(w)), check_int(k_max, "k_max", low=int(np.ceil(w))) + 1)
    rows = []
    for model, R in global_ranks.items():
        R = np.asarray(R, dtype=np.int64)
        if R.shape != Nu.shape or np.any(R < 1) or np.any(R > Nu):
            raise ValueError(f"global_ranks[{model!r}] must hold one rank per user in 1..N_u")
        cells = []
        for Nv in np.unique(Nu):
            sel = Nu == Nv
            c = np.round(scale * kernel_entries(int(Nv), n, R[sel], np.arange(1, n + 1),
                                                scheme).sum(axis=0)).astype(np.int64)
            cells += [(int(Nv), j + 1, int(c[j])) for j in np.flatnonzero(c)]
        cells = np.array(cells)
        rr, NN = np.repeat(cells[:, 1], cells[:, 2]), np.repeat(cells[:, 0], cells[:, 2])
        truth = np.array([np.mean(R <= k) for k in Ks])
        for meth in methods:
            est = get_estimator(meth, scheme=scheme)
            for label, Nv in [("per-user", None)] + list(single.items()):
                wv = est(rr, NN if Nv is None else int(Nv), n)
                cdf = np.cumsum(wv)
                err = np.abs(cdf[np.minimum(Ks, cdf.size) - 1] - truth)
                rows.append({"model": model, "method": meth, "N_label": label,
                             "N": -1 if Nv is None else int(Nv), "sup_error": float(err.max()),
                             "mean_error": float(err.mean()), "K_min": int(Ks[0]),
                             "K_max": int(Ks[-1])})
    return pd.DataFrame(rows)


# the notebook studies by topic (private modules; their names are public here)
