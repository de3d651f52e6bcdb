"""Benchmark: every registered method with 1,000 bootstrap replicates on the compressed rank grid
(compressed kernels), against the exact N x n kernel (``grid_tol=0``) side by side in one process.

Case: N = M = 10^4 items and users, n = 100, global ranks R = ceil(N Beta(0.3, 3)) (the
issue's case), sampled ranks with replacement; ``estimate(r, N, n, method=m, n_boot=1000)``
with the default metrics (Recall@10, NDCG@10). For every method it prints the wall time of
the default (grid on, ``grid_tol`` = ``kernels.DEFAULT_GRID_TOL``) and of the exact-kernel
path (grid off), and the agreement: the largest |difference| of the point estimates and of
the interval ends between the two.

The exact path of bv_mle, mn_mle, bv_mes and mn_mes refits its prior per replicate (one
replicate at a time, minutes at this size); it is timed on ``--off-boot`` replicates
(default 100) and the time per 1,000 replicates is reported as that time x 1000 / off-boot,
marked "(x10)" in the table. Its intervals then come from fewer replicates, so only the
point estimates are compared for those methods.

Usage: .venv/bin/python benchmarks/bench_methods.py [--quick] [--methods mle,cls] [--off-boot 100]
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import time

import numpy as np

from sampling_lib.correct import estimate
from sampling_lib.estimators import METHODS, estimator_spec
from sampling_lib.kernels import DEFAULT_GRID_TOL, rank_grid

_SLOW_OFF = {"bv_mle", "mn_mle", "bv_mes", "mn_mes"}


def data(N, M, n, seed=0):
    rng = np.random.default_rng(seed)
    R = np.minimum(N, np.ceil(N * rng.beta(0.3, 3, size=M))).astype(np.int64)
    return 1 + rng.binomial(n - 1, (R - 1) / (N - 1))


def run(r, N, n, method, n_boot, grid_tol):
    opts = {}
    if grid_tol is not None and "grid_tol" in estimator_spec(method).options:
        opts["grid_tol"] = grid_tol
    t = time.perf_counter()
    tab = estimate(r, N, n, method=method, n_boot=n_boot, rng=np.random.default_rng(1), options=opts)
    return time.perf_counter() - t, tab


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="N = M = 2000, 200 replicates")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--off-boot", type=int, default=100)
    a = ap.parse_args()
    N = M = 2000 if a.quick else 10_000
    n, B = 100, 200 if a.quick else 1000
    r = data(N, M, n)
    g = rank_grid(N, n, tol=DEFAULT_GRID_TOL)
    print(f"N = M = {N}, n = {n}, {B} replicates; grid_tol = {DEFAULT_GRID_TOL}: {g.lo.size} bins "
          f"(measured max TV {g.bound.max():.4f})")
    print(f"{'method':13s} {'grid on (s)':>11s} {'exact (s)':>14s} {'ratio':>7s} "
          f"{'max|d est|':>11s} {'max|d CI|':>10s}")
    for m in a.methods.split(","):
        grid_opt = "grid_tol" in estimator_spec(m).options
        t1, tab1 = run(r, N, n, m, B, None)
        if not grid_opt:
            print(f"{m:13s} {t1:11.2f} {'(no grid)':>14s}")
            continue
        off_b = min(B, a.off_boot) if m in _SLOW_OFF else B
        t0, tab0 = run(r, N, n, m, off_b, 0)
        t0k = t0 * B / off_b
        d_est = np.abs(tab1["estimate"].to_numpy() - tab0["estimate"].to_numpy()).max()
        d_ci = (np.abs(tab1[["ci_low", "ci_high"]].to_numpy() - tab0[["ci_low", "ci_high"]].to_numpy()).max()
                if off_b == B else float("nan"))
        mark = f" (x{B // off_b})" if off_b != B else ""
        print(f"{m:13s} {t1:11.2f} {t0k:9.2f}{mark:>5s} {t0k / t1:7.1f} {d_est:11.2e} {d_ci:10.2e}",
              flush=True)


if __name__ == "__main__":
    main()
