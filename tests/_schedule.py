"""Longest-first scheduling of the suite on the xdist workers (issue 18: ``make test`` under 3 minutes).

pytest-xdist's default ``--dist load`` hands the tests out in collection order, in
chunks: the notebook runs (10-40 s each) then start wherever they fall in the
collection, and one of the two workers can still be running a long notebook alone
at the end. :class:`LongestFirstScheduling` instead

* hands out one *unit* at a time to whichever worker is free (list scheduling;
  each worker holds one unit ahead, since pytest runs a test only once it knows
  the next), longest unit first by the estimates in :data:`SLOW` (LPT: the
  largest units start first, the many sub-second tests fill the gaps at the end);
* keeps the tests that share an expensive fixture in one unit (:data:`GROUPS`):
  a session fixture is built once per worker, so splitting its tests over both
  workers would build it twice (the index report runs two notebooks, the wheel
  is built by pip);
* leaves every other test in collection order, so that each worker still sees
  a module's tests one after the other (module fixtures are set up once).

Only the default ``--dist load`` is replaced; ``--dist loadfile`` etc. and
``-n 0`` behave as usual. The estimates are seconds on this 2-core machine,
lightly loaded (``pytest --durations=60``); they only order the work, so an
outdated estimate costs time, never correctness. A test that is not listed
counts :data:`DEFAULT_SECONDS`.
"""
from __future__ import annotations

from collections import OrderedDict

from xdist.scheduler import LoadScopeScheduling

#: (node id prefix, estimated seconds per matching test); the first matching prefix wins.
SLOW = [
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[12_designing_a_samp", 12.5),
    ("tests/test_runner_safety.py::test_no_runner_path_removes_or_renames_what_it_did_not_c", 11.6),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[01_sampling_theorem", 7.7),
    ("tests/test_shared_kernel.py::test_each_run_starts_empty_in_its_own_folder_and_a_dead_", 6.0),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[09_estimating_from_", 7.0),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[03_rank_distributio", 6.6),
    ("tests/test_notebook10_data.py::test_default_folder_absent_gives_a_loud_synthetic_pane", 6.1),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[08_real_data_end_to", 5.8),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[14_stratified_desig", 5.8),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[07_ap_at_k_random_b", 5.6),
    ("tests/test_runner_security.py::test_kernels_use_ipc_in_a_private_folder_and_listen_on", 5.4),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[04_metric_estimator", 5.3),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[05_adaptive_samplin", 5.0),
    ("tests/test_notebooks.py::test_same_seed_gives_the_same_claims", 4.9),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[02_mapping_function", 4.4),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[13_evaluate_at_full", 4.2),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[06_user_sampling]", 4.0),
    ("tests/test_index.py::test_claims_and_observations_are_apart_with_a_summary_per_paper", 3.9),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[11_popularity_sampl", 3.7),
    ("tests/test_evaluate_proxy.py::test_head_counts_and_tail_ranks_by_brute_force", 3.7),
    ("tests/test_peruser.py::test_corrected_one_step_bootstrap_on_many_cells_matches_exact_", 3.5),
    ("tests/test_nested.py::test_prefix_counts_of_a_fixed_subset_follow_the_hypergeometric_", 3.4),
    ("tests/test_cli.py::test_estimate_csv_equals_library_and_is_deterministic", 3.0),
    ("tests/test_threads.py::test_blas_is_pinned_to_one_thread_inside_estimate_compare_and_", 2.9),
    ("tests/test_index.py::test_index_in_headless_chromium", 2.9),
    ("tests/test_peruser.py::test_coarse_draw_replicates_equal_those_of_the_spread_counts", 2.8),
    ("tests/test_extras.py::test_light_install_runs_the_cli_and_names_the_missing_extras", 2.6),
    ("tests/test_cli_widths.py::test_plan_fits_100_columns_and_its_columns_line_up", 2.6),
    ("tests/test_evaluate.py::test_text_item_ids_from_a_catalogue_array_reach_the_scorer_an", 2.4),
    ("tests/test_peruser.py::test_paired_compare_draws_coarse_tuples_within_the_share_bound", 2.4),
    ("tests/test_cli.py::test_bad_input_one_line_error_subprocess", 2.4),
    ("tests/test_reporting.py::test_user_backup_folder_is_never_touched", 2.3),
    ("tests/test_cli_stages.py::test_plan_of_several_models_from_counts_takes_them_as_indep", 2.3),
    ("tests/test_install.py::test_wheel_has_every_module_and_subpackage", 2.2),
    ("tests/test_peruser.py::test_per_user_n_beats_every_single_n_on_dense_synthetic_data", 2.1),
    ("tests/test_index.py::test_run_one_failing_claim_exits_non_zero", 2.1),
    ("tests/test_index.py::test_run_one_claim_with_smoke_parameters", 2.1),
    ("tests/test_runner_safety.py::test_report_folder_with_user_additions_is_refused", 2.0),
    ("tests/test_peruser.py::test_em_surrogate_falls_back_to_exact_refits_when_the_check_fa", 2.0),
    ("tests/test_peruser.py::test_one_step_bootstrap_falls_back_to_exact_refits_when_the_ch", 2.0),
    ("tests/test_strata_ladder.py::test_the_frontier_sets_each_stratified_design_beside_the", 2.0),
    ("tests/test_runner_children.py::test_parameters_run_a_notebook_into_its_own_report", 1.9),
    ("tests/test_cli_design.py::test_the_file_route_gives_the_python_route_s_table", 1.9),
    ("tests/test_cli_stages.py::test_plan_on_a_pilot_with_per_user_n_items_does_not_print_t", 1.9),
    ("tests/test_design.py::test_plan_with_assurance_judges_the_prediction_times_its_margin", 1.9),
    ("tests/test_stages.py::test_file_stages_and_sample_design_agree_in_distribution", 1.9),
    ("tests/test_properties.py::test_estimate_invariant_to_user_order", 1.8),
    ("tests/test_estimate_edges.py::test_popularity_table_rows_shuffled_give_the_same_table", 1.8),
    ("tests/test_design.py::test_plan_with_a_budget_never_chooses_above_it_and_buys_the_mos", 1.8),
    ("tests/test_cli_stages.py::test_plan_of_several_models_costs_the_union_and_budgets_by_", 1.8),
    ("tests/test_design_estimation.py::test_plan_frontier_sets_the_planner_s_choice_beside_", 1.8),
    ("tests/test_design.py::test_hypergeometric_count_cdf_matches_scipy", 1.8),
    ("tests/test_stages.py::test_merged_ranks_count_the_items_above_in_the_union_of_the_sta", 1.8),
    ("tests/test_cli_startup.py::test_run_help_prints_without_the_notebooks_extra", 1.8),
    ("tests/test_design.py::test_a_merged_pilot_with_first_ranks_prices_the_union_with_the_", 1.7),
    ("tests/test_cli_stages.py::test_plan_prints_the_designs_marks_the_cheapest_that_meets_", 1.7),
    ("tests/test_estimators_distribution.py::test_gap_bounds_suboptimality", 1.7),
    ("tests/test_evaluate.py::test_no_pair_is_scored_twice_and_the_cost_is_what_was_scored", 1.7),
    ("tests/test_grid.py::test_em_family_within_tol_of_exact_kernel[100000-30-3000-binomial", 1.7),
    ("tests/test_cli.py::test_per_user_n_items_column_and_counts_tables", 1.7),
    ("tests/test_peruser.py::test_estimate_draws_on_coarse_cells_only_within_the_share_boun", 1.6),
    ("tests/test_design_estimation.py::test_full_ranking_halfwidth_is_the_user_bootstrap_dr", 1.6),
    ("tests/test_cli_stages.py::test_distinct_negatives_read_with_replacement_are_flagged", 1.6),
    ("tests/test_cli_stages.py::test_ranks_records_the_scheme_and_estimate_follows_it", 1.6),
    ("tests/test_cli_design.py::test_ncf_requests_are_read_by_the_ncf_reader_and_a_rescored", 1.5),
    ("tests/test_notebooks_user_data.py::test_notebook_runs_on_an_untimed_file_with_string", 9.8),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[10", 7.6),
    ("tests/test_strip.py::test_the_git_filter_stages_notebooks_stripped", 3.2),
    ("tests/test_compare_decisions.py::test_percentile_pvalue_is_the_inverted_interval", 3.1),
    ("tests/test_peruser.py::test_counts_and_raw_ranks_give_identical_estimates_and_interv", 2.7),
    ("tests/test_cli_widths.py::test_plan_without_a_pilot_fits_an_80_column_terminal_but_i", 2.5),
    ("tests/test_design.py::test_plan_of_several_models_in_python", 2.2),
    ("tests/test_design.py::test_plan_robust_judges_by_the_high_end_and_costs_at_least_as_", 1.8),
    ("tests/test_reporting.py::test_runner_replaces_reports_only_on_success", 8.5),
    ("tests/test_peruser.py::test_per_user_n_beats_every_single_n_on_movielens", 8.0),
    ("tests/test_experiments.py::test_run_experiment_deterministic_across_backends", 3.0),
    ("tests/test_api.py::test_import_is_light", 2.5),
    ("tests/test_logspline.py::test_bootstrap_replicates_reach_their_refit_optimum", 4.5),
    ("tests/test_kernels.py::test_kernels_match_scipy_and_rows_sum_to_one", 1.5),
    ("tests/test_evaluate.py::", 0.4),
    ("tests/test_cli_design.py::", 3.0),
    ("tests/test_ncf_short_sets.py::", 1.3),
    ("tests/test_runner_signals.py::", 10.5),
    ("tests/test_precision_check.py::test_a_pilot_below_the_others_top_goes_on_first", 7.3),
    ("tests/test_precision_check.py::test_an_optimistic_plan_is_checked_and_the_ladder_goes", 6.4),
    ("tests/test_precision_check.py::test_the_check_stays_within_max_cost", 4.6),
    ("tests/test_head_climb.py::test_a_callable_proxy_climbs_as_a_given_head_does", 2.8),
    ("tests/test_head_climb.py::test_a_proxy_that_ranks_differently_when_asked_again", 2.6),
    ("tests/test_head_climb.py::test_head_climb_check_recomputes_the_climb_on_fitted", 2.5),
    ("tests/test_head_climb.py::test_a_climb_that_stops_below_n_cuts_the_head", 2.3),
    ("tests/test_head_climb.py::test_the_pilot_climbs", 2.8),         # the module fixture: two evaluations
    ("tests/test_head_climb.py::test_the_climb_follows", 0.3),
]

#: group name -> node id prefixes of tests that share an expensive fixture (one unit, one worker).
GROUPS = {
    "index report": ("tests/test_index.py::",),
    "runner safety_run": (
        "tests/test_reporting.py::test_user_backup_folder_is_never_touched",
        "tests/test_reporting.py::test_no_temporary_or_backup_folder_is_left",
        "tests/test_reporting.py::test_report_folder_has_normal_permissions",
        "tests/test_reporting.py::test_report_folder_never_missing_during_swap",
        "tests/test_reporting.py::test_lock_is_released_after_the_run",
    ),
    "wheel": ("tests/test_install.py::",),
    # module fixtures: one evaluation, one NCF-like folder
    "evaluate module": ("tests/test_evaluate.py::",),
    "ncf short sets": ("tests/test_ncf_short_sets.py::",),
    "head climb module": ("tests/test_head_climb.py::test_the_pilot_climbs",
                          "tests/test_head_climb.py::test_the_climb_follows",
                          "tests/test_head_climb.py::test_a_climbed_evaluation",
                          "tests/test_head_climb.py::test_the_edge_ties"),
    # the same-seed test reuses notebook 01's smoke run when both run in the same worker
    "notebook 01": (
        "tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[01",
        "tests/test_notebooks.py::test_same_seed_gives_the_same_claims",
    ),
}

DEFAULT_SECONDS = 0.1


def estimated_seconds(nodeid):
    """The estimate of one test (node id as xdist reports it, relative to the rootdir).

    >>> estimated_seconds("tests/test_runner_signals.py::test_x")
    10.5
    >>> estimated_seconds("tests/test_metrics.py::test_anything")
    0.1
    """
    for prefix, seconds in SLOW:
        if nodeid.startswith(prefix):
            return seconds
    return DEFAULT_SECONDS


def group_of(nodeid):
    """The unit a test belongs to: its group's name, or the test itself.

    >>> group_of("tests/test_index.py::test_run_one_claim_with_smoke_parameters")
    'index report'
    >>> group_of("tests/test_metrics.py::test_anything")
    'tests/test_metrics.py::test_anything'
    """
    for name, prefixes in GROUPS.items():
        if nodeid.startswith(prefixes):
            return name
    return nodeid


def longest_first(nodeids):
    """Units (``{unit: [node ids]}``) in the order they are handed out: longest estimate first.

    Ties (the many untimed tests) keep collection order (``sorted`` is stable).

    >>> list(longest_first(["tests/a.py::t1", "tests/test_runner_signals.py::t", "tests/a.py::t2"]))
    ['tests/test_runner_signals.py::t', 'tests/a.py::t1', 'tests/a.py::t2']
    """
    units = OrderedDict()
    for nodeid in nodeids:
        units.setdefault(group_of(nodeid), []).append(nodeid)
    weight = {u: sum(estimated_seconds(i) for i in ids) for u, ids in units.items()}
    return OrderedDict((u, units[u]) for u in sorted(units, key=lambda u: -weight[u]))


class LongestFirstScheduling(LoadScopeScheduling):
    """xdist scheduler: units of :func:`group_of`, handed out longest first (see the module docstring)."""

    def _split_scope(self, nodeid):
        return group_of(nodeid)

    def schedule(self):
        assert self.collection_is_completed
        if self.collection is not None:       # called again (a node was added): top the nodes up
            for node in self.nodes:
                self._reschedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = list(next(iter(self.registered_collections.values())))
        if not self.collection:
            return
        for unit, nodeids in longest_first(self.collection).items():
            self.workqueue[unit] = dict.fromkeys(nodeids, False)
        for _ in range(max(0, len(self.nodes) - len(self.workqueue))):   # more workers than units
            unused, _assigned = self.assigned_work.popitem()
            unused.shutdown()
        for node in self.nodes:
            self._assign_work_unit(node)
        # a worker runs a test only once it knows the next one (pytest's nextitem): start every node with
        # two units, as xdist's LoadScopeScheduling does; on each completion it gets the next unit
        for node in self.nodes:
            self._reschedule(node)
        if not self.workqueue:                # everything is handed out: let the workers finish
            for node in self.nodes:
                node.shutdown()
