"""Published cascade protocols corrected on real recommenders, beside full ranking (benchmarks/bench_proxy.py).

Re-exported by :mod:`sampling_lib.studies`.

:func:`cascade_study` fits a costly model and a retriever on a leave-one-out split (the one data-to-ranks
pipeline, :func:`sampling_lib.experiments.global_ranks_from_data`), builds for every test user the table a
cascade paper would keep -- the costly model's scores of the held-out item, of the retriever's top ``m``
candidates and of ``r`` negatives drawn uniformly from the rest -- and corrects it with
:func:`sampling_lib.cascade.cascade_estimate`, ``draws`` times (new tail draws each time; the head is the
retriever's and does not change). Every row sets the corrected estimate and the naive metric among the
scored items beside the full-ranking truth of the same users.

:func:`bounds_expectation_gap` checks :func:`sampling_lib.cascade.cascade_bounds` exactly, over every tail
rank, and :func:`design_interval_coverage` draws tail samples of fixed simulated users far below the tail's
resolution, setting the estimate's interval and the design-only interval beside the users' own metric
(notebook 14 section 7).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import check_float, check_int
from ..metrics import parse_metrics
from .design import _metric_rows, full_ranking_halfwidth
from .panel_data import DENSE_ITEMS_MAX, PANEL_MODELS

__all__ = ["bounds_expectation_gap", "cascade_study", "cascade_tables", "design_interval_coverage",
           "extension_study", "poisson_indicator_estimate", "unbiased_top_k_checks"]


def cascade_tables(costly_rows, retriever_rows, train, held, m, r, rng, *, extension=None, costly_pairs=None):
    """One draw's cascade score table: each user's held-out item, the retriever's top ``m`` candidates (history
    and held-out item excluded; ties by catalogue position) and ``r`` candidates drawn uniformly without
    replacement from the rest, with the costly model's scores.

    ``costly_rows`` / ``retriever_rows``: callables users -> (len(users), N) score rows; ``train`` the
    (M, N) CSR history, ``held`` (M,) the held-out items; ``rng`` a Generator. Returns the table of
    :func:`sampling_lib.cascade.cascade_cells` (``user, item, score, label, stratum``).

    ``extension`` = (size, power) adds, before the uniform draw, a Poisson sample of the rest with inclusion
    probabilities pi_t = :func:`sampling_lib.proxy.rank_power_inclusion` (T_u, min(size, T_u), power) over its
    T_u candidates in the retriever's order: each is drawn independently with its own pi_t, so the sample's
    size is random with mean min(size, T_u). Those items are scored in full and kept as ``"head"`` rows (a
    random extension of the head, chosen before any costly score is seen, so the design stays ignorable);
    the ``r`` uniform draws come from what is left (fewer where fewer are left). With ``extension`` None the
    draws are those of the plain protocol.

    ``costly_pairs`` (users, items) -> scores, when given, scores the table's pairs instead of ``costly_rows``
    (then unused): a counting wrapper around it (:class:`sampling_lib.studies.PairCounter`) counts what the
    design scored.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> rows = lambda users: np.tile(np.arange(6.0), (len(users), 1))
    >>> t = cascade_tables(rows, rows, sp.csr_matrix((2, 6)), np.array([0, 5]), 2, 1, np.random.default_rng(0))
    >>> t[t.user == 0].stratum.tolist(), t[(t.user == 0) & (t.stratum == "head")].item.tolist()
    (['head', 'head', 'head', 'tail'], [0, 5, 4])
    >>> t = cascade_tables(rows, rows, sp.csr_matrix((2, 6)), np.array([0, 5]), 1, 1, np.random.default_rng(0),
    ...                    extension=(4, 1.0))              # the whole rest: every pi_t is 1
    >>> t[t.user == 0].stratum.tolist()
    ['head', 'head', 'head', 'head', 'head', 'head']
    """
    if extension is not None:
        size, power = extension
        size = check_float(size, "extension size", low=0.0, low_open=True)
        power = check_float(power, "extension power", low=0.0)
    M, N = train.shape
    out = []
    pis = {}
    step = max(1, (1 << 22) // max(N, 1))
    for a in range(0, M, step):
        users = np.arange(a, min(a + step, M))
        k = users.size
        P = np.array(retriever_rows(users), dtype=float)
        sub = train[users].tocoo()
        P[sub.row, sub.col] = -np.inf
        P[np.arange(k), held[users]] = -np.inf
        order = np.argsort(-P, axis=1, kind="stable")
        head = order[:, :m]
        key = rng.random((k, N))                            # the tail: r uniform draws among the rest
        key[sub.row, sub.col] = np.inf
        key[np.arange(k), held[users]] = np.inf
        key[np.arange(k)[:, None], head] = np.inf
        if extension is None:
            items = np.hstack([held[users][:, None], head, np.argsort(key, axis=1)[:, :r]])
            w = items.shape[1]
            rows, cols, heads = np.repeat(np.arange(k), w), items.ravel(), np.tile(np.arange(w) < 1 + m, k)
        else:
            rows, cols, heads = _extended(order, key, held[users], m, r, size, power, pis, rng)
        score = (costly_pairs(users[rows], cols) if costly_pairs is not None
                 else np.asarray(costly_rows(users))[rows, cols])
        first = np.r_[True, rows[1:] != rows[:-1]]
        out.append(pd.DataFrame({"user": users[rows], "item": cols, "score": score,
                                 "label": first.astype(np.int64), "stratum": np.where(heads, "head", "tail")}))
    return pd.concat(out, ignore_index=True)


def _extended(order, key, held, m, r, size, power, pis, rng):
    """One block's (row, item, head?) of cascade_tables with a Poisson extension of the head (its docstring)."""
    from ..proxy import rank_power_inclusion

    T = np.isfinite(key).sum(axis=1)                    # the rest's candidates, in the retriever's order
    rows, cols, heads = [], [], []
    for i in range(order.shape[0]):
        if T[i] not in pis:
            pis[T[i]] = rank_power_inclusion(T[i], min(size, T[i]), power) if T[i] else np.zeros(0)
        ext = order[i, m:m + T[i]][rng.random(T[i]) < pis[T[i]]]
        key[i, ext] = np.inf
        tail = np.argsort(key[i])[:r]
        tail = tail[np.isfinite(key[i, tail])]
        cols.append(np.r_[held[i], order[i, :m], ext, tail])
        rows.append(np.full(cols[-1].size, i))
        heads.append(np.arange(cols[-1].size) < 1 + m + ext.size)
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(heads)


def cascade_study(data=None, costly="ease-200", retriever="itemknn", *, m=20, r=19, draws=10,
                  metrics=("recall@10", "ndcg@10"), n_boot=1000, seed=0, data_rng=0, full_boot=100_000,
                  synthetic=None, population=None):
    """"Retriever top-``m`` + ``r`` random" corrected by :func:`sampling_lib.cascade.cascade_estimate`, ``draws``
    times, beside full ranking; and the head-only bounds ("top-``m`` only").

    Parameters
    ----------
    data : path, Ratings or None
        As :func:`sampling_lib.experiments.global_ranks_from_data` (None: its synthetic ratings).
    costly, retriever : str
        Labels of :data:`sampling_lib.studies.panel_data.PANEL_MODELS`: the model evaluated and the one whose
        top ``m`` forms the head.
    m, r : int
        Head size and random negatives per user (LLMRank-style 19 random: ``m=0, r=19``; LlamaRec: ``m=20,
        r=0`` gives the bounds only).
    draws, metrics, n_boot, seed
        Tail draws (seeds ``seed, seed + 1, ...``), metrics, bootstrap replicates.
    data_rng, synthetic
        The split's and the models' seed, and the synthetic ratings' settings (``data=None``).
    full_boot : int
        Replicates of full ranking's own percentile interval.
    population : tuple, optional
        ``global_ranks_from_data(..., keep_models=True)``'s result with both models.

    Returns
    -------
    pandas.DataFrame
        One row per (draw, metric) of the corrected protocol (``protocol`` "top-m + r random"): ``dataset, N, M,
        m, r, draw, metric, truth, naive, naive_error`` (naive - truth), ``estimate, ci_low, ci_high,
        covered, halfwidth, full_halfwidth, ratio, rel_error``, ``bound_low, bound_high`` (the interval the
        design alone gives, :func:`sampling_lib.cascade.cascade_bounds`) and ``bounds_covered`` (the truth
        inside it); and one row per metric of the head-only bounds
        (``protocol`` "top-m only", ``draw`` -1, ``bound_low, bound_high``, ``covered`` = the truth inside
        [ci_low, ci_high]).

    Examples
    --------
    >>> t = cascade_study(None, "popularity", "itemknn", m=10, r=10, draws=1, n_boot=100, full_boot=2000,
    ...                   synthetic={"n_users": 300, "n_items": 200})
    >>> sorted(t.protocol.unique()), bool(t.bound_low.dropna().le(t.bound_high.dropna()).all())
    (['top-m + r random', 'top-m only'], True)
    """
    from ..cascade import cascade_estimate

    draws = check_int(draws, "draws", low=1)
    parsed = parse_metrics(metrics)
    setup = _panel_setup(data, population, costly, retriever, parsed, data_rng, full_boot, synthetic)
    train, held, N_u, truth, full_hw, fc, fr, base = setup
    base = {**base, "m": m, "r": r, "costly": costly, "retriever": retriever}
    rows = []
    for k in range(draws):
        table = cascade_tables(fc.score, fr.score, train, held, m, r, np.random.default_rng([seed, k]))
        rows += _corrected_rows(table, N_u, parsed, truth, full_hw, n_boot, seed + k,
                                {**base, "protocol": "top-m + r random", "draw": k})
    head = cascade_tables(fc.score, fr.score, train, held, m, 0, np.random.default_rng([seed, draws]))
    b = cascade_estimate(head, N_u, metrics=metrics, n_boot=n_boot, rng=seed).set_index("metric")
    for j, (name, _, _) in enumerate(parsed):
        x = b.loc[name]
        rows.append({**base, "r": 0, "protocol": "top-m only", "draw": -1, "metric": name, "truth": truth[j],
                     "naive": x.naive, "naive_error": x.naive - truth[j], "ci_low": x.ci_low, "ci_high": x.ci_high,
                     "bound_low": x.bound_low, "bound_high": x.bound_high,
                     "covered": bool(x.ci_low <= truth[j] <= x.ci_high), "full_halfwidth": full_hw[j]})
    return pd.DataFrame(rows)


def extension_study(data=None, costly="ease-200", proxy="popularity", designs=((25, 0, 0.0, 75), (25, 25, 1.0, 50)),
                    *, draws=10, metrics=("recall@10", "ndcg@10"), n_boot=300, seed=0, data_rng=0,
                    full_boot=100_000, synthetic=None, population=None):
    """Fixed designs with a tail drawn by the proxy's rank: the proxy's top ``m``, a Poisson sample of the rest
    with inclusion probabilities a power of the proxy's rank (:func:`cascade_tables`' ``extension``, kept as
    head rows) and ``r`` uniform draws from what is left, corrected by
    :func:`sampling_lib.cascade.cascade_estimate`, ``draws`` times, at their cost, beside full ranking.

    The Poisson sample is the valid use of unequal inclusion probabilities that needs no model of where the
    items above lie: its items are scored, so they count exactly, like the head's, and the uniform draws keep
    their hypergeometric kernel on the rest (benchmarks/README.md, "A tail drawn by the proxy's rank").

    Parameters
    ----------
    data, costly, proxy, data_rng, synthetic, population
        As :func:`cascade_study` (``proxy`` in the retriever's place).
    designs : sequence of (m, size, power, r)
        Head size, the extension's expected size per user (0: none) and power of the proxy's rank, uniform
        draws.
    draws, metrics, n_boot, seed, full_boot
        As :func:`cascade_study`; every design uses the draws' seeds ``[seed, k]``.

    Returns
    -------
    pandas.DataFrame
        One row per (design, draw, metric): :func:`cascade_study`'s corrected-protocol columns with
        ``extension`` and ``power``, ``cost``: the pairs the costly model was asked to score (held-out items
        included; counted by a :class:`~sampling_lib.studies.PairCounter` around it) over the sum of N_u,
        full ranking's, and ``repeats``: pairs asked more than once (0).

    Examples
    --------
    >>> t = extension_study(None, "popularity", "itemknn", [(10, 0, 0.0, 20), (5, 5, 1.0, 20)], draws=1,
    ...                     n_boot=50, full_boot=2000, synthetic={"n_users": 300, "n_items": 200})
    >>> t.groupby("extension").cost.mean().round(2).tolist()
    [0.18, 0.18]
    """
    from .evaluation import PairCounter

    draws = check_int(draws, "draws", low=1)
    parsed = parse_metrics(metrics)
    designs = [(check_int(m, "designs' m", low=0), check_float(e, "designs' size", low=0.0),
                check_float(a, "designs' power", low=0.0), check_int(r, "designs' r", low=0))
               for m, e, a, r in designs]
    setup = _panel_setup(data, population, costly, proxy, parsed, data_rng, full_boot, synthetic)
    train, held, N_u, truth, full_hw, fc, fp, base = setup
    base = {**base, "costly": costly, "proxy": proxy}

    def pairs(u, i):                                    # the costly model asked for pairs, from its rows
        uu, at = np.unique(u, return_inverse=True)
        return np.asarray(fc.score(uu))[at, i]

    rows = []
    for m, e, a, r in designs:
        for k in range(draws):
            counter = PairCounter(pairs, base["N"])
            table = cascade_tables(None, fp.score, train, held, m, r, np.random.default_rng([seed, k]),
                                   extension=(e, a) if e > 0 else None, costly_pairs=counter)
            rows += _corrected_rows(table, N_u, parsed, truth, full_hw, n_boot, seed + k,
                                    {**base, "m": m, "extension": e, "power": a, "r": r, "draw": k,
                                     "cost": counter.pairs / float(N_u.sum()), "repeats": counter.repeats()})
    return pd.DataFrame(rows)


def poisson_indicator_estimate(found_pi, k):
    """The unbiased estimate of 1{Y <= k} from a Poisson sample of a user's tail, given the inclusion
    probabilities ``found_pi`` of the sampled items that beat the held-out item: the sum of the coefficients of
    z^0..z^k of G(z) = prod (1 + (z - 1) / pi_t) (E[G(z)] = z^Y for every set of Y items above, since each
    item above is drawn independently with its pi_t).

    Examples
    --------
    >>> poisson_indicator_estimate([], 2), poisson_indicator_estimate([0.5, 0.5, 0.5], 2)    # 1 - 2^3
    (1.0, -7.0)
    """
    poly = np.array([1.0])
    for p in np.asarray(found_pi, dtype=float):
        poly = np.convolve(poly, [1.0 - 1.0 / p, 1.0 / p])
    return float(poly[:k + 1].sum())


def unbiased_top_k_checks(cases=((12, 3, 2), (30, 5, 4), (300, 19, 9), (5, 5, 2), (40, 40, 9)),
                          pi=(0.9, 0.5, 0.3, 0.7, 0.6), k=2):
    """What a design alone gives for a user's top-K indicator 1{Y <= k} (Y tail items above the held-out item,
    k = K - 1 - x), checked exactly (benchmarks/README.md, "Why a design alone cannot correct a top-K metric").

    * **A uniform sample** of s of T: E[g(c) | Y] is a polynomial of degree <= s in Y for every estimator g of
      the sample's count c, so none is unbiased once T - k > s. For each (T, s, k) in ``cases`` the least-squares
      g over Y = 0..T (the hypergeometric pmf from ``scipy.stats.hypergeom``) is fitted, and ``miss`` is its
      largest error: 0 (up to rounding) only where an unbiased g exists.
    * **A Poisson sample** with inclusion probabilities ``pi``: :func:`poisson_indicator_estimate`'s mean over
      every draw is 1{Y <= k} for every set of items above, and its variance at Y = k + 1 is 1/P - 1 (P the
      product of their pi).

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame)
        ``T, s, k, impossible`` (T - k > s), ``miss``; and per set of items above: ``Y``, ``mean_error`` (|mean
        - 1{Y <= k}|), ``variance``, ``formula`` (1/P - 1 where Y = k + 1, else NaN).

    Examples
    --------
    >>> uni, poi = unbiased_top_k_checks()
    >>> bool((uni.miss[uni.impossible] > 0.05).all()), bool((uni.miss[~uni.impossible] < 1e-8).all())
    (True, True)
    >>> bool(poi.mean_error.max() < 1e-12)
    True
    """
    from itertools import combinations, product

    from scipy.stats import hypergeom

    rows = []
    for T, s, kk in cases:
        T, s, kk = check_int(T, "T", low=1), check_int(s, "s", low=0, high=T), check_int(kk, "k", low=0)
        A = hypergeom(T, np.arange(T + 1)[:, None], s).pmf(np.arange(s + 1)[None, :])
        b = (np.arange(T + 1) <= kk).astype(float)
        g = np.linalg.lstsq(A, b, rcond=None)[0]
        rows.append({"T": T, "s": s, "k": kk, "impossible": T - kk > s, "miss": float(np.abs(A @ g - b).max())})
    pi = np.asarray(pi, dtype=float)
    if pi.ndim != 1 or not np.all((pi > 0) & (pi <= 1)):
        raise ValueError(f"pi must be inclusion probabilities in (0, 1]; got {pi}")
    k = check_int(k, "k", low=0)
    checks = []
    for size in range(pi.size + 1):
        for above in combinations(range(pi.size), size):
            mean = second = 0.0
            for drawn in product((0, 1), repeat=size):
                w = float(np.prod([pi[a] if d else 1 - pi[a] for a, d in zip(above, drawn)]))
                v = poisson_indicator_estimate([pi[a] for a, d in zip(above, drawn) if d], k)
                mean, second = mean + w * v, second + w * v * v
            var = second - mean * mean
            checks.append({"Y": size, "mean_error": abs(mean - (size <= k)), "variance": var,
                           "formula": 1 / np.prod(pi[list(above)]) - 1 if size == k + 1 else np.nan})
    return pd.DataFrame(rows), pd.DataFrame(checks)


def _panel_setup(data, population, costly, proxy, parsed, data_rng, full_boot, synthetic):
    """The fitted population (fitted here from ``data`` when None), its split, N_u, the costly model's
    full-ranking truth and half-width per metric, the two fitted models and the rows' common columns."""
    from ..experiments import global_ranks_from_data

    if population is None:
        population = global_ranks_from_data(data, {costly: PANEL_MODELS[costly], proxy: PANEL_MODELS[proxy]},
                                            rng=data_rng, keep_models=True, max_dense_items=DENSE_ITEMS_MAX,
                                            synthetic=synthetic)
    ranks, N, info = population
    if costly not in ranks or proxy not in info["fitted"]:
        raise ValueError(f"population must hold the costly model {costly!r} and the fitted retriever or proxy "
                         f"{proxy!r}; got {sorted(ranks)}")
    split = info["split"]
    R = ranks[costly]
    truth = _metric_rows(parsed, R).mean(axis=1)
    full_hw = full_ranking_halfwidth(R, parsed, n_boot=full_boot, rng=data_rng)
    base = {"dataset": info["dataset"], "N": N, "M": int(R.size)}
    return (split.train.tocsr(), split.test_items.astype(np.int64), pd.Series(info["n_candidates"]), truth,
            full_hw, info["fitted"][costly], info["fitted"][proxy], base)


def _corrected_rows(table, N_u, parsed, truth, full_hw, n_boot, seed, base):
    """One row per metric of a cascade table corrected by cascade_estimate, beside the full-ranking truth."""
    from ..cascade import cascade_estimate

    e = cascade_estimate(table, N_u, metrics=parsed, n_boot=n_boot, rng=seed).set_index("metric")
    rows = []
    for j, (name, _, _) in enumerate(parsed):
        x = e.loc[name]
        hw = 0.5 * (x.ci_high - x.ci_low)
        rows.append({**base, "metric": name, "truth": truth[j], "naive": x.naive, "naive_error": x.naive - truth[j],
                     "estimate": x.estimate, "ci_low": x.ci_low, "ci_high": x.ci_high,
                     "covered": bool(x.ci_low <= truth[j] <= x.ci_high), "halfwidth": hw,
                     "bound_low": x.bound_low, "bound_high": x.bound_high,
                     "bounds_covered": bool(x.bound_low <= truth[j] <= x.bound_high),
                     "full_halfwidth": full_hw[j], "ratio": hw / full_hw[j],
                     "rel_error": abs(x.estimate - truth[j]) / truth[j] if truth[j] > 0 else np.nan})
    return rows


def bounds_expectation_gap(tails, metrics=("recall@10", "ndcg@10"), *, head=12, above=(0, 1, 4, 9)):
    """:func:`sampling_lib.cascade.cascade_bounds` against every tail rank, exactly.

    For each tail size T in ``tails``, sample size s in {0, 1, 2, 5, T/2, T} (those <= T), x in ``above``
    and metric: over every Y = 0..T tail items above, the largest F(1 + x + Y) - E[high | Y] (the expectation
    over the hypergeometric draw of c, ``scipy.stats.hypergeom``), and the largest low - F(1 + x + Y) over the
    draws c that can happen. Both are <= 0 up to rounding when the bounds hold for any data.

    Returns
    -------
    pandas.DataFrame
        ``T, s, x, metric, deficit, excess, weighted`` (``weighted``: the high bound at c = 0 exceeds the sure
        one, i.e. the design-based bound is in use).

    Examples
    --------
    >>> g = bounds_expectation_gap([5], "recall@3", above=(0,))
    >>> bool((g.deficit <= 1e-12).all() and (g.excess <= 1e-12).all())
    True
    """
    from scipy.stats import hypergeom

    from ..cascade import cascade_bounds
    from ..metrics import metric_matrix

    parsed = parse_metrics(metrics)
    k = max(K for _, _, K in parsed)
    head = check_int(head, "head", low=max(above))
    rows = []
    for T in tails:
        T = check_int(T, "tails", low=1)
        F = np.vstack([metric_matrix(parsed, k), np.zeros((T + max(above) + 2, len(parsed)))])
        for s in sorted({v for v in (0, 1, 2, 5, T // 2, T) if v <= T}):
            c = np.arange(s + 1)
            Y = np.arange(T + 1)
            P = hypergeom.pmf(c[None, :], T, Y[:, None], s)             # (Y, c)
            for x in above:
                lo, hi = cascade_bounds(1 + head + T, head, x, s, c + 1, parsed)
                FY = F[x + Y]                                           # F(1 + x + Y), rows 0-based
                for j, (name, _, _) in enumerate(parsed):
                    excess = np.where(P > 0, lo[None, :, j] - FY[:, j:j + 1], -np.inf).max()
                    rows.append({"T": T, "s": s, "x": x, "metric": name,
                                 "deficit": float((FY[:, j] - P @ hi[:, j]).max()), "excess": float(excess),
                                 "weighted": bool(hi[0, j] > F[x, j] + 1e-12)})
    return pd.DataFrame(rows)


def design_interval_coverage(n_items=20_000, head=20, tail=19, users=2000, draws=20, *,
                             metrics=("recall@10", "ndcg@10"), shape=0.35, n_boot=500, confidence_level=0.95,
                             seed=0, estimate=True):
    """Tail draws of a cascade far below resolution on fixed simulated users: the estimate's interval and the
    design-only interval beside the users' own metric.

    ``users`` users with N_u = ``n_items`` candidates get global ranks R_u = 1 + floor((N - 1) V^(1/shape)),
    V uniform (a Beta(shape, 1) law of R/N: a strong model's ranks), and a head of ``head`` negatives drawn
    at random (x_u head items above: hypergeometric). Each draw samples ``tail`` of the T_u = N - 1 - head
    tail items uniformly (c_u above: hypergeometric given Y_u = R_u - 1 - x_u); the users and their heads stay
    fixed, so the truth is their own mean F(R_u), as full ranking's.

    Returns
    -------
    pandas.DataFrame
        One row per (draw, metric): ``truth, naive, bound_low, bound_high, design_covered`` (from
        :func:`sampling_lib.cascade.cascade_bounds` and :func:`sampling_lib.cascade.design_interval`) and,
        with ``estimate``, ``estimate, ci_low, ci_high, covered, below_resolution``
        (:func:`sampling_lib.estimators.strata_estimate`).

    Examples
    --------
    >>> t = design_interval_coverage(3000, 10, 9, 300, 2, n_boot=50, estimate=False)
    >>> t.shape[0], bool((t.bound_low <= t.bound_high).all())
    (4, True)
    """
    from ..cascade import design_interval
    from ..estimators import strata_estimate

    N = check_int(n_items, "n_items", low=3)
    m = check_int(head, "head", low=0, high=N - 2)
    s = check_int(tail, "tail", low=1, high=N - 1 - m)
    M = check_int(users, "users", low=2)
    parsed = parse_metrics(metrics)
    rng = np.random.default_rng(seed)
    R = 1 + np.floor((N - 1) * rng.random(M) ** (1.0 / shape)).astype(np.int64)
    x = rng.hypergeometric(R - 1, N - R, m)                             # head negatives above, of N - 1
    Y, T = R - 1 - x, N - 1 - m
    truth = _metric_rows(parsed, R).mean(axis=1)
    rows = []
    for k in range(check_int(draws, "draws", low=1)):
        g = np.random.default_rng([seed, k])
        c = g.hypergeometric(Y, T - Y, s)
        cells = (np.full(M, N), np.full(M, m), x, np.full(M, s), c + 1)
        lo, hi = design_interval(*cells, parsed, n_boot=n_boot, rng=g, confidence_level=confidence_level)
        e = strata_estimate(*cells, metrics=metrics, n_boot=n_boot, rng=g, confidence_level=confidence_level) \
            if estimate else None
        for j, (name, _, _) in enumerate(parsed):
            row = {"draw": k, "metric": name, "truth": truth[j], "bound_low": lo[j], "bound_high": hi[j],
                   "design_covered": bool(lo[j] <= truth[j] <= hi[j])}
            if e is not None:
                r = e.iloc[j]
                row.update(naive=r.naive, estimate=r.estimate, ci_low=r.ci_low, ci_high=r.ci_high,
                           covered=bool(r.ci_low <= truth[j] <= r.ci_high), below_resolution=bool(r.below_resolution))
            rows.append(row)
    return pd.DataFrame(rows)
