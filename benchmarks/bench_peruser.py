"""Benchmark: per-user candidate counts N_u against one N and against the per-user brute force.

Case 3: 10^5 users with 2,295 distinct N_u, the default with 1,000 replicates,
against one N, against its bootstrap drawn on the exact cells (coarse draws off) and against exact
refits of every replicate (surrogate and one-step replicates off).

Cases (side by side in one process, best of 3 where cheap):

1. MovieLens-100K-like: N = 1682, M = 943 users, N_u = 1682 - |history_u| with the
   histories of ml-100k when the file is present (else a synthetic history), n = 100.
   * the per-user EM (100 steps) of ``mle`` against the literal per-user EM (one
     kernel row per user, O(M N) per step; the reference) -- time ratio and max |diff|;
   * ``mle`` and the default ``logspline`` with per-user N against one N;
   * ``estimate`` with 1,000 bootstrap replicates, per-user N against one N.
2. A large catalogue, N = 10^6 items, M = 20,000 users, N_u = N - |history| with
   histories up to 2,000 items: the default ``logspline`` (compressed rank grid) with
   per-user N against one N; ``mle`` refuses with a clear message (its exact kernels
   would need N x columns memory).

4. ``--method bv`` and ``mn`` with per-user N (fitted per group of N_u: 20,000 users, about 2,300
   groups) against one N, 1,000 replicates.

5. (est-speed goal 2) The issue's NCF ml-1m case without its file: a stand-in of 6,040 users, N = 3,706,
   N_u = N - h_u shaped like ml-1m's rating counts (2,295 distinct N_u), n = 100 without replacement,
   3 models, 6 metrics, 1,000 replicates: every registered method, per-user N against one N; the default
   on 2 models x 2,000 users, per-user N against one N.

7. The replicates that case 5's per-user-N methods compute without refitting (`mes`'s pooled replicates,
   MN's one-step in its prior, BV's nodes in log N, the linear CLS) against exact refits on the same stand-in and the
   same draws (model a, 3 draws): the largest |difference| per metric in units of the bootstrap standard
   deviation (from 1,000 replicates), and the time of one exact refit.

6. (est-speed goal 1) The default on merged multi-stage ranks: N = 10^5, a ladder 100 -> 19,200 sharing
   negatives, 3 models x 20,000 and x 10^5 users (thousands of (n, r) cells per model), 1,000 replicates;
   the corrected one-step replicates against exact refits.

Usage: .venv/bin/python benchmarks/bench_peruser.py [--quick] [--cases 1,2,3,4,5,6] [--methods mle,bv]
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import time
from pathlib import Path

import numpy as np

from sampling_lib.correct import estimate
from sampling_lib.estimators import get_estimator
from sampling_lib.kernels import log_kernel_rows
from sampling_lib.sampling import sample_ranks
from _timing import best_of

ML100K = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ml-100k" / "u.data"


def literal_per_user_em(r, Nu, n, iters=100):
    """The per-user EM written out (AAAI21 eq 20 with user u's kernel P(r_u | R; N_u), R <= N_u)."""
    Nmax = int(Nu.max())
    K = np.zeros((r.size, Nmax))
    for u in range(r.size):
        K[u, : Nu[u]] = np.exp(log_kernel_rows(int(Nu[u]), n, np.arange(1, Nu[u] + 1)))[:, r[u] - 1]
    pi = np.full(Nmax, 1.0 / Nmax)
    for _ in range(iters):
        pi = pi * (K / (K @ pi)[:, None]).mean(axis=0)
        pi /= pi.sum()
    return pi


def histories(M, rng):
    if ML100K.exists():
        d = np.loadtxt(ML100K, dtype=np.int64, usecols=(0, 1))
        h = np.bincount(d[:, 0])[1:] - 1           # leave-one-out: one held-out item per user
        return "ml-100k histories", h[:M]
    return "synthetic histories", np.minimum(1600, rng.geometric(0.01, M) + 18)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer replicates and a smaller case 2")
    ap.add_argument("--cases", default="1,2,3,4,5,6,7", help="which cases to run (comma-separated)")
    ap.add_argument("--methods", default=None, help="case 5: the methods to time (comma-separated; default all)")
    args = ap.parse_args()
    cases = set(args.cases.split(","))
    rng = np.random.default_rng(2024)
    n = 100

    if "1" in cases:
        case1(rng, n, args.quick)
    if "2" in cases:
        case2(rng, n, args.quick)
    if "3" in cases:
        case3(rng, args.quick)
    if "4" in cases:
        case4(np.random.default_rng(4), args.quick)
    if "5" in cases:
        case5(args.quick, args.methods)
    if "6" in cases:
        case6(args.quick)
    if "7" in cases:
        case7(args.quick, args.methods)


def case1(rng, n, quick):
    N, M = 1682, 943
    src, h = histories(M, rng)
    Nu = N - h
    R = np.minimum(Nu, np.ceil(np.exp(rng.uniform(0, np.log(N), M))).astype(np.int64))
    r = sample_ranks(R, Nu, n, rng=1)
    print(f"== case 1: N = {N}, M = {M}, n = {n}, N_u from {src}: {Nu.min()}..{Nu.max()}, "
          f"{np.unique(Nu).size} distinct ==")
    t_lit, ref = best_of(lambda: literal_per_user_em(r, Nu, n), 1)
    mle = get_estimator("mle", n_items_tol=0.0)
    t_ours, ours = best_of(lambda: mle(r, Nu, n))
    print(f"mle, 100 EM steps: per-user (ours) {t_ours:.3f} s, literal per-user EM {t_lit:.3f} s, "
          f"ratio {t_lit / t_ours:.1f}x, max |diff| {np.abs(ours - ref).max():.1e}")
    for name in ("mle", "logspline"):
        est = get_estimator(name)
        t1, _ = best_of(lambda: est(r, Nu, n))
        t0, _ = best_of(lambda: est(r, int(round(Nu.mean())), n))
        print(f"{name}: per-user N {t1:.3f} s, one N {t0:.3f} s, ratio {t1 / t0:.1f}")
    B = 200 if quick else 1000
    for name in ("mle", "logspline"):
        t1, _ = best_of(lambda: estimate(r, Nu, n, ["recall@10", "ndcg@10"], method=name, n_boot=B,
                                         rng=0), 1)
        t0, _ = best_of(lambda: estimate(r, int(round(Nu.mean())), n, ["recall@10", "ndcg@10"],
                                         method=name, n_boot=B, rng=0), 1)
        print(f"estimate({name}, n_boot={B}): per-user N {t1:.1f} s, one N {t0:.1f} s, "
              f"ratio {t1 / t0:.1f}")


def case2(rng, n, quick):
    N, M = 10**6, (5000 if quick else 20000)
    h = np.minimum(2000, rng.geometric(0.005, M))
    Nu = N - h
    R = np.minimum(Nu, np.ceil(np.exp(rng.uniform(0, np.log(N), M))).astype(np.int64))
    r = sample_ranks(R, Nu, n, rng=2)
    print(f"== case 2: N = {N:,}, M = {M:,}, n = {n}, {np.unique(Nu).size} distinct N_u ==")
    est = get_estimator("logspline")
    t1, w1 = best_of(lambda: est(r, Nu, n), 1)
    t0, w0 = best_of(lambda: est(r, N, n), 1)
    rec = lambda w, K: float(w[:K].sum())  # noqa: E731
    print(f"logspline: per-user N {t1:.2f} s, one N {t0:.2f} s, ratio {t1 / t0:.1f}; "
          f"recall@1000 per-user {rec(w1, 1000):.4f}, one N {rec(w0, 1000):.4f}, "
          f"truth {np.mean(R <= 1000):.4f}")
    t = time.perf_counter()
    try:
        get_estimator("mle")(r, Nu, n)
    except MemoryError as exc:
        print(f"mle: refused in {time.perf_counter() - t:.2f} s: {exc}")


def case3(rng, quick):
    """The goal: 10^5 users x 10 models with per-user N under 10 s."""
    M, n = (20_000 if quick else 100_000), 100
    Nu = rng.integers(1393, 3688, M)           # the N_u range of NCF's ml-1m file
    scales = np.linspace(1.5, 3.5, 10)         # 10 models: log-ranks exponential with these scales
    Rs = [np.minimum(Nu, np.floor(np.exp(np.minimum(rng.exponential(s_, M), 20.0))).astype(np.int64) + 1)
          for s_ in scales]
    rs = [sample_ranks(R_, Nu, n, rng=3 + k) for k, R_ in enumerate(Rs)]
    R, r = Rs[-3], rs[-3]                       # the one model of the exact reference (scale 2.83)
    print(f"== case 3: M = {M:,}, n = {n}, N_u {Nu.min()}..{Nu.max()} ({np.unique(Nu).size} distinct), 10 models, "
          f"recall@10 and ndcg@10, 1,000 replicates ==")

    def ten(items):
        return [estimate(x, items, n, ["recall@10", "ndcg@10"], n_boot=1000, rng=0) for x in rs]

    # one-time imports (the bootstrap's interval module, scipy's sparse routines) before either timing
    estimate(rs[0][:3000], Nu[:3000], n, ["recall@10"], n_boot=20, rng=0)

    t10, _ = best_of(lambda: ten(Nu), 1)
    t10_0, _ = best_of(lambda: ten(int(np.median(Nu))), 1)
    print(f"10 models: per-user N {t10:.1f} s, one N {t10_0:.1f} s, ratio {t10 / t10_0:.1f} (goal: per-user N "
          f"under 10 s)")
    t1, e1 = best_of(lambda: estimate(r, Nu, n, ["recall@10", "ndcg@10"], n_boot=1000, rng=0), 1)
    t0, _ = best_of(lambda: estimate(r, int(np.median(Nu)), n, ["recall@10", "ndcg@10"], n_boot=1000, rng=0), 1)
    print(f"one model: per-user N {t1:.1f} s, one N {t0:.1f} s, ratio {t1 / t0:.1f}")
    # the default with its bootstrap drawn on the exact cells (coarse draws off): the same draws as the
    # exact refits below, and the reference of the coarse draws (independent draws: their interval ends
    # differ by the bootstrap's Monte Carlo error, ~0.1 half-widths at 1,000 replicates)
    from sampling_lib.estimators import _logspline_boot as LB
    keep_share = LB.COARSE_DRAW_MAX_SHARE
    LB.COARSE_DRAW_MAX_SHARE = 0.0
    try:
        t1x, e1x = best_of(lambda: estimate(r, Nu, n, ["recall@10", "ndcg@10"], n_boot=1000, rng=0), 1)
    finally:
        LB.COARSE_DRAW_MAX_SHARE = keep_share
    cols = ["estimate", "ci_low", "ci_high"]
    hw1 = (e1x["ci_high"] - e1x["ci_low"]).to_numpy()[:, None] / 2
    dx = np.abs(e1[cols].to_numpy() - e1x[cols].to_numpy()) / hw1
    print(f"one model, bootstrap drawn on the exact cells: {t1x:.1f} s; coarse against exact draws: interval "
          f"ends differ by at most {dx.max():.3f} half-widths (independent draws), se ratio "
          f"{(e1['se'] / e1x['se']).min():.3f}..{(e1['se'] / e1x['se']).max():.3f}")
    # the same call with the cells path's surrogate switched off: the exact solver from the one-N warm
    # start and an exact refit of every bootstrap replicate (the code before the surrogate and the
    # one-step replicates, with the same kernel and Hessian code): the reference of their gain
    from sampling_lib.estimators import _logspline_cells as LC
    keep = LC.SURROGATE_MIN_CELLS
    LC.SURROGATE_MIN_CELLS = 10**12
    L._CELLS_CACHE.clear()
    try:
        t2, e2 = best_of(lambda: estimate(r, Nu, n, ["recall@10", "ndcg@10"], n_boot=1000, rng=0), 1)
    finally:
        LC.SURROGATE_MIN_CELLS = keep
        L._CELLS_CACHE.clear()
    diff = float(np.max(np.abs(e1x[cols].to_numpy() - e2[cols].to_numpy())))
    hw = float(np.min(e2["ci_high"] - e2["ci_low"]) / 2)
    print(f"per-user N with exact refits (no surrogate, no one-step replicates): {t2:.1f} s ({t2 / t1:.1f}x the "
          f"default's time); max |difference| of estimate and interval ends from the default on the same "
          f"(exact-cell) draws {diff:.1e} ({diff / hw:.1%} of the smallest half-width); truth recall@10 "
          f"{np.mean(R <= 10):.4f}, "
          f"estimate {e1['estimate'].iloc[0]:.4f} [{e1['ci_low'].iloc[0]:.4f}, {e1['ci_high'].iloc[0]:.4f}]")

    # the replicates themselves, same draws (200), per prior (the default's penalty and the two
    # alternatives of the below-resolution union): the one-step values alone and corrected by the
    # surrogate's one-step error, against exact refits, in bootstrap standard deviations
    from sampling_lib.counts import cells
    st = cells(r, np.full(M, n), Nu)
    Cb = np.random.default_rng(1).multinomial(M, st.counts / M, 200).astype(float)
    F = np.c_[np.ones(10), 1 / np.log2(1 + np.arange(1, 11))]
    for pen in (L.DEFAULT_PENALTY / 10, L.DEFAULT_PENALTY, L.DEFAULT_PENALTY * 10):
        _, (beta, grid, K, sur, beta_s) = L.counts_fit_state(st.n_items, st.sizes, st.ranks, st.counts,
                                                             penalty=pen)
        P = L.penalty_matrix(grid.B.shape[1], pen)
        _, one, _ = LB.one_step_replicates(Cb, st.counts, K, grid, P, beta, F)
        LB._ONE_STEP_CACHE.clear()
        ta = time.perf_counter()
        cor = LB.logspline_cells_replicates(Cb, st.n_items, st.sizes, st.ranks, beta, F, penalty=pen,
                                            setup=(grid, K, sur, beta_s), counts=st.counts)
        ta = time.perf_counter() - ta
        tb = time.perf_counter()
        exact = LB.logspline_cells_replicates(Cb, st.n_items, st.sizes, st.ranks, beta, F, penalty=pen,
                                              setup=(grid, K, sur, beta_s))
        tb = time.perf_counter() - tb
        # the same draws summed into the surrogate's cells (coarse draws): the variance they leave out,
        # measured, against the share computed from the fit (within_cell_share)
        LB._ONE_STEP_CACHE.clear()
        coarse = LB.logspline_cells_replicates(sur.coarse_counts(Cb), st.n_items, st.sizes, st.ranks, beta, F,
                                               penalty=pen, setup=(grid, K, sur, beta_s), counts=st.counts,
                                               coarse=True)
        pre = LB.one_step_record(st.counts, K, grid, P, beta, F)
        share = LB.within_cell_share(pre, st.counts, sur.index, sur.n_coarse)
        LB._ONE_STEP_CACHE.clear()
        sd = exact.std(axis=0)
        print(f"coarse draws, penalty {pen:g}: variance left out, measured "
              f"{np.array2string((coarse - cor).var(axis=0) / cor.var(axis=0), precision=4)}, computed "
              f"{np.array2string(share, precision=4)} (bound {LB.COARSE_DRAW_MAX_SHARE})")
        ends = np.percentile(cor, [2.5, 97.5], axis=0) - np.percentile(exact, [2.5, 97.5], axis=0)
        print(f"replicates, penalty {pen:g}: max |one-step - exact| {np.max(np.abs(one - exact) / sd):.3f} SD, "
              f"corrected {np.max(np.abs(cor - exact) / sd):.3f} SD (percentile ends "
              f"{np.max(np.abs(ends) / sd):.3f} SD); {ta:.2f} s against {tb:.2f} s for exact refits")


def ml1m_like(rng, M=6040, N=3706):
    """An NCF ml-1m stand-in: N_u = N - h_u with h_u shaped like MovieLens-1M's per-user rating counts.

    The issue's figures: min 20, median ~96, max ~2,300 ratings, about 2,300 distinct N_u among
    6,040 users. Half the users have 20..96 ratings (log-uniform: at most 77 distinct values), so
    ~2,300 distinct values need nearly every count of 97..2,314 once among the other half; the rest
    of that half are log-uniform in 97..2,314 (the heavy tail's bulk near its start). Real ml-1m
    counts have a heavier tail and fewer distinct values (the per-user cost grows with the distinct
    N_u, so this is the harder case)."""
    lo = np.floor(np.exp(rng.uniform(np.log(20), np.log(97), M // 2))).astype(np.int64)
    every = np.arange(97, 2315)
    rest = np.floor(np.exp(rng.uniform(np.log(97), np.log(2315), M - lo.size - every.size))).astype(np.int64)
    h = rng.permutation(np.r_[lo, every, rest])
    return N - h


def power_law_ranks(rng, Nu, a):
    """Global ranks R_u in 1..N_u from P(R) proportional to R^-a (continuous inverse CDF, truncated at N_u)."""
    u = rng.uniform(size=Nu.size)
    if a == 1.0:                                   # log-uniform
        return np.minimum(Nu, np.floor(np.exp(u * np.log(Nu + 1.0)))).astype(np.int64)
    top = (Nu + 1.0) ** (1.0 - a)
    return np.minimum(Nu, np.floor((1.0 + u * (top - 1.0)) ** (1.0 / (1.0 - a)))).astype(np.int64)


ML1M_METRICS = ["recall@5", "recall@10", "recall@20", "ndcg@5", "ndcg@10", "ndcg@20"]


def ml1m_case_data(seed=5):
    """The case-5 population: 6,040 users, N = 3,706, N_u = N - h_u (ml1m_like), n = 100 without
    replacement, 3 models with power-law global ranks (exponents 0.8, 0.9, 1.1)."""
    rng = np.random.default_rng(seed)
    Nu = ml1m_like(rng)
    Rs = {m: power_law_ranks(rng, Nu, a) for m, a in zip("abc", (0.8, 0.9, 1.1))}
    rs = {m: sample_ranks(R, Nu, 100, scheme="hypergeometric", rng=seed + k) for k, (m, R) in enumerate(Rs.items())}
    return Nu, Rs, rs


def case5(quick, methods=None):
    """est-speed goal 2 (the issue's NCF ml-1m case): every registered method on 6,040 users x 3 models,
    6 metrics, 1,000 replicates, per-user N_u (ml1m_like) against one N; and the default with per-user N
    against one N on 2 models x 2,000 users."""
    from sampling_lib.estimators import METHODS
    Nu, _, rs = ml1m_case_data()
    B = 100 if quick else 1000
    print(f"== case 5: ml-1m stand-in, M = {Nu.size:,}, N = 3,706, N_u {Nu.min()}..{Nu.max()} "
          f"({np.unique(Nu).size} distinct, median history {int(np.median(3706 - Nu))}), n = 100 "
          f"(hypergeometric), 3 models, {len(ML1M_METRICS)} metrics, {B:,} replicates ==")
    estimate(rs["a"][:500], Nu[:500], 100, ["recall@10"], n_boot=20, rng=0, scheme="hypergeometric")
    for meth in (METHODS if methods is None else methods.split(",")):
        row = [meth]
        for items, label in ((Nu, "per-user N"), (3706, "one N")):
            t = time.perf_counter()
            try:
                for r in rs.values():
                    estimate(r, items, 100, ML1M_METRICS, method=meth, n_boot=B, rng=0, scheme="hypergeometric")
                row.append(f"{label} {time.perf_counter() - t:.1f} s")
            except (ValueError, MemoryError) as exc:
                row.append(f"{label}: refused ({type(exc).__name__}: {str(exc)[:80]})")
        print(" | ".join(row), flush=True)
    # the default's per-user cost against one N (the issue: 2 models x 2,000 users, 12.1 s against 4.7 s)
    sub = np.arange(2000)
    runs = {}
    for items, label in ((Nu[sub], "per-user N"), (3706, "one N")):
        runs[label], _ = best_of(lambda: [estimate(rs[m][sub], items, 100, ML1M_METRICS, n_boot=1000, rng=0,
                                                   scheme="hypergeometric") for m in "ab"], 2)
    print(f"default, 2 models x 2,000 users: per-user N {runs['per-user N']:.2f} s, one N {runs['one N']:.2f} s, "
          f"ratio {runs['per-user N'] / runs['one N']:.2f} (goal: within 2x)")


def case7(quick, methods=None):
    """case 5's per-user methods without refits: their replicates against exact refits on the same draws."""
    from sampling_lib import estimators as E
    from sampling_lib.counts import rank_counts
    from sampling_lib.estimators._bootstrap import refit_replicates
    from sampling_lib.metrics import metric_values

    Nu, _, rs = ml1m_case_data()
    st = rank_counts(rs["a"], 100, n_items=Nu)
    F = np.stack([metric_values(m, int(Nu.max()))[:20] for m in ML1M_METRICS], axis=1)
    g = np.random.default_rng(7)
    B = 100 if quick else 1000
    Cb = g.multinomial(st.M, st.counts / st.M, size=B).astype(float)
    print(f"== case 7: one-step / linear replicates against exact refits, ml-1m stand-in model a, "
          f"{len(ML1M_METRICS)} metrics, SD from {B:,} replicates, 3 refitted draws ==")
    names = ("mes", "bv_mle", "bv_mes", "mn_mle", "mn_mes", "cls") if methods is None else methods.split(",")
    for name in names:
        opts = {"max_rank": 20} if name == "cls" else {}
        fit = E.build_estimators([name], scheme="hypergeometric", **opts)[name].fit_counts(st, None, F)
        one = fit.replicates(Cb)
        sd = one.std(axis=0, ddof=1)
        t = time.perf_counter()
        exact = refit_replicates(fit, Cb[:3])
        dt = (time.perf_counter() - t) / 3
        err = np.abs(one[:3] - exact).max(axis=0) / sd
        print(f"{name}: max |replicate - refit| / SD per metric {np.array2string(err, precision=3)}; "
              f"one exact refit {dt:.1f} s", flush=True)


LADDER = np.array([100, 200, 400, 800, 1600, 3200, 6400, 12800, 19200])
#: a user ranked below the top of its set goes on to the next rung with this chance (at rank 1 always)
LADDER_GO_ON = 0.75


def ladder_case_data(M, seed=6, N=100_000):
    """Merged ranks of a nested design at N = 10^5: 3 models sharing negatives, power-law global ranks
    (exponents 0.9, 0.8, 1.0), sets growing along the ladder 100 -> 19,200 (the new items drawn without
    replacement from those not yet in the set): a user at sampled rank 1 always goes on, any other with
    chance LADDER_GO_ON (a rule on the observed ranks and independent coins: ignorable, the kernel at the
    final (n_u, r_u) is the likelihood). About a sixth of the users stop at 100 and a third reach 19,200,
    as in the merged ranks of the brief's three-model evaluation. Returns {model: (sampled ranks, sizes)}."""
    rng = np.random.default_rng(seed)
    out = {}
    for m, a in zip("abc", (0.9, 0.8, 1.0)):
        R = power_law_ranks(rng, np.full(M, N), a)
        above = rng.hypergeometric(R - 1, N - R, LADDER[0] - 1)          # sampled items ranked above
        size = np.full(M, LADDER[0])
        live = np.ones(M, dtype=bool)
        for nxt in LADDER[1:]:
            live &= (above == 0) | (rng.uniform(size=M) < LADDER_GO_ON)
            j = np.flatnonzero(live)
            good = R[j] - 1 - above[j]
            bad = (N - R[j]) - (size[j] - 1 - above[j])
            above[j] += rng.hypergeometric(good, bad, nxt - size[j])
            size[j] = nxt
        out[m] = (above + 1, size)
    return out


def case6(quick):
    """est-speed goal 1: the default on merged multi-stage ranks (one N = 10^5, a ladder 100 -> 19,200):
    3 models x 20,000 users in under 10 s, 3 x 10^5 in under 30 s, 1,000 replicates."""
    from sampling_lib.counts import cells
    from sampling_lib.estimators import _logspline as L
    from sampling_lib.estimators import _logspline_boot as LB
    N = 100_000
    for M in ((20_000,) if quick else (20_000, 100_000)):
        data = ladder_case_data(M)
        ncells = [np.unique(np.stack([r, s_]), axis=1).shape[1] for r, s_ in data.values()]
        print(f"== case 6: N = {N:,}, {M:,} users x 3 models, ladder {LADDER[0]} -> {LADDER[-1]:,} "
              f"(hypergeometric), cells per model {ncells}, recall@10 and ndcg@10, 1,000 replicates ==")
        estimate(data["a"][0][:2000], N, None, ["recall@10"], sample_sizes=data["a"][1][:2000], n_boot=20, rng=0,
                 scheme="hypergeometric")                       # one-time imports
        L._CELLS_CACHE.clear()
        t, tabs = best_of(lambda: [estimate(r, N, None, ["recall@10", "ndcg@10"], sample_sizes=s_, n_boot=1000,
                                            rng=0, scheme="hypergeometric") for r, s_ in data.values()], 1)
        print(f"3 models: {t:.1f} s (goal: under {10 if M == 20_000 else 30} s); recall@10 "
              + ", ".join(f"{x.estimate.iloc[0]:.4f} [{x.ci_low.iloc[0]:.4f}, {x.ci_high.iloc[0]:.4f}]"
                          for x in tabs))
    # the replicates of one model (20,000 users), same draws (200), against exact refits, per prior
    r, s_ = ladder_case_data(20_000)["b"]
    st = cells(r, s_, np.full(r.size, N))
    Cb = np.random.default_rng(1).multinomial(st.M, st.counts / st.M, 200).astype(float)
    F = np.c_[np.ones(10), 1 / np.log2(1 + np.arange(1, 11))]
    for pen in (L.DEFAULT_PENALTY / 10, L.DEFAULT_PENALTY, L.DEFAULT_PENALTY * 10):
        L._CELLS_CACHE.clear()
        LB._ONE_STEP_CACHE.clear()
        _, (beta, grid, K, sur, beta_s) = L.counts_fit_state(st.n_items, st.sizes, st.ranks, st.counts,
                                                             scheme="hypergeometric", penalty=pen)
        P = L.penalty_matrix(grid.B.shape[1], pen)
        _, one, _ = LB.one_step_replicates(Cb, st.counts, K, grid, P, beta, F)
        kw = dict(scheme="hypergeometric", penalty=pen, setup=(grid, K, sur, beta_s))
        ta = time.perf_counter()
        cor = LB.logspline_cells_replicates(Cb, st.n_items, st.sizes, st.ranks, beta, F, counts=st.counts, **kw)
        ta = time.perf_counter() - ta
        tb = time.perf_counter()
        exact = LB.logspline_cells_replicates(Cb, st.n_items, st.sizes, st.ranks, beta, F, **kw)
        tb = time.perf_counter() - tb
        sd = exact.std(axis=0)
        print(f"replicates, penalty {pen:g} ({st.counts.size:,} cells, surrogate {sur.K.shape[1]} columns on "
              f"{sur.K.shape[0]} grid points): max |one-step - exact| {np.max(np.abs(one - exact) / sd):.3f} SD, "
              f"corrected {np.max(np.abs(cor - exact) / sd):.4f} SD; {ta:.2f} s against {tb:.2f} s for exact refits")


def case4(rng, quick):
    """``--method bv`` (and mn) with per-user N: fitted per group of N_u (2,295 groups here), against one N."""
    M, n = (5_000 if quick else 20_000), 100
    Nu = rng.integers(1393, 3688, M)
    R = np.minimum(Nu, np.floor(np.exp(np.minimum(rng.exponential(2.5, M), 20.0))).astype(np.int64) + 1)
    r = sample_ranks(R, Nu, n, rng=5)
    print(f"== case 4: M = {M:,}, n = {n}, N_u {Nu.min()}..{Nu.max()} ({np.unique(Nu).size} distinct), "
          "recall@10 and ndcg@10, 1,000 replicates ==")
    for method in ("bv", "mn"):
        t1, e1 = best_of(lambda: estimate(r, Nu, n, ["recall@10", "ndcg@10"], method=method, n_boot=1000,
                                          rng=0), 1)
        t0, e0 = best_of(lambda: estimate(r, int(np.median(Nu)), n, ["recall@10", "ndcg@10"], method=method,
                                          n_boot=1000, rng=0), 2)
        print(f"{method}: per-user N {t1:.1f} s, one N (the median) {t0:.2f} s, ratio {t1 / t0:.0f}; recall@10 "
              f"{e1['estimate'].iloc[0]:.4f} [{e1['ci_low'].iloc[0]:.4f}, {e1['ci_high'].iloc[0]:.4f}], "
              f"one N {e0['estimate'].iloc[0]:.4f}, truth {np.mean(R <= 10):.4f}")


if __name__ == "__main__":
    main()
