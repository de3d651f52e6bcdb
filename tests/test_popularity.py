"""Popularity-sampled negatives (sampling_lib.popularity): sampler, law, HT, estimators, bad input.

Brute-force references: loops over users and items for ranks and masses,
enumeration of every sequence of draws for the law of X_u and the moments of
the Horvitz-Thompson estimate, enumeration of every subset for the no-log
bounds.
"""
import itertools

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy import stats

from sampling_lib import estimators as PE
from sampling_lib import popularity as pop
from sampling_lib.correct import compare, estimate
from sampling_lib.estimators import mle
from sampling_lib.metrics import metric_values


def _scores_case(M=40, N=25, seed=0, ties=False):
    rng = np.random.default_rng(seed)
    S = rng.random((M, N))
    if ties:
        S = np.round(S * 4) / 4
    train = sp.csr_matrix((rng.random((M, N)) < 0.2).astype(float))
    test = np.array([rng.choice(np.flatnonzero(train[u].toarray().ravel() == 0)) for u in range(M)])
    w = rng.integers(0, 6, size=N).astype(float) ** 1.3
    w[test[0]] = 0.0                       # a zero-weight held-out item is allowed
    return S, train, test, w


# ----------------------------------------------------------------------------
# sampler
# ----------------------------------------------------------------------------
def test_sampler_never_draws_excluded_items():
    w = pd.Series([5.0, 0.0, 3.0, 1.0, 8.0, 2.0], index=list("abcdef"))
    excl = pd.DataFrame({"user": [1, 1, 2], "item": ["e", "a", "c"]})
    for replace in (True, False):
        neg = pop.sample_popularity_negatives([1, 2, 3], w, 3, held_out=["c", "d", "e"], exclude=excl,
                                              replace=replace, rng=0)
        bad = {1: {"e", "a", "c", "b"}, 2: {"c", "d", "b"}, 3: {"e", "b"}}
        for u, g in neg.groupby("user"):
            assert not set(g.item) & bad[u]
            assert (g.n_candidates == 5 - len(bad[u] - {"b"})).all()
        if not replace:
            assert (neg.groupby("user").item.nunique() == 2).all()
    big = pop.sample_popularity_negatives(np.arange(300), w, 40, held_out=np.full(300, "a"), rng=1)
    assert not big.item.isin(["a", "b"]).any()            # held-out and zero weight, over 11700 draws


def test_sampler_frequencies_match_q():
    # 30000 draws of one user: chi-square against q renormalised without the history
    w = pd.Series(np.arange(1.0, 13.0) ** 1.5)
    excl = {0: [11, 3]}
    neg = pop.sample_popularity_negatives([0], w, 30_001, held_out=[5], exclude=excl, rng=2)
    cand = np.setdiff1d(np.arange(12), [11, 3, 5])
    q = w[cand].to_numpy() / w[cand].sum()
    assert np.allclose(neg.q.to_numpy(), q[np.searchsorted(cand, neg.item.to_numpy())])
    obs = neg.item.value_counts().reindex(cand, fill_value=0).to_numpy()
    assert stats.chisquare(obs, q * obs.sum()).pvalue > 1e-4
    # z-score of every frequency (fixed seed; |z| <= 4.5 over 9 items)
    z = (obs / obs.sum() - q) / np.sqrt(q * (1 - q) / obs.sum())
    assert np.max(np.abs(z)) < 4.5


def test_sampler_without_replacement_first_draw_follows_q_and_is_deterministic():
    w = pd.Series([1.0, 2.0, 4.0, 8.0, 16.0])
    a = pop.sample_popularity_negatives(np.arange(20_000), w, 3, replace=False, rng=3)
    first = a.groupby("user", sort=False).item.first().to_numpy()
    obs = np.bincount(first, minlength=5)
    q = w.to_numpy() / w.sum()
    assert stats.chisquare(obs, q * obs.sum()).pvalue > 1e-4      # successive sampling: draw 1 ~ q
    assert not a["replace"].any()
    b = pop.sample_popularity_negatives(np.arange(20_000), w, 3, replace=False, rng=3)
    pd.testing.assert_frame_equal(a, b)


def test_sampler_bad_input():
    w = pd.Series([1.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="only 1 candidate negatives"):
        pop.sample_popularity_negatives([0], w, 3, held_out=[0], replace=False, rng=0)
    with pytest.raises(ValueError, match="users must be unique"):
        pop.sample_popularity_negatives([0, 0], w, 2, rng=0)
    with pytest.raises(ValueError, match="no weight for held-out item 7"):
        pop.sample_popularity_negatives([0], w, 2, held_out=[7], rng=0)
    with pytest.raises(TypeError, match="n must be an integer"):
        pop.sample_popularity_negatives([0], w, 2.5, rng=0)


# ----------------------------------------------------------------------------
# bad weights: one clear error
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("weights, match", [
    (pd.DataFrame({"item": [0, 1, 2], "weight": [1.0, -0.5, 2.0]}), "must be >= 0; got -0.5 for item '?1'?"),
    (pd.DataFrame({"item": [0, 1, 2], "weight": [0.0, 0.0, 0.0]}), "positive sum; all 3 weights are 0"),
    (pd.DataFrame({"item": [0, 1], "weight": [1.0, 2.0]}), r"no weight for 1 item\(s\) of the scores table"),
    (pd.DataFrame({"item": [0, 1, 2], "weight": [1.0, np.nan, 2.0]}), "must be finite numbers; got (nan|blank) for item '?1'?"),
    (pd.DataFrame({"item": [0, 1, 1, 2], "weight": [1.0, 1.0, 2.0, 2.0]}), "item '?1'? repeats"),
    (pd.DataFrame({"item": [0, 1, 2], "w": [1.0, 1.0, 2.0]}), r"must have columns \['item', 'weight'\]"),
])
def test_bad_weights_files_raise_one_clear_error(tmp_path, weights, match):
    f = tmp_path / "w.csv"
    weights.to_csv(f, index=False)
    scores = pd.DataFrame({"user": [0, 0, 0], "item": [0, 1, 2], "score": [0.3, 0.5, 0.1],
                           "label": [1, 0, 0]})
    with pytest.raises(ValueError, match=match):
        pop.read_item_weights(f, items=scores["item"])
    with pytest.raises(ValueError, match=match):
        pop.popularity_logs_from_table(scores, weights)


def test_weights_from_counts():
    w = pop.popularity_weights(pd.DataFrame({"item": ["x", "y", "x", "z", "x"]}), weight_exponent=0.5)
    assert w.to_dict() == pytest.approx({"x": 3 ** 0.5, "y": 1.0, "z": 1.0})
    X = sp.csr_matrix(np.array([[1, 0, 1], [1, 0, 0]]))
    assert pop.popularity_weights(X, 1.0).tolist() == [2.0, 0.0, 1.0]
    assert pop.popularity_weights(X, 0.0).tolist() == [1.0, 1.0, 1.0]   # exponent 0: uniform
    with pytest.raises(ValueError, match=r"weight_exponent must lie in \[0.0, inf\]; got -1.0"):
        pop.popularity_weights([0, 1], weight_exponent=-1.0)


def test_table_rejections():
    base = pd.DataFrame({"user": [0, 0, 0], "item": [0, 1, 2], "score": [0.3, 0.5, 0.1], "label": [1, 0, 0]})
    w = {0: 1.0, 1: 1.0, 2: 1.0}
    with pytest.raises(ValueError, match="without replacement"):
        pop.popularity_logs_from_table(base.assign(replace=False), w)
    with pytest.raises(ValueError, match="weight 0 in item_weights"):
        pop.popularity_logs_from_table(base, {0: 1.0, 1: 0.0, 2: 1.0})
    with pytest.raises(ValueError, match="in the user's excluded items"):
        pop.popularity_logs_from_table(base, w, exclude=pd.DataFrame({"user": [0], "item": [2]}))
    with pytest.raises(ValueError, match="no 'q' column: give item_weights"):
        pop.popularity_logs_from_table(base)
    with pytest.raises(ValueError, match="ties must be one of"):
        pop.popularity_logs_from_table(base, w, ties="random")


# ----------------------------------------------------------------------------
# the law and Horvitz-Thompson, by enumeration
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3, 4])
def test_law_and_ht_moments_by_enumeration(n):
    # 5 candidates with unequal q; 2 of them above the held-out item
    q = np.array([0.4, 0.05, 0.25, 0.1, 0.2])
    above = np.array([True, True, False, False, False])
    pmf = np.zeros(n)
    m1 = m2 = 0.0
    for seq in itertools.product(range(5), repeat=n - 1):
        p = np.prod(q[list(seq)])
        x = int(above[list(seq)].sum())
        a_hat = sum(1.0 / q[j] for j in seq if above[j]) / (n - 1)
        pmf[x] += p
        m1 += p * a_hat
        m2 += p * a_hat ** 2
    Q = q[above].sum()
    assert np.allclose(pmf, stats.binom.pmf(np.arange(n), n - 1, Q), rtol=1e-12, atol=1e-15)   # eq 3
    assert m1 == pytest.approx(2.0, rel=1e-12)                                                 # eq 4
    var = (np.sum(1.0 / q[above]) - 4.0) / (n - 1)
    assert m2 - m1 ** 2 == pytest.approx(var, rel=1e-10)


def test_uniform_weights_reduce_to_kdd20():
    S, train, test, _ = _scores_case()
    t = pop.popularity_truth(S, train, test, np.ones(S.shape[1]))
    assert np.allclose(t.mass_above, (t.ranks - 1) / t.n_candidates, rtol=0, atol=1e-15)


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_truth_against_brute_force(ties):
    S, train, test, w = _scores_case(ties=True)
    t = pop.popularity_truth(S, train, test, w, ties=ties)
    X = train.toarray()
    for u in range(S.shape[0]):
        cand = [j for j in range(S.shape[1]) if w[j] > 0 and X[u, j] == 0 and j != test[u]]
        W = sum(w[j] for j in cand)
        A = [j for j in cand if (S[u, j] >= S[u, test[u]] if ties == "pessimistic" else S[u, j] > S[u, test[u]])]
        assert t.ranks[u] == 1 + len(A)
        assert t.n_candidates[u] == len(cand)
        assert t.mass_above[u] == pytest.approx(sum(w[j] for j in A) / W, abs=1e-14)
        assert t.inv_q_above[u] == pytest.approx(sum(W / w[j] for j in A), rel=1e-12)
        assert t.max_inv_q_above[u] == pytest.approx(max([W / w[j] for j in A], default=0.0), rel=1e-12)


def test_simulated_counts_follow_the_binomial_law():
    # real-score draws: pooled frequencies of X against the mixture of Binomial(n-1, Q_u) (fixed seed)
    S, train, test, w = _scores_case(M=60, N=30, seed=4)
    n, size = 6, 400
    t = pop.popularity_truth(S, train, test, w)
    x, ht = pop.simulate_popularity_ranks(S, train, test, w, n, size=size, rng=5)
    p_u = stats.binom.pmf(np.arange(n)[None, :], n - 1, t.mass_above[:, None])       # (M, n)
    freq = np.stack([(x == k).mean() for k in range(n)])
    se = np.sqrt((p_u * (1 - p_u)).sum(axis=0) / size) / S.shape[0]
    assert np.max(np.abs(freq - p_u.mean(axis=0)) / se) < 4.5
    # HT: mean over repeats against R_u - 1 with the exact variance (eq 4)
    var = t.ht_variance(n)
    z = (ht.mean(axis=0).sum() - (t.ranks - 1).sum()) / np.sqrt(var.sum() / size)
    assert abs(z) < 4.5


def test_log_from_scores_matches_brute_force_and_the_table_path():
    S, train, test, w = _scores_case(M=30, N=20, seed=6, ties=True)
    log = pop.simulate_popularity_log(S, train, test, w, 7, rng=7)
    assert log.has_draws and log.draw_q.size == 30 * 6
    # rebuild the same evaluation as a long scores table (the negatives re-drawn from the sampler)
    users = np.arange(30)
    excl = pd.DataFrame({"user": np.repeat(users, np.diff(train.indptr)), "item": train.indices})
    neg = pop.sample_popularity_negatives(users, w, 7, held_out=test, exclude=excl, rng=8)
    tab = pd.concat([pd.DataFrame({"user": users, "item": test, "label": 1, "score": S[users, test]}),
                     neg.assign(label=0, score=S[neg.user.to_numpy(), neg.item.to_numpy()])[
                         ["user", "item", "label", "score", "q", "n_candidates"]]]
                    ).sort_values("user", kind="stable")
    lq = pop.popularity_logs_from_table(tab)["model"]                     # logged q
    lw = pop.popularity_logs_from_table(tab.drop(columns=["q", "n_candidates"]), w, exclude=excl)["model"]
    assert np.allclose(lq.draw_q, lw.draw_q, rtol=1e-12) and np.array_equal(lq.x, lw.x)
    assert np.array_equal(lq.n_candidates, lw.n_candidates)
    assert np.array_equal(lw.n_candidates, pop.popularity_truth(S, train, test, w).n_candidates)
    # brute force: x_u, above flags and positions among the user's draws (ties in log order)
    for u in range(30):
        g = neg[neg.user == u]
        s = S[u, g.item.to_numpy()]
        sel = lw.draw_user == u
        assert lw.x[u] == np.sum(s >= S[u, test[u]])
        pos = [np.sum(s > s[k]) + np.sum(s[:k] == s[k]) for k in range(s.size)]
        assert lw.draw_position[sel].tolist() == pos
    ht = PE.horvitz_thompson(lw)
    for u in range(30):
        sel = lw.draw_user == u
        assert ht[u] == pytest.approx(np.sum(lw.draw_above[sel] / lw.draw_q[sel]) / 6, rel=1e-12)


# ----------------------------------------------------------------------------
# rank-mass curve, EM fits and bounds
# ----------------------------------------------------------------------------
def test_curve_is_the_identity_under_uniform_sampling_and_monotone_otherwise():
    S, train, test, w = _scores_case(M=80, N=40, seed=9, ties=True)
    flat = pop.simulate_popularity_log(S, train, test, np.ones(40), 12, rng=1)
    c = PE.rank_mass_curve(flat)
    assert np.max(np.abs(c.rho - c.mass)) < 1e-12
    skew = PE.rank_mass_curve(pop.simulate_popularity_log(S, train, test, w, 12, rng=1))
    assert skew.rho[0] == 0.0 and skew.rho[-1] == 1.0 and np.all(np.diff(skew.rho) >= 0)
    assert np.allclose(skew.mass_of(skew.rho_of(skew.mass[::50])), skew.mass[::50], atol=1e-9)


def test_uniform_method_equals_the_library_mle():
    # equal N_u: the posterior-mean pmf after 100 EM steps is the 101st EM iterate of AAAI21 eq 21
    rng = np.random.default_rng(10)
    N, n, M = 60, 8, 500
    S = rng.random((M, N))
    log = pop.simulate_popularity_log(S, None, rng.integers(0, N, M), np.arange(1.0, N + 1), n, rng=11)
    fit = PE.popularity_fit(log, "uniform")
    assert np.allclose(fit.pmf, mle(log.sampled_ranks, N, n, max_iter=101), rtol=1e-9, atol=1e-14)
    assert np.all(np.diff(fit.em.loglik_trace) >= -1e-9)      # EM never decreases the likelihood


def test_pop_mle_by_brute_force_on_a_tiny_case():
    S, train, test, w = _scores_case(M=12, N=9, seed=12)
    log = pop.simulate_popularity_log(S, train, test, w, 4, rng=13)
    fit = PE.popularity_fit(log, "pop_mle", max_iter=7)
    N = log.N
    G = fit.curve.mass_of(np.arange(N) / (N - 1))
    lik = np.array([[stats.binom.pmf(log.x[u], log.sizes[u] - 1, G[a]) for a in range(N)]
                    for u in range(log.M)])
    pi = np.full(N, 1.0 / N)
    trace = []
    for _ in range(7):                                           # AAAI21 eq 20, per user
        mix = lik @ pi
        trace.append(np.log(mix).sum())
        pi = pi * (lik / mix[:, None]).mean(axis=0)
    assert np.allclose(fit.grid_pmf, pi, rtol=1e-10)
    assert fit.em.loglik_trace[:-1] == pytest.approx(trace, rel=1e-10)
    pmf = np.zeros(N)
    for u in range(log.M):
        post = pi * lik[u] / (pi @ lik[u])
        for a in range(N):
            pmf[int(np.rint(a / (N - 1) * log.n_candidates[u]))] += post[a] / log.M
    assert np.allclose(fit.pmf, pmf, rtol=1e-10, atol=1e-15)
    ht = PE.popularity_fit(log, "ht").pmf
    R = np.clip(np.rint(1 + PE.horvitz_thompson(log)), 1, log.n_candidates + 1).astype(int)
    assert np.allclose(ht, np.bincount(R - 1, minlength=N) / log.M)


def test_mass_rank_bounds_against_all_subsets():
    rng = np.random.default_rng(14)
    q = rng.random(7)
    q /= q.sum()
    for size in range(8):
        for A in itertools.combinations(range(7), size):
            Q = q[list(A)].sum()
            kmin, kmax = pop.mass_rank_bounds(q, [Q])
            assert kmin[0] <= size <= kmax[0]
    masses = {}
    for size in range(8):
        for A in itertools.combinations(range(7), size):
            masses.setdefault(size, []).append(q[list(A)].sum())
    grid = np.linspace(0, 1, 41)
    kmin, kmax = pop.mass_rank_bounds(q, grid)
    for Q, lo, hi in zip(grid, kmin, kmax):        # sharp: attained by some subset size
        assert lo == min(k for k in range(8) if max(masses[k]) >= Q - 1e-12)
        assert hi == max(k for k in range(8) if min(masses[k]) <= Q + 1e-12)


def test_bounds_order_and_truth_within_exact_bounds():
    S, train, test, w = _scores_case(M=80, N=30, seed=15)
    log = pop.simulate_popularity_log(S, train, test, w, 10, rng=16)
    lo, hi = PE.popularity_bounds(log)
    for m in ("recall@5", "ndcg@10", "ap@3"):
        F = metric_values(m, log.N)
        assert lo @ F <= hi @ F + 1e-12
    t = pop.popularity_truth(S, train, test, w)
    X = train.toarray()
    kmin_u, kmax_u = pop.user_mass_rank_bounds(train, test, w, t.mass_above)
    assert np.all(kmin_u <= t.ranks - 1) and np.all(t.ranks - 1 <= kmax_u)
    for u in range(80):
        cand = [j for j in range(30) if w[j] > 0 and X[u, j] == 0 and j != test[u]]
        kmin, kmax = pop.mass_rank_bounds(w[cand] / w[cand].sum(), [t.mass_above[u]])
        assert (kmin[0], kmax[0]) == (kmin_u[u], kmax_u[u])


@pytest.mark.parametrize("variance, bound, p", [(1.0, 0.0, 1e-4), (4.0, 3.0, 1e-3), (0.0, 2.0, 0.05)])
def test_bernstein_tolerance_solves_the_inequality(variance, bound, p):
    t = pop.bernstein_tolerance(variance, bound, p)
    assert 2 * np.exp(-(t * t / 2) / (variance + bound * t / 3)) == pytest.approx(p, rel=1e-10)
    assert pop.bernstein_tolerance(variance, bound + 1.0, p) > t      # heavier tails, wider tolerance


# ----------------------------------------------------------------------------
# practitioner API
# ----------------------------------------------------------------------------
def test_estimate_and_compare_popularity():
    S, train, test, w = _scores_case(M=150, N=40, seed=17)
    log = pop.simulate_popularity_log(S, train, test, w, 10, rng=18)
    t = estimate(log, None, None, ["recall@5", "ndcg@5"], n_boot=30, rng=0)
    assert list(t.metric) == ["recall@5", "ndcg@5"]
    assert (t.ci_low <= t.estimate).all() and (t.estimate <= t.ci_high).all()
    assert (t.bound_low <= t.bound_high).all() and (t.se > 0).all()
    t2 = estimate(log, None, None, ["recall@5", "ndcg@5"], n_boot=30, rng=0)
    pd.testing.assert_frame_equal(t, t2)                         # same seed, same table
    naive = np.mean(log.x < 5)
    assert t.naive[0] == pytest.approx(naive)
    for m in PE.POPULARITY_METHODS:
        e = estimate(log, None, None, "recall@5", method=m, n_boot=0)
        F = metric_values("recall@5", log.N)
        assert e.estimate[0] == pytest.approx(PE.popularity_fit(log, m).pmf @ F, rel=1e-12)
    with pytest.raises(ValueError, match="without replacement"):
        estimate(log, scheme="hypergeometric")
    with pytest.raises(ValueError, match="method must be one of"):
        estimate(log, method="mle")
    ranks_only = pop.PopularityLog(log.x, log.sizes, log.n_candidates)
    with pytest.raises(ValueError, match="needs the logged negatives"):
        estimate(ranks_only, method="pop_mle")
    assert np.isnan(estimate(ranks_only, method="uniform", n_boot=0).bound_low[0])
    logs = {"A": log, "B": pop.simulate_popularity_log(S[:, ::-1].copy(), train, test, w, 10, rng=19)}
    d = compare(logs, None, None, "recall@5", n_boot=20, rng=0)
    assert d.shape[0] == 1 and d.model_a[0] == "A"
    short = pop.PopularityLog(log.x[:10], log.sizes[:10], log.n_candidates[:10])
    with pytest.raises(ValueError, match="same users"):
        compare({"A": ranks_only, "B": short}, method="uniform", n_boot=5)


# ----------------------------------------------------------------------------
# correct.estimate / compare and the CLI
# ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pop_files(tmp_path_factory):
    """A popularity-sampled evaluation written as the files a practitioner has."""
    d = tmp_path_factory.mktemp("popcli")
    rng = np.random.default_rng(20)
    M, N = 60, 30
    items = [f"i{j}" for j in range(N)]
    inter = pd.DataFrame({"user": rng.integers(0, M, 400), "item": rng.choice(items, 400)})
    inter = inter.drop_duplicates()
    inter.to_csv(d / "interactions.csv", index=False)
    last = inter.groupby("user").tail(1)
    train = inter.drop(last.index)
    train.to_csv(d / "train.csv", index=False)
    last[["user", "item"]].to_csv(d / "users.csv", index=False)
    w = pop.popularity_weights(inter, 1.0)
    pd.DataFrame({"item": w.index, "weight": w.to_numpy()}).to_csv(d / "weights.csv", index=False)
    return d, last, train, w, rng


def _scores_table(d, last, neg, rng):
    emb = {u: rng.standard_normal(3) for u in last.user}
    all_items = sorted(pd.concat([last.item, neg.item]).unique())
    item_vec = dict(zip(all_items, np.random.default_rng(21).standard_normal((len(all_items), 3))))
    rows = []
    for model, sign in (("A", 1.0), ("B", -1.0)):
        for _, r in last.iterrows():
            rows.append(dict(model=model, user=r.user, item=r["item"], label=1,
                             score=sign * emb[r.user] @ item_vec[r["item"]] + 0.3))
        for _, r in neg.iterrows():
            rows.append(dict(model=model, user=r.user, item=r["item"], label=0, q=r.q,
                             n_candidates=r.n_candidates, score=sign * emb[r.user] @ item_vec[r["item"]]))
    return pd.DataFrame(rows)


# slow (4 s): test_estimate_and_compare_popularity keeps the API path, the CLI reader tests the file path
@pytest.mark.slow
def test_cli_and_api_popularity_end_to_end(pop_files):
    from sampling_lib.cli import main
    from sampling_lib.correct import compare, estimate

    d, last, train, w, rng = pop_files
    out = d / "neg.csv"
    assert main(["negatives", "--users", str(d / "users.csv"), "--sample-size", "8", "--seed", "0",
                 "--exclude", str(d / "train.csv"), "--item-weights", str(d / "weights.csv"),
                 "-o", str(out)]) == 0
    neg = pd.read_csv(out)
    assert list(neg.columns) == ["user", "item", "q", "n_candidates", "replace"]
    assert (neg.groupby("user").size() == 7).all()
    bad = neg.merge(train, on=["user", "item"]).shape[0] + neg.merge(last, on=["user", "item"]).shape[0]
    assert bad == 0                                                     # history and held-out never drawn
    tab = _scores_table(d, last, neg, rng)
    tab.drop(columns=["q", "n_candidates"]).to_csv(d / "scores.csv", index=False)
    tab.to_csv(d / "scores_q.csv", index=False)
    res = d / "est.csv"
    # the README line: weights from the interaction counts (alpha = 1), history excluded
    assert main(["estimate", str(d / "scores.csv"), "--item-weights", str(d / "interactions.csv"),
                 "--exclude", str(d / "train.csv"), "--metric", "recall@5", "--n-boot", "20",
                 "--format", "csv", "-o", str(res)]) == 0
    cli = pd.read_csv(res)
    excl = pd.read_csv(d / "train.csv")
    api = estimate(pd.read_csv(d / "scores.csv"), None, metrics="recall@5", n_boot=20, rng=0,
                   item_weights=w, exclude=excl)
    assert np.allclose(cli.estimate, api.estimate) and np.allclose(cli.ci_low, api.ci_low)
    assert list(cli.model) == ["A", "B"] and (cli.method == "pop_mle").all()
    # the logged q and n_candidates alone (no weights) give the same point estimates
    assert main(["estimate", str(d / "scores_q.csv"), "--metric", "recall@5", "--n-boot", "0",
                 "--format", "csv", "-o", str(res)]) == 0
    assert np.allclose(pd.read_csv(res).estimate, api.estimate)
    cmp = d / "cmp.csv"
    assert main(["compare", str(d / "scores.csv"), "--item-weights", str(d / "weights.csv"),
                 "--exclude", str(d / "train.csv"), "--metric", "recall@5", "--n-boot", "20",
                 "--format", "csv", "-o", str(cmp)]) == 0
    c_api = compare(pd.read_csv(d / "scores.csv"), None, metrics="recall@5", n_boot=20, rng=0,
                    item_weights=w, exclude=excl)
    assert np.allclose(pd.read_csv(cmp).difference, c_api.difference)


@pytest.mark.slow
def test_the_negatives_file_with_its_scores_is_estimated_as_popularity_negatives(pop_files, capsys):
    """``negatives --item-weights`` writes q; read back as a negatives file with its scores (a row per candidate
    row, a repeated draw scored twice) it is the popularity evaluation of the scores table built by hand, not a
    uniform one (before: the q column went unread and the uniform default ran without a word)."""
    from sampling_lib import io
    from sampling_lib.cli import main

    d, last, train, w, rng = pop_files
    assert main(["negatives", "--users", str(d / "users.csv"), "--sample-size", "12", "--seed", "3",
                 "--exclude", str(d / "train.csv"), "--item-weights", str(d / "weights.csv"),
                 "-o", str(d / "pneg.csv")]) == 0
    neg = pd.read_csv(d / "pneg.csv")
    assert neg.duplicated(["user", "item"]).any()              # drawn with replacement: repeats to score twice
    tab = _scores_table(d, last, neg, rng)
    tab.to_csv(d / "pscores_q.csv", index=False)
    tab[["user", "model", "item", "score"]].to_csv(d / "pscores.csv", index=False)
    common = ["--metric", "recall@5", "--metric", "ndcg@5", "--n-boot", "30", "--format", "csv"]
    assert main(["estimate", str(d / "pscores_q.csv"), *common, "-o", str(d / "by_table.csv")]) == 0
    assert main(["estimate", str(d / "pneg.csv"), "--input-format", "negatives", "--scores", str(d / "pscores.csv"),
                 "--held-out", str(d / "users.csv"), *common, "-o", str(d / "by_file.csv")]) == 0
    a, b = pd.read_csv(d / "by_table.csv"), pd.read_csv(d / "by_file.csv")
    assert (b.method == "pop_mle").all()
    pd.testing.assert_frame_equal(a, b)
    # its terminal view does not advise the staged design that popularity negatives do not get (ratio legend)
    capsys.readouterr()
    assert main(["estimate", str(d / "pneg.csv"), "--input-format", "negatives", "--scores", str(d / "pscores.csv"),
                 "--held-out", str(d / "users.csv"), "--metric", "recall@5", "--n-boot", "30"]) == 0
    view = " ".join(capsys.readouterr().out.split())
    assert "pop_mle" in view and "with popularity-sampled negatives a larger n narrows it" in view
    assert "a staged design" not in view
    # the library: the same table
    t = io.popularity_table(d / "pneg.csv", d / "users.csv", d / "pscores.csv")
    api = estimate(t, None, metrics=["recall@5", "ndcg@5"], n_boot=0)
    assert np.allclose(api.estimate, a.estimate)
    # compare reads it too; ranks and the uniform readers refuse it (its ranks alone do not give the metric)
    assert main(["compare", str(d / "pneg.csv"), "--input-format", "negatives", "--scores", str(d / "pscores.csv"),
                 "--held-out", str(d / "users.csv"), "--metric", "recall@5", "--n-boot", "30", "--format", "csv",
                 "-o", str(d / "cmp.csv")]) == 0
    assert main(["compare", str(d / "pscores_q.csv"), "--metric", "recall@5", "--n-boot", "30", "--format", "csv",
                 "-o", str(d / "cmp_table.csv")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(d / "cmp.csv"), pd.read_csv(d / "cmp_table.csv"))
    for cmd, extra, match in [
            ("ranks", ["--scores", str(d / "pscores.csv"), "--held-out", str(d / "users.csv"), "-o",
                       str(d / "r.csv")], "pneg.csv holds popularity-sampled negatives (column q)"),
            ("estimate", ["--scores", str(d / "pscores.csv")], "give their scores (--scores"),
            ("estimate", ["--held-out", str(d / "users.csv")], "give their scores (--scores")]:
        capsys.readouterr()
        assert main([cmd, str(d / "pneg.csv"), "--input-format", "negatives", *extra]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and match in err[0], err
    # a bad q in the file: one line naming the file and its line (before: a TypeError from re-reading the built
    # table's rows as the file's records)
    lines = (d / "pneg.csv").read_text().splitlines()
    head, row = lines[0].split(","), lines[4].split(",")
    row[head.index("q")] = "-0.5"
    (d / "badq.csv").write_text("\n".join(lines[:4] + [",".join(row)] + lines[5:]) + "\n")
    for cmd in ("estimate", "compare"):
        capsys.readouterr()
        assert main([cmd, str(d / "badq.csv"), "--input-format", "negatives", "--scores", str(d / "pscores.csv"),
                     "--held-out", str(d / "users.csv"), "--n-boot", "30"]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "got -0.5 in " in err[0] and err[0].endswith("badq.csv, line 5"), err
    with pytest.raises(ValueError, match=r"pneg.csv holds popularity-sampled negatives \(column q\)"):
        io.read_negatives(d / "pneg.csv", d / "users.csv")
    neg[["user", "item"]].assign(weight=1.0).to_csv(d / "extra.csv", index=False)
    with pytest.raises(ValueError, match=r"extra.csv holds the columns user, item .*\['weight'\] are not read"):
        io.read_negatives(d / "extra.csv", d / "users.csv")


def test_cli_popularity_errors(pop_files, capsys):
    from sampling_lib.cli import main

    d, last, train, w, rng = pop_files
    neg = pop.sample_popularity_negatives(last.user, w, 5, held_out=last.item, exclude=train, rng=1)
    _scores_table(d, last, neg, rng).drop(columns=["q", "n_candidates"]).to_csv(d / "s2.csv", index=False)
    pd.DataFrame({"item": w.index, "weight": -w.to_numpy()}).to_csv(d / "neg_w.csv", index=False)
    pd.DataFrame({"item": w.index[:3], "weight": 1.0}).to_csv(d / "few_w.csv", index=False)
    pd.DataFrame({"item": w.index, "weight": 0.0}).to_csv(d / "zero_w.csv", index=False)
    cases = [(["--item-weights", str(d / "neg_w.csv")], "item_weights must be >= 0"),
             (["--item-weights", str(d / "few_w.csv")], "item_weights has no weight for"),
             (["--item-weights", str(d / "zero_w.csv")], "item_weights must have a positive sum"),
             (["--item-weights", str(d / "weights.csv"), "--scheme", "hypergeometric"], "with replacement only"),
             (["--exclude", str(d / "train.csv"), "--n-items", "30"], "--exclude needs --item-weights"),
             (["--n-items", "30", "--method", "pop_mle"], "is for popularity-sampled negatives"),
             (["--item-weights", str(d / "weights.csv"), "--method", "mle"], "--method must be one of pop_mle")]
    for extra, match in cases:
        capsys.readouterr()
        assert main(["estimate", str(d / "s2.csv"), *extra]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("sampling-lib: error:") and match in err[0], err


def test_estimate_and_compare_dispatch_to_the_popularity_estimators():
    """correct.estimate / compare with a log (or a dict of logs) run the popularity estimators of the registry."""
    S, train, test, w = _scores_case(M=120, N=30, seed=23)
    log = pop.simulate_popularity_log(S, train, test, w, 8, rng=24)
    a = estimate(log, None, metrics=["recall@5", "ndcg@5"], n_boot=10, rng=0, options={"max_iter": 7},
                 confidence_level=0.9)
    b = estimate({"model": log}, metrics=["recall@5", "ndcg@5"], n_boot=10, rng=0, options={"max_iter": 7},
                 confidence_level=0.9)
    pd.testing.assert_frame_equal(a, b)
    pmf = PE.popularity_fit(log, "pop_mle", max_iter=7).pmf
    direct = [pmf @ metric_values(m, log.N) for m in ("recall@5", "ndcg@5")]
    assert a.estimate.tolist() == pytest.approx(direct, rel=1e-12)
    assert (a.confidence_level == 0.9).all() and (a.method == "pop_mle").all()
    assert estimate(log, None, metrics="recall@5", method="ht", n_boot=0).estimate[0] == pytest.approx(
        PE.popularity_fit(log, "ht").pmf @ metric_values("recall@5", log.N), rel=1e-12)
    with pytest.raises(ValueError, match="without replacement"):
        estimate(log, None, scheme="hypergeometric")
    logs = {"A": log, "B": pop.simulate_popularity_log(S[:, ::-1].copy(), train, test, w, 8, rng=25)}
    pd.testing.assert_frame_equal(compare(logs, None, metrics="recall@5", n_boot=10, rng=0),
                                  compare(logs, metrics="recall@5", n_boot=10, rng=0, paired=True))
    assert not pop.is_popularity_input(np.array([1, 2, 3])) and pop.is_popularity_input(logs)


def test_module_declares_all():
    for name in pop.__all__:
        assert hasattr(pop, name), name
    assert "popularity" not in pop.__all__ and len(set(pop.__all__)) == len(pop.__all__)
