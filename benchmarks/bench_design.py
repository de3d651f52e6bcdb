"""Benchmark: full-ranking precision at a twentieth of its cost, with the planner's designs.

For Recall@10 and NDCG@10, at N/n from about 100 to 10^4, on real rank distributions:
MovieLens 100K (N = 1,682, per-user N_u), the full Last.fm 2K catalogue (N = 17,632, per-user N_u)
and synthetic catalogues of 10^5 and 10^6 items whose rank distributions are real models'
distributions stretched to that N (``studies.stretch_ranks``: log R preserved), 10^4 users drawn
from them. In every cell:

1. a pilot: every user's first-stage sampled rank at n;
2. ``design.plan`` on the pilot (target: precision ratio 1.3) picks a design;
3. the design is simulated stage by stage on the same users (``studies.design_study``, >= 10 draws)
   and estimated with the default on the merged per-user sizes.

Goals: realized precision ratio <= 1.3; 95% intervals cover the users' full-ranking
truth in >= 93% of draws; mean |relative error| <= 5% where M >= 5,000, else at most half of full
ranking's own 95% half-width (relative); scoring cost <= 5% of full ranking; the planner's predicted
width within +-20% of the realized one. Also shown: the predicted precision ratio over the realized one
(what the planner decides by), the predicted cost share over the realized one, and the pilot's estimate of
the metric over the truth (far below resolution the pilot cannot see the top of P(R); an absolute width
inherits that error, a ratio mostly does not). Plus the speed goal: ``estimate`` on two-stage data with
1,000 replicates at N = 10^7, M = 10^5 under 20 s and 1 GB.

``--max-cost 0.05`` gives the planner a budget (``plan(..., max_cost=)``: the most precise design within
it when none meets the target); ``--robust`` has it judge designs by the high end of their predicted range
(``plan(..., robust=True)``); ``--only TEXT`` keeps the populations whose label contains TEXT
(comma-separated: any of them).

``--calibrate GOALS.csv ...`` runs nothing: from goal tables this benchmark wrote, the planner's ratio
prediction error leaving one dataset out (``design.RATIO_PREDICTION_SD``, ``plan(..., assurance=)``).

``--workflow replan`` evaluates the re-planning workflow instead: the ladder's first rungs
(``design.first_rungs``: to n_max / 8 of the pilot's choice, at least n -> 4n) on the users,
``plan(..., sample_sizes=)`` on the merged ranks, then the design it picks (its cost includes the rungs
when the design does not contain them).

Also, when ../shared/data has them, LightGCN's Gowalla and Yelp2018 splits (N ~ 4 x 10^4, M ~ 3 x 10^4,
per-user N_u; ALS-64, item-KNN and popularity; first stages n = 100 and 10, N/n ~ 400 and ~ 4,000): data the
planner was never developed on.

Needs ../shared/data (the synthetic part runs without it from a generated population). Usage:
    .venv/bin/python benchmarks/bench_design.py [--quick] [--draws 10] [--out DIR] [--parts goals,speed]
    .venv/bin/python benchmarks/bench_design.py --parts plan      # plan's own time, against its reference terms
    .venv/bin/python benchmarks/bench_design.py --parts windows   # the kernels' windows, against theirs
    .venv/bin/python benchmarks/bench_design.py --parts rows      # whole kernel rows, against theirs
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import resource
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from sampling_lib import experiments, studies
from sampling_lib.correct import estimate
from sampling_lib.design import candidate_designs, first_rungs, plan
from sampling_lib.sampling import Design, sample_design, sample_ranks
from sampling_lib.studies.panel_data import DENSE_ITEMS_MAX, LARGE_MODELS, PANEL_DATASETS

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
METRICS = ("recall@10", "ndcg@10")


def wanted(label, only):
    """``--only``: the label contains one of the comma-separated texts (every label without it)."""
    return only is None or any(o in label for o in only.split(","))


def populations(quick, only=None):
    """(label, global ranks, N or per-user N_u, first-stage n) of every cell (the LightGCN data sets are
    loaded and their models trained only when ``only`` keeps one of their labels)."""
    out = []
    ml, lf = SHARED / "ml-100k" / "u.data", SHARED / "lastfm-2k" / "user_artists.dat"
    base = {}
    if ml.exists():
        models = {"ease": ("ease", {"lam": 200.0}), "itemknn": ("itemknn", {"neighbors": 100}),
                  "popularity": ("popularity", {})}
        ranks, N, info = experiments.global_ranks_from_data(ml, models, rng=0, keep_models=False)
        for m, R in ranks.items():
            out.append((f"ml-100k {m}", R, info["n_candidates"], 17))
        base["ml-100k ease"] = (ranks["ease"], N)
    if lf.exists() and not quick:
        models = {"als": ("als", {"factors": 64, "iterations": 15}), "itemknn": ("itemknn", {"neighbors": 100}),
                  "popularity": ("popularity", {})}
        ranks, N, info = experiments.global_ranks_from_data(lf, models, rng=0, keep_models=False)
        for m, R in ranks.items():
            for n in (176, 18):
                out.append((f"lastfm-2k {m}", R, info["n_candidates"], n))
        base["lastfm-2k als"] = (ranks["als"], N)
    # data the planner was never developed on ("also checked on real data the project has never
    # seen"): LightGCN's Gowalla and Yelp2018 splits, N ~ 4 x 10^4, M ~ 3 x 10^4, per-user N_u
    for label in ("gowalla", "yelp2018"):
        spec = PANEL_DATASETS[label]
        if quick or not all((SHARED / f).exists() for f in spec.files):
            continue
        models = {m: LARGE_MODELS[m] for m in ("als-64", "itemknn", "popularity")}
        if not any(wanted(f"{label} {m}", only) for m in models):
            continue
        ranks, N, info = experiments.global_ranks_from_data(spec.ratings(SHARED), models, rng=0,
                                                            keep_models=False, max_dense_items=DENSE_ITEMS_MAX)
        for m, R in ranks.items():
            for n in (100, 10):
                out.append((f"{label} {m}", R, info["n_candidates"], n))
    if not base:     # no data: a generated power-law population stands in
        g = np.random.default_rng(0)
        R = np.floor(np.exp(np.minimum(g.exponential(1.6, 3000), np.log(2000)))).astype(np.int64)
        base["synthetic power law"] = (R, 2000)
    g = np.random.default_rng(1)
    for label, (R, N0) in base.items():
        for N in ((10**5,) if quick else (10**5, 10**6)):
            users = g.choice(R, size=10_000 if not quick else 5_000, replace=True)
            out.append((f"{label} stretched", studies.stretch_ranks(users, N0, N, rng=g), N, 100))
    # the same, each user's log-rank drawn from a kernel density estimate of the source's (Silverman's
    # bandwidth): 10^4 users drawn from ~10^3 repeat each source user's rank block ~10 times, so the
    # population above keeps the lumps of the small sample while its metrics are known to the precision
    # of the large one (own generator: the rows above keep their draws)
    g = np.random.default_rng(5)
    for label, (R, N0) in base.items():
        h = studies.log_rank_bandwidth(R)
        for N in ((10**5,) if quick else (10**5, 10**6)):
            users = g.choice(R, size=10_000 if not quick else 5_000, replace=True)
            out.append((f"{label} stretched KDE", studies.stretch_ranks(users, N0, N, bandwidth=h, rng=g), N, 100))
    return out


def candidates(N, n, growths):
    """plan's candidates (``designs=None``: its default) with ladders of each growth factor (``--growth``)."""
    return None if growths is None else candidate_designs(int(np.min(N)), n, growths=growths)


def replan(R, N, Nmed, n, pilot_res, max_cost=None, robust=False, growths=None, metrics=METRICS):
    """The re-planning workflow of README's 'Resolving a metric below resolution': run the ladder's first
    rungs (``design.first_rungs``: to n_max / 8 of the ladder the pilot's plan chose, at least n -> 4n for
    doubling; on the x1.5 ladder with ``--growth 1.5`` alone) on the users, plan again on the merged ranks
    (``plan(..., sample_sizes=)``).

    Returns (design, the re-plan's prediction rows of it, the extra cost share of the rungs when the
    design does not contain them, the pilot's prediction rows of the design).
    """
    g = growths[0] if growths is not None and len(growths) == 1 else 2.0
    first = pilot_res.best
    top = first.n_max if first is not None and first.kind == "ladder" else None
    rungs = Design("ladder", n, n_max=int(first_rungs(n, g, int(np.min(N)), n_max=top)[-1]), growth=g)
    r1, s1 = sample_design(R, N, rungs, rng=np.random.default_rng(4))
    res = plan(r1, Nmed, n, M=R.size, metrics=metrics, sample_sizes=s1, max_cost=max_cost, robust=robust,
               max_size=int(np.min(N)), designs=candidates(N, n, growths))
    d = res.best if res.best is not None else Design("single", n)
    # a ladder of another growth does not continue the rungs already run: it starts after stage 1 (as the
    # command line's advice says), and the rungs are paid for on top of it
    contains = d.kind == "ladder" and d.growth == rungs.growth and d.n_max >= rungs.n_max
    extra = 0.0 if contains else float(np.mean((s1 - n) / np.asarray(N, dtype=float)))
    before = pilot_res.table[pilot_res.table.design == d.describe()].set_index("metric")
    return d, res.table[res.table.chosen].set_index("metric"), extra, before


def goals_part(quick, draws, out, workflow="pilot", max_cost=None, only=None, robust=False, growths=None,
               metrics=METRICS):
    rows = []
    for label, R, N, n in populations(quick, only):
        if not wanted(label, only):
            continue
        t0 = time.time()
        Nmed = int(np.median(N)) if np.ndim(N) else int(N)
        pilot = sample_ranks(R, N, n, rng=np.random.default_rng(2))
        # max_size: every user's sets must fit in their own N_u (plan's default is N, here the median)
        res = plan(pilot, Nmed, n, M=R.size, metrics=metrics, max_cost=max_cost, robust=robust,
                   max_size=int(np.min(N)), designs=candidates(N, n, growths))
        d = res.best if res.best is not None else Design("single", n)
        pred = res.table[res.table.chosen].set_index("metric")
        extra, before = 0.0, None
        if workflow == "replan":
            d, pred, extra, before = replan(R, N, Nmed, n, res, max_cost, robust, growths, metrics)
        study = studies.design_study(R, N, d, metrics=metrics, repeats=draws, n_boot=300, rng=3)
        summ = studies.design_summary(study).set_index("metric")
        for met in metrics:
            s = summ.loc[met]
            truth = float(study[study.metric == met].truth.iloc[0])
            fhw = float(study[study.metric == met].full_halfwidth.iloc[0])
            err_goal = 0.05 if R.size >= 5000 else 0.5 * fhw / truth
            p = pred.loc[met] if met in pred.index else None
            rows.append({"population": label, "N/n": round(Nmed / n), "M": R.size, "design": d.describe(),
                         "metric": met, "truth": truth, "draws": int(s.draws), "cost_share": s.cost_share + extra,
                         "ratio": s.ratio, "coverage": s.coverage, "rel_error": s.rel_error, "error_goal": err_goal,
                         "pred_cost_over_real": (p.cost_share / s.cost_share) if p is not None else np.nan,
                         "pred_over_real": (p.halfwidth / s.halfwidth) if p is not None else np.nan,
                         "pred_ratio_over_real": (p.ratio / s.ratio) if p is not None else np.nan,
                         "estimated_ratio": s.estimated_ratio,
                         "pilot_value_over_truth": (p.value / truth) if p is not None else np.nan,
                         "range_low": (p.halfwidth_low / s.halfwidth) if p is not None else np.nan,
                         "range_high": (p.halfwidth_high / s.halfwidth) if p is not None else np.nan,
                         "pilot_pred_over_real": (before.loc[met].halfwidth / s.halfwidth
                                                  if before is not None and met in before.index else np.nan),
                         "seconds": time.time() - t0})
        print(pd.DataFrame(rows[-len(metrics):]).round(3).to_string(index=False), flush=True)
    t = pd.DataFrame(rows)
    t["meets"] = ((t.ratio <= 1.3) & (t.coverage >= 0.93) & (t.rel_error <= t.error_goal)
                  & (t.cost_share <= 0.05) & ((t.pred_over_real - 1).abs() <= 0.2))
    out.mkdir(parents=True, exist_ok=True)
    name = ("design_goals" + ("" if workflow == "pilot" else "_replan") + ("" if max_cost is None else "_budget")
            + ("_robust" if robust else "") + ("" if growths is None else "_growth")
            + ("" if tuple(metrics) == METRICS else "_" + "_".join(m.replace("@", "") for m in metrics)))
    t.to_csv(out / f"{name}.csv", index=False)
    print("\n" + t.round(3).to_string(index=False))
    return t


def dataset_of(population):
    """The dataset a population's label comes from (its stretched variants are datasets of their own)."""
    base = population.split(" ")[0]
    return base + (" stretched" if "stretched" in population else "")


def calibration_part(paths, assurance=0.9):
    """Leave one dataset out: the planner's prediction error in the precision ratio, judged on data it was not
    measured on.

    For every held-out dataset of the goal tables in ``paths`` (``design_goals*.csv``), the SD of
    log(realized / predicted ratio) per metric over the *other* datasets' cells, and how many of the held-out
    cells' realized ratios lie within the margin exp(z SD) of their prediction (z the normal quantile of
    ``assurance``): a margin measured on the other datasets that holds for about ``assurance`` of the
    held-out cells carries over. Prints the table and returns it.
    """
    from scipy import stats

    z = stats.norm.ppf(assurance)
    rows = []
    for path in paths:
        t = pd.read_csv(path)
        t["dataset"] = t.population.map(dataset_of)
        t["log_error"] = -np.log(t.pred_ratio_over_real)          # log(realized / predicted)
        for held in t.dataset.unique():
            for met, g in t.groupby("metric", sort=False):
                other, test = g[g.dataset != held], g[g.dataset == held]
                sd = float(other.log_error.std(ddof=1))
                rows.append({"table": str(path), "held out": held, "metric": met, "cells": len(test),
                             "SD of the others": sd, "margin": float(np.exp(z * sd)),
                             "within the margin": int((test.log_error <= z * sd).sum()),
                             "largest log error": float(test.log_error.max())})
    out = pd.DataFrame(rows)
    print(out.round(4).to_string(index=False))
    tot = out.groupby(["table", "metric"], sort=False)[["cells", "within the margin"]].sum()
    print(f"\nheld-out cells within the margin (assurance {assurance}):\n{tot.to_string()}")
    return out


def speed_part(out, repeats=2):
    """estimate on two-stage (ladder) data, 1,000 replicates, N = 10^7, M = 10^5: seconds and peak RSS."""
    N, M = 10**7, 10**5
    g = np.random.default_rng(0)
    R = np.floor(np.exp(np.minimum(g.exponential(7.0, M), np.log(N)))).astype(np.int64)
    d = Design("ladder", 100, n_max=3_200_000)
    r, s = sample_design(R, N, d, rng=1)
    times = []
    for k in range(repeats):
        t0 = time.perf_counter()
        t = estimate(r, N, None, METRICS, sample_sizes=s, n_boot=1000, rng=k)
        times.append(time.perf_counter() - t0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"speed: {d.describe()}, N = {N:,}, M = {M:,}, cost {s.mean() / N:.2%}: estimate with 1,000 "
          f"replicates {min(times):.1f} s (best of {repeats}; all {[round(x, 1) for x in times]}), "
          f"peak RSS {rss:.0f} MB; recall@10 {t.estimate[0]:.4f} [{t.ci_low[0]:.4f}, {t.ci_high[0]:.4f}], "
          f"truth {np.mean(R <= 10):.4f}")


def _reference_binom_run(start, width, m, p):
    """The binomial running terms as plan computed them before (the first term in full, then the logarithm of
    the ratio of successive terms per term, summed): the reference of :func:`plan_part`."""
    from scipy import special

    s = start[:, None]
    x = s + np.arange(width - 1)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.log(np.maximum(m - x, 0.0) / (x + 1.0)) + (np.log(p) - np.log1p(-p))
        log_comb = special.gammaln(m + 1.0) - special.gammaln(s + 1.0) - special.gammaln(np.maximum(m - s, 0.0) + 1.0)
        first = np.where(s <= m, log_comb + special.xlogy(s, p) + special.xlog1py(m - s, -p), -np.inf)
        out = np.empty((start.size, width))
        out[:, :1] = first
        if width > 1:
            out[:, 1:] = first + np.cumsum(step, axis=1)
    return np.nan_to_num(out, nan=-np.inf)


def plan_part(repeats=3):
    """``plan`` on a pilot (2,000 users, n = 20, a Beta(0.35) population; N = 3,000 and 20,000, both schemes):
    the library's count-law terms (a table of log C(m, x) or of log k!) against the reference terms (a
    logarithm per term and a running sum), side by side in one process, best of ``repeats``; the two
    tables must agree to 1e-8 relative."""
    from sampling_lib.design import _law, plan
    from sampling_lib.rankdist import draw_global_ranks, synthetic_models
    from sampling_lib.sampling import sample_ranks

    from sampling_lib.kernels import _laws

    def by_ratios(start, width, good, bad, m):
        good, bad, m, start = (np.reshape(a, (-1, 1)) for a in (good, bad, m, start))
        return _laws._log_hypergeom_window_by_ratios(start, width, good, bad, m)

    routes = {"library": (_law.log_binom_window, _law.log_hypergeom_window),
              "reference": (_reference_binom_run, by_ratios)}
    for N in (3000, 20000):
        R = draw_global_ranks(synthetic_models(N)["beta_a0.35"], 2000, rng=1)
        for scheme in ("binomial", "hypergeometric"):
            pilot = sample_ranks(R, N, 20, rng=3, scheme=scheme)
            times, tables = {}, {}
            try:
                for _ in range(repeats):
                    for name, (b, h) in routes.items():
                        _law.log_binom_window, _law.log_hypergeom_window = b, h
                        t0 = time.perf_counter()
                        res = plan(pilot, N, 20, metrics=list(METRICS), target_ratio=1.5, scheme=scheme)
                        times.setdefault(name, []).append(time.perf_counter() - t0)
                        tables[name] = res.table.select_dtypes("number").to_numpy(float)
            finally:
                _law.log_binom_window, _law.log_hypergeom_window = routes["library"]
            a, b = tables["library"], tables["reference"]
            diff = float(np.nanmax(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))
            lib, ref = min(times["library"]), min(times["reference"])
            print(f"plan, N = {N:,}, {scheme}: {lib:.2f} s against {ref:.2f} s for the reference terms "
                  f"({ref / lib:.2f}x); tables within {diff:.1e} relative")
            assert diff <= 1e-8, diff


def _reference_window_pmf(N, n, R, first, width, scheme="binomial"):
    """window_pmf as the kernels computed it before they shared the planner's terms (binomial: three
    look-ups and two special functions per term; hypergeometric: the same four look-ups with one total and
    one draw count for all rows): the reference of :func:`windows_part`."""
    from scipy import special

    from sampling_lib.kernels import _laws

    R = np.asarray(R, dtype=np.int64)[:, None]
    d = n - 1
    x = np.asarray(first, dtype=np.int64)[:, None] + np.arange(width)[None, :]
    if scheme == "binomial":
        lf = _laws.log_factorials(d)
        off = (x < 0) | (x > d)
        xc = np.clip(x, 0, d)
        p = (R - 1) / (N - 1.0)
        P = np.exp(lf[d] - lf[xc] - lf[d - xc] + special.xlogy(xc, p) + special.xlog1py(d - xc, -p))
        P[off] = 0.0
        return P
    lf, lfi = _laws.log_factorials(N), _laws._log_factorials_inf(N)
    G, B = R - 1, N - R
    row = lf[G] + lf[B] - (lf[N - 1] - lf[d] - lf[N - 1 - d])
    x = x.astype(np.int32) + 1
    lp = np.take(lfi, np.maximum(x, 0))
    lp += np.take(lfi, np.maximum((d + 2) - x, 0))
    lp += np.take(lfi, np.maximum((G + 2).astype(np.int32) - x, 0))
    lp += np.take(lfi, np.maximum((B - d).astype(np.int32) + x, 0))
    np.subtract(row, lp, out=lp)
    return np.exp(lp, out=lp)


def windows_part(repeats=5):
    """The kernels' Bernstein windows (``window_pmf``, on the hot path of the rank grid's TV bounds and of
    ``kernel_bin_masses``): the library's terms, shared with the planner, against the reference terms they
    replaced, side by side in one process, best of ``repeats``; the grids' bounds must agree to 1e-12."""
    from sampling_lib.kernels import _grid, _laws, kernel_bin_masses, rank_grid, rank_grid_tv

    routes = {"library": _laws.window_pmf, "reference": _reference_window_pmf}
    for N, n in ((100_000, 4096), (1_000_000, 20_000)):
        for scheme in ("binomial", "hypergeometric"):
            g = rank_grid(N, n, scheme=scheme)
            R = np.unique(np.linspace(1, N, 2000).astype(np.int64))
            lo = np.arange(1, n + 1, 37)
            hi = np.minimum(lo + 36, n)
            times, out = {}, {}
            try:
                for _ in range(repeats):
                    for name, f in routes.items():
                        _grid.window_pmf = _laws.window_pmf = f
                        t0 = time.perf_counter()
                        tv = rank_grid_tv(N, n, g.lo, g.hi, g.rep, scheme)
                        masses = kernel_bin_masses(N, n, R, lo, hi, scheme)
                        times.setdefault(name, []).append(time.perf_counter() - t0)
                        out[name] = np.r_[tv, masses.ravel()]
            finally:
                _grid.window_pmf = _laws.window_pmf = routes["library"]
            diff = float(np.max(np.abs(out["library"] - out["reference"])))
            lib, ref = min(times["library"]), min(times["reference"])
            print(f"windows, N = {N:,}, n = {n:,}, {scheme} ({g.lo.size} grid bins, {R.size} rows x {lo.size} "
                  f"bins): {lib:.3f} s against {ref:.3f} s for the reference terms ({ref / lib:.2f}x); "
                  f"within {diff:.1e}")
            assert diff <= 1e-12, diff


def _reference_log_kernel_rows(N, n, R, scheme="hypergeometric"):
    """log_kernel_rows' hypergeometric rows as computed before (four logarithms per ratio, scipy's
    logsumexp per row): the reference of :func:`rows_part`."""
    from scipy import special

    R = np.asarray(R, dtype=float)[:, None]
    x = np.arange(n, dtype=float)[None, :]
    G, B, d = R - 1.0, N - R, n - 1.0
    lo, hi = np.maximum(0.0, d - B), np.minimum(d, G)
    inside = (x >= lo) & (x <= hi)
    step = (x > lo) & inside
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(G - x + 1.0) + np.log(d - x + 1.0) - np.log(x) - np.log(B - d + x)
    logw = np.where(inside, np.cumsum(np.where(step, ratio, 0.0), axis=1), -np.inf)
    return logw - special.logsumexp(logw, axis=1, keepdims=True)


def rows_part(repeats=5):
    """Whole hypergeometric kernel rows (``kernels.log_kernel_rows``: the rank grid's TV bounds below
    n = 1,024, the grid kernels, every per-group fit) against the reference above, side by side in one
    process, best of ``repeats``, on 4,000 rows spread over 1..N; the probabilities must agree to 1e-11."""
    from sampling_lib.kernels import log_kernel_rows

    for N, n in ((3706, 100), (100_000, 100), (10**7, 1000)):
        R = np.unique(np.linspace(1, N, 4000).astype(np.int64))
        times, out = {}, {}
        for _ in range(repeats):
            for name, f in (("library", log_kernel_rows), ("reference", _reference_log_kernel_rows)):
                t0 = time.perf_counter()
                out[name] = f(N, n, R, "hypergeometric")
                times.setdefault(name, []).append(time.perf_counter() - t0)
        a, b = np.exp(out["library"]), np.exp(out["reference"])
        big = b > 1e-200
        diff = float(np.max(np.abs(a[big] - b[big]) / b[big]))
        lib, ref = min(times["library"]), min(times["reference"])
        print(f"rows, N = {N:,}, n = {n:,}, hypergeometric, {R.size:,} rows: {lib * 1e3:.1f} ms against "
              f"{ref * 1e3:.1f} ms for the reference ({ref / lib:.2f}x); within {diff:.1e} relative")
        assert diff <= 1e-11 and ((a > 0) == (b > 0)).all(), diff


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--parts", default="goals,speed")
    ap.add_argument("--workflow", choices=["pilot", "replan"], default="pilot",
                    help="pilot: the design plan picks on the first stage; replan: the ladder's first rungs "
                         "(design.first_rungs: to n_max / 8 of the pilot's ladder, at least n -> 4n), then plan "
                         "again on the merged ranks (README's re-planning)")
    ap.add_argument("--max-cost", type=float, default=None,
                    help="the planner's budget (share of full ranking, e.g. 0.05): plan(..., max_cost=)")
    ap.add_argument("--only", default=None,
                    help="only the populations whose label contains this text (or one of these, comma-separated)")
    ap.add_argument("--calibrate", nargs="+", default=None, metavar="GOALS.csv",
                    help="instead of running: the planner's ratio prediction error, leave one dataset out, from "
                         "goal tables this benchmark wrote (calibration_part)")
    ap.add_argument("--robust", action="store_true",
                    help="the planner judges designs by the high end of their predicted range: plan(..., robust=True)")
    ap.add_argument("--metrics", nargs="+", default=list(METRICS), metavar="METRIC",
                    help="the planner's target metrics, each judged (default recall@10 ndcg@10, the goals'); "
                         "e.g. ap@10 recall@5 ndcg@20 to measure its ratio prediction on other metrics and K "
                         "(design.RATIO_PREDICTION_SD; MRR@K is AP@K with one relevant item)")
    ap.add_argument("--growth", nargs="+", type=float, default=None, metavar="G",
                    help="the planner's ladders grow by each of these factors (default 2, TORS24's doubling): "
                         "plan(..., designs=candidate_designs(..., growths=))")
    args = ap.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    if args.calibrate:
        calibration_part(args.calibrate)
        return
    parts = set(args.parts.split(","))
    if "goals" in parts:
        goals_part(args.quick, args.draws, Path(args.out), args.workflow, args.max_cost, args.only, args.robust,
                   args.growth, tuple(args.metrics))
    if "speed" in parts:
        speed_part(Path(args.out))
    if "windows" in parts:
        windows_part()
    if "rows" in parts:
        rows_part()
    if "plan" in parts:
        plan_part()


if __name__ == "__main__":
    main()
