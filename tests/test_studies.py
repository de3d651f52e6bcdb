"""Tests of the notebook studies in sampling_lib.studies (each compares with a direct computation)."""
import numpy as np
import pandas as pd
import pytest

from sampling_lib import kernels, studies
from sampling_lib.rankdist import draw_global_ranks, empirical_pmf, random_dominating_pair, synthetic_models
from sampling_lib.sampling import sample_ranks


# ---------------------------------------------------------------- notebook 01 (KDD20 Sec 2)
def test_simulate_shr_equals_direct_loop():
    R = draw_global_ranks(synthetic_models(200)["beta_a0.35"], 300, rng=0)
    got = studies.simulate_shr(R, 200, 20, [1, 5, 20], 4, scheme="hypergeometric", rng=7)
    rng = np.random.default_rng(7)
    for i in range(4):
        r = sample_ranks(R, 200, 20, scheme="hypergeometric", rng=rng)
        assert got[i].tolist() == [np.mean(r <= 1), np.mean(r <= 5), 1.0]


def test_shr_moments_formulas_and_monte_carlo():
    pmfs = synthetic_models(300)
    R = {m: draw_global_ranks(pmfs[m], 400, rng=1) for m in ("beta_a0.25", "mixture")}
    d = studies.shr_moments(R, 300, 30, [1, 3, 10], 400, rng=2)
    assert len(d) == 2 * 2 * 3
    for (m, s), g in d.groupby(["model", "scheme"]):
        mean, var = kernels.shr_mean_var(empirical_pmf(R[m], 300), 30, [1, 3, 10], 400, s)
        assert np.allclose(g.E_formula, mean, rtol=1e-14) and np.allclose(g.Var_formula, var, rtol=1e-14)
    # 12 cells; |z| <= 4.5 for all of them has probability > 0.99 under the formulas
    assert d.z_mean.abs().max() < 4.5 and d.z_var.abs().max() < 4.5


def test_shr_tail_frequencies_columns():
    R = draw_global_ranks(synthetic_models(100)["beta_a0.50"], 500, rng=3)
    d = studies.shr_tail_frequencies(R, 100, 10, [1, 5], 300, 0.04, rng=4)
    assert len(d) == 6 and np.allclose(d.t_in_sd[d.t != 0.04].round(6).unique(), [1.0, 2.0])
    mean, var = kernels.shr_mean_var(empirical_pmf(R, 100), 10, [1, 5], 500)
    shr = studies.simulate_shr(R, 100, 10, [1, 5], 300, rng=4)
    for _, row in d.iterrows():
        j = [1, 5].index(row.k)
        assert row.observed == np.mean(np.abs(shr[:, j] - mean[j]) >= row.t)
        assert row.hoeffding == pytest.approx(min(1.0, 2 * np.exp(-2 * 500 * row.t ** 2)))
        assert 0.0 <= row.cp_lower999 <= row.observed
    assert d.loc[0, "t_in_sd"] == pytest.approx(0.04 / np.sqrt(var[0]))


def test_expected_shr_gaps_theorem_and_crossing_pair():
    pmfs = synthetic_models(400)
    pairs = [random_dominating_pair(400, rng=s) for s in range(3)]
    g = studies.expected_shr_gaps(pairs, [5, 40])
    assert len(g) == 3 * 2 * 2 and (g.min_gap >= -1e-12).all() and not g.flips.any()
    d = (kernels.expected_shr_curve(pairs[1][0], 40, "hypergeometric")
         - kernels.expected_shr_curve(pairs[1][1], 40, "hypergeometric"))
    row = g[(g.pair == 1) & (g.n == 40) & (g.scheme == "hypergeometric")].iloc[0]
    assert row.max_gap == d.max() and row.k_at_max == d.argmax() + 1 and row.min_gap_k_lt_n == d[:-1].min()
    # the mixture's recall curve crosses Beta(0.35, 1): the sampled curves change order with k
    cross = studies.expected_shr_gaps([(pmfs["mixture"], pmfs["beta_a0.35"])], [100])
    assert cross.flips.all()


# ---------------------------------------------------------------- notebook 02 (KDD20 Secs 3-4)
def test_beta_map_tables_equal_direct_calls():
    from sampling_lib import mapping

    N, n = 700, 30
    acc = studies.beta_map_accuracy(N, n, [0.3, 1.5])
    f = mapping.beta(N, n, 1.5)
    assert acc.loc[1, "f(2;a)"] == f[1] and acc.loc[1, "f(n;a) log-space"] == f[-1]
    assert np.allclose(acc["f(n;a) recurrence"], N, rtol=1e-9)
    steps = studies.beta_map_steps(N, n, [0.3, 1.5])
    s = steps[steps.a == 0.3]
    f = mapping.beta(N, n, 0.3)
    assert s.k.tolist() == list(range(2, n + 1)) and np.allclose(s.step, np.diff(f) / ((N - 1) / n), rtol=0)
    y = np.diff(np.concatenate(([0.0], (f - 1) ** 0.3)))
    assert s.ratio_error.iloc[0] == pytest.approx(abs(y[1] / y[0] - (1 + (0.3 - 1) / 1)))
    summ, curves = studies.beta_map_differences(N, n, [0.25, 0.35], 0.3)
    d = mapping.beta(N, n, 0.25) - mapping.beta(N, n, 0.3)
    assert summ.max_abs[0] == np.abs(d).max() and summ.at_k[0] == np.abs(d).argmax() + 1
    assert summ.max_abs_exact[0] == pytest.approx(summ.max_abs[0], rel=1e-9) and len(curves) == 2 * n


def test_beta_map_monotonicity_grid():
    from sampling_lib.mapping import monotonicity_violation

    a = [0.1, 0.5, 1.0]
    d = studies.beta_map_monotonicity([10, 200], [5, 50], a)
    assert d[["N", "n"]].values.tolist() == [[10, 5], [200, 5], [200, 50]]       # n <= N only
    v = monotonicity_violation(200, 50, a, "decreasing")
    assert d.iloc[2]["violation (printed inequality)"] == v["max_violation"]
    assert (d["violation / N"] <= 1e-12).all()


def test_max_position_difference_and_standard_maps():
    from sampling_lib import mapping

    d = studies.max_position_difference({"a": [1, 2, 3], "b": [1, 4, 3], "c": [0, 2, 3]})
    assert d[["map_1", "map_2"]].values.tolist() == [["a", "b"], ["a", "c"], ["b", "c"]]
    assert d.max_difference.tolist() == [2.0, 1.0, 2.0] and d.at_k.tolist() == [2, 1, 2]
    m = mapping.standard_maps(500, 20, a_values=(1.0, 0.5, 0.2))
    assert list(m) == ["Linear", "Bound", "Beta@1", "Beta@0.5", "Beta@0.2"]
    assert np.array_equal(m["Beta@1"], mapping.uniform(500, 20)) and np.array_equal(m["Bound"], mapping.bound(500, 20))


# ---------------------------------------------------------------- notebooks 03-05 (shared pieces)
def test_rank_population_synthetic_draws_in_order():
    from sampling_lib.experiments import rank_population

    pmfs = synthetic_models(150)
    pop = rank_population(N=150, M=40, rng=np.random.default_rng(5))
    rng = np.random.default_rng(5)
    for name, p in pmfs.items():
        assert np.array_equal(pop.ranks[name], draw_global_ranks(p, 40, rng=rng))
        assert pop.pmfs[name] is not None and np.allclose(pop.pmfs[name], p)
    assert (pop.N, pop.M, pop.info) == (150, 40, {})
    with pytest.raises(ValueError, match="M"):
        rank_population(N=150, M=0)


def test_winner_counts_by_hand():
    d = pd.DataFrame({"repeat": [0, 0, 0, 0, 1, 1, 1, 1], "model": ["A", "B"] * 4,
                      "estimator": ["x", "x", "y", "y"] * 2,
                      "estimate": [0.3, 0.2, 0.1, 0.2, 0.1, 0.4, 0.5, 0.4], "truth": [0.5, 0.4] * 4})
    out = studies.winner_counts(d, by="estimator").set_index("estimator")
    assert out.correct.to_dict() == {"x": 1, "y": 1} and (out.repeats == 2).all()


def test_mle_mse_identifiable_matches_formula():
    d = studies.mle_mse_identifiable(synthetic_models(5)["beta_a0.50"], [20_000, 200_000], 30, rng=3)
    assert np.allclose(d.mse_formula[0] / d.mse_formula[1], 10.0)
    assert (np.abs(d.mse_sim - d.mse_formula) < 4.5 * d.se).all()


def test_mle_consistency_and_rank_distribution_study_equal_direct_fits():
    from sampling_lib.estimators import bv, mle
    from sampling_lib.kernels import kernel

    P = synthetic_models(120)["beta_a0.35"]
    d = studies.mle_consistency(P, 15, [400], 1, rng=4)
    rng = np.random.default_rng(4)
    r = sample_ranks(draw_global_ranks(P, 400, rng=rng), 120, 15, rng=rng)
    assert d.q_error[0] == pytest.approx(np.abs((mle(r, 120, 15) - P) @ kernel(120, 15)).sum(), rel=1e-12)
    R = draw_global_ranks(P, 300, rng=0)
    out = studies.rank_distribution_study({"a": R}, {"a": P}, 15, 2, K_values=(5,), rng=9)
    res = out["results"]
    assert len(res) == 2 * (7 * 3 + 3 * 2) and out["min_em_step"] >= -1e-12
    r0 = sample_ranks(R, 120, 15, rng=np.random.default_rng(9))
    assert np.array_equal(out["first_ranks"]["a"], r0)
    from sampling_lib.metrics import metric_values
    row = res[(res.repeat == 0) & (res.estimator == "BV 0.1") & (res.metric == "ndcg")]
    assert row.estimate.item() == pytest.approx(bv(r0, 120, 15, 0.1) @ metric_values("ndcg@5", 120), rel=1e-12)
    assert row.truth.item() == pytest.approx(P @ metric_values("ndcg@5", 120))
    # CLS is solved for R <= max(K_values) only: the same estimates as the full CLS (all N ranks)
    from sampling_lib.estimators import cls
    w_full = cls(r0, 120, 15)
    for m in ("recall", "ndcg", "ap"):
        row = res[(res.repeat == 0) & (res.estimator == "CLS") & (res.metric == m)]
        assert row.estimate.item() == pytest.approx(w_full @ metric_values(f"{m}@5", 120), rel=1e-12, abs=1e-15)


def test_mes_solver_check_agrees():
    P = synthetic_models(100)["beta_a0.35"]
    r = sample_ranks(draw_global_ranks(P, 500, rng=1), 100, 10, rng=2)
    out = studies.mes_solver_check(r, 100, 10, 0.01)
    assert out["rel_diff"] < 1e-6 and out["max_abs_dpi"] < 1e-5 and out["kkt_deviation"] < 1e-6


def test_metric_estimator_study_equals_direct_fits():
    from sampling_lib.estimators import fit_estimators, get_estimator
    from sampling_lib.metrics import metric_values
    from sampling_lib.sampling import adaptive_sample_ranks

    P = synthetic_models(150)["beta_a0.35"]
    R = {"a": draw_global_ranks(P, 400, rng=0), "b": draw_global_ranks(P, 400, rng=1)}
    out = studies.metric_estimator_study(R, 150, 2, ["mle", "bv_mle"], sample_sizes=[20], adaptive=(10, 40),
                                         K_max=8, rng=3, gamma=0.1)
    c = out["curves"]
    assert set(c.design) == {"adaptive", "n=20"} and set(c.estimator) == {"ADAPTIVE_MLE", "MLE", "BV_MLE"}
    rng = np.random.default_rng(3)
    r_ad, nu = adaptive_sample_ranks(R["a"], 150, 10, 40, rng=rng)
    r = sample_ranks(R["a"], 150, 20, rng=rng)
    W = fit_estimators(["mle", "bv_mle"], r, 150, 20, gamma=0.1)
    F = metric_values("ndcg@8", 150)
    row = c[(c.repeat == 0) & (c.model == "a") & (c.metric == "ndcg") & (c.K == 8)].set_index("estimator")
    assert row.loc["BV_MLE", "estimate"] == pytest.approx(W["bv_mle"] @ F, rel=1e-12)
    assert row.loc["ADAPTIVE_MLE", "estimate"] == pytest.approx(get_estimator("adaptive_mle")(r_ad, 150, nu) @ F)
    assert row.loc["MLE", "truth"] == pytest.approx(np.mean(F[R["a"] - 1]))
    assert row.loc["ADAPTIVE_MLE", "size"] == nu.mean() and len(out["fits"]) == 2 * 2
    err = studies.average_relative_error(c)
    one = err[(err.repeat == 0) & (err.model == "a") & (err.estimator == "MLE") & (err.metric == "recall")]
    sub = c[(c.repeat == 0) & (c.model == "a") & (c.estimator == "MLE") & (c.metric == "recall") & (c.truth > 0)]
    assert one.rel_err.item() == pytest.approx(100 * np.mean(np.abs(sub.estimate - sub.truth) / sub.truth))


def test_simulate_mse_bound_and_growth():
    from sampling_lib.estimators import bv_sampled_metric, exact_mse, mn_sampled_metric
    from sampling_lib.metrics import metric_values

    N, n = 30, 6
    counts = np.maximum(1, np.round(synthetic_models(N)["beta_a0.35"] * 200)).astype(int)
    R = np.repeat(np.arange(1, N + 1), counts)
    W, F = counts / R.size, metric_values("ndcg@5", N)
    xs = {"MN": mn_sampled_metric(F, N, n, W, R.size), "BV": bv_sampled_metric(F, N, n, 0.01, W)}
    t = studies.simulate_mse_bound(xs, F, R, n, 600, 10, rng=0)
    assert (np.abs(t.mse_sim - t.mse_exact) < 4.5 * t.mse_sim_se).all() and (t.mse_exact <= t.L).all()
    with pytest.raises(ValueError, match="every rank"):
        studies.simulate_mse_bound(xs, F, np.array([1, 2]), n, 10)
    g = studies.mn_bv_growth(W, n, {"uniform": None}, ["ndcg@5"], [10, 1000], gamma=0.01)
    assert g.MN_mse[1] == pytest.approx(exact_mse(mn_sampled_metric(F, N, n, None, 1000), F, W, n, 1000))
    assert (np.diff(g.MN_L) <= 1e-12).all()


def test_cls_sampled_metric_cvxpy_equals_cls():
    from sampling_lib.estimators import cls, sampled_pmf
    from sampling_lib.metrics import metric_values
    from sampling_lib.testing import cls_sampled_metric_cvxpy

    r = sample_ranks(draw_global_ranks(synthetic_models(80)["beta_a0.35"], 300, rng=1), 80, 10, rng=2)
    x = cls_sampled_metric_cvxpy(metric_values("recall@5", 80), 80, 10)
    assert cls(r, 80, 10, max_rank=5)[:5].sum() == pytest.approx(sampled_pmf(r, 10) @ x, abs=1e-5)


# ---------------------------------------------------------------- notebook 06 (TORS24 Sec 7)
def test_sample_size_table_equals_direct_calls():
    from sampling_lib import user_sampling as us

    t = us.sample_size_table([0.02, 0.05], [0.9, 0.99], [1, 3])
    assert len(t) == 8 and t["difference, all pairs (eq 52)"][t.models == 1].isna().all()
    row = t[(t.margin == 0.02) & (t.confidence_level == 0.9) & (t.models == 3)].iloc[0]
    assert row["one CI per model (eq 46)"] == us.sample_size_proportion(0.02, 0.9, n_models=3)
    assert row["Hoeffding, AP/NDCG (eq 48)"] == us.hoeffding_sample_size(0.02, 0.1, n_tests=3)
    assert row["difference, vs reference (eq 52)"] == us.sample_size_difference(0.02, 0.9, n_models=3,
                                                                                 family="vs-best")


def test_user_sampling_studies_equal_direct_calls():
    from sampling_lib import user_sampling as us

    d = studies.proportion_coverage_table(5000, 1200, [200, 800], 500, 0.9, margin=0.04, rng=1)
    ex = us.exact_proportion_coverage(5000, 1200, 800, 0.9, margin=0.04)
    assert (d.exact_coverage[1], d.exact_margin_prob[1]) == (ex["coverage"], ex["margin_prob"])
    mc = studies.simulate_proportion_coverage(5000, 1200, 200, 500, 0.9, margin=0.04, rng=np.random.default_rng(1))
    assert d.mc_coverage[0] == mc["coverage"]
    # no sample size (a data set whose Recall is 0 or 1 plans m = 0): an empty table with its columns
    assert studies.proportion_coverage_table(50, 50, [], 10, 0.9, margin=0.04).columns.tolist() == d.columns.tolist()
    R = draw_global_ranks(synthetic_models(300)["beta_a0.35"], 2000, rng=0)
    t = studies.user_sampling_tails(R, 300, 200, "ap@10", 400, [0.01, 0.05], rng=2)
    est = us.user_sampled_metric(R, 200, "ap", [10], repeats=400, rng=2)[:, 0]
    from sampling_lib.metrics import metric_from_ranks
    assert t.observed[0] == np.mean(np.abs(est - metric_from_ranks(R, "ap", 10)) >= 0.01)
    assert t.hoeffding[1] == pytest.approx(2 * np.exp(-2 * 200 * 0.05 ** 2))
    e = studies.user_sampling_errors({"a": R}, [100, 1000], ["recall"], K_max=20, repeats=60, rng=3)
    assert e.method.tolist() == ["user 100", "user 1,000"]
    assert (np.abs(e["mean"] - e["predicted"]) < 4.5 * e["se"]).all()      # the prediction is exact for recall


# ---------------------------------------------------------------- notebook 07 (AP25)
def test_ap_studies_equal_direct_calls():
    from sampling_lib import random_baseline as rb
    from sampling_lib.testing import paper_table, recursive_ap_moments_wr

    wor, wr = studies.ap_enumeration_check(5, 4, [0.3])
    assert len(wor) == sum((N + 1) * N for N in range(1, 6)) and wor["Var printed Thm 4.4"].isna().sum() == 2 + 6 + 12
    assert np.allclose(wr["Var formula"], wr["Var enum"], rtol=1e-12)
    mc = studies.ap_monte_carlo([(20, 5, (1, 10))], [(0.2, (3,))], 2000, rng=0)
    s = rb.simulate_ap_summary("wor", (1, 10), 2000, N=20, m=5, rng=np.random.default_rng(0))
    assert mc["E MC"][:2].tolist() == list(s.mean) and mc["z(E)"][0] == pytest.approx((s.mean[0] - mc["E formula"][0]) / s.se_mean[0])
    t = studies.ap_scenarios(paper_table("ap25_table2").head(2), 1000, rng=1)
    assert t.quantity.tolist() == ["E_WOR", "E_WR", "Var_WOR", "Var_WR"] * 2
    row = t[(t.scenario == "A2") & (t.quantity == "Var_WR")].iloc[0]
    assert row.formula == pytest.approx(rb.var_ap_wr(0.5, 25)) and row.recursion == recursive_ap_moments_wr(0.5, 25).var


# ---------------------------------------------------------------- notebook 08 (real data)
def test_real_data_pieces_equal_direct_computations():
    from sampling_lib.experiments import global_ranks_from_data, score_sampling_experiment
    from sampling_lib.recommenders import global_ranks
    from sampling_lib.testing import global_ranks_bruteforce

    ranks, N, info = global_ranks_from_data(None, models=("popularity", "ease"),
                                            synthetic={"n_users": 150, "n_items": 80}, rng=2)
    split, fitted = info["split"], info["fitted"]
    users = np.arange(0, 150, 7)
    for m in ranks:
        assert np.array_equal(global_ranks_bruteforce(fitted[m], split.train, split.test_items, users),
                              ranks[m][users])
        R_all = global_ranks(fitted[m], split.train, split.test_items, train_last=False)
        assert np.array_equal(global_ranks_bruteforce(fitted[m], split.train, split.test_items, users,
                                                      train_last=False), R_all[users])
    ranks_all = {m: global_ranks(fitted[m], split.train, split.test_items, train_last=False) for m in ranks}
    runs = score_sampling_experiment(fitted, split, [10], [1, 5], repeats=3, rng=0)
    cand = N - np.diff(split.train.indptr)
    d = studies.score_sampling_summary(runs, ranks, ranks_all, N, cand)
    assert len(d) == 2 * 3 * 2 and d.model.iloc[0] == "popularity"
    row = d[(d.model == "ease") & (d.scheme == "hypergeometric") & (d.k == 5)].iloc[0]
    E, V = kernels.shr_mean_var(empirical_pmf(ranks_all["ease"], N), 10, [5], 150, "hypergeometric")
    assert (row["E[SHR] exact"], row["Var exact"]) == pytest.approx((E[0], V[0]), rel=1e-12)
    g = runs[(runs.model == "ease") & (runs.scheme == "hypergeometric") & (runs.k == 5)].shr
    assert row["SHR (MC mean)"] == pytest.approx(g.mean()) and row.se == pytest.approx(np.sqrt(V[0] / 3))


# ---------------------------------------------------------------- notebook 09
def test_coverage_study_and_relative_rmse_equal_direct_calls():
    pmf = synthetic_models(150)["beta_a0.35"]
    d = studies.coverage_study(pmf, 15, [100], 3, "recall@5", n_boot=20, rng=4, method="mle")
    sim = studies.simulate_coverage(pmf, 15, 100, 3, "recall@5", n_boot=20, rng=np.random.default_rng(4), method="mle")
    ref = studies.coverage_summary(sim)
    assert d.coverage[0] == ref.coverage[0] and d.naive_coverage[0] == sim.naive_covered.mean()
    acc = studies.simulate_accuracy(pmf, 15, 100, 3, "recall@5", methods=("mle", "bv"), rng=5)
    r = studies.relative_rmse(acc)
    e = acc[acc.method == "bv"]
    assert r.loc["recall@5", "bv"] == pytest.approx(100 * np.sqrt(np.mean(((e.estimate - e.truth) / e.truth) ** 2)))
    assert r.loc["recall@5", "naive"] == pytest.approx(100 * np.sqrt(np.mean(((e.naive - e.truth) / e.truth) ** 2)))


def test_metric_curves_rows_equal_one_product_per_metric_estimator_and_K():
    # one frame built from stacked products (issue 18) against the definition, row by row:
    # estimate = w[:K_max] @ F_K and truth = mean_u F_K(R_u), for metric, then estimator, then K
    from sampling_lib.metrics import metric_values

    rng = np.random.default_rng(7)
    N, K_max = 40, 6
    R = rng.integers(1, N + 1, size=500)
    weights = {"B": rng.dirichlet(np.ones(N)), "A": rng.dirichlet(np.ones(N)), "C": rng.dirichlet(np.ones(N))}
    d = studies.metric_curves(weights, R, ("ndcg", "recall", "ap"), K_max=K_max)
    expected = [(mt, e, K, weights[e] @ metric_values(f"{mt}@{K}", N), metric_values(f"{mt}@{K}", N)[R - 1].mean())
                for mt in ("ndcg", "recall", "ap") for e in weights for K in range(1, K_max + 1)]
    assert list(d.columns) == ["estimator", "metric", "K", "estimate", "truth"] and len(d) == len(expected)
    assert [(m, e, k) for m, e, k, *_ in expected] == list(zip(d.metric, d.estimator, d.K))
    np.testing.assert_allclose(d.estimate, [x[3] for x in expected], rtol=1e-12, atol=0)
    np.testing.assert_allclose(d.truth, [x[4] for x in expected], rtol=1e-12, atol=0)


def test_stretch_ranks_without_bandwidth_is_the_block_map():
    # bandwidth 0 (the default): rank R goes to a uniform integer of [R^c, (R + 1)^c), same draws
    from sampling_lib.studies import stretch_ranks
    R = np.arange(1, 1001)
    c = np.log(10**6) / np.log(1000)
    u = np.random.default_rng(4).random(R.size)
    lo, hi = np.floor(R ** c), np.minimum(np.floor((R + 1.0) ** c), 10**6 + 1.0)
    want = np.clip(np.floor(lo + u * np.maximum(hi - lo, 1.0)).astype(np.int64), 1, 10**6)
    np.testing.assert_array_equal(stretch_ranks(R, 1000, 10**6, rng=4), want)


def test_stretch_ranks_with_bandwidth_draws_log_ranks_from_the_kernel_density():
    # away from the boundaries, log(out) = c (log(R + U) + h Z) up to the floor: mean c log(R + 1/2)
    # and standard deviation c sqrt(h^2 + Var log(R + U)) (Z standard normal, U uniform)
    from sampling_lib.studies import log_rank_bandwidth, stretch_ranks
    R = np.full(20_000, 100)
    h, c = 0.2, 2.0
    x = np.log(stretch_ranks(R, 1000, 10**6, bandwidth=h, rng=5))
    sd = c * np.sqrt(h ** 2 + np.var(np.log(100 + np.random.default_rng(0).random(10**6))))
    assert abs(x.mean() - c * np.log(100.5)) < 4 * sd / np.sqrt(R.size)
    assert x.std() == pytest.approx(sd, rel=0.03)
    # reflected at rank 1: nothing below it, and the source's top rank stays within N
    s = stretch_ranks(np.r_[np.ones(5000, int), np.full(5000, 1000)], 1000, 10**6, bandwidth=0.5, rng=6)
    assert s.min() >= 1 and s.max() <= 10**6 and np.mean(s[:5000] <= 3) > 0.5
    # Silverman's rule: 0.9 min(sd, IQR / 1.34) M^(-1/5) of log R
    lr = np.log(np.arange(1, 1001))
    q = np.percentile(lr, [75, 25])
    assert log_rank_bandwidth(np.arange(1, 1001)) == pytest.approx(
        0.9 * min(lr.std(ddof=1), (q[0] - q[1]) / 1.34) * 1000 ** -0.2)
    with pytest.raises(ValueError, match="bandwidth"):
        stretch_ranks(R, 1000, 10**6, bandwidth=-1.0)


def test_popularity_estimator_table_equals_direct_fits():
    # notebook 11's table of every popularity-sampled estimator: each column recomputed on its own from the
    # returned logs (the fits, the naive metrics) and from the truth; the same seed gives the same table
    from sampling_lib import estimators as PE
    from sampling_lib import popularity as pop
    from sampling_lib.experiments import global_ranks_from_data
    from sampling_lib.metrics import metric_values

    ranks, N, info = global_ranks_from_data(None, models=["popularity", "itemknn"],
                                            synthetic={"n_users": 150, "n_items": 120}, rng=4)
    split, fitted = info["split"], info["fitted"]
    models = list(ranks)
    inter = np.concatenate([split.train.indices, split.test_items])
    weights = {a: pop.popularity_weights(inter, a, n_items=N).to_numpy() for a in (0.0, 1.0)}
    truth = {(a, m): pop.popularity_truth(fitted[m], split.train, split.test_items, weights[a])
             for a in weights for m in models}
    curves = {(1.0, m): pop.exact_rank_mass_curve(fitted[m], split.train, split.test_items, weights[1.0])
              for m in models}
    kw = dict(models=models, alphas=[1.0], n_values=[15], metrics=["recall@10", "ndcg@10"], curves=curves)
    table, traces, logs = studies.popularity_estimator_table(fitted, split.train, split.test_items, weights, truth,
                                                             rng=np.random.default_rng(2), **kw)
    assert len(table) == len(models) * 2 and set(logs) == {(1.0, 15, m) for m in models}
    assert len(traces) == 3 * len(models)          # uniform-pretend, pop_mle and the exact curve run EM
    for _, row in table.iterrows():
        log = logs[(row["alpha"], row["n"], row["model"])]
        F = metric_values(row["metric"], log.N)
        assert row["truth"] == pytest.approx(metric_values(row["metric"], N)[truth[(1.0, row["model"])].ranks - 1].mean())
        assert row["naive (popularity-sampled)"] == pytest.approx(metric_values(row["metric"], 15)[log.x].mean())
        assert row["pop_mle"] == pytest.approx(PE.popularity_fit(log, "pop_mle").pmf @ F, rel=1e-12)
        assert row["pop_mle (exact curve)"] == pytest.approx(
            PE.popularity_fit(log, "pop_mle", curve=curves[(1.0, row["model"])]).pmf @ F, rel=1e-12)
        lo, hi = PE.popularity_bounds(log)
        assert (row["bound low"], row["bound high"]) == pytest.approx((lo @ F, hi @ F), rel=1e-12)
    again, _, _ = studies.popularity_estimator_table(fitted, split.train, split.test_items, weights, truth,
                                                     rng=np.random.default_rng(2), **kw)
    pd.testing.assert_frame_equal(table, again)
