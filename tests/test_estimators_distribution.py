"""Tests of the rank-distribution estimators: mle, wmle, mes, adaptive_mle."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize

from sampling_lib.exceptions import ConvergenceWarning
from sampling_lib.estimators import (
    EMResult,
    MESResult,
    adaptive_mle,
    adaptive_mle_fit,
    mes,
    mes_fit,
    mes_objective,
    mixture_em,
    mixture_loglik,
    mle,
    mle_fit,
    wmle,
    wmle_fit,
    wmle_weights,
)
from sampling_lib.kernels import kernel
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.sampling import adaptive_sample_ranks, sample_ranks

SQ = dict(tol=1e-12, max_iter=100_000, accelerate="squarem")


def _simulate(N, n, M, seed, model="beta_a0.35"):
    rng = np.random.default_rng(seed)
    R = draw_global_ranks(synthetic_models(N)[model], M, rng=rng)
    return sample_ranks(R, N, n, rng=rng)


def _naive_em(r, sizes, N, iters, scheme="binomial"):
    """Per-user EM, TORS24 eqs 61-62 (AAAI21 eq 20 when all sizes are equal)."""
    pi = np.full(N, 1.0 / N)
    cols = np.stack([kernel(N, int(s), scheme)[:, ri - 1] for ri, s in zip(r, sizes)], axis=1)
    for _ in range(iters):
        post = pi[:, None] * cols
        post /= post.sum(axis=0, keepdims=True)
        pi = post.mean(axis=1)
    return pi


def _brute_force_mle(r, N, n):
    """Maximize the log-likelihood on the simplex with scipy (SLSQP)."""
    cons = ({"type": "eq", "fun": lambda x: x.sum() - 1.0},)

    def nll(x):
        x = np.clip(x, 0.0, None)
        return -mixture_loglik(x / x.sum(), r, N, n)

    res = optimize.minimize(
        nll, np.full(N, 1.0 / N), method="SLSQP", bounds=[(0.0, 1.0)] * N,
        constraints=cons, options=dict(ftol=1e-15, maxiter=2000),
    )
    x = np.clip(res.x, 0.0, None)
    return x / x.sum()


# --- EM against a brute-force optimiser ----------------------------------------
# source: scipy.optimize SLSQP on the simplex; N = n makes P(r|R) square and of
# full rank, so the MLE is unique. (N, M, seed, tolerance on pi, tolerance on loglik)
BRUTE_CASES = [
    (4, 200, 0, 1e-5, 1e-7),
    (6, 300, 1, 1e-5, 1e-7),
    (8, 500, 2, 1e-5, 1e-7),
]


@pytest.mark.parametrize("N, M, seed, tol_pi, tol_ll", BRUTE_CASES)
def test_em_equals_brute_force_mle(N, M, seed, tol_pi, tol_ll):
    r = _simulate(N, N, M, seed, model="beta_a0.50")
    em = mle_fit(r, N, N, **SQ)
    assert em.converged and em.gap <= 1e-12
    bf = _brute_force_mle(r, N, N)
    ll_bf = mixture_loglik(bf, r, N, N)
    assert em.loglik >= ll_bf - tol_ll  # EM is at least as good as the optimiser
    assert abs(em.loglik - ll_bf) <= tol_ll * abs(ll_bf) + 1e-6
    np.testing.assert_allclose(em.pmf, bf, atol=tol_pi)


@pytest.mark.parametrize("seed", [0, 1])
def test_squarem_and_em_reach_same_fixed_point(seed):
    N = 7
    r = _simulate(N, N, 400, seed)
    a = mle_fit(r, N, N, **SQ)
    b = mle_fit(r, N, N, tol=1e-12, max_iter=1_000_000)
    assert a.converged and b.converged
    assert a.n_estep < b.n_estep
    np.testing.assert_allclose(a.pmf, b.pmf, atol=1e-7)
    assert a.loglik == pytest.approx(b.loglik, rel=1e-12)


def test_gap_bounds_suboptimality():
    # the certified gap after k EM steps bounds (l* - l_k) / M
    N, n = 60, 12
    r = _simulate(N, n, 500, 3)
    star = mle_fit(r, N, n, tol=1e-9, max_iter=200_000, accelerate="squarem")
    for k in (1, 10, 100):
        res = mle_fit(r, N, n, max_iter=k)
        assert (star.loglik - res.loglik) / r.size <= res.gap + 1e-9


# --- mixture_em: the public EM core for any likelihood matrix -------------------
@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
@pytest.mark.parametrize("opts", [{}, {"max_iter": 7}, {"tol": 1e-3, "max_iter": 10_000, "accelerate": "squarem"}])
def test_mixture_em_on_the_sampling_kernel_is_mle(scheme, opts):
    N, n = 40, 8
    r = _simulate(N, n, 300, 5)
    ref = mle_fit(r, N, n, scheme=scheme, **opts)
    counts = np.bincount(r - 1, minlength=n).astype(float)      # cells = sampled ranks, some empty
    res = mixture_em(kernel(N, n, scheme), counts, **opts)
    # same EM; the kernel columns come from two builders (rounding differs in the last bits,
    # which SQUAREM's extrapolation amplifies)
    np.testing.assert_allclose(res.pmf, ref.pmf, rtol=1e-7, atol=1e-12)
    assert res.loglik == pytest.approx(ref.loglik, rel=1e-12)
    assert res.n_iter == ref.n_iter and res.converged == ref.converged


def test_mixture_em_maximizes_a_general_mixture_likelihood():
    # source: scipy SLSQP on the simplex for sum_k c_k log(pi @ L[:, k]); L is not a sampling kernel
    rng = np.random.default_rng(11)
    L = rng.random((5, 9)) ** 3
    c = rng.integers(0, 30, 9).astype(float)
    res = mixture_em(L, c, **SQ)
    assert res.converged and np.all(np.diff(res.loglik_trace) >= -1e-12)

    def nll(x):
        x = np.clip(x, 0.0, None)
        return -float(c @ np.log(x / x.sum() @ L))

    bf = optimize.minimize(nll, np.full(5, 0.2), method="SLSQP", bounds=[(0.0, 1.0)] * 5,
                           constraints=({"type": "eq", "fun": lambda x: x.sum() - 1.0},),
                           options=dict(ftol=1e-15, maxiter=2000))
    assert res.loglik >= -bf.fun - 1e-7
    assert res.loglik == pytest.approx(float(c @ np.log(res.pmf @ L)), rel=1e-12)


@pytest.mark.parametrize("L, c, opts, match", [
    (np.ones(3), np.ones(3), {}, "2-D"),
    (-np.ones((2, 3)), np.ones(3), {}, "finite numbers >= 0"),
    (np.full((2, 3), np.nan), np.ones(3), {}, "finite numbers >= 0"),
    (np.ones((2, 3)), np.ones(2), {}, r"one entry per likelihood column \(3\)"),
    (np.ones((2, 3)), np.zeros(3), {}, "not all 0"),
    (np.ones((2, 3)), np.array([1.0, -1.0, 1.0]), {}, "not all 0"),
    (np.ones((2, 3)), np.ones(3), {"accelerate": "squarem"}, "needs a tolerance"),
    (np.ones((2, 3)), np.ones(3), {"max_iter": -1}, "max_iter must be >= 1"),
    (np.ones((2, 3)), np.ones(3), {"init": np.ones(3) / 3}, "init must have length N=2"),
])
def test_mixture_em_validation(L, c, opts, match):
    with pytest.raises(ValueError, match=match):
        mixture_em(L, c, **opts)


# --- EM equals the per-user update it replaces ---------------------------------
@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
def test_mle_equals_per_user_em(scheme):
    N, n, iters = 80, 10, 25
    r = _simulate(N, n, 150, 4)
    np.testing.assert_allclose(
        mle(r, N, n, scheme=scheme, max_iter=iters), _naive_em(r, np.full(r.size, n), N, iters, scheme),
        rtol=1e-10, atol=1e-14,
    )


def test_adaptive_equals_per_user_em():
    N = 300
    rng = np.random.default_rng(5)
    R = draw_global_ranks(synthetic_models(N)["beta_a0.25"], 400, rng=rng)
    r, sizes = adaptive_sample_ranks(R, N, 10, 80, rng=rng)
    assert np.unique(sizes).size > 1
    np.testing.assert_allclose(
        adaptive_mle(r, sizes, N, max_iter=30), _naive_em(r, sizes, N, 30), rtol=1e-10, atol=1e-14
    )


@pytest.mark.parametrize("tol", [None, 1e-3])
def test_adaptive_with_equal_sizes_equals_mle(tol):
    N, n = 200, 20
    r = _simulate(N, n, 500, 6)
    a = adaptive_mle_fit(r, np.full(r.size, n), N, tol=tol, max_iter=5000)
    b = mle_fit(r, N, n, tol=tol, max_iter=5000)
    np.testing.assert_array_equal(a.pmf, b.pmf)
    np.testing.assert_array_equal(a.loglik_trace, b.loglik_trace)


def test_hypergeometric_with_n_equal_N_returns_empirical_pmf():
    # without replacement and n = N the sampled rank is the global rank
    N = 9
    r = _simulate(N, N, 300, 7)
    emp = np.bincount(r - 1, minlength=N) / r.size
    np.testing.assert_allclose(mle(r, N, N, scheme="hypergeometric", max_iter=3), emp, atol=1e-15)


def test_blockwise_kernel_columns_equal_dense(monkeypatch):
    from sampling_lib.kernels import _laws as kernels

    N, n = 150, 15
    cols = np.array([1, 4, 15])
    dense = kernels.kernel_columns(N, n, cols, "binomial")
    monkeypatch.setattr(kernels, "_DENSE_KERNEL_MAX", 0)
    monkeypatch.setattr(kernels, "BLOCK_ELEMS", 100)
    np.testing.assert_allclose(kernels.kernel_columns(N, n, cols, "binomial"), dense, rtol=1e-12, atol=0)


# --- monotone likelihood and distributions (hypothesis) ------------------------
@st.composite
def _em_problem(draw):
    n = draw(st.integers(2, 12))
    N = draw(st.integers(n, 60))
    counts = draw(st.lists(st.integers(0, 30), min_size=n, max_size=n).filter(lambda c: sum(c) > 0))
    r = np.repeat(np.arange(1, n + 1), counts)
    return N, n, r


@settings(max_examples=40, deadline=None)
@given(_em_problem(), st.sampled_from(["em", "squarem", "wmle", "adaptive"]))
def test_loglik_never_decreases_and_output_is_a_pmf(problem, method):
    N, n, r = problem
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if method == "em":
            res = mle_fit(r, N, n, max_iter=60)
        elif method == "squarem":
            res = mle_fit(r, N, n, tol=1e-14, max_iter=30, accelerate="squarem")
        elif method == "wmle":
            res = wmle_fit(r, N, n, weight="ap", C=3, max_iter=60)
        else:
            sizes = np.where(np.arange(r.size) % 2 == 0, n, N)
            rr = np.where(sizes == N, np.minimum(r * 2, N), r)
            res = adaptive_mle_fit(rr, sizes, N, max_iter=60)
    d = np.diff(res.loglik_trace)
    assert np.all(d >= -1e-10 * np.abs(res.loglik_trace[1:]))
    assert res.pmf.shape == (N,)
    assert np.all(res.pmf >= 0) and res.pmf.sum() == pytest.approx(1.0, abs=1e-12)
    assert res.gap >= -1e-12
    assert res.loglik == res.loglik_trace[-1]


@pytest.mark.parametrize("fn", [mle, wmle, mes])
def test_estimators_return_distributions(fn):
    N, n = 400, 30
    r = _simulate(N, n, 800, 8)
    pi = fn(r, N, n)
    assert pi.shape == (N,) and np.all(pi >= 0)
    assert pi.sum() == pytest.approx(1.0, abs=1e-12)


# --- weighted MLE ---------------------------------------------------------------
@pytest.mark.parametrize("c", [1.0, 3.0, 0.25])
def test_wmle_with_constant_weights_equals_mle(c):
    N, n = 300, 25
    r = _simulate(N, n, 600, 9)
    a = wmle_fit(r, N, n, weight=lambda rr: np.full(rr.size, c))
    b = mle_fit(r, N, n)
    np.testing.assert_allclose(a.pmf, b.pmf, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a.loglik_trace, c * b.loglik_trace, rtol=1e-12)


# source: AAAI21 text after eq 23, w = M_NDCG(r/C) = 1/log2(1 + r/C), M_AP(r/C) = C/r
@pytest.mark.parametrize(
    "weight, C, r, expected",
    [
        ("ndcg", 10, 10, 1.0),
        ("ndcg", 10, 30, 0.5),
        ("ap", 10, 5, 2.0),
        ("ap", 4, 8, 0.5),
    ],
)
def test_wmle_weights_reference(weight, C, r, expected):
    assert wmle_weights(40, weight, C)[r - 1] == pytest.approx(expected, rel=1e-14)


def test_wmle_upweights_top_ranks():
    N, n = 500, 40
    r = _simulate(N, n, 2000, 10)
    a, b = wmle(r, N, n), mle(r, N, n)
    assert a[:10].sum() > b[:10].sum()


# --- MES --------------------------------------------------------------------------
# source: cvxpy + Clarabel reference formulation; tolerance 1e-6 relative objective
MES_CASES = [
    (50, 10, 300, "tors", None),
    (50, 10, 300, "aaai", None),
    (300, 30, 1000, "tors", 0.1),
    (300, 30, 1000, "aaai", 0.01),
    (800, 50, 2000, "tors", None),
    (300, 30, 1000, "tors", 1e-4),  # small lam = 3.3e-6: many Newton steps, polishing needed
    (200, 5, 30, "aaai", 10.0),  # entropy-dominated
]


@pytest.mark.parametrize("N, n, M, form, eta", MES_CASES)
def test_mes_fast_equals_cvxpy(N, n, M, form, eta):
    r = _simulate(N, n, M, 11)
    fast = mes_fit(r, N, n, eta, form=form)
    ref = mes_fit(r, N, n, eta, form=form, solver="cvxpy")
    assert fast.converged and ref.solver == "cvxpy:CLARABEL"
    assert abs(fast.objective - ref.objective) <= 1e-6 * abs(ref.objective)
    assert fast.objective >= ref.objective - 1e-9 * abs(ref.objective)  # certified gap 1e-13
    np.testing.assert_allclose(fast.pmf, ref.pmf, atol=1e-5)
    assert fast.objective == pytest.approx(mes_objective(fast.pmf, r, N, n, eta, form=form), rel=1e-12)


def test_mes_lambda_forms():
    r = _simulate(100, 10, 200, 12)
    assert mes_fit(r, 100, 10, form="tors").lam == pytest.approx(0.01 / 10)
    assert mes_fit(r, 100, 10, form="aaai").lam == pytest.approx(0.001)
    assert mes_fit(r, 100, 10, 0.5, form="aaai").lam == 0.5


def test_mes_objective_trace_and_gap():
    r = _simulate(300, 30, 1000, 13)
    res = mes_fit(r, 300, 30)
    assert isinstance(res, MESResult)
    assert res.converged and -1e-16 <= res.gap <= 1e-13 * (res.distance + res.lam * res.entropy)
    assert res.kkt_residual <= 1e-6
    assert res.objective_trace[-1] == pytest.approx(res.objective, rel=1e-12)


def test_mes_cvxpy_falls_back_to_scs(monkeypatch):
    cp = pytest.importorskip("cvxpy")
    monkeypatch.setattr(cp, "installed_solvers", lambda: ["SCS", "OSQP"])
    r = _simulate(40, 8, 200, 14)
    with pytest.warns(UserWarning, match="falling back to SCS"):
        res = mes_fit(r, 40, 8, solver="cvxpy")
    assert res.solver == "cvxpy:SCS"
    fast = mes_fit(r, 40, 8)
    assert abs(res.objective - fast.objective) <= 1e-3 * abs(fast.objective)


def test_mes_cvxpy_without_cone_solver_raises(monkeypatch):
    cp = pytest.importorskip("cvxpy")
    monkeypatch.setattr(cp, "installed_solvers", lambda: ["OSQP"])
    with pytest.raises(ImportError, match="Clarabel or SCS"):
        mes_fit([1, 2, 3], 40, 8, solver="cvxpy")


def test_mes_fast_nonconvergence_raises():
    r = _simulate(300, 30, 1000, 15)
    with pytest.raises(RuntimeError, match="did not converge"):
        mes_fit(r, 300, 30, max_iter=1, tol=1e-15, solver="fast")


def test_mes_auto_falls_back_to_cvxpy_with_a_convergence_warning():
    pytest.importorskip("cvxpy")
    r = _simulate(300, 30, 1000, 15)
    with pytest.warns(ConvergenceWarning, match="did not converge.*cvxpy"):
        res = mes_fit(r, 300, 30, max_iter=1, tol=1e-15)
    assert res.solver.startswith("cvxpy:")
    ref = mes_fit(r, 300, 30)
    assert ref.solver == "fast"
    assert np.max(np.abs(res.pmf - ref.pmf)) <= 1e-6


# --- diagnostics and warnings --------------------------------------------------
def test_em_result_fields_and_fixed_iteration_protocol():
    r = _simulate(100, 10, 200, 16)
    res = mle_fit(r, 100, 10)
    assert isinstance(res, EMResult)
    assert res.n_iter == 100 and res.n_estep == 101 and res.loglik_trace.size == 101
    assert res.converged is False and res.tol is None and res.method == "em"


def test_em_nonconvergence_warns():
    r = _simulate(100, 10, 200, 17)
    with pytest.warns(ConvergenceWarning, match="gap"):
        res = mle_fit(r, 100, 10, tol=1e-12, max_iter=3)
    assert not res.converged and res.n_iter == 3


def test_em_init_is_used():
    N, n = 50, 5
    r = _simulate(N, n, 100, 18)
    init = np.zeros(N)
    init[:25] = 1 / 25
    pi = mle(r, N, n, init=init)
    assert np.all(pi[25:] == 0)


# --- validation ---------------------------------------------------------------
@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: mle([1, 11], 100, 10), ValueError, r"sampled_ranks must lie in 1..n=10"),
        (lambda: mle([0, 1], 100, 10), ValueError, r"sampled_ranks must lie in 1..n=10"),
        (lambda: mle([1.5], 100, 10), ValueError, "must be integers"),
        (lambda: mle([], 100, 10), ValueError, "must not be empty"),
        (lambda: mle([1], 10, 20), ValueError, "n must lie in 2..N=10"),
        (lambda: mle([1], 100, 10, scheme="poisson"), ValueError, "scheme must be one of"),
        (lambda: mle([1], 100, 10, tol=-1), ValueError, "tol must lie in"),
        (lambda: mle([1], 100, 10, max_iter=-1), ValueError, "max_iter must be >= 1"),
        (lambda: mle([1], 100, 10, accelerate="squarem"), ValueError, "needs a tolerance"),
        (lambda: mle([1], 100, 10, accelerate="aitken", tol=1e-3), ValueError, "accelerate must be"),
        (lambda: mle([1], 100, 10, init=np.ones(5) / 5), ValueError, "init must have length N=100"),
        (lambda: mle([10], 100, 10, init=np.eye(100)[0]), ValueError, "probability 0"),
        (lambda: wmle([1], 100, 10, weight="dcg"), ValueError, "weight must be"),
        (lambda: wmle([1], 100, 10, C=0), ValueError, "C must lie in"),
        (lambda: wmle([1], 100, 10, weight=lambda r: -r), ValueError, "weights must be finite and > 0"),
        (lambda: wmle([1], 100, 10, weight=np.ones(3)), ValueError, r"weights must have shape"),
        (lambda: mes([1], 100, 10, eta=0), ValueError, "eta must lie in"),
        (lambda: mes([1], 100, 10, form="kdd"), ValueError, "form must be"),
        (lambda: mes([1], 100, 10, solver="mosek"), ValueError, "solver must be"),
        (lambda: adaptive_mle([1, 2], [10], 100), ValueError, "same length"),
        (lambda: adaptive_mle([1, 12], [20, 10], 100), ValueError, r"sampled_ranks\[1\]=12 > sample_sizes\[1\]=10"),
        (lambda: adaptive_mle([1, 2], [10, 101], 100), ValueError, "sample_sizes must lie in 1..N=100"),
        (lambda: adaptive_mle([1, 1], [10, 1], 100), ValueError, "sample_sizes must lie in 2..N=100"),
        (lambda: adaptive_mle([1], [10], 1), ValueError, "N must be >= 2"),
        (lambda: mle("a", 100, 10), TypeError, "must hold integers"),
    ],
)
def test_validation_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_squarem_accelerates_with_zero_init_entries():
    N, n = 50, 5
    r = _simulate(N, n, 300, 19)
    init = np.zeros(N)
    init[:40] = 1 / 40
    a = mle_fit(r, N, n, init=init, tol=1e-4, max_iter=100_000, accelerate="squarem")
    b = mle_fit(r, N, n, init=init, tol=1e-4, max_iter=1_000_000)
    assert a.converged and b.converged and np.all(a.pmf[40:] == 0)
    assert a.n_estep < b.n_estep / 3
    assert abs(a.loglik - b.loglik) <= 1e-4 * r.size


# ---------------------------------------------------------------------------- batched EM (notebook 03)
def test_em_core_batch_rows_equal_single_fits():
    # fixed iterations (the papers' MLE, and the weighted MLE): every row is mle_fit / wmle_fit of its
    # own sample to rounding, log-likelihood trace included; rows observe different ranks
    from sampling_lib.estimators import em_core_batch
    from sampling_lib.kernels import kernel

    N, n = 300, 20
    rng = np.random.default_rng(11)
    p_r = np.r_[0.5, np.full(n - 1, 0.5 / (n - 1))]
    rs = [rng.choice(np.arange(1, n + 1), size=m, p=p_r) for m in (40, 400, 4000)]
    C = np.stack([np.bincount(r - 1, minlength=n) for r in rs]).astype(float)
    assert (C == 0).any()            # some cells unobserved in some rows
    w = wmle_weights(n, "ndcg", 10)
    for CC, single in [(C, lambda r: mle_fit(r, N, n, max_iter=50)),
                       (C * w, lambda r: wmle_fit(r, N, n, weight="ndcg", C=10, max_iter=50))]:
        for b, s in zip(em_core_batch(kernel(N, n), CC, max_iter=50), map(single, rs)):
            np.testing.assert_allclose(b.pmf, s.pmf, rtol=1e-10, atol=1e-15)
            np.testing.assert_allclose(b.loglik_trace, s.loglik_trace, rtol=1e-12)
            assert (b.n_iter, b.n_estep) == (s.n_iter, s.n_estep)
            assert b.gap == pytest.approx(s.gap, rel=1e-9)


def test_em_core_batch_squarem_identifiable_matches_single():
    # N = n: the MLE is unique, so SQUAREM to a certified gap of 1e-10 gives the same pmf in both
    # paths up to the tolerance (their paths differ by rounding); the trace never decreases
    from sampling_lib.estimators import em_core_batch
    from sampling_lib.kernels import kernel

    N = 6
    K = kernel(N, N)
    q = np.array([0.3, 0.25, 0.2, 0.12, 0.08, 0.05]) @ K
    rng = np.random.default_rng(2)
    C = np.stack([rng.multinomial(M, q) for M in (50, 500, 5000, 50000)]).astype(float)
    fits = em_core_batch(K, C, tol=1e-10, max_iter=100_000, accelerate="squarem")
    for c, f in zip(C, fits):
        s = mle_fit(np.repeat(np.arange(1, N + 1), c.astype(int)), N, N, tol=1e-10, max_iter=100_000,
                    accelerate="squarem")
        assert f.converged and f.gap <= 1e-10
        assert np.all(np.diff(f.loglik_trace) >= -1e-12 * abs(f.loglik))
        np.testing.assert_allclose(f.pmf, s.pmf, atol=1e-6)
        assert abs(f.loglik - s.loglik) <= 1e-9 * c.sum()


def test_em_core_batch_rejects_bad_weights():
    from sampling_lib.estimators import em_core_batch
    from sampling_lib.kernels import kernel

    with pytest.raises(ValueError, match="C must have shape"):
        em_core_batch(kernel(10, 4), np.ones((2, 3)))
    with pytest.raises(ValueError, match="positive sum"):
        em_core_batch(kernel(10, 4), np.zeros((1, 4)))


def test_convergence_warning_advice_fits_the_solver():
    """The EM warning advises SQUAREM only when it was off (issue 25: it advised it with SQUAREM on)."""
    r = np.r_[np.ones(30, int), np.arange(1, 21)]
    with pytest.warns(ConvergenceWarning, match="use accelerate='squarem'"):
        mle_fit(r, 500, 20, tol=1e-12, max_iter=3)
    with pytest.warns(ConvergenceWarning) as rec:
        mle_fit(r, 500, 20, tol=1e-12, max_iter=3, accelerate="squarem")
    msg = str(rec[0].message)
    assert "loosen tol" in msg and "squarem" not in msg
    assert rec[0].filename == __file__           # the warning points at the caller's line
