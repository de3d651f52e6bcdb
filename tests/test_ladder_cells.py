"""The default estimator on merged multi-stage ranks: one N, many sample sizes, many cells (est-speed).

A nested design (a ladder of set sizes sharing negatives) gives every user its final (n_u, r_u):
with one N the cells (n, r) are thousands, and the cells path's surrogate now bins the sampled
ranks (beyond 32, in log-bins) even when there is no N_u to bin. References of the checks: the
exact computation on the same cells with the surrogate switched off (``SURROGATE_MIN_CELLS`` above
the number of cells: the exact solver from zero and an exact refit of every bootstrap replicate).
Tolerances: the point estimate is the exact solver's (its gradient test: 1e-5 relative between
two starts, as tests/test_peruser.py); corrected one-step replicates within 0.02 bootstrap
standard deviations of exact refits, a quarter of the runtime check's ONE_STEP_TOL (0.084, the
Monte Carlo error of a 95% endpoint at 1,000 replicates) -- measured 4e-4 SD on 20,000 users of
a real ladder (benchmarks/bench_peruser.py, case 6), at most 0.002 here (the one-step values
alone: 0.03-0.26).
"""
import numpy as np
import pytest

from sampling_lib.correct import estimate
from sampling_lib.counts import cells
from sampling_lib.estimators import _logspline as L
from sampling_lib.estimators import _logspline_cells as LC
from sampling_lib.estimators import _logspline_boot as LB
from sampling_lib.estimators import get_estimator
from sampling_lib.sampling import sample_ranks

SCHEMES = ["binomial", "hypergeometric"]
F10 = np.c_[np.ones(10), 1 / np.log2(1 + np.arange(1, 11))]        # recall@10, ndcg@10 on ranks 1..10


def _ladder(scheme, N=20_000, M=30_000, seed=0):
    """Final (n_u, r_u) of a ladder 100 -> 3,200 whose users stop at random rungs (an ignorable
    design: the kernel at the final (n_u, r_u) is the likelihood, logspline_fit's Notes), global
    ranks spread over decades; about 1,850 cells (n, r)."""
    rng = np.random.default_rng(seed)
    R = np.minimum(N, np.floor(np.exp(rng.exponential(4.5, M))).astype(np.int64) + 1)
    nu = rng.choice([100, 200, 400, 800, 1600, 3200], M, p=[0.3, 0.1, 0.1, 0.1, 0.1, 0.3])
    r = np.zeros(M, dtype=np.int64)
    for k, s in enumerate(np.unique(nu)):
        j = nu == s
        r[j] = sample_ranks(R[j], N, int(s), scheme=scheme, rng=seed + 10 + k)
    return R, nu, r, cells(r, nu, np.full(M, N))


@pytest.fixture
def surrogate_from_1024_cells(monkeypatch):
    """The surrogate from 1,024 cells (the default asks for 2,048; these ladders have ~1,850)."""
    monkeypatch.setattr(LC, "SURROGATE_MIN_CELLS", 1024)
    L._CELLS_CACHE.clear()
    LB._ONE_STEP_CACHE.clear()
    yield
    L._CELLS_CACHE.clear()
    LB._ONE_STEP_CACHE.clear()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_one_n_with_many_sizes_gets_a_surrogate_of_binned_sampled_ranks(scheme, surrogate_from_1024_cells):
    _, _, _, st = _ladder(scheme)
    assert np.unique(st.n_items).size == 1 and np.unique(st.sizes).size == 6
    _, (beta, grid, K, sur, beta_s) = L.counts_fit_state(st.n_items, st.sizes, st.ranks, st.counts, scheme=scheme)
    assert sur is not None and 4 * sur.K.shape[1] <= st.counts.size      # binned ranks: < a quarter
    assert sur.n_coarse == st.counts.size                                 # no N_u to merge: coarse = exact
    # every cell is one column of the surrogate's likelihood or inside one of its rank bins
    assert np.all(np.bincount(sur.fold, minlength=sur.K.shape[1]) >= 1)
    # nothing to merge for the bootstrap's draws: exact draws
    fit = get_estimator("logspline", scheme=scheme).fit_counts(st, None, F10)
    assert fit.coarse_draws() is None


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_estimate_is_the_exact_solvers(scheme, surrogate_from_1024_cells, monkeypatch):
    _, _, _, st = _ladder(scheme)
    fast = L.logspline_cells_fit(st.n_items, st.sizes, st.ranks, st.counts, scheme=scheme)
    monkeypatch.setattr(LC, "SURROGATE_MIN_CELLS", 10**12)
    L._CELLS_CACHE.clear()
    exact = L.logspline_cells_fit(st.n_items, st.sizes, st.ranks, st.counts, scheme=scheme)
    assert fast.converged and exact.converged
    # both stop at max |gradient| <= 1e-8 M (newton): weakly identified directions of the spline are then
    # known to about 1e-5 relative whatever the start (tests/test_peruser.py); 1.2e-7 measured here
    np.testing.assert_allclose(fast.weights[:50], exact.weights[:50], rtol=1e-5)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("penalty", [L.DEFAULT_PENALTY / 10, L.DEFAULT_PENALTY * 10])
def test_corrected_one_step_replicates_match_exact_refits(scheme, penalty, surrogate_from_1024_cells):
    _, _, _, st = _ladder(scheme)
    _, state = L.counts_fit_state(st.n_items, st.sizes, st.ranks, st.counts, scheme=scheme, penalty=penalty)
    beta, grid, K, sur, beta_s = state
    Cb = np.random.default_rng(2).multinomial(st.M, st.counts / st.M, 60).astype(float)
    args = (st.n_items, st.sizes, st.ranks, beta, F10)
    kw = dict(scheme=scheme, penalty=penalty, setup=(grid, K, sur, beta_s))
    corrected = LB.logspline_cells_replicates(Cb, *args, counts=st.counts, **kw)
    pre = LB.one_step_record(st.counts, K, grid, L.penalty_matrix(grid.B.shape[1], penalty), beta, F10)
    assert pre["verdict"] is True                  # the runtime check passed: no exact refits of the others
    exact = LB.logspline_cells_replicates(Cb, *args, **kw)            # no counts: every replicate refitted
    _, one, _ = LB.one_step_replicates(Cb, st.counts, K, grid, L.penalty_matrix(grid.B.shape[1], penalty), beta,
                                       F10)
    sd = exact.std(axis=0, ddof=1)
    assert np.all(np.abs(corrected - exact).max(axis=0) <= 0.02 * sd)
    # the correction matters: the one-step values alone are farther off (0.03-0.26 SD here)
    assert np.abs(one - exact).max() > 5 * np.abs(corrected - exact).max()


def test_estimate_on_a_ladder_skips_the_alternatives_replicates_when_every_metric_is_resolved(monkeypatch):
    # the alternatives' replicates only widen intervals below resolution; resolved metrics (K >= w, here
    # w = (N - 1)/(3200 - 1) = 6.2 for the users at rank 1 with the largest sets) do not compute them
    _, nu, r, _ = _ladder("hypergeometric", M=4000)
    top = r == 1
    nu[top] = 3200                           # the users at rank 1 got the largest sets (as in a ladder)
    from sampling_lib.estimators import _bootstrap
    calls = []
    real = _bootstrap.FittedEstimator.replicates

    def counting(self, Cb, coarse=False):
        calls.append(self.estimator.options.get("penalty", L.DEFAULT_PENALTY))
        return real(self, Cb, coarse=coarse)

    monkeypatch.setattr(_bootstrap.FittedEstimator, "replicates", counting)
    t = estimate(r, 20_000, None, ["recall@10", "ndcg@10"], sample_sizes=nu, n_boot=50, rng=0,
                 scheme="hypergeometric")
    assert not t.below_resolution.any() and set(calls) == {L.DEFAULT_PENALTY}
    calls.clear()
    t = estimate(r, 20_000, None, ["recall@5", "ndcg@10"], sample_sizes=nu, n_boot=50, rng=0,
                 scheme="hypergeometric")
    assert t.below_resolution.tolist() == [True, False] and len(set(calls)) == 3
