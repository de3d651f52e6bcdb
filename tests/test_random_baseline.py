"""Tests for sampling_lib.random_baseline (AP25: AP@k under random rankings)."""
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sampling_lib import random_baseline as rb
from sampling_lib import testing as oracles
from sampling_lib.metrics import ap as ap_metric


# ----------------------------------------------------------------------------- helpers

def _exact_wor_fraction(N, m, k):
    """E and Var of offline AP@k in exact rational arithmetic (our pi_r form of AP25 Thm 4.2/4.4)."""
    def pi(r):
        if r > N:
            return Fraction(0)
        num = den = 1
        for j in range(r):
            num *= m - j
            den *= N - j
        return Fraction(num, den)

    p1, p2, p3, p4 = pi(1), pi(2), pi(3), pi(4)
    h = sum(Fraction(1, i) for i in range(1, k + 1))
    h2 = sum(Fraction(1, i * i) for i in range(1, k + 1))
    M = min(m, k)
    q = p1 - p2
    A = p1 - 3 * p2 + 2 * p3 - q * q
    B = 3 * p2 - 3 * p3 - 2 * p2 * q
    C = p3 - p2 * p2
    D = 2 * p2 - 5 * p3 + 3 * p4 - q * q
    E = 3 * p3 - 3 * p4 - p2 * q
    F = p3 - p4 - p2 * q
    G = p4 - p2 * p2
    var_s = (A * h2 + B * h + k * C + D * (h * h - h2) + 2 * E * (k - h)
             + 2 * F * k * (h - 1) + G * k * (k - 1))
    return (k * p2 + q * h) / M, var_s / M**2


# ----------------------------------------------------------------------------- enumeration (exact)

@pytest.mark.parametrize("N", range(1, 11))
def test_wor_formulas_equal_enumeration_all_m_k(N):
    # source: enumeration of all C(N, m) placements (AP25 eq 3.2 definition), every m and k
    ks = np.arange(1, N + 1)
    for m in range(N + 1):
        mean, var = oracles.enumerate_ap_wor(N, m, ks)
        np.testing.assert_allclose(rb.expected_ap_wor(N, m, ks), mean, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(rb.var_ap_wor(N, m, ks), var, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("p", [0.0, 0.04, 0.2, 1 / 3, 0.5, 0.7, 0.95, 1.0])
def test_wr_formulas_equal_enumeration(p):
    # source: enumeration of all 2^k relevance patterns (AP25 eq 3.1 definition)
    ks = np.arange(1, 13)
    mean, var = oracles.enumerate_ap_wr(p, ks)
    np.testing.assert_allclose(rb.expected_ap_wr(p, ks), mean, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(rb.var_ap_wr(p, ks), var, rtol=1e-12, atol=1e-15)


def test_enumeration_by_hand():
    # N=4, m=2, k=2: top-2 patterns 11 (1 way, AP=1), 10 (2 ways, AP=1/2), 01 (2 ways, AP=1/4), 00 (1)
    mean, var = oracles.enumerate_ap_wor(4, 2, 2)
    assert mean == pytest.approx(2.5 / 6, rel=1e-15)
    assert var == pytest.approx((1 + 2 * 0.25 + 2 * 0.0625) / 6 - (2.5 / 6) ** 2, rel=1e-14)
    # WR p=1/2, k=2: AP in {1, 1/2, 1/4, 0} equally likely
    mean, var = oracles.enumerate_ap_wr(0.5, 2)
    assert mean == 0.4375
    assert var == pytest.approx(0.328125 - 0.4375**2, rel=1e-15)


@pytest.mark.parametrize("N,m", [(1, 0), (1, 1), (2, 0), (2, 1), (2, 2), (3, 1), (3, 2), (3, 3),
                                 (4, 3), (5, 3), (6, 2), (9, 3)])
def test_small_N_and_small_m_edge_cases(N, m):
    # source: enumeration; AP25 Thm 4.4 constants divide by N-2 and N-3 (0/0 for N <= 3)
    ks = np.arange(1, N + 1)
    mean, var = oracles.enumerate_ap_wor(N, m, ks)
    np.testing.assert_allclose(rb.expected_ap_wor(N, m, ks), mean, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(rb.var_ap_wor(N, m, ks), var, rtol=1e-13, atol=1e-15)
    # and the exact rational formula agrees
    for k in ks:
        em, ev = _exact_wor_fraction(N, m, int(k)) if m > 0 else (Fraction(0), Fraction(0))
        assert rb.expected_ap_wor(N, m, int(k)) == pytest.approx(float(em), rel=1e-14, abs=1e-16)
        assert rb.var_ap_wor(N, m, int(k)) == pytest.approx(float(ev), rel=1e-13, abs=1e-16)


@pytest.mark.parametrize("N", [1, 2, 3, 7])
def test_degenerate_m_zero_and_all(N):
    ks = np.arange(1, N + 1)
    assert np.all(rb.expected_ap_wor(N, 0, ks) == 0) and np.all(rb.var_ap_wor(N, 0, ks) == 0)
    np.testing.assert_allclose(rb.expected_ap_wor(N, N, ks), 1.0, rtol=1e-15)
    np.testing.assert_allclose(rb.var_ap_wor(N, N, ks), 0.0, atol=1e-15)


def test_literal_theorem_4_4_matches_for_N_at_least_4_and_refuses_below():
    for N in range(4, 13):
        ks = np.arange(1, N + 1)
        for m in range(N + 1):
            np.testing.assert_allclose(oracles.var_ap_wor_paper(N, m, ks), rb.var_ap_wor(N, m, ks),
                                       rtol=1e-9, atol=1e-14)
    for N in (1, 2, 3):
        with pytest.raises(ValueError, match="N >= 4"):
            oracles.var_ap_wor_paper(N, 1, 1)


# ----------------------------------------------------------------------------- AP25 Table 2

# source: AP25 Table 2 (printed to 5 decimals), scenarios of AP25 Table 1, N = 50.
# (scenario, m, p, k, printed WOR mean, WR mean, WOR var, WR var)
TABLE2 = [
    ("A1", 25, 0.50, 5, 0.36139, 0.36416, 0.05464, 0.05884),
    ("A2", 25, 0.50, 25, 0.28387, 0.28816, 0.00735, 0.01234),
    ("A3", 25, 0.50, 40, 0.43550, 0.27674, 0.00699, 0.00775),
    ("B", 10, 0.20, 20, 0.13221, 0.06878, 0.00786, 0.00294),
    ("C", 2, 0.04, 20, 0.07865, 0.00851, 0.01563, 0.00023),
    ("D", 35, 0.70, 20, 0.52426, 0.52778, 0.01502, 0.02195),
]
# Cells where the print differs from the exact value beyond rounding (documented in notebook 07):
# our exact values (formula = recursion = Monte Carlo), 7 decimals.
TABLE2_DIFFERENCES = {
    ("A1", "wr_mean"): 0.3641667,   # = 0.5 * (0.5 + 0.5 * H_5 / 5) exactly 0.36416666...; print truncated
    ("A1", "wor_var"): 0.0546704,   # print 0.05464
    ("A2", "wor_mean"): 0.2838363,  # print 0.28387
    ("A2", "wor_var"): 0.0073601,   # print 0.00735
    ("D", "wr_var"): 0.0219591,     # print 0.02195 (truncated)
}


def _ours(m, p, k):
    return {
        "wor_mean": rb.expected_ap_wor(50, m, k),
        "wr_mean": rb.expected_ap_wr(p, k),
        "wor_var": rb.var_ap_wor(50, m, k),
        "wr_var": rb.var_ap_wr(p, k),
    }


@pytest.mark.parametrize("row", TABLE2, ids=[r[0] for r in TABLE2])
def test_table2_printed_precision_or_documented_difference(row):
    name, m, p, k, *printed = row
    ours = _ours(m, p, k)
    exact = {"wor_mean": oracles.recursive_ap_moments_wor(50, m, k).mean,
             "wor_var": oracles.recursive_ap_moments_wor(50, m, k).var,
             "wr_mean": oracles.recursive_ap_moments_wr(p, k).mean,
             "wr_var": oracles.recursive_ap_moments_wr(p, k).var}
    for key, pr in zip(("wor_mean", "wr_mean", "wor_var", "wr_var"), printed):
        # the closed forms equal the independent recursion
        assert ours[key] == pytest.approx(exact[key], rel=1e-12)
        if (name, key) in TABLE2_DIFFERENCES:
            assert abs(ours[key] - pr) > 0.5e-5, (name, key)
            assert ours[key] == pytest.approx(TABLE2_DIFFERENCES[(name, key)], abs=0.6e-7)
        else:
            assert abs(ours[key] - pr) <= 0.5e-5 + 1e-12, (name, key, ours[key], pr)


# ----------------------------------------------------------------------------- identities

@pytest.mark.parametrize("N", [5, 50, 1000, 10**6])
def test_one_relevant_item_is_harmonic_over_N(N):
    # m = 1 (leave-one-out): AP@k = 1/R if R <= k, R uniform on 1..N  =>  E = H_k / N
    ks = np.unique(np.minimum([1, 2, 5, 10, 100, N], N))
    h = np.array([math.fsum(1.0 / np.arange(1, kk + 1)) for kk in ks])
    np.testing.assert_allclose(rb.expected_ap_wor(N, 1, ks), h / N, rtol=1e-14)
    if N <= 1000:
        R = np.arange(1, N + 1)
        for kk in ks:
            vals = ap_metric(R, int(kk))
            assert rb.var_ap_wor(N, 1, int(kk)) == pytest.approx(vals.var(), rel=1e-12)


def test_harmonic_numbers_exact():
    for k in (1, 2, 3, 10, 57):
        h = sum(Fraction(1, i) for i in range(1, k + 1))
        h2 = sum(Fraction(1, i * i) for i in range(1, k + 1))
        assert rb.harmonic_number(k) == pytest.approx(float(h), rel=1e-15)
        assert rb.harmonic_number(k, order=2) == pytest.approx(float(h2), rel=1e-15)
    assert rb.harmonic_number(0) == 0.0
    # table (compensated sums) and digamma branch agree across the switch point
    ks = np.array([4095, 4096, 4097, 4098])
    h = rb.harmonic_number(ks)
    np.testing.assert_allclose(np.diff(h), 1.0 / ks[1:], rtol=1e-9)
    h2 = rb.harmonic_number(ks, order=2)
    np.testing.assert_allclose(np.diff(h2), 1.0 / ks[1:] ** 2, rtol=1e-6)


def test_wor_converges_to_wr_for_k_le_m():
    # sampling-lab identity: for k <= m and p = m/N, E_WOR - E_WR = -p(1-p)(1 - H_k/k)/(N-1)
    for N, m in [(50, 25), (1000, 100), (10**6, 2 * 10**5)]:
        p = m / N
        ks = np.array([1, 2, 5, 10, 25])
        diff = rb.expected_ap_wor(N, m, ks) - rb.expected_ap_wr(p, ks)
        want = -p * (1 - p) * (1 - rb.harmonic_number(ks) / ks) / (N - 1)
        np.testing.assert_allclose(diff, want, rtol=1e-9, atol=1e-16)


def test_large_N_accuracy_against_exact_rationals():
    # tiny variances (m close to N) are where cancellation would bite
    for N, m, k in [(2000, 1999, 2000), (2000, 1990, 1000), (3000, 7, 3000), (500, 250, 333)]:
        em, ev = _exact_wor_fraction(N, m, k)
        assert rb.expected_ap_wor(N, m, k) == pytest.approx(float(em), rel=1e-13)
        assert rb.var_ap_wor(N, m, k) == pytest.approx(float(ev), rel=1e-12)


def test_vectorization_shapes_and_scalars():
    assert isinstance(rb.expected_ap_wor(10, 3, 4), float)
    assert isinstance(rb.var_ap_wr(0.3, 4), float)
    out = rb.var_ap_wor(10, 3, [1, 4, 10])
    assert out.shape == (3,)
    np.testing.assert_array_equal(out, [rb.var_ap_wor(10, 3, k) for k in (1, 4, 10)])
    grid = rb.expected_ap_wr(np.array([[0.1], [0.5]]), np.array([1, 5, 9]))
    assert grid.shape == (2, 3)
    assert grid[1, 2] == rb.expected_ap_wr(0.5, 9)
    assert rb.expected_ap_wor(10, 3, np.int64(4)) == rb.expected_ap_wor(10, 3, 4.0)


@settings(max_examples=60, deadline=None)
@given(N=st.integers(1, 60), data=st.data())
def test_property_formula_equals_recursion_and_bounds(N, data):
    m = data.draw(st.integers(0, N))
    k = data.draw(st.integers(1, N))
    mean = rb.expected_ap_wor(N, m, k)
    var = rb.var_ap_wor(N, m, k)
    ref = oracles.recursive_ap_moments_wor(N, m, k)
    assert mean == pytest.approx(ref.mean, rel=1e-11, abs=1e-14)
    assert var == pytest.approx(ref.var, rel=1e-7, abs=1e-13)
    # AP@k in [0, 1]  =>  0 <= Var <= E(1 - E)
    assert 0 <= mean <= 1 + 1e-12
    assert 0 <= var <= mean * (1 - mean) + 1e-12


@settings(max_examples=60, deadline=None)
@given(p=st.floats(0, 1), k=st.integers(1, 200))
def test_property_wr_equals_recursion_and_bounds(p, k):
    mean, var = rb.expected_ap_wr(p, k), rb.var_ap_wr(p, k)
    ref = oracles.recursive_ap_moments_wr(p, k)
    assert mean == pytest.approx(ref.mean, rel=1e-11, abs=1e-14)
    assert var == pytest.approx(ref.var, rel=1e-7, abs=1e-13)
    assert 0 <= var <= mean * (1 - mean) + 1e-12


# ----------------------------------------------------------------------------- Monte Carlo

@pytest.mark.parametrize("model,kw,ks", [
    ("wor", dict(N=50, m=25), [5, 25, 40]),
    ("wor", dict(N=50, m=2), [1, 20, 50]),
    ("wor", dict(N=7, m=3), [1, 3, 7]),
    ("wor", dict(N=10**6, m=1000), [10, 200]),
    ("wr", dict(p=0.04), [1, 20]),
    ("wr", dict(p=0.7), [3, 20, 100]),
    ("wr", dict(p=0.5), [1, 2]),          # AP@1 ~ Bernoulli(1/2): mu4 = sigma^4, SE of var is O(1/n)
    ("wor", dict(N=10, m=5), [1]),
])
def test_monte_carlo_within_4_se(model, kw, ks):
    # fixed seed; formula vs simulation within 4 standard errors (mean and variance)
    s = rb.simulate_ap_summary(model, ks, 40_000, rng=20251121, **kw)
    if model == "wor":
        e, v = rb.expected_ap_wor(kw["N"], kw["m"], ks), rb.var_ap_wor(kw["N"], kw["m"], ks)
    else:
        e, v = rb.expected_ap_wr(kw["p"], ks), rb.var_ap_wr(kw["p"], ks)
    assert np.all(np.abs(s.mean - e) <= 4 * s.se_mean)
    assert np.all(np.abs(s.var - v) <= 4 * s.se_var)


def test_simulate_ap_shapes_seeding_and_degenerate_cases():
    a = rb.simulate_ap("wor", [3, 10], 500, N=10, m=4, rng=3)
    b = rb.simulate_ap("wor", [3, 10], 500, N=10, m=4, rng=np.random.default_rng(3))
    assert a.shape == (500, 2)
    np.testing.assert_array_equal(a, b)
    assert rb.simulate_ap("wr", 5, 7, p=0.3, rng=1).shape == (7,)
    assert np.all(rb.simulate_ap("wor", 4, 50, N=6, m=6, rng=0) == 1.0)
    assert np.all(rb.simulate_ap("wor", 4, 50, N=6, m=0, rng=0) == 0.0)
    assert np.all(rb.simulate_ap("wr", 4, 50, p=0.0, rng=0) == 0.0)
    # m = 1: AP@k takes values 1/R (R <= k) or 0
    x = rb.simulate_ap("wor", 5, 2000, N=20, m=1, rng=0)
    assert set(np.round(1 / x[x > 0]).astype(int)) <= {1, 2, 3, 4, 5}
    # tiny chunks give the same distribution (and bounded work arrays)
    s = rb.simulate_ap("wor", 10, 3000, N=10, m=3, rng=5, chunk_elements=1)
    assert s.shape == (3000,)
    assert abs(s.mean() - rb.expected_ap_wor(10, 3, 10)) < 4 * s.std() / np.sqrt(3000)


def test_simulation_summary_matches_stored_draws():
    kw = dict(N=30, m=6, rng=11, chunk_elements=300)
    x = rb.simulate_ap("wor", [2, 30], 5000, **kw)
    s = rb.simulate_ap_summary("wor", [2, 30], 5000, **kw)
    np.testing.assert_allclose(s.mean, x.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(s.var, x.var(axis=0, ddof=1), rtol=1e-9)
    np.testing.assert_allclose(s.se_mean, x.std(axis=0, ddof=1) / np.sqrt(5000), rtol=1e-9)


# ----------------------------------------------------------------------------- MAP@k

def test_map_baseline_identical_and_per_user():
    b = rb.map_baseline(50, 25, [5, 40], n_users=200)
    np.testing.assert_allclose(b.mean, rb.expected_ap_wor(50, 25, [5, 40]))
    np.testing.assert_allclose(b.var, rb.var_ap_wor(50, 25, [5, 40]) / 200)
    np.testing.assert_allclose(b.se, np.sqrt(b.var))
    same = rb.map_baseline(np.full(200, 50), np.full(200, 25), [5, 40])
    np.testing.assert_allclose(same.mean, b.mean, rtol=1e-14)
    np.testing.assert_allclose(same.var, b.var, rtol=1e-14)
    het = rb.map_baseline([10, 20, 20], [1, 1, 4], 5)
    want_mean = (rb.expected_ap_wor(10, 1, 5) + 2 * rb.expected_ap_wor(20, 1, 5)) / 3
    assert het.mean == pytest.approx((want_mean * 3 - rb.expected_ap_wor(20, 1, 5)
                                      + rb.expected_ap_wor(20, 4, 5)) / 3, rel=1e-14)
    want_var = (rb.var_ap_wor(10, 1, 5) + rb.var_ap_wor(20, 1, 5) + rb.var_ap_wor(20, 4, 5)) / 9
    assert het.var == pytest.approx(want_var, rel=1e-14)
    w = rb.map_baseline_wr(0.2, 20, 10)
    assert w.mean == rb.expected_ap_wr(0.2, 20) and w.var == rb.var_ap_wr(0.2, 20) / 10


def test_map_ztest():
    b = rb.map_baseline(100, 1, 10, n_users=400)
    r = rb.map_ztest(b.mean, 100, 1, 10, n_users=400)
    assert r.statistic == pytest.approx(0.0, abs=1e-12) and r.pvalue == pytest.approx(0.5)
    obs = b.mean + 3 * b.se
    for alt, pv in [("greater", 0.0013498980316301), ("less", 0.9986501019683699),
                    ("two-sided", 0.0026997960632602)]:
        r = rb.map_ztest(obs, 100, 1, 10, n_users=400, alternative=alt)
        assert r.statistic == pytest.approx(3.0, rel=1e-12)
        assert r.pvalue == pytest.approx(pv, rel=1e-9)   # source: scipy.stats.norm at z = 3
    assert rb.map_zscore(obs, 100, 1, 10, n_users=400) == pytest.approx(3.0, rel=1e-12)
    # null variance 0 (every item relevant)
    assert rb.map_zscore(0.5, 5, 5, 3, n_users=10) == -np.inf
    assert np.isnan(rb.map_zscore(1.0, 5, 5, 3, n_users=10))
    zs = rb.map_ztest([0.1, 0.2], 100, 1, [5, 10], n_users=50)
    assert zs.statistic.shape == (2,)


def test_map_ztest_is_calibrated_under_the_null():
    # random rankings: z ~ N(0, 1) approximately (CLT over users)
    rng = np.random.default_rng(7)
    U, N, k = 400, 100, 10
    z = []
    for _ in range(300):
        R = rng.integers(1, N + 1, size=U)
        z.append(rb.map_zscore(ap_metric(R, k).mean(), N, 1, k, n_users=U))
    z = np.array(z)
    assert abs(z.mean()) < 4 / np.sqrt(300)
    assert 0.75 < z.std() < 1.25


# ----------------------------------------------------------------------------- validation

@pytest.mark.parametrize("call,exc,match", [
    (lambda: rb.expected_ap_wor(0, 0, 1), ValueError, "N must be >= 1; got 0"),
    (lambda: rb.expected_ap_wor(10, 11, 1), ValueError, r"m must lie in 0..N=10; got m=11"),
    (lambda: rb.var_ap_wor(10, -1, 1), ValueError, "m must be >= 0; got -1"),
    (lambda: rb.var_ap_wor(10, 3, 0), ValueError, r"k must lie in 1..N=10; got min 0"),
    (lambda: rb.var_ap_wor(10, 3, [2, 11]), ValueError, r"k must lie in 1..N=10; got min 2 and max 11"),
    (lambda: rb.expected_ap_wor(10, 3, 2.5), ValueError, "k must hold whole numbers"),
    (lambda: rb.expected_ap_wor(10, 3, [[1, 2]]), ValueError, "k must be a scalar or 1-D"),
    (lambda: rb.expected_ap_wor(10, 3, []), ValueError, "k must not be empty"),
    (lambda: rb.expected_ap_wor(10, 3, "3"), TypeError, "k must hold integers"),
    (lambda: rb.expected_ap_wor(10, 3, True), TypeError, "k must hold integers"),
    (lambda: rb.expected_ap_wor(10.5, 3, 1), TypeError, "N must be an integer"),
    (lambda: rb.expected_ap_wr(1.5, 3), ValueError, r"p must lie in \[0.0, 1.0\]; got 1.5"),
    (lambda: rb.var_ap_wr([0.2, np.nan], 3), ValueError, "p must lie in"),
    (lambda: rb.var_ap_wr(0.2, 0), ValueError, "k must lie in >= 1; got min 0"),
    (lambda: oracles.enumerate_ap_wor(30, 15, 3), ValueError, "exceed max_outcomes"),
    (lambda: oracles.enumerate_ap_wr(0.5, 21), ValueError, r"k must lie in 1..max_k=20"),
    (lambda: rb.simulate_ap("bernoulli", 3, 10, p=0.1), ValueError, "model must be one of"),
    (lambda: rb.simulate_ap("wor", 3, 10, N=10), ValueError, "needs N and m"),
    (lambda: rb.simulate_ap("wr", 3, 10, N=10, m=2), ValueError, "needs p"),
    (lambda: rb.simulate_ap("wr", 3, 10, p=0.1, N=4), ValueError, "takes p, not N and m"),
    (lambda: rb.simulate_ap("wr", 3, 0, p=0.1), ValueError, "n_sims must be >= 1; got 0"),
    (lambda: rb.simulate_ap_summary("wr", 3, 1, p=0.1), ValueError, "n_sims must be >= 2; got 1"),
    (lambda: rb.map_baseline(10, 2, 3), ValueError, "n_users is required"),
    (lambda: rb.map_baseline([10, 10], [1, 2], 3, n_users=3), ValueError, "n_users must equal"),
    (lambda: rb.map_baseline([10, 5], [1, 2], 6), ValueError, r"k must lie in 1..min\(N\)=5"),
    (lambda: rb.map_baseline([10, 10, 10], [1, 2], 3), ValueError, "must broadcast"),
    (lambda: rb.map_ztest(1.2, 10, 2, 3, 5), ValueError, r"observed_map must lie in \[0, 1\]"),
    (lambda: rb.map_ztest(0.2, 10, 2, 3, 5, alternative="bigger"), ValueError, "alternative must be"),
    (lambda: rb.harmonic_number(-1), ValueError, "k must be >= 0"),
])
def test_validation_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
