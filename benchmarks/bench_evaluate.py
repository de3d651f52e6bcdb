"""Benchmark: the one-call evaluation (``sampling_lib.evaluate``) -- its speed, and its precision and cost on
real recommenders against full ranking.

Parts (``--parts``):

* ``speed``: the library's own time (drawing, planning, estimating; the scorer's time excluded) at 10^5
  users x 3 models with N = 10^5 items, reported beside the time spent inside a trivial scorer (a hash of
  the pair; each model's held-out items at global ranks drawn from ``rankdist.synthetic_models``: the Beta
  laws a = 0.25, 0.35 and their mixture). Goal: under 60 s on 2 cores.
* ``ncf``: ``estimate`` on the merged stages of an NCF-MovieLens-1M-like evaluation (6,040 users, N = 3,706,
  per-user N_u = N minus a history whose lengths follow MovieLens-1M's: 20 to ~2,300, median ~96; 3 models;
  the stages run by ``evaluate`` with hash scorers). Goal: under 30 s.
* ``panel``: ``studies.evaluation_study`` on MovieLens 100K, Last.fm 2K (items with >= 5 users, and the full
  catalogue), Gowalla and Yelp2018 with EASE (up to 6,000 items), ALS and item-KNN as the costly models,
  ``--draws`` evaluations each (seeds 0, 1, ...), target ratio 1.3. Goals: precision ratio <= 1.3 for
  Recall@10 and NDCG@10 in >= 95% of cells (the mean over draws, against full ranking's own interval for
  the same users from 100,000 replicates); coverage of the full-ranking truth >= 93% pooled; realized cost
  within +-15% of the planner's prediction; pairs counted by a wrapper outside the library equal to the
  cost reported, none asked twice.

Needs ../shared/data for the panel (skipped per data set when absent). Usage:
    .venv/bin/python benchmarks/bench_evaluate.py [--parts speed,ncf,panel] [--draws 10] [--only TEXT] [--quick]
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

from sampling_lib import evaluate, studies
from sampling_lib.nested import _round
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.studies.panel_data import PANEL_DATASETS

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
LAWS = ("beta_a0.25", "beta_a0.35", "mixture")


def hash_scorer(key, held, R, N_u, clock):
    """A trivial scorer: each negative a uniform hash of (key, user, item); the held-out item scored so that
    about R_u - 1 of the user's N_u - 1 negatives lie above it. ``clock[0]`` accumulates its time."""
    k = np.uint64(key)

    def score(users, items):
        t0 = time.perf_counter()
        users, items = np.asarray(users, dtype=np.int64), np.asarray(items, dtype=np.int64)
        x = users.astype(np.uint64) * np.uint64(0x100000001B3) ^ items.astype(np.uint64)
        out = np.empty_like(x)
        _round(x, np.full(x.shape, k, np.uint64), out)
        s = (out >> np.uint64(11)).astype(float) / float(1 << 53)
        hit = items == held[users]
        s[hit] = 1.0 - (R[users[hit]] - 0.5) / (N_u[users[hit]] - 1.0)
        clock[0] += time.perf_counter() - t0
        return s

    return score


def population(M, N, laws, rng, history=None):
    """Held-out items, per-user N_u and each model's target global ranks."""
    g = np.random.default_rng(rng)
    held = g.integers(0, N, size=M)
    exclude = None
    N_u = np.full(M, N)
    if history is not None:
        exclude = {}
        for u, h in enumerate(history):
            items = g.choice(N, size=int(h) + 1, replace=False)
            items = items[items != held[u]][:int(h)]
            exclude[u] = items
            N_u[u] = N - items.size
    R = {law: np.minimum(draw_global_ranks(synthetic_models(N)[law], M, rng=g), N_u) for law in laws}
    return held, N_u, R, exclude


def speed_part(M, N, out):
    clock = [0.0]
    held, N_u, R, _ = population(M, N, LAWS, 0)
    scorers = {law: hash_scorer(k + 1, held, R[law], N_u, clock) for k, law in enumerate(LAWS)}
    t0 = time.perf_counter()
    res = evaluate(scorers, dict(enumerate(held)), N, n=100, seed=0, progress=True)
    total = time.perf_counter() - t0
    c = res.cost.iloc[0]
    row = {"users": M, "N": N, "models": len(LAWS), "seconds_total": total, "seconds_scorer": clock[0],
           "seconds_library": total - clock[0], "pairs_per_model": int(c.pairs_per_model),
           "share_of_full": c.share_of_full, "stages": int(c.stages)}
    print(pd.DataFrame([row]).round(3).to_string(index=False))
    print(res.design[["stage", "users", "pairs", "sizes"]].to_string(index=False))
    print(res.table[["model", "metric", "estimate", "ci_low", "ci_high", "precision_ratio"]].round(4)
          .to_string(index=False))
    pd.DataFrame([row]).to_csv(out / "evaluate_speed.csv", index=False)
    return row


def ncf_part(out):
    """estimate on the merged stages of an NCF-ml-1m-like evaluation (per-user N_u)."""
    from sampling_lib import estimate
    from sampling_lib.io import ranks_from_table

    g = np.random.default_rng(1)
    # MovieLens-1M users' rating counts: at least 20, median ~96, a long tail to ~2,300 (lognormal fit)
    hist = np.clip(np.round(np.exp(g.normal(np.log(96), 1.0, size=6040))), 20, 2314).astype(int)
    clock = [0.0]
    held, N_u, R, exclude = population(6040, 3706, LAWS, 2, history=hist)
    scorers = {law: hash_scorer(k + 1, held, R[law], N_u, clock) for k, law in enumerate(LAWS)}
    res = evaluate(scorers, dict(enumerate(held)), 3706, exclude=exclude, n=100, seed=0, n_boot=0,
                   progress=False)
    ranks = ranks_from_table(res.ranks)
    t0 = time.perf_counter()
    t = estimate(ranks, metrics=("recall@10", "ndcg@10", "ap@10", "recall@20", "ndcg@20", "ap@20"), n_boot=1000,
                 rng=0)
    secs = time.perf_counter() - t0
    row = {"users": 6040, "distinct_N_u": int(np.unique(N_u).size), "models": 3, "metrics": 6,
           "sizes": int(res.ranks.sample_size.nunique()), "seconds_estimate": secs}
    print(pd.DataFrame([row]).round(2).to_string(index=False))
    pd.DataFrame([row]).to_csv(out / "evaluate_ncf_estimate.csv", index=False)
    return t


def panel_part(draws, out, only=None, quick=False):
    labels = ["ml-100k", "lastfm-2k (>=5 users/item)"] if quick else list(PANEL_DATASETS)
    tables = []
    for label in labels:
        if only and not any(o in label for o in only.split(",")):
            continue
        spec = PANEL_DATASETS[label]
        if not all((SHARED / f).exists() for f in spec.files):
            print(f"skipped {label}: no ../shared/data")
            continue
        t0 = time.perf_counter()
        t = studies.evaluation_study(spec.ratings(SHARED), draws=draws, n=100, full_boot=100_000)
        t["dataset"] = label
        tables.append(t)
        print(f"{label}: {time.perf_counter() - t0:.0f} s")
        print(studies.evaluation_summary(t).round(3).to_string(index=False), flush=True)
        pd.concat(tables).to_csv(out / "evaluate_panel.csv", index=False)
    if not tables:
        return None
    t = pd.concat(tables, ignore_index=True)
    s = studies.evaluation_summary(t)
    print("\n" + s.round(3).to_string(index=False))
    cells = len(s)
    print(f"\nratio <= 1.3: {int((s.ratio <= 1.3).sum())} of {cells} cells; coverage pooled "
          f"{t.covered.mean():.3f} ({int(t.covered.sum())} of {len(t)}); cost within +-15% of the prediction: "
          f"{int(((s.cost_over_predicted - 1).abs() <= 0.15).sum())} of {cells} cells; counted == reported: "
          f"{bool((t.pairs_counted == t.pairs_reported).all())}; pairs asked twice: {int(t.repeats.sum())}")
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="speed,ncf,panel")
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--users", type=int, default=100_000, help="users of the speed part (default 10^5)")
    ap.add_argument("--only", default=None, help="panel: only the data sets whose label contains this text")
    ap.add_argument("--quick", action="store_true", help="speed at 10^4 users, panel on two small data sets")
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = args.parts.split(",")
    if "speed" in parts:
        speed_part(10_000 if args.quick else args.users, 100_000, out)
    if "ncf" in parts:
        ncf_part(out)
    if "panel" in parts:
        panel_part(args.draws, out, args.only, args.quick)


if __name__ == "__main__":
    main()
