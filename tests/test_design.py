"""sampling_lib.design (issue 29): the law of a nested design, its cost, the predicted width, the planner.

The law is checked against the stage-by-stage simulation of
:func:`sampling_lib.sampling.sample_design` (two independent computations),
the predicted width against the exact answer of two designs whose variance is
known in closed form, and the planner against its own definition (the
cheapest candidate that meets the target).
"""
import numpy as np
import pandas as pd
import pytest

from sampling_lib.design import candidate_designs, design_law, plan, predict
from sampling_lib.estimators import logspline_fit
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.sampling import Design, sample_design, sample_ranks, size_ladder

N = 600
DESIGNS = [Design("single", 20), Design("threshold", 20, threshold=2, n2=100),
           Design("ladder", 15, n_max=240), Design("ladder", 15, n_max=240, growth=1.5),
           Design("full_subset", 20, fraction=0.3)]


def design_id(d):
    return d.kind + ("" if d.kind != "ladder" or d.growth == 2 else f"-x{d.growth:g}")


@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
@pytest.mark.parametrize("design", DESIGNS, ids=design_id)
def test_design_law_matches_the_simulated_stages(design, scheme):
    # each R's cell frequencies of 20,000 simulated users against P(cell | R): total variation
    # distance within 4 standard errors of a multinomial's (sum_c sqrt(p_c (1 - p_c) / n) / 2)
    Rs = np.array([1, 3, 12, 80, 400])
    sizes, lo, hi, D = design_law(design, N, Rs, scheme=scheme)
    np.testing.assert_allclose(D.sum(axis=1), 1.0, atol=1e-9)
    rng = np.random.default_rng(11)
    reps = 20_000
    for i, R in enumerate(Rs):
        r, s = sample_design(np.full(reps, R), N, design, scheme=scheme, rng=rng)
        cell = np.full(reps, -1)
        for c in range(sizes.size):
            cell[(s == sizes[c]) & (r >= lo[c]) & (r <= hi[c]) & (cell < 0)] = c
        assert (cell >= 0).all(), "a simulated (n_u, r_u) outside every cell of the law"
        freq = np.bincount(cell, minlength=sizes.size) / reps
        p = D[i]
        tv = 0.5 * np.abs(freq - p).sum()
        se = 0.5 * np.sqrt(p * (1 - p) / reps).sum()
        assert tv <= 4 * se + 1e-3, (R, tv, se)


@pytest.mark.parametrize("design", DESIGNS, ids=design_id)
def test_expected_cost_matches_simulation(design):
    from sampling_lib.design import _cost

    pmf = synthetic_models(N)["beta_a0.35"]
    R = draw_global_ranks(pmf, 40_000, rng=1)
    _, s = sample_design(R, N, design, rng=2)
    Rg = np.arange(1, N + 1)
    c = _cost(design, N, pmf, Rg, "binomial")
    assert c == pytest.approx(s.mean(), rel=0.02)


def test_design_law_of_ladder_reaches_only_ladder_sizes():
    d = Design("ladder", 10, n_max=100)
    sizes, lo, hi, D = design_law(d, 1000, [1, 50])
    assert set(sizes.tolist()) == set(size_ladder(10, 100).tolist())
    assert (lo[sizes < 100] > 1).all()              # rank 1 below n_max always continues
    assert D[0, sizes == 100].sum() == pytest.approx((1 - 0 / 999) ** 99)   # R = 1 reaches the top
    d = Design("ladder", 10, n_max=100, growth=1.5)
    sizes, lo, hi, D = design_law(d, 1000, [1, 50])
    assert sorted(set(sizes.tolist())) == [10, 15, 23, 35, 53, 80, 100] == size_ladder(10, 100, 1.5).tolist()
    assert D[0, sizes == 100].sum() == pytest.approx(1.0) and (lo[sizes < 100] > 1).all()


@pytest.mark.parametrize("design, n0", [(Design("single", 20), 10), (Design("single", 15), 15),
                                        (Design("threshold", 20, threshold=2, n2=100), 20),
                                        (Design("ladder", 15, n_max=240), 15),
                                        (Design("ladder", 15, n_max=240, growth=1.5), 15),
                                        (Design("ladder", 15, n_max=15), 15),
                                        (Design("full_subset", 20, fraction=0.3), 20)])
def test_later_stages_are_the_rounds_a_top_user_goes_through(design, n0):
    """design.later_stages against the rule run stage by stage (next_stage_sizes) on users at rank 1 after a
    first stage of n0 items: the rounds until no set grows (a single set of n0 is the first stage itself)."""
    from sampling_lib.design import later_stages
    from sampling_lib.sampling import next_stage_sizes

    sizes, rounds = np.full(4, n0), 0
    while not (design.kind == "single" and design.n == n0):
        new = next_stage_sizes(np.ones((4, 1)), sizes, design, N=N, rng=0)
        if (new == sizes).all():
            break
        sizes, rounds = new, rounds + 1
        if design.kind != "ladder":         # the other designs have one stage after the first
            break
    assert later_stages(design, n0) == rounds
    want = (len(size_ladder(15, design.n_max, design.growth)) - 1 if design.kind == "ladder"
            else int(design.n != n0) if design.kind == "single" else 1)
    assert rounds == want


@pytest.mark.parametrize("growth", [2.0, 1.5, 1.25, 3.0])
def test_first_rungs_are_the_ladders_own_sizes_up_to_four_n(growth):
    """The rungs run before re-planning: a prefix of every ladder of that growth from n (so the chosen ladder
    continues them), all at most 4n and max_size, the next size of the ladder above 4n; for doubling the
    command line's former rule n -> 4n (three sizes, or the ladder's own when shorter)."""
    from sampling_lib.design import first_rungs

    for n in (2, 10, 17, 100, 176):
        for n_max in (n, 3 * n, 4 * n, 5 * n, 64 * n):
            f = first_rungs(n, growth, n_max)
            lad = size_ladder(n, n_max, growth)
            assert f.tolist() == lad[:f.size].tolist() and f.max() <= min(4 * n, n_max)
            if f.size < lad.size:
                assert lad[f.size] > 4 * n
            if growth == 2:
                assert f.tolist() == lad[:3].tolist()


@pytest.mark.parametrize("growth", [2.0, 1.5, 1.25, 3.0])
def test_first_rungs_reach_an_eighth_of_the_chosen_ladder(growth):
    """With the chosen ladder's n_max: a prefix of that ladder, every size at most max(4n, n_max / 8) and
    max_size, the ladder's next size above that reach (so the plan extrapolates from the last rung to n_max
    by a factor of at most 8 x growth once n_max / 8 > 4n); never fewer rungs than without n_max."""
    from sampling_lib.design import first_rungs

    for n in (2, 10, 17, 100, 176):
        for n_max in (n, 3 * n, 31 * n, 32 * n, 33 * n, 500 * n, 4096 * n + 7):
            for max_size in (None, n_max, 2 * n):
                f = first_rungs(n, growth, max_size, n_max=n_max)
                cap = n_max if max_size is None else min(n_max, max_size)
                lad = size_ladder(n, cap, growth)
                reach = max(4 * n, n_max / 8)
                assert f.tolist() == lad[:f.size].tolist() and f.max() <= min(reach, cap)
                if f.size < lad.size:
                    assert lad[f.size] > reach
                assert f.size >= first_rungs(n, growth, cap).size
                if max_size is None and n_max / 8 > 4 * n:
                    assert n_max / f[-1] <= 8 * growth + 1e-9
    with pytest.raises(ValueError, match="n_max"):
        first_rungs(10, n_max=5)


def test_a_finer_ladder_costs_less_for_the_same_top_size():
    """Growth 1.5 against doubling, same n and n_max (design._cost, exact): a user that leaves the ladder stops
    at the first size at or above where an item first ranks above the held-out one, overshooting it by a
    factor of about (g - 1) / ln g on average (1.44 for doubling, 1.23 for 1.5, for a stopping point
    log-uniform over a rung); the users still at rank 1 at n_max cost n_max under both."""
    from sampling_lib.design import _cost

    pmf = synthetic_models(N)["beta_a0.35"]
    Rg = np.arange(1, N + 1)
    for n, n_max in [(15, 240), (10, 500), (20, 590)]:
        two = _cost(Design("ladder", n, n_max=n_max), N, pmf, Rg, "binomial")
        finer = _cost(Design("ladder", n, n_max=n_max, growth=1.5), N, pmf, Rg, "binomial")
        assert finer < two, (n, n_max, finer, two)


def _prior(M=3000, n=30, seed=0):
    R = draw_global_ranks(synthetic_models(N)["beta_a0.35"], M, rng=seed)
    return R, logspline_fit(sample_ranks(R, N, n, rng=seed + 1), N, n)


def test_full_ranking_of_everyone_predicts_full_rankings_width():
    # phi = F and A = 0: the predicted half-width is full ranking's, up to the grid's cell averages
    _, fit = _prior()
    t = predict(Design("full_subset", 30, fraction=1.0), fit, ["recall@10", "ndcg@10"], M=3000)
    np.testing.assert_allclose(t.ratio, 1.0, atol=0.02)
    assert (t.cost == N).all() and (t.cost_share == 1.0).all()


def test_predicted_width_shrinks_as_the_design_resolves_the_top():
    _, fit = _prior()
    ratios = [predict(Design("ladder", 30, n_max=m), fit, "recall@10", M=3000).ratio[0] for m in (30, 120, 480)]
    # below resolution (w = 20.7 at n = 30) against ladders that resolve K = 10 (w = 5.0 and 1.25); once
    # resolved, a larger n_max need not narrow the interval further (the realized ratios agree: 0.99, 1.01)
    assert ratios[0] > max(ratios[1:])
    one = predict(Design("single", 30), fit, "recall@10", M=3000)
    assert one.ratio[0] == pytest.approx(ratios[0], rel=1e-6)      # a ladder with n_max = n is single n
    assert (one.halfwidth_low <= one.halfwidth).all() and (one.halfwidth <= one.halfwidth_high).all()


def test_predicted_width_falls_with_M():
    _, fit = _prior()
    a, b, c = (predict(Design("single", 30), fit, "recall@10", M=m) for m in (1000, 10**6, 10**8))
    assert b.full_halfwidth[0] == pytest.approx(a.full_halfwidth[0] / np.sqrt(1000), rel=1e-9)
    # below resolution the penalty's weight (Pen / M) falls with M and weakly identified directions
    # of the prior open up: the width falls, but more slowly than 1/sqrt(M)
    assert a.halfwidth[0] > b.halfwidth[0] > c.halfwidth[0]
    assert b.halfwidth[0] / c.halfwidth[0] < 10.0
    # everyone ranked in full: no prior in the estimate, exactly 1/sqrt(M)
    f1, f2 = (predict(Design("full_subset", 30, fraction=1.0), fit, "recall@10", M=m) for m in (10**6, 10**8))
    assert f1.halfwidth[0] / f2.halfwidth[0] == pytest.approx(10.0, rel=1e-9)


def test_plan_picks_the_cheapest_design_that_meets_the_target():
    R, _ = _prior(M=2000, n=20)
    pilot = sample_ranks(R, N, 20, rng=3)
    res = plan(pilot, N, 20, metrics="recall@10", target_ratio=1.5)
    d = res.designs()
    assert d.chosen.sum() == 1
    chosen = d[d.chosen].iloc[0]
    assert chosen.meets and chosen.cost == d[d.meets].cost.min()
    judged = (res.table.ratio * res.table.margin).groupby(res.table.design, sort=False).max()[d.design].to_numpy()
    assert (judged[d.meets] <= 1.5 + 1e-12).all() and (judged[~d.meets] > 1.5).all()
    assert res.best.describe() == chosen.design and "1.5" in res.target and "assurance 0.9" in res.target
    # every candidate's sets fit in N
    for cand in candidate_designs(N, 20):
        cand.check(N)


def test_plan_robust_judges_by_the_high_end_and_costs_at_least_as_much():
    R, _ = _prior(M=2000, n=20)
    pilot = sample_ranks(R, N, 20, rng=3)
    a = plan(pilot, N, 20, metrics="recall@10", target_ratio=1.5)
    b = plan(pilot, N, 20, metrics="recall@10", target_ratio=1.5, robust=True)
    db = b.designs()
    ok = b.table.groupby("design", sort=False).ratio_high.max()
    assert (ok[db.set_index("design").meets] <= 1.5 + 1e-12).all()
    if b.best is not None and a.best is not None:
        assert db[db.chosen].cost.iloc[0] >= a.designs()[a.designs().chosen].cost.iloc[0]


def test_assurance_margin_is_exp_of_the_normal_quantile_times_the_measured_sd():
    from scipy import stats

    from sampling_lib.design import RATIO_PREDICTION_SD, assurance_margin

    for a in (0.5, 0.8, 0.9, 0.975):
        got = assurance_margin(["hr@10", "ndcg@5", "precision@3", "map@10", "mrr@20"], a)
        sd = [RATIO_PREDICTION_SD[k] for k in ("recall", "ndcg", "precision", "ap", "mrr")]
        np.testing.assert_allclose(got, np.exp(stats.norm.ppf(a) * np.array(sd)), rtol=1e-12)
    assert (assurance_margin("ndcg@10", 0.5) == 1.0).all()
    assert assurance_margin("ndcg@10", 0.95)[0] > assurance_margin("ndcg@10", 0.9)[0] > 1.0
    for bad in (0.49, 1.0, float("nan")):
        with pytest.raises(ValueError, match="assurance"):
            assurance_margin("recall@10", bad)
    with pytest.raises(TypeError, match="assurance"):
        assurance_margin("recall@10", "0.9")


def test_plan_with_assurance_judges_the_prediction_times_its_margin():
    """assurance 0.5 judges the prediction itself; a higher assurance refuses a design predicted within its
    margin under the target, so its choice costs at least as much; ``margin`` is assurance_margin's."""
    from sampling_lib.design import assurance_margin

    R, _ = _prior(M=2000, n=20)
    pilot = sample_ranks(R, N, 20, rng=3)
    metrics = ["recall@10", "ndcg@10"]
    plain = plan(pilot, N, 20, metrics=metrics, target_ratio=1.5, assurance=0.5)
    assert (plain.table.margin == 1.0).all() and plain.best is not None
    worst = plain.table.groupby("design", sort=False).ratio.max()
    assert plain.designs().set_index("design").meets.equals(worst <= 1.5)
    x = float(worst[plain.best.describe()])
    # a target 1% above the plain choice's prediction: met as predicted, not with a 3-6% margin
    loose = plan(pilot, N, 20, metrics=metrics, target_ratio=x * 1.01, assurance=0.5)
    sure = plan(pilot, N, 20, metrics=metrics, target_ratio=x * 1.01, assurance=0.9)
    assert loose.best == plain.best
    per = sure.designs().set_index("design")
    assert not per.meets[plain.best.describe()]
    np.testing.assert_allclose(sure.table.margin.to_numpy(),
                               np.tile(assurance_margin(metrics, 0.9), len(per)), rtol=1e-12)
    if sure.best is not None:
        assert per.cost[sure.best.describe()] > per.cost[plain.best.describe()]
    with pytest.raises(ValueError, match="assurance"):
        plan(pilot, N, 20, metrics=metrics, assurance=0.3)


def test_plan_with_an_unreachable_target_chooses_nothing():
    R, _ = _prior(M=500, n=20)
    res = plan(sample_ranks(R, N, 20, rng=3), N, 20, metrics="recall@10", target_halfwidth=1e-6,
               designs=[Design("single", 20), Design("ladder", 20, n_max=80)])
    assert res.best is None and not res.table.chosen.any() and not res.table.meets.any()


def test_plan_with_a_budget_never_chooses_above_it_and_buys_the_most_precise():
    R, _ = _prior(M=2000, n=20)
    pilot = sample_ranks(R, N, 20, rng=3)
    free = plan(pilot, N, 20, metrics="recall@10", target_ratio=1.1)
    cost = free.designs().set_index("design").cost_share
    assert free.best is not None and free.table.within_budget.all()
    assert cost[free.best.describe()] > cost.min()                 # a second stage is needed
    # a budget above the cheapest meeting design's cost: the same choice
    same = plan(pilot, N, 20, metrics="recall@10", target_ratio=1.1, max_cost=float(cost[free.best.describe()]))
    assert same.best.describe() == free.best.describe()
    # a budget below it: the most precise design within it, which does not meet the target
    cap = float(cost[free.best.describe()]) * 0.99
    tight = plan(pilot, N, 20, metrics="recall@10", target_ratio=1.1, max_cost=cap)
    d = tight.designs()
    inside = d[d.cost_share <= cap]
    assert (d.within_budget == (d.cost_share <= cap)).all() and len(inside) >= 1
    chosen = d[d.chosen].iloc[0]
    assert chosen.cost_share <= cap and not chosen.meets
    assert chosen.ratio == inside.ratio.min()
    assert tight.best.describe() == chosen.design
    with pytest.raises(ValueError, match="max_cost"):
        plan(pilot, N, 20, metrics="recall@10", max_cost=0.0)


def test_plan_from_a_guess_and_max_size():
    res = plan(None, 5000, 50, M=2000, guess=0.2, metrics="recall@10", max_size=800, target_ratio=2.0)
    sizes = [{"single": d.n, "threshold": d.n + d.n2, "ladder": d.n_max, "full_subset": d.n}[d.kind]
             for d in candidate_designs(800, 50)]
    assert max(sizes) <= 800
    assert set(res.table.design) <= {d.describe() for d in candidate_designs(800, 50)}


@pytest.mark.parametrize("kwargs, match", [
    (dict(pilot=None, N=1000, n=10), "pilot"),
    (dict(pilot=None, N=1000, n=10, guess=0.2), "M"),
    (dict(pilot=[1, 2, 3], N=1000, n=10, target_ratio=0.9), "target_ratio"),
    (dict(pilot=[1, 2, 3], N=1000, n=10, target_halfwidth=0.0), "target_halfwidth"),
    (dict(pilot=[1, 2, 3], N=1000, n=10, max_size=5), "max_size"),
    (dict(pilot=[1, 2, 3], N=1000, n=2000), "n"),
    (dict(pilot=None, N=1000, n=10, M=100, guess=1.5), "guess"),
    (dict(pilot=[1, 2, 3], N=1000, n=10, assurance=1.0), "assurance"),
])
def test_plan_bad_input_names_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plan(**kwargs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(kind="stages", n=10), "kind"),
    (dict(kind="threshold", n=10, threshold=11, n2=5), "threshold"),
    (dict(kind="threshold", n=10, threshold=1, n2=0), "n2"),
    (dict(kind="ladder", n=10, n_max=5), "n_max"),
    (dict(kind="full_subset", n=10, fraction=0.0), "fraction"),
])
def test_design_bad_input_names_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Design(**kwargs)


def test_design_larger_than_the_catalogue_is_refused():
    with pytest.raises(ValueError, match="exceeds N"):
        sample_design([1, 2], 100, Design("threshold", 50, threshold=1, n2=60))
    with pytest.raises(ValueError, match="exceeds N"):
        design_law(Design("ladder", 10, n_max=200), 100, [1])


def test_sample_design_is_reproducible_and_per_user_N():
    R = np.array([1, 2, 5, 40, 90])
    Nu = np.array([100, 120, 150, 200, 100])
    d = Design("threshold", 10, threshold=1, n2=50)
    a = sample_design(R, Nu, d, scheme="hypergeometric", rng=4)
    b = sample_design(R, Nu, d, scheme="hypergeometric", rng=4)
    np.testing.assert_array_equal(a[0], b[0])
    r, s = a
    assert (r >= 1).all() and (r <= s).all() and (r <= R).all()       # without replacement: r_u <= R_u
    assert set(s.tolist()) <= {10, 60} and s[0] == 60                  # R = 1 is always at rank 1
    full = sample_design(R, Nu, Design("full_subset", 10, fraction=1.0), rng=0)
    np.testing.assert_array_equal(full[0], R)
    np.testing.assert_array_equal(full[1], Nu)


def test_plan_table_columns():
    res = plan(None, 5000, 50, M=2000, guess=0.2, metrics=["recall@10", "ndcg@10"],
               designs=[Design("single", 50), Design("ladder", 50, n_max=400)])
    cols = {"design", "kind", "metric", "value", "cost", "cost_share", "halfwidth", "halfwidth_low",
            "halfwidth_high", "full_halfwidth", "ratio", "ratio_high", "margin", "meets", "within_budget", "chosen"}
    assert cols <= set(res.table.columns)
    assert isinstance(res.designs(), pd.DataFrame) and len(res.designs()) == 2


def test_plan_shows_progress_off_a_terminal(capsys, monkeypatch):
    from sampling_lib import _progress

    monkeypatch.setattr(_progress, "FIRST_LINE_AFTER", 0.0)
    plan(None, 5000, 50, M=2000, guess=0.2, metrics="recall@10", progress=True,
         designs=[Design("single", 50), Design("ladder", 50, n_max=400)])
    err = capsys.readouterr().err
    assert "plan: predicting" in err and "2 designs" in err
    plan(None, 5000, 50, M=2000, guess=0.2, metrics="recall@10", designs=[Design("single", 50)])
    assert capsys.readouterr().err == ""


def test_plan_on_a_pilot_with_per_user_sizes():
    """plan(sample_sizes=): re-planning on a design run in part (issue 29). Equal sizes give the plan of
    the plain pilot; after ladder rungs the prior sees the top of P(R) that the first stage cannot."""
    g = np.random.default_rng(7)
    N, M, n = 20_000, 20_000, 21                     # w = 1000: Recall@10 far below resolution
    top = g.random(M) < 0.12                          # a mass at ranks 1..5 the first stage cannot see
    R = np.where(top, g.integers(1, 6, M),
                 np.minimum(N, np.floor(np.exp(g.uniform(np.log(6), np.log(N), M))).astype(np.int64)))
    pilot = sample_ranks(R, N, n, rng=1)
    designs = [Design("ladder", n, n_max=n * 64), Design("threshold", n, threshold=1, n2=n * 32)]
    a = plan(pilot, N, n, designs=designs)
    b = plan(pilot, N, n, designs=designs, sample_sizes=np.full(M, n))
    np.testing.assert_allclose(b.table.halfwidth, a.table.halfwidth, rtol=1e-3)
    r, s = sample_design(R, N, Design("ladder", n, n_max=n * 16), rng=2)
    c = plan(r, N, n, designs=designs, sample_sizes=s)
    truth = np.mean(R <= 10)
    va = a.table.value[a.table.metric == "recall@10"].iloc[0]
    vc = c.table.value[c.table.metric == "recall@10"].iloc[0]
    assert abs(vc - truth) < 0.5 * abs(va - truth), (va, vc, truth)
    with pytest.raises(ValueError, match="sample_sizes must be >= the first stage's n=21"):
        plan(np.minimum(pilot, 18), N, n, designs=designs, sample_sizes=np.full(M, 18))
    # a first stage a few items short (NCF's sets of 99 beside 100) is a first stage: the same plan as the
    # users' own sizes give, and the ranks still pair several models (priced by their union)
    short = np.where(np.arange(M) % 10 == 0, n - 1, n)
    r_short = np.minimum(pilot, short)
    d = plan(r_short, N, n, designs=designs, sample_sizes=short)
    np.testing.assert_allclose(d.table.halfwidth, a.table.halfwidth, rtol=0.05)   # a tenth of users one item short
    two = plan({"a": r_short, "b": np.minimum(sample_ranks(R, N, n, rng=5), short)}, N, n, designs=designs,
               sample_sizes=short)
    indep = plan({"a": r_short, "b": np.minimum(sample_ranks(R, N, n, rng=5), short)}, N, n, designs=designs,
                 sample_sizes=short, paired=False)
    assert not np.allclose(two.table.cost_all_models, indep.table.cost_all_models)


# ---------------------------------------------------------------------------- several models: the union's cost
def _shared_ladder(Ra, Rb, N, n, n_max, coupling, g, growth=2.0):
    """Stage by stage, a ladder whose added items two models share (binomial scheme): each added item lies
    above a user's held-out item under model m with probability (R_m - 1)/(N - 1), independently for the two
    models or through one uniform (comonotone). A user goes on while either model has it at rank 1; each
    model alone would go on while it does. Returns (stage-1 ranks (M, 2), union cost per user, cost of each
    model alone per user, merged ranks (M, 2) of the shared design: 1 + the items above over its stages)."""
    p = np.c_[Ra - 1, Rb - 1] / (N - 1)

    def above(m, idx):
        a, b = p[idx, 0], p[idx, 1]
        if coupling == "independent":
            return np.c_[g.binomial(m, a), g.binomial(m, b)]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        c_lo = g.binomial(m, lo)
        c_hi = c_lo + g.binomial(m - c_lo, np.divide(hi - lo, 1 - lo, out=np.zeros_like(lo), where=lo < 1))
        return np.c_[np.where(a <= b, c_lo, c_hi), np.where(a <= b, c_hi, c_lo)]

    M = Ra.size
    x = above(n - 1, np.arange(M))
    top, total = x == 0, x.copy()
    sizes = size_ladder(n, n_max, growth)
    union, alone = np.full(M, float(n)), np.full((M, 2), float(n))
    for j in range(1, sizes.size):
        m = int(sizes[j] - sizes[j - 1])
        go = top.any(axis=1)
        union[go] += m
        alone[top] += m
        top[~go] = False
        more = above(m, np.flatnonzero(go))
        total[go] += more
        top[go] &= more == 0
    return 1 + x, union, alone, 1 + total


@pytest.mark.parametrize("case, growth", [("independent", 2.0), ("correlated", 2.0), ("comonotone", 2.0),
                                          ("independent", 1.5), ("correlated", 1.5)])
def test_shared_cost_of_a_ladder_against_a_stage_by_stage_simulation(case, growth):
    """design.shared_cost (the union of the users two models send on) against the simulated ladder. For
    independent models it is the exact union up to the models' own cost predictions (the error budget: each
    model's predicted cost against its simulated one, plus 3 Monte Carlo standard errors); for dependent
    models the union lies between the comonotone (dependence 1) and independent (0) predictions widened by
    that budget, and the pilot's dependence puts the prediction nearer the simulated union than either
    end's farther one."""
    from sampling_lib.design import shared_cost
    g = np.random.default_rng({"independent": 1, "correlated": 2, "comonotone": 3}[case])
    N, n, n_max, M = 5000, 50, 1600, 20000
    pmf = synthetic_models(N)["beta_a0.35"]
    Ra = draw_global_ranks(pmf, M, rng=g)
    Rb = (draw_global_ranks(pmf, M, rng=g) if case == "independent"
          else np.clip((Ra * np.exp(g.normal(0.0, 0.5, M))).astype(np.int64), 1, N))
    r1, union, alone, _ = _shared_ladder(Ra, Rb, N, n, n_max, "comonotone" if case == "comonotone" else "independent",
                                         g, growth)
    d = Design("ladder", n, n_max=n_max, growth=growth)
    fits = [logspline_fit(r1[:, k], N, n) for k in range(2)]
    single = np.array([predict(d, f, "recall@10", M=M).cost[0] for f in fits])
    budget = (np.abs(single / alone.mean(axis=0) - 1).max() + 3 * union.std() / np.sqrt(M) / union.mean())
    pred, lo, hi = (shared_cost(d, fits, r1, dependence=x) for x in (None, 1.0, 0.0))
    sim = union.mean()
    assert sim >= alone.mean(axis=0).max() * (1 - 3 * union.std() / np.sqrt(M) / sim)     # at least the largest
    if case == "independent":
        assert abs(pred / sim - 1) <= budget, (pred, sim, budget)
    else:
        assert lo * (1 - budget) <= sim <= hi * (1 + budget), (lo, sim, hi, budget)
        assert abs(pred - sim) < max(abs(lo - sim), abs(hi - sim)), (lo, pred, hi, sim)


def test_a_merged_pilot_with_first_ranks_prices_the_union_with_the_models_dependence():
    """Re-planning on the merged ranks of a ladder's first rungs (n -> 4n) for two correlated models sharing
    the added items: with each user's first-stage ranks (``first_ranks``) the union of the full ladder is
    priced with the dependence the first stage shows, as for a first-stage pilot (:func:`shared_cost` on the
    merged priors and the first-stage pairs, exactly); without them the models are taken as independent.
    Against the simulated union of the full ladder on the same users, the paired price lies within the
    models' own cost-prediction error plus 3 Monte Carlo standard errors, nearer than the independent one."""
    from sampling_lib.design import shared_cost
    g = np.random.default_rng(5)
    N, n, n_max, M = 5000, 50, 1600, 20000
    Ra = draw_global_ranks(synthetic_models(N)["beta_a0.35"], M, rng=g)
    Rb = np.clip((Ra * np.exp(g.normal(0.0, 0.5, M))).astype(np.int64), 1, N)
    r1, size, _, merged = _shared_ladder(Ra, Rb, N, n, 4 * n, "independent", g)
    _, union, alone, _ = _shared_ladder(Ra, Rb, N, n, n_max, "independent", g)
    d = Design("ladder", n, n_max=n_max)
    pilot = {"A": merged[:, 0], "B": merged[:, 1]}
    kw = dict(metrics="recall@10", designs=[d], sample_sizes=size.astype(np.int64))
    paired = plan(pilot, N, n, first_ranks={"A": r1[:, 0], "B": r1[:, 1]}, **kw)
    indep = plan(pilot, N, n, **kw)
    c_paired, c_indep = (float(res.table.cost_all_models.iloc[0]) for res in (paired, indep))
    assert c_paired == pytest.approx(shared_cost(d, list(paired.prior.values()), r1), rel=1e-12)
    assert c_indep == pytest.approx(shared_cost(d, list(indep.prior.values()), None), rel=1e-12)
    sim = union.mean()
    single = paired.table.set_index("model").cost.reindex(["A", "B"]).to_numpy()
    budget = np.abs(single / alone.mean(axis=0) - 1).max() + 3 * union.std() / np.sqrt(M) / sim
    assert abs(c_paired / sim - 1) <= budget, (c_paired, sim, budget)
    assert abs(c_paired - sim) < abs(c_indep - sim), (c_paired, c_indep, sim)
    # bad input names the argument
    with pytest.raises(ValueError, match="first_ranks applies with sample_sizes"):
        plan({"A": r1[:, 0], "B": r1[:, 1]}, N, n, metrics="recall@10", designs=[d], first_ranks=pilot)
    with pytest.raises(ValueError, match="first_ranks applies to several models"):
        plan(merged[:, 0], N, n, sample_sizes=size.astype(np.int64), first_ranks={"A": r1[:, 0]})
    with pytest.raises(ValueError, match=r"first_ranks must map the models of pilot \(\['A', 'B'\]\)"):
        plan(pilot, N, n, first_ranks={"A": r1[:, 0]}, **kw)
    with pytest.raises(ValueError, match="at most the merged rank"):
        plan(pilot, N, n, first_ranks={"A": r1[:, 0], "B": merged[:, 1] + 1}, **kw)
    with pytest.raises(ValueError, match="paired=False says"):
        plan(pilot, N, n, first_ranks={"A": r1[:, 0], "B": r1[:, 1]}, paired=False, **kw)
    with pytest.raises(ValueError, match="one per user of its pilot"):
        plan(pilot, N, n, first_ranks={"A": r1[:-1, 0], "B": r1[:, 1]}, **kw)


def test_shared_cost_identities_and_bad_input():
    """Exact cases: one rung (n -> 2n) and a second stage to threshold t extend the pilot's own union;
    two identical models cost as one (dependence 1: the pilot's rank-1 share carried by the prior's
    survival); without a pilot the models are independent; bad input names the argument."""
    from sampling_lib.design import shared_cost
    g = np.random.default_rng(4)
    N, n, M = 3000, 30, 4000
    R = draw_global_ranks(synthetic_models(N)["beta_a0.35"], M, rng=g)
    r = np.c_[sample_ranks(R, N, n, rng=5), sample_ranks(R, N, n, rng=6)]
    fits = [logspline_fit(r[:, k], N, n) for k in range(2)]
    assert shared_cost(Design("ladder", n, n_max=2 * n), fits, r) == pytest.approx(n + n * (r == 1).any(axis=1).mean())
    thr = Design("threshold", n, threshold=3, n2=200)
    assert shared_cost(thr, fits, r) == pytest.approx(n + 200 * (r <= 3).any(axis=1).mean())
    assert shared_cost(Design("single", 4 * n), fits, r) == 4 * n
    # identical models: the union is one model's path; the prior carries the pilot's rank-1 share
    lad = Design("ladder", n, n_max=960)
    same = np.c_[r[:, 0], r[:, 0]]
    one = predict(lad, fits[0], "recall@10", M=M).cost[0]
    from sampling_lib.design import _log_survive
    from sampling_lib.estimators._logspline import prior_masses, spline_grid
    grid = spline_grid(N, n, fits[0].knot_spacing, None, "binomial")
    p1 = prior_masses(fits[0].beta, grid) @ np.exp(_log_survive(grid.mid, N, n - 1, "binomial"))
    want = n + (same[:, 0] == 1).mean() / p1 * (one - n)
    assert shared_cost(lad, [fits[0], fits[0]], same) == pytest.approx(want, rel=1e-9)
    # no pilot: independent models, between the largest single cost and the sum
    ind = shared_cost(lad, fits, None)
    costs = [predict(lad, f, "recall@10", M=M).cost[0] for f in fits]
    assert max(costs) <= ind <= sum(costs) - n + 1e-9
    for kw, match in (({"pilot": r[:, :1]}, "pilot must be an"), ({"pilot": r + n}, "sampled ranks in 1..n=30"),
                      ({"pilot": r, "dependence": 1.5}, "dependence"), ({"pilot": r, "priors": []}, "priors")):
        args = {"priors": fits, **kw}
        with pytest.raises(ValueError, match=match):
            shared_cost(lad, args.pop("priors"), args.pop("pilot"), **args)


def test_plan_of_several_models_in_python():
    """plan({model: ranks}): each model planned on its own ranks; a design meets the target when it does for
    every model and is priced by shared_cost on the paired ranks; the cheapest such design is chosen. One
    model in a dict chooses what its array does."""
    from sampling_lib.design import shared_cost
    g = np.random.default_rng(8)
    N, n, M = 4000, 40, 3000
    R = draw_global_ranks(synthetic_models(N)["beta_a0.35"], M, rng=g)
    R2 = np.clip((R * np.exp(g.normal(0.0, 0.7, M))).astype(np.int64), 1, N)
    r = {"a": sample_ranks(R, N, n, rng=1), "b": sample_ranks(R2, N, n, rng=2)}
    cands = candidate_designs(N, n, factors=(4, 16, 64), thresholds=(1, 2), fractions=(0.2,))
    res = plan(r, N, n, metrics="recall@10", designs=cands)
    t = res.table
    assert list(t.columns[:2]) == ["model", "design"] and set(t.model) == {"a", "b"} and set(res.prior) == {"a", "b"}
    alone = {m: plan(x, N, n, metrics="recall@10", designs=cands).table.set_index("design") for m, x in r.items()}
    per = res.designs().set_index("design")
    for d in cands:
        name = d.describe()
        assert per.cost[name] == pytest.approx(shared_cost(d, [res.prior["a"], res.prior["b"]],
                                                           np.c_[r["a"], r["b"]]), rel=1e-12)
        assert per.meets[name] == (alone["a"].meets[name].all() and alone["b"].meets[name].all())
    ok = per[per.meets]
    assert res.best.describe() == ok.cost.idxmin()
    one = plan({"a": r["a"]}, N, n, metrics="recall@10", designs=cands)
    assert one.best == plan(r["a"], N, n, metrics="recall@10", designs=cands).best
    # the assurance reaches every model's plan: at 0.5 the prediction itself is judged
    plain = plan(r, N, n, metrics="recall@10", designs=cands, assurance=0.5)
    assert (plain.table.margin == 1.0).all() and (res.table.margin > 1.0).all()
    assert plain.designs().set_index("design").meets.equals(
        plain.table.groupby("design", sort=False).ratio.max() <= 1.3)
    with pytest.raises(ValueError, match="sample_sizes must name the models"):
        plan(r, N, n, metrics="recall@10", designs=cands, sample_sizes={"a": np.full(M, n)})


def _scored_world(M=300, N=400, H=20, seed=11):
    """Scores of two correlated models for M users over N items, each user's history of H items and a
    held-out item outside it."""
    import scipy.sparse as sp
    g = np.random.default_rng(seed)
    a = g.normal(size=(M, N))
    S = {"a": a, "b": a + g.normal(scale=1.0, size=(M, N))}
    hist = np.array([g.choice(N, H + 1, replace=False) for _ in range(M)])
    h, rows = hist[:, -1], hist[:, :-1]
    X = sp.csr_matrix((np.ones(M * H), (np.repeat(np.arange(M), H), rows.ravel())), shape=(M, N))
    return S, X, h


def test_shared_design_on_scores_is_the_union_of_the_models_own_designs():
    """On one random order of each user's candidates (the same rng), the shared ladder's final size is the
    largest of the models' own ladders (a rank never falls as items are added, so the union stops when the
    last model does), a threshold design extends exactly the users some model ranks at <= t, and every
    model's final rank is its rank at the shared final size."""
    from sampling_lib.studies import shared_design_on_scores
    S, X, h = _scored_world()
    lad = Design("ladder", 10, n_max=160)
    f, r, s = shared_design_on_scores(S, X, h, lad, rng=3)
    alone = {m: shared_design_on_scores({m: S[m]}, X, h, lad, rng=3) for m in S}
    np.testing.assert_array_equal(s, np.maximum(alone["a"][2], alone["b"][2]))
    assert (s > np.minimum(alone["a"][2], alone["b"][2])).any()            # the models disagree somewhere
    for k, m in enumerate(S):
        np.testing.assert_array_equal(f[:, k], alone[m][0][:, 0])
        same = alone[m][2] == s
        np.testing.assert_array_equal(r[same, k], alone[m][1][same, 0])
        assert (r[:, k] >= alone[m][1][:, 0]).all()                          # more items, never a better rank
    thr = Design("threshold", 10, threshold=2, n2=50)
    f2, r2, s2 = shared_design_on_scores(S, X, h, thr, rng=3)
    np.testing.assert_array_equal(f2, f)
    np.testing.assert_array_equal(s2, np.where((f2 <= 2).any(axis=1), 60, 10))


def test_shared_design_on_scores_takes_scorers_called_on_blocks_of_users():
    """A scorer f(users) -> rows gives what its matrix gives (no M x N matrix held: the notebook's real data),
    whatever the block; a scorer returning the wrong shape is an error."""
    from sampling_lib.studies import shared_design_on_scores
    S, X, h = _scored_world()
    lad = Design("ladder", 10, n_max=160)
    want = shared_design_on_scores(S, X, h, lad, rng=3)
    calls = []

    def scorer(m):
        def f(users):
            calls.append(len(users))
            return S[m][users]
        return f

    for block in (1, 7, 10_000):
        calls.clear()
        got = shared_design_on_scores({m: scorer(m) for m in S}, X, h, lad, rng=3, block=block)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
        assert max(calls) == min(block, X.shape[0]) and sum(calls) == len(S) * X.shape[0]
    with pytest.raises(ValueError, match="one row of N = .* scores per user"):
        shared_design_on_scores({"a": lambda users: S["a"][users, :-1]}, X, h, lad, rng=3)
    with pytest.raises(ValueError, match="block must be"):
        shared_design_on_scores(S, X, h, lad, rng=3, block=0)


def test_shared_design_on_scores_first_stage_follows_the_hypergeometric_law():
    """Stage-1 ranks of each model are 1 + Hypergeometric(N_u - 1, R_u - 1, n - 1) of its global rank among
    the candidates outside the history (recommenders.global_ranks, pessimistic ties): their mean over
    users and 20 repeats against the exact mean, within 4 standard errors."""
    from sampling_lib.recommenders import global_ranks
    from sampling_lib.studies import shared_design_on_scores
    S, X, h = _scored_world(seed=12)
    n, H = 10, 20
    Nu = S["a"].shape[1] - H
    for k, m in enumerate(S):
        R = global_ranks(S[m], X, h)
        mean = 1 + (n - 1) * (R - 1) / (Nu - 1)
        var = (n - 1) * (R - 1) / (Nu - 1) * (1 - (R - 1) / (Nu - 1)) * (Nu - n) / (Nu - 2)
        got = np.mean([shared_design_on_scores(S, X, h, Design("single", n), rng=j)[0][:, k].mean()
                       for j in range(20)])
        se = np.sqrt(var.sum() / R.size ** 2 / 20)
        assert abs(got - mean.mean()) <= 4 * se, (m, got, mean.mean(), se)


def test_candidate_set_sizes_are_four_to_an_octave():
    """The default candidates' set sizes grow by at most x1.25 from 4n on (2^k x 1, 1.25, 1.5, 1.75), up to
    the catalogue: with two to an octave (x1.5) the cheapest design meeting a target could cost half as much
    again as one that meets it too (Last.fm 2K ALS: the ladder to 3,456 items chosen where 2,880 met the
    target)."""
    N, n = 100_000, 18
    for kind, top in (("ladder", lambda d: d.n_max), ("single", lambda d: d.n), ("threshold", lambda d: d.n2)):
        sizes = sorted({top(d) for d in candidate_designs(N, n) if d.kind == kind and top(d) != n})
        f = np.array(sizes) / n
        assert f[0] == 2 and set(f[:6]) == {2, 3, 4, 5, 6, 7}, (kind, f[:8])
        step = f[1:] / f[:-1]
        assert step[f[:-1] >= 4].max() <= 1.25 + 1e-12, kind
        assert (f == np.round(f)).all() and sizes[-1] * 1.25 > N - (n if kind == "threshold" else 0), kind


def test_plan_takes_a_sampled_ranks_pilot():
    """plan(io.ranks_from_table(...)): the table's models, per-user sizes, N_u and scheme give the same plan as
    the arrays passed by hand (N the median N_u, max_size the smallest, n the smallest set)."""
    from sampling_lib.io import ranks_from_table

    N, n, M = 3000, 30, 1500
    g = np.random.default_rng(3)
    pmf = synthetic_models(N)["beta_a0.35"]
    RA, RB = draw_global_ranks(pmf, M, rng=g), draw_global_ranks(pmf, M, rng=g)
    rA, rB = sample_ranks(RA, N, n, rng=g), sample_ranks(RB, N, n, rng=g)
    cands = candidate_designs(N, n, factors=(4, 16), thresholds=(1,), fractions=(0.2,))
    kw = dict(metrics="recall@10", designs=cands)
    users = np.arange(M)
    df = pd.DataFrame({"user": np.r_[users, users], "model": ["A"] * M + ["B"] * M, "rank": np.r_[rA, rB],
                       "sample_size": n, "n_items": N, "scheme": "hypergeometric"})
    got = plan(ranks_from_table(df), **kw)
    want = plan({"A": rA, "B": rB}, N, n, scheme="hypergeometric", max_size=N, **kw)
    pd.testing.assert_frame_equal(got.table, want.table)
    assert got.best == want.best
    # one model, a ladder run in part: per-user sizes, n the first stage's
    r, s = sample_design(RA, N, Design("ladder", n, n_max=4 * n), rng=g)
    one = pd.DataFrame({"user": users, "rank": r, "sample_size": s, "n_items": N})
    got = plan(ranks_from_table(one), **kw)
    want = plan(r, N, n, sample_sizes=s, max_size=N, **kw)
    pd.testing.assert_frame_equal(got.table, want.table)
    with pytest.raises(ValueError, match="carries its own sample sizes"):
        plan(ranks_from_table(one), sample_sizes=s, **kw)
    with pytest.raises(ValueError, match="contradicts the ranks' own record"):
        plan(ranks_from_table(df), scheme="binomial", **kw)


@pytest.mark.slow
def test_hypergeometric_count_pmf_in_log_space_matches_scipy():
    """The design law's hypergeometric pmf, computed from log binomial coefficients (scipy's exact
    hypergeom.pmf was the bulk of a plan's time), equals scipy's to 1e-8 relative where scipy's is not
    negligible, and to 1e-8 absolute everywhere (the log terms reach ~10^6 at N = 10^5, so double precision
    leaves ~1e-10), including rows with no item above or few items left."""
    from scipy import stats

    from sampling_lib.design import _count_pmf

    g = np.random.default_rng(0)
    for N, m, done in ((1618, 250, 17), (10**5, 5000, 99), (50, 30, 19)):
        R = np.unique(np.r_[1, 2, 3, N - done - 1, N, np.floor(np.exp(g.uniform(0, np.log(N), 120)))])
        x = np.arange(0, 80)
        got = _count_pmf(x, m, R, N, done, "hypergeometric")
        good, bad = np.maximum(R - 1, 0)[:, None], np.maximum(N - R - done, 0)[:, None]
        want = np.nan_to_num(stats.hypergeom.pmf(x[None, :], good + bad, good, np.minimum(m, good + bad)))
        big = want > 1e-200
        assert np.allclose(got[big], want[big], rtol=1e-8, atol=0) and np.abs(got - want).max() < 1e-8


def test_hypergeometric_count_cdf_matches_scipy():
    """The design law's hypergeometric CDF (0 or 1 beyond Bernstein's bound around the mean, the running sum
    of the log-space pmf near it; scipy's exact CDF made a hypergeometric plan at N = 10^4 take 6 minutes)
    equals scipy's to 1e-8 absolute, at negative, small, cell-edge and largest counts."""
    from scipy import stats

    from sampling_lib.design import _count_cdf, _count_pmf

    g = np.random.default_rng(1)
    for N, m, done in ((1618, 250, 17), (10**5, 16000, 99), (60, 40, 19), (50, 49, 0)):
        R = np.unique(np.r_[1, 2, 3, N - done - 1, N, np.floor(np.exp(g.uniform(0, np.log(N), 120)))])
        x = np.unique(np.r_[-1, 0, np.floor(np.exp(np.linspace(0, np.log(m + 5), 150)))])
        got = _count_cdf(x, m, R, N, done, "hypergeometric")
        good, bad = np.maximum(R - 1, 0)[:, None], np.maximum(N - R - done, 0)[:, None]
        want = np.nan_to_num(stats.hypergeom.cdf(x[None, :], good + bad, good, np.minimum(m, good + bad)))
        assert np.abs(got - want).max() < 1e-8, (N, m)
        run = np.r_[np.arange(-2, 9), m]                       # a leading run, then the last cell
        got = _count_pmf(run, m, R, N, done, "hypergeometric")
        want = np.nan_to_num(stats.hypergeom.pmf(run[None, :], good + bad, good, np.minimum(m, good + bad)))
        assert np.abs(got - want).max() < 1e-8, (N, m)      # log_hypergeom_pmf: ~1e-9 relative of scipy


def test_binomial_count_cdf_and_pmf_match_scipy():
    """The design law's binomial CDF and pmf (the same running sums as the hypergeometric: scipy's per-entry
    binom.cdf took 70% of a binomial plan) equal scipy's to 1e-10 absolute, at negative, small, cell-edge and
    largest counts, for runs of counts starting below 0 (a second stage's cells) and at p = 0 and p = 1."""
    from scipy import stats

    from sampling_lib.design import _count_cdf, _count_pmf

    g = np.random.default_rng(2)
    for N, m in ((1618, 250), (10**5, 16000), (60, 59), (2, 1)):
        R = np.unique(np.r_[1, 2, N - 1, N, np.floor(np.exp(g.uniform(0, np.log(N), 200)))]).clip(1, N)
        p = ((R - 1.0) / (N - 1.0))[:, None]
        x = np.unique(np.r_[-1, 0, np.floor(np.exp(np.linspace(0, np.log(m + 5), 120)))])
        got = _count_cdf(x, m, R, N, 0, "binomial")
        assert np.abs(got - stats.binom.cdf(x[None, :], m, p)).max() < 1e-10, (N, m)
        for run in (np.arange(-3, min(m, 70) + 3), np.arange(m - 5, m + 3), np.array([0.0, 2.0, 7.0]),
                    np.r_[np.arange(-2, 9), m]):          # a leading run, then the last cell (all m above)
            got = _count_pmf(run, m, R, N, 0, "binomial")
            assert np.abs(got - stats.binom.pmf(run[None, :], m, p)).max() < 1e-10, (N, m, run[:3])
