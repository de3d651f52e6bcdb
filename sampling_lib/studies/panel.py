"""Accuracy on real rank distributions: the panel, its references, interval coverage, per-user N (notebook 10)."""
from __future__ import annotations

import time
import zlib

import numpy as np
import pandas as pd

from .._validation import (check_int, check_N_n, check_pmf,
                           check_ranks, check_scheme)
from ..kernels import log_kernel_rows
from ..correct import estimate
from ..experiments import seed_sequence
from ..estimators import weights_head
from ..metrics import metric_values
from .panel_data import PANEL_MODELS

__all__ = [
    "oracle_weights",
    "resolve_methods",
    "metric_head",
    "user_count_values",
    "posterior_mean_estimate",
    "split_half_estimate",
    "population_seed",
    "draw_evaluation",
    "accuracy_panel",
    "panel_summary",
    "full_ranking_interval",
    "interval_coverage",
    "n_items_comparison",
    "PANEL_MODELS",
    "PANEL_METHODS",
    "PUBLISHED_METHODS",
    "REFERENCES",
]


#: The published estimators the panel measures (``adaptive_mle`` is ``mle`` at one sample size).
PUBLISHED_METHODS = ("mle", "wmle", "mes", "bv", "bv_mle", "bv_mes", "mn", "mn_mle", "mn_mes", "cls")
#: Estimators measured by default: the published ones and the default (log-spline EB).
PANEL_METHODS = PUBLISHED_METHODS + ("logspline",)
#: The references of :func:`accuracy_panel` (see its docstring).
REFERENCES = ("split-half oracle", "realized oracle")


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


def resolve_methods(methods, max_K=None):
    """{label: estimator} of registered names or (label, callable) pairs; an estimator with a
    horizon option (CLS's ``max_rank``) is solved up to the largest cutoff ``max_K`` (exact for
    every metric at K <= max_K, as :func:`sampling_lib.correct.estimate` does)."""
    from ..estimators import estimator_spec, get_estimator

    out = {}
    for m in methods:
        if isinstance(m, str):
            spec = estimator_spec(m)
            opts = {spec.horizon_option: int(max_K)} if spec.horizon_option and max_K else {}
            out[m] = get_estimator(m, **opts)
        elif isinstance(m, tuple) and len(m) == 2 and callable(m[1]):
            out[str(m[0])] = m[1]
        else:
            raise TypeError("methods must hold registered estimator names or (label, callable) "
                            f"pairs; got {m!r}")
    return out


def population_seed(root, dataset, model, *cell):
    """The SeedSequence of one cell of a population: a function of the labels, not of the order of
    the populations, so a panel of a subset (or a superset) draws the same sampled ranks."""
    key = [zlib.crc32(str(dataset).encode()), zlib.crc32(str(model).encode())]
    return np.random.SeedSequence([root.entropy, *key, *[int(c) for c in cell]])


def draw_evaluation(g, R, N, n, M, scheme):
    """One sampled evaluation: M users drawn without replacement (all when M is None) and their
    sampled ranks among n - 1 uniform negatives (AAAI21 eq 18): (true ranks, sampled ranks)."""
    Ru = R if M is None else g.choice(R, M, replace=False)
    if scheme == "binomial":
        r = 1 + g.binomial(n - 1, (Ru - 1) / (N - 1))
    else:
        r = 1 + g.hypergeometric(Ru - 1, N - Ru, n - 1)
    return Ru, r


def evaluation_draws(root, dataset, model, R, N, sample_sizes, user_counts, draws, scheme, *salt):
    """Every sampled evaluation of one population, as the panels draw them.

    For each n in ``sample_sizes`` below N, each M of :func:`user_count_values`
    and each draw: a generator from :func:`population_seed` (root, dataset,
    model, n, M, ``*salt``), then :func:`draw_evaluation`. Yields
    ``(n, Mv, draw, g, Ru, r)`` with Mv the users drawn and ``g`` the draw's
    generator, for the caller's further randomness (bootstrap draws). The one
    loop of :func:`accuracy_panel`, :func:`interval_coverage` and
    :func:`sampling_lib.studies.tuning.penalty_intervals`, so that equal labels,
    n, M and salt give the same draws in every study.
    """
    for n in sample_sizes:
        n = int(n)
        if n >= N:
            continue
        for M in user_count_values(user_counts, R.size):
            Mv = R.size if M is None else M
            for d, ss in enumerate(population_seed(root, dataset, model, n, Mv, *salt).spawn(draws)):
                g = np.random.default_rng(ss)
                Ru, r = draw_evaluation(g, R, N, n, M, scheme)
                yield n, Mv, d, g, Ru, r


def metric_head(N, max_K):
    """Recall@1..max_K and NDCG@1..max_K on ranks 1..H, H = min(N, max_K) (0 beyond): (H, 2 max_K)."""
    H = min(N, max_K)
    Ks = np.arange(1, max_K + 1)
    return np.concatenate([np.stack([metric_values(f"recall@{k}", N)[:H] for k in Ks], axis=1),
                           np.stack([metric_values(f"ndcg@{k}", N)[:H] for k in Ks], axis=1)], axis=1)


def posterior_mean_estimate(prior_ranks, sampled_ranks, N, n, F, *, scheme="binomial"):
    """(1/M) sum_u E[F(R) | r_u] under the prior "the distribution of ``prior_ranks``".

    Bayes rule with the kernel P(r | R) (AAAI21 eq 18) and the empirical
    distribution of the given global ranks as the prior: the oracle references of
    :func:`accuracy_panel`. Computed on the distinct prior ranks and the observed
    sampled ranks only (memory O(distinct ranks x observed ranks), in chunks).

    Parameters
    ----------
    prior_ranks : array_like of int
        Global ranks whose distribution is the prior.
    sampled_ranks : array_like of int
        r_u in 1..n of the users scored.
    N, n : int
    F : ndarray, shape (H, m)
        Metric values on ranks 1..H (0 beyond H).
    scheme : {"binomial", "hypergeometric"}, keyword-only

    Returns
    -------
    ndarray, shape (m,)

    Examples
    --------
    >>> F = metric_values("recall@5", 100)[:, None]
    >>> float(posterior_mean_estimate([3, 3, 3], [1, 1], 100, 10, F)[0])    # a point-mass prior
    1.0
    """
    N, n = check_N_n(N, n)
    vals, cnt = np.unique(check_ranks(prior_ranks, N, name="prior_ranks"), return_counts=True)
    probs = cnt / cnt.sum()
    r = check_ranks(sampled_ranks, n, name="sampled_ranks", upper_name="n")
    c = np.bincount(r - 1, minlength=n).astype(float)
    obs = np.flatnonzero(c)
    F = np.asarray(F, dtype=float)
    H = F.shape[0]
    q = np.zeros(obs.size)
    num = np.zeros((F.shape[1], obs.size))
    step = max(1, (1 << 20) // max(1, obs.size))
    for a in range(0, vals.size, step):
        v, p = vals[a:a + step], probs[a:a + step]
        K = np.exp(log_kernel_rows(N, n, v, scheme)[:, obs])
        q += p @ K
        top = v <= H
        if top.any():
            num += (p[top, None] * F[v[top] - 1]).T @ K[top]
    E = np.divide(num, q, out=np.zeros_like(num), where=q > 0)
    return E @ (c[obs] / r.size)


def split_half_estimate(g, true_ranks, sampled_ranks, N, n, F, *, scheme="binomial"):
    """The split-half oracle: each half of the users scored with the other half's true ranks as prior.

    The users are split at random into halves A and B; the users of B get the
    posterior mean under the distribution of A's *true* global ranks and vice
    versa (:func:`posterior_mean_estimate`), and the two halves are averaged with
    their sizes. No user's own rank enters its prior: the reference is what an
    empirical-Bayes estimator could reach if it knew the rank distribution of
    comparable users exactly (e.g. half the users ranked in full).

    Returns
    -------
    ndarray, shape (m,)
    """
    R = np.asarray(true_ranks)
    r = np.asarray(sampled_ranks)
    if R.size < 2:
        raise ValueError(f"the split-half oracle needs at least 2 users; got {R.size}")
    perm = g.permutation(R.size)
    A, B = perm[: R.size // 2], perm[R.size // 2:]
    return (A.size * posterior_mean_estimate(R[B], r[A], N, n, F, scheme=scheme)
            + B.size * posterior_mean_estimate(R[A], r[B], N, n, F, scheme=scheme)) / R.size


def accuracy_panel(populations, methods=PANEL_METHODS, *, sample_sizes=(20, 50, 100, 500),
                   user_counts=(300, 1000, None), draws=10, max_K=50, scheme="binomial", rng=0,
                   references=REFERENCES, progress=False):
    """Every estimator's Recall/NDCG@1..max_K against the truth on real rank distributions.

    Parameters
    ----------
    populations : mapping (dataset, model) -> (global ranks, N)
        E.g. :func:`sampling_lib.studies.panel_populations`.
    methods : sequence
        Registered estimator names (:func:`sampling_lib.estimators.get_estimator`;
        CLS is solved up to ``max_K``, exact for these metrics)
        or ``(label, callable)`` pairs with ``callable(sampled_ranks, N, n) -> w``.
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
        One seed for the whole panel; each cell's stream is a function of the
        population's labels, n and M (:func:`population_seed`), so adding a
        method or a population does not change the draws.
    references : sequence of str
        Any of :data:`REFERENCES`, added as estimators: ``"split-half oracle"``
        (:func:`split_half_estimate`: each half of the evaluated users scored with
        the other half's true ranks as prior, a reference a practitioner could
        reach by ranking comparable users in full) and ``"realized oracle"`` (the
        posterior mean under the evaluated users' *own* true rank distribution: a
        curiosity, not an information limit -- with uninformative data it
        returns the truth exactly).
    progress : bool
        Print one line per population.

    Returns
    -------
    pandas.DataFrame
        Tidy: ``dataset, model, N, n, M, draw, estimator, metric, K, estimate,
        truth, rel_error, below_resolution`` with ``metric`` in {"recall",
        "ndcg"}, ``rel_error = |estimate - truth| / truth`` (NaN when the truth
        is 0) and ``below_resolution = K < (N - 1)/(n - 1)``. An estimator that
        has no answer on a draw (a singular linear system: BV or MN with a
        fitted prior that gives an observed sampled rank zero weight) gets NaN
        estimates there; :func:`panel_summary` counts such ``failures``.
    """
    from ..estimators import Estimator

    scheme = check_scheme(scheme)
    draws = check_int(draws, "draws", low=1)
    max_K = check_int(max_K, "max_K", low=1)
    fns = resolve_methods(methods, max_K)
    refs = tuple(references)
    bad = [x for x in refs if x not in REFERENCES]
    if bad:
        raise ValueError(f"references must be among {REFERENCES}; got {bad}")
    root = seed_sequence(rng)
    frames = []
    Ks = np.arange(1, max_K + 1)
    for (dataset, model), (R, N) in populations.items():
        t0 = time.perf_counter()
        N = check_int(N, "N", low=2)
        R = check_ranks(R, N, name=f"ranks of {dataset}/{model}")
        F = metric_head(N, max_K)
        H = F.shape[0]
        for n, Mv, d, g, Ru, r in evaluation_draws(root, dataset, model, R, N, sample_sizes, user_counts, draws,
                                                   scheme):
            w_res = (N - 1) / (n - 1)
            truth = (np.bincount(Ru[Ru <= H] - 1, minlength=H) / Mv) @ F
            ests = {}
            if "split-half oracle" in refs:
                ests["split-half oracle"] = split_half_estimate(g, Ru, r, N, n, F, scheme=scheme)
            if "realized oracle" in refs:
                ests["realized oracle"] = posterior_mean_estimate(Ru, r, N, n, F, scheme=scheme)
            cache = {}       # fits shared by the estimators on these ranks (e.g. mes, mn_mes's prior)
            for name, fn in fns.items():
                try:
                    w = fn(r, N, n, cache=cache) if isinstance(fn, Estimator) else fn(r, N, n)
                except np.linalg.LinAlgError:
                    # e.g. BV/MN with a fitted prior that gives some observed sampled rank zero
                    # weight: the estimator has no answer on these ranks (NaN, counted as a failure)
                    ests[name] = np.full(F.shape[1], np.nan)
                    continue
                ests[name] = weights_head(w, H) @ F
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


def user_count_values(user_counts, size):
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
    the number of evaluations and of failures (evaluations without an
    estimate, left out of the means).

    Returns
    -------
    pandas.DataFrame
        Indexed by ``by``: ``mean_rel_error, sd, resolved, below_resolution, evaluations, failures``.
    """
    df = panel[panel.metric == metric]
    keys = ["dataset", "model", "n", "M", "draw", *by]
    keys = list(dict.fromkeys(keys))
    per = df.groupby(keys)["rel_error"].mean().rename("all")
    res = df[~df.below_resolution].groupby(keys)["rel_error"].mean().rename("resolved")
    bel = df[df.below_resolution].groupby(keys)["rel_error"].mean().rename("below")
    if "estimate" in df.columns:
        fail = df.groupby(keys)["estimate"].apply(lambda e: bool(e.isna().all())).rename("failed")
    else:
        fail = pd.Series(False, index=per.index, name="failed")
    t = pd.concat([per, res, bel, fail], axis=1).reset_index()
    out = t.groupby(list(by)).agg(mean_rel_error=("all", "mean"), sd=("all", "std"),
                                  resolved=("resolved", "mean"), below_resolution=("below", "mean"),
                                  evaluations=("all", "size"), failures=("failed", "sum"))
    out[["mean_rel_error", "sd", "resolved", "below_resolution"]] *= 100.0
    return out.sort_values("mean_rel_error")


def full_ranking_interval(true_ranks, F, *, n_boot=200, confidence_level=0.95, rng=None):
    """Full ranking's own percentile interval: the user bootstrap of the true ranks.

    What a full-ranking evaluation of the same users would report (Efron and
    Tibshirani 1993, ch. 13): the users resampled with replacement
    (one multinomial draw of the counts of their distinct ranks), the metric
    averaged over them.

    Parameters
    ----------
    true_ranks : array_like of int
    F : ndarray, shape (H, m)
        Metric values on ranks 1..H (0 beyond).
    n_boot : int, keyword-only
    confidence_level : float, keyword-only
    rng : seed or Generator, keyword-only

    Returns
    -------
    (low, high) : ndarrays of shape (m,)

    Examples
    --------
    >>> lo, hi = full_ranking_interval(np.r_[np.ones(50, int), np.full(50, 9)],
    ...                                metric_values("recall@5", 10)[:, None], rng=0)
    >>> bool(lo[0] < 0.5 < hi[0])
    True
    """
    F = np.asarray(F, dtype=float)
    H = F.shape[0]
    R = np.asarray(true_ranks)
    vals, cnt = np.unique(np.minimum(R, H + 1), return_counts=True)
    Fv = np.zeros((vals.size, F.shape[1]))
    top = vals <= H
    Fv[top] = F[vals[top] - 1]
    C = np.random.default_rng(rng).multinomial(R.size, cnt / R.size, size=check_int(n_boot, "n_boot", low=2))
    reps = (C / R.size) @ Fv
    a = 0.5 * (1.0 - confidence_level)
    return np.quantile(reps, a, axis=0), np.quantile(reps, 1.0 - a, axis=0)


def interval_coverage(populations, methods=("logspline",), metrics=("recall@10", "ndcg@10"), *,
                      sample_sizes=(20, 100, 500), user_counts=(300, None), draws=3, n_boot=200,
                      confidence_level=0.95, scheme="binomial", rng=0, progress=False):
    """Coverage and width of :func:`sampling_lib.correct.estimate`'s intervals on real rank distributions.

    For every population, n, M and draw (drawn as in :func:`accuracy_panel`)
    the practitioner entry point is called with each method and its default
    interval; the row records whether the interval holds the users' true
    metric, and compares its width with full ranking's own interval
    (:func:`full_ranking_interval`: the user bootstrap of the same users' true
    ranks, ``n_boot`` replicates at the same level).

    Returns
    -------
    pandas.DataFrame
        ``dataset, model, N, n, M, draw, method, metric, K, truth, estimate,
        ci_low, ci_high, covered, rel_width, full_low, full_high,
        precision_ratio, below_resolution``; ``rel_width`` is the width over
        the truth, ``precision_ratio`` the width over full ranking's width
        (1 = the precision of ranking every item; NaN when that width is 0).
    """
    from ..metrics import metric_matrix, parse_metrics

    draws = check_int(draws, "draws", low=1)
    root = seed_sequence(rng)
    parsed = parse_metrics(metrics)
    rows = []
    for (dataset, model), (R, N) in populations.items():
        t0 = time.perf_counter()
        R = check_ranks(R, N, name=f"ranks of {dataset}/{model}")
        Fm = metric_matrix(parsed, min(N, max(K for _, _, K in parsed)))
        for n, Mv, d, g, Ru, r in evaluation_draws(root, dataset, model, R, N, sample_sizes, user_counts, draws,
                                                   scheme, 1):
            f_lo, f_hi = full_ranking_interval(Ru, Fm, n_boot=n_boot, rng=g,
                                               confidence_level=confidence_level)
            for meth in methods:
                t = estimate(r, N, n, metrics, method=meth, n_boot=n_boot, rng=g,
                             scheme=scheme, confidence_level=confidence_level)
                for j, row in t.iterrows():
                    truth = float(np.mean(metric_values(row["metric"], N)[Ru - 1]))
                    width = row["ci_high"] - row["ci_low"]
                    f_w = f_hi[j] - f_lo[j]
                    rows.append({
                        "dataset": dataset, "model": model, "N": N, "n": n, "M": Mv,
                        "draw": d, "method": meth, "metric": row["metric"], "K": row["K"],
                        "truth": truth, "estimate": row["estimate"],
                        "ci_low": row["ci_low"], "ci_high": row["ci_high"],
                        "covered": bool(row["ci_low"] <= truth <= row["ci_high"]),
                        "rel_width": width / truth if truth > 0 else np.nan,
                        "full_low": f_lo[j], "full_high": f_hi[j],
                        "precision_ratio": width / f_w if f_w > 0 else np.nan,
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
