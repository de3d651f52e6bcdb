"""Tests of the linear metric estimators BV, CLS and MN (sampling_lib.estimators._linear, ._cls)."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from sampling_lib.estimators._cls import cls
from sampling_lib.estimators._linear import (
    bv,
    bv_from_pmf,
    bv_rank_pmf,
    bv_sampled_metric,
    exact_mse,
    mn,
    mn_from_pmf,
    mn_sampled_metric,
    mn_sampled_metric_lstsq,
    mse_bound,
    multinomial_linear_var,
    sampled_pmf,
)
from sampling_lib.kernels import kernel
from sampling_lib.metrics import metric_values


def _rand_pmf(rng, N, alpha=1.0):
    return rng.dirichlet(np.full(N, alpha))


# ---------------------------------------------------------------- BV
@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
@pytest.mark.parametrize("N", [5, 8])
def test_bv_gamma0_square_kernel_unbiased_on_exact_expectations(N, scheme):
    # N = n: the kernel is square and invertible, so an unbiased sampled metric
    # exists for every F; BV with gamma = 0 finds it for any full-support prior,
    # and on the exact expectation E[P~] = K^T P the estimate is exact.
    rng = np.random.default_rng(N)
    K = kernel(N, N, scheme)
    truth, prior = _rand_pmf(rng, N), _rand_pmf(rng, N)
    w = bv_from_pmf(K.T @ truth, N, N, gamma=0.0, prior=prior, scheme=scheme)
    np.testing.assert_allclose(w, truth, atol=1e-10)


def test_bv_gamma0_unbiased_when_F_in_range_of_kernel():
    # N > n: for F = K x* (an unbiased sampled metric x* exists), BV with gamma=0
    # returns x* and its expected estimate equals the true metric for any truth.
    rng = np.random.default_rng(1)
    N, n = 40, 6
    K = kernel(N, n, "binomial")
    x_star = rng.normal(size=n)
    F = K @ x_star
    prior = _rand_pmf(rng, N)
    x = bv_sampled_metric(F, N, n, gamma=0.0, prior=prior)
    np.testing.assert_allclose(x, x_star, rtol=1e-7, atol=1e-7)
    for _ in range(3):
        truth = _rand_pmf(rng, N, 0.3)
        w = bv_from_pmf(K.T @ truth, N, n, gamma=0.0, prior=prior)
        assert w @ F == pytest.approx(truth @ F, abs=1e-9)


def test_bv_weights_match_sampled_metric():
    rng = np.random.default_rng(2)
    N, n = 60, 9
    r = rng.integers(1, n + 1, size=300)
    prior = _rand_pmf(rng, N)
    for metric in ["recall@5", "ndcg@10", "ap@20"]:
        F = metric_values(metric, N)
        x = bv_sampled_metric(F, N, n, 0.1, prior)
        w = bv(r, N, n, 0.1, prior)
        assert w @ F == pytest.approx(sampled_pmf(r, n) @ x, rel=1e-10)


def test_bv_minimizes_its_objective():
    # TORS24 eq 8 / AAAI21 eq 10 evaluated directly, minimized by BFGS
    rng = np.random.default_rng(3)
    N, n, gamma = 9, 4, 0.1
    K = kernel(N, n, "binomial")
    prior, F = _rand_pmf(rng, N), rng.random(N)

    def obj(x):
        m = K @ x
        return prior @ ((m - F) ** 2 + gamma * (K @ x**2 - m**2))

    ref = minimize(obj, np.zeros(n), method="BFGS", options={"gtol": 1e-12}).x
    np.testing.assert_allclose(bv_sampled_metric(F, N, n, gamma, prior), ref, atol=1e-6)


def test_bv_rank_pmf_is_eq28_and_equals_weights():
    rng = np.random.default_rng(4)
    N, n = 30, 5
    r = rng.integers(1, n + 1, size=100)
    # literal eq 28: differences of BV Recall@R estimates
    rec = [bv(r, N, n) @ metric_values(f"recall@{R}", N) for R in range(1, N + 1)]
    lit = np.diff(rec, prepend=0.0)
    np.testing.assert_allclose(bv_rank_pmf(r, N, n), lit, atol=1e-12)
    np.testing.assert_allclose(bv_rank_pmf(r, N, n), bv(r, N, n), atol=1e-12)


# ---------------------------------------------------------------- MN
def _L_bruteforce(x, F, prior, K, M):
    """TORS24 eq 39 term by term, with explicit loops over R and r."""
    N, n = K.shape
    L1 = L2 = 0.0
    for R in range(N):
        e = sum(K[R, r] * x[r] for r in range(n))
        e2 = sum(K[R, r] * x[r] ** 2 for r in range(n))
        L1 += prior[R] * (e - F[R]) ** 2
        L2 += (e2 - e * e) / M
    return L1 + L2


@pytest.mark.parametrize(
    "N, n, M, scheme",
    [(6, 3, 10, "binomial"), (7, 4, 50, "binomial"), (8, 3, 5, "hypergeometric")],
)
def test_mn_equals_bruteforce_minimization_of_L(N, n, M, scheme):
    rng = np.random.default_rng(N * 10 + n)
    K = kernel(N, n, scheme)
    prior, F = _rand_pmf(rng, N), rng.random(N)
    ref = minimize(
        _L_bruteforce, np.zeros(n), args=(F, prior, K, M), method="BFGS", options={"gtol": 1e-12}
    ).x
    x = mn_sampled_metric(F, N, n, prior, M, scheme=scheme)
    np.testing.assert_allclose(x, ref, atol=1e-6)
    assert mse_bound(x, F, N, n, prior, M, scheme=scheme).L == pytest.approx(
        _L_bruteforce(x, F, prior, K, M), rel=1e-12
    )
    # weight vector reproduces P~ @ x
    r = rng.integers(1, n + 1, size=M)
    assert mn(r, N, n, prior, scheme=scheme) @ F == pytest.approx(sampled_pmf(r, n) @ x, rel=1e-10)


def test_mn_equals_generic_lstsq():
    rng = np.random.default_rng(5)
    N, n, M = 25, 6, 40
    prior, F = _rand_pmf(rng, N), metric_values("ndcg@8", N)
    np.testing.assert_allclose(
        mn_sampled_metric(F, N, n, prior, M), mn_sampled_metric_lstsq(F, N, n, prior, M), atol=1e-8
    )


def test_mn_M_default_is_number_of_users():
    rng = np.random.default_rng(6)
    r = rng.integers(1, 11, size=123)
    np.testing.assert_allclose(mn(r, 100, 10, None), mn(r, 100, 10, None, M=123))
    assert not np.allclose(mn(r, 100, 10, None), mn(r, 100, 10, None, M=5))


@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
def test_identity_prior_reproducing_sampled_pmf_gives_plugin(scheme):
    # K^T prior = P~  =>  MN and BV (any gamma) return w = prior
    rng = np.random.default_rng(7)
    N, n = 200, 20
    prior = _rand_pmf(rng, N, 0.5)
    pt = kernel(N, n, scheme).T @ prior
    for M in [10, 1000, 10**6]:
        np.testing.assert_allclose(mn_from_pmf(pt, N, n, prior, M, scheme=scheme), prior, atol=1e-10)
    for gamma in [0.001, 0.01, 0.1, 1.0]:
        np.testing.assert_allclose(
            bv_from_pmf(pt, N, n, gamma, prior, scheme=scheme), prior, atol=1e-10
        )


@settings(max_examples=25, deadline=None)
@given(
    N=st.integers(5, 60),
    n=st.integers(2, 8),
    seed=st.integers(0, 2**31),
    gamma=st.floats(0.001, 1.0),
)
def test_weights_sum_to_one(N, n, seed, gamma):
    n = min(n, N)
    rng = np.random.default_rng(seed)
    r = rng.integers(1, n + 1, size=50)
    prior = _rand_pmf(rng, N)
    assert bv(r, N, n, gamma, prior).sum() == pytest.approx(1.0, abs=1e-8)
    assert mn(r, N, n, prior).sum() == pytest.approx(1.0, abs=1e-8)


def test_mse_bound_is_upper_bound_of_exact_mse():
    rng = np.random.default_rng(8)
    N, n, M = 80, 8, 200
    W = _rand_pmf(rng, N, 0.3)
    for metric in ["recall@5", "ndcg@10"]:
        F = metric_values(metric, N)
        for x in [mn_sampled_metric(F, N, n, W, M), bv_sampled_metric(F, N, n, 0.01, W)]:
            assert exact_mse(x, F, W, n, M) <= mse_bound(x, F, N, n, W, M).L + 1e-15


def test_multinomial_linear_var_enumeration():
    # TORS24 Appendix E vs exact enumeration of Multinomial(M=4, theta) over 3 cells
    theta, w, M = np.array([0.2, 0.5, 0.3]), np.array([1.0, -2.0, 0.5]), 4
    from scipy.stats import multinomial

    vals, probs = [], []
    for x in itertools.product(range(M + 1), repeat=3):
        if sum(x) == M:
            vals.append(w @ np.array(x))
            probs.append(multinomial.pmf(x, M, theta))
    vals, probs = np.array(vals), np.array(probs)
    var = probs @ vals**2 - (probs @ vals) ** 2
    assert multinomial_linear_var(w, theta, M) == pytest.approx(var, rel=1e-12)


# ---------------------------------------------------------------- CLS
def test_cls_matches_constrained_minimization():
    # Recall@R by CLS vs SLSQP on the monotone-constrained problem (TORS24 eq 7)
    rng = np.random.default_rng(9)
    N, n = 30, 5
    K = kernel(N, n, "binomial")
    prior = _rand_pmf(rng, N)
    r = rng.integers(1, n + 1, size=200)
    pt = sampled_pmf(r, n)
    w = cls(r, N, n, prior)
    rec = np.cumsum(w)
    cons = [{"type": "ineq", "fun": (lambda x, j=j: x[j] - x[j + 1])} for j in range(n - 1)]
    for R in [1, 3, 7, 15]:
        F = metric_values(f"recall@{R}", N)
        res = minimize(
            lambda x: prior @ (K @ x - F) ** 2,
            np.linspace(1, 0, n),
            method="SLSQP",
            constraints=cons,
            options={"ftol": 1e-14, "maxiter": 1000},
        )
        assert rec[R - 1] == pytest.approx(pt @ res.x, abs=1e-5)


def test_cls_max_rank_truncation_exact_for_topk():
    rng = np.random.default_rng(10)
    N, n = 120, 10
    r = rng.integers(1, n + 1, size=300)
    full, trunc = cls(r, N, n), cls(r, N, n, max_rank=20)
    np.testing.assert_allclose(trunc[:20], full[:20], atol=1e-12)
    assert trunc.sum() == pytest.approx(1.0)
    F = metric_values("ndcg@20", N)
    assert trunc @ F == pytest.approx(full @ F, abs=1e-12)


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: bv([0, 1], 10, 5), ValueError, r"sampled_ranks must lie in 1..n=5"),
        (lambda: bv([1, 6], 10, 5), ValueError, r"sampled_ranks must lie in 1..n=5"),
        (lambda: bv([1.5], 10, 5), ValueError, r"sampled_ranks must be integers"),
        (lambda: bv([], 10, 5), ValueError, r"must not be empty"),
        (lambda: bv([1], 10, 5, gamma=1.5), ValueError, r"gamma must lie in \[0.0, 1.0\]"),
        (lambda: bv([1], 10, 5, gamma=-0.1), ValueError, r"gamma"),
        (lambda: bv([1], 10, 11), ValueError, r"n must lie in 2..N=10"),
        (lambda: bv([1], 10, 5, prior=np.ones(9) / 9), ValueError, r"prior must have length N=10"),
        (lambda: bv([1], 10, 5, prior=np.ones(10)), ValueError, r"prior must sum to 1"),
        (lambda: bv([1], 10, 5, scheme="poisson"), ValueError, r"scheme must be one of"),
        (lambda: mn([1], 10, 5, None, M=0), ValueError, r"M must be >= 1"),
        (lambda: mn([1], 10, 5, None, M=2.5), TypeError, r"M must be an integer"),
        (lambda: cls([1], 10, 5, max_rank=11), ValueError, r"max_rank must be <= 10"),
        (lambda: mn_from_pmf([0.5, 0.5], 10, 5, None, 10), ValueError, r"length n=5"),
    ],
)
def test_validation_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_singular_system_reports_condition_number():
    # prior concentrated on R = 1 gives zero weight to every r > 1
    prior = np.zeros(50)
    prior[0] = 1.0
    with pytest.raises(np.linalg.LinAlgError, match="condition number inf"):
        bv([1, 2], 50, 5, gamma=0.0, prior=prior)
    # gamma = 0 with a uniform prior: Bernstein Gram matrix, numerically singular for n ~ 80
    with pytest.raises(np.linalg.LinAlgError, match=r"condition number \d\.\d+e\+\d+"):
        bv([1, 2], 2000, 80, gamma=0.0)
    # the same problem is regularized by gamma > 0
    assert np.isfinite(bv([1, 2], 2000, 80, gamma=0.01)).all()


# ---------------------------------------------------------------- sampling efficiency (eq 44)
def test_sampling_efficiency_hand_computed():
    from sampling_lib.sampling import sampling_efficiency

    # ladder 10, 20, 40; M = 6 users: 3 stop at 10, 1 at 20, 1 resolved at 40, 1 capped
    r = [2, 5, 3, 4, 2, 1]
    nu = [10, 10, 10, 20, 40, 40]
    eff = sampling_efficiency(r, nu, 10, 40)
    assert eff.sizes.tolist() == [10, 20, 40]
    assert eff.finished.tolist() == [3, 1, 1] and eff.capped == 1
    assert eff.entering.tolist() == [6, 3, 2]
    # C_0 = M n0 / m0 = 6*10/3; C_1 = 3*(20-10)/1; C_2 = 2*(40-20)/1  (TORS24 eq 44)
    np.testing.assert_allclose(eff.cost, [20.0, 30.0, 40.0])
    assert eff.n_max_for(30.0) == 20 and eff.n_max_for(5.0) == 10


def test_sampling_efficiency_validation():
    from sampling_lib.sampling import sampling_efficiency

    with pytest.raises(ValueError, match="ladder"):
        sampling_efficiency([2, 2], [10, 30], 10, 40)
    with pytest.raises(ValueError, match="same length"):
        sampling_efficiency([2], [10, 20], 10, 40)
    with pytest.raises(ValueError, match="sampled_ranks must lie in 1..n_max=40"):
        sampling_efficiency([41, 2], [10, 20], 10, 40)


@pytest.mark.parametrize("N, n, scheme", [(3000, 100, "binomial"), (2000, 300, "hypergeometric")])
def test_banded_gram_equals_dense_product(N, n, scheme):
    from sampling_lib.estimators._linear import _row_support, _weighted_gram

    rng = np.random.default_rng(11)
    K = kernel(N, n, scheme)
    v = _rand_pmf(rng, N, 0.2)
    dense = K.T @ (v[:, None] * K)
    banded = _weighted_gram(K, v, _row_support(N, n, scheme))
    assert np.max(np.abs(banded - dense)) <= 1e-15 * np.max(np.abs(dense))


@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
def test_bv_gamma1_is_one_em_step(scheme):
    # TORS24 eq 34 (AAAI21 eq 21) written out: pi_R <- sum_r P~(r) pi_R P(r|R) / sum_j pi_j P(r|j)
    rng = np.random.default_rng(12)
    N, n = 300, 12
    r = rng.integers(1, 6, size=500)
    pi = _rand_pmf(rng, N)
    K = kernel(N, n, scheme)
    pt = sampled_pmf(r, n)
    em = pi * (K @ (pt / (K.T @ pi)))
    np.testing.assert_allclose(bv(r, N, n, gamma=1.0, prior=pi, scheme=scheme), em, atol=1e-14)


def test_mn_singular_system_reports_condition_number():
    # n = N without replacement: K = I, so Lambda_1 - K^T K = 0 and G = diag(prior): singular if the prior has zeros
    prior = np.zeros(5)
    prior[0] = 1.0
    with pytest.raises(np.linalg.LinAlgError, match="mn: the n x n system is singular.*condition number inf"):
        mn([1, 1, 1], 5, 5, prior, scheme="hypergeometric")
