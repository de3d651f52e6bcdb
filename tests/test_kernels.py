import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from sampling_lib import kernels
from sampling_lib.rankdist import beta_rank_pmf, draw_global_ranks, empirical_pmf
from sampling_lib.sampling import sample_ranks


def _enumerate(N, n, scheme):
    """P(r | R) by listing every sample of n-1 of the N-1 other items (items = global ranks)."""
    P = np.zeros((N, n))
    for R in range(1, N + 1):
        others = [i for i in range(1, N + 1) if i != R]
        draws = (itertools.product(others, repeat=n - 1) if scheme == "binomial"
                 else itertools.combinations(others, n - 1))
        draws = list(draws)
        for s in draws:
            P[R - 1, sum(i < R for i in s)] += 1 / len(draws)
    return P


@pytest.mark.parametrize("N, n", [(2, 2), (5, 2), (5, 3), (6, 4), (7, 7)])
@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
def test_kernel_equals_brute_force_enumeration(N, n, scheme):
    np.testing.assert_allclose(kernels.kernel(N, n, scheme), _enumerate(N, n, scheme), atol=1e-14)


@pytest.mark.parametrize("N, n", [(100, 10), (3706, 30)])
def test_kernels_match_scipy_and_rows_sum_to_one(N, n):
    R = np.arange(1, N + 1)[:, None]
    x = np.arange(n)[None, :]
    B = kernels.binomial(N, n)
    H = kernels.hypergeometric(N, n)
    np.testing.assert_allclose(B, stats.binom.pmf(x, n - 1, (R - 1) / (N - 1)), atol=1e-13)
    np.testing.assert_allclose(H, stats.hypergeom.pmf(x, N - 1, R - 1, n - 1), atol=1e-12)
    np.testing.assert_allclose(B.sum(axis=1), 1, atol=1e-12)
    np.testing.assert_allclose(H.sum(axis=1), 1, atol=1e-12)


# exact rational reference (math.comb) at N = 10^6: relative error of every nonzero entry
@pytest.mark.parametrize("R", [1, 2, 333_333, 999_000, 1_000_000])
def test_hypergeometric_exact_at_one_million_items(R):
    N, n = 10**6, 40
    exact = np.array([float(Fraction(math.comb(R - 1, x) * math.comb(N - R, n - 1 - x), math.comb(N - 1, n - 1)))
                      for x in range(n)])
    got = np.exp(kernels.log_kernel_rows(N, n, [R], "hypergeometric")[0])
    nz = exact > 1e-300
    assert np.all(got[~nz] < 1e-300)
    assert np.max(np.abs(got[nz] - exact[nz]) / exact[nz]) < 1e-11


def test_binomial_exact_at_one_million_items():
    N, n, R = 10**6, 40, 123_457
    p = Fraction(R - 1, N - 1)
    exact = np.array([float(math.comb(n - 1, x) * p**x * (1 - p) ** (n - 1 - x)) for x in range(n)])
    got = np.exp(kernels.log_kernel_rows(N, n, [R], "binomial")[0])
    nz = exact > 1e-300
    assert np.max(np.abs(got[nz] - exact[nz]) / exact[nz]) < 1e-11


@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
def test_shr_cdf_and_sampled_pmf_agree_with_dense_kernel(scheme):
    N, n = 500, 20
    P = kernels.kernel(N, n, scheme)
    k = np.array([1, 2, 5, 20])
    np.testing.assert_allclose(kernels.shr_cdf(N, n, k, scheme), np.cumsum(P, axis=1)[:, k - 1], atol=1e-12)
    pmf = beta_rank_pmf(N, 0.4)
    np.testing.assert_allclose(kernels.sampled_rank_pmf(pmf, n, scheme), pmf @ P, atol=1e-14)


@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
def test_shr_mean_var_against_monte_carlo(scheme):
    # KDD20 eqs 4-5 vs 400 repeated samplings of the same 300 users, fixed seed;
    # mean within 4 standard errors, variance within 20% (chi-square scale at 400 draws)
    N, n, M, reps = 1000, 50, 300, 400
    rng = np.random.default_rng(7)
    ranks = draw_global_ranks(beta_rank_pmf(N, 0.4), M, rng=rng)
    k = np.array([1, 5, 10])
    mean, var = kernels.shr_mean_var(empirical_pmf(ranks, N), n, k, M, scheme)
    shr = np.array([[np.mean(sample_ranks(ranks, N, n, scheme=scheme, rng=rng) <= kk) for kk in k] for _ in range(reps)])
    z = (shr.mean(axis=0) - mean) / np.sqrt(var / reps)
    assert np.all(np.abs(z) < 4), z
    np.testing.assert_allclose(shr.var(axis=0, ddof=1), var, rtol=0.2)


@settings(max_examples=30, deadline=None)
@given(N=st.integers(2, 300), n_frac=st.floats(0, 1), a=st.floats(0.05, 2), scheme=st.sampled_from(["binomial", "hypergeometric"]))
def test_sampled_rank_pmf_is_a_distribution(N, n_frac, a, scheme):
    n = 2 + int(n_frac * (N - 2))
    pr = kernels.sampled_rank_pmf(beta_rank_pmf(N, a), n, scheme)
    assert pr.shape == (n,) and np.all(pr >= 0) and abs(pr.sum() - 1) < 1e-12


def test_hoeffding_example_of_kdd20():
    # KDD20 Sec 2.4: M = 30K, t = 0.01 gives "<= 0.005" (2 e^-6 = 0.00496)
    assert kernels.shr_hoeffding_bound(30_000, 0.01) == pytest.approx(2 * math.exp(-6), rel=1e-14)
    assert kernels.shr_hoeffding_bound(30_000, 0.01) <= 0.005


@pytest.mark.parametrize("call, match", [
    (lambda: kernels.binomial(10, 11), "n must lie in 2..N=10"),
    (lambda: kernels.kernel(10, 5, "poisson"), "scheme must be one of"),
    (lambda: kernels.shr_cdf(10, 5, 6), "k must lie in 1..n=5"),
    (lambda: kernels.log_kernel_rows(10, 5, [11]), "R must lie in 1..N=10"),
    (lambda: kernels.sampled_rank_pmf([0.5, 0.4], 2), "sum to 1"),
    (lambda: kernels.shr_mean_var([0.5, 0.5], 2, 1, M=0), "M must be >= 1"),
])
def test_kernel_input_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_dense_kernel_is_read_only_cached():
    K = kernels.kernel(50, 5)
    assert K is kernels.kernel(50, 5)
    with pytest.raises(ValueError):
        K[0, 0] = 2
