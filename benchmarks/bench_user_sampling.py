"""Benchmark: user-sampling helpers vs straightforward references, side by side.

1. ``user_sampled_metric``: K = 1..50 estimates of one user sample from a rank
   histogram (bincount, one (K_max x 50) product) vs calling
   ``metrics.metric_from_ranks`` once per K on the sampled users.
2. ``simulate_familywise_error``: all repeats x pairs of eq-49 z-tests and
   Bonferroni/Holm at once in numpy vs a loop over repeats calling statsmodels
   ``proportions_ztest`` per pair and ``multipletests`` per repeat.
3. ``expected_abs_error_proportion`` (hypergeometric pmf in log space with
   gammaln) vs ``scipy.stats.hypergeom.pmf`` for the 50 cutoffs of Table 8.

Each pair computes the same numbers (the script prints the largest difference);
times are best-of-3. Usage: .venv/bin/python benchmarks/bench_user_sampling.py [--quick]
"""
from __future__ import annotations

import argparse
import itertools

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportions_ztest

from sampling_lib import studies
from sampling_lib import user_sampling as us
from sampling_lib.metrics import metric_from_ranks
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from _timing import best_of


def ref_user_sampled(R, m, metric, Ks, repeats, seed):
    rng = np.random.default_rng(seed)
    out = np.empty((repeats, len(Ks)))
    for i in range(repeats):
        idx = rng.choice(R.size, size=m, replace=False)
        out[i] = [metric_from_ranks(R[idx], metric, int(K)) for K in Ks]
    return out


def ref_fwer(p, m, repeats, alpha, seed):
    rng = np.random.default_rng(seed)
    k = len(p)
    counts = rng.binomial(m, p, size=(repeats, k))
    pairs = list(itertools.combinations(range(k), 2))
    err = {"none": 0, "bonferroni": 0, "holm": 0}
    for row in counts:
        pv = np.array([proportions_ztest([row[a], row[b]], [m, m])[1] for a, b in pairs])
        err["none"] += bool(np.any(pv <= alpha))
        for mth in ("bonferroni", "holm"):
            err[mth] += bool(np.any(multipletests(pv, alpha, mth)[0]))
    return {k_: v / repeats for k_, v in err.items()}


def ref_abs_err(M, S, m):
    out = []
    for s in S:
        q = np.arange(m + 1)
        out.append(stats.hypergeom.pmf(q, M, s, m) @ np.abs(q / m - s / M))
    return np.array(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    N, M = (2000, 20_000) if a.quick else (10_000, 100_000)
    repeats = 50 if a.quick else 200
    fw_repeats = 100 if a.quick else 300
    R = draw_global_ranks(synthetic_models(N)["beta_a0.35"], M, rng=0)
    Ks = np.arange(1, 51)
    m = 1000

    print(f"user-sampling benchmark: N={N}, M={M}")
    t_new, new = best_of(lambda: us.user_sampled_metric(R, m, "ndcg", Ks, repeats=repeats, rng=1))
    t_ref, ref = best_of(lambda: ref_user_sampled(R, m, "ndcg", Ks, repeats, 1), 1)
    print(f"1. user_sampled_metric   ndcg@1..50, m={m}, {repeats} repeats: "
          f"{t_new:.4f} s vs reference {t_ref:.4f} s  ratio {t_ref / t_new:.1f}x  "
          f"max diff {np.abs(new - ref).max():.2e}")

    p = [0.2] * 5
    t_new, new = best_of(lambda: studies.simulate_familywise_error(p, 1068, fw_repeats, rng=2))
    t_ref, ref = best_of(lambda: ref_fwer(p, 1068, fw_repeats, 0.05, 2), 1)
    diff = max(abs(float(new.set_index("adjust").loc[k, "fwer"]) - v) for k, v in ref.items())
    print(f"2. simulate_familywise_error 5 models, {fw_repeats} repeats: "
          f"{t_new:.4f} s vs reference {t_ref:.4f} s  ratio {t_ref / t_new:.1f}x  max diff {diff:.2e}")

    S = np.array([int(np.sum(R <= K)) for K in Ks])
    t_new, new = best_of(lambda: us.expected_abs_error_proportion(M, S, m))
    t_ref, ref = best_of(lambda: ref_abs_err(M, S, m), 1)
    print(f"3. expected_abs_error_proportion 50 cutoffs, m={m}: "
          f"{t_new:.4f} s vs scipy.stats.hypergeom {t_ref:.4f} s  ratio {t_ref / t_new:.1f}x  "
          f"max rel diff {np.max(np.abs(new - ref) / ref):.2e}")


if __name__ == "__main__":
    main()
