"""Tests for sampling_lib.experiments (global ranks from data, experiment runner)."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sampling_lib.experiments import (
    EXPERIMENT_COLUMNS,
    global_ranks_from_data,
    run_experiment,
)

ML100K = Path(__file__).resolve().parents[1].parent / "shared/data/ml-100k/u.data"
SMALL = {"n_users": 300, "n_items": 120, "mean_interactions": 15.0}


def test_global_ranks_from_data_synthetic_contract():
    ranks, N, info = global_ranks_from_data(None, synthetic=SMALL, rng=3)
    assert N == 120
    assert set(ranks) == {"popularity", "itemknn", "ease", "als"}
    for m, r in ranks.items():
        assert r.dtype == np.int64 and r.shape == (info["M"],)
        assert r.min() >= 1 and r.max() <= N
    assert info["summary"]["n_users_kept"] == info["M"] == 300
    assert isinstance(info["stats"], pd.DataFrame)
    # deterministic in the seed
    ranks2, _, _ = global_ranks_from_data(None, synthetic=SMALL, rng=3)
    for m in ranks:
        np.testing.assert_array_equal(ranks[m], ranks2[m])


def test_global_ranks_from_data_default_is_fast_and_non_uniform():
    ranks, N, info = global_ranks_from_data(None, models=("popularity", "ease"))
    assert (N, info["M"]) == (1000, 2000)
    # fitted models put the held-out item far above a uniform rank (median N/2)
    for m in ranks:
        assert np.median(ranks[m]) < N / 4
    # the personalised model beats popularity on this data
    assert np.mean(ranks["ease"] <= 10) > np.mean(ranks["popularity"] <= 10)


def test_global_ranks_from_data_bad_model():
    with pytest.raises(ValueError, match="model must be one of"):
        global_ranks_from_data(None, models=("nope",), synthetic=SMALL)


@pytest.mark.skipif(not ML100K.exists(), reason="MovieLens 100K not available")
def test_global_ranks_from_data_ml100k():
    ranks, N, info = global_ranks_from_data(ML100K, models=("popularity", "ease"))
    assert N == 1682 and info["M"] == 943
    assert info["summary"]["n_users_dropped"] == 0
    assert info["stats"]["interactions"].iloc[0] == 100000
    # EASE is far better than popularity on ml-100k (HR@10)
    assert np.mean(ranks["ease"] <= 10) > np.mean(ranks["popularity"] <= 10) + 0.03


# ---------------------------------------------------------------- run_experiment
def plugin(r, N, n):
    """Naive estimator: the empirical pmf of the sampled ranks placed on 1..n."""
    return np.bincount(r - 1, minlength=N)[:N] / r.size


def scaled(r, N, n):
    """Linear map of sampled rank r to global rank round(1 + (r-1)(N-1)/(n-1))."""
    R = np.rint(1 + (r - 1) * (N - 1) / (n - 1)).astype(int)
    return np.bincount(R - 1, minlength=N) / r.size


RANKS = {"a": np.array([1, 2, 3, 40, 90, 7, 1, 15] * 10), "b": np.arange(1, 81)}
KW = dict(metrics=["recall@10", "ndcg@5"], schemes=["binomial", "hypergeometric"],
          sample_sizes=[10, 50], repeats=3, rng=11)


def test_run_experiment_tidy_frame_and_truth():
    from sampling_lib.metrics import metric_from_ranks

    df = run_experiment(RANKS, 100, {"plugin": plugin, "scaled": scaled}, **KW)
    assert list(df.columns) == EXPERIMENT_COLUMNS
    # repeats x schemes x n x models x estimators x metrics
    assert len(df) == 3 * 2 * 2 * 2 * 2 * 2
    assert set(df["metric"]) == {"recall", "ndcg"} and set(df["K"]) == {10, 5}
    for (m, met, K), g in df.groupby(["model", "metric", "K"]):
        assert np.allclose(g["truth"], metric_from_ranks(RANKS[m], f"{met}@{K}"))
    np.testing.assert_allclose(df["rel_error"], (df["estimate"] - df["truth"]) / df["truth"])


def test_run_experiment_matches_direct_computation():
    from sampling_lib.sampling import sample_ranks

    df = run_experiment({"b": RANKS["b"]}, 100, [plugin], metrics=["recall@10"],
                        schemes=["binomial"], sample_sizes=[20], repeats=2, rng=5)
    seqs = np.random.SeedSequence(5).spawn(2)
    for rep in range(2):
        rng = np.random.default_rng(seqs[rep].spawn(1)[0])
        r = sample_ranks(RANKS["b"], 100, 20, scheme="binomial", rng=rng)
        assert df.loc[df.repeat == rep, "estimate"].item() == pytest.approx(np.mean(r <= 10))


@pytest.mark.slow
def test_run_experiment_deterministic_across_backends():
    base = run_experiment(RANKS, 100, [plugin, scaled], **KW)
    again = run_experiment(RANKS, 100, [plugin, scaled], **KW)
    pd.testing.assert_frame_equal(base, again)
    par = run_experiment(RANKS, 100, [plugin, scaled], n_jobs=2, **KW)
    pd.testing.assert_frame_equal(base, par)



def test_run_experiment_rng_forms():
    """rng takes an int (SeedSequence(rng) layout), a SeedSequence or a Generator (scipy style)."""
    base = run_experiment(RANKS, 100, [plugin], **KW)
    kw = {**KW, "rng": np.random.SeedSequence(11)}
    pd.testing.assert_frame_equal(base, run_experiment(RANKS, 100, [plugin], **kw))
    g1 = run_experiment(RANKS, 100, [plugin], **{**KW, "rng": np.random.default_rng(1)})
    g2 = run_experiment(RANKS, 100, [plugin], **{**KW, "rng": np.random.default_rng(1)})
    pd.testing.assert_frame_equal(g1, g2)
    with pytest.raises(ValueError, match="rng"):
        run_experiment(RANKS, 100, [plugin], **{**KW, "rng": -1})


def test_run_experiment_on_local_dask_cluster():
    distributed = pytest.importorskip("distributed")
    base = run_experiment(RANKS, 100, [plugin], **KW)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        dask_df = run_experiment(RANKS, 100, [plugin], scheduler_address=cluster.scheduler_address,
                                 **KW)
    pd.testing.assert_frame_equal(base, dask_df)


def test_run_experiment_callable_scheme_and_errors():
    def exact(ranks, N, n, rng):   # a "sampler" that returns the global rank capped at n
        return np.minimum(ranks, n)

    df = run_experiment({"b": RANKS["b"]}, 100, {"p": plugin}, schemes={"cap": exact},
                        metrics=["recall@10"], sample_sizes=[50], repeats=1)
    assert df["scheme"].item() == "cap" and df["estimate"].item() == pytest.approx(10 / 80)
    with pytest.raises(ValueError, match="returned shape"):
        run_experiment(RANKS, 100, {"bad": lambda r, N, n: np.ones(3)}, repeats=1,
                       sample_sizes=[10])
    with pytest.raises(ValueError, match="n must lie in 2..N=100"):
        run_experiment(RANKS, 100, [plugin], sample_sizes=[101])
    with pytest.raises(ValueError, match="scheme must be one of"):
        run_experiment(RANKS, 100, [plugin], schemes=["nope"], sample_sizes=[10])
    with pytest.raises(ValueError, match="global_ranks\\['b'\\]"):
        run_experiment({"b": np.array([0, 5])}, 100, [plugin], sample_sizes=[10])
    with pytest.raises(TypeError, match="callable"):
        run_experiment(RANKS, 100, {"x": 3}, sample_sizes=[10])


# ---------------------------------------------------------------- KDD20 App A helpers
def test_score_sampling_experiment_frame_and_determinism():
    from sampling_lib.experiments import score_sampling_experiment

    ranks, N, info = global_ranks_from_data(None, models=("popularity", "ease"), synthetic=SMALL)
    kw = dict(repeats=3, rng=4)
    a = score_sampling_experiment(info["fitted"], info["split"], [10, 20], [1, 5], **kw)
    b = score_sampling_experiment(info["fitted"], info["split"], [10, 20], [1, 5], **kw)
    pd.testing.assert_frame_equal(a, b)
    assert list(a.columns) == ["model", "scheme", "n", "repeat", "k", "shr"]
    assert len(a) == 2 * 2 * 3 * 3 * 2
    assert a["shr"].between(0, 1).all()
    # SHR@k is non-decreasing in k within a run
    w = a.pivot_table(index=["model", "scheme", "n", "repeat"], columns="k", values="shr")
    assert (w[5] >= w[1]).all()
    with pytest.raises(ValueError, match="ks must lie in 1..n=10"):
        score_sampling_experiment(info["fitted"], info["split"], [10], [11])


# Beta(a,1) MLE on global ranks drawn from the discretised law (sampling_lib.rankdist)
@pytest.mark.parametrize("a,N,M,tol", [(0.3, 1682, 20000, 0.01), (0.6, 500, 20000, 0.02),
                                       (1.0, 100, 20000, 0.03)])
def test_fit_beta_global_recovers_a(a, N, M, tol):
    from sampling_lib.experiments import fit_beta_global
    from sampling_lib.rankdist import beta_rank_pmf, draw_global_ranks

    R = draw_global_ranks(beta_rank_pmf(N, a), M, rng=1)
    res = fit_beta_global(R, N)
    assert res.converged and abs(res.a - a) < tol
    # the log-likelihood is maximal at the fitted a
    p = lambda x: np.log(beta_rank_pmf(N, x)[R - 1]).sum()  # noqa: E731
    assert res.loglik == pytest.approx(p(res.a), rel=1e-6)
    assert res.loglik >= max(p(res.a * 0.97), p(res.a * 1.03))


def test_experiment_samples_are_the_runners_samples():
    from sampling_lib.experiments import experiment_samples

    kw = dict(schemes=["binomial", "hypergeometric"], sample_sizes=[10, 50], repeats=2, rng=7)
    df = run_experiment(RANKS, 100, {"plugin": plugin}, metrics=["recall@5"], **kw)
    samples = experiment_samples(RANKS, 100, **kw)
    assert len(samples) == 2 * 2 * 2 * 2
    for (rep, scheme, n, m), r in samples.items():
        row = df[(df.repeat == rep) & (df.scheme == scheme) & (df.n == n) & (df.model == m)]
        assert row.estimate.item() == pytest.approx(np.mean(r <= 5), rel=1e-12)
