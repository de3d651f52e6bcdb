"""Tests of the real-data accuracy panel (PANEL_MODELS through experiments.global_ranks_from_data ... interval_coverage)."""
import numpy as np
import pandas as pd
import pytest

from sampling_lib import studies
from sampling_lib.experiments import global_ranks_from_data
from sampling_lib.kernels import kernel
from sampling_lib.metrics import metric_values


def _pop(N=300, M=400, seed=0):
    g = np.random.default_rng(seed)
    R = np.minimum(N, np.ceil(np.exp(g.uniform(0, np.log(N), M)))).astype(np.int64)
    return R


def test_oracle_weights_equal_per_user_bayes():
    N, n = 200, 15
    R = _pop(N)
    pmf = np.bincount(R - 1, minlength=N) / R.size
    r = 1 + np.random.default_rng(1).binomial(n - 1, (R[:50] - 1) / (N - 1))
    K = kernel(N, n)
    brute = np.mean([pmf * K[:, x - 1] / (pmf @ K[:, x - 1]) for x in r], axis=0)
    np.testing.assert_allclose(studies.oracle_weights(pmf, r, N, n), brute, rtol=1e-12, atol=1e-15)
    h = studies.oracle_weights(pmf, r, N, n, scheme="hypergeometric")
    assert h.sum() == pytest.approx(1.0) and not np.allclose(h, brute)


def test_accuracy_panel_truth_oracle_and_determinism():
    N = 300
    pops = {("d", "a"): (_pop(N, seed=0), N), ("d", "b"): (_pop(N, seed=1), N)}
    kw = dict(sample_sizes=(20, 500), user_counts=(100, None), draws=2, max_K=5, rng=3)
    p1 = studies.accuracy_panel(pops, ("mle",), **kw)
    # n = 500 >= N is skipped; M = None means all users
    assert set(p1.n) == {20} and set(p1.M) == {100, 400}
    assert set(p1.estimator) == {"oracle", "mle"}
    # the truth of the all-users cells is the population metric
    full = p1[(p1.M == 400) & (p1.model == "a") & (p1.metric == "recall") & (p1.estimator == "mle")]
    R = pops[("d", "a")][0]
    for k in range(1, 6):
        assert np.allclose(full[full.K == k].truth, np.mean(R <= k))
    # same seed, same panel; adding a method does not change the draws (truth, oracle)
    p2 = studies.accuracy_panel(pops, ("mle", "bv"), **kw)
    a = p1[p1.estimator.isin(["oracle", "mle"])].reset_index(drop=True)
    b = p2[p2.estimator.isin(["oracle", "mle"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    pos = p1.truth > 0
    assert ((p1.rel_error[pos] - (p1.estimate - p1.truth)[pos].abs() / p1.truth[pos]).abs() < 1e-12).all()
    assert p1.rel_error[~pos].isna().all()
    assert (p1.below_resolution == (p1.K < (p1.N - 1) / (p1.n - 1))).all()


def test_accuracy_panel_rejects_bad_methods():
    with pytest.raises(TypeError, match="methods"):
        studies.accuracy_panel({("d", "a"): (_pop(), 300)}, (3,), draws=1)
    with pytest.raises(ValueError, match="method"):
        studies.accuracy_panel({("d", "a"): (_pop(), 300)}, ("nonesuch",), draws=1)


def test_panel_summary_means_over_evaluations():
    rows = []
    for draw, (e1, e2) in enumerate([(0.1, 0.3), (0.3, 0.5)]):
        for K, e, below in ((1, e1, True), (2, e2, False)):
            rows.append(dict(dataset="d", model="m", n=10, M=5, draw=draw, estimator="x",
                             metric="recall", K=K, rel_error=e, below_resolution=below))
    t = studies.panel_summary(pd.DataFrame(rows))
    assert t.loc["x", "mean_rel_error"] == pytest.approx(100 * np.mean([0.2, 0.4]))
    assert t.loc["x", "below_resolution"] == pytest.approx(20.0)
    assert t.loc["x", "resolved"] == pytest.approx(40.0)
    assert t.loc["x", "evaluations"] == 2


def test_panel_settings_through_the_one_pipeline_and_interval_coverage():
    ranks, N, info = global_ranks_from_data(None, {"pop": ("popularity", {}),
                                                   "ease": ("ease", {"lam": 100.0})},
                                            max_dense_items=10)
    assert list(ranks) == ["pop"] and list(info["skipped"]) == ["ease"]    # EASE skipped: N > 10
    R = ranks["pop"]
    assert R.min() >= 1 and R.max() <= N and R.size == info["M"]
    assert np.all(R <= N - info["n_items_history"])       # training items are ranked last
    cov = studies.interval_coverage({("syn", "pop"): (R, N)}, ("logspline",), ("recall@10",),
                                    sample_sizes=(100,), user_counts=(300,), draws=1, n_boot=20)
    assert len(cov) == 1
    row = cov.iloc[0]
    assert row.covered == (row.ci_low <= row.truth <= row.ci_high)


def test_the_pipeline_takes_rng_like_the_studies():
    models = {"pop": ("popularity", {})}
    a, N, _ = global_ranks_from_data(None, models, rng=3)
    b, _, _ = global_ranks_from_data(None, models, rng=3)
    np.testing.assert_array_equal(a["pop"], b["pop"])
    c, _, _ = global_ranks_from_data(None, models, rng=np.random.default_rng(3))
    assert c["pop"].shape == a["pop"].shape and c["pop"].max() <= N
    for bad in (True, 1.5, "3"):
        with pytest.raises(TypeError, match="rng"):
            global_ranks_from_data(None, models, rng=bad)
    with pytest.raises(ValueError, match="rng"):
        global_ranks_from_data(None, models, rng=-1)


def test_user_counts_above_the_population_mean_all_users_once():
    # issue 16: a data_path file with fewer users than a requested count (300) must still be evaluated;
    # before the change every cell was skipped and the notebook stopped on an empty concat
    N, R = 300, _pop(300, M=250)
    pops = {("d", "a"): (R, N)}
    p = studies.accuracy_panel(pops, ("mle",), sample_sizes=(20,), user_counts=(300, 100, None), draws=1, max_K=3)
    assert sorted(set(p.M)) == [100, 250]
    assert p[p.M == 250].groupby(["estimator", "metric", "K"]).size().eq(1).all()   # all users: once
    cov = studies.interval_coverage(pops, ("logspline",), ("recall@10",), sample_sizes=(20,),
                                    user_counts=(300,), draws=1, n_boot=20)
    assert list(cov.M) == [250]
    with pytest.raises(ValueError, match=r"sample_sizes .* got \[300, 400\] and N = \[300\]"):
        studies.accuracy_panel(pops, ("mle",), sample_sizes=(300, 400), draws=1)


def test_the_pipeline_skips_a_model_over_the_memory_limit(monkeypatch):
    # the limit below item-KNN's similarity bound (min(sum_u |I_u|^2, N^2) x 12 bytes) but above the rest
    monkeypatch.setenv("SAMPLING_LIB_MAX_ARRAY_BYTES", str(4 * 1024**2))
    models = {"pop": ("popularity", {}), "knn": ("itemknn", {})}
    with pytest.warns(RuntimeWarning, match="'knn' skipped.*per array"):
        ranks, N, info = global_ranks_from_data(None, models, rng=0)
    assert list(ranks) == ["pop"] and list(info["skipped"]) == ["knn"]
