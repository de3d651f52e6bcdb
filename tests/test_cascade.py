"""Correcting published cascade evaluations (sampling_lib.cascade): the retriever's top-m plus r random
negatives (a stratified design with one tail stage), and the top-m only (bounds).

Checked against brute force: the cells against counts from the scores one candidate at a time; the head-only
bounds contain every user's true metric whatever the tail (any data); the design-only bounds of a "top-m + r
random" evaluation hold in expectation for every tail rank (exact enumeration over the hypergeometric draw) and
their interval covers the truth where only the weighted bound can be tight; the corrected estimate of a
simulated "top-m + r random" evaluation covers the truth where the naive metric among the scored items does not.
"""
import numpy as np
import pandas as pd
import pytest

from scipy.stats import hypergeom

from sampling_lib.cascade import (WEIGHT_MAX, cascade_bounds, cascade_cells, cascade_estimate, design_interval,
                                  head_only_bounds)
from sampling_lib.cascade import _bounds
from sampling_lib.metrics import metric_matrix, metric_values


def _population(M=1500, N=400, m=20, r=19, seed=0, tail=True):
    """Users with a costly model's scores of every candidate, a retriever (noisy copy) ranking them, and the
    cascade table "retriever's top m (+ r random from the rest)"; returns the table and each user's true
    global rank of the held-out item (pessimistic ties)."""
    rng = np.random.default_rng(seed)
    rows = np.arange(M)[:, None]
    s = rng.normal(size=(M, N))                             # costly scores of the N_u = N candidates
    held = rng.integers(N, size=M)
    s[rows[:, 0], held] += 1.6                              # the held-out item tends to rank high
    R = (s >= s[rows[:, 0], held][:, None]).sum(axis=1)
    proxy = s + rng.normal(size=(M, N))                     # the retriever: correlated with the costly model
    proxy[rows[:, 0], held] = -np.inf                       # the head holds negatives only
    head = np.argsort(-proxy, axis=1, kind="stable")[:, :m]
    keys = rng.random((M, N))                               # the tail: r uniform draws from the rest
    keys[rows[:, 0], held] = np.inf
    keys[rows, head] = np.inf
    tail_items = np.argsort(keys, axis=1)[:, :r] if tail else np.zeros((M, 0), np.int64)
    items = np.hstack([held[:, None], head, tail_items])
    k = items.shape[1]
    table = pd.DataFrame({"user": np.repeat(np.arange(M), k), "item": items.ravel(),
                          "score": s[rows, items].ravel(),
                          "label": np.tile(np.r_[1, np.zeros(k - 1, int)], M),
                          "stratum": np.tile(["head"] * (1 + m) + ["tail"] * tail_items.shape[1], M)})
    return table, R


def test_cells_count_what_beats_the_held_out_item_in_each_stratum():
    t, _ = _population(M=40, N=60, m=8, r=5, seed=1)
    t.loc[t.index[3], "score"] = t.loc[t.index[0], "score"]          # a tie with user 0's held-out item
    for ties, beats in (("pessimistic", np.greater_equal), ("optimistic", np.greater)):
        c = cascade_cells(t, 60, ties=ties).set_index("user")
        for u, g in t.groupby("user"):
            h = g.score[g.label == 1].iloc[0]
            neg = g[g.label == 0]
            head, tail = neg[neg.stratum == "head"], neg[neg.stratum == "tail"]
            assert c.loc[u, "head"] == len(head) and c.loc[u, "tail_size"] == len(tail)
            assert c.loc[u, "head_above"] == int(beats(head.score, h).sum())
            assert c.loc[u, "tail_rank"] == 1 + int(beats(tail.score, h).sum())


def test_head_only_bounds_contain_every_user_s_true_metric():
    t, R = _population(M=300, N=200, m=20, tail=False, seed=2)
    c = cascade_cells(t, 200)
    metrics = ["recall@10", "ndcg@10", "ap@5", "recall@1"]
    lo, hi = head_only_bounds(c.n_items, c["head"], c.head_above, metrics)
    truth = np.stack([metric_values(mt, 200)[R - 1] for mt in metrics], axis=1)
    assert (lo <= truth + 1e-12).all() and (truth <= hi + 1e-12).all()
    e = cascade_estimate(t, 200, metrics=metrics, n_boot=300, rng=0)
    assert (e.method == "bounds (head only)").all() and e.estimate.isna().all()
    assert np.allclose(e.naive, e.bound_high)                       # the reported metric is the best case
    assert ((e.ci_low <= e.bound_low) & (e.bound_high <= e.ci_high)).all()
    assert ((e.bound_low <= truth.mean(axis=0)) & (truth.mean(axis=0) <= e.bound_high)).all()


@pytest.mark.parametrize("T", [1, 3, 8, 30, 200])
def test_design_bounds_hold_for_every_tail_rank_in_expectation_over_the_draw(T):
    # every Y (tail items above) in 0..T: the low bound never exceeds F(1 + x + Y) for a draw that can happen,
    # and the high bound's expectation over the hypergeometric draw is at least F(1 + x + Y) (any data)
    metrics = ["recall@5", "ndcg@5", "ap@3", "recall@1"]
    F = np.vstack([metric_matrix(metrics, 10), np.zeros((T + 20, len(metrics)))])
    weighted = 0
    for s in sorted({0, 1, min(2, T), min(5, T), T // 2, T}):
        for x in (0, 1, 4, 6):
            c = np.arange(s + 1)
            lo, hi = cascade_bounds(1 + 7 + T, 7, x, s, c + 1, metrics)
            weighted += int((hi[0] > F[x] + 1e-12).any())           # the design-based bound, not the sure one
            for Y in range(T + 1):
                p = hypergeom(T, Y, s).pmf(c)
                assert (p @ hi >= F[x + Y] - 1e-12).all(), (s, x, Y, p @ hi, F[x + Y])
                assert (lo[p > 0] <= F[x + Y] + 1e-12).all(), (s, x, Y)
    assert weighted > 0 or T <= 3


def test_design_bounds_without_a_tail_sample_are_the_head_only_bounds():
    N, m, x = np.array([50, 50, 300, 31]), np.array([20, 20, 0, 30]), np.array([0, 7, 0, 12])
    F = np.vstack([metric_matrix(["recall@10", "ndcg@10"], 10), np.zeros((400, 2))])
    lo, hi = cascade_bounds(N, m, x, 0, 1, ["recall@10", "ndcg@10"])
    assert np.array_equal(lo, F[x + N - 1 - m]) and np.array_equal(hi, F[x])
    assert all(np.array_equal(a, b) for a, b in zip((lo, hi), head_only_bounds(N, m, x, ["recall@10", "ndcg@10"])))


def test_design_interval_covers_users_whom_only_the_weighted_bound_can_place():
    # every user has exactly k = 9 tail items above (x = 0: recall@10 = 1 for all). The sample misses them
    # with chance h(9) ~ 0.64 (weight ~1.56 <= WEIGHT_MAX), so an unweighted count of users with no sampled
    # item above would say 0.64; the weighted bound covers 1 in >= 90% of 200 draws (nominal 98.75% above)
    T, s, M = 400, 19, 300
    assert 1 / hypergeom(T, 9, s).pmf(0) <= WEIGHT_MAX
    rng = np.random.default_rng(5)
    covered = 0
    for _ in range(200):
        c = rng.hypergeometric(9, T - 9, s, size=M)
        lo, hi = design_interval(1 + 20 + T, 20, 0, s, c + 1, ["recall@10"], n_boot=200, rng=rng)
        assert lo[0] <= 1.0
        covered += int(hi[0] >= 1.0 - 1e-12)
    assert covered >= 180, covered


def test_design_interval_is_tight_where_the_sample_places_users_far_below():
    # half the users have no tail item above (recall@10 = 1), half a quarter of the tail above: their samples
    # hold items above, so the naive metric counts them (x + c < 10) but the weighted bound does not
    T, s, M = 4000, 19, 2000
    rng = np.random.default_rng(6)
    Y = np.where(np.arange(M) < M // 2, 0, T // 4)
    c = rng.hypergeometric(Y, T - Y, s)
    cells = (1 + 20 + T, 20, 0, s, c + 1, ["recall@10"])
    low, high, sure = _bounds(*cells)
    lo, hi = design_interval(*cells, n_boot=500, rng=rng)
    h9 = hypergeom(T, 9, s).pmf(0)                              # the users at Y = 0 weigh 1 / h(9)
    expected = 0.5 / h9 + 0.5 * hypergeom(T, T // 4, s).pmf(0) / h9
    assert lo[0] <= 0.5 <= hi[0] < expected + 4 * high.std() / np.sqrt(M) < 0.6 and sure.mean() > 0.95
    assert np.array_equal(design_interval(*cells, n_boot=0)[1], [min(high.mean(), sure.mean())])


def test_top_m_plus_random_negatives_is_corrected_to_the_full_catalogue():
    # one draw of 1,500 users: the corrected interval covers the truth (4 SE), the naive metric among the
    # 40 items scored lies far above it
    t, R = _population(M=1500, N=400, m=20, r=19, seed=3)
    e = cascade_estimate(t, 400, metrics=["recall@10", "ndcg@10"], n_boot=300, rng=0).set_index("metric")
    for mt in ("recall@10", "ndcg@10"):
        truth = metric_values(mt, 400)[R - 1].mean()
        row = e.loc[mt]
        assert abs(row.estimate - truth) <= 4 * row.se, (mt, row.estimate, truth, row.se)
        assert row.naive > truth + 4 * row.se
        assert row.method.startswith("logspline")
        assert row.bound_low <= truth <= row.bound_high                 # the design-only interval
        assert row.bound_low <= row.estimate <= row.bound_high


def test_bad_cascade_tables_are_named_in_one_line():
    t, _ = _population(M=5, N=50, m=4, r=3, seed=4)
    with pytest.raises(ValueError, match="two rows with label 1"):
        cascade_cells(pd.concat([t, t[t.label == 1].head(1).assign(item=-1)]), 50)
    with pytest.raises(ValueError, match="no row with label 1"):
        cascade_cells(t[~((t.user == 2) & (t.label == 1))], 50)
    with pytest.raises(ValueError, match="listed twice"):
        cascade_cells(pd.concat([t, t[(t.user == 1) & (t.stratum == "tail")].head(1).assign(stratum="head")]), 50)
    with pytest.raises(ValueError, match="stratum must be"):
        cascade_cells(t.assign(stratum=t.stratum.where(t.index != 3, "middle")), 50)
    with pytest.raises(ValueError, match="score must be finite"):
        cascade_cells(t.assign(score=t.score.where(t.index != 2, np.nan)), 50)
    with pytest.raises(ValueError, match="n_items lists no N_u for 1 user"):
        cascade_cells(t, {u: 50 for u in range(4)})
    with pytest.raises(ValueError, match=r"^user 0 has 4 head and 3 tail negatives, more than the 6 other"):
        cascade_cells(t, 7)                                 # more candidates scored than N_u holds
    with pytest.raises(ValueError, match=r"^user 0 \(model 'a'\) has 4 head"):
        cascade_cells(t.assign(model="a"), 7)               # the model named where the table names one
    mixed = t[~((t.user == 0) & (t.stratum == "tail") & (t.label == 0))]
    with pytest.raises(ValueError, match="no tail sample and the others have one"):
        cascade_estimate(mixed, 50, n_boot=0)


def test_cascade_tables_take_the_retriever_s_top_m_and_uniform_tail_draws_from_the_rest():
    import scipy.sparse as sp
    from scipy import stats

    from sampling_lib.studies import cascade_tables

    rng = np.random.default_rng(5)
    M, N, m, r = 30, 40, 5, 4
    train = sp.csr_matrix((rng.random((M, N)) < 0.2).astype(float))
    held = np.array([int(rng.choice(np.flatnonzero(train[u].toarray().ravel() == 0))) for u in range(M)])
    P, S = rng.random((M, N)), rng.random((M, N))

    def draw(k):
        return cascade_tables(lambda us: S[us], lambda us: P[us], train, held, m, r, np.random.default_rng(k))

    for k in range(3):                      # the structure, user by user
        for u, g in draw(k).groupby("user"):
            hist = set(np.flatnonzero(train[u].toarray().ravel()))
            cand = [i for i in range(N) if i not in hist and i != held[u]]
            top = sorted(cand, key=lambda i: -P[u, i])[:m]
            neg = g[g.label == 0]
            assert g[g.label == 1].item.tolist() == [held[u]]
            assert neg[neg.stratum == "head"].item.tolist() == top
            tail = neg[neg.stratum == "tail"].item.to_numpy()
            assert tail.size == r and not set(tail) & (set(top) | hist | {held[u]})
            assert np.allclose(g.score, S[u, g.item])
    # the tail: every remaining candidate equally often over 200 draws (chi-square per user, 4 users)
    counts = np.zeros((M, N))
    for k in range(200):
        t = draw(100 + k)
        tail = t[t.stratum == "tail"]
        np.add.at(counts, (tail.user.to_numpy(), tail.item.to_numpy()), 1)
    for u in range(4):
        rest = np.flatnonzero(counts[u] > 0)
        assert rest.size == N - int(train[u].sum()) - 1 - m
        assert stats.chisquare(counts[u, rest]).pvalue > 1e-4


def test_requests_are_evaluate_s_first_two_stages_and_a_full_tail_gives_full_ranking():
    from sampling_lib import evaluate
    from sampling_lib.cascade import cascade_requests

    rng = np.random.default_rng(11)
    M, N = 60, 90
    W = rng.normal(size=(M, N))
    hist = {u: rng.choice(N, 5, replace=False) for u in range(M)}
    held = {u: int(rng.choice(np.setdiff1d(np.arange(N), hist[u]))) for u in range(M)}
    W[np.arange(M), list(held.values())] += 1.5
    proxy = W.mean(axis=0) + rng.normal(size=N)
    score = lambda u, i: W[np.asarray(u), np.asarray(i)]          # noqa: E731
    req = cascade_requests(held, N, hist, proxy=proxy, head=8, tail_n=6, seed=2)
    res = evaluate(score, held, N, exclude=hist, proxy=proxy, head=8, tail_n=6, tail_n_max=6, seed=2, n_boot=0,
                   progress=False)
    neg = res.negatives
    pairs = lambda f: set(zip(f.user.tolist(), f.item.tolist()))   # noqa: E731
    assert pairs(req[(req.stratum == "head") & (req.label == 0)]) == pairs(neg[0])
    tailed = set(res.ranks.user[res.ranks.tail_size > 0])
    got_tail = req[req.stratum == "tail"]
    assert pairs(got_tail[got_tail.user.isin(tailed)]) == pairs(neg[1])
    assert (req.groupby("user").label.sum() == 1).all() and not req.duplicated(["user", "item"]).any()
    assert not any(i in set(hist[u]) for u, i in zip(req.user, req.item))
    # every tail item scored: the correction is full ranking's metric
    full = cascade_requests(held, N, hist, proxy=proxy, head=8, tail_n=N, seed=2)
    full["score"] = score(full.user.to_numpy(), full.item.to_numpy())
    est = cascade_estimate(full, N - 5, metrics=["recall@10"], n_boot=0)
    R = np.array([1 + (W[u, np.setdiff1d(np.arange(N), hist[u])] > W[u, held[u]]).sum() for u in range(M)])
    assert est.estimate[0] == pytest.approx(metric_values("recall@10", N)[R - 1].mean(), abs=1e-9)


def test_requests_say_what_evaluate_s_notes_say():
    """cascade_requests warns the notes evaluate(proxy=) would give: excluded users without a held-out item
    (an id matched nothing) and tied proxy scores at the head's edge."""
    from sampling_lib.cascade import cascade_requests

    with pytest.warns(UserWarning) as caught:
        cascade_requests({0: 1, 1: 2}, 30, {0: [5], 7: [3]}, proxy=np.zeros(30), head=4, tail_n=3)
    text = " | ".join(str(w.message) for w in caught)
    assert "exclude: 1 users without a held-out item were not used" in text, text
    assert "the tie went to the item first in the catalogue" in text, text


def test_the_exact_check_of_the_bounds_passes_and_catches_an_unweighted_bound(monkeypatch):
    from sampling_lib import cascade, studies

    g = studies.bounds_expectation_gap([5, 60], ["recall@10", "ndcg@10"])
    assert (g.deficit <= 1e-12).all() and (g.excess <= 1e-12).all() and g.weighted.any()
    # the same check on a bound without its 1/h weight (1{c = 0} F(1 + x)): it falls short for some tail rank
    def unweighted(F, parsed, T, x, s, c, sure):
        return np.where((c == 0)[:, None], F[np.minimum(x, F.shape[0] - 1)], 0.0)
    monkeypatch.setattr(cascade, "_design_high", unweighted)
    assert studies.bounds_expectation_gap([60], "recall@10").deficit.max() > 0.1


def test_coverage_study_keeps_the_users_and_draws_new_tails():
    from sampling_lib import studies

    t = studies.design_interval_coverage(3000, 10, 9, 400, 3, metrics=["recall@10"], n_boot=100, seed=1)
    assert len(t) == 3 and t.truth.nunique() == 1 and t.naive.nunique() == 3
    assert (t.bound_low <= t.bound_high).all() and t.below_resolution.all()
    assert t.design_covered.all()


def test_design_interval_with_per_user_n_several_models_and_users_without_a_tail():
    # per-user N_u (one user has no tail item left: its rank is known), two models: each row's design-only
    # interval holds its own users' metric, the estimate lies inside it, and n_boot=0 gives the point bounds
    t, R = _population(M=600, N=300, m=20, r=19, seed=8)
    n_u = pd.Series(300, index=np.arange(600))
    full = t[t.user == 0]
    t = pd.concat([t[t.user != 0], full[full.stratum == "head"]])       # user 0: N_u = 21, every item in the head
    n_u[0] = 21
    two = pd.concat([t.assign(model="A"), t.assign(model="B", score=t.score + np.where(t.label == 1, 0.5, 0))])
    e = cascade_estimate(two, n_u, metrics=["recall@10"], n_boot=200, rng=3)
    assert list(e.model) == ["A", "B"] and (e.bound_low <= e.estimate).all() and (e.estimate <= e.bound_high).all()
    u0 = t[t.user == 0]
    R = R.copy()
    R[0] = 1 + int((u0.score[u0.label == 0] >= u0.score[u0.label == 1].iloc[0]).sum())
    truth = metric_values("recall@10", 300)[R - 1].mean()
    assert e.bound_low[0] <= truth <= e.bound_high[0]
    e0 = cascade_estimate(two, n_u, metrics=["recall@10"], n_boot=0)
    assert e0.bound_low.notna().all() and (e0.bound_high <= e0.naive + 1e-12).all()


def test_a_tail_drawn_by_the_proxy_s_rank_has_the_stated_inclusion_law_and_leaves_a_uniform_rest():
    # cascade_tables(extension=(size, power)): 4,000 users alike (history item 20, held-out item 0, the proxy
    # ordering the catalogue by position); each candidate after the head is drawn with its own pi_t (z bound
    # per position, 4 SE), and the uniform draws never meet the head or the extension
    import scipy.sparse as sp

    from sampling_lib.proxy import rank_power_inclusion
    from sampling_lib.studies import cascade_tables

    M, N, m, r, size, power = 4000, 30, 3, 4, 6.0, 1.0
    train = sp.csr_matrix((np.ones(M), (np.arange(M), np.full(M, 20))), shape=(M, N))
    held = np.zeros(M, np.int64)
    P = np.tile(-np.arange(N, dtype=float), (M, 1))
    S = np.random.default_rng(1).random((M, N))
    t = cascade_tables(lambda us: S[us], lambda us: P[us], train, held, m, r, np.random.default_rng(2),
                       extension=(size, power))
    neg = t[t.label == 0]
    head = neg[neg.stratum == "head"]
    tail = neg[neg.stratum == "tail"]
    assert (head.groupby("user").item.apply(lambda v: v.tolist()[:m] == [1, 2, 3])).all()
    assert (tail.groupby("user").size() == r).all()
    both = pd.concat([head[["user", "item"]], tail[["user", "item"]], pd.DataFrame({"user": range(M), "item": 20})])
    assert not both.duplicated().any()                          # tail, head, extension, history: disjoint
    ext = head.groupby("user").cumcount() >= m
    counts = np.bincount(head.item[ext], minlength=N)
    rest = [i for i in range(N) if i not in (0, 1, 2, 3, 20)]   # the rest, in the proxy's order
    pi = rank_power_inclusion(len(rest), size, power)
    freq = counts[rest] / M
    assert np.all(np.abs(freq - pi) <= 4 * np.sqrt(pi * (1 - pi) / M) + 1e-12), (freq, pi)
    assert abs(ext.sum() / M - size) <= 4 * np.sqrt(np.sum(pi * (1 - pi)) / M)
    assert not counts[[0, 1, 2, 3, 20]].any()


def test_a_head_extended_by_the_proxy_s_rank_is_corrected_to_the_full_catalogue():
    # the extension's items join the head as exact counts: the corrected interval covers the brute-force
    # truth (4 SE) and the naive metric among the scored items lies far above it
    import scipy.sparse as sp

    from sampling_lib.studies import cascade_tables

    rng = np.random.default_rng(7)
    M, N = 1500, 400
    S = rng.normal(size=(M, N))
    held = rng.integers(N, size=M)
    S[np.arange(M), held] += 1.6
    R = (S >= S[np.arange(M), held][:, None]).sum(axis=1)
    P = S + rng.normal(size=(M, N))
    t = cascade_tables(lambda us: S[us], lambda us: P[us], sp.csr_matrix((M, N)), held, 10, 19,
                       np.random.default_rng(8), extension=(10, 1.0))
    heads = t[(t.stratum == "head") & (t.label == 0)].groupby("user").size()
    assert heads.min() >= 10 and heads.max() > 12 and abs(heads.mean() - 20) < 0.5    # 10 + Poisson, mean 10
    # scored through a counting wrapper of (user, item) pairs: the same table, each pair asked once
    from sampling_lib.studies import PairCounter

    counter = PairCounter(lambda u, i: S[u, i], N)
    same = cascade_tables(None, lambda us: P[us], sp.csr_matrix((M, N)), held, 10, 19, np.random.default_rng(8),
                          extension=(10, 1.0), costly_pairs=counter)
    pd.testing.assert_frame_equal(same, t)
    assert counter.pairs == len(t) and counter.repeats() == 0
    e = cascade_estimate(t, N, metrics=["recall@10", "ndcg@10"], n_boot=300, rng=0).set_index("metric")
    for mt in ("recall@10", "ndcg@10"):
        truth = metric_values(mt, N)[R - 1].mean()
        row = e.loc[mt]
        assert abs(row.estimate - truth) <= 4 * row.se, (mt, row.estimate, truth, row.se)
        assert row.naive > truth + 4 * row.se


def test_no_unbiased_top_k_estimator_from_a_uniform_tail_and_the_poisson_one_s_variance():
    # benchmarks/README.md "Why a design alone cannot correct a top-K metric": the exact checks
    # (studies.unbiased_top_k_checks) separate the cases the argument says, and the Poisson estimator is
    # unbiased in an independent simulation (4 SE), with variance 1/P - 1 just out of the top K
    from sampling_lib.studies import poisson_indicator_estimate, unbiased_top_k_checks

    uni, poi = unbiased_top_k_checks()
    assert (uni.miss[uni.impossible] > 0.05).all() and (uni.miss[~uni.impossible] < 1e-8).all()
    assert poi.mean_error.max() < 1e-12
    just_out = poi[poi.formula.notna()]
    assert len(just_out) == 10 and np.allclose(just_out.variance, just_out.formula, rtol=1e-9)
    rng = np.random.default_rng(11)
    pi = np.array([0.95, 0.8, 0.6, 0.9, 0.85])
    for k, above in ((4, 5), (4, 4), (1, 2)):
        drawn = rng.random((40_000, above)) < pi[:above]
        est = np.array([poisson_indicator_estimate(pi[:above][d], k) for d in drawn])
        assert abs(est.mean() - (above <= k)) <= 4 * est.std() / np.sqrt(est.size), (k, above, est.mean())
    assert abs(est.var() - (1 / pi[:2].prod() - 1)) < 0.02      # k = 1, Y = 2: variance 1/P - 1 = 0.316
    with pytest.raises(ValueError, match="pi must be inclusion probabilities"):
        unbiased_top_k_checks(pi=(0.5, 0.0))


def test_extension_study_names_a_bad_design_or_a_missing_model():
    import scipy.sparse as sp

    from sampling_lib.studies import cascade_tables, extension_study

    fake = ({"als": np.ones(3)}, 10, {"fitted": {}})
    with pytest.raises(ValueError, match="designs' power must lie in"):
        extension_study(population=fake, designs=[(5, 5, -1.0, 5)])
    with pytest.raises(ValueError, match="costly model 'ease-200' and the fitted retriever or proxy 'popularity'"):
        extension_study(population=fake, designs=[(5, 5, 1.0, 5)])
    with pytest.raises(ValueError, match="extension size must lie in"):
        cascade_tables(None, None, sp.csr_matrix((1, 3)), np.zeros(1, int), 1, 1, np.random.default_rng(0),
                       extension=(0, 1.0))


def _rank_table(t):
    """A cascade's rank table computed from its scores table, one user at a time (pessimistic ties)."""
    rows = []
    for u, g in t.groupby("user", sort=False):
        held = g[g.label == 1].score.iloc[0]
        neg = g[g.label == 0]
        head, tail = neg[neg.stratum == "head"], neg[neg.stratum == "tail"]
        rows.append({"user": u, "head": len(head), "head_rank": 1 + int((head.score >= held).sum()),
                     "tail_size": len(tail), "tail_rank": 1 + int((tail.score >= held).sum())})
    return pd.DataFrame(rows)


def test_a_rank_table_gives_the_scores_table_s_estimate_and_bounds():
    # the same users as ranks (computed here from the scores, user by user): every column of the estimate
    # table equal, with random negatives and head only
    t, _ = _population(M=400, N=200, m=15, r=12, seed=9)
    r = _rank_table(t)
    for a, b in ((t, r), (t[t.stratum == "head"], r.drop(columns=["tail_size", "tail_rank"]))):
        x = cascade_estimate(a, 200, metrics=["recall@10", "ndcg@10"], n_boot=80, rng=3)
        y = cascade_estimate(b, 200, metrics=["recall@10", "ndcg@10"], n_boot=80, rng=3)
        pd.testing.assert_frame_equal(x, y)
    two = pd.concat([r.assign(model="A"), r.assign(model="B", head_rank=1)])
    cells = cascade_cells(two, {u: 200 for u in r.user})
    assert list(cells.model.unique()) == ["A", "B"] and (cells[cells.model == "B"].head_above == 0).all()


@pytest.mark.parametrize("change, message", [
    (lambda r: r.assign(head_rank=0), r"^head_rank must lie in 1\.\.head \+ 1 .* row 1 has head_rank 0"),
    (lambda r: r.assign(tail_rank=r.tail_size + 2), r"^tail_rank must lie in 1\.\.tail_size \+ 1"),
    (lambda r: pd.concat([r, r.head(1)]), r"^user 0 has two rows: a rank table has one row per user"),
    (lambda r: r.drop(columns="tail_rank"), "optionally tail_size with tail_rank"),
    (lambda r: r.assign(extra=1), r"rank table has the columns user, head, head_rank .* got \[.*'extra'\]"),
    (lambda r: r.assign(head=r["head"].astype(object).where(r.index != 2, "x")),
     r"^column 'head' must hold integers .* got 'x' in row 3"),
])
def test_bad_rank_tables_are_named_in_one_line(change, message):
    t, _ = _population(M=5, N=50, m=4, r=3, seed=4)
    with pytest.raises(ValueError, match=message):
        cascade_cells(change(_rank_table(t)), 50)


def test_a_rank_table_refuses_a_tie_rule_its_ranks_already_applied():
    t, _ = _population(M=5, N=50, m=4, r=3, seed=4)
    with pytest.raises(ValueError, match="ties='optimistic' applies to a scores table"):
        cascade_cells(_rank_table(t), 50, ties="optimistic")


def test_a_blank_user_or_model_is_an_error_not_a_user_dropped_or_named_nan():
    t, _ = _population(M=5, N=50, m=4, r=3, seed=4)
    blank = t.astype({"user": object})
    blank.loc[blank.user == 2, "user"] = np.nan
    with pytest.raises(ValueError, match=r"column 'user' of the cascade table is blank in row \d+"):
        cascade_estimate(blank, 50, n_boot=0)
    r = _rank_table(t).astype({"user": object})
    r.loc[1, "user"] = " "
    with pytest.raises(ValueError, match="column 'user' of the cascade table is blank in row 2"):
        cascade_cells(r, 50)
    with pytest.raises(ValueError, match="column 'model' of the cascade table is blank"):
        cascade_cells(_rank_table(t).assign(model=["a", None, "a", "a", "a"]), 50)
