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
    ("tests/test_evaluate.py::", 2.0),
    ("tests/test_cli_design.py::test_the_file_route", 12.0),
    ("tests/test_cli_design.py::test_ncf_requests", 8.0),
    ("tests/test_cli_design.py::", 3.0),
    ("tests/test_ncf_short_sets.py::", 8.0),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[12", 20.0),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[13", 15.0),
    ("tests/test_runner_signals.py::", 10.5),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[03", 13.5),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[08", 14.0),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[04", 9.5),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[05", 8.0),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[09", 10.0),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[07", 9.5),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[02", 7.0),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[06", 7.5),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[11", 7.0),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[10", 6.5),
    ("tests/test_notebooks.py::test_notebook_runs_with_smoke_parameters[01", 5.0),
    ("tests/test_notebooks.py::test_same_seed_gives_the_same_claims", 5.0),
    ("tests/test_notebooks_user_data.py::test_notebook_runs_on_an_untimed_file_with_string_ids[08", 10.0),
    ("tests/test_notebooks_user_data.py::test_notebook_runs_on_an_untimed_file_with_string_ids[03", 10.0),
    ("tests/test_notebooks_user_data.py::test_notebook_runs_on_an_untimed_file_with_string_ids[09", 8.0),
    ("tests/test_notebooks_user_data.py::test_notebook_runs_on_an_untimed_file_with_string_ids[02", 6.0),
    ("tests/test_notebooks_user_data.py::test_notebook_runs_on_an_untimed_file_with_string_ids[07", 8.0),
    ("tests/test_notebooks_user_data.py::test_notebook_runs_on_an_untimed_file_with_string_ids[05", 6.0),
    ("tests/test_notebooks_user_data.py::test_notebook_runs_on_an_untimed_file_with_string_ids[04", 6.5),
    ("tests/test_notebooks_user_data.py::test_notebook_runs_on_an_untimed_file_with_string_ids", 6.0),
    ("tests/test_reporting.py::test_runner_replaces_reports_only_on_success", 8.5),
    ("tests/test_reporting.py::test_user_backup_folder_is_never_touched", 2.0),   # builds safety_run
    ("tests/test_index.py::test_claims_and_observations_are_apart", 4.0),   # builds the report
    ("tests/test_index.py::test_run_one_", 2.0),
    ("tests/test_index.py::test_index_in_headless_chromium", 1.5),
    ("tests/test_peruser.py::test_per_user_n_beats_every_single_n_on_movielens", 8.0),
    ("tests/test_experiments.py::test_run_experiment_deterministic_across_backends", 3.0),
    ("tests/test_install.py::test_wheel_has_every_module_and_subpackage", 2.0),   # builds the wheel
    ("tests/test_cli.py::test_estimate_csv_equals_library_and_is_deterministic", 2.5),
    ("tests/test_cli.py::test_bad_input_one_line_error_subprocess", 3.0),
    ("tests/test_api.py::test_import_is_light", 2.5),
    ("tests/test_logspline.py::test_bootstrap_replicates_reach_their_refit_optimum", 4.5),
    ("tests/test_grid.py::test_em_family_within_tol_of_exact_kernel", 1.0),
    ("tests/test_kernels.py::test_kernels_match_scipy_and_rows_sum_to_one", 1.5),
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
