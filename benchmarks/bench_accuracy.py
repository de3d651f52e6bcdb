"""Benchmark: accuracy of the estimators on real rank distributions, and speed of the default.

Part "panel" (notebook 10 runs a lighter version in `make reports`): the panel of
`studies.PANEL_DATASETS` -- MovieLens 100K, Last.fm 2K (artists with >= 5 listeners, and all 17,632),
Gowalla and Yelp2018 (LightGCN preprocessing, ~30,000 users x ~40,000 items) -- ranked by the settings
of `studies.PANEL_MODELS` that fit (no EASE above 6,000 items); n in {20, 50, 100, 500}, M in {300, 1000,
all}, 10 draws per cell; Recall/NDCG@1..50 of every published estimator, the default, the split-half
oracle and the realized oracle against the users' true metric; then every log-spline tuning of
`studies.PENALTIES` x `studies.KNOT_SPACINGS` on the same draws, and the tuning chosen by
leave-one-dataset-out (`studies.leave_one_dataset_out`) with its error on each held-out family.

Part "coverage": the 95% intervals (Recall@10, NDCG@10) of the default and of MLE, their coverage, width
and precision ratio against full ranking's own interval (user bootstrap of the true ranks); then the
interval's factor chosen by leave-one-dataset-out (`studies.penalty_intervals`, `studies.choose_factor`).

Part "aaai23": the relative-error table and the pick-the-winner counts of AAAI23 on its protocol
(`studies.aaai23_protocol`).

Part "scores": the negative-scores candidate (`studies.tail_panel`), leave-one-dataset-out.

Part "speed": `estimate` with the default method and 1,000 bootstrap replicates at N = 10^4, n = 100,
M = 10^4, side by side with the `mle` path (same data, same replicates).

Needs ../shared/data (skips the data parts without it). Global ranks are cached in --out
(populations.npz; --refresh recomputes them). The options below shrink a part to what the time allows
(every run prints the settings it used). Usage:
    .venv/bin/python benchmarks/bench_accuracy.py [--quick] [--out DIR] [--parts panel,coverage,...]
        [--draws D] [--sample-sizes 20,100,500] [--user-counts 300,all] [--penalties 10,30,...]
        [--knot-spacings 0.25,0.4,0.7] [--repeats R] [--aaai23-users M] [--aaai23-models itemknn,als,...]
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from sampling_lib import studies
from sampling_lib.correct import estimate
from sampling_lib.estimators import DEFAULT_KNOT_SPACING, DEFAULT_METHOD, DEFAULT_PENALTY
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.sampling import sample_ranks

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
PARTS = ("speed", "panel", "coverage", "aaai23", "scores")
SEED = 10
pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 30)


def populations(out, refresh=False):
    """{(dataset, model): (R, N)} of the whole panel, cached in out/populations.npz."""
    cache = out / "populations.npz"
    if cache.exists() and not refresh:
        d = np.load(cache, allow_pickle=False)
        keys = json.loads(str(d["keys"]))
        return {tuple(k): (d[f"R{i}"], int(d[f"N{i}"])) for i, k in enumerate(keys)}
    t0 = time.perf_counter()
    pops, table = studies.panel_populations(SHARED, rng=SEED, progress=True)
    print(table.to_string(index=False))
    print(f"populations: {time.perf_counter() - t0:.0f} s", flush=True)
    arrays = {f"R{i}": R for i, (R, _) in enumerate(pops.values())}
    arrays.update({f"N{i}": np.int64(N) for i, (_, N) in enumerate(pops.values())})
    np.savez(cache, keys=json.dumps([list(k) for k in pops]), **arrays)
    return pops


def _settings(a, part, **defaults):
    """The part's settings: the defaults, overridden by the command line's options; printed."""
    kw = dict(defaults)
    for k in kw:
        v = getattr(a, k, None)
        if v is not None:
            kw[k] = v
    print(f"{part}: " + ", ".join(f"{k}={v}" for k, v in kw.items()), flush=True)
    return kw


def panel_part(pops, a, out):
    t0 = time.perf_counter()
    kw = _settings(a, "panel", sample_sizes=(20, 50, 100, 500), user_counts=(300, 1000, None),
                   draws=2 if a.quick else 10)
    grid = _settings(a, "tuning grid", penalties=studies.PENALTIES, knot_spacings=studies.KNOT_SPACINGS)
    kw["rng"] = SEED
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # ConvergenceWarnings of the published EM/MES fits, counted in the table
        panel = studies.accuracy_panel(pops, studies.PANEL_METHODS, progress=True, **kw)
        print(f"panel: {time.perf_counter() - t0:.0f} s", flush=True)
        t1 = time.perf_counter()
        tuning = studies.tuning_panel(pops, grid["penalties"], grid["knot_spacings"], progress=True, **kw)
        print(f"tuning panel: {time.perf_counter() - t1:.0f} s", flush=True)
    panel.to_csv(out / "accuracy_panel.csv.gz", index=False)
    tuning.to_csv(out / "tuning_panel.csv.gz", index=False)
    report_panel(panel, tuning, out, grid)


def report_panel(panel, tuning, out, grid):
    for metric in ("recall", "ndcg"):
        t = studies.panel_summary(panel, by=("dataset", "estimator"), metric=metric).reset_index()
        print(f"\n{metric}@1..50, mean |relative error| (%) per data set")
        print(t.pivot(index="estimator", columns="dataset", values="mean_rel_error").round(1).to_string())
        print(f"\n{metric}@1..50, all data sets: mean, sd over evaluations, resolved / below resolution")
        print(studies.panel_summary(panel, metric=metric).round(1).to_string())
    errors = studies.family_errors(pd.concat([panel, tuning], ignore_index=True))
    errors.to_csv(out / "family_errors.csv", index=False)
    cands = [studies.logspline_label(p, s) for s in grid["knot_spacings"] for p in grid["penalties"]]
    lodo = studies.leave_one_dataset_out(errors, cands)
    lodo.to_csv(out / "lodo.csv", index=False)
    print("\nleave-one-dataset-out choice of (penalty, knot spacing): criterion = geometric mean of "
          "error / best published error")
    print(lodo.round(3).to_string(index=False))
    comp = studies.held_out_comparison(errors, lodo, default=DEFAULT_METHOD)
    comp.to_csv(out / "held_out_comparison.csv", index=False)
    print("\nper held-out family: the tuning chosen without it, the default as shipped, every published "
          "estimator and the references (mean |relative error| %, K = 1..50)")
    print(comp.round(1).to_string(index=False))
    print("\nevery tuning, per family and metric (%)")
    print(errors[errors.estimator.str.startswith("logspline")].pivot_table(
        index="estimator", columns=["metric", "family"], values="error").round(1).to_string())


def coverage_part(pops, a, out):
    t1 = time.perf_counter()
    kw = _settings(a, "coverage", sample_sizes=(20, 100, 500), user_counts=(300, None),
                   draws=1 if a.quick else 3, n_boot=200)
    kw["rng"] = SEED + 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cov = studies.interval_coverage(pops, (DEFAULT_METHOD, "mle"), progress=True, **kw)
    cov.to_csv(out / "coverage_panel.csv.gz", index=False)
    print(f"\ncoverage: {len(cov)} intervals, {time.perf_counter() - t1:.0f} s")
    fam = cov.groupby(["method", "dataset", "model"])["covered"].mean().unstack("method")
    print(fam.round(2).to_string())
    print(cov.groupby(["method", "dataset"]).agg(
        coverage=("covered", "mean"), intervals=("covered", "size"),
        median_rel_width=("rel_width", "median"),
        median_precision_ratio=("precision_ratio", "median")).round(3).to_string())
    print(cov.groupby(["method", "below_resolution"]).agg(
        coverage=("covered", "mean"), intervals=("covered", "size"),
        median_rel_width=("rel_width", "median"),
        median_precision_ratio=("precision_ratio", "median")).round(3).to_string())
    p0 = DEFAULT_PENALTY
    penalties = sorted({p0 * f for f in (1 / 30, 1 / 10, 1 / 3, 1, 3, 10, 30)})
    t2 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iv = studies.penalty_intervals(pops, penalties, knot_spacing=DEFAULT_KNOT_SPACING, progress=True, **kw)
    iv.to_csv(out / "penalty_intervals.csv.gz", index=False)
    print(f"\npenalty intervals: {time.perf_counter() - t2:.0f} s")
    choice, per = studies.choose_factor(iv, p0)
    choice.to_csv(out / "lodo_factor.csv", index=False)
    per.to_csv(out / "factor_coverage.csv", index=False)
    print(f"\ninterval factor (penalty {p0:g} x/÷ factor), leave-one-dataset-out:")
    print(choice.round(3).to_string(index=False))
    print(per.round(3).to_string(index=False))


def aaai23_part(a, out):
    t0 = time.perf_counter()
    ds = studies.PANEL_DATASETS["yelp2018"]
    kw = _settings(a, "aaai23", repeats=10 if a.quick else 100, aaai23_users=None,
                   aaai23_models=tuple(studies.AAAI23_MODELS))
    ratings = ds.ratings(SHARED)
    if kw["aaai23_users"] is not None and kw["aaai23_users"] < ratings.n_users:
        ratings = studies.panel_data._subsample_users(ratings, kw["aaai23_users"], SEED)
    models = {m: studies.AAAI23_MODELS[m] for m in kw["aaai23_models"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        R, N, sampled = studies.aaai23_ranks(ratings, models, sample_sizes=(100, 500), repeats=kw["repeats"],
                                             rng=SEED, progress=True)
        print(f"aaai23 ranks: N = {N}, M = {next(iter(R.values())).size}, {time.perf_counter() - t0:.0f} s",
              flush=True)
        for m, r in R.items():
            print(f"  {m}: Recall@10 {np.mean(r <= 10):.4f}, NDCG@10 "
                  f"{np.mean((r <= 10) / np.log2(r + 1)):.4f}, median R {np.median(r):.0f}")
        res = studies.aaai23_protocol(R, N, sampled, progress=True)
    res.to_csv(out / "aaai23_results.csv.gz", index=False)
    print(f"aaai23: {time.perf_counter() - t0:.0f} s")
    report_aaai23(res, out)


def report_aaai23(res, out):
    tab = studies.aaai23_table(res)
    tab.to_csv(out / "aaai23_table.csv", index=False)
    cell = tab.assign(v=tab["mean"].map("{:.2f}".format) + " ± " + tab["sd"].map("{:.2f}".format))
    for n in sorted(tab.n.unique()):
        print(f"\nAAAI23 protocol, yelp2018, n = {n}: mean ± sd over repeats of mean_K |relative error| (%), K <= 50")
        print(cell[cell.n == n].pivot_table(index=["metric", "model"], columns="estimator", values="v",
                                            aggfunc="first").to_string())
    win = studies.aaai23_winners(res)
    win.to_csv(out / "aaai23_winners.csv", index=False)
    print("\npick the winner: repeats (of", int(win.repeats.max()), ") where the estimated best model is the true best")
    print(win.pivot_table(index=["n", "K", "metric"], columns="estimator", values="correct").to_string())
    print(win.groupby(["n", "K", "metric"]).true_winner.first().to_string())


def scores_part(a, out):
    t0 = time.perf_counter()
    kw = _settings(a, "scores", sample_sizes=(20, 100, 500), user_counts=(300, None), draws=1 if a.quick else 3,
                   scores_datasets=tuple(studies.PANEL_DATASETS), scores_max_users=None, scores_models=None)
    labels, cap, names = kw.pop("scores_datasets"), kw.pop("scores_max_users"), kw.pop("scores_models")
    models = None if names is None else {m: studies.PANEL_MODELS[m] for m in names}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = {}
        for d in labels:
            r = studies.PANEL_DATASETS[d].ratings(SHARED)
            if cap is not None and cap < r.n_users:       # users drawn at random; the models see only them
                r = studies.panel_data._subsample_users(r, cap, SEED)
            data[d] = r
        tp = studies.tail_panel(data, models=models, rng=SEED, progress=True, **kw)
    tp.to_csv(out / "tail_panel.csv.gz", index=False)
    print(f"negative-scores candidate: {time.perf_counter() - t0:.0f} s")
    report_scores(tp, out)


def report_scores(tp, out):
    errors = studies.family_errors(tp)
    cands = ["tail_eb", "tail_eb (constant)", "tail plug-in"]
    lodo = studies.leave_one_dataset_out(errors, cands)
    print("\nnegative-scores candidate: leave-one-dataset-out choice of its form")
    print(lodo.round(3).to_string(index=False))
    comp = studies.held_out_comparison(errors, lodo, default=DEFAULT_METHOD, references=())
    comp["beats_default"] = comp.lodo_error < comp.default_error
    comp.to_csv(out / "tail_comparison.csv", index=False)
    print(comp.round(1).to_string(index=False))
    print(errors.pivot_table(index="estimator", columns=["metric", "family"], values="error").round(1).to_string())


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


def _count(text):
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1; got {text!r}")
    return v


def _ints(text):
    return tuple(_count(t) for t in text.split(","))


def _floats(text):
    v = tuple(float(t) for t in text.split(","))
    if not all(x > 0 for x in v):
        raise argparse.ArgumentTypeError(f"must be positive; got {text!r}")
    return v


def _user_counts(text):
    return tuple(None if t == "all" else _count(t) for t in text.split(","))


def _names(allowed):
    def parse(text):
        v = tuple(text.split(","))
        bad = [t for t in v if t not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"{bad} not among {list(allowed)}")
        return v
    return parse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--refresh", action="store_true", help="recompute the cached global ranks")
    ap.add_argument("--parts", default="speed,panel,coverage",
                    help=f"comma-separated subset of {','.join(PARTS)}")
    ap.add_argument("--draws", type=_count, help="draws per cell (panel, coverage, scores)")
    ap.add_argument("--sample-sizes", type=_ints, help="n values, e.g. 20,100,500")
    ap.add_argument("--user-counts", type=_user_counts, help="M values; 'all' for every user, e.g. 1000,all")
    ap.add_argument("--penalties", type=_floats, help="the tuning grid's penalties")
    ap.add_argument("--knot-spacings", type=_floats, help="the tuning grid's knot spacings")
    ap.add_argument("--repeats", type=_count, help="AAAI23 protocol: repeats")
    ap.add_argument("--aaai23-users", type=_count, help="AAAI23 protocol: users drawn at random (default all)")
    ap.add_argument("--aaai23-models", type=_names(studies.AAAI23_MODELS), help="AAAI23 protocol: models")
    ap.add_argument("--scores-datasets", type=_names(studies.PANEL_DATASETS),
                    help="negatives' scores: data sets (labels of studies.PANEL_DATASETS)")
    ap.add_argument("--scores-max-users", type=_count, help="negatives' scores: users drawn at random per data set")
    ap.add_argument("--scores-models", type=_names(studies.PANEL_MODELS), help="negatives' scores: model settings")
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    if not parts <= set(PARTS):
        ap.error(f"--parts must be a subset of {','.join(PARTS)}; got {a.parts!r}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if "speed" in parts:
        speed_part(a.quick)
    if not parts & {"panel", "coverage", "aaai23", "scores"}:
        return
    if not SHARED.exists():
        print(f"data parts skipped: {SHARED} not found")
        return
    if parts & {"panel", "coverage"}:
        pops = populations(out, a.refresh)
        if "panel" in parts:
            panel_part(pops, a, out)
        if "coverage" in parts:
            coverage_part(pops, a, out)
    if "aaai23" in parts:
        aaai23_part(a, out)
    if "scores" in parts:
        scores_part(a, out)


if __name__ == "__main__":
    main()
