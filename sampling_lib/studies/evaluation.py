"""The one-call evaluation against full ranking on real recommenders (notebook 13, benchmarks/bench_evaluate.py).

Re-exported by :mod:`sampling_lib.studies`.

:func:`evaluation_study` fits real recommenders on a leave-one-out split (the one data-to-ranks pipeline,
:func:`sampling_lib.experiments.global_ranks_from_data`), ranks every test user's held-out item among its
N_u non-history items (the truth), and runs :func:`sampling_lib.evaluate` on the same users with the same
models as scorers (:func:`sampling_lib.recommenders.pair_scorer`), several times with different seeds. Each
scorer is wrapped by a counter of this module's own, so the pairs scored are counted outside the library's
bookkeeping. Every row sets the estimate beside full ranking: the truth, full ranking's own interval, the
realized precision ratio, the cost.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .._arrays import unique_ints
from .._validation import check_int
from ..metrics import parse_metrics
from .design import _metric_rows, full_ranking_halfwidth
from .panel_data import DENSE_ITEMS_MAX, PANEL_MODELS

__all__ = ["EVALUATION_MODELS", "PairCounter", "evaluation_study", "evaluation_summary"]

#: The costly models of the study: EASE (up to DENSE_ITEMS_MAX items), ALS and item-KNN (PANEL_MODELS' settings).
EVALUATION_MODELS = {m: PANEL_MODELS[m] for m in ("ease-200", "als-64", "itemknn")}


#: The ``proxy`` of :func:`evaluation_study` that ranks the catalogue at random (a proxy no better than chance).
RANDOM_PROXY = "random"


class PairCounter:
    """A scorer wrapped to count what it is asked: calls, pairs, and pairs asked more than once.

    The keys u * N + i of every pair are kept (8 bytes a pair) and checked for repeats by :meth:`repeats`.

    Examples
    --------
    >>> c = PairCounter(lambda u, i: i * 1.0, n_items=10)
    >>> _ = c(np.array([0, 0]), np.array([3, 4])); _ = c(np.array([1]), np.array([3]))
    >>> c.calls, c.pairs, c.repeats()
    (2, 3, 0)
    """

    def __init__(self, score, n_items):
        self.score, self.N = score, int(n_items)
        self.calls = self.pairs = 0
        self.seconds = 0.0
        self._keys = []

    def __call__(self, users, items):
        t0 = time.perf_counter()
        self.calls += 1
        u, i = np.asarray(users, dtype=np.int64), np.asarray(items, dtype=np.int64)
        self.pairs += u.size
        self._keys.append(u * self.N + i)
        out = self.score(u, i)
        self.seconds += time.perf_counter() - t0
        return out

    def keys(self):
        """Every pair asked, in order, as u * N + i."""
        return np.concatenate(self._keys) if self._keys else np.zeros(0, np.int64)

    def repeats(self):
        """How many asked pairs had been asked before."""
        keys = self.keys()
        return int(keys.size - unique_ints(keys).size)


def evaluation_study(data=None, models=None, *, draws=10, n=100, metrics=("recall@10", "ndcg@10"),
                     target_ratio=None, max_cost=None, n_boot=1000, seed=0, data_rng=0,
                     max_dense_items=DENSE_ITEMS_MAX, full_boot=100_000, synthetic=None, progress=False,
                     population=None, proxy=None, head=None, tail_n=None, tail_n_max=None, head_ladder=None):
    """:func:`sampling_lib.evaluate` on real recommenders, ``draws`` times, beside full ranking.

    Parameters
    ----------
    data : path, Ratings or None
        As :func:`sampling_lib.experiments.global_ranks_from_data` (None: its synthetic ratings).
    models : mapping label -> (name, params), optional
        Default :data:`EVALUATION_MODELS` (EASE is skipped above ``max_dense_items`` items).
    draws : int
        Evaluations, with seeds ``seed``, ``seed + 1``, ...
    n, metrics, target_ratio, max_cost, n_boot
        As :func:`sampling_lib.evaluate` (every model scored in one call, on shared negatives).
    data_rng : int
        Seeds the split and the models (as ``global_ranks_from_data``'s ``rng``).
    full_boot : int
        Replicates of full ranking's own percentile interval (:func:`full_ranking_halfwidth`).
    synthetic : mapping, optional
        Settings of the synthetic ratings (``data=None``).
    population : tuple, optional
        ``global_ranks_from_data(..., keep_models=True)``'s result, when the caller has it already (then
        ``data``, ``models``, ``data_rng``, ``max_dense_items`` and ``synthetic`` are not used).
    proxy : str, optional
        A stratified evaluation (``evaluate(..., proxy=)``): the label of one of the fitted models, used as
        the proxy ranker (a per-item vector for ``popularity``, its pair scorer otherwise) and not evaluated,
        or :data:`RANDOM_PROXY` ("random": a useless proxy, uniform random scores per item from ``data_rng``);
        the other models are the costly ones, and only their scored pairs count as cost. ``head``,
        ``tail_n``, ``tail_n_max`` and ``head_ladder`` as :func:`sampling_lib.evaluate` (each an error
        without ``proxy``; ``tail_n_max`` None: the tail is planned for ``target_ratio`` / ``max_cost``, and
        ``predicted_share`` is that plan's; given, the design is fixed and the target is not passed).
        ``first_predicted_share`` and ``hand_first_plan_share`` (the uniform route's) are then NaN.

    Returns
    -------
    pandas.DataFrame
        One row per (draw, model, metric): ``dataset, N, M, n, draw, model, metric, truth, estimate,
        ci_low, ci_high, covered, rel_error, halfwidth, full_halfwidth, ratio`` (the realized precision
        ratio: halfwidth over full ranking's), ``estimated_ratio`` (the table's own ``precision_ratio``),
        ``pairs_counted`` (by :class:`PairCounter`, per model), ``pairs_reported`` (``result.cost``),
        ``repeats`` (pairs asked twice), ``cost_share`` (pairs counted / sum of N_u),
        ``predicted_share`` (the last plan's prediction, in items per user of the users it priced, over the
        mean N_u), ``planned_share`` (what those users cost, on the same scale: a planned stratified
        evaluation's other users, the precision check's pairs on them included; else ``cost_share``),
        ``pilot_share`` (a planned stratified evaluation's pilot: its pairs over the sum of N_u, paid before
        the plan and not in its prediction; else NaN), ``first_predicted_share`` (the first plan's),
        ``hand_first_plan_share`` (the predicted cost of the design the hand-driven route's ``plan`` would
        choose on the same first stage: N = the median N_u, sets capped at the smallest N_u),
        ``stages``, ``calls``, ``seconds`` (the whole call) and ``scoring_seconds`` (inside the scorers);
        ``proxy_paid`` (a planned stratified evaluation: 1 when its plan kept the stratified design for every
        user, 0 when the other users fell back to the uniform ladder; else NaN), ``planned_head`` (the head
        size its plan chose for the other users, at most the pilot's; NaN when they fell back or without a
        plan), ``pilot_head`` (a planned stratified evaluation's pilot head: with ``head`` None, the head its
        climb reached; else NaN), ``predicted_ratio`` (the last plan's predicted worst ratio over the
        metrics; NaN without a plan), ``uniform_predicted_share`` (a planned stratified evaluation's pilot:
        its price of the cheapest uniform design meeting the target; else NaN), ``uniform_priced_on``
        ("first stage" or "cells": what the pilot priced it on; else None) and ``check_share`` (the pairs the precision check
        scored beyond the planned stratified design, as a share of full ranking: 0 when it did not act;
        NaN when the other users fell back, when the pilot was every user, or without a plan).

    Examples
    --------
    >>> t = evaluation_study(None, {"pop": ("popularity", {})}, draws=1, n=20, n_boot=100, full_boot=2000,
    ...                      synthetic={"n_users": 300, "n_items": 400})
    >>> int(t.repeats.max()), bool((t.pairs_counted == t.pairs_reported).all())
    (0, True)
    """
    from ..evaluation import evaluate
    from ..experiments import global_ranks_from_data
    from ..recommenders import pair_scorer

    draws = check_int(draws, "draws", low=1)
    parsed = parse_metrics(metrics)
    if population is None:
        population = global_ranks_from_data(data, EVALUATION_MODELS if models is None else models, rng=data_rng,
                                            keep_models=True, max_dense_items=max_dense_items,
                                            synthetic=synthetic)
    ranks, N, info = population
    split = info["split"]
    M = int(split.n_users)
    train = split.train.tocsr()
    exclude = {u: train.indices[train.indptr[u]:train.indptr[u + 1]] for u in range(M)}
    held = dict(enumerate(split.test_items.astype(np.int64)))
    N_u = info["n_candidates"]
    strata = {}
    if proxy is None:
        given = [k for k, v in (("head", head), ("tail_n", tail_n), ("tail_n_max", tail_n_max),
                                ("head_ladder", head_ladder)) if v is not None]
        if given:
            raise ValueError(f"{given[0]} applies with proxy (a stratified evaluation)")
    if proxy == RANDOM_PROXY:           # a useless proxy: i.i.d. uniform scores per item, seeded by data_rng
        scores = np.random.default_rng(np.random.SeedSequence([int(data_rng), 0x70726F78])).random(N)
        strata = dict(proxy=scores, head=head, tail_n=tail_n, tail_n_max=tail_n_max, head_ladder=head_ladder)
    elif proxy is not None:
        if proxy not in ranks:
            raise ValueError(f"proxy must name one of the fitted models {sorted(ranks)} or {RANDOM_PROXY!r}; got "
                             f"{proxy!r}")
        if len(ranks) < 2:
            raise ValueError("proxy needs at least one other model to evaluate")
        fitted = info["fitted"][proxy]
        strata = dict(proxy=_proxy_of(fitted, N), head=head, tail_n=tail_n, tail_n_max=tail_n_max,
                      head_ladder=head_ladder)
    truth = {m: _metric_rows(parsed, R).mean(axis=1) for m, R in ranks.items() if m != proxy}
    full_hw = {m: full_ranking_halfwidth(R, metrics, n_boot=full_boot, rng=data_rng) for m, R in ranks.items()
               if m != proxy}
    rows = []
    for k in range(draws):
        counters = {m: PairCounter(pair_scorer(info["fitted"][m]), N) for m in ranks if m != proxy}
        t0 = time.perf_counter()
        fixed = proxy is not None and tail_n_max is not None          # a fixed stratified design: no target
        res = evaluate(counters, held, N, exclude=exclude, n=n, metrics=metrics,
                       target_ratio=None if fixed else target_ratio, max_cost=None if fixed else max_cost,
                       n_boot=n_boot, seed=seed + k, progress=progress, **strata)
        seconds = time.perf_counter() - t0
        cost = res.cost.iloc[0]
        if proxy is None:
            hand = _hand_driven_share(res, n, metrics, target_ratio, max_cost, N_u)
            first = cost.first_plan_items_per_user * M / float(N_u.sum())
        else:
            hand = first = np.nan
        # the last plan's predicted (worst) ratio: a planned stratified evaluation's is its others' re-plan
        pr = res.design["predicted_ratio"].dropna() if "predicted_ratio" in res.design.columns else []
        predicted_ratio = float(pr.iloc[-1]) if len(pr) else np.nan
        # a planned stratified evaluation says whether the proxy paid (else the other users ran the ladder)
        paid = np.nan if proxy is None or tail_n_max is not None else float(res.config["proxy_pays"])
        ph = res.config.get("planned_head") if paid == 1 else None
        planned_head = np.nan if ph is None else float(ph)
        # the pilot's head (where the pilot climbed, the head its climb reached)
        pilot = res.parts.get("pilot") if getattr(res, "parts", None) else None
        pilot_head = np.nan if np.isnan(paid) else float((pilot or res).config["head"])
        # the pilot's price of the uniform ladder, and on what (its uniform first stage or its cells)
        uni_share = res.config.get("uniform_predicted_share", np.nan)
        uni_on = res.config.get("uniform_priced_on")
        # the users the last plan priced: a planned stratified evaluation's other users (its pilot's pairs
        # were paid before the plan and are not in its prediction), else every user
        split = pilot is not None
        planned = res.parts["rest"] if split else res
        planned_share = float(planned.cost.items_per_user.iloc[0]) * M / float(N_u.sum())
        pilot_share = float(pilot.cost.pairs_per_model.iloc[0]) / float(N_u.sum()) if split else np.nan
        for m, c in counters.items():
            repeats = c.repeats()             # one sort of every pair asked, per model and draw
            t = res.table[res.table.model == m].set_index("metric")
            for j, (name, _, _) in enumerate(parsed):
                e = t.loc[name]
                hw = 0.5 * (e.ci_high - e.ci_low)
                rows.append({
                    "dataset": info["dataset"], "N": N, "M": M, "n": n, "draw": k, "model": m, "metric": name,
                    "truth": truth[m][j], "estimate": e.estimate, "ci_low": e.ci_low, "ci_high": e.ci_high,
                    "covered": bool(e.ci_low <= truth[m][j] <= e.ci_high),
                    "rel_error": abs(e.estimate - truth[m][j]) / truth[m][j] if truth[m][j] > 0 else np.nan,
                    "halfwidth": hw, "full_halfwidth": full_hw[m][j], "ratio": hw / full_hw[m][j],
                    "estimated_ratio": e.precision_ratio, "pairs_counted": c.pairs,
                    "pairs_reported": int(cost.pairs_per_model), "repeats": repeats,
                    "cost_share": c.pairs / float(N_u.sum()), "predicted_share": cost.predicted_share,
                    "planned_share": planned_share, "pilot_share": pilot_share,
                    "first_predicted_share": first, "proxy": proxy, "proxy_paid": paid,
                    "planned_head": planned_head, "pilot_head": pilot_head, "predicted_ratio": predicted_ratio,
                    "uniform_predicted_share": uni_share, "uniform_priced_on": uni_on,
                    "check_share": res.config.get("check_share", np.nan),
                    "hand_first_plan_share": hand,
                    "stages": int(cost.stages), "calls": c.calls, "seconds": seconds,
                    "scoring_seconds": sum(x.seconds for x in counters.values())})
        # before the next draw: a result keeps its runs (its negatives are read from them) and the counters
        # every pair asked; held through the next evaluation they add to its peak (a Gowalla study behind
        # popularity, whose heads reach 3,200 per user, was killed at 17.5 GB)
        del res, counters, pilot
    return pd.DataFrame(rows)


def _proxy_of(fitted, N):
    """A fitted model as a proxy ranker: its per-item scores when they do not depend on the user
    (popularity: one vector, no call per pair), its pair scorer otherwise."""
    from ..recommenders import Popularity, pair_scorer

    f = pair_scorer(fitted)
    if isinstance(fitted, Popularity):
        return np.asarray(f(np.zeros(N, np.int64), np.arange(N)), dtype=float)
    return f


def _hand_driven_share(res, n, metrics, target_ratio, max_cost, N_u):
    """The cost share of the design the hand-driven route (README, "Stage by stage with real files") would
    choose on the same first stage: ``plan`` on the first-stage ranks with N = the median N_u and sets
    capped at the smallest N_u, as ``sampling-lib plan`` on a ranks file with an n_items column does
    (items per user over the mean N_u)."""
    from ..design import plan

    r = res.ranks
    pilots = {m: g.sort_values("user").first_rank.to_numpy() for m, g in r.groupby("model", sort=False)}
    users = r[r.model == r.model.iloc[0]].sort_values("user")
    keep = users.sample_size.to_numpy() >= n              # users ranked in full at stage 1 are left out
    pilots = {m: v[keep] for m, v in pilots.items()}
    Nmed, Nmin = int(np.median(users.n_items)), int(users.n_items.min())
    kw = {"target_ratio": 1.3 if target_ratio is None else target_ratio}
    if max_cost is not None:
        kw = {"target_ratio": 1.0 if target_ratio is None else target_ratio,
              "max_cost": max_cost * float(np.mean(N_u)) / Nmed}
    out = plan(pilots, Nmed, n, M=len(users), metrics=metrics, scheme="hypergeometric", max_size=Nmin,
               ranges=False, **kw)
    per = out.designs().set_index("design")
    name = out.best.describe() if out.best is not None else per.ratio.idxmin()
    return float(per.loc[name, "cost"]) / float(np.mean(N_u))


def evaluation_summary(table):
    """Per (dataset, model, metric): draws, mean realized ratio and its largest, coverage, mean relative error,
    mean cost share, realized over predicted cost (``cost_over_predicted``: the cost of the users the plan
    priced, ``planned_share``, over its prediction; a planned stratified evaluation's pilot, paid before the
    plan, is ``pilot_share``), and whether the counted pairs equal the reported ones."""
    g = table.groupby(["dataset", "model", "metric"], sort=False)
    out = g.agg(draws=("draw", "size"), ratio=("ratio", "mean"), ratio_max=("ratio", "max"),
                estimated_ratio=("estimated_ratio", "mean"), coverage=("covered", "mean"),
                rel_error=("rel_error", "mean"), cost_share=("cost_share", "mean"),
                predicted_share=("predicted_share", "mean"), planned_share=("planned_share", "mean"),
                pilot_share=("pilot_share", "mean"), repeats=("repeats", "max"),
                first_plan_share=("first_predicted_share", "mean"),
                hand_first_plan_share=("hand_first_plan_share", "mean"),
                counted_is_reported=("pairs_counted", lambda s: bool(
                    (s == table.loc[s.index, "pairs_reported"]).all()))).reset_index()
    out["cost_over_predicted"] = out.planned_share / out.predicted_share
    return out
