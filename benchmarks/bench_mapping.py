"""Benchmark of sampling_lib.mapping: the log-space Beta map vs the literal recurrence.

Run:  .venv/bin/python benchmarks/bench_mapping.py

Prints, side by side, the time of
* ``beta(N, n, a)`` (log-space Beta-binomial CDF, vectorized) vs the literal
  recurrence of KDD20 eq 16 (a Python loop, ``method="recurrence"``) and the
  50-digit exact reference (``method="exact"``, n <= 2000), with the max
  relative difference to the exact values where available;
* ``fit_beta_a`` (each update O(n + M) through counts of distinct sampled
  ranks) vs a naive eq 19 that maps every user through the recurrence;
* ``oracle`` (block-wise sampled-rank pmf + binary search) vs a dense
  P(r | R) kernel with a full argmin over K.
"""
from __future__ import annotations


import numpy as np

from sampling_lib import mapping
from sampling_lib.kernels import kernel
from sampling_lib.rankdist import beta_rank_pmf, draw_global_ranks
from sampling_lib.sampling import sample_ranks
from _timing import best_of


def bench_beta():
    print("beta(N, n, a): log-space vs literal recurrence (eq 16) vs exact reference")
    print(f"{'N':>9} {'n':>6} {'a':>5} {'logcdf s':>10} {'recur s':>10} {'ratio':>7} {'exact s':>9} "
          f"{'ratio':>8} {'relerr log':>10} {'relerr rec':>10}")
    for N, n, a in [(3706, 100, 0.5), (10**6, 1000, 0.3), (10**7, 2000, 0.05), (10**7, 10**4, 0.5)]:
        t_log, f_log = best_of(lambda: mapping.beta(N, n, a))
        t_rec, f_rec = best_of(lambda: mapping.beta(N, n, a, method="recurrence"))
        if n <= 2000:
            t_ex, f_ex = best_of(lambda: mapping.beta(N, n, a, method="exact"), repeat=1)
            e_log = np.max(np.abs(f_log / f_ex - 1))
            e_rec = np.max(np.abs(f_rec / f_ex - 1))
            ex = f"{t_ex:9.3f} {t_ex / t_log:8.0f} {e_log:10.1e} {e_rec:10.1e}"
        else:
            ex = f"{'-':>9} {'-':>8} {'-':>10} {np.max(np.abs(f_rec / f_log - 1)):10.1e}"
        print(f"{N:>9} {n:>6} {a:>5} {t_log:10.5f} {t_rec:10.5f} {t_rec / t_log:7.0f} {ex}")


def bench_fit():
    print("\nfit_beta_a (eq 19): counts of distinct ranks vs per-user recurrence map")
    N, n, M = 3706, 100, 100_000
    R = draw_global_ranks(beta_rank_pmf(N, 0.35), M, rng=0)
    r = sample_ranks(R, N, n, rng=1)

    def naive(a=1.0, tol=1e-10):
        for _ in range(200):
            f = mapping.beta(N, n, a, method="recurrence")
            a_new = -M / np.sum(np.log((f[r - 1] - 1) / (N - 1)))
            if abs(a_new - a) <= tol * max(1, a_new):
                return a_new
            a = a_new

    t_fast, res = best_of(lambda: mapping.fit_beta_a(r, N, n))
    t_naive, a_naive = best_of(naive)
    print(f"N={N} n={n} M={M}: fit_beta_a {t_fast:.4f} s, naive {t_naive:.4f} s, ratio {t_naive / t_fast:.1f}x; "
          f"a = {res.a:.10f} vs {a_naive:.10f}")


def bench_oracle():
    print("\noracle: block-wise pmf + search vs dense kernel + full argmin")
    for N, n in [(3706, 100), (20000, 500)]:
        p = beta_rank_pmf(N, 0.3)
        t_fast, o = best_of(lambda: mapping.oracle(p, n))

        def dense():
            hr = np.concatenate(([0.0], np.cumsum(p)))
            e = np.cumsum(p @ kernel(N, n, "binomial"))
            return np.argmin(np.abs(hr[None, :] - e[:, None]), axis=1)
        t_dense, b = best_of(dense, repeat=1)   # first call builds the dense kernel
        print(f"N={N} n={n}: oracle {t_fast:.4f} s, dense {t_dense:.4f} s, ratio {t_dense / t_fast:.1f}x, "
              f"same result: {bool(np.array_equal(o, b))}")


if __name__ == "__main__":
    bench_beta()
    bench_fit()
    bench_oracle()
