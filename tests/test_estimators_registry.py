"""Tests of the estimator registry (sampling_lib.estimators.get_estimator, METHODS)."""
import numpy as np
import pytest

from sampling_lib import estimators as E
from sampling_lib.estimators import (DEFAULT_METHOD, METHODS, EstimatorSpec, estimator_spec,
                                     get_estimator)
from sampling_lib.exceptions import EstimatorOptionError
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.sampling import adaptive_sample_ranks, sample_ranks

N, n, M = 150, 15, 250


@pytest.fixture(scope="module")
def ranks():
    R = draw_global_ranks(synthetic_models(N)["beta_a0.35"], M, rng=0)
    return sample_ranks(R, N, n, rng=1)


def test_methods_are_the_documented_names():
    assert set(METHODS) == {"mle", "wmle", "mes", "bv", "bv_mle", "bv_mes", "mn", "mn_mle",
                            "mn_mes", "cls", "adaptive_mle", "logspline"}
    assert DEFAULT_METHOD in METHODS


# source: the estimator functions themselves; tolerance: rounding only
DIRECT = {
    "logspline": lambda r: E.logspline(r, N, n),
    "mle": lambda r: E.mle(r, N, n),
    "wmle": lambda r: E.wmle(r, N, n),
    "mes": lambda r: E.mes(r, N, n),
    "bv": lambda r: E.bv(r, N, n),
    "bv_mle": lambda r: E.bv(r, N, n, 0.01, E.mle(r, N, n)),
    "bv_mes": lambda r: E.bv(r, N, n, 0.01, E.mes(r, N, n)),
    "mn": lambda r: E.mn(r, N, n, None),
    "mn_mle": lambda r: E.mn(r, N, n, E.mle(r, N, n)),
    "mn_mes": lambda r: E.mn(r, N, n, E.mes(r, N, n)),
    "cls": lambda r: E.cls(r, N, n),
    "adaptive_mle": lambda r: E.adaptive_mle(r, np.full(r.size, n), N),
}


@pytest.mark.parametrize("name", METHODS)
def test_every_method_is_a_weight_vector_callable(ranks, name):
    w = get_estimator(name)(ranks, N, n)
    assert w.shape == (N,) and abs(w.sum() - 1) < 1e-8
    np.testing.assert_allclose(w, DIRECT[name](ranks), rtol=1e-10, atol=1e-12)


def test_options_are_passed_and_checked(ranks):
    np.testing.assert_allclose(get_estimator("bv", gamma=0.3)(ranks, N, n), E.bv(ranks, N, n, 0.3))
    np.testing.assert_allclose(get_estimator("mle", scheme="hypergeometric", max_iter=7)(ranks, N, n),
                               E.mle(ranks, N, n, scheme="hypergeometric", max_iter=7))
    with pytest.raises(EstimatorOptionError, match=r"unknown option\(s\) \['gama'\]; allowed: .*'gamma'"):
        get_estimator("bv", gama=0.5)
    with pytest.raises(TypeError, match="unknown option"):
        get_estimator("mn", gamma=0.5)
    with pytest.raises(ValueError, match="method must be one of"):
        get_estimator("nope")
    with pytest.raises(ValueError, match="scheme must be one of"):
        get_estimator("mle", scheme="poisson")


def test_shared_prior_equals_fitted_prior(ranks):
    p = E.mle(ranks, N, n)
    est = get_estimator("mn_mle")
    np.testing.assert_allclose(est(ranks, N, n, prior=p), est(ranks, N, n), rtol=1e-12)


def test_varying_sample_sizes():
    R = draw_global_ranks(synthetic_models(N)["mixture"], M, rng=2)
    r, s = adaptive_sample_ranks(R, N, 10, 80, rng=3)
    np.testing.assert_allclose(get_estimator("adaptive_mle")(r, N, s), E.adaptive_mle(r, s, N))
    with pytest.raises(ValueError, match="adaptive_mle"):
        get_estimator("mle")(r, N, s)
    # one common size given per user is the same as the int
    rr = sample_ranks(R, N, n, rng=4)
    np.testing.assert_allclose(get_estimator("mle")(rr, N, np.full(rr.size, n)), E.mle(rr, N, n))


def test_spec_rejects_bad_bootstrap_kind():
    with pytest.raises(ValueError, match="bootstrap must be one of"):
        EstimatorSpec("x", lambda *a, **k: None, bootstrap="nope")
    assert estimator_spec("BV_MLE").prior == "mle"
