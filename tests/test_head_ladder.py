"""The head ladder (``evaluate(..., proxy=, head_ladder=True)``): the proxy's head scored in rungs, a user left
out once every model has k_max items at or above its held-out item.

The checks recompute what the library reports from the test's own bookkeeping: the rungs by a loop, each
user's last rung from the scores, the pairs a counting wrapper saw, and the estimate of the same evaluation
with the whole head scored.
"""
import numpy as np
import pandas as pd
import pytest

from sampling_lib import evaluate
from sampling_lib.design import head_ladder_cost, head_rungs, plan_strata
from test_evaluate import N_ITEMS, Counter, _population
from test_evaluate_proxy import _proxy_vector

HEAD, TAIL_N, K_MAX = 40, 20, 10


@pytest.mark.parametrize("head, k_max", [(1, 1), (9, 10), (10, 10), (19, 10), (20, 10), (100, 10), (777, 3)])
def test_head_rungs_halve_the_head_down_to_k_max(head, k_max):
    r = head_rungs(head, k_max)
    assert r[-1] == head and all(a < b for a, b in zip(r, r[1:]))
    assert all(b == 2 * a or b == 2 * a - 1 for a, b in zip(r, r[1:]))         # each the next halved, up
    assert r[0] >= k_max or r == [head]
    assert -(-r[0] // 2) < k_max or r[0] == 1                                   # no rung below it would do


def test_head_ladder_cost_is_a_loop_over_users_and_rungs():
    rng = np.random.default_rng(5)
    m = rng.integers(0, 60, size=300)
    flags = {k: rng.random(int(m.sum())) < p for k, p in (("a", 0.3), ("b", 0.5))}
    ptr = np.r_[0, np.cumsum(m)]
    for head, k_max in ((50, 5), (33, 10), (8, 10)):
        got = head_ladder_cost(flags, m, head, k_max)
        for u in range(m.size):
            h = min(head, m[u])
            want = h
            for rung in head_rungs(head, k_max):
                at = min(rung, h)
                if all(f[ptr[u]:ptr[u] + at].sum() >= k_max for f in flags.values()):
                    want = at
                    break
            assert got[u] == want, (u, head, k_max)


@pytest.fixture(scope="module")
def pair():
    held, hist, models = _population(M=400, seed=21)
    prox = _proxy_vector(models)
    out = {}
    for ladder in (False, True):
        counters = {m: Counter(f) for m, f in models.items()}
        res = evaluate(counters, held, N_ITEMS, exclude=hist, n=20, proxy=prox, head=HEAD, tail_n=TAIL_N,
                       tail_n_max=80, seed=5, n_boot=200, progress=False, head_ladder=ladder)
        out[ladder] = (res, counters)
    return held, hist, models, prox, out


def test_the_ladder_changes_the_cost_never_the_estimate(pair):
    """The same seed with and without the ladder: the same table (every column), the same tail per user, and
    fewer pairs, each of them one the whole head's evaluation scored too."""
    *_, out = pair
    (whole, cw), (ladder, cl) = out[False], out[True]
    pd.testing.assert_frame_equal(whole.table, ladder.table)
    w = whole.ranks.set_index(["user", "model"])
    g = ladder.ranks.set_index(["user", "model"])
    pd.testing.assert_series_equal(w.tail_size, g.tail_size)
    assert (w.head_scored == w["head"]).all() and (g.head_scored <= g["head"]).all()
    assert (g.head_scored < g["head"]).any()
    seen_w, seen_l = cw["A"].seen(), cl["A"].seen()
    assert len(seen_l) == int(ladder.cost.pairs_per_model[0]) < len(seen_w) == int(whole.cost.pairs_per_model[0])
    assert not seen_l.duplicated().any()
    assert len(seen_l.merge(seen_w)) == len(seen_l)                              # a subset of the whole's
    per_user = g.xs("A", level="model")
    assert len(seen_l) == int((1 + per_user.head_scored + per_user.tail_size).sum())


def test_a_user_leaves_at_the_first_rung_where_every_model_has_k_max_above(pair):
    """Each user's last rung recomputed from the scores: the first of 10, 20, 40 (capped at its head) where
    both models rank 10 or more of the proxy's first items at or above the held-out one (pessimistic ties)."""
    held, hist, models, prox, out = pair
    ranks = out[True][0].ranks
    scored = ranks.drop_duplicates("user").set_index("user").head_scored
    order = np.lexsort((np.arange(N_ITEMS), -prox))
    assert head_rungs(HEAD, K_MAX) == [10, 20, 40]
    for u in scored.index:
        cand = [i for i in order if i != held[u] and i not in set(hist[u])][:HEAD]
        above = {k: np.asarray(f([u] * len(cand), cand)) >= np.asarray(f([u], [held[u]]))[0]
                 for k, f in models.items()}
        want = len(cand)
        for rung in (10, 20, 40):
            if all(a[:min(rung, len(cand))].sum() >= K_MAX for a in above.values()):
                want = min(rung, len(cand))
                break
        assert scored[u] == want, u


def test_the_stages_and_the_saved_candidates_say_what_was_scored(pair, tmp_path):
    *_, out = pair
    res = out[True][0]
    d = res.design
    heads = d[d.design.str.startswith("the proxy's head")]
    assert list(heads.design) == [f"the proxy's head, rung {r}" for r in (10, 20, 40)]
    assert list(heads.users) == sorted(heads.users, reverse=True)
    text = " ".join(res.summary().split())
    assert "in rungs of 10, 20, 40" in text and "items scored" in text
    c = pd.read_csv(res.save(tmp_path / "saved") / "candidates.csv")
    n_head = c[(c.label == 0) & (c.stratum == "head")].groupby("user").size()
    r = res.ranks.drop_duplicates("user").set_index("user")
    assert (n_head.reindex(r.index, fill_value=0) == r.head_scored).all()


def test_plan_strata_prices_the_head_at_the_cost_it_is_given():
    """head_costs replaces each head size's mean head in the cost of its designs, and nothing else."""
    rng = np.random.default_rng(2)
    P = 400
    m = np.full(P, 30)
    x = rng.integers(0, 14, P)
    s = np.where(x < K_MAX, 40, 0)
    r = np.where(s > 0, 1 + rng.binomial(s, 0.02), 1)
    cells = {"A": (np.full(P, 1000), m, x, s, r)}
    kw = dict(n=50, tail_n=40, M=4000, uniform=False)
    base = plan_strata(cells, **kw).table
    cheap = plan_strata(cells, head_costs={None: 12.5}, **kw).table
    pd.testing.assert_series_equal(cheap.cost, base.cost - 30 + 12.5, check_names=False)
    pd.testing.assert_series_equal(cheap.ratio, base.ratio)
    with pytest.raises(ValueError, match="head_costs must give the cost of every head priced"):
        plan_strata(cells, head_costs={30: 12.5}, **kw)


def test_a_planned_evaluation_runs_the_ladder_and_prices_each_head_at_its_ladder_cost():
    """A planned evaluation: the pilot and the other users run the ladder; the pilot's plan prices each head
    size at head_ladder_cost on the pilot's outcomes (which, for the rungs of a ladder, the pilot's partial
    outcomes give exactly), and the stratified rows' cost is the whole head's plus that difference."""
    from sampling_lib.evaluation import _drive, _Bar
    from sampling_lib.stagerun import check_inputs
    from sampling_lib.stratarun import StrataRun

    held, hist, models = _population(M=300, seed=23)
    prox = _proxy_vector(models)
    config = dict(n=20, metrics=["recall@10", "ndcg@10"], target_ratio=1.5, max_cost=None, seed=6,
                  ties="pessimistic", assurance=0.9, growth=2.0, head=HEAD, tail_n=TAIL_N, tail_n_max=None,
                  plan_users=3000)
    runs = {}
    for ladder in (False, True):
        run = StrataRun(None, None, None, config=dict(config, head_ladder=ladder),
                        inputs=check_inputs(held, N_ITEMS, hist), proxy=prox)
        _drive(run, models, 500, _Bar(False, 0))
        runs[ladder] = run
    whole, lad = runs[False], runs[True]
    assert (lad.head_scored <= lad.heads).all() and (lad.head_scored < lad.heads).any()
    assert (whole.head_scored == whole.heads).all()
    for h in (40, 20, 10):
        # the ladder's cost from its own partial outcomes equals that from the whole head's
        np.testing.assert_array_equal(head_ladder_cost(lad.head_above, lad.heads, h, K_MAX),
                                      head_ladder_cost(whole.head_above, whole.heads, h, K_MAX))
    # a smaller head's cells from the ladder's outcomes: the whole head's, except that a user the ladder settled
    # at a rung beyond the smaller head has its block's items above counted up to that rung (a censored block,
    # "tail rank > y"; no tail sample)
    from sampling_lib.design import smaller_head_cells
    for m in models:
        for h in (20, 10):
            a = smaller_head_cells(lad.cells()[m], lad.head_above[m], h)
            b = smaller_head_cells(whole.cells()[m], whole.head_above[m], h)
            np.testing.assert_array_equal(np.minimum(a[2], K_MAX), np.minimum(b[2], K_MAX))   # (>= K: F = 0)
            live = a[2] < K_MAX                                          # the users a prior is fitted to
            for j in (0, 1, 3, 4, 5):
                np.testing.assert_array_equal(a[j][live], b[j][live])
            cut = live & (lad.head_scored < lad.heads)
            np.testing.assert_array_equal(a[6][live & ~cut], b[6][live & ~cut])
            assert (a[6][cut] <= b[6][cut]).all() and (a[3][cut] == 0).all()
            assert (a[2][cut] + a[6][cut] >= K_MAX).all()                # still settled as a whole
            assert cut.any() or h == 20
    # each head's stratified rows: the whole head's cost, shifted to the ladder's (the same tails' prices)
    t = lad.strata_plan.table
    for h in (40, 20, 10):
        rows = t[(t.kind == "stratified") & (t["head"] == h)]
        if len(rows):
            shift = head_ladder_cost(lad.head_above, lad.heads, h, K_MAX).mean() - np.minimum(h, lad.heads).mean()
            base = plan_strata(lad.cells(), n=20,
                               tail_n=TAIL_N, M=3000, target_ratio=1.5, uniform=False, heads=[h],
                               head_above=lad.head_above).table
            both = rows.merge(base, on=["model", "design", "metric"], suffixes=("", "_whole"))
            assert len(both) and np.allclose(both.cost, both.cost_whole + shift)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(head_ladder=True), ValueError, "head_ladder applies with proxy"),
    (dict(proxy="vector", head_ladder="yes"), TypeError, "head_ladder must be True or False"),
])
def test_bad_head_ladder_settings_name_the_argument(kwargs, error, message):
    held, hist, models = _population(M=20, seed=7)
    if kwargs.get("proxy") == "vector":
        kwargs = dict(kwargs, proxy=_proxy_vector(models))
    with pytest.raises(error, match=message):
        evaluate(models, held, N_ITEMS, exclude=hist, n=20, n_boot=10, progress=False, **kwargs)


def test_a_head_no_better_than_random_falls_back_whatever_its_price(monkeypatch):
    """Where no model's head beats a random head of its size (one-sided z < 1.645 after the first tail sample
    and on the pilot's uniform first stage), the pilot's verdict is that the proxy does not pay, and the other
    users run the uniform ladder; the same run with an enriched head keeps the stratified design. The two tests
    are replaced by stubs here so that both verdicts are exercised on one population (their own tests are in
    tests/test_evaluate_proxy.py)."""
    import sampling_lib.stratarun as stratarun

    held, hist, models = _population(M=700, seed=23)
    kw = dict(exclude=hist, n=20, proxy=_proxy_vector(models), head=HEAD, tail_n=TAIL_N, seed=6, n_boot=0,
              progress=False, target_ratio=2.0)
    kept = evaluate(models, held, N_ITEMS, **kw)
    assert kept.config["proxy_pays"]                               # an enriched head: the plan's price stands
    monkeypatch.setattr(stratarun, "head_enrichment", lambda *a: (0.4, 1.02, 80))
    monkeypatch.setattr(stratarun, "head_enrichment_stage", lambda *a: (0.4, 1.02, 290))
    res = evaluate(models, held, N_ITEMS, **kw)
    assert not res.config["proxy_pays"] and "sample_size" in res.parts["rest"].ranks.columns
    text = " ".join(res.parts["pilot"].design.decision)
    assert "the proxy does not pay: its head is no better than a random one" in text
    assert any("falls back to the uniform ladder" in x for x in res.notes)


def test_the_study_recomputes_the_ladder_outside_the_run():
    """studies.head_ladder_check (notebook 14's claims) on a small synthetic population: the two tables equal,
    every user's last rung and the pairs counted equal to their recomputation, and the ladder cheaper."""
    from sampling_lib import studies
    from sampling_lib.experiments import global_ranks_from_data

    pop = global_ranks_from_data(None, {m: studies.PANEL_MODELS[m] for m in ("itemknn", "popularity")}, rng=3,
                                 keep_models=True, synthetic={"n_users": 300, "n_items": 400})
    c = studies.head_ladder_check(pop, "itemknn", "popularity", head=40, tail_n=10, tail_n_max=80, n=20,
                                  n_boot=50, seed=3).iloc[0]
    assert c.table_max_diff == 0.0 and c.rungs_agree == 1.0
    assert c.pairs_ladder == c.pairs_recomputed < c.pairs_whole
    with pytest.raises(ValueError, match="not one of the fitted models"):
        studies.head_ladder_check(pop, "ease", "popularity", head=40, tail_n=10, tail_n_max=80)


def test_tail_concentration_against_the_global_ranks():
    """studies.tail_concentration with the costly model as its own proxy and no head: the items above the
    held-out item are the proxy's first R_u - 1, so the share in the tail's first ceil(f T_u) positions is
    sum min(R_u - 1, ceil(f T_u)) / sum (R_u - 1), from the population's global ranks (computed apart)."""
    from sampling_lib import studies
    from sampling_lib.experiments import global_ranks_from_data

    pop = global_ranks_from_data(None, {m: studies.PANEL_MODELS[m] for m in ("itemknn", "popularity")}, rng=3,
                                 keep_models=True, synthetic={"n_users": 300, "n_items": 400})
    ranks, N, info = pop
    t = studies.tail_concentration(pop, "itemknn", "itemknn", head=0, users=10_000, k_max=10,
                                   fractions=[0.01, 0.1, 0.5, 1.0])
    R = np.asarray(ranks["itemknn"], dtype=np.int64)
    T = np.asarray(info["n_candidates"], dtype=np.int64) - 1
    first = np.ceil(np.outer([0.01, 0.1, 0.5, 1.0], T))
    want = np.minimum(R - 1, first).sum(axis=1) / (R - 1).sum()
    np.testing.assert_allclose(t.share, want, rtol=1e-12)
    np.testing.assert_allclose(t.uniform_share, ((R - 1) * first / T).sum(axis=1) / (R - 1).sum(), rtol=1e-12)
    assert t.users.iloc[0] == t.drawn.iloc[0] == R.size and t.share.iloc[-1] == 1.0
    # popularity as the proxy knows less than the model itself
    p = studies.tail_concentration(pop, "itemknn", "popularity", head=0, fractions=[0.1])
    assert p.share.iloc[0] < t.share.iloc[1]
    with pytest.raises(ValueError, match="fractions must be"):
        studies.tail_concentration(pop, "itemknn", "popularity", head=0, fractions=[0.0, 0.5])
    with pytest.raises(ValueError, match="not one of the fitted models"):
        studies.tail_concentration(pop, "ease", "popularity", head=0)
