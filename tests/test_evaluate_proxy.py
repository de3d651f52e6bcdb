"""sampling_lib.evaluate(..., proxy=...): a stratified evaluation (the proxy's head scored, a sampled tail).

Each test recomputes what the library reports from the test's own bookkeeping: the pairs a counting
wrapper saw, the proxy's top-m computed here by sorting, head counts and tail ranks by brute force from
the scores, and the full-ranking truth from every candidate's score.
"""
import numpy as np
import pandas as pd
import pytest

from sampling_lib import evaluate
from test_evaluate import N_ITEMS, Counter, _population

HEAD, TAIL_N = 20, 20


def _proxy_vector(models):
    """One proxy score per item: model A's scores for one user (a cheap, global, imperfect ranker)."""
    return np.asarray(models["A"](["u0"] * N_ITEMS, np.arange(N_ITEMS)), dtype=float)


@pytest.fixture(scope="module")
def run():
    held, hist, models = _population(M=400)
    prox = _proxy_vector(models)
    counters = {m: Counter(f) for m, f in models.items()}
    res = evaluate(counters, held, N_ITEMS, exclude=hist, n=20, proxy=prox, head=HEAD, tail_n=TAIL_N,
                   tail_n_max=160, batch_size=700, seed=3, n_boot=200, progress=False)
    return held, hist, models, prox, counters, res


def _scored(counters, m):
    s = counters[m].seen()
    s["score"] = np.asarray(counters[m].f(s.user.to_numpy(), s.item.to_numpy()), dtype=float)
    return s


def test_the_head_is_the_proxys_top_m_and_no_pair_is_scored_twice(run):
    held, hist, _, prox, counters, res = run
    seen = counters["A"].seen()
    assert not seen.duplicated().any()
    assert len(seen) == int(res.cost.pairs_per_model[0])
    assert not any("tie went" in x for x in res.notes)           # continuous proxy scores: no tie at the edge
    text = " ".join(res.summary().split())
    assert "of full ranking" in text and "head of 20 proxy candidates" in text
    if res.table.below_resolution.any():                         # the tail's resolution, not a plan to run
        assert "tail's first sampled bin" in text and "sampling-lib plan" not in text
    b = counters["B"].seen().sort_values(["user", "item"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(seen.sort_values(["user", "item"]).reset_index(drop=True), b)
    ranks = res.ranks[res.ranks.model == "A"].set_index("user")
    order = np.lexsort((np.arange(N_ITEMS), -prox))             # proxy descending, ties by catalogue position
    for u, items in seen.groupby("user").item:
        items = set(items)
        cand = [i for i in order if i != held[u] and i not in set(hist[u])]
        scored = ranks.loc[u, "head_scored"]                     # the head ladder (rungs 10, 20): the first
        head = set(cand[:scored])                                # items of the proxy's top m, none beyond
        assert held[u] in items and head <= items and not set(cand[scored:HEAD]) & items
        tail = items - set(cand[:HEAD]) - {held[u]}
        assert not tail & set(hist[u])                           # never an excluded item
        assert len(tail) == ranks.loc[u, "tail_size"]
        assert ranks.loc[u, "n_items"] == N_ITEMS - len(set(hist[u]))


def test_head_counts_and_tail_ranks_by_brute_force(run):
    held, hist, models, prox, counters, res = run
    order = np.lexsort((np.arange(N_ITEMS), -prox))
    for m in "AB":
        s = _scored(counters, m)
        ranks = res.ranks[res.ranks.model == m].set_index("user")
        for u, g in s.groupby("user"):
            cand = [i for i in order if i != held[u] and i not in set(hist[u])]
            head = set(cand[:HEAD])
            own = g.score[g.item == held[u]].item()
            others = g[g.item != held[u]]
            in_head = others.item.isin(head)
            # the head ladder's rule: a user leaves at the first rung (10, then 20) where both models have
            # 10 or more of its head items at or above the held-out one
            first = {k: np.asarray(models[k]([u] * 11, cand[:10] + [held[u]]), dtype=float) for k in "AB"}
            settled_at_10 = all(int((v[:10] >= v[10]).sum()) >= 10 for v in first.values())
            assert ranks.loc[u, "head_scored"] == (10 if settled_at_10 else min(HEAD, len(cand)))
            # pessimistic ties: an item scored equal to the held-out one ranks above it
            assert ranks.loc[u, "head_above"] == int((others.score[in_head] >= own).sum())
            assert ranks.loc[u, "tail_rank"] == 1 + int((others.score[~in_head] >= own).sum())


def test_the_tail_ladder_follows_its_rule(run):
    """A user gets a tail only when some model has fewer than k_max = 10 head items above; the tail doubles
    (20, 40, 80, 160) while some such model has no sampled tail item above."""
    _, _, _, _, _, res = run
    wide = res.ranks.pivot(index="user", columns="model")
    need = (wide.head_above < 10).any(axis=1)
    size = wide.tail_size.A
    assert (size[~need] == 0).all()
    assert set(size[need]) <= {20, 40, 80, 160}
    top = ((wide.head_above < 10) & (wide.tail_rank == 1)).any(axis=1)
    # a user stopped below tail_n_max only when no model still needing the tail had the tail's top
    stopped = need & (size < 160)
    assert not (stopped & top).any()


def test_the_estimate_covers_full_ranking(run):
    """Recall@10 and NDCG@10 of full ranking, from every candidate's score, within 4 standard errors of the
    stratified estimate (the estimator is unbiased within a few Monte Carlo SE on its own family,
    tests/test_strata.py; 4 SE is far outside what one seed leaves)."""
    held, hist, models, _, _, res = run
    for m, f in models.items():
        truth = _truth(held, hist, f)
        for metric, value in truth.items():
            row = res.table[(res.table.model == m) & (res.table.metric == metric)].iloc[0]
            assert abs(row.estimate - value) <= 4 * row.se, (m, metric, row.estimate, value, row.se)


def _truth(held, hist, f):
    R = []
    for u, h in held.items():
        cand = np.setdiff1d(np.arange(N_ITEMS), np.r_[hist[u], h].astype(int))
        s = np.asarray(f([u] * (cand.size + 1), np.r_[h, cand]), dtype=float)
        R.append(1 + int((s[1:] >= s[0]).sum()))
    R = np.array(R)
    return {"recall@10": float(np.mean(R <= 10)),
            "ndcg@10": float(np.mean(np.where(R <= 10, 1 / np.log2(1 + R), 0.0)))}


def test_a_head_of_every_candidate_is_full_ranking():
    """head >= every user's candidates: each user ranked in full, the estimate is full ranking's metric."""
    held, hist, models = _population(M=60, seed=4)
    res = evaluate(models, held, N_ITEMS, exclude=hist, n=20, proxy=np.zeros(N_ITEMS), head=N_ITEMS, n_boot=50,
                   progress=False)
    assert (res.ranks.tail_size == 0).all()
    for m, f in models.items():
        for metric, value in _truth(held, hist, f).items():
            est = res.table[(res.table.model == m) & (res.table.metric == metric)].estimate.item()
            assert est == pytest.approx(value, abs=1e-9)


def test_the_three_proxy_forms_give_the_same_evaluation():
    """A per-item vector, the callable that returns it and its top-m table define the same heads."""
    held, hist, models = _population(M=80, seed=5)
    prox = _proxy_vector(models)
    order = np.lexsort((np.arange(N_ITEMS), -prox))
    table = pd.DataFrame([(u, i) for u, h in held.items()
                          for i in [i for i in order if i != h and i not in set(hist[u])][:HEAD]],
                         columns=["user", "item"])
    kw = dict(exclude=hist, n=20, head=HEAD, tail_n=TAIL_N, seed=1, n_boot=30, progress=False)
    out = [evaluate(models, held, N_ITEMS, proxy=p, **kw)
           for p in (prox, lambda users, items: prox[np.asarray(items)], table)]
    for other in out[1:]:
        pd.testing.assert_frame_equal(out[0].ranks, other.ranks)
        pd.testing.assert_frame_equal(out[0].table, other.table)


def test_tied_proxy_scores_are_counted_in_the_notes():
    held, hist, models = _population(M=50, seed=6)
    res = evaluate(models, held, N_ITEMS, exclude=hist, n=20, proxy=np.zeros(N_ITEMS), head=5, n_boot=20,
                   progress=False)
    assert any("tie went to the item first in the catalogue" in x for x in res.notes)
    assert any(f"for {len(held):,} users" in x for x in res.notes)


@pytest.mark.parametrize("kwargs, message", [
    (dict(proxy="vector", tail_n_max=80, target_ratio=1.3), "target_ratio does not apply with a fixed tail_n_max"),
    (dict(proxy="vector", tail_n_max=80, max_cost=0.1), "max_cost does not apply with a fixed tail_n_max"),
    (dict(proxy="vector", workdir="x"), "workdir does not apply with proxy"),
    (dict(head=10), "head applies with proxy"),
    (dict(tail_n=10), "tail_n applies with proxy"),
    (dict(proxy=np.zeros(N_ITEMS - 1)), "one score per catalogue item"),
    (dict(proxy="nan"), "must be finite"),
    (dict(proxy="vector", head=0), "head"),
    (dict(proxy="vector", tail_n=20, tail_n_max=10), "tail_n_max"),
])
def test_bad_proxy_settings_name_the_argument(kwargs, message):
    held, hist, models = _population(M=20, seed=7)
    if isinstance(kwargs.get("proxy"), str):
        v = _proxy_vector(models)
        if kwargs["proxy"] == "nan":
            v[3] = np.nan
        kwargs = dict(kwargs, proxy=v)
    with pytest.raises(ValueError, match=message):
        evaluate(models, held, N_ITEMS, exclude=hist, n=20, n_boot=10, progress=False, **kwargs)


def test_a_top_m_table_naming_an_item_twice_or_an_excluded_item_is_refused():
    held, hist, models = _population(M=20, seed=8)
    u = next(u for u in held if hist[u])
    twice = pd.DataFrame({"user": [u, u], "item": [1 if held[u] != 1 else 2] * 2})
    with pytest.raises(ValueError, match="twice"):
        evaluate(models, held, N_ITEMS, exclude=hist, proxy=twice, n_boot=10, progress=False)
    excluded = pd.DataFrame({"user": [u], "item": [hist[u][0]]})
    with pytest.raises(ValueError, match="excluded|history"):
        evaluate(models, held, N_ITEMS, exclude=hist, proxy=excluded, n_boot=10, progress=False)


def test_a_top_m_table_s_held_out_items_missing_users_and_long_lists_are_counted_in_the_notes():
    """Nothing silent: a listed held-out item (dropped from the head), a user the table leaves out (empty head)
    and a list longer than ``head`` (cut) are each counted; the heads are what the notes say."""
    held, hist, models = _population(M=30, seed=9)
    users = list(held)
    rows = []
    for k, u in enumerate(users[:-3]):                          # the last 3 users are left out
        free = [i for i in range(N_ITEMS) if i != held[u] and i not in set(hist[u])]
        lst = free[:8] if k >= 5 else [held[u]] + free[:4]      # 5 users list their held-out item first
        rows += [(u, i) for i in (lst + free[8:12] if k == 6 else lst)]     # one list of 12 items: cut to 8
    res = evaluate(models, held, N_ITEMS, exclude=hist, n=10, proxy=pd.DataFrame(rows, columns=["user", "item"]),
                   head=8, tail_n=4, n_boot=0, progress=False)
    text = " | ".join(res.notes)
    assert "lists the held-out item of 5 of 30 users" in text, text
    assert "3 of 30 users are not in the top-m table" in text, text
    assert "lists more than head = 8 items (or than their candidates) for 1 of 30 users" in text, text
    heads = res.ranks.drop_duplicates("user").set_index("user")["head"]
    assert (heads[users[:5]] == 4).all() and (heads[users[-3:]] == 0).all() and (heads[users[5:-3]] == 8).all()


def test_the_study_evaluates_the_costly_models_only_and_counts_their_pairs():
    """studies.evaluation_study(proxy=): the proxy model is not evaluated, the costly models' pairs are
    counted by the study's wrapper and equal the cost reported, and the planner's columns are NaN."""
    from sampling_lib import studies

    t = studies.evaluation_study(None, {"pop": ("popularity", {}), "knn": ("itemknn", {"neighbors": 20})},
                                 proxy="pop", head=30, tail_n=20, draws=1, n=20, n_boot=50, full_boot=2000,
                                 synthetic={"n_users": 300, "n_items": 400})
    assert set(t.model) == {"knn"} and (t.proxy == "pop").all()
    assert (t.pairs_counted == t.pairs_reported).all() and t.repeats.max() == 0
    # the tail was planned (no tail_n_max): its plan's predicted cost; the uniform route's columns are NaN
    assert t.predicted_share.between(0, 1).all() and t.hand_first_plan_share.isna().all()
    assert t.proxy_paid.isin([0.0, 1.0]).all() and t.predicted_ratio.gt(0).all()
    # the head the other users ran (tests/test_head_choice.py checks it where the proxy pays): NaN where the
    # others fell back, as here (every user is in the pilot of 300)
    assert (t.proxy_paid == 0).all() and t.planned_head.isna().all()
    assert np.isfinite(t.ratio).all() and (t.cost_share > 0).all()
    with pytest.raises(ValueError, match="proxy must name one of the fitted models"):
        studies.evaluation_study(None, {"pop": ("popularity", {})}, proxy="knn", draws=1,
                                 synthetic={"n_users": 50, "n_items": 60})


def test_the_study_compares_a_plan_s_prediction_with_the_users_it_priced():
    """With a pilot split off (700 users, a pilot of 300), the last plan priced the other 400: planned_share is
    their cost on predicted_share's scale, pilot_share the pilot's, and the two add up to the counted pairs."""
    from sampling_lib import studies
    from sampling_lib.design import pilot_size

    t = studies.evaluation_study(None, {"pop": ("popularity", {}), "knn": ("itemknn", {"neighbors": 20})},
                                 proxy="pop", head=30, tail_n=20, draws=1, n=20, n_boot=50, full_boot=2000,
                                 target_ratio=1.3, synthetic={"n_users": 700, "n_items": 400})
    M, P = int(t.M.iloc[0]), pilot_size(int(t.M.iloc[0]))
    assert P < M and t.pilot_share.gt(0).all() and t.planned_share.gt(0).all()
    total = t.cost_share.to_numpy()                      # the wrapper's pairs over the sum of N_u
    assert np.allclose(t.pilot_share + t.planned_share * (M - P) / M, total, rtol=1e-12)
    assert not np.allclose(t.planned_share, total)       # the pilot costs more per user than the others
    s = studies.evaluation_summary(t)
    assert np.allclose(s.cost_over_predicted, s.planned_share / s.predicted_share)
    # without a pilot split (every user in the pilot) the plan priced every user
    one = studies.evaluation_study(None, {"pop": ("popularity", {}), "knn": ("itemknn", {"neighbors": 20})},
                                   proxy="pop", head=30, tail_n=20, draws=1, n=20, n_boot=50, full_boot=2000,
                                   target_ratio=1.3, synthetic={"n_users": 250, "n_items": 300})
    assert np.allclose(one.planned_share, one.cost_share) and one.pilot_share.isna().all()


def test_a_saved_stratified_evaluation_is_a_cascade_table_that_the_cli_corrects_to_the_same_table(tmp_path, capsys):
    """save() of a proxy= evaluation writes candidates.csv (not stage files a reader would take for uniform
    stages); scored again, `sampling-lib estimate` reads it as a cascade's table and prints the same table."""
    import io

    from sampling_lib.cli import main

    held, hist, models = _population(M=80, seed=10)
    m = next(iter(models))
    res = evaluate({m: models[m]}, held, N_ITEMS, exclude=hist, n=20, proxy=_proxy_vector(models), head=HEAD,
                   tail_n=TAIL_N, seed=3, n_boot=60, progress=False)
    folder = res.save(tmp_path / "saved")
    assert not list(folder.glob("stage-*")) and (folder / "candidates.csv").exists()
    c = pd.read_csv(folder / "candidates.csv")
    assert (c.groupby("user").label.sum() == 1).all()
    counts = c[c.label == 0].groupby(["user", "stratum"]).size().unstack(fill_value=0)
    cells = res.ranks.set_index("user")
    assert (counts["head"].reindex(cells.index, fill_value=0) == cells["head_scored"]).all()   # (a head ladder)
    assert (counts["tail"].reindex(cells.index, fill_value=0) == cells["tail_size"]).all()
    c["score"] = models[m](c.user.to_numpy(), c.item.to_numpy())
    c.to_csv(tmp_path / "scored.csv", index=False)
    capsys.readouterr()
    rc = main(["estimate", str(tmp_path / "scored.csv"), "--n-items-file", str(folder / "n_items.csv"), "--seed", "3",
               "--n-boot", "60", "--format", "csv", "--quiet"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    got = pd.read_csv(io.StringIO(out.out))
    for col in ("estimate", "ci_low", "ci_high", "naive"):
        np.testing.assert_allclose(got[col], res.table[col], rtol=1e-12, err_msg=col)
    with pytest.raises(ValueError, match="does not apply to a stratified evaluation"):
        res.save(tmp_path / "ncf", file_format="ncf")


def test_one_proxy_per_model_evaluates_each_model_as_alone(tmp_path):
    """proxy={model: proxy}: each model's rows are those of evaluating it alone with its proxy (same seed), its
    pairs its own; cost and design say which model; save writes one folder per model; bad keys are named."""
    held, hist, models = _population(M=60, seed=12)
    names = list(models)[:2]
    rng = np.random.default_rng(3)
    proxies = {m: rng.normal(size=N_ITEMS) for m in names}
    kw = dict(exclude=hist, n=20, head=HEAD, tail_n=TAIL_N, seed=4, n_boot=40, progress=False)
    both = evaluate({m: models[m] for m in names}, held, N_ITEMS, proxy=proxies, **kw)
    for m in names:
        alone = evaluate({m: models[m]}, held, N_ITEMS, proxy=proxies[m], **kw)
        pd.testing.assert_frame_equal(both.table[both.table.model == m].reset_index(drop=True), alone.table)
        pd.testing.assert_frame_equal(both.ranks[both.ranks.model == m].reset_index(drop=True), alone.ranks)
        assert int(both.cost.set_index("model").loc[m, "pairs_per_model"]) == int(alone.cost.pairs_per_model[0])
        pd.testing.assert_frame_equal(both.negatives[m].to_frame(), alone.negatives.to_frame())
    assert list(both.cost.model) == names and set(both.design.model) == set(names)
    assert all(f"== model {m!r}" in str(both) for m in names)
    folder = both.save(tmp_path / "saved")
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)
    assert all((folder / m / "candidates.csv").exists() for m in names)
    with pytest.raises(ValueError, match="one proxy per model of score, keyed like it"):
        evaluate({m: models[m] for m in names}, held, N_ITEMS, proxy={names[0]: proxies[names[0]]}, **kw)


def test_head_enrichment_is_standard_normal_for_a_random_head_and_large_for_a_good_one():
    # Under a proxy that knows nothing, the head is a random m of each user's candidates and the score
    # statistic is about N(0, 1) whatever the global ranks: over 200 evaluations of 300 users its mean lies
    # within 4 standard errors of 0 (0.28) and its SD within 4 of 1 (0.2). A head of the candidates the
    # model ranks best gives z far above the one-sided 5% point
    from sampling_lib.proxy import head_enrichment

    g = np.random.default_rng(31)
    C, m, t, k = 400, 20, 20, 10

    def evaluation(oracle):
        R = 1 + np.minimum(C, g.geometric(0.02, 300))
        xs, ys = [], []
        for r in R:
            beats = np.zeros(C, bool)
            beats[:r - 1] = True                        # candidates 0..r-2 beat the held-out item
            order = np.arange(C) if oracle else g.permutation(C)
            head, rest = order[:m], order[m:]
            xs.append(beats[head].sum())
            ys.append(beats[g.choice(rest, t, replace=False)].sum())
        return head_enrichment(np.full(300, m), xs, np.full(300, t), ys, k)

    z = np.array([evaluation(False)[0] for _ in range(200)])
    assert abs(z.mean()) < 0.28 and abs(z.std() - 1) < 0.2, (z.mean(), z.std())
    zo, ratio, users = evaluation(True)
    assert zo > 5 and ratio > 1.5 and users > 0


def test_stage_enrichment_is_standard_normal_for_a_random_head_and_large_for_a_good_one():
    # head_enrichment_stage on each user's uniform sample of n1 candidates, split into its head part and its
    # tail part: under a head that is a random m of the candidates, z is about N(0, 1) over 100 evaluations of
    # 300 users (mean within 4 standard errors of 0: 0.4; SD within 4 of 1: 0.28); a head of the candidates
    # the model ranks best gives z far above the one-sided 5% point, with every user counted (no truncation)
    from sampling_lib.proxy import head_enrichment_stage

    g = np.random.default_rng(37)
    C, m, n1, M = 400, 40, 60, 300

    def evaluation(oracle):
        R = 1 + np.minimum(C, g.geometric(0.02, M))
        in_stage, owner, above, t, xt = [], [], [], [], []
        for u, r in enumerate(R):
            beats = np.arange(C) < r - 1                  # candidates 0..r-2 beat the held-out item
            order = np.arange(C) if oracle else g.permutation(C)
            sample = np.zeros(C, bool)
            sample[g.choice(C, n1, replace=False)] = True
            head, rest = order[:m], order[m:]
            in_stage.append(sample[head]), owner.append(np.full(m, u)), above.append(beats[head])
            t.append(sample[rest].sum()), xt.append((sample & beats)[rest].sum())
        return head_enrichment_stage(np.concatenate(in_stage), np.concatenate(owner), np.concatenate(above), t, xt)

    z = np.array([evaluation(False)[0] for _ in range(100)])
    assert abs(z.mean()) < 0.4 and abs(z.std() - 1) < 0.28, (z.mean(), z.std())
    zo, ratio, users = evaluation(True)
    assert zo > 5 and ratio > 1.5 and users > 200


def test_a_proxy_no_better_than_random_is_said_in_the_notes():
    held, hist, models = _population(M=300, seed=8)
    kw = dict(exclude=hist, n=20, head=HEAD, tail_n=TAIL_N, seed=2, n_boot=20, progress=False)
    said = "no more of the items ranked above the held-out one than a random set"
    rnd = evaluate(models, held, N_ITEMS, proxy=np.random.default_rng(0).random(N_ITEMS), **kw)
    assert any(said in x for x in rnd.notes)
    # a random global proxy: its head holds fewer hits than a random head would (the same 20-odd items for
    # every user; see head_enrichment on what that does to z)
    assert any("A: 0.9" in x and "B: 0.9" in x for x in rnd.notes)
    own = evaluate({"A": models["A"]}, held, N_ITEMS, proxy=lambda users, items: models["A"](users, items), **kw)
    assert not any(said in x for x in own.notes)
    assert "against a random head of its size (after the first tail sample): A: 2.00x" in " ".join(own.summary().split())
