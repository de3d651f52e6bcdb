"""Benchmark: the bootstrap of `sampling_lib.correct.estimate` vs a naive bootstrap.

Reference (naive): resample the M users' indices with replacement and call the
library estimator on every replicate's per-user ranks (B separate calls).

Ours: the replicate is a Multinomial(M, counts / M) draw of the counts per
sampled rank (the sufficient statistic), and

* MLE (100 EM steps from uniform): all B replicates run as one batched EM
  (matrix products over the observed ranks);
* BV (uniform prior): one matrix product (B x n) @ (n x metrics).

Both give the same estimator per replicate (tests/test_correct.py checks this
on identical draws); the script prints wall times and ratios side by side.

Usage: .venv/bin/python benchmarks/bench_correct.py [--quick]
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import time

import numpy as np

from sampling_lib import estimators as E
from sampling_lib.correct import estimate
from sampling_lib.metrics import metric_values
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.sampling import sample_ranks


def naive_bootstrap(r, N, n, B, method, rng):
    F = np.stack([metric_values(m, N) for m in ("recall@10", "ndcg@10")], axis=1)
    out = np.empty((B, 2))
    for b in range(B):
        rb = r[rng.integers(0, r.size, r.size)]
        w = E.mle(rb, N, n) if method == "mle" else E.bv(rb, N, n)
        out[b] = w @ F
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    cases = [(1000, 100, 1000, 100), (3000, 100, 10000, 200)]
    if a.quick:
        cases = [(1000, 100, 1000, 50)]
    print(f"{'N':>6} {'n':>4} {'M':>6} {'B':>4} {'method':>6} {'naive s':>9} {'ours s':>8} {'ratio':>7}")
    for N, n, M, B in cases:
        pmf = synthetic_models(N)["beta_a0.35"]
        r = sample_ranks(draw_global_ranks(pmf, M, rng=0), N, n, rng=1)
        for method in ("mle", "bv"):
            estimate(r, N, n, method=method, n_boot=2, rng=0)       # warm caches (kernel, Gram)
            t0 = time.perf_counter()
            naive_bootstrap(r, N, n, B, method, np.random.default_rng(0))
            t1 = time.perf_counter()
            estimate(r, N, n, method=method, n_boot=B, rng=0)
            t2 = time.perf_counter()
            print(f"{N:>6} {n:>4} {M:>6} {B:>4} {method:>6} {t1 - t0:>9.2f} {t2 - t1:>8.2f} "
                  f"{(t1 - t0) / (t2 - t1):>7.1f}")


if __name__ == "__main__":
    main()
