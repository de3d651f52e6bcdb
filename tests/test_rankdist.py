import numpy as np
import pytest

from sampling_lib import rankdist


@pytest.mark.parametrize("N, a", [(10, 0.5), (3706, 0.3), (10**6, 0.25), (100, 2.0)])
def test_beta_rank_pmf_matches_closed_form(N, a):
    # Beta(a, 1): P(R) = (R/N)^a - ((R-1)/N)^a exactly
    R = np.arange(1, N + 1)
    exact = (R / N) ** a - ((R - 1) / N) ** a
    np.testing.assert_allclose(rankdist.beta_rank_pmf(N, a), exact, rtol=1e-9, atol=1e-300)


def test_draw_and_empirical_pmf():
    pmf = rankdist.beta_rank_pmf(50, 0.5)
    r = rankdist.draw_global_ranks(pmf, 200_000, rng=0)
    assert r.min() >= 1 and r.max() <= 50
    se = np.sqrt(pmf * (1 - pmf) / r.size)
    assert np.all(np.abs(rankdist.empirical_pmf(r, 50) - pmf) < 5 * se + 1e-12)


def test_synthetic_models_are_distinct_and_one_crosses():
    models = rankdist.synthetic_models(1000)
    assert rankdist.dominates(models["beta_a0.25"], models["beta_a0.35"])
    assert rankdist.dominates(models["beta_a0.35"], models["beta_a0.50"])
    assert not rankdist.dominates(models["mixture"], models["beta_a0.25"])
    assert not rankdist.dominates(models["beta_a0.25"], models["mixture"])
    with pytest.raises(ValueError, match="names must be among"):
        rankdist.synthetic_models(10, ["nope"])
