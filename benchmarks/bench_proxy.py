"""Benchmark: stratified evaluations (``evaluate(..., proxy=)``) against the planned uniform ladder, on real
recommenders, beside full ranking.

For each data set, the costly models (ALS, and EASE where the catalogue allows it) are evaluated

* by the uniform ladder the planner picks for ``--target`` (``evaluate(..., target_ratio=)``), and
* by stratified designs: a proxy's top ``head`` candidates scored, then a uniform tail ladder
  ``tail_n`` -> ``tail_n_max`` for the users the head does not settle, with popularity and item-KNN as
  proxies (fitted on the same training split),

on the same draws (seeds 0, 1, ...). The cost counts only the costly models' scored pairs (a counting
wrapper outside the library, ``studies.PairCounter``); the precision ratio is the interval's half-width over
full ranking's own (100,000-replicate percentile interval for the same users). ``--tail-max-factor 0`` lets
the planner size the tail ladder for ``--target`` from a pilot and fall back to the uniform ladder when it
predicts the proxy does not pay (``proxy_paid``); it also prices half and a quarter of the given head
(``planned_head``: the head the other users ran); ``tail_n`` is given.

Part ``cascade`` (``--parts cascade``): published cascade protocols corrected
(:func:`sampling_lib.cascade.cascade_estimate`, :func:`sampling_lib.studies.cascade_study`): EASE (on
catalogues of up to ``--ease-items`` items, 6,000 by default) as the costly model, item-KNN as the retriever,
"retriever top-20 + 19 random" over ``--draws`` tail draws, and "top-20 only" as bounds. Goal: the corrected
Recall@10 interval covers the full-ranking truth in >= 93% of draws; its width beside the naive metric's error.

Part ``concentration`` (``--parts concentration``): where each proxy puts the tail items that beat the
held-out item (:func:`sampling_lib.studies.tail_concentration`: ALS-64 costly, the first ``--heads`` number as
the head, 1,500 users), beside the share a proxy that knows nothing would give.

Part ``inclusion`` (``--parts inclusion``): for the same users, how many times more often a tail sampled by a
power of the proxy's rank (``proxy.rank_power_inclusion``, expected sizes 50 and 200) would draw each tail item
above the held-out item than a uniform tail of the same size, by how many the user's tail holds
(:func:`sampling_lib.studies.tail_inclusion`, every head of ``--heads``).

Part ``extension`` (``--parts extension``): fixed designs at the same cost with and without a tail drawn by
the proxy's rank (:func:`sampling_lib.studies.extension_study`): EASE costly, each proxy's top m, a Poisson
sample of the rest with inclusion probabilities a power of the proxy's rank (its items scored, so they join
the head exactly) and r uniform draws from what is left, against a head and uniform draws alone
(``--designs``; the default grid spends 100 and 300 scored items per user).

Needs ../shared/data (skipped per data set when absent). Usage:
    .venv/bin/python benchmarks/bench_proxy.py [--parts frontier,cascade,concentration,inclusion,extension]
        [--draws 3]
        [--only TEXT]
        [--heads 100,400|climb] [--tail-n 100]
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sampling_lib import studies
from sampling_lib.experiments import global_ranks_from_data
from sampling_lib.studies.panel_data import DENSE_ITEMS_MAX, PANEL_DATASETS, PANEL_MODELS

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
PROXIES = ("popularity", "itemknn")
#: The extension part's default designs (m, expected extension size, power, r), fixed before the run: at 100
#: and 300 scored items per user, a head with uniform draws (half and half; a quarter and three quarters)
#: against a quarter's head, a Poisson extension by the proxy's rank (power 1 or 0.5) and uniform draws.
EXTENSION_DESIGNS = tuple(d for b in (100, 300) for d in (
    (b // 2, 0, 0.0, b // 2), (b // 4, 0, 0.0, 3 * b // 4), (b // 4, b // 4, 1.0, b // 2),
    (b // 4, b // 4, 0.5, b // 2), (b // 4, b // 2, 1.0, b // 4)))
#: the library's array limit as the user set it (None: the bench raises it for EASE's matrix, _ease_model)
_USER_LIMIT = os.environ.get("SAMPLING_LIB_MAX_ARRAY_BYTES")


def _ease_model(n_items, ease_items):
    """EASE (lambda 200) where the catalogue has at most ``ease_items`` items, else None. Above DENSE_ITEMS_MAX
    it is fitted in float32 (one N x N matrix: 6.7 GB at Gowalla's 40,981 items) with the library's array limit
    raised to that matrix, unless SAMPLING_LIB_MAX_ARRAY_BYTES is set."""
    if n_items > ease_items:
        return None
    name, params = PANEL_MODELS["ease-200"]
    if n_items <= DENSE_ITEMS_MAX:
        return name, params
    if _USER_LIMIT is None:              # the largest catalogue's matrix so far (data sets run in turn)
        need = int(4 * n_items * n_items * 1.05)
        held = int(float(os.environ.get("SAMPLING_LIB_MAX_ARRAY_BYTES") or 0))
        os.environ["SAMPLING_LIB_MAX_ARRAY_BYTES"] = str(max(need, held))
    return name, dict(params, dtype=np.float32)


def frontier(label, draws, heads, tail_n, tail_max_factor, target, proxies=PROXIES, ease_items=DENSE_ITEMS_MAX):
    spec = PANEL_DATASETS[label]
    ratings = spec.ratings(SHARED)
    ease = _ease_model(ratings.n_items, ease_items)
    costly = ["als-64"] + (["ease-200"] if ease is not None else [])
    models = {m: PANEL_MODELS[m] for m in costly + [p for p in proxies if p != studies.RANDOM_PROXY]}
    if ease is not None:
        models["ease-200"] = ease
    t0 = time.perf_counter()
    ranks, N, info = global_ranks_from_data(ratings, models, rng=0, keep_models=True,
                                            max_dense_items=max(ease_items, DENSE_ITEMS_MAX))
    print(f"{label}: N = {N:,}, {info['M']:,} users, models fitted and ranked in full in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    t0 = time.perf_counter()
    t, summary = studies.proxy_frontier((ranks, N, info), costly, proxies, heads=heads, tail_n=tail_n,
                                        tail_n_max=tail_max_factor * tail_n if tail_max_factor > 0 else None,
                                        draws=draws, n=100,
                                        target_ratio=target, full_boot=100_000)
    print(f"  uniform ladder and {len(proxies) * len(heads)} stratified designs: {time.perf_counter() - t0:.0f} s",
          flush=True)
    t = t.assign(dataset=label)
    summary = summary.assign(dataset=label)
    return t, summary


def cascade(label, draws, ease_items=DENSE_ITEMS_MAX):
    """The cascade part on one data set: EASE scored on item-KNN's top 20 + 19 random, and on the top 20 only."""
    t0 = time.perf_counter()
    ratings = PANEL_DATASETS[label].ratings(SHARED)
    models = {"ease-200": _ease_model(ratings.n_items, ease_items), "itemknn": PANEL_MODELS["itemknn"]}
    pop = global_ranks_from_data(ratings, models, rng=0, keep_models=True,
                                 max_dense_items=max(ease_items, DENSE_ITEMS_MAX))
    t = studies.cascade_study(population=pop, costly="ease-200", retriever="itemknn", m=20, r=19,
                              draws=draws).assign(dataset=label)
    print(f"{label}: cascade {time.perf_counter() - t0:.0f} s", flush=True)
    g = t.groupby(["dataset", "protocol", "metric"], sort=False)
    summary = g.agg(draws=("draw", "size"), truth=("truth", "mean"), naive=("naive", "mean"),
                    naive_error=("naive_error", "mean"), estimate=("estimate", "mean"),
                    rel_error=("rel_error", "mean"), halfwidth=("halfwidth", "mean"), ratio=("ratio", "mean"),
                    coverage=("covered", "mean"), bound_low=("bound_low", "mean"),
                    bound_high=("bound_high", "mean"),
                    design_coverage=("bounds_covered", lambda v: v.dropna().astype(float).mean())).reset_index()
    return t, summary


def concentration(label, head, proxies):
    """The concentration part on one data set: ALS-64 costly, each proxy's order of the tail items above."""
    t0 = time.perf_counter()
    wanted = {m: PANEL_MODELS[m] for m in ("als-64",) + tuple(proxies)}
    pop = global_ranks_from_data(PANEL_DATASETS[label].ratings(SHARED), wanted, rng=0, keep_models=True)
    t = pd.concat([studies.tail_concentration(pop, "als-64", p, head=head) for p in proxies], ignore_index=True)
    print(f"{label}: concentration {time.perf_counter() - t0:.0f} s", flush=True)
    return t.assign(dataset=label)


def inclusion(label, heads, proxies):
    """The inclusion part on one data set: ALS-64 costly, each proxy's rank-power tail at each head."""
    t0 = time.perf_counter()
    wanted = {m: PANEL_MODELS[m] for m in ("als-64",) + tuple(proxies)}
    pop = global_ranks_from_data(PANEL_DATASETS[label].ratings(SHARED), wanted, rng=0, keep_models=True)
    t = pd.concat([studies.tail_inclusion(pop, "als-64", p, head=h) for p in proxies for h in heads],
                  ignore_index=True)
    print(f"{label}: inclusion {time.perf_counter() - t0:.0f} s", flush=True)
    return t.assign(dataset=label)


def extension(label, draws, designs, proxies, ease_items=DENSE_ITEMS_MAX):
    """The extension part on one data set: EASE costly, each proxy's fixed designs with and without a Poisson
    extension of the head by the proxy's rank."""
    t0 = time.perf_counter()
    ratings = PANEL_DATASETS[label].ratings(SHARED)
    models = {"ease-200": _ease_model(ratings.n_items, ease_items), **{p: PANEL_MODELS[p] for p in proxies}}
    pop = global_ranks_from_data(ratings, models, rng=0, keep_models=True,
                                 max_dense_items=max(ease_items, DENSE_ITEMS_MAX))
    t = pd.concat([studies.extension_study(population=pop, costly="ease-200", proxy=p, designs=designs,
                                           draws=draws) for p in proxies], ignore_index=True).assign(dataset=label)
    print(f"{label}: extension {time.perf_counter() - t0:.0f} s", flush=True)
    g = t.groupby(["dataset", "proxy", "metric", "m", "extension", "power", "r"], sort=False)
    summary = g.agg(draws=("draw", "size"), cost=("cost", "mean"), ratio=("ratio", "mean"),
                    ratio_max=("ratio", "max"), rel_error=("rel_error", "mean"),
                    coverage=("covered", "mean")).reset_index()
    return t, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="frontier",
                    help="frontier, cascade, concentration, inclusion, extension (comma-separated)")
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--only", default=None, help="data sets named by these labels, or whose label contains one of "
                    "them when none is a label (comma-separated)")
    ap.add_argument("--heads", default="100,400",
                    help="head sizes (comma-separated); 'climb': no head given, so a planned design's pilot climbs "
                         "(with --tail-max-factor 0)")
    ap.add_argument("--tail-n", type=int, default=100)
    ap.add_argument("--tail-max-factor", type=int, default=16,
                    help="the tail ladder's top as a multiple of --tail-n; 0: planned for --target, with the uniform "
                         "ladder as the fall-back")
    ap.add_argument("--target", type=float, default=1.3)
    ap.add_argument("--proxies", default=",".join(PROXIES),
                    help=f"proxy rankers (comma-separated; default {','.join(PROXIES)}); 'random': a useless proxy, "
                         "uniform random scores per item")
    ap.add_argument("--ease-items", type=int, default=DENSE_ITEMS_MAX,
                    help=f"EASE is evaluated (frontier) and corrected (cascade) on catalogues of at most this many "
                         f"items (default {DENSE_ITEMS_MAX:,}); above {DENSE_ITEMS_MAX:,} it is fitted in float32 "
                         "(Gowalla: 6.7 GB, about 13 minutes on one core)")
    ap.add_argument("--designs", default=None,
                    help="the extension part's designs m:size:power:r (comma-separated; size 0: no extension); "
                         "default: 100 and 300 scored items per user, EXTENSION_DESIGNS")
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    heads = [None if x.strip() == "climb" else int(x) for x in args.heads.split(",")]
    tables, sums, ctables, conc, incl, ext = [], [], [], [], [], []
    designs = EXTENSION_DESIGNS if args.designs is None else [
        (int(m), float(e), float(a), int(r)) for m, e, a, r in (d.split(":") for d in args.designs.split(","))]
    wanted = args.only.split(",") if args.only else None
    exact = wanted is not None and any(o in PANEL_DATASETS for o in wanted)
    for label in PANEL_DATASETS:
        if wanted and not (label in wanted if exact else any(o in label for o in wanted)):
            continue
        if not all((SHARED / f).exists() for f in PANEL_DATASETS[label].files):
            print(f"skipped {label}: no ../shared/data")
            continue
        if "frontier" in args.parts.split(","):
            t, s = frontier(label, args.draws, heads, args.tail_n, args.tail_max_factor, args.target,
                            proxies=args.proxies.split(","), ease_items=args.ease_items)
            tables.append(t)
            sums.append(s)
            print(s.round(3).to_string(index=False), flush=True)
            pd.concat(tables).to_csv(out / "proxy_frontier.csv", index=False)
        if "cascade" in args.parts.split(",") and PANEL_DATASETS[label].ratings(SHARED).n_items <= args.ease_items:
            t, s = cascade(label, args.draws, args.ease_items)
            ctables.append(t)
            print(s.round(4).to_string(index=False), flush=True)
            pd.concat(ctables).to_csv(out / "proxy_cascade.csv", index=False)
        if "concentration" in args.parts.split(","):
            head = next((h for h in heads if h is not None), 100)
            conc.append(concentration(label, head, [p for p in args.proxies.split(",") if p != "random"]))
            print(conc[-1].round(3).to_string(index=False), flush=True)
            pd.concat(conc).to_csv(out / "proxy_concentration.csv", index=False)
        if "inclusion" in args.parts.split(","):
            incl.append(inclusion(label, [h for h in heads if h is not None] or [100],
                                  [p for p in args.proxies.split(",") if p != "random"]))
            print(incl[-1].round(3).to_string(index=False), flush=True)
            pd.concat(incl).to_csv(out / "proxy_inclusion.csv", index=False)
        if "extension" in args.parts.split(",") and PANEL_DATASETS[label].ratings(SHARED).n_items <= args.ease_items:
            t, s = extension(label, args.draws, designs, [p for p in args.proxies.split(",") if p != "random"],
                             args.ease_items)
            ext.append(t)
            print(s.round(4).to_string(index=False), flush=True)
            pd.concat(ext).to_csv(out / "proxy_extension.csv", index=False)
    if sums:
        pd.concat(sums).to_csv(out / "proxy_frontier_summary.csv", index=False)


if __name__ == "__main__":
    main()
