"""A stage's file counted once, and distinct negatives distinct, under every scheme.

``ranks s1.csv s1.csv --scores sc1.csv --scores sc1.csv`` under the binomial scheme read the first stage twice:
every rank about doubled (15 -> 29) and the sample size went from 20 to 39, without a word (hypergeometric
refused it only because the second copy repeated the first's negatives). Under ``--scheme hypergeometric`` a
single stage that lists a negative twice was accepted and the repeat counted twice (n = 21 instead of 20, and a
rank moved by one), though the multi-stage path refused the same repeat in a later stage.
"""
import numpy as np
import pandas as pd
import pytest

from sampling_lib import io
from sampling_lib.cli import main

N, n, M = 500, 20, 30


@pytest.fixture
def stage1(tmp_path):
    g = np.random.default_rng(3)
    users = [f"u{i}" for i in range(M)]
    held = g.choice(N, M, replace=False)
    rows, scores = [], []
    for u, h in zip(users, held):
        negs = g.choice(np.setdiff1d(np.arange(N), [h]), n - 1, replace=False)
        rows += [(u, int(i)) for i in negs]
        scores += [(u, int(i), float(s)) for i, s in zip([h, *negs], g.random(n))]
    pd.DataFrame({"user": users, "item": held}).to_csv(tmp_path / "users.csv", index=False)
    pd.DataFrame(rows, columns=["user", "item"]).to_csv(tmp_path / "s1.csv", index=False)
    sc = pd.DataFrame(scores, columns=["user", "item", "score"])
    sc.to_csv(tmp_path / "sc1.csv", index=False)
    # the pessimistic rank of each held-out item, computed here from the scores (not by the library)
    truth = {u: 1 + int((g_["score"] >= g_["score"].iloc[0]).sum() - 1) for u, g_ in sc.groupby("user", sort=False)}
    return tmp_path, truth


def _ranks(capsys, d, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err.strip().splitlines()


def _table(out):
    import io as _io

    return pd.read_csv(_io.StringIO(out)).set_index("user")


@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
def test_a_stage_file_given_twice_is_refused_under_any_scheme(stage1, capsys, monkeypatch, scheme):
    d, truth = stage1
    monkeypatch.chdir(d)
    common = ["--input-format", "negatives", "--held-out", "users.csv", "-N", N, "--scheme", scheme]
    rc, out, err = _ranks(capsys, d, "ranks", "s1.csv", "--scores", "sc1.csv", *common)
    assert rc == 0, err
    t = _table(out)
    assert (t["sample_size"] == n).all() and t["rank"].to_dict() == truth
    rc, out, err = _ranks(capsys, d, "ranks", "s1.csv", "s1.csv", "--scores", "sc1.csv", "--scores", "sc1.csv",
                          *common)
    assert rc == 1 and out == "" and len(err) == 1 and "s1.csv (stage 2) is given twice (stage 1)" in err[0], err
    (d / "copy.csv").write_bytes((d / "s1.csv").read_bytes())
    rc, out, err = _ranks(capsys, d, "estimate", "s1.csv", "copy.csv", "--scores", "sc1.csv", *common, "-q")
    assert rc == 1 and "copy.csv (stage 2) holds the same negatives as s1.csv (stage 1)" in err[0], err


def test_a_scores_file_given_twice_is_refused(stage1, capsys, monkeypatch):
    d, _ = stage1
    monkeypatch.chdir(d)
    rc, out, err = _ranks(capsys, d, "ranks", "s1.csv", "--input-format", "negatives", "--held-out", "users.csv",
                          "--scores", "sc1.csv", "--scores", "./sc1.csv", "-N", N)
    assert rc == 1 and len(err) == 1 and "the scores file ./sc1.csv is given twice" in err[0], err


def test_read_stages_refuses_one_input_twice(stage1):
    d, _ = stage1
    with pytest.raises(ValueError, match=r"\(stage 2\) is given twice \(stage 1\)"):
        io.read_stages([d / "s1.csv", d / "s1.csv"], held_out=d / "users.csv", scheme="binomial")
    t = pd.read_csv(d / "s1.csv")
    with pytest.raises(ValueError, match="holds the same negatives as the stage-1 negatives table"):
        io.read_stages([t, t.copy()], held_out=d / "users.csv", scheme="binomial")


def test_a_repeated_negative_of_a_single_stage_is_refused_without_replacement(stage1, capsys, monkeypatch):
    d, truth = stage1
    monkeypatch.chdir(d)
    s1 = pd.read_csv(d / "s1.csv")
    u0 = s1.user.iloc[0]
    sc = pd.read_csv(d / "sc1.csv")
    held = sc[sc.user == u0].iloc[0]
    above = sc[(sc.user == u0) & (sc.score > held.score)].item
    below = sc[(sc.user == u0) & (sc.score < held.score)].item
    # repeat a negative scored above the held-out item: counted twice its rank would be one more
    rep = int(above.iloc[0]) if len(above) else int(below.iloc[0])
    dup = pd.concat([s1.iloc[:1], pd.DataFrame({"user": [u0], "item": [rep]}), s1.iloc[1:]], ignore_index=True)
    dup.to_csv(d / "dup.csv", index=False)
    common = ["--input-format", "negatives", "--held-out", "users.csv", "--scores", "sc1.csv", "-N", N]
    rc, out, err = _ranks(capsys, d, "ranks", "dup.csv", *common, "--scheme", "hypergeometric")
    line = 2 + int(np.flatnonzero((dup.user == u0).to_numpy() & (dup.item == rep).to_numpy())[1])
    assert rc == 1 and out == "" and len(err) == 1, err
    assert f"dup.csv, line {line}: negative '{rep}' of user '{u0}' is listed twice" in err[0], err
    assert "--duplicates collapse" in err[0] and "--scheme binomial" in err[0]
    # kept once: the rank and size of the file without the repeat
    rc, out, err = _ranks(capsys, d, "ranks", "dup.csv", *common, "--scheme", "hypergeometric", "--duplicates",
                          "collapse")
    assert rc == 0, err
    t = _table(out)
    assert t["rank"].to_dict() == truth and (t["sample_size"] == n).all()
    # drawn with replacement: every draw counts (the binomial kernel's n_u)
    rc, out, err = _ranks(capsys, d, "ranks", "dup.csv", *common, "--scheme", "binomial")
    assert rc == 0, err
    t = _table(out)
    assert t.loc[u0, "sample_size"] == n + 1 and t.loc[u0, "rank"] == truth[u0] + (1 if len(above) else 0)


def test_a_repeated_negative_of_an_ncf_file_is_refused_without_replacement(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dup.test.negative").write_text("(a,7)\t1\t2\t2\t3\n(b,8)\t4\t5\t6\t9\n")
    pd.DataFrame({"user": list("aaaabbbbb"), "item": [7, 1, 2, 3, 8, 4, 5, 6, 9],
                  "score": [0.5, 0.6, 0.7, 0.1, 0.5, 0.1, 0.2, 0.3, 0.4]}).to_csv("sc.csv", index=False)
    rc, out, err = _ranks(capsys, tmp_path, "estimate", "dup.test.negative", "--input-format", "ncf", "--scores",
                          "sc.csv", "-N", 50, "--scheme", "hypergeometric", "-q", "--n-boot", 0)
    assert rc == 1 and len(err) == 1 and "dup.test.negative, line 1: negative '2' of user 'a' is listed twice" \
        in err[0], err
