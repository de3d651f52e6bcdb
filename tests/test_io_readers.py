"""Readers of the files evaluation frameworks write (issue 14 item 3), on small files.

Every reader: its output is checked against a direct computation, and a bad
file gives one ValueError line naming the file (and the line of a text file).
"""
import io as _io
import json
import re

import numpy as np
import pandas as pd
import pytest

from sampling_lib import io
from sampling_lib.cli import main
from sampling_lib.correct import estimate
from sampling_lib.ranking import ranks_from_scores
from sampling_lib.sampling import sample_negatives


def one_line(exc):
    msg = str(exc.value)
    assert "\n" not in msg, msg
    return msg


# --- a small sampled evaluation, written in every format ----------------------
M, NEG = 12, 6


@pytest.fixture(scope="module")
def ev(tmp_path_factory):
    """Users u0..u11, held-out item h<u>, 6 negatives each (u3 draws one twice), 2 models."""
    d = tmp_path_factory.mktemp("readers")
    rng = np.random.default_rng(3)
    users = [f"u{i}" for i in range(M)]
    held = {u: f"h{i}" for i, u in enumerate(users)}
    negs = {u: [f"i{j}" for j in rng.choice(40, NEG, replace=False)] for u in users}
    negs["u3"][1] = negs["u3"][0]                                   # a duplicate draw
    scores = {}
    for m in ("A", "B"):
        for u in users:
            for it in [held[u]] + negs[u]:
                scores[(m, u, it)] = float(rng.choice([0.1, 0.2, 0.5, 0.7, 0.9]))
    # expected ranks, counting every draw, ties pessimistic
    exp = {}
    for m in ("A", "B"):
        pos = np.array([scores[(m, u, held[u])] for u in users])
        neg = np.array([[scores[(m, u, it)] for it in negs[u]] for u in users])
        exp[m] = ranks_from_scores(pos, neg)[0]
    # TREC runs (one per model) and qrels; the run ranks the distinct candidates
    for m in ("A", "B"):
        lines = []
        for u in users:
            cand = list(dict.fromkeys([held[u]] + negs[u]))
            for k, it in enumerate(sorted(cand, key=lambda x: -scores[(m, u, x)])):
                lines.append(f"{u} Q0 {it} {k + 1} {scores[(m, u, it)]} model{m}")
        (d / f"{m}.trec").write_text("\n".join(lines) + "\n")
        run = {u: {it: scores[(m, u, it)] for it in [held[u]] + negs[u]} for u in users}
        (d / f"model{m}.json").write_text(json.dumps(run))
    (d / "qrels.txt").write_text("".join(f"{u} 0 {held[u]} 1\n" for u in users)
                                 + "u0 0 i999 0\n")               # a judged non-relevant item
    (d / "qrels.json").write_text(json.dumps({u: {held[u]: 1} for u in users}))
    # NCF and Elliot negatives files, the project's own negatives file
    (d / "x.test.negative").write_text(
        "".join(f"({u},{held[u]})\t" + "\t".join(negs[u]) + "\n" for u in users))
    (d / "elliot.tsv").write_text("".join(f"({u},)\t" + "\t".join(negs[u]) + "\n" for u in users))
    pd.DataFrame([(u, it) for u in users for it in negs[u]], columns=["user", "item"]).to_csv(
        d / "neg.csv", index=False)
    pd.DataFrame({"user": users, "item": [held[u] for u in users]}).to_csv(d / "held.csv", index=False)
    pd.DataFrame([(m, u, it, s) for (m, u, it), s in scores.items()],
                 columns=["model", "user", "item", "score"]).to_csv(d / "scores.csv", index=False)
    return dict(dir=d, users=users, held=held, negs=negs, scores=scores, exp=exp)


def distinct_ranks(ev, m):
    out = []
    for u in ev["users"]:
        s = ev["scores"]
        pos = s[(m, u, ev["held"][u])]
        d = set(ev["negs"][u])
        out.append(1 + sum(s[(m, u, it)] >= pos for it in d))
    return np.array(out)


# --- TREC ---------------------------------------------------------------------
def test_trec_sampled_ranks_equal_direct_computation(ev):
    d = ev["dir"]
    t = io.ranks_from_run([d / "A.trec", d / "B.trec"], d / "qrels.txt")
    assert list(t.columns) == ["user", "model", "rank", "sample_size"]
    assert t.model.unique().tolist() == ["modelA", "modelB"]
    for m in ("A", "B"):
        g = t[t.model == f"model{m}"]
        assert g.user.tolist() == ev["users"]
        assert (g["rank"].to_numpy() == distinct_ranks(ev, m)).all()   # a run lists distinct items
        assert g.sample_size.tolist() == [1 + len(set(ev["negs"][u])) for u in ev["users"]]
    opt = io.ranks_from_run(d / "A.trec", d / "qrels.txt", ties="optimistic")
    assert (opt["rank"].to_numpy() <= t[t.model == "modelA"]["rank"].to_numpy()).all()


def test_trec_full_ranking_gives_global_ranks_and_n_items(tmp_path):
    (tmp_path / "run").write_text("".join(f"u1 Q0 d{k} {k} {10 - k} r\n" for k in range(1, 8))
                                  + "".join(f"u2 Q0 d{k} {k} {10 - k} r\n" for k in range(1, 5)))
    (tmp_path / "qrels").write_text("u1 0 d6 1\nu2 0 d1 2\n")
    t = io.ranks_from_run(tmp_path / "run", tmp_path / "qrels", candidates="full")
    assert t.to_dict("list") == {"user": ["u1", "u2"], "model": ["r", "r"], "rank": [6, 1],
                                 "n_items": [7, 4]}
    (tmp_path / "qrels2").write_text("u1 0 d9 1\n")              # not in the (truncated) list
    left_out = pytest.warns(UserWarning, match=r"run 'r' \(.*run\) lists 1 user\(s\) without a relevant "
                                               r"item in the qrels, e.g. 'u2': left out")
    with pytest.raises(ValueError, match="truncated ranking is not a full one") as e, left_out:
        io.ranks_from_run(tmp_path / "run", tmp_path / "qrels2", candidates="full")
    one_line(e)
    with pytest.raises(ValueError, match="sample set must contain it"), pytest.warns(UserWarning):
        io.ranks_from_run(tmp_path / "run", tmp_path / "qrels2")
    with pytest.raises(ValueError, match="candidates must be one of"):
        io.ranks_from_run(tmp_path / "run", tmp_path / "qrels", candidates="global")


@pytest.mark.parametrize("text, what, match", [
    ("u1 Q0 d1 1 0.5\n", "run", "line 1: a TREC run line has 6 fields"),
    ("u1 Q0 d1 1 0.5 r\nu1 Q0 d2 2 high r\n", "run", "line 2: the score (field 5) must be a number"),
    ("u1 Q0 d1 1 0.5 r\n\nu1 Q0 d1 2 0.4 r\n", "run", "line 3: document 'd1' of query 'u1' is listed twice (also line 1)"),
    ("u1 Q0 d1 1 nan r\n", "run", "line 1: the score (field 5) must be finite"),
    ("u1 0 d1\n", "qrels", "line 1: a TREC qrels line has 4 fields"),
    ("u1 0 d1 1\nu2 0 d2 yes\n", "qrels", "line 2: relevance (field 4) must be an integer"),
])
def test_trec_bad_file_one_line_naming_file_and_line(tmp_path, text, what, match):
    p = tmp_path / f"bad.{what}"
    p.write_text(text)
    reader = io.read_trec_run if what == "run" else io.read_trec_qrels
    with pytest.raises(ValueError, match=re.escape(match)) as e:
        reader(p)
    assert one_line(e).startswith(str(p))


def test_trec_empty_missing_and_qrels_errors(tmp_path, ev):
    (tmp_path / "empty").write_text("\n\n")
    with pytest.raises(ValueError, match="run file is empty"):
        io.read_trec_run(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="run file not found"):
        io.read_trec_run(tmp_path / "nope")
    (tmp_path / "q2").write_text("u0 0 a 1\nu0 0 b 1\n")
    with pytest.raises(ValueError, match="exactly one relevant item .* user 'u0' has 2"):
        io.ranks_from_run(ev["dir"] / "A.trec", tmp_path / "q2")
    (tmp_path / "q3").write_text("u0 0 h0 1\nzz 0 a 1\n")
    with pytest.raises(ValueError, match="no list for user 'zz'"), pytest.warns(UserWarning, match="11 user"):
        io.ranks_from_run(ev["dir"] / "A.trec", tmp_path / "q3")
    (tmp_path / "q4").write_text("u0 0 h0 0\n")
    with pytest.raises(ValueError, match="no relevant item"):
        io.ranks_from_run(ev["dir"] / "A.trec", tmp_path / "q4")


# --- ranx -----------------------------------------------------------------------
def test_ranx_json_equals_trec(ev):
    d = ev["dir"]
    t = io.ranks_from_run([d / "modelA.json", d / "modelB.json"], d / "qrels.json")
    ref = io.ranks_from_run([d / "A.trec", d / "B.trec"], d / "qrels.txt")
    pd.testing.assert_frame_equal(t, ref)                    # same names: the file stems


def test_ranx_objects_and_dicts(ev):
    class FakeRun:                                           # what ranx.Run offers
        name = "bpr"

        def to_dict(self):
            return {"u1": {"a": 0.3, "b": 0.9, "c": 0.3}}

    class FakeQrels:
        def to_dict(self):
            return {"u1": {"a": 1}}

    t = io.ranks_from_run(FakeRun(), FakeQrels())
    assert t.to_dict("list") == {"user": ["u1"], "model": ["bpr"], "rank": [3], "sample_size": [3]}
    t = io.ranks_from_run({"u1": {"a": 0.3, "b": 0.9}}, {"u1": {"a": 1}}, name="x")
    assert t.model.tolist() == ["x"] and t["rank"].tolist() == [2]


@pytest.mark.parametrize("text, match", [
    ('{"u1": {"a": 0.5,}}', "line 1: not valid JSON"),
    ('["u1"]', "must map query ids"),
    ('{"u1": [0.5]}', "query 'u1' must map doc ids"),
    ('{"u1": {"a": "high"}}', "query 'u1', doc 'a': the score must be a finite number"),
])
def test_ranx_bad_json_one_line(tmp_path, text, match):
    p = tmp_path / "run.json"
    p.write_text(text)
    with pytest.raises(ValueError, match=match) as e:
        io.read_ranx_json(p)
    assert str(p) in one_line(e)


# --- NCF, Elliot and the project's negatives + scores ---------------------------------
def test_ncf_negatives_with_scores_file_and_function(ev):
    d = ev["dir"]
    cand = io.read_ncf_negatives(d / "x.test.negative")
    assert len(cand) == M * (1 + NEG) and cand.label.sum() == M
    s = io.ranks_from_negatives(cand, d / "scores.csv")
    for m in ("A", "B"):
        r, n = s.for_model(m)
        assert (r == ev["exp"][m]).all() and (n == 1 + NEG).all()       # duplicates counted
        r, n = io.ranks_from_negatives(cand, d / "scores.csv", duplicates="collapse").for_model(m)
        assert (r == distinct_ranks(ev, m)).all()
        assert n.tolist() == [1 + len(set(ev["negs"][u])) for u in ev["users"]]
    f = lambda users, items: [ev["scores"][("B", u, i)] for u, i in zip(users, items)]  # noqa: E731
    r, _ = io.ranks_from_negatives(cand, f).for_model("model")
    assert (r == ev["exp"]["B"]).all()


def test_elliot_and_own_negatives_give_the_same_ranks(ev):
    d = ev["dir"]
    ref = io.ranks_from_negatives(io.read_ncf_negatives(d / "x.test.negative"), d / "scores.csv")
    el = io.ranks_from_negatives(io.read_elliot_negatives(d / "elliot.tsv", held_out=d / "held.csv"),
                                 d / "scores.csv")
    own = io.ranks_from_negatives(io.read_negatives(d / "neg.csv", d / "held.csv"), d / "scores.csv")
    for s in (el, own):
        pd.testing.assert_frame_equal(s.ranks, ref.ranks)
        pd.testing.assert_frame_equal(s.sample_sizes, ref.sample_sizes)


def test_own_negatives_file_round_trip(tmp_path):
    users = pd.DataFrame({"user": ["a", "b", "c"], "item": [3, 7, 0]})
    neg = sample_negatives(users.user, N=30, n=5, held_out=users["item"], rng=1)
    neg.to_csv(tmp_path / "neg.csv", index=False)
    cand = io.read_negatives(tmp_path / "neg.csv", users)
    s = io.ranks_from_negatives(cand, lambda u, i: -np.asarray(i, dtype=float))  # lower id = better
    r, n = s.for_model("model")
    exp = [1 + (neg[neg.user == u]["item"] < it).sum() for u, it in zip(users.user, users["item"])]
    assert r.tolist() == exp and n.tolist() == [5, 5, 5]


@pytest.mark.parametrize("text, match", [
    ("(0,25)\t3\t7\n(1,133)\n", "line 2: user '1' has no negative items"),
    ("(0,25)\t3\n(0,26)\t4\n", "line 2: user '0' is listed twice (also line 1)"),
    ("(0,25,7)\t3\n", "line 1: the first field must be"),
    ("0,25\t3\n", "line 1: the first field must be"),
    ("(0,)\t3\t4\n", "line 1: an NCF negatives line starts with '(user,item)'"),
])
def test_ncf_bad_file_one_line(tmp_path, text, match):
    p = tmp_path / "x.test.negative"
    p.write_text(text)
    with pytest.raises(ValueError, match=re.escape(match)) as e:
        io.read_ncf_negatives(p)
    assert one_line(e).startswith(str(p))


def test_negatives_errors(tmp_path, ev):
    d = ev["dir"]
    with pytest.raises(ValueError, match=r"does not name the held-out items .* held_out="):
        io.read_elliot_negatives(d / "elliot.tsv")
    (tmp_path / "held.csv").write_text("user,item\nu0,h0\n")
    with pytest.raises(ValueError, match=r"user 'u1' of .* has no held-out item"):
        io.read_elliot_negatives(d / "elliot.tsv", held_out=tmp_path / "held.csv")
    (tmp_path / "held2.csv").write_text("user,item\nu0,h0\nu0,h1\n")
    with pytest.raises(ValueError, match="one item per user"):
        io.read_negatives(d / "neg.csv", tmp_path / "held2.csv")
    cand = io.read_ncf_negatives(d / "x.test.negative")
    (tmp_path / "s.csv").write_text("user,item,score\nu0,h0,0.5\n")
    with pytest.raises(ValueError, match=r"no score of model 'model' for user 'u0', item '.*' "
                                         r"\(.*x.test.negative, line 1\) \(82 candidate"):
        io.ranks_from_negatives(cand, tmp_path / "s.csv")
    (tmp_path / "s2.csv").write_text("user,item,score\nu0,h0,abc\n")
    with pytest.raises(ValueError, match="finite numbers; got 'abc' in .*s2.csv, line 2"):
        io.ranks_from_negatives(cand, tmp_path / "s2.csv")
    with pytest.raises(ValueError, match="duplicates must be one of"):
        io.ranks_from_negatives(cand, tmp_path / "s.csv", duplicates="drop")
    with pytest.raises(ValueError, match="one score per"):
        io.ranks_from_negatives(cand, lambda u, i: [0.0])


# --- the command line -------------------------------------------------------------
def run_cli(argv, capsys):
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_reads_trec_ranx_and_negatives_files(ev, capsys, monkeypatch):
    monkeypatch.chdir(ev["dir"])
    common = ["-N", 200, "--metric", "recall@10", "--n-boot", 20, "--format", "csv"]
    tables = {}
    for name, argv in {
        "trec": ["A.trec", "B.trec", "--qrels", "qrels.txt"],
        "ranx": ["modelA.json", "modelB.json", "--qrels", "qrels.json"],
        "ncf": ["x.test.negative", "--input-format", "ncf", "--scores", "scores.csv",
                "--duplicates", "collapse"],
        "elliot": ["elliot.tsv", "--input-format", "elliot", "--scores", "scores.csv",
                   "--held-out", "held.csv", "--duplicates", "collapse"],
        "negatives": ["neg.csv", "--input-format", "negatives", "--scores", "scores.csv",
                      "--held-out", "held.csv", "--duplicates", "collapse"],
    }.items():
        rc, out, err = run_cli(["estimate", *argv, *common], capsys)
        assert rc == 0, err
        t = pd.read_csv(_io.StringIO(out))
        tables[name] = t.assign(model=t.model.str.replace("model", ""))
    for name in ("ranx", "ncf", "elliot", "negatives"):
        pd.testing.assert_frame_equal(tables[name], tables["trec"], check_dtype=False)
    # and they equal the library on the distinct-candidate ranks
    r = distinct_ranks(ev, "A")
    n = np.array([1 + len(set(ev["negs"][u])) for u in ev["users"]])
    lib = estimate(r, 200, metrics="recall@10", sample_sizes=n, n_boot=20, rng=0)
    assert tables["trec"].query("model == 'A'").estimate.iloc[0] == pytest.approx(lib.estimate[0])


@pytest.mark.parametrize("argv, match", [
    (["A.trec", "--qrels", "nope.txt"], "qrels file not found"),
    (["x.test.negative", "--input-format", "ncf"], "--input-format ncf needs --scores"),
    (["neg.csv", "--input-format", "negatives", "--scores", "scores.csv"], "needs --held-out"),
    (["A.trec", "--input-format", "table", "--qrels", "qrels.txt"], "--qrels is not used"),
    (["A.trec", "B.trec"], "--input-format table reads one file"),
    (["held.csv", "--input-format", "trec", "--qrels", "qrels.txt"], "held.csv, line 1: a TREC run line has 6 fields"),
])
def test_cli_reader_errors_are_one_line(ev, capsys, monkeypatch, argv, match):
    monkeypatch.chdir(ev["dir"])
    rc, _, err = run_cli(["estimate", *argv, "-N", 200, "--n-boot", 5], capsys)
    lines = err.strip().splitlines()
    assert rc == 1 and len(lines) == 1 and lines[0].startswith("sampling-lib: error:"), err
    assert match in lines[0], lines[0]


# --- progress on a terminal (issue 14 item 4) -----------------------------------------
class _Terminal(_io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("cmd", ["estimate", "compare"])
def test_progress_bar_on_a_terminal_and_quiet(ev, monkeypatch, cmd):
    monkeypatch.chdir(ev["dir"])
    argv = [cmd, "A.trec", "B.trec", "--qrels", "qrels.txt", "-N", 200, "--n-boot", 100]
    for quiet, want in ((False, True), (True, False)):
        term = _Terminal()
        monkeypatch.setattr("sys.stderr", term)
        monkeypatch.setattr("sys.stdout", _io.StringIO())
        assert main([str(a) for a in argv] + (["--quiet"] if quiet else [])) == 0
        shown = "bootstrap" in term.getvalue() and "/100 [" in term.getvalue()
        assert shown == want, term.getvalue()
    term = _io.StringIO()                                        # not a terminal: no bar
    monkeypatch.setattr("sys.stderr", term)
    assert main([str(a) for a in argv]) == 0
    assert "bootstrap" not in term.getvalue() and "it/s" not in term.getvalue()


@pytest.mark.parametrize("kind", ["int", "float", "text", "spaced", "mixed", "string_series", "with_nan"])
def test_id_text_of_a_long_repeated_column_is_its_elementwise_text(kind):
    """Long columns are factorized before their ids become text (memory: one string per distinct id); the
    texts are those of the ids one by one, and missing values keep the elementwise path."""
    from sampling_lib.io import id_text
    g = np.random.default_rng(0)
    base = {"int": g.integers(0, 300, 5_000), "float": g.choice([1.0, 2.0, 2.5, 1e20], 5_000),
            "text": g.choice(["a", "01", "1", "1.0"], 5_000).astype(object),
            "spaced": g.choice([" a", "a ", "b"], 5_000).astype(object),
            "mixed": np.array([1, "1", 2.0, " x"] * 1_250, dtype=object),
            "string_series": pd.Series(g.choice(["u1", "u2", " u3"], 5_000), dtype="str"),
            "with_nan": np.array(["a", np.nan, "b", "a"] * 1_250, dtype=object)}[kind]
    got = id_text(base)
    values = base.tolist() if not isinstance(base, pd.Series) else base.to_list()
    one = {}                                    # each distinct id's text on its own (by type and value)
    for v in values:
        if (type(v), v) not in one:
            one[(type(v), v)] = id_text([v])[0]
    assert got.dtype == object and list(got) == [one[(type(v), v)] for v in values]
