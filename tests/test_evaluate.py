"""sampling_lib.evaluate: a planned sampled evaluation with the user's own scorer, in one call.

Each test compares independent computations: the scorer's calls counted by a wrapper of the test's own
(never the library's bookkeeping), ranks recomputed by brute force from the scores of the saved negatives,
the estimate recomputed from the files ``result.save`` writes, resumed runs against uninterrupted ones.
"""
import numpy as np
import pandas as pd
import pytest

import sampling_lib
from sampling_lib import evaluate
from sampling_lib.exceptions import ScoringError
from sampling_lib.io import ranks_from_negatives, read_stages
from sampling_lib.sampling import Design
from sampling_lib import staged

N_ITEMS = 600


def _population(M=300, N=N_ITEMS, seed=0, history=True):
    """Held-out items, histories and two models' scores on a small synthetic catalogue."""
    rng = np.random.default_rng(seed)
    quality = rng.normal(size=N)
    p = np.exp(1.5 * quality)
    p /= p.sum()
    held = {f"u{u}": int(rng.choice(N, p=p)) for u in range(M)}
    hist = {}
    if history:
        for u, h in held.items():
            h_items = rng.choice(N, size=int(rng.integers(0, 40)), replace=False)
            hist[u] = [int(i) for i in h_items if i != h]
    codes = {u: k for k, u in enumerate(held)}

    def noise(users, items, key):
        x = (np.array([codes[u] for u in users]) * 7919 + np.asarray(items) * 104729 + key) % 1_000_003
        return np.sin(x * 12.9898) * 43758.5453 % 1.0

    models = {"A": lambda u, i: quality[np.asarray(i)] + 0.8 * noise(u, i, 1),
              "B": lambda u, i: quality[np.asarray(i)] + 2.0 * noise(u, i, 2)}
    return held, hist, models


class Counter:
    """Counts the pairs a scorer is asked for, and every (user, item) seen (the test's own bookkeeping)."""

    def __init__(self, f):
        self.f, self.pairs, self.calls = f, [], 0

    def __call__(self, users, items):
        self.calls += 1
        assert len(users) == len(items)
        self.pairs.append(pd.DataFrame({"user": np.asarray(users), "item": np.asarray(items)}))
        return self.f(users, items)

    def seen(self):
        return pd.concat(self.pairs, ignore_index=True)


@pytest.fixture(scope="module")
def run():
    held, hist, models = _population()
    counters = {m: Counter(f) for m, f in models.items()}
    res = evaluate(counters, held, N_ITEMS, exclude=hist, n=20, batch_size=1000, seed=3, n_boot=200,
                   progress=False)
    return held, hist, models, counters, res


def test_no_pair_is_scored_twice_and_the_cost_is_what_was_scored(run):
    held, hist, _, counters, res = run
    for m, c in counters.items():
        seen = c.seen()
        assert not seen.duplicated().any()                       # never the same (user, item) twice
        assert len(seen) == int(res.cost.pairs_per_model[0])     # pairs scored = the cost reported
        assert len(seen) == int(res.ranks[res.ranks.model == m].sample_size.sum())
        assert c.calls >= len(seen) / 1000                       # batches of at most batch_size
    # the two models were asked for the same pairs (shared negatives)
    a, b = (counters[m].seen().sort_values(["user", "item"]).reset_index(drop=True) for m in "AB")
    pd.testing.assert_frame_equal(a, b)


def test_history_is_never_drawn_and_the_held_out_item_is_scored_once(run):
    held, hist, _, counters, res = run
    seen = counters["A"].seen()
    excl = {(u, i) for u, items in hist.items() for i in items}
    assert not any((u, i) in excl for u, i in zip(seen.user, seen.item))
    is_held = np.array([held[u] == i for u, i in zip(seen.user, seen.item)])
    assert is_held.sum() == len(held)


def test_merged_ranks_equal_brute_force_ranks_of_the_saved_negatives(run, tmp_path):
    held, hist, models, _, res = run
    folder = res.save(tmp_path / "saved")
    # the saved stage files, read back by the project's readers, hold each user's whole set
    files = sorted(folder.glob("stage-*.csv"), key=lambda p: int(p.stem.split("-")[1]))
    cand = read_stages(files, "negatives", held_out=pd.read_csv(folder / "held_out.csv"), scheme="hypergeometric")
    for m, f in models.items():
        got = res.ranks[res.ranks.model == m].set_index("user")
        for u, g in cand.groupby("user"):
            s = f(np.full(len(g), u), g["item"].astype(int).to_numpy())      # the readers keep ids as text
            pos = s[g["label"].to_numpy() == 1][0]
            neg = s[g["label"].to_numpy() == 0]
            assert got.loc[u, "rank"] == 1 + np.sum(neg >= pos)          # pessimistic ties
            assert got.loc[u, "sample_size"] == len(g)


def test_saved_negatives_rescored_give_the_same_estimate(run, tmp_path):
    held, hist, models, _, res = run
    folder = res.save(tmp_path / "saved")
    files = sorted(folder.glob("stage-*.csv"), key=lambda p: int(p.stem.split("-")[1]))
    cand = read_stages(files, "negatives", held_out=pd.read_csv(folder / "held_out.csv"), scheme="hypergeometric")
    scores = pd.concat([cand.assign(model=m, score=f(cand.user.to_numpy(), cand.item.astype(int).to_numpy()))
                        for m, f in models.items()], ignore_index=True)
    sr = ranks_from_negatives(cand, scores[["user", "model", "item", "score"]])
    items = pd.read_csv(folder / "n_items.csv")
    sr = sr.with_n_items(items)
    again = sampling_lib.estimate(sr, metrics=res.config["metrics"], rng=res.config["seed"], n_boot=200,
                                  scheme="hypergeometric")
    cols = ["model", "metric", "estimate", "ci_low", "ci_high"]
    pd.testing.assert_frame_equal(again[cols], res.table[cols])


def test_the_same_seed_gives_the_same_result_and_another_seed_another(run):
    held, hist, models, _, res = run
    same = evaluate(models, held, N_ITEMS, exclude=hist, n=20, batch_size=777, seed=3, n_boot=200, progress=False)
    pd.testing.assert_frame_equal(same.table, res.table)          # the batch size changes nothing
    # another seed draws other negatives (the first stage's pairs, without scoring or planning)
    from sampling_lib.stagerun import StagedRun

    first = {s: np.concatenate([it for _, it, _ in StagedRun(held, N_ITEMS, hist, config={"n": 20, "seed": s})
                                .chunks(10**6)]) for s in (3, 4)}
    assert not np.array_equal(first[3], first[4])


def test_users_with_few_candidates_are_ranked_in_full():
    held, hist, models = _population(M=120)
    # two users with a history that leaves fewer candidates than the first stage, one just above it
    users = list(held)
    hist[users[0]] = [i for i in range(N_ITEMS) if i != held[users[0]]][:N_ITEMS - 12]
    hist[users[1]] = [i for i in range(N_ITEMS) if i != held[users[1]]][:N_ITEMS - 25]
    c = Counter(models["A"])
    res = evaluate(c, held, N_ITEMS, exclude=hist, n=20, seed=0, n_boot=0, progress=False)
    r = res.ranks.set_index("user")
    assert r.loc[users[0], "sample_size"] == r.loc[users[0], "n_items"] == 12
    # scored on every candidate: its rank is its global rank among them (brute force)
    items = np.array([i for i in range(N_ITEMS) if i not in set(hist[users[0]])])
    s = models["A"](np.full(items.size, users[0]), items)
    pos = s[items == held[users[0]]][0]
    assert r.loc[users[0], "rank"] == 1 + np.sum(s[items != held[users[0]]] >= pos)
    assert (r.sample_size <= r.n_items).all()


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "random"])
def test_ties_follow_the_tie_rules(ties):
    # a model that scores every item alike: every negative ties with the held-out item
    held = {u: u % 50 for u in range(60)}
    res = evaluate(lambda u, i: np.zeros(len(u)), held, 400, n=10, seed=1, ties=ties, n_boot=0, progress=False)
    r = res.ranks
    if ties == "pessimistic":
        assert (r["rank"] == r.sample_size).all()
    elif ties == "optimistic":
        assert (r["rank"] == 1).all()
    else:
        # a uniform position among the ties of the final set: mean (n_u + 1) / 2, within 5 standard errors
        first = r.first_rank.to_numpy()
        assert abs(first.mean() - 5.5) < 5 * np.sqrt((10 ** 2 - 1) / 12 / len(first))
        assert ((r["rank"] >= 1) & (r["rank"] <= r.sample_size)).all()


def test_a_failing_scorer_resumes_from_the_workdir_with_the_same_result(run, tmp_path):
    held, hist, models, _, whole = run
    calls = {"n": 0}

    def flaky(u, i):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("the GPU fell over")
        return models["B"](u, i)

    work = tmp_path / "run"
    with pytest.raises(ScoringError, match=r"score\['B'\] raised RuntimeError: the GPU fell over.*resumes"):
        evaluate({"A": models["A"], "B": flaky}, held, N_ITEMS, exclude=hist, n=20, seed=3, n_boot=200,
                 batch_size=2000, progress=False, workdir=work)
    assert (work / "design.json").exists()
    done = evaluate(models, held, N_ITEMS, exclude=hist, n=20, seed=3, n_boot=200, batch_size=2000,
                    progress=False, workdir=work)
    pd.testing.assert_frame_equal(done.table, whole.table)      # as the uninterrupted run
    # another setting in the same folder is refused
    with pytest.raises(ValueError, match="other inputs or settings"):
        evaluate(models, held, N_ITEMS, exclude=hist, n=20, seed=9, progress=False, workdir=work)


def test_a_budget_bounds_the_design_and_says_what_it_bought(run):
    held, hist, models, _, free = run
    budget = 0.5 * float(free.cost.share_of_full[0])
    res = evaluate(models, held, N_ITEMS, exclude=hist, n=20, seed=3, n_boot=200, max_cost=budget, progress=False)
    N_u = res.ranks.drop_duplicates("user").n_items
    for plan_result in res.plans:
        chosen = plan_result.designs().query("chosen").iloc[0]
        # plan's cost share is per user over max N_u; the budget is a share of sum N_u
        assert chosen.cost / N_u.mean() <= budget + 1e-9
    assert float(res.cost.predicted_share[0]) <= budget + 1e-9
    assert any("budget" in n for n in res.notes) or (res.table.precision_ratio <= 1.3).all()


@pytest.mark.parametrize("bad, match", [
    (lambda u, i: np.zeros(len(u) - 1), r"score must return one score per pair.*shape \(\d+,\)"),
    (lambda u, i: np.full(len(u), np.nan), r"score returned nan for user .*every score must be finite"),
    (lambda u, i: np.where(np.arange(len(u)) == 3, np.inf, 0.0), r"score returned inf"),
    (lambda u, i: 1 / 0, r"score raised ZeroDivisionError"),
    (lambda u, i: ["a"] * len(u), r"score must return one float score per pair"),
])
def test_bad_scorers_are_named_in_one_line(bad, match):
    with pytest.raises(ScoringError, match=match):
        evaluate(bad, {1: 3, 2: 4}, 100, n=10, progress=False)


@pytest.mark.parametrize("kw, match", [
    (dict(held_out={1: 3}, n_items=100, exclude={1: [3]}), "exclude lists the held-out item 3 of user 1"),
    (dict(held_out={1: 300}, n_items=100), r"held_out: item 300 is not an item id in 0..n_items-1=99"),
    (dict(held_out={1: "z"}, n_items=["a", "b"]), r"held_out: item 'z' is not in the catalogue"),
    (dict(held_out={1: 0}, n_items=3, exclude={1: [1, 2]}), "user 1 has no candidates"),
    (dict(held_out={1: 0}, n_items=100, max_cost=0.01), r"max_cost=0.01 is below the first stage's own cost"),
    (dict(held_out={}, n_items=100), "held_out must name at least one test user"),
    (dict(held_out=pd.DataFrame({"user": [1, 1], "item": [2, 3]}), n_items=100), "held_out lists user 1 twice"),
    (dict(held_out={1: 0}, n_items=100, ties="upward"), "ties must be one of"),
    (dict(held_out={1: 0}, n_items=100, seed=-1), "seed must be an int >= 0"),
    (dict(held_out={1: 0}, n_items=100, target_ratio=0.5), r"target_ratio must lie in \[1.0, inf\]"),
])
def test_bad_inputs_are_named_in_one_line(kw, match):
    with pytest.raises(ValueError, match=match):
        evaluate(lambda u, i: np.zeros(len(u)), progress=False, **kw)


def test_a_workdir_not_made_by_evaluate_is_refused_and_left_alone(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not a staged evaluation's folder"):
        evaluate(lambda u, i: np.zeros(len(u)), {1: 0}, 100, n=10, progress=False, workdir=tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me" and len(list(tmp_path.iterdir())) == 1


def test_save_refuses_a_folder_with_files(run, tmp_path):
    (tmp_path / "x").write_text("x")
    with pytest.raises(ValueError, match="exists and is not empty"):
        run[4].save(tmp_path)


def test_the_design_records_each_decision_and_the_stages(run):
    res = run[4]
    d = res.design
    assert d.stage.tolist() == list(range(1, len(d) + 1))
    assert d.pairs.sum() == int(res.cost.pairs_per_model[0])
    assert d.decision.iloc[0] != ""                          # the plan on the first stage
    assert "complete" in d.decision.iloc[-1]
    assert len(res.negatives) == len(d)
    neg = res.negatives.to_frame()
    assert len(neg) == d.pairs.sum() - d.users.iloc[0]       # every pair but the held-out ones


# ----------------------------------------------------------------------------
# the decisions (sampling_lib.staged)
# ----------------------------------------------------------------------------
def test_after_plan_runs_the_first_rungs_then_the_ladder():
    d = Design("ladder", 100, n_max=12_800)
    first = staged.after_plan(d, n=100, below=["recall@10"])
    assert (first.run_to, first.replan) == (1600, True)          # to n_max / 8
    assert staged.after_plan(d, n=100, below=[]).run_to == 12_800    # resolved at stage 1: the whole ladder
    again = staged.after_plan(Design("ladder", 100, n_max=102_400), n=100, first_stage=False, ran_to=1600)
    assert (again.run_to, again.replan) == (12_800, True)        # reaches 64x above the rungs: more rungs
    last = staged.after_plan(d, n=100, first_stage=False, ran_to=1600)
    assert (last.run_to, last.replan) == (12_800, False)
    assert staged.after_plan(Design("single", 100), n=100).design is None


def test_replan_candidates_continue_the_rungs():
    cands = staged.replan_candidates(100, 400, 10_000, growth=2.0)
    assert all(c.kind == "ladder" and c.n == 100 and c.n_max >= 400 for c in cands)
    assert cands[0].n_max == 400


def test_next_sizes_caps_at_n_items_and_follows_each_design():
    run = staged.Run(Design("ladder", 10, n_max=80), 80, False, "")
    sizes = np.array([10, 10, 40, 80, 20])
    best = np.array([1, 2, 1, 1, 1])
    items = np.array([500, 500, 500, 500, 30])
    assert staged.next_sizes(run, sizes, best, best, items).tolist() == [20, 10, 80, 80, 30]
    thr = staged.Run(Design("threshold", 10, threshold=2, n2=90), 100, False, "")
    assert staged.next_sizes(thr, np.full(3, 10), np.array([1, 3, 2]), np.array([1, 3, 2]),
                             np.array([500, 500, 50])).tolist() == [100, 10, 50]


def test_batches_drawn_ahead_keep_their_order_and_either_side_s_error_ends_both():
    from sampling_lib.evaluation import _prefetched

    assert list(_prefetched(iter(range(7)))) == list(range(7))
    assert list(_prefetched(iter([]))) == []

    def broken():
        yield 1
        raise KeyError("drawing failed")

    with pytest.raises(KeyError, match="drawing failed"):
        list(_prefetched(broken()))
    drawn = []

    def counted():
        for i in range(100):
            drawn.append(i)
            yield i

    it = _prefetched(counted())
    with pytest.raises(ZeroDivisionError):
        for i in it:
            1 / (i - 3)                     # the consumer fails at the fourth batch
    it.close()
    assert len(drawn) <= 5                  # the worker drew at most one batch ahead



def test_scores_absorbed_in_any_batching_give_the_brute_force_counts():
    # users out of order and split across batches, against the items above counted pair by pair
    from sampling_lib.stagerun import StagedRun

    rng = np.random.default_rng(3)
    for ties in ("pessimistic", "optimistic", "random"):
        run = StagedRun(dict(enumerate([0, 1, 2, 3])), 40, config={"n": 5, "ties": ties, "seed": 0})
        held = np.round(rng.random(4), 1)
        run.absorb(np.arange(4), np.zeros(4, np.int64), np.ones(4, bool), {"a": held})
        u = rng.integers(0, 4, size=60)
        s = np.round(rng.random(60), 1)                       # ties with the held-out scores
        for part in np.array_split(np.arange(60), 4):
            run.absorb(u[part], 5 + np.arange(part.size), np.zeros(part.size, bool), {"a": s[part]})
        gt = np.bincount(u[s > held[u]], minlength=4)
        eq = np.bincount(u[s == held[u]], minlength=4)
        got = run.above["a"]
        if ties == "pessimistic":
            assert np.array_equal(got, gt + eq)
        elif ties == "optimistic":
            assert np.array_equal(got, gt)
        else:
            assert ((got >= gt) & (got <= gt + eq)).all()


def test_text_item_ids_from_a_catalogue_array_reach_the_scorer_and_give_the_integer_run_s_table():
    # the same population with items named "i<k>": the scorer sees the names, and the table equals the run
    # on integer ids (same seed, the same positions drawn)
    held, hist, models = _population(M=120, seed=4)
    names = np.array([f"i{k}" for k in range(N_ITEMS)], dtype=object)
    back = {n: k for k, n in enumerate(names)}
    seen = []

    def by_name(f):
        def score(users, items):
            seen.append(set(map(type, items)))
            return f(users, np.array([back[i] for i in items]))
        return score

    kw = dict(n=20, seed=1, n_boot=0, progress=False)
    a = evaluate(models, held, N_ITEMS, exclude=hist, **kw)
    b = evaluate({m: by_name(f) for m, f in models.items()}, {u: names[i] for u, i in held.items()}, names,
                 exclude={u: [names[i] for i in h] for u, h in hist.items()}, **kw)
    assert set().union(*seen) == {str}
    pd.testing.assert_frame_equal(a.table, b.table)


def test_a_workdir_of_another_drawing_order_is_refused(tmp_path):
    # a folder written before the drawing order changed would continue with other negatives: refused
    import json

    held, hist, models = _population(M=60, seed=6)
    folder = tmp_path / "run"
    evaluate(models, held, N_ITEMS, exclude=hist, n=20, seed=0, n_boot=0, progress=False, workdir=folder)
    state = json.loads((folder / "design.json").read_text())
    state["format"] = 1
    (folder / "design.json").write_text(json.dumps(state))
    with pytest.raises(ValueError, match="another version of sampling-lab"):
        evaluate(models, held, N_ITEMS, exclude=hist, n=20, seed=0, n_boot=0, progress=False, workdir=folder)
