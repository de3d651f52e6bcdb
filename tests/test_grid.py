"""The compressed rank grid (issue 18): the stated TV bound, what it implies for the
estimators, and the batched bootstraps that run on it.

Tolerances were fixed from the derivations in the docstrings before the tests were run:
kernel rows within ``tol`` in TV (exact, measured), predicted sampled-rank laws within
``tol`` for every P(R) (convexity of TV), one posterior-mean step within
4 tol max_r P~(r) / q'(r) (kernels/mle_fit Notes), the MES objective within 2 eps,
eps = 4 tol max P~ (mes_fit), and -- not proven, stated in mle_fit -- EM estimates of
metrics in [0, 1] within ``tol``. Batched bootstrap replicates must equal per-replicate
refits to solver precision (1e-10; the MES solver certifies a relative duality gap of
1e-13 and an optimality residual of 1e-9).
"""
import numpy as np
import pytest

from sampling_lib import kernels
from sampling_lib.counts import bootstrap_counts, rank_counts
from sampling_lib.estimators import cls, cls_fit, get_estimator, linear_on_grid, mes_fit, mes_objective
from sampling_lib.kernels import em_grid
from sampling_lib.metrics import metric_values
from sampling_lib.rankdist import beta_rank_pmf, draw_global_ranks
from sampling_lib.sampling import sample_ranks


def _ranks(N, n, M, a=0.3, b=3.0, seed=0, scheme="binomial"):
    R = draw_global_ranks(beta_rank_pmf(N, a, b), M, rng=seed)
    return sample_ranks(R, N, n, scheme=scheme, rng=seed + 1)


def _metrics(N, K=(1, 5, 10, 20, 50)):
    return np.stack([metric_values(f"{m}@{k}", N) for m in ("recall", "ndcg") for k in K], axis=1)


def _expanded_kernel(g):
    """K' (N, n): every row of a bin replaced by the bin's representative row."""
    return np.repeat(g.kernel(), g.size, axis=0)


# ----------------------------------------------------------------------------
# the grid and its bound
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
@pytest.mark.parametrize("N, n, tol, head", [(3000, 20, 0.01, 10), (5000, 100, 0.05, 1), (800, 5, 0.02, 50)])
def test_bound_is_the_max_over_all_rows_and_below_tol(N, n, tol, head, scheme):
    g = kernels.rank_grid(N, n, scheme=scheme, tol=tol, exact_ranks=head)
    assert g.lo[0] == 1 and g.hi[-1] == N and np.all(g.lo[1:] == g.hi[:-1] + 1)
    assert np.all((g.lo <= g.rep) & (g.rep <= g.hi)) and g.size.sum() == N
    assert np.all(g.size[:min(head, N)] == 1)
    K = kernels.kernel(N, n, scheme)
    tv = 0.5 * np.abs(K - _expanded_kernel(g)).sum(axis=1)          # every row, enumerated
    per_bin = np.maximum.reduceat(tv, g.lo - 1)
    np.testing.assert_allclose(per_bin, g.bound, rtol=1e-9, atol=1e-13)   # MLR: max at the ends
    assert g.bound.max() <= tol
    assert g.lo.size < N                                              # it compresses


@pytest.mark.parametrize("n", [10, 100, 500])
def test_bins_bounded_in_N(n):
    tol = 0.02
    sizes = [kernels.rank_grid(N, n, tol=tol).lo.size for N in (10**5, 10**6, 10**8)]
    cap = kernels.GRID_EXACT_RANKS + np.ceil(np.pi / 2 * np.sqrt(n - 1) / tol) + 2
    assert max(sizes) <= cap                                          # the stated count
    assert sizes[-1] - sizes[0] <= 0.05 * sizes[0]


def test_le_cam_angle_bound_binomial():
    """TV(Bin(m, p1), Bin(m, p2)) <= sqrt(m) |theta1 - theta2| (rank_grid docstring)."""
    rng = np.random.default_rng(3)
    from scipy import stats
    for m in (1, 5, 99, 499):
        p = rng.uniform(0, 1, size=(50, 2))
        x = np.arange(m + 1)
        tv = 0.5 * np.abs(stats.binom.pmf(x, m, p[:, :1]) - stats.binom.pmf(x, m, p[:, 1:])).sum(axis=1)
        d = np.abs(np.arcsin(np.sqrt(p[:, 0])) - np.arcsin(np.sqrt(p[:, 1])))
        assert np.all(tv <= np.sqrt(m) * d + 1e-12)


def test_tol_zero_is_exact_and_options_checked():
    assert kernels.rank_grid(2000, 10, tol=0).exact
    assert em_grid(2000, 10, "binomial", 0) is None and em_grid(200, 10, "binomial", 0.02) is None
    with pytest.raises(ValueError, match="grid_tol"):
        kernels.rank_grid(2000, 10, tol=1.5)
    with pytest.raises(ValueError, match="exact_ranks"):
        kernels.rank_grid(2000, 10, exact_ranks=0)


@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
def test_predicted_law_within_tol_for_every_pmf(scheme):
    """TV(pi K, pi K') <= tol for any pi: random Dirichlet pi, point masses, power laws."""
    N, n, tol = 2000, 30, 0.02
    g = kernels.rank_grid(N, n, scheme=scheme, tol=tol, exact_ranks=20)
    K, Kp = kernels.kernel(N, n, scheme), _expanded_kernel(g)
    rng = np.random.default_rng(0)
    pis = [rng.dirichlet(np.full(N, a)) for a in (0.01, 1.0)] + [beta_rank_pmf(N, 0.3, 3)]
    pis += [np.eye(N)[R - 1] for R in g.lo[g.size > 1][:5]]
    for pi in pis:
        assert 0.5 * np.abs(pi @ K - pi @ Kp).sum() <= tol


# ----------------------------------------------------------------------------
# estimators on the grid against the exact kernel
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("N, n, M, scheme", [(3000, 100, 2000, "binomial"), (10**5, 30, 3000, "binomial"),
                                             (20000, 30, 500, "hypergeometric")])
def test_em_family_within_tol_of_exact_kernel(N, n, M, scheme):
    from sampling_lib.estimators import fit_estimators
    tol = kernels.DEFAULT_GRID_TOL
    r = _ranks(N, n, M, scheme=scheme)
    F = _metrics(N)
    methods = ["mle", "wmle", "bv_mle", "mn_mle"]
    a = fit_estimators(methods, r, N, n, scheme=scheme)                 # the prior MLE is shared
    b = fit_estimators(methods, r, N, n, scheme=scheme, grid_tol=0)
    for m in methods:
        assert np.abs((a[m] - b[m]) @ F).max() <= tol, m


def test_posterior_mean_step_bound():
    """BV with gamma = 1 is one EM step from the prior: |T - T'| <= 4 tol max_r P~(r) / q'(r)."""
    N, n, tol = 20000, 100, 0.05
    r = _ranks(N, n, 1000, a=1.0, b=2.0)
    grid = em_grid(N, n, "binomial", tol)
    g, Kg = grid
    prior = beta_rank_pmf(N, 0.5, 4.0)
    pt = np.bincount(r - 1, minlength=n) / r.size
    F = _metrics(N)
    exact = get_estimator("bv", gamma=1.0, prior=prior)(r, N, n) @ F
    comp = linear_on_grid("bv", pt, prior, g, Kg, gamma=1.0) @ F
    qp = g.bin_sums(prior) @ Kg
    bound = 4 * tol * np.max(pt[pt > 0] / qp[pt > 0])
    assert np.abs(exact - comp).max() <= bound


def test_mes_grid_solution_is_2eps_optimal():
    N, n, tol = 20000, 100, 0.02
    r = _ranks(N, n, 3000)
    a = mes_fit(r, N, n)
    b = mes_fit(r, N, n, grid_tol=tol)
    assert a.converged and b.converged
    eps = 4 * tol * (np.bincount(r - 1).max() / r.size)
    assert mes_objective(b.pmf, r, N, n) >= a.objective - 2 * eps
    assert b.pmf.shape == (N,) and abs(b.pmf.sum() - 1) < 1e-12


def test_cls_grid_is_exact_cls_of_compressed_kernel_and_close():
    N, n = 30000, 50
    r = _ranks(N, n, 1000)
    F = _metrics(N, K=(1, 10, 20))
    a = cls(r, N, n, max_rank=20) @ F
    b = cls(r, N, n, max_rank=20, grid_tol=kernels.DEFAULT_GRID_TOL) @ F
    assert np.abs(a - b).max() <= kernels.DEFAULT_GRID_TOL
    fit = cls_fit(r, N, n, max_rank=20)
    other = _ranks(N, n, 700, seed=5)
    pt = np.bincount(other - 1, minlength=n) / other.size
    np.testing.assert_allclose(fit.estimates(pt[None], F)[0], cls(other, N, n, max_rank=20) @ F,
                               atol=1e-12)


def test_grid_off_is_the_exact_path_bit_for_bit():
    from sampling_lib.estimators import mle, wmle
    N, n = 3000, 40
    r = _ranks(N, n, 500)
    assert np.array_equal(get_estimator("mle", grid_tol=0)(r, N, n), mle(r, N, n))
    assert np.array_equal(get_estimator("wmle", grid_tol=None)(r, N, n), wmle(r, N, n))


def test_adaptive_mle_one_size_is_mle_on_the_grid_and_sizes_vary_exactly():
    from sampling_lib.estimators import adaptive_mle, mle
    N, n = 5000, 30
    r = _ranks(N, n, 400)
    tol = kernels.DEFAULT_GRID_TOL
    assert np.array_equal(adaptive_mle(r, np.full(r.size, n), N, grid_tol=tol), mle(r, N, n, grid_tol=tol))
    sizes = np.where(np.arange(r.size) % 2 == 0, n, 2 * n)
    assert np.array_equal(adaptive_mle(r, sizes, N, grid_tol=tol), adaptive_mle(r, sizes, N))


def test_grid_em_keeps_init_shape_within_bins():
    """EM on K' multiplies every rank of a bin by one factor: the expansion keeps init's shape."""
    from sampling_lib.estimators import mle
    N, n = 5000, 20
    r = _ranks(N, n, 400)
    init = beta_rank_pmf(N, 0.7, 2.0)
    g = kernels.rank_grid(N, n)
    Kp = _expanded_kernel(g)
    pi = init.copy()
    c = np.bincount(r - 1, minlength=n).astype(float)
    for _ in range(30):                      # EM on the expanded kernel, literally (AAAI21 eq 21)
        pi = pi * (Kp @ (c / (pi @ Kp))) / c.sum()
    np.testing.assert_allclose(mle(r, N, n, init=init, max_iter=30, grid_tol=kernels.DEFAULT_GRID_TOL),
                               pi, rtol=1e-9, atol=1e-15)


# ----------------------------------------------------------------------------
# batched bootstraps equal per-replicate refits
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("method, opts", [("mle", {}), ("wmle", {}), ("bv_mle", {}), ("mn_mle", {}),
                                          ("adaptive_mle", {}),
                                          ("mes", {}), ("bv_mes", {}), ("mn_mes", {}),
                                          ("cls", {"max_rank": 50}), ("mn_mle", {"M": 300}),
                                          ("bv_mle", {"grid_tol": 0.05})])
def test_batched_replicates_equal_refits(method, opts):
    N, n = 6000, 50
    r = _ranks(N, n, 600)
    st = rank_counts(r, n)
    F = _metrics(N)
    est = get_estimator(method, **opts)
    fit = est.fit_counts(st, N, F)
    Cb = bootstrap_counts(st.counts, 6, rng=2)
    rep = fit.replicates(Cb)
    ref = np.stack([est(np.repeat(st.ranks, Cb[b]), N, n) @ F for b in range(Cb.shape[0])])
    np.testing.assert_allclose(rep, ref, rtol=0, atol=1e-10)
