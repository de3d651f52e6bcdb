"""The head climb (``evaluate(..., proxy=)`` with a planned design and no ``head``): the pilot's head ladder climbs
rung by rung (``n`` halved down to K, then doubled) while its last rung paid for itself; the head is the last
rung scored, below ``n`` or above it.

The checks recompute what the library decides from the test's own bookkeeping: the rule's top and verdict by
loops, each climbing rung's settled users and pairs from the models' scores and the proxy's order, and the
whole evaluation against one given the head the climb reached (the same seed must give the same cells, table
and pairs: a cut head is the prefix of the longer one and the tail is drawn after the cut).
"""
import numpy as np
import pandas as pd
import pytest

from sampling_lib import evaluate
from sampling_lib.design import head_climb_pays, head_climb_top, head_rungs
from sampling_lib.proxy import heads_and_edge_ties
from sampling_lib.stagerun import check_inputs
from test_evaluate import Counter, _population

N, M, NEG = 2000, 500, 20          # catalogue, users, n (the head the pilot's heads are first built at)
K = 10


@pytest.mark.parametrize("head, C, k, room", [(100, [17631, 900], 10, None), (100, [1681], 10, None),
                                              (100, [1681], 10, 250), (20, [1999], 10, None), (500, [100], 10, None),
                                              (7, [50_000], 1, 10_000)])
def test_the_climb_top_is_head_doubled_to_four_times_the_largest_resolution_cost(head, C, k, room):
    want = head
    while want < 4 * max(C) / k and (room is None or 2 * want <= room):
        want *= 2
    got = head_climb_top(head, C, k, room)
    assert got == want and got >= head
    assert got == head or (got // 2 < 4 * max(C) / k and (room is None or got <= room))


def test_a_rung_pays_when_its_settled_tails_to_resolution_reach_its_pairs():
    assert head_climb_pays(100, [500, 500], 10)                  # 1,000 / 10 = 100: equal pays
    assert not head_climb_pays(101, [500, 500], 10)
    assert not head_climb_pays(1, [], 10)
    assert head_climb_pays(0, [], 10)


def _tied_proxy(models):
    """Model A's scores for one user, rounded so that ties sit at some users' head edges."""
    v = np.asarray(models["A"](["u0"] * N, np.arange(N)), dtype=float)
    return np.round(v, 2)


@pytest.fixture(scope="module")
def climbed():
    held, hist, models = _population(M=M, N=N, seed=8)
    prox = _tied_proxy(models)
    out = {}
    for head in (None, "reached"):
        counters = {m: Counter(f) for m, f in models.items()}
        h = None if head is None else out[None][0].parts["pilot"].config["head"]
        res = evaluate(counters, held, N, exclude=hist, n=NEG, proxy=prox, head=h, tail_n=NEG, target_ratio=1.3,
                       seed=4, n_boot=200, progress=False)
        out[head] = (res, counters)
    return held, hist, models, prox, out


def test_the_pilot_climbs_and_reports_it(climbed):
    *_, out = climbed
    res = out[None][0]
    pilot = res.parts["pilot"]
    assert res.config["head_climb"] and pilot.config["head_climb"]
    h = pilot.config["head"]
    assert h > NEG                                             # the premise: this population climbs
    assert not res.parts["rest"].config["head_climb"]
    said = " ".join(pilot.design.decision)
    assert f"head of {h:,} proxy candidates (the ladder climbs while its last rung paid" in said
    assert f"the rung to {h // 2:,} paid" in said and f"the rung to {h:,}: " in said


def test_the_climb_follows_its_rule_recomputed_from_the_scores(climbed):
    """Each pilot user's head items above the held-out one, by model, from the models and the proxy's order;
    then the rungs from the first (10) up: each is followed by the next while it paid."""
    held, hist, models, prox, out = climbed
    res = out[None][0]
    pilot_users = res.parts["pilot"].ranks.query("model == 'A'").user.to_numpy()
    order = np.argsort(-prox, kind="stable")
    flags, C = {}, {}
    for u in pilot_users:
        bad = set(hist[u]) | {held[u]}
        cand = np.array([i for i in order if i not in bad])
        C[u] = cand.size
        for m, fn in models.items():
            s = np.asarray(fn([u] * cand.size, cand), dtype=float)
            h = float(fn([u], [held[u]])[0])
            flags.setdefault(u, {})[m] = np.cumsum(s >= h)        # pessimistic ties: at or above
    top = head_climb_top(NEG, [C[u] for u in pilot_users], K)
    rungs = head_rungs(top, K)

    def settled(u, at):
        return all(c[min(at, C[u]) - 1] >= K for c in flags[u].values()) if at else False

    want, prev = None, 0
    for a in rungs:
        users = [u for u in pilot_users if not settled(u, prev) and C[u] > prev]
        pairs = sum(min(a, C[u]) - prev for u in users)
        done = [u for u in users if settled(u, a)]
        left = [u for u in users if not settled(u, a) and C[u] > a]
        if not left or a == rungs[-1] or not head_climb_pays(pairs, [C[u] - min(a, C[u]) for u in done], K):
            want = a
            break
        prev = a
    assert res.parts["pilot"].config["head"] == want
    r = res.parts["pilot"].ranks.query("model == 'A'").set_index("user")
    assert (r["head"] == np.minimum(want, pd.Series(C))[r.index]).all()


def test_a_climbed_evaluation_is_the_one_given_the_head_it_reached(climbed):
    """The same seed with head=None and with head = the climb's head: the same table, cells, pairs and notes
    (the edge ties counted after the cut too)."""
    *_, out = climbed
    (a, ca), (b, cb) = out[None], out["reached"]
    pd.testing.assert_frame_equal(a.table, b.table)
    pd.testing.assert_frame_equal(a.ranks, b.ranks)
    assert int(a.cost.pairs_per_model.iloc[0]) == int(b.cost.pairs_per_model.iloc[0])
    sa, sb = ca["A"].seen(), cb["A"].seen()
    assert len(sa) == len(sb) and not sa.duplicated().any()
    pd.testing.assert_frame_equal(sa.sort_values(["user", "item"], ignore_index=True),
                                  sb.sort_values(["user", "item"], ignore_index=True))
    ties = [x for x in a.notes if "last proxy score equals" in x]
    assert ties and ties == [x for x in b.notes if "last proxy score equals" in x]
    assert not b.config["head_climb"]


def test_the_edge_ties_after_the_cut_are_counted_at_the_new_edge(climbed):
    held, hist, models, prox, out = climbed
    res = out[None][0]
    h = res.parts["pilot"].config["head"]
    users = res.parts["pilot"].ranks.query("model == 'A'").user.tolist()
    inp = check_inputs({u: held[u] for u in users}, N, {u: hist[u] for u in users})
    C = inp["n_items"] - 1
    *_, ties = heads_and_edge_ties(prox, inp["ptr"], inp["bad"], np.minimum(h, C))
    _, _, ties_top = heads_and_edge_ties(prox, inp["ptr"], inp["bad"], np.minimum(head_climb_top(NEG, C, K), C))
    assert ties != ties_top                                  # the premise: the edge moved the count
    note = next(x for x in res.parts["pilot"].notes if "last proxy score equals" in x)
    assert note.startswith(f"proxy: for {ties:,} users")


@pytest.mark.parametrize("kw", [dict(head=NEG), dict(tail_n_max=80), dict(head_ladder=False)])
def test_no_climb_where_the_user_said_the_head_or_the_design(kw):
    held, hist, models = _population(M=120, N=600, seed=3)
    prox = np.asarray(models["A"](["u0"] * 600, np.arange(600)), dtype=float)
    kw = dict(kw)
    if "tail_n_max" not in kw:
        kw["target_ratio"] = 1.3
    res = evaluate(models, held, 600, exclude=hist, n=NEG, proxy=prox, tail_n=NEG, seed=1, n_boot=50,
                   progress=False, **kw)
    assert not res.config.get("head_climb", False)
    assert res.config["head"] == NEG


def test_a_callable_proxy_breaks_ties_at_the_head_edge_by_catalogue_position():
    """heads_from_callable against heads_from_scores on a user-independent proxy with many ties: the same
    heads, so that a longer head begins with the shorter one (the climb asks the proxy again)."""
    from sampling_lib.proxy import heads_from_callable, heads_from_scores

    rng = np.random.default_rng(2)
    v = rng.integers(0, 6, size=300).astype(float)                # 6 distinct scores: ties everywhere
    held = {u: int(rng.integers(300)) for u in range(40)}
    hist = {u: [int(i) for i in rng.choice(300, size=int(rng.integers(0, 30)), replace=False) if i != held[u]]
            for u in held}
    inp = check_inputs(held, 300, hist)
    for m in (1, 7, 50, 120, 299):
        sizes = np.minimum(m, inp["n_items"] - 1)
        want = heads_from_scores(v, inp["ptr"], inp["bad"], sizes)
        got = heads_from_callable(lambda u, i: v[np.asarray(i)], inp["users"].to_numpy(), 300, inp["ptr"],
                                  inp["bad"], sizes, block_users=7)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def _callable_proxy(models, flip=None):
    """A per-user proxy: model A's scores with its own noise; ``flip``: after the first full pass, each call
    reverses the order (a proxy that ranks differently when asked again)."""
    calls = [0]

    def f(users, items):
        calls[0] += 1
        s = np.asarray(models["A"](users, items), dtype=float) + 0.5 * np.cos(np.asarray(items) * 1.7)
        return -s if flip is not None and calls[0] > flip else s
    return f


def test_a_callable_proxy_climbs_as_a_given_head_does():
    held, hist, models = _population(M=M, N=N, seed=8)
    out = []
    for head in (None, "reached"):
        h = None if head is None else out[0].parts["pilot"].config["head"]
        out.append(evaluate(models, held, N, exclude=hist, n=NEG, proxy=_callable_proxy(models), head=h, tail_n=NEG,
                            target_ratio=1.3, seed=4, n_boot=200, progress=False))
    a, b = out
    assert a.parts["pilot"].config["head"] > NEG
    pd.testing.assert_frame_equal(a.table, b.table)
    pd.testing.assert_frame_equal(a.ranks, b.ranks)


def test_a_proxy_that_ranks_differently_when_asked_again_stops_the_climb_and_says_so():
    held, hist, models = _population(M=M, N=N, seed=8)
    counters = {m: Counter(f) for m, f in models.items()}
    # the first pass (the pilot's heads at n) in blocks of max(1, 2**22 // N) users: one call for these 300
    res = evaluate(counters, held, N, exclude=hist, n=NEG, proxy=_callable_proxy(models, flip=1), tail_n=NEG,
                   target_ratio=1.3, seed=4, n_boot=200, progress=False)
    pilot = res.parts["pilot"]
    assert pilot.config["head"] == NEG
    assert "the proxy ranked some user's candidates differently" in " ".join(pilot.design.decision)
    seen = counters["A"].seen()
    assert not seen.duplicated().any() and len(seen) == int(res.cost.pairs_per_model.iloc[0])


def test_head_climb_check_recomputes_the_climb_on_fitted_models():
    from sampling_lib import studies
    from sampling_lib.experiments import global_ranks_from_data

    pop = global_ranks_from_data(None, {m: studies.PANEL_MODELS[m] for m in ("itemknn", "popularity")}, rng=2,
                                 keep_models=True, synthetic={"n_users": 400, "n_items": 1500})
    c = studies.head_climb_check(pop, "itemknn", "popularity", tail_n=10, n=20, n_boot=50, seed=1).iloc[0]
    assert c.head_climbed == c.head_recomputed
    assert c.table_max_diff == 0 and c.ranks_equal and c.pairs_climbed == c.pairs_given
    with pytest.raises(ValueError, match="'ease' is not one of the fitted models"):
        studies.head_climb_check(pop, "ease", "popularity", tail_n=10)


def test_a_climb_that_stops_below_n_cuts_the_head_to_the_rung_scored():
    """A proxy that knows nothing on a small catalogue: few users are settled by the first rung, whose pairs
    the tails to resolution they save (T_u / K, about 60 items) do not repay, so the head is that rung, below
    n; the evaluation is still the one given that head."""
    held, hist, models = _population(M=M, N=600, seed=9)
    prox = np.random.default_rng(0).random(600)
    counters, out = {}, []
    for head in (None, "reached"):
        h = None if head is None else out[0].parts["pilot"].config["head"]
        counters[head] = {m: Counter(f) for m, f in models.items()}
        out.append(evaluate(counters[head], held, 600, exclude=hist, n=40, proxy=prox, head=h, tail_n=10,
                            target_ratio=1.3, seed=2, n_boot=100, progress=False))
    a, b = out
    h = a.parts["pilot"].config["head"]
    assert h == head_rungs(40, K)[0] < 40
    assert "it did not pay" in " ".join(a.parts["pilot"].design.decision)
    assert (a.parts["pilot"].ranks["head"] <= h).all()
    pd.testing.assert_frame_equal(a.table, b.table)
    pd.testing.assert_frame_equal(a.ranks, b.ranks)
    sa, sb = counters[None]["A"].seen(), counters["reached"]["A"].seen()
    assert len(sa) == len(sb) and not sa.duplicated().any()
