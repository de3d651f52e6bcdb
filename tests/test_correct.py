"""Tests of sampling_lib.correct: estimate/compare against direct estimator calls,
bootstrap determinism, input adapters and their tie rule, fixed negatives."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sampling_lib import estimators as E
from sampling_lib.correct import ESTIMATE_COLUMNS, compare, estimate
from sampling_lib.counts import bootstrap_counts, rank_counts
from sampling_lib.estimators import DEFAULT_METHOD, METHODS
from sampling_lib.io import SampledRanks, ranks_from_score_table, ranks_from_table
from sampling_lib.ranking import ranks_from_scores
from sampling_lib.sampling import sample_negatives
from sampling_lib.studies import simulate_coverage
from sampling_lib.metrics import metric_from_ranks, metric_values
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.sampling import adaptive_sample_ranks, sample_ranks
from sampling_lib.inference import adjust_pvalues

N, n, M = 200, 20, 300
METRICS = ["recall@10", "ndcg@10", "ap@20"]


@pytest.fixture(scope="module")
def ranks():
    pmf = synthetic_models(N)["beta_a0.35"]
    R = draw_global_ranks(pmf, M, rng=0)
    return sample_ranks(R, N, n, rng=1)


@pytest.fixture(scope="module")
def ranks2():
    pmf = synthetic_models(N)["beta_a0.50"]
    R = draw_global_ranks(pmf, M, rng=2)
    return sample_ranks(R, N, n, rng=3)


def _direct(method, r, prior_fixed=None, sizes=None):
    """The library's estimators called directly (the reference)."""
    if method == "mle":
        return E.mle(r, N, n)
    if method == "wmle":
        return E.wmle(r, N, n)
    if method == "mes":
        return E.mes(r, N, n)
    if method == "cls":
        return E.cls(r, N, n, max_rank=20)
    if method == "adaptive_mle":
        return E.adaptive_mle(r, sizes, N)
    if method == "logspline":
        return E.logspline(r, N, n)
    base, _, p = method.partition("_")
    prior = prior_fixed
    if prior is None and p:
        prior = E.mle(r, N, n) if p == "mle" else E.mes(r, N, n)
    return E.bv(r, N, n, 0.01, prior) if base == "bv" else E.mn(r, N, n, prior, M)


def _F():
    return np.stack([metric_values(m, N) for m in METRICS], axis=1)


# ----------------------------------------------------------------------------
# sufficient statistic and bootstrap draws
# ----------------------------------------------------------------------------
def test_rank_counts_roundtrip(ranks):
    c = rank_counts(ranks, n)
    assert c.M == M and np.all(c.counts > 0) and np.all(np.diff(c.ranks) > 0)
    r, s = c.expand()
    assert np.array_equal(np.sort(ranks), r) and np.all(s == n)


@pytest.mark.parametrize("bad, kw, match", [
    ([0, 1], dict(n=5), "sampled_ranks"),
    ([1, 6], dict(n=5), "n=5"),
    ([1.5, 2], dict(n=5), "sampled_ranks"),
    ([1, 2], dict(), "n .the sample size. is required"),
    ([1, 2], dict(n=1), "n"),
    ([1, 3], dict(sample_sizes=[4, 2]), "1..sample_size"),
    ([1, 2], dict(sample_sizes=[4]), "same length"),
    ([1, 2], dict(sample_sizes=[1, 4]), "sample_sizes must be >= 2"),
])
def test_rank_counts_rejects(bad, kw, match):
    with pytest.raises(ValueError, match=match):
        rank_counts(bad, **kw)


def test_bootstrap_counts_is_multinomial():
    b = bootstrap_counts([6, 3, 1], 4000, rng=0)
    assert b.shape == (4000, 3) and np.all(b.sum(axis=1) == 10)
    # mean and variance of a multinomial cell: M p, M p (1 - p)
    assert abs(b[:, 0].mean() - 6) < 4 * np.sqrt(2.4 / 4000)
    assert np.array_equal(b, bootstrap_counts([6, 3, 1], 4000, rng=0))


# ----------------------------------------------------------------------------
# estimate: point estimates and bootstrap replicates vs direct estimator calls
# ----------------------------------------------------------------------------
def test_estimate_table_layout(ranks):
    t = estimate(ranks, N, n, METRICS, n_boot=30, rng=0)
    assert list(t.columns[:11]) == ["model", "metric", "K", "naive", "naive_ci_low", "naive_ci_high",
                                    "estimate", "se", "ci_low", "ci_high", "method"]
    assert tuple(t.columns) == ESTIMATE_COLUMNS and (t.model == "model").all()
    assert t.metric.tolist() == METRICS and t.K.tolist() == [10, 10, 20]
    assert (t.method == DEFAULT_METHOD).all() and (t.users == M).all()
    assert np.all(t.ci_low <= t.ci_high)


@pytest.mark.parametrize("method", [m for m in METHODS if m != "adaptive_mle"])
def test_estimate_point_equals_direct_call(ranks, method):
    # source: the estimator functions of sampling_lib.estimators; tolerance: rounding only
    t = estimate(ranks, N, n, METRICS, method=method, n_boot=0)
    assert np.allclose(t.estimate, _direct(method, ranks) @ _F(), rtol=1e-10, atol=1e-12)
    naive = [metric_from_ranks(ranks, m) for m in METRICS]
    assert np.allclose(t.naive, naive, rtol=1e-12)
    assert t.ci_low.isna().all()


@pytest.mark.parametrize("method, refit", [("mle", True), ("wmle", True), ("bv", True), ("mn", True),
                                           ("bv_mle", False), ("mn_mle", False), ("mn_mle", True),
                                           ("bv_mes", True), ("mes", True)])
def test_bootstrap_equals_direct_calls_on_replicates(ranks, method, refit):
    """The percentile CI and se are those of the direct estimator on the same draws."""
    B, seed, ci = 12, 7, 0.8
    t = estimate(ranks, N, n, METRICS, method=method, n_boot=B, rng=seed, confidence_level=ci,
                 refit_prior=refit)
    c = rank_counts(ranks, n)
    g = np.random.default_rng(seed)
    Cb = g.multinomial(M, c.counts / M, size=B)          # one chunk (B < 64)
    fixed = None
    if not refit and "_" in method:
        fixed = E.mle(ranks, N, n) if method.endswith("mle") else E.mes(ranks, N, n)
    reps = np.array([_direct(method, c.expand(Cb[b])[0], prior_fixed=fixed) @ _F()
                     for b in range(B)])
    tol = 1e-7 if method in ("mes", "bv_mes") else 1e-10
    assert np.allclose(t.se, reps.std(axis=0, ddof=1), rtol=tol, atol=tol)
    assert np.allclose(t.ci_low, np.quantile(reps, 0.1, axis=0), rtol=tol, atol=tol)
    assert np.allclose(t.ci_high, np.quantile(reps, 0.9, axis=0), rtol=tol, atol=tol)


def test_fixed_prior_bootstrap_is_a_matrix_product(ranks):
    """BV with a fixed prior: replicate = (counts_b / M) @ X, X = sampled metric per rank."""
    F = metric_values("ndcg@10", N)
    x = E.bv_sampled_metric(F, N, n, 0.01, None)
    t = estimate(ranks, N, n, "ndcg@10", method="bv", n_boot=20, rng=3)
    c = rank_counts(ranks, n)
    Cb = np.random.default_rng(3).multinomial(M, c.counts / M, size=20)
    reps = (Cb / M) @ x[c.ranks - 1]
    assert np.isclose(t.se[0], reps.std(ddof=1), rtol=1e-10)


def test_adaptive_point_and_bootstrap(ranks):
    pmf = synthetic_models(N)["mixture"]
    R = draw_global_ranks(pmf, M, rng=5)
    r, s = adaptive_sample_ranks(R, N, 10, 80, rng=6)
    # issue 29: varying sizes no longer switch the method silently; the default takes them
    d = estimate(r, N, metrics=METRICS, sample_sizes=s, n_boot=0)
    assert (d.method == DEFAULT_METHOD).all() and d.n.isna().all() and (d.N == N).all()
    t = estimate(r, N, metrics=METRICS, sample_sizes=s, method="adaptive_mle", n_boot=10, rng=1)
    assert (t.method == "adaptive_mle").all() and t.n.isna().all()
    assert np.allclose(t.estimate, E.adaptive_mle(r, s, N) @ _F(), rtol=1e-10)
    c = rank_counts(r, sample_sizes=s)
    Cb = np.random.default_rng(1).multinomial(M, c.counts / M, size=10)
    reps = np.array([E.adaptive_mle(*c.expand(Cb[b]), N) @ _F() for b in range(10)])
    assert np.allclose(t.se, reps.std(axis=0, ddof=1), rtol=1e-9)
    with pytest.raises(ValueError, match="adaptive_mle"):
        estimate(r, N, metrics=METRICS, sample_sizes=s, method="mle")


def test_converged_mle_bootstrap_warm_start(ranks):
    """With a tolerance the MLE is solved to convergence; replicates warm-start from the point fit."""
    opts = dict(tol=1e-3, max_iter=5000, accelerate="squarem")
    t = estimate(ranks, N, n, "recall@10", method="mle", options=opts, n_boot=4, rng=2)
    F = metric_values("recall@10", N)
    w = E.mle(ranks, N, n, **opts)
    assert np.isclose(t.estimate[0], w @ F, rtol=1e-12)
    c = rank_counts(ranks, n)
    Cb = np.random.default_rng(2).multinomial(M, c.counts / M, size=4)
    reps = np.array([E.mle(c.expand(Cb[b])[0], N, n, init=w, **opts) @ F for b in range(4)])
    assert np.isclose(t.se[0], reps.std(ddof=1), rtol=1e-10)


def test_bootstrap_determinism(ranks):
    a = estimate(ranks, N, n, METRICS, n_boot=100, rng=11)
    b = estimate(ranks, N, n, METRICS, n_boot=100, rng=11)
    c = estimate(ranks, N, n, METRICS, n_boot=100, rng=12)
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a.ci_low, c.ci_low)


@pytest.mark.parametrize("kw, match", [
    (dict(method="nope"), "method must be one of"),
    (dict(confidence_level=1.0), "confidence_level"),
    (dict(n_boot=-1), "n_boot"),
    (dict(metrics=["recall"]), "cutoff"),
    (dict(metrics=[]), "at least one metric"),
])
def test_estimate_rejects(ranks, kw, match):
    args = dict(metrics=["recall@10"])
    args.update(kw)
    with pytest.raises((ValueError, TypeError), match=match):
        estimate(ranks, N, n, **args)


def test_estimate_rejects_n_above_N():
    with pytest.raises(ValueError, match="n must lie in 2..N"):
        estimate([1, 2], 10, 20)


# ----------------------------------------------------------------------------
# compare
# ----------------------------------------------------------------------------
def test_compare_holm_and_pairing(ranks, ranks2):
    d = {"A": ranks, "B": ranks2, "C": ranks.copy()}
    t = compare(d, N, n, ["recall@10", "ndcg@10"], n_boot=100, rng=0)
    assert len(t) == 6 and set(t.n_comparisons) == {3}
    for _, g in t.groupby("metric"):
        rej, padj = adjust_pvalues(g.pvalue.to_numpy(), "holm", 0.05)
        assert np.allclose(padj, g.pvalue_adjusted) and np.array_equal(rej, g.reject)
    ac = t[(t.model_a == "A") & (t.model_b == "C")]
    assert np.all(ac.difference == 0) and np.all(ac.se == 0) and not ac.reject.any()
    # point estimates are those of estimate()
    e = estimate(ranks, N, n, ["recall@10", "ndcg@10"], n_boot=0)
    assert np.allclose(t[t.model_a == "A"].groupby("metric", sort=False).estimate_a.first(),
                       e.estimate)
    t2 = compare(d, N, n, ["recall@10", "ndcg@10"], n_boot=100, rng=0)
    pd.testing.assert_frame_equal(t, t2)


def test_compare_paired_se_matches_direct(ranks, ranks2):
    """Paired replicate = the same resampled users for both models."""
    B = 10
    t = compare({"A": ranks, "B": ranks2}, N, n, "recall@10", method="mle", n_boot=B, rng=4)
    U = np.stack([ranks, ranks2], axis=1)
    tup, cnt = np.unique(U, axis=0, return_counts=True)
    Ct = np.random.default_rng(4).multinomial(M, cnt / M, size=B)
    F = metric_values("recall@10", N)
    diffs = [E.mle(np.repeat(tup[:, 0], Ct[b]), N, n) @ F - E.mle(np.repeat(tup[:, 1], Ct[b]), N, n) @ F
             for b in range(B)]
    assert np.isclose(t.se[0], np.std(diffs, ddof=1), rtol=1e-9)


def test_compare_paired_se_matches_direct_default(ranks, ranks2):
    """The default (logspline): batched refits agree with full refits of the same replicates."""
    B = 6
    t = compare({"A": ranks, "B": ranks2}, N, n, "recall@10", n_boot=B, rng=4)
    assert t.method[0] == "logspline"
    U = np.stack([ranks, ranks2], axis=1)
    tup, cnt = np.unique(U, axis=0, return_counts=True)
    Ct = np.random.default_rng(4).multinomial(M, cnt / M, size=B)
    F = metric_values("recall@10", N)
    diffs = [E.logspline(np.repeat(tup[:, 0], Ct[b]), N, n) @ F
             - E.logspline(np.repeat(tup[:, 1], Ct[b]), N, n) @ F for b in range(B)]
    assert np.isclose(t.se[0], np.std(diffs, ddof=1), rtol=1e-3)


def test_estimate_default_interval_holds_the_sensitivity_band(ranks):
    t = estimate(ranks, N, n, METRICS, n_boot=50, rng=0)
    assert (t.method == "logspline").all()
    assert np.all(t.ci_low <= t.sensitivity_low + 1e-15) and np.all(t.ci_high >= t.sensitivity_high - 1e-15)
    assert np.all(t.ci_low <= t.estimate) and np.all(t.estimate <= t.ci_high)
    F = _F()
    alt = np.stack([E.logspline(ranks, N, n, penalty=E.DEFAULT_PENALTY * f) @ F
                    for f in (1 / E.SENSITIVITY_FACTOR, E.SENSITIVITY_FACTOR)])
    np.testing.assert_allclose(t.sensitivity_low, alt.min(axis=0), rtol=1e-12)
    np.testing.assert_allclose(t.sensitivity_high, alt.max(axis=0), rtol=1e-12)
    # published estimators have no band: plain percentile interval
    m = estimate(ranks, N, n, METRICS, method="mle", n_boot=50, rng=0)
    assert m.sensitivity_low.isna().all()


def test_estimate_default_interval_is_the_union_over_the_alternative_penalties_below_resolution(ranks):
    # independent computation: the same bootstrap draws (rank counts, chunks of
    # _BOOT_CHUNK from one Generator), a full refit of each penalty on every
    # replicate, percentile intervals, union with the point estimates below
    # resolution (K < w = 199/19: recall@10, ndcg@10), the default's own interval above (ap@20)
    from sampling_lib.counts import BOOT_CHUNK as _BOOT_CHUNK

    B = 40
    t = estimate(ranks, N, n, METRICS, n_boot=B, rng=3)
    F = _F()
    cnt = np.bincount(ranks - 1, minlength=n)
    cells = np.flatnonzero(cnt)
    g = np.random.default_rng(3)
    Cb = np.concatenate([g.multinomial(ranks.size, cnt[cells] / ranks.size, size=min(_BOOT_CHUNK, B - a))
                         for a in range(0, B, _BOOT_CHUNK)])
    lo, hi = np.full(F.shape[1], np.inf), np.full(F.shape[1], -np.inf)
    below = np.array([10, 10, 20]) < (N - 1) / (n - 1)
    assert below.tolist() == [True, True, False] == t.below_resolution.tolist()
    for f in (1.0, 1 / E.SENSITIVITY_FACTOR, E.SENSITIVITY_FACTOR):
        pen = E.DEFAULT_PENALTY * f
        reps = np.stack([E.logspline(np.repeat(cells + 1, c), N, n, penalty=pen) @ F for c in Cb])
        point = E.logspline(ranks, N, n, penalty=pen) @ F
        q = np.quantile(reps, [0.025, 0.975], axis=0)
        if f == 1.0:
            own = q
        lo, hi = np.minimum(lo, np.minimum(q[0], point)), np.maximum(hi, np.maximum(q[1], point))
    lo, hi = np.where(below, lo, own[0]), np.where(below, hi, own[1])
    np.testing.assert_allclose(t.ci_low, lo, rtol=2e-3)
    np.testing.assert_allclose(t.ci_high, hi, rtol=2e-3)


def test_estimate_below_resolution_column(ranks):
    t = estimate(ranks, N, n, ["recall@1", "recall@50"], n_boot=0)
    w = (N - 1) / (n - 1)
    assert t.below_resolution.tolist() == [1 < w, 50 < w]


def test_compare_detects_a_clear_difference(ranks):
    rng = np.random.default_rng(0)
    worse = np.minimum(n, ranks + rng.integers(3, 8, ranks.size))
    t = compare({"good": ranks, "bad": worse}, N, n, "recall@10", n_boot=200, rng=1)
    assert t.decision[0] == "good > bad"


@pytest.mark.parametrize("arg, match", [
    ({"A": [1, 2, 3]}, "at least 2 models"),
    ({"A": [1, 2, 3], "B": [1, 2]}, "same users"),
    ([1, 2, 3], "dict"),
])
def test_compare_rejects(arg, match):
    with pytest.raises((ValueError, TypeError), match=match):
        compare(arg, N, n, "recall@10", n_boot=10)


# ----------------------------------------------------------------------------
# adapters
# ----------------------------------------------------------------------------
# hand-made reference: pos 0.5 vs negatives [0.1, 0.5, 0.7]: one above, one tie
@pytest.mark.parametrize("ties, expected", [("pessimistic", 3), ("optimistic", 2)])
def test_ranks_from_scores_tie_rule(ties, expected):
    r, s = ranks_from_scores([0.5], [[0.1, 0.5, 0.7]], ties=ties)
    assert r.tolist() == [expected] and s.tolist() == [4]


def test_ranks_from_scores_random_ties_and_nan():
    pos = np.zeros(2000)
    neg = np.zeros((2000, 3))                       # all tied: uniform on 1..4
    r, _ = ranks_from_scores(pos, neg, ties="random", rng=0)
    assert set(r) == {1, 2, 3, 4} and abs(r.mean() - 2.5) < 0.1
    r2, s2 = ranks_from_scores([1.0], [[2.0, np.nan, 0.0]])
    assert r2.tolist() == [2] and s2.tolist() == [3]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=8), st.integers(0, 3))
def test_tie_rules_bracket_random(negs, pos):
    neg = np.array([negs], dtype=float)
    lo = ranks_from_scores([pos], neg, ties="optimistic")[0][0]
    hi = ranks_from_scores([pos], neg, ties="pessimistic")[0][0]
    rnd = ranks_from_scores([pos], neg, ties="random", rng=0)[0][0]
    assert 1 <= lo <= rnd <= hi <= len(negs) + 1
    assert hi - lo == sum(v == pos for v in negs)


@pytest.mark.parametrize("pos, neg, match", [
    ([np.nan], [[1.0]], "finite"),
    ([1.0], [1.0], "shape"),
    ([1.0], [[np.inf]], "inf"),
    ([1.0], [[np.nan]], "at least one negative"),
])
def test_ranks_from_scores_rejects(pos, neg, match):
    with pytest.raises(ValueError, match=match):
        ranks_from_scores(pos, neg)


def test_score_table_equals_arrays():
    rng = np.random.default_rng(0)
    pos = rng.integers(0, 5, 30).astype(float)
    neg = rng.integers(0, 5, (30, 6)).astype(float)
    rows = []
    for u in range(30):
        rows.append(dict(user=u, score=pos[u], label=1))
        rows += [dict(user=u, score=v, label=0) for v in neg[u]]
    df = pd.DataFrame(rows).sample(frac=1, random_state=1)     # order must not matter
    for ties in ("pessimistic", "optimistic"):
        s = ranks_from_score_table(df, ties=ties)
        r_ref, n_ref = ranks_from_scores(pos, neg, ties=ties)
        got = s.ranks["model"].reindex(range(30)).to_numpy()
        assert np.array_equal(got, r_ref)
        assert np.all(s.sample_sizes["model"] == 7)


def test_ranks_from_table_models_and_errors(tmp_path):
    df = pd.DataFrame({"user": [1, 2, 3, 1, 2, 3], "model": list("AAABBB"),
                       "rank": [1, 4, 2, 3, 3, 1]})
    s = ranks_from_table(df, n=5)
    assert isinstance(s, SampledRanks) and s.models == ["A", "B"]
    assert s.for_model("A")[0].tolist() == [1, 4, 2]
    p = tmp_path / "r.csv"
    df.to_csv(p, index=False)
    assert ranks_from_table(p).for_model("B")[0].tolist() == [3, 3, 1]
    bad = [
        (df.drop(columns="rank"), "column"),
        (df.assign(rank=["x", 1, 2, 3, 4, 5]), "integers"),
        (df.assign(rank=[0, 1, 2, 3, 4, 5]), ">= 1"),
        (pd.concat([df, df.iloc[:1]]), "appear once"),
    ]
    for frame, match in bad:
        with pytest.raises(ValueError, match=match):
            ranks_from_table(frame, n=5)
    with pytest.raises(ValueError, match="1..n=3"):
        ranks_from_table(df, n=3)
    with pytest.raises(FileNotFoundError):
        ranks_from_table(tmp_path / "missing.csv")


# ----------------------------------------------------------------------------
# negatives
# ----------------------------------------------------------------------------
def test_sample_negatives_rules():
    users = np.arange(40)
    held = (users * 7) % 60
    excl = pd.DataFrame({"user": np.repeat(users, 5), "item": (np.arange(200) * 13) % 60})
    neg = sample_negatives(users, 60, 11, exclude=excl, held_out=held, rng=0)
    assert neg.groupby("user").size().eq(10).all() and neg.user.tolist()[:10] == [0] * 10
    assert neg["item"].between(0, 59).all()
    ex = set(zip(excl.user, excl["item"])) | set(zip(users, held))
    assert not any((u, i) in ex for u, i in zip(neg.user, neg["item"]))
    assert not neg.duplicated().any()                                  # distinct per user
    pd.testing.assert_frame_equal(neg, sample_negatives(users, 60, 11, exclude=excl,
                                                        held_out=held, rng=0))
    # dense exclusion path (choice) and uniformity over the allowed items
    big = sample_negatives(np.arange(3000), 12, 4, held_out=np.zeros(3000, int), rng=1)
    freq = np.bincount(big["item"], minlength=12)
    assert freq[0] == 0 and freq[1:].min() > 0.8 * freq[1:].mean()


def test_sample_negatives_rejects():
    with pytest.raises(ValueError, match="candidate negatives"):
        sample_negatives([1], 5, 5, held_out=[0], exclude={1: [1]})
    with pytest.raises(ValueError, match="n must lie in 2..N"):
        sample_negatives([1], 5, 6)
    with pytest.raises(ValueError, match="unique"):
        sample_negatives([1, 1], 50, 5)
    with pytest.raises(ValueError, match="0..N-1"):
        sample_negatives([1], 50, 5, held_out=[50])


# ----------------------------------------------------------------------------
# coverage simulator (tiny)
# ----------------------------------------------------------------------------
def test_simulate_coverage_shape_and_naive_far_off():
    d = simulate_coverage(synthetic_models(300)["beta_a0.35"], 30, 300, 3, "recall@10",
                          n_boot=40, rng=0)
    assert len(d) == 3 and d.naive_covered.sum() == 0     # naive HR@10 of 30 >> global HR@10
    assert np.all(d.truth == d.truth[0])


def test_bootstrap_chunks_follow_the_cells_and_draw_the_same_replicates():
    """Chunks grow to BOOT_CHUNK_MAX replicates while a chunk's counts stay within
    BOOT_CHUNK_ENTRIES entries (never below BOOT_CHUNK); the replicates are those of one
    multinomial draw of all of them, whatever the chunk size."""
    from sampling_lib.counts import (BOOT_CHUNK, BOOT_CHUNK_ENTRIES, BOOT_CHUNK_MAX, boot_chunk,
                                     bootstrap_loop)

    p = np.random.default_rng(0).dirichlet(np.ones(300))
    chunks = bootstrap_loop(600, np.random.default_rng(1), lambda k, g: g.multinomial(1000, p, size=k),
                            lambda x: x, cells=p.size)
    assert [c.shape[0] for c in chunks] == [BOOT_CHUNK_MAX, BOOT_CHUNK_MAX, 600 - 2 * BOOT_CHUNK_MAX]
    np.testing.assert_array_equal(np.concatenate(chunks), np.random.default_rng(1).multinomial(1000, p, size=600))
    assert [c.shape[0] for c in bootstrap_loop(150, np.random.default_rng(1), lambda k, g: np.zeros(k),
                                                lambda x: x)] == [BOOT_CHUNK, BOOT_CHUNK, 150 - 2 * BOOT_CHUNK]
    for cells in (1, BOOT_CHUNK_ENTRIES // BOOT_CHUNK_MAX, BOOT_CHUNK_ENTRIES // BOOT_CHUNK_MAX + 1, 10**5, 10**9):
        k = boot_chunk(cells)
        assert BOOT_CHUNK <= k <= BOOT_CHUNK_MAX
        assert k * cells <= BOOT_CHUNK_ENTRIES or k == BOOT_CHUNK
        assert k == BOOT_CHUNK_MAX or 2 * k * cells > BOOT_CHUNK_ENTRIES       # the largest that fits
    with pytest.raises(ValueError, match="n_cells"):
        boot_chunk(0)


# ---------------------------------------------------------------------------- full ranking's interval, estimated
def test_full_halfwidth_is_full_rankings_own_when_every_user_is_ranked_in_full():
    """Every user ranked in full (n = N, without replacement): the weights are the users' empirical
    P(R), so the estimated full-ranking half-width is z sd(F(R)) / sqrt(M) of the true ranks exactly."""
    from scipy import stats
    NN = 2000
    R = draw_global_ranks(synthetic_models(NN)["beta_a0.35"], 1500, rng=0)
    t = estimate(R, NN, NN, ["recall@10", "ndcg@10", "ap@20"], n_boot=50, rng=1, scheme="hypergeometric")
    F = np.stack([metric_values(m, NN) for m in ("recall@10", "ndcg@10", "ap@20")], axis=1)[R - 1]
    want = stats.norm.ppf(0.975) * F.std(axis=0) / np.sqrt(R.size)
    np.testing.assert_allclose(t.full_halfwidth.to_numpy(), want, rtol=1e-9)
    np.testing.assert_allclose(t.precision_ratio, (t.ci_high - t.ci_low) / (2 * t.full_halfwidth), rtol=1e-12)


@pytest.mark.parametrize("design", ["single", "ladder"])
def test_full_halfwidth_of_recall_estimates_the_users_own_within_its_error(design):
    """Recall@K (F^2 = F): the estimated full-ranking half-width is z sqrt(p (1 - p) / M) at the estimate
    p (an identity, any input). Against the users' true ranks it is off by at most 4 standard errors of
    that function of p (|1 - 2p| / (2 p (1 - p)) times the bootstrap se of p, relative), whether the
    metric is resolved (a ladder) or below resolution (one stage)."""
    from scipy import stats
    from sampling_lib.sampling import Design, sample_design
    NN, MM = 20000, 5000
    R = draw_global_ranks(synthetic_models(NN)["beta_a0.35"], MM, rng=3)
    if design == "single":
        r, s = sample_ranks(R, NN, 100, rng=4), None
    else:
        r, s = sample_design(R, NN, Design("ladder", 100, n_max=3200), rng=4)
    t = estimate(r, NN, 100 if s is None else None, "recall@10", sample_sizes=s, n_boot=200, rng=5).iloc[0]
    z = stats.norm.ppf(0.975)
    p = t.estimate
    assert t.full_halfwidth == pytest.approx(z * np.sqrt(p * (1 - p) / MM), rel=1e-9)
    truth = z * (R <= 10).std() / np.sqrt(MM)
    tol = 4 * abs(1 - 2 * p) / (2 * p * (1 - p)) * t.se
    assert abs(t.full_halfwidth / truth - 1) <= tol, (t.full_halfwidth, truth, tol)


def test_compare_names_a_user_that_one_model_lacks():
    """SampledRanks of a ranks table where one model has no row for a user: the error names the user and model
    (it gave only the count of missing users per model)."""
    df = pd.DataFrame({"user": ["u1", "u2", "u3", "u1", "u3"], "model": ["A", "A", "A", "B", "B"],
                       "rank": [1, 2, 3, 2, 1]})
    with pytest.raises(ValueError, match=r"\{'B': 1\}, e.g. user 'u2' has no rank of model 'B'"):
        compare(ranks_from_table(df), N, n, "recall@10", n_boot=10)
