"""Benchmark sampling_lib.random_baseline against naive references, side by side.

1. Monte Carlo of AP@k: the vectorized, chunked ``simulate_ap`` vs a naive per-draw
   Python loop (draw the relevant positions, walk down the list) -- draws per second.
2. Exact moments: the closed forms (AP25 Thms 4.2/4.4, all k at once) vs the exact
   O(k m) recursion and, for tiny N, full enumeration of the C(N, m) placements.

Run:  .venv/bin/python benchmarks/bench_random_baseline.py   (about 10-20 s)
"""
from __future__ import annotations


import numpy as np

from sampling_lib import random_baseline as rb
from sampling_lib import testing as oracles
from _timing import best_of


def naive_simulate_wor(N, m, k, n_sims, rng):
    """One draw at a time: a uniform m-subset of positions, AP@k from the definition."""
    out = np.empty(n_sims)
    for t in range(n_sims):
        rel = set(rng.choice(N, size=m, replace=False).tolist()) if m else set()
        hits, s = 0, 0.0
        for i in range(k):
            if i in rel:
                hits += 1
                s += hits / (i + 1)
        out[t] = s / min(m, k) if m else 0.0
    return out


def main():
    print("== Monte Carlo of AP@k: vectorized simulate_ap vs naive per-draw loop ==")
    print(f"{'case':32s} {'naive draws/s':>14s} {'vectorized draws/s':>19s} {'ratio':>8s}  means (naive, vec, exact)")
    for N, m, k, n_naive, n_vec in [(50, 25, 40, 5_000, 500_000), (50, 2, 20, 5_000, 500_000),
                                    (100_000, 500, 100, 2_000, 200_000)]:
        rng = np.random.default_rng(0)
        t_naive, x_naive = best_of(lambda: naive_simulate_wor(N, m, k, n_naive, rng), 1)
        t_vec, x_vec = best_of(lambda: rb.simulate_ap("wor", k, n_vec, N=N, m=m, rng=1), 2)
        r_naive, r_vec = n_naive / t_naive, n_vec / t_vec
        print(f"{f'WOR N={N}, m={m}, k={k}':32s} {r_naive:14,.0f} {r_vec:19,.0f} {r_vec / r_naive:8.0f}x  "
              f"({x_naive.mean():.4f}, {x_vec.mean():.4f}, {rb.expected_ap_wor(N, m, k):.4f})")

    print("\n== Exact E and Var of AP@k for every k = 1..N: closed form vs recursion vs enumeration ==")
    print(f"{'case':28s} {'closed form':>12s} {'recursion':>12s} {'enumeration':>12s} {'recursion/closed':>17s}")
    for N, m in [(10, 5), (50, 25), (2_000, 200), (2_000, 1_000)]:
        ks = np.arange(1, N + 1)
        t_cf, _ = best_of(lambda: (rb.expected_ap_wor(N, m, ks), rb.var_ap_wor(N, m, ks)), 5)
        t_rec, _ = best_of(lambda: oracles.recursive_ap_moments_wor(N, m, ks), 2)
        t_enum = best_of(lambda: oracles.enumerate_ap_wor(N, m, ks), 2)[0] if N <= 12 else float("nan")
        enum_txt = f"{t_enum * 1e3:10.2f}ms" if np.isfinite(t_enum) else f"{'-':>12s}"
        print(f"{f'N={N}, m={m}, k=1..{N}':28s} {t_cf * 1e3:10.3f}ms {t_rec * 1e3:10.2f}ms {enum_txt} "
              f"{t_rec / t_cf:16.0f}x")


if __name__ == "__main__":
    main()
