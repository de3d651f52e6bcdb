"""Per-user candidate counts N_u (issue 14 part 1) and counts tables (issue 18, scale in users).

References of the checks: per-user brute force (the per-user likelihood written out
user by user), exact enumeration of sampled ranks, and the int code path (equal N_u
must give exactly the int result).
"""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sampling_lib import estimators as E
from sampling_lib.correct import compare, estimate
from sampling_lib.counts import counts_from_frame, rank_counts
from sampling_lib.estimators import PERUSER_METHODS, get_estimator
from sampling_lib.estimators import _logspline as L
from sampling_lib.estimators import _logspline_newton as LN
from sampling_lib.estimators import _logspline_cells as LC
from sampling_lib.io import counts_table, ranks_from_table
from sampling_lib.kernels import (kernel_entries, kernel_groups, log_kernel_rows, n_items_bins,
                                  n_items_tv_bound)
from sampling_lib.metrics import metric_values
from sampling_lib.recommenders import global_ranks, n_candidates
from sampling_lib.sampling import adaptive_sample_ranks, sample_ranks

SCHEMES = ["binomial", "hypergeometric"]


def _rows(N, n, scheme):
    """Full kernel of N items, (N, n)."""
    return np.exp(log_kernel_rows(N, n, np.arange(1, N + 1), scheme))


def _population(M=250, n=8, lo=40, hi=70, seed=0):
    """Per-user item counts, global ranks R_u <= N_u (top-heavy) and sampled ranks."""
    rng = np.random.default_rng(seed)
    Nu = rng.integers(lo, hi + 1, M)
    R = np.minimum(Nu, 1 + rng.geometric(0.08, M))
    r = sample_ranks(R, Nu, n, rng=seed + 1)
    return Nu, R, r


def _brute_em(r, Nu, n, scheme, n_iter=100, kernel_N=None):
    """The per-user EM written out user by user (kernel of user u: P(r_u | R; N_u), R <= N_u)."""
    Nmax = int(Nu.max())
    KN = Nu if kernel_N is None else kernel_N
    K = np.zeros((r.size, Nmax))
    for u in range(r.size):
        K[u, : Nu[u]] = _rows(int(KN[u]), n, scheme)[: Nu[u], r[u] - 1]
    pi = np.full(Nmax, 1.0 / Nmax)
    for _ in range(n_iter):
        q = K @ pi
        pi = pi * (K / q[:, None]).mean(axis=0)
        pi /= pi.sum()
    return pi, K


# ----------------------------------------------------------------------------
# the bound of the N binning
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("Nu, Nb, n", [(30, 31, 5), (30, 40, 5), (60, 64, 12), (25, 25, 10)])
def test_tv_bound_holds_for_every_row_and_is_attained_at_the_last(scheme, Nu, Nb, n):
    # source: exact kernels of N_u and N_b items, total variation row by row
    exact, shared = _rows(Nu, n, scheme), _rows(Nb, n, scheme)[:Nu]
    tv = 0.5 * np.abs(exact - shared).sum(axis=1)
    b = float(n_items_tv_bound(Nu, Nb, n, scheme))
    assert np.all(tv <= b + 1e-12)
    assert tv[-1] == pytest.approx(b, abs=1e-12)          # sharp: attained at R = N_u


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(20, 400), min_size=1, max_size=30), st.integers(2, 15),
       st.sampled_from([0.0, 1e-3, 0.05, 0.3]), st.sampled_from(SCHEMES))
def test_bins_respect_the_tolerance(Ns, n, tol, scheme):
    Nu = np.array(Ns)
    rep = n_items_bins(Nu, n, tol, scheme)
    assert np.all(rep >= Nu)
    assert np.all(n_items_tv_bound(Nu, rep, n, scheme) <= tol)
    assert set(rep.tolist()) <= set(Nu.tolist())             # a bin's N is one of its members
    if tol == 0:
        assert np.array_equal(rep, Nu)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_posterior_mean_moves_at_most_four_times_the_bound(scheme):
    # For a fixed prior, E_r |E'[F | r] - E[F | r]| <= 4 tau (F in [0, 1]), r drawn from
    # the exact model: enumeration over r for every N_u of a bin (kernels.n_items_tv_bound)
    rng = np.random.default_rng(5)
    n, Nb = 6, 60
    F = metric_values("ndcg@5", Nb)
    for Nu in (52, 57, 60):
        pi = rng.dirichlet(np.full(Nb, 0.3))[:Nu]
        exact, shared = _rows(Nu, n, scheme), _rows(Nb, n, scheme)[:Nu]
        tau = float(n_items_tv_bound(Nu, Nb, n, scheme))
        q, q2 = pi @ exact, pi @ shared
        m, m2 = (pi * F[:Nu]) @ exact / q, (pi * F[:Nu]) @ shared / q2
        assert (q / q.sum()) @ np.abs(m2 - m) <= 4 * tau + 1e-12


def test_kernel_groups_share_kernels_and_cover_every_cell():
    Nu = np.array([50, 50, 48, 50, 30, 30])
    sizes = np.array([5, 5, 5, 6, 5, 5])
    ranks = np.array([1, 4, 2, 6, 5, 5])
    groups = kernel_groups(Nu, sizes, ranks)
    assert sorted(np.concatenate([g.cells for g in groups]).tolist()) == list(range(6))
    for g in groups:
        assert g.exact and g.bound == 0.0
        for c, j in zip(g.cells, g.col):
            np.testing.assert_array_equal(g.K[:, j], _rows(Nu[c], sizes[c], "binomial")[:, ranks[c] - 1])
    binned = kernel_groups(Nu, sizes, ranks, tol=0.5)
    assert len(binned) < len(groups) and all(g.bound <= 0.5 for g in binned)
    np.testing.assert_allclose(kernel_entries(50, 5, [1, 20, 50], [2, 5], "hypergeometric"),
                               _rows(50, 5, "hypergeometric")[[0, 19, 49]][:, [1, 4]], rtol=1e-12)


# ----------------------------------------------------------------------------
# estimators against the per-user brute force
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", SCHEMES)
def test_em_equals_the_per_user_brute_force(scheme):
    Nu, _, r = _population()
    pb, K = _brute_em(r, Nu, 8, scheme)
    np.testing.assert_allclose(E.mle(r, Nu, 8, scheme=scheme, n_items_tol=0), pb, atol=1e-13)
    np.testing.assert_allclose(E.adaptive_mle(r, np.full(r.size, 8), Nu, scheme=scheme, n_items_tol=0),
                               pb, atol=1e-13)
    # the log-likelihood is the per-user one
    assert E.mixture_loglik(pb, r, Nu, 8, scheme=scheme) == pytest.approx(np.log(K @ pb).sum(),
                                                                          rel=1e-12)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_binned_em_uses_the_bin_kernel_with_each_users_own_support(scheme):
    Nu, _, r = _population(seed=2)
    tol = 0.3
    rep = n_items_bins(Nu, 8, tol, scheme)
    assert np.unique(rep).size < np.unique(Nu).size        # the bins merge users
    pb, _ = _brute_em(r, Nu, 8, scheme, kernel_N=rep)
    np.testing.assert_allclose(E.mle(r, Nu, 8, scheme=scheme, n_items_tol=tol), pb, atol=1e-13)


def test_em_likelihood_never_decreases_with_per_user_n():
    Nu, _, r = _population(seed=4)
    res = E.mle_fit(r, Nu, 8, max_iter=300, n_items_tol=0)
    assert np.all(np.diff(res.loglik_trace) >= -1e-9)


def test_wmle_weights_every_user_by_its_rank():
    Nu, _, r = _population(seed=6)
    w = E.wmle_weights(8, "ap", 10)
    Nmax = int(Nu.max())
    K = np.zeros((r.size, Nmax))
    for u in range(r.size):
        K[u, : Nu[u]] = _rows(int(Nu[u]), 8, "binomial")[:, r[u] - 1]
    pi = np.full(Nmax, 1.0 / Nmax)
    wu = w[r - 1] / w[r - 1].sum()
    for _ in range(100):
        pi = pi * ((wu / (K @ pi)) @ K)
        pi /= pi.sum()
    np.testing.assert_allclose(E.wmle(r, Nu, 8, weight="ap", n_items_tol=0), pi, atol=1e-13)


def test_mes_uses_the_pooled_kernel():
    Nu, _, r = _population(seed=7)
    res = E.mes_fit(r, Nu, 8, n_items_tol=0)
    assert res.converged and res.pmf.shape == (Nu.max(),)
    # brute force: q(r) = (1/M) sum_u sum_{R <= N_u} pi_R P(r | R; N_u)
    q = np.zeros(8)
    for u in range(r.size):
        q += res.pmf[: Nu[u]] @ _rows(int(Nu[u]), 8, "binomial")
    q /= r.size
    p = np.bincount(r - 1, minlength=8) / r.size
    lam = 0.01 / 8
    H = -np.sum(res.pmf * np.log(res.pmf))
    assert res.objective == pytest.approx(lam * H - p @ (q - p) ** 2, rel=1e-10)
    assert E.mes_objective(res.pmf, r, Nu, 8) == pytest.approx(res.objective, rel=1e-10)


def test_logspline_cells_match_the_per_user_likelihood():
    # every rank its own grid cell (exact_ranks >= max N_u): the cells' kernel is the
    # per-user one and the weights are the average per-user posterior under the prior
    Nu, _, r = _population(seed=8)
    Nmax = int(Nu.max())
    fit = L.logspline_fit(r, Nu, 8, exact_ranks=Nmax)
    assert fit.converged and fit.weights.shape == (Nmax,)
    post = np.zeros(Nmax)
    for u in range(r.size):
        k = np.zeros(Nmax)
        k[: Nu[u]] = _rows(int(Nu[u]), 8, "binomial")[:, r[u] - 1]
        post += fit.prior * k / (fit.prior @ k)
    np.testing.assert_allclose(fit.weights, post / r.size, atol=1e-12)
    # stationarity of the penalized per-user likelihood in the spline coefficients
    cells = L._user_cells(r, Nu, 8)
    c, grid, K, P, _, _ = L.cells_setup(*cells, "binomial", L.DEFAULT_PENALTY, L.DEFAULT_KNOT_SPACING,
                                         Nmax)
    f, g, q = L.objective(fit.beta, c, K, grid, P)
    assert np.max(np.abs(LN.gradient(fit.beta, c, K, grid, P, g, q))) < 1e-6 * r.size


# ----------------------------------------------------------------------------
# equal per-user N is exactly the int
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mle", "wmle", "mes", "adaptive_mle", "logspline", "bv", "mn_mle",
                                  "cls"])
def test_equal_per_user_n_is_exactly_the_int(name):
    _, _, r = _population(seed=9)
    est = get_estimator(name)
    np.testing.assert_array_equal(est(r, np.full(r.size, 60), 8), est(r, 60, 8))


def test_equal_per_user_n_in_sampling_and_estimate():
    R = np.arange(1, 201) % 50 + 1
    np.testing.assert_array_equal(sample_ranks(R, np.full(R.size, 60), 8, rng=3),
                                  sample_ranks(R, 60, 8, rng=3))
    a = adaptive_sample_ranks(R, np.full(R.size, 60), 4, 32, rng=3)
    b = adaptive_sample_ranks(R, 60, 4, 32, rng=3)
    np.testing.assert_array_equal(a[0], b[0])
    r = sample_ranks(R, 60, 8, rng=4)
    pd.testing.assert_frame_equal(estimate(r, np.full(r.size, 60), 8, n_boot=50, rng=0),
                                  estimate(r, 60, 8, n_boot=50, rng=0))


def test_methods_without_a_per_user_likelihood_fit_per_group_of_n_u():
    # BV and MN are linear in the users' sampled ranks: with one group per N_u the
    # grouped fit is the per-user form, (1/M) sum_u x_{N_u}(r_u), computed here by
    # brute force user by user with each user's own N_u.
    from sampling_lib.estimators import bv_sampled_metric, mn_sampled_metric
    from sampling_lib.metrics import metric_values

    Nu = np.repeat([40, 55, 60], [30, 50, 40])
    g = np.random.default_rng(3)
    R = np.minimum(Nu, 1 + g.geometric(0.08, Nu.size))
    r = sample_ranks(R, Nu, 8, rng=g)
    assert set(PERUSER_METHODS) == {"mle", "wmle", "mes", "adaptive_mle", "logspline"}
    F = metric_values("ndcg@5", 60)
    brute_bv = np.mean([bv_sampled_metric(F[:N], N, 8)[ru - 1] for ru, N in zip(r, Nu)])
    assert get_estimator("bv")(r, Nu, 8) @ F == pytest.approx(brute_bv, rel=1e-12)
    # MN's M: the evaluation's users in every group (the averaged estimate's variance is that of M users)
    pr = lambda N: np.full(N, 1.0 / N)  # noqa: E731  (MN's uniform prior)
    brute_mn = np.mean([mn_sampled_metric(F[:N], N, 8, pr(N), Nu.size)[ru - 1] for ru, N in zip(r, Nu)])
    assert get_estimator("mn")(r, Nu, 8) @ F == pytest.approx(brute_mn, rel=1e-10)
    # the fitted-prior variants: the MLE prior on all users (own N_u), restricted per group
    w_mle = get_estimator("mle")(r, Nu, 8)
    brute = np.mean([bv_sampled_metric(F[:N], N, 8, prior=w_mle[:N] / w_mle[:N].sum())[ru - 1]
                     for ru, N in zip(r, Nu)])
    assert get_estimator("bv_mle")(r, Nu, 8) @ F == pytest.approx(brute, rel=1e-10)
    for name in ("bv", "mn_mle", "cls", "bv_mes"):
        w = get_estimator(name)(r, Nu, 8)
        assert w.shape == (60,) and np.isfinite(w).all()
    # equal N_u: exactly the int
    for name in ("bv", "mn", "bv_mle", "cls"):
        np.testing.assert_array_equal(get_estimator(name)(r, np.full(r.size, 60), 8),
                                      get_estimator(name)(r, 60, 8))
    with pytest.raises(ValueError, match="one item count per user"):
        E.mle(r, Nu[:-1], 8)
    with pytest.raises(ValueError, match="N_u"):
        E.mle(r, np.where(np.arange(r.size) == 3, 5, Nu), 8)


def test_estimate_of_bv_mn_with_per_user_n_bootstraps_per_group():
    Nu = np.repeat([40, 60], [60, 90])
    g = np.random.default_rng(5)
    R = np.minimum(Nu, 1 + g.geometric(0.1, Nu.size))
    r = sample_ranks(R, Nu, 8, rng=g)
    for name in ("bv", "mn", "bv_mle"):
        t = estimate(r, Nu, 8, ["recall@5"], method=name, n_boot=40, rng=0)
        w = get_estimator(name)(r, Nu, 8)
        assert t.estimate.item() == pytest.approx(np.sum(w[:5]), rel=1e-9)
        assert t.ci_low.item() <= t.ci_high.item()


def _small_groups(seed, scheme="binomial"):
    """(rng, N_u, sampled ranks, counts): 150 users in three groups of N_u (40, 47, 60), global ranks
    1 + geometric(0.1) censored at N_u, n = 8 -- the per-group linear estimators' small test set."""
    Nu = np.repeat([40, 47, 60], [50, 30, 70])
    g = np.random.default_rng(seed)
    R = np.minimum(Nu, 1 + g.geometric(0.1, Nu.size))
    r = sample_ranks(R, Nu, 8, rng=g, scheme=scheme)
    return g, Nu, r, rank_counts(r, 8, n_items=Nu)


def test_per_group_bootstrap_rows_are_each_users_own_sampled_metric():
    # the one-pass fit of BV / MN per group of N_u (fit and bootstrap rows together, sharing the group's
    # kernel and Gram matrix) against each cell's sampled metric computed on its own, from scratch
    from sampling_lib.estimators import bv_sampled_metric, mn_sampled_metric

    _, _, _, st = _small_groups(6)
    F = np.stack([metric_values("recall@5", 60), metric_values("ndcg@10", 60)], axis=1)
    for name in ("bv", "mn"):
        fit = get_estimator(name).fit_counts(st, None, F)
        for c in range(st.ranks.size):
            N, rc = int(st.n_items[c]), int(st.ranks[c])
            M = int(st.counts.sum())          # MN's M: the evaluation's users, in every group
            for j in range(F.shape[1]):
                x = (bv_sampled_metric(F[:N, j], N, 8) if name == "bv"
                     else mn_sampled_metric(F[:N, j], N, 8, None, M))
                assert fit.X[c, j] == pytest.approx(x[rc - 1], rel=1e-12, abs=1e-14)
        # the weights: the per-user form, (1/M) sum_u x_{N_u}(r_u)
        per_user = np.sum(fit.X[:, 0] * st.counts) / st.counts.sum()
        assert fit.weights @ F[:, 0] == pytest.approx(per_user, rel=1e-12)


def test_gram_reuse_follows_the_prior():
    # a remembered Gram matrix is reused only for the same prior: a changed prior of the same N gives the
    # fresh result
    from sampling_lib.estimators import bv_sampled_metric
    from sampling_lib.estimators import _linear

    F = metric_values("recall@5", 50)
    p1 = np.random.default_rng(0).dirichlet(np.ones(50))
    p2 = np.random.default_rng(1).dirichlet(np.ones(50))
    a1 = bv_sampled_metric(F, 50, 8, prior=p1)
    a2 = bv_sampled_metric(F, 50, 8, prior=p2)
    _linear._LAST_GRAM.clear()
    np.testing.assert_array_equal(a2, bv_sampled_metric(F, 50, 8, prior=p2))
    _linear._LAST_GRAM.clear()
    np.testing.assert_array_equal(a1, bv_sampled_metric(F, 50, 8, prior=p1))
    assert not np.allclose(a1, a2)


def test_sample_ranks_rank_among_own_candidates():
    Nu = np.array([100, 1000] * 2000)
    R = np.array([100, 100] * 2000)
    r = sample_ranks(R, Nu, 11, rng=0)
    assert np.all(r[::2] == 11)                               # the last of its own 100
    assert abs(r[1::2].mean() - (1 + 10 * 99 / 999)) < 0.05   # Binomial(10, 99/999) + 1: sd 0.0067
    with pytest.raises(ValueError, match="N_u"):
        sample_ranks([5, 50], [40, 45], 8)


# ----------------------------------------------------------------------------
# counts tables: the sufficient statistic gives identical tables (issue 18)
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["mle", "logspline", pytest.param("mes", marks=pytest.mark.slow), "bv"])
def test_counts_and_raw_ranks_give_identical_estimates_and_intervals(method):
    Nu, _, r = _population(M=400, n=20, lo=300, hi=340, seed=11)
    N = Nu if method != "bv" else 340
    raw = estimate(r, N, 20, metrics=["recall@10", "ndcg@20"], method=method, n_boot=40, rng=7)
    table = pd.DataFrame({"rank": r, "n_items": np.broadcast_to(N, r.shape)}).groupby(
        ["n_items", "rank"]).size().rename("count").reset_index().sample(frac=1.0, random_state=0)
    from_counts = estimate(table, None, 20, metrics=["recall@10", "ndcg@20"], method=method, n_boot=40,
                           rng=7)
    pd.testing.assert_frame_equal(raw, from_counts)
    stat = rank_counts(r, 20, n_items=N)
    pd.testing.assert_frame_equal(raw, estimate(stat, metrics=["recall@10", "ndcg@20"], method=method,
                                                n_boot=40, rng=7))


def test_compare_on_counts_is_the_unpaired_compare_of_the_ranks():
    Nu, _, r = _population(M=300, n=20, lo=300, hi=340, seed=12)
    r2 = np.maximum(1, r - 1)
    raw = compare({"A": r, "B": r2}, Nu, 20, metrics=["recall@10"], method="mle", n_boot=60, rng=1,
                  paired=False)
    rows = []
    for m, x in (("A", r), ("B", r2)):
        st = rank_counts(x, 20, n_items=Nu)
        rows.append(st.to_frame().assign(model=m))
    counts = pd.concat(rows, ignore_index=True)
    pd.testing.assert_frame_equal(raw, compare(counts, metrics=["recall@10"], method="mle", n_boot=60,
                                               rng=1))
    assert not raw.paired.any()
    with pytest.raises(ValueError, match="carry no pairing"):
        compare(counts, metrics=["recall@10"], method="mle", paired=True)
    paired = compare({"A": r, "B": r2}, Nu, 20, metrics=["recall@10"], method="mle", n_boot=60, rng=1)
    assert paired.paired.all() and paired.difference[0] == raw.difference[0]


def test_rank_counts_cells_per_item_count():
    c = rank_counts([1, 1, 2, 1], 5, n_items=[90, 80, 90, 90])
    assert c.n_items.tolist() == [80, 90, 90] and c.ranks.tolist() == [1, 1, 2]
    assert c.counts.tolist() == [1, 2, 1] and c.M == 4
    r, s, it = c.expand_cells()
    assert sorted(zip(it, r)) == sorted(zip([90, 80, 90, 90], [1, 1, 2, 1]))
    back = counts_from_frame(c.to_frame())["model"]
    assert all(np.array_equal(getattr(back, a), getattr(c, a)) for a in ("sizes", "ranks", "counts",
                                                                         "n_items"))


@pytest.mark.parametrize("table, kw, match", [
    (pd.DataFrame({"rank": [1]}), {}, r"column\(s\) \['count'\]"),
    (pd.DataFrame({"rank": [1], "count": [-1]}), {"n": 5}, "counts >= 0"),
    (pd.DataFrame({"rank": [6], "count": [1]}), {"n": 5}, "1..sample_size"),
    (pd.DataFrame({"rank": [1], "count": [1]}), {}, "sample size is unknown"),
    (pd.DataFrame({"rank": [1], "count": [1], "n_items": [50]}), {"n": 5, "N": 60}, "disagrees"),
    (pd.DataFrame({"rank": [1], "count": [1], "n_items": [4]}), {"n": 5}, "n_items"),
    (pd.DataFrame({"rank": [1], "count": [1.5]}), {"n": 5}, "integers"),
])
def test_counts_table_errors_name_the_problem(table, kw, match):
    with pytest.raises(ValueError, match=match):
        counts_from_frame(table, **kw)


def test_estimate_needs_n_somewhere():
    with pytest.raises(ValueError, match="N .the number of items"):
        estimate(pd.DataFrame({"rank": [1, 2], "count": [3, 4]}), None, 5)
    with pytest.raises(ValueError, match="several models|holds 2 models"):
        estimate(pd.DataFrame({"rank": [1, 2], "count": [3, 4], "model": ["a", "b"]}), 50, 5)


def test_parquet_counts_read_partitioned_equal_the_in_memory_groupby(tmp_path):
    rng = np.random.default_rng(0)
    M = 5000
    df = pd.DataFrame({"user": np.arange(M), "model": rng.choice(["A", "B"], M),
                       "rank": rng.integers(1, 21, M), "n_items": rng.integers(300, 305, M)})
    (tmp_path / "ds").mkdir()
    for i in range(3):
        df.iloc[i::3].to_parquet(tmp_path / "ds" / f"part-{i}.parquet")
    got = counts_table(tmp_path / "ds")
    want = counts_table(df)
    assert got["count"].sum() == M
    pd.testing.assert_frame_equal(got.astype({"model": object}), want.astype({"model": object}))
    # a counts data set (rows of cells) is summed, not counted
    want.to_parquet(tmp_path / "counts.parquet")
    pd.testing.assert_frame_equal(counts_table(tmp_path / "counts.parquet").astype({"model": object}),
                                  want.astype({"model": object}))


def test_ranks_table_n_items_column():
    df = pd.DataFrame({"user": [1, 2, 3], "rank": [1, 2, 3], "n_items": [50, 60, 50]})
    s = ranks_from_table(df, n=5)
    assert s.items_for_model("model").tolist() == [50, 60, 50]
    with pytest.raises(ValueError, match="disagrees with column 'n_items'"):
        ranks_from_table(df, n=5, N=50)
    with pytest.raises(ValueError, match="must be >= the sample size"):
        ranks_from_table(df.assign(n_items=[50, 4, 50]), n=5)


# ----------------------------------------------------------------------------
# the pipeline's convention
# ----------------------------------------------------------------------------
def test_global_ranks_among_non_history_items_are_at_most_n_candidates():
    rng = np.random.default_rng(1)
    M, N = 60, 40
    X = (rng.random((M, N)) < 0.3).astype(float)
    test = np.array([rng.choice(np.flatnonzero(X[u] == 0)) for u in range(M)])
    S = rng.random((M, N))
    S[np.arange(M), test] = -1.0                      # the held-out item scored worst
    Nu = n_candidates(X)
    np.testing.assert_array_equal(global_ranks(S, X, test), Nu)     # last among its N_u candidates
    np.testing.assert_array_equal(n_candidates(X, train_last=False), np.full(M, N))
    assert np.all(global_ranks(S, X, test, train_last=False) == N)


# ----------------------------------------------------------------------------
# done when: per-user N is closer to the truth than any single N (issue 14)
# ----------------------------------------------------------------------------
# Criterion (stated before measuring on ml-100k): without sampling noise (expected
# counts, studies.n_items_comparison), the mean absolute error of the estimated
# Recall@K = P(R <= K) over K from the resolution (max N_u - 1)/(n - 1) to min N_u
# (every rank that every user can have).
def _check_beats_every_single(table):
    for (model, method), g in table.groupby(["model", "method"]):
        pu = g.loc[g.N_label == "per-user", "mean_error"].item()
        others = g.loc[g.N_label != "per-user", "mean_error"]
        assert pu < others.min(), (model, method, pu, others.min())


def test_per_user_n_beats_every_single_n_on_dense_synthetic_data():
    # dense data: histories of up to 70% of the catalogue (N_u in 300..1000)
    from sampling_lib.studies import n_items_comparison

    rng = np.random.default_rng(0)
    M, N, n = 600, 1000, 100
    Nu = rng.integers(300, N + 1, M)
    R = np.minimum(Nu, np.ceil(np.exp(rng.uniform(0, np.log(N), M))).astype(int))
    single = {str(v): int(v) for v in np.linspace(300, N, 15).round()}
    t = n_items_comparison({"synthetic": R}, Nu, n, single=single, methods=("logspline", "mle"),
                           scale=50, k_max=int(Nu.min()))
    _check_beats_every_single(t)


@pytest.mark.slow
def test_per_user_n_beats_every_single_n_on_movielens(ml100k_path):
    # real ranks R_u <= N_u = 1682 - |history_u| (popularity, item-KNN), n = 100
    from sampling_lib.experiments import global_ranks_from_data
    from sampling_lib.studies import n_items_comparison

    ranks, N, info = global_ranks_from_data(ml100k_path, models=("popularity", "itemknn"),
                                            keep_models=False)
    Nu = info["n_candidates"]
    single = {str(v): int(v) for v in np.unique(np.r_[np.linspace(Nu.min(), N, 8).round(),
                                                       round(Nu.mean()), np.median(Nu)])}
    t = n_items_comparison(ranks, Nu, 100, single=single, methods=("logspline", "mle"), scale=100,
                           k_max=int(Nu.min()))
    _check_beats_every_single(t)


def test_run_experiment_takes_per_user_n():
    from sampling_lib.experiments import run_experiment

    Nu, R, _ = _population(M=200, seed=13)
    df = run_experiment({"m": R}, Nu, ["mle", "logspline"], metrics=["recall@10"], sample_sizes=[8],
                        repeats=2)
    assert len(df) == 4 and np.allclose(df.truth, np.mean(R <= 10))
    same = run_experiment({"m": np.minimum(R, 60)}, np.full(R.size, 60), ["mle"], sample_sizes=[8],
                          repeats=2)
    pd.testing.assert_frame_equal(same, run_experiment({"m": np.minimum(R, 60)}, 60, ["mle"],
                                                       sample_sizes=[8], repeats=2))
    bad = R.copy()
    bad[np.argmin(Nu)] = Nu.min() + 1                 # within max N_u, beyond its own N_u
    with pytest.raises(ValueError, match="1..N_u"):
        run_experiment({"m": bad}, Nu, ["mle"], sample_sizes=[8])


# ----------------------------------------------------------------------------
# the cells path's surrogate (many distinct N_u): a warm start, never the answer
# ----------------------------------------------------------------------------
def test_n_items_log_bins_stay_within_their_width():
    from sampling_lib.kernels import n_items_log_bins
    rng = np.random.default_rng(0)
    Nu = rng.integers(100, 5000, 2000)
    n = rng.choice([10, 20], Nu.size)
    rep = n_items_log_bins(Nu, n, 0.05)
    assert np.all(np.abs(np.log(rep / Nu)) <= 0.05)
    for s in (10, 20):                       # one representative per bin and n, inside the bin
        key = np.floor(np.log(Nu[n == s]) / 0.05)
        for k in np.unique(key):
            vals = Nu[n == s][key == k]
            assert np.unique(rep[n == s][key == k]).size == 1
            assert vals.min() <= rep[n == s][key == k][0] <= vals.max()
    with pytest.raises(ValueError, match="width"):
        n_items_log_bins(Nu, n, 0.0)


def test_hessian_cells_equals_the_numerical_hessian():
    Nu, _, r = _population(M=400, seed=12)
    cells = L._user_cells(r, Nu, 8)
    c, grid, K, P, _, _ = L.cells_setup(*cells, "binomial", L.DEFAULT_PENALTY, L.DEFAULT_KNOT_SPACING,
                                         L.EXACT_RANKS)
    beta = np.random.default_rng(1).normal(0, 0.3, grid.B.shape[1])
    np.testing.assert_allclose(L.hessian_cells(beta, c, K, grid, P), LN.hessian(beta, c, K, grid, P),
                               rtol=1e-5, atol=1e-6 * r.size)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_surrogate_start_gives_the_exact_fit_and_replicates(monkeypatch, scheme):
    """Cells of many N_u solve first on the binned surrogate; the point fit and the bootstrap
    replicates then converge on the exact cells under the exact solver's test, so they equal
    the exact solver's results to its tolerance."""
    rng = np.random.default_rng(3)
    M, n = 6000, 20
    Nu = rng.integers(300, 1200, M)
    R = np.minimum(Nu, 1 + rng.geometric(0.02, M))
    r = sample_ranks(R, Nu, n, scheme=scheme, rng=4)
    st = rank_counts(r, n, n_items=Nu)
    Cb = rng.multinomial(M, st.counts / M, 40).astype(float)
    F = np.ones((10, 1))
    out = {}
    for on in (True, False):
        monkeypatch.setattr(LC, "SURROGATE_MIN_CELLS", 0 if on else 10**9)
        L._CELLS_CACHE.clear()
        w, state = L.counts_fit_state(st.n_items, st.sizes, st.ranks, st.counts, scheme=scheme)
        assert (state[3] is not None) == on
        if on:
            assert 4 * state[3].K.shape[1] <= st.ranks.size      # the surrogate is smaller
        from sampling_lib.estimators._logspline_boot import logspline_cells_replicates
        est = logspline_cells_replicates(Cb, st.n_items, st.sizes, st.ranks, state[0], F, scheme=scheme,
                                         setup=state[1:])
        out[on] = w.head(50), est
    L._CELLS_CACHE.clear()
    # both stop at max |gradient| <= 1e-8 M (newton): weakly identified directions of the spline
    # are then known to about 1e-5 relative, whatever the start
    np.testing.assert_allclose(out[True][0], out[False][0], rtol=1e-4, atol=1e-12)
    sd = out[False][1].std()
    assert sd > 0
    assert np.max(np.abs(out[True][1] - out[False][1])) <= 0.01 * sd


def _many_cells(scheme, seed=3, M=20000, n=50):
    rng = np.random.default_rng(seed)
    Nu = rng.integers(300, 1500, M)
    R = np.minimum(Nu, 1 + np.floor(np.exp(rng.exponential(2.0, M))).astype(int))
    st = rank_counts(sample_ranks(R, Nu, n, scheme=scheme, rng=seed + 1), n, n_items=Nu)
    return st, rng.multinomial(M, st.counts / M, 400).astype(float)


@pytest.mark.parametrize("scheme", [pytest.param("binomial", marks=pytest.mark.slow), "hypergeometric"])
def test_corrected_one_step_bootstrap_on_many_cells_matches_exact_refits(scheme):
    """Thousands of cells (per-user N_u): each replicate is its one-step estimate plus the one-step
    error measured on the surrogate, checked on the first chunk's most extreme replicates. Every
    replicate agrees with the exact refit of the same draw within ONE_STEP_TOL bootstrap standard
    deviations (the Monte Carlo error of a 95% endpoint from 1,000 replicates); the one-step values
    alone do not always."""
    from sampling_lib.estimators import _logspline_boot as LB
    st, Cb = _many_cells(scheme)
    F = np.c_[np.ones(10), 1 / np.log2(1 + np.arange(1, 11))]
    L._CELLS_CACHE.clear()
    LB._ONE_STEP_CACHE.clear()
    for pen in (7.0, 70.0):
        w, state = L.counts_fit_state(st.n_items, st.sizes, st.ranks, st.counts, scheme=scheme, penalty=pen)
        beta, grid, K, sur, beta_s = state
        assert sur is not None                                          # many cells: a surrogate
        args = (st.n_items, st.sizes, st.ranks, beta, F)
        fast = LB.logspline_cells_replicates(Cb, *args, scheme=scheme, penalty=pen, setup=state[1:],
                                             counts=st.counts)
        rec = [v for v in LB._ONE_STEP_CACHE.values() if v["verdict"] is not None]
        assert len(rec) == 1 and rec[0]["verdict"] is True and np.all(rec[0]["error"] <= LB.ONE_STEP_TOL)
        LB._ONE_STEP_CACHE.clear()
        exact = LB.logspline_cells_replicates(Cb, *args, scheme=scheme, penalty=pen, setup=state[1:])
        sd = exact.std(axis=0)
        assert np.all(sd > 0)
        assert np.all(np.abs(fast - exact).max(axis=0) <= LB.ONE_STEP_TOL * sd)
        assert 0 < np.abs(fast - exact).max()                          # not refits, but close
        P = L.penalty_matrix(grid.B.shape[1], pen)
        _, one, _ = LB.one_step_replicates(Cb, st.counts, K, grid, P, beta, F)
        LB._ONE_STEP_CACHE.clear()
        # the correction matters: it removes most of the one-step error
        assert np.abs(fast - exact).max() < 0.5 * np.abs(one - exact).max()


def test_one_step_bootstrap_falls_back_to_exact_refits_when_the_check_fails(monkeypatch):
    from sampling_lib.estimators import _logspline_boot as LB
    st, Cb = _many_cells("binomial", seed=5)
    F = np.ones((10, 1))
    L._CELLS_CACHE.clear()
    LB._ONE_STEP_CACHE.clear()
    monkeypatch.setattr(LB, "ONE_STEP_TOL", 0.0)
    w, state = L.counts_fit_state(st.n_items, st.sizes, st.ranks, st.counts)
    args = (st.n_items, st.sizes, st.ranks, state[0], F)
    first = LB.logspline_cells_replicates(Cb[:100], *args, setup=state[1:], counts=st.counts)
    later = LB.logspline_cells_replicates(Cb[100:], *args, setup=state[1:], counts=st.counts)
    assert next(iter(LB._ONE_STEP_CACHE.values()))["verdict"] is False
    exact = LB.logspline_cells_replicates(Cb, *args, setup=state[1:])
    sd = exact.std()
    # every chunk refitted exactly (the decrement test of the exact bootstrap, 1e-6)
    assert np.abs(np.r_[first[:, 0], later[:, 0]] - exact[:, 0]).max() <= 1e-3 * sd


@pytest.mark.parametrize("scheme", SCHEMES)
def test_within_cell_share_is_the_variance_that_coarse_draws_leave_out(scheme):
    """Coarse draws (issue 27 item 2): a multinomial draw of the exact cells, replaced by its
    coarse cells' counts spread back in proportion to the full-sample counts, changes each one-step
    replicate by a term whose variance is the within-cell part of the bootstrap variance
    (law of total variance). within_cell_share computes that share from the fit; here it is
    measured on 400 draws (relative Monte Carlo error of a variance ~ sqrt(2/400) = 7%)."""
    from sampling_lib.estimators import _logspline_boot as LB
    st, Cb = _many_cells(scheme, seed=11)
    F = np.c_[np.ones(10), 1 / np.log2(1 + np.arange(1, 11))]
    L._CELLS_CACHE.clear()
    LB._ONE_STEP_CACHE.clear()
    w, state = L.counts_fit_state(st.n_items, st.sizes, st.ranks, st.counts, scheme=scheme)
    beta, grid, K, sur, _ = state
    assert sur is not None
    P = L.penalty_matrix(grid.B.shape[1], L.DEFAULT_PENALTY)
    _, T, pre = LB.one_step_replicates(Cb, st.counts, K, grid, P, beta, F)
    share = LB.within_cell_share(pre, st.counts, sur.index, sur.n_coarse)
    spread = LB._spread_counts(sur, st.counts)
    _, Tc, _ = LB.one_step_replicates(sur.coarse_counts(Cb), st.counts, K, grid, P, beta, F, coarse=sur.index)
    _, Ts, _ = LB.one_step_replicates(spread(sur.coarse_counts(Cb)), st.counts, K, grid, P, beta, F)
    LB._ONE_STEP_CACHE.clear()
    # the coarse products equal those on the spread counts (linear in the counts)
    np.testing.assert_allclose(Tc, Ts, rtol=1e-10, atol=1e-13)
    measured = (T - Ts).var(axis=0) / T.var(axis=0)
    assert np.all(share > 0)
    np.testing.assert_allclose(measured, share, rtol=0.3)


def test_coarse_draw_replicates_equal_those_of_the_spread_counts():
    """``replicates(Cb, coarse=True)`` on coarse counts gives the replicates of the same counts
    spread over the exact cells (every path: corrected one-step, its check, exact refits)."""
    from sampling_lib.estimators import _logspline_boot as LB
    from sampling_lib.estimators import get_estimator
    st, _ = _many_cells("binomial", seed=13)
    F = np.c_[np.ones(10), 1 / np.log2(1 + np.arange(1, 11))]
    L._CELLS_CACHE.clear()
    fit = get_estimator("logspline").fit_counts(st, None, F)
    index, n_coarse, share = fit.coarse_draws()
    assert n_coarse < st.counts.size and np.all(share <= LB.COARSE_DRAW_MAX_SHARE)
    Cs = np.random.default_rng(2).multinomial(st.M, np.bincount(index, st.counts) / st.M, 60).astype(float)
    spread = LB._spread_counts(fit.state[3], st.counts)
    np.testing.assert_allclose(spread(Cs).sum(axis=1), st.M)
    for tol in (LB.ONE_STEP_TOL, -1.0):                 # -1: the check fails, every replicate refitted
        keep, LB.ONE_STEP_TOL = LB.ONE_STEP_TOL, tol
        try:
            LB._ONE_STEP_CACHE.clear()
            a = fit.replicates(Cs, coarse=True)
            LB._ONE_STEP_CACHE.clear()
            b = fit.replicates(spread(Cs))
        finally:
            LB.ONE_STEP_TOL = keep
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    LB._ONE_STEP_CACHE.clear()
    with pytest.raises(ValueError, match="draw_cells"):
        get_estimator("mle").fit_counts(st, None, F).replicates(Cs, coarse=True)


def test_estimate_draws_on_coarse_cells_only_within_the_share_bound(monkeypatch):
    """estimate() with many cells: the point estimate does not depend on how the bootstrap draws;
    the intervals from coarse and from exact draws agree within the Monte Carlo error of two
    independent 400-replicate bootstraps; a share bound below the fit's share gives exact draws."""
    from sampling_lib.estimators import _logspline_boot as LB
    from sampling_lib import _estimate_rows as C
    rng = np.random.default_rng(17)
    M, n = 20000, 50
    Nu = rng.integers(300, 1500, M)
    R = np.minimum(Nu, 1 + np.floor(np.exp(rng.exponential(2.0, M))).astype(int))
    r = sample_ranks(R, Nu, n, rng=18)
    used = []
    real = C._cell_draws
    monkeypatch.setattr(C, "_cell_draws", lambda fit, counts: used.append(real(fit, counts)[1]) or real(fit, counts))
    out = {}
    for bound in (LB.COARSE_DRAW_MAX_SHARE, 1e-12):
        monkeypatch.setattr(LB, "COARSE_DRAW_MAX_SHARE", bound)
        LB._ONE_STEP_CACHE.clear()
        out[bound] = estimate(r, Nu, n, ["recall@10", "ndcg@10"], n_boot=400, rng=0)
    assert used == [True, False]
    a, b = out[LB.COARSE_DRAW_MAX_SHARE], out[1e-12]
    np.testing.assert_allclose(a.estimate, b.estimate, rtol=1e-12)
    np.testing.assert_allclose(a.naive, b.naive, rtol=1e-12)
    # two independent bootstraps: endpoint Monte Carlo SD ~0.13 replicate SD each at 400 replicates
    for col in ("ci_low", "ci_high", "naive_ci_low", "naive_ci_high"):
        assert np.all(np.abs(a[col] - b[col]) <= 0.6 * b.se)
    assert np.all(np.abs(a.se / b.se - 1) <= 0.15)


def test_mn_per_user_n_with_many_small_groups_stays_near_one_n():
    # MN fitted per group of N_u with the group's own user count as M overweighted the variance by the
    # number of groups and shrank the estimate towards 0 (Recall@10 0.01 against a truth of 0.60 with
    # 2,295 groups of ~9 users). With the evaluation's M every group solves the one-N problem of its N_u:
    # N_u within 2% of each other must give nearly the one-N estimate.
    g = np.random.default_rng(8)
    M = 3000
    Nu = g.integers(980, 1001, M)                      # 21 groups of ~140 users
    R = np.minimum(Nu, 1 + g.geometric(0.05, M))
    r = sample_ranks(R, Nu, 30, rng=g)
    per_user = estimate(r, Nu, 30, ["recall@10"], method="mn", n_boot=0).estimate.item()
    one_n = estimate(r, 1000, 30, ["recall@10"], method="mn", n_boot=0).estimate.item()
    assert per_user == pytest.approx(one_n, rel=0.05)


def test_per_group_fit_with_a_zero_count_cell():
    # a RankCounts built directly may hold a cell of no users: its group of N_u gets bootstrap rows and no
    # fit (a KeyError before), and the estimate equals the same table without that cell
    from sampling_lib.counts import RankCounts

    with_zero = RankCounts(np.full(5, 10), np.array([1, 2, 3, 1, 5]), np.array([5, 3, 2, 0, 4]),
                           np.array([100, 100, 100, 120, 130]))
    without = RankCounts(np.full(4, 10), np.array([1, 2, 3, 5]), np.array([5, 3, 2, 4]),
                         np.array([100, 100, 100, 130]))
    for name in ("bv", "mn"):
        a = estimate(with_zero, None, None, ["recall@5"], method=name, n_boot=0).estimate.item()
        b = estimate(without, None, None, ["recall@5"], method=name, n_boot=0).estimate.item()
        assert a == pytest.approx(b, rel=1e-12)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_cell_kernel_is_the_per_user_kernel_and_zero_beyond_n_items(scheme):
    # every cell's column is its user's kernel P(r | R; N_c, n_c) for R <= N_c and 0 beyond, also for the
    # cells ranked last (r = n: no (1 - p) factor, so the entries beyond N_c need their own zero)
    from sampling_lib.kernels import cell_kernel, kernel
    Nc = np.array([40, 40, 55, 55, 30])
    nc = np.array([5, 5, 5, 8, 8])
    rc = np.array([5, 2, 5, 8, 1])
    R = np.arange(1, 61)
    K = cell_kernel(R, Nc, nc, rc, scheme)
    for j in range(Nc.size):
        want = np.zeros(R.size)
        want[: Nc[j]] = kernel(int(Nc[j]), int(nc[j]), scheme)[:, rc[j] - 1]
        np.testing.assert_allclose(K[:, j], want, rtol=1e-10, atol=1e-15)


def test_hessian_cells_with_the_callers_product_is_the_same_hessian():
    # the one-step quantities pass K^T (g B), which they need anyway; a zero-count cell is left out in both
    st, _ = _many_cells("binomial", seed=21, M=3000)
    c = st.counts.astype(float)
    c[3] = 0.0
    _, grid, K, P, _, _ = L.cells_setup(st.n_items, st.sizes, st.ranks, c, "binomial", L.DEFAULT_PENALTY,
                                        L.DEFAULT_KNOT_SPACING, L.EXACT_RANKS)
    beta = np.random.default_rng(2).normal(0, 0.3, grid.B.shape[1])
    g = L.prior_masses(beta, grid)
    KgB = K.T @ (g[:, None] * grid.B)
    np.testing.assert_allclose(L.hessian_cells(beta, c, K, grid, P, KgB=KgB), L.hessian_cells(beta, c, K, grid, P),
                               rtol=1e-10, atol=1e-8)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_surrogate_likelihood_bins_sampled_ranks_into_coarsened_observations(monkeypatch, scheme):
    # the surrogate's columns beyond rank 32 are P(r in bin | R): summed over all bins of one (N_b, n) they
    # are the total probability 1 for every global rank R <= N_b; the coarse cells keep every r
    from sampling_lib.kernels import cell_kernel
    monkeypatch.setattr(LC, "SURROGATE_MIN_CELLS", 0)
    n = 100
    Nu = np.repeat(np.arange(500, 541), n)                  # 41 item counts in one log-bin of width 0.1
    r = np.tile(np.arange(1, n + 1), 41)
    grid = L.spline_grid(540, n, L.DEFAULT_KNOT_SPACING, L.EXACT_RANKS, scheme)
    sur = LC._surrogate(grid, Nu, np.full(Nu.size, n), r, np.zeros(Nu.size, bool), scheme, L.DEFAULT_KNOT_SPACING,
                       L.EXACT_RANKS)
    assert sur.n_coarse == n                                # every r its own coarse cell
    E = LC.SURROGATE_EXACT_SAMPLED_RANKS
    bins = LC._sampled_rank_bins(np.arange(1, n + 1))
    assert sur.K.shape[1] == E + np.unique(bins[E:]).size   # ranks 1..E, then the log-bins
    assert np.all(np.diff(bins) >= 0) and np.all(bins[:E] == np.arange(1, E + 1))
    Nb = int(np.unique(LC.n_items_log_bins(Nu, n, LC.SURROGATE_LOG_WIDTH))[0])
    inside = sur.grid.mid <= Nb
    np.testing.assert_allclose(sur.K[inside].sum(axis=1), 1.0, rtol=1e-9)
    # a binned column is the kernel summed over the bin's ranks
    j = sur.fold[np.flatnonzero(bins == bins[-1])[0]]
    rr = np.flatnonzero(bins == bins[-1]) + 1
    want = cell_kernel(sur.grid.mid, np.full(rr.size, Nb), np.full(rr.size, n), rr, scheme).sum(axis=1)
    np.testing.assert_allclose(sur.K[:, j], want, rtol=1e-10, atol=1e-300)
    # counts: exact -> coarse -> likelihood columns, the same as exact -> columns directly
    c = np.random.default_rng(0).integers(0, 5, Nu.size).astype(float)
    np.testing.assert_allclose(sur.fold_counts(sur.coarse_counts(c)), sur.counts(c))


def _two_models_many_cells(M=20000, n=50, seed=21):
    """Two models' per-user sampled ranks with per-user N_u (many cells), correlated through R."""
    rng = np.random.default_rng(seed)
    Nu = rng.integers(300, 1500, M)
    R1 = np.minimum(Nu, 1 + np.floor(np.exp(rng.exponential(2.0, M))).astype(int))
    R2 = np.clip(np.floor(R1 * np.exp(rng.normal(0.2, 0.5, M))).astype(int), 1, Nu)
    return Nu, {"a": sample_ranks(R1, Nu, n, rng=seed + 1), "b": sample_ranks(R2, Nu, n, rng=seed + 2)}


def test_coarse_share_of_a_paired_difference_is_what_coarse_tuple_draws_change():
    """The paired bootstrap on coarse user tuples (compare, per-user N_u): to first order a replicate
    of a difference moves by (1/M) sum_t (w_bt - w_t) D_t over the exact tuples t, D = psi_a - psi_b;
    drawing the coarse tuples instead and spreading each model's coarse counts over its exact cells
    (in proportion to that model's counts) replaces D by the difference of the models' coarse means.
    coarse_share computes the relative change of the variance; measured here on 2,000 draws of each
    kind (Monte Carlo error of the variance ratio ~4.5%, i.e. ~0.015 on the share), with three exact
    cells per coarse cell so that the share is large enough to see."""
    from sampling_lib.counts import coarse_means, coarse_share
    g = np.random.default_rng(4)
    T = 600
    ca, cb = g.integers(0, 90, T), g.integers(0, 60, T)           # each user tuple's cells of a and b
    w = g.integers(1, 40, T).astype(float)                         # users per tuple
    psi_a, psi_b = g.normal(size=(90, 2)), g.normal(size=(60, 2))
    ia, ib = np.arange(90) // 3, np.arange(60) // 3                # coarse cells: 3 exact cells each
    ma = coarse_means(psi_a, np.bincount(ca, w, 90), ia, 30)
    mb = coarse_means(psi_b, np.bincount(cb, w, 60), ib, 20)
    M = int(w.sum())
    p = w / M
    share = coarse_share(psi_a[ca] - psi_b[cb], ma[ia[ca]] - mb[ib[cb]], p)
    exact = (g.multinomial(M, p, size=2000) - w) @ (psi_a[ca] - psi_b[cb]) / M
    ct, cinv = np.unique(np.c_[ia[ca], ib[cb]], axis=0, return_inverse=True)
    cw = np.bincount(cinv.ravel(), w)
    coarse = (g.multinomial(M, cw / M, size=2000) - cw) @ (ma[ct[:, 0]] - mb[ct[:, 1]]) / M
    measured = np.abs(1 - coarse.var(axis=0) / exact.var(axis=0))
    assert np.all(share > 0.2)
    np.testing.assert_allclose(measured, share, atol=0.06)


def test_paired_compare_draws_coarse_tuples_within_the_share_bound(monkeypatch):
    """compare(paired) with per-user N_u: the point differences do not depend on how the bootstrap
    draws; coarse tuple draws and exact tuple draws (a share bound of 0 forces them) agree within
    the Monte Carlo error of two independent 400-replicate bootstraps; the coarse draws are used."""
    Nu, ranks = _two_models_many_cells()
    used, a, b = _coarse_and_exact_tuple_compare(monkeypatch, ranks, Nu, 50)
    assert [u[3] for u in used] == [True, False]
    assert used[0][0].shape[0] < used[1][0].shape[0] / 3          # far fewer tuples to draw
    assert used[0][1].sum() == used[1][1].sum() == Nu.size
    np.testing.assert_allclose(a.difference, b.difference, rtol=1e-12)
    half = (b.ci_high - b.ci_low) / 2
    for col in ("ci_low", "ci_high"):
        assert np.all(np.abs(a[col] - b[col]) <= 0.3 * half)


def _coarse_and_exact_tuple_compare(monkeypatch, ranks, Nu, n):
    """compare(paired, 400 replicates) twice: with the coarse-draw share bound as it is, then with
    bound 0 (exact tuples). Returns (the _tuple_draws results of the two calls, the two tables)."""
    from sampling_lib import correct as C
    from sampling_lib.estimators import _logspline_boot as LB
    used = []
    real = C._tuple_draws
    monkeypatch.setattr(C, "_tuple_draws", lambda *a: used.append(real(*a)) or used[-1])
    out = []
    for bound in (LB.COARSE_DRAW_MAX_SHARE, 0.0):
        monkeypatch.setattr(LB, "COARSE_DRAW_MAX_SHARE", bound)
        LB._ONE_STEP_CACHE.clear()
        out.append(compare(ranks, Nu, n, ["recall@10", "ndcg@10"], n_boot=400, rng=0, paired=True))
    LB._ONE_STEP_CACHE.clear()
    return used, out[0], out[1]


def test_exact_refits_in_blocks_of_replicates_equal_one_block(monkeypatch):
    """The exact refits of many cells run in blocks of replicates whose arrays stay within
    BOOT_CHUNK_ENTRIES; every replicate's iteration is its own, so the blocks give the same values."""
    from sampling_lib.estimators import _logspline_boot as LB
    st, Cb = _many_cells("binomial", seed=7)
    F = np.c_[np.ones(10), 1 / np.log2(1 + np.arange(1, 11))]
    L._CELLS_CACHE.clear()
    w, state = L.counts_fit_state(st.n_items, st.sizes, st.ranks, st.counts)
    args = (st.n_items, st.sizes, st.ranks, state[0], F)
    one = LB.logspline_cells_replicates(Cb[:20], *args, setup=state[1:])
    monkeypatch.setattr(LB, "BOOT_CHUNK_ENTRIES", 3 * state[2].shape[1])       # blocks of 3 replicates
    blocks = LB.logspline_cells_replicates(Cb[:20], *args, setup=state[1:])
    L._CELLS_CACHE.clear()
    np.testing.assert_allclose(blocks, one, rtol=1e-9, atol=1e-12)


def _gowalla_two_popularity_models():
    """Global ranks of two item-score models on LightGCN's Gowalla split (train and test pooled, one random
    held-out item per user, per-user N_u = N - history): training counts, and the counts times a fixed
    log-normal factor per item (a different, correlated model). Ranks by counting, pessimistic ties."""
    from sampling_lib.data import leave_one_out
    from sampling_lib.studies import PANEL_DATASETS
    from conftest import REPO
    spec = PANEL_DATASETS["gowalla"]
    shared = REPO.parent / "shared" / "data"
    if not all((shared / f).exists() for f in spec.files):
        pytest.skip(f"Gowalla (LightGCN) not found under {shared}")
    split = leave_one_out(spec.ratings(shared), rng=0)
    X = split.train.tocsr()
    counts = np.asarray(X.sum(axis=0)).ravel()
    noise = np.exp(np.random.default_rng(3).normal(0.0, 0.7, counts.size))
    h, Nu = split.test_items, split.n_items - np.diff(X.indptr)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    ranks = {}
    for name, s in (("counts", counts.astype(float)), ("noisy", counts * noise)):
        above = s.size - np.searchsorted(np.sort(s), s[h], side="left")      # items scored >= the held-out
        in_hist = np.bincount(rows, weights=s[X.indices] >= s[h][rows], minlength=h.size)
        ranks[name] = (above - in_hist).astype(np.int64)                        # the held-out counts itself
    return ranks, Nu


@pytest.mark.slow
def test_paired_coarse_tuples_on_real_per_user_n_u(monkeypatch):
    """The coarse tuple draws of compare (paired, per-user N_u) on real data with hundreds of N_u
    values (Gowalla, ~3 x 10^4 users; the synthetic check above has two made-up models): the coarse
    draws are used and the intervals agree with exact tuple draws (share bound 0) within the Monte
    Carlo error of two independent 400-replicate bootstraps, as there."""
    R, Nu = _gowalla_two_popularity_models()
    assert np.unique(Nu).size > 100 and all((1 <= r).all() and (r <= Nu).all() for r in R.values())
    sampled = {m: sample_ranks(r, Nu, 100, rng=k) for k, (m, r) in enumerate(R.items())}
    used, a, b = _coarse_and_exact_tuple_compare(monkeypatch, sampled, Nu, 100)
    assert [u[3] for u in used] == [True, False]
    assert used[0][0].shape[0] < used[1][0].shape[0] / 2          # fewer tuples to draw
    np.testing.assert_allclose(a.difference, b.difference, rtol=1e-12)
    half = (b.ci_high - b.ci_low) / 2
    for col in ("ci_low", "ci_high"):
        assert np.all(np.abs(a[col] - b[col]) <= 0.3 * half), (a[col], b[col], half)


@pytest.mark.parametrize("N", [50, 1000, 10**5, 10**6])
def test_kernel_entries_direct_hypergeometric_form_matches_the_row_form(N):
    # few columns of a large n take the log-Beta form (kernels._laws.kernel_entries); the row form of
    # log_kernel_rows is the reference: within 2e-8 relative wherever P > 1e-8, and below 1e-9 absolute
    rng = np.random.default_rng(N)
    for _ in range(10):
        n = int(rng.integers(32, min(N, 20_000) + 1))
        R = np.r_[1, N, N // 2, rng.integers(1, N + 1, size=30)]
        ranks = np.unique(rng.integers(1, n + 1, size=max(1, n // 20)))
        assert 5 * ranks.size <= 2 * n                   # the direct form is taken
        got = kernel_entries(N, n, R, ranks, "hypergeometric")
        ref = np.exp(log_kernel_rows(N, n, R, "hypergeometric")[:, ranks - 1])
        big = ref > 1e-8
        np.testing.assert_allclose(got[big], ref[big], rtol=2e-8)
        assert np.abs(got - ref).max() < 1e-9


@pytest.mark.parametrize("scheme", SCHEMES)
def test_kernels_in_increasing_n_equal_the_direct_kernels(scheme):
    # one-item steps (exact ratios of binomial coefficients), gaps up to KERNEL_STEP_MAX, a jump that
    # rebuilds, and a chain longer than KERNEL_CHAIN_MAX (rebuilt on the way): every kernel against
    # the directly built one, entry by entry (zeros where it has zeros)
    from sampling_lib.kernels import kernels_ascending
    from sampling_lib.kernels._laws import KERNEL_CHAIN_MAX, KERNEL_STEP_MAX, _dense

    n = 12
    Ns = np.r_[np.arange(30, 30 + KERNEL_CHAIN_MAX + 10), 110 + KERNEL_STEP_MAX, 500, 503, 12, 13]
    seen = []
    for N, K in kernels_ascending(Ns[::-1], n, scheme):
        D = _dense(N, n, scheme)
        assert K.shape == D.shape
        np.testing.assert_array_equal(K == 0, D == 0)
        np.testing.assert_allclose(K, D, rtol=1e-12, atol=0)
        seen.append(N)
    assert seen == sorted(set(Ns.tolist()))
    with pytest.raises(ValueError, match="n"):
        list(kernels_ascending([5, 10], 6, scheme))


@pytest.mark.parametrize("name", ["bv", "mn"])
def test_group_solutions_give_the_group_by_group_fit_and_are_shared_by_the_next_model(name):
    # the data-free part Z = G^{-1} K[:H]^T of every group at once: the weights on ranks 1..H and every
    # cell's sampled metric equal the group-by-group fits (the old path, still behind full()); a second
    # model on the same groups reuses the solutions; a fixed non-uniform prior gives its own
    from sampling_lib.estimators import _linear_groups as _linear

    Nu = np.repeat([40, 41, 43, 60, 75], [30, 20, 25, 40, 35])
    g = np.random.default_rng(8)
    F = np.stack([metric_values("recall@5", 75), metric_values("ndcg@10", 75)], axis=1)[:10]
    fits = []
    for k in range(2):
        R = np.minimum(Nu, 1 + g.geometric(0.1 + 0.05 * k, Nu.size))
        r = sample_ranks(R, Nu, 8, rng=g, scheme="hypergeometric")
        st = rank_counts(r, 8, n_items=Nu)
        est = get_estimator(name, scheme="hypergeometric")
        fit = est.fit_counts(st, None, F)
        full = np.asarray(fit.weights)
        assert full.shape == (75,)
        np.testing.assert_allclose(fit.weights.head(10), full[:10], rtol=1e-11, atol=1e-14)
        M = int(st.counts.sum())
        for c in range(st.ranks.size):
            N, rc = int(st.n_items[c]), int(st.ranks[c])
            for j in range(F.shape[1]):
                Fj = np.r_[F[:, j], np.zeros(N - 10)]
                x = (E.bv_sampled_metric(Fj, N, 8, scheme="hypergeometric") if name == "bv"
                     else E.mn_sampled_metric(Fj, N, 8, None, M, scheme="hypergeometric"))
                assert fit.X[c, j] == pytest.approx(x[rc - 1], rel=1e-11, abs=1e-14)
        fits.append(fit)
        if k == 0:
            cached = dict(_linear._GROUP_CACHE)
    assert len(cached) == 1 and list(_linear._GROUP_CACHE.values())[0] is list(cached.values())[0]
    if name == "bv":
        prior = g.dirichlet(np.ones(75))
        fit = get_estimator("bv", prior=prior, scheme="hypergeometric").fit_counts(st, None, F)
        np.testing.assert_allclose(fit.weights.head(10), np.asarray(fit.weights)[:10], rtol=1e-11, atol=1e-14)
        assert not np.allclose(fit.weights.head(10), fits[-1].weights.head(10))


def _em_surrogate_case(M=700, seed=11):
    """Per-user N_u over a range wide enough for the EM surrogate to pay (N_u 600..1,600, n = 40)."""
    rng = np.random.default_rng(seed)
    Nu = rng.integers(600, 1601, M)
    R = np.minimum(Nu, 1 + np.floor(np.exp(rng.exponential(2.5, M))).astype(np.int64))
    r = sample_ranks(R, Nu, 40, rng=seed, scheme="hypergeometric")
    st = rank_counts(r, 40, n_items=Nu)
    F = np.stack([metric_values("recall@10", 1600), metric_values("ndcg@10", 1600)], axis=1)[:10]
    Cb = rng.multinomial(st.M, st.counts / st.M, 24).astype(float)
    return st, F, Cb


@pytest.mark.parametrize("name", ["mle", "wmle"])
def test_em_surrogate_replicates_are_checked_against_exact_refits(name):
    # the EM family's per-user-N replicates: exact estimate + the surrogate's change; the farthest
    # EM_SURROGATE_CHECKS replicates are refitted on the exact cells in single precision (their values
    # are those refits, within 1e-4 bootstrap SDs of double precision's) and the others lie within
    # EM_SURROGATE_TOL bootstrap SDs of their exact refits when the check passes
    from sampling_lib.estimators import _bootstrap as BT

    st, F, Cb = _em_surrogate_case()
    est = get_estimator(name, scheme="hypergeometric")
    fit = est.fit_counts(st, None, F)
    rep = fit.replicates(Cb)
    sur = fit._em_sur
    assert sur and sur.verdict is not None
    exact = est.fit_counts(st, None, F)
    exact._em_sur = False                       # the exact path, every replicate refitted
    ref = exact.replicates(Cb)
    sd = rep.std(axis=0, ddof=1)
    err = np.abs(rep - ref) / sd
    assert np.sum(np.all(err < 1e-4, axis=1)) >= BT.EM_SURROGATE_CHECKS
    if sur.verdict:
        assert np.all(err <= BT.EM_SURROGATE_TOL)
        assert not np.allclose(rep, ref)        # the others are the surrogate's, not refits
    else:
        np.testing.assert_allclose(rep, ref, rtol=1e-12)
    # the surrogate's own likelihood: a cell whose N_u is a node has that node's kernel column
    node_cells = np.flatnonzero(np.isin(st.n_items, [st.n_items.min(), st.n_items.max()]))
    for c in node_cells[:3]:
        g = BT.em_grid(int(st.n_items.max()), 40, "hypergeometric", BT.EM_SURROGATE_GRID_TOL)[0]
        ok = g.lo <= st.n_items[c]
        col = np.asarray(sur.S[c].toarray()).ravel() @ sur.Kn.T
        want = kernel_entries(int(st.n_items[c]), 40, np.minimum(g.rep[ok], st.n_items[c]), [int(st.ranks[c])],
                              "hypergeometric").ravel()
        # (the surrogate is single precision; kernel_entries' direct form for one rank is within 2e-8
        # relative of the rows above 1e-8)
        np.testing.assert_allclose(col[ok], want, rtol=1e-6, atol=1e-12)
        assert np.all(col[~ok] == 0)


def test_em_surrogate_falls_back_to_exact_refits_when_the_check_fails(monkeypatch):
    from sampling_lib.estimators import _bootstrap as BT

    monkeypatch.setattr(BT, "EM_SURROGATE_TOL", 0.0)
    st, F, Cb = _em_surrogate_case(seed=12)
    est = get_estimator("mle", scheme="hypergeometric")
    fit = est.fit_counts(st, None, F)
    rep = np.vstack([fit.replicates(Cb[:12]), fit.replicates(Cb[12:])])     # two chunks
    assert fit._em_sur.verdict is False
    exact = est.fit_counts(st, None, F)
    exact._em_sur = False
    np.testing.assert_allclose(rep, exact.replicates(Cb), rtol=1e-12)
    # where the surrogate would not pay (one N, few distinct N_u) the replicates are exact refits
    st1 = rank_counts(np.repeat(st.ranks, st.counts), 40, n_items=np.repeat(np.where(st.n_items > 1100, 1600, 900),
                                                                            st.counts))
    fit1 = est.fit_counts(st1, None, F)
    fit1.replicates(np.random.default_rng(0).multinomial(st1.M, st1.counts / st1.M, 6).astype(float))
    assert fit1._em_sur is False


def test_mes_pooled_kernel_from_stepped_kernels_equals_the_columns():
    # the pooled kernel of MES (many N_b: whole kernels stepped in N) against the column-by-column build
    from sampling_lib.estimators import _mes_kernel
    from sampling_lib.kernels import kernel_columns

    Nu, _, r = _population(M=300, n=8, lo=40, hi=90, seed=4)
    Kbar, c = _mes_kernel.pooled_block(r, Nu, 8, "hypergeometric", 0.0)
    cols = np.flatnonzero(np.bincount(r - 1, minlength=8) > 0) + 1
    want = np.zeros_like(Kbar)
    for b in np.unique(Nu):
        frac = np.bincount(Nu[Nu == b], minlength=b + 1)[1:][::-1].cumsum()[::-1] / Nu.size
        want[:b] += kernel_columns(int(b), 8, cols, "hypergeometric", cache=False) * frac[:, None]
    np.testing.assert_allclose(Kbar, want, rtol=1e-7, atol=1e-15)
    assert c.sum() == r.size


def test_em_operators_of_the_same_cells_are_built_once():
    from sampling_lib.estimators import _em

    Nu, _, r = _population(M=200, n=8, seed=5)
    st = rank_counts(r, 8, n_items=Nu)
    a = _em.em_operators(st.n_items, st.sizes, st.ranks, "binomial")
    b = _em.em_operators(st.n_items.copy(), st.sizes.copy(), st.ranks.copy(), "binomial")
    assert a is b
    assert _em.em_operators(st.n_items, st.sizes, st.ranks, "hypergeometric") is not a
    op = a[0][0]
    with pytest.raises(ValueError):
        (op.K if hasattr(op, "K") else op)[0, 0] = 1.0


@pytest.mark.parametrize("scheme", SCHEMES)
def test_em_on_column_bands_equals_the_per_user_brute_force(scheme):
    # many groups of N_u concatenated into one block, stored as the bands of its columns (entries below
    # BAND_TOL of a column's peak left out): several bands, less than the padded block, the same EM
    from sampling_lib.estimators import _em

    Nu, _, r = _population(M=700, n=20, lo=300, hi=420, seed=9)
    st = rank_counts(r, 20, n_items=Nu)
    ops = _em.em_operators(st.n_items, st.sizes, st.ranks, scheme)
    bands = [op for op, _ in ops if isinstance(op, _em.RowBlockOp)]
    assert len(bands) > 1
    assert sum(op.K.size for op in bands) < 420 * sum(op.K.shape[1] for op in bands)
    assert sorted(np.concatenate([idx for _, idx in ops]).tolist()) == list(range(st.ranks.size))
    pb, _ = _brute_em(r, Nu, 20, scheme)
    np.testing.assert_allclose(E.mle(r, Nu, 20, scheme=scheme, n_items_tol=0), pb, atol=1e-13)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_single_precision_em_follows_the_double_precision_em(scheme):
    # the surrogate's check refits in float32 on the same banded operators: the same 100 EM steps to
    # about 1e-6 of the masses; an operator it cannot copy (a binned group) sends it back to float64
    from sampling_lib.estimators import _em

    Nu, _, r = _population(M=700, n=20, lo=300, hi=420, seed=9)
    st = rank_counts(r, 20, n_items=Nu)
    ops = _em.em_operators(st.n_items, st.sizes, st.ranks, scheme)
    W = np.random.default_rng(2).multinomial(st.M, st.counts / st.M, 3).astype(float)
    blocks = [(op, W[:, idx]) for op, idx in ops]
    p0 = np.full(420, 1 / 420)
    double = _em.em_fixed_iterations(blocks, p0, 100)
    single = _em.em_fixed_iterations_single(blocks, p0, 100)
    assert single.dtype == float and single.shape == double.shape
    np.testing.assert_allclose(single, double, rtol=1e-4, atol=1e-6 * double.max())
    assert not np.allclose(single, double, rtol=1e-12, atol=0)       # it did run in single precision
    binned = _em.em_operators(st.n_items, st.sizes, st.ranks, scheme, tol=0.5)
    assert any(isinstance(op, _em.TruncatedOp) for op, _ in binned)
    assert _em.em_fixed_iterations_single([(op, W[:, idx]) for op, idx in binned], p0, 5) is None


def test_em_surrogate_is_never_used_unchecked():
    # a first chunk too small to check (at most EM_SURROGATE_CHECKS replicates) is refitted exactly
    from sampling_lib.estimators import _bootstrap as BT

    st, F, Cb = _em_surrogate_case(seed=13)
    est = get_estimator("mle", scheme="hypergeometric")
    fit = est.fit_counts(st, None, F)
    small = fit.replicates(Cb[:BT.EM_SURROGATE_CHECKS])
    assert fit._em_sur and fit._em_sur.verdict is None
    exact = est.fit_counts(st, None, F)
    exact._em_sur = False
    np.testing.assert_allclose(small, exact.replicates(Cb[:BT.EM_SURROGATE_CHECKS]), rtol=1e-12)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_cls_per_user_n_replicates_are_the_refits_of_every_group(scheme):
    # CLS has no per-user form: it is fitted per group of N_u and the groups averaged with their user
    # shares. Its cells' linear form (one matrix product per replicate) against refitting every group on
    # every replicate (the registry's refit path, group by group from the users' ranks), and the point
    # weights against the groups' own cls() fits
    from sampling_lib.estimators import cls
    from sampling_lib.estimators._bootstrap import refit_replicates
    from sampling_lib.estimators._cls import _CellsLinear

    g, Nu, r, st = _small_groups(11, scheme=scheme)
    F = np.stack([metric_values("recall@5", 60), metric_values("ndcg@5", 60)], axis=1)
    est = E.build_estimators(["cls"], scheme=scheme, max_rank=5)["cls"]
    fit = est.fit_counts(st, None, F)
    assert isinstance(fit.state, _CellsLinear)
    brute = sum(np.mean(Nu == N) * np.pad(cls(r[Nu == N], N, 8, max_rank=5, scheme=scheme), (0, 60 - N))
                for N in (40, 47, 60))
    np.testing.assert_allclose(fit.weights, brute, rtol=1e-12, atol=1e-15)
    Cb = g.multinomial(st.M, st.counts / st.M, size=7).astype(float)
    Cb[0, st.n_items == 47] = 0          # a replicate without one group's users
    np.testing.assert_allclose(fit.replicates(Cb), refit_replicates(fit, Cb), rtol=1e-10, atol=1e-13)
    # the point estimate is the cells' average
    np.testing.assert_allclose(st.counts @ fit.state.X / st.M, fit.estimate, rtol=1e-12)


@pytest.mark.parametrize("kind", ["bv", "mn"])
def test_fitted_prior_groups_gradient_is_the_finite_difference(kind):
    # d estimate / d prior of BV / MN per group of N_u (each group restricts and renormalises the prior)
    # against central differences of the same one-pass fit; its X and weights against each group's
    # sampled metric and weights computed on their own (the exact kernel, from scratch)
    from sampling_lib.estimators import bv_sampled_metric, mn_sampled_metric
    from sampling_lib.estimators._linear_groups import linear_groups_prior_fit

    g, _, _, st = _small_groups(12, scheme="hypergeometric")
    groups = [(N, st.n_items == N) for N in (40, 47, 60)]
    F = np.stack([metric_values("recall@5", 60), metric_values("ndcg@10", 60)], axis=1)[:10]
    prior = g.dirichlet(np.ones(60))
    kw = dict(scheme="hypergeometric", gamma=0.05, M=st.M)
    fit = linear_groups_prior_fit(kind, groups, st.ranks, st.counts, 8, F, prior, **kw)
    est = lambda pr: st.counts @ linear_groups_prior_fit(kind, groups, st.ranks, st.counts, 8, F, pr,  # noqa: E731
                                                          **kw).X / st.M
    for _ in range(3):
        v = g.normal(size=60) * prior
        eps = 1e-6
        fd = (est(prior + eps * v) - est(prior - eps * v)) / (2 * eps)
        np.testing.assert_allclose(v @ fit.gradient, fd, rtol=1e-6, atol=1e-10)
    for c in range(st.ranks.size):
        N, rc = int(st.n_items[c]), int(st.ranks[c])
        pb = prior[:N] / prior[:N].sum()
        for j in range(2):
            Fj = np.pad(F[:, j], (0, N - 10))
            x = (bv_sampled_metric(Fj, N, 8, 0.05, pb, scheme="hypergeometric") if kind == "bv"
                 else mn_sampled_metric(Fj, N, 8, pb, st.M, scheme="hypergeometric"))
            assert fit.X[c, j] == pytest.approx(x[rc - 1], rel=1e-10, abs=1e-13)
    np.testing.assert_allclose(fit.head @ F, st.counts @ fit.X / st.M, rtol=1e-12)


def _three_groups(sizes, seed):
    """(rng, counts, F): users in three groups of N_u (300, 340, 400) with geometric global ranks, 20
    distinct negatives each, and Recall@10, NDCG@10 on ranks 1..10 -- the one-step bootstraps' test set."""
    Nu = np.repeat([300, 340, 400], sizes)
    g = np.random.default_rng(seed)
    R = np.minimum(Nu, 1 + g.geometric(0.05, Nu.size))
    r = sample_ranks(R, Nu, 20, rng=g, scheme="hypergeometric")
    F = np.stack([metric_values("recall@10", 400), metric_values("ndcg@10", 400)], axis=1)[:10]
    return g, rank_counts(r, 20, n_items=Nu), F


@pytest.mark.parametrize("name", ["mn_mle", "bv_mle"])
def test_fitted_prior_per_user_n_one_step_replicates_are_near_the_refits(name):
    # MN: the one-step bootstrap in the prior (no group refitted) against refitting the prior and every
    # group on each replicate. Its error is of order 1/M against a spread of order 1/sqrt(M): at
    # M = 2,000, within a tenth of the refits' standard deviation. BV (too far from linear in its prior
    # for the one step): the prior's replicates solved at nodes in log N, here every N_u a node
    from sampling_lib.estimators._bootstrap import refit_replicates

    g, st, F = _three_groups([600, 500, 900], 13)
    fit = E.build_estimators([name], scheme="hypergeometric")[name].fit_counts(st, None, F)
    assert (fit.state is not None) == (name == "mn_mle")
    Cb = g.multinomial(st.M, st.counts / st.M, size=12).astype(float)
    one, exact = fit.replicates(Cb), refit_replicates(fit, Cb)
    sd = exact.std(axis=0)
    assert np.all(np.abs(one - exact) <= 0.1 * sd), (np.abs(one - exact) / sd).max(0)
    if name == "bv_mle":
        assert fit._nodes[0].every and fit._nodes[0].verdict is True
    # the point estimate is the cells' average; the weights beyond the metrics' ranks come from each
    # group's own fit on its exact kernel, and agree with the one pass where both exist
    np.testing.assert_allclose(st.counts @ fit.X / st.M, fit.estimate, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(fit.weights)[:10], fit.weights.head(10), rtol=1e-9, atol=1e-15)


def _many_groups(M, seed, lo=300, hi=600, n=30, p=0.05):
    """(rng, counts, F): M users with N_u log-uniform over lo..hi (by default hundreds of distinct values,
    past NODE_EVERY_MAX: the nodes interpolate), global ranks 1 + geometric(p) censored at N_u, n distinct
    negatives, Recall@5 and NDCG@5."""
    g = np.random.default_rng(seed)
    Nu = np.floor(np.exp(g.uniform(np.log(lo), np.log(hi + 1), M))).astype(np.int64)
    R = np.minimum(Nu, 1 + g.geometric(p, M))
    r = sample_ranks(R, Nu, n, rng=g, scheme="hypergeometric")
    F = np.stack([metric_values("recall@5", hi), metric_values("ndcg@5", hi)], axis=1)[:5]
    return g, rank_counts(r, n, n_items=Nu), F


@pytest.mark.parametrize("name", ["bv_mle", "bv_mes"])
def test_bv_fitted_prior_node_replicates_are_near_the_refits(name):
    # per-user N over a range of N_u: the prior's replicates (its own bootstrap) solved at nodes in
    # log N and interpolated between them, against refitting the prior and every group on each
    # replicate: within a tenth of the refits' standard deviation, and the check (every node against
    # every other node) records an error below its tolerance
    from sampling_lib.estimators._bootstrap import refit_replicates
    from sampling_lib.estimators._linear_nodes import NODE_TOL

    g, st, F = _many_groups(1000, 31)
    fit = E.build_estimators([name], scheme="hypergeometric")[name].fit_counts(st, None, F)
    Cb = g.multinomial(st.M, st.counts / st.M, size=12).astype(float)
    one, exact = fit.replicates(Cb), refit_replicates(fit, Cb)
    nodes = fit._nodes[0]
    assert not nodes.every and 3 <= nodes.nodes.size < np.unique(st.n_items).size
    assert nodes.verdict is True and np.all(nodes.error <= NODE_TOL)
    sd = exact.std(axis=0)
    assert np.all(np.abs(one - exact) <= 0.1 * sd), (np.abs(one - exact) / sd).max(axis=0)


@pytest.mark.parametrize("name", ["bv_mle", "bv_mes"])
def test_bv_node_replicates_use_every_small_n_u(name):
    # small N_u (30..90, n = 10) with ranks censored at N_u: the fitted prior steps at every N_u, which
    # interpolation between nodes misses (0.18 SD off the refits at nodes 0.2 apart, with a check of only
    # 0.076); there every N_u is a node, affordable at this size, and the replicates are near the refits
    from sampling_lib.estimators._bootstrap import refit_replicates

    g, st, F = _many_groups(1500, 5, lo=30, hi=90, n=10, p=0.1)
    fit = E.build_estimators([name], scheme="hypergeometric")[name].fit_counts(st, None, F)
    Cb = g.multinomial(st.M, st.counts / st.M, size=12).astype(float)
    one, exact = fit.replicates(Cb), refit_replicates(fit, Cb)
    nodes = fit._nodes[0]
    assert nodes.every and nodes.nodes.size == np.unique(st.n_items).size > 40
    sd = exact.std(axis=0)
    assert np.all(np.abs(one - exact) <= 0.1 * sd), (np.abs(one - exact) / sd).max(axis=0)


def test_bv_node_replicates_fall_back_to_refits_when_the_check_fails(monkeypatch):
    # a check that fails (tolerance below zero): every replicate refitted, for this chunk and the next
    from sampling_lib.estimators import _bootstrap as BS
    from sampling_lib.estimators._bootstrap import refit_replicates

    g, st, F = _many_groups(400, 32)
    monkeypatch.setattr(BS, "NODE_TOL", -1.0)
    fit = E.build_estimators(["bv_mle"], scheme="hypergeometric")["bv_mle"].fit_counts(st, None, F)
    Cb = g.multinomial(st.M, st.counts / st.M, size=4).astype(float)
    np.testing.assert_allclose(fit.replicates(Cb), refit_replicates(fit, Cb), rtol=1e-12)
    assert fit._nodes[0].verdict is False
    np.testing.assert_allclose(fit.replicates(Cb[:2]), refit_replicates(fit, Cb[:2]), rtol=1e-12)


def test_bv_node_replicates_refuse_cell_indicators_over_the_array_limit(monkeypatch):
    # the prior's rank-cell indicators (N x cells) are one array that grows with N: over the library's
    # array limit the bootstrap stops at once with a MemoryLimitError naming it, before allocating
    from sampling_lib.exceptions import MemoryLimitError

    g, st, F = _many_groups(400, 34)
    fit = E.build_estimators(["bv_mle"], scheme="hypergeometric")["bv_mle"].fit_counts(st, None, F)
    Cb = g.multinomial(st.M, st.counts / st.M, size=3).astype(float)
    monkeypatch.setenv("SAMPLING_LIB_MAX_ARRAY_BYTES", str(8 * 600 * 10))
    with pytest.raises(MemoryLimitError, match="rank-cell indicators"):
        fit.replicates(Cb)


def test_prior_nodes_weights_and_masses():
    # the nodes span the N_u in log N; interpolation weights reproduce any function linear in log N
    # (both sums: every node and every other node); the fitted prior's node masses are its
    # restriction to 1..N_j summed over the node's cells, renormalised
    from sampling_lib.estimators._linear_nodes import PriorNodes

    g = np.random.default_rng(33)
    Ns = np.arange(250, 521)
    prior = g.dirichlet(np.ones(520))
    nodes = PriorNodes.build(Ns, 40, "hypergeometric", prior, width=0.1)
    assert nodes.nodes[0] == 250 and nodes.nodes[-1] == 520 and nodes.nodes.size % 2 == 1
    assert not nodes.every and nodes.nodes.size < Ns.size
    f = 3.0 + 2.0 * np.log(nodes.nodes)
    for stride in (1, 2):
        W = nodes.weights(Ns, stride)
        np.testing.assert_allclose(W.sum(axis=1), 1.0, rtol=1e-12)
        np.testing.assert_allclose(W @ f, 3.0 + 2.0 * np.log(Ns), rtol=1e-12)
    common = nodes.indicator(520).T @ prior
    np.testing.assert_allclose(nodes.masses(prior), common, rtol=1e-12)
    for j, N in enumerate(nodes.nodes.tolist()):
        starts = nodes.cells[j][0]
        want = np.add.reduceat(prior[:N], starts) / prior[:N].sum()
        np.testing.assert_allclose(nodes.node_masses(common[None, :], j)[0], want, rtol=1e-10)


def test_mes_cell_influence_is_each_cells_sum_over_its_kernel(monkeypatch):
    # A_N of a cell (N_u, r) = -(1/lam) sum_{R <= N_u} [2 pi_R (K_b z)_R + s_R (K_b u)_R], K_b the kernel
    # columns of the cell's bin of N_u: the two-product form (in blocks of 50 cells here) against that sum
    # cell by cell
    from sampling_lib.estimators import _mes_pooled as MP
    from sampling_lib.estimators._mes import mes_lambda
    from sampling_lib.estimators._mes_pooled import mes_cell_influence, mes_first_order
    from sampling_lib.kernels import kernel_columns

    monkeypatch.setattr(MP, "_Q_ROWS", 50)

    g = np.random.default_rng(41)
    Nu = g.integers(200, 401, 900)
    R = np.minimum(Nu, 1 + g.geometric(0.03, Nu.size))
    st = rank_counts(sample_ranks(R, Nu, 10, rng=g, scheme="hypergeometric"), 10, n_items=Nu)
    assert st.ranks.size > 4 * 50                   # several blocks of the product
    F = g.random((400, 3))
    pi = g.dirichlet(np.ones(400))
    lam = mes_lambda(None, "tors", 10)[1]
    tol = 0.3                                       # bins of up to 15 N_u: b > N_u for most cells
    a, p, cols, A_N = mes_cell_influence(st, pi, F, 10, lam, "hypergeometric", tol)
    _, Z, S, u = mes_first_order(a, p, pi, lam, F)
    live = st.counts > 0
    reps = n_items_bins(st.n_items[live], 10, tol, "hypergeometric")
    assert np.any(reps > st.n_items[live])
    want = np.zeros_like(A_N)
    for i, b in zip(np.flatnonzero(live), reps):
        Kb = kernel_columns(int(b), 10, cols, "hypergeometric")[:st.n_items[i]]
        N_u = st.n_items[i]
        want[i] = -(2.0 * pi[:N_u] @ (Kb @ Z) + (Kb @ u) @ S[:N_u]) / lam
    np.testing.assert_allclose(A_N, want, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("kind", ["bv", "mn"])
def test_linear_on_grid_batch_with_k_distributions_per_replicate(kind):
    # (B, k, n) sampled-rank distributions sharing each replicate's prior: the same as k calls with (B, n),
    # and each as the single-replicate solve on the grid (linear_on_grid's weights times the metrics)
    from sampling_lib.estimators._linear import linear_on_grid, linear_on_grid_batch
    from sampling_lib.kernels import em_grid

    g = np.random.default_rng(42)
    grid, Kg = em_grid(5000, 20, "hypergeometric", 0.3)
    B, k = 4, 3
    P = g.dirichlet(np.ones(20), size=(B, k))
    priors = g.dirichlet(np.ones(grid.lo.size), size=B)
    Fcell = grid.bin_average(np.stack([metric_values("recall@10", 5000), metric_values("ndcg@10", 5000)], axis=1))
    kw = dict(gamma=0.05) if kind == "bv" else dict(M=400)
    out = linear_on_grid_batch(kind, P, priors, Kg, grid.size, Fcell, **kw)
    assert out.shape == (B, k, 2)
    for j in range(k):
        np.testing.assert_allclose(out[:, j], linear_on_grid_batch(kind, P[:, j], priors, Kg, grid.size, Fcell, **kw),
                                   rtol=1e-12)
    for b in range(B):
        w = linear_on_grid(kind, P[b, 1], grid.expand(priors[b]), grid, Kg, **kw)
        np.testing.assert_allclose(out[b, 1], np.asarray(w) @ np.stack(
            [metric_values("recall@10", 5000), metric_values("ndcg@10", 5000)], axis=1), rtol=1e-8)


def test_mes_first_order_is_the_finite_difference():
    # the implicit-function derivative of the MES metrics in the target p and the kernel columns a,
    # against central differences of the solver itself
    from sampling_lib.estimators._mes import _mes_dual_newton
    from sampling_lib.estimators._mes_pooled import mes_first_order

    g = np.random.default_rng(21)
    N, k, lam = 80, 6, 0.002
    a = g.random((N, k)) * np.linspace(1.0, 0.1, N)[:, None]
    p = g.dirichlet(np.ones(k))
    F = g.random((N, 2))
    solve = lambda aa, pp: _mes_dual_newton(aa, pp, lam, 1e-15, 200)[0]  # noqa: E731
    pi = solve(a, p)
    beta, Z, S, u = mes_first_order(a, p, pi, lam, F)
    for _ in range(3):
        dp, da = g.normal(size=k), g.normal(size=(N, k)) * a
        eps = 1e-6
        fd = (F.T @ solve(a + eps * da, p + eps * dp) - F.T @ solve(a - eps * da, p - eps * dp)) / (2 * eps)
        lin = dp @ beta - (2.0 * pi @ da @ Z + np.einsum("Rj,Rr,r->j", S, da, u)) / lam
        np.testing.assert_allclose(lin, fd, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("name", ["mes", "mn_mes"])
def test_mes_per_user_n_replicates_are_near_the_refits(name):
    # per-user N: MES replicates solved in their histogram on the fixed pooled kernel plus the kernel's
    # first-order term (and for MN_MES the one-step in its prior) against refitting MES (and every group)
    # on each replicate; the terms left out are of order 1/M against a spread of order 1/sqrt(M): at
    # M = 2,000, within a tenth of the refits' standard deviation
    from sampling_lib.estimators._bootstrap import refit_replicates

    g, st, F = _three_groups([600, 500, 900], 22)
    fit = E.build_estimators([name], scheme="hypergeometric")[name].fit_counts(st, None, F)
    Cb = g.multinomial(st.M, st.counts / st.M, size=12).astype(float)
    one, exact = fit.replicates(Cb), refit_replicates(fit, Cb)
    sd = exact.std(axis=0)
    assert np.all(np.abs(one - exact) <= 0.1 * sd), (np.abs(one - exact) / sd).max(axis=0)


def test_group_passes_on_two_threads_equal_one_pass(monkeypatch):
    # from GROUP_THREADS_MIN groups of N_u the fitted-prior BV / MN pass and the CLS solutions run on two
    # threads: the same fit as one pass over every group
    from sampling_lib.estimators import _cls as C
    from sampling_lib.estimators import _linear_groups as LIN

    Nu = np.arange(200, 200 + 70)
    g = np.random.default_rng(23)
    R = np.minimum(Nu, 1 + g.geometric(0.05, Nu.size))
    r = sample_ranks(R, Nu, 10, rng=g, scheme="hypergeometric")
    st = rank_counts(r, 10, n_items=Nu)
    groups = [(int(N), st.n_items == N) for N in np.unique(st.n_items)]
    F = np.stack([metric_values("recall@5", 270), metric_values("ndcg@5", 270)], axis=1)[:5]
    prior = g.dirichlet(np.ones(270))
    assert len(groups) >= LIN.GROUP_THREADS_MIN
    two = LIN.linear_groups_prior_fit("bv", groups, st.ranks, st.counts, 10, F, prior, scheme="hypergeometric")
    w2, X2 = C.cls_groups_fit(groups, st.ranks, st.counts, 10, F, max_rank=5, scheme="hypergeometric")
    monkeypatch.setattr(LIN, "GROUP_THREADS_MIN", 10**9)
    monkeypatch.setattr(C, "GROUP_THREADS_MIN", 10**9)
    C._GROUP_CACHE.clear()
    one = LIN.linear_groups_prior_fit("bv", groups, st.ranks, st.counts, 10, F, prior, scheme="hypergeometric")
    w1, X1 = C.cls_groups_fit(groups, st.ranks, st.counts, 10, F, max_rank=5, scheme="hypergeometric")
    for a, b in ((two.head, one.head), (two.X, one.X), (two.gradient, one.gradient), (w2, w1), (X2, X1)):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-14)


def test_mes_per_user_n_replicates_fall_back_to_the_exact_pooled_kernel(monkeypatch):
    # when the grid surrogate's check fails, every replicate's histogram term is solved on the exact pooled
    # kernel: the same replicates as the surrogate's to its tolerance, and the verdict is kept for the fit
    from sampling_lib.estimators import _mes_pooled as MS

    g, st, F = _three_groups([200, 150, 250], 24)
    Cb = g.multinomial(st.M, st.counts / st.M, size=10).astype(float)
    est = E.build_estimators(["mes"], scheme="hypergeometric")["mes"]
    fit = est.fit_counts(st, None, F)
    sur = fit.replicates(Cb)
    assert fit._mes_cells.verdict is True
    monkeypatch.setattr(MS, "MES_SURROGATE_TOL", -1.0)
    fit = est.fit_counts(st, None, F)
    exact = fit.replicates(Cb)
    assert fit._mes_cells.verdict is False
    sd = exact.std(axis=0)
    assert np.all(np.abs(sur - exact) <= 0.084 * sd)
    np.testing.assert_allclose(fit.replicates(Cb[:3]), exact[:3], rtol=1e-12)   # the next chunk: exact too


def test_cls_per_user_n_with_a_given_prior_is_the_groups_refit():
    # a prior (over 1..max N_u) restricted to each group's ranks: not cached, the same as refitting the groups
    from sampling_lib.estimators._bootstrap import refit_replicates

    g, _, _, st = _small_groups(25)
    F = metric_values("recall@5", 60)[:5, None]
    prior = g.dirichlet(np.ones(60))
    fit = E.build_estimators(["cls"], max_rank=5, prior=prior)["cls"].fit_counts(st, None, F)
    Cb = g.multinomial(st.M, st.counts / st.M, size=5).astype(float)
    np.testing.assert_allclose(fit.replicates(Cb), refit_replicates(fit, Cb), rtol=1e-10, atol=1e-13)
