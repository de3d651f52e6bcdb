"""The public API named by DESIGN.md and the issues exists, and __init__ re-exports it."""
import importlib

import pytest

import sampling_lib

MODULES = ["metrics", "kernels", "sampling", "rankdist", "estimators", "mapping", "user_sampling",
           "random_baseline", "data", "recommenders", "experiments", "correct", "reporting", "cli"]

# names fixed by ../shared/DESIGN.md and the issues (public API: keep them)
REQUIRED = {
    "kernels": ["binomial", "hypergeometric"],
    "mapping": ["linear", "bound", "beta", "uniform", "fit_beta_a", "oracle"],
    "estimators": ["mle", "wmle", "mes", "bv", "cls", "mn", "adaptive_mle"],
    "random_baseline": ["expected_ap_wor", "var_ap_wor", "expected_ap_wr", "var_ap_wr"],
    "data": ["load_ratings", "leave_one_out"],
    "user_sampling": ["sample_size_proportion", "sample_size_difference", "hoeffding_sample_size",
                      "two_proportion_ztest"],
    "correct": ["estimate", "compare"],
    "cli": ["main"],
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
    qualified_only = {"linear", "bound", "beta", "uniform", "oracle"}  # mapping's generic names
    for name in MODULES:
        if name == "cli":
            continue
        mod = importlib.import_module(f"sampling_lib.{name}")
        for n in mod.__all__:
            if name == "mapping" and n in qualified_only:
                continue
            assert getattr(sampling_lib, n) is getattr(mod, n), f"sampling_lib.{n} is not {name}.{n}"
    assert sampling_lib.estimate is sampling_lib.correct.estimate
