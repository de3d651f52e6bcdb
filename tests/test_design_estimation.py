"""The default estimator on per-user sample sizes and users ranked in full (issue 29).

References: the nested-design likelihood in ``sampling_lib.estimators.logspline_fit`` (Notes);
TORS24 Algorithm 1 and Sec 6.2 (adaptive sampling).
"""
import numpy as np
import pytest

from sampling_lib.correct import estimate
from sampling_lib.estimators import DEFAULT_METHOD
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.sampling import adaptive_sample_ranks, sample_ranks

N, M = 3000, 1500


@pytest.fixture(scope="module")
def R():
    return draw_global_ranks(synthetic_models(N)["beta_a0.35"], M, rng=0)


def test_equal_sizes_give_the_single_stage_table(R):
    """Every n_u equal: the per-user-size call is the single-n call, bit for bit."""
    r = sample_ranks(R, N, 100, rng=1)
    a = estimate(r, N, 100, ["recall@10", "ndcg@20"], n_boot=40, rng=2)
    b = estimate(r, N, None, ["recall@10", "ndcg@20"], sample_sizes=np.full(M, 100), n_boot=40, rng=2)
    np.testing.assert_array_equal(a.select_dtypes("number").to_numpy(float), b.select_dtypes("number").to_numpy(float))


def test_users_ranked_in_full_give_their_exact_metric(R):
    """n_u = N_u without replacement: the sampled rank is the global rank, the estimate the users' own
    metric (K <= 256), through either door (one n, or per-user sizes)."""
    exact = [np.mean(R <= 10), np.mean(np.where(R <= 10, 1 / np.log2(R + 1), 0.0)), np.mean(R <= 50)]
    for kw in ({"n": N}, {"n": None, "sample_sizes": np.full(M, N)}):
        t = estimate(R, N, metrics=["recall@10", "ndcg@10", "recall@50"], scheme="hypergeometric", n_boot=0, **kw)
        np.testing.assert_allclose(t.estimate, exact, rtol=1e-9, atol=1e-12)
        assert not t.below_resolution.any() and (t.n == N).all()


def test_every_user_at_n_equal_N_with_replacement_is_the_papers_kernel():
    """scheme='binomial' with every n_u = N_u: N_u - 1 draws with replacement (KDD20 eq 6), not full
    ranking: every estimator takes it, and the default does not return the sampled ranks' own metric."""
    small_N = 40
    Rs = draw_global_ranks(synthetic_models(small_N)["beta_a0.35"], 600, rng=8)
    r = sample_ranks(Rs, small_N, small_N, rng=7)
    assert estimate(r, small_N, small_N, ["recall@5"], method="mle", n_boot=0).method[0] == "mle"
    t = estimate(r, small_N, small_N, ["recall@5"], n_boot=0)
    assert t.below_resolution[0] == (5 < 1.0) and abs(t.estimate[0] - np.mean(r <= 5)) > 1e-3


def test_mixed_full_and_sampled_users(R):
    """A random tenth ranked in full, the rest sampled at n = 30: the default takes both, others refuse."""
    g = np.random.default_rng(3)
    full = g.random(M) < 0.1
    r = np.where(full, R, sample_ranks(R, N, 30, rng=4))
    sizes = np.where(full, N, 30)
    t = estimate(r, N, None, ["recall@10"], sample_sizes=sizes, n_boot=0)
    assert t.method[0] == DEFAULT_METHOD and not t.below_resolution[0]
    truth = np.mean(R <= 10)
    # the estimate of the population metric: within 4 standard errors of a full-ranking mean (se of the
    # 150 exactly ranked users' share, which is what locates the top of P(R) here)
    se = np.sqrt(truth * (1 - truth) / full.sum())
    assert abs(t.estimate[0] - truth) < 4 * se
    with pytest.raises(ValueError, match=r"cannot take users ranked in full .* \['logspline'\]"):
        estimate(r, N, None, ["recall@10"], sample_sizes=sizes, method="adaptive_mle", n_boot=0)


def test_varying_sizes_use_the_default_and_other_methods_say_which_can(R):
    r, s = adaptive_sample_ranks(R, N, 20, 640, rng=5)
    t = estimate(r, N, None, ["recall@10"], sample_sizes=s, n_boot=0)
    assert t.method[0] == DEFAULT_METHOD and t.n.isna().all()
    # resolution of the users at sampled rank 1: all of them reached n_max = 640
    assert t.below_resolution[0] == (10 < (N - 1) / (640 - 1))
    with pytest.raises(ValueError, match=r"needs one common sample size.*adaptive_mle, logspline"):
        estimate(r, N, None, ["recall@10"], sample_sizes=s, method="bv", n_boot=0)


def test_full_ranking_halfwidth_is_the_user_bootstrap_drawn_through_the_metric_values():
    """studies.full_ranking_halfwidth draws the user bootstrap through the counts of the metric's distinct
    values (Multinomial(M, shares)), the same distribution as resampling the users: its half-width lies within
    4 standard errors of the mean of 6 direct user-resampling bootstraps (their SE measured over the 6), and
    its own Monte Carlo spread over seeds is far below theirs (100,000 replicates against 2,000)."""
    from sampling_lib.metrics import parse_metrics
    from sampling_lib.studies import full_ranking_halfwidth
    from sampling_lib.studies.design import _metric_rows

    g = np.random.default_rng(8)
    M = 1500
    R = np.floor(np.exp(g.exponential(1.8, M))).astype(np.int64) + 1
    metrics = ("recall@10", "ndcg@10", "ap@20")
    F = _metric_rows(parse_metrics(metrics), R)                  # (m, M)
    direct = []
    for seed in range(6):
        gg = np.random.default_rng(100 + seed)
        boot = np.concatenate([F[:, gg.integers(0, M, (500, M))].mean(axis=2).T for _ in range(4)])
        lo, hi = np.quantile(boot, [0.025, 0.975], axis=0)
        direct.append((hi - lo) / 2)
    direct = np.array(direct)
    se = direct.std(axis=0, ddof=1) / np.sqrt(len(direct))
    new = np.array([full_ranking_halfwidth(R, metrics, rng=s) for s in range(3)])
    assert np.all(np.abs(new[0] - direct.mean(axis=0)) <= 4 * se), (new[0], direct.mean(axis=0), se)
    assert np.all(new.std(axis=0) < direct.std(axis=0))
    # odd replicate counts and a level other than 95%
    assert full_ranking_halfwidth(R, "ndcg@10", n_boot=1001, confidence_level=0.9, rng=0).shape == (1,)
    with pytest.raises(ValueError, match="n_boot"):
        full_ranking_halfwidth(R, "ndcg@10", n_boot=1)


def test_plan_frontier_sets_the_planner_s_choice_beside_the_reference_designs():
    from sampling_lib.rankdist import draw_global_ranks, synthetic_models
    from sampling_lib.studies import plan_frontier

    R = draw_global_ranks(synthetic_models(2000)["beta_a0.35"], 500, rng=2)
    Nu = np.full(R.size, 2000)
    Nu[:50] = 1500                                           # per-user N: the median and the smallest
    R[:50] = np.minimum(R[:50], 1500)
    front, plans, setup = plan_frontier({"a": (R, Nu)}, n=40, metrics=["recall@10"], repeats=1, n_boot=100, rng=3)
    assert setup["a"] == (20, 2000, 1500)
    assert front.groupby("design").size().eq(1).all() and front.chosen.sum() == 1
    chosen = front[front.chosen].iloc[0]
    assert chosen.design == plans["a"].best.describe()
    assert chosen["predicted ratio"] == pytest.approx(float(plans["a"].table.set_index("design").loc[
        chosen.design].ratio))
    one = front.set_index("design")["cost share"]
    assert one["single n = 20"] < one["ladder 20 -> 80 (double while at rank 1)"]


def test_design_law_check_passes_the_law_and_catches_a_wrong_one(monkeypatch):
    import sampling_lib.design as design_pkg
    from sampling_lib.sampling import Design
    from sampling_lib.studies import design_law_check

    d = Design("ladder", 10, n_max=80)
    good = design_law_check(d, 600, [1, 5, 40, 300], "hypergeometric", 4000, rng=1)
    assert good["max_z"] < 5 and good["factor_spread"] < 1e-6
    real = design_pkg.design_law

    def shifted(design, N, R, scheme="binomial"):          # 5% of the mass moved from each cell to the next
        sizes, lo, hi, D = real(design, N, R, scheme)
        return sizes, lo, hi, 0.95 * D + 0.05 * np.roll(D, 1, axis=1)

    monkeypatch.setattr(design_pkg, "design_law", shifted)
    bad = design_law_check(d, 600, [1, 5, 40, 300], "hypergeometric", 4000, rng=1)
    assert bad["max_z"] > 10


def test_design_population_study_draws_fresh_users_per_draw_and_states_the_population_s_truth():
    from sampling_lib.metrics import metric_values
    from sampling_lib.rankdist import synthetic_models
    from sampling_lib.sampling import Design
    from sampling_lib.studies import design_population_study, design_study

    pmf = synthetic_models(800)["beta_a0.35"]
    t = design_population_study(pmf, 300, Design("single", 30), metrics=["recall@10", "ndcg@10"], repeats=3,
                                n_boot=30, rng=5)
    assert t.groupby("metric").draw.apply(list).tolist() == [[0, 1, 2]] * 2
    for met in ("recall@10", "ndcg@10"):
        assert t[t.metric == met].population_truth.iloc[0] == pytest.approx(float(pmf @ metric_values(met, 800)))
    # the same Generator sequence as drawing the users and calling design_study by hand
    from sampling_lib.rankdist import draw_global_ranks

    g = np.random.default_rng(5)
    R = draw_global_ranks(pmf, 300, rng=g)
    first = design_study(R, 800, Design("single", 30), metrics=["recall@10", "ndcg@10"], repeats=1, n_boot=30, rng=g)
    np.testing.assert_allclose(t[t.draw == 0].estimate.to_numpy(), first.estimate.to_numpy())
    np.testing.assert_allclose(t[t.draw == 0].truth.to_numpy(), first.truth.to_numpy())
