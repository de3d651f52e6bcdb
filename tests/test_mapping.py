"""Tests for sampling_lib.mapping (KDD20 Sec 2.4-4, TORS24 Sec 3 / Appendix C)."""
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sampling_lib import kernels, mapping
from sampling_lib.rankdist import beta_rank_pmf, draw_global_ranks
from sampling_lib.sampling import sample_ranks


# --------------------------------------------------------------------------- helpers
def _beta_fraction_reference(N, n, a):
    """Independent reference: the literal recurrence (KDD20 eqs 15-17) in exact arithmetic.

    The increments y_{k+1} = a (N-1)^a C(n-1, k) B(a+k, n-k) are formed as exact
    rationals divided by a common (N-1)^a factor: y_{k+1} / (N-1)^a =
    a Gamma(n) Gamma(a+k) / (Gamma(k+1) Gamma(n+a)); the Gamma ratios of a rational
    a are rational after dividing by Gamma(a) (a rising factorial). The running
    sum of eq 15 is then raised to 1/a in 60-digit decimal arithmetic.
    """
    a = Fraction(a)
    # Gamma(a+k)/Gamma(a) = prod_{i<k}(a+i), Gamma(n+a)/Gamma(a) = prod_{i<n}(a+i)
    den = math.prod(a + i for i in range(n))
    out = []
    run = Fraction(0)
    rising = Fraction(1)
    for k in range(n):
        run += a * Fraction(math.factorial(n - 1), math.factorial(k)) * rising / den
        rising *= a + k
        with localcontext() as ctx:
            ctx.prec = 60
            g = (Decimal(run.numerator) / Decimal(run.denominator)) ** (
                Decimal(a.denominator) / Decimal(a.numerator))
            out.append(float(1 + (N - 1) * g))
    return np.array(out)


# --------------------------------------------------------------------------- hand cases
# Hand-computed: linear (KDD20 eq 9), bound (eq 13), uniform (eq 18) for N = 11, n = 3.
@pytest.mark.parametrize("func, N, n, expected", [
    (mapping.linear, 11, 3, [1.0, 6.0, 11.0]),          # (k-1)*10/2 + 1
    (mapping.linear, 2, 2, [1.0, 2.0]),
    (mapping.bound, 11, 3, [3.0, 8.0, 11.0]),           # floor(2.5+.5), floor(7.5+.5), 13 -> clip 11
    (mapping.bound, 2, 2, [1.0, 2.0]),                  # floor(.5+.5), floor(1.5+.5)
    (mapping.uniform, 11, 2, [6.0, 11.0]),              # k*10/2 + 1
    (mapping.uniform, 3706, 100, None),                 # checked against beta(., 1) below
])
def test_closed_forms_hand_cases(func, N, n, expected):
    f = func(N, n)
    assert f.shape == (n,) and f.dtype == float
    if expected is not None:
        np.testing.assert_array_equal(f, expected)


def test_bound_unclipped_and_floor_exact():
    # KDD20 eq 13 unclipped at k = n: floor(N - 1/2 + (N-1)/(2(n-1))) = 3724 for ml-1m sizes
    assert mapping.bound(3706, 100, clip=False)[-1] == 3724.0
    assert mapping.bound(3706, 100)[-1] == 3706.0
    # integer arithmetic: floor(((2k-1)(N-1) + (n-1)) / (2(n-1))); N=5, n=3:
    # k=1: 6/4 -> 1, k=2: 14/4 -> 3, k=3: 22/4 -> 5
    np.testing.assert_array_equal(mapping.bound(5, 3, clip=False), [1.0, 3.0, 5.0])
    # N=7, n=3: k=1: (6+2)/4 = 2 exactly (an integer: floor must not round down to 1)
    assert mapping.bound(7, 3)[0] == 2.0


# f(k; a) for n = 2 and n = 3 by hand (KDD20 eqs 16-17):
# n = 2: f(1) = 1 + (N-1) [a B(a, 2)]^(1/a) = 1 + (N-1) (1+a)^(-1/a).
# n = 3, a = 1/2: increments p_j = a C(2, j) B(a+j, 3-j) = 8/15, 4/15, 3/15,
#   so f = 1 + (N-1) [(8/15)^2, (12/15)^2, 1].
@pytest.mark.parametrize("N, n, a, expected, rtol", [
    (11, 2, 1.0, [1 + 10 / 2, 11], 1e-15),
    (11, 2, 0.5, [1 + 10 * 4 / 9, 11], 1e-14),
    (11, 2, 2.0, [1 + 10 / math.sqrt(3), 11], 1e-14),
    (101, 3, 0.5, [1 + 100 * 64 / 225, 1 + 100 * 144 / 225, 101], 1e-14),
    (3706, 100, 1.0, list(3705 * np.arange(1, 101) / 100 + 1), 1e-13),   # eq 18
])
def test_beta_hand_cases(N, n, a, expected, rtol):
    for method in ("logcdf", "recurrence", "exact"):
        np.testing.assert_allclose(mapping.beta(N, n, a, method=method), expected, rtol=rtol)


# Exact-arithmetic reference (literal eqs 15-17, independent code path), tolerance per case.
@pytest.mark.parametrize("N, n, a, rtol", [
    (3706, 100, 0.3, 1e-13),
    (3706, 100, 0.24, 1e-13),
    (10**7, 300, 0.5, 1e-13),
    (10**7, 300, 1.5, 1e-13),
    (10**7, 300, 2.0, 1e-13),
    (10**6, 200, 0.05, 1e-12),
    (10**6, 200, 0.01, 1e-12),
    (50, 50, 0.7, 1e-13),
])
def test_beta_matches_exact_reference(N, n, a, rtol):
    ref = _beta_fraction_reference(N, n, a)
    np.testing.assert_allclose(mapping.beta(N, n, a), ref, rtol=rtol)
    np.testing.assert_allclose(mapping.beta(N, n, a, method="exact"), ref, rtol=1e-15)


def test_uniform_equals_beta_at_one():
    for N, n in [(2, 2), (3706, 100), (10**7, 10**4)]:
        np.testing.assert_allclose(mapping.beta(N, n, 1.0), mapping.uniform(N, n), rtol=1e-12)


# TORS24 Table 3 (n = 1000): printed integers f(1), f(2) for pinterest-20 (N = 9916),
# yelp (N = 25815), ml-20m (N = 20720); linear / Beta rounded to nearest, bound floored.
@pytest.mark.parametrize("N, name, expected", [
    (9916, "linear", [1, 11]), (9916, "bound", [5, 15]), (9916, "beta0.5", [9, 19]), (9916, "beta1", [11, 21]),
    (25815, "linear", [1, 27]), (25815, "bound", [13, 39]), (25815, "beta0.5", [21, 47]), (25815, "beta1", [27, 53]),
    (20720, "linear", [1, 22]), (20720, "bound", [10, 31]), (20720, "beta0.5", [17, 38]), (20720, "beta1", [22, 42]),
])
def test_tors_table3(N, name, expected):
    f = {"linear": lambda: mapping.linear(N, 1000), "bound": lambda: mapping.bound(N, 1000),
         "beta0.5": lambda: mapping.beta(N, 1000, 0.5), "beta1": lambda: mapping.beta(N, 1000, 1.0)}[name]()
    np.testing.assert_array_equal(np.round(f[:2]), expected)


# --------------------------------------------------------------------------- properties
@settings(max_examples=40, deadline=None)
@given(N=st.integers(2, 10**7), n_frac=st.floats(0.0, 1.0), a=st.floats(0.01, 2.0))
def test_beta_properties(N, n_frac, a):
    n = 2 + int(n_frac * (min(N, 3000) - 2))
    f = mapping.beta(N, n, a)
    assert f.shape == (n,) and np.all(np.isfinite(f))
    assert np.all(np.diff(f) >= 0) and f[0] >= 1.0
    assert abs(f[-1] - N) <= 1e-12 * N                       # KDD20 Lemma 3.1
    fr = mapping.beta(N, n, a, method="recurrence")           # the literal recurrence agrees
    np.testing.assert_allclose(fr, f, rtol=1e-8)   # the loop loses ~1e-9 at a = 0.01, n = 10^4


@pytest.mark.parametrize("a", [1e-3, 0.01, 0.3, 0.5, 1.0, 2.0])
def test_beta_extreme_sizes(a):
    N, n = 10**7, 10**4
    f = mapping.beta(N, n, a)
    assert np.all(np.isfinite(f))
    assert np.all(np.diff(f) > 0)
    assert f[-1] == pytest.approx(N, rel=1e-12)
    assert 1.0 <= f[0] < N


@pytest.mark.parametrize("N, n, a", [(3706, 100, 0.2), (3706, 100, 0.8), (10**5, 500, 1.7), (10**7, 1000, 0.3)])
def test_linearity_ratio(N, n, a):
    # KDD20 Sec 3.3: y_{k+1}/y_k = 1 + (a-1)/k with y_k = [f(k)-1]^a - [f(k-1)-1]^a
    f = mapping.beta(N, n, a)
    y = np.diff(np.concatenate(([0.0], (f - 1.0) ** a)))
    k = np.arange(1, n)
    np.testing.assert_allclose(y[1:] / y[:-1], 1 + (a - 1) / k, rtol=1e-10 * max(1, n / 100))


def test_monotone_in_a_on_grid():
    grid = np.linspace(0.02, 2.0, 60)
    for N, n in [(10, 3), (3706, 100), (10**6, 1000)]:
        v = mapping.monotonicity_violation(N, n, grid)
        assert v["max_violation"] <= 1e-12 * N
        assert v["min_margin"] > 0
        # the inequality exactly as printed in KDD20 Remedy 3 is violated
        assert mapping.monotonicity_violation(N, n, grid, "decreasing")["max_violation"] > 0.1


def test_monotonicity_violation_detects_planted_violation(monkeypatch):
    real = mapping.beta

    def fake(N, n, a, **kw):
        f = real(N, n, a, **kw)
        if a == 0.5:
            f = f.copy()
            f[3] += 1000.0
        return f
    monkeypatch.setattr(mapping, "beta", fake)
    v = mapping.monotonicity_violation(3706, 100, [0.3, 0.5, 0.7])
    # f(k; 0.7) < f(k; 0.5) at k = 4 breaks "a > b implies f(k; a) >= f(k; b)"
    assert (v["k"], v["a"], v["b"]) == (4, 0.7, 0.5)
    assert v["max_violation"] > 900


# --------------------------------------------------------------------------- fit_beta_a
def test_fit_beta_a_fixed_point_and_trace():
    N, n = 3706, 100
    R = draw_global_ranks(beta_rank_pmf(N, 0.35), 4000, rng=1)
    r = sample_ranks(R, N, n, rng=2)
    res = mapping.fit_beta_a(r, N, n, a0=1.0)
    assert res.iterates[0] == 1.0 and res.iterates[-1] == res.a and res.n_iter == len(res.iterates) - 1
    # the fixed point of KDD20 eq 19, evaluated with the literal recurrence map
    f = mapping.beta(N, n, res.a, method="recurrence")
    a_next = -r.size / np.sum(np.log((f[r - 1] - 1) / (N - 1)))
    assert a_next == pytest.approx(res.a, rel=1e-8)
    assert np.all(np.diff(res.loglik) >= -1e-9)                # EM-like ascent
    np.testing.assert_allclose(res.f, mapping.beta(N, n, res.a))
    # from another start the same fixed point
    assert mapping.fit_beta_a(r, N, n, a0=0.2).a == pytest.approx(res.a, rel=1e-8)
    assert 0.2 < res.a < 0.8


def test_fit_beta_a_errors():
    with pytest.raises(ValueError, match="sampled_ranks"):
        mapping.fit_beta_a([1, 101], 3706, 100)
    with pytest.raises(ValueError, match="n=100"):
        mapping.fit_beta_a([100, 100], 3706, 100)
    with pytest.raises(RuntimeError, match="did not converge"):
        mapping.fit_beta_a([1, 5, 50], 3706, 100, max_iter=1)
    with pytest.raises(ValueError, match="a0"):
        mapping.fit_beta_a([1, 5], 3706, 100, a0=0.0)


# --------------------------------------------------------------------------- oracle
def _oracle_brute(pmf, n, scheme):
    N = pmf.size
    hr = np.concatenate(([0.0], np.cumsum(pmf)))
    eshr = np.cumsum(pmf @ kernels.kernel(N, n, scheme))
    d = np.abs(hr[None, :] - eshr[:, None])
    return np.argmin(d, axis=1).astype(float)     # argmin returns the first (smallest K) on ties


@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
@pytest.mark.parametrize("pmf", [
    beta_rank_pmf(200, 0.3),
    beta_rank_pmf(50, 1.5),
    np.r_[0.5, np.zeros(10), 0.5, np.zeros(8)],    # plateaus: ties broken to the smallest K
    np.r_[np.full(10, 0.1), np.zeros(30)],          # trailing zero-mass plateau: HR = 1 from K = 10
])
def test_oracle_equals_brute_force(pmf, scheme):
    np.testing.assert_array_equal(mapping.oracle(pmf, 10, scheme), _oracle_brute(pmf, 10, scheme))


def test_oracle_uniform():
    np.testing.assert_array_equal(mapping.oracle(np.full(100, 0.01), 10), 10 * np.arange(1, 11))


# --------------------------------------------------------------------------- views, errors
def test_views_and_hr_at():
    hr = np.array([0.5, 0.75, 1.0])
    np.testing.assert_array_equal(mapping.hr_at(hr, [0, 0.99, 1, 2.5, 3, 10]), [0, 0, 0.5, 0.75, 1, 1])
    np.testing.assert_array_equal(mapping.global_on_sampled_axis(hr, [1.0, 3.0]), [0.5, 1.0])
    x, y = mapping.sampled_on_global_axis([0.3, 1.0], [2.0, 3.0])
    np.testing.assert_array_equal(x, [2.0, 3.0]) and np.testing.assert_array_equal(y, [0.3, 1.0])
    with pytest.raises(ValueError, match="positions"):
        mapping.hr_at(hr, [-1.0])
    with pytest.raises(ValueError, match="equal length"):
        mapping.sampled_on_global_axis([0.3], [1.0, 2.0])


def test_alignment_errors_hand_case():
    shr = np.array([0.1, 0.2, 0.4, 0.0] + [1.0] * 8)     # n = 12
    hr = np.array([0.2, 0.2, 0.3, 0.1] + [1.0] * 8)
    e = mapping.alignment_errors(shr, hr)
    assert e["abs"] == pytest.approx((0.1 + 0 + 0.1 + 0.1) / 12)
    assert e["rel"] == pytest.approx((1.0 + 0 + 0.25) / 11)        # SHR = 0 term left out
    assert e["abs@1"] == pytest.approx(0.1) and e["rel@1"] == pytest.approx(1.0)
    assert e["abs@2-10"] == pytest.approx(0.2 / 9)
    assert e["rel@2-10"] == pytest.approx(0.25 / 8)


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize("call, exc, match", [
    (lambda: mapping.linear(1, 2), ValueError, "N"),
    (lambda: mapping.linear(10, 11), ValueError, "n must lie in 2..N=10"),
    (lambda: mapping.bound(10, 1), ValueError, "n"),
    (lambda: mapping.uniform(10.5, 2), TypeError, "N"),
    (lambda: mapping.beta(10, 3, 0.0), ValueError, "a must lie in"),
    (lambda: mapping.beta(10, 3, -1), ValueError, "a must lie in"),
    (lambda: mapping.beta(10, 3, float("nan")), ValueError, "a must be finite"),
    (lambda: mapping.beta(10, 3, 0.5, method="magic"), ValueError, "method"),
    (lambda: mapping.beta(10**5, 10**4 + 1, 0.5, method="exact"), ValueError, "n <= 10000"),
    (lambda: mapping.oracle([0.5, 0.6], 2), ValueError, "sum to 1"),
    (lambda: mapping.oracle([0.5, 0.5], 2, "bernoulli"), ValueError, "scheme"),
    (lambda: mapping.monotonicity_violation(10, 3, [0.5]), ValueError, "a_values"),
    (lambda: mapping.monotonicity_violation(10, 3, [0.5, 1], "up"), ValueError, "direction"),
])
def test_input_validation(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
