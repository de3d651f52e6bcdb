"""One table schema whatever the input (issue 25).

``estimate`` and ``compare`` return the columns of ``ESTIMATE_COLUMNS`` /
``COMPARE_COLUMNS`` for sampled ranks, a counts table, a scores table (read
by ``sampling_lib.io``) and a popularity-sampled scores table, for every
registered estimator; columns that do not apply hold their documented value.
"""
import numpy as np
import pandas as pd
import pytest

from sampling_lib import io
from sampling_lib import popularity as pop
from sampling_lib.correct import COMPARE_COLUMNS, ESTIMATE_COLUMNS, compare, estimate
from sampling_lib.counts import rank_counts
from sampling_lib.estimators import METHODS, POPULARITY_METHODS, estimator_spec

N, n, M = 300, 20, 60
POP_ITEMS = 40


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(0)
    r = {m: np.minimum(rng.geometric(p, M), n) for m, p in (("A", 0.3), ("B", 0.15))}
    counts = pd.concat([rank_counts(v, n, n_items=N).to_frame().assign(model=m) for m, v in r.items()])
    # a scores table of the same ranks: the held-out item scores 0, the (r - 1) negatives above it 1
    rows = []
    for m, v in r.items():
        for u, ru in enumerate(v):
            rows += [(u, m, 0.0, 1)] + [(u, m, 1.0 if j < ru - 1 else -1.0, 0) for j in range(n - 1)]
    scores = io.ranks_from_score_table(pd.DataFrame(rows, columns=["user", "model", "score", "label"]))
    return r, counts, scores


@pytest.fixture(scope="module")
def popularity_table():
    """A popularity-sampled scores table with the logged q (as `sampling-lib negatives` writes it)."""
    rng = np.random.default_rng(1)
    items = POP_ITEMS
    w = pd.Series(rng.integers(1, 9, items).astype(float), index=np.arange(items))
    held = rng.integers(0, items, M)
    neg = pop.sample_popularity_negatives(np.arange(M), w, 8, held_out=held, rng=2)
    tables = []
    for m, sign in (("A", 1.0), ("B", -1.0)):
        t = pd.concat([pd.DataFrame({"user": np.arange(M), "item": held, "label": 1}), neg.assign(label=0)])
        t["score"] = sign * rng.random(len(t))
        tables.append(t.assign(model=m))
    return pd.concat(tables, ignore_index=True), w


@pytest.mark.parametrize("method", METHODS)
def test_estimate_and_compare_have_one_schema_for_ranks_counts_and_scores(inputs, method):
    r, counts, scores = inputs
    common = dict(metrics=["recall@10", "ndcg@5"], method=method, n_boot=2, rng=0)
    tables = {"ranks": estimate(r["A"], N, n, **common),
              "counts": estimate(counts[counts.model == "A"], None, None, **common),
              "scores": estimate(scores, N, None, **common)}
    for kind, t in tables.items():
        assert tuple(t.columns) == ESTIMATE_COLUMNS, kind
        assert t.bound_low.isna().all() and t.bound_high.isna().all(), kind       # not popularity input
        assert t.N.dtype == "Int64" and t.n.dtype == "Int64" and (t.N == N).all() and (t.n == n).all(), kind
        has_band = estimator_spec(method).alternatives is not None
        assert t.sensitivity_low.notna().all() == has_band, kind
    # the same users give the same numbers whatever the container (model A comes first: same draws)
    assert set(tables["counts"].model) == {"A"} and set(tables["scores"].model) == {"A", "B"}
    ref = tables["ranks"].drop(columns="model")
    for kind in ("counts", "scores"):
        t = tables[kind]
        pd.testing.assert_frame_equal(t[t.model == "A"].drop(columns="model").reset_index(drop=True), ref,
                                      obj=kind)
    d = {"ranks": compare(r, N, n, **common),
         "counts": compare(counts, None, None, **common),
         "scores": compare(scores, N, None, **common)}
    for kind, t in d.items():
        assert tuple(t.columns) == COMPARE_COLUMNS, kind
        assert t.paired.tolist() == [kind != "counts"] * len(t), kind


@pytest.mark.parametrize("method", POPULARITY_METHODS)
def test_popularity_input_has_the_same_schema(popularity_table, method):
    table, w = popularity_table
    t = estimate(table, metrics=["recall@10", "ndcg@5"], method=method, n_boot=2, rng=0)
    assert tuple(t.columns) == ESTIMATE_COLUMNS and t.model.tolist() == ["A", "A", "B", "B"]
    assert t.sensitivity_low.isna().all() and not t.clipped.any()
    assert t.bound_low.isna().all() and t.bound_high.isna().all()     # q logged, no item weights
    assert (t.N == POP_ITEMS).all() and (t.n == 8).all()
    tw = estimate(table, metrics=["recall@10", "ndcg@5"], method=method, n_boot=2, rng=0, item_weights=w)
    assert tuple(tw.columns) == ESTIMATE_COLUMNS and (tw.bound_low <= tw.bound_high).all()
    d = compare(table, metrics="recall@10", method=method, n_boot=2, rng=0)
    assert tuple(d.columns) == COMPARE_COLUMNS and d.paired.all()


def test_options_that_do_not_apply_raise(inputs, popularity_table):
    r, _, _ = inputs
    popularity_table = popularity_table[0]
    for kw, match in [({"N": 40}, "N does not apply"), ({"n": 8}, "n does not apply"),
                      ({"sample_sizes": np.full(M, 8)}, "sample_sizes does not apply"),
                      ({"scheme": "hypergeometric"}, "without replacement"),
                      ({"refit_prior": False}, "refit_prior=False"),
                      ({"method": "mle"}, "method must be one of")]:
        with pytest.raises(ValueError, match=match):
            estimate(popularity_table, n_boot=0, **kw)
    with pytest.raises(ValueError, match="exclude applies to popularity-sampled input"):
        estimate(r["A"], N, n, exclude=pd.DataFrame({"user": [0], "item": [1]}), n_boot=0)
    with pytest.raises(ValueError, match="refit_prior=False keeps a fitted prior fixed; method='mle'"):
        estimate(r["A"], N, n, method="mle", refit_prior=False, n_boot=0)
    with pytest.raises(ValueError, match="method must be one of .* for sampled ranks"):
        estimate(r["A"], N, n, method="pop_mle", n_boot=0)
