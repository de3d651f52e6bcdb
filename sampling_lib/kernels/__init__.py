"""Sampled-rank laws P(r | R): from a global rank R in 1..N to a sampled rank r in 1..n.

A test user's held-out item has global rank R among all N items. Sampling n-1
other items and ranking the held-out item among those n items gives the
sampled rank r = X + 1, where X counts sampled items ranked above it
(KDD20 Sec 2.2):

* with replacement: X ~ Binomial(n-1, (R-1)/(N-1))      (KDD20 eq 6);
* without replacement: X ~ Hypergeometric(N-1, R-1, n-1)  (KDD20 Sec 2.2),
  i.e. n-1 draws from N-1 other items of which R-1 rank above the held-out item.

Kernels are returned as dense float arrays of shape (N, n): row R-1, column
r-1. They are computed in log space from log-beta functions
(log-beta functions for the binomial, accumulated log ratios of successive
probabilities for the hypergeometric, then normalised per row) and filled in row blocks so that temporaries stay small. Functions that only
need a few columns or a pmf-weighted sum (:func:`shr_cdf`,
:func:`sampled_rank_pmf`, :func:`shr_mean_var`) never build the dense matrix,
so they work for N up to 10^6 and beyond.

Compressed kernels: :func:`rank_grid` groups the global ranks
beyond the first ``exact_ranks`` into bins whose kernel rows lie within a
stated total variation ``tol`` of the bin's representative row (the bound is
measured exactly by :func:`rank_grid_tv`); the number of bins does not grow
with N, so estimators that run on the grid cost O(G n), G = O(exact_ranks +
sqrt(n) / tol), instead of O(N n).

Per-user candidate counts N_u (users who rank the held-out item among their own
N_u candidates, e.g. the items outside their history): :func:`kernel_groups`
groups cells (N_u, n_u, r) so that kernels are shared, optionally binning N_u
(:func:`n_items_bins`) under the sharp total-variation bound
:func:`n_items_tv_bound`; :func:`kernel_entries` gives P(r | R) for chosen rows
and columns only.

A stratified design (a proxy's head of m_u negatives scored exactly, x_u of
them above the held-out item, and s_u of the T_u other negatives sampled
uniformly): :func:`strata_kernel`, the hypergeometric kernel of the tail
shifted by x_u (:mod:`sampling_lib.kernels._strata`).

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation.
   KDD 2020, Sec 2.2, eqs 3-6.
.. [TORS24] Li et al. On Item-Sampling Evaluation for Recommender System.
   ACM TORS 2024, eqs 16-18.
"""
from __future__ import annotations
from ._grid import DEFAULT_GRID_TOL, GRID_EXACT_RANKS, RankGrid, em_grid, rank_grid, rank_grid_tv
from ._groups import (DEFAULT_N_ITEMS_TOL, KernelGroup, cell_kernel, kernel_groups, n_items_bins,
                      n_items_log_bins, n_items_tv_bound)
from ._laws import (LOG_FACTORIAL_MAX, WINDOW_MIN_N, binomial, hypergeom_entries, hypergeometric, kernel,
                    kernel_bin_masses, kernel_columns, kernel_entries, kernel_windows, kernels_ascending,
                    log_binom_window, log_factorials, log_hypergeom_pmf, log_hypergeom_window, log_kernel_rows,
                    window_pmf)
from ._shr import expected_shr_curve, sampled_rank_pmf, shr_cdf, shr_hoeffding_bound, shr_mean_var
from ._strata import (check_strata, next_tail_size, strata_kernel, strata_ladder_blocks, strata_ladder_law,
                      tail_ladder_sizes)

__all__ = [
    "binomial",
    "kernels_ascending",
    "hypergeometric",
    "kernel",
    "kernel_columns",
    "kernel_entries",
    "hypergeom_entries",
    "kernel_bin_masses",
    "kernel_windows",
    "window_pmf",
    "log_binom_window",
    "log_hypergeom_window",
    "LOG_FACTORIAL_MAX",
    "WINDOW_MIN_N",
    "log_factorials",
    "log_kernel_rows",
    "log_hypergeom_pmf",
    "sampled_rank_pmf",
    "expected_shr_curve",
    "shr_cdf",
    "shr_mean_var",
    "shr_hoeffding_bound",
    "DEFAULT_GRID_TOL",
    "GRID_EXACT_RANKS",
    "RankGrid",
    "rank_grid",
    "rank_grid_tv",
    "em_grid",
    "DEFAULT_N_ITEMS_TOL",
    "n_items_tv_bound",
    "n_items_bins",
    "n_items_log_bins",
    "KernelGroup",
    "kernel_groups",
    "cell_kernel",
    "check_strata",
    "strata_kernel",
    "strata_ladder_law",
    "strata_ladder_blocks",
    "next_tail_size",
    "tail_ladder_sizes",
]
