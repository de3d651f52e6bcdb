"""Benchmark: MES fast solver (dual Newton) vs the cvxpy reference (Clarabel).

Both solve max lam H(pi) - E(pi) on the simplex (TORS24 eq 36, lam = eta/n,
eta = 0.01) on the same simulated sampled ranks. The kernel cache is warmed
first so both timings exclude building P(r|R). Printed: wall time of each,
the ratio, the relative difference of the optimal objectives and the max
difference of the solutions. At N = 20720, n = 500 only the fast solver is
timed by default (cvxpy is attempted with ``--cvxpy-large``, in a child process
with a time limit).

Usage: .venv/bin/python benchmarks/bench_mes.py [--cvxpy-large SECONDS]
"""
from __future__ import annotations

import os

# One BLAS thread for every method timed here: the box has 2 cores shared by
# several jobs, where multi-threaded OpenBLAS is 10x slower and erratic.
# Set OPENBLAS_NUM_THREADS yourself to override.
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import multiprocessing as mp

import numpy as np

from sampling_lib.estimators import mes_fit
from sampling_lib.kernels import kernel
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.sampling import sample_ranks
from _timing import best_of


def data(N, n, M, seed):
    rng = np.random.default_rng(seed)
    R = draw_global_ranks(synthetic_models(N)["beta_a0.35"], M, rng=rng)
    return sample_ranks(R, N, n, rng=rng)


def _cvxpy_child(N, n, M, seed, q):
    r = data(N, n, M, seed)
    t, res = best_of(lambda: mes_fit(r, N, n, solver="cvxpy"), 1)
    q.put((t, res.objective))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cvxpy-large", type=float, default=0.0,
                    help="also try cvxpy at N=20720, n=500 with this time limit in seconds")
    args = ap.parse_args()
    print("== MES: fast (dual Newton) vs cvxpy (Clarabel), TORS24 eq 36, eta = 0.01 ==")
    print(f"{'N':>6} {'n':>4} {'M':>6} {'fast s':>8} {'Newton':>6} {'cvxpy s':>8} {'ratio':>6} "
          f"{'rel obj diff':>12} {'max|dpi|':>9}")
    for N, n, M, seed in [(1682, 100, 943, 1), (3706, 100, 6040, 2)]:
        r = data(N, n, M, seed)
        kernel(N, n)
        t_fast, fast = best_of(lambda: mes_fit(r, N, n), 3)
        t_cvx, ref = best_of(lambda: mes_fit(r, N, n, solver="cvxpy"), 1)
        rel = abs(fast.objective - ref.objective) / abs(ref.objective)
        print(f"{N:>6} {n:>4} {M:>6} {t_fast:>8.3f} {fast.n_iter:>6} {t_cvx:>8.2f} "
              f"{t_cvx / t_fast:>6.0f} {rel:>12.1e} {np.abs(fast.pmf - ref.pmf).max():>9.1e}")

    N, n, M, seed = 20720, 500, 20000, 3
    r = data(N, n, M, seed)
    t_k, _ = best_of(lambda: kernel(N, n), 1)
    t_fast, fast = best_of(lambda: mes_fit(r, N, n), 1)
    print(f"{N:>6} {n:>4} {M:>6} {t_fast:>8.2f} {fast.n_iter:>6} (kernel build {t_k:.2f} s, "
          f"{int((np.bincount(r) > 0).sum())} distinct sampled ranks)")
    if args.cvxpy_large > 0:
        q = mp.get_context("spawn").Queue()
        p = mp.get_context("spawn").Process(target=_cvxpy_child, args=(N, n, M, seed, q))
        p.start()
        p.join(args.cvxpy_large)
        if p.is_alive():
            p.terminate()
            p.join()
            print(f"       cvxpy: not finished within {args.cvxpy_large:.0f} s (terminated)")
        else:
            t_cvx, obj = q.get()
            rel = abs(fast.objective - obj) / abs(obj)
            print(f"       cvxpy: {t_cvx:.1f} s, ratio {t_cvx / t_fast:.0f}, rel obj diff {rel:.1e}")


if __name__ == "__main__":
    main()
