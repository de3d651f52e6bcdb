"""Designs of a sampled evaluation by simulation: realized widths, coverage, errors and cost (notebook 12).

Re-exported by :mod:`sampling_lib.studies`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import check_float, check_int
from ..correct import estimate
from ..experiments import seed_sequence
from ..metrics import metric_values, parse_metrics
from ..sampling import sample_design

__all__ = [
    "log_rank_bandwidth",
    "stretch_ranks",
    "full_ranking_halfwidth",
    "design_study",
    "design_summary",
    "plan_frontier",
    "design_law_check",
    "design_population_study",
    "shared_design_on_scores",
]


def log_rank_bandwidth(global_ranks):
    """Silverman's rule-of-thumb bandwidth of a kernel density estimate of log R.

    0.9 min(sd, IQR / 1.34) M^(-1/5) over the M users' log R (Silverman 1986, eq 3.31): the
    ``bandwidth`` of :func:`stretch_ranks` for a population drawn from these users.

    Examples
    --------
    >>> round(log_rank_bandwidth(np.arange(1, 1001)), 3)
    0.185

    References
    ----------
    Silverman, B. W. Density Estimation for Statistics and Data Analysis (1986), Sec 3.4.2.
    """
    x = np.log(np.asarray(global_ranks, dtype=float))
    if x.size < 2 or np.any(~np.isfinite(x)) or np.any(x < 0):
        raise ValueError("global_ranks must hold at least 2 ranks >= 1")
    q75, q25 = np.percentile(x, [75, 25])
    spread = min(float(x.std(ddof=1)), (q75 - q25) / 1.34) or float(x.std(ddof=1))
    return float(0.9 * spread * x.size ** -0.2)


def stretch_ranks(global_ranks, N0, N, *, bandwidth=0.0, rng=None):
    """Global ranks of a catalogue of N0 items carried to N >= N0 items, preserving log R.

    Rank R of 1..N0 maps to a uniform integer of [R^c, (R + 1)^c) with
    c = log N / log N0 (rank 1 to 1..2^c - 1, ...), so the power-law head of a
    real model's rank distribution keeps its slope in log R and 1..N0 covers 1..N.
    A stand-in for real rank distributions of catalogues of 10^5-10^6 items
    (the two-stage designs' benchmark, ``benchmarks/bench_design.py``).

    ``bandwidth`` > 0 first draws each user's log-rank from a Gaussian kernel density
    estimate around their own (log(R + U) + bandwidth Z, U uniform, reflected at 0 and
    log(N0 + 1)) and maps the continuous rank x to floor(x^c). A population of many more users
    than its source (e.g. 10^4 drawn from 943 real ones) otherwise repeats each source user's
    rank block about 10 times: its rank distribution keeps the lumps of the small sample while
    its metrics are known to the precision of the large one (:func:`log_rank_bandwidth` gives
    Silverman's bandwidth of the source).

    Examples
    --------
    >>> r = stretch_ranks([1, 1, 50, 1000], 1000, 10**6, rng=0)     # c = 2
    >>> bool(r[:2].max() <= 3 and 50**2 <= r[2] < 51**2 and r[3] == 10**6)
    True
    >>> s = stretch_ranks(np.full(1000, 50), 1000, 10**6, bandwidth=0.2, rng=0)
    >>> bool(s.min() < 50**2 and s.max() >= 51**2 and s.max() <= 10**6)
    True
    """
    R = np.asarray(global_ranks, dtype=np.int64)
    N0 = check_int(N0, "N0", low=2)
    N = check_int(N, "N", low=N0)
    bandwidth = check_float(bandwidth, "bandwidth", low=0.0)
    if R.min() < 1 or R.max() > N0:
        raise ValueError(f"global_ranks must lie in 1..N0={N0}; got {R.min()}..{R.max()}")
    c = np.log(N) / np.log(N0)
    g = np.random.default_rng(rng)
    if bandwidth > 0:
        top = np.log(N0 + 1.0)
        x = np.log(R + g.random(R.size)) + bandwidth * g.standard_normal(R.size)
        x = np.abs(x)                                        # reflected at log 1 = 0 ...
        x = np.where(x > top, 2 * top - x, x)                # ... and at log(N0 + 1)
        out = np.floor(np.exp(c * np.clip(x, 0.0, top))).astype(np.int64)
        return np.clip(out, 1, N)
    lo = np.floor(R.astype(float) ** c)
    hi = np.minimum(np.floor((R + 1.0) ** c), N + 1.0)
    u = g.random(R.size)
    out = np.floor(lo + u * np.maximum(hi - lo, 1.0)).astype(np.int64)
    return np.clip(out, 1, N)


def _metric_rows(parsed, R):
    """F_j(R_u) for every metric j and user u: (m, M)."""
    H = min(int(R.max()), max(K for _, _, K in parsed))
    out = np.zeros((len(parsed), R.size))
    for j, (full, _, _) in enumerate(parsed):
        f = metric_values(full, H)
        inside = R <= H
        out[j, inside] = f[R[inside] - 1]
    return out


def full_ranking_halfwidth(global_ranks, metrics=("recall@10", "ndcg@10"), *, confidence_level=0.95,
                           n_boot=100_000, rng=None):
    """Half-width of full ranking's own percentile interval: the user bootstrap of the true ranks.

    The reference of the *precision ratio* (interval width over this one):
    the uncertainty about the users' metric that remains with every item
    ranked, from which users are in the test set.

    A top-K metric takes few distinct values over the users (Recall@10 and
    NDCG@10 together: one per R <= 10, and 0), and a user resample's metric
    is a function of how many resampled users fall on each: their counts are
    Multinomial(M, shares of the values). The replicates are drawn that way,
    the same distribution as resampling the M users, at O(values) per
    replicate instead of O(M); so the default 100,000 replicates put the Monte
    Carlo error of the half-width near 0.3%. (It was 1,000 user resamples:
    on MovieLens 100K's popularity ranks, NDCG@10's half-width ranged
    0.0096-0.0106 over 40 seeds, SD 2.4%, against 0.0101 at 40,000.)

    Returns
    -------
    ndarray, shape (m,)

    Examples
    --------
    >>> hw = full_ranking_halfwidth(np.r_[np.ones(300, int), np.full(700, 50)], "recall@10", rng=0)
    >>> bool(abs(hw[0] - 1.96 * np.sqrt(0.3 * 0.7 / 1000)) < 0.001)
    True
    """
    R = np.asarray(global_ranks, dtype=np.int64)
    F = _metric_rows(parse_metrics(metrics), R)
    level = check_float(confidence_level, "confidence_level", 0.0, 1.0, low_open=True, high_open=True)
    B = check_int(n_boot, "n_boot", low=2)
    g = np.random.default_rng(rng)
    values, counts = np.unique(F, axis=1, return_counts=True)      # (m, k) distinct value vectors, (k,)
    share = counts / R.size
    chunk = max(1, 10_000_000 // values.shape[1])                  # replicates per draw: bounded memory
    boot = np.concatenate([g.multinomial(R.size, share, size=min(chunk, B - b)) @ values.T
                           for b in range(0, B, chunk)]) / R.size
    lo, hi = np.quantile(boot, [0.5 - level / 2, 0.5 + level / 2], axis=0)
    return (hi - lo) / 2


def design_study(global_ranks, N, design, *, metrics=("recall@10", "ndcg@10"), repeats=10, n_boot=300,
                 confidence_level=0.95, scheme="binomial", rng=None):
    """Simulate a design on fixed users and estimate with the default: one row per draw and metric.

    Each draw samples the users' sets stage by stage
    (:func:`sampling_lib.sampling.sample_design`) and estimates with
    :func:`sampling_lib.correct.estimate` on the final per-user sizes; the
    truth is the users' own metric (their full-ranking value).

    Returns
    -------
    pandas.DataFrame
        ``design, draw, metric, truth, estimate, ci_low, ci_high, halfwidth,
        covered, rel_error, cost_share`` (items scored per user over N_u),
        ``full_halfwidth`` (:func:`full_ranking_halfwidth`), ``ratio``
        (halfwidth / full_halfwidth: the realized precision ratio) and
        ``estimated_ratio`` (the precision ratio the estimate itself reports,
        against full ranking's interval estimated from the fit:
        ``precision_ratio`` of :func:`sampling_lib.correct.estimate`).

    Examples
    --------
    >>> from sampling_lib.sampling import Design
    >>> R = np.r_[np.ones(100, int), np.arange(1, 901)]
    >>> t = design_study(R, 1000, Design("ladder", 20, n_max=160), metrics="recall@10", repeats=2, n_boot=20, rng=0)
    >>> t.shape, sorted(t.columns)[:3]
    ((2, 14), ['ci_high', 'ci_low', 'cost_share'])
    """
    R = np.asarray(global_ranks, dtype=np.int64)
    parsed = parse_metrics(metrics)
    repeats = check_int(repeats, "repeats", low=1)
    root = seed_sequence(rng)
    names = [p[0] for p in parsed]
    truth = _metric_rows(parsed, R).mean(axis=1)
    full = full_ranking_halfwidth(R, metrics, confidence_level=confidence_level,
                                  rng=np.random.default_rng(root.spawn(1)[0]))
    Nu = np.broadcast_to(np.asarray(N, dtype=np.int64), R.shape)
    rows = []
    for k, child in enumerate(root.spawn(repeats)):
        g = np.random.default_rng(child)
        r, s = sample_design(R, N, design, scheme=scheme, rng=g)
        t = estimate(r, N, None, names, sample_sizes=s, n_boot=n_boot, scheme=scheme,
                     confidence_level=confidence_level, rng=g)
        for j, name in enumerate(names):
            est, lo, hi = float(t.estimate[j]), float(t.ci_low[j]), float(t.ci_high[j])
            rows.append({"design": design.describe(), "draw": k, "metric": name, "truth": truth[j],
                         "estimate": est, "ci_low": lo, "ci_high": hi, "halfwidth": (hi - lo) / 2,
                         "covered": lo <= truth[j] <= hi,
                         "rel_error": abs(est - truth[j]) / truth[j] if truth[j] > 0 else np.nan,
                         "cost_share": float(np.mean(s / Nu)), "full_halfwidth": full[j],
                         "estimated_ratio": float(t.precision_ratio[j])})
    out = pd.DataFrame(rows)
    out["ratio"] = out.halfwidth / out.full_halfwidth
    return out


def design_summary(study, by=("design", "metric")):
    """Per design and metric: draws, coverage, mean realized ratio and half-width, mean |relative error|,
    mean cost share (of a :func:`design_study` table, or several concatenated with extra key columns), and
    the mean ``estimated_ratio`` when the table has it.

    Examples
    --------
    >>> t = pd.DataFrame({"design": "d", "metric": "m", "covered": [True, False], "ratio": [1.0, 1.2],
    ...                   "halfwidth": [0.1, 0.12], "rel_error": [0.01, 0.03], "cost_share": 0.04})
    >>> design_summary(t).round(3).to_dict("records")
    [{'design': 'd', 'metric': 'm', 'draws': 2, 'coverage': 0.5, 'ratio': 1.1, 'halfwidth': 0.11, 'rel_error': 0.02, 'cost_share': 0.04}]
    """
    extra = {"estimated_ratio": ("estimated_ratio", "mean")} if "estimated_ratio" in study.columns else {}
    return (study.groupby(list(by), sort=False)
            .agg(draws=("covered", "size"), coverage=("covered", "mean"), ratio=("ratio", "mean"),
                 halfwidth=("halfwidth", "mean"), rel_error=("rel_error", "mean"),
                 cost_share=("cost_share", "mean"), **extra)
            .reset_index())


def design_population_study(pmf, M, design, *, metrics=("recall@10", "ndcg@10"), repeats=10, n_boot=300, rng=None):
    """:func:`design_study` on ``repeats`` fresh populations: each draw samples M users' global ranks from
    ``pmf`` (P(R), R = 1..N) and runs the design once on them, so the spread of the estimates is that of the
    users and of the items together; ``population_truth`` is the metric under ``pmf`` itself.

    Returns
    -------
    pandas.DataFrame
        :func:`design_study`'s rows with ``draw`` numbered 0..repeats-1 and ``population_truth``.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> from sampling_lib.sampling import Design
    >>> t = design_population_study(synthetic_models(500)["beta_a0.35"], 200, Design("single", 20),
    ...                             metrics=["recall@10"], repeats=2, n_boot=30, rng=0)
    >>> t.draw.tolist(), bool(t.population_truth.nunique() == 1)
    ([0, 1], True)
    """
    from ..rankdist import draw_global_ranks

    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    pmf = np.asarray(pmf, dtype=float)
    N = pmf.size
    parsed = parse_metrics(metrics)
    draws = []
    for k in range(check_int(repeats, "repeats", low=1)):
        R = draw_global_ranks(pmf, M, rng=g)
        draws.append(design_study(R, N, design, metrics=metrics, repeats=1, n_boot=n_boot, rng=g).assign(draw=k))
    out = pd.concat(draws, ignore_index=True)
    truth = {label: float(pmf @ metric_values(label, N)) for label, _, _ in parsed}
    out["population_truth"] = out.metric.map(truth)
    return out


def design_law_check(design, N, ranks, scheme, users, *, rng=None, factor_ranks=400):
    """A design's law (:func:`sampling_lib.design.design_law`) against simulation, and its factorisation.

    (a) For each global rank R in ``ranks``, ``users`` users are run through the design stage by stage
    (:func:`sampling_lib.sampling.sample_design`); each final cell's frequency is compared with its law, in
    standard errors, over the cells expected to hold at least 10 users and to miss at least 10 (the normal
    approximation of a count); a cell of probability 1 must hold every user. (b) On a grid of about
    ``factor_ranks`` ranks, P(final cell | R) / P(r | R; N, n_final) must be free of R on the exact sampled
    cells (one rank, final size below N): the ignorability of the design (TORS24 Algorithm 1).

    Returns
    -------
    dict
        ``cells`` (final cells of the design), ``max_z`` (the largest |z| of (a), inf when a certain cell
        missed a user) and ``factor_spread`` (the largest relative spread of the ratio (b) around its median).

    Examples
    --------
    >>> from sampling_lib.sampling import Design
    >>> out = design_law_check(Design("ladder", 10, n_max=80), 500, [1, 20, 200], "binomial", 2000, rng=0)
    >>> out["max_z"] < 5, out["factor_spread"] < 1e-6
    (True, True)
    """
    from ..design import design_law
    from ..kernels import kernel_entries
    from ..sampling import sample_design

    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    sizes, lo, hi, D = design_law(design, N, ranks, scheme)
    z_all = []
    for i, R in enumerate(ranks):
        r, s = sample_design(np.full(users, R), N, design, scheme=scheme, rng=g)
        freq = np.array([np.mean((s == sizes[c]) & (r >= lo[c]) & (r <= hi[c])) for c in range(sizes.size)])
        ok = (D[i] * users >= 10) & ((1 - D[i]) * users >= 10)
        se = np.sqrt(D[i] * (1 - D[i]) / users)
        z = np.max(np.abs(freq[ok] - D[i, ok]) / se[ok]) if ok.any() else 0.0
        sure = D[i] > 1 - 1e-12                     # a certain cell (e.g. R = 1: rank 1 at the top size)
        z_all.append(z if np.all(freq[sure] == 1) else np.inf)
        if abs(freq.sum() - 1) > 1e-12 or abs(D[i].sum() - 1) > 1e-9:
            raise AssertionError(f"R = {R}: the cells' frequencies or probabilities do not sum to 1")  # pragma: no cover
    Rg = np.arange(1, N + 1, max(1, N // factor_ranks))
    sz, lo2, hi2, D2 = design_law(design, N, Rg, scheme)
    spread = 0.0
    for c in np.flatnonzero((lo2 == hi2) & (sz < N)):
        K = kernel_entries(N, int(sz[c]), Rg, [int(lo2[c])], scheme)[:, 0]
        use = (K > 1e-12) & (D2[:, c] > 1e-12)
        if use.sum() > 1:
            rat = D2[use, c] / K[use]
            spread = max(spread, float(np.max(np.abs(rat / np.median(rat) - 1))))
    return {"cells": int(sizes.size), "max_z": float(max(z_all)), "factor_spread": spread}


def plan_frontier(populations, *, n, metrics=("recall@10", "ndcg@10"), target_ratio=1.3, assurance=0.9,
                  repeats=4, n_boot=300, rng=None):
    """The planner's choice beside three reference designs, each simulated on the same users (notebook 12).

    For each population: a pilot of n_p = min(``n``, max(2, N/100)) items per user (N the median N_u),
    :func:`sampling_lib.design.plan` on it for ``target_ratio`` (sets capped at the smallest N_u), then
    :func:`design_study` of the chosen design, of one stage of n_p, of a ladder n_p -> 4 n_p and of a
    threshold design adding 8 n_p for the users at rank 1, all from the same ``rng`` in that order.

    Parameters
    ----------
    populations : mapping label -> (global_ranks, N or N_u array)
    n, metrics, target_ratio, assurance
        The pilot's largest size, and as :func:`sampling_lib.design.plan`.
    repeats, n_boot
        As :func:`design_study` (``n_boot`` at least 100 there).
    rng : None, int or numpy.random.Generator
        One Generator for every draw (a Generator is used as it is).

    Returns
    -------
    front : pandas.DataFrame
        One row per (population, design, metric): ``population, N/n, design, chosen, metric, cost share,
        realized ratio, predicted ratio, reported ratio, realized half-width, predicted half-width,
        coverage, rel. error``.
    plans : dict label -> PlanResult
    setup : dict label -> (n_p, median N_u, smallest N_u)

    Examples
    --------
    >>> from sampling_lib.rankdist import draw_global_ranks, synthetic_models
    >>> R = draw_global_ranks(synthetic_models(1000)["beta_a0.35"], 300, rng=0)
    >>> front, plans, setup = plan_frontier({"p": (R, 1000)}, n=20, metrics=["recall@10"], repeats=1, n_boot=50,
    ...                                     rng=1)
    >>> setup["p"], bool(front.chosen.any())
    ((10, 1000, 1000), True)
    """
    from ..design import plan
    from ..sampling import Design, sample_ranks

    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    rows, plans, setup = [], {}, {}
    for label, (R, NN) in populations.items():
        Nmed, Nmin = (int(np.median(NN)), int(np.min(NN))) if np.ndim(NN) else (int(NN), int(NN))
        n_pilot = min(int(n), max(2, Nmed // 100))
        setup[label] = (n_pilot, Nmed, Nmin)
        pilot = sample_ranks(R, NN, n_pilot, rng=g)
        res = plan(pilot, Nmed, n_pilot, M=R.size, metrics=metrics, target_ratio=target_ratio, max_size=Nmin,
                   assurance=assurance)
        plans[label] = res
        shown = [res.best] if res.best is not None else []
        shown += [Design("single", n_pilot), Design("ladder", n_pilot, n_max=min(Nmin, 4 * n_pilot)),
                  Design("threshold", n_pilot, threshold=1, n2=min(Nmin - n_pilot, 8 * n_pilot))]
        for d in dict.fromkeys(shown):
            st = design_study(R, NN, d, metrics=metrics, repeats=repeats, n_boot=max(100, n_boot), rng=g)
            sm = design_summary(st)
            p = res.table[res.table.design == d.describe()].set_index("metric")
            for _, row in sm.iterrows():
                rows.append({"population": label, "N/n": round(Nmed / n_pilot), "design": d.describe(),
                             "chosen": d == res.best, "metric": row.metric, "cost share": row.cost_share,
                             "realized ratio": row.ratio, "predicted ratio": p.ratio.get(row.metric, np.nan),
                             "reported ratio": row.estimated_ratio, "realized half-width": row.halfwidth,
                             "predicted half-width": p.halfwidth.get(row.metric, np.nan),
                             "coverage": row.coverage, "rel. error": row.rel_error})
    return pd.DataFrame(rows), plans, setup


def shared_design_on_scores(scores, train, test_items, design, *, rng=None, block=256):
    """A nested design run on real scores, several models sharing the added items: (first-stage ranks,
    final ranks, final set sizes).

    Each user's candidates are the items outside its history other than its
    held-out item (N_u - 1 of them, drawn without replacement: the
    ``--exclude`` protocol of ``sampling-lib negatives``). The items a user
    is ever shown are the first ones of one random order of its candidates,
    so the stages are nested prefixes: stage 1 shows n - 1 of them; a
    threshold design shows n2 more when any model ranks the held-out item
    at <= t, the ladder (TORS24 Algorithm 1) doubles the set while any model
    ranks it first, up to n_max. A model's rank at set size s is 1 + the
    number of the first s - 1 shown items it scores at least as high as the
    held-out item (ties pessimistic). This is the two-stage workflow of the
    command line, simulated: what :func:`sampling_lib.design.shared_cost`
    predicts the cost of.

    Parameters
    ----------
    scores : dict {model: ndarray (M, N) or callable}
        Every user's score of every item, per model: the matrix, or a
        scorer ``f(users) -> ndarray (len(users), N)`` (e.g. a fitted
        recommender's ``score``), called on blocks of ``block`` users so that
        no M x N matrix is held (Last.fm's 1,884 x 17,632 per model).
    train : scipy.sparse matrix (M, N)
        The users' histories (never shown).
    test_items : array_like of int, shape (M,)
        The held-out item of each user.
    design : Design
        ``"single"``, ``"threshold"`` or ``"ladder"``.
    rng : keyword-only
    block : int, default 256, keyword-only
        Users scored at once by a callable scorer.

    Returns
    -------
    first : ndarray (M, models)
        Stage-1 sampled ranks (the pilot of :func:`sampling_lib.design.plan`).
    final : ndarray (M, models)
        Sampled ranks in the final sets.
    sizes : ndarray (M,)
        Final set sizes (held-out item included); their mean is the scoring cost per user.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from sampling_lib.sampling import Design
    >>> S = {"a": np.tile(np.arange(50.0), (4, 1)), "b": np.tile(-np.arange(50.0), (4, 1))}
    >>> f, r, s = shared_design_on_scores(S, sp.csr_matrix((4, 50)), [49, 49, 0, 0], Design("ladder", 5, n_max=40),
    ...                                   rng=0)
    >>> s.tolist(), r[:, 0].tolist(), r[:, 1].tolist()
    ([40, 40, 40, 40], [1, 1, 40, 40], [40, 40, 1, 1])
    """
    from ..sampling import Design, next_stage_sizes, size_ladder

    if not isinstance(design, Design) or design.kind == "full_subset":
        raise ValueError("design must be a sampling_lib.sampling.Design of kind single, threshold or ladder")
    names = list(scores)
    if not names:
        raise ValueError("scores must hold at least one model's score matrix")
    X = train.tocsr()
    M, N = X.shape
    S = [scores[m] if callable(scores[m]) else np.asarray(scores[m], dtype=float) for m in names]
    if any(not callable(s) and s.shape != (M, N) for s in S):
        raise ValueError(f"every score matrix must have the shape of train (M, N) = {(M, N)}")
    block = check_int(block, "block", low=1)
    h = np.asarray(test_items, dtype=np.int64)
    if h.shape != (M,) or h.min() < 0 or h.max() >= N:
        raise ValueError(f"test_items must hold one item in 0..N-1={N - 1} per user")
    top = {"single": design.n, "threshold": design.n + (design.n2 or 0), "ladder": design.n_max}[design.kind]
    Nu = N - np.diff(X.indptr) + (np.asarray(X[np.arange(M), h]).ravel() != 0)   # history minus held-out
    design.check(int(Nu.min()))
    g = np.random.default_rng(rng)
    above = np.zeros((M, top - 1, len(names)), dtype=bool)      # shown item j of user u scored >= held-out
    for lo in range(0, M, block):
        users = np.arange(lo, min(M, lo + block))
        rows = []
        for s in S:
            r = np.asarray(s(users), dtype=float) if callable(s) else s[users]
            if r.shape != (users.size, N):
                raise ValueError(f"a scorer must return one row of N = {N} scores per user; got shape {r.shape} "
                                 f"for {users.size} users")
            rows.append(r)
        for i, u in enumerate(users):
            bad = np.zeros(N, bool)
            bad[X.indices[X.indptr[u]:X.indptr[u + 1]]] = True
            bad[h[u]] = True
            cand = np.flatnonzero(~bad)
            shown = cand[g.permutation(cand.size)[:top - 1]]     # prefixes: stage 1 does not depend on the design
            for k, r in enumerate(rows):
                above[u, :, k] = r[i, shown] >= r[i, h[u]]
    counts = np.concatenate([np.zeros((M, 1, len(names)), np.int64), np.cumsum(above, axis=1)], axis=1)

    def rank_at(size):
        return 1 + counts[:, size - 1, :]

    first = rank_at(design.n)
    sizes = np.full(M, design.n, dtype=np.int64)
    # the stages' rule is the command line's (sampling.next_stage_sizes: a user goes on when any model needs
    # it), applied to each user's ranks at its current size until no one goes on
    stages = (len(size_ladder(design.n, design.n_max, design.growth)) - 1 if design.kind == "ladder"
              else int(design.kind == "threshold"))
    for _ in range(stages):
        new = next_stage_sizes(1 + counts[np.arange(M), sizes - 1, :], sizes, design)
        if (new == sizes).all():
            break
        sizes = new
    final = 1 + counts[np.arange(M), sizes - 1, :]
    return first, final, sizes
