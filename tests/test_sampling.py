import numpy as np
import pytest
from scipy import stats

from sampling_lib import kernels
from sampling_lib.sampling import adaptive_sample_ranks, sample_ranks


@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
def test_sample_ranks_follow_the_kernel(scheme):
    # chi-square goodness of fit of 20000 draws for one R against P(r | R)
    N, n, R = 200, 6, 90
    r = sample_ranks(np.full(20_000, R), N, n, scheme=scheme, rng=1)
    expected = kernels.kernel(N, n, scheme)[R - 1] * r.size
    observed = np.bincount(r - 1, minlength=n)
    keep = expected > 5
    assert stats.chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum()).pvalue > 1e-4


def test_sample_ranks_edges_and_determinism():
    N, n = 100, 10
    assert sample_ranks([1], N, n, rng=0)[0] == 1
    assert sample_ranks([N], N, n, rng=0)[0] == n
    assert np.array_equal(sample_ranks(np.arange(1, N + 1), N, n, rng=5), sample_ranks(np.arange(1, N + 1), N, n, rng=5))
    full = sample_ranks(np.arange(1, N + 1), N, N, scheme="hypergeometric", rng=3)
    assert np.array_equal(full, np.arange(1, N + 1))  # n = N without replacement is the global rank


@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
def test_adaptive_sampling_law(scheme):
    # Algorithm 1 from n0 to n_max: the final set of a user is a plain sample of size n_u,
    # so Pr(n_u = n0) = Pr(r > 1 at n0) and, for users reaching n_max, r has the n_max law given r>1 earlier
    N, n0, n_max, R = 1000, 10, 80, 40
    r, nu = adaptive_sample_ranks(np.full(40_000, R), N, n0, n_max, scheme=scheme, rng=2)
    assert set(np.unique(nu)) <= {10, 20, 40, 80}
    p_stop0 = 1 - kernels.kernel(N, n0, scheme)[R - 1, 0]
    se = np.sqrt(p_stop0 * (1 - p_stop0) / r.size)
    assert abs(np.mean(nu == n0) - p_stop0) < 4 * se
    # Pr(reach n_max with r = 1) = Pr(r = 1 at n_max) for a nested sample
    p_top = kernels.kernel(N, n_max, scheme)[R - 1, 0]
    se = np.sqrt(p_top * (1 - p_top) / r.size)
    assert abs(np.mean((nu == n_max) & (r == 1)) - p_top) < 4 * se + 1e-12
    assert np.all(r[nu < n_max] > 1) and np.all(r <= nu)


def test_a_ladder_of_any_growth():
    from sampling_lib.sampling import Design, next_ladder_size, size_ladder

    assert size_ladder(100, 700, 1.5).tolist() == [100, 150, 225, 338, 507, 700]
    assert size_ladder(3, 20, 2).tolist() == size_ladder(3, 20).tolist() == [3, 6, 12, 20]
    assert size_ladder(10, 40, 3).tolist() == [10, 30, 40]
    # ceil(growth x size) without floating-point noise (1.1 x 10 is 11.000000000000002), at least one more
    assert next_ladder_size(np.array([10, 5, 1]), 100, 1.1).tolist() == [11, 6, 2]
    assert next_ladder_size(np.array([3, 7]), 10, 1.01).tolist() == [4, 8]
    r, nu = adaptive_sample_ranks(np.full(2000, 5), 1000, 10, 200, growth=1.5, rng=0)
    assert set(np.unique(nu)) <= set(size_ladder(10, 200, 1.5).tolist()) and (r[nu < 200] > 1).all()
    assert Design("ladder", 10, n_max=80, growth=1.5).describe() == "ladder 10 -> 80 (x1.5 while at rank 1)"
    assert Design("ladder", 10, n_max=80).describe() == "ladder 10 -> 80 (double while at rank 1)"
    for bad in (1.0, 0.5, 2000.0):
        with pytest.raises(ValueError, match=r"growth must lie in \(1.0, 1024.0\]"):
            Design("ladder", 10, n_max=80, growth=bad)
    with pytest.raises(TypeError, match="growth must be a real number"):
        size_ladder(10, 80, "2")
    with pytest.raises(ValueError, match="growth applies to a ladder; a threshold design got growth=1.5"):
        Design("threshold", 10, threshold=1, n2=5, growth=1.5)


def test_adaptive_truncates_at_n_max_and_validates():
    r, nu = adaptive_sample_ranks([1, 1], 100, 10, 30, rng=0)
    assert nu.tolist() == [30, 30] and r.tolist() == [1, 1]
    with pytest.raises(ValueError, match="n_max must be >= 10"):
        adaptive_sample_ranks([1], 100, 10, 5)
    with pytest.raises(ValueError, match="n_max must be <= 100"):
        adaptive_sample_ranks([1], 100, 10, 200)
    with pytest.raises(ValueError, match="global_ranks must lie in 1..N=100"):
        sample_ranks([101], 100, 10)


def test_adaptive_stop_distribution_vs_simulation():
    from sampling_lib.sampling import adaptive_stop_distribution, sampling_efficiency, size_ladder

    assert size_ladder(5, 5).tolist() == [5] and size_ladder(3, 20).tolist() == [3, 6, 12, 20]
    N, M = 60, 40_000
    pmf = np.arange(N, 0, -1.0) ** 3
    pmf /= pmf.sum()
    sizes, stop, capped = adaptive_stop_distribution(pmf, 3, 40)
    assert sizes.tolist() == [3, 6, 12, 24, 40] and stop.sum() + capped == pytest.approx(1.0, abs=1e-12)
    R = np.random.default_rng(0).choice(np.arange(1, N + 1), size=M, p=pmf)
    r, nu = adaptive_sample_ranks(R, N, 3, 40, rng=1)
    eff = sampling_efficiency(r, nu, 3, 40)
    got = np.append(eff.finished, eff.capped) / M
    exp = np.append(stop, capped)
    assert np.all(np.abs(got - exp) <= 4.5 * np.sqrt(exp * (1 - exp) / M) + 1e-12)


@pytest.mark.parametrize("k, pool", [(5, 40), (23, 365), (30, 200), (3, 3)])
def test_log_prob_all_distinct_against_simulated_draws(k, pool):
    """The birthday-problem probability against the share of 40,000 simulated with-replacement draws that
    repeat no item (tolerance: 4 binomial standard errors)."""
    from sampling_lib.sampling import log_prob_all_distinct

    g = np.random.default_rng(k * 1000 + pool)
    draws = np.sort(g.integers(0, pool, size=(40_000, k)), axis=1)
    share = float(np.mean(np.all(np.diff(draws, axis=1) != 0, axis=1)))
    p = float(np.exp(log_prob_all_distinct(k, pool)))
    assert abs(share - p) <= 4 * np.sqrt(p * (1 - p) / 40_000) + 1e-12, (share, p)
    assert log_prob_all_distinct(pool + 1, pool) == -np.inf and log_prob_all_distinct(1, pool) == 0.0
    with pytest.raises(ValueError, match="pool >= 1"):
        log_prob_all_distinct(2, 0)
