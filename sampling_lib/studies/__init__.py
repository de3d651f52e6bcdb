"""Simulation studies the notebooks report, as tested library functions.

Each function repeats a known-truth experiment and returns a tidy table (or
a small dict), so a notebook only calls it, checks it and plots it:

* sampled-metric correction (:mod:`sampling_lib.correct`):
  :func:`simulate_coverage` (bootstrap interval coverage of
  :func:`~sampling_lib.correct.estimate`), :func:`simulate_accuracy` (point
  errors of several estimators), :func:`simulate_paired_difference`
  (calibration of :func:`~sampling_lib.correct.compare`), :func:`coverage_summary`;
* accuracy on real rank distributions (notebook 10, ``benchmarks/bench_accuracy.py``):
  :data:`PANEL_DATASETS` and :func:`panel_populations` (MovieLens 100K, Last.fm 2K,
  Gowalla, Yelp2018 ranked by the settings of :data:`PANEL_MODELS` through
  :func:`sampling_lib.experiments.global_ranks_from_data`, the one data-to-ranks pipeline;
  :func:`load_user_item_lists` reads the LightGCN layout), :func:`accuracy_panel` (every
  estimator's Recall/NDCG@1..K_max against the users' true metric over n, M and draws,
  with the references :func:`split_half_estimate` and :func:`posterior_mean_estimate`),
  :func:`panel_summary`, :func:`interval_coverage` (coverage of
  :func:`~sampling_lib.correct.estimate`'s intervals and their precision ratio against
  :func:`full_ranking_interval`); leave-one-dataset-out tuning of the default
  (:func:`tuning_panel`, :func:`family_errors`, :func:`leave_one_dataset_out`,
  :func:`held_out_comparison`, :func:`penalty_intervals`, :func:`choose_factor`); the
  AAAI23 protocol (:func:`aaai23_ranks`, :func:`aaai23_protocol`, :func:`aaai23_table`,
  :func:`aaai23_winners`); the negatives'-scores candidate (:func:`tail_eb_estimate`,
  :func:`tail_panel`);
* user sampling (:mod:`sampling_lib.user_sampling`, :mod:`sampling_lib.inference`,
  TORS24 Sec 7):
  :func:`simulate_proportion_coverage`, :func:`simulate_difference_coverage`,
  :func:`simulate_ztest_rejections`, :func:`simulate_familywise_error`,
  :func:`proportion_coverage_table`, :func:`user_sampling_tails`,
  :func:`user_sampling_errors` (notebook 06);
* estimating from your sampled ranks: :func:`relative_rmse`,
  :func:`coverage_study` (notebook 09);
* the one-call evaluation against full ranking (:func:`sampling_lib.evaluate`, notebook 13,
  ``benchmarks/bench_evaluate.py``): :func:`evaluation_study`, :func:`evaluation_summary`,
  :class:`PairCounter` (a scorer counted outside the library);
* published cascade protocols corrected (:mod:`sampling_lib.cascade`, ``benchmarks/bench_proxy.py``):
  :func:`cascade_study`, :func:`cascade_tables`, :func:`bounds_expectation_gap`,
  :func:`design_interval_coverage`; a tail drawn by the proxy's rank as a random extension of the head
  (:func:`extension_study`) and what a design alone cannot give (:func:`unbiased_top_k_checks`,
  :func:`poisson_indicator_estimate`);
* the other notebooks' studies: the sampled hit ratio and the Sampling Theorem (:func:`shr_moments`,
  :func:`shr_tail_frequencies`, :func:`expected_shr_gaps`; notebook 01), the
  mapping functions (:func:`beta_map_accuracy`, ...; notebook 02), the rank
  distribution (:func:`rank_distribution_study`, :func:`mle_consistency`, ...;
  notebook 03), estimators over repeated samplings
  (:func:`metric_estimator_study`, :func:`winner_counts`, ...; notebooks 03-05),
  AP@k under random rankings (:func:`ap_scenarios`, ...; notebook 07),
  sampled hit ratios from real scores (:func:`score_sampling_summary`, ...;
  notebook 08) and popularity-sampled negatives (:func:`popularity_estimator_table`;
  notebook 11).

The functions live in topic modules of this package (``correction``,
``users``, ``panel``, ``panel_data``, ``tuning``, ``aaai23``, ``tail``, ``sampled_hit_ratio``, ``mapping_functions``,
``rank_distribution``, ``metric_estimators``, ``random_baseline``,
``real_data``, ``design``, ``evaluation``, ``cascade``, ``popularity``); every public name is listed below and
importable from here.
Randomness only through ``rng`` (a seed or a numpy Generator).

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, Secs 7-8 (eqs 46-52).
.. [Efron93] Efron, Tibshirani. An Introduction to the Bootstrap (1993), ch. 13.
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation.
   KDD 2020 (Sec 2.1: leave-one-out, global rank R_u).
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021 (eq 18: the mixture model behind the oracle).
"""
from .correction import (simulate_coverage, simulate_accuracy, simulate_paired_difference,
                         coverage_summary, relative_rmse, coverage_study)
from .users import (simulate_proportion_coverage, simulate_difference_coverage,
                    simulate_ztest_rejections, simulate_familywise_error, proportion_coverage_table,
                    user_sampling_tails, user_sampling_errors)
from .panel import (oracle_weights, posterior_mean_estimate, split_half_estimate, population_seed,
                    draw_evaluation, evaluation_draws, accuracy_panel, panel_summary, full_ranking_interval,
                    interval_coverage, n_items_comparison, PANEL_MODELS, PANEL_METHODS,
                    PUBLISHED_METHODS, REFERENCES)
from .panel_data import (PanelDataset, PANEL_DATASETS, LARGE_MODELS, DENSE_ITEMS_MAX,
                         load_user_item_lists, panel_populations, dataset_family)
from .tuning import (PENALTIES, KNOT_SPACINGS, FACTORS, logspline_label, logspline_candidates,
                     tuning_panel, family_errors, leave_one_dataset_out, held_out_comparison,
                     penalty_intervals, union_intervals, choose_factor)
from .aaai23 import (AAAI23_ESTIMATORS, AAAI23_MODELS, AAAI23_DATASETS, aaai23_ranks, aaai23_protocol,
                     aaai23_table, aaai23_winners)
from .tail import (TAIL_POINTS, CALIBRATIONS, standardized_scores, pooled_survival, tail_eb_estimate, score_draws,
                   tail_panel)
from .sampled_hit_ratio import (simulate_shr, shr_moments, shr_tail_frequencies, expected_shr_gaps)
from .evaluation import EVALUATION_MODELS, RANDOM_PROXY, PairCounter, evaluation_study, evaluation_summary
from .cascade import (bounds_expectation_gap, cascade_study, cascade_tables, design_interval_coverage,
                      extension_study, poisson_indicator_estimate, unbiased_top_k_checks)
from .popularity import POPULARITY_FITS, popularity_estimator_table
from .strata import (head_climb_check, head_ladder_check, pool_rare_cells, proxy_frontier, strata_consistency,
                     strata_ladder_simulation, strata_tail_cells, tail_concentration, tail_inclusion)
from .mapping_functions import (beta_map_accuracy, beta_map_steps, beta_map_differences,
                                beta_map_monotonicity, max_position_difference)
from .rank_distribution import (mle_mse_identifiable, mle_consistency, RANK_DISTRIBUTION_ESTIMATORS,
                                rank_distribution_study, mes_solver_check)
from .metric_estimators import (winner_counts, metric_curves, average_relative_error,
                                metric_estimator_study, simulate_mse_bound, mn_bv_growth, mean_sd)
from .random_baseline import (ap_enumeration_check, ap_monte_carlo, ap_scenarios)
from .real_data import (sampled_rank_as_global, expected_shr, score_sampling_summary)
from .design import (log_rank_bandwidth, stretch_ranks, full_ranking_halfwidth, design_study, design_summary,
                     design_law_check, design_population_study, plan_frontier, shared_design_on_scores)

__all__ = [
    # popularity
    "POPULARITY_FITS",
    "popularity_estimator_table",
    # correction
    "simulate_coverage",
    "simulate_accuracy",
    "simulate_paired_difference",
    "coverage_summary",
    "relative_rmse",
    "coverage_study",
    # users
    "simulate_proportion_coverage",
    "simulate_difference_coverage",
    "simulate_ztest_rejections",
    "simulate_familywise_error",
    "proportion_coverage_table",
    "user_sampling_tails",
    "user_sampling_errors",
    # panel
    "oracle_weights",
    "posterior_mean_estimate",
    "split_half_estimate",
    "population_seed",
    "draw_evaluation",
    "evaluation_draws",
    "accuracy_panel",
    "panel_summary",
    "full_ranking_interval",
    "interval_coverage",
    "n_items_comparison",
    "PANEL_MODELS",
    "PANEL_METHODS",
    "PUBLISHED_METHODS",
    "REFERENCES",
    # panel_data
    "PanelDataset",
    "PANEL_DATASETS",
    "LARGE_MODELS",
    "DENSE_ITEMS_MAX",
    "load_user_item_lists",
    "panel_populations",
    "dataset_family",
    # tuning
    "PENALTIES",
    "KNOT_SPACINGS",
    "FACTORS",
    "logspline_label",
    "logspline_candidates",
    "tuning_panel",
    "family_errors",
    "leave_one_dataset_out",
    "held_out_comparison",
    "penalty_intervals",
    "union_intervals",
    "choose_factor",
    # aaai23
    "AAAI23_ESTIMATORS",
    "AAAI23_MODELS",
    "AAAI23_DATASETS",
    "aaai23_ranks",
    "aaai23_protocol",
    "aaai23_table",
    "aaai23_winners",
    # tail
    "TAIL_POINTS",
    "CALIBRATIONS",
    "standardized_scores",
    "pooled_survival",
    "tail_eb_estimate",
    "score_draws",
    "tail_panel",
    # sampled_hit_ratio
    "simulate_shr",
    "shr_moments",
    "shr_tail_frequencies",
    "expected_shr_gaps",
    # mapping_functions
    "beta_map_accuracy",
    "beta_map_steps",
    "beta_map_differences",
    "beta_map_monotonicity",
    "max_position_difference",
    # rank_distribution
    "mle_mse_identifiable",
    "mle_consistency",
    "RANK_DISTRIBUTION_ESTIMATORS",
    "rank_distribution_study",
    "mes_solver_check",
    # metric_estimators
    "winner_counts",
    "metric_curves",
    "average_relative_error",
    "metric_estimator_study",
    "simulate_mse_bound",
    "mn_bv_growth",
    "mean_sd",
    # random_baseline
    "ap_enumeration_check",
    "ap_monte_carlo",
    "ap_scenarios",
    # real_data
    "sampled_rank_as_global",
    "expected_shr",
    "score_sampling_summary",
    # design
    "log_rank_bandwidth",
    "stretch_ranks",
    "full_ranking_halfwidth",
    "design_study",
    "design_summary",
    "plan_frontier",
    "design_law_check",
    "design_population_study",
    "shared_design_on_scores",
    "EVALUATION_MODELS",
    "RANDOM_PROXY",
    "PairCounter",
    "evaluation_study",
    "evaluation_summary",
    "bounds_expectation_gap",
    "cascade_study",
    "strata_ladder_simulation",
    "strata_tail_cells",
    "strata_consistency",
    "pool_rare_cells",
    "proxy_frontier",
    "tail_concentration",
    "tail_inclusion",
    "head_ladder_check",
    "head_climb_check",
    "cascade_tables",
    "design_interval_coverage",
    "extension_study",
    "poisson_indicator_estimate",
    "unbiased_top_k_checks",
]
