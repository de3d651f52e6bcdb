"""The stratified evaluation: a proxy's head scored exactly, a uniformly sampled tail.

Every check compares independent computations: the kernel against the enumeration of every tail
sample and against the plain hypergeometric kernel shifted (and scipy); the law of (x, r) and of a
tail ladder against item-level simulation of a proxy order and a seeded random tail order; the
posterior means against direct sums over every rank under the fitted prior (scipy's hypergeometric
pmf as the kernel); the estimate against the realized truth of populations drawn from the
estimator's own family (log-spline priors in the penalty's null space), with and without a ladder;
the batched bootstrap refits against refits from scratch; the grouping rule against a table.
"""
import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from sampling_lib import kernels
from sampling_lib.correct import ESTIMATE_COLUMNS
from sampling_lib.estimators import (StrataFit, logspline_strata_fit, prior_masses, spline_grid, strata_estimate,
                                     strata_groups, strata_pooling_check)
from sampling_lib.estimators import _logspline_strata as LS
from sampling_lib.metrics import METRICS, metric_from_ranks

Z = 4.5       # z bound of the simulation checks (per cell; a few dozen cells per test)


# ----------------------------------------------------------------------------
# the kernel
# ----------------------------------------------------------------------------
def _enumerate(N, m, x, s):
    """P(r | R) for R = 1..N by listing every s-subset of the tail (rows R, columns r = 1..s+1)."""
    T = N - 1 - m
    P = np.zeros((N, s + 1))
    for R in range(1, N + 1):
        G = R - 1 - x                 # tail items above the held-out item: tail items 0..G-1
        if G < 0 or G > T:
            continue                  # x head items above and R - 1 - x tail items: impossible
        subsets = list(itertools.combinations(range(T), s))
        for sub in subsets:
            P[R - 1, sum(i < G for i in sub)] += 1.0 / len(subsets)
    return P


@pytest.mark.parametrize("N, m, x, s", [
    (2, 0, 0, 1), (2, 1, 0, 0), (2, 1, 1, 0), (5, 0, 0, 2), (6, 2, 1, 2), (7, 3, 3, 3), (8, 2, 0, 0),
    (8, 3, 2, 4), (9, 1, 1, 7), (9, 8, 5, 0),
])
def test_kernel_equals_enumeration_of_tail_samples(N, m, x, s):
    R = np.arange(1, N + 1)
    got = np.column_stack([kernels.strata_kernel(R, N, m, x, s, r)[:, 0] for r in range(1, s + 2)])
    np.testing.assert_allclose(got, _enumerate(N, m, x, s), atol=1e-14)
    logk = kernels.strata_kernel(R, N, m, x, s, np.arange(1, s + 2) if s else 1, log=True)
    np.testing.assert_allclose(np.exp(logk), got, atol=1e-14)


def test_kernel_is_the_hypergeometric_kernel_shifted():
    N, m = 60, 12
    T = N - 1 - m
    R = np.arange(1, N + 3)                 # ranks beyond N too: 0
    for x in (0, 5, 12):
        for s in (1, 7, T):
            r = np.arange(1, s + 2)
            K = kernels.strata_kernel(R, N, m, x, s, r)
            H = kernels.hypergeometric(T + 1, s + 1)      # P(r' | R'; N' = T + 1, n' = s + 1)
            ref = np.zeros_like(K)
            inside = (R >= x + 1) & (R <= x + T + 1)
            ref[inside] = H[R[inside] - x - 1]
            np.testing.assert_allclose(K, ref, atol=1e-13)
            np.testing.assert_allclose(K[inside].sum(axis=1), 1.0, atol=1e-12)
    # cells with different designs in one call (columns), against scipy's pmf
    Ns, ms, xs, ss = np.array([30, 60, 90]), np.array([0, 10, 40]), np.array([0, 3, 9]), np.array([5, 20, 0])
    rs = np.array([2, 4, 1])
    K = kernels.strata_kernel(R, Ns, ms, xs, ss, rs)
    for j in range(3):
        T = Ns[j] - 1 - ms[j]
        G = R - 1 - xs[j]
        ok = (G >= 0) & (G <= T)
        ref = np.where(ok, stats.hypergeom.pmf(rs[j] - 1, T, np.clip(G, 0, T), ss[j]), 0.0)
        np.testing.assert_allclose(K[:, j], ref, atol=1e-13)


def test_kernel_of_a_tail_beyond_the_factorial_table():
    """T above LOG_FACTORIAL_MAX takes log-Beta functions: against the row form of the plain kernel."""
    T, m, x, s = kernels.LOG_FACTORIAL_MAX + 5000, 30, 7, 40
    N = T + 1 + m
    R = np.array([x + 1, x + 2, 1000, 654_321, x + T + 1])
    K = kernels.strata_kernel(R, N, m, x, s, np.arange(1, s + 2))
    ref = np.exp(kernels.log_kernel_rows(T + 1, s + 1, R - x, "hypergeometric"))
    np.testing.assert_allclose(K, ref, rtol=1e-7, atol=1e-300)


# ----------------------------------------------------------------------------
# the law against item-level simulation
# ----------------------------------------------------------------------------
def _simulate_users(R, N, m, ladder, n_sim, rng, proxy):
    """(x, final s, r) of n_sim users with global rank R: negatives 0..C-1 of which 0..R-2 beat the
    held-out item; the proxy orders them (uniformly at random, or the beaters first), the head is its
    first m; the tail is sampled along a random order of its items, nested prefixes of sizes ``ladder``
    (grown while no sampled tail item beats the held-out item)."""
    C = N - 1
    above = np.arange(C) < R - 1
    keys = rng.random((n_sim, C))
    if proxy == "concentrated":
        keys = keys - above          # the beaters first, in random order
    order = np.argsort(keys, axis=1)
    lab = above[order]
    x = lab[:, :m].sum(axis=1)
    tail = lab[:, m:]
    tail = np.take_along_axis(tail, np.argsort(rng.random(tail.shape), axis=1), axis=1)
    cum = np.cumsum(tail, axis=1)
    counts = np.stack([cum[:, s - 1] if s else np.zeros(n_sim, int) for s in ladder], axis=1)
    stop = np.where((counts > 0).any(axis=1), np.argmax(counts > 0, axis=1), len(ladder) - 1)
    s_fin = np.asarray(ladder)[stop]
    r = 1 + counts[np.arange(n_sim), stop]
    return x, s_fin, r


def _check_frequencies(keys, expected, n_sim):
    """Every outcome's frequency within Z standard errors of its probability; none outside the support."""
    assert abs(sum(expected.values()) - 1.0) < 1e-10
    uniq, cnt = np.unique(keys, axis=0, return_counts=True)
    seen = {tuple(int(v) for v in k): c / n_sim for k, c in zip(uniq, cnt)}
    for k in set(seen) | set(expected):
        p, f = min(expected.get(k, 0.0), 1.0), seen.get(k, 0.0)
        assert abs(f - p) <= Z * np.sqrt(p * (1 - p) / n_sim) + 1e-12, (k, f, p)


@pytest.mark.parametrize("proxy", ["random", "concentrated"])
@pytest.mark.parametrize("R", [1, 6, 17, 40])
def test_law_of_head_count_and_tail_rank_against_simulation(proxy, R):
    N, m, s, n_sim = 40, 8, 6, 40_000
    rng = np.random.default_rng(R)
    x, _, r = _simulate_users(R, N, m, [s], n_sim, rng, proxy)
    C = N - 1
    if proxy == "random":
        px = {k: stats.hypergeom.pmf(k, C, R - 1, m) for k in range(m + 1)}     # head = random m negatives
    else:
        px = {min(R - 1, m): 1.0}
    exp = {}
    for k, pk in px.items():
        if pk <= 0:
            continue
        col = kernels.strata_kernel([R], N, m, k, s, np.arange(1, s + 2))[0]
        for j, p in enumerate(col):
            if p > 0:
                exp[(k, j + 1)] = pk * p
    _check_frequencies(np.stack([x, r], axis=1), exp, n_sim)


@pytest.mark.parametrize("R", [2, 9, 30])
def test_tail_ladder_law_factorizes_through_the_final_kernel(R):
    """A ladder (s grows while no sampled tail item beats the held-out item) stops at (s_k, r) with
    probability P(r | R; s_k) times a factor free of R: the chance that the r - 1 beaters among the
    first s_k sampled lie beyond the previous rung, C(s_k - s_(k-1), r - 1) / C(s_k, r - 1).
    So the likelihood is the kernel at the final (s, r): the ladder is ignorable."""
    N, m, ladder, n_sim = 60, 10, [4, 8, 16, 32], 40_000
    rng = np.random.default_rng(100 + R)
    x, s_fin, r = _simulate_users(R, N, m, ladder, n_sim, rng, "random")
    C = N - 1
    exp = {}
    for k in range(m + 1):
        pk = stats.hypergeom.pmf(k, C, R - 1, m)
        if pk <= 0:
            continue
        for i, s in enumerate(ladder):
            col = kernels.strata_kernel([R], N, m, k, s, np.arange(1, s + 2))[0]
            for rr in range(1, s + 2):
                if rr == 1 and i < len(ladder) - 1:
                    continue                    # r = 1 below the top rung: the ladder goes on
                factor = 1.0 if (i == 0 or rr == 1) else math.comb(s - ladder[i - 1], rr - 1) / math.comb(s, rr - 1)
                p = pk * col[rr - 1] * factor
                if p > 0:
                    exp[(k, s, rr)] = p
    _check_frequencies(np.stack([x, s_fin, r], axis=1), exp, n_sim)


# ----------------------------------------------------------------------------
# posterior means against direct sums
# ----------------------------------------------------------------------------
def _scipy_kernel(R, N, m, x, s, r):
    T = N - 1 - m
    G = np.asarray(R) - 1 - x
    ok = (G >= 0) & (G <= T)
    return np.where(ok, stats.hypergeom.pmf(r - 1, T, np.clip(G, 0, T), s), 0.0)


def _small_population(M, rng, N=90, m=15, s=8):
    R = np.minimum(N, 1 + rng.geometric(0.08, M))
    x = rng.hypergeometric(R - 1, N - 1 - (R - 1), m)
    Y = R - 1 - x
    r = 1 + rng.hypergeometric(Y, N - 1 - m - Y, s)
    return R, x, r


@pytest.mark.parametrize("coordinate", ["rank", "tail"])
@pytest.mark.parametrize("N", [90, 700])
def test_posterior_means_equal_direct_sums_under_the_fitted_prior(coordinate, N):
    """E[F(R) | cell] from the fit against sum_R g(R) P(r | R) F(R) / sum_R g(R) P(r | R) over every
    rank, with the fitted prior expanded to all ranks (``fit.prior``) and scipy's pmf as the kernel.
    N = 90: the grid is exact (tight tolerance); N = 700: ranks beyond 256 are binned and the fit
    evaluates the kernel at each bin's representative rank (the grid's TV tolerance)."""
    rng = np.random.default_rng(N)
    m, s = 15, 8
    _, x, r = _small_population(600, rng, N=N, m=m, s=s)
    mets = ["recall@5", "ndcg@10", "ap@10"]
    fit = logspline_strata_fit(N, m, x, s, r, k_max=10, min_group_users=60, coordinate=coordinate)
    assert len(fit.groups) >= 2
    got = fit.cell_means(mets)
    rtol = 1e-9 if N <= 256 else 2e-2
    for gr in fit.groups:
        prior = gr.fit.prior                       # over the coordinate's values 1..grid N
        v = np.arange(1, prior.size + 1)
        for c in gr.cells:
            shift = 0 if coordinate == "rank" else fit.above[c]
            R = v + shift
            like = _scipy_kernel(R, fit.n_items[c], fit.heads[c], fit.above[c], fit.tail_sizes[c], fit.ranks[c])
            post = prior * like / np.sum(prior * like)
            ref = [post @ METRICS[name](R, K) for name, K in (("recall", 5), ("ndcg", 10), ("ap", 10))]
            np.testing.assert_allclose(got[c], ref, rtol=rtol, atol=1e-12 if N <= 256 else 1e-3)
    # the cells with x >= k_max are 0, and the estimate is the users' mean of the cells' means
    assert np.all(got[fit.group < 0] == 0)
    np.testing.assert_allclose(fit.estimate(mets), fit.counts @ got / fit.counts.sum(), rtol=1e-12)


def test_narrow_support_inside_wide_bins_takes_bin_averages():
    """A cell whose possible ranks (here 10: a tail sampled nearly whole) hold no bin's representative
    rank gets the kernel averaged over each bin's ranks (else its likelihood would be 0); the others keep
    the kernel at the representative ranks."""
    N, s = 3000, 2990
    grid = spline_grid(N, 2, 0.4, 256, "hypergeometric")       # bins cut for n = 2: wide
    r = np.array([2000, 300])
    at_mid = kernels.strata_kernel(grid.mid, N, 0, 0, s, r)
    assert not at_mid[:, 0].any() and at_mid[:, 1].any()
    K = LS._kernel_columns(grid, np.full(2, N), np.zeros(2, int), np.zeros(2, int), np.full(2, s), r)
    every = kernels.strata_kernel(np.arange(1, N + 1), N, 0, 0, s, r[0])[:, 0]
    np.testing.assert_allclose(K[:, 0] * (grid.hi - grid.lo + 1), np.add.reduceat(every, grid.lo - 1), atol=1e-15)
    np.testing.assert_array_equal(K[:, 1], at_mid[:, 1])


def test_users_ranked_in_full_are_exact():
    """T_u = 0 (the head holds every negative): R = x + 1 is known, the estimate is the exact mean, and
    the bootstrap replicates are the naive ones (the posterior is a point mass)."""
    rng = np.random.default_rng(3)
    N, M = 30, 300
    x = rng.integers(0, N - 1, M)
    t = strata_estimate(N, N - 1, x, 0, 1, metrics=["recall@5", "ndcg@10"], n_boot=50, rng=0)
    truth = [metric_from_ranks(x + 1, "recall@5"), metric_from_ranks(x + 1, "ndcg@10")]
    np.testing.assert_allclose(t["estimate"], truth, rtol=1e-12)
    np.testing.assert_allclose(t["naive"], truth, rtol=1e-12)
    np.testing.assert_allclose(t[["ci_low", "ci_high"]].to_numpy(), t[["naive_ci_low", "naive_ci_high"]].to_numpy(),
                               rtol=1e-9)
    assert not t["below_resolution"].any()
    # full ranking's half-width: z sd(F) / sqrt(M) with the population variance of the known ranks
    F = np.stack([METRICS["recall"](x + 1, 5), METRICS["ndcg"](x + 1, 10)], axis=1)
    np.testing.assert_allclose(t["full_halfwidth"], stats.norm.isf(0.025) * F.std(axis=0) / np.sqrt(M), rtol=1e-9)


# ----------------------------------------------------------------------------
# consistency in the estimator's own family, with and without a ladder
# ----------------------------------------------------------------------------
N_F, M_F, S_F = 250, 20, 15        # N <= 256: the grid is exact
T_F = N_F - 1 - M_F


def _family_pmf(Ng, slope):
    """A log-spline prior in the penalty's null space (coefficients linear in their index)."""
    grid = spline_grid(Ng, S_F + 1, 0.4, 256, "hypergeometric")
    return prior_masses(slope * np.arange(grid.B.shape[1]), grid)


def _family_population(M, rng, coordinate, slope=-0.4, ladder=None):
    """Head counts x in {0, 1, 2} and 15 >= k_max; R | x from one family prior per x, on the global
    rank restricted to x + 1..x + T + 1 (``"rank"``) or on the tail rank R - x (``"tail"``); tail
    ranks at s = S_F, or along a ladder grown while r = 1 (nested prefixes of a random order)."""
    x = rng.choice([0, 1, 2, 15], size=M, p=[0.5, 0.25, 0.15, 0.1])
    g = _family_pmf(N_F if coordinate == "rank" else T_F + 1, slope)
    v = np.arange(1, T_F + 2)
    R = np.empty(M, dtype=np.int64)
    for k in np.unique(x):
        sel = np.flatnonzero(x == k)
        p = g[k + v - 1] if coordinate == "rank" else g
        R[sel] = k + rng.choice(v, size=sel.size, p=p / p.sum())
    Y = R - 1 - x
    if ladder is None:
        return R, x, np.full(M, S_F), 1 + rng.hypergeometric(Y, T_F - Y, S_F)
    # nested prefixes: the count in the first s_k sampled tail items, grown while it is 0
    s_fin, r = np.full(M, ladder[-1]), np.ones(M, dtype=np.int64)
    prev_s, prev_c, going = 0, np.zeros(M, dtype=np.int64), np.ones(M, dtype=bool)
    for s in ladder:
        # the next s - prev_s draws from the T - prev_s unsampled tail items, Y - prev_c of them beaters
        add = rng.hypergeometric(Y - prev_c, (T_F - prev_s) - (Y - prev_c), s - prev_s)
        cnt = prev_c + add
        hit = going & (cnt > 0)
        s_fin[hit], r[hit] = s, 1 + cnt[hit]
        going &= ~hit
        prev_s, prev_c = s, cnt
    return R, x, s_fin, r


@pytest.mark.parametrize("coordinate", ["rank", "tail"])
@pytest.mark.parametrize("ladder", [None, (4, 8, 16, 40)], ids=["fixed", "ladder"])
def test_estimate_is_unbiased_in_its_own_family(coordinate, ladder):
    """Mean error (estimate - realized truth) over repeated populations within 4 Monte Carlo standard
    errors, for a population drawn from the estimator's family (one prior per x; groups of one x)."""
    rng = np.random.default_rng(11)
    mets = ["recall@10", "ndcg@10", "recall@3"]
    errs = []
    for _ in range(20):
        R, x, s, r = _family_population(1200, rng, coordinate, ladder=ladder)
        fit = logspline_strata_fit(N_F, M_F, x, s, r, k_max=10, min_group_users=100, coordinate=coordinate)
        assert [(g.above_low, g.above_high) for g in fit.groups] == [(0, 0), (1, 1), (2, 9)]
        errs.append(fit.estimate(mets) - np.array([metric_from_ranks(R, mm) for mm in mets]))
    e = np.array(errs)
    mcse = e.std(axis=0, ddof=1) / np.sqrt(len(e))
    assert np.all(np.abs(e.mean(axis=0)) <= 4 * mcse), (e.mean(axis=0), mcse)


# ----------------------------------------------------------------------------
# the table, the bootstrap, the sensitivity rule
# ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def family_table():
    rng = np.random.default_rng(5)
    R, x, s, r = _family_population(1000, rng, "rank")
    Nu = np.full(x.size, N_F)
    Nu[:10] = N_F - 1                       # per-user N_u: the N column is <NA>
    t = strata_estimate(Nu, M_F, x, s, r, metrics=["recall@10", "ndcg@5"], n_boot=60, rng=1, min_group_users=100)
    return R, x, s, r, Nu, t


def test_table_schema_and_columns(family_table):
    R, x, s, r, Nu, t = family_table
    assert tuple(t.columns) == ESTIMATE_COLUMNS
    assert (t["method"] == "logspline (stratified)").all() and (t["scheme"] == "hypergeometric").all()
    assert t["N"].isna().all() and (t["n"] == 1 + M_F + S_F).all() and (t["users"] == x.size).all()
    assert t["bound_low"].isna().all() and t["bound_high"].isna().all()
    assert (t["ci_low"] <= t["estimate"]).all() and (t["estimate"] <= t["ci_high"]).all()
    np.testing.assert_allclose(t["precision_ratio"], (t["ci_high"] - t["ci_low"]) / (2 * t["full_halfwidth"]))
    naive = [np.mean(METRICS["recall"](x + r, 10)), np.mean(METRICS["ndcg"](x + r, 5))]
    np.testing.assert_allclose(t["naive"], naive, rtol=1e-12)
    # T / s = 229 / 15 > 10: both cutoffs are below the tail's resolution; the interval holds the band
    assert t["below_resolution"].all()
    assert (t["ci_low"] <= t["sensitivity_low"]).all() and (t["sensitivity_high"] <= t["ci_high"]).all()
    t0 = strata_estimate(Nu, M_F, x, s, r, metrics=["recall@10", "ndcg@5"], n_boot=0, min_group_users=100)
    assert t0[["se", "ci_low", "ci_high", "naive_ci_low", "naive_ci_high"]].isna().all().all()
    np.testing.assert_allclose(t0["estimate"], t["estimate"], rtol=1e-12)


def test_below_resolution_rule():
    """K is below resolution when K < x + T/s for a user at r = 1 with x < K (users ranked in full never count)."""
    fit = logspline_strata_fit([100, 100, 100], [10, 10, 99], [0, 4, 2], [40, 40, 0], [1, 1, 1], [50, 50, 50],
                               k_max=10, min_group_users=1)
    # w = x + T/s = 0 + 89/40 = 2.225 and 4 + 2.225; the third user is ranked in full (T = 0)
    assert LS._below_resolution(fit, [1, 2, 3, 4, 5, 6, 7, 10]).tolist() == [True, True, False, False, True, True,
                                                                            False, False]
    fit = logspline_strata_fit(100, 10, [0, 3], [0, 10], [1, 2], [50, 50], k_max=10, min_group_users=1)
    assert LS._below_resolution(fit, [3, 4, 10]).tolist() == [True, True, True]    # s = 0: no resolution


def test_bootstrap_replicates_equal_refits_from_scratch(family_table):
    """The batched refits (bootstrap_core, one per group) against logspline_strata_fit on the resampled
    users (same groups) for a few multinomial draws of the cells."""
    R, x, s, r, Nu, _ = family_table
    fit = logspline_strata_fit(Nu, M_F, x, s, r, k_max=10, min_group_users=100)
    assert fit.coordinate == "tail"                 # the default
    parsed, F = fit.metric_matrix(["recall@10", "ndcg@5"])
    rng = np.random.default_rng(9)
    Cb = rng.multinomial(int(fit.users), fit.counts / fit.users, size=3)
    reps = LS._replicates(fit, Cb, F, LS._hessians(fit))
    ranges = [(g.above_low, g.above_high) for g in fit.groups]
    for b in range(3):
        keep = Cb[b] > 0
        cells = (fit.n_items[keep], fit.heads[keep], fit.above[keep], fit.tail_sizes[keep], fit.ranks[keep],
                 Cb[b][keep].astype(float))
        ref = LS._fit_cells(*cells, 10, 100, fit.penalty, fit.knot_spacing, 256, fit.coordinate, ranges=ranges)
        np.testing.assert_allclose(reps[b], ref.estimate(parsed), rtol=1e-4, atol=1e-6)


def test_users_beyond_k_max_count_as_zero():
    rng = np.random.default_rng(2)
    R, x, s, r = _family_population(800, rng, "rank")
    keep = x < 10
    a = logspline_strata_fit(N_F, M_F, x[keep], s[keep], r[keep], k_max=10, min_group_users=100)
    b = logspline_strata_fit(N_F, M_F, x, s, r, k_max=10, min_group_users=100)
    mets = ["recall@10", "ap@10"]
    np.testing.assert_allclose(b.estimate(mets) * b.users, a.estimate(mets) * a.users, rtol=1e-9)
    assert b.zero_users == (~keep).sum()
    with pytest.raises(ValueError, match="k_max=10"):
        b.estimate(["recall@20"])


def test_pooling_check_rejects_one_prior_when_hard_users_differ():
    """Users with head hits have much worse tails: the grouped fit beats every simulated pooled data set."""
    rng = np.random.default_rng(4)
    M, N, m, s = 600, 200, 20, 20
    T = N - 1 - m
    x = np.repeat([0, 1], M // 2)
    Y = np.where(x == 0, rng.geometric(0.3, M) - 1, rng.integers(40, T, M))    # easy vs hard tails
    r = 1 + rng.hypergeometric(Y, T - Y, s)
    chk = strata_pooling_check(N, m, x, s, r, k_max=10, min_group_users=100, n_sim=9, rng=0)
    assert chk.groups == 2 and chk.statistic > chk.null_statistics.max() and chk.pvalue == pytest.approx(0.1)


# ----------------------------------------------------------------------------
# the grouping rule and bad input
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("per_x, k_max, min_users, groups", [
    # the rule: close a group at the first x where it reaches min_users; the rest joins the last group
    ([250, 120, 90, 30, 5], 5, 200, [[0, 0], [1, 4]]),
    ([250, 120, 90, 30, 5], 8, 100, [[0, 0], [1, 1], [2, 7]]),
    ([300, 250, 260], 3, 200, [[0, 0], [1, 1], [2, 2]]),
    ([50, 60, 70], 3, 200, [[0, 2]]),                 # too few users: one group
    ([0, 0, 300, 0, 10], 6, 200, [[0, 5]]),
    ([0, 0, 300, 0, 210], 6, 200, [[0, 2], [3, 5]]),
    ([200], 1, 200, [[0, 0]]),
])
def test_grouping_rule(per_x, k_max, min_users, groups):
    x = np.repeat(np.arange(len(per_x)), per_x)
    got = strata_groups(np.r_[x, [k_max] * 7], k_max, min_users)      # x >= k_max: in no group
    assert got.tolist() == groups
    np.testing.assert_array_equal(strata_groups(np.arange(len(per_x)), k_max, min_users, counts=per_x), got)
    sizes = [sum(per_x[lo:hi + 1]) for lo, hi in groups]
    assert len(groups) == 1 or all(n >= min_users for n in sizes)
    assert groups[0][0] == 0 and groups[-1][1] == k_max - 1
    assert all(b[0] == a[1] + 1 for a, b in zip(groups, groups[1:]))


def test_fit_uses_the_grouping_rule():
    x = np.repeat([0, 1, 2, 3, 30], [250, 120, 90, 30, 40])
    fit = logspline_strata_fit(400, 40, x, 30, 1, k_max=10, coordinate="rank")
    assert [(g.above_low, g.above_high, g.users, g.support_low) for g in fit.groups] == [
        (0, 0, 250.0, 1), (1, 9, 240.0, 2)]        # a prior on global ranks starts at 1 + the smallest x
    fit = logspline_strata_fit(400, 40, x, 30, 1, k_max=10)
    assert [(g.above_low, g.above_high, g.support_low) for g in fit.groups] == [(0, 0, 1), (1, 9, 1)]
    assert isinstance(fit, StrataFit) and fit.zero_users == 40
    assert strata_groups([30, 40], 10).shape == (0, 2)


@pytest.mark.parametrize("args, match", [
    (dict(above=[11]), r"above must lie in 0\.\.heads; got above=11, heads=10"),
    (dict(above=[-1]), "above must be >= 0"),
    (dict(ranks=[22]), r"ranks must lie in 1\.\.tail_sizes \+ 1; got ranks=22, tail_sizes=20"),
    (dict(ranks=[0]), "ranks must be >= 1"),
    (dict(tail_sizes=[90]), r"tail_sizes must lie in 0\.\.n_items - 1 - heads"),
    (dict(tail_sizes=[-2]), "tail_sizes must be >= 0"),
    (dict(heads=[100]), r"heads must lie in 0\.\.n_items - 1"),
    (dict(heads=[-1]), "heads must be >= 0"),
    (dict(n_items=[1]), "n_items must be >= 2"),
    (dict(ranks=[1, 2], tail_sizes=[20, 20, 20]), "must have one entry per user"),
    (dict(ranks=[1.5]), "ranks must hold whole numbers"),
])
def test_bad_input_names_the_argument(args, match):
    base = dict(n_items=[100], heads=[10], above=[2], tail_sizes=[20], ranks=[3])
    a = {**base, **args}
    with pytest.raises(ValueError, match=match):
        kernels.strata_kernel([1, 2], **a)
    with pytest.raises(ValueError, match=match):
        logspline_strata_fit(**a, k_max=10)
    with pytest.raises(ValueError, match=match):
        strata_estimate(**a, metrics="recall@10", n_boot=0)


def test_bad_options_name_the_argument():
    a = ([100] * 3, 10, [0, 1, 2], 20, [1, 2, 3])
    with pytest.raises(ValueError, match="k_max must be >= 1"):
        logspline_strata_fit(*a, k_max=0)
    with pytest.raises(ValueError, match="min_group_users must be >= 1"):
        logspline_strata_fit(*a, k_max=5, min_group_users=0)
    with pytest.raises(ValueError, match="coordinate must be one of"):
        logspline_strata_fit(*a, k_max=5, coordinate="global")
    with pytest.raises(ValueError, match="counts must be finite and >= 0"):
        logspline_strata_fit(*a, [1, -1, 1], k_max=5)
    with pytest.raises(ValueError, match="confidence_level"):
        strata_estimate(*a, metrics="recall@5", n_boot=0, confidence_level=1.5)
    with pytest.raises(ValueError, match="n_sim must be >= 1"):
        strata_pooling_check(*a, k_max=5, n_sim=0)
    with pytest.raises(ValueError, match="R must hold global ranks >= 1"):
        kernels.strata_kernel([0, 1], *a)


def _lastfm_like():
    """Cells shaped like Last.fm's ALS with an item-KNN head of 100 and a tail ladder 400 -> 1,600 (1,884
    users): most users settled by the head or at tail rank 1 at the ladder's top, 12 with a tail item
    above, one or three per head count."""
    spec = [(11, 0, 1, 1403), (0, 1600, 1, 109), (1, 1600, 1, 85), (2, 1600, 1, 40), (3, 1600, 1, 38),
            (4, 1600, 1, 27), (5, 1600, 1, 34), (6, 1600, 1, 34), (7, 1600, 1, 27), (8, 1600, 1, 29),
            (9, 1600, 1, 19), (10, 0, 1, 27), (8, 1600, 2, 3), (9, 1600, 2, 1), (6, 800, 2, 1), (9, 800, 2, 1),
            (5, 800, 2, 1), (6, 1600, 2, 1), (5, 1600, 2, 1), (2, 1600, 2, 1), (7, 800, 2, 1), (4, 400, 2, 1)]
    x, s, r = (np.repeat([c[k] for c in spec], [c[3] for c in spec]) for k in range(3))
    return 17583 + np.arange(x.size) % 49, np.full(x.size, 100), x, s, r


def test_a_group_resampled_without_a_tail_item_above_takes_the_limit_prior():
    """A replicate in which a group's users all sit at tail rank 1 (the resample left out its one user with a
    tail item above) has no penalized maximum: under all prior mass at tail rank 1 every user's likelihood is
    largest, and a linear trend of the coefficients (the penalty does not see it) approaches that without end.
    Newton hit its iteration limit on a third of such replicates (a ConvergenceWarning). The replicate's prior
    is now that limit: no warning, and its estimate is the closed form, each user at global rank 1 + x_u; so is
    the point fit of a group whose users are all at tail rank 1."""
    from sampling_lib.exceptions import ConvergenceWarning
    from sampling_lib.metrics import metric_values

    cells = _lastfm_like()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        t = strata_estimate(*cells, metrics=["recall@10", "ndcg@10"], n_boot=64, rng=0)
    assert (t.ci_low < t.estimate).all() and (t.estimate < t.ci_high).all()
    fit = logspline_strata_fit(*cells, k_max=10)
    parsed, F = fit.metric_matrix(["recall@10", "ndcg@10"])
    limit = np.where(fit.ranks == 1, fit.counts, 0)[None]          # every group without its users at r = 2
    assert 0 < limit.sum() < fit.users
    rep = LS._replicates(fit, limit, F, LS._hessians(fit))
    inside = fit.above < 10                                            # users the head settles count 0
    closed = [limit[0][inside] @ metric_values(m, 12)[fit.above[inside]] / fit.users for m in ("recall@10", "ndcg@10")]
    np.testing.assert_allclose(rep[0], closed, rtol=1e-12)
    # the same for the point fit of data at the limit (every user at tail rank 1): the closed form, no warning
    at = cells[4] == 1
    x = cells[2][at]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = strata_estimate(*(a[at] for a in cells), metrics=["recall@10", "ndcg@10"], n_boot=64, rng=0)
    closed = [metric_values(m, 12)[x[x < 10]].sum() / x.size for m in ("recall@10", "ndcg@10")]
    np.testing.assert_allclose(t.estimate, closed, rtol=1e-12)
    assert (t.ci_low <= t.estimate).all() and (t.estimate <= t.ci_high).all()
