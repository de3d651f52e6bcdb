"""The precision check of a planned stratified evaluation: while the estimate's own precision ratio is above the
target, the other users' tail ladder goes on (evaluation._precision_check, StrataRun.extend_tail).

The rest's plan is made optimistic on purpose (a stub keeps the real plan but sets its tail top to the first
tail sample), so the check has work to do. Each test recomputes what the library reports from its own
bookkeeping: the tops from the rule, the tail ranks by brute force from the scores a counting wrapper saw, the
ladder's rule from the final cells, the cost from the wrapper, and the truth from every candidate's score.
"""
import dataclasses
import re

import numpy as np
import pytest

import sampling_lib.design as design
from sampling_lib import evaluate
from sampling_lib.evaluation import CHECK_GROWTH
from sampling_lib.stratarun import StrataRun
from test_evaluate import Counter, _population
from test_head_choice import _truth

N, TAIL_N, HEAD = 4000, 20, 40


@pytest.fixture
def optimistic(monkeypatch):
    """plan_strata as it is, except that the other users' plan (the one that does not decide whether the
    proxy pays) sets the tail's top to the first tail sample: a plan as optimistic as it can be."""
    real = design.plan_strata

    def plan(*args, **kw):
        pl = real(*args, **kw)
        return pl if kw.get("uniform", True) else dataclasses.replace(pl, tail_n_max=kw["tail_n"])

    monkeypatch.setattr(design, "plan_strata", plan)


def _run(max_cost=None, target_ratio=1.3):
    held, hist, models = _population(M=700, N=N, seed=4)
    counters = {m: Counter(f) for m, f in models.items()}
    prox = np.asarray(models["A"](["u0"] * N, np.arange(N)), dtype=float)
    res = evaluate(counters, held, N, exclude=hist, n=20, proxy=prox, head=HEAD, tail_n=TAIL_N, seed=5,
                   n_boot=200, target_ratio=target_ratio, max_cost=max_cost, progress=False)
    return held, hist, models, prox, counters, res


def _checks(res):
    rest = res.parts["rest"].design
    return [d for d in rest.decision if "the precision check" in d]


def test_an_optimistic_plan_is_checked_and_the_ladder_goes_on_to_the_target(optimistic):
    """Target 1.1 (the stubbed top of 20 leaves the estimate at about 1.2 on this population)."""
    held, hist, models, prox, counters, res = _run(target_ratio=1.1)
    assert res.config["proxy_pays"]
    checks = _checks(res)
    assert checks, "the optimistic top must leave the first estimate above the target"
    # each check raises the top by CHECK_GROWTH, from the stubbed top (the first tail sample); each names a
    # ratio above the target
    tops = [int(re.search(r"goes on to ([\d,]+)", d).group(1).replace(",", "")) for d in checks
            if "goes on to" in d]
    grown, t = [], TAIL_N
    while t < N:
        t = int(np.ceil(CHECK_GROWTH * t))
        grown.append(t)
    assert set(tops) <= set(grown) and tops == sorted(set(tops)) and tops[0] == grown[0]
    assert all(float(re.search(r"precision ratio ([\d.]+)", d).group(1)) > 1.1 for d in checks)
    # the check stops at the target, or says why it cannot go on
    if res.table.precision_ratio.max() > 1.1:
        assert "resolved or exhausted" in checks[-1]
    said = [x for x in res.notes if x.startswith("the precision check:")]
    assert len(said) == 1
    # the pairs it scored: the stages after the first check decision, from the design table
    d = res.design
    first = {p: g.index[g.decision.str.contains("the precision check")].min() for p, g in d.groupby("part")}
    after = sum(int(g.loc[g.index > first[p], "pairs"].sum()) for p, g in d.groupby("part") if first[p] == first[p])
    assert f"scoring {after:,} pairs per model" in said[0]
    assert f"the ratio is now {res.table.precision_ratio.max():.2f}" in said[0]
    steps = re.search(r"went on in (\d+) step", said[0])
    assert int(steps.group(1)) == sum(d.decision.str.count("the tail ladder goes on to"))
    total = sum(N - len(set(hist[u])) for u in held)
    assert res.config["check_share"] == pytest.approx(after / total)
    # the ladder's rule on the final cells of both parts (the pilot's users join once the top passes the
    # pilot's own): a user below its part's final top has a sampled tail item above the held-out one for
    # every model with x < 10, or has its whole tail
    assert res.parts["rest"].config["tail_n_max"] == tops[-1]
    for part in ("pilot", "rest"):
        wide = res.parts[part].ranks.pivot(index="user", columns="model")
        tails = wide.n_items.A - 1 - wide["head"].A
        need = (wide.head_above < 10).any(axis=1)
        open_ = ((wide.head_above < 10) & (wide.tail_rank == 1)).any(axis=1)
        size = wide.tail_size.A
        top = res.parts[part].config["tail_n_max"]
        assert (size[need] <= top).all() and (size[~need] == 0).all()
        assert not (need & open_ & (size < np.minimum(top, tails))).any()
    r = res.ranks
    # tail ranks by brute force from the scores the wrapper saw; no pair scored twice; the cost is its count
    order = np.lexsort((np.arange(N), -prox))
    for m in "AB":
        seen = counters[m].seen()
        assert not seen.duplicated().any()
        assert len(seen) == int(res.cost.pairs_per_model.iloc[0])
        seen["score"] = np.asarray(models[m](seen.user.to_numpy(), seen.item.to_numpy()), dtype=float)
        ranks = r[r.model == m].set_index("user")
        for u in ranks.index[ranks.tail_size > 0][:60]:
            g = seen[seen.user == u]
            cand = [i for i in order if i != held[u] and i not in set(hist[u])]
            own = g.score[g.item == held[u]].item()
            tail = g[(g.item != held[u]) & ~g.item.isin(cand[:HEAD])]
            assert len(tail) == ranks.loc[u, "tail_size"]
            assert ranks.loc[u, "tail_rank"] == 1 + int((tail.score >= own).sum())
    # the interval still covers the full-ranking truth of each model
    for m in "AB":
        truth = _truth(models[m], held, hist, N)
        for row in res.table[res.table.model == m].itertuples():
            assert row.ci_low <= truth[row.metric] <= row.ci_high, (m, row.metric, truth[row.metric])


def test_a_pilot_below_the_others_top_goes_on_first(monkeypatch):
    """The other users' planned top above the pilot's own (stubbed at 2,000; the pilot's resolving top is 640
    here): the check's first step reopens the pilot's users at that top, without raising it."""
    real = design.plan_strata

    def plan(*args, **kw):
        pl = real(*args, **kw)
        return pl if kw.get("uniform", True) else dataclasses.replace(pl, tail_n_max=2000)

    monkeypatch.setattr(design, "plan_strata", plan)
    *_, res = _run(target_ratio=1.02)
    pilot = [d for d in res.parts["pilot"].design.decision if "the precision check" in d]
    assert res.parts["pilot"].config["tail_n_max"] >= 2000
    assert pilot and "the tail ladder goes on to 2,000" in pilot[0]
    assert any(x.startswith("the precision check:") and re.search(r"the pilot.s [\d,]+ users to 2,000", x)
               for x in res.notes)


def test_the_check_stays_within_max_cost(optimistic):
    """With a budget and no target (the most precise design within it), the check goes on only while every
    user it reopens could climb to the new top within max_cost: the cost the wrapper counted stays within it,
    and the last check says the budget stopped it."""
    held, hist, models, _, counters, res = _run(max_cost=0.03, target_ratio=None)
    total = sum(N - len(set(hist[u])) for u in held)
    assert len(counters["A"].seen()) <= 0.03 * total
    checks = _checks(res)
    assert checks and "could leave max_cost = 0.03" in checks[-1]
    assert any(x.startswith("the precision check:") and "it stopped: a tail ladder to" in x for x in res.notes)


def test_a_plan_that_meets_the_target_is_left_as_it_is():
    """Without the stub the plan's top meets the target on this population: no check decision, and the
    table's ratios are within the target."""
    *_, res = _run()
    assert not _checks(res) and res.table.precision_ratio.max() <= 1.3 and res.config["check_share"] == 0


def test_extend_tail_reopens_only_a_finished_design_above_its_top():
    held, hist, models = _population(M=50, N=N, seed=4)
    prox = np.asarray(models["A"](["u0"] * N, np.arange(N)), dtype=float)
    run = StrataRun(held, N, hist, config=dict(n=20, metrics=["recall@10"], seed=0, head=HEAD, tail_n=TAIL_N,
                                               tail_n_max=40), proxy=prox)
    with pytest.raises(RuntimeError, match="reopens a finished design"):
        run.extend_tail(80, "why")
    run.done = True
    with pytest.raises(ValueError, match="top must be"):
        run.extend_tail(40, "why")
