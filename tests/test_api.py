"""The public API named by DESIGN.md and the issues exists, and __init__ re-exports it."""
import importlib

import pytest

import sampling_lib

MODULES = ["metrics", "kernels", "sampling", "rankdist", "estimators", "mapping", "user_sampling", "inference",
           "random_baseline", "data", "recommenders", "experiments", "correct", "reporting", "cli",
           "ranking", "io", "studies", "testing", "exceptions", "popularity", "counts", "plotting", "evaluation"]

# names fixed by ../shared/DESIGN.md and the issues (public API: keep them)
REQUIRED = {
    "kernels": ["binomial", "hypergeometric"],
    "mapping": ["linear", "bound", "beta", "uniform", "fit_beta_a", "oracle"],
    "estimators": ["mle", "wmle", "mes", "bv", "cls", "mn", "adaptive_mle", "horvitz_thompson", "popularity_fit",
                   "rank_mass_curve", "popularity_bounds", "mixture_em"],
    "random_baseline": ["expected_ap_wor", "var_ap_wor", "expected_ap_wr", "var_ap_wr"],
    "data": ["load_ratings", "leave_one_out"],
    "user_sampling": ["sample_size_proportion", "sample_size_difference", "hoeffding_sample_size"],
    "inference": ["two_proportion_ztest", "compare_models", "adjust_pvalues"],
    "correct": ["estimate", "compare"],
    "evaluation": ["evaluate"],
    "plotting": ["plot_estimates"],
    "cli": ["main"],
    "studies": ["simulate_coverage", "simulate_accuracy", "simulate_paired_difference"],
    "testing": ["enumerate_ap_wor", "enumerate_ap_wr", "var_ap_wor_paper"],
    "io": ["ranks_from_table", "ranks_from_score_table", "read_table"],
    "ranking": ["ranks_from_scores", "apply_ties"],
    "popularity": ["sample_popularity_negatives", "popularity_logs_from_table", "PopularityLog",
                   "mass_rank_bounds"],
    "counts": ["RankCounts", "rank_counts", "counts_from_frame", "cells", "bootstrap_counts", "bootstrap_loop"],
}


@pytest.mark.parametrize("name", MODULES)
def test_every_module_declares_all(name):
    mod = importlib.import_module(f"sampling_lib.{name}")
    assert hasattr(mod, "__all__")
    for n in mod.__all__:
        assert hasattr(mod, n), f"{name}.__all__ lists missing name {n}"


@pytest.mark.parametrize("module, names", REQUIRED.items())
def test_required_public_names(module, names):
    mod = importlib.import_module(f"sampling_lib.{module}")
    for n in names:
        assert n in mod.__all__ and callable(getattr(mod, n))


def test_init_reexports_every_public_name():
    """The top level is small (practitioner API + submodules) and each name is its module's object."""
    assert len(sampling_lib.__all__) <= 44          # 40 before the one-call evaluation (3 names)
    for name in MODULES:
        assert getattr(sampling_lib, name) is importlib.import_module(f"sampling_lib.{name}")
    for n in sampling_lib.__all__:
        assert hasattr(sampling_lib, n), n
    assert sampling_lib.estimate is sampling_lib.correct.estimate
    # the function, not a module of the same name (importing sampling_lib.evaluation must not shadow it)
    evaluation = importlib.import_module("sampling_lib.evaluation")
    assert sampling_lib.evaluate is evaluation.evaluate and callable(sampling_lib.evaluate)
    assert sampling_lib.get_estimator is sampling_lib.estimators.get_estimator
    assert sampling_lib.ranks_from_table is sampling_lib.io.ranks_from_table
    assert sampling_lib.ConvergenceWarning is sampling_lib.exceptions.ConvergenceWarning


def test_lazy_top_level_names_are_their_modules_public_names():
    """The top level resolves its API names lazily (PEP 562); each is in its module's __all__, and
    every public name of ``correct`` is among them."""
    for n, mod in sampling_lib._API.items():
        assert n in importlib.import_module(f"sampling_lib.{mod}").__all__, (n, mod)
    assert set(sampling_lib.correct.__all__) <= set(sampling_lib._API)


def test_import_is_light_and_popularity_is_a_lazy_submodule():
    """``import sampling_lib`` must not import statsmodels (lazy submodules, lazy statsmodels), and
    ``sampling_lib.popularity`` is reachable from the top level, imported on first access only.

    One fresh interpreter checks both (each start costs 1-3 s of imports here; issue 18).
    """
    import subprocess
    import sys

    code = ("import sys, sampling_lib; light = 'statsmodels' not in sys.modules and 'scipy' not in sys.modules; "
            "before = 'sampling_lib.popularity' in sys.modules; "
            "mod = sampling_lib.popularity; print(light, before, mod.__name__, 'popularity' in sampling_lib.__all__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False", "sampling_lib.popularity", "True"]
