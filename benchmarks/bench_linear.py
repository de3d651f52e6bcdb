"""Benchmark: BV and MN weight vectors vs the papers' per-metric explicit-inverse formulas.

`sampling_lib.estimators.bv` / `mn` form one n x n matrix G, solve G y = P~ once
(symmetric solve with Jacobi scaling, no inverse) and return w = D K y, which
estimates every metric as w @ F. The reference computes the formulas as printed
(TORS24 eq 9 / AAAI21 eq 11 for BV, TORS24 eq 42 for MN): build A, form the
n x n matrix, invert it explicitly (as the seed authors do on a GPU), multiply
by A^T b for each metric, then take P~ @ x. Both run side by side on the same
sampled ranks (ml-20m size, N = 20720, n = 500) for the 150 metrics
Recall/NDCG/AP@1..50; the script prints times, ratios and the largest
difference between the estimates. The kernel P(r|R) is built once and shared
(its construction time is printed separately).

Usage: .venv/bin/python benchmarks/bench_linear.py [--quick]
       OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_linear.py   (single-threaded BLAS)
"""
from __future__ import annotations

import argparse

import numpy as np

from sampling_lib.estimators import bv, cls, mn
from sampling_lib.kernels import kernel
from sampling_lib.metrics import metric_values
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.sampling import sample_ranks
from _timing import best_of


def reference_bv(r, N, n, gamma, prior, Fs):
    """TORS24 eq 9 literally: A = sqrt(P) K, explicit inverse, one product per metric."""
    K = kernel(N, n)
    A = np.sqrt(prior)[:, None] * K
    c = K.T @ prior
    Ginv = np.linalg.inv((1 - gamma) * A.T @ A + gamma * np.diag(c))
    pt = np.bincount(r - 1, minlength=n) / r.size
    return np.array([pt @ (Ginv @ (A.T @ (np.sqrt(prior) * F))) for F in Fs])


def reference_mn(r, N, n, prior, M, Fs):
    """TORS24 eq 42 literally: (A^T D A - A^T A / M + Lambda_1 / M)^{-1} A^T D b, per metric."""
    K = kernel(N, n)
    DK = prior[:, None] * K
    Ginv = np.linalg.inv(K.T @ DK - K.T @ K / M + np.diag(K.sum(axis=0)) / M)
    pt = np.bincount(r - 1, minlength=n) / r.size
    return np.array([pt @ (Ginv @ (DK.T @ F)) for F in Fs])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="N = 5000, n = 200")
    args = ap.parse_args()
    N, n, M = (5000, 200, 20000) if args.quick else (20720, 500, 138493)
    gamma = 0.01
    rng = np.random.default_rng(7)
    truth = synthetic_models(N)["beta_a0.35"]
    R = draw_global_ranks(truth, M, rng=rng)
    r = sample_ranks(R, N, n, rng=rng)
    Fs = np.array([metric_values(f"{m}@{k}", N) for m in ("recall", "ndcg", "ap") for k in range(1, 51)])
    prior = truth  # any full-support prior; MN_MLE / MN_MES pass a fitted one

    import os

    t_kernel, _ = best_of(lambda: kernel(N, n), 1)  # built once, cached for both methods
    t_first, _ = best_of(lambda: bv(r, N, n, gamma), 1)  # includes the one-off band scan of the kernel
    print(f"N = {N}, n = {n}, M = {M}, {len(Fs)} metrics (Recall/NDCG/AP@1..50); "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    print(f"kernel build {t_kernel:.3f} s (cached); first bv call incl. band scan {t_first:.3f} s")
    print(f"{'estimator':<10} {'ours s':>8} {'reference s':>12} {'ratio':>7} {'max|diff| of estimates':>24}")
    rows = []
    t_ours, w = best_of(lambda: bv(r, N, n, gamma), 3)
    t_ref, ref = best_of(lambda: reference_bv(r, N, n, gamma, np.full(N, 1 / N), Fs), 1)
    rows.append(("BV", t_ours, t_ref, np.max(np.abs(Fs @ w - ref))))
    t_ours, w = best_of(lambda: bv(r, N, n, gamma, prior), 3)
    t_ref, ref = best_of(lambda: reference_bv(r, N, n, gamma, prior, Fs), 1)
    rows.append(("BV_prior", t_ours, t_ref, np.max(np.abs(Fs @ w - ref))))
    t_ours, w = best_of(lambda: mn(r, N, n, prior), 3)
    t_ref, ref = best_of(lambda: reference_mn(r, N, n, prior, M, Fs), 1)
    rows.append(("MN", t_ours, t_ref, np.max(np.abs(Fs @ w - ref))))
    for name, a, b, d in rows:
        print(f"{name:<10} {a:8.3f} {b:12.3f} {b / a:7.1f} {d:24.2e}")
    t_cls, _ = best_of(lambda: cls(r, N, n, max_rank=50), 1)
    print(f"CLS (P(R) form, max_rank=50): {t_cls:.3f} s (no closed-form reference; one NNLS per rank)")

    # adaptive EM (TORS24 Appendix H) at the goal's size: 100K users, sizes 100..3200
    # (the side-by-side comparison with a per-user EM is in bench_em.py)
    from sampling_lib.estimators import adaptive_mle
    from sampling_lib.sampling import adaptive_sample_ranks

    Ma = 20_000 if args.quick else 100_000
    Ra = draw_global_ranks(truth, Ma, rng=rng)
    ra, nu = adaptive_sample_ranks(Ra, N, 100, min(3200, N), rng=rng)
    t_ad, _ = best_of(lambda: adaptive_mle(ra, nu, N), 2)
    pairs = len(set(zip(nu.tolist(), ra.tolist())))
    print(f"adaptive_mle: M = {Ma}, sizes {sorted(set(nu.tolist()))}, {pairs} distinct (n_u, r_u) pairs, "
          f"100 EM iterations: {t_ad:.3f} s")


if __name__ == "__main__":
    main()
