"""The uniform ladder priced on a pilot's uniform first stage (a planned stratified evaluation's fall-back).

The pilot of a planned proxy design also holds, per user, the uniform first stage the uniform route would
draw, assembled from its head and the first items of its tail's order (StrataRun's ``uniform_first``), and
``design.plan_strata(first_ranks=...)`` prices the uniform designs on it with ``design.plan``. Checked here:
the stage's law (every candidate equally often in it; the head's share hypergeometric), its ranks against
a recount from the scores, the prices against ``plan`` itself and against the exact expected cost under
the users' true ranks, and the evaluate route against a counting wrapper.
"""
import numpy as np
import pytest
from scipy import stats

from sampling_lib import evaluate
from sampling_lib.design import candidate_designs, plan, plan_strata
from sampling_lib.design._law import _cost
from sampling_lib.evaluation import score_stage
from sampling_lib.stratarun import StrataRun
from test_evaluate import N_ITEMS, Counter, _population

MET = ["recall@10", "ndcg@10"]


def _config(**kw):
    return dict(dict(n=20, metrics=MET, target_ratio=None, max_cost=None, seed=3, ties="pessimistic",
                     assurance=0.9, growth=2.0, head=20, tail_n=20, tail_n_max=160, uniform_first=True), **kw)


def _stage_items(run, u):
    """User u's uniform first stage, as the run drew it: its head items flagged, the first tail items."""
    a, b = run.head_ptr[u], run.head_ptr[u + 1]
    head = run.head_items[a:b][run.first_head[a:b]]
    k = int(run.first_tail[u])
    places = run.tail_order.positions(np.array([u]), np.array([0]), np.array([k]))
    return head, run.tail_candidates.items(places, np.full(k, u))


def test_every_candidate_is_in_the_uniform_first_stage_equally_often():
    """3,000 users with the same 30 candidates, a head of 10 and n = 8: each candidate, head or tail, is in a
    user's stage with probability 7/30 (z bound 4 for each of the 30: a family-wise false alarm below 0.2%),
    and the head's share h has the hypergeometric(30, 10, 7) mean and variance (z bound 4)."""
    M, N, n = 3000, 31, 8
    held = {f"u{k}": N - 1 for k in range(M)}
    proxy = np.linspace(1.0, 0.0, N)                  # the head: items 0..9 for every user
    run = StrataRun(held, N, None, config=_config(n=n, head=10, tail_n=5), proxy=proxy)
    counts = np.zeros(N - 1)
    h = np.empty(M)
    for u in range(M):
        head, tail = _stage_items(run, u)
        items = np.concatenate([head, tail])
        assert items.size == n - 1 and np.unique(items).size == n - 1 and (items < N - 1).all()
        counts[items] += 1
        h[u] = head.size
    p = (n - 1) / (N - 1)
    z = (counts - M * p) / np.sqrt(M * p * (1 - p))
    assert np.abs(z).max() < 4.0, z
    law = stats.hypergeom(N - 1, 10, n - 1)
    assert abs(h.mean() - law.mean()) / np.sqrt(law.var() / M) < 4.0
    # the variance of a sample variance: (mu4 - sigma^4 (M - 3) / (M - 1)) / M
    mu4 = law.expect(lambda v: (v - law.mean()) ** 4)
    assert abs(h.var(ddof=1) - law.var()) / np.sqrt((mu4 - law.var() ** 2 * (M - 3) / (M - 1)) / M) < 4.0


def _drive(run, scorers):
    while not run.done:
        score_stage(run, scorers, 997)
        run.finish_stage()
    return run


@pytest.fixture(scope="module", params=[False, True], ids=["whole-head", "head-ladder"])
def driven(request):
    """A planned pilot of 300 deciding for 5,700 other users, model A's scores of one user as the proxy: on
    these seeds its plan on the cells says the proxy does not pay and the stage is cheap against the other
    users' cost, so the stage runs (the test says so if that changes). With the head ladder (rungs 10, 20) the
    head costs so little that the cells say the proxy pays; the test makes their plan say it does not (the
    stage's mechanics are the test's subject, not the verdict), and the stage's head items beyond a settled
    user's rung are then scored as a stage of their own."""
    import dataclasses

    import sampling_lib.design as design

    held, hist, models = _population(M=300, seed=2)
    prox = np.asarray(models["A"](["u0"] * N_ITEMS, np.arange(N_ITEMS)), dtype=float)
    counters = {m: Counter(f) for m, f in models.items()}
    plan = design.plan_strata

    def on_the_cells_it_does_not_pay(*args, **kw):
        pl = plan(*args, **kw)
        return dataclasses.replace(pl, kind="uniform") if kw.get("first_ranks") is None else pl

    with pytest.MonkeyPatch.context() as mp:
        if request.param:
            mp.setattr(design, "plan_strata", on_the_cells_it_does_not_pay)
        run = _drive(StrataRun(held, N_ITEMS, hist, config=_config(tail_n_max=None, target_ratio=1.3,
                                                                   plan_users=6000, head_ladder=request.param),
                               proxy=prox), counters)
    return held, hist, models, counters, run


def test_the_uniform_first_stage_ranks_are_a_recount_of_its_scores(driven):
    """Every user's stage: n - 1 distinct candidates (never the held-out item or an excluded one), every one
    scored by the run, and its sampled rank 1 + those at or above the held-out item (pessimistic ties)."""
    held, hist, models, counters, run = driven
    users = run.inputs["users"].to_numpy()
    first = run.first_ranks()
    seen = {m: set(map(tuple, c.seen()[["user", "item"]].to_numpy())) for m, c in counters.items()}
    settled_with_tail = 0
    for u, uid in enumerate(users):
        head, tail = _stage_items(run, u)
        items = np.concatenate([head, tail])
        assert items.size == min(19, run.inputs["n_items"][u] - 1) == np.unique(items).size
        assert held[uid] not in items and not set(items.tolist()) & set(hist[uid])
        for m, f in models.items():
            assert all((uid, int(i)) in seen[m] for i in items)
            own = f([uid], [held[uid]])[0]
            assert first[m][u] == 1 + int((f([uid] * items.size, items) >= own).sum())
        settled_with_tail += all(run.x[m][u] >= 10 for m in models) and run.tail_sizes[u] > 0
        # the cells: x from the head items up to the user's last rung, the tail rank from its tail sample, none
        # of the stage's later head items in either
        a = run.head_ptr[u]
        scored = run.head_items[a:a + run.head_scored[u]]
        k = int(run.tail_sizes[u])
        sample = run.tail_candidates.items(run.tail_order.positions(np.array([u]), np.array([0]), np.array([k])),
                                           np.full(k, u))
        for m, f in models.items():
            own = f([uid], [held[uid]])[0]
            assert run.x[m][u] == int((f([uid] * scored.size, scored) >= own).sum())
            assert run.cells()[m][4][u] == 1 + int((f([uid] * k, sample) >= own).sum())
    assert settled_with_tail > 0                   # the head settles them, and they still hold the stage
    designs = [st["design"] for st in run.stages]
    if run.head_ladder:
        assert (run.head_scored < run.heads).any()
        assert "the uniform first stage's head part" in designs
    last = run.stages[-1]
    assert last["design"] == "the uniform first stage's tail part"
    assert np.array_equal(last["_stop"], run.first_tail[last["_users"]])
    text = " ".join(d["decision"] for d in run.decisions)
    # the plan on the cells said the proxy does not pay; the stage decided, and the plan was made again on it
    assert text.index("from these users' cells") < text.index("these users' uniform first stage of 20 items")
    assert "uniform design predicted to meet it from these users' uniform first stage" in text


def test_the_stage_judges_the_head_again_from_a_recount_of_its_scores(driven):
    """Once the stage is complete the pilot asks again whether its head beats a random one, now of every
    user's stage (proxy.head_enrichment_stage), and that verdict replaces the one after the first tail sample.
    Its numbers against a recount: each user's stage split into its head and tail parts and scored, the head
    part's hits against the hypergeometric(n_u, a_u, h_u) mean and variance from scipy."""
    held, hist, models, counters, run = driven
    said = [d["decision"] for d in run.decisions if d["action"] == "proxy"]
    assert len(said) == 2 and "(after the first tail sample)" in said[0]
    assert "(on the pilot's uniform first stage)" in said[1] and run._judged == "on the pilot's uniform first stage"
    users = run.inputs["users"].to_numpy()
    zs = []
    for m, f in models.items():
        xh, e, v, k = 0, 0.0, 0.0, 0
        for u, uid in enumerate(users):
            head, tail = _stage_items(run, u)
            own = f([uid], [held[uid]])[0]
            h, a_h = head.size, int((f([uid] * head.size, head) >= own).sum())
            n, a = h + tail.size, a_h + int((f([uid] * tail.size, tail) >= own).sum())
            if 0 < h < n and 0 < a < n:
                law = stats.hypergeom(n, a, h)
                xh, e, v, k = xh + a_h, e + law.mean(), v + law.var(), k + 1
        zs.append((xh - e) / np.sqrt(v))
        assert f"{m}: {xh / e:.2f}x (z = {zs[-1]:.1f}, {k:,} users)" in said[1]
    assert run.head_random == (max(zs) < 1.645)


def test_the_stage_is_not_run_where_it_costs_more_than_its_share_of_the_others_cost():
    """A random proxy (the plan on the cells says it does not pay) deciding for 5,700 other users runs the
    stage; deciding for one, the stage's pairs exceed 5% of that user's cost at the pilot's pairs per user,
    so the verdict on the cells stands, said so, and the pilot scores exactly the pairs before the stage."""
    held, hist, models = _population(M=300, seed=2)
    prox = np.random.default_rng(0).random(N_ITEMS)
    runs = {}
    for users in (6000, 301):
        counters = {m: Counter(f) for m, f in models.items()}
        runs[users] = _drive(StrataRun(held, N_ITEMS, hist, proxy=prox, config=_config(
            tail_n_max=None, target_ratio=1.3, plan_users=users)), counters)
    big, small = runs[6000], runs[301]
    assert big.uniform_stage and big.stages[-1]["design"] == "the uniform first stage's tail part"
    assert not small.uniform_stage
    assert all(st["design"] != "the uniform first stage's tail part" for st in small.stages)
    text = " ".join(d["decision"] for d in small.decisions)
    assert "the cells do not price the uniform ladder as its planner does, but a uniform first stage would take" in text
    assert "the verdict stands" in text and "from these users' cells" in text
    assert [st["pairs"] for st in small.stages] == [st["pairs"] for st in big.stages[:-1]]


def test_the_first_ranks_wait_for_the_stage_and_need_the_setting():
    held, hist, models = _population(M=50, seed=2)
    prox = np.asarray(models["A"](["u0"] * N_ITEMS, np.arange(N_ITEMS)), dtype=float)
    run = StrataRun(held, N_ITEMS, hist, config=_config(), proxy=prox)
    with pytest.raises(RuntimeError, match="the uniform first stage is not complete"):
        run.first_ranks()
    run = StrataRun(held, N_ITEMS, hist, config=_config(uniform_first=False), proxy=prox)
    with pytest.raises(RuntimeError, match="no uniform first stage"):
        run.first_ranks()


def _priced_population(rng, P=1500, N=2000, m=50, n=50):
    """Pilot cells of users whose items above the held-out one fall in the head half the time: the head
    settles most users, whose ranks then spread over the range that sets the uniform ladder's cost."""
    G = np.floor(np.exp(rng.uniform(0, np.log(N - 1), P))).astype(int) - 1
    X = np.minimum(rng.binomial(G, 0.5), m)
    T = N - 1 - m
    s = np.where(X < 10, 200, 0)
    y = np.array([rng.hypergeometric(g - x, T - (g - x), k) if k else 0 for g, x, k in zip(G, X, s)])
    cells = (np.full(P, N), np.full(P, m), X, s, 1 + y)
    first = 1 + rng.hypergeometric(G, N - 1 - G, n - 1)
    return cells, first, G


def test_the_uniform_designs_are_priced_by_plan_on_the_first_stage_and_near_their_expected_cost():
    """The rows are design.plan's on the same ranks (the uniform route's planner), and every ladder's price
    is within 10% of its exact expected cost under the pilot users' true ranks. The cells alone price the
    same ladders lower (a regression guard: the test tells the two apart)."""
    rng = np.random.default_rng(5)
    N, n = 2000, 50
    cells, first, G = _priced_population(rng, N=N, n=n)
    got = plan_strata({"A": cells}, n=n, tail_n=50, M=first.size, first_ranks={"A": first})
    uni = got.table[got.table.kind != "stratified"]
    ref = plan({"A": first}, cells[0], n, M=first.size, metrics=MET, scheme="hypergeometric", max_size=N,
               designs=candidate_designs(N, n), ranges=False).table
    mine = uni.set_index(["design", "metric"]).cost
    theirs = ref.set_index(["design", "metric"]).cost
    assert np.allclose(mine.sort_index().to_numpy(), theirs.loc[mine.sort_index().index].to_numpy())
    g = np.bincount(G + 1, minlength=N + 1)[1:] / G.size
    cands = {d.describe(): d for d in candidate_designs(N, n) if d.kind == "ladder"}
    old = plan_strata({"A": cells}, n=n, tail_n=50, M=first.size).table
    old = old[old.kind != "stratified"].groupby("design").cost.max()
    ratios, old_ratios = [], []
    for name, cost in uni.groupby("design").cost.max().items():
        if name in cands and cands[name].n_max <= 500:
            true = _cost(cands[name], N, g, np.arange(1, N + 1), "hypergeometric")
            ratios.append(cost / true)
            old_ratios.append(old[name] / true)
    assert len(ratios) >= 5
    assert np.all(np.abs(np.log(ratios)) < np.log(1.1)), ratios
    assert min(old_ratios) < 1 / 1.1


def test_first_ranks_are_checked():
    rng = np.random.default_rng(6)
    cells, first, _ = _priced_population(rng, P=400)
    kw = dict(n=50, tail_n=50)
    with pytest.raises(ValueError, match="first_ranks must map the pilots' models"):
        plan_strata({"A": cells}, first_ranks={"B": first}, **kw)
    with pytest.raises(ValueError, match=r"first_ranks\['A'\] must hold one integer rank per pilot user"):
        plan_strata({"A": cells}, first_ranks={"A": first[:-1]}, **kw)
    with pytest.raises(ValueError, match=r"first_ranks\['A'\] must lie in 1..n = 50"):
        plan_strata({"A": cells}, first_ranks={"A": first + 50}, **kw)


def test_the_planned_route_prices_the_fall_back_on_the_pilot_s_first_stage():
    """A random proxy, so that the plan on the cells says it does not pay: evaluate's pilot (300 of 3,000
    users) runs the stage and says so, and the result reports the price on it; the counting wrapper's pairs
    are the reported cost with none asked twice. A budget without room for the head and the stage beside
    it draws no stage. (The verdict on the cells standing: the test above.)"""
    prox = np.random.default_rng(1).random(300)
    held, hist, models = _population(M=3000, N=300, seed=4)
    counters = {m: Counter(f) for m, f in models.items()}
    res = evaluate(counters, held, 300, exclude=hist, n=20, proxy=prox, head=20, tail_n=20, seed=3, n_boot=50,
                   target_ratio=1.3, progress=False)
    seen = counters["A"].seen()
    assert not seen.duplicated().any() and len(seen) == int(res.cost.pairs_per_model[0])
    text = " ".join(res.design.decision.dropna())
    assert "from these users' uniform first stage" in text
    assert "the uniform first stage's tail part" in set(res.design.design)
    assert res.config["uniform_priced_on"] == "first stage"
    assert 0 < res.config["uniform_predicted_share"] < 1
    counters = {m: Counter(f) for m, f in models.items()}
    res = evaluate(counters, held, 300, exclude=hist, n=20, proxy=prox, head=20, tail_n=20, seed=3, n_boot=50,
                   max_cost=0.12, progress=False)
    assert "uniform first stage" not in " ".join(res.design.decision.dropna())
    assert res.config["uniform_priced_on"] == "cells"
