import numpy as np
import pytest

from sampling_lib import metrics


# reference values by hand: R = 1, 2, 3, 10, 11 at K = 10
@pytest.mark.parametrize(
    "name, expected",
    [
        ("recall", [1, 1, 1, 1, 0]),
        ("precision", [0.1, 0.1, 0.1, 0.1, 0]),
        ("ndcg", [1, 1 / np.log2(3), 0.5, 1 / np.log2(11), 0]),
        ("ap", [1, 0.5, 1 / 3, 0.1, 0]),
        ("mrr", [1, 0.5, 1 / 3, 0.1, 0]),
    ],
)
def test_metric_by_hand(name, expected):
    got = metrics.METRICS[name](np.array([1, 2, 3, 10, 11]), 10)
    np.testing.assert_allclose(got, expected, rtol=1e-15)


def test_metric_from_pmf_equals_mean_over_users():
    rng = np.random.default_rng(0)
    ranks = rng.integers(1, 51, size=1000)
    pmf = np.bincount(ranks - 1, minlength=50) / ranks.size
    for m in ["recall@5", "ndcg@10", "ap@20", "precision@3"]:
        assert metrics.metric_from_pmf(pmf, m) == pytest.approx(metrics.metric_from_ranks(ranks, m), rel=1e-12)


@pytest.mark.parametrize("bad, match", [("foo@10", "metric must be one of"), ("ndcg", "needs a cutoff"),
                                        ("ndcg@x", "must look like"), ("ndcg@0", "K must be >= 1")])
def test_parse_metric_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        metrics.parse_metric(bad)


def test_metric_values_rejects_bad_ranks():
    with pytest.raises(ValueError, match="ranks must lie in 1..N=5"):
        metrics.metric_from_ranks([1, 6], "recall@3", N=5)
    with pytest.raises(ValueError, match="R must hold ranks >= 1"):
        metrics.ndcg([0, 1], 5)
