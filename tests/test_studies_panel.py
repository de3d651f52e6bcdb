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
    assert set(p1.estimator) == {"split-half oracle", "realized oracle", "mle"}
    # the truth of the all-users cells is the population metric
    full = p1[(p1.M == 400) & (p1.model == "a") & (p1.metric == "recall") & (p1.estimator == "mle")]
    R = pops[("d", "a")][0]
    for k in range(1, 6):
        assert np.allclose(full[full.K == k].truth, np.mean(R <= k))
    # same seed, same panel; adding a method does not change the draws (truth, references)
    p2 = studies.accuracy_panel(pops, ("mle", "bv"), **kw)
    keep = ["split-half oracle", "realized oracle", "mle"]
    a = p1[p1.estimator.isin(keep)].reset_index(drop=True)
    b = p2[p2.estimator.isin(keep)].reset_index(drop=True)
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


# --------------------------------------------------------------------------- issue 28
def test_load_user_item_lists_pools_files_and_names_bad_lines(tmp_path):
    a, b = tmp_path / "train.txt", tmp_path / "test.txt"
    a.write_text("0 5 7\n1 7 7\n\n")             # a pair listed twice is kept once; blank lines skipped
    b.write_text("0 9\n2 5\n")
    r = studies.load_user_item_lists([a, b])
    assert (r.n_users, r.n_items, r.n_interactions, r.n_duplicates) == (3, 3, 5, 1)
    assert r.timestamps is None and r.item_ids.tolist() == [5, 7, 9]
    pairs = {(int(r.user_ids[u]), int(r.item_ids[i])) for u, i in zip(r.users, r.items)}
    assert pairs == {(0, 5), (0, 7), (1, 7), (0, 9), (2, 5)}
    b.write_text("0 9\n2 x5\n")
    with pytest.raises(ValueError, match=r"test.txt: line 2: .*'x5'"):
        studies.load_user_item_lists([a, b])
    b.write_text("\n")
    with pytest.raises(ValueError, match="test.txt: file is empty"):
        studies.load_user_item_lists([a, b])


def test_the_lightgcn_layout_goes_through_the_one_pipeline(tmp_path):
    g = np.random.default_rng(0)
    lines = [f"{u} " + " ".join(map(str, g.choice(40, 6, replace=False))) for u in range(30)]
    (tmp_path / "train.txt").write_text("\n".join(lines) + "\n")
    r = studies.load_user_item_lists(tmp_path / "train.txt")
    ranks, N, info = global_ranks_from_data(r, {"pop": ("popularity", {})}, rng=0)
    assert N == r.n_items and info["summary"]["holdout"] == "random" and ranks["pop"].size == 30


def test_posterior_mean_estimate_is_per_user_bayes():
    N, n = 200, 15
    R = _pop(N)
    r = 1 + np.random.default_rng(1).binomial(n - 1, (R[:60] - 1) / (N - 1))
    F = np.stack([metric_values("recall@10", N), metric_values("ndcg@20", N)], axis=1)
    pmf = np.bincount(R - 1, minlength=N) / R.size
    K = kernel(N, n)
    brute = np.mean([(pmf * K[:, x - 1] / (pmf @ K[:, x - 1])) @ F for x in r], axis=0)
    np.testing.assert_allclose(studies.posterior_mean_estimate(R, r, N, n, F[:20]), brute, rtol=1e-10)


def test_split_half_oracle_scores_each_half_with_the_other_halfs_ranks():
    N, n = 300, 10
    R = _pop(N, M=101, seed=2)
    r = 1 + np.random.default_rng(3).binomial(n - 1, (R - 1) / (N - 1))
    F = metric_values("recall@5", N)[:5, None]
    est = studies.split_half_estimate(np.random.default_rng(7), R, r, N, n, F)
    perm = np.random.default_rng(7).permutation(R.size)
    A, B = perm[:50], perm[50:]
    pm = studies.posterior_mean_estimate
    manual = (50 * pm(R[B], r[A], N, n, F) + 51 * pm(R[A], r[B], N, n, F)) / 101
    np.testing.assert_allclose(est, manual, rtol=1e-12)
    # not the realized oracle: a user's own rank is never in its prior
    assert not np.allclose(est, pm(R, r, N, n, F))
    with pytest.raises(ValueError, match="at least 2 users"):
        studies.split_half_estimate(np.random.default_rng(0), R[:1], r[:1], N, n, F)


def test_panel_draws_depend_on_the_labels_not_on_the_order():
    # issue 28: a panel of a subset (leave-one-dataset-out, the notebook's lighter panel) must draw the
    # same sampled ranks as the full panel; the seeds were the position of the population before
    N = 300
    pops = {("d", "a"): (_pop(N, seed=0), N), ("e", "b"): (_pop(N, seed=1), N)}
    kw = dict(sample_sizes=(20,), user_counts=(100,), draws=2, max_K=5, rng=3)
    both = studies.accuracy_panel(pops, ("mle",), **kw)
    one = studies.accuracy_panel({("e", "b"): pops[("e", "b")]}, ("mle",), **kw)
    pd.testing.assert_frame_equal(both[both.model == "b"].reset_index(drop=True), one)
    assert set(both.estimator) == {"mle", "split-half oracle", "realized oracle"}
    with pytest.raises(ValueError, match="references"):
        studies.accuracy_panel(pops, ("mle",), references=("oracle",), **kw)


def test_panel_solves_cls_up_to_max_K_and_counts_failures(monkeypatch):
    from sampling_lib.estimators import get_estimator

    N = 300
    pops = {("d", "a"): (_pop(N, seed=0), N)}
    kw = dict(sample_sizes=(20,), user_counts=(100,), draws=1, max_K=5, rng=3, references=())
    p = studies.accuracy_panel(pops, ("cls",), **kw)
    exact = studies.accuracy_panel(pops, [("cls", get_estimator("cls", max_rank=N))], **kw)
    np.testing.assert_allclose(p.estimate, exact.estimate, rtol=1e-6)

    def singular(r, N, n):
        raise np.linalg.LinAlgError("singular")

    q = studies.accuracy_panel(pops, [("x", singular), "mle"], **kw)
    assert q[q.estimator == "x"].estimate.isna().all()
    t = studies.panel_summary(q)
    assert t.loc["x", "failures"] == 1 and t.loc["mle", "failures"] == 0


def test_full_ranking_interval_is_the_user_bootstrap():
    R = np.r_[np.ones(400, int), np.full(600, 50)]
    F = metric_values("recall@10", 100)[:10, None]
    lo, hi = studies.full_ranking_interval(R, F, n_boot=4000, rng=0)
    half = 1.96 * np.sqrt(0.4 * 0.6 / R.size)           # the normal approximation of the proportion's interval
    assert lo[0] == pytest.approx(0.4 - half, abs=0.005) and hi[0] == pytest.approx(0.4 + half, abs=0.005)
    lo, hi = studies.full_ranking_interval(np.full(50, 3), F, rng=0)
    assert lo[0] == hi[0] == 1.0


def test_interval_coverage_reports_the_precision_ratio():
    N = 300
    cov = studies.interval_coverage({("d", "a"): (_pop(N), N)}, ("logspline",), ("recall@10",),
                                    sample_sizes=(20,), user_counts=(None,), draws=1, n_boot=30)
    row = cov.iloc[0]
    assert row.full_low <= row.truth <= row.full_high
    assert row.precision_ratio == pytest.approx((row.ci_high - row.ci_low) / (row.full_high - row.full_low))
