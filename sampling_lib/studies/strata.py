"""The stratified design's tail law, checked stage by stage through :func:`sampling_lib.evaluate` itself.

:func:`strata_ladder_simulation` builds users whose global rank R and head count x are set by
construction, runs the stratified evaluation on them (the proxy's head, then the ladder within the
tail, with the library's seeded nested orders, :mod:`sampling_lib.stratarun`), and counts each final tail
cell (s, r) beside its probability under :func:`sampling_lib.kernels.strata_ladder_law` (notebook 14).
:func:`proxy_frontier` sets stratified designs beside the planned uniform ladder on the same draws
(notebook 14, ``benchmarks/bench_proxy.py``). :func:`head_ladder_check` runs one evaluation with and without
the head ladder and recomputes the ladder's rungs from the scores, outside the run (notebook 14).
:func:`tail_concentration` measures where a proxy puts the tail items that beat the held-out item
(``benchmarks/bench_proxy.py --parts concentration``), and :func:`tail_inclusion` how much more often a tail
sampled by the proxy's rank would draw them, by how many the user's tail holds (``--parts inclusion``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import check_float, check_int
from ..kernels import next_tail_size

__all__ = ["strata_ladder_simulation", "pool_rare_cells", "proxy_frontier", "strata_tail_cells",
           "strata_consistency", "head_ladder_check", "tail_concentration", "tail_inclusion"]


def strata_ladder_simulation(n_items, head, above, R, *, tail_n, tail_n_max, users, seed=0,
                             held_out_position="last"):
    """Final tail cells of ``users`` simulated users per global rank in ``R``, by
    ``evaluate(score, ..., proxy=)``, with their probabilities under the ladder's law.

    Every user has the same ``n_items`` candidates (no history): its held-out item is the last catalogue
    item (or the first, ``held_out_position``), the proxy ranks the items in catalogue order, so the head
    is the first m negatives (``head`` = m) and the tail the next T = N - 1 - m. The costly score puts the first ``above`` head items and the first
    R - 1 - x tail items above the held-out item (R between x + 1 and x + T + 1), everything else below;
    the tail's draws come from the evaluation's own seeded per-user orders, so which tail items are above
    does not matter, and the users are independent replicates. The metric's cut-off is above x, so every
    user gets a tail sample.

    Parameters
    ----------
    n_items, head, above : int
        N, m and x.
    R : sequence of int
        The global ranks simulated (each by ``users`` users).
    tail_n, tail_n_max : int
        As :func:`sampling_lib.evaluate` with ``proxy``.
    users : int
        Users per rank.
    seed : int
        The evaluation's seed.
    held_out_position : {"last", "first"}
        Where the proxy ranks the held-out item: last, or first (then the head is items 1..m). The head is
        defined on the negatives, so the law does not depend on it (notebook 14 checks that).

    Returns
    -------
    pandas.DataFrame
        One row per (R, possible final cell): ``R, tail_size, tail_rank, count`` (simulated users),
        ``users``, ``probability`` (the law), ``expected`` (users x probability) and ``se``
        (the binomial standard error of the count, sqrt(users p (1 - p))).

    Examples
    --------
    >>> t = strata_ladder_simulation(30, 4, 1, [3, 10], tail_n=2, tail_n_max=8, users=200, seed=1)
    >>> t.groupby("R")["count"].sum().tolist()
    [200, 200]
    """
    from ..evaluation import evaluate
    from ..kernels import strata_ladder_law

    N = check_int(n_items, "n_items", low=3)
    m = check_int(head, "head", low=0, high=N - 2)
    x = check_int(above, "above", low=0, high=m)
    users = check_int(users, "users", low=1)
    T = N - 1 - m
    Rs = [check_int(r, "R", low=x + 1, high=x + T + 1) for r in R]
    M = users * len(Rs)
    if held_out_position not in ("last", "first"):
        raise ValueError(f"held_out_position must be 'last' or 'first'; got {held_out_position!r}")
    R_u = np.repeat(np.asarray(Rs, dtype=np.int64), users)
    G_u = R_u - 1 - x                                 # tail items above, per user
    held = N - 1 if held_out_position == "last" else 0
    shift = 0 if held_out_position == "last" else 1   # the negatives' places in the proxy's order

    def score(u, items):
        u, k = np.asarray(u), np.asarray(items) - shift
        up = np.where(k < m, k < x, (k - m) < G_u[u])
        return np.where(np.asarray(items) == held, 0.0, np.where(up, 1.0, -1.0))

    proxy = -np.arange(N, dtype=float)                # item 0 first
    res = evaluate(score, pd.Series(np.full(M, held)), N, n=2, proxy=proxy, head=m, tail_n=tail_n, tail_n_max=tail_n_max,
                   metrics=[f"recall@{x + 1}"], n_boot=0, seed=seed, progress=False)
    ranks = res.ranks
    if not ((ranks["head"] == m).all() and (ranks["head_above"] == x).all()):
        raise AssertionError("the simulated heads are not the constructed ones")      # pragma: no cover
    got = pd.DataFrame({"R": R_u, "tail_size": ranks["tail_size"].to_numpy(),
                        "tail_rank": ranks["tail_rank"].to_numpy()})
    counts = got.value_counts().rename("count").reset_index()
    s, r, P = strata_ladder_law(Rs, N, m, x, tail_n, tail_n_max)
    law = pd.DataFrame({"R": np.repeat(Rs, s.size), "tail_size": np.tile(s, len(Rs)), "tail_rank": np.tile(r, len(Rs)),
                        "probability": P.ravel()})
    out = law.merge(counts, on=["R", "tail_size", "tail_rank"], how="outer")
    out["count"] = out["count"].fillna(0).astype(np.int64)
    out["probability"] = out["probability"].fillna(0.0).clip(0.0, 1.0)     # 1 + 6e-14 from the logs: 1
    out["users"] = users
    out["expected"] = users * out["probability"]
    out["se"] = np.sqrt(users * out["probability"] * (1.0 - out["probability"]))
    return out.sort_values(["R", "tail_size", "tail_rank"], ignore_index=True)


def proxy_frontier(population, costly, proxies, *, heads, tail_n, tail_n_max, draws=3, n=100,
                   metrics=("recall@10", "ndcg@10"), target_ratio=1.3, n_boot=1000, full_boot=100_000, seed=0):
    """Stratified designs beside the planned uniform ladder, on the same draws (:func:`evaluation_study`).

    Parameters
    ----------
    population : tuple
        ``global_ranks_from_data(..., keep_models=True)``'s result holding the ``costly`` and ``proxies``
        models.
    costly, proxies : sequence of str
        The models evaluated, and those used as proxy rankers (never evaluated, their scoring not counted);
        ``"random"`` is a useless proxy (uniform random scores per item).
    heads : sequence of int or None
        Head sizes tried with every proxy (None: no head given, so a planned design's pilot climbs; not tried
        with a fixed ``tail_n_max``); ``tail_n`` / ``tail_n_max`` the tail ladder's first and largest
        sample. ``tail_n_max`` may be a list (each tried); None is the planned design (the top sized for
        ``target_ratio`` from a pilot, with the uniform ladder as the fall-back,
        :func:`sampling_lib.design.plan_strata`).
    draws, n, metrics, target_ratio, n_boot, full_boot, seed
        As :func:`evaluation_study` (the uniform ladder plans for ``target_ratio`` from a first stage of
        ``n``).

    Returns
    -------
    table : pandas.DataFrame
        :func:`evaluation_study`'s rows with ``design``, ``proxy``, ``head`` and ``uniform_price_ratio`` (a
        planned design's pilot's price of the uniform ladder over the cost the planned uniform ladder
        realized on the same draw, both as shares of full ranking; NaN elsewhere).
    summary : pandas.DataFrame
        Per (dataset, model, design, proxy, metric): draws, mean cost share, mean and largest realized
        precision ratio, coverage, mean relative error, the share of draws in which the proxy paid, the
        mean pilot head (where it climbed, the head reached), the mean planned head and the mean
        ``uniform_price_ratio`` (planned designs).
    """
    from .evaluation import evaluation_study

    from .evaluation import RANDOM_PROXY

    ranks, N, info = population
    tops = list(tail_n_max) if isinstance(tail_n_max, (list, tuple)) else [tail_n_max]
    missing = [m for m in list(costly) + [p for p in proxies if p != RANDOM_PROXY] if m not in ranks]
    if missing:
        raise ValueError(f"population holds the models {list(ranks)}; missing {missing}")
    common = dict(draws=draws, n=n, metrics=metrics, n_boot=n_boot, full_boot=full_boot, seed=seed)
    only = ({m: ranks[m] for m in costly}, N, info)
    rows = [evaluation_study(population=only, target_ratio=target_ratio, **common).assign(
        design=f"uniform ladder (target {target_ratio})", proxy="-", head=0, planned=False)]
    for proxy in proxies:
        pop = ({m: ranks[m] for m in list(costly) + ([] if proxy == RANDOM_PROXY else [proxy])}, N, info)
        for h in heads:
            for t_max in tops:
                if h is None and t_max is not None:     # no head, a fixed design: head n (tried if in heads)
                    continue
                s = evaluation_study(population=pop, proxy=proxy, head=h, tail_n=tail_n, tail_n_max=t_max,
                                     target_ratio=None if t_max is not None else target_ratio, **common)
                top = f"{t_max}" if t_max is not None else f"planned (target {target_ratio})"
                what = "climbing head" if h is None else f"head {h}"
                rows.append(s.assign(design=f"{what} + tail {tail_n}..{top}", head=h if h is not None else np.nan,
                                     planned=t_max is None))
    table = pd.concat(rows, ignore_index=True)
    # a planned design's pilot priced the uniform ladder: against what the ladder cost on the same draw
    ladder = rows[0].set_index(["dataset", "model", "draw", "metric"]).cost_share
    key = pd.MultiIndex.from_frame(table[["dataset", "model", "draw", "metric"]])
    table["uniform_price_ratio"] = table.uniform_predicted_share.to_numpy() / ladder.reindex(key).to_numpy()
    summary = (table.groupby(["dataset", "model", "design", "proxy", "metric"], sort=False)
               .agg(draws=("draw", "nunique"), cost_share=("cost_share", "mean"), ratio=("ratio", "mean"),
                    ratio_max=("ratio", "max"), coverage=("covered", "mean"), rel_error=("rel_error", "mean"),
                    proxy_paid=("proxy_paid", "mean"), pilot_head=("pilot_head", "mean"),
                    planned_head=("planned_head", "mean"),
                    uniform_price_ratio=("uniform_price_ratio", "mean"), planned=("planned", "first"))
               .reset_index())
    return table, summary


def pool_rare_cells(table, min_expected=5.0):
    """The cells of :func:`strata_ladder_simulation` to z-check: each cell expected at least ``min_expected``
    users on its own, the others pooled per rank (their counts and probabilities summed).

    Returns
    -------
    pandas.DataFrame
        ``R, cells, count, expected, se`` (``cells``: how many cells the row holds; se the binomial
        standard error of the count).

    Examples
    --------
    >>> t = pd.DataFrame({"R": [2, 2, 2], "count": [90, 6, 4], "probability": [0.92, 0.04, 0.04], "users": 100})
    >>> pool_rare_cells(t.assign(expected=t.probability * 100))[["cells", "count", "expected"]].round(6).values.tolist()
    [[1.0, 90.0, 92.0], [2.0, 10.0, 8.0]]
    """
    big = table["expected"] >= min_expected
    own = table[big].assign(cells=1)[["R", "cells", "count", "probability", "users"]]
    rest = (table[~big].groupby("R", as_index=False)
            .agg(cells=("count", "size"), count=("count", "sum"), probability=("probability", "sum"),
                 users=("users", "first")))
    out = pd.concat([own, rest], ignore_index=True)
    p = out["probability"].clip(0.0, 1.0)
    out["expected"] = out["users"] * p
    out["se"] = np.sqrt(out["users"] * p * (1.0 - p))
    return out[["R", "cells", "count", "expected", "se"]]


def strata_tail_cells(R, n_items, head, *, tail_n, tail_n_max, rng):
    """Stratified cells of users with global ranks R under a random head and the tail ladder, simulated.

    Each user's head is m = ``head`` of its N - 1 negatives drawn at random (a proxy that knows nothing), so
    x_u ~ Hypergeometric(R_u - 1 above, N - R_u below, m); its tail of T = N - 1 - m negatives holds
    R_u - 1 - x_u above the held-out item. The tail ladder (:class:`sampling_lib.stratarun.StrataRun`'s
    rule) draws s_1 = ``tail_n`` of them without replacement, and while none ranks above, draws more up
    to twice the sample, until ``tail_n_max`` (or T): nested hypergeometric draws, independent of
    :func:`sampling_lib.kernels.strata_ladder_law`, which notebook 14 checks against the evaluation itself.

    Parameters
    ----------
    R : array_like of int in 1..N
    n_items, head : int
        N (the held-out item included) and m.
    tail_n, tail_n_max : int
        The tail ladder's first sample and its largest.
    rng : numpy.random.Generator

    Returns
    -------
    above, tail_sizes, ranks : ndarray of int64
        x_u, s_u and the sampled tail rank r_u = 1 + (sampled tail items above), the arguments of
        :func:`sampling_lib.estimators.strata_estimate` with N_u = N and m_u = m.

    Examples
    --------
    >>> x, s, r = strata_tail_cells([1, 2, 400], 400, 10, tail_n=5, tail_n_max=40, rng=np.random.default_rng(0))
    >>> s.tolist(), r.tolist()          # rank 1: nothing above, so the ladder reaches its top
    ([40, 40, 5], [1, 1, 6])
    """
    R = np.asarray(R, dtype=np.int64)
    N, m = check_int(n_items, "n_items", low=2), check_int(head, "head", low=0, high=n_items - 1)
    T = N - 1 - m
    x = rng.hypergeometric(R - 1, N - R, m) if m else np.zeros(R.size, dtype=np.int64)
    good = R - 1 - x
    top = min(check_int(tail_n_max, "tail_n_max", low=1), T)
    s = np.full(R.size, min(check_int(tail_n, "tail_n", low=1), T), dtype=np.int64)
    above = rng.hypergeometric(good, T - good, s)
    while True:
        go = np.flatnonzero((above == 0) & (s < top))
        if go.size == 0:
            return x.astype(np.int64), s, 1 + above.astype(np.int64)
        new = next_tail_size(s[go], top, T)
        above[go] += rng.hypergeometric(good[go], T - good[go] - s[go], new - s[go])
        s[go] = new


def strata_consistency(pmf, head, sizes, *, tail_n, tail_n_max, replicates, metrics=("recall@10", "ndcg@10"),
                       seed=0):
    """The stratified estimator's error against the users' own truth, at several numbers of users.

    For each M in ``sizes`` and each replicate: M global ranks drawn from ``pmf``
    (:func:`sampling_lib.rankdist.draw_global_ranks`), their cells under a random head and the tail ladder
    (:func:`strata_tail_cells`), and :func:`sampling_lib.estimators.strata_estimate` (no bootstrap)
    against the mean of F(R_u) over the same users. A consistent estimator's error falls like
    1 / sqrt(M); a bias that does not vanish keeps it (notebook 14's claim).

    Parameters
    ----------
    pmf : array_like, shape (N,)
        The rank distribution P(R), R = 1..N (every user has the N candidates).
    head : int
        Head negatives m.
    sizes : sequence of int
        Numbers of users M.
    tail_n, tail_n_max : int
    replicates : int
    metrics : sequence of str
    seed : int
        Replicate k at size M draws from ``default_rng([seed, M, k])``.

    Returns
    -------
    pandas.DataFrame
        One row per (M, replicate, metric): ``estimate``, ``truth``, ``error`` and ``cost``, the mean
        number of items the costly model scored per user (1 + m + s_u).

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> t = strata_consistency(synthetic_models(500)["beta_a0.35"], 20, [200], tail_n=20, tail_n_max=160,
    ...                        replicates=2, metrics=["recall@10"])
    >>> t.columns.tolist(), len(t)
    (['M', 'replicate', 'metric', 'estimate', 'truth', 'error', 'cost'], 2)
    """
    from ..estimators import strata_estimate
    from ..metrics import metric_values
    from ..rankdist import draw_global_ranks

    pmf = np.asarray(pmf, dtype=float)
    N = pmf.size
    metrics = list(metrics)
    F = {met: metric_values(met, N) for met in metrics}
    rows = []
    for M in sizes:
        M = check_int(M, "sizes", low=1)
        for k in range(check_int(replicates, "replicates", low=1)):
            rng = np.random.default_rng([seed, M, k])
            R = draw_global_ranks(pmf, M, rng=rng)
            x, s, r = strata_tail_cells(R, N, head, tail_n=tail_n, tail_n_max=tail_n_max, rng=rng)
            est = strata_estimate(np.full(M, N), np.full(M, head), x, s, r, metrics=metrics, n_boot=0)
            for met, e in zip(est["metric"], est["estimate"]):
                t = float(F[met][R - 1].mean())
                rows.append({"M": M, "replicate": k, "metric": met, "estimate": float(e), "truth": t,
                             "error": float(e) - t, "cost": 1 + head + float(s.mean())})
    return pd.DataFrame(rows)


def _check_population(population, costly, proxy):
    """A fitted population's parts for one costly model and one proxy: N, info, M, each user's history, the
    held-out items, the costly model's pair scorer and the proxy as ``evaluate`` takes it."""
    from ..recommenders import pair_scorer
    from .evaluation import _proxy_of

    ranks, N, info = population
    for label in (costly, proxy):
        if label not in info["fitted"]:
            raise ValueError(f"{label!r} is not one of the fitted models {sorted(info['fitted'])}")
    split = info["split"]
    M = int(split.n_users)
    train = split.train.tocsr()
    exclude = {u: train.indices[train.indptr[u]:train.indptr[u + 1]] for u in range(M)}
    held = split.test_items.astype(np.int64)
    return N, info, M, exclude, held, pair_scorer(info["fitted"][costly]), _proxy_of(info["fitted"][proxy], N)


def head_ladder_check(population, costly, proxy, *, head, tail_n, tail_n_max, n=100,
                      metrics=("recall@10", "ndcg@10"), n_boot=200, seed=0):
    """One stratified evaluation of a fitted model with the whole head and with the head ladder (the same seed),
    and the ladder's pairs recomputed outside the run.

    Parameters
    ----------
    population : tuple
        ``global_ranks_from_data(..., keep_models=True)``'s result.
    costly, proxy : str
        Labels of two of its fitted models: the one evaluated (scored through a
        :class:`~sampling_lib.studies.PairCounter`) and the proxy ranker (its scoring not counted).
    head, tail_n, tail_n_max, n, metrics, n_boot, seed
        As :func:`sampling_lib.evaluate` (a fixed design: ``tail_n_max`` given).

    Returns
    -------
    pandas.DataFrame
        One row: ``model``, ``proxy``, ``users``, ``pairs_whole`` and ``pairs_ladder`` (counted by the wrappers),
        ``pairs_recomputed`` (the held-out items, the rungs the rule gives on the whole run's head items
        scored again by the model, :func:`sampling_lib.design.head_ladder_cost`, and the ladder run's tails),
        ``rungs_agree`` (the share of users whose head items scored equal that recomputation),
        ``table_max_diff`` (the largest absolute difference between the two tables' estimate, ci_low, ci_high
        and naive columns), ``cost_share_whole`` and ``cost_share_ladder`` (pairs / sum of N_u).
    """
    from ..design import head_ladder_cost
    from ..evaluation import evaluate
    from ..metrics import parse_metrics
    from .evaluation import PairCounter

    N, info, M, exclude, held, f, prox = _check_population(population, costly, proxy)
    kw = dict(exclude=exclude, n=n, metrics=metrics, proxy=prox, head=head,
              tail_n=tail_n, tail_n_max=tail_n_max, n_boot=n_boot, seed=seed, progress=False)
    res, pairs = {}, {}
    for ladder in (False, True):
        counter = PairCounter(f, N)
        res[ladder] = evaluate({costly: counter}, dict(enumerate(held)), N, head_ladder=ladder, **kw)
        pairs[ladder] = counter.pairs
    whole, lad = res[False], res[True]
    # the whole run's head items (users in order, each head in the proxy's order), scored again here
    neg = whole.negatives[0]
    u, it = neg.user.to_numpy(np.int64), neg.item.to_numpy(np.int64)
    flags = np.asarray(f(u, it), dtype=float) >= np.asarray(f(u, held[u]), dtype=float)   # pessimistic ties
    heads = np.bincount(u, minlength=M)
    k_max = max(K for _, _, K in parse_metrics(metrics))
    rungs = head_ladder_cost({costly: flags}, heads, head, k_max)
    r = lad.ranks.set_index("user").loc[np.arange(M)]
    cols = ["estimate", "ci_low", "ci_high", "naive"]
    diff = np.nanmax(np.abs(whole.table[cols].to_numpy(float) - lad.table[cols].to_numpy(float)))
    N_sum = float(np.asarray(info["n_candidates"]).sum())
    return pd.DataFrame([{
        "model": costly, "proxy": proxy, "users": M, "pairs_whole": pairs[False], "pairs_ladder": pairs[True],
        "pairs_recomputed": int(M + rungs.sum() + r.tail_size.sum()),
        "rungs_agree": float(np.mean(r.head_scored.to_numpy() == rungs)), "table_max_diff": float(diff),
        "cost_share_whole": pairs[False] / N_sum, "cost_share_ladder": pairs[True] / N_sum}])


def head_climb_check(population, costly, proxy, *, tail_n, n=100, metrics=("recall@10", "ndcg@10"),
                     target_ratio=1.3, n_boot=200, seed=0):
    """A planned stratified evaluation whose pilot's head climbs (no ``head`` given), the same evaluation given
    the head the climb reached and given ``head=n`` (no climb), and the climb recomputed outside the run.

    Parameters
    ----------
    population : tuple
        ``global_ranks_from_data(..., keep_models=True)``'s result.
    costly, proxy : str
        Labels of two of its fitted models: the one evaluated (scored through a
        :class:`~sampling_lib.studies.PairCounter`) and the proxy ranker (its scoring not counted).
    tail_n, n, metrics, target_ratio, n_boot, seed
        As :func:`sampling_lib.evaluate`.

    Returns
    -------
    pandas.DataFrame
        One row: ``model``, ``proxy``, ``pilot_users``, ``head_climbed`` (the pilot's head),
        ``head_recomputed`` (the rule of :func:`sampling_lib.design.head_climb_pays` applied to each pilot user's
        candidates ordered by the proxy here, by item id among ties, and the costly model's scores: a user is
        settled at the first rung holding ``k_max`` items it ranks at or above the held-out item),
        ``planned_head`` (the other users'; NaN when they fell back or the pilot was every user),
        ``table_max_diff`` and ``ranks_equal`` (the climbed evaluation against the one given its head: the
        largest absolute difference of estimate, ci_low, ci_high and naive; the cells per user),
        ``pairs_climbed`` and ``pairs_given`` (counted by the wrappers), ``cost_share_climbed`` and
        ``cost_share_n`` (pairs / sum of N_u, climbed and with ``head=n``), and the largest precision ratio
        of each, ``ratio_climbed`` and ``ratio_n``.
    """
    from ..design import head_climb_pays, head_climb_top, head_rungs
    from ..evaluation import evaluate
    from ..metrics import parse_metrics
    from .evaluation import PairCounter

    N, info, M, exclude, held, f, prox = _check_population(population, costly, proxy)
    kw = dict(exclude=exclude, n=n, metrics=metrics, proxy=prox, tail_n=tail_n, target_ratio=target_ratio,
              n_boot=n_boot, seed=seed, progress=False)
    res, pairs = {}, {}
    for key in ("climbed", "given", "n"):
        head = None if key == "climbed" else n if key == "n" else int(_pilot(res["climbed"]).config["head"])
        counter = PairCounter(f, N)
        res[key] = evaluate({costly: counter}, dict(enumerate(held)), N, head=head, **kw)
        pairs[key] = counter.pairs
    a, b = res["climbed"], res["given"]
    pilot = _pilot(a)
    users = np.unique(pilot.ranks.user.to_numpy(np.int64))
    # each pilot user's settling position: the proxy's order of its candidates (ties by item id), the k_max-th
    # item the costly model ranks at or above the held-out one (pessimistic ties); C_u its candidates
    k_max = max(K for _, _, K in parse_metrics(metrics))
    k_min = min(K for _, _, K in parse_metrics(metrics))
    settle, C = np.full(users.size, np.iinfo(np.int64).max), np.zeros(users.size, np.int64)
    items = np.arange(N)
    for j, u in enumerate(users):
        cand = np.setdiff1d(items, np.r_[exclude[u], held[u]])
        C[j] = cand.size
        p = np.asarray(prox[cand] if isinstance(prox, np.ndarray) else prox(np.full(cand.size, u), cand), dtype=float)
        order = cand[np.lexsort((cand, -p))]
        above = np.asarray(f(np.full(order.size, u), order), dtype=float) >= float(f([u], [held[u]])[0])
        hits = np.flatnonzero(above)
        if hits.size >= k_max:
            settle[j] = hits[k_max - 1] + 1
    rungs, prev = head_rungs(head_climb_top(n, C, k_min), k_max), 0
    for want in rungs:                                      # from the first rung, while the last one paid
        live = (settle > prev) & (C > prev)                 # the users this rung scores
        at = np.minimum(want, C)
        done = live & (settle <= at)
        left = live & ~done & (C > want)
        if not left.any() or want == rungs[-1] or not head_climb_pays(int((at - prev)[live].sum()), (C - at)[done],
                                                                       k_min):
            break
        prev = want
    cols = ["estimate", "ci_low", "ci_high", "naive"]
    diff = np.nanmax(np.abs(a.table[cols].to_numpy(float) - b.table[cols].to_numpy(float)))
    N_sum = float(np.asarray(info["n_candidates"]).sum())
    return pd.DataFrame([{
        "model": costly, "proxy": proxy, "pilot_users": int(users.size), "head_climbed": int(pilot.config["head"]),
        "head_recomputed": int(want), "planned_head": float(a.config.get("planned_head") or np.nan),
        "table_max_diff": float(diff), "ranks_equal": bool(a.ranks.equals(b.ranks)),
        "pairs_climbed": pairs["climbed"], "pairs_given": pairs["given"],
        "cost_share_climbed": pairs["climbed"] / N_sum, "cost_share_n": pairs["n"] / N_sum,
        "ratio_climbed": float(a.table.precision_ratio.max()), "ratio_n": float(res["n"].table.precision_ratio.max())}])


def _pilot(res):
    """A planned stratified evaluation's pilot part (the result itself when the pilot was every user)."""
    return res.parts["pilot"] if res.parts is not None and "pilot" in res.parts else res


#: The leading shares of the tail :func:`tail_concentration` reports by default.
CONCENTRATION_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.25, 0.5)


def tail_concentration(population, costly, proxy, *, head, users=1500, k_max=10,
                       fractions=CONCENTRATION_FRACTIONS, seed=0):
    """Where a proxy puts the tail items that beat the held-out item: the share of them in the tail's first
    ``fractions`` (in the proxy's order), for the users the head does not settle.

    For ``users`` test users drawn from ``seed``, every candidate (the items outside the user's history,
    held-out item aside) is scored by the costly model and by the proxy, the candidates are ordered by the
    proxy (descending; ties by item id, as :func:`sampling_lib.proxy.heads_and_edge_ties`), the first
    ``head`` are the head, and an item beats the held-out item when the costly model scores it at or
    above (pessimistic ties). Users with x >= ``k_max`` head items above are settled by the head and left
    out, as are users whose candidates all fit in the head (no tail). Under a proxy that knows nothing the
    items above are spread uniformly over the tail, so the share in the first fraction f is f on average;
    the excess is what sampling the tail unequally (more often near the head, statAP / infAP's known
    inclusion probabilities) could exploit.

    Parameters
    ----------
    population : tuple
        ``global_ranks_from_data(..., keep_models=True)``'s result.
    costly, proxy : str
        Labels of two of its fitted models.
    head, users, k_max : int
        The head size, the users drawn (all of them if fewer) and the largest cut-off K.
    fractions : sequence of float in (0, 1]
    seed : int

    Returns
    -------
    pandas.DataFrame
        One row per fraction: ``fraction``, ``share`` (tail items above in the tail's first ceil(f T_u)
        positions, over all tail items above, pooled over the unsettled users), ``uniform_share`` (the same
        share if each user's items above were spread uniformly over its tail: sum ceil(f T_u) / T_u
        weighted by the users' items above), ``items_above`` (pooled), ``users`` (unsettled), ``drawn``
        (users drawn), ``head``, ``model``, ``proxy``.
    """
    f = np.asarray(fractions, dtype=float)
    if f.ndim != 1 or not f.size or (f <= 0).any() or (f > 1).any():
        raise ValueError(f"fractions must be a non-empty 1-D sequence in (0, 1]; got {fractions!r}")
    inside = np.zeros(f.size)
    uniform = np.zeros(f.size)
    total, unsettled = 0, 0
    tails, drawn = _unsettled_tails(population, costly, proxy, head, users, k_max, seed)
    for T, pos in tails:
        unsettled += 1
        first = np.ceil(f * T)
        inside += (pos[None, :] < first[:, None]).sum(axis=1)
        uniform += pos.size * first / T
        total += pos.size
    with np.errstate(invalid="ignore", divide="ignore"):
        share, uni = inside / total, uniform / total
    return pd.DataFrame({"fraction": f, "share": share, "uniform_share": uni, "items_above": total,
                         "users": unsettled, "drawn": drawn, "head": head, "model": costly, "proxy": proxy})


def _unsettled_tails(population, costly, proxy, head, users, k_max, seed):
    """The tails of the users a head does not settle (:func:`tail_concentration`'s rule): a generator of
    (T_u, positions of the tail items above, 0-based in the proxy's order) and the number of users drawn."""
    from ..recommenders import pair_scorer

    ranks, N, info = population
    for label in (costly, proxy):
        if label not in info["fitted"]:
            raise ValueError(f"{label!r} is not one of the fitted models {sorted(info['fitted'])}")
    head = check_int(head, "head", low=0)
    k_max = check_int(k_max, "k_max", low=1)
    split = info["split"]
    M = int(split.n_users)
    train = split.train.tocsr()
    held = split.test_items.astype(np.int64)
    pick = np.sort(np.random.default_rng(seed).permutation(M)[:check_int(users, "users", low=1)])
    score, prox = pair_scorer(info["fitted"][costly]), pair_scorer(info["fitted"][proxy])

    def tails():
        for u in pick:
            cand = np.setdiff1d(np.arange(N), np.r_[train.indices[train.indptr[u]:train.indptr[u + 1]], held[u]])
            if cand.size <= head:
                continue
            uu = np.full(cand.size, u)
            order = np.lexsort((cand, -np.asarray(prox(uu, cand), dtype=float)))
            s = np.asarray(score(uu, cand), dtype=float)[order]
            above = s >= float(np.asarray(score(np.array([u]), np.array([held[u]])), dtype=float)[0])
            if int(above[:head].sum()) >= k_max:
                continue
            yield cand.size - head, np.flatnonzero(above[head:])
    return tails(), int(pick.size)


#: The bins of tail items above (Y_u) that :func:`tail_inclusion` reports: [1, 3], [4, 10], ..., [101, inf).
INCLUSION_BINS = (1, 4, 11, 31, 101)


def tail_inclusion(population, costly, proxy, *, head, tail_sizes=(50, 200), powers=(0.5, 1.0), users=1500,
                   k_max=10, bins=INCLUSION_BINS, seed=0):
    """What a tail sampled by the proxy's rank would do for the items above: the chance that each is drawn,
    over a uniform tail's, by how many items above the user's tail holds.

    The users and tails are :func:`tail_concentration`'s (drawn from ``seed``; those the head settles, with
    ``k_max`` or more head items above, and those with no tail left out). For a tail of T_u items with Y_u >= 1
    above the held-out item at proxy positions t, and inclusion probabilities pi_t of
    :func:`sampling_lib.proxy.rank_power_inclusion` (expected size s, a power of the proxy's rank), the
    user's **gain** is the mean pi_t of its items above over the uniform tail's s / T_u: how many times more
    often a sampled item shows that the held-out item is beaten, the chance a sampled tail pays for (the
    uniform ladder climbs until it shows it). Users with s >= T_u are left out of that tail size's rows.

    A model of where the items above lie that every user shares (one curve of the proxy's positions, as the
    rank-mass curve of :mod:`sampling_lib.popularity`) needs the gain not to depend on Y_u; the rows by bin
    show whether it does, and ``pooled_gain`` is what such a curve would fit (the items above pooled, so
    users with many weigh most).

    Parameters
    ----------
    population, costly, proxy, head
        As :func:`tail_concentration` (``head`` >= 0).
    tail_sizes : sequence of int >= 1
        Expected tail sample sizes s.
    powers : sequence of float >= 0
        Powers of the proxy's rank (0: the uniform tail, gain 1).
    users, k_max, seed : int
        As :func:`tail_concentration`.
    bins : sequence of int
        Increasing left edges of the bins of Y_u (the first >= 1; the last bin is open).

    Returns
    -------
    pandas.DataFrame
        One row per (tail_size, power, bin) and one per (tail_size, power) over every bin (``bin`` "all"):
        ``users``, ``items_above``, ``inclusion`` (the users' mean pi_t of their items above, averaged over users),
        ``uniform`` (s / T_u averaged), ``gain`` (the users' gains averaged), ``top_gain`` (the gain if the
        tail's first s positions were taken with certainty and no other: the share of the items above there
        times T_u / s, averaged; not a design, since the rest could not be drawn), ``pooled_gain`` (per
        (tail_size, power): the pi_t of every item above pooled over the users, over the same pooling of
        s / T_u), ``tail_size``, ``power``, ``head``, ``model``, ``proxy``.
    """
    from ..proxy import rank_power_inclusion

    sizes = [check_int(v, "tail_sizes", low=1) for v in tail_sizes]
    powers = [check_float(v, "powers", low=0.0) for v in powers]
    edges = np.asarray(bins, dtype=np.int64)
    if edges.ndim != 1 or not edges.size or edges[0] < 1 or np.any(np.diff(edges) <= 0):
        raise ValueError(f"bins must be increasing left edges, the first >= 1; got {bins!r}")
    labels = [f"{a}-{b - 1}" for a, b in zip(edges[:-1], edges[1:])] + [f">={edges[-1]}"]
    rows, pooled = [], {}
    tails, _ = _unsettled_tails(population, costly, proxy, head, users, k_max, seed)
    for T, pos in tails:
        if pos.size < edges[0]:
            continue
        b = int(np.searchsorted(edges, pos.size, side="right")) - 1
        for s in sizes:
            if s >= T:
                continue
            top = float(np.mean(pos < s)) * T / s
            for a in powers:
                pi = rank_power_inclusion(T, s, a)[pos]          # O(T) per user: no cache of T-long arrays
                rows.append((s, a, b, pos.size, pi.mean(), s / T, pi.mean() * T / s, top))
                num, den = pooled.get((s, a), (0.0, 0.0))
                pooled[(s, a)] = (num + pi.sum(), den + pos.size * s / T)
    cols = ["tail_size", "power", "b", "items_above", "inclusion", "uniform", "gain", "top_gain"]
    per = pd.DataFrame(rows, columns=cols)
    out = []
    for (s, a), g in per.groupby(["tail_size", "power"], sort=True):
        for b, gg in list(g.groupby("b", sort=True)) + [(None, g)]:
            out.append({"tail_size": s, "power": a, "bin": "all" if b is None else labels[int(b)], "users": len(gg),
                        "items_above": int(gg.items_above.sum()), "inclusion": gg.inclusion.mean(),
                        "uniform": gg.uniform.mean(), "gain": gg.gain.mean(), "top_gain": gg.top_gain.mean(),
                        "pooled_gain": pooled[(s, a)][0] / pooled[(s, a)][1]})
    names = ["tail_size", "power", "bin", "users", "items_above", "inclusion", "uniform", "gain", "top_gain",
             "pooled_gain"]
    return pd.DataFrame(out, columns=names).assign(head=head, model=costly, proxy=proxy)
