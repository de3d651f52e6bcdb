"""The nested-design workflow on the command line (issue 29 items 1-4): as a user runs it.

stage-1 negatives -> the framework scores them -> ``ranks`` -> ``plan`` ->
``negatives --stage 2`` -> scores of stage 2 -> ``estimate`` / ``compare`` on
both stages. The "framework" scores item j of every user by a fixed order per
model, so global ranks are known. Every command runs in-process through
``main(argv)``; bad input must be one line ``sampling-lib: error: ...`` naming
the file and line (exit status 1), a bad command line exit status 2.
"""
import json
import re
import subprocess

import numpy as np
import pandas as pd
import pytest

from sampling_lib import io
from sampling_lib.correct import compare, estimate
from sampling_lib.sampling import Design

N, M, n, H = 300, 150, 20, 5
ORDER = {"A": np.random.default_rng(1).permutation(N), "B": np.random.default_rng(2).permutation(N)}


@pytest.fixture
def run(capsys, monkeypatch):
    from sampling_lib.cli import main

    def call(*args, cwd):
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        argv = [str(a) for a in args]
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = int(exc.code or 0)
        out = capsys.readouterr()
        # the printed commands as a shell reads them: lines continued with " \" joined (they wrap to the terminal)
        return subprocess.CompletedProcess(argv, rc, re.sub(r" \\\n[ \t]+", " ", out.out), out.err)

    return call


def one_line_error(p, code, match):
    assert p.returncode == code, (p.returncode, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("sampling-lib: error:") and "Traceback" not in p.stderr, p.stderr
    assert pd.Series([lines[0]]).str.contains(match, regex=True).iloc[0], lines[0]


def score_file(cand_files, path, d, fmt="negatives"):
    """The framework: scores of every candidate of the given stage files (held-out items included)."""
    cand = io.read_stages([d / f for f in cand_files], fmt, held_out=d / "users.csv" if fmt != "ncf" else None)
    items = cand["item"].astype(int).to_numpy()
    rows = [pd.DataFrame({"user": cand.user, "model": m, "item": items, "score": -ORDER[m][items].astype(float)})
            for m in ORDER]
    pd.concat(rows).drop_duplicates(["user", "model", "item"]).to_csv(d / path, index=False)


@pytest.fixture
def world(tmp_path):
    rng = np.random.default_rng(0)
    users = [f"u{j}" for j in range(M)]
    held = rng.integers(0, N, M)
    hist = np.array([rng.choice(np.setdiff1d(np.arange(N), [h]), H, replace=False) for h in held])
    pd.DataFrame({"user": users, "item": held}).to_csv(tmp_path / "users.csv", index=False)
    pd.DataFrame({"user": np.repeat(users, H), "item": hist.ravel()}).to_csv(tmp_path / "train.csv", index=False)
    return tmp_path


def stage_one(run, d):
    p = run("negatives", "-N", N, "--users", "users.csv", "-n", n, "--seed", 0, "--exclude", "train.csv",
            "-o", "s1.csv", cwd=d)
    assert p.returncode == 0, p.stderr
    score_file(["s1.csv"], "sc1.csv", d)
    p = run("ranks", "s1.csv", "--input-format", "negatives", "--held-out", "users.csv", "--scores", "sc1.csv",
            "-N", N, "--exclude", "train.csv", "-o", "ranks1.csv", cwd=d)
    assert p.returncode == 0, p.stderr
    return pd.read_csv(d / "ranks1.csv", dtype={"user": str})


def test_the_whole_workflow_of_two_stages(run, world):
    d = world
    r1 = stage_one(run, d)
    assert r1.columns.tolist() == ["user", "model", "rank", "sample_size", "n_items"]
    assert (r1.sample_size == n).all() and (r1.n_items == N - H).all() and len(r1) == 2 * M
    # the ranks are the count of stage-1 negatives the model orders above the held-out item
    neg, users = pd.read_csv(d / "s1.csv"), pd.read_csv(d / "users.csv").set_index("user")["item"]
    for m in ORDER:
        want = neg.groupby("user").apply(lambda g: 1 + int((ORDER[m][g.item] < ORDER[m][users[g.name]]).sum()),
                                         include_groups=False)
        got = r1[r1.model == m].set_index("user")["rank"]
        assert (got.reindex(want.index) == want).all()
    # stage 2 for the users any model ranks first
    p = run("negatives", "--stage", 2, "--previous", "s1.csv", "--users", "users.csv", "--ranks", "ranks1.csv",
            "--threshold", 1, "--n2", 40, "-N", N, "--seed", 0, "--exclude", "train.csv", "-o", "s2.csv", cwd=d)
    assert p.returncode == 0, p.stderr
    assert "sampling-lib estimate s1.csv s2.csv --input-format negatives" in p.stderr
    s2 = pd.read_csv(d / "s2.csv", dtype={"user": str})
    need = set(r1[r1["rank"] <= 1].user)
    assert set(s2.user) == need and (s2.groupby("user").size() == 40).all()
    hist = pd.read_csv(d / "train.csv", dtype={"user": str})
    s1 = pd.read_csv(d / "s1.csv", dtype={"user": str})
    for u, g in s2.groupby("user"):
        assert not set(g.item) & (set(s1[s1.user == u].item) | set(hist[hist.user == u].item) | {users[u]})
    score_file(["s1.csv", "s2.csv"], "sc2.csv", d)
    args = ["s1.csv", "s2.csv", "--input-format", "negatives", "--held-out", "users.csv", "--scores", "sc1.csv",
            "--scores", "sc2.csv", "-N", N, "--exclude", "train.csv", "--scheme", "hypergeometric",
            "--format", "csv", "--n-boot", 30, "--quiet"]
    p = run("estimate", *args, cwd=d)
    assert p.returncode == 0, p.stderr
    got = pd.read_csv(pd.io.common.StringIO(p.stdout))
    # the library on the merged stages gives the same table
    cand = io.read_stages([d / "s1.csv", d / "s2.csv"], held_out=d / "users.csv", exclude=d / "train.csv")
    sr = io.ranks_from_negatives(cand, io.concat_tables([d / "sc1.csv", d / "sc2.csv"]))
    assert sorted(set(sr.sample_sizes["A"])) == [n, n + 40]
    sr = sr.with_n_items(pd.DataFrame({"user": sr.ranks.index, "n_items": N - H}))
    want = estimate(sr, None, None, n_boot=30, rng=0, scheme="hypergeometric")
    pd.testing.assert_series_equal(got.estimate, want.estimate, check_names=False)
    # the first model's bootstrap draws the same replicates (the CLI seeds each model's call alike)
    pd.testing.assert_series_equal(got.ci_low[:2], want.ci_low[:2], check_names=False)
    p = run("compare", *args[:-5], "--format", "json", "--n-boot", 30, "--quiet", cwd=d)
    assert p.returncode == 0, p.stderr
    cmp = pd.DataFrame(json.loads(p.stdout))
    want = compare(sr, None, None, n_boot=30, rng=0, scheme="hypergeometric")
    assert np.allclose(cmp.difference, want.difference)


@pytest.mark.parametrize("fmt", ["ncf", "elliot"])
def test_a_ladder_in_ncf_and_elliot_files(run, world, fmt):
    d = world
    stage_one(run, d)
    s1 = pd.read_csv(d / "s1.csv", dtype={"user": str})
    users = pd.read_csv(d / "users.csv", dtype={"user": str}).set_index("user")["item"]
    first = d / f"s1.{fmt}"
    io.write_stage_negatives(s1, first, fmt, held_out=users if fmt == "ncf" else None)
    extra = [] if fmt == "ncf" else ["--users", "users.csv"]
    p = run("negatives", "--stage", 2, "--previous", first.name, "--input-format", fmt, *extra, "--scores",
            "sc1.csv", "--n-max", 80, "-N", N, "--seed", 1, "--exclude", "train.csv", "-o", f"s2.{fmt}", cwd=d)
    assert p.returncode == 0, p.stderr
    lines = (d / f"s2.{fmt}").read_text().splitlines()
    heads = [ln.split("\t")[0] for ln in lines]
    if fmt == "ncf":
        assert all(h == f"({h[1:].split(',')[0]},{users[h[1:].split(',')[0]]})" for h in heads)
    else:
        assert all(h.endswith(",)") for h in heads)
    assert {len(ln.split("\t")) - 1 for ln in lines} == {n}             # the size doubles: n more items
    score_file([first.name, f"s2.{fmt}"], "sc2.csv", d, fmt=fmt)
    p = run("negatives", "--stage", 3, "--previous", first.name, f"s2.{fmt}", "--input-format", fmt, *extra,
            "--scores", "sc1.csv", "--scores", "sc2.csv", "--n-max", 80, "-N", N, "--seed", 1, "--exclude",
            "train.csv", "-o", f"s3.{fmt}", cwd=d)
    assert p.returncode == 0, p.stderr
    three = [first, d / f"s2.{fmt}", d / f"s3.{fmt}"]
    cand = io.read_stages(three, fmt, held_out=d / "users.csv" if fmt == "elliot" else None,
                          exclude=d / "train.csv")
    size = cand.groupby("user").size()
    assert set(size) <= {20, 40, 80} and (size == 80).any()
    s3_users = {ln.split("\t")[0][1:].split(",")[0] for ln in (d / f"s3.{fmt}").read_text().splitlines()}
    s2_users = set(heads_users := [h[1:].split(",")[0] for h in heads])
    assert s3_users <= s2_users and len(heads_users) == len(s2_users)
    # the ladder 20 -> 80 is complete after stage 3: stage 4 writes nothing and says why, with the estimate
    # command on the stages that exist
    score_file([first.name, f"s2.{fmt}", f"s3.{fmt}"], "sc3.csv", d, fmt=fmt)
    p = run("negatives", "--stage", 4, "--previous", *[f.name for f in three], "--input-format", fmt, *extra,
            "--scores", "sc1.csv", "--scores", "sc2.csv", "--scores", "sc3.csv", "--n-max", 80, "-N", N,
            "--seed", 1, "--exclude", "train.csv", "-o", f"s4.{fmt}", cwd=d)
    assert p.returncode == 0 and not (d / f"s4.{fmt}").exists(), p.stderr
    assert "are at --n-max 80 or at their N_u, the ladder's last rung; the design is complete" in p.stderr
    assert f"Estimate on stages 1..3: sampling-lib estimate {' '.join(f.name for f in three)}" in p.stderr


def test_a_ladder_that_grows_by_one_and_a_half(run, world):
    """--n-max with --growth 1.5: n = 20 -> 30 -> 45 for the users at rank 1 under any model (each size
    ceil(1.5 x the one before)); the merged sizes are the ladder's; --growth elsewhere is refused."""
    d = world
    r1 = stage_one(run, d)
    common = ["--users", "users.csv", "-N", N, "--seed", 1, "--exclude", "train.csv"]
    p = run("negatives", "--stage", 2, "--previous", "s1.csv", "--ranks", "ranks1.csv", "--n-max", 45,
            "--growth", 1.5, *common, "-o", "s2.csv", cwd=d)
    assert p.returncode == 0, p.stderr
    s2 = pd.read_csv(d / "s2.csv", dtype={"user": str})
    assert set(s2.user) == set(r1[r1["rank"] == 1].user) and (s2.groupby("user").size() == 10).all()
    score_file(["s1.csv", "s2.csv"], "sc2.csv", d)
    p = run("ranks", "s1.csv", "s2.csv", "--input-format", "negatives", "--held-out", "users.csv", "--scores",
            "sc1.csv", "--scores", "sc2.csv", "-N", N, "--exclude", "train.csv", "-o", "ranks2.csv", cwd=d)
    assert p.returncode == 0, p.stderr
    r2 = pd.read_csv(d / "ranks2.csv", dtype={"user": str})
    p = run("negatives", "--stage", 3, "--previous", "s1.csv", "s2.csv", "--ranks", "ranks2.csv", "--n-max", 45,
            "--growth", 1.5, *common, "-o", "s3.csv", cwd=d)
    assert p.returncode == 0, p.stderr
    s3 = pd.read_csv(d / "s3.csv", dtype={"user": str})
    on = r2[(r2["rank"] == 1) & (r2.sample_size == 30)].user
    assert set(s3.user) == set(on) and (s3.groupby("user").size() == 15).all()
    # doubling's sizes are not this ladder's: stage 3 of --n-max 45 without --growth refuses the merged sizes
    p = run("negatives", "--stage", 3, "--previous", "s1.csv", "s2.csv", "--ranks", "ranks2.csv", "--n-max", 45,
            *common, "-o", "s3b.csv", cwd=d)
    assert p.returncode == 1 and "the sizes of a ladder are [20, 40, 45]" in p.stderr, p.stderr
    p = run("negatives", "--stage", 2, "--previous", "s1.csv", "--ranks", "ranks1.csv", "--threshold", 1,
            "--n2", 10, "--growth", 1.5, *common, "-o", "s4.csv", cwd=d)
    assert p.returncode == 2 and "--growth applies to the ladder (--n-max)" in p.stderr
    p = run("negatives", "-N", N, "--users", "users.csv", "-n", n, "--growth", 1.5, "--seed", 0, "-o", "s5.csv",
            cwd=d)
    assert p.returncode == 2 and "--growth applies to a later stage" in p.stderr
    p = run("negatives", "--stage", 2, "--previous", "s1.csv", "--ranks", "ranks1.csv", "--n-max", 45,
            "--growth", 1, *common, "-o", "s6.csv", cwd=d)
    assert p.returncode == 2 and "must be a number in (1, 1024]" in p.stderr
    assert not any((d / f).exists() for f in ("s3b.csv", "s4.csv", "s5.csv", "s6.csv"))


@pytest.mark.slow
def test_plan_with_ladders_of_several_growths(run, world):
    """plan --growth 2 1.5: both families among the candidates (csv), the cheapest meeting the target chosen
    over all of them, and the printed command of a x1.5 ladder carries --growth."""
    from sampling_lib.design import candidate_designs, later_stages

    d = world
    stage_one(run, d)
    p = run("plan", "ranks1.csv", "-n", n, "--format", "csv", "--growth", 2, 1.5, "--assurance", 0.5, cwd=d)
    assert p.returncode == 0, p.stderr
    t = pd.read_csv(pd.io.common.StringIO(p.stdout))
    ladders = set(t.design[t.design.str.startswith("ladder")])
    want = {c.describe() for c in candidate_designs(N - H, n, growths=(2, 1.5)) if c.kind == "ladder"}
    assert ladders == want and any("x1.5" in x for x in ladders) and any("double" in x for x in ladders)
    per = t.groupby("design", sort=False).agg(cost=("cost", "first"), meets=("meets", "first"),
                                             chosen=("chosen", "first"))
    assert per.chosen.sum() == 1 and per[per.chosen].cost.iloc[0] == per[per.meets].cost.min()
    stages = {c.describe(): later_stages(c, n) for c in candidate_designs(N - H, n, growths=(2, 1.5))}
    assert (t.stages == t.design.map(stages)).all()
    # a target only a ladder meets here: its stage-2 command and the re-plan command carry its growth
    p = run("plan", "ranks1.csv", "-n", n, "--growth", 1.5, "--metric", "recall@10", "--assurance", 0.5,
            "--target-ratio", 1.02, cwd=d)
    assert p.returncode == 0, p.stderr
    assert "chosen: ladder 20 -> 40 (x1.5 while at rank 1)" in p.stdout
    name = "ladder 20 -> 40 x1.5"                                 # the table's short name of the design
    row = next(ln for ln in p.stdout.splitlines() if ln.startswith(name))
    assert row[len(name):].split()[0] == "2"                    # stages: 20 -> 30 -> 40
    assert "stages: rounds of scoring after the first" in " ".join(p.stdout.split())
    assert "--n-max 40 --growth 1.5 " in p.stdout and "then stage 3 the same way" in p.stdout
    assert "sampling-lib plan merged.csv -n 20 --scheme hypergeometric --growth 1.5" in p.stdout
    # with both growths the compact view keeps each family's cheapest ladder: the doubling one beside it
    p = run("plan", "ranks1.csv", "-n", n, "--growth", 2, 1.5, "--metric", "recall@10", "--assurance", 0.5,
            "--target-ratio", 1.02, cwd=d)
    assert p.returncode == 0, p.stderr
    rows = [ln for ln in p.stdout.splitlines() if ln.startswith("ladder 20 -> 40")]
    assert len(rows) == 2 and "<- chosen" in rows[0] and "x1.5" in rows[0] and "x1.5" not in rows[1], rows
    assert "per kind of design (and ladder growth)" in p.stdout
    p = run("plan", "ranks1.csv", "-n", n, "--growth", 0.9, cwd=d)
    assert p.returncode == 2 and "must be a number in (1, 1024]" in p.stderr


def test_plan_prints_the_designs_marks_the_cheapest_that_meets_the_target_and_its_command(run, world):
    from sampling_lib.design import candidate_designs, plan

    d = world
    r1 = stage_one(run, d)
    p = run("plan", "ranks1.csv", "--metric", "recall@10", "--format", "csv", cwd=d)
    assert p.returncode == 0, p.stderr
    t = pd.read_csv(pd.io.common.StringIO(p.stdout))
    assert {"model", "design", "kind", "cost", "cost_share", "halfwidth", "ratio", "meets", "chosen",
            "cost_all_models"} <= set(t.columns)
    # two models share the added items: the cost of a design is that of the union of the users they send on
    per = t.groupby("design").agg(cost=("cost_all_models", "first"), one=("cost", "max"), sum=("cost", "sum"),
                                  meets=("meets", "all"), chosen=("chosen", "first"))
    assert (per.cost >= per.one - 1e-9).all() and (per.cost <= per["sum"] - n + 1e-9).all()
    assert (per.cost > per.one + 1).any()                  # the union costs more than the largest model alone
    assert per.chosen.sum() == 1
    best = per[per.chosen].iloc[0]
    assert best.meets and best.cost == per[per.meets].cost.min()
    assert (t[t.chosen].ratio <= 1.3).all()
    assert "chosen: " + per.index[per.chosen][0] in p.stderr
    # one model: the same choice as sampling_lib.design.plan on its ranks
    p = run("plan", "ranks1.csv", "--metric", "recall@10", "--model", "A", "--target-ratio", 1.05, cwd=d)
    assert p.returncode == 0, p.stderr
    res = plan(r1[r1.model == "A"]["rank"].to_numpy(), N - H, n, metrics="recall@10", max_size=N - H,
               designs=candidate_designs(N - H, n), target_ratio=1.05)
    assert res.best is not None and res.best != candidate_designs(N - H, n)[0]     # a second stage is needed
    assert f"chosen: {res.best.describe()}" in p.stdout
    row = [ln for ln in p.stdout.splitlines() if "<- chosen" in ln]
    from sampling_lib.cli._plan import _short_name

    assert len(row) == 1 and row[0].startswith(_short_name(res.best) + " ")
    flags = {"threshold": f"--threshold {res.best.threshold} --n2 {res.best.n2}", "ladder": f"--n-max {res.best.n_max}",
             "single": f"--n2 {res.best.n - n}", "full_subset": f"--full-fraction {res.best.fraction:g}"}
    assert "sampling-lib negatives --stage 2 --previous STAGE1.csv" in p.stdout and flags[res.best.kind] in p.stdout


@pytest.mark.slow
def test_plan_with_a_budget(run, tmp_path):
    base = ("plan", "-N", 4000, "-n", 20, "--users", 2000, "--guess-recall", 0.3, "--metric", "recall@10")
    p = run(*base, "--format", "csv", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    t = pd.read_csv(pd.io.common.StringIO(p.stdout))
    chosen = t[t.chosen].iloc[0]
    cap = 0.99 * float(chosen.cost_share)
    p = run(*base, "--max-cost", f"{100 * cap:.6f}%", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "no candidate design within the budget" in p.stdout and "what the budget buys" in p.stdout
    rows = [ln for ln in p.stdout.splitlines() if "<- chosen" in ln]
    assert len(rows) == 1 and "over budget" not in rows[0]
    assert chosen.design not in rows[0]
    p = run(*base, "--max-cost", cap, "--format", "csv", cwd=tmp_path)
    t2 = pd.read_csv(pd.io.common.StringIO(p.stdout))
    c2 = t2[t2.chosen].iloc[0]
    assert c2.cost_share <= cap and not c2.meets and (t2.within_budget == (t2.cost_share <= cap)).all()
    one_line_error(run(*base, "--max-cost", "0", cwd=tmp_path), 2, "--max-cost")
    one_line_error(run(*base, "--max-cost", "150%", cwd=tmp_path), 2, "--max-cost")


def test_plan_without_a_pilot_and_its_bad_command_lines(run, tmp_path):
    p = run("plan", "-N", 400, "-n", 20, "--users", 300, "--guess-recall", 0.3, "--metric", "recall@10",
            "--target-halfwidth", 0.2, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "target: interval half-width <= 0.2" in p.stdout and "chosen: single n = 20" in p.stdout
    assert "no second stage needed" in p.stdout
    one_line_error(run("plan", "-N", 400, "-n", 20, cwd=tmp_path), 2, "needs -N, -n, --users and --guess-recall")
    one_line_error(run("plan", "-N", 400, "-n", 20, "--users", 30, "--guess-recall", 0.3, "--target-ratio", 2,
                       "--target-halfwidth", 0.1, cwd=tmp_path), 2, "one target")
    (tmp_path / "mixed.csv").write_text("user,rank,sample_size\na,1,20\nb,3,40\n")
    one_line_error(run("plan", "mixed.csv", "-N", 400, "-n", 30, cwd=tmp_path), 1,
                   "-n 30 is the first stage's size, but some users have sets of 20")


@pytest.mark.slow
def test_plan_on_merged_ranks_of_a_design_run_in_part(run, tmp_path):
    """A pilot with several set sizes (the merged ranks after a ladder's first rungs) is re-planning input:
    the prior is fitted on the per-user sizes, the candidates start from the smallest size (issue 29)."""
    from sampling_lib.design import candidate_designs, plan
    from sampling_lib.sampling import Design, sample_design

    g = np.random.default_rng(3)
    NN, M, n1 = 3000, 600, 30
    R = np.minimum(NN, np.floor(np.exp(g.exponential(2.0, M))).astype(np.int64) + 1)
    r, s = sample_design(R, NN, Design("ladder", n1, n_max=240), rng=4)
    assert np.unique(s).size > 1
    pd.DataFrame({"user": np.arange(M), "rank": r, "sample_size": s}).to_csv(tmp_path / "merged.csv", index=False)
    p = run("plan", "merged.csv", "-N", NN, "--metric", "recall@10", "--format", "csv", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    t = pd.read_csv(pd.io.common.StringIO(p.stdout))
    res = plan(r, NN, n1, metrics="recall@10", sample_sizes=s, designs=candidate_designs(NN, n1), max_size=NN)
    np.testing.assert_allclose(t.halfwidth.to_numpy(), res.table.halfwidth.to_numpy(), rtol=1e-9)
    assert t[t.chosen].design.iloc[0] == res.best.describe()


@pytest.mark.slow
def test_merged_ranks_of_stage_files_carry_the_first_stage_and_plan_pairs_the_models_with_it(run, world):
    """``ranks`` on stage files writes each user's rank within the first stage's set (first_rank): the
    ranks of the stage-1 file alone. ``plan`` on those merged ranks prices several models' union with their
    first-stage pairs (design.plan's first_ranks); without the column, as independent models; a first_rank
    above the merged rank is a one-line error naming the line."""
    from sampling_lib.design import candidate_designs, plan

    d = world
    r1 = stage_one(run, d)
    files = ["s1.csv"]
    for k in (2, 3):
        p = run("negatives", "--stage", k, "--previous", *files, "--users", "users.csv",
                *[a for j in range(1, k) for a in ("--scores", f"sc{j}.csv")], "--n-max", 80, "-N", N, "--seed", k, "--exclude",
                "train.csv", "-o", f"s{k}.csv", cwd=d)
        assert p.returncode == 0, p.stderr
        files.append(f"s{k}.csv")
        score_file(files, f"sc{k}.csv", d)
    p = run("ranks", *files, "--input-format", "negatives", "--held-out", "users.csv",
            *[a for j in (1, 2, 3) for a in ("--scores", f"sc{j}.csv")], "-N", N, "--exclude", "train.csv", "-o", "merged.csv", cwd=d)
    assert p.returncode == 0, p.stderr
    merged = pd.read_csv(d / "merged.csv", dtype={"user": str})
    assert merged.columns.tolist() == ["user", "model", "rank", "sample_size", "n_items", "first_rank"]
    assert merged.sample_size.nunique() > 1
    first = r1.set_index(["user", "model"])["rank"]
    got = merged.set_index(["user", "model"])
    assert (got.first_rank == first.reindex(got.index)).all() and (got.first_rank <= got["rank"]).all()
    # plan pairs the two models' first stages with it
    base = ("plan", "merged.csv", "--metric", "recall@10", "-n", n)
    p = run(*base, "--format", "csv", cwd=d)
    assert p.returncode == 0, p.stderr
    t = pd.read_csv(pd.io.common.StringIO(p.stdout))
    ranks = {m: got.xs(m, level="model")["rank"].to_numpy() for m in ORDER}
    sizes = {m: got.xs(m, level="model").sample_size.to_numpy() for m in ORDER}
    firsts = {m: got.xs(m, level="model").first_rank.to_numpy() for m in ORDER}
    kw = dict(metrics="recall@10", designs=candidate_designs(N - H, n), max_size=N - H, sample_sizes=sizes)
    want = plan(ranks, N - H, n, first_ranks=firsts, **kw).table
    np.testing.assert_allclose(t.cost_all_models, want.cost_all_models, rtol=1e-9)
    indep = plan(ranks, N - H, n, **kw).table
    assert not np.allclose(t.cost_all_models, indep.cost_all_models)
    text = run(*base, cwd=d).stdout
    assert "the models' dependence from the pilot's first stage" in " ".join(text.split())
    merged.drop(columns="first_rank").to_csv(d / "merged_no_first.csv", index=False)
    p = run("plan", "merged_no_first.csv", "--metric", "recall@10", "-n", n, "--format", "csv", cwd=d)
    np.testing.assert_allclose(pd.read_csv(pd.io.common.StringIO(p.stdout)).cost_all_models, indep.cost_all_models,
                               rtol=1e-9)
    text = " ".join(run("plan", "merged_no_first.csv", "--metric", "recall@10", "-n", n, cwd=d).stdout.split())
    assert "the models taken as independent" in text and "first_rank column" in text
    # estimate reads the merged ranks as before (first_rank is not information about R given the merged rank)
    a = run("estimate", "merged.csv", "--format", "csv", "--n-boot", 20, "--quiet", cwd=d)
    b = run("estimate", "merged_no_first.csv", "--format", "csv", "--n-boot", 20, "--quiet", cwd=d)
    assert a.returncode == 0 and a.stdout == b.stdout, a.stderr
    bad = merged.copy()
    k = int(np.flatnonzero(bad["rank"].to_numpy() < bad.sample_size.to_numpy())[0])
    bad.loc[k, "first_rank"] = bad.loc[k, "rank"] + 1
    bad.to_csv(d / "bad.csv", index=False)
    one_line_error(run("plan", "bad.csv", "-n", n, cwd=d), 1,
                   rf"bad.csv, line {k + 2} has first_rank {bad.loc[k, 'rank'] + 1} and rank {bad.loc[k, 'rank']}")


# slow (7 s): the whole ladder workflow from printed commands; test_the_whole_workflow_of_two_stages keeps
# the quick path through the same commands
@pytest.mark.slow
def test_the_commands_plan_prints_run_as_printed(run, tmp_path):
    """A ladder chosen far below resolution: plan prints the stage-2 command and the re-planning commands
    (ranks of the first rungs' stage files, plan on the merged ranks). With the placeholders filled in,
    each runs as printed (the re-planning plan once failed on its own -n), and the re-plan continues the
    ladder at the next stage."""
    import re
    import shlex

    g = np.random.default_rng(7)
    NN, MM, n1, HH = 3000, 400, 10, 5
    pos = {m: g.permutation(NN) for m in ("A", "B")}          # each item's place in the model's order
    top = np.minimum(g.geometric(0.01, MM), NN - 1)
    held = np.argsort(pos["A"])[top]                           # held-out items near A's top
    users = [f"u{j}" for j in range(MM)]
    hist = np.array([g.choice(np.setdiff1d(np.arange(NN), [h]), HH, replace=False) for h in held])
    pd.DataFrame({"user": users, "item": held}).to_csv(tmp_path / "users.csv", index=False)
    pd.DataFrame({"user": np.repeat(users, HH), "item": hist.ravel()}).to_csv(tmp_path / "train.csv", index=False)

    def score(files, out):
        cand = io.read_stages([tmp_path / f for f in files], held_out=tmp_path / "users.csv")
        items = cand["item"].astype(int).to_numpy()
        pd.concat([pd.DataFrame({"user": cand.user, "model": m, "item": items, "score": -pos[m][items].astype(float)})
                   for m in pos]).drop_duplicates(["user", "model", "item"]).to_csv(tmp_path / out, index=False)

    fill = {"STAGE1.csv": "s1.csv", "USERS.csv": "users.csv", "N_ITEMS": str(NN), "TRAIN.csv": "train.csv"}
    fill.update({f"STAGE{k}.csv": f"s{k}.csv" for k in range(2, 9)})
    fill.update({f"SCORES{k}.csv": f"sc{k}.csv" for k in range(1, 9)})

    def printed(text, start):
        lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(start)]
        assert lines, text
        return [fill.get(a, a) for a in shlex.split(lines[0])[1:]]

    assert run("negatives", "-N", NN, "--users", "users.csv", "-n", n1, "--seed", 0, "--exclude", "train.csv",
               "-o", "s1.csv", cwd=tmp_path).returncode == 0
    score(["s1.csv"], "sc1.csv")
    assert run("ranks", "s1.csv", "--input-format", "negatives", "--held-out", "users.csv", "--scores", "sc1.csv",
               "-N", NN, "--exclude", "train.csv", "-o", "ranks1.csv", cwd=tmp_path).returncode == 0
    p = run("plan", "ranks1.csv", "--metric", "recall@10", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    text = p.stdout
    assert "Re-plan after the first rungs" in " ".join(text.split()), text
    stage2 = printed(text, "sampling-lib negatives --stage 2")
    ranks_cmd, plan_cmd = printed(text, "sampling-lib ranks"), printed(text, "sampling-lib plan merged.csv")
    k = int(re.search(r"sampling-lib ranks ((?:STAGE\d\.csv )+)", text).group(1).count("STAGE"))
    p = run(*stage2, "--exclude", "train.csv", cwd=tmp_path)        # the history: as the advice says
    assert p.returncode == 0, p.stderr
    score(["s1.csv", "s2.csv"], "sc2.csv")
    n_max = stage2[stage2.index("--n-max") + 1]
    for j in range(3, k + 1):          # "then stages 3.. the same way"
        prev = [f"s{i}.csv" for i in range(1, j)]
        p = run("negatives", "--stage", j, "--previous", *prev, "--users", "users.csv",
                *[a for i in range(1, j) for a in ("--scores", f"sc{i}.csv")], "--n-max", n_max, "-N", NN,
                "--seed", 0, "--exclude", "train.csv", "-o", f"s{j}.csv", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        score(prev + [f"s{j}.csv"], f"sc{j}.csv")
    p = run(*ranks_cmd, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = run(*plan_cmd, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "the models' dependence from the pilot's first stage" in " ".join(p.stdout.split())
    # the stages run are the first rungs of any ladder from n: a longer ladder continues at stage k + 1
    from sampling_lib.design import first_rungs

    # the rungs of the advice: the chosen ladder's own up to n_max / 8, at least n -> 4n
    assert k == len(first_rungs(n1, 2.0, int(n_max), n_max=int(n_max))) >= 3, (k, n_max)
    assert re.search(r"chosen: ladder \d+ -> (\d+)", p.stdout), p.stdout
    assert ("--stage 4 --previous STAGE1.csv STAGE2.csv STAGE3.csv --users USERS.csv --ranks merged.csv"
            in p.stdout), p.stdout


def test_replan_on_merged_ranks_says_to_run_further_rungs_when_the_ladder_reaches_far_beyond_them():
    """Merged ranks re-planned: a chosen ladder more than first_rungs' reach above the largest set run gets
    the stages to run before re-planning again (those first_rungs adds: 4..7 for 10 -> 8,960 after 10 -> 40);
    none once they are run, for a ladder within the reach, or for stages the ladder does not continue."""
    from argparse import Namespace

    from sampling_lib.cli._plan import _replan_note
    from sampling_lib.design import first_rungs

    d = Design("ladder", 10, n_max=8960)
    want = first_rungs(10, 2.0, 8960, n_max=8960)
    text = " ".join(_replan_note(None, d, Namespace(), 41_000, 10, True, np.array([10, 20, 40])).split())
    assert f"run its stages 4..{want.size} (to {want[-1]:,}," in text and "224x the largest set run (40)" in text
    assert _replan_note(None, d, Namespace(), 41_000, 10, True, want) == ""
    assert _replan_note(None, Design("ladder", 10, n_max=320), Namespace(), 41_000, 10, True,
                        np.array([10, 20, 40])) == ""
    assert _replan_note(None, d, Namespace(), 41_000, 10, True, np.array([10, 30])) == ""
    text = " ".join(_replan_note(None, d, Namespace(), 41_000, 10, True, np.array([10, 20, 40, 80, 160, 320])).split())
    assert "run its stage 7 (to 640," in text


def test_plan_advice_on_merged_ranks_continues_the_ladder_already_run():
    """A pilot of merged ranks whose sets are the first rungs of the chosen ladder: the advice writes the
    next stage (its number, the earlier stage files); a ladder the stages already complete needs no more
    stages; a design the stages do not continue starts after stage 1, and the advice says so."""
    from argparse import Namespace

    from sampling_lib.cli._plan import _advice as advice

    def _advice(*a):          # the text as read, lines joined (commands continue with " \", prose wraps)
        return " ".join(re.sub(r" \\\n", " ", advice(*a)).split())

    args = Namespace(max_cost=None, pilot="merged.csv", n_items=1000, seed=0, scheme=None)
    run_sizes = np.array([20, 40, 80])
    text = _advice(Design("ladder", 20, n_max=640), args, 1000, 20, "t", 2, True, run_sizes)
    assert ("sampling-lib negatives --stage 4 --previous STAGE1.csv STAGE2.csv STAGE3.csv --users USERS.csv "
            "--ranks merged.csv --n-max 640") in text and "then stages 5..6 the same way" in text
    assert "the stages already run (merged.csv) complete it" in _advice(
        Design("ladder", 20, n_max=80), args, 1000, 20, "t", 2, True, run_sizes)
    text = _advice(Design("threshold", 20, threshold=1, n2=100), args, 1000, 20, "t", 2, True, run_sizes)
    assert "--stage 2 --previous STAGE1.csv --users USERS.csv --ranks RANKS1.csv --threshold 1 --n2 100" in text
    assert "does not continue the stages already run" in " ".join(text.split())
    # a first-stage pilot: stage 2, as before
    text = _advice(Design("ladder", 20, n_max=80), args, 1000, 20, "t", 2, True, None)
    assert "--stage 2 --previous STAGE1.csv --users USERS.csv --ranks merged.csv --n-max 80" in text


@pytest.mark.parametrize("extra, code, match", [
    (["--stage", 2, "--users", "users.csv", "--ranks", "ranks1.csv", "--n-max", 80], 2, "stages 1..1 in --previous"),
    (["--stage", 2, "--previous", "s1.csv", "--users", "users.csv", "--ranks", "ranks1.csv"], 2, "one design"),
    (["--stage", 2, "--previous", "s1.csv", "--users", "users.csv", "--ranks", "ranks1.csv", "--n-max", 80,
      "--n2", 10], 2, "one design"),
    (["--stage", 2, "--previous", "s1.csv", "--users", "users.csv", "--ranks", "ranks1.csv",
      "--full-fraction", 0.1], 2, "--ranks does not apply"),
    (["--stage", 3, "--previous", "s1.csv", "s1.csv", "--users", "users.csv", "--ranks", "ranks1.csv",
      "--threshold", 1, "--n2", 5], 2, "continues a ladder only"),
    (["--previous", "s1.csv", "--users", "users.csv", "-n", 20], 2, "--previous applies to a later stage"),
    (["--stage", 2, "--previous", "s1.csv", "--users", "users.csv", "--n-max", 80], 2, "--ranks RANKS.csv or --scores"),
    (["--stage", 2, "--previous", "s1.csv", "--users", "users.csv", "--ranks", "ranks1.csv", "--n-max", 80,
      "--item-weights", "w.csv"], 1, "popularity-sampled negatives is not supported: .*biases"),
    (["--stage", 2, "--previous", "s1.csv", "--users", "users.csv", "--ranks", "ranks1.csv", "--n-max", 80,
      "-o", "s1.csv"], 1, "refusing to overwrite an input"),
])
def test_negatives_stage_bad_command_lines(run, world, extra, code, match):
    d = world
    stage_one(run, d)
    base = ["negatives", "-N", N, "--seed", 0]
    one_line_error(run(*base, *extra, cwd=d), code, match)


def test_negatives_stage_bad_files_name_the_file_and_line(run, world):
    d = world
    r1 = stage_one(run, d)
    base = ["negatives", "--stage", 2, "--previous", "s1.csv", "--users", "users.csv", "--n-max", 80, "-N", N,
            "--seed", 0]
    # a rank above the user's merged set
    bad = r1.copy()
    bad.loc[0, "rank"] = 21
    bad.to_csv(d / "bad_ranks.csv", index=False)
    one_line_error(run(*base, "--ranks", "bad_ranks.csv", cwd=d), 1, r"bad_ranks.csv, line 2 has rank 21 > sample_size 20")
    bad = r1.drop(columns="sample_size")
    bad.loc[0, "rank"] = 21
    bad.to_csv(d / "bad_ranks.csv", index=False)
    one_line_error(run(*base, "--ranks", "bad_ranks.csv", cwd=d), 1, r"rank 21 under model 'A', above the 20 items")
    # a user without a rank of one model
    r1.iloc[1:].to_csv(d / "short.csv", index=False)
    one_line_error(run(*base, "--ranks", "short.csv", cwd=d), 1, r"user 'u0' has no rank of model 'A'")
    # a stage-1 file whose negative is in the history given now
    hist = pd.read_csv(d / "train.csv")
    s1 = pd.read_csv(d / "s1.csv")
    pd.concat([hist, s1.iloc[[5]]]).to_csv(d / "train2.csv", index=False)
    one_line_error(run(*base, "--ranks", "ranks1.csv", "--exclude", "train2.csv", cwd=d), 1,
                   rf"s1.csv, line 7: negative '{s1.item[5]}' of user 'u0' is in its history")
    # item ids outside 0..N-1
    one_line_error(run(*base[:-4], "-N", 50, "--seed", 0, "--ranks", "ranks1.csv", cwd=d), 1,
                   r"s1.csv, line \d+: item '\d+' is not an item id in 0..N-1=49")
    # duplicated stage-1 negatives without --replace
    pd.concat([s1.iloc[:1], s1]).to_csv(d / "dup.csv", index=False)
    base_dup = [b if b != "s1.csv" else "dup.csv" for b in base]
    one_line_error(run(*base_dup, "--scores", "sc1.csv", cwd=d), 1, "is listed twice|lists negative .* twice")


def test_estimate_on_stages_reports_bad_stage_files_in_one_line(run, world):
    d = world
    stage_one(run, d)
    s1 = pd.read_csv(d / "s1.csv")
    common = ["--input-format", "negatives", "--held-out", "users.csv", "--scores", "sc1.csv", "--scheme",
              "hypergeometric", "-N", N, "--quiet"]
    pd.DataFrame({"user": ["u0"], "item": [s1.item[1]]}).to_csv(d / "again.csv", index=False)
    one_line_error(run("estimate", "s1.csv", "again.csv", *common, cwd=d), 1,
                   rf"again.csv, line 2: negative '{s1.item[1]}' of user 'u0' is already a negative of stage 1 "
                   r"\(s1.csv, line 3\)")
    pd.DataFrame({"user": ["nobody"], "item": [1]}).to_csv(d / "stray.csv", index=False)
    one_line_error(run("estimate", "s1.csv", "stray.csv", *common, cwd=d), 1,
                   r"stray.csv, line 2: user 'nobody' is not a user of the first stage")
    held = pd.read_csv(d / "users.csv")
    pd.DataFrame({"user": ["u0"], "item": [held.item[0]]}).to_csv(d / "held.csv", index=False)
    one_line_error(run("estimate", "s1.csv", "held.csv", *common, cwd=d), 1,
                   r"held.csv, line 2: negative '\d+' of user 'u0' is its held-out item")
    # a merged set above N_u: -N and the history
    hist = pd.read_csv(d / "train.csv", dtype={"user": str})
    taken = set(s1[s1.user == "u0"].item) | set(hist[hist.user == "u0"].item) | {held.item[0]}
    fill = pd.DataFrame({"user": "u0", "item": [i for i in range(N) if i not in taken]})
    fill.to_csv(d / "fill.csv", index=False)
    score_file(["s1.csv", "fill.csv"], "scfill.csv", d)
    cmd = ["estimate", "s1.csv", "fill.csv", "--input-format", "negatives", "--held-out", "users.csv", "--scores",
           "scfill.csv", "--scheme", "hypergeometric", "-N", 200, "--quiet", "--exclude", "train.csv"]
    one_line_error(run(*cmd, cwd=d), 1, rf"fill.csv, line {len(fill) + 1}: user 'u0' has {N - H} candidates over "
                                        rf"the stages .* more than its N_u = {200 - H}")
    # a candidate the scores miss: the error names the stage file and line that listed it
    pd.DataFrame({"user": ["u0", "u0"], "item": [i for i in range(N) if i not in taken][:2]}).to_csv(
        d / "two.csv", index=False)
    score_file(["s1.csv", "two.csv"], "sctwo.csv", d)
    sc = pd.read_csv(d / "sctwo.csv")
    sc[~((sc.model == "B") & (sc["item"] == int(pd.read_csv(d / "two.csv").item[1])))].to_csv(d / "sctwo.csv",
                                                                                             index=False)
    cmd = ["estimate", "s1.csv", "two.csv", "--input-format", "negatives", "--held-out", "users.csv", "--scores",
           "sctwo.csv", "--scheme", "hypergeometric", "-N", N, "--quiet"]
    one_line_error(run(*cmd, cwd=d), 1, r"no score of model 'B' for user 'u0', item '\d+' \(two.csv, line 3\)")


def test_ranks_command_refuses_counts_and_popularity_tables(run, tmp_path):
    (tmp_path / "c.csv").write_text("rank,count\n1,3\n2,4\n")
    one_line_error(run("ranks", "c.csv", "-n", 10, cwd=tmp_path), 1, "counts table already")
    (tmp_path / "p.csv").write_text("user,item,score,label,q,n_candidates\na,1,0.5,1,,9\na,2,0.1,0,0.1,9\n")
    one_line_error(run("ranks", "p.csv", cwd=tmp_path), 1, "popularity-sampled")


@pytest.mark.slow
def test_plan_says_how_to_re_plan_when_its_first_stage_is_below_resolution(run, tmp_path):
    """A ladder chosen on a first stage below resolution (K < w): the note on the extrapolated half-widths
    and the commands that re-plan on the merged ranks; none when the first stage resolves K, and none on
    merged ranks (already re-planning)."""
    base = ("--users", 2000, "--guess-recall", 0.3, "--metric", "recall@10", "--format", "csv")
    p = run("plan", "-N", 4000, "-n", 20, *base, cwd=tmp_path)          # w = 210 > 10
    assert p.returncode == 0, p.stderr
    t = pd.read_csv(pd.io.common.StringIO(p.stdout))
    assert t[t.chosen].kind.iloc[0] == "ladder"
    note = " ".join(p.stderr.split())                   # the note is wrapped
    assert "below resolution for recall@10 (w = (N - 1)/(n - 1) = 210 > K)" in note
    assert "sampling-lib plan merged.csv -n 20 -N 4000" in p.stderr
    # a guess has no first stage: the note says the plan rests on the guess (it spoke of "the first stage")
    assert "rests on a guessed Recall@10" in note and "the first stage is below" not in note
    p = run("plan", "-N", 4000, "-n", 20, *base[:-2], cwd=tmp_path)     # the table view prints it too
    assert "sampling-lib plan merged.csv -n 20 -N 4000" in p.stdout
    p = run("plan", "-N", 1000, "-n", 40, "--users", 3000, "--guess-recall", 0.3, "--metric", "recall@50",
            "--target-ratio", 1.05, "--assurance", 0.5, "--format", "csv", cwd=tmp_path)   # a ladder, w = 25.6 < 50
    assert p.returncode == 0, p.stderr
    t = pd.read_csv(pd.io.common.StringIO(p.stdout))
    assert t[t.chosen].kind.iloc[0] == "ladder" and "chosen: ladder" in p.stderr
    assert "below resolution" not in p.stderr
    from sampling_lib.sampling import Design, sample_design, sample_ranks

    g = np.random.default_rng(3)
    R = np.minimum(4000, np.floor(np.exp(g.exponential(2.0, 1000))).astype(np.int64) + 1)
    pd.DataFrame({"user": np.arange(R.size), "rank": sample_ranks(R, 4000, 20, rng=5)}).to_csv(
        tmp_path / "pilot.csv", index=False)
    p = run("plan", "pilot.csv", "-N", 4000, "-n", 20, "--metric", "recall@10", "--assurance", 0.5, "--format", "csv",
            cwd=tmp_path)
    assert pd.read_csv(pd.io.common.StringIO(p.stdout)).query("chosen").kind.iloc[0] == "ladder"
    note = " ".join(p.stderr.split())
    assert "the first stage is below resolution for recall@10" in note and "guess" not in note
    r, s = sample_design(R, 4000, Design("ladder", 20, n_max=80), rng=4)
    pd.DataFrame({"user": np.arange(R.size), "rank": r, "sample_size": s}).to_csv(tmp_path / "merged.csv", index=False)
    p = run("plan", "merged.csv", "-N", 4000, "--metric", "recall@10", "--format", "csv", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "below resolution" not in p.stderr


@pytest.mark.slow
def test_plan_commands_draw_and_read_the_stages_as_its_scheme_says(run, tmp_path):
    """--scheme given: the printed commands draw the next stage (--replace / --no-replace) and read the merged
    stages (--scheme) that way, and the re-plan keeps it; not given, they draw distinct negatives (the default
    of `negatives`) and read them so. (Before, a with-replacement plan printed a ranks command that read the
    stages as drawn without replacement.)"""
    base = ("plan", "-N", 2000, "-n", 10, "--users", 1000, "--guess-recall", 0.3, "--metric", "recall@10")
    for scheme, draw in ((None, None), ("binomial", "--replace"), ("hypergeometric", "--no-replace")):
        p = run(*base, *(("--scheme", scheme) if scheme else ()), cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        lines = [ln.strip() for ln in p.stdout.splitlines() if ln.strip().startswith("sampling-lib ")]
        neg = [ln for ln in lines if ln.startswith("sampling-lib negatives")]
        ranks = [ln for ln in lines if ln.startswith("sampling-lib ranks")]
        again = [ln for ln in lines if ln.startswith("sampling-lib plan")]
        assert len(neg) == len(ranks) == len(again) == 1, lines
        assert ("--replace" in neg[0].split()) == (draw == "--replace")
        assert ("--no-replace" in neg[0].split()) == (draw == "--no-replace")
        assert f"--scheme {scheme or 'hypergeometric'} " in ranks[0]
        # the re-plan reads the merged ranks with the kernel of the draws (distinct by default): before, without
        # --scheme, it fitted the binomial kernel to the distinct negatives the printed commands draw
        assert again[0].endswith(f"--scheme {scheme or 'hypergeometric'}")


@pytest.mark.slow
def test_plan_assurance_on_the_command_line(run, tmp_path):
    """--assurance reaches plan: the header states it, the legend gives each metric's margin, the csv's
    margin column is assurance_margin's, a higher assurance never chooses a cheaper design, and a value
    outside [0.5, 1) is a one-line error naming the option."""
    import re
    from io import StringIO

    from sampling_lib.design import assurance_margin

    base = ("plan", "-N", 2000, "-n", 10, "--users", 1000, "--guess-recall", 0.3)
    costs = {}
    for a in (0.5, 0.9, 0.99):
        out = run(*base, "--assurance", a, cwd=tmp_path).stdout
        text = " ".join(out.split())
        assert f"(assurance {a:g})" in text
        margins = assurance_margin(["recall@10", "ndcg@10"], a)
        assert f"x{margins[0]:.3f} for recall@10, x{margins[1]:.3f} for ndcg@10" in text
        assert re.search(r"chosen: (.+?) write its", text) is not None and out.count("<- chosen") == 1, out
        table = pd.read_csv(StringIO(run(*base, "--assurance", a, "--format", "csv", cwd=tmp_path).stdout))
        np.testing.assert_allclose(table.margin.to_numpy(), np.tile(margins, len(table) // 2), rtol=1e-12)
        costs[a] = float(table[table.chosen].cost.iloc[0])
    assert costs[0.5] <= costs[0.9] <= costs[0.99]
    # --wide marks the designs predicted under the target but not by the margin, and only those
    wide = run(*base, "--assurance", 0.99, "--wide", cwd=tmp_path).stdout
    per = table.groupby("design", sort=False).agg(ratio=("ratio", "max"), meets=("meets", "first"))
    near = per[(per.ratio <= 1.3) & ~per.meets]
    assert len(near) >= 1
    assert sum(ln.rstrip().endswith("in margin") for ln in wide.splitlines()) == len(near)
    assert sum(ln.rstrip().endswith("meets") for ln in wide.splitlines()) == int(per.meets.sum()) - 1
    one_line_error(run(*base, "--assurance", 1.0, cwd=tmp_path), 2, r"--assurance.*\[0\.5, 1\)")


def test_plan_on_a_pilot_with_per_user_n_items_does_not_print_the_median_as_the_catalogue(run, tmp_path):
    """-N of the printed negatives / ranks commands is the catalogue (item ids 0..N-1); a pilot with an
    n_items column gives plan the median N_u, which is not it, so the commands show a placeholder."""
    g = np.random.default_rng(5)
    M = 1500
    Nu = g.integers(3000, 3900, M)
    R = np.minimum(Nu, np.floor(np.exp(g.exponential(2.0, M))).astype(np.int64) + 1)
    from sampling_lib.sampling import sample_ranks
    pd.DataFrame({"user": np.arange(M), "rank": sample_ranks(R, Nu, 20, rng=6), "n_items": Nu}).to_csv(
        tmp_path / "pilot.csv", index=False)
    p = run("plan", "pilot.csv", "-n", 20, "--metric", "recall@10", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    cmds = [ln for ln in p.stdout.splitlines() if ln.strip().startswith(("sampling-lib negatives", "sampling-lib ranks"))]
    assert cmds and all("-N N_ITEMS" in c for c in cmds)
    assert f"-N {int(np.median(Nu))}" not in p.stdout
    assert "the catalogue, not the median N_u" in p.stdout
    assert p.stdout.startswith(f"N = {int(np.median(Nu)):,} (the median N_u of the pilot's n_items column), n = 20")


def test_a_catalogue_with_any_ids_draws_the_same_design_as_its_positions(run, world):
    """--items ITEMS.csv: a framework's own item ids (gaps, text). The draws are those of -N on the positions,
    written as the catalogue's ids: the same files up to the mapping, at stage 1 and at a later stage."""
    d = world
    stage_one(run, d)                                   # -N: s1.csv, sc1.csv, ranks1.csv on ids 0..N-1
    cat = np.array([f"i{7 * j + 3}" for j in np.random.default_rng(5).permutation(N)], dtype=object)
    pd.DataFrame({"item": cat}).to_csv(d / "items.csv", index=False)
    to_id = lambda t: t.assign(item=cat[t["item"].to_numpy()])      # noqa: E731
    to_id(pd.read_csv(d / "users.csv")).to_csv(d / "users_c.csv", index=False)
    to_id(pd.read_csv(d / "train.csv")).to_csv(d / "train_c.csv", index=False)
    p = run("negatives", "--items", "items.csv", "--users", "users_c.csv", "-n", n, "--seed", 0, "--exclude",
            "train_c.csv", "-o", "c1.csv", cwd=d)
    assert p.returncode == 0, p.stderr
    s1, c1 = pd.read_csv(d / "s1.csv"), pd.read_csv(d / "c1.csv")
    pd.testing.assert_frame_equal(c1, to_id(s1))
    # stage 2 of a ladder from the same ranks, in the catalogue's ids
    p = run("negatives", "--stage", 2, "--previous", "s1.csv", "--users", "users.csv", "--ranks", "ranks1.csv",
            "--n-max", 80, "-N", N, "--seed", 0, "--exclude", "train.csv", "-o", "s2.csv", cwd=d)
    assert p.returncode == 0, p.stderr
    p = run("negatives", "--stage", 2, "--previous", "c1.csv", "--users", "users_c.csv", "--ranks", "ranks1.csv",
            "--n-max", 80, "--items", "items.csv", "--seed", 0, "--exclude", "train_c.csv", "-o", "c2.csv", cwd=d)
    assert p.returncode == 0, p.stderr
    assert f"-N {N} " in p.stderr                       # the estimate command: N is the catalogue's size
    pd.testing.assert_frame_equal(pd.read_csv(d / "c2.csv"), to_id(pd.read_csv(d / "s2.csv")))
    # -N that disagrees, an id outside the catalogue, a catalogue listing an item twice
    one_line_error(run("negatives", "--items", "items.csv", "-N", N + 1, "--users", "users_c.csv", "-n", n,
                       "--seed", 0, cwd=d), 1, rf"-N {N + 1} disagrees with --items items.csv, which lists {N}")
    one_line_error(run("negatives", "--items", "items.csv", "--users", "users.csv", "-n", n, "--seed", 0, cwd=d),
                   1, r"users.csv, line 2: held-out item '\d+' is not an item of --items items.csv")
    one_line_error(run("negatives", "--stage", 2, "--previous", "s1.csv", "--users", "users_c.csv", "--ranks",
                       "ranks1.csv", "--n-max", 80, "--items", "items.csv", "--seed", 0, cwd=d),
                   1, r"s1.csv, line \d+: item '\d+' is not an item of --items items.csv")
    one_line_error(run("negatives", "--items", "items.csv", "--users", "users_c.csv", "-n", n, "--seed", 0,
                       "--exclude", "train.csv", cwd=d), 1, r"train.csv, line 2: excluded item '\d+' is not an item")
    pd.DataFrame({"item": np.r_[cat, cat[:1]]}).to_csv(d / "dup_items.csv", index=False)
    one_line_error(run("negatives", "--items", "dup_items.csv", "--users", "users_c.csv", "-n", n, "--seed", 0,
                       cwd=d), 1, rf"dup_items.csv, line {N + 2}: item '{cat[0]}' is listed twice")
    one_line_error(run("negatives", "--users", "users_c.csv", "-n", n, "--seed", 0, cwd=d), 2,
                   r"give the catalogue: -N N .* or --items ITEMS.csv")


@pytest.mark.parametrize("fmt", ["ncf", "elliot"])
def test_stage_one_written_in_a_frameworks_format_holds_the_same_draws(run, world, fmt):
    """negatives --input-format ncf|elliot at stage 1: the draws of the CSV (same seed), in the framework's
    lines, which read_stages reads back to the same candidates."""
    d = world
    args = ["negatives", "-N", N, "--users", "users.csv", "-n", n, "--seed", 0, "--exclude", "train.csv"]
    assert run(*args, "-o", "s1.csv", cwd=d).returncode == 0
    p = run(*args, "--input-format", fmt, "-o", f"s1.{fmt}", cwd=d)
    assert p.returncode == 0, p.stderr
    users = pd.read_csv(d / "users.csv", dtype={"user": str}).set_index("user")["item"]
    a = io.read_stages([d / "s1.csv"], "negatives", held_out=d / "users.csv")
    b = io.read_stages([d / f"s1.{fmt}"], fmt, held_out=None)
    cols = ["user", "item", "label"]
    pd.testing.assert_frame_equal(a[cols].reset_index(drop=True), b[cols].reset_index(drop=True))
    heads = [ln.split("\t")[0] for ln in (d / f"s1.{fmt}").read_text().splitlines()]
    assert heads == [f"({u},{users[u]})" for u in users.index]
    pd.DataFrame({"user": users.index}).to_csv(d / "bare.csv", index=False)
    one_line_error(run(*[a if a != "users.csv" else "bare.csv" for a in args], "--input-format", "ncf", cwd=d),
                   1, "an NCF file names each user's held-out item")


def test_plan_of_several_models_costs_the_union_and_budgets_by_it(run, world):
    """The cost plan prints for two models is design.shared_cost on the pilot's paired ranks with the
    models' own fitted priors, and --max-cost judges designs by it (a budget between the largest model's
    cost and the union's puts the design over budget)."""
    from sampling_lib.design import Design, candidate_designs, plan, shared_cost
    d = world
    r1 = stage_one(run, d)
    p = run("plan", "ranks1.csv", "--metric", "recall@10", "--format", "csv", cwd=d)
    assert p.returncode == 0, p.stderr
    t = pd.read_csv(pd.io.common.StringIO(p.stdout))
    wide = r1.pivot(index="user", columns="model", values="rank")
    fits = [plan(wide[m].to_numpy(), N - H, n, metrics="recall@10", max_size=N - H,
                 designs=candidate_designs(N - H, n)[:1]).prior for m in wide.columns]
    ladders = t[t.kind == "ladder"].drop_duplicates("design")
    assert len(ladders) > 3
    for _, row in ladders.iterrows():
        design = Design("ladder", n, n_max=int(row.design.split("-> ")[1].split()[0]))
        assert design.describe() == row.design
        assert row.cost_all_models == pytest.approx(shared_cost(design, fits, wide.to_numpy()), rel=1e-9)
    gap = t.groupby("design").agg(one=("cost", "max"), union=("cost_all_models", "first"))
    name = (gap.union - gap.one).idxmax()
    cap = (gap.one[name] + gap.union[name]) / 2 / (N - H)
    p = run("plan", "ranks1.csv", "--metric", "recall@10", "--format", "csv", "--max-cost", cap, cwd=d)
    t2 = pd.read_csv(pd.io.common.StringIO(p.stdout))
    assert not t2[t2.design == name].within_budget.any()
    assert (t2.within_budget == (t2.cost_all_models / (N - H) <= cap)).all()


def test_plan_of_several_models_from_counts_takes_them_as_independent(run, world):
    """A counts pilot does not pair the models' ranks user by user (its rows are ranks, not users): the
    union is priced with the models independent (shared_cost without a pilot), and the legend says so; a
    ranks pilot says the dependence came from its first stage. (A counts pilot with -N was refused before:
    "-N does not apply", since the N filled into the counts read as the table's own n_items column.)"""
    from sampling_lib.design import Design, candidate_designs, plan, shared_cost
    d = world
    r1 = stage_one(run, d)
    counts = r1.groupby(["model", "rank"]).size().rename("count").reset_index()
    counts.assign(sample_size=n).to_csv(d / "counts1.csv", index=False)
    p = run("plan", "counts1.csv", "--metric", "recall@10", "-N", N - H, "--format", "csv", cwd=d)
    assert p.returncode == 0, p.stderr
    t = pd.read_csv(pd.io.common.StringIO(p.stdout))
    fits = [plan(np.repeat(g["rank"].to_numpy(), g["count"].to_numpy()), N - H, n, metrics="recall@10",
                 designs=candidate_designs(N - H, n)[:1]).prior for _, g in counts.groupby("model")]
    row = t[t.kind == "ladder"].iloc[0]
    design = Design("ladder", n, n_max=int(row.design.split("-> ")[1].split()[0]))
    assert row.cost_all_models == pytest.approx(shared_cost(design, fits, None), rel=1e-9)
    p = run("plan", "counts1.csv", "--metric", "recall@10", "-N", N - H, cwd=d)
    assert "taken as independent" in " ".join(p.stdout.split())
    p = run("plan", "ranks1.csv", "--metric", "recall@10", cwd=d)
    assert "dependence from the pilot's first stage" in " ".join(p.stdout.split())


@pytest.mark.slow
def test_plan_says_when_a_half_width_target_lies_below_full_rankings_own(run, tmp_path):
    """A half-width target below what full ranking of the same users gives: no design of the items meets it,
    whatever the budget; the note says so with full ranking's predicted half-width and the users that would
    reach it (the half-width shrinks as 1/sqrt(M)). Before, it said only 'no candidate design meets the target',
    and with --max-cost blamed the budget."""
    base = ("plan", "-N", 4000, "-n", 20, "--users", 2000, "--guess-recall", 0.3, "--metric", "recall@10")
    for extra in ((), ("--max-cost", 0.05)):
        p = run(*base, "--target-halfwidth", 0.001, *extra, "--format", "csv", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        full = float(pd.read_csv(pd.io.common.StringIO(p.stdout)).full_halfwidth.max())
        note = " ".join(p.stderr.split())
        assert f"full ranking of these 2,000 users would itself give ±{full:.4g} for recall@10" in note, note
        assert f"about {int(np.ceil(2000 * (full / 0.001) ** 2)):,} users ranked in full would reach it" in note
    p = run(*base, "--target-halfwidth", 0.05, "--format", "csv", cwd=tmp_path)
    assert p.returncode == 0 and "would itself give" not in p.stderr
    assert float(pd.read_csv(pd.io.common.StringIO(p.stdout)).full_halfwidth.max()) < 0.05


def test_distinct_negatives_read_with_replacement_are_flagged(run, world):
    """Stage files of distinct negatives (negatives' default) estimated with the default --scheme binomial: a
    warning says that no set repeats an item, improbable with replacement, and names --scheme
    hypergeometric (before: silently the binomial kernel, which is not exact where n_u is a sizeable share of
    N_u). None with --scheme hypergeometric, and none for sets with a repeated negative, unless --duplicates
    collapse makes them distinct."""
    d = world
    stage_one(run, d)
    common = ["s1.csv", "--input-format", "negatives", "--held-out", "users.csv", "--scores", "sc1.csv", "-N", N,
              "--quiet", "--n-boot", 20]
    p = run("estimate", *common, cwd=d)
    assert p.returncode == 0, p.stderr
    assert "no user's negatives repeat an item" in p.stderr and "give --scheme hypergeometric" in p.stderr
    p = run("estimate", *common, "--scheme", "hypergeometric", cwd=d)
    assert p.returncode == 0 and "repeat an item" not in p.stderr, p.stderr
    s1 = pd.read_csv(d / "s1.csv", dtype={"user": str})
    pd.concat([s1, s1.head(1)]).to_csv(d / "s1r.csv", index=False)          # one negative drawn twice
    p = run("estimate", "s1r.csv", *common[1:], cwd=d)
    assert p.returncode == 0 and "repeat an item" not in p.stderr, p.stderr
    # collapsed repeats are distinct by construction: the hypergeometric kernel is the exact one
    p = run("estimate", "s1r.csv", *common[1:], "--duplicates", "collapse", cwd=d)
    assert p.returncode == 0 and "the exact kernel is --scheme hypergeometric" in " ".join(p.stderr.split())
    p = run("estimate", "s1r.csv", *common[1:], "--duplicates", "collapse", "--scheme", "hypergeometric", cwd=d)
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr


def test_ranks_records_the_scheme_and_estimate_follows_it(run, world):
    """``ranks --scheme hypergeometric`` writes a scheme column; estimate, compare and plan read the ranks with
    that kernel without being told again (before: the table carried no scheme, so estimating it without
    --scheme silently used the binomial kernel on distinct negatives). A --scheme that contradicts the column
    is an error; without --scheme, ranks writes no column (the default is not a statement)."""
    d = world
    stage_one(run, d)
    inputs = ["s1.csv", "--input-format", "negatives", "--held-out", "users.csv", "--scores", "sc1.csv", "-N", N]
    est = ["--quiet", "--n-boot", 30, "--format", "csv"]
    p = run("ranks", *inputs, "--scheme", "hypergeometric", "-o", "r.csv", cwd=d)
    assert p.returncode == 0, p.stderr
    r = pd.read_csv(d / "r.csv")
    assert set(r.scheme) == {"hypergeometric"}
    hyper = run("estimate", *inputs, "--scheme", "hypergeometric", *est, cwd=d)
    binom = run("estimate", *inputs, "--scheme", "binomial", *est, cwd=d)
    from_table = run("estimate", "r.csv", *est, cwd=d)
    assert hyper.returncode == binom.returncode == from_table.returncode == 0, from_table.stderr
    table = pd.read_csv(pd.io.common.StringIO(from_table.stdout))
    assert table.equals(pd.read_csv(pd.io.common.StringIO(hyper.stdout)))
    assert not table.estimate.equals(pd.read_csv(pd.io.common.StringIO(binom.stdout)).estimate)
    # the tables say which kernel made them: a scheme column, and the compact view's header
    assert set(table.scheme) == {"hypergeometric"}
    assert set(pd.read_csv(pd.io.common.StringIO(binom.stdout)).scheme) == {"binomial"}
    view = run("estimate", "r.csv", "--quiet", "--n-boot", 30, cwd=d)
    assert view.returncode == 0 and "distinct negatives (hypergeometric kernel)" in \
        " ".join(view.stdout.split("\n\n")[0].split())
    assert "hypergeometric" not in run("estimate", *inputs, "--quiet", "--n-boot", 30, cwd=d).stdout
    for cmd in (("estimate", "r.csv", *est), ("compare", "r.csv", *est), ("plan", "r.csv", "--format", "csv")):
        p = run(*cmd, "--scheme", "binomial", cwd=d)
        assert p.returncode != 0
        assert "--scheme binomial contradicts r.csv: its scheme column says hypergeometric" in " ".join(
            p.stderr.split()), p.stderr
    # ranks of the ranks keep the record; ranks without --scheme state nothing
    p = run("ranks", "r.csv", "-o", "r2.csv", cwd=d)
    assert p.returncode == 0 and set(pd.read_csv(d / "r2.csv").scheme) == {"hypergeometric"}, p.stderr
    p = run("ranks", *inputs, "-o", "r3.csv", cwd=d)
    assert "scheme" not in pd.read_csv(d / "r3.csv").columns
    # the next stage draws as the ranks say the first did
    stage2 = ("negatives", "--stage", 2, "--previous", "s1.csv", "--users", "users.csv", "--ranks", "r.csv",
              "--threshold", 1, "--n2", 40, "-N", N, "--seed", 0, "--exclude", "train.csv", "-o", "s2.csv")
    p = run(*stage2, "--replace", cwd=d)
    assert p.returncode != 0 and "r.csv: its scheme column says hypergeometric, but this stage draws with " \
        "replacement" in " ".join(p.stderr.split()) and not (d / "s2.csv").exists(), p.stderr
    assert run(*stage2, cwd=d).returncode == 0
        # the Python reader and estimate: the same rules
    sr = io.ranks_from_table(d / "r.csv")
    assert sr.scheme == "hypergeometric"
    a = estimate(sr, metrics="recall@10", n_boot=20, rng=0)
    b = estimate(sr, metrics="recall@10", n_boot=20, rng=0, scheme="hypergeometric")
    c = estimate(io.ranks_from_table(d / "r3.csv"), N, metrics="recall@10", n_boot=20, rng=0)
    assert a.equals(b) and not a.estimate.equals(c.estimate)
    with pytest.raises(ValueError, match="scheme='binomial' contradicts the ranks' own record"):
        estimate(sr, metrics="recall@10", n_boot=20, rng=0, scheme="binomial")
    # a scheme column must hold one of the two schemes, the same on every row
    for bad, msg in ((["binomial"] + ["hypergeometric"] * (len(r) - 1), "must hold one scheme for the whole table"),
                     (["with replacement"] * len(r), "must hold binomial or hypergeometric; got 'with replacement'")):
        r.assign(scheme=bad).to_csv(d / "bad.csv", index=False)
        p = run("estimate", "bad.csv", *est, cwd=d)
        assert p.returncode != 0 and msg in " ".join(p.stderr.split()) and "bad.csv" in p.stderr, p.stderr
