"""Benchmark: EM on the sufficient statistic P~(r) vs the naive per-user EM.

`sampling_lib.estimators.mle` runs the EM update of AAAI21 eq 21 / TORS24 eq 34
on the counts per observed sampled rank: O(N k) per iteration, k <= n the
number of distinct observed ranks. The naive update of AAAI21 eq 20 /
TORS24 eq 33 computes a posterior over R for every user: O(N M) per
iteration. Both are run side by side on the same simulated data and the same
number of iterations; the script prints the time per iteration, the ratio, and
the maximum difference of the two estimates (they are the same algorithm).
It also times the estimator to a tolerance with plain EM vs SQUAREM.

Usage: .venv/bin/python benchmarks/bench_em.py [--quick]
"""
from __future__ import annotations

import os

# One BLAS thread for every method timed here: the box has 2 cores shared by
# several jobs, where multi-threaded OpenBLAS is 10x slower and erratic.
# Set OPENBLAS_NUM_THREADS yourself to override.
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import time
import warnings

import numpy as np

from sampling_lib.exceptions import ConvergenceWarning
from sampling_lib.estimators import adaptive_mle_fit, mle_fit
from sampling_lib.kernels import kernel
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.sampling import adaptive_sample_ranks, sample_ranks
from _timing import best_of


def naive_em(r, N, n, iters, chunk=2000):
    """AAAI21 eq 20: per-user posteriors, O(N M) per iteration (chunked over users)."""
    K = kernel(N, n)
    pi = np.full(N, 1.0 / N)
    for _ in range(iters):
        acc = np.zeros(N)
        for s in range(0, r.size, chunk):
            post = pi[:, None] * K[:, r[s : s + chunk] - 1]
            post /= post.sum(axis=0, keepdims=True)
            acc += post.sum(axis=1)
        pi = acc / r.size
    return pi


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller M for a smoke run")
    args = ap.parse_args()
    rng = np.random.default_rng(2024)
    cases = [(3706, 100, 6040, 100), (20720, 500, 20000 if not args.quick else 2000, 100)]
    print("== EM per iteration: sufficient statistic (ours) vs per-user EM (AAAI21 eq 20) ==")
    print(f"{'N':>6} {'n':>4} {'M':>6} {'iters':>5} {'ours/iter ms':>12} {'naive/iter ms':>13} "
          f"{'ratio':>7} {'max|diff|':>10}")
    for N, n, M, iters in cases:
        R = draw_global_ranks(synthetic_models(N)["beta_a0.35"], M, rng=rng)
        r = sample_ranks(R, N, n, rng=rng)
        kernel(N, n)  # warm the kernel cache for both methods
        t_ours, ours = best_of(lambda: mle_fit(r, N, n, max_iter=iters), 3)
        naive_iters = iters if N * M <= 5e7 else 5
        t_naive, nv = best_of(lambda: naive_em(r, N, n, naive_iters), 1)
        ref = mle_fit(r, N, n, max_iter=naive_iters).pmf
        per_ours = 1e3 * t_ours / (iters + 1)  # iters updates + the final E-step
        per_naive = 1e3 * t_naive / naive_iters
        print(f"{N:>6} {n:>4} {M:>6} {iters:>5} {per_ours:>12.3f} {per_naive:>13.1f} "
              f"{per_naive / per_ours:>7.0f} {np.abs(ref - nv).max():>10.1e}")
        print(f"       time for {iters} iterations: ours {t_ours:.3f} s, naive "
              f"{per_naive * iters / 1e3:.1f} s" + ("" if naive_iters == iters else
                                                    f" (extrapolated from {naive_iters} iterations)"))

    print("\n== to a tolerance (certified gap <= tol): plain EM vs SQUAREM, N=3706 n=100 M=6040 ==")
    N, n, M = 3706, 100, 6040
    R = draw_global_ranks(synthetic_models(N)["beta_a0.35"], M, rng=rng)
    r = sample_ranks(R, N, n, rng=rng)
    print(f"{'tol':>7} {'method':>8} {'iters':>7} {'E-steps':>8} {'time s':>7} {'gap':>9} {'loglik':>14}")
    for tol in (1e-3, 1e-4):
        for acc in (None, "squarem"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                t, res = best_of(lambda: mle_fit(r, N, n, tol=tol, max_iter=200_000, accelerate=acc), 1)
            print(f"{tol:>7.0e} {res.method:>8} {res.n_iter:>7} {res.n_estep:>8} {t:>7.2f} "
                  f"{res.gap:>9.2e} {res.loglik:>14.6f}")

    print("\n== adaptive EM (TORS24 Appendix H), sufficient statistics per (n_u, r_u) ==")
    N, M = 20720, 100_000 if not args.quick else 10_000
    R = draw_global_ranks(synthetic_models(N)["beta_a0.35"], M, rng=rng)
    r, sizes = adaptive_sample_ranks(R, N, 100, 3200, rng=rng)
    t0 = time.perf_counter()
    res = adaptive_mle_fit(r, sizes, N, max_iter=100)
    t1 = time.perf_counter() - t0
    t_warm, _ = best_of(lambda: adaptive_mle_fit(r, sizes, N, max_iter=100), 1)
    pairs = len(set(zip(sizes.tolist(), r.tolist())))
    print(f"N={N} M={M} sizes {sorted(set(sizes.tolist()))} mean size {sizes.mean():.1f}; "
          f"distinct (n_u, r_u) pairs {pairs}")
    print(f"100 EM iterations: {t1:.2f} s including kernel columns, {t_warm:.2f} s warm; "
          f"loglik {res.loglik:.3f}")


if __name__ == "__main__":
    main()
