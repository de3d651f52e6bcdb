"""Tests of leave-one-dataset-out tuning (studies.tuning), the AAAI23 protocol (studies.aaai23) and the
negative-scores candidate (studies.tail) -- issue 28."""
import numpy as np
import pandas as pd
import pytest

from sampling_lib import studies
from sampling_lib.metrics import metric_values


def _errors(table):
    rows = [dict(family=f, metric=m, estimator=e, error=v, evaluations=1, failures=0)
            for f, m, e, v in table]
    return pd.DataFrame(rows)


def test_the_held_out_family_never_influences_its_own_choice():
    base = [("a", "recall", "x", 5.0), ("a", "recall", "y", 9.0), ("a", "recall", "mle", 10.0),
            ("b", "recall", "x", 7.0), ("b", "recall", "y", 8.0), ("b", "recall", "mle", 10.0),
            ("c", "recall", "x", 6.0), ("c", "recall", "y", 9.5), ("c", "recall", "mle", 10.0)]
    lodo = studies.leave_one_dataset_out(_errors(base), ["x", "y"])
    assert lodo.set_index("held_out").chosen.to_dict() == {"a": "x", "b": "x", "c": "x", "(none)": "x"}
    # making x terrible on a changes every choice that sees a, and not the choice without it
    worse = [(f, m, e, 1000.0 if (f, e) == ("a", "x") else v) for f, m, e, v in base]
    lodo2 = studies.leave_one_dataset_out(_errors(worse), ["x", "y"])
    assert lodo2.set_index("held_out").chosen.to_dict() == {"a": "x", "b": "y", "c": "y", "(none)": "y"}
    assert lodo2.set_index("held_out").held_out_ratio["a"] == pytest.approx(100.0)
    assert lodo2.set_index("held_out").train_ratio["a"] == pytest.approx(np.sqrt(0.7 * 0.6))
    comp = studies.held_out_comparison(_errors(worse), lodo2, default="y")
    row = comp.set_index("family").loc["a"]
    assert row.best_published == "mle" and not row.wins and row.default_error == 9.0
    with pytest.raises(ValueError, match="candidates not in the panel"):
        studies.leave_one_dataset_out(_errors(base), ["z"])


def test_family_errors_pool_the_catalogues_of_one_family():
    rows = []
    for ds, err in (("lastfm-2k", 0.1), ("lastfm-2k (>=5 users/item)", 0.3), ("ml-100k", 0.2)):
        for K in (1, 2):
            rows.append(dict(dataset=ds, model="m", n=10, M=5, draw=0, estimator="x", metric="recall", K=K,
                             estimate=1.0, rel_error=err))
    e = studies.family_errors(pd.DataFrame(rows)).set_index("family")
    assert e.loc["lastfm-2k", "error"] == pytest.approx(20.0) and e.loc["lastfm-2k", "evaluations"] == 2
    assert e.loc["ml-100k", "error"] == pytest.approx(20.0)


def test_union_intervals_is_the_default_interval_form():
    keys = dict(dataset="d", model="m", N=100, n=10, M=50, draw=0, metric="recall@10", K=10, truth=0.5,
                full_low=0.45, full_high=0.55, below_resolution=True)
    iv = pd.DataFrame([{**keys, "penalty": p, "estimate": e, "lo": lo, "hi": hi}
                       for p, e, lo, hi in ((7.0, 0.40, 0.35, 0.48), (70.0, 0.52, 0.50, 0.56),
                                            (700.0, 0.60, 0.58, 0.66))])
    one = studies.union_intervals(iv, 70.0, 1).iloc[0]
    assert (one.ci_low, one.ci_high, bool(one.covered)) == (0.50, 0.56, True)
    ten = studies.union_intervals(iv, 70.0, 10).iloc[0]
    assert (ten.ci_low, ten.ci_high, ten.estimate) == (0.35, 0.66, 0.52)
    assert ten.precision_ratio == pytest.approx(0.31 / 0.10)
    with pytest.raises(ValueError, match="lacks the penalties"):
        studies.union_intervals(iv, 70.0, 3)
    # a resolved metric keeps the fitted penalty's own percentile interval, as estimate does (the union
    # over the alternatives is only for metrics below resolution)
    resolved = studies.union_intervals(iv.assign(below_resolution=False), 70.0, 10).iloc[0]
    assert (resolved.ci_low, resolved.ci_high, resolved.estimate) == (0.50, 0.56, 0.52)
    assert resolved.precision_ratio == pytest.approx(0.06 / 0.10)


def test_penalty_intervals_share_the_bootstrap_draws():
    N = 400
    g = np.random.default_rng(0)
    R = np.minimum(N, np.ceil(np.exp(g.uniform(0, np.log(N), 500)))).astype(np.int64)
    iv = studies.penalty_intervals({("d", "m"): (R, N)}, (7.0, 70.0, 700.0), metrics=("recall@10",),
                                   sample_sizes=(20,), user_counts=(None,), draws=1, n_boot=50)
    assert sorted(iv.penalty) == [7.0, 70.0, 700.0] and iv.truth.nunique() == 1
    assert iv.truth.iloc[0] == pytest.approx(np.mean(R <= 10))
    assert (iv.lo <= iv.hi).all()
    choice, per = studies.choose_factor(iv, 70.0, (1.0, 10.0))
    assert list(choice.held_out) == ["d", "(none)"] and set(per.factor) == {1.0, 10.0}


# --------------------------------------------------------------------------- AAAI23
def test_aaai23_models_share_their_negatives():
    from sampling_lib.data import synthetic_ratings

    r = synthetic_ratings(150, 80, rng=1)
    models = {"pop": ("popularity", {}), "knn": ("itemknn", {})}
    R, N, s = studies.aaai23_ranks(r, models, sample_sizes=(20,), repeats=3, rng=0)
    assert set(s) == {("pop", 20), ("knn", 20)} and s[("pop", 20)].shape == (3, R["pop"].size)
    # the kernel of the protocol: training items keep their scores (ranks among all N items)
    assert R["pop"].max() <= N
    # one seed per n: the same negatives for every model, so a model sampled twice ranks identically
    _, _, s2 = studies.aaai23_ranks(r, {"knn": ("itemknn", {})}, sample_sizes=(20,), repeats=3, rng=0)
    np.testing.assert_array_equal(s2[("knn", 20)], s[("knn", 20)])


def test_aaai23_table_and_winners():
    rows = []
    for rep, (ea, eb) in enumerate([(0.30, 0.20), (0.10, 0.20)]):
        for model, e, t in (("a", ea, 0.25), ("b", eb, 0.22)):
            rows.append(dict(model=model, n=100, repeat=rep, estimator="x", metric="recall", K=10,
                             estimate=e, truth=t))
    res = pd.DataFrame(rows)
    w = studies.aaai23_winners(res, Ks=(10,)).iloc[0]
    assert (w.true_winner, w.correct, w.repeats) == ("a", 1, 2)
    t = studies.aaai23_table(res).set_index("model")
    assert t.loc["a", "mean"] == pytest.approx(100 * np.mean([0.05 / 0.25, 0.15 / 0.25]))
    assert t.loc["a", "sd"] == pytest.approx(100 * 0.2)         # np.std, ddof 0, as AAAI23's code


# --------------------------------------------------------------------------- negative scores
def test_pooled_tail_recovers_the_ranks_of_a_common_score_shape():
    # every user's scores over N items are one shape (a Gumbel) shifted and scaled: the pooled
    # standardized negatives then give each held-out item's rank without the first-bin ambiguity
    g = np.random.default_rng(0)
    M, N, n = 600, 5000, 100
    R = np.minimum(N, np.ceil(np.exp(g.uniform(0, np.log(N), M)))).astype(np.int64)
    loc, scale = g.normal(0, 3, M), g.uniform(0.5, 2, M)
    # the held-out score at the (1 - (R - 1)/(N - 1)) quantile of the user's Gumbel scores
    q = 1.0 - (R - 0.5) / N
    pos = loc + scale * -np.log(-np.log(q))
    neg = loc[:, None] + scale[:, None] * g.gumbel(size=(M, n - 1))
    r = 1 + (neg >= pos[:, None]).sum(axis=1)
    zpos, Z = studies.standardized_scores(pos, neg)
    F = np.stack([metric_values(f"recall@{k}", N)[:50] for k in (5, 20, 50)], axis=1)
    est, fit = studies.tail_eb_estimate(r, zpos, Z, N, n, F, return_fit=True)
    truth = np.array([np.mean(R <= k) for k in (5, 20, 50)])
    np.testing.assert_allclose(est, truth, rtol=0.15)
    assert fit["sigma"] < 0.6
    with pytest.raises(ValueError, match="n must be >= 5"):
        studies.tail_eb_estimate(r, zpos, Z[:, :2], N, 3, F)


def test_score_draws_follow_the_binomial_kernel_of_the_global_ranks():
    from sampling_lib.data import leave_one_out, synthetic_ratings
    from sampling_lib.recommenders import global_ranks, make_recommender

    split = leave_one_out(synthetic_ratings(400, 120, rng=2))
    model = make_recommender("itemknn").fit(split.train)
    R = global_ranks(model, split.train, split.test_items)
    r, zpos, Z = studies.score_draws(model, split.train, split.test_items, 30, rng=0)
    N = split.n_items
    # E[r - 1 | R] = (n - 1)(R - 1)/(N - 1): the mean over users agrees within 4 standard errors
    p = (R - 1) / (N - 1)
    se = np.sqrt(np.sum(29 * p * (1 - p))) / R.size
    assert abs(np.mean(r - 1) - np.mean(29 * p)) < 4 * se
    assert Z.shape == (R.size, 29) and np.all((zpos > Z.max(axis=1)) == (r == 1))
