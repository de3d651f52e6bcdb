"""The planner of stratified designs (design.predict_strata, design.plan_strata) and evaluate's planned proxy
route with its fall-back to the uniform ladder.

The predictions are checked against simulations of the stratified estimator itself (its spread over
repeated evaluations, its mean cost), the tail ranked in full against full ranking, the planner's choices
against populations where the answer is known, and the evaluation against the test's own bookkeeping.
"""
import numpy as np
import pandas as pd
import pytest

from sampling_lib import evaluate
from sampling_lib.design import pilot_size, plan_strata, predict_strata, tail_candidates
from sampling_lib.estimators import logspline_strata_fit, strata_estimate
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.studies.strata import strata_tail_cells
from test_evaluate import N_ITEMS, Counter, _population

MET = ["recall@10", "ndcg@10"]


def _pilot(N=1000, m=20, t0=20, M=1500, seed=1, good=0.0):
    """Cells after the head and a first tail sample; ``good``: the share of users whose head holds every
    item above the held-out one it can (a proxy that knows), the others a random head."""
    rng = np.random.default_rng(seed)
    R = draw_global_ranks(synthetic_models(N)["beta_a0.35"], M, rng=rng)
    x, s, r = strata_tail_cells(R, N, m, tail_n=t0, tail_n_max=t0, rng=rng)
    if good:
        lucky = rng.random(M) < good
        x = np.where(lucky, np.minimum(R - 1, m), x)
        T = N - 1 - m
        above = R - 1 - x
        s = np.where(x < 10, t0, 0)
        r = 1 + rng.hypergeometric(above, T - above, np.maximum(s, 0))
    return np.full(M, N), np.full(M, m), x, s, r


def test_tail_candidates_double_up_to_the_whole_tail():
    assert tail_candidates(100, 1000) == [100, 200, 400, 800, 1000]
    assert tail_candidates(100, 60) == [60]
    assert pilot_size(943) == 300 and pilot_size(29858) == 2986 and pilot_size(120) == 120


def test_a_tail_ranked_in_full_predicts_full_ranking_precision():
    """tail_n = T: every user's tail rank is known, the estimate is full ranking's mean (ratio 1), and the
    cost is 1 + m + T for the users with x < k_max."""
    cells = _pilot(N=400, m=20, t0=20, M=600)
    fit = logspline_strata_fit(*cells, k_max=10)
    T = fit.grid.N - 1
    p = predict_strata(fit, T, T, MET)
    assert np.allclose(p.ratio, 1.0, atol=1e-6)
    share = float(np.mean(cells[2] < 10))
    assert p.cost[0] == pytest.approx(1 + 20 + share * T, rel=1e-9)


@pytest.mark.parametrize("t_max", [40, 160])
def test_predicted_spread_and_cost_match_simulated_evaluations(t_max):
    """The predicted standard error (at the fitted penalty) against the spread of the estimator over 30
    simulated evaluations (users and draws redrawn), and the predicted cost against their mean cost.
    Tolerances: the SD of 30 draws is itself uncertain by ~13% (two SEs: 0.3 in log); the cost is a mean
    of 1,500 users' sample sizes (2%)."""
    N, m, t0, M = 1000, 20, 20, 1500
    pmf = synthetic_models(N)["beta_a0.35"]
    fit = logspline_strata_fit(*_pilot(N, m, t0, M, seed=11), k_max=10)
    p = predict_strata(fit, t0, t_max, MET)
    est, cost = [], []
    for k in range(30):
        g = np.random.default_rng([5, t_max, k])
        R = draw_global_ranks(pmf, M, rng=g)
        x, s, r = strata_tail_cells(R, N, m, tail_n=t0, tail_n_max=t_max, rng=g)
        e = strata_estimate(np.full(M, N), np.full(M, m), x, s, r, metrics=MET, n_boot=0)
        est.append(e.estimate.to_numpy())
        cost.append(1 + m + s[x < 10].sum() / M)
    sd = np.std(est, axis=0, ddof=1)
    assert np.all(np.abs(np.log(p.se.to_numpy() / sd)) < 0.3), (p.se.to_numpy(), sd)
    assert p.cost[0] == pytest.approx(np.mean(cost), rel=0.02)


def test_the_predicted_ratio_falls_as_the_tail_ladder_grows():
    fit = logspline_strata_fit(*_pilot(), k_max=10)
    r = [predict_strata(fit, 20, t, MET).ratio.max() for t in (20, 80, 320)]
    assert r[0] > r[1] > r[2] >= 0.99


def test_the_plan_falls_back_to_the_uniform_ladder_when_a_useless_head_is_costly():
    """A random head of 150 of 400 candidates costs 38% of full ranking before any tail: the uniform
    ladder meets the target for less, and the plan says so; a proxy that knows the top of every user's
    ranking on a large catalogue pays."""
    pl = plan_strata({"a": _pilot(N=400, m=150, t0=20, M=600)}, n=20, tail_n=20, metrics=MET)
    assert pl.kind == "uniform" and pl.uniform is not None
    d = pl.designs()
    chosen = d[d.chosen].iloc[0]
    strat = d[(d.kind == "stratified") & d.meets]
    assert chosen.meets and (strat.empty or chosen.cost < strat.cost.min())
    good = plan_strata({"a": _pilot(N=5000, m=20, t0=20, M=800, good=0.9)}, n=100, tail_n=20, metrics=MET)
    d = good.designs()
    assert good.kind == "stratified" and good.meets
    uni = d[(d.kind != "stratified") & d.meets]
    assert uni.empty or d[d.chosen].cost.iloc[0] < uni.cost.min()
    # the tail chosen is the cheapest stratified design meeting the target
    strat = d[(d.kind == "stratified") & d.meets]
    assert good.tail_n_max == int(good.table.loc[good.table.design == strat.sort_values("cost").design.iloc[0],
                                                 "tail_n_max"].iloc[0])


def test_the_tail_top_is_bisected_between_the_doubling_rungs():
    """The plan scores the doubling rungs up to the first that meets the target, then tops between it and
    the rung before (multiples of tail_n) while they are more than an eighth apart: the chosen top meets,
    every top scored below it does not, the largest of those is within max(tail_n, top / 8) of it, and
    the predicted ratio falls as the top grows. Under a budget the most precise top within it is found the
    same way."""
    from sampling_lib.design._strata import TAIL_TOP_STEPS

    pl = plan_strata({"a": _pilot(N=5000, m=20, t0=20, M=1500)}, n=100, tail_n=20, metrics=MET, uniform=False)
    t = pl.table.assign(judged=pl.table.ratio * pl.table.margin)
    per = t.groupby("tail_n_max").agg(meets=("meets", "first"), judged=("judged", "max"), cost=("cost", "max"))
    top = pl.tail_n_max
    doubling = [x for x in tail_candidates(20, 5000 - 21) if x in per.index]
    assert pl.meets and per.meets[top] and top % 20 == 0
    assert set(per.index) - set(doubling), "no top between the doubling rungs was scored"
    below = per[per.index < top]
    assert not below.meets.any() and top - below.index.max() <= max(20, top // TAIL_TOP_STEPS)
    assert per.loc[top, "cost"] == per[per.meets].cost.min()
    assert np.all(np.diff(per.judged.to_numpy()) < 0) and np.all(np.diff(per.cost.to_numpy()) > 0)
    # a budget between two rungs: the largest top within it
    lo, hi = below.index.max(), per[per.meets].index.min()
    share = 0.5 * (per.cost[lo] + per.cost[hi]) / 5000
    pb = plan_strata({"a": _pilot(N=5000, m=20, t0=20, M=1500)}, n=100, tail_n=20, metrics=MET, uniform=False,
                     max_cost=share)
    perb = pb.table.groupby("tail_n_max").cost_share.max()
    inside, outside = perb[perb <= share], perb[perb > share]
    assert pb.tail_n_max == inside.index.max() and not pb.meets
    assert outside.index.min() - inside.index.max() <= max(20, outside.index.min() // TAIL_TOP_STEPS)


def test_a_budget_picks_the_most_precise_design_within_it():
    """With a budget no design meeting the target fits in, the chosen one is within it and has the smallest
    judged ratio (ratio times margin, worst over the metrics) of those within it."""
    pl = plan_strata({"a": _pilot()}, n=20, tail_n=20, metrics=MET, max_cost=0.03)
    t = pl.table.assign(worst=pl.table.ratio * pl.table.margin)
    per = t.groupby("design").agg(worst=("worst", "max"), share=("cost_share", "max"), chosen=("chosen", "first"),
                                  meets=("meets", "first"))
    inside = per[per.share <= 0.03]
    assert not inside.meets.any() and not pl.meets
    assert per[per.chosen].index[0] == inside.worst.idxmin()


@pytest.fixture(scope="module", params=["knows", "random"])
def planned(request):
    held, hist, models = _population(M=700, seed=4)
    prox = (np.asarray(models["A"](["u0"] * N_ITEMS, np.arange(N_ITEMS)), dtype=float) if request.param == "knows"
            else np.random.default_rng(5).random(N_ITEMS))
    counters = {m: Counter(f) for m, f in models.items()}
    res = evaluate(counters, held, N_ITEMS, exclude=hist, n=20, proxy=prox, head=20, tail_n=20, seed=3, n_boot=100,
                   progress=False)
    return held, hist, counters, res


def test_the_planned_route_scores_each_pair_once_and_reports_what_was_scored(planned):
    held, hist, counters, res = planned
    for c in counters.values():
        seen = c.seen()
        assert not seen.duplicated().any()
        assert len(seen) == int(res.cost.pairs_per_model.iloc[0])
    assert res.parts is not None and set(res.parts) == {"pilot", "rest"}
    pilot_users = set(res.parts["pilot"].ranks.user)
    assert len(pilot_users) == pilot_size(len(held)) and not pilot_users & set(res.parts["rest"].ranks.user)
    assert any("the proxy pays" in x or "the proxy does not pay" in x for x in res.notes)
    # the verdict in the config is what the other users ran
    assert res.config["proxy_pays"] == ("tail_rank" in res.parts["rest"].ranks.columns)


def test_the_planned_route_s_table_is_its_parts_joined(planned):
    """Stratified parts: one estimate on every user's cells (recomputed here from the ranks table); a
    fall-back: the users' shares of the parts' own estimates."""
    held, hist, counters, res = planned
    P = len(res.parts["pilot"].ranks.user.unique())
    M = len(held)
    if "tail_rank" in res.parts["rest"].ranks.columns:
        for m in ("A", "B"):
            r = res.ranks[res.ranks.model == m]
            e = strata_estimate(r.n_items, r["head"], r.head_above, r.tail_size, r.tail_rank, metrics=MET, n_boot=0)
            assert np.allclose(res.table[res.table.model == m].estimate, e.estimate, rtol=1e-10)
    else:
        a = res.parts["pilot"].table.set_index(["model", "metric"])
        b = res.parts["rest"].table.set_index(["model", "metric"])
        t = res.table.set_index(["model", "metric"])
        assert np.allclose(t.estimate, (P * a.estimate + (M - P) * b.estimate) / M)
        w1, w2 = P / M, (M - P) / M
        hi = t.estimate + np.sqrt((w1 * (a.ci_high - a.estimate)) ** 2 + (w2 * (b.ci_high - b.estimate)) ** 2)
        assert np.allclose(t.ci_high, hi)
    assert (res.table.users == M).all()


def test_the_planned_route_is_reproducible_and_saves_its_parts(planned, tmp_path):
    held, hist, counters, res = planned
    out = res.save(tmp_path / "ev")
    assert (out / "estimate.csv").exists() and (out / "pilot").is_dir() and (out / "rest").is_dir()
    assert pd.read_csv(out / "estimate.csv").estimate.to_numpy() == pytest.approx(res.table.estimate.to_numpy())
    assert "design:" in str(res) and "pilot, after stage" in str(res)


def test_a_useless_proxy_falls_back_and_the_other_users_cost_what_the_ladder_costs():
    """The random proxy's pilot: the plan falls back to the uniform ladder for the other users, whose pairs
    then cost per user what the uniform ladder alone costs (within 25%: they plan their own ladder on
    other users; one step of the planner's factor grid is x1.25); only the pilot paid for the head."""
    held, hist, models = _population(M=700, seed=4)
    prox = np.random.default_rng(5).random(N_ITEMS)
    kw = dict(exclude=hist, n=20, seed=3, n_boot=100, progress=False)
    res = evaluate(models, held, N_ITEMS, proxy=prox, head=20, tail_n=20, **kw)
    assert any("the proxy does not pay" in x for x in res.notes)
    ladder = evaluate(models, held, N_ITEMS, **kw)
    rest = res.parts["rest"].cost.iloc[0]
    assert rest.users == len(held) - pilot_size(len(held))
    assert rest.items_per_user <= 1.25 * ladder.cost.items_per_user.iloc[0]
    assert res.cost.pairs_per_model.iloc[0] == rest.pairs_per_model + res.parts["pilot"].cost.pairs_per_model.iloc[0]


def test_combined_intervals_add_their_sides_in_quadrature():
    from sampling_lib.evaluation import _combined

    cols = ["model", "metric", "K", "naive", "naive_ci_low", "naive_ci_high", "estimate", "se", "ci_low", "ci_high",
            "method", "scheme", "users", "N", "n", "confidence_level", "n_boot", "sensitivity_low",
            "sensitivity_high", "bound_low", "bound_high", "below_resolution", "clipped", "full_halfwidth",
            "precision_ratio"]
    row = dict(model="m", metric="recall@10", K=10, naive=0.2, naive_ci_low=0.1, naive_ci_high=0.3, estimate=0.2,
               se=0.01, ci_low=0.15, ci_high=0.27, method="x", scheme="hypergeometric", users=100, N=50, n=10,
               confidence_level=0.95, n_boot=10, sensitivity_low=0.2, sensitivity_high=0.2, bound_low=np.nan,
               bound_high=np.nan, below_resolution=False, clipped=False, full_halfwidth=0.04, precision_ratio=1.5)
    a = pd.DataFrame([row], columns=cols)
    b = pd.DataFrame([dict(row, estimate=0.4, ci_low=0.38, ci_high=0.43, users=300)], columns=cols)
    t = _combined(a, b, 100, 300, 0.95).iloc[0]
    assert t.estimate == pytest.approx(0.25 * 0.2 + 0.75 * 0.4)
    assert t.ci_low == pytest.approx(t.estimate - np.hypot(0.25 * 0.05, 0.75 * 0.02))
    assert t.ci_high == pytest.approx(t.estimate + np.hypot(0.25 * 0.07, 0.75 * 0.03))
    assert t.users == 400 and pd.isna(t.N)


def test_the_pilot_s_tail_ladder_runs_to_resolution_before_the_plan(planned):
    """The pilot's users climb the tail ladder to the first rung tail_n * 2^j at which one sampled item stands
    for at most K = 10 tail items (computed here from their N_u and heads), and the plan comes after it; the
    other users' ladder (stratified) stops at the plan's top. (The precision check may then take both further:
    tests/test_precision_check.py.)"""
    held, hist, counters, res = planned
    r = res.parts["pilot"].ranks
    T = (r.n_items - 1 - r["head"]).to_numpy()
    rung = 20
    while T.max() / rung > 10 and rung < T.min():
        rung = min(2 * rung, int(T.min()))
    d = res.parts["pilot"].design
    assert any(f"these users' tail ladder runs to {rung:,}" in x for x in d.decision)
    checked = d.decision.str.contains("the precision check").any()    # (it may take the pilot's users on)
    assert r.tail_size.max() == rung if not checked else r.tail_size.max() > rung
    plan = [x for x in d.decision if "for the other users" in x]
    # the plan is the last decision of the pilot's own design (the stage the check, if any, reopened it after)
    last = d.decision[d.decision.str.contains("the precision check")].iloc[0] if checked else d.decision.iloc[-1]
    assert last.count("for the other users") == 1
    # once on the cells; again after the uniform first stage where the cells said the proxy does not pay
    staged = "the uniform first stage's tail part" in set(d.design)
    assert len(plan) == 1 + staged
    if staged:
        assert "the proxy does not pay" in plan[0] and d.design.iloc[-1] == "the uniform first stage's tail part"
    rest = res.parts["rest"]
    if "tail_size" in rest.ranks.columns:    # the others re-planned after their first tail sample
        again = [d for d in rest.design.decision if "re-planned on the pilot's cells" in d]
        assert len(again) == 1
        top = int(again[0].split("a tail ladder to ")[1].split(" ")[0].replace(",", ""))
        if checked or rest.design.decision.str.contains("the precision check").any():
            top = rest.config["tail_n_max"]          # raised by the check
        assert rest.ranks.tail_size.max() <= top


def test_a_proxy_that_knows_the_model_pays_and_the_other_users_re_plan():
    """Model B scored with its own scores as the proxy on 4,000 items: the head holds every item above the
    held-out one for the users a top-10 metric needs, so the plan keeps the stratified design; the other
    users re-plan their tail on the pilot's cells and theirs; the joint interval covers B's full-ranking
    metric of these users (computed here from every candidate's score), for fewer pairs than the uniform
    ladder scores on the same users."""
    N = 4000
    held, hist, models = _population(M=700, N=N, seed=4)
    res = evaluate({"B": models["B"]}, held, N, exclude=hist, n=20, proxy=models["B"], head=20, tail_n=20, seed=3,
                   n_boot=200, progress=False)
    assert any("the proxy pays" in x for x in res.notes)
    assert any("re-planned on the pilot's cells" in d for d in res.parts["rest"].design.decision)
    R = []
    for u, h in held.items():
        cand = np.setdiff1d(np.arange(N), hist.get(u, []))
        s = np.asarray(models["B"]([u] * cand.size, cand), dtype=float)
        R.append(1 + int(np.sum(s[cand != h] >= s[cand == h][0])))
    R = np.asarray(R)
    truth = {"recall@10": np.mean(R <= 10), "ndcg@10": np.mean(np.where(R <= 10, 1 / np.log2(R + 1), 0.0))}
    for row in res.table.itertuples():
        assert row.ci_low <= truth[row.metric] <= row.ci_high, (row.metric, truth[row.metric], row.ci_low, row.ci_high)
    ladder = evaluate({"B": models["B"]}, held, N, exclude=hist, n=20, seed=3, n_boot=0, progress=False)
    assert res.cost.pairs_per_model.iloc[0] < ladder.cost.pairs_per_model.iloc[0]


def test_a_budget_bounds_the_planned_route_and_one_below_the_head_is_refused():
    """max_cost with a planned proxy design: the pilot's resolving ladder is capped so that even every user
    at its top stays within the budget, the pairs counted stay within it, and a budget below the head's
    own cost (held-out item and head per user) is an error naming max_cost."""
    held, hist, models = _population(M=700, seed=4)
    prox = np.asarray(models["A"](["u0"] * N_ITEMS, np.arange(N_ITEMS)), dtype=float)
    counters = {m: Counter(f) for m, f in models.items()}
    res = evaluate(counters, held, N_ITEMS, exclude=hist, n=20, proxy=prox, head=20, tail_n=20, seed=3, n_boot=50,
                   progress=False, max_cost=0.05)
    N_u = np.array([N_ITEMS - len(set(hist.get(u, [])) - {h}) for u, h in held.items()])
    assert len(counters["A"].seen()) <= 0.05 * N_u.sum()
    with pytest.raises(ValueError, match="max_cost=0.01 is below the head's own cost"):
        evaluate(models, held, N_ITEMS, exclude=hist, n=20, proxy=prox, head=20, tail_n=20, progress=False,
                 max_cost=0.01)


def test_bad_arguments_name_themselves():
    with pytest.raises(TypeError, match="fit must be a StrataFit"):
        predict_strata("not a fit", 20, 40)
    rank = logspline_strata_fit(*_pilot(N=300, M=300), k_max=10, coordinate="rank")
    with pytest.raises(TypeError, match="coordinate='tail'"):
        predict_strata(rank, 20, 40)
    with pytest.raises(ValueError, match="tail_n_max"):
        predict_strata(logspline_strata_fit(*_pilot(N=300, M=300), k_max=10), 40, 20)
    with pytest.raises(ValueError, match="pilots must map"):
        plan_strata([], n=20, tail_n=20)


def test_a_subset_of_the_checked_inputs_is_what_checking_the_subset_gives():
    from sampling_lib.evaluation import _subset_inputs
    from sampling_lib.stagerun import check_inputs

    held, hist, _ = _population(M=50, seed=2)
    full = check_inputs(held, N_ITEMS, hist)
    idx = np.array([0, 3, 4, 17, 49])
    users = [list(held)[i] for i in idx]
    direct = check_inputs({u: held[u] for u in users}, N_ITEMS, {u: hist[u] for u in users})
    sub = _subset_inputs(full, idx)
    assert list(sub["users"]) == list(direct["users"])
    for k in ("held", "ptr", "bad", "n_items"):
        assert np.array_equal(sub[k], direct[k]), k


def test_the_printed_result_fits_100_columns_below_its_header(planned):
    """print(result): the cost, every decision and every note wrapped to 100 columns (the estimate view's
    header is one line by design: the command line's tests read it whole)."""
    held, hist, counters, res = planned
    lines = str(res).splitlines()
    assert max(len(line) for line in lines[1:]) <= 100
    starts = [line for line in lines if line.startswith(("  pilot, after stage", "  rest, after stage"))]
    assert len(starts) == int(res.design.decision.astype(bool).sum())
