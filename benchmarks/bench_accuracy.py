"""Benchmark: accuracy of the estimators on real rank distributions (issue 13), and speed of the default.

Part 1, accuracy panel (the full protocol of issue 13; notebook 10 runs a lighter version in
`make reports`): rank distributions of 7 recommender settings (studies.PANEL_MODELS) on MovieLens 100K,
Last.fm 2K restricted to artists with >= 5 listeners, and the full Last.fm 2K catalogue (EASE skipped
there); n in {20, 50, 100, 500} ({20, 50, 100} for the 17,632-item catalogue), M in {300, 1000, all},
10 draws per cell; Recall/NDCG@1..50 of every estimator against the users' true metric; the oracle floor.
Then the coverage of 95% intervals (Recall@10, NDCG@10) of the default and of MLE.

Part 2, speed: `estimate` with the default method and 1,000 bootstrap replicates at N = 10^4, n = 100,
M = 10^4, side by side with today's `mle` path (same data, same replicates).

Needs ../shared/data (skips part 1 without it). Usage:
    .venv/bin/python benchmarks/bench_accuracy.py [--quick] [--out DIR]
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

from sampling_lib import experiments, studies
from sampling_lib.correct import estimate
from sampling_lib.estimators import DEFAULT_METHOD
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.sampling import sample_ranks

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def panel_part(quick, out, parts=("panel", "coverage")):
    ml = SHARED / "ml-100k" / "u.data"
    lf = SHARED / "lastfm-2k" / "user_artists.dat"
    if not (ml.exists() and lf.exists()):
        print(f"part 1 skipped: {SHARED} has no ml-100k / lastfm-2k")
        return
    t0 = time.perf_counter()
    sources = [("ml-100k", ml, 1), ("lastfm-2k (>=5 users/item)", lf, 5), ("lastfm-2k", lf, 1)]
    small, large = {}, {}
    for label, path, mu in sources:
        models = studies.PANEL_MODELS
        if label == "lastfm-2k":   # item-KNN with 10 neighbours takes ~40 s on 17,632 items
            models = {k: v for k, v in studies.PANEL_MODELS.items() if k != "itemknn-10"}
        ranks, N, info = experiments.global_ranks_from_data(path, models, min_item_users=mu, rng=10,
                                                            max_dense_items=6000, keep_models=False)
        tgt = large if N > 10_000 else small
        tgt.update({(label, m): (R, N) for m, R in ranks.items()})
        print(f"{label}: N = {N}, M = {info['M']}, skipped {info['skipped']}", flush=True)
    if "panel" in parts:
        _panel(small, large, quick, out, t0)
    if "coverage" in parts:
        _coverage(small, large, quick, out)


def _panel(small, large, quick, out, t0):
    methods = ("mle", "mes", "bv", "bv_mle", "mn_mes", "logspline")
    draws = 2 if quick else 10
    panel = pd.concat([
        studies.accuracy_panel(small, methods, sample_sizes=(20, 50, 100, 500),
                               user_counts=(300, 1000, None), draws=draws, rng=10, progress=True),
        studies.accuracy_panel(large, methods, sample_sizes=(20, 50, 100),
                               user_counts=(300, 1000, None), draws=draws, rng=10, progress=True),
    ], ignore_index=True)
    print(f"panel: {time.perf_counter() - t0:.0f} s")
    panel.to_csv(out / "accuracy_panel.csv.gz", index=False)
    for metric in ("recall", "ndcg"):
        t = studies.panel_summary(panel, by=("dataset", "estimator"), metric=metric).reset_index()
        print(f"\n{metric}@1..50, mean |relative error| (%) per data set")
        print(t.pivot(index="estimator", columns="dataset", values="mean_rel_error").round(1).to_string())
        print(f"\n{metric}@1..50, all data sets: mean, sd over evaluations, resolved / below resolution")
        print(studies.panel_summary(panel, metric=metric).round(1).to_string())


def _coverage(small, large, quick, out):
    t1 = time.perf_counter()
    cov = studies.interval_coverage({**small, **large}, (DEFAULT_METHOD, "mle"),
                                    sample_sizes=(20, 100, 500), user_counts=(300, None),
                                    draws=1 if quick else 3, n_boot=200, rng=11)
    cov.to_csv(out / "coverage_panel.csv.gz", index=False)
    print(f"\ncoverage: {len(cov)} intervals, {time.perf_counter() - t1:.0f} s")
    fam = cov.groupby(["method", "dataset", "model"])["covered"].mean().unstack("method")
    print(fam.round(2).to_string())
    print(cov.groupby(["method", "below_resolution"]).agg(
        coverage=("covered", "mean"), intervals=("covered", "size"),
        median_rel_width=("rel_width", "median")).round(3).to_string())


def speed_part(quick):
    N, n, M = (10_000, 100, 10_000)
    pmf = synthetic_models(N)["beta_a0.35"]
    r = sample_ranks(draw_global_ranks(pmf, M, rng=0), N, n, rng=1)
    B = 200 if quick else 1000
    rows = []
    for method in ("mle", DEFAULT_METHOD):
        estimate(r, N, n, method=method, n_boot=2, rng=0)   # warm caches
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            estimate(r, N, n, method=method, n_boot=B, rng=0)
            best = min(best, time.perf_counter() - t)
        rows.append((method, best))
    print(f"\nestimate, N={N}, n={n}, M={M}, {B} replicates (best of 3)")
    for m, s in rows:
        print(f"  {m:>10}: {s:6.2f} s")
    print(f"  ratio mle / {DEFAULT_METHOD}: {rows[0][1] / rows[1][1]:.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--parts", default="speed,panel,coverage",
                    help="comma-separated subset of speed, panel, coverage")
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    if not parts <= {"speed", "panel", "coverage"}:
        ap.error(f"--parts must be a subset of speed,panel,coverage; got {a.parts!r}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if "speed" in parts:
        speed_part(a.quick)
    if parts & {"panel", "coverage"}:
        panel_part(a.quick, out, parts)


if __name__ == "__main__":
    main()
