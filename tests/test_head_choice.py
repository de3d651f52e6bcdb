"""A smaller head priced from a pilot's larger one: the known tail block (estimators' ``known_tail``), the pilot's
cells seen as a smaller head's (design.smaller_head_cells), the planner's head sizes, and evaluate's planned
route running the chosen head.

The known-tail likelihood is checked against scipy's hypergeometric law and a brute-force posterior on a
small catalogue (every value an exact grid point), the cells against a per-user loop, the estimate against
the population's truth at full resolution, and the route against the test's own bookkeeping.
"""
import numpy as np
import pytest
from scipy import stats

from sampling_lib import evaluate
from sampling_lib.design import head_candidates, plan_strata, smaller_head_cells
from sampling_lib.estimators import logspline_strata_fit, strata_estimate
from sampling_lib.metrics import metric_matrix, parse_metrics
from test_evaluate import Counter, _population

MET = ["recall@10", "ndcg@10"]


def _head_population(N, m, M, s_of, rng, front=6.0, front_items=60):
    """Users whose items above the held-out one sit more often among the proxy's first ``front_items``
    (weight ``front``): each user's head flags (proxy order), the pilot's cells at head m with a tail sample
    of s_of(x) items, and the true global ranks."""
    C = N - 1
    w = np.where(np.arange(C) < front_items, front, 1.0)
    w /= w.sum()
    flags, x, s, r, R = [], [], [], [], []
    for _ in range(M):
        G = min(int(rng.geometric(0.08)) - 1, C)
        above = np.zeros(C, bool)
        above[rng.choice(C, size=G, replace=False, p=w)] = True
        xu = int(above[:m].sum())
        su = s_of(xu)
        tail = above[m:]
        flags.append(above[:m])
        x.append(xu), s.append(su), R.append(G + 1)
        r.append(1 + int(tail[rng.choice(tail.size, size=su, replace=False)].sum()))
    return np.concatenate(flags), np.array(x), np.array(s), np.array(r), np.array(R)


def test_smaller_head_cells_match_a_per_user_loop():
    rng = np.random.default_rng(0)
    M = 200
    m = rng.integers(0, 12, M)                 # heads of several sizes, some empty
    flags = rng.random(int(m.sum())) < 0.3
    ptr = np.r_[0, np.cumsum(m)]
    x = np.array([flags[ptr[u]:ptr[u + 1]].sum() for u in range(M)])
    N = np.full(M, 500)
    s = np.where(x < 10, 30, 0)
    r = 1 + rng.integers(0, 3, M) * (s > 0)
    for h in (1, 5, 11, 40):
        got = smaller_head_cells((N, m, x, s, r), flags, h)
        for u in range(M):
            hu = min(h, m[u])
            xh = int(flags[ptr[u]:ptr[u] + hu].sum())
            assert [int(a[u]) for a in got] == [500, hu, xh, s[u], r[u], m[u] - hu, x[u] - xh]
    with pytest.raises(ValueError, match="head_above must hold one entry per head item"):
        smaller_head_cells((N, m, x, s, r), flags[:-1], 3)
    with pytest.raises(ValueError, match="head_above must sum to each user's head count"):
        smaller_head_cells((N, m, x + (m > 0), s, r), flags, 3)
    assert head_candidates(100) == [100, 50, 25] and head_candidates(1) == [1]


def test_an_empty_known_tail_is_the_plain_fit():
    rng = np.random.default_rng(1)
    flags, x, s, r, _ = _head_population(300, 20, 400, lambda xu: 30 if xu < 10 else 0, rng)
    a = logspline_strata_fit(300, 20, x, s, r, k_max=10)
    b = logspline_strata_fit(300, 20, x, s, r, k_max=10, known_tail=(0, 0))
    assert np.array_equal(a.K, b.K)
    assert np.array_equal(a.estimate(MET), b.estimate(MET))


def test_the_known_tail_kernel_is_the_rest_s_hypergeometric_law_shifted_by_the_known_items_above():
    """On a catalogue of 200 (every tail rank an exact grid point): P(r | c) with c the tail rank of the
    smaller head is the hypergeometric law of r - 1 among s drawn from the T - k other items, of which
    c - 1 - y rank above; 0 for c <= y."""
    N, m, k, y, s = 200, 5, 15, 4, 30
    T = N - 1 - m - k                                   # the sampled rest
    fit = logspline_strata_fit([N] * 3, [m] * 3, [1, 1, 1], [s] * 3, [1, 3, 6], known_tail=([k] * 3, [y] * 3),
                               k_max=10)
    c = fit.grid.mid
    assert np.array_equal(c, np.arange(1, N - m + 1))  # exact: one grid point per tail rank of the head m
    for j in range(fit.counts.size):
        r = int(fit.ranks[j])
        want = np.where(c > y, stats.hypergeom.pmf(r - 1, T, np.clip(c - 1 - y, 0, T), s), 0.0)
        assert np.allclose(fit.K[:, j], want, atol=1e-12, rtol=1e-9)


def test_the_known_tail_posterior_means_are_the_brute_force_ones():
    """Each cell's posterior mean of F(x' + c) under its group's fitted prior against the sum over every
    tail rank c of prior x likelihood x metric (scipy's law), on a small catalogue."""
    rng = np.random.default_rng(2)
    N, m = 120, 24
    flags, x, s, r, _ = _head_population(N, m, 1500, lambda xu: 25 if xu < 10 else 0, rng, front_items=30)
    N_, mh, xh, s_, r_, k, y = smaller_head_cells((np.full(x.size, N), np.full(x.size, m), x, s, r), flags, 6)
    fit = logspline_strata_fit(N_, mh, xh, s_, r_, known_tail=(k, y), k_max=10)
    parsed = parse_metrics(MET)
    F = metric_matrix(parsed, N)
    got = fit.cell_means(MET)
    c = np.arange(1, N - 6 + 1)
    for j in range(fit.counts.size):
        if fit.group[j] < 0:
            assert np.all(got[j] == 0)
            continue
        g = fit.groups[fit.group[j]].fit.prior_grid.cells
        kj, yj = int(fit.known[0][j]), int(fit.known[1][j])
        T = N - 1 - 6 - kj
        lik = np.where(c > yj, stats.hypergeom.pmf(int(fit.ranks[j]) - 1, T, np.clip(c - 1 - yj, 0, T),
                                                   int(fit.tail_sizes[j])), 0.0)
        Rg = np.minimum(int(fit.above[j]) + c, N) - 1
        want = (g * lik) @ F[Rg] / (g @ lik)
        assert np.allclose(got[j], want, rtol=1e-8, atol=1e-12)


def test_at_full_resolution_every_smaller_head_estimates_the_truth():
    """A tail sample of 300 of 359 items: the estimate of the pilot's cells seen as heads of 40, 20, 10 and 5
    agree with the population's truth within 3 of their bootstrap standard errors (and 0.02); the naive
    metric (the rank among the items scored) is the same whichever head the cells are seen as."""
    rng = np.random.default_rng(3)
    N, m, M = 400, 40, 3000
    flags, x, s, r, R = _head_population(N, m, M, lambda xu: 300 if xu < 10 else 0, rng)
    truth = np.mean(R <= 10)
    naive = set()
    for h in (40, 20, 10, 5):
        N_, mh, xh, s_, r_, k, y = smaller_head_cells((np.full(M, N), np.full(M, m), x, s, r), flags, h)
        t = strata_estimate(N_, mh, xh, s_, r_, metrics="recall@10", n_boot=200, rng=1, known_tail=(k, y))
        est, se = float(t.estimate.iloc[0]), float(t.se.iloc[0])
        assert abs(est - truth) < max(3 * se, 0.02), (h, est, truth, se)
        naive.add(float(t.naive.iloc[0]))
    assert len(naive) == 1


def test_known_tail_bad_input_names_itself():
    with pytest.raises(ValueError, match="known_tail must have 0 <= y <= k <= T"):
        logspline_strata_fit(100, 10, 1, 20, 1, known_tail=(80, 0), k_max=10)     # s > T - k
    with pytest.raises(ValueError, match="known_tail must have 0 <= y <= k <= T"):
        logspline_strata_fit(100, 10, 1, 20, 1, known_tail=(5, 6), k_max=10)      # y > k
    with pytest.raises(ValueError, match="known_tail applies with coordinate='tail'"):
        logspline_strata_fit(100, 10, 1, 20, 1, known_tail=(5, 1), k_max=10, coordinate="rank")
    with pytest.raises(TypeError, match="known_tail must be a pair"):
        logspline_strata_fit(100, 10, 1, 20, 1, known_tail=5, k_max=10)
    with pytest.raises(ValueError, match=r"known_tail\[0\] \(k\) must be a scalar or hold one entry per user \(3\)"):
        logspline_strata_fit([100] * 3, 10, 1, 20, 1, known_tail=([5, 5], 0), k_max=10)
    with pytest.raises(TypeError, match=r"known_tail\[1\] \(y\) must hold integers"):
        logspline_strata_fit(100, 10, 1, 20, 1, known_tail=(5, 0.5), k_max=10)
    with pytest.raises(ValueError, match="head_above must give each model's head outcomes"):
        plan_strata({"a": ([100] * 5, [10] * 5, [0] * 5, [20] * 5, [1] * 5)}, n=20, tail_n=20, heads=[10, 5])
    with pytest.raises(ValueError, match="heads applies to a pilot's own cells"):
        plan_strata({"a": ([100] * 5, [5] * 5, [0] * 5, [20] * 5, [1] * 5, [5] * 5, [0] * 5)}, n=20, tail_n=20,
                    heads=[5])


def _truth(model, held, hist, N):
    R = []
    for u, h in held.items():
        cand = np.setdiff1d(np.arange(N), hist.get(u, []))
        sc = np.asarray(model([u] * cand.size, cand), dtype=float)
        R.append(1 + int(np.sum(sc[cand != h] >= sc[cand == h][0])))
    R = np.asarray(R)
    return {"recall@10": np.mean(R <= 10), "ndcg@10": np.mean(np.where(R <= 10, 1 / np.log2(R + 1), 0.0))}


def test_a_proxy_that_knows_the_model_needs_no_more_head_than_the_metrics_cutoff():
    """Model B's own scores as its proxy, pilot head 40 of 4,000 items: a head of 10 already holds every item
    above the held-out one for the users a top-10 metric counts (the others have x' = 10, F = 0), so the
    plan picks the smallest head priced (10); the other users run it, their pairs are fewer than with the
    pilot's head, no pair is scored twice, the cost reported is the wrapper's count, and the interval (the
    two parts' estimates combined) covers B's full-ranking metrics (computed here from every candidate)."""
    N = 4000
    held, hist, models = _population(M=700, N=N, seed=4)
    counter = Counter(models["B"])
    res = evaluate({"B": counter}, held, N, exclude=hist, n=20, proxy=models["B"], head=40, tail_n=20, seed=3,
                   n_boot=200, progress=False)
    assert res.config["proxy_pays"] and res.config["planned_head"] == 10
    assert any("a head of 10 (of the 40, 20, 10 priced)" in d for d in res.parts["pilot"].design.decision)
    seen = counter.seen()
    assert not seen.duplicated().any()
    assert res.cost.pairs_per_model.iloc[0] == len(seen)
    rest = res.parts["rest"]
    assert rest.cost.items_per_user.iloc[0] < res.parts["pilot"].cost.items_per_user.iloc[0]
    truth = _truth(models["B"], held, hist, N)
    for row in res.table.itertuples():
        assert row.ci_low <= truth[row.metric] <= row.ci_high, (row.metric, truth[row.metric], row.ci_low, row.ci_high)
    assert any("with the planned head of 10; the table combines the two parts' estimates" in x for x in res.notes)
    assert res.table.method.str.contains(r"\(300 users\) \+ .*\(400 users\)").all()
