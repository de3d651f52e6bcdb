"""The two-stage (nested) workflow with real files (issue 29 items 1-4, 6).

A small world: N items, users with a held-out item (and a history for the CLI),
and models whose scores order the items the same way for every user, so each
user's global rank R_u is known. Stage 1 is a fixed negatives file; the stages
after it are decided from the ranks (any model's), drawn without replacement
from the items not yet in the set, written in the first stage's format, read
back and merged (sampling_lib.io.read_stages) into per-user (n_u, r_u).
Checked: the round trip of every format, the exclusions, the union of the users
several models send on, the merged ranks against a direct count and against
the exact law of the design (sampling_lib.design.design_law), the CLI's
negatives --stage / ranks / plan / estimate, and every bad input of the issue
(one line naming the file and line).
"""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sampling_lib import io
from sampling_lib.design import design_law
from sampling_lib.sampling import (Design, next_stage_sizes, sample_added_negatives, sample_design,
                                   sample_negatives)


# ----------------------------------------------------------------------------
# the world
# ----------------------------------------------------------------------------
def order_scores(N, seed=None):
    """Scores of the N items (the same for every user): item 0 first, or a random order."""
    if seed is None:
        return -np.arange(N, dtype=float)
    return np.random.default_rng(seed).permutation(N).astype(float)


def scorer(S):
    return lambda users, items: S[np.asarray(items).astype(int)]


def held_table(users, held):
    return pd.DataFrame({"user": users, "item": held})


def stage_ranks(files, held, S, fmt="negatives", scheme="hypergeometric"):
    """(final ranks, final sizes) per user of one model, merged over the stage tables."""
    cand = io.read_stages(files, fmt, held_out=held if fmt != "ncf" else None, scheme=scheme)
    sr = io.ranks_from_negatives(cand, scorer(S))
    r, s = sr.for_model("model")
    return r, s, list(sr.ranks.index)


def run_design(R, N, design, *, rng, scheme="hypergeometric"):
    """Users with global ranks R (scores: item j at rank j + 1, held-out item R - 1), through files."""
    M = len(R)
    users = np.array([f"u{j}" for j in range(M)])
    held_items = np.asarray(R) - 1
    held = held_table(users, held_items)
    S = order_scores(N)
    g = np.random.default_rng(rng)
    files = [sample_negatives(users, N, design.n, held_out=held_items, scheme=scheme, rng=g)]
    stage_count = {"ladder": 10, "threshold": 1, "single": 1, "full_subset": 1}[design.kind]
    for _ in range(stage_count):
        r, s, order = stage_ranks(files, held, S, scheme=scheme)
        assert order == list(users)
        new = next_stage_sizes(r, s, design, N=N, rng=g)
        if (new == s).all():
            break
        cand = io.read_stages(files, "negatives", held_out=held, scheme=scheme)
        earlier = cand[cand.label == 0][["user", "item"]].astype({"item": int})
        files.append(sample_added_negatives(users, N, new - s, earlier=earlier, held_out=held_items,
                                            scheme=scheme, rng=g))
    r, s, _ = stage_ranks(files, held, S, scheme=scheme)
    return r, s, files


# ----------------------------------------------------------------------------
# sampling: who goes on, and the drawn items
# ----------------------------------------------------------------------------
def test_next_stage_sizes_per_design_and_the_union_of_models():
    ranks = np.array([[1, 7], [6, 2], [9, 8], [1, 1]])
    sizes = np.full(4, 10)
    thr = next_stage_sizes(ranks, sizes, Design("threshold", 10, threshold=2, n2=30))
    assert thr.tolist() == [40, 40, 10, 40]             # users 0, 1 (through model B), 3
    lad = next_stage_sizes(ranks, sizes, Design("ladder", 10, n_max=25))
    assert lad.tolist() == [20, 10, 10, 20]
    lad2 = next_stage_sizes([[1], [3], [1], [1]], [20, 20, 10, 25], Design("ladder", 10, n_max=25))
    assert lad2.tolist() == [25, 20, 20, 25]             # the last step truncated to n_max; n_max stops
    lad3 = next_stage_sizes([[1], [3], [1], [1]], [15, 15, 10, 23], Design("ladder", 10, n_max=30, growth=1.5))
    assert lad3.tolist() == [23, 15, 15, 30]             # 10 -> 15 -> 23 -> 30 (ceil of 1.5 x, truncated)
    with pytest.raises(ValueError, match=r"the sizes of a ladder are \[10, 15, 23, 30\]"):
        next_stage_sizes([[1]], [20], Design("ladder", 10, n_max=30, growth=1.5))
    assert next_stage_sizes(ranks, sizes, Design("single", 50)).tolist() == [50] * 4
    full = next_stage_sizes(ranks, sizes, Design("full_subset", 10, fraction=0.5), N=[90, 91, 92, 93], rng=0)
    assert sorted(full.tolist()) in ([10, 10, 90, 92], [10, 10, 91, 93], [10, 10, 90, 91], [10, 10, 90, 93],
                                     [10, 10, 91, 92], [10, 10, 92, 93])
    assert (full == sizes).sum() == 2
    # a missing rank (NaN) leaves the decision to the other models
    assert next_stage_sizes([[np.nan, 1], [np.nan, 5]], [10, 10],
                            Design("threshold", 10, threshold=1, n2=5)).tolist() == [15, 10]


@pytest.mark.parametrize("ranks, sizes, design, match", [
    ([[1], [2]], [10, 20], Design("threshold", 10, threshold=1, n2=5), "one stage after the first"),
    ([[1], [2]], [10, 30], Design("ladder", 10, n_max=80), "sizes of a ladder"),
    ([[11], [2]], [10, 10], Design("ladder", 10, n_max=80), "1..n_u"),
    ([[1], [2]], [10, 10], Design("full_subset", 10, fraction=0.5), "needs N"),
    ([[np.nan], [2]], [10, 10], Design("ladder", 10, n_max=80), "no rank under any model"),
])
def test_next_stage_sizes_refuses_what_does_not_fit(ranks, sizes, design, match):
    with pytest.raises(ValueError, match=match):
        next_stage_sizes(ranks, sizes, design)


def test_next_stage_sizes_refuses_sets_beyond_N_u():
    with pytest.raises(ValueError, match="more than its N_u"):
        next_stage_sizes([[1]], [10], Design("threshold", 10, threshold=1, n2=50), N=40)


def test_added_negatives_avoid_history_held_out_and_earlier_items():
    N, users = 60, np.array(["a", "b", "c"])
    held = np.array([3, 7, 11])
    hist = pd.DataFrame({"user": ["a"] * 10 + ["b"] * 5, "item": list(range(20, 30)) + list(range(40, 45))})
    first = sample_negatives(users, N, 10, held_out=held, exclude=hist, rng=0)
    added = np.array([30, 0, 50])                # user c takes every item left: 60 - 1 - 9
    more = sample_added_negatives(users, N, added, earlier=first, exclude=hist, held_out=held, rng=1)
    assert more.groupby("user").size().to_dict() == {"a": 30, "c": 50}
    for u, h in zip(users, held):
        new = set(more[more.user == u].item)
        assert len(new) == len(more[more.user == u])                      # distinct
        assert not new & set(first[first.user == u].item)                  # not an earlier negative
        assert not new & set(hist[hist.user == u].item) and h not in new    # not history, not held out
    c = set(first[first.user == "c"].item) | set(more[more.user == "c"].item) | {11}
    assert c == set(range(N))                                              # c is ranked in full
    again = sample_added_negatives(users, N, added, earlier=first, exclude=hist, held_out=held, rng=1)
    pd.testing.assert_frame_equal(more, again)                             # seeded
    with pytest.raises(ValueError, match="user 'c' has only 50 items left"):
        sample_added_negatives(users, N, [1, 1, 51], earlier=first, held_out=held, exclude=hist, rng=0)


def test_added_negatives_with_replacement_may_repeat_earlier_items():
    users, N = ["a"], 12
    first = sample_negatives(users, N, 8, held_out=[0], scheme="binomial", rng=0)
    more = sample_added_negatives(users, N, 200, earlier=first, held_out=[0], scheme="binomial", rng=0)
    assert set(more.item) & set(first.item) and 0 not in set(more.item)
    assert len(more) == 200


# ----------------------------------------------------------------------------
# formats: write a stage, read the stages back
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("fmt, with_held", [("negatives", True), ("ncf", False), ("elliot", True),
                                            ("elliot", False)])
def test_stage_files_round_trip_in_every_format(tmp_path, fmt, with_held):
    users = np.array(["u1", "u2", "u3"])
    held = np.array([5, 6, 7])
    first = sample_negatives(users, 100, 6, held_out=held, rng=0)
    second = sample_added_negatives(users, 100, [4, 0, 9], earlier=first, held_out=held, rng=1)
    hold = dict(zip(users, held))
    paths = [tmp_path / f"s{k}.{fmt}" for k in (1, 2)]
    for p, t in zip(paths, (first, second)):
        io.write_stage_negatives(t, p, fmt, held_out=hold if (fmt == "ncf" or not with_held) else None)
    ht = held_table(users, held) if (fmt != "ncf" and with_held) else None
    cand = io.read_stages(paths, fmt, held_out=ht)
    assert cand.columns.tolist() == ["user", "item", "label", "line", "stage"]
    for u in users:
        got = cand[cand.user == u]
        assert got.label.tolist()[0] == 1 and got.item.tolist()[0] == str(hold[u])
        want = [str(i) for i in first[first.user == u].item] + [str(i) for i in second[second.user == u].item]
        assert got.item.tolist()[1:] == want
        assert got.stage.tolist() == [1] * 6 + [2] * len(second[second.user == u])
    # lines name the file's lines: NCF/Elliot one per user, the CSV one per negative (header = line 1)
    if fmt == "negatives":
        assert cand[(cand.stage == 2)].line.tolist() == list(range(2, 2 + len(second)))
    else:
        assert cand[(cand.stage == 2) & (cand.user == "u3")].line.unique().tolist() == [2]


# ----------------------------------------------------------------------------
# the merged ranks: a direct count, and the design's exact law
# ----------------------------------------------------------------------------
def test_merged_ranks_count_the_items_above_in_the_union_of_the_stages():
    N = 500
    R = np.random.default_rng(3).integers(1, 60, 300)
    r, s, files = run_design(R, N, Design("ladder", 10, n_max=160), rng=0)
    neg = pd.concat(files)
    users = [f"u{j}" for j in range(len(R))]
    above = {u: 0 for u in users}
    size = {u: 1 for u in users}
    held = dict(zip(users, R - 1))
    for u, it in zip(neg["user"], neg["item"].astype(int)):
        above[u] += it < held[u]
        size[u] += 1
    assert r.tolist() == [1 + above[u] for u in users]
    assert s.tolist() == [size[u] for u in users]
    assert set(s.tolist()) <= {10, 20, 40, 80, 160} and (r[s < 160] > 1).all()   # stopped where resolved
    # the rank within the first stage's set, counted on the stage-1 file alone (SampledRanks.first_ranks);
    # with random ties the two ranks would be drawn apart, so none is given
    first = {u: 1 for u in users}
    for u, it in zip(files[0]["user"], files[0]["item"].astype(int)):
        first[u] += it < held[u]
    held_t = held_table(users, R - 1)
    cand = io.read_stages(files, "negatives", held_out=held_t)
    sr = io.ranks_from_negatives(cand, scorer(order_scores(N)))
    assert sr.first_for_model("model").tolist() == [first[u] for u in users]
    assert io.ranks_from_negatives(cand, scorer(order_scores(N)), ties="random", rng=0).first_ranks is None
    assert io.ranks_from_negatives(cand[cand.stage == 1], scorer(order_scores(N))).first_ranks is None


@pytest.mark.parametrize("design", [Design("threshold", 20, threshold=2, n2=60), Design("ladder", 10, n_max=80),
                                    Design("ladder", 10, n_max=80, growth=1.5), Design("single", 50)])
@pytest.mark.slow
def test_merged_stages_follow_the_designs_exact_law(design):
    """Frequencies of the final (n_u, r_u) of 3 x 1,200 users through files against design_law (chi-square)."""
    N, groups = 400, (1, 4, 25)
    R = np.repeat(groups, 1200)
    if design.kind == "single":
        r, s, _ = _single_from_two_stages(R, N, design)
    else:
        r, s, _ = run_design(R, N, design, rng=11)
    for g in groups:
        sizes, lo, hi, D = design_law(design, N, [g], "hypergeometric")
        sel = R == g
        obs = np.array([np.sum((s[sel] == sz) & (r[sel] >= a) & (r[sel] <= b)) for sz, a, b in zip(sizes, lo, hi)])
        assert obs.sum() == sel.sum()                            # every user in a cell of the law
        exp = D[0] * sel.sum()
        big = exp >= 5
        o = np.r_[obs[big], obs[~big].sum()]
        e = np.r_[exp[big], exp[~big].sum()]
        keep = e > 0
        if keep.sum() == 1:                                      # R = 1 under the ladder: one cell, certain
            assert o[keep][0] == sel.sum()
            continue
        p = stats.chisquare(o[keep], e[keep] * o[keep].sum() / e[keep].sum()).pvalue
        assert p > 1e-3, (design, g, p)


def _single_from_two_stages(R, N, design):
    """A single set of design.n built as a first stage of 20 and a second stage for every user (--n2 alone)."""
    M = len(R)
    users = np.array([f"u{j}" for j in range(M)])
    held_items = R - 1
    held = held_table(users, held_items)
    g = np.random.default_rng(5)
    s1 = sample_negatives(users, N, 20, held_out=held_items, rng=g)
    new = next_stage_sizes(np.ones((M, 1)), np.full(M, 20), design)
    s2 = sample_added_negatives(users, N, new - 20, earlier=s1.astype({"item": int}), held_out=held_items, rng=g)
    r, s, _ = stage_ranks([s1, s2], held, order_scores(N))
    return r, s, [s1, s2]


def test_file_stages_and_sample_design_agree_in_distribution():
    """The same threshold design simulated by sample_design and run through files: equal law (two-sample test)."""
    N, R = 300, np.repeat([2, 9], 1500)
    d = Design("threshold", 15, threshold=1, n2=45)
    r_file, s_file, _ = run_design(R, N, d, rng=2)
    r_sim, s_sim = sample_design(R, N, d, scheme="hypergeometric", rng=3)
    for g in (2, 9):
        sel = R == g
        assert abs(np.mean(s_file[sel] > 15) - np.mean(s_sim[sel] > 15)) < 0.06
        p = stats.ks_2samp(r_file[sel] + 1000 * s_file[sel], r_sim[sel] + 1000 * s_sim[sel]).pvalue
        assert p > 1e-3


def test_several_models_share_one_set_of_added_items_and_compare_stays_paired():
    from sampling_lib import compare

    N, M = 300, 200
    users = np.array([f"u{j}" for j in range(M)])
    rng = np.random.default_rng(0)
    held_items = rng.integers(0, N, M)
    held = held_table(users, held_items)
    SA, SB = order_scores(N, seed=1), order_scores(N, seed=2)
    s1 = sample_negatives(users, N, 12, held_out=held_items, rng=4)
    cand = io.read_stages([s1], "negatives", held_out=held)
    table = pd.concat([pd.DataFrame({"user": cand.user, "item": cand["item"], "model": m,
                                     "score": S[cand["item"].astype(int)]}) for m, S in (("A", SA), ("B", SB))])
    sr = io.ranks_from_negatives(cand, table)
    R1 = sr.ranks.loc[users].to_numpy(dtype=float)
    new = next_stage_sizes(R1, np.full(M, 12), Design("threshold", 12, threshold=1, n2=36))
    need = (R1 <= 1).any(axis=1)
    assert (new > 12).tolist() == need.tolist() and 0 < need.sum() < M
    assert ((R1[:, 0] <= 1) != (R1[:, 1] <= 1)).any()            # some users go on for one model only
    s2 = sample_added_negatives(users, N, new - 12, earlier=s1, held_out=held_items, rng=5)
    cand2 = io.read_stages([s1, s2], "negatives", held_out=held)
    table2 = pd.concat([pd.DataFrame({"user": cand2.user, "item": cand2["item"], "model": m,
                                      "score": S[cand2["item"].astype(int)]}) for m, S in (("A", SA), ("B", SB))])
    merged = io.ranks_from_negatives(cand2, table2.drop_duplicates())
    sa, sb = merged.sample_sizes["A"].to_numpy(), merged.sample_sizes["B"].to_numpy()
    assert (sa == sb).all() and sorted(set(sa)) == [12, 48]
    out = compare(merged, N, None, "recall@10", n_boot=20, rng=0)
    assert len(out) == 1 and out.users.iloc[0] == M


# ----------------------------------------------------------------------------
# bad stage files: one line naming the file and line
# ----------------------------------------------------------------------------
@pytest.fixture
def ncf_stage1(tmp_path):
    p = tmp_path / "s1.test.negative"
    p.write_text("(a,5)\t1\t2\t3\n(b,6)\t4\t7\t8\n")
    return p


@pytest.mark.parametrize("text, kw, match", [
    ("(c,9)\t10\n", {}, r"s2.test.negative, line 1: user 'c' is not a user of the first stage"),
    ("(a,5)\t10\n(b,99)\t11\n", {}, r"s2.test.negative, line 2: the held-out item of user 'b' is '99' here but '6'"),
    ("(a,5)\t10\t2\n", {}, r"s2.test.negative, line 1: negative '2' of user 'a' is already a negative of stage 1 "
                           r"\(.*s1.test.negative, line 1\)"),
    ("(a,5)\t10\t10\n", {}, r"s2.test.negative, line 1: negative '10' of user 'a' is listed twice"),
    ("(a,5)\t10\n(b,6)\t6\n", {}, r"s2.test.negative, line 2: the held-out item '6' of user 'b' is also listed"),
    ("(a,5)\t10\n(b,6)\t30\n", {"exclude": pd.DataFrame({"user": ["b"], "item": [30]})},
     r"s2.test.negative, line 2: negative '30' of user 'b' is in its history"),
    ("(a,5)\t10\t11\n", {"n_items": 5}, r"s2.test.negative, line 1: user 'a' has 6 candidates over the stages .* "
                                        r"more than its N_u = 5"),
])
def test_bad_stage_files_name_the_file_and_line(tmp_path, ncf_stage1, text, kw, match):
    p = tmp_path / "s2.test.negative"
    p.write_text(text)
    with pytest.raises(ValueError, match=match):
        io.read_stages([ncf_stage1, p], "ncf", **kw)


def test_with_replacement_a_later_stage_may_repeat_an_earlier_negative(tmp_path, ncf_stage1):
    p = tmp_path / "s2.test.negative"
    p.write_text("(a,5)\t10\t2\n")
    t = io.read_stages([ncf_stage1, p], "ncf", scheme="binomial")
    assert t[t.user == "a"].item.tolist() == ["5", "1", "2", "3", "10", "2"]


def test_a_third_stage_only_continues_the_users_of_the_second(tmp_path, ncf_stage1):
    (tmp_path / "s2.test.negative").write_text("(a,5)\t10\n")
    (tmp_path / "s3.test.negative").write_text("(a,5)\t11\n(b,6)\t12\n")
    with pytest.raises(ValueError, match=r"s3.test.negative, line 2: user 'b' is not a user of stage 2"):
        io.read_stages([ncf_stage1, tmp_path / "s2.test.negative", tmp_path / "s3.test.negative"], "ncf")


def test_history_is_checked_in_every_stage_and_csv_stages_name_their_lines(tmp_path):
    (tmp_path / "s1.csv").write_text("user,item\na,1\na,2\nb,3\nb,4\n")
    (tmp_path / "s2.csv").write_text("user,item\na,7\n\nb,8\n")
    held = pd.DataFrame({"user": ["a", "b"], "item": [5, 6]})
    with pytest.raises(ValueError, match=r"s2.csv, line 4: negative '8' of user 'b' is in its history"):
        io.read_stages([tmp_path / "s1.csv", tmp_path / "s2.csv"], held_out=held,
                       exclude=pd.DataFrame({"user": ["b"], "item": ["8"]}))
    with pytest.raises(ValueError, match=r"s1.csv, line 3: negative '2' of user 'a' is in its history"):
        io.read_stages([tmp_path / "s1.csv", tmp_path / "s2.csv"], held_out=held,
                       exclude=pd.DataFrame({"user": ["a"], "item": [2]}))


def test_scores_files_may_repeat_a_pair_with_the_same_score_only(tmp_path):
    cand = pd.DataFrame({"user": ["u"] * 3, "item": ["h", "a", "b"], "label": [1, 0, 0]})
    (tmp_path / "s1.csv").write_text("user,item,score\nu,h,0.5\nu,a,0.9\n")
    (tmp_path / "s2.csv").write_text("user,item,score\nu,h,0.5\nu,b,0.1\n")
    both = io.concat_tables([tmp_path / "s1.csv", tmp_path / "s2.csv"], "scores")
    assert io.ranks_from_negatives(cand, both).for_model("model")[0].tolist() == [2]
    (tmp_path / "s2.csv").write_text("user,item,score\nu,b,0.1\nu,h,0.7\n")
    both = io.concat_tables([tmp_path / "s1.csv", tmp_path / "s2.csv"], "scores")
    with pytest.raises(ValueError, match=r"\('u', 'h'\).*two different scores \(.*s1.csv, line 2, .*s2.csv, line 3\)"):
        io.ranks_from_negatives(cand, both)


def test_one_scores_file_may_repeat_a_pair_drawn_twice_with_the_same_score_only(tmp_path):
    # negatives drawn with replacement repeat an item; a framework scoring every candidate row writes the
    # pair twice: that is no conflict (each draw counts), two different scores are
    cand = pd.DataFrame({"user": ["u"] * 4, "item": ["h", "a", "b", "a"], "label": [1, 0, 0, 0]})
    (tmp_path / "sc.csv").write_text("user,item,score\nu,h,0.5\nu,a,0.9\nu,b,0.1\nu,a,0.9\n")
    s = io.ranks_from_negatives(cand, io.concat_tables([tmp_path / "sc.csv"], "scores"))
    assert (s.for_model("model")[0].tolist(), s.for_model("model")[1].tolist()) == ([3], [4])
    (tmp_path / "sc.csv").write_text("user,item,score\nu,h,0.5\nu,a,0.9\nu,b,0.1\nu,a,0.2\n")
    with pytest.raises(ValueError, match=r"\('u', 'a'\).*two different scores \(.*sc.csv, line 3, .*sc.csv, "
                                         r"line 5\): one score per pair"):
        io.ranks_from_negatives(cand, tmp_path / "sc.csv")


def test_scores_of_pairs_outside_the_stages_are_reported_not_dropped_silently():
    cand = pd.DataFrame({"user": ["u"] * 2, "item": ["h", "a"], "label": [1, 0]})
    scores = pd.DataFrame({"user": ["u"] * 3, "item": ["h", "a", "z"], "score": [0.5, 0.9, 0.3]})
    with pytest.warns(UserWarning, match=r"1 rows of the scores table score no candidate .*item 'z'.*A stage's "
                                         r"negatives file left out"):
        io.ranks_from_negatives(cand, scores)


def test_a_scores_dataframe_with_any_index_gives_the_same_ranks():
    # the scores were aligned on the DataFrame's index: a concatenation (repeated index) raised a pandas error,
    # and an index other than 0..k-1 misaligned the scores with their ids
    cand = pd.DataFrame({"user": ["u", "u", "u", "v", "v"], "item": ["h", "a", "b", "g", "a"],
                         "label": [1, 0, 0, 1, 0]})
    scores = pd.DataFrame({"user": ["u", "u", "u", "v", "v"], "item": ["h", "a", "b", "g", "a"],
                           "score": [0.5, 0.9, 0.1, 0.2, 0.1]})
    want = io.ranks_from_negatives(cand, scores).for_model("model")[0].tolist()
    assert want == [2, 1]
    for index in ([10, 11, 12, 13, 14], [0, 1, 0, 1, 2], [4, 3, 2, 1, 0]):
        got = io.ranks_from_negatives(cand, scores.set_axis(index)).for_model("model")[0].tolist()
        assert got == want, index
