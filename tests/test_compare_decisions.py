"""compare's decision and interval come from one construction (issue 27 item 3).

The p-value is the test the percentile interval inverts (inference.percentile_pvalue): with a
Bonferroni adjustment and alpha = 1 - confidence_level a pair is decided exactly when its interval
excludes 0. Before, the p-value was a normal approximation (z = difference / se) beside a percentile
interval: "difference -0.0323, CI [-0.0622, 0.0005], p = 0.0425, decision bpr < neumf".
"""
import numpy as np
import pytest

from sampling_lib import _display
from sampling_lib.correct import compare
from sampling_lib.inference import bootstrap_pairwise_rows, percentile_interval, percentile_pvalue
from sampling_lib.metrics import parse_metrics


def test_percentile_pvalue_is_the_inverted_interval():
    g = np.random.default_rng(0)
    for _ in range(1000):                        # 4,000 (sample, level) pairs; 3,000 samples took 3.5 s
        B = int(g.integers(2, 80))
        d = g.normal(g.normal(0, 1.5), 1, B)
        if g.random() < 0.3:
            d = np.round(d)                      # ties and exact zeros
        p = percentile_pvalue(d)
        assert 0.0 <= p <= 1.0
        for a in g.uniform(0, 1, 4):
            if abs(a - p) < 1e-12:
                continue
            lo, hi = percentile_interval(d, 1 - a)
            assert (lo > 0 or hi < 0) == (p < a), (d, p, a, lo, hi)


def test_percentile_pvalue_edges():
    assert percentile_pvalue(np.ones(50)) == 0.0                # every replicate above 0
    assert percentile_pvalue(-np.ones(50)) == 0.0
    assert percentile_pvalue(np.zeros(50)) == 1.0               # the null value itself
    assert percentile_pvalue(np.array([-1.0, 1.0])) == 1.0      # 0 is the median
    assert np.isnan(percentile_pvalue([1.0]))


def test_skewed_replicates_no_longer_contradict():
    """A left-skewed bootstrap distribution: the normal approximation rejected (z = 2.2, p = 0.028)
    while the percentile interval contained 0 (about 4% of the replicates lie below 0; fails on the
    old code)."""
    g = np.random.default_rng(3)
    b = g.exponential(1.0, 2000)
    db = -(b - b.mean()) + 2.2 * b.std()
    assert 0.03 < np.mean(db < 0) < 0.06
    boot = {"A": db[:, None], "B": np.zeros((db.size, 1))}
    point = {"A": np.array([2.2 * b.std()]), "B": np.array([0.0])}
    rows = bootstrap_pairwise_rows(parse_metrics("recall@10"), point, boot, 0.95, adjust="bonferroni",
                                   alpha=0.05, extra={})
    r = rows[0]
    contains = r["ci_low"] <= 0 <= r["ci_high"]
    assert contains and r["statistic"] == pytest.approx(2.2, rel=1e-3)
    assert r["reject"] == (not contains)
    assert r["pvalue"] == pytest.approx(percentile_pvalue(db))


@pytest.mark.parametrize("seed", range(4))
def test_bonferroni_decisions_equal_the_intervals(seed):
    g = np.random.default_rng(seed)
    M, N, n = 300, 2000, 100
    R = {m: np.minimum(N, 1 + np.floor(np.exp(g.exponential(s, M)))).astype(int)
         for m, s in zip("ABC", (3.0, 3.1, 3.6))}
    r = {m: 1 + g.binomial(n - 1, (x - 1) / (N - 1)) for m, x in R.items()}
    t = compare(r, N, n, ("recall@50", "ndcg@50", "recall@200"), n_boot=200, rng=seed, adjust="bonferroni",
                alpha=0.05, confidence_level=0.95)
    excludes = (t.ci_low > 0) | (t.ci_high < 0)
    assert (t.reject == excludes).all(), t[["difference", "ci_low", "ci_high", "pvalue", "reject"]]
    assert ((t.pvalue_adjusted <= 0.05) == t.reject).all()


def test_compare_view_says_why_holm_and_the_interval_differ():
    import pandas as pd
    t = pd.DataFrame({"metric": ["recall@50"], "K": [50], "model_a": ["A"], "model_b": ["B"], "estimate_a": [0.3],
                      "estimate_b": [0.2], "difference": [0.1], "ci_low": [-0.01], "ci_high": [0.15],
                      "pvalue_adjusted": [0.03], "reject": [True], "decision": ["A > B"], "ci_level": [0.99],
                      "n_comparisons": [5], "adjust": ["holm"], "alpha": [0.05], "method": ["mle"],
                      "users": [100], "n_boot": [200], "paired": [True], "below_resolution": [False]})
    view = " ".join(_display.compare_view(t).split())
    assert "Holm's step-down" in view and "--adjust bonferroni" in view
    # 200 replicates at a per-pair level of 99%: one replicate beyond each end -> the view asks for more
    assert "rests on 1.0 bootstrap replicate(s)" in view and "--n-boot 2,000" in view
